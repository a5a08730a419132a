#!/usr/bin/env bash
# Renders the API reference from the docstrings with pdoc (Google style, warnings as errors) into site/api/
# (git-ignored), or into the folder given as the first argument. The guide itself is docs/*.md (start at
# docs/index.md); tests/project/test_build_docs.py runs this script.
#   bash scripts/build_docs.sh [OUT]      PYTHON=... picks the interpreter (default .venv/bin/python)
set -euo pipefail
OUT="$(realpath -m "${1:-$(dirname "$0")/../site/api}")"
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
# the checkout's toolkit first: an editable install elsewhere must not be the one rendered
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -W error -m pdoc -d google -o "$OUT" toolkit '!toolkit.[!a]*'
echo "$OUT/index.html"
