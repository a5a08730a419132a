"""``twostage reproduce --out DIR`` is whole or absent: the runs the spec's commands write and
NAME.md, NAME.html, NAME.json appear together in one rename; a failure part-way leaves the previous DIR byte
for byte and no partial folder; the report names DIR, not the temporary folder the commands wrote into."""

from __future__ import annotations

import json
from pathlib import Path

from test_reproduce import BASE, RUN, runner, write_spec

from toolkit.guard.writer import MARKER
from toolkit.report.reproduction import write_outputs
from toolkit.reproduction.output import run_into
from toolkit.reproduction.runner import CommandResult


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_failure_while_writing_leaves_the_previous_set(tmp_path, cli, monkeypatch):
    out = tmp_path / "out"
    spec = write_spec(tmp_path)
    assert cli("reproduce", spec, "--out", out).exit_code == 0
    before = _files(out)
    assert {"tiny.md", "tiny.html", "tiny.json", MARKER} <= set(before)
    # another published figure: a new report whose Markdown is written, then the HTML fails (a full disk, a kill)
    spec.write_text(spec.read_text().replace("MAP: 0.5417", "MAP: 0.6000"))
    import toolkit.report.reproduction as report

    def broken(rep):
        raise OSError(28, "No space left on device", str(out / "tiny.html"))

    monkeypatch.setattr(report, "render_html", broken)
    res = cli("reproduce", spec, "--out", out)
    assert res.exit_code == 1 and "no space left" in res.stderr, res.output
    assert _files(out) == before  # the old report, whole: not a new tiny.md beside the old tiny.html
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []  # no partial folder left


def test_commands_write_into_the_set_and_the_report_names_the_final_folder(tmp_path):
    text = BASE.replace("    run: run.txt\n", "    commands: [[twostage, eval, --out, '{run}']]\n")
    calls = []

    def fake(argv, env):
        calls.append(argv[-1])
        Path(argv[-1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[-1]).write_text(RUN)
        return CommandResult(0, "")

    spec = write_spec(tmp_path, text)
    out = tmp_path / "out"
    rep, paths = run_into(runner(spec, tmp_path, run_command=fake, commands={"eval"}), out, write_outputs)
    assert [c.status for c in rep.cells] == ["match", "match"]
    assert paths == [out / "tiny.md", out / "tiny.html", out / "tiny.json"]
    assert calls[0] != str(out / "runs" / "sys.txt") and Path(calls[0]).parent.parent.parent == tmp_path
    assert (out / "runs" / "sys.txt").read_text() == RUN and not Path(calls[0]).exists()
    doc = json.loads((out / "tiny.json").read_text())
    assert doc["rows"][0]["run"] == doc["rows"][0]["provenance"]["MAP"]["run"]["path"] == str(out / "runs" / "sys.txt")
    assert doc["programs_run"][0]["argv"][-1] == str(out / "runs" / "sys.txt")
    for name in ("tiny.md", "tiny.html", "tiny.json"):
        assert ".tmp" not in (out / name).read_text(), name
    # --reuse-runs: the previous set's runs are carried into the new one and not made again
    again, _ = run_into(
        runner(spec, tmp_path, run_command=fake, commands={"eval"}, reuse_runs=True), out, write_outputs
    )
    assert len(calls) == 1 and [c.status for c in again.cells] == ["match", "match"]
    assert (out / "runs" / "sys.txt").read_text() == RUN
    run_into(runner(spec, tmp_path, run_command=fake, commands={"eval"}), out, write_outputs)
    assert len(calls) == 2  # without it the run is made again


def test_a_folder_of_other_files_is_not_replaced(tmp_path, cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = cli("reproduce", write_spec(tmp_path), "--out", out)
    assert (
        res.exit_code == 1
        and f"{out} holds 'notes.txt', which twostage's reproduction output did not write" in res.stderr
    )
    assert _files(out) == {"notes.txt": b"mine"}
