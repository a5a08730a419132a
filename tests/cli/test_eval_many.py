"""`twostage eval QRELS RUN [RUN ...]`: each run's block equals its own single-run call; the wide tables.

Oracles: the single-run `twostage eval` (itself byte-identical to trec_eval, tests/evaluation/test_conformance.py)
on the same files, and hand-computed values on a two-query example.
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from toolkit.data.run_files import expand_runs, run_names
from toolkit.errors import ConfigError, InputFormatError

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 1\nq2 0 x 2\nq2 0 y 0\n"
# run A: q1 a(1) b c -> AP = (1/1 + 2/3)/2 = 5/6; q2 x -> AP 1.  MAP 11/12; P@2: q1 1/2, q2 1/2 (x, y)
RUN_A = "q1 Q0 a 1 3 A\nq1 Q0 b 2 2 A\nq1 Q0 c 3 1 A\nq2 Q0 x 1 2 A\nq2 Q0 y 2 1 A\n"
# run B: q1 b c a -> AP = (1/2 + 2/3)/2 = 7/12; q2 y x -> AP 1/2.  MAP 13/24; P@2: q1 1/2, q2 1/2
RUN_B = "q1 Q0 b 1 3 B\nq1 Q0 c 2 2 B\nq1 Q0 a 3 1 B\nq2 Q0 y 1 2 B\nq2 Q0 x 2 1 B\n"


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.trec").write_text(RUN_A)
    (runs / "b.trec").write_text(RUN_B)
    (runs / "a.trec.meta.json").write_text("{}")  # a sidecar: not a run
    return tmp_path


def test_wide_csv_holds_the_hand_computed_values(cli, files):
    res = cli(
        "eval", "-m", "map", "-m", "P.2", "--format", "csv", "--no-provenance", files / "qrels.txt", files / "runs"
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["run"] for r in rows] == ["a.trec", "b.trec"]
    assert float(rows[0]["map"]) == pytest.approx(11 / 12, abs=1e-15)
    assert float(rows[1]["map"]) == pytest.approx(13 / 24, abs=1e-15)
    assert [float(r["P_2"]) for r in rows] == [0.5, 0.5]


def test_wide_csv_per_query_and_json(cli, files):
    args = ["eval", "-m", "map", "-q", "--no-provenance", files / "qrels.txt", files / "runs" / "a.trec"]
    res = cli(*args, files / "runs" / "b.trec", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    got = {(r["run"], r["query_id"]): float(r["map"]) for r in rows}
    assert got == pytest.approx(
        {("a.trec", "q1"): 5 / 6, ("a.trec", "q2"): 1.0, ("a.trec", "all"): 11 / 12}
        | {("b.trec", "q1"): 7 / 12, ("b.trec", "q2"): 0.5, ("b.trec", "all"): 13 / 24}
    )
    doc = json.loads(cli(*args, files / "runs" / "b.trec", "--format", "json").stdout)
    assert doc["measures"] == ["map"] and [r["run"] for r in doc["runs"]] == ["a.trec", "b.trec"]
    assert doc["runs"][1]["all"]["map"] == pytest.approx(13 / 24) and doc["runs"][1]["per_query"]["q2"]["map"] == 0.5
    assert doc["runs"][0]["provenance"]["run"]["path"].endswith("a.trec")


def test_each_text_block_is_the_single_run_output(cli, files):
    q = files / "qrels.txt"
    many = cli("eval", "-m", "all_trec", "-q", q, files / "runs").stdout
    singles = [cli("eval", "-m", "all_trec", "-q", q, files / "runs" / n).stdout for n in ("a.trec", "b.trec")]
    assert many == "# run: a.trec\n" + singles[0] + "# run: b.trec\n" + singles[1]


def test_glob_stdin_and_out(cli, files, tmp_path):
    out = tmp_path / "res.txt"
    res = cli(
        "eval",
        "-m",
        "map",
        "--no-provenance",
        "--out",
        out,
        files / "qrels.txt",
        "-",
        str(files / "runs" / "b*"),
        input=RUN_A,
    )
    assert res.exit_code == 0, res.output
    assert (
        out.read_text()
        == "# run: -\nmap                   \tall\t0.9167\n# run: b.trec\nmap                   \tall\t0.5417\n"
    )
    prov = json.loads((tmp_path / "res.txt.provenance.json").read_text())
    assert set(prov) == {"-", "b.trec"}


def test_dl19_runs_each_block_equals_its_single_call(cli, msmarco):
    """The five DL19 runs of the shared data in one call, -c -l 2 and several measures."""
    q = msmarco / "qrels.dl19-passage.txt"
    opts = ["-c", "-l", "2", "-q", "-m", "ndcg_cut.10", "-m", "map", "-m", "recall.100", "-m", "judged.10"]
    runs = sorted((msmarco / "runs").glob("run.dl19.*"))
    many = cli("eval", *opts, q, msmarco / "runs" / "run.dl19.*").stdout
    expected = "".join(f"# run: {r.name}\n" + cli("eval", *opts, q, r).stdout for r in runs)
    assert len(runs) == 5 and many == expected


@pytest.mark.parametrize(
    "args, message",
    [
        (["-", "-"], "'-' .* can be given once"),
        (["nope.trec"], "nope.trec: no such file"),
        (["zz*.trec"], "zz\\*.trec: no run file matches"),
        (["runs/a.trec", "runs"], "run given twice"),
        (["empty"], "folder holds no run files"),
    ],
)
def test_bad_run_arguments(files, monkeypatch, args, message):
    monkeypatch.chdir(files)
    (files / "empty").mkdir()
    with pytest.raises((ConfigError, InputFormatError), match=message):
        expand_runs(args)


def test_cli_error_exits_1(cli, files):
    res = cli("eval", "-m", "map", files / "qrels.txt", files / "runs" / "a.trec", files / "missing.trec")
    assert res.exit_code == 1 and "missing.trec: no such file" in res.stderr


def test_names_are_paths_when_file_names_repeat(files):
    other = files / "other"
    other.mkdir()
    shutil.copy(files / "runs" / "a.trec", other / "a.trec")
    assert run_names([str(files / "runs" / "a.trec"), str(other / "a.trec")]) == [
        str(files / "runs" / "a.trec"),
        str(other / "a.trec"),
    ]
