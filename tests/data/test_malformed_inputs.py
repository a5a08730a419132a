"""Malformed inputs: each is parsed correctly or rejected with file:line, reason and exit 1."""

from __future__ import annotations

import gzip
import re

import pytest
from needs import lacking

from toolkit.data.trec_io import read_qrels, read_run, read_topics
from toolkit.errors import InputFormatError

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
    assert res.exit_code == 1 and "did you mean 'ndcg_cut.10'" in res.stderr


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


# ------------------------------------------ inputs that cannot mean what the user thinks
def _native(args):
    from oracles import native_trec_eval, native_trec_eval_output

    if native_trec_eval() is None:
        lacking("no native trec_eval 9.0.4 for this machine")
    return native_trec_eval_output([str(a) for a in args])


def test_no_common_query_is_an_error_naming_both_files(tmp_path, cli):
    qf, rf = write(tmp_path, "qrels.txt", QRELS), write(tmp_path, "run.txt", RUN.replace("q", "x"))
    for extra in ([], ["-c"], ["--trec-eval", "10"]):
        res = cli("eval", *extra, "-m", "map", qf, rf)
        assert res.exit_code == 1, extra
        assert res.stderr.startswith(f"Error: {rf} and {qf} have no query in common (run: 2 queries, e.g. 'x1', 'x2';")
        assert "judgments: 2 queries, e.g. 'q1', 'q2'" in res.stderr and "--allow-no-common" in res.stderr
    assert _native(["-m", "map", qf, rf])[0] == 7  # trec_eval 9: "No queries with both results and relevance info"
    assert _native(["-c", "-m", "map", qf, rf])[0] == 7


def test_allow_no_common_prints_zeros_and_says_so(tmp_path, cli):
    import json

    qf, rf = write(tmp_path, "qrels.txt", QRELS), write(tmp_path, "run.txt", RUN.replace("q", "x"))
    res = cli("eval", "--allow-no-common", "--format", "json", "-c", "-m", "map", "-m", "num_q", qf, rf)
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["all"] == {"map": 0.0, "num_q": 2.0}
    assert doc["provenance"]["no_common_queries"].startswith("allowed (--allow-no-common)")
    text = cli("eval", "--allow-no-common", "-m", "map", qf, rf).stdout
    assert "# no_common_queries: allowed (--allow-no-common)" in text


def test_no_common_query_in_memory_is_a_typed_error():
    from toolkit.data.records import qrels_from_rows, run_from_rows
    from toolkit.errors import NoCommonQueriesError
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import parse_measures

    with pytest.raises(NoCommonQueriesError, match=r"run: 1 queries.*judgments: 1 queries"):
        evaluate(qrels_from_rows([("1", "d", 1)]), run_from_rows([("2", "d", 1.0)]), parse_measures(["map"]))


@pytest.mark.parametrize(
    "byte,name,column",
    [(b"\x00", "NUL", 8), (b"\x01", "control character U+0001", 8), (b"\x7f", "control character U+007F", 8)],
)
def test_control_characters_in_ids_are_errors_with_line(tmp_path, cli, byte, name, column):
    run = b"q1 Q0 D1 1 3.0 t\nq1 Q0 D" + byte + b"2 2 2.0 t\n"
    rf = write(tmp_path, "run.txt", run, binary=True)
    with pytest.raises(InputFormatError) as err:
        read_run(rf)
    assert err.value.line == 2 and err.value.reason.startswith(f"{name} at column {column}; ids must be printable")
    res = cli("eval", "-m", "map", write(tmp_path, "q", QRELS), rf)
    assert res.exit_code == 1 and f"Error: {rf}:2: {name}" in res.stderr
    qf = write(tmp_path, "qrels.txt", QRELS.encode().replace(b"D3", b"D" + byte + b"3"), binary=True)
    with pytest.raises(InputFormatError) as err:
        read_qrels(qf)
    assert err.value.line == 3 and name in err.value.reason
    gz = tmp_path / "run.txt.gz"
    gz.write_bytes(gzip.compress(run))
    with pytest.raises(InputFormatError, match=re.escape(name)):
        read_run(gz)


def test_control_character_in_a_prefs_file(tmp_path):
    from toolkit.data.trec_io import read_prefs

    pf = write(tmp_path, "prefs", b"q1 g 0 d\x002 1\n", binary=True)
    with pytest.raises(InputFormatError, match=r"prefs:1: NUL at column 9"):
        read_prefs(pf)


def _json(cli, *args):
    return _json_and_stderr(cli, *args)[0]


def _json_and_stderr(cli, *args):
    """The JSON the CLI prints and what it says on stderr (warnings: ``twostage: warning: ...``, each once)."""
    import json

    res = cli("eval", "--format", "json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), res.stderr


def test_all_equal_scores_are_warned_and_recorded(tmp_path, cli, caplog):
    tied = "".join(f"q1 Q0 D{i} {i} 1.0 t\n" for i in (1, 2, 3)) + "q2 Q0 D1 1 1.0 t\nq2 Q0 X 2 1.0 t\n"
    qf, rf = write(tmp_path, "q", QRELS), write(tmp_path, "r", tied)
    doc, err = _json_and_stderr(cli, "-q", "-m", "map", qf, rf)
    assert err.count(f"twostage: warning: every score in {rf} is 1.0: their order is then the documents' ids") == 1
    assert doc["provenance"]["input_warnings"] == [
        f"every score in {rf} is 1.0: their order is then the documents' ids (descending), not a ranking"
    ]
    # the number is trec_eval's all the same: D3 D2 D1 for q1 (doc ids descending)
    rc, out = _native(["-q", "-m", "map", qf, rf])
    assert rc == 0 and f"{doc['per_query']['q1']['map']:.4f}" in out.split("map                   \tq1\t")[1][:6]


def test_a_query_with_all_scores_equal_is_named(tmp_path, cli, caplog):
    run = RUN.replace("q1 Q0 D2 2 2.0 t", "q1 Q0 D2 2 3.0 t").replace("q1 Q0 X 3 1.0 t", "q1 Q0 X 3 3.0 t")
    run += "q2 Q0 D9 2 4.0 t\n"
    doc, err = _json_and_stderr(cli, "-m", "map", write(tmp_path, "q", QRELS), write(tmp_path, "r", run))
    assert "1 of 2 queries in" in err and "have all scores equal (e.g. 'q1')" in err
    assert len(doc["provenance"]["input_warnings"]) == 1


def test_scores_equal_only_in_float32_are_ties_for_trec_eval_9(tmp_path, cli, caplog):
    run = "q1 Q0 D1 1 1.00000001 t\nq1 Q0 D2 2 1.0 t\n"
    qf, rf = write(tmp_path, "q", QRELS), write(tmp_path, "r", run)
    assert "input_warnings" in _json(cli, "-m", "map", qf, rf)["provenance"]  # float32: one value
    assert "input_warnings" not in _json(cli, "--trec-eval", "10", "-m", "map", qf, rf)["provenance"]


def test_distinct_scores_give_no_warning(tmp_path, cli, caplog):
    doc, err = _json_and_stderr(cli, "-m", "map", "-m", "P.1", write(tmp_path, "q", QRELS), write(tmp_path, "r", RUN))
    assert "input_warnings" not in doc["provenance"] and "warning" not in err


def test_cutoff_beyond_every_query_is_warned_and_the_value_is_trec_evals(tmp_path, cli, caplog):
    qf, rf = write(tmp_path, "q", QRELS), write(tmp_path, "r", RUN)
    doc, err = _json_and_stderr(cli, "-m", "recall.1000", "-m", "P.1000", "-m", "P.3", qf, rf)
    expected = "P_1000, recall_1000: cutoff beyond every query's depth (the deepest query has 3 documents)"
    assert expected in err and doc["provenance"]["input_warnings"][0].startswith(expected)
    rc, out = _native(["-m", "recall.1000", "-m", "P.1000", qf, rf])
    assert rc == 0
    assert f"recall_1000           \tall\t{doc['all']['recall_1000']:.4f}" in out
    assert f"P_1000                \tall\t{doc['all']['P_1000']:.4f}" in out
    with caplog.at_level("WARNING"):
        doc = _json(cli, "-M", "2", "-m", "P.3", qf, rf)  # -M 2 makes 3 too deep
    assert "the deepest query has 2 documents after -M" in doc["provenance"]["input_warnings"][0]


def test_warnings_reach_stderr_of_the_command(tmp_path):
    """A ``TwostageWarning`` printed once, as ``twostage: warning: ...``, on the real stderr; PYTHONPATH kept."""
    import os
    import subprocess
    import sys

    tied = "q1 Q0 D1 1 1.0 t\nq1 Q0 D2 2 1.0 t\n"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit.cli",
            "eval",
            "-m",
            "map",
            write(tmp_path, "q", QRELS),
            write(tmp_path, "r", tied),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert proc.returncode == 0 and proc.stderr.count("twostage: warning: every score in") == 1
    assert "TwostageWarning" not in proc.stderr  # not Python's own warning display


def test_in_memory_ids_that_are_not_strings_are_a_typed_error():
    import pandas as pd

    from toolkit.data.records import Run, qrels_from_rows
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import parse_measures

    qrels = qrels_from_rows([("1", "d1", 1), ("2", "d1", 1)])
    ints = Run(frame=pd.DataFrame({"query_id": [1, 2], "doc_id": ["d1", "d1"], "score": [1.0, 1.0]}))
    with pytest.raises(InputFormatError, match=r"the run's query_id column holds int64 values, not strings"):
        evaluate(qrels, ints, parse_measures(["map"]))
    mixed = Run(frame=pd.DataFrame({"query_id": ["1", 2], "doc_id": ["d1", "d1"], "score": [1.0, 1.0]}))
    with pytest.raises(InputFormatError, match=r"holds mixed-integer values"):
        evaluate(qrels, mixed, parse_measures(["map"]))
    fine = Run(frame=pd.DataFrame({"query_id": ["1", "2"], "doc_id": ["d1", "d1"], "score": [2.0, 1.0]}))
    assert evaluate(qrels, fine, parse_measures(["map"])).aggregate["map"] == 1.0


def test_query_stats_cover_the_judged_run_queries_only(tmp_path):
    """The tie and depth checks read the judged queries' blocks alone, a query listed in several blocks summed."""
    from toolkit.evaluation.checks import _query_stats

    (tmp_path / "q.txt").write_text("a 0 d1 1\nb 0 d1 1\n")
    (tmp_path / "r.txt").write_text(
        "a Q0 d1 1 1.0 r\nx Q0 d1 1 5.0 r\nx Q0 d2 2 5.0 r\na Q0 d2 2 3.0 r\nb Q0 d9 1 2.0 r\nb Q0 d8 2 2.0 r\n"
    )
    stats = _query_stats(read_run(tmp_path / "r.txt"), read_qrels(tmp_path / "q.txt"), "float32")
    assert list(stats.index) == ["a", "b"]
    assert stats["n"].tolist() == [2, 2] and stats["lo"].tolist() == [1.0, 2.0] and stats["hi"].tolist() == [3.0, 2.0]
