"""Loss decomposition and rerank-depth curve: hand-computed examples, score precision at the depth cut.

The real-data checks (DL19 BM25 -> all-MiniLM-L6-v2) are in test_dl19_decomposition.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
from toolkit.diagnosis.decompose import (
    DecompositionSettings,
    candidate_table,
    decompose,
    ideal_run,
    parse_headline_measure,
    reordered_run,
)
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.errors import ConfigError
from toolkit.measures.names import EvalSettings, Gain


def _log2(r):
    return math.log2(r + 1)


def example():
    """Grades A 3, B 2, C 1, D 0, F 2 (never retrieved); E unjudged. First stage D E C B A, reranked C A D E B."""
    qrels = qrels_from_rows([("q", "A", 3), ("q", "B", 2), ("q", "C", 1), ("q", "D", 0), ("q", "F", 2)])
    first = run_from_rows([("q", d, 5.0 - i) for i, d in enumerate("DECBA")])
    reranked = run_from_rows([("q", d, 5.0 - i) for i, d in enumerate("CADEB")])
    return qrels, first, reranked


def _decompose(qrels, first, reranked, measure="ndcg_cut_3", depth=5, level=1, gain="linear", depths=(2, 3)):
    s = EvalSettings(relevance_level=level, complete=True, gain=Gain.parse(gain))
    return decompose(qrels, first, reranked, depth, DecompositionSettings(measure, s, s, ["q"], depths))


def test_ndcg_decomposition_by_hand():
    d = _decompose(*example())
    row = d.per_query.iloc[0]
    idcg = 3 + 2 / _log2(2) + 2 / _log2(3)  # A, B, F: F counts in the ideal though no run retrieved it
    assert row["ideal"] == 1.0
    assert row["ceiling"] == pytest.approx((3 + 2 / _log2(2) + 1 / _log2(3)) / idcg)  # A B C: best of the five
    assert row["reranked"] == pytest.approx((1 + 3 / _log2(2)) / idcg)  # C A D
    assert row["first_stage"] == pytest.approx((1 / _log2(3)) / idcg)  # D E C
    assert row["lost_in_candidates"] == pytest.approx(1 - row["ceiling"])  # F is out of reach
    assert row["lost_in_reranking"] == pytest.approx(row["ceiling"] - row["reranked"])
    assert d.introduced == 0 and d.uncovered == 0 and d.curve_exact


def test_depth_curve_by_hand():
    d = _decompose(*example())
    curve = d.curve.set_index("depth")
    idcg = 3 + 2 / _log2(2) + 2 / _log2(3)
    assert list(curve.index) == [2, 3, 5]  # the requested depths up to N, and N
    # k=2: D and E reordered by the reranker (D before E), then C B A: the first stage's own list
    assert curve.loc[2, "reranked"] == pytest.approx((1 / _log2(3)) / idcg)
    assert curve.loc[2, "ceiling"] == pytest.approx((1 / _log2(3)) / idcg)  # D, E are both worth 0
    # k=3: C D E in the reranker's order (C first), then B A
    assert curve.loc[3, "reranked"] == pytest.approx(1 / idcg) and curve.loc[3, "ceiling"] == pytest.approx(1 / idcg)
    # k=N: the reranked run itself and the full ceiling
    assert curve.loc[5, "reranked"] == pytest.approx(d.per_query["reranked"].iloc[0])
    assert curve.loc[5, "ceiling"] == pytest.approx(d.per_query["ceiling"].iloc[0])
    # R@k at level 1: A, B, C, F relevant; the top 2 (D E) hold none, the top 3 C, the top 5 A B C
    assert curve["recall"].tolist() == pytest.approx([0, 0.25, 0.75])


def test_reordered_run_lists():
    qrels, first, reranked = example()
    cands = candidate_table(qrels, first, reranked, 5, EvalSettings())

    def order(k, how):
        return reordered_run(cands, k, how).frame.sort_values("score", ascending=False)["doc_id"].tolist()

    assert order(3, "reranked") == list("CDEBA")
    assert order(5, "reranked") == list("CADEB")
    assert order(3, "best") == list("CDEBA")
    assert order(5, "best") == list("ABCDE")  # D (0) and E (unjudged, 0) keep first-stage order
    # a top-k candidate the reranked run lacks follows the ones it ranked, in first-stage order
    partial = run_from_rows([("q", "A", 2.0), ("q", "C", 1.0)])
    cands = candidate_table(qrels, first, partial, 5, EvalSettings())
    assert reordered_run(cands, 5, "reranked").frame.sort_values("score", ascending=False)["doc_id"].tolist() == list(
        "ACDEB"
    )


def test_binary_measure_and_exp_gain():
    qrels, first, reranked = example()
    # P@3 at level 2: relevant A B F; ideal 3/3; the candidates hold A and B
    row = _decompose(qrels, first, reranked, measure="P_3", level=2).per_query.iloc[0]
    assert (row["ideal"], row["ceiling"], row["reranked"]) == pytest.approx((1, 2 / 3, 1 / 3))
    # at level 3 only A is relevant: the ideal P@3 is 1/3, not 1
    row = _decompose(qrels, first, reranked, measure="P_3", level=3).per_query.iloc[0]
    assert (row["ideal"], row["ceiling"]) == pytest.approx((1 / 3, 1 / 3))
    # exponential gains 2^l - 1: A 7, B 3, C 1, F 3
    row = _decompose(qrels, first, reranked, gain="exp").per_query.iloc[0]
    idcg = 7 + 3 / _log2(2) + 3 / _log2(3)
    assert row["ceiling"] == pytest.approx((7 + 3 / _log2(2) + 1 / _log2(3)) / idcg)


def test_ideal_run_and_measures_without_a_ceiling():
    qrels, *_ = example()
    ideal = ideal_run(qrels, EvalSettings())
    assert sorted(ideal.frame["doc_id"]) == list("ABCDF")
    assert parse_headline_measure("ndcg_cut.10") == "ndcg_cut_10" and parse_headline_measure("P.5") == "P_5"
    assert parse_headline_measure("Rndcg") == "Rndcg" and parse_headline_measure("infAP") == "infAP"
    for bad, message in (
        ("num_rel", "has no ceiling"),
        ("judged.10", "has no ceiling"),
        ("unj.5", "has no ceiling"),  # the registry declares these (Family.ceiling), no name tests
        ("rbp_resid", "has no ceiling"),
        ("ideal_dcg", "has no ceiling"),
        ("ndcg_cut.5,10", "names 2 measures"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_headline_measure(bad)


def test_one_score_precision_at_the_depth_cut():
    """Scores equal in float32 but not in float64 at the depth cut: every step of diagnose picks the same
    candidates, at the settings' precision, so the reorder check and the ceiling agree with each other."""
    qrels = qrels_from_rows([("q", "a", 2), ("q", "z", 0), ("q", "c", 1)])
    first = run_from_rows([("q", "c", 2.0), ("q", "a", 1.0 + 1e-12), ("q", "z", 1.0)])
    # float64: c, a (a scores higher); float32: a and z tie and z wins on document id (descending)
    by64 = run_from_rows([("q", "a", 0.9), ("q", "c", 0.8)])  # a reranking of the float64 top 2
    by32 = run_from_rows([("q", "z", 0.9), ("q", "c", 0.8)])  # a reranking of the float32 top 2
    for precision, pure, other in (("float32", by32, by64), ("float64", by64, by32)):
        s = EvalSettings(score_precision=precision)
        cands = candidate_table(qrels, first, pure, 2, s)
        assert set(cands["doc_id"]) == set(pure.frame["doc_id"]) and cands["reranked_rank"].notna().all()
        opts = DiagnosisOptions.from_keywords(score_precision=precision, depth=2, worst_n=0)
        ok = diagnose(DiagnosisInputs(qrels, first, pure), opts)
        assert ok.reorder_check["only_reorders"] and ok.primary.decomposition.introduced == 0
        bad = diagnose(DiagnosisInputs(qrels, first, other), opts)
        assert bad.reorder_check["introduced_documents"] == 1 and bad.primary.decomposition.introduced == 1
    # the ceiling follows the candidates: with a among them (float64) the best order puts grade 2 first
    ceiling = {
        p: diagnose(
            DiagnosisInputs(qrels, first, by64), DiagnosisOptions.from_keywords(score_precision=p, depth=2, worst_n=0)
        ).summary()["decomposition"]["ceiling"]
        for p in ("float32", "float64")
    }
    assert ceiling["float64"] == pytest.approx(1.0) and ceiling["float32"] < 1.0


def test_query_the_reranked_run_lacks():
    """A query only the first stage has: the reranked run scores 0 there (-c), but the query is ``missing``:
    its loss is nobody's (once: all of it lost in reranking), and the means and the depth curve are over the
    other queries (the last point stays the reranked run's value there); its ceiling still counts its
    candidates."""
    qrels, first, reranked = example()
    qrels = qrels_from_rows([tuple(r) for r in qrels.frame.itertuples(index=False)] + [("p", "G", 1)])
    first = run_from_rows([tuple(r) for r in first.frame.itertuples(index=False)] + [("p", "G", 1.0)])
    s = EvalSettings(complete=True)
    d = decompose(qrels, first, reranked, 5, DecompositionSettings("ndcg_cut_3", s, s, ["p", "q"], (2,)))
    p = d.per_query.set_index("query_id").loc["p"]
    assert (p["first_stage"], p["ceiling"], p["reranked"]) == (1.0, 1.0, 0.0)
    assert np.isnan(p["lost_in_candidates"]) and np.isnan(p["lost_in_reranking"]) and d.missing == ("p",)
    q = d.per_query.set_index("query_id").loc["q"]
    assert d.curve["reranked"].iloc[-1] == pytest.approx(q["reranked"])
    m = d.means()
    assert (m["queries"], m["missing_queries"], m["reranked"]) == (1, 1, pytest.approx(q["reranked"]))
    idcg = 3 + 2 / _log2(2) + 2 / _log2(3)
    assert d.curve["reranked"].iloc[0] == pytest.approx((1 / _log2(3)) / idcg)  # q: C third; p left out
    assert d.uncovered == 0 and d.curve_exact


def test_no_input_warning_about_the_diagnosis_own_rankings():
    """A query judged only 0 gives its ideal ranking all-equal gains; that ranking is the toolkit's, not the
    user's: no warning names it (the users' own tied run still gets its warning)."""
    qrels = qrels_from_rows([("q", "A", 1), ("q", "B", 0), ("z", "C", 0), ("z", "D", 0)])
    first = run_from_rows([("q", "A", 2.0), ("q", "B", 1.0), ("z", "C", 2.0), ("z", "D", 1.0)])
    tied = run_from_rows([("q", "A", 2.0), ("q", "B", 1.0), ("z", "C", 1.0), ("z", "D", 1.0)])
    import warnings as py_warnings

    with py_warnings.catch_warnings(record=True) as caught:
        py_warnings.simplefilter("always")
        _decompose(qrels, first, tied, measure="ndcg_cut_3", depth=2)
    warnings = [str(w.message) for w in caught]
    assert not [w for w in warnings if "<ideal" in w or "reordered" in w], warnings
    assert any("1 of 2 queries" in w and "all scores equal" in w for w in warnings), warnings
