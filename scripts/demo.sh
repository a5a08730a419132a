#!/usr/bin/env bash
# The main job: the whole two-stage experiment, end to end, on real data.
#
#   DL19 passage: BM25 top-100 candidates -> all-MiniLM-L6-v2 rerank; two more rerankings of the same
#     candidates to compare with it: RRF of BM25 and MiniLM (twostage fuse), and the candidates in TAS-B's
#     order, written by a few lines of plain Python as any outside tool would (a TREC file, no sidecar);
#     then one diagnosis of all three: loss decomposition, rerank-depth curve, significance, agreement,
#     disagreements, and the query explorer page
#   CACM: index -> BM25 top-100 -> MiniLM rerank (texts from the index) -> diagnose
#   CACM experiment: docs/experiments/cacm.yaml (BM25 grid with 5-fold tuning, RM3, MiniLM at three depths);
#     prints the results table (results.csv and index.html in $OUT/cacm-experiment)
#   DL20 passage likewise, with WITH_DL20=1 (another ~5,400 passages through MiniLM on the CPU)
#
# Each stage starts with a numbered line on stderr ("== [2/4] ..." with the time so far) and ends with its time;
# progress bars go to stderr too. The last two lines are the main page's path and the whole run's time.
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

# the stages this run will do, for the "[k/N]" counter
stages=1
[ -n "${WITH_DL20:-}" ] && stages=$((stages + 1))
[ -z "${SKIP_CACM:-}" ] && stages=$((stages + 2))
stage=0
say() { printf '\n== %s\n' "$*" >&2; }
step() { stage=$((stage + 1)); printf '\n== [%d/%d] %s  (%ss so far)\n' "$stage" "$stages" "$*" "$(( $(date +%s) - t0 ))" >&2; t_stage=$(date +%s); }
done_step() { echo "== [$stage/$stages] done in $(elapsed "$t_stage")" >&2; }
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
step "DL19 passage (43 judged topics): BM25 top-100 candidates -> $MODEL rerank, RRF, an outside run -> diagnose"
rerank "$OUT/runs/dl19.bm25.minilm.trec" --candidates "$MS/candidates/dl19.bm25.top100.json"
"$TS" fuse --method rrf "$MS/runs/run.dl19.bm25.top100.txt" "$OUT/runs/dl19.bm25.minilm.trec" \
  --out "$OUT/runs/dl19.bm25.minilm-rrf.trec" 2>/dev/null
# A reranked run made outside twostage: BM25's top 100 in TAS-B's order (candidates TAS-B did not retrieve
# follow in BM25's order), scores 1/rank, no sidecar. Plain Python, no toolkit code.
"$PY" - "$MS/runs/run.dl19.bm25.top100.txt" "$MS/runs/run.dl19.tasb.top100.txt" \
  > "$OUT/runs/dl19.bm25.tasb-order.txt" <<'PYEOF'
import sys
from collections import defaultdict
def ranked(path):  # trec_eval's order: score descending, then document id descending
    rows = defaultdict(list)
    for line in open(path):
        q, _, d, _, s, *_ = line.split()
        rows[q].append((float(s), d))
    return {q: [d for _, d in sorted(v, reverse=True)] for q, v in rows.items()}
bm25, tasb = ranked(sys.argv[1]), ranked(sys.argv[2])
for q in sorted(bm25):
    pos = {d: i for i, d in enumerate(tasb.get(q, []))}
    order = sorted(bm25[q][:100], key=lambda d: (pos.get(d, 10**6), bm25[q].index(d)))
    sys.stdout.writelines(f"{q} Q0 {d} {i + 1} {1 / (i + 1):.6f} tasb-order\n" for i, d in enumerate(order))
PYEOF
diagnose "$OUT/dl19-minilm" --qrels "$MS/qrels.dl19-passage.txt" \
  --first-stage "bm25=$MS/runs/run.dl19.bm25.top100.txt" --reranked "minilm=$OUT/runs/dl19.bm25.minilm.trec" \
  --reranked "rrf-bm25-minilm=$OUT/runs/dl19.bm25.minilm-rrf.trec" --reranked "tasb-order=$OUT/runs/dl19.bm25.tasb-order.txt"
done_step

# ------------------------------------------------------------------ DL20
if [ -n "${WITH_DL20:-}" ]; then
  step "DL20 passage (54 judged of 200 topics; only the judged ones are reranked): BM25 -> $MODEL -> diagnose"
  rerank "$OUT/runs/dl20.bm25.minilm.trec" --candidates "$MS/candidates/dl20.bm25.top100.json" \
    --judged-only "$MS/qrels.dl20-passage.txt"
  diagnose "$OUT/dl20-minilm" --qrels "$MS/qrels.dl20-passage.txt" \
    --first-stage "bm25=$MS/runs/run.dl20.bm25.top100.txt" --reranked "minilm=$OUT/runs/dl20.bm25.minilm.trec"
  done_step
fi

# ------------------------------------------------------------------ CACM
if [ -n "${SKIP_CACM:-}" ]; then
  say "CACM skipped (SKIP_CACM is set)"
elif ! "$TS" bm25 --help >/dev/null 2>&1 || ! "$TS" index --help >/dev/null 2>&1; then
  stage=$((stage + 2))
  say "CACM skipped: 'twostage index' / 'twostage bm25' are not available in this checkout"
else
  step "CACM (52 judged of 64 topics): index -> BM25 top-100 -> $MODEL rerank (texts stored in the index) -> diagnose"
  t=$(date +%s)
  "$TS" index --collection cacm --out indexes/cacm >/dev/null
  "$TS" bm25 --index indexes/cacm --topics cacm --hits 100 --out "$OUT/runs/cacm.bm25.top100.trec" >/dev/null
  echo "index + BM25 took $(elapsed "$t")" >&2
  rerank "$OUT/runs/cacm.bm25.minilm.trec" --run "$OUT/runs/cacm.bm25.top100.trec" --topics cacm \
    --index indexes/cacm --judged-only "$DATA/cacm/qrels.cacm.txt"
  # CACM's qrels list relevant documents only (no label 0): unjudged means "not judged relevant" there,
  # so the unjudged-top label is turned off (--max-unjudged 1) and recall uses level 1 (binary qrels).
  diagnose "$OUT/cacm-minilm" --qrels "$DATA/cacm/qrels.cacm.txt" --topics cacm --max-unjudged 1 \
    --first-stage "bm25=$OUT/runs/cacm.bm25.top100.trec" --reranked "minilm=$OUT/runs/cacm.bm25.minilm.trec" --index indexes/cacm
  done_step
fi

# ------------------------------------------------------------------ CACM experiment
if [ -z "${SKIP_CACM:-}" ] && "$TS" experiment --help >/dev/null 2>&1; then
  step "CACM experiment (docs/experiments/cacm.yaml): BM25 grid tuned by 5-fold CV on MAP, RM3, $MODEL at depths 20/50/100"
  t=$(date +%s)
  "$TS" experiment run docs/experiments/cacm.yaml --out "$OUT/cacm-experiment" --data-dir "$DATA"
  echo "experiment took $(elapsed "$t") (a second run reuses every stage from the cache)" >&2
  echo "$OUT/cacm-experiment/index.html" >&2
  done_step
fi

# ------------------------------------------------------------------ summary
say "Reports (open index.html in a browser; report.md, per_query.csv, summary.json beside it):"
for r in "${reports[@]}"; do
  "$PY" - "$r" <<'PYEOF'
import json, sys
folder = sys.argv[1]
s = json.load(open(f"{folder}/summary.json"))
h = {r["key"]: r for r in s["headline"]}
rk = next(k for k in h if k.startswith("recall_") and k != "recall_1000")
labels = ", ".join(f"{k} {v}" for k, v in s["labels"].items() if v)
print(f"{folder}/index.html")
print(f"    {h['num_q']['first_stage']} queries; R@{rk.split('_')[1]} (-l {s['settings']['recall_level']}) "
      f"{h[rk]['first_stage']:.4f}; judged@10 {h['judged_10']['first_stage']:.4f} -> {h['judged_10']['reranked']:.4f}")
for r in s["reranked_runs"]:
    d = r["decomposition"]
    curve = ", ".join(f"{p['depth']}: {p['reranked']:.4f}" for p in r["depth_curve"])
    print(f"    {r['name']}: nDCG@10 {d['first_stage']:.4f} -> {d['reranked']:.4f}, ceiling {d['ceiling']:.4f}; "
          f"lost in candidates {d['lost_in_candidates']:.4f}, in reranking {d['lost_in_reranking']:.4f}; "
          f"rerank depth curve {curve}")
print(f"    labels ({s['decomposition']['system']}): {labels}")
PYEOF
done
echo >&2
echo "page: ${reports[0]}/index.html" >&2
echo "time: $(elapsed "$t0")" >&2
