"""Runs in MS MARCO's format (``qid<TAB>pid<TAB>rank``) are read by the one run reader, wherever a run is read:
detected from the first line, or named by ``run_format`` / ``--run-format``. The oracle of what such a run means
is Pyserini 1.6's own ``convert_msmarco_run_to_trec_run`` (run as a subprocess): score 1/rank, tag ``anserini``;
an MS MARCO run evaluates exactly as that conversion of it does."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import toolkit as ts
from toolkit.cli import main
from toolkit.data.records import RUN_FORMATS
from toolkit.data.trec_io import MSMARCO_MAX_RANK, detect_run_format, read_run, runs_read_as
from toolkit.errors import ConfigError, InputFormatError, TwostageWarning

RUNS = sorted(f"run.{c}.{m}.top100.txt" for c in ("dl19", "dl20") for m in ("bm25", "bm25-rm3", "tasb"))
QRELS = {"dl19": "qrels.dl19-passage.txt", "dl20": "qrels.dl20-passage.txt"}
SAMPLE = "q1\td3\t1\nq1\td1\t2\nq1\td2\t3\nq2\td9\t1\nq2\td1\t2\n"
SAMPLE_QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d9 2\n"


def msmarco_of(trec_run: Path, out: Path) -> Path:
    """A TREC run written in MS MARCO's format: query, document and the rank column as written (Anserini's
    ``convert_trec_run_to_msmarco_run`` keeps the rank column so)."""
    lines = [ln.split() for ln in trec_run.read_text().splitlines() if ln.strip()]
    out.write_text("".join(f"{f[0]}\t{f[2]}\t{f[3]}\n" for f in lines))
    return out


def pyserini_trec_of(msmarco_run: Path, out: Path) -> Path:
    """Pyserini's own conversion of an MS MARCO run to a TREC run."""
    subprocess.run(
        [sys.executable, "-m", "pyserini.eval.convert_msmarco_run_to_trec_run", "--input", str(msmarco_run)]
        + ["--output", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ reading
def test_msmarco_run_is_read_with_scores_one_over_rank_and_pyseris_tag(tmp_path):
    path = _write(tmp_path / "run.tsv", SAMPLE)
    run = read_run(path)
    assert run.run_format == "msmarco" and run.tag == "anserini" and run.runid == "anserini"
    assert run.frame.values.tolist() == [
        ["q1", "d3", 1.0],
        ["q1", "d1", 0.5],
        ["q1", "d2", 1.0 / 3],
        ["q2", "d9", 1.0],
        ["q2", "d1", 0.5],
    ]
    assert run.sha256 == hashlib.sha256(SAMPLE.encode()).hexdigest()
    pyserini = read_run(pyserini_trec_of(path, tmp_path / "run.trec"))
    assert run.frame.equals(pyserini.frame) and pyserini.tag == "anserini"  # Pyserini's scores, to the bit


@pytest.mark.parametrize("name", RUNS)
def test_msmarco_run_evaluates_as_pyserinis_conversion_of_it(msmarco, tmp_path, name):
    """Every trec_eval measure, per query and mean, and the runid, equal trec_eval's semantics on Pyserini's
    conversion; the rank order is trec_eval's order (no two ranks tie, even as trec_eval 9's floats)."""
    ms = msmarco_of(msmarco / "runs" / name, tmp_path / "run.tsv")
    converted = pyserini_trec_of(ms, tmp_path / "run.trec")
    qrels = msmarco / QRELS[name.split(".")[1]]
    for version in (9, 10):
        a = ts.evaluate(qrels, ms, ["all_trec"], trec_eval=version)
        b = ts.evaluate(qrels, converted, ["all_trec"], trec_eval=version)
        assert a.per_query.equals(b.per_query) and a.summary.equals(b.summary)
        assert a.provenance["run"]["format"] == RUN_FORMATS["msmarco"] and "format" not in b.provenance["run"]


def test_ranks_become_distinct_scores_as_trec_eval_9_compares_them():
    """Up to MSMARCO_MAX_RANK, 1/rank as a 32-bit float is strictly decreasing: trec_eval 9's order is the rank
    order; the first tie is past it."""
    scores = (1.0 / np.arange(1, MSMARCO_MAX_RANK + 2, dtype=np.float64)).astype(np.float32)
    assert (scores[1:-1] < scores[:-2]).all()
    first_tie = 11_864_338
    assert np.float32(1.0 / first_tie) == np.float32(1.0 / (first_tie + 1)) and first_tie > MSMARCO_MAX_RANK


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (SAMPLE, "msmarco"),
        ("\ufeff# a comment\n\n" + SAMPLE, "msmarco"),
        ("q1 d1 7\n", "msmarco"),
        ("q1 Q0 d1 1 1.5 tag\n", "trec"),
        ("q1\td1\t1.5\n", "trec"),  # a third column that is no rank: a TREC run with too few columns
        ("q1\td1\t+1\n", "trec"),
        ("q1\td1\n", "trec"),
        ("", "trec"),
    ],
)
def test_the_first_content_line_decides_the_format(tmp_path, text, fmt):
    assert detect_run_format(_write(tmp_path / "r", text)) == fmt


def test_layouts_a_trec_run_may_have_are_read_in_msmarco_format_too(tmp_path):
    """Spaces or tabs, CRLF, a BOM, '#' comment lines, gzip: the same rows; comment lines counted."""
    want = read_run(_write(tmp_path / "plain.tsv", SAMPLE)).frame
    variants = {
        "spaces.txt": SAMPLE.replace("\t", " "),
        "crlf.tsv": SAMPLE.replace("\n", "\r\n"),
        "bom.tsv": "\ufeff" + SAMPLE,
        "mixed.tsv": SAMPLE.replace("\t", "  \t", 2),
        "comments.tsv": "# made by a reranker\n" + SAMPLE,
    }
    for name, text in variants.items():
        run = read_run(_write(tmp_path / name, text))
        assert run.frame.equals(want) and run.run_format == "msmarco", name
    assert read_run(tmp_path / "comments.tsv").comment_lines == 1
    gz = tmp_path / "run.tsv.gz"
    gz.write_bytes(gzip.compress(SAMPLE.encode()))
    assert read_run(gz).frame.equals(want)


def test_run_format_names_the_format_and_refuses_the_other(tmp_path):
    ms = _write(tmp_path / "ms.tsv", SAMPLE)
    trec = _write(tmp_path / "run.trec", "q1 Q0 d1 1 2.5 t\n")
    with pytest.raises(InputFormatError) as err:
        read_run(ms, run_format="trec")
    assert str(err.value) == (
        f"{ms}:1: expected 6 columns (query_id Q0 doc_id rank score tag), found 3; an MS MARCO run "
        "(query_id<TAB>doc_id<TAB>rank) is read as one when its first line is (a whole-number rank third), "
        "or with run_format='msmarco'"
    )
    with pytest.raises(InputFormatError) as err:
        read_run(trec, run_format="msmarco")
    assert str(err.value) == (
        f"{trec}:1: expected 3 columns (query_id<TAB>doc_id<TAB>rank) of an MS MARCO run, found 6; a TREC run is "
        "read with run_format='trec' or auto"
    )
    assert read_run(ms, run_format="msmarco").run_format == "msmarco"
    with pytest.raises(ConfigError, match="run_format must be one of trec, msmarco, auto, not 'tsv'"):
        read_run(ms, run_format="tsv")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("q1\td1\t1\nq1\td2\tx\n", 2, "rank 'x' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t+2\n", 2, "rank '+2' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t0x10\n", 2, "rank '0x10' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t\u0663\n", 2, "rank '\\u0663' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t-1\n", 2, "rank '-1' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t2.0\n", 2, "rank '2.0' is not a whole number written in the digits 0-9"),
        ("q1\td1\t1\nq1\td2\t0\n", 2, "rank 0 is out of range: ranks start at 1"),
        ("q1\td1\t1\nq1\td2\t10000001\n", 2, "rank 10000001 is out of range: the highest rank read is 10,000,000"),
        ("q1\td1\t1\nq1\td2\t" + "9" * 5000 + "\n", 2, "rank '" + "9" * 40 + "...' (5,000 characters) has 5,000"),
        ("q1\td1\t1\nq1\td2\t2\nq1\td3\t2\n", 3, "query 'q1' has rank 2 twice (also on line 2); each rank is one"),
        ("q1\td1\t1\nq2\td1\t1\nq1\td1\t2\n", 3, "run lists document 'd1' twice for query 'q1'"),
        ("q1\td1\t1\n\nq1\td2\t2\t0.5\n", 3, "expected 3 columns (query_id<TAB>doc_id<TAB>rank) of an MS MARCO run"),
        ("q1\td1\t1\nq1\td\u00a02\t2\n", 2, "document id"),
        ("q1\td1\t1\nq1\td\x0b2\t2\n", 2, "control character U+000B"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_line_and_problem(tmp_path, text, line, problem):
    path = _write(tmp_path / "run.tsv", text)
    with pytest.raises(InputFormatError) as err:
        read_run(path, run_format="msmarco")
    assert err.value.line == line and problem in str(err.value), str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_a_passage_given_twice_is_kept_once_with_dedupe_first(tmp_path):
    path = _write(tmp_path / "run.tsv", "q1\td1\t1\nq1\td2\t2\nq1\td1\t3\n")
    run = read_run(path, dedupe="first")
    assert run.frame.values.tolist() == [["q1", "d1", 1.0], ["q1", "d2", 0.5]] and run.duplicates_dropped == 1


def test_ranks_that_skip_numbers_are_read_in_their_order_with_a_warning(tmp_path):
    path = _write(tmp_path / "run.tsv", "q1\td1\t2\nq1\td2\t5\nq2\td3\t1\n")
    with pytest.warns(TwostageWarning) as caught:
        run = read_run(path)
    assert run.frame.values.tolist() == [["q1", "d1", 0.5], ["q1", "d2", 0.2], ["q2", "d3", 1.0]]
    assert [str(w.message) for w in caught] == [
        f"1 of 2 queries of the MS MARCO run {path} skip ranks (e.g. query 'q1': 2 passages, ranks up to 5): each "
        "is ranked in rank order (score 1/rank), its passages at positions 1, 2, 3, ...; MS MARCO's script counts a "
        "passage at the rank written, so its MRR@10 can differ"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_run(_write(tmp_path / "ok.tsv", "q1\td1\t2\nq1\td2\t1\n"))  # ranks in any line order: no warning


# ------------------------------------------------------------------ every place a run is read
def test_the_library_reads_msmarco_runs_everywhere_it_takes_a_path(tmp_path):
    ms = _write(tmp_path / "ms.tsv", SAMPLE)
    qrels = _write(tmp_path / "qrels.txt", SAMPLE_QRELS)
    assert ts.read_run(ms).inner.run_format == "msmarco" and ts.Run.read(ms, run_format="msmarco").tag == "anserini"
    with pytest.raises(InputFormatError):
        ts.Run.read(ms, run_format="trec")
    ev = ts.evaluate(qrels, ms, ["P.1", "recip_rank"])
    assert ev.summary.to_dict() == {"P_1": 0.5, "recip_rank": 0.75}
    fused = ts.fuse([ms, ms], method="rrf")
    assert fused.meta["inputs"][0]["format"] == RUN_FORMATS["msmarco"]
    other = _write(tmp_path / "b.tsv", "q1\td1\t1\nq2\td9\t1\n")
    cmp = ts.compare(qrels, {"a": ms, "b": other}, measures="P.1", permutations=100, bootstrap=100)
    assert cmp.means.to_dict() == {"P_1": {"a": 0.5, "b": 1.0}}


def test_runs_read_as_sets_the_format_for_reads_that_name_none(tmp_path):
    ms = _write(tmp_path / "ms.tsv", SAMPLE)
    with runs_read_as("trec"), pytest.raises(InputFormatError, match="expected 6 columns"):
        read_run(ms)
    with runs_read_as("trec"):
        assert read_run(ms, run_format="msmarco").run_format == "msmarco"  # a caller naming one keeps it
    assert read_run(ms).run_format == "msmarco"  # the block ended: auto again


COMMANDS_READING_RUNS = [
    ("eval",),
    ("gain-sensitivity",),
    ("compare",),
    ("diagnose",),
    ("risk",),
    ("power",),
    ("pool-test",),
    ("agreement",),
    ("fuse",),
    ("rerank",),
    ("judge",),
    ("reproduce",),
]


@pytest.mark.parametrize("path", COMMANDS_READING_RUNS, ids=lambda p: " ".join(p))
def test_every_command_that_reads_a_run_takes_run_format(path):
    import click

    cmd: click.Command = main
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    option = next(p for p in cmd.params if p.name == "run_format")
    assert list(option.type.choices) == ["trec", "msmarco", "auto"] and option.default == "auto"  # type: ignore[attr-defined]


def test_the_cli_reads_msmarco_runs_from_files_and_stdin(cli, tmp_path):
    from click.testing import CliRunner

    ms = _write(tmp_path / "ms.tsv", SAMPLE)
    qrels = _write(tmp_path / "qrels.txt", SAMPLE_QRELS)
    res = cli("eval", "-m", "P.1", "-m", "runid", qrels, ms)
    assert res.exit_code == 0 and res.output.endswith(
        "runid                 \tall\tanserini\nP_1                   \tall\t0.5000\n"
    )
    assert (
        "# run: " + str(ms) in res.output and "(MS MARCO (query_id<TAB>doc_id<TAB>rank): score = 1/rank" in res.output
    )
    piped = cli("eval", "-m", "P.1", qrels, "-", input=SAMPLE)
    assert piped.exit_code == 0 and piped.output.endswith("P_1                   \tall\t0.5000\n")
    bad = CliRunner().invoke(main, ["eval", "--run-format", "trec", str(qrels), str(ms)])
    assert bad.exit_code == 1
    assert f"Error: {ms}:1: expected 6 columns" in bad.output and "or with --run-format msmarco" in bad.output
    bad = CliRunner().invoke(main, ["eval", str(qrels), "-"], input=SAMPLE.replace("\td2\t3", "\td2\tx"))
    assert bad.exit_code == 1 and "Error: -:3: rank 'x' is not a whole number" in bad.output
    # the scope of --run-format ends with the command
    assert read_run(ms).run_format == "msmarco"


def test_fuse_sidecar_records_the_input_format(cli, tmp_path):
    ms = _write(tmp_path / "ms.tsv", SAMPLE)
    trec = _write(tmp_path / "b.trec", "q1 Q0 d2 1 3.0 b\nq2 Q0 d1 1 2.0 b\n")
    out = tmp_path / "fused.trec"
    res = cli("fuse", ms, trec, "--out", out)
    assert res.exit_code == 0
    inputs = json.loads((tmp_path / "fused.trec.meta.json").read_text())["inputs"]
    assert [i.get("format") for i in inputs] == [RUN_FORMATS["msmarco"], None]
    assert read_run(out).run_format == "trec"


def test_twostage_reads_back_its_own_runs_as_trec_whatever_the_command_says(tmp_path):
    """A stage cache's run is twostage's own TREC file: ``--run-format msmarco`` on the command does not apply."""
    from toolkit.data.records import run_from_rows
    from toolkit.experiments.stage_cache import StageCache, stage_key

    cache = StageCache(tmp_path / "cache")
    run = run_from_rows([("q1", "d1", 2.0), ("q1", "d2", 1.0)], tag="bm25")
    key = stage_key("bm25", {"k1": 0.9}, {})
    with runs_read_as("msmarco"):
        cache.put(key, run, {"stage": "bm25"})
        got = cache.get(key)
    assert got is not None and got[0].frame.values.tolist() == [["q1", "d1", 2.0], ["q1", "d2", 1.0]]
