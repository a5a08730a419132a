#!/usr/bin/env bash
# Idempotent setup: .venv with Python 3.11, the project with every extra ([all]: pyserini, rerank, ray, onnx)
# plus the test tools ([test]); and .venv-rankllm with Python 3.12 and rank_llm 0.26.0, the listwise reranker's
# oracle. The test suite needs them all.
# Re-running it only installs what changed (pip sees satisfied pins and stops).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 "$HOME/.pyenv/versions/3.11.7/bin/python3.11" python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY=$c; break; fi
  done
fi
[ -n "$PY" ] || { echo "setup.sh: Python 3.11 not found (set PYTHON=...)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv with $("$PY" --version)" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.twostage-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >&2
  .venv/bin/python -m pip install -q -e ".[all,test]" >&2
  echo "$want" > "$stamp"
  echo "setup.sh: environment ready in .venv" >&2
fi

# castorini/rank_llm 0.26.0 itself, the listwise reranker's oracle (tests/support/rank_llm_oracle.py): its own
# Python 3.12 venv, .venv-rankllm, with rank-llm[openai] and its resolved dependencies pinned
# (scripts/rank_llm-constraints.txt). The tests that compare with it fail under CI when it is missing.
RPY=${RANK_LLM_PYTHON:-}
if [ -z "$RPY" ]; then
  for c in python3.12 "$HOME"/.pyenv/versions/3.12.*/bin/python3.12; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then RPY=$c; break; fi
  done
fi
[ -n "$RPY" ] || { echo "setup.sh: Python 3.12 (for rank_llm 0.26.0, the listwise oracle) not found (set RANK_LLM_PYTHON=...)" >&2; exit 1; }
if [ ! -x .venv-rankllm/bin/python ]; then
  echo "setup.sh: creating .venv-rankllm with $("$RPY" --version)" >&2
  "$RPY" -m venv .venv-rankllm
fi
rstamp=.venv-rankllm/.twostage-setup
rwant=$(cat scripts/rank_llm-constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$rstamp" ] || [ "$(cat "$rstamp")" != "$rwant" ]; then
  .venv-rankllm/bin/python -m pip install -q "rank-llm[openai]==0.26.0" -c scripts/rank_llm-constraints.txt >&2
  echo "$rwant" > "$rstamp"
  echo "setup.sh: rank_llm 0.26.0 ready in .venv-rankllm" >&2
fi
