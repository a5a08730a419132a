"""Malformed inputs: each is parsed correctly or rejected with file:line, reason and exit 1."""

from __future__ import annotations

import gzip

import pytest

from toolkit.errors import InputFormatError
from toolkit.trec_io import read_qrels, read_run, read_topics

QRELS = "q1 0 D1 2\nq1 0 D2 1\nq1 0 D3 0\nq2 0 D1 1\n"
RUN = "q1 Q0 D1 1 3.0 t\nq1 Q0 D2 2 2.0 t\nq1 Q0 X 3 1.0 t\nq2 Q0 D1 1 5.0 t\n"


def write(tmp_path, name, text, binary=False):
    p = tmp_path / name
    p.write_bytes(text if binary else text.encode())
    return p


@pytest.mark.parametrize(
    "text,line,reason",
    [
        (RUN.replace("q1 Q0 D2 2 2.0 t", "q1 Q0 D1 2 2.0 t"), 2, "lists document 'D1' twice for query 'q1'"),
        (RUN.replace("2.0", "abc"), 2, "score 'abc' is not a number"),
        (RUN.replace("2.0", "nan"), 2, "score is NaN"),
        (RUN.replace("2.0", "NaN"), 2, "score is NaN"),
        (RUN.replace(" t\nq1 Q0 X", "\nq1 Q0 X"), 2, "expected 6 columns"),
        ("", None, "empty file"),
        ("\n\n  \n", None, "empty file"),
        ("\n" + RUN.replace("q2 Q0 D1 1 5.0 t", "q2 Q0 D1 1 5.0 t\nq2 Q0 D1 2 4.0 t"), 6, "twice"),
    ],
)
def test_run_rejected_with_line(tmp_path, cli, text, line, reason):
    run = write(tmp_path, "run.txt", text)
    with pytest.raises(InputFormatError) as err:
        read_run(run)
    assert err.value.line == line and reason in err.value.reason
    qrels = write(tmp_path, "qrels.txt", QRELS)
    res = cli("eval", "-m", "map", qrels, run)
    assert res.exit_code == 1
    where = f"{run}:{line}" if line else f"{run}"
    assert f"Error: {where}: " in res.stderr and reason in res.stderr


@pytest.mark.parametrize(
    "text,line,reason",
    [
        (QRELS + "q1 0 D1 0\n", 5, "lists document 'D1' twice for query 'q1'"),
        (QRELS + "q1 0 D1 2\n", 5, "twice"),
        (QRELS.replace("D2 1", "D2 1.5"), 2, "relevance '1.5' is not an integer"),
        (QRELS.replace("D2 1", "D2 high"), 2, "relevance 'high' is not an integer"),
        (QRELS.replace("q2 0 D1 1", "q2 D1 1"), 4, "expected 4 columns"),
        ("", None, "empty file"),
    ],
)
def test_qrels_rejected_with_line(tmp_path, cli, text, line, reason):
    qrels = write(tmp_path, "qrels.txt", text)
    with pytest.raises(InputFormatError) as err:
        read_qrels(qrels)
    assert err.value.line == line and reason in err.value.reason
    res = cli("eval", "-m", "map", qrels, write(tmp_path, "run.txt", RUN))
    assert res.exit_code == 1 and "Error: " in res.stderr


def _values(cli, qrels, run, *args):
    res = cli("eval", "-q", "--no-provenance", "-m", "map", "-m", "P.5", "-m", "num_ret", *args, qrels, run)
    assert res.exit_code == 0, res.stderr
    return res.stdout, res.stderr


@pytest.mark.parametrize(
    "transform",
    [
        lambda t: "\ufeff" + t,  # UTF-8 BOM: the first query must keep its id
        lambda t: t.replace("\n", "\r\n"),  # CRLF
        lambda t: t.replace(" ", "\t"),  # tabs
        lambda t: t.replace(" ", " \t  "),  # mixed tabs and spaces
        lambda t: "\n".join("  " + line + "  " for line in t.split("\n")),  # edge whitespace, blank lines
    ],
)
def test_tolerated_layouts_give_identical_results(tmp_path, cli, transform):
    base = _values(cli, write(tmp_path, "q", QRELS), write(tmp_path, "r", RUN))
    got = _values(cli, write(tmp_path, "q2", transform(QRELS)), write(tmp_path, "r2", transform(RUN)))
    assert got[0] == base[0]
    assert "q1\t" in got[0]


def test_gzip_input(tmp_path, cli):
    gz = tmp_path / "run.txt.gz"
    gz.write_bytes(gzip.compress(RUN.encode()))
    assert (
        _values(cli, write(tmp_path, "q", QRELS), gz)[0]
        == _values(cli, write(tmp_path, "q", QRELS), write(tmp_path, "r", RUN))[0]
    )


def test_infinite_scores_rank_first_and_last(tmp_path, cli):
    run = RUN.replace("q1 Q0 X 3 1.0 t", "q1 Q0 X 3 inf t").replace("q1 Q0 D1 1 3.0 t", "q1 Q0 D1 1 -inf t")
    out, _ = (
        cli(
            "eval", "-q", "--no-provenance", "-m", "recip_rank", write(tmp_path, "q", QRELS), write(tmp_path, "r", run)
        ).stdout,
        None,
    )
    assert "recip_rank            \tq1\t0.5000" in out  # X (inf) first, D2 second, D1 (-inf) last


def test_negative_labels_are_unjudged_not_relevant(tmp_path, cli):
    qrels = QRELS.replace("q1 0 D2 1", "q1 0 D2 -1")
    out, _ = _values(cli, write(tmp_path, "q", qrels), write(tmp_path, "r", RUN))
    assert "map                   \tq1\t1.0000" in out  # only D1 is relevant now
    res = cli("eval", "-q", "--no-provenance", "-m", "judged.3", write(tmp_path, "q", qrels), write(tmp_path, "r", RUN))
    assert "judged_3              \tq1\t0.3333" in res.stdout  # D2 (-1) and X are unjudged


def test_query_with_only_zero_labels_scores_zero(tmp_path, cli):
    qrels = QRELS + "q3 0 D9 0\n"
    run = RUN + "q3 Q0 D9 1 1.0 t\n"
    out, _ = _values(cli, write(tmp_path, "q", qrels), write(tmp_path, "r", run))
    assert "map                   \tq3\t0.0000" in out
    assert "P_5                   \tq3\t0.0000" in out


def test_run_queries_without_judgments_are_ignored(tmp_path, cli):
    run = RUN + "q9 Q0 D1 1 1.0 t\n"
    out, err = _values(cli, write(tmp_path, "q", QRELS), write(tmp_path, "r", run))
    assert "\tq9\t" not in out
    assert "1 run queries have no judgments" in err
    assert out == _values(cli, write(tmp_path, "q", QRELS), write(tmp_path, "r0", RUN))[0]


def test_qrels_queries_missing_from_run_are_reported(tmp_path, cli):
    qrels = QRELS + "q3 0 D9 1\n"
    qf, rf = write(tmp_path, "q", qrels), write(tmp_path, "r", RUN)
    res = cli("eval", "--no-provenance", "-m", "num_q", "-m", "map", qf, rf)
    assert "num_q                 \tall\t2" in res.stdout
    assert "1 of 3 qrels queries have no line in the run" in res.stderr and "-c" in res.stderr
    res = cli("eval", "--no-provenance", "-c", "-m", "num_q", qf, rf)
    assert "num_q                 \tall\t3" in res.stdout and "no line in the run" not in res.stderr


def test_dedupe_first_keeps_first_and_reports(tmp_path, cli):
    run = RUN.replace("q1 Q0 X 3 1.0 t", "q1 Q0 D1 3 1.0 t\nq1 Q0 X 4 0.5 t")
    rf = write(tmp_path, "r", run)
    r = read_run(rf, dedupe="first")
    assert r.duplicates_dropped == 1 and len(r) == 4
    res = cli("eval", "--dedupe", "first", "-m", "map", write(tmp_path, "q", QRELS), rf)
    assert res.exit_code == 0
    assert "--dedupe first dropped 1 duplicate line(s) from the run" in res.stderr
    assert '"run": 1' in res.stdout  # provenance records it


def test_missing_file_and_unknown_measure(tmp_path, cli):
    res = cli("eval", "-m", "map", write(tmp_path, "q", QRELS), tmp_path / "nope.txt")
    assert res.exit_code == 1 and "no such file" in res.stderr
    res = cli("eval", "-m", "ndcg_cutt.10", write(tmp_path, "q", QRELS), write(tmp_path, "r", RUN))
    assert res.exit_code == 1 and "did you mean 'ndcg_cut'" in res.stderr


def test_topics_formats(tmp_path):
    assert read_topics(write(tmp_path, "t.tsv", "1\thello world\n2\tbye\n")).as_dict() == {
        "1": "hello world",
        "2": "bye",
    }
    assert read_topics(write(tmp_path, "t.jsonl", '{"_id": "7", "text": "x y"}\n')).as_dict() == {"7": "x y"}
    trec = "<top>\n<num> Number: 301\n<title> foreign minorities\n<desc> Description:\nx\n</top>\n"
    assert read_topics(write(tmp_path, "t.trec", trec)).as_dict() == {"301": "foreign minorities"}
    with pytest.raises(InputFormatError, match=r"line 1|:1:"):
        read_topics(write(tmp_path, "bad.tsv", "no tab here\n"))


def test_query_whose_labels_are_all_negative(tmp_path, cli):
    # pytrec_eval can hang on this (trec_eval reads rel_levels[-1]); by definition every measure is 0.
    qrels = QRELS + "q3 0 D9 -1\n"
    run = RUN + "q3 Q0 D9 1 1.0 t\n"
    res = cli(
        "eval",
        "-q",
        "--no-provenance",
        "-m",
        "ndcg_cut.10",
        "-m",
        "map",
        "-m",
        "judged.10",
        write(tmp_path, "q", qrels),
        write(tmp_path, "r", run),
    )
    assert "ndcg_cut_10           \tq3\t0.0000" in res.stdout
    assert "map                   \tq3\t0.0000" in res.stdout
    assert "judged_10             \tq3\t0.0000" in res.stdout
