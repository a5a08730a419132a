"""Registry attributes that replace name tests: aggregation, placeholder zeroing, display label, ceiling."""

from __future__ import annotations

import pytest
from needs import lacking
from oracles import run_binary, trec_eval_10

from toolkit.measures.names import parse_measures
from toolkit.measures.registry import PLACEHOLDERS, REGISTRY, Measure


@pytest.mark.parametrize(
    ("measure", "label"),
    [
        (Measure("ndcg_cut", 10), "nDCG@10"),
        (Measure("ndcg"), "nDCG"),
        (Measure("P", 5), "P@5"),
        (Measure("recall", 100), "R@100"),
        (Measure("map"), "MAP"),
        (Measure("map_cut", 100), "MAP@100"),
        (Measure("recip_rank"), "RR"),
        (Measure("Rprec"), "R-prec"),
        (Measure("success", 1), "Success@1"),
        (Measure("bpref"), "bpref"),
        (Measure("iprec_at_recall", 0.2), "iprec_at_recall_0.20"),
        (Measure("ndcg", params=((1, 3.0),), printable="1=3"), "ndcg_1=3"),
    ],
)
def test_display_label(measure, label):
    assert measure.label == label


def test_ceiling_only_for_ranking_measures():
    no_ceiling = {f for f, spec in REGISTRY.items() if not spec.ceiling}
    # counts, strings, judgment coverage and the ideal DCG (which no ordering changes) have none
    assert {"num_q", "num_ret", "num_rel", "num_rel_ret", "runid", "relstring", "judged", "unj"} <= no_ceiling
    assert {"ideal_dcg", "rbp_resid"} <= no_ceiling
    assert not {"ndcg_cut", "ndcg", "map", "P", "recall", "recip_rank", "dcg", "yaap", "bpref"} & no_ceiling


def test_placeholder_rules_are_trec_eval_10s_name_tests():
    rules = {f: spec.placeholder for f, spec in REGISTRY.items() if spec.placeholder != "keep"}
    assert set(rules.values()) <= set(PLACEHOLDERS)
    # trec_eval.c: strcmp(name, "num_ret" | "utility" | "relstring" | "rbp_resid"), strncmp(name, "unj", 3)
    assert rules == {
        "num_ret": "zero",
        "unj": "zero",
        "utility": "zero_if_bare",
        "rbp_resid": "zero_if_bare",
        "relstring": "clear_if_bare",
    }
    assert [f for f, spec in REGISTRY.items() if spec.complete_total] == ["num_rel"]


def test_placeholder_zeroes_the_bare_utility_only(cli, tmp_path):
    # q2 is judged but not retrieved: under -c trec_eval 10 ranks one placeholder document (non-relevant, so
    # utility 1,-1,0,0 is -1) and then zeroes "utility" by name; utility_2,-1,0,0 keeps its -1 and unj_5 is 0
    q = tmp_path / "qrels"
    q.write_text("q1 0 a 1\nq2 0 b 1\n")
    r = tmp_path / "run"
    r.write_text("q1 Q0 a 1 1 t\n")
    binary, why = trec_eval_10()
    # one family per call: trec_eval keeps only the first parameter list of a family named twice
    for measures, want in [
        (["utility", "num_ret"], [("num_ret", "0"), ("utility", "0.0000")]),
        (["utility.2,-1,0,0", "unj.5"], [("utility_2,-1,0,0", "-1.0000"), ("unj_5", "0.0000")]),
    ]:
        args = ["-q", "-c", *(x for m in measures for x in ("-m", m)), str(q), str(r)]
        res = cli("eval", "--no-provenance", "--trec-eval", "10", *args)
        lines = [line for line in res.stdout.splitlines() if "\tq2\t" in line]
        assert lines == [f"{name:<22}\tq2\t{value}" for name, value in want]
        if binary:
            assert run_binary(binary, args) == (0, res.stdout)
    if binary is None:
        lacking(why)


def test_parsed_measures_carry_the_attributes():
    (m,) = parse_measures(["ndcg_cut.10"])
    assert (m.spec.aggregate, m.spec.ceiling, m.label) == ("mean", True, "nDCG@10")
    (n,) = parse_measures(["num_rel"])
    assert (n.spec.aggregate, n.spec.ceiling, n.spec.complete_total) == ("sum", False, True)
