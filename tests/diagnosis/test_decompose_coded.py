"""The depth curve's coded evaluation (``_CodedCandidates``: candidate rows coded once, each reordering a
permutation of them) gives the figures of building each reordered run and evaluating it with ``evaluate``, to the
last bit, under every setting that changes which queries are evaluated or how a list is cut."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.diagnosis.decompose import _CodedCandidates, _curve_values, candidate_table
from toolkit.evaluation.evaluate import coded_values, prepare_judgments
from toolkit.measures.names import EvalSettings, parse_measures


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    qrels_rows = []
    for q in range(12):  # q10, q11: judged but absent from the runs (placeholders under -c, trec_eval 10)
        for d in rng.choice(60, size=15, replace=False):
            qrels_rows.append((f"q{q}", f"d{d}", int(rng.choice([-1, 0, 0, 1, 2, 3]))))
    qrels_rows.append(("q3", "ceci_nest_pas_un_docno", 2))  # the placeholder document judged (a run holds q3)
    qrels_rows.append(("q10", "ceci_nest_pas_un_docno", 2))  # and where trec_eval 10 ranks it (no run holds q10)
    first_rows, rr_rows = [], []
    for q in [*range(10), 99]:  # q99: not judged (trec_eval ignores it)
        docs = rng.choice(60, size=40, replace=False)
        scores = rng.integers(0, 8, size=40).astype(float)  # ties: doc id descending breaks them
        first_rows += [(f"q{q}", f"d{d}", s) for d, s in zip(docs, scores)]
        if q == 4:
            continue  # the reranker lacks q4
        order = np.argsort(scores, kind="stable")[::-1]
        top = [docs[i] for i in order[:20]]
        held = rng.permutation(top)[: 18 if q == 2 else 20]  # q2: two candidates dropped
        if q == 5:
            held = [*held, 999]  # a document that is no candidate
        rr_rows += [(f"q{q}", f"d{d}", float(len(held) - i)) for i, d in enumerate(held)]
    return (
        qrels_from_rows(qrels_rows, path="qrels"),
        run_from_rows(first_rows, path="first"),
        run_from_rows(rr_rows, path="rr"),
    )


SETTINGS = [
    EvalSettings(),
    EvalSettings(complete=True),
    EvalSettings(complete=True, trec_eval=10),
    EvalSettings(trec_eval=10, relevance_level=2),
    EvalSettings(complete=True, max_docs=15, score_precision="float64"),
    EvalSettings(complete=True, trec_eval=10, judged_only=True),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("measure", ["ndcg_cut_10", "P_5", "recall_20", "map", "recip_rank", "ndcg"])
def test_coded_curve_is_the_evaluated_reordered_run(seed, settings, measure):
    qrels, first, rr = _inputs(seed)
    prepared = prepare_judgments(qrels)
    cands = candidate_table(qrels, first, rr, 20, settings, measure)
    coded = _CodedCandidates(prepared, cands)
    qids = [f"q{q}" for q in range(12)] + ["q99", "q3"]
    for k in (1, 3, 10, 20):
        for order in ("reranked", "best"):
            fast = _curve_values(coded, cands, k, order, prepared, measure, settings, qids)
            slow = _curve_values(None, cands, k, order, prepared, measure, settings, qids)
            assert fast.index.tolist() == slow.index.tolist()
            np.testing.assert_array_equal(fast.to_numpy(), slow.to_numpy(), strict=True)
            assert fast.to_numpy().tobytes() == slow.to_numpy().tobytes()  # the same bits, NaN and -0.0 included


def test_a_run_without_a_judged_query_is_left_to_evaluate():
    qrels = _inputs(0)[0]
    prepared = prepare_judgments(qrels)
    m = parse_measures(["ndcg_cut_10"])[0]
    none = np.zeros(0, dtype=np.int32)
    assert coded_values(prepared, none, none, np.zeros(0, dtype=np.int64), m, EvalSettings()) is None
    allowed = dataclasses.replace(EvalSettings(), allow_no_common=True)
    values = coded_values(prepared, none, none, np.zeros(0, dtype=np.int64), m, allowed)
    assert values is not None and not values.any()


@pytest.mark.parametrize("measure", ["ndcg_cut_10", "P_5"])
def test_candidate_labels_from_the_prepared_index(measure):
    import pandas as pd

    qrels, first, rr = _inputs(3)
    settings = EvalSettings(trec_eval=10)
    joined = candidate_table(qrels, first, rr, 20, settings, measure)
    coded = candidate_table(qrels, first, rr, 20, settings, measure, prepare_judgments(qrels))
    pd.testing.assert_frame_equal(coded, joined)
    assert joined["gain"].nunique() >= 3  # candidates of several grades met


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("depth", [5, 20, 30])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_candidates_from_the_alignment_are_the_join(seed, depth, precision):
    """In a diagnosis (a ``Workspace``) the candidates' reranked ranks are read from the runs' alignment: the
    same table, dtypes included, as the join of the ids' strings (a query the reranker lacks, dropped candidates,
    a document that is no candidate, a query only the reranker has, lists longer than the depth)."""
    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.data.workspace import Workspace
    from toolkit.diagnosis.decompose import _aligned_candidates, _joined_candidates

    _, first, rr = _inputs(seed)
    foreign = pd.DataFrame({"query_id": ["q77"] * 3, "doc_id": ["d1", "d2", "d3"], "score": [3.0, 2.0, 1.0]})
    for run in (rr, Run(frame=pd.concat([rr.frame, foreign], ignore_index=True), path="rr+")):
        aligned = _aligned_candidates(first, run, depth, precision, work=Workspace())
        assert aligned is not None
        pd.testing.assert_frame_equal(aligned[0], _joined_candidates(first, run, depth, precision))
        # the rows are the first stage's top ``depth`` alone (shareable) unless the run holds more in a query
        assert (aligned[1] is None) == (depth <= 21)  # q5 holds 21


def test_candidates_of_a_run_holding_a_document_twice_are_joined():
    """A reranked run that holds a document twice in a query: no table from the alignment (the join's rows)."""
    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.data.workspace import Workspace
    from toolkit.diagnosis.decompose import _aligned_candidates

    _, first, rr = _inputs(0)
    twice = Run(frame=pd.concat([rr.frame, rr.frame.iloc[:1]], ignore_index=True), path="rr2")
    assert _aligned_candidates(first, twice, 20, "float32", work=Workspace()) is None


def test_stable_sort_is_lexsort_of_query_and_within():
    """The int64-key sort of the depth curve orders the rows as ``np.lexsort`` does, ties in row order, for whole
    numbers (ranks, negated gains, a large missing-rank offset) and falls back on fractions and NaN."""
    import numpy as np

    from toolkit.diagnosis.decompose import _stable_sort

    rng = np.random.default_rng(7)
    qidx = np.sort(rng.integers(0, 50, 2000)).astype(np.int32)
    cases = [
        rng.integers(1, 20, 2000).astype(np.float64),
        -rng.choice([0.0, 1.0, 3.0, 7.0], 2000),
        np.where(rng.random(2000) < 0.3, 2.0**40 + rng.integers(1, 100, 2000), rng.integers(1, 100, 2000)),
        rng.choice([0.0, 0.5, -1.25], 2000),
        np.where(rng.random(2000) < 0.1, np.nan, rng.integers(1, 5, 2000).astype(np.float64)),
    ]
    for within in cases:
        assert np.array_equal(_stable_sort(qidx, within), np.lexsort((within, qidx)))


@pytest.mark.parametrize("measure", ["ndcg_cut_10", "map"])
def test_runs_reranked_from_one_first_stage_share_its_candidates(measure):
    """Within one diagnosis (one ``Workspace``), the codes of the first stage's top rows and the best order's curve
    are computed once for the runs reranked from it: each run's decomposition is still the one it has alone
    (without sharing), whichever run comes first, a run holding more than the depth in a query (its candidates
    are not the first stage's alone) among them."""
    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.data.workspace import NO_WORKSPACE, Workspace
    from toolkit.diagnosis.decompose import DecompositionSettings, decompose

    qrels, first, rr = _inputs(4)
    frame = rr.frame.copy()
    frame["score"] = -frame["score"]  # another order of the same candidates
    reversed_ = Run(frame=frame, path="reversed")
    deep = _inputs(5)[2]  # holds 20 per query: deeper than 10
    qids = [f"q{q}" for q in range(12)]
    prepared = prepare_judgments(qrels)
    settings = EvalSettings()

    on = DecompositionSettings(measure, settings, settings, qids, (1, 5, 10))

    def run_all(runs, work=NO_WORKSPACE):
        return [decompose(prepared, first, r, d, on, work=work) for r, d in runs]

    runs = [(rr, 25), (deep, 10), (reversed_, 25), (rr, 10)]
    alone = run_all(runs)
    work = Workspace()
    together = run_all(runs, work)
    assert work.has("candidate codes", (prepared, first), (25, settings.score_precision))
    for a, b in zip(alone, together):
        pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
        pd.testing.assert_frame_equal(a.curve, b.curve, check_exact=True)
    assert not alone[0].curve.equals(alone[2].curve)
