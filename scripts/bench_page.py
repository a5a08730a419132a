#!/usr/bin/env python3
"""The diagnosis page's size at MS MARCO dev scale: a synthetic diagnosis of N queries (a first stage and three
reranked runs of its top documents, in memory), its ``index.html`` written, and what the page holds.

    PYTHONPATH=. .venv/bin/python scripts/bench_page.py [--queries 43 1000 6980] [--depth 30] [--rerank-depth 20]

Prints, per query count: the diagnosis' and the report's seconds, index.html's size and the explorer data's size
(as JSON, the columnar payload, and as the page carries it). Not a test: figures, not assertions
(tests/report/test_page_scale.py asserts the bound at 6,980 queries). The explorer shows each system's top 10 and
the ranks of the documents shown, so the page's size depends on the query count and on how many of the first
stage's documents the reranked runs promote into their top 10, not on the first stage's depth beyond that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WORDS = [
    "what",
    "is",
    "the",
    "how",
    "to",
    "cause",
    "of",
    "rust",
    "apple",
    "pie",
    "recipe",
    "cheap",
    "flights",
    "define",
    "meaning",
    "symptoms",
    "cost",
    "long",
]


def synthetic_inputs(queries: int, depth: int = 30, rerank_depth: int = 20, rerankers: int = 3, seed: int = 7):
    """(qrels, first stage, {name: reranked run}, {qid: text}): ``queries`` MS MARCO-like query ids, a first stage
    ``depth`` deep with random 7-digit document ids, a few judged documents per query (grades 0-3), and
    ``rerankers`` reranked runs, each its own shuffle of the first stage's top ``rerank_depth``."""
    from toolkit.data.records import qrels_from_rows, run_from_rows

    rng = np.random.default_rng(seed)
    qids = [str(q) for q in rng.choice(1_200_000, queries, replace=False)]
    qrels, first = [], []
    reranked: dict[str, list] = {f"rr{i}": [] for i in range(1, rerankers + 1)}
    texts = {}
    for q in qids:
        docs = [str(d) for d in rng.choice(9_000_000, depth, replace=False)]
        for j in rng.choice(depth, int(rng.integers(1, 8)), replace=False):
            qrels.append((q, docs[j], int(rng.integers(0, 4))))
        first += [(q, d, float(depth - i)) for i, d in enumerate(docs)]
        for rows in reranked.values():
            top = list(docs[:rerank_depth])
            rng.shuffle(top)
            rows += [(q, d, float(rerank_depth - i)) for i, d in enumerate(top)]
        texts[q] = " ".join(rng.choice(WORDS, int(rng.integers(3, 9))))
    runs = {name: run_from_rows(rows, tag=name) for name, rows in reranked.items()}
    return qrels_from_rows(qrels), run_from_rows(first, tag="first"), runs, texts


def synthetic_diagnosis(queries: int, depth: int = 30, rerank_depth: int = 20, permutations: int = 200, seed: int = 7):
    """``toolkit.diagnose`` of ``synthetic_inputs`` (depth given: the runs are truncated at ``rerank_depth``)."""
    from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
    from toolkit.diagnosis.diagnosis_options import DiagnosisOptions

    qrels, first, reranked, texts = synthetic_inputs(queries, depth, rerank_depth, seed=seed)
    options = DiagnosisOptions(depth=rerank_depth, permutations=permutations, seed=seed)
    return diagnose(DiagnosisInputs(qrels, {"first": first}, reranked, queries=texts), options)


def measure(queries: int, depth: int, rerank_depth: int) -> dict:
    from toolkit.report.diagnosis_explore import explore_data, explore_payload, read_explore_data
    from toolkit.report.diagnosis_page import write_diagnosis_report

    t = time.perf_counter()
    diag = synthetic_diagnosis(queries, depth, rerank_depth)
    t_diag = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        write_diagnosis_report(diag, Path(tmp) / "report")
        t_report = time.perf_counter() - t
        html = (Path(tmp) / "report" / "index.html").read_text(encoding="utf-8")
    data = explore_data(diag)
    compact = lambda x: len(json.dumps(x, ensure_ascii=False, separators=(",", ":")))  # noqa: E731
    carried = html.split('id="explore-data">', 1)[1].split("</script>", 1)[0]
    assert read_explore_data(html) == data
    return {
        "queries": queries,
        "diagnose_s": t_diag,
        "report_s": t_report,
        "index_mb": len(html.encode("utf-8")) / 1e6,
        "data_json_mb": compact(data) / 1e6,
        "payload_mb": compact(explore_payload(data)) / 1e6,
        "carried_mb": len(carried.encode("utf-8")) / 1e6,
        "encoding": json.loads(carried)["encoding"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[43, 1000, 6980])
    ap.add_argument("--depth", type=int, default=30, help="the first stage's depth")
    ap.add_argument("--rerank-depth", type=int, default=20, help="how many of its documents each reranked run holds")
    args = ap.parse_args(argv)
    print(
        "| queries | diagnose s | report s | index.html MB | explorer data as JSON MB | columnar MB | in the page MB |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in args.queries:
        r = measure(n, args.depth, args.rerank_depth)
        print(
            f"| {r['queries']:,} | {r['diagnose_s']:.1f} | {r['report_s']:.1f} | {r['index_mb']:.2f} | "
            f"{r['data_json_mb']:.2f} | {r['payload_mb']:.2f} | {r['carried_mb']:.2f} ({r['encoding']}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
