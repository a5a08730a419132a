"""Runs shaped as castorini/rank_llm writes them: the reranked top k, then the first stage's ranks below k in
the first stage's own order; and a plain-Python nDCG@10 (trec_eval's linear gains, log2 discount) to check
against."""

from __future__ import annotations

import math
import random

from toolkit.data.records import qrels_from_rows, run_from_rows


def first_stage_lists(rows):
    """{qid: [doc, ...]} in trec_eval order (score descending, doc id descending) from (qid, doc, score)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for q, d, s in rows:
        out.setdefault(str(q), []).append((float(s), str(d)))
    return {q: [d for _, d in sorted(v, key=lambda x: (-x[0], _desc(x[1])))] for q, v in out.items()}


def _desc(doc: str):
    return [-ord(c) for c in doc] + [1]  # doc id descending; a prefix after its longer extensions


def rank_llm_run(lists, k, order=None, unchanged=(), path="<memory>"):
    """Per query the top ``k`` of ``lists`` in ``order(qid, top)``'s order (default: reversed), then ranks
    k+1.. unchanged; queries in ``unchanged`` keep the first stage's order. Scores are 1/rank, as rank_llm."""
    rows = []
    for q, docs in lists.items():
        top, tail = docs[:k], docs[k:]
        if q not in unchanged:
            top = list(order(q, top)) if order else top[::-1]
        rows += [(q, d, 1.0 / (i + 1)) for i, d in enumerate(top + tail)]
    return run_from_rows(rows, path=path)


def collection(n_queries=12, length=60, seed=0, short=(), ties=False):
    """Graded qrels and a first stage: ``length`` documents per query (``short``: {qid: length}), about one in
    five relevant (grades 1-3) anywhere in the list; with ``ties``, equal scores in pairs."""
    rng = random.Random(seed)
    qrels, first = [], []
    for i in range(n_queries):
        q = f"q{i}"
        n = short.get(q, length) if isinstance(short, dict) else length
        for r in range(n):
            d = f"{q}d{r:03d}"
            score = float(n - (r // 2) * 2) if ties else float(n - r)
            first.append((q, d, score))
            if rng.random() < 0.2:
                qrels.append((q, d, rng.choice((1, 2, 3))))
            elif rng.random() < 0.5:
                qrels.append((q, d, 0))
        qrels.append((q, f"{q}-unretrieved", 2))
    return qrels_from_rows(qrels), run_from_rows(first, tag="first")


def labels_of(qrels):
    return {(q, d): int(r) for q, d, r in qrels.frame.itertuples(index=False)}


def oracle_order(qrels):
    """The best order of a query's top k: label descending, equal labels in first-stage order."""
    labels = labels_of(qrels)

    def order(q, top):
        pos = {d: i for i, d in enumerate(top)}
        return sorted(top, key=lambda d: (-max(labels.get((q, d), 0), 0), pos[d]))

    return order


def ndcg10(qrels, ranking: dict[str, list[str]], qids) -> dict[str, float]:
    """trec_eval ndcg_cut.10: linear gains (the label), log2(rank + 1) discount, ideal over every judged
    document; 0 for a query without a relevant document or missing from the ranking."""
    labels = labels_of(qrels)
    out = {}
    for q in qids:
        gains = sorted((g for (qq, _), g in labels.items() if qq == q and g > 0), reverse=True)
        ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:10]))
        docs = ranking.get(q, [])[:10]
        dcg = sum(max(labels.get((q, d), 0), 0) / math.log2(i + 2) for i, d in enumerate(docs))
        out[q] = dcg / ideal if ideal else 0.0
    return out


def run_lists(run):
    return first_stage_lists(run.frame.itertuples(index=False))
