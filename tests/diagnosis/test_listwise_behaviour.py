"""How a reranker treats its candidates, from the runs alone: the promotion profile against a hand-computed
example, unchanged queries, windows returned in their input order."""

from __future__ import annotations

import pytest

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.diagnosis.listwise_behaviour import (
    buckets,
    listwise_behaviour,
    promotion_profile,
    window_spans,
    windows_in_order,
)


def _first(q, n):
    return [(q, f"{q}-{r:02d}", float(100 - r)) for r in range(1, n + 1)]  # doc q-RR at first-stage rank RR


def _run(q, ranks, n):
    """The documents at first-stage ranks ``ranks`` in this order, then the rest of 1..n in first-stage order."""
    order = list(ranks) + [r for r in range(1, n + 1) if r not in ranks]
    return [(q, f"{q}-{r:02d}", 1.0 / (i + 1)) for i, r in enumerate(order)]


def example():
    """Two queries, 25 candidates each (depth 25: buckets 1-10, 11-20, 21-25).

    a: relevant (label >= 1) at first-stage ranks 3 (grade 1), 12 (3), 15 (2), 19 (1), 24 (2). The reranked run
       puts ranks 12, 3 first; its top 10 then holds 1, 2, 4, ..., 9: of the relevant ones 3 and 12.
       Best order: 12 (3), 15 (2), 24 (2), 3 (1), 19 (1), then non-relevant in first-stage order: all five in
       its top 10.
    b: relevant at 2 (grade 2) and 21 (grade 1); the run leaves the order unchanged (top 10 = ranks 1-10):
       rank 2 in, 21 out. Best order: 2, 21 first: both in.
    """
    grades = {("a", 3): 1, ("a", 12): 3, ("a", 15): 2, ("a", 19): 1, ("a", 24): 2, ("b", 2): 2, ("b", 21): 1}
    qrels = qrels_from_rows([(q, f"{q}-{r:02d}", g) for (q, r), g in grades.items()] + [("a", "a-01", 0)])
    first = run_from_rows(_first("a", 25) + _first("b", 25))
    rr = run_from_rows(_run("a", [12, 3], 25) + _run("b", [], 25))
    return qrels, first, rr


def test_promotion_profile_by_hand():
    qrels, first, rr = example()
    prof = promotion_profile(qrels, first, [rr], 25, ["a", "b"], level=1)
    by = {b["bucket"]: b for b in prof}
    assert list(by) == ["1-10", "11-20", "21-25"]
    # 1-10: a's 3 and b's 2, both in the reranked top 10 and the best order's
    assert (by["1-10"]["relevant"], by["1-10"]["reranked_top_10"], by["1-10"]["ceiling_top_10"]) == (2, 2, 2)
    # 11-20: a's 12, 15, 19: the run promotes 12 only; the best order all three
    assert (by["11-20"]["relevant"], by["11-20"]["reranked_top_10"], by["11-20"]["ceiling_top_10"]) == (3, 1, 3)
    assert by["11-20"]["reranked_share"] == pytest.approx(1 / 3) and by["11-20"]["ceiling_share"] == 1.0
    # 21-25: a's 24 and b's 21: never promoted by the run; both by the best order
    assert (by["21-25"]["relevant"], by["21-25"]["reranked_top_10"], by["21-25"]["ceiling_top_10"]) == (2, 0, 2)
    # at level 2: a's 12, 15, 24 and b's 2
    by2 = {b["bucket"]: b for b in promotion_profile(qrels, first, [rr], 25, ["a", "b"], level=2)}
    assert [by2[k]["relevant"] for k in by2] == [1, 2, 1] and by2["11-20"]["reranked_top_10"] == 1
    # with two repeats, the mean count: the second repeat promotes nothing from 11-20
    same = run_from_rows(_run("a", [], 25) + _run("b", [], 25))
    two = {b["bucket"]: b for b in promotion_profile(qrels, first, [rr, same], 25, ["a", "b"])}
    assert two["11-20"]["reranked_top_10"] == 0.5 and two["1-10"]["reranked_top_10"] == 2


def test_unchanged_queries_and_the_profile_in_the_diagnosis():
    qrels, first, rr = example()
    b = listwise_behaviour(qrels, first, [rr], 25, ["a", "b"])
    assert (b["unchanged_queries"], b["unchanged_query_count"], b["queries_compared"]) == (0.5, 1, 2)
    d = diagnose(DiagnosisInputs(qrels, first, {"llm": rr}), DiagnosisOptions(depth=25, worst_n=0, permutations=100))
    behaviour = d.summary()["reranked_runs"][0]["behaviour"]
    assert behaviour["unchanged_queries"] == 0.5 and behaviour["promotion_profile"][1]["reranked_top_10"] == 1
    assert "windows" not in behaviour


def test_window_spans_as_rank_llm_slides_them():
    assert window_spans(100, 20, 10) == [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60)] + [
        (30, 50),
        (20, 40),
        (10, 30),
        (0, 20),
    ]
    assert window_spans(20, 20, 10) == [(0, 20)]
    assert window_spans(25, 10, 5) == [(15, 25), (10, 20), (5, 15), (0, 10)]
    assert buckets(25) == [(1, 10), (11, 20), (21, 25)]


def test_windows_in_input_order():
    """Depth 20, window 10, stride 5: windows at ranks 11-20, 6-15, 1-10. Query a reverses its top 5 (only the
    window at 1-10 changes), b reverses ranks 6-10 (the windows at 6-15 and 1-10 change), c is unchanged."""
    first = run_from_rows(_first("a", 30) + _first("b", 30) + _first("c", 30))
    rr = run_from_rows(
        _run("a", [5, 4, 3, 2, 1], 30) + _run("b", [1, 2, 3, 4, 5, 10, 9, 8, 7, 6], 30) + _run("c", [], 30)
    )
    same, total = windows_in_order(first, rr, 20, 10, 5, ["a", "b", "c"])
    assert (same, total) == (2 + 1 + 3, 9)
    qrels = qrels_from_rows([("a", "a-01", 1), ("b", "b-01", 1), ("c", "c-01", 1)])
    d = diagnose(
        DiagnosisInputs(qrels, first, {"llm": rr}),
        DiagnosisOptions(depth=20, window=10, stride=5, worst_n=0, permutations=100),
    )
    w = d.primary.behaviour["windows"]
    assert (w["window"], w["stride"], w["windows"], w["in_input_order"]) == (10, 5, 9, 6)
    assert w["share"] == pytest.approx(6 / 9)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("level", [0, 1, 2])
def test_profile_from_the_alignment_is_the_joined_one(seed, level):
    """In a diagnosis (a ``Workspace``, the judgments prepared) the profile is read from the runs' alignment and
    the judgments' index: the figures of joining the ids' strings (negative labels, unjudged candidates, a query
    the reranker lacks, a document that is no candidate, queries left out, repeats)."""
    import numpy as np

    from toolkit.data.workspace import Workspace
    from toolkit.evaluation.evaluate import prepare_judgments

    rng = np.random.default_rng(seed)
    qrels_rows, first_rows, runs = [], [], [[], []]
    for q in range(8):
        for d in rng.choice(50, size=20, replace=False):
            qrels_rows.append((f"q{q}", f"d{d}", int(rng.choice([-2, -1, 0, 1, 2, 3]))))
        docs = rng.choice(50, size=40, replace=False)
        scores = rng.integers(0, 6, size=40).astype(float)  # ties
        first_rows += [(f"q{q}", f"d{d}", s) for d, s in zip(docs, scores)]
        for run in runs:
            if q == 3:
                continue
            held = [f"d{d}" for d in rng.permutation(docs[:25])] + (["x1"] if q == 5 else [])
            run += [(f"q{q}", d, float(len(held) - i)) for i, d in enumerate(held)]
    qrels = qrels_from_rows(qrels_rows, path="qrels")
    first = run_from_rows(first_rows, path="first")
    reranked = [run_from_rows(rows, path=f"rr{i}") for i, rows in enumerate(runs)]
    qids = [f"q{q}" for q in range(8) if q != 6]
    joined = promotion_profile(qrels, first, reranked, 25, qids, level)
    prepared = prepare_judgments(qrels)
    work = Workspace()
    read = promotion_profile(qrels, first, reranked, 25, qids, level, prepared=prepared, work=work)
    # each run on its own, after the other: the first stage's candidates and best order computed once
    one = [promotion_profile(qrels, first, [r], 25, qids, level, prepared=prepared, work=work) for r in reranked]
    fewer = promotion_profile(qrels, first, reranked[:1], 25, qids[:4], level, prepared=prepared, work=work)
    assert read == joined
    assert one == [promotion_profile(qrels, first, [r], 25, qids, level) for r in reranked]
    assert one[0] != one[1]  # the runs differ in what they promote
    assert fewer == promotion_profile(qrels, first, reranked[:1], 25, qids[:4], level)


def test_listwise_record_by_hand():
    """The sidecar's windows: repairs per kind with the queries they touched, the windows left in input order
    (no identifier read, or ranked as given; a "missing" repair can leave a window as it was), the probe's
    records and a record that is not twostage's left out."""
    from toolkit.diagnosis.listwise_behaviour import listwise_record

    def rec(q, perm, repairs, shuffle=0, window=0):
        return {"query_id": q, "shuffle": shuffle, "window": window, "pass": 1, "docs": list("abcde"[: len(perm)]),
                "permutation": perm, "repairs": repairs}  # fmt: skip

    meta = {
        "records": [
            rec("q1", [1, 2, 3], ["none_parsed"]),
            rec("q1", [2, 1], ["duplicates"], window=1),
            rec("q2", [1, 2, 3], []),
            rec("q2", [3, 1, 2], ["unknown", "missing"], window=1),
            rec("q3", [1, 2, 3], ["missing"]),
            rec("q4", [2, 1, 3], ["none_parsed"], shuffle=1),  # the order probe's: not the run's
            {"query_id": 5, "repairs": "x"},
        ]
    }
    got = listwise_record(meta)
    assert got == {
        "windows": 5,
        "passes": 1,
        "repaired": 4,
        "repairs": {
            "none_parsed": {"answers": 1, "queries": ["q1"]},
            "duplicates": {"answers": 1, "queries": ["q1"]},
            "unknown": {"answers": 1, "queries": ["q2"]},
            "missing": {"answers": 2, "queries": ["q2", "q3"]},
        },
        "left_in_input_order": {"count": 3, "none_parsed": 1, "answered": 2, "queries": {"q1": 1, "q2": 1, "q3": 1}},
        "unreadable": 1,
    }
    assert listwise_record({"depth": 10}) is None and listwise_record({"records": "x"}) is None
