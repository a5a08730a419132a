#!/usr/bin/env bash
# The main job: the whole two-stage experiment, end to end, on real data.
#
#   DL19 passage: BM25 top-100 candidates -> all-MiniLM-L6-v2 rerank -> diagnose
#   CACM: index -> BM25 top-100 -> MiniLM rerank (texts from the index) -> diagnose
#   DL20 passage likewise, with WITH_DL20=1 (another ~5,400 passages through MiniLM on the CPU)
#
# Progress bars go to stderr; the report folders are printed at the end.
# Environment: MODEL (default all-MiniLM-L6-v2, the offline packaged copy),
# DEVICE (default auto), OUT (default reports), TWOSTAGE_DATA (default ../shared/data),
# FRESH=1 to rerank again even when a reranked run of the same model exists,
# SKIP_CACM=1 to leave CACM out, WITH_DL20=1 to add DL20.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

TS=.venv/bin/twostage
PY=.venv/bin/python
DATA=${TWOSTAGE_DATA:-../shared/data}
MS=$DATA/msmarco-passage
MODEL=${MODEL:-all-MiniLM-L6-v2}
DEVICE=${DEVICE:-auto}
OUT=${OUT:-reports}
mkdir -p "$OUT/runs"
t0=$(date +%s)
reports=()

say() { printf '\n== %s\n' "$*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

# rerank OUTFILE ARGS...: skips the work when OUTFILE and its sidecar exist for the same model (FRESH=1 redoes it)
rerank() {
  local out=$1; shift
  if [ -z "${FRESH:-}" ] && [ -s "$out" ] && [ -s "$out.meta.json" ] && \
     "$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); sys.exit(m["reranker"]["model"] != sys.argv[2])' "$out.meta.json" "$MODEL"; then
    echo "reusing $out (reranked earlier with $MODEL; FRESH=1 to redo)" >&2
    return 0
  fi
  local t=$(date +%s)
  "$TS" rerank "$@" --model "$MODEL" --device "$DEVICE" --out "$out" >/dev/null
  echo "rerank took $(elapsed "$t")" >&2
}

diagnose() {
  local out=$1; shift
  "$TS" diagnose "$@" --out "$out" >/dev/null
  reports+=("$out")
}

# ------------------------------------------------------------------ DL19
say "DL19 passage (43 judged topics): BM25 top-100 candidates -> $MODEL rerank -> diagnose"
rerank "$OUT/runs/dl19.bm25.minilm.trec" --candidates "$MS/candidates/dl19.bm25.top100.json"
diagnose "$OUT/dl19-minilm" --qrels "$MS/qrels.dl19-passage.txt" \
  --first-stage "$MS/runs/run.dl19.bm25.top100.txt" --reranked "$OUT/runs/dl19.bm25.minilm.trec"

# ------------------------------------------------------------------ DL20
if [ -n "${WITH_DL20:-}" ]; then
  say "DL20 passage (54 judged of 200 topics; only the judged ones are reranked): BM25 -> $MODEL -> diagnose"
  rerank "$OUT/runs/dl20.bm25.minilm.trec" --candidates "$MS/candidates/dl20.bm25.top100.json" \
    --judged-only "$MS/qrels.dl20-passage.txt"
  diagnose "$OUT/dl20-minilm" --qrels "$MS/qrels.dl20-passage.txt" \
    --first-stage "$MS/runs/run.dl20.bm25.top100.txt" --reranked "$OUT/runs/dl20.bm25.minilm.trec"
fi

# ------------------------------------------------------------------ CACM
if [ -n "${SKIP_CACM:-}" ]; then
  say "CACM skipped (SKIP_CACM is set)"
elif ! "$TS" bm25 --help >/dev/null 2>&1 || ! "$TS" index --help >/dev/null 2>&1; then
  say "CACM skipped: 'twostage index' / 'twostage bm25' are not available in this checkout"
else
  say "CACM (52 judged of 64 topics): index -> BM25 top-100 -> $MODEL rerank (texts stored in the index) -> diagnose"
  t=$(date +%s)
  "$TS" index --collection cacm --out indexes/cacm >/dev/null
  "$TS" bm25 --index indexes/cacm --topics cacm --hits 100 --out "$OUT/runs/cacm.bm25.top100.trec" >/dev/null
  echo "index + BM25 took $(elapsed "$t")" >&2
  rerank "$OUT/runs/cacm.bm25.minilm.trec" --run "$OUT/runs/cacm.bm25.top100.trec" --topics cacm \
    --index indexes/cacm --judged-only "$DATA/cacm/qrels.cacm.txt"
  # CACM's qrels list relevant documents only (no label 0): unjudged means "not judged relevant" there,
  # so the unjudged-top label is turned off (--max-unjudged 1) and recall uses level 1 (binary qrels).
  diagnose "$OUT/cacm-minilm" --qrels "$DATA/cacm/qrels.cacm.txt" --topics cacm --max-unjudged 1 \
    --first-stage "$OUT/runs/cacm.bm25.top100.trec" --reranked "$OUT/runs/cacm.bm25.minilm.trec" --index indexes/cacm
fi

# ------------------------------------------------------------------ summary
say "Done in $(elapsed "$t0"). Reports (open index.html in a browser; report.md, per_query.csv, summary.json beside it):"
for r in "${reports[@]}"; do
  "$PY" - "$r" <<'PYEOF'
import json, sys
folder = sys.argv[1]
s = json.load(open(f"{folder}/summary.json"))
h = {r["key"]: r for r in s["headline"]}
rk = next(k for k in h if k.startswith("recall_") and k != "recall_1000")
labels = ", ".join(f"{k} {v}" for k, v in s["labels"].items() if v)
print(f"{folder}/index.html")
print(f"    {h['num_q']['first_stage']} queries; nDCG@10 {h['ndcg_cut_10']['first_stage']:.4f} -> "
      f"{h['ndcg_cut_10']['reranked']:.4f}; R@{rk.split('_')[1]} (-l {s['settings']['recall_level']}) "
      f"{h[rk]['first_stage']:.4f} -> {h[rk]['reranked']:.4f}; judged@10 {h['judged_10']['first_stage']:.4f} -> "
      f"{h['judged_10']['reranked']:.4f}; {labels}")
PYEOF
done
