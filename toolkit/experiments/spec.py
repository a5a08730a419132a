"""The experiment file: YAML read with the line of every key, checked whole before anything runs.

Layout (docs/experiments/cacm.yaml is the worked example)::

    name: cacm
    topics: cacm                    # a collection name or a topics file
    qrels: cacm                     # a collection name or a qrels file
    index: {collection: cacm}       # built (and reused by content), or {path: indexes/cacm}
    hits: 1000
    threads: 2
    evaluation: {measures: [map, ndcg_cut.10], complete: true, level: 1, baseline: bm25}
    stages:
      bm25: {type: bm25, k1: [0.6, 0.9, 1.2], b: [0.4, 0.75], tune: {metric: map, folds: 5, seed: 0}}
      rm3: {type: rm3, input: bm25}
      minilm: {type: rerank, input: bm25, model: all-MiniLM-L6-v2, depth: [20, 50, 100]}
      dense: {type: dense, encoder: all-MiniLM-L6-v2}   # a FAISS index built from the collection

A list value of a stage parameter is a grid over it (the grid of a stage is the product of its
lists); ``input`` names the stage whose output a stage consumes (its tuned configuration when
it has ``tune:``, else each of its configurations). Every error names the file and line.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from toolkit.errors import InputFormatError
from toolkit.guard.specs import Located
from toolkit.guard.specs import load_yaml as load_guarded

#: Parameters each stage type takes, with their defaults (None: required).
STAGE_PARAMS: Mapping[str, dict[str, object]] = MappingProxyType(
    {
        "bm25": {"k1": 0.9, "b": 0.4},
        "qld": {"mu": 1000.0},
        "rm3": {"input": None, "fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5},
        "rerank": {
            "input": None,
            "model": None,
            "depth": 100,
            "kind": "auto",
            "batch_size": 64,
            "max_length": None,
            "backend": "torch",
            "device": "auto",
            "precision": "auto",
        },
        "fuse": {"inputs": None, "method": "rrf", "k": 60.0, "depth": 1000},
        # A dense first stage: an existing dense index (``index``), or one built from ``collection`` (default:
        # the experiment's index collection) with ``encoder`` and the build settings after it.
        "dense": {
            "index": None,
            "collection": None,
            "encoder": None,
            "hits": None,
            "batch_size": 32,
            "device": "auto",
            "precision": "auto",
            "ef_search": 256,
            "pooling": "mean",
            "normalize": True,
            "max_length": 256,
            "hnsw": False,
        },
    }
)
#: Parameters whose default None means "not given" rather than "required".
OPTIONAL = frozenset({"max_length", "index", "collection", "encoder", "hits"})
#: Parameters that are never grids (a list there is the value itself).
LIST_VALUED = frozenset({"inputs"})
STAGE_KEYS = frozenset({"type", "tune"})
TOP_KEYS = frozenset({"name", "topics", "qrels", "index", "hits", "threads", "evaluation", "stages"})
EVAL_KEYS = frozenset(
    {
        "measures",
        "complete",
        "level",
        "trec_eval",
        "baseline",
        "correction",
        "permutations",
        "seed",
        "ci",
        "bootstrap",
        "ci_method",
    }
)
TUNE_KEYS = frozenset({"metric", "folds", "seed", "queries"})
INDEX_KEYS = frozenset({"collection", "path"})


#: Keys that would name a remote host. No stage of an experiment calls an endpoint (the listwise reranker and the
#: LLM judge run from the command line, ``--endpoint URL``), and an experiment file sends nothing to a host the
#: command line did not name: such a key is refused by name wherever it is, and so is a URL as any value, before
#: the other checks (docs/security.md, "Specs and experiment files send nothing to a host you did not name").
ENDPOINT_KEYS = frozenset(
    {
        "endpoint",
        "endpoints",
        "url",
        "base_url",
        "api_base",
        "api_url",
        "host",
        "address",
        "ray",
        "ray_address",
        "proxy",
    }
)
_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")


#: The most values (mappings, lists, scalars) an experiment file may expand to. A YAML alias (``*name``) repeats
#: what its anchor names: nine lines of nine aliases each expand to 9**9 values, so a 528-byte file took 44 s and
#: 5 GB to read; real experiment files hold a few hundred. Counted as the file is read (``toolkit.guard.specs``).
MAX_YAML_VALUES = 10_000


def load_yaml(path: str | Path) -> Located:
    """Parse ``path`` keeping lines (``toolkit.guard.specs``, the one YAML loader); every error names its line."""
    doc = load_guarded(path, max_values=MAX_YAML_VALUES, what="an experiment file")
    if doc.data is None:
        raise InputFormatError(str(path), None, "empty experiment file")
    return doc


# ------------------------------------------------------------------ the checked experiment
@dataclass(frozen=True)
class Tune:
    metric: str
    folds: int | None = None
    seed: int = 0
    queries: tuple[str, ...] | None = None  # a separate tuning query set


@dataclass(frozen=True)
class Stage:
    name: str
    type: str
    fixed: dict  # parameter -> value (every parameter, defaults filled)
    grid: dict  # parameter -> list of values
    tune: Tune | None = None

    @property
    def inputs(self) -> list[str]:
        if self.type == "fuse":
            return list(self.fixed["inputs"])
        return [self.fixed["input"]] if "input" in self.fixed else []

    def points(self) -> list[dict]:
        """Every configuration of the grid, in file order (the last parameter varies fastest)."""
        names = list(self.grid)
        return [self.fixed | dict(zip(names, combo)) for combo in itertools.product(*self.grid.values())]


@dataclass(frozen=True)
class Experiment:
    path: str
    name: str
    topics: str
    qrels: str
    index: dict
    hits: int
    threads: int
    evaluation: dict
    stages: dict[str, Stage]
    order: tuple[str, ...] = field(default=())  # stages, inputs first
    raw: dict = field(default_factory=dict)


def _unknown(doc: Located, keys: tuple, given: dict, allowed: set, what: str) -> None:
    for k in given:
        if k not in allowed:
            raise doc.error((*keys, k), f"unknown {what} {k!r} (expected one of {', '.join(sorted(allowed))})")


def _mapping(doc: Located, keys: tuple, value, what: str) -> dict:
    if not isinstance(value, dict):
        raise doc.error(keys, f"{what} must be a mapping, not {type(value).__name__}")
    return value


def _stage(doc: Located, name: str, body) -> Stage:
    keys = ("stages", name)
    body = _mapping(doc, keys, body, f"stage {name!r}")
    kind = body.get("type")
    if kind not in STAGE_PARAMS:
        raise doc.error((*keys, "type"), f"stage {name!r}: unknown type {kind!r} (one of {', '.join(STAGE_PARAMS)})")
    params = STAGE_PARAMS[kind]
    for k in body:
        if k not in params and k not in STAGE_KEYS:
            raise doc.error(
                (*keys, k), f"stage {name!r} ({kind}) takes no parameter {k!r}; it takes {', '.join(params)}"
            )
    fixed, grid = {}, {}
    for p, default in params.items():
        value = body.get(p, default)
        if value is None and default is None and p not in OPTIONAL:
            raise doc.error(keys, f"stage {name!r} ({kind}) needs {p!r}")
        if isinstance(value, list) and p not in LIST_VALUED:
            if not value:
                raise doc.error((*keys, p), f"stage {name!r}: grid over {p!r} is empty")
            grid[p] = value
        else:
            fixed[p] = value
    if kind == "dense":
        _check_dense(doc, keys, name, body)
    tune = None
    if "tune" in body:
        tune = _tune(doc, (*keys, "tune"), body["tune"], name, grid)
    return Stage(name, kind, fixed, grid, tune)


def _check_dense(doc: Located, keys: tuple, name: str, body: dict) -> None:
    """A dense stage reads one dense index: given, or built; its encoder is the index's when given."""
    if "index" in body and "collection" in body:
        raise doc.error((*keys, "collection"), f"stage {name!r}: give index (a dense index) or collection, not both")
    if "index" in body and "encoder" in body:
        raise doc.error(
            (*keys, "encoder"), f"stage {name!r}: a dense index has its own encoder; give encoder only to build one"
        )
    building = {"pooling", "normalize", "max_length", "hnsw"} & set(body)
    if "index" in body and building:
        p = sorted(building)[0]
        raise doc.error((*keys, p), f"stage {name!r}: {p!r} sets how an index is built; the given index is built")
    top_index = doc.data.get("index") if isinstance(doc.data, dict) else None
    if (
        "index" not in body
        and "collection" not in body
        and not (isinstance(top_index, dict) and "collection" in top_index)
    ):
        raise doc.error(
            keys,
            f"stage {name!r} (dense) needs index: (a dense index) or collection: (to build one), "
            "as the experiment's index is a path",
        )


def _tune(doc: Located, keys: tuple, body, name: str, grid: dict) -> Tune:
    body = _mapping(doc, keys, body, "tune")
    _unknown(doc, keys, body, TUNE_KEYS, "tune setting")
    if not grid:
        raise doc.error(keys, f"stage {name!r} has tune: but no grid (give a list for at least one parameter)")
    if "metric" not in body:
        raise doc.error(keys, "tune: needs a metric (e.g. map)")
    if ("folds" in body) == ("queries" in body):
        raise doc.error(keys, "tune: needs exactly one of folds (k-fold cross-validation) or queries (a tuning set)")
    folds = body.get("folds")
    if folds is not None and (not isinstance(folds, int) or folds < 2):
        raise doc.error((*keys, "folds"), f"folds must be an integer >= 2, not {folds!r}")
    queries = body.get("queries")
    if queries is not None:
        if isinstance(queries, str):
            queries = _query_file(doc, (*keys, "queries"), queries)
        elif not isinstance(queries, list) or not queries:
            raise doc.error((*keys, "queries"), "queries must be a non-empty list of query ids or a file of them")
        queries = tuple(str(q) for q in queries)
    seed = body.get("seed", 0)
    if not isinstance(seed, int):
        raise doc.error((*keys, "seed"), f"seed must be an integer, not {seed!r}")
    return Tune(str(body["metric"]), folds, seed, queries)


def _query_file(doc: Located, keys: tuple, name: str) -> list[str]:
    p = Path(name) if Path(name).is_absolute() else Path(doc.path).parent / name
    if not p.is_file():
        raise doc.error(keys, f"tuning query file {name} does not exist")
    from toolkit.guard.readers import read_input  # the inputs door: a regular file, no NUL byte

    try:
        text = read_input(p).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise doc.error(keys, f"tuning query file {name} is not valid UTF-8") from None
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def _order(doc: Located, stages: dict[str, Stage]) -> tuple[str, ...]:
    """Stages with their inputs first; an unknown input or a cycle names the line."""
    done: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            cycle = " -> ".join([*trail[trail.index(name) :], name])
            raise doc.error(("stages", name), f"stages form a cycle: {cycle}")
        state[name] = "active"
        st = stages[name]
        for i, src in enumerate(st.inputs):
            key = ("stages", name, "inputs", i) if st.type == "fuse" else ("stages", name, "input")
            if src not in stages:
                raise doc.error(key, f"stage {name!r}: input {src!r} is not a stage ({', '.join(stages)})")
            if st.type == "rm3" and stages[src].type not in ("bm25", "qld"):
                raise doc.error(key, f"stage {name!r}: rm3 expands a bm25 or qld stage, not {stages[src].type}")
            visit(src, [*trail, name])
        state[name] = "done"
        done.append(name)

    for name in stages:
        visit(name, [])
    return tuple(done)


def _check_measures(doc: Located, ev: dict, stages: dict[str, Stage]) -> None:
    from toolkit.measures.names import parse_measure_groups

    for i, text in enumerate(ev["measures"]):
        try:
            parse_measure_groups([str(text)], int(ev.get("trec_eval", 9)))
        except Exception as exc:  # UnknownMeasureError and friends: give them the line
            raise doc.error(("evaluation", "measures", i), str(exc)) from None
    for st in stages.values():
        if st.tune:
            try:
                parse_measure_groups([st.tune.metric], int(ev.get("trec_eval", 9)))
            except Exception as exc:
                raise doc.error(("stages", st.name, "tune", "metric"), str(exc)) from None


def point_label(stage: Stage, point: dict) -> str:
    """``bm25(k1=0.6,b=0.4)``: the stage's name and its grid values (just the name without a grid)."""
    if not stage.grid:
        return stage.name
    return stage.name + "(" + ",".join(f"{k}={point[k]}" for k in stage.grid) + ")"


def tuned_label(stage: Stage) -> str:
    return f"{stage.name}[tuned]"


def outputs(stages: dict[str, Stage], order: tuple[str, ...]) -> dict[str, list[tuple[str, str, dict]]]:
    """Per stage: (configuration name, input configuration or '', point) for every configuration it makes.

    A stage consumes its input's tuned configuration when the input is tuned, else each of the input's
    configurations (the name then says which: ``rm3<bm25(k1=0.6,b=0.4)>``).
    """
    made: dict[str, list[tuple[str, str, dict]]] = {}
    offered: dict[str, list[str]] = {}
    for name in order:
        st = stages[name]
        ins = [""] if not st.inputs or st.type == "fuse" else offered[st.inputs[0]]
        rows = []
        for src in ins:
            for point in st.points():
                label = point_label(st, point) + (f"<{src}>" if len(ins) > 1 else "")
                rows.append((label, src, point))
        made[name] = rows
        offered[name] = [tuned_label(st)] if st.tune else [r[0] for r in rows]
    return made


def grid_size(stages: dict[str, Stage], order: tuple[str, ...]) -> dict[str, int]:
    """Configurations per stage, as ``outputs`` would make them, counted without making them (a tuned stage
    adds its tuned configuration)."""
    import math

    made: dict[str, int] = {}
    offered: dict[str, int] = {}
    for name in order:
        st = stages[name]
        ins = 1 if not st.inputs or st.type == "fuse" else offered[st.inputs[0]]
        rows = ins * math.prod(len(v) for v in st.grid.values())
        made[name] = rows + (1 if st.tune else 0)
        offered[name] = 1 if st.tune else rows
    return made


def safe_name(name: str) -> str:
    """A configuration name as a file name: ``bm25(k1=0.6,b=0.4)`` -> ``bm25_k1-0.6_b-0.4``."""
    s = re.sub(r"[=]", "-", name)
    s = re.sub(r"[^A-Za-z0-9_.+-]+", "_", s)
    return s.strip("_") or "config"


def _check_file_names(doc: Located, stages: dict[str, Stage], order: tuple[str, ...]) -> None:
    """Two configurations whose names become one file name (``runs/NAME.trec``, ``diagnosis/NAME/``) would
    overwrite each other: an error naming both, at the later one's stage."""
    seen: dict[str, str] = {}
    for stage, rows in outputs(stages, order).items():
        names = [r[0] for r in rows] + ([tuned_label(stages[stage])] if stages[stage].tune else [])
        for name in names:
            key = safe_name(name).lower()  # one file on a case-insensitive file system too
            if key in seen and seen[key] != name:
                raise doc.error(
                    ("stages", stage),
                    f"configurations {seen[key]!r} and {name!r} have the same file name {safe_name(name)!r} "
                    "(runs/NAME.trec, diagnosis/NAME/); rename a stage",
                )
            seen[key] = name


def config_names(stages: dict[str, Stage], order: tuple[str, ...]) -> list[str]:
    names = []
    for name, rows in outputs(stages, order).items():
        names += [r[0] for r in rows]
        if stages[name].tune:
            names.append(tuned_label(stages[name]))
    return names


def _check_intervals(doc, ev: dict) -> None:
    """``ci`` (a level in (0, 1)), ``bootstrap`` (resamples >= 1), ``ci_method``: an error at their line."""
    from toolkit.errors import ConfigError
    from toolkit.stats.mean_intervals import check_interval_request

    defaults = {"ci": 0.95, "bootstrap": 10_000, "ci_method": "percentile"}
    for key, value in defaults.items():
        ev.setdefault(key, value)
    for key in defaults:  # each value checked alone, so an error is at its own line
        try:
            given = {**defaults, key: ev[key]}
            check_interval_request(given["ci"], given["bootstrap"], given["ci_method"])
        except ConfigError as exc:
            raise doc.error(("evaluation", key), str(exc).replace("=", ": ", 1)) from None
        except (TypeError, ValueError):
            raise doc.error(("evaluation", key), f"{key}: {ev[key]!r} is not a number") from None


def _refuse_hosts(doc: Located, keys: tuple, value) -> None:
    """An ``InputFormatError`` at the first key of ``ENDPOINT_KEYS`` or URL value (see ``ENDPOINT_KEYS``)."""
    named = None
    if isinstance(value, dict):
        for k, v in value.items():
            if str(k).lower() in ENDPOINT_KEYS:
                named = ((*keys, k), f"{k}: {v!r}")
                break
            _refuse_hosts(doc, (*keys, k), v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _refuse_hosts(doc, (*keys, i), v)
    elif isinstance(value, str) and _URL.match(value):
        named = (keys, f"{'.'.join(map(str, keys))}: {value!r}")
    if named is not None:
        where, what = named
        raise doc.error(
            where,
            f"the experiment file names a host the command line did not name ({what}); nothing was run. No stage "
            "of an experiment calls an endpoint, and an experiment file sends nothing to a host: run `twostage "
            "judge --endpoint URL` or `twostage rerank --backend listwise --endpoint URL` on its runs instead",
        )


def parse_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file; every problem is an ``InputFormatError`` with its line."""
    doc = load_yaml(path)
    _refuse_hosts(doc, (), doc.data)
    top = _mapping(doc, (), doc.data, "the experiment")
    _unknown(doc, (), top, TOP_KEYS, "key")
    for key in ("topics", "qrels", "index", "stages"):
        if key not in top:
            raise doc.error((), f"missing {key!r}")
    index = _mapping(doc, ("index",), top["index"], "index")
    _unknown(doc, ("index",), index, INDEX_KEYS, "index setting")
    if len(index) != 1:
        raise doc.error(("index",), "index: needs exactly one of collection (build it) or path (an existing index)")
    raw_stages = _mapping(doc, ("stages",), top["stages"], "stages")
    if not raw_stages:
        raise doc.error(("stages",), "no stages")
    stages = {name: _stage(doc, name, body) for name, body in raw_stages.items()}
    order = _order(doc, stages)
    ev = _mapping(doc, ("evaluation",), top.get("evaluation", {}), "evaluation")
    _unknown(doc, ("evaluation",), ev, EVAL_KEYS, "evaluation setting")
    ev = {"measures": ["map", "ndcg_cut.10"], "complete": True, "level": 1, "trec_eval": 9} | ev
    ev.setdefault("correction", "holm")
    ev.setdefault("permutations", 10_000)
    ev.setdefault("seed", 42)
    for key in ("level", "trec_eval", "permutations", "seed"):  # YAML integers (the spec loader bounds them)
        if isinstance(ev[key], bool) or not isinstance(ev[key], int):
            raise doc.error(("evaluation", key), f"{key} must be an integer, not {ev[key]!r}")
    _check_intervals(doc, ev)
    if not isinstance(ev["measures"], list) or not ev["measures"]:
        raise doc.error(("evaluation", "measures"), "measures must be a non-empty list")
    _check_measures(doc, ev, stages)
    # every configuration's name only when the baseline is not a stage's: a large grid is refused by size
    # (``grid_size``, checked by the CLI) before its names are made
    names = config_names(stages, order) if "baseline" in ev and ev["baseline"] not in stages else []
    if sum(grid_size(stages, order).values()) <= 100_000:  # a larger grid is refused by size first
        _check_file_names(doc, stages, order)
    if "baseline" in ev and ev["baseline"] not in stages and ev["baseline"] not in names:
        raise doc.error(
            ("evaluation", "baseline"),
            f"baseline {ev['baseline']!r} is not a stage or configuration ({', '.join(names)})",
        )
    for key in ("hits", "threads"):
        if key in top and (not isinstance(top[key], int) or top[key] < 1):
            raise doc.error((key,), f"{key} must be an integer >= 1, not {top[key]!r}")
    return Experiment(
        path=str(path),
        name=str(top.get("name") or Path(path).stem),
        topics=str(top["topics"]),
        qrels=str(top["qrels"]),
        index=index,
        hits=int(top.get("hits", 1000)),
        threads=int(top.get("threads", 1)),
        evaluation=ev,
        stages=stages,
        order=order,
        raw=top,
    )
