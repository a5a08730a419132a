"""Agreement with Pyserini's bundled trec_eval and with pytrec_eval on the ten real DL runs."""

from __future__ import annotations

import pytest
from needs import required
from oracles import jar_trec_eval, parse_output, pyserini_trec_eval, pytrec_inputs

from toolkit.cli.eval import format_value, render_text
from toolkit.data.trec_io import read_qrels, read_run
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measures

RUNS = [
    f"run.{y}.{m}.top100.txt"
    for y in ("dl19", "dl20")
    for m in ("bm25", "bm25-rm3", "tasb", "openai-ada2", "splade-pp-ed")
]
MEASURES = [
    "ndcg_cut.10,100",
    "recall.100",
    "P.10",
    "map",
    "recip_rank",
    "ndcg",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
]
#: the published two-stage table's measures (nDCG@10, AP@100, R@20, R@100) and every other trec_eval 9 measure
#: (one parameter list per family: trec_eval keeps only the first, twostage would take the union)
ALL = ["all_trec", "ndcg_cut.10,100", "recall.20,100", "P.10", "map_cut.100"]


def _qrels_path(msmarco, run_name):
    year = run_name.split(".")[1]
    return msmarco / f"qrels.{year}-passage.txt"


def _ours(qrels_path, run_path, level, complete, precision="float32"):
    return evaluate(
        read_qrels(qrels_path),
        read_run(run_path),
        parse_measures(MEASURES),
        EvalSettings(relevance_level=level, complete=complete, score_precision=precision),
    )


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("complete", [False, True])
def test_matches_pyserini_trec_eval_per_query(msmarco, run_name, level, complete):
    qrels, run = _qrels_path(msmarco, run_name), msmarco / "runs" / run_name
    args = ["-q", "-l", str(level)] + (["-c"] if complete else [])
    for m in ALL:
        args += ["-m", m]
    expected = parse_output(jar_trec_eval(args + [qrels, run]))
    ours = evaluate(
        read_qrels(qrels), read_run(run), parse_measures(ALL), EvalSettings(relevance_level=level, complete=complete)
    )
    got = parse_output(render_text(ours, per_query=True, provenance=False))
    assert got.keys() == expected.keys()
    diffs = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert not diffs


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("level", [1, 2])
def test_matches_pytrec_eval_float64(msmarco, run_name, level):
    qrels_path, run_path = _qrels_path(msmarco, run_name), msmarco / "runs" / run_name
    pytrec_eval = required(
        "pytrec_eval", "pytrec_eval is an independent oracle of trec_eval's measures (pip install .[test])"
    )
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    ours = evaluate(
        qrels, run, parse_measures(MEASURES[:6]), EvalSettings(relevance_level=level, score_precision="float64")
    )
    q, r = pytrec_inputs(qrels.frame, run.frame)
    oracle = pytrec_eval.RelevanceEvaluator(
        q, {"ndcg_cut.10,100", "recall.100", "P.10", "map", "recip_rank", "ndcg"}, relevance_level=level
    ).evaluate(r)
    wide = ours.wide()
    assert sorted(wide.index) == sorted(oracle)
    for qid, row in wide.iterrows():
        for name, value in row.items():
            assert value == pytest.approx(oracle[qid][name], abs=1e-9), (qid, name)


def test_reference_figures_in_data_readme(msmarco):
    # ../shared/data/README.md: dl19 bm25 nDCG@10 0.5058, R@100 (-l 2) 0.4910; dl20 splade 0.7197 / 0.7653
    for run_name, ndcg, r100 in [
        ("run.dl19.bm25.top100.txt", "0.5058", "0.4910"),
        ("run.dl20.splade-pp-ed.top100.txt", "0.7197", "0.7653"),
    ]:
        qrels, run = _qrels_path(msmarco, run_name), msmarco / "runs" / run_name
        n = _ours(qrels, run, 1, True).aggregate["ndcg_cut_10"]
        r = _ours(qrels, run, 2, True).aggregate["recall_100"]
        assert (f"{n:.4f}", f"{r:.4f}") == (ndcg, r100)


def test_same_as_python_m_pyserini_eval(msmarco, cli):
    qrels, run = msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.openai-ada2.top100.txt"
    args = ["-c", "-l", "2", "-m", "recall.100", "-m", "map", "-m", "P.10"]
    expected = parse_output(pyserini_trec_eval(args + [qrels, run]))
    res = cli("eval", *args, qrels, run)
    assert res.exit_code == 0
    assert parse_output(res.stdout) == expected


def test_format_value_counts_and_floats():
    num_ret, ndcg = parse_measures(["num_ret", "ndcg_cut.10"])
    assert format_value(num_ret, 4300.0) == "4300"
    assert format_value(ndcg, 0.50575) == "0.5058" or format_value(ndcg, 0.50575) == "0.5057"
