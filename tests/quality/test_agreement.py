"""``quality.agreement``: the agreement of judgment sets already read (``agreement_of``), the core ``ts.agreement``
reads its inputs for; the runs are evaluated by the function the caller hands in."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import toolkit as ts
from toolkit.api.assessors import per_query
from toolkit.api.options import AgreementOptions
from toolkit.errors import ConfigError, InputFormatError, NoCommonQueriesError
from toolkit.quality.agreement import Agreement, agreement_of, judgment_set

QRELS_A = {f"q{q}": {f"d{d}": (d + q) % 3 for d in range(6)} for q in range(1, 7)}
QRELS_B = {q: {d: (g + 1) % 3 if d != "d0" else g for d, g in docs.items()} for q, docs in QRELS_A.items()}
QRELS_C = {q: {d: max(g - 1, 0) for d, g in docs.items()} for q, docs in QRELS_A.items()}
RUN_A = {f"q{q}": {f"d{d}": float((d * 7 + q) % 11) for d in range(6)} for q in range(1, 7)}
RUN_B = {f"q{q}": {f"d{d}": float((d * 5 + 2 * q) % 13) for d in range(6)} for q in range(1, 7)}
RUN_C = {q: {d: -s for d, s in r.items()} for q, r in RUN_A.items()}


def _sets(*qrels, names=("x", "y", "z")):
    read = [judgment_set(q) for q in qrels]
    return {n: f for n, (f, _) in zip(names, read)}, {n: s for n, (_, s) in zip(names, read)}


def _evaluate(judgments, queries, runs, measure):
    return per_query(judgments, queries, runs, measure, options=AgreementOptions().evaluation())


def test_agreement_of_is_what_ts_agreement_gives_on_the_same_judgments():
    sets, sources = _sets(QRELS_A, QRELS_B)
    runs = {"a": RUN_A, "b": RUN_B, "c": RUN_C}
    test = {"alpha": 0.1, "permutations": 300, "seed": 5, "correction": "bonferroni"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        core = agreement_of(sets, sources, labels=[0, 1, 2, 3], runs=runs, measure="P.3", evaluate=_evaluate, **test)
        verb = ts.agreement(QRELS_A, QRELS_B, runs, "P.3", names=["x", "y"], labels=[0, 1, 2, 3], **test)
    assert isinstance(core, Agreement) and ts.Agreement is Agreement
    assert core.to_json() == verb.to_json()
    assert core.to_text() == verb.to_text()
    assert core.first.labels == (0, 1, 2, 3) and core.rankings[0].test["permutations"] == 300


def test_the_runs_are_evaluated_by_the_function_handed_in_on_the_queries_every_set_judged():
    sets, sources = _sets(QRELS_A, {q: d for q, d in QRELS_B.items() if q != "q6"})
    asked = []

    def evaluate(judgments, queries, runs, measure):
        asked.append((sorted(queries), sorted(runs), measure, len(judgments)))
        rows = [(r, q, float(i) + 0.1 * k) for i, r in enumerate(runs) for k, q in enumerate(sorted(queries))]
        table = pd.DataFrame(rows, columns=["run", "query_id", "value"])
        table.attrs["measure"] = "my_measure"
        return table

    a = agreement_of(sets, sources, runs=[RUN_A, RUN_B], measure="M", evaluate=evaluate, permutations=50)
    common = [f"q{q}" for q in range(1, 6)]
    assert asked == [(common, ["run1", "run2"], "M", 36), (common, ["run1", "run2"], "M", 30)]  # a list, named
    ranking = a.rankings[0]
    assert ranking.measure == "my_measure" and ranking.kendall_tau == 1.0 and ranking.flipped_pairs == ()


def test_three_sets_add_fleiss_kappa_and_the_alpha_of_every_set():
    sets, sources = _sets(QRELS_A, QRELS_B, QRELS_C)
    a = agreement_of(sets, sources)
    assert a.names == ("x", "y", "z") and len(a.pairs) == 3 and a.rankings == ()
    assert a.documents_all == 36 and a.fleiss_kappa is not None and a.krippendorff_alpha_all is not None
    assert a.to_dict()["sources"] == sources
    assert [(p.name_a, p.name_b) for p in a.pairs] == [("x", "y"), ("x", "z"), ("y", "z")]


def test_two_sets_have_neither_fleiss_kappa_nor_the_alpha_of_every_set():
    sets, sources = _sets(QRELS_A, QRELS_B)
    doc = agreement_of(sets, sources).to_dict()
    assert "fleiss_kappa" not in doc and "krippendorff_alpha_all" not in doc and doc["sets"] == ["x", "y"]


def test_ranking_needs_two_runs_a_function_and_a_shared_query():
    sets, sources = _sets(QRELS_A, QRELS_B)
    with pytest.raises(ConfigError, match=r"^ranking systems needs at least two runs$"):
        agreement_of(sets, sources, runs={"a": RUN_A}, evaluate=_evaluate)
    with pytest.raises(ConfigError, match=r"^ranking systems needs a function that evaluates them"):
        agreement_of(sets, sources, runs={"a": RUN_A, "b": RUN_B})
    # each pair shares a query, no query is judged by all three
    apart, sources = _sets(
        {"q1": {"d0": 1}, "q2": {"d0": 1}}, {"q2": {"d0": 0}, "q3": {"d0": 1}}, {"q1": {"d0": 1}, "q3": {"d0": 2}}
    )
    with pytest.raises(NoCommonQueriesError, match=r"^the judgment sets x, y, z share no query$"):
        agreement_of(apart, sources, runs={"a": RUN_A, "b": RUN_B}, evaluate=_evaluate)


def test_a_label_outside_the_declared_scale_is_refused():
    sets, sources = _sets(QRELS_A, QRELS_B)
    with pytest.raises(ConfigError, match=r"labels \[2\] are outside the declared scale \[0, 1\]"):
        agreement_of(sets, sources, labels=[1, 0])


def test_judgment_set_reads_a_mapping_and_says_where_it_came_from(tmp_path):
    path = tmp_path / "h.qrels"
    path.write_text("q1 0 d1 2\nq1 0 d2 0\n")
    frame, source = judgment_set(str(path))
    assert frame[["query_id", "doc_id", "relevance"]].values.tolist() == [["q1", "d1", 2], ["q1", "d2", 0]]
    assert source["path"] == str(path) and len(source["sha256"]) == 64
    twice = tmp_path / "twice.qrels"
    twice.write_text("q1 0 d1 2\nq1 0 d1 0\n")
    with pytest.raises(InputFormatError, match="lists document 'd1' twice for query 'q1'"):
        judgment_set(str(twice))  # dedupe="error", as ts.agreement reads
    assert judgment_set(str(twice), "first")[0]["relevance"].tolist() == [2]
