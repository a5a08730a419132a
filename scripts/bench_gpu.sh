#!/usr/bin/env bash
# One short single-GPU check (well under 5 min on an H200): all-MiniLM-L6-v2 encode and rerank
# throughput on the DL19 BM25 top-100 (4,297 passages + 43 queries), before and after:
#   before = plain sentence-transformers encode, fp32 (what twostage's rerank ran before),
#   after  = twostage rerank (fp16 on CUDA, batches of similar token length), and twostage's
#            dense encoder (index --dense) in fp16.
# Needs a CUDA build of torch==2.13.0 in $PY's environment and ../shared/data beside the checkout.
# Prints the figures; writes them to $OUT/bench_gpu.json (the device tool's output folder) or ./.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c 'import torch; assert torch.cuda.is_available(), "this torch has no CUDA"; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
timeout 270 "$PY" scripts/bench_rerank.py --device cuda --batch-size 256 --skip-onnx --repeats 3 \
    --encode-docs 4297 --json "${OUT:-.}/bench_gpu.json"
