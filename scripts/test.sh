#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh), lints (ruff check + ruff format --check: a finding fails
# the script before any test runs), then runs the whole test suite once, in a random order (pytest-randomly:
# modules shuffled, then the tests within each), so that a test that needs another to run first fails here.
# The seed is printed first; TWOSTAGE_TEST_SEED=N reruns that order. Extra arguments go to pytest, e.g.
# scripts/test.sh -k eval -x, or scripts/test.sh -p no:randomly for the files' own order. The 25 slowest tests are
# listed at the end (--durations=25).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "test.sh: ruff check and ruff format --check over toolkit/ tests/ scripts/" >&2
.venv/bin/ruff check toolkit tests scripts
.venv/bin/ruff format --check toolkit tests scripts
bash scripts/install_chromium.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/mypy  # the public API, as [tool.mypy] in pyproject.toml configures it
order=()
case " $* " in
*no:randomly*) echo "test.sh: tests in the files' own order (-p no:randomly)" >&2 ;;
*)
    seed="${TWOSTAGE_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}"
    echo "test.sh: tests in a random order, seed $seed (TWOSTAGE_TEST_SEED=$seed scripts/test.sh repeats it)" >&2
    order=(-p randomly --randomly-seed="$seed")
    ;;
esac
exec .venv/bin/python -m pytest --durations=25 "${order[@]}" "$@"  # the 25 slowest, to keep CI near 20 minutes
