"""Per-run rerank depth: detected from rank_llm-style runs (reranked top k + the first stage's tail), given per
run, and what follows from it (the tail is never introduced; the ceiling bounds an oracle exactly; recall
only at the depths in use). Hand-built runs; the DL19 check is in test_depth_dl19.py."""

from __future__ import annotations

import itertools
import random

import pytest
from rankllm import collection, first_stage_lists, oracle_order, rank_llm_run

from toolkit.data.records import run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, check_reordering, diagnose
from toolkit.diagnosis.depths import DETECT_SHARE, classify_documents, detect_depth, rerank_shapes
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.errors import ConfigError, DepthNotDetectedError


def _shuffle(seed):
    def order(q, top):
        out = list(top)
        random.Random(f"{seed}-{q}").shuffle(out)
        if out[-1] == top[-1]:  # the last candidate moves: the rerank reaches the depth in every query
            out[-1], out[0] = out[0], out[-1]
        return out

    return order


def test_detected_depth_of_a_rank_llm_run_with_short_and_unchanged_queries():
    qrels, first = collection(n_queries=12, length=60, short={"q3": 12})
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 20, unchanged={"q5"})  # top 20 reversed, the rest in first-stage order
    shapes = rerank_shapes(first, rr)
    # reversing the top 20 changes ranks 1 and 20; q3 has 12 documents (ranks 1 and 12); q5 is unchanged
    assert shapes.loc["q0", "last_change"] == 20 and shapes.loc["q3", "last_change"] == 12
    assert shapes.loc["q5", "last_change"] == 0 and shapes["reorders"].all()
    det = detect_depth(first, rr)
    assert (det.depth, det.held, det.queries, det.unchanged) == (20, 12, 12, 1)
    assert "detected on 12 of 12 shared queries" in det.describe()
    d = diagnose(DiagnosisInputs(qrels, first, {"rv20": rr}), DiagnosisOptions(worst_n=0, permutations=200))
    p = d.primary
    assert (p.depth, p.depth_from) == (20, "detected")
    run = d.summary()["reranked_runs"][0]
    assert (run["depth"], run["depth_from"]) == (20, "detected")
    assert run["depth_detection"]["share"] == 1.0 and "repeat the first stage" in run["depth_detection"]["rule"]


def test_detection_with_ties_in_the_first_stage():
    """Equal first-stage scores in pairs; the tail written in another order among equal scores (docid
    ascending, as Lucene breaks ties) still repeats the first stage."""
    _, first = collection(n_queries=8, length=40, ties=True)
    generated = {}
    for q, d, _ in first.frame.itertuples(index=False):
        generated.setdefault(q, []).append(d)  # ascending doc ids: not trec_eval's order within a tie
    trec = first_stage_lists(first.frame.itertuples(index=False))
    assert generated["q0"][:2] == trec["q0"][:2][::-1]
    rr = rank_llm_run(generated, 20, order=_shuffle(1))
    det = detect_depth(first, rr)
    assert det.depth == 20 and det.held == 8
    chk = check_reordering(first, rr, 20)
    assert chk["only_reorders"] and chk["tail_documents"] == 8 * 20 and chk["introduced_documents"] == 0


def test_promoted_from_the_bottom_or_outside_the_first_stage():
    """A run that moves a document from the bottom into its top reranks its whole list; one that holds documents
    the first stage lacks has no depth (the rule holds nowhere)."""
    qrels, first = collection(n_queries=10, length=30)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 10)
    rows = [tuple(r) for r in rr.frame.itertuples(index=False)]
    # in every query but one, swap rank 1 with rank 30 (a document from the bottom promoted to the top)
    bad = []
    for q in lists:
        order = [d for _, d, _ in sorted((r for r in rows if r[0] == q), key=lambda r: -r[2])]
        if q != "q0":
            order[0], order[-1] = order[-1], order[0]
        bad += [(q, d, 1.0 / (i + 1)) for i, d in enumerate(order)]
    det = detect_depth(first, run_from_rows(bad))
    # the rule then holds only at k = 30 (the whole list) for every query: 30 is detected
    assert det.depth == 30
    outside = run_from_rows([(q, d + "-new", s) for q, d, s in bad])
    none = detect_depth(first, outside)
    assert none.depth is None and none.held == 0 and "no depth detected" in none.describe()
    # no silent fallback to the longest list (once: depth_from "longest list", a note only): an error that
    # names the run and the keyword that gives its depth
    with pytest.raises(DepthNotDetectedError) as err:
        diagnose(DiagnosisInputs(qrels, first, {"x": outside}), DiagnosisOptions(worst_n=0, permutations=200))
    assert err.value.run == "x" and err.value.detection["depth"] is None
    assert "the rerank depth of x (<memory>) is not given and cannot be detected" in str(err.value)
    assert "no depth detected" in str(err.value) and "depth={'x': K}" in str(err.value)
    assert isinstance(err.value, ConfigError)
    assert DETECT_SHARE == 0.95


def test_the_tail_is_never_introduced():
    qrels, first = collection(n_queries=6, length=50)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 20)
    kinds = classify_documents(first, rr, 20)
    assert (kinds["kind"] == "tail").sum() == 6 * 30 and (kinds["kind"] == "candidate").sum() == 6 * 20
    chk = check_reordering(first, rr, 20)
    assert chk["only_reorders"] and chk["introduced_documents"] == 0 and chk["tail_documents"] == 180
    d = diagnose(DiagnosisInputs(qrels, first, {"rv20": rr}), DiagnosisOptions(depth=20, worst_n=0, permutations=200))
    assert d.reorder_check["only_reorders"] and not any("introduced" in n for n in d.notes)
    assert d.primary.decomposition.introduced == 0 and d.primary.decomposition.uncovered == 0
    # a document from below the depth moved into the top is introduced; so is one the first stage lacks
    rows = [tuple(r) for r in rr.frame.itertuples(index=False)]
    q0 = sorted((r for r in rows if r[0] == "q0"), key=lambda r: -r[2])
    moved = [r for r in rows if r[0] != "q0"] + [
        ("q0", d, 1.0 / (i + 1)) for i, d in enumerate([q0[30][1]] + [r[1] for r in q0 if r[1] != q0[30][1]])
    ]
    chk = check_reordering(first, run_from_rows(moved), 20)
    assert not chk["only_reorders"] and chk["outside_first_stage"] == 0 and chk["introduced_per_query"]["q0"] >= 1
    extra = run_from_rows(rows + [("q1", "stranger", 0.0001)])
    chk = check_reordering(first, extra, 20)
    assert chk["introduced_documents"] == 1 and chk["outside_first_stage"] == 1


@pytest.mark.parametrize("measure", ["ndcg_cut.10", "map", "recall.50", "P.5"])
@pytest.mark.parametrize("k", [10, 20])
def test_oracle_of_depth_k_reaches_the_depth_k_ceiling_and_identity_loses_nothing(measure, k):
    qrels, first = collection(n_queries=10, length=50, seed=3, short={"q2": 15})
    lists = first_stage_lists(first.frame.itertuples(index=False))
    oracle = rank_llm_run(lists, k, order=oracle_order(qrels))
    identity = rank_llm_run(lists, k, order=lambda q, top: top)
    d = diagnose(
        DiagnosisInputs(qrels, first, {"oracle": oracle, "identity": identity}),
        DiagnosisOptions(depth=k, measure=measure, worst_n=0, permutations=200),
    )
    o, i = (d.per_query[d.per_query["system"] == n].set_index("query_id") for n in ("oracle", "identity"))
    m = d.measure
    # the oracle is the best order of the top k followed by the tail: exactly the ceiling, per query
    assert o[f"reranked_{m}"].to_numpy() == pytest.approx(o[f"ceiling_{m}"].to_numpy(), abs=1e-12)
    assert o["lost_in_reranking"].abs().max() < 1e-12
    # the identity reranker returns the first stage: it changes nothing, so reranking hurt nothing
    assert i[f"reranked_{m}"].to_numpy() == pytest.approx(i[f"first_{m}"].to_numpy(), abs=1e-12)
    assert (i["diagnosis"] != "reranker-hurt").all() and (i[f"delta_{m}"].abs() < 1e-12).all()
    assert d.pipelines[1].behaviour["unchanged_queries"] == 1.0
    # the oracle's depth curve: at k it is the ceiling
    curve = d.primary.decomposition.curve.set_index("depth")
    assert curve.loc[k, "reranked"] == pytest.approx(curve.loc[k, "ceiling"], abs=1e-12)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("measure", ["ndcg_cut.10", "map", "P.10", "recall.30"])
def test_the_ceiling_never_decreases_with_depth(seed, measure):
    qrels, first = collection(n_queries=8, length=60, seed=seed, ties=seed % 2 == 1, short={"q1": 7})
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 50, order=_shuffle(seed))
    d = diagnose(
        DiagnosisInputs(qrels, first, rr),
        DiagnosisOptions(depth=50, measure=measure, curve_depths=range(1, 51), worst_n=0, permutations=200),
    )
    ceiling = d.primary.decomposition.curve["ceiling"].tolist()
    assert len(ceiling) == 50 and all(b >= a - 1e-12 for a, b in itertools.pairwise(ceiling))


def test_depth_per_run_and_recall_only_at_the_depths_in_use():
    qrels, first = collection(n_queries=6, length=100)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rv20, rv100 = rank_llm_run(lists, 20), rank_llm_run(lists, 100, order=_shuffle(2))
    d = diagnose(
        DiagnosisInputs(qrels, first, {"rv100": rv100, "rv20": rv20}), DiagnosisOptions(worst_n=0, permutations=200)
    )
    assert {p.name: (p.depth, p.depth_from) for p in d.pipelines} == {
        "rv100": (100, "detected"),
        "rv20": (20, "detected"),
    }
    # as the longest list, rv20 would be a rerank of 100; said per run, its own depth
    given = diagnose(
        DiagnosisInputs(qrels, first, {"rv100": rv100, "rv20": rv20}),
        DiagnosisOptions(depth={"rv20": 100}, worst_n=0, permutations=200),
    )
    assert {p.name: (p.depth, p.depth_from) for p in given.pipelines} == {
        "rv100": (100, "detected"),
        "rv20": (100, "given"),
    }
    keys = [r["key"] for r in d.headline]  # the primary run, rv100: R@100 only
    assert [k for k in keys if k.startswith("recall")] == ["recall_100"]
    twenty = diagnose(
        DiagnosisInputs(qrels, first, {"rv20": rv20, "rv100": rv100}), DiagnosisOptions(worst_n=0, permutations=200)
    ).headline
    assert [(r["key"], r["reranked"] is None) for r in twenty if r["key"].startswith("recall")] == [
        ("recall_20", False),
        ("recall_100", True),  # a depth in use (rv100's), shown for the first stage only
    ]
    assert sorted(d.per_query.filter(like="recall_").columns) == [
        "first_recall_100",
        "first_recall_20",
        "reranked_recall_100",
        "reranked_recall_20",
    ]
    assert not any("1000" in n for n in d.notes)
    with pytest.raises(ConfigError, match=r"depth names no reranked run: 'rv50' \(reranked runs: rv100, rv20\)"):
        diagnose(DiagnosisInputs(qrels, first, {"rv100": rv100, "rv20": rv20}), DiagnosisOptions(depth={"rv50": 50}))
    with pytest.raises(ConfigError, match=r"depth 200 for rv20 is larger than the lists of its first stage"):
        diagnose(DiagnosisInputs(qrels, first, {"rv100": rv100, "rv20": rv20}), DiagnosisOptions(depth={"rv20": 200}))


def test_a_sidecar_depth_wins_over_detection():
    from toolkit.diagnosis.reranked import reranked_input

    qrels, first = collection(n_queries=4, length=30)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 10)
    r = reranked_input("rr", rr, {"first": first}, meta={"depth": 30, "reranker": {"model": "m"}})
    d = diagnose(DiagnosisInputs(qrels, first, [r]), DiagnosisOptions(worst_n=0, permutations=200))
    assert (d.primary.depth, d.primary.depth_from) == (30, "sidecar")
    assert d.primary.detection["depth"] == 10  # detection is still recorded beside it


def test_repr_states_each_runs_depth_and_source():
    from toolkit.api.diagnosis import Diagnosis

    qrels, first = collection(n_queries=4, length=30)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    d = diagnose(
        DiagnosisInputs(qrels, first, {"rv10": rank_llm_run(lists, 10), "all": rank_llm_run(lists, 30)}),
        DiagnosisOptions(worst_n=0),
    )
    text = repr(Diagnosis(d))
    assert "rv10 (top 10 (detected: below rank 10 it repeats first stage's order in 4 of 4 queries))" in text
    assert "all (top 30 (detected" in text


@pytest.mark.parametrize("hashes", ["colliding", "equal per block"])
def test_alignment_falls_back_to_the_strings_when_hashes_collide(monkeypatch, hashes):
    """The reranked run's documents are found among the first stage's top rows by hashed (query block,
    document) pairs; when two pairs share a hash, or a hit is another document, the strings decide, and the
    alignment is the same."""
    import numpy as np

    from toolkit.diagnosis import depths

    _, first = collection(n_queries=6, length=30, short={"q3": 8})
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rr = rank_llm_run(lists, 10, unchanged={"q5"})
    expected = depths._align(first, rr, "float32")
    if hashes == "colliding":  # every document hashes alike: the first stage's pairs of a block share hashes
        monkeypatch.setattr(depths, "string_hashes", lambda c: np.zeros(len(c), np.uint64))
    else:  # a block's pairs hash alike in the reranked run alone: its hits are other documents
        real = depths._pair_hashes
        calls = []

        def pair_hashes(blocks, docs):
            calls.append(1)
            return real(blocks, docs) if len(calls) % 2 else real(blocks, docs[:1].take([0] * len(docs)))

        monkeypatch.setattr(depths, "_pair_hashes", pair_hashes)
    got = depths._align(first, rr, "float32")
    for name in ("first_rank", "first_group", "block_in_first", "row_in_first", "match"):
        assert np.array_equal(getattr(got, name), getattr(expected, name)), name
    assert got.ordered.equals(expected.ordered)


@pytest.mark.parametrize("duplicate", [False, True])
def test_in_first_top_is_membership_in_the_first_stages_top_k(duplicate):
    """The hashed lookup (shared with the alignments) and the fallback by string codes (a document twice in a
    query's top k: two pairs share a hash) both give membership in the first stage's top k in trec_eval
    order; queries the first stage lacks and documents below k are not in it."""
    import pandas as pd

    from toolkit.data.workspace import Workspace
    from toolkit.diagnosis.depths import in_first_top

    rows = [(f"q{q}", f"d{(q * 7 + i) % 50}", float(40 - i)) for q in range(6) for i in range(40)]
    if duplicate:
        rows.append(("q2", "d14", 38.5))  # d14 is q2's document at rank 1: now also at rank 3
    first = run_from_rows(rows)
    asked = [(f"q{q}", f"d{d}") for q in range(7) for d in range(0, 50, 3)] + [("q2", "d14"), ("q4", "zz")]
    frame = pd.DataFrame(asked, columns=["query_id", "doc_id"]).astype(str)
    for k in (1, 5, 25):
        top = {(q, d) for q, d, s in rows if sum(1 for q2, _, s2 in rows if q2 == q and s2 > s) < k}
        expected = [(q, d) in top for q, d in asked]
        assert in_first_top(first, frame, k).tolist() == expected
        work = Workspace()
        assert in_first_top(first, frame, k, work=work).tolist() == expected
        assert in_first_top(first, frame, k, work=work).tolist() == expected
