"""Property tests: random qrels/runs with ties, graded and negative labels, against pytrec_eval."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from needs import required
from oracles import pytrec_inputs

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measures

pytrec_eval = required(
    "pytrec_eval", "pytrec_eval is an independent oracle of trec_eval's measures (pip install .[test])"
)

QIDS = [f"q{i}" for i in range(5)]
DOCS = [f"d{i:02d}" for i in range(25)] + ["D7", "a", "zz"]
SCORES = [0.0, 0.5, 1.0, 1.0, 1.5, 2.0, 2.5, -1.0, 1e-3]  # few values: many exact ties
MEASURES = ["ndcg_cut.3,10", "ndcg", "P.5", "recall.5,20", "map", "recip_rank"]
ORACLE = {"ndcg_cut.3,10", "ndcg", "P.5", "recall.5,20", "map", "recip_rank"}


@st.composite
def collections(draw):
    qrels, run = [], []
    for q in QIDS:
        if draw(st.booleans()):
            docs = draw(st.lists(st.sampled_from(DOCS), unique=True, min_size=1, max_size=12))
            labels = [draw(st.sampled_from([-1, 0, 0, 1, 2, 3])) for _ in docs]
            if all(label < 0 for label in labels):
                # trec_eval 9.x (inside pytrec_eval) reads rel_levels[-1] for such a query and can hang;
                # that case is tested by hand in test_malformed_inputs.py.
                labels[0] = 0
            qrels += [(q, d, label) for d, label in zip(docs, labels)]
        if draw(st.integers(0, 4)):  # most queries retrieved something
            docs = draw(st.lists(st.sampled_from(DOCS), unique=True, min_size=1, max_size=20))
            run += [(q, d, draw(st.sampled_from(SCORES))) for d in docs]
    if not qrels:
        qrels = [("q0", "d00", 1)]
    if not run:
        run = [("q0", "d01", 1.0)]
    return qrels, run


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
@given(collections(), st.sampled_from([1, 2, 3]))
def test_per_query_values_equal_pytrec_eval(data, level):
    qrels_rows, run_rows = data
    qrels, run = qrels_from_rows(qrels_rows), run_from_rows(run_rows)
    ours = evaluate(
        qrels,
        run,
        parse_measures(MEASURES),
        EvalSettings(relevance_level=level, score_precision="float64", allow_no_common=True),
    )
    q, r = pytrec_inputs(qrels.frame, run.frame)
    oracle = pytrec_eval.RelevanceEvaluator(q, ORACLE, relevance_level=level).evaluate(r)
    wide = ours.wide()
    assert set(wide.index) == set(oracle)  # queries in both run and qrels
    for qid, row in wide.iterrows():
        for name, value in row.items():
            assert value == pytest.approx(oracle[qid][name], abs=1e-9), (qid, name)


@settings(max_examples=100, deadline=None)
@given(collections())
def test_complete_averages_over_all_qrels_queries(data):
    qrels_rows, run_rows = data
    qrels, run = qrels_from_rows(qrels_rows), run_from_rows(run_rows)
    plain = evaluate(qrels, run, parse_measures(["map", "num_q"]), EvalSettings(allow_no_common=True))
    full = evaluate(qrels, run, parse_measures(["map", "num_q"]), EvalSettings(complete=True, allow_no_common=True))
    n_qrels = len({q for q, _, _ in qrels_rows})
    assert full.aggregate["num_q"] == n_qrels
    if plain.aggregate["num_q"]:
        assert full.aggregate["map"] == pytest.approx(plain.aggregate["map"] * plain.aggregate["num_q"] / n_qrels)


@settings(max_examples=100, deadline=None)
@given(collections(), st.randoms(use_true_random=False))
def test_file_order_and_rank_column_do_not_matter(data, rnd):
    qrels_rows, run_rows = data
    shuffled = list(run_rows)
    rnd.shuffle(shuffled)
    m = parse_measures(MEASURES + ["judged.5"])
    anyway = EvalSettings(allow_no_common=True)  # generated runs may share no query with the qrels
    a = evaluate(qrels_from_rows(qrels_rows), run_from_rows(run_rows), m, anyway).aggregate
    b = evaluate(qrels_from_rows(qrels_rows), run_from_rows(shuffled), m, anyway).aggregate
    assert a == b


#: every measure pytrec_eval (trec_eval 9.0.8's C code) offers, except the non-numeric runid/relstring
PYTREC_ALL = [
    "11pt_avg",
    "G",
    "P",
    "Rndcg",
    "Rprec",
    "Rprec_mult",
    "binG",
    "bpref",
    "gm_bpref",
    "gm_map",
    "infAP",
    "iprec_at_recall",
    "map",
    "map_cut",
    "ndcg",
    "ndcg_cut",
    "ndcg_rel",
    "num_nonrel_judged_ret",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "recall",
    "recip_rank",
    "relative_P",
    "set_F",
    "set_P",
    "set_map",
    "set_recall",
    "set_relative_P",
    "success",
    "utility",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), st.sampled_from([1, 2, 3]), st.booleans())
def test_every_pytrec_eval_measure_per_query(data, level, judged_only):
    """All of pytrec_eval's measures at their default parameters, per query, with ties and graded labels."""
    qrels_rows, run_rows = data
    qrels, run = qrels_from_rows(qrels_rows), run_from_rows(run_rows)
    ours = evaluate(
        qrels,
        run,
        parse_measures(PYTREC_ALL),
        EvalSettings(relevance_level=level, score_precision="float64", judged_only=judged_only, allow_no_common=True),
    )
    q, r = pytrec_inputs(qrels.frame, run.frame)
    oracle = pytrec_eval.RelevanceEvaluator(
        q, set(PYTREC_ALL), relevance_level=level, judged_docs_only_flag=judged_only
    ).evaluate(r)
    wide = ours.wide()
    assert set(wide.index) == set(oracle)
    assume(oracle)  # no query in both: checked above, nothing more to compare
    names = set(next(iter(oracle.values())))
    assert names <= set(wide.columns), names - set(wide.columns)
    for qid in wide.index:
        for name in names:
            want, got = oracle[qid][name], wide.at[qid, name]
            assert got == pytest.approx(want, abs=1e-12, nan_ok=True), (qid, name, got, want)
