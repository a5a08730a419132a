"""``query_views.views_of_runs`` (every query at once, from the runs' columns) gives what ``side_by_side`` and
``best_missed`` give query by query from ranked lists: the same values, in the same order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.data.records import Qrels, Run
from toolkit.diagnosis.query_views import best_missed, grades, side_by_side, views_of_runs
from toolkit.stats.rank_similarity import RankedLists


def _inputs(seed: int):
    gen = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(40)]
    # documents whose text order (code points) differs from their order of first appearance, some not ASCII
    docs = [f"d{j:03d}" for j in range(50)] + ["D1", "é1", "z", "Zz", "ä", "\U0001f600x", "a b", "d00", "-x", "d0100"]
    runs = {}
    for name, depth in (("first", 40), ("a", 12), ("b", 8)):
        rows = []
        for q in qids[:-3] if name != "first" else qids:  # the reranked runs lack three queries
            for d in gen.choice(docs, size=int(gen.integers(0, depth + 1)), replace=False):
                rows.append((q, str(d), float(np.round(gen.normal(), 1))))  # ties: broken by document id
        runs[name] = Run(pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]))
    judged = [(q, str(d), int(gen.integers(-1, 4))) for q in qids[5:] for d in gen.choice(docs, 25, replace=False)]
    qrels = Qrels(pd.DataFrame(judged, columns=["query_id", "doc_id", "relevance"]))
    return qids, runs, qrels


def test_views_of_runs_equal_side_by_side_and_best_missed():
    for seed in (1, 2, 3):
        qids, runs, qrels = _inputs(seed)
        lists = {n: RankedLists(r, qids, "float32") for n, r in runs.items()}
        g = grades(qrels, qids)
        for k, depth, n in ((10, 20, 5), (3, 5, 2), (50, 40, 0)):
            want = side_by_side(qids, lists, list(runs), g, k)
            want_missed = {
                q: best_missed(
                    q, g, {d for top in want[q]["top"].values() for d, _ in top}, lists["first"][q], depth, n
                )
                for q in qids
            }
            views, missed = views_of_runs(qids, runs, qrels, k, "float32", "first", depth, n)
            assert repr(views) == repr(want)
            assert repr(missed) == repr(want_missed)


def test_views_of_runs_resumes_the_collector_only_if_it_ran():
    import gc

    qids, runs, qrels = _inputs(4)
    assert gc.isenabled()
    views_of_runs(qids, runs, qrels, 5, "float32", "first", 10, 2)
    assert gc.isenabled()
    gc.disable()
    try:
        views_of_runs(qids, runs, qrels, 5, "float32", "first", 10, 2)
        assert not gc.isenabled()
    finally:
        gc.enable()
