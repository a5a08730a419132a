"""Small inline collections shared by several test files (values in the tests that use them are computed by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.data.records import qrels_from_rows, run_from_rows

CANDIDATES = [
    {
        "query": "apple pie recipe",
        "hits": [
            {"qid": 1, "docid": "d1", "rank": 1, "score": 3.0, "content": "a history of the apple"},
            {"qid": 1, "docid": "d2", "rank": 2, "score": 2.0, "content": "apple pie recipe with cinnamon"},
            {"qid": 1, "docid": "d3", "rank": 3, "score": 1.0, "content": "car repair"},
        ],
    },
    {
        "query": "car repair",
        "hits": [
            {"qid": 2, "docid": "d3", "rank": 1, "score": 5.0, "content": "car repair"},
            {"qid": 2, "docid": "d4", "rank": 2, "score": 4.0, "content": "a pie"},
        ],
    },
]


N = [f"n{i}" for i in range(10)]  # judged non-relevant filler


U = [f"u{i}" for i in range(10)]  # unjudged filler


def _ranked(qid, docs):
    return [(qid, d, float(len(docs) - i)) for i, d in enumerate(docs)]


def tiny():
    """q1 ok (the reranker helped: a, b from ranks 9, 10 to 1, 2), q2 reranker-hurt (r1 from rank 1 to 10),
    q3 reranker-misordered (s1, s2 at ranks 9, 10 in both runs), q4 unjudged-top (t1 at rank 10 in both runs),
    q5 ok (grade 1 only), q6 in no run (candidates-missed), q7 no-relevant (only label-0 judgments)."""
    qrels = []
    for q in ("q1", "q2", "q3", "q4", "q5", "q6", "q7"):
        qrels += [(q, n, 0) for n in N]
    qrels += [("q1", "a", 3), ("q1", "b", 2)]
    qrels += [("q2", f"r{i}", 2) for i in range(1, 5)]
    qrels += [("q3", "s1", 2), ("q3", "s2", 2)]
    qrels += [("q4", "t1", 2)]
    qrels += [("q5", "g1", 1)]
    qrels += [("q6", "z1", 2)]
    first = (
        _ranked("q1", N[:8] + ["a", "b"])
        + _ranked("q2", ["r1"] + N[:9])
        + _ranked("q3", N[7::-1] + ["s1", "s2"])
        + _ranked("q4", U[8::-1] + ["t1"])
        + _ranked("q5", ["g1"] + N[:9])
        + _ranked("q7", N[:10])
    )
    reranked = (
        _ranked("q1", ["a", "b"] + N[:8])
        + _ranked("q2", N[:9] + ["r1"])
        + _ranked("q3", N[:8] + ["s1", "s2"])
        + _ranked("q4", U[:9] + ["t1"])
        + _ranked("q5", ["g1"] + N[:9])
        + _ranked("q7", N[9::-1])
    )
    texts = {"a": "apple pie recipe", "r1": "first relevant", "n0": "filler zero"}
    queries = {
        "q1": "how to bake apple pie",
        "q2": "what causes rust",
        "q3": "who is robert gray",
        "q4": "401k limits",
        "q5": "cheap flights",
        "q6": "what is a good question to ask at night",
        "q7": "cheap hotels",
    }
    return qrels_from_rows(qrels), run_from_rows(first, tag="first"), run_from_rows(reranked, tag="rr"), texts, queries


def write_tiny(tmp_path):
    qrels, first, reranked, _, queries = tiny()
    from toolkit.data.trec_io import write_run

    qp = tmp_path / "qrels.txt"
    qp.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels.frame.itertuples(index=False)))
    write_run(first, tmp_path / "first.trec")
    write_run(reranked, tmp_path / "rr.trec")
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    return qp


# ------------------------------------------------------------ a six-document collection to index
TINY_DOCS = {
    "d1": "time sharing systems for computers",
    "d2": "the operating system of a time sharing computer",
    "d3": "matrix inversion algorithms",
    "d4": "algorithms for sorting and searching",
    "d5": "computer time and cost accounting",
    "d6": "numerical methods for matrix problems",
}
TINY_TOPICS = {"1": "time sharing system", "2": "matrix algorithms", "3": "computer accounting"}


def write_tiny_corpus(folder: Path) -> tuple[Path, Path]:
    """``TINY_DOCS`` as a JSONL corpus and ``TINY_TOPICS`` as a TSV topics file in ``folder``."""
    corpus, topics = folder / "corpus.jsonl", folder / "topics.tsv"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in TINY_DOCS.items()))
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in TINY_TOPICS.items()))
    return corpus, topics
