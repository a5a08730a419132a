#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh), lints (ruff check + ruff format --check: a finding fails
# the script before any test runs), then runs the whole test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k eval -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "test.sh: ruff check and ruff format --check over toolkit/ tests/ scripts/" >&2
.venv/bin/ruff check toolkit tests scripts
.venv/bin/ruff format --check toolkit tests scripts
bash scripts/install_chromium.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/mypy  # the public API, as [tool.mypy] in pyproject.toml configures it
exec .venv/bin/python -m pytest "$@"
