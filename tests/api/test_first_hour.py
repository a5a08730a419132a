"""What a notebook user meets in the first hour, checked piece by piece; the notebook
docs/notebooks/first-hour.ipynb checks the same as the user sees it (test_first_hour_notebook.py).

Oracles: hand-computed values on tiny inputs, native trec_eval through the CLI's own output, and the
published DL19 BM25 numbers (nDCG@10 0.5058 at -c; AP at level 2 over the top 100 0.2476)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from needs import required

import toolkit as ts
from toolkit.errors import ConfigError, InputFormatError, NoCommonQueriesError, UnknownMeasureError, phrase

REPO = Path(__file__).resolve().parents[2]
# q1: d1 (2) d2 (0) d3 (1); q2: d4 (1). Run ranks d1 d2 d3 for q1 and d4 for q2.
QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1}}
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 1.0}}


# ------------------------------------------------------------- 1. measures as asked
def test_order_and_spelling_as_asked_and_every_name_finds_the_measure():
    ev = ts.evaluate(QRELS, RUN, ["P@2", "map", "R@3", "P(rel=2)@1"])
    assert list(ev.summary.index) == ["P@2", "map", "R@3", "P(rel=2)@1"]
    assert list(ev.per_query.columns) == ["P@2", "map", "R@3", "P(rel=2)@1"]
    # by hand: P@2 q1 1/2, q2 1/2 (one document retrieved, divided by 2); map q1 (1 + 2/3)/2, q2 1
    assert ev.summary["P@2"] == ev.summary["P_2"] == pytest.approx(0.5)
    assert ev.summary["map"] == pytest.approx(((1 + 2 / 3) / 2 + 1) / 2)
    assert ev.summary["P(rel=2)@1"] == pytest.approx(0.5)  # q1's d1 is level 2; q2 has none
    assert ev.per_query["P_2"].to_dict() == ev.per_query["P@2"].to_dict() == {"q1": 0.5, "q2": 0.5}
    assert list(ev.to_ir_measures()["measure"].unique()) == ["P@2", "map", "R@3", "P(rel=2)@1"]
    doc = json.loads(ev.to_json(per_query=True))
    assert list(doc["all"]) == doc["measures"] == ["P@2", "map", "R@3", "P(rel=2)@1"]
    assert doc["per_query"]["q1"]["P@2"] == 0.5
    # trec_eval's own format stays trec_eval's: its names, its order
    lines = [ln.split("\t")[0].strip() for ln in ev.to_trec_eval(provenance=False).splitlines()]
    assert lines == ["map", "P(rel=2)@1", "P_2", "recall_3"]


def test_labels_rename_for_display_and_bad_labels_name_the_keyword():
    ev = ts.evaluate(QRELS, RUN, ["ndcg_cut.3", "P.1"], labels={"ndcg_cut_3": "nDCG@3", "P.1": "Precision@1"})
    assert list(ev.summary.index) == ["nDCG@3", "Precision@1"]
    assert ev.summary["ndcg_cut_3"] == ev.summary["nDCG@3"] and ev.summary["P_1"] == 1.0
    with pytest.raises(ConfigError, match=r"^labels: 'P_10' is not a measure asked for \(measures: 'ndcg_cut_3'\)"):
        ts.evaluate(QRELS, RUN, "ndcg_cut.3", labels={"P_10": "P@10"})
    with pytest.raises(ConfigError, match="labels: two measures would share a label"):
        ts.evaluate(QRELS, RUN, ["P.1", "P.2"], labels={"P_1": "P", "P_2": "P"})


def test_compare_takes_per_measure_settings_and_refuses_what_it_cannot_test(msmarco):
    runs = {
        "bm25": msmarco / "runs/run.dl19.bm25.top100.txt",
        "splade": msmarco / "runs/run.dl19.splade-pp-ed.top100.txt",
    }
    c = ts.compare("dl19-passage", runs, measures=["AP(rel=2)@100", "nDCG@10"], complete=True, permutations=200)
    assert list(c.means.columns) == list(c.measures) == ["AP(rel=2)@100", "nDCG@10"]
    assert (
        round(c.means.loc["bm25", "AP(rel=2)@100"], 4) == 0.2476 and round(c.means.loc["bm25", "nDCG@10"], 4) == 0.5058
    )
    alone = ts.evaluate("dl19-passage", runs["splade"], "map_cut.100", relevance_level=2, complete=True)
    assert c.means.loc["splade", "AP(rel=2)@100"] == alone.summary["map_cut_100"]  # = trec_eval -l 2 -c
    with pytest.raises(UnknownMeasureError, match=r"^measures='relstring': a text measure"):
        ts.compare("dl19-passage", runs, measures=["nDCG@10", "relstring"])
    with pytest.raises(
        UnknownMeasureError, match=r"^measures='prefs_simp': compare cannot compute it: .*rel_format='prefs'"
    ):
        ts.compare("dl19-passage", runs, measures="prefs_simp")


def test_cli_compare_and_eval_json_use_the_names_asked(cli, tmp_path):
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("".join(f"{qid} 0 {d} {lab}\n" for qid, docs in QRELS.items() for d, lab in docs.items()))
    r.write_text("".join(f"{qid} Q0 {d} 1 {s} t\n" for qid, docs in RUN.items() for d, s in docs.items()))
    res = cli("eval", "--format", "json", "-m", "R@3", "-m", "P.2", "-m", "nDCG@3", q, r)
    doc = json.loads(res.stdout)
    assert doc["measures"] == ["R@3", "P_2", "nDCG@3"] and doc["labels"] == {"recall_3": "R@3", "ndcg_cut_3": "nDCG@3"}


# ------------------------------------------------------------- 2. warnings reach the person
def test_a_warning_per_call_filterable_and_on_the_result():
    partial = {"q1": RUN["q1"]}
    for _ in range(2):  # each call says it again (a notebook re-runs cells)
        with pytest.warns(ts.TwostageWarning, match=r"^1 of 2 qrels queries have no line in the run") as caught:
            ev = ts.evaluate(QRELS, partial, "P.1")
        assert len(caught) == 1
    assert ev.notes == ev.warnings and "pass complete=True to count them as 0" in ev.notes[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=ts.TwostageWarning)  # the user's own filter wins
        ts.evaluate(QRELS, partial, "P.1")


def test_ties_and_dropped_duplicates_are_warnings_said_once_however_many_groups():
    tied = {"q1": {"d1": 1.0, "d2": 1.0, "d3": 1.0}, "q2": {"d4": 1.0, "d5": 1.0}}
    with pytest.warns(ts.TwostageWarning) as caught:
        ev = ts.evaluate(QRELS, tied, ["P@1", "P(rel=2)@1", "RR@2"])  # three evaluation groups
    said = [str(w.message) for w in caught]
    assert len(said) == len(set(said)) == 1 and said[0].startswith("every score in <dict> is 1.0")
    frame = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["d1", "d1", "d4"], "score": [2.0, 1.0, 1.0]})
    with pytest.warns(ts.TwostageWarning, match=r"^dedupe='first' dropped 1 duplicate line\(s\) from the run"):
        ev = ts.evaluate(QRELS, frame, "P.1", dedupe="first")
    assert ev.notes[0].startswith("dedupe='first' dropped 1")


def test_the_cli_prints_each_warning_once_with_its_prefix_and_flags(cli, tmp_path):
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("q1 0 d1 1\nq2 0 d4 1\nq3 0 d9 1\n")
    r.write_text("q1 Q0 d1 1 3.0 t\n")
    res = cli("eval", "-m", "P.1", "-m", "RR@2", q, r)  # two evaluation groups, one message
    assert res.exit_code == 0, res.output
    said = "twostage: warning: 2 of 3 qrels queries have no line in the run"
    assert res.stderr.count("qrels queries have no line") == 1 and said in res.stderr
    assert "pass -c to count them as 0" in res.stderr and "complete=True" not in res.stderr


# ------------------------------------------------------------- 3. errors in the caller's words
def test_one_message_two_phrasings(cli, tmp_path):
    with pytest.raises(NoCommonQueriesError, match="Pass allow_no_common=True to print the zeros") as exc:
        ts.evaluate(QRELS, {"x": {"d1": 1.0}}, "P.1")
    assert "--allow-no-common" not in str(exc.value) and "Pass --allow-no-common" in exc.value.for_cli()
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("q1 0 d1 1\n")
    r.write_text("x Q0 d1 1 1.0 t\n")
    res = cli("eval", "-m", "P.1", q, r)
    assert res.exit_code == 1 and "Pass --allow-no-common to print the zeros" in res.stderr
    assert "allow_no_common=True" not in res.stderr
    err = ConfigError(f"give {phrase('topics=', '--topics')}")
    assert str(err) == "give topics=" and err.for_cli() == "give --topics"


def test_settings_errors_name_keywords_in_the_library():
    with pytest.raises(UnknownMeasureError, match=r"\(pass trec_eval=10\); ranx's dcg is dcg-l1$"):
        ts.evaluate(QRELS, RUN, "dcg", trec_eval=9)
    with pytest.raises(UnknownMeasureError, match=r"^gain='nope'"):
        ts.evaluate(QRELS, RUN, "ndcg", gain="nope")


def test_empty_inputs_say_so_and_ranx_inputs_are_read():
    with pytest.raises(InputFormatError, match="the run is empty"):
        ts.evaluate(QRELS, pd.DataFrame({"qid": [], "docno": [], "score": []}), "P.1")
    with pytest.raises(InputFormatError, match="the qrels are empty"):
        ts.evaluate({}, RUN, "P.1")
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    ev = ts.evaluate(ranx.Qrels(QRELS), ranx.Run(RUN, name="mine"), ["P@1", "map"])
    plain = ts.evaluate(QRELS, RUN, ["P@1", "map"])
    assert ev.summary.to_dict() == plain.summary.to_dict() and ev.summary.name == "mine"


# ------------------------------------------------------------- 4. quiet JVM
def test_search_from_the_cli_prints_no_java_notice(cacm_index, shared_data, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "bm25", "--index", str(cacm_index), "--topics", "cacm"]
        + ["--hits", "5", "--max-queries", "2", "--out", str(tmp_path / "run.txt"), "--data-dir", str(shared_data)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    for notice in ("Java 22 or later", "sun.misc.Unsafe", "MMapDirectory", "WARNING:"):
        assert notice not in proc.stderr, proc.stderr
    assert len((tmp_path / "run.txt").read_text().splitlines()) == 10


# ------------------------------------------------------------- 5. one consistent result object
def test_names_are_the_users_and_legend_is_a_property(tmp_path):
    run = tmp_path / "bm25-k1.2.trec"
    run.write_text("".join(f"{q} Q0 {d} 1 {s} rank\n" for q, docs in RUN.items() for d, s in docs.items()))
    ev = ts.evaluate(QRELS, run, "P.1")
    assert ev.summary.name == "bm25-k1.2" and ev.to_pyterrier()["name"].unique().tolist() == ["bm25-k1.2"]
    assert ev.runid == "rank"  # the tag is still there, as trec_eval's runid
    named = ts.evaluate(QRELS, run, "P.1", name="BM25")
    assert named.summary.name == "BM25" and "Evaluation(BM25: P_1=1.0000" in repr(named)
    other = {"q1": {"d1": 1.0, "d2": 3.0, "d3": 2.0}, "q2": {"d4": 1.0}}  # P@1 0 on q1: not identical to the run
    c = ts.compare(QRELS, {"a<b>": run, "c": other}, measures="P.1", permutations=10)
    assert (
        isinstance(c.legend, str) and c.legend == c.legend() and "p < 0.05" in c.legend and "p < 0.1" in c.legend(0.1)
    )
    assert r"a\textless{}b\textgreater{} &" in c.to_latex()
    from toolkit.api.comparison import latex_escape

    assert latex_escape(r"a_b & 50% #1 $x$ {y} ~^\ ") == (
        r"a\_b \& 50\% \#1 \$x\$ \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{} "
    )
