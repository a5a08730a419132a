"""Measure names: trec_eval's -m syntax, nicknames, ir_measures aliases, the registry, and refusals."""

from __future__ import annotations

import logging

import pytest

from toolkit.errors import UnknownMeasureError
from toolkit.measures.names import NICKNAMES, parse_measures
from toolkit.measures.registry import REGISTRY, TREC_ORDER, Params


def names(*texts, version=10):
    return [m.name for m in parse_measures(list(texts), version)]


@pytest.mark.parametrize(
    "texts,expected",
    [
        (["P.5,7,3"], ["P_3", "P_5", "P_7"]),  # sorted as trec_eval prints them
        (["recall.20,2000", "P.5"], ["P_5", "recall_20", "recall_2000"]),  # trec_eval's order, not -m order
        (["iprec_at_recall..10,.20,.25"], ["iprec_at_recall_0.10", "iprec_at_recall_0.20", "iprec_at_recall_0.25"]),
        (["Rprec_mult.5.0,0.2,0.35"], ["Rprec_mult_0.20", "Rprec_mult_0.35", "Rprec_mult_5.00"]),
        (["utility.2,-1,0,0"], ["utility_2,-1,0,0"]),
        (["11pt_avg..25,.5,.75"], ["11pt_avg_.25,.5,.75"]),
        (["ndcg.1=3,2=9,4=4.5"], ["ndcg_1=3,2=9,4=4.5"]),
        (["relstring.20"], ["relstring_20"]),
        (["rbp.p=0.8"], ["rbp_p=0.8"]),
        (["set_F.0.5"], ["set_F_0.5"]),
        (["success"], ["success_1", "success_5", "success_10"]),
        (["unj"], ["unj_5", "unj_10", "unj_20"]),
        (["P_10", "ndcg_cut_10", "iprec_at_recall_0.10"], ["iprec_at_recall_0.10", "P_10", "ndcg_cut_10"]),
        (["all_trec", "relstring.20"], None),  # checked below
        (["P.5", "P.10"], ["P_5", "P_10"]),  # twostage: the union (trec_eval keeps the first list only)
    ],
)
def test_trec_eval_syntax(texts, expected):
    got = names(*texts)
    if expected is not None:
        assert got == expected
    else:
        assert "relstring_20" in got and "relstring" not in got  # explicit parameters replace the defaults


def test_cutoff_with_decimals_is_truncated_like_trec_eval(caplog):
    with caplog.at_level(logging.WARNING):
        assert names("ndcg_cut.10,20,23.4") == ["ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert "23.4 read as 23" in caplog.text


@pytest.mark.parametrize(
    "nickname,count", [("official", 30), ("set", 11), ("all_prefs", 16), ("prefs", 8), ("qrels_jg", 22)]
)
def test_nicknames(nickname, count):
    assert len(names(nickname)) == count


def test_all_trec_differs_between_generations():
    ten, nine = set(names("all_trec")), set(names("all_trec", version=9))
    assert ten - nine == {"rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"}
    assert len(nine) == 95 and len(ten) == 100  # names, relstring included (printed per query only)


@pytest.mark.parametrize(
    "alias,trec",
    [
        ("nDCG@10", "ndcg_cut_10"),
        ("AP@100", "map_cut_100"),
        ("R@100", "recall_100"),
        ("P@10", "P_10"),
        ("Judged@10", "judged_10"),
        ("Bpref", "bpref"),
        ("Rprec", "Rprec"),
        ("infAP", "infAP"),
        ("Success@10", "success_10"),
        ("AP", "map"),
        ("nDCG", "ndcg"),
        ("RR", "recip_rank"),
        ("NumRet", "num_ret"),
        ("IPrec@0.1", "iprec_at_recall_0.10"),
        ("SetP", "set_P"),
    ],
)
def test_ir_measures_aliases(alias, trec):
    assert names(alias) == [trec]


@pytest.mark.parametrize(
    "alias,why",
    [
        ("RR@10", "recip_rank has no cutoff"),
        ("RBP", "p=0.8"),
        ("ERR@10", "not a trec_eval measure"),
        ("P(rel=2)@10", "use -l LEVEL"),
        ("nDCG(dcg='exp-log2')@10", "--gain"),
    ],
)
def test_aliases_that_mean_something_else_are_refused(alias, why):
    with pytest.raises(UnknownMeasureError, match=why.replace("(", r"\(")):
        names(alias)


@pytest.mark.parametrize(
    "text,why",
    [
        ("P.-1", "must be positive"),
        ("P.0", "must be positive"),
        ("P.x", "not an integer"),
        ("P.5,5", "duplicate cutoffs"),
        ("P.", "no parameters"),
        ("map.5", "takes no parameters"),
        ("ndcg.x=3", "not a relevance level"),
        ("ndcg.1=3,1=4", "given twice"),
        ("ndcg.1", "is not NAME=VALUE"),
        ("utility.1,2", "takes 4 coefficients"),
        ("relstring.2.5", "non-negative integer"),
        ("rbp.p=1.5", "strictly between 0 and 1"),
        ("rbp_resid.2=1", "only the persistence"),
        ("iprec_at_recall.-0.1", ">= 0"),
        ("all_trec.5", "takes no parameters"),
        ("ndcg_cutt.10", "did you mean 'ndcg_cut'"),
        ("11pt_avg.a", "is not a number"),
    ],
)
def test_bad_parameters_are_refused(text, why):
    with pytest.raises(UnknownMeasureError, match=why):
        names(text)


def test_trec_eval_10_measures_need_10():
    for text in ("rbp", "rbp_resid", "unj.5"):
        with pytest.raises(UnknownMeasureError, match="trec_eval 10 measure"):
            names(text, version=9)


def test_registry_holds_every_family_once_with_a_definition():
    trec_eval_10 = set(NICKNAMES["all_trec"]) | set(NICKNAMES["all_prefs"]) | set(NICKNAMES["qrels_jg"])
    in_no_nickname = {"dcg", "ideal_dcg", "yaap"}  # in measures.c's table, in none of its nicknames
    assert trec_eval_10 | in_no_nickname | {"judged"} == set(REGISTRY) == set(TREC_ORDER)
    for fam in REGISTRY.values():
        assert len(fam.doc) > 60, fam.name  # an exact definition, not a label
        if fam.name not in ("judged", "runid", "num_q"):
            assert "m_" in fam.doc and ".c" in fam.doc, fam.name  # cites trec_eval's source for it
        if fam.params in (Params.LONG_CUTOFFS, Params.DOUBLE_CUTOFFS):
            assert fam.defaults, fam.name


def test_cli_refuses_bad_parameters_with_exit_1(cli, tmp_path):
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("1 0 d1 1\n")
    r.write_text("1 Q0 d1 1 1.0 t\n")
    for text, why in (("P.-1", "must be positive"), ("ndcg.x=3", "not a relevance level")):
        res = cli("eval", "-m", text, q, r)
        assert res.exit_code == 1 and res.stderr.startswith("Error: ") and why in res.stderr, res.output


def test_measures_command_defines_families(cli):
    res = cli("measures")
    assert res.exit_code == 0 and "ndcg_cut" in res.stdout and "nicknames: official" in res.stdout
    res = cli("measures", "bpref", "nDCG@10")
    assert "Buckley & Voorhees" in res.stdout and "Järvelin" in res.stdout
