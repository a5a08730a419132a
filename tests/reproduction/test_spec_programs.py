"""Specs do not run programs: ``twostage reproduce`` runs a spec's own-verb steps
(``[twostage, VERB, ...]``) and refuses every other program before anything runs, unless the user passes
``--allow-commands``; the report lists each program that ran.

The attack: a shared spec listing ``sh -c "id > ..."`` ran it and then printed PASS.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from test_reproduce import QRELS, RUN

SPEC = """\
name: shared
title: A shared spec
paths: spec
columns:
  - {id: MAP, measure: map}
rows:
  - id: sys
    qrels: qrels.txt
    commands: [[sh, -c, "id > {work}/pwned && cp {work}/../run.txt {run}"]]
    cells: {MAP: 0.5417}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    return tmp_path


def write(folder, text=SPEC):
    path = folder / "shared.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_spec_running_a_shell_is_refused_before_anything_runs(cli, folder):
    spec = write(folder)
    out = folder / "out"
    res = cli("reproduce", spec, "--out", out)
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: {spec}: the spec runs 1 program(s) other than twostage's own verbs (rows.sys.commands[0]: sh -c "
        f"'id > {{work}}/pwned && cp {{work}}/../run.txt {{run}}'); nothing was run. Read the spec: such a program "
        "runs with your permissions. Pass --allow-commands to run them"
    ]
    assert not out.exists() and res.stdout == ""  # no pwned file, no report, no PASS


@pytest.mark.parametrize(
    ("old", "new", "listed"),
    [
        (  # a setup step
            "rows:\n",
            "setup: [{run: [python, -c, 'print(1)']}]\nrows:\n",
            "setup[0]: python -c 'print(1)'",
        ),
        (  # twostage's own CLI starting another spec, which could pass --allow-commands on
            '[[sh, -c, "id > {work}/pwned && cp {work}/../run.txt {run}"]]',
            "[[twostage, reproduce, other.yaml, --allow-commands], [twostage, eval, --out, '{run}']]",
            "rows.sys.commands[0]: twostage reproduce other.yaml --allow-commands",
        ),
        (  # a program named by a placeholder
            '[[sh, -c, "id > {work}/pwned && cp {work}/../run.txt {run}"]]',
            "[['{work}/tool', '{run}']]",
            "rows.sys.commands[0]: '{work}/tool' '{run}'",
        ),
    ],
)
def test_every_foreign_step_is_named(cli, folder, old, new, listed):
    spec = write(folder, SPEC.replace(old, new))
    res = cli("reproduce", spec, "--out", folder / "out")
    assert res.exit_code == 1 and listed in res.stderr and "--allow-commands" in res.stderr, res.output
    assert not (folder / "out").exists()


def test_allow_commands_runs_them_and_the_report_lists_each_program(cli, folder):
    spec = write(folder)
    out = folder / "out"
    res = cli("reproduce", spec, "--out", out, "--allow-commands")
    assert res.exit_code == 0, res.output
    assert (out / "pwned").exists()  # it did run
    command = f"sh -c 'id > {out.resolve()}/pwned && cp {out.resolve()}/../run.txt {out.resolve()}/runs/sys.txt'"
    assert f"## Programs run\n\n    [sys] exit 0: {command}\n" in res.stdout
    report = json.loads((out / "shared.json").read_text())
    assert report["programs_run"] == [
        {
            "step": "sys",
            "program": "sh",
            "argv": ["sh", "-c", command.split(" ", 2)[2][1:-1]],
            "exit_status": 0,
        }
    ]
    assert "<h2>Programs run</h2>" in (out / "shared.html").read_text()


def test_own_verbs_run_without_the_flag_and_are_listed(cli, folder):
    """[twostage, eval, ...] is one of twostage's own verbs: no flag needed; the report lists it too."""
    spec = write(
        folder,
        SPEC.replace(
            '[[sh, -c, "id > {work}/pwned && cp {work}/../run.txt {run}"]]',
            "[[twostage, bm25, --help]]",
        ).replace("    commands:", "    run: run.txt\n    commands:"),
    )
    res = cli("reproduce", spec, "--out", folder / "out")
    assert res.exit_code == 0, res.output
    assert "## Programs run\n\n    [sys] exit 0: twostage bm25 --help\n" in res.stdout
    assert "**PASS: 1 match (of 1 cells)**" in res.stdout


def test_a_spec_without_commands_says_none_ran(cli, folder):
    spec = write(
        folder,
        SPEC.replace('    commands: [[sh, -c, "id > {work}/pwned && cp {work}/../run.txt {run}"]]', "    run: run.txt"),
    )
    res = cli("reproduce", spec, "--out", folder / "out")
    assert res.exit_code == 0 and "Programs run: none." in res.stdout, res.output
