"""Measure names: trec_eval's -m syntax, nicknames, ir_measures aliases, the registry, and refusals."""

from __future__ import annotations

import logging

import pytest
from needs import lacking

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
        ("Judged@10", "Judged@10"),  # ir_measures' judged provider's definition (twostage's is judged.10)
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
        ("nDCG(dcg='exp-log2')", "nDCG(dcg='exp-log2')"),  # ir_measures' ranx provider: ranx's ndcg_burges
    ],
)
def test_ir_measures_aliases(alias, trec):
    assert names(alias) == [trec]


@pytest.mark.parametrize(
    "alias,why",
    [
        ("RBP", "rbp.p=0.8"),  # no provider: cwl_eval's needs rel=; trec_eval's graded rbp named
        ("ERR", "gdeval computes ERR at a cutoff"),
        ("nDCG(dcg='exp-log2',judged_only=True)", "from ranx without one, neither with gains= or judged_only"),
        ("nDCG(rel=2)@10", "a relevance level does not apply"),
        ("RR(judged_only=True)@10", "no provider"),
        ("NumRel(rel=2)", "-l N -m num_rel"),
        ("P(rel=2)@10", "evaluate, compare and `twostage eval`"),  # parse_measures: one settings for all; groups below
        ("nDCG(judged_only=True)@10", "evaluate, compare and `twostage eval`"),
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
        ("ndcg_cutt.10", "did you mean 'ndcg_cut.10'"),
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
    ours = {f for f, spec in REGISTRY.items() if spec.source.startswith(("trec_eval", "twostage"))}
    peers = {n for n, f in REGISTRY.items() if f.source.startswith(("ir_measures", "ranx", "MS MARCO"))}
    assert trec_eval_10 | in_no_nickname | {"judged"} == ours
    assert ours | peers == set(REGISTRY) == set(TREC_ORDER)
    for fam in REGISTRY.values():
        assert len(fam.doc) > 60, fam.name  # an exact definition, not a label
        if fam.source == "ranx":
            assert "ranx/metrics/" in fam.doc, fam.name  # cites ranx's source for it
        elif fam.source.startswith("trec_eval") and fam.name not in ("runid", "num_q"):
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


# ------------------------------------------------ names as people type them
@pytest.mark.parametrize(
    "typed,trec",
    [
        ("ndcg@10", "ndcg_cut_10"),
        ("NDCG@10", "ndcg_cut_10"),
        ("map@1000", "map_cut_1000"),  # ir_measures' MAP is its AP
        ("MAP", "map"),
        ("mrr", "recip_rank"),
        ("Recall@100", "recall_100"),
        ("precision@5", "P_5"),
        ("p@5", "P_5"),
        ("bpref", "bpref"),
        ("judged@10", "Judged@10"),
        ("SUCCESS@5", "success_5"),
    ],
)
def test_ir_measures_names_in_any_case(typed, trec):
    assert names(typed) == [trec]


@pytest.mark.parametrize(
    "typed,meant",
    [
        ("recall@1k", "'R@1000' (= recall.1000)"),
        ("ndcg@1k", "'nDCG@1000' (= ndcg_cut.1000)"),
        ("ndgc@10", "'nDCG@10' (= ndcg_cut.10)"),
        ("NDCG_10", "'nDCG@10' (= ndcg_cut.10)"),
        ("mrr@1k", "'RR@1000' (= RR@1000 as msmarco)"),
        ("ndcg_cutt.10", "'ndcg_cut.10'"),
        ("p.5", "'P@5' (= P.5)"),
        ("offical", "'official'"),
    ],
)
def test_suggestions_point_to_the_measure_meant(typed, meant):
    with pytest.raises(UnknownMeasureError) as err:
        names(typed)
    message = str(err.value)
    assert meant in message
    # never the full-depth measure for a name with a cutoff (the old answer to ndcg@10 and recall@1k)
    assert "'recall'" not in message and "'ndcg'" not in message


@pytest.mark.parametrize("typed", ["xyz", "bpreff", "ndcg_cut10", "recall@1k", "p.5", "precison", "rprec_mult.x"])
def test_at_most_five_suggestions_and_never_the_full_list(typed):
    with pytest.raises(UnknownMeasureError) as err:
        names(typed)
    message = str(err.value)
    hint = message.partition("did you mean ")[2].partition("?")[0]
    assert hint.count("'") // 2 <= 5, message
    assert "num_nonrel_judged_ret" not in message and "`twostage measures`" in message


def test_unknown_measure_on_the_command_line_suggests_without_a_list(cli, tmp_path):
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("1 0 d1 1\n")
    r.write_text("1 Q0 d1 1 1.0 t\n")
    res = cli("eval", "-m", "recall@1k", q, r)
    assert res.exit_code == 1
    assert res.stderr.strip() == (
        "Error: 'recall@1k': the cutoff must be a positive integer; did you mean 'R@1000' (= recall.1000)? "
        "(`twostage measures` lists every measure)"
    )


# ------------------------------------------------ per-measure settings: evaluation groups
def test_groups_split_measures_by_their_own_settings():
    from toolkit.measures.names import Overrides, parse_measure_groups

    groups = parse_measure_groups(
        ["AP(rel=2)@1000", "RR(rel=2)@10", "nDCG@10", "RR@10", "P(rel=2)@5", "map", "R(judged_only=True)@5"], 9
    )
    by = {g.overrides: [m.name for m in g.labelled()] for g in groups}
    assert by == {
        # RR@k is ir_measures' msmarco provider's: a family of its own, its rel= a parameter, not a setting
        Overrides(): ["map", "ndcg_cut_10", "RR@10", "RR(rel=2)@10"],
        Overrides(relevance_level=2): ["P(rel=2)@5", "AP(rel=2)@1000"],  # trec_eval's order: P before map_cut
        Overrides(judged_only=True): ["R(judged_only=True)@5"],
    }
    assert not groups[0].overrides  # the plain group first: its provenance is the result's


# Hand-computed: q1 ranks a(0) b(1) c(2) d(2); q2 ranks x(0) y(0) z(1).
G_QRELS = "q1 0 a 0\nq1 0 b 1\nq1 0 c 2\nq1 0 d 2\nq2 0 x 0\nq2 0 y 0\nq2 0 z 1\n"
G_RUN = "q1 Q0 a 1 4 t\nq1 Q0 b 2 3 t\nq1 Q0 c 3 2 t\nq1 Q0 d 4 1 t\nq2 Q0 x 1 3 t\nq2 Q0 y 2 2 t\nq2 Q0 z 3 1 t\n"
G_EXPECTED = {
    # RR@2: first relevant within the top 2: q1 b at 2 -> 1/2, q2 none -> 0
    ("RR@2", "q1"): 0.5,
    ("RR@2", "q2"): 0.0,
    # RR(rel=2)@3: first label >= 2 within the top 3: q1 c at 3 -> 1/3; q2 none
    ("RR(rel=2)@3", "q1"): 1 / 3,
    ("RR(rel=2)@3", "q2"): 0.0,
    # AP(rel=2)@1000: q1 relevant c (3), d (4): (1/3 + 2/4) / 2; q2 has no label >= 2 -> 0
    ("AP(rel=2)@1000", "q1"): (1 / 3 + 2 / 4) / 2,
    ("AP(rel=2)@1000", "q2"): 0.0,
    # recip_rank at the command's own settings (-l 1, full depth): q1 1/2, q2 1/3
    ("recip_rank", "q1"): 0.5,
    ("recip_rank", "q2"): 1 / 3,
}


def test_groups_computed_exactly_hand_example(cli, tmp_path):
    import json

    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text(G_QRELS)
    r.write_text(G_RUN)
    res = cli(
        "eval", "-q", "--format", "json", "-m", "RR@2", "-m", "RR(rel=2)@3", "-m", "AP(rel=2)@1000", "-m", "RR", q, r
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    got = {(name, qid): v for qid, row in doc["per_query"].items() for name, v in row.items()}
    typed = {("RR" if n == "recip_rank" else n, q): v for (n, q), v in G_EXPECTED.items()}  # JSON: names as typed
    assert got == pytest.approx(typed, abs=1e-12)
    assert doc["all"]["RR@2"] == pytest.approx(0.25) and doc["measures"] == [
        "RR@2",
        "RR(rel=2)@3",
        "AP(rel=2)@1000",
        "RR",
    ]  # in the order asked
    assert doc["labels"] == {"recip_rank": "RR"}
    stated = doc["provenance"]["measure_settings"]
    assert stated == {
        "AP(rel=2)@1000": {
            "measure": "map_cut.1000",
            "relevance_level": 2,
            "max_docs_per_query": None,
            "trec_eval": "trec_eval -l 2 -m map_cut.1000",
        }
    }  # the command's own settings are the provenance's top level
    # RR@k is ir_measures' msmarco provider's RR: its definition is named, with its tie order
    assert doc["provenance"]["definitions"]["RR@2"].startswith("RR@2 as msmarco: relevant: label >= 1; ties by")
    assert set(doc["provenance"]["definitions"]) == {"RR@2", "RR(rel=2)@3"}


def test_groups_equal_separate_trec_eval_calls_on_dl19(cli, msmarco):
    """One twostage call against four calls of the 9.0.4 binary with -l 2 / -M 10 (per query and all)."""
    from oracles import native_trec_eval, native_trec_eval_output, parse_output

    if native_trec_eval() is None:
        lacking("no native trec_eval 9.0.4 for this machine")
    qrels, run = msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.bm25.top100.txt"
    res = cli(
        "eval", "-q", "-c", "--no-provenance", "-m", "AP(rel=2)@1000", "-m", "RR(rel=2)@10", "-m", "nDCG@10",
        "-m", "RR@10", qrels, run,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    ours = parse_output(res.stdout)
    for label, flags, trec_name in (
        ("AP(rel=2)@1000", ["-l", "2", "-m", "map_cut.1000"], "map_cut_1000"),
        ("RR(rel=2)@10", ["-l", "2", "-M", "10", "-m", "recip_rank"], "recip_rank"),
        ("ndcg_cut_10", ["-m", "ndcg_cut.10"], "ndcg_cut_10"),
        ("RR@10", ["-M", "10", "-m", "recip_rank"], "recip_rank"),
    ):
        rc, out = native_trec_eval_output(["-q", "-c", *flags, qrels, run])
        theirs = {qid: v for (name, qid), v in parse_output(out).items() if name == trec_name}
        mine = {qid: v for (name, qid), v in ours.items() if name == label}
        assert rc == 0 and len(theirs) == 44 and mine == theirs, label  # 43 queries and all
    assert ours[("AP(rel=2)@1000", "all")] == "0.2476" and ours[("ndcg_cut_10", "all")] == "0.5058"


def test_groups_say_each_input_warning_once(cli, tmp_path, caplog):
    import json

    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text(G_QRELS)
    r.write_text(G_RUN.replace(" 4 t", " 1 t").replace(" 3 t", " 1 t").replace(" 2 t", " 1 t"))  # all scores 1
    res = cli("eval", "--format", "json", "-m", "RR@2", "-m", "AP(rel=2)@1000", "-m", "P.5", q, r)
    assert res.stderr.count("every score in") == 1 and "twostage: warning: every score in" in res.stderr
    warnings = json.loads(res.stdout)["provenance"]["input_warnings"]
    assert len(warnings) == 3 and warnings[0].startswith("every score in")  # ties; P_5 (plain); map_cut_1000 (rel=2)
