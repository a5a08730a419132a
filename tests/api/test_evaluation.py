"""``toolkit.evaluate``: the CLI's bytes, every input form, validation naming the row, and ir_measures / ranx.

Oracles: ``twostage eval`` (itself checked byte for byte against trec_eval 9.0.4 and 10 elsewhere), ir_measures
0.4.3 (its pytrec_eval provider) and ranx 0.3.21 on the DL19 runs, and hand-built inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from needs import required

import toolkit as ts
from toolkit.errors import InputFormatError, UnknownMeasureError

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 x 1\nq2 0 y 0\nq3 0 z 1\n"
RUN = "q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\nq1 Q0 c 3 2.0 t\nq2 Q0 y 1 1.5 t\nq2 Q0 x 2 0.5 t\nq9 Q0 a 1 1 t\n"


@pytest.fixture()
def tiny(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    return tmp_path / "qrels.txt", tmp_path / "run.txt"


@pytest.fixture(scope="module")
def dl19(msmarco):
    return msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.bm25.top100.txt"


# (CLI flags, the same as keywords)
OPTION_SETS = [
    ([], {}),
    (
        ["-c", "-l", "2", "-m", "nDCG@10", "-m", "AP@100", "-m", "R@20", "-m", "R@100"],
        {"complete": True, "relevance_level": 2, "measures": ["nDCG@10", "AP@100", "R@20", "R@100"]},
    ),
    (["-m", "all_trec", "--trec-eval", "10", "-c"], {"measures": "all_trec", "trec_eval": 10, "complete": True}),
    (
        ["-m", "ndcg_cut.10", "--gain", "exp", "--discount", "jk:2"],
        {"measures": "ndcg_cut.10", "gain": "exp", "discount": "jk:2"},
    ),
    (
        ["-J", "-M", "50", "-m", "P.5,10", "-m", "map"],
        {"judged_only": True, "max_docs": 50, "measures": ["P.5,10", "map"]},
    ),
    (
        ["--relevance-map", "0:0,1:0,2:1,3:1", "-m", "recall.100", "-m", "relstring.10"],
        {"relevance_map": "0:0,1:0,2:1,3:1", "measures": ["recall.100", "relstring.10"]},
    ),
    (
        ["-m", "judged.10", "--judged-compat", "pyserini", "--score-precision", "float64"],
        {"measures": "judged.10", "judged_compat": "pyserini", "score_precision": "float64"},
    ),
    (["-m", "utility.2,-1,0,0", "-N", "8841823"], {"measures": "utility.2,-1,0,0", "num_docs": 8841823}),
]


@pytest.mark.parametrize(("flags", "keywords"), OPTION_SETS)
@pytest.mark.parametrize("per_query", [False, True])
def test_to_trec_eval_is_the_cli_output(cli, dl19, flags, keywords, per_query):
    qrels, run = dl19
    res = cli("eval", *(["-q"] if per_query else []), *flags, qrels, run)
    assert res.exit_code == 0, res.output
    ev = ts.evaluate(qrels, run, **keywords)
    assert ev.to_trec_eval(per_query) == res.stdout
    bare = cli("eval", "-n", "--no-provenance", *(["-q"] if per_query else []), *flags, qrels, run).stdout
    assert ev.to_trec_eval(per_query, summary=False, provenance=False) == bare


def test_collection_name_and_summary_values(dl19):
    _, run = dl19
    ev = ts.evaluate("dl19-passage", run, ["nDCG@10", "AP@100", "R@20", "R@100"], complete=True, relevance_level=2)
    # the README's published two-stage table for DL19 BM25, in the order asked, named as typed
    assert list(ev.summary.round(4).items()) == [
        ("nDCG@10", 0.5058),
        ("AP@100", 0.2476),
        ("R@20", 0.2698),
        ("R@100", 0.4910),
    ]
    assert ev.summary["ndcg_cut_10"] == ev.summary["nDCG@10"] and ev.summary.name == "run.dl19.bm25.top100"
    assert ev.per_query.shape == (43, 4) and list(ev.per_query.columns) == list(ev.summary.index)
    assert ev.per_query.mean().to_dict() == pytest.approx(ev.summary.to_dict(), abs=1e-15)
    assert ev.provenance["query_set"] == "all qrels queries (-c)" and ev.provenance["relevance_level"] == 2
    assert "<table" in ev._repr_html_() and "0.5058" in ev._repr_html_()
    assert "nDCG@10=0.5058" in repr(ev)


def test_write_is_eval_out(cli, tiny, tmp_path):
    qrels, run = tiny
    assert cli("eval", "-q", "-m", "P.2", "--out", tmp_path / "cli.txt", qrels, run).exit_code == 0
    ts.evaluate(qrels, run, "P.2").write(tmp_path / "api.txt", per_query=True)
    assert (tmp_path / "api.txt").read_text() == (tmp_path / "cli.txt").read_text()
    assert (tmp_path / "api.txt.provenance.json").read_text() == (tmp_path / "cli.txt.provenance.json").read_text()


# ------------------------------------------------------------ input forms
def _forms(run_path):
    """The same run as a path, two DataFrame shapes, a dict and ir_measures ScoredDocs."""
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    frame = ts.Run.read(run_path).to_frame()
    pt = frame.rename(columns={"query_id": "qid", "doc_id": "docno"}).sample(frac=1.0, random_state=3)
    nested: dict = {}
    for q, d, s in zip(frame["query_id"], frame["doc_id"], frame["score"]):
        nested.setdefault(q, {})[d] = s
    scored = [ir_measures.ScoredDoc(q, d, s) for q, d, s in zip(frame["query_id"], frame["doc_id"], frame["score"])]
    return {
        "path": run_path,
        "pyterrier": pt,
        "twostage": frame[["query_id", "doc_id", "score"]],
        "dict": nested,
        "scored_docs": scored,
        "run": ts.Run.read(run_path),
    }


def _qrels_forms(qrels_path):
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    rows = [line.split() for line in qrels_path.read_text().splitlines()]
    pt = pd.DataFrame({"qid": [r[0] for r in rows], "docno": [r[2] for r in rows], "label": [int(r[3]) for r in rows]})
    ird = pt.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    nested: dict = {}
    for q, d, r in rows_of(pt):
        nested.setdefault(q, {})[d] = r
    return {
        "path": qrels_path,
        "name": "dl19-passage",
        "pyterrier": pt,
        "ir_datasets": ird,
        "dict": nested,
        "qrels": [ir_measures.Qrel(q, d, r) for q, d, r in rows_of(pt)],
    }


def rows_of(frame):
    return zip(frame.iloc[:, 0], frame.iloc[:, 1], frame.iloc[:, 2])


def test_every_input_form_gives_the_same_numbers(dl19):
    qrels, run = dl19
    want = ts.evaluate(qrels, run, "all_trec", complete=True)
    for name, q in _qrels_forms(qrels).items():
        for rname, r in _forms(run).items():
            got = ts.evaluate(q, r, "all_trec", complete=True)
            assert got.summary.to_dict() == want.summary.to_dict(), (name, rname)
            pd.testing.assert_frame_equal(got.per_query, want.per_query)


def test_integer_ids_are_converted_to_text(caplog):
    q = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [10, 11, 20], "relevance": [1, 0, 1]})
    r = pd.DataFrame({"qid": [1, 1, 2], "docno": [11, 10, 20], "score": [2.0, 1.0, 1.0]})
    with caplog.at_level("INFO"):
        ev = ts.evaluate(q, r, "P.1")
    assert ev.per_query["P_1"].to_dict() == {"1": 0.0, "2": 1.0}
    assert any("integer query ids converted to text" in m for m in caplog.messages)
    nested = ts.evaluate({1: {10: 1}}, {1: {10: 0.5, 11: 0.2}}, "P.1")
    assert nested.summary["P_1"] == 1.0


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (
            pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "a"], "score": [1.0, 2.0]}),
            "<DataFrame>: row 1: run lists document 'a' twice for query 'q1'",
        ),
        (
            pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "score": [1.0, math.nan]}),
            "<DataFrame>: row 1: score is NaN",
        ),
        (pd.DataFrame({"qid": ["q1"], "docno": ["a"], "value": [1.0]}), "no score column: expected one of score"),
        (pd.DataFrame({"query": ["q1"], "docno": ["a"], "score": [1.0]}), "no query id column"),
        (
            pd.DataFrame({"qid": ["q1", None], "docno": ["a", "b"], "score": [1.0, 2.0]}),
            "row 1: query id nan is not text",
        ),
        (
            pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "score": [1.0, "x"]}),
            "row 1: score 'x' is not a number",
        ),
        ({"q1": {"a": 1.0, "b": math.nan}}, "<dict>: row 1: score is NaN"),
        ([("q1", "a")], "<iterable>: row 0: expected a tuple with fields query_id, doc_id, score"),
    ],
)
def test_bad_in_memory_runs_name_the_row(tiny, run, message):
    qrels, _ = tiny
    with pytest.raises(InputFormatError) as err:
        ts.evaluate(qrels, run, "P.1")
    assert message in str(err.value)


def test_bad_in_memory_qrels_and_dedupe(tiny):
    _, run = tiny
    with pytest.raises(InputFormatError, match=r"row 0: relevance 1.5 is not an integer"):
        ts.evaluate(pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [1.5]}), run)
    dup = pd.DataFrame({"qid": ["q1", "q1", "q1"], "docno": ["a", "b", "a"], "score": [3.0, 2.0, 1.0]})
    ev = ts.evaluate({"q1": {"a": 1}}, dup, "P.1", dedupe="first")
    assert ev.summary["P_1"] == 1.0 and ev.provenance["duplicates_dropped"] == {"run": 1, "qrels": 0}
    with pytest.raises(UnknownMeasureError, match="did you mean"):
        ts.evaluate({"q1": {"a": 1}}, dup, "ndcg_cutt.10", dedupe="first")


def test_measure_objects_and_strings(tiny):
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    qrels, run = tiny
    a = ts.evaluate(qrels, run, [ir_measures.nDCG @ 2, ir_measures.P @ 1, "recall.2"])
    b = ts.evaluate(qrels, run, ["ndcg_cut.2", "P.1", "R@2"])
    assert a.summary.to_list() == b.summary.to_list()
    assert list(a.summary.index) == ["nDCG@2", "P@1", "recall_2"]  # ir_measures names as given, trec_eval's printed
    assert list(b.summary.index) == ["ndcg_cut_2", "P_1", "R@2"]


# ------------------------------------------------------------------ interop
def test_long_forms_match_ir_measures_iter_calc(dl19):
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    qrels, run = dl19
    measures = [ir_measures.nDCG @ 10, ir_measures.P @ 10, ir_measures.R @ 100, ir_measures.AP, ir_measures.RR]
    # trec_eval 10 compares scores as doubles, as pytrec_eval does; ir_measures' RR has no cutoff here
    ev = ts.evaluate(qrels, run, measures, trec_eval=10)
    theirs = pd.DataFrame(
        [
            (m.query_id, str(m.measure), m.value)
            for m in ir_measures.iter_calc(
                measures, ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run))
            )
        ],
        columns=["query_id", "measure", "value"],
    )
    ours = ev.to_ir_measures()
    assert list(ours.columns) == ["query_id", "measure", "value"]
    merged = ours.merge(theirs, on=["query_id", "measure"], suffixes=("", "_ir"), validate="one_to_one")
    assert len(merged) == len(ours) == len(theirs) == 43 * 5
    assert np.abs(merged["value"] - merged["value_ir"]).max() < 1e-9
    agg = ir_measures.calc_aggregate(
        measures, ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run))
    )
    for m, v in agg.items():
        assert ev.summary[str(m)] == pytest.approx(v, abs=1e-12)
    pt = ev.to_pyterrier("bm25")
    assert list(pt.columns) == ["name", "qid", "measure", "value"] and set(pt["name"]) == {"bm25"}


@pytest.mark.slow  # ranx compiles its metrics with numba on first use: about 90 s on 2 cores
def test_values_match_ranx(dl19):
    """ranx agrees where its definitions are trec_eval's: nDCG@10 (linear gain), P@10, R@100, MRR@100, AP@100
    (ranx divides by all relevant documents, as map_cut does). It breaks score ties by its own sort (not by
    doc id descending), so the run is first given distinct scores in trec_eval's order."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    qrels, run = dl19
    frame = ts.Run.read(run).to_frame()
    frame["score"] = -frame["rank"].astype(float)  # distinct scores, trec_eval's order kept
    ev = ts.evaluate(qrels, frame, ["ndcg_cut.10", "P.10", "recall.100", "map_cut.100", "recip_rank"], trec_eval=10)
    q = ranx.Qrels.from_file(str(qrels), kind="trec")
    r = ranx.Run(ts.Run.from_frame(frame).to_dict())
    got = ranx.evaluate(q, r, ["ndcg@10", "precision@10", "recall@100", "map@100", "mrr@100"])
    for theirs, ours in (
        ("ndcg@10", "ndcg_cut_10"),
        ("precision@10", "P_10"),
        ("recall@100", "recall_100"),
        ("map@100", "map_cut_100"),
        ("mrr@100", "recip_rank"),
    ):
        assert got[theirs] == pytest.approx(ev.summary[ours], abs=1e-9), theirs


def test_run_round_trip(tmp_path, dl19):
    _, run = dl19
    r = ts.Run.read(run)
    f = r.to_frame("pyterrier")
    assert list(f.columns) == ["qid", "docno", "score", "rank"]
    back = ts.Run.from_frame(f, tag="bm25")
    back.write(tmp_path / "again.txt")
    assert ts.evaluate("dl19-passage", tmp_path / "again.txt", "all_trec").summary.equals(
        ts.evaluate("dl19-passage", r, "all_trec").summary
    )
    assert ts.Run.read(tmp_path / "again.txt").tag == "bm25"
