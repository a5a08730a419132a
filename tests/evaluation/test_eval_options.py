"""trec_eval's options and inputs beyond -q/-c/-l/-M/-J: -n, -N, -R, -Z, stdin, comments; bad new inputs."""

from __future__ import annotations

import json
import math

import pytest
from needs import lacking
from oracles import native_trec_eval, native_trec_eval_output

QRELS = "q1 0 D1 2\nq1 0 D2 1\nq1 0 D3 0\nq1 0 D4 -1\nq2 0 D1 1\nq2 0 D5 0\n"
RUN = (
    "q1 Q0 D1 1 3.0 first\nq1 Q0 D9 2 2.5 x\nq1 Q0 D2 3 2.0 x\nq1 Q0 D4 4 1.0 x\n"
    "q2 Q0 D5 1 5.0 x\nq2 Q0 D1 2 4.0 last\n"
)


@pytest.fixture()
def files(tmp_path):
    q, r = tmp_path / "qrels", tmp_path / "run"
    q.write_text(QRELS)
    r.write_text(RUN)
    return q, r


def lines(res):
    return [tuple(x.split("\t")) for x in res.stdout.splitlines() if not x.startswith("#")]


def test_no_summary_and_runid_from_last_line(cli, files):
    q, r = files
    res = cli("eval", "-q", "-n", "-m", "runid", "-m", "P.2", q, r)
    assert all(row[1] != "all" for row in lines(res)) and lines(res)
    res = cli("eval", "--no-provenance", "-m", "runid", q, r)
    assert res.stdout == "runid                 \tall\tlast\n"  # trec_eval keeps the last line's tag


def test_utility_with_collection_size(cli, files):
    q, r = files
    res = cli("eval", "--no-provenance", "-q", "-N", "100", "-m", "utility.1,-1,-1,0.5", q, r)
    # q1: a=2 relevant retrieved, b=2 other retrieved, c=0 relevant missed, d=100+2-4-2=96
    assert ("utility_1,-1,-1,0.5   ", "q1", f"{2 - 2 - 0 + 0.5 * 96:.4f}") in lines(res)
    if native_trec_eval():
        assert res.stdout == native_trec_eval_output(["-q", "-N", "100", "-m", "utility.1,-1,-1,0.5", q, r])[1]


def test_run_from_stdin(cli, files):
    q, r = files
    res = cli("eval", "--no-provenance", "-m", "map", "-m", "P.2", q, "-", input=RUN)
    assert res.exit_code == 0 and res.stdout == cli("eval", "--no-provenance", "-m", "map", "-m", "P.2", q, r).stdout
    bad = cli("eval", "-m", "map", q, "-", input="q1 Q0 D1 1 abc t\n")
    assert bad.exit_code == 1 and "Error: -:1: score 'abc' is not a number" in bad.stderr


def test_comment_lines_are_skipped_counted_and_recorded(cli, files, tmp_path):
    q, r = files
    rc = tmp_path / "run.comments"
    rc.write_text("# a comment\n" + RUN.replace("q2 Q0 D5", "  # indented comment\nq2 Q0 D5"))
    qc = tmp_path / "qrels.comments"
    qc.write_text("#c\n" + QRELS)
    res = cli("eval", "--format", "json", "-m", "map", qc, rc)
    doc = json.loads(res.stdout)
    assert doc["provenance"]["comment_lines"] == {"run": 2, "qrels": 1}
    assert "skipped 2 comment line(s) ('#') in the run" in res.stderr
    assert doc["all"]["map"] == json.loads(cli("eval", "--format", "json", "-m", "map", q, r).stdout)["all"]["map"]
    bad = tmp_path / "bad"
    bad.write_text("# only\nq1 Q0 D1 1 x t\n")
    res = cli("eval", "-m", "map", q, bad)
    assert res.exit_code == 1 and f"{bad}:2: score 'x' is not a number" in res.stderr  # line numbers count comments


def test_text_after_the_tag_is_ignored_and_reported(cli, files, tmp_path):
    q, _r = files
    extra = tmp_path / "run.extra"
    extra.write_text(RUN.replace(" x\n", " x more words\n", 1))
    res = cli("eval", "--format", "json", "-m", "map", q, extra)
    assert res.exit_code == 0 and "1 run line(s) have text after the tag" in res.stderr
    assert json.loads(res.stdout)["provenance"]["run_lines_with_text_after_tag"] == 1


def test_measures_need_their_judgment_format(cli, files):
    q, r = files
    res = cli("eval", "-R", "prefs", "-m", "map", q, r)
    assert res.exit_code == 1 and "map needs -R qrels" in res.stderr
    res = cli("eval", "-m", "prefs_simp", q, r)
    assert res.exit_code == 1 and "prefs_simp needs -R prefs or -R qrels_prefs" in res.stderr


def test_zscores(cli, files, tmp_path):
    q, r = files
    z = tmp_path / "z"
    z.write_text("q1 map 0.5 0.25\nq1 P_2 0.5 0\nq2 map 0.5 0.5\n")
    res = cli("eval", "--no-provenance", "-q", "-Z", z, "-m", "map", "-m", "P.2", "-m", "num_q", q, r)
    got = {(a.strip(), b): c for a, b, c in lines(res)}
    # q1: AP = (1/1 + 2/3) / 2 = 0.8333 -> (0.8333 - 0.5) / 0.25; P@2 = 0.5 equals the mean with stddev 0 -> 0
    assert got[("Zmap", "q1")] == f"{((1 + 2 / 3) / 2 - 0.5) / 0.25:.4f}"
    assert got[("ZP_2", "q1")] == "0.0000"
    assert got[("ZP_2", "q2")] == "-1000000.0000"  # no mean for (q2, P_2)
    assert got[("Znum_q", "all")] == "2.0000"


@pytest.mark.parametrize(
    "content,fmt,why",
    [
        ("1 g s d1\n", "prefs", ":1: expected 5 columns"),
        ("1 g s d1 x\n", "prefs", ":1: rel_level 'x' is not a number"),
        ("1 g s d1 1\n1 g s d1 2\n", "prefs", ":2: repeats line 1"),
        ("1 g d1 1 extra\n", "qrels_jg", ":1: expected 4 columns"),
        ("1 g d1 1.5\n", "qrels_jg", ":1: relevance '1.5' is not an integer"),
        ("# nothing else\n", "qrels_jg", "empty file"),
    ],
)
def test_bad_prefs_and_judgment_group_files(cli, files, tmp_path, content, fmt, why):
    _, r = files
    p = tmp_path / "judgments"
    p.write_text(content)
    m = "prefs_simp" if fmt == "prefs" else "map_avgjg"
    res = cli("eval", "-R", fmt, "-m", m, p, r)
    assert res.exit_code == 1 and res.stderr.startswith("Error: ") and why in res.stderr, res.output


@pytest.mark.parametrize(
    "content,why",
    [
        ("q1 map 0.5\n", ":1: expected 4 columns"),
        ("q1 map x 0.1\n", ":1: mean 'x' is not a number"),
        ("q1 map 0.5 -1\n", ":1: stddev '-1' is negative"),
        ("q1 map 0.5 0.1\nq1 map 0.4 0.1\n", ":2: query 'q1' measure 'map' appears twice"),
    ],
)
def test_bad_zscore_files(cli, files, tmp_path, content, why):
    q, r = files
    z = tmp_path / "z"
    z.write_text(content)
    res = cli("eval", "-Z", z, "-m", "map", q, r)
    assert res.exit_code == 1 and why in res.stderr, res.output


def test_gm_map_per_query_is_the_log_trec_eval_averages(cli, files):
    q, r = files
    doc = json.loads(cli("eval", "-q", "--format", "json", "-m", "gm_map", "-m", "map", q, r).stdout)
    for _qid, vals in doc["per_query"].items():
        assert vals["gm_map"] == pytest.approx(math.log(max(vals["map"], 1e-5)))
    assert doc["all"]["gm_map"] == pytest.approx(math.exp(sum(v["gm_map"] for v in doc["per_query"].values()) / 2))


def test_label_zero_with_a_gain_counts_as_in_trec_eval(cli, files):
    """As decided for twostage: a document counts in DCG when its gain is not 0, whatever its label,
    as trec_eval's ndcg.0=G does; --gain 0:0.5,... gives the same numbers as trec_eval's ndcg.0=0.5."""
    q, r = files
    ours = cli("eval", "--no-provenance", "-q", "-m", "ndcg", "--gain", "0:0.5,1:1,2:2", q, r)
    plain = cli("eval", "--no-provenance", "-q", "-m", "ndcg", q, r)
    assert ours.stdout != plain.stdout  # label-0 documents now count
    if native_trec_eval() is None:
        lacking("no native trec_eval here")
    status, want = native_trec_eval_output(["-q", "-m", "ndcg.0=0.5", q, r])
    assert status == 0
    assert [x.split("\t")[1:] for x in ours.stdout.splitlines()] == [x.split("\t")[1:] for x in want.splitlines()]
    res = cli("eval", "-m", "ndcg.1=3", "--gain", "exp", q, r)
    assert res.exit_code == 1 and "either as ndcg.L=G parameters or with --gain" in res.stderr


def test_one_declaration_of_settings_everywhere(cli, files, tmp_path):
    """compare and gain-sensitivity take eval's settings (they used to hard-code float32 and lack options)."""
    q, r = files
    r2 = tmp_path / "run2"
    r2.write_text(RUN.replace("3.0 first", "0.1 first"))
    for cmd in (["compare", "--qrels", q, r, r2], ["gain-sensitivity", q, r, r2]):
        res = cli(
            *cmd,
            "--trec-eval",
            "10",
            "--score-precision",
            "float64",
            "--relevance-map",
            "-1:0,0:0,1:1,2:2",
            "-c",
            "-l",
            "2",
            "-M",
            "3",
            "-J",
            "-N",
            "10",
            "--dedupe",
            "first",
        )
        assert res.exit_code == 0, res.output
    res = cli(
        "diagnose",
        "--qrels",
        q,
        "--first-stage",
        r,
        "--reranked",
        r2,
        "--out",
        tmp_path / "diag",
        "--trec-eval",
        "10",
        "--score-precision",
        "float64",
        "-M",
        "3",
        "--gain",
        "exp",
        "-m",
        "AP@100",
    )
    assert res.exit_code == 0, res.output
    prov = json.loads((tmp_path / "diag" / "summary.json").read_text())
    assert "trec_eval 10" in json.dumps(prov) and "map_cut_100" in json.dumps(prov)
    res = cli("compare", "--qrels", q, r, r2, "--trec-eval", "10", "--format", "json", "-m", "nDCG@10")
    prov = json.loads(res.stdout)["provenance"][str(r)]
    assert prov["trec_eval"] == 10 and prov["score_precision"] == "float64"
    assert json.loads(res.stdout)["measures"] == ["nDCG@10"]  # as asked
