#!/usr/bin/env python3
"""Deterministic generator of a two-stage diagnosis benchmark input: qrels, one first stage and three reranked runs.

Writes into --out-dir:

  qrels.txt   TREC qrels (``qid 0 docid rel``), graded 0-3
  first.txt   the first stage, --depth documents per query (``qid Q0 docid rank score tag``)
  rr1.txt, rr2.txt, rr3.txt   three reorderings of the first stage's top --rerank-depth (pointwise rerankers of
              rising quality: each scores a candidate ``strength x grade + noise``)

The default size matches MS MARCO passage dev (6,980 queries, a first stage 1,000 deep, reranked top 100):
7.0 M first-stage lines and 2.1 M reranked lines. Output depends only on the arguments and the numpy version.

Model (constants below, in one place): per query, judged documents round(lognormal(median 6, sigma 0.9)) clipped
to [1, 40], grades 0-3 with P = .45/.27/.17/.11 (about 2% of queries have no relevant document); the first
stage scores each judged document ``0.9 x grade + N(0, 1)`` and ``--depth`` + 40 unjudged ones ``N(0, 1)``, and
keeps its top ``--depth``; scores are printed with 4 decimals, so there are exact ties (trec_eval breaks them by
document id). Document ids ``D<n>`` are distinct within a query and shared by no two queries.

Usage:
    python scripts/make_diagnose_bench.py --queries 1000 --out-dir /tmp/diag1000
    python scripts/make_diagnose_bench.py --out-dir /tmp/diag6980            # MS MARCO dev size
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

JUDGED_MEDIAN, JUDGED_SIGMA, JUDGED_MAX = 6.0, 0.9, 40
GRADE_P = (0.45, 0.27, 0.17, 0.11)
NO_REL_SHARE = 0.02
FIRST_STRENGTH = 0.9
RERANKERS = {"rr1": (1.0, 1.0), "rr2": (1.6, 1.0), "rr3": (2.4, 1.0)}  # name: (strength, noise sd)
CHUNK = 500  # queries per block (memory only)


def _lines(qids: np.ndarray, docs: np.ndarray, scores: np.ndarray, tag: str) -> str:
    """TREC run lines of a (queries x k) block, rows already in rank order."""
    k = docs.shape[1]
    out = []
    for q, row_d, row_s in zip(qids.tolist(), docs.tolist(), scores.tolist()):
        out.extend(f"{q} Q0 D{d} {r} {s:.4f} {tag}\n" for r, (d, s) in enumerate(zip(row_d, row_s), 1))
    assert len(out) == len(qids) * k
    return "".join(out)


def make(out_dir: str | Path, queries: int = 6980, depth: int = 1000, rerank_depth: int = 100, seed: int = 7) -> dict:
    """Write the five files; returns {name: path} (qrels, first, rr1, rr2, rr3)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    nq = queries
    qids = np.sort(rng.choice(np.arange(1, 1_200_000, dtype=np.int64), size=nq, replace=False))
    nj = np.clip(np.rint(rng.lognormal(np.log(JUDGED_MEDIAN), JUDGED_SIGMA, nq)), 1, JUDGED_MAX).astype(np.int64)
    pool = depth + JUDGED_MAX
    grade = rng.choice(4, size=(nq, JUDGED_MAX), p=GRADE_P)
    grade[rng.random(nq) < NO_REL_SHARE] = 0
    judged = np.arange(JUDGED_MAX)[None, :] < nj[:, None]
    paths = {n: out / f"{n}.txt" for n in ("qrels", "first", *RERANKERS)}
    with open(paths["qrels"], "w") as f:
        for i in range(nq):
            base = i * (pool + JUDGED_MAX)
            f.write("".join(f"{qids[i]} 0 D{base + j} {grade[i, j]}\n" for j in range(nj[i])))
    with contextlib.ExitStack() as stack:
        files = {n: stack.enter_context(open(paths[n], "w")) for n in ("first", *RERANKERS)}
        for b0 in range(0, nq, CHUNK):
            b1 = min(nq, b0 + CHUNK)
            m = b1 - b0
            g = np.where(judged[b0:b1], grade[b0:b1], -1)  # -1: no such judged document
            # pool: JUDGED_MAX judged slots (absent ones never retrieved) then `pool` unjudged documents
            ids = (np.arange(b0, b1, dtype=np.int64) * (pool + JUDGED_MAX))[:, None] + np.arange(pool + JUDGED_MAX)
            gains = np.concatenate([g, np.zeros((m, pool), np.int64)], axis=1).astype(np.float64)
            score = FIRST_STRENGTH * np.maximum(gains, 0) + rng.standard_normal((m, pool + JUDGED_MAX))
            score[:, :JUDGED_MAX][g < 0] = -np.inf
            score = np.round(score, 4)
            order = np.lexsort((-ids, -score), axis=-1)[:, :depth]  # score desc, then docid desc (as trec_eval)
            docs = np.take_along_axis(ids, order, 1)
            s = np.take_along_axis(score, order, 1) + 10.0
            files["first"].write(_lines(qids[b0:b1], docs, s, "first"))
            top = docs[:, :rerank_depth]
            tg = np.maximum(np.take_along_axis(gains, order[:, :rerank_depth], 1), 0)
            for name, (strength, sd) in RERANKERS.items():
                rs = np.round(strength * tg + sd * rng.standard_normal(top.shape), 4)
                o = np.lexsort((-top, -rs), axis=-1)
                files[name].write(
                    _lines(qids[b0:b1], np.take_along_axis(top, o, 1), np.take_along_axis(rs, o, 1), name)
                )
    return {n: str(p) for n, p in paths.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=6980)
    ap.add_argument("--depth", type=int, default=1000, help="first-stage documents per query")
    ap.add_argument("--rerank-depth", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args(argv)
    if a.queries < 1 or a.depth < 2 or not 1 <= a.rerank_depth <= a.depth:
        ap.error("need --queries >= 1, --depth >= 2 and 1 <= --rerank-depth <= --depth")
    t0 = time.time()
    paths = make(a.out_dir, a.queries, a.depth, a.rerank_depth, a.seed)
    print(f"wrote {', '.join(paths.values())} in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
