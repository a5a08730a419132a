"""The ceiling takes its gains from the function nDCG uses: a non-monotone or non-integer
``--gain`` map must not make the ceiling lower than the reranked run.

Oracles: a non-monotone map's example computed by hand, and a brute force over every ordering of the candidates
with an nDCG written out here from its definition (DCG = sum gain / log2(rank + 1), the ideal over every
judged document of the query).
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.diagnosis.decompose import DecompositionSettings, decompose, order_keys
from toolkit.measures.names import EvalSettings, Gain


def _ranked(docs):
    return [("q", d, float(len(docs) - i)) for i, d in enumerate(docs)]


def _decompose(qrels, first, reranked, gain: str, measure="ndcg_cut_10", level=1):
    s = EvalSettings(relevance_level=level, complete=True, gain=Gain.parse(gain))
    return decompose(qrels, first, reranked, len(first.frame), DecompositionSettings(measure, s, s, ["q"], ()))


def test_non_monotone_gain_map_ceiling_by_hand():
    """--gain 0:0,1:5,2:1, qrels d1=1, d2=2, first stage d2 d1, reranked d1 d2: label 1 is worth more, so the
    best order is the reranked one (ceiling 1.0, nothing lost in reranking; raw labels gave ceiling 0.7378)."""
    qrels = qrels_from_rows([("q", "d1", 1), ("q", "d2", 2)])
    row = _decompose(qrels, run_from_rows(_ranked(["d2", "d1"])), run_from_rows(_ranked(["d1", "d2"])), "0:0,1:5,2:1")
    row = row.per_query.iloc[0]
    idcg = 5 + 1 / math.log2(3)
    assert row["ceiling"] == pytest.approx(1.0) and row["reranked"] == pytest.approx(1.0)
    assert row["first_stage"] == pytest.approx((1 + 5 / math.log2(3)) / idcg)
    assert row["lost_in_reranking"] == pytest.approx(0.0) and row["lost_in_candidates"] == pytest.approx(0.0)


def test_non_monotone_gain_map_through_the_cli(tmp_path, cli):
    (tmp_path / "qrels.txt").write_text("q 0 d1 1\nq 0 d2 2\n")
    (tmp_path / "first.trec").write_text("q Q0 d2 1 2 f\nq Q0 d1 2 1 f\n")
    (tmp_path / "rr.trec").write_text("q Q0 d1 1 2 r\nq Q0 d2 2 1 r\n")
    out = tmp_path / "report"
    res = cli(
        "diagnose",
        "--qrels",
        tmp_path / "qrels.txt",
        "--first-stage",
        tmp_path / "first.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--gain",
        "0:0,1:5,2:1",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    d = json.loads((out / "summary.json").read_text())["decomposition"]
    assert d["ceiling"] == pytest.approx(1.0) and d["reranked"] == pytest.approx(1.0)
    assert d["lost_in_reranking"] == pytest.approx(0.0)


def test_order_keys_follow_the_measure():
    import numpy as np

    labels = np.array([2.0, 1.0, 0.0, np.nan, -1.0])
    s = EvalSettings(gain=Gain.parse("0:0.5,1:5,2:1"))
    assert order_keys(labels, "ndcg_cut_10", s).tolist() == [1.0, 5.0, 0.5, 0.0, 0.0]  # the gains nDCG uses
    # a binary measure rewards labels at or above a level: the label orders, unjudged below label 0
    assert order_keys(labels, "P_10", s).tolist() == [2.0, 1.0, 0.0, -1.0, -1.0]
    # trec_eval's own pairs (linear --gain): the measure's L=G
    assert order_keys(labels, "ndcg_1=7", EvalSettings()).tolist() == [2.0, 7.0, 0.0, 0.0, 0.0]


def _ndcg_at(order, gains, ideal_gains, k):
    dcg = sum(gains[d] / math.log2(r + 2) for r, d in enumerate(order[:k]))
    best = sorted(ideal_gains, reverse=True)[:k]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(best))
    return dcg / idcg if idcg > 0 else 0.0


GAIN_VALUES = st.sampled_from([0.0, 0.5, 1.0, 2.5, 3.0, 5.0, 10.0])
LABEL = st.sampled_from([None, 0, 1, 2, 3])  # None: not in the qrels


@st.composite
def cases(draw):
    n = draw(st.integers(1, 6))
    docs = [f"d{i}" for i in range(n)]
    labels = {d: draw(LABEL) for d in docs}
    unretrieved = draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2))  # judged, never retrieved
    gains = {lvl: draw(GAIN_VALUES) for lvl in range(4)}
    first = draw(st.permutations(docs))
    reranked = draw(st.permutations(docs))
    k = draw(st.sampled_from([1, 2, 3, 10]))
    return docs, labels, unretrieved, gains, list(first), list(reranked), k


def _inputs(labels, unretrieved, gains, first, reranked):
    rows = [("q", d, lab) for d, lab in labels.items() if lab is not None]
    rows += [("q", f"x{i}", lab) for i, lab in enumerate(unretrieved)]
    rows += [("q", "filler", 0)]  # every label-0 gain map entry is exercised
    gain = ",".join(f"{lvl}:{g:g}" for lvl, g in gains.items())
    return qrels_from_rows(rows), run_from_rows(_ranked(first)), run_from_rows(_ranked(reranked)), gain, rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_ceiling_is_the_best_ordering_of_the_candidates(case):
    """Non-monotone, non-integer gain maps: the ceiling equals the best of every ordering of the candidates
    (brute force with an nDCG written from its definition), so no reranking of them scores more."""
    docs, labels, unretrieved, gains, first, reranked, k = case
    qrels, f, r, gain, rows = _inputs(labels, unretrieved, gains, first, reranked)
    row = _decompose(qrels, f, r, gain, measure=f"ndcg_cut_{k}").per_query.iloc[0]
    g = {d: (gains[lab] if lab is not None else 0.0) for d, lab in labels.items()}
    ideal_gains = [gains[lab] for _, _, lab in rows]
    best = max(_ndcg_at(list(p), g, ideal_gains, k) for p in itertools.permutations(docs))
    assert row["ceiling"] == pytest.approx(best, abs=1e-12)
    assert row["reranked"] == pytest.approx(_ndcg_at(reranked, g, ideal_gains, k), abs=1e-12)
    assert row["lost_in_reranking"] >= -1e-12 and row["lost_in_candidates"] >= -1e-12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["P_3", "map", "recip_rank", "ndcg", "recall_10"]), st.sampled_from([1, 2]))
def test_lost_in_reranking_is_never_negative(case, measure, level):
    """Whatever the gain map and the measure (binary ones at -l 1 or 2), a pure reordering of the candidates
    never beats the ceiling."""
    _, labels, unretrieved, gains, first, reranked, _ = case
    qrels, f, r, gain, _ = _inputs(labels, unretrieved, gains, first, reranked)
    row = _decompose(qrels, f, r, gain, measure=measure, level=level).per_query.iloc[0]
    assert row["lost_in_reranking"] >= -1e-12
    assert row["lost_in_candidates"] >= -1e-12
