#!/usr/bin/env bash
# Idempotent setup: .venv with Python 3.11, the project with every extra ([all]: pyserini, rerank, ray, onnx)
# plus the test tools ([test]); the test suite needs them all.
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
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip >&2
.venv/bin/python -m pip install -q -e ".[all,test]" >&2
echo "$want" > "$stamp"
echo "setup.sh: environment ready in .venv" >&2
