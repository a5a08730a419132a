"""``hole_bounds`` (every query at once) gives the values of the per-query computation it replaced (trec_eval's
lists read query by query, ``ndcg_bounds`` and the closed forms per query) to the last bit, on random inputs
with ties, missing queries, unjudged (-1) labels, pairs judged twice, ``-M``, both ``over`` and the loose
bounds beyond ``MAX_MULTISETS``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measure_groups
from toolkit.quality import holes
from toolkit.stats.rank_similarity import RankedLists


def _reference(qrels, run, chosen, settings, over):
    """The per-query loop of hole_bounds before it was computed columnwise."""
    from dataclasses import replace

    wide = evaluate(qrels, run, chosen, settings, warn=False).wide()
    cwide = evaluate(qrels, run, chosen, replace(settings, judged_only=True), warn=False).wide()
    judged = qrels.frame[qrels.frame[RELEVANCE] >= 0]
    labels = {q: dict(zip(g[DOC_ID], g[RELEVANCE].astype(int))) for q, g in judged.groupby(QUERY_ID, sort=False)}
    scale = holes._scale(qrels)
    level = settings.relevance_level
    everything = settings.max_docs or holes._everything(run)
    all_tops = RankedLists(run, list(wide.index), settings.score_precision, depth=everything)
    out = {}
    for m in chosen:
        k = int(m.cutoff)
        k_eff = min(k, settings.max_docs) if settings.max_docs is not None else k
        tops = RankedLists(run, list(wide.index), settings.score_precision, depth=k_eff)
        rows = []
        for qid in wide.index:
            lab, docs = labels.get(qid, {}), tops.get(qid, [])
            hs = [i + 1 for i, d in enumerate(docs) if d not in lab]
            d_deep = sum(1 for d in all_tops.get(qid, [])[len(docs) :] if d not in lab) if over == "retrieved" else 0
            value = float(wide[m.name][qid])
            rel = sum(1 for d in docs if lab.get(d, -1) >= level)
            if m.family == "P":
                lo, hi, exact = rel / k, (rel + (len(hs) if scale[-1] >= level else 0)) / k, True
            elif m.family == "recall":
                big_r = sum(1 for v in lab.values() if v >= level)
                x = len(hs) if scale[-1] >= level else 0
                y = d_deep if scale[-1] >= level else 0
                lo = rel / (big_r + y) if big_r + y else 0.0
                hi = (rel + x) / (big_r + x) if big_r + x else 0.0
                exact = True
            else:
                gain = settings.gain.value
                jg = np.array([gain(v) for v in lab.values()], dtype=np.float64)
                tg = np.array([gain(lab[d]) if d in lab else 0.0 for d in docs], dtype=np.float64)
                gains = [gain(v) for v in scale]
                lo, hi, exact = holes.ndcg_bounds(jg, tg, np.array(hs), gains, k)
                if d_deep:
                    pool = np.concatenate([jg, np.full(d_deep, max(gains))])
                    lo, _, exact_lo = holes.ndcg_bounds(pool, tg, np.array(hs), gains, k)
                    exact = exact and exact_lo
            if not hs:
                hi = value
            if not hs and not d_deep:
                lo = value
            lo, hi = min(lo, value), max(hi, value)
            cval = float(cwide[m.name][qid]) if qid in cwide.index else 0.0
            rows.append((qid, value, lo, hi, cval, hi - lo, len(hs) + d_deep, exact))
        out[m.name] = pd.DataFrame(rows, columns=[QUERY_ID, *holes.COLUMNS]).set_index(QUERY_ID)
    return out


def _inputs(seed: int):
    gen = np.random.default_rng(seed)
    docs = [f"d{j:03d}" for j in range(80)]
    rows = []
    for i in range(30):
        for d in gen.choice(docs, size=int(gen.integers(0, 40)), replace=False):
            rows.append((f"q{i}", str(d), float(np.round(gen.normal(), 1))))
    run = Run(pd.DataFrame(rows, columns=[QUERY_ID, DOC_ID, "score"]))
    judged = [(f"q{i}", str(d), int(gen.integers(-1, 4))) for i in range(3, 33) for d in gen.choice(docs, 30, False)]
    judged += judged[:5]  # pairs judged twice (the same label)
    return Qrels(pd.DataFrame(judged, columns=[QUERY_ID, DOC_ID, RELEVANCE])), run


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("over", ["top-k", "retrieved"])
@pytest.mark.parametrize("max_docs", [None, 6])
def test_columns_equal_the_per_query_values(seed, over, max_docs, monkeypatch):
    monkeypatch.setattr(holes, "MAX_MULTISETS", 60)  # some queries take the loose bounds
    qrels, run = _inputs(seed)
    ms = [m for g in parse_measure_groups(["ndcg_cut.10", "P.5", "recall.10", "ndcg_cut.3"]) for m in g.measures]
    settings = EvalSettings(max_docs=max_docs)
    got = holes.hole_bounds(qrels, run, ms, settings, over=over)
    want = _reference(qrels, run, [m for m in ms if m.family in holes.SUPPORTED], settings, over)
    assert list(got) == list(want)
    for name, table in want.items():
        pd.testing.assert_frame_equal(got[name].per_query, table, check_exact=True)
        assert got[name].per_query.index.tolist() == table.index.tolist()
        assert not got[name].exact or table["exact"].all()
