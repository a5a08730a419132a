"""The diagnosis' inputs: a reranked run (``Reranked``), the first stage it reorders and its rerank depth (given,
from its sidecar, or detected; an error naming the run when none of these gives it), checked before anything is
evaluated."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, top_k
from toolkit.data.records import DOC_ID, QUERY_ID, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import ConfigError, DepthNotDetectedError, phrase


@dataclass(frozen=True)
class Reranked:
    """A reranked run, the first stage whose top ``depth`` candidates it reorders, and whether it is listwise.

    ``depth`` None: not said; ``diagnose`` detects it (``depths.detect_depth``), else stops with a
    ``DepthNotDetectedError``. ``depth_from`` says where the depth came from (``depths.DEPTH_SOURCES``: option, given, sidecar,
    detected); ``detection`` is the detection's record when one was tried. ``repeats`` are further
    runs of the same configuration (``repeats.py``): the run and its repeats are one system.
    """

    name: str
    run: Run
    first_stage: str
    depth: int | None
    listwise: bool = False
    depth_from: str = "given"
    detection: dict | None = None
    repeats: tuple[Run, ...] = ()
    window: int | None = None  # a listwise reranker's sliding window and stride, as its sidecar says
    stride: int | None = None
    probe: dict | None = None  # its sidecar's order probe (``shuffles``: n, seed, mean_rbo, per_query)
    record: dict | None = None  # its sidecar's listwise record (``listwise.listwise_record``: repairs, windows)

    @property
    def runs(self) -> tuple[Run, ...]:
        """The run and its repeats."""
        return (self.run, *self.repeats)


def longest_list(run: Run, *, work: Workspace = NO_WORKSPACE) -> int:
    """The most documents any query of ``run`` has (counted by arrow: no pandas groupby over string ids); once
    per frame in the workspace, read off its query blocks when the diagnosis has them."""
    return work.once("longest_list", (run.frame,), (), lambda: _longest_list(run.frame, work=work))


def _longest_list(frame: pd.DataFrame, *, work: Workspace = NO_WORKSPACE) -> int:
    import pyarrow.compute as pc

    from toolkit.data.columns import arrow_of
    from toolkit.diagnosis.depths import known_blocks

    if not len(frame):
        return 0
    blocks = known_blocks(frame, work=work)  # a run's query blocks have the same lengths at every score precision
    if blocks is not None:
        return int(blocks.lengths.max())
    return int(pc.max(pc.value_counts(arrow_of(frame[QUERY_ID])).field("counts")).as_py())


def pair_first_stage(
    run: Run,
    first_stages: Mapping[str, Run],
    depth: int,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[str, float]:
    """The first stage whose top ``depth`` holds the largest share of ``run``'s (query, document) pairs
    (the first named on a tie), and that share."""
    key = pd.MultiIndex.from_frame(run.frame[[QUERY_ID, DOC_ID]])
    best, share = next(iter(first_stages)), -1.0
    for name, first in first_stages.items():
        cands = top_k(first.frame, depth, score_precision, work=work)
        s = float(key.isin(pd.MultiIndex.from_frame(cands[[QUERY_ID, DOC_ID]])).mean()) if len(key) else 0.0
        if s > share:
            best, share = name, s
    return best, share


def rerank_depth(run: Run, given: int | None, meta: Mapping | None = None) -> tuple[int | None, str]:
    """The rerank depth of a reranked run and where it came from: ``given`` (``given``), else the depth its
    ``twostage rerank`` sidecar states (``sidecar``); else (None, ''): ``diagnose`` detects it."""
    if given:
        return given, "given"
    meta = meta or {}
    stated = meta.get("depth") if meta.get("reranker") else None  # only a `twostage rerank` sidecar says it
    if stated is None:
        return None, ""
    # a sidecar is JSON from outside: its depth is used only when it is a whole number of at most 18 digits
    # (``"depth": "²"``, ``1e400`` or ``true`` is not; the depth is then detected, and a warning says why)
    if type(stated) is int and 0 < stated < 10**18:
        return stated, "sidecar"
    from toolkit.guard.numbers import show
    from toolkit.notices import warn

    warn(f"{run.path}: its sidecar's depth {show(stated)} is not a positive whole number; the depth is detected")
    return None, ""


def reranked_input(
    name: str,
    run: Run,
    first_stages: Mapping[str, Run],
    *,
    depth: int | None = None,
    first_stage: str = "",
    listwise: bool = False,
    meta: Mapping | None = None,
    repeats: Sequence[Run] = (),
) -> Reranked:
    """One reranked run with what its sidecar (``meta``, RUN.meta.json) adds to what the caller says: the
    depth (``rerank_depth``), the first stage whose checksum the sidecar names (else '' and ``diagnose`` pairs
    it: the only first stage, or the one holding most of its documents), and whether it is listwise."""
    meta = meta or {}
    d, d_from = rerank_depth(run, depth, meta)
    if not first_stage:
        sha = (meta.get("first_stage") or {}).get("sha256")
        first_stage = next((n for n, r in first_stages.items() if sha and r.sha256 == sha), "")
    listwise = listwise or bool(meta.get("listwise")) or (meta.get("reranker") or {}).get("kind") == "listwise"
    window, stride = meta.get("window"), meta.get("stride")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    stride = stride if isinstance(stride, int) and not isinstance(stride, bool) and stride > 0 else None
    probe = meta.get("shuffles") if isinstance(meta.get("shuffles"), dict) else None
    from toolkit.diagnosis.listwise_behaviour import listwise_record

    return Reranked(
        name,
        run,
        first_stage,
        d,
        listwise,
        d_from,
        repeats=tuple(repeats),
        window=window,
        stride=stride,
        probe=probe,
        record=listwise_record(meta),
    )


def named_runs(runs: Run | Mapping[str, Run], default: str) -> dict[str, Run]:
    return {default: runs} if isinstance(runs, Run) else dict(runs)


def reranked_inputs(
    reranked,
    first_stages: Mapping[str, Run],
    depth: int | Mapping[str, int] | None,
    listwise: Collection[str] | bool,
    score_precision: str,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[list[Reranked], list[str], list[str]]:
    """``Reranked`` inputs (first stage paired, depth set: ``resolve_depth``), notes on how they were paired
    and notes on how they were sized. ``listwise``: the names of the listwise runs (``True``: every one)."""
    every = listwise is True
    listwise = () if isinstance(listwise, bool) else listwise
    if isinstance(reranked, (Run, Mapping)):
        named = named_runs(reranked, "reranked")
        depths = depth_per_run(depth, list(named))
        items = []
        for name, run in named.items():
            runs = list(run) if isinstance(run, (list, tuple)) else [run]
            items.append(
                reranked_input(
                    name,
                    runs[0],
                    first_stages,
                    depth=depths.get(name),
                    listwise=every or name in listwise,
                    repeats=runs[1:],
                )
            )
    else:
        items = list(reranked)
    if not items:
        raise ConfigError("give at least one reranked run")
    notes, out, depth_notes = [], [], []
    for r in items:
        if r.depth is not None and r.depth < 1:
            raise ConfigError(f"{r.name}: rerank depth must be >= 1")
        first = r.first_stage
        if not first:
            if len(first_stages) == 1:
                first = next(iter(first_stages))
            else:
                pair_depth = r.depth or longest_list(r.run, work=work)
                first, share = pair_first_stage(r.run, first_stages, pair_depth, score_precision, work=work)
                notes.append(
                    f"{r.name} is taken as a reranking of {first} ({share:.1%} of its documents are in "
                    f"{first}'s top {pair_depth}, the most of any first stage)"
                )
        elif first not in first_stages:
            raise ConfigError(f"{r.name}: no first stage named {first!r} (first stages: {', '.join(first_stages)})")
        r = dataclasses.replace(r, first_stage=first, listwise=every or r.listwise or r.name in listwise)
        r, note = resolve_depth(r, first_stages[first], score_precision, work=work)
        depth_notes += note
        out.append(r)
    names = [*first_stages, *(r.name for r in out)]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"every run needs its own name; repeated: {', '.join(repeated)}")
    return out, notes, depth_notes


def depth_per_run(depth: int | Mapping[str, int] | None, names: Sequence[str]) -> dict[str, int]:
    """``depth`` (one for every run, or {run name: depth}) as {name: depth}; a name that is no reranked run is
    an error naming it."""
    if depth is None:
        return {}
    if isinstance(depth, Mapping):
        unknown = sorted(set(depth) - set(names))
        if unknown:
            raise ConfigError(
                f"depth names no reranked run: {', '.join(map(repr, unknown))} (reranked runs: {', '.join(names)})"
            )
        return {n: int(k) for n, k in depth.items()}
    return {n: int(depth) for n in names}


def resolve_depth(
    r: Reranked, first: Run, score_precision: str, *, work: Workspace = NO_WORKSPACE
) -> tuple[Reranked, list[str]]:
    """``r`` with its depth: as given (checked against the first stage's lists), else detected
    (``depths.detect_depth``, on the queries the run shares with its first stage), else a
    ``DepthNotDetectedError`` naming the run; and the notes that say so. Every repeat must have the same depth
    and query set as the run."""
    from toolkit.diagnosis.depths import detect_depth
    from toolkit.diagnosis.repeats import check_repeats

    notes: list[str] = []
    detections = [detect_depth(first, run, score_precision, work=work) for run in r.runs]
    deepest = longest_list(first, work=work)  # read off the query blocks the detection made
    if r.depth is not None and r.depth_from in ("given", "option") and r.depth > deepest:
        how = "--depth" if r.depth_from == "option" else "depth"
        raise ConfigError(
            f"{how} {r.depth} for {r.name} is larger than the lists of its first stage {r.first_stage} (at most "
            f"{deepest} documents per query): give a depth of at most {deepest}"
        )
    detection = detections[0]
    if r.depth is None:
        if detection.depth is None:
            raise depth_not_detected(r, detection)
        r = dataclasses.replace(r, depth=detection.depth, depth_from="detected")
        notes.append(f"{r.name}: rerank depth {r.depth} {detection.describe()}")
    check_repeats(r, detections)
    return dataclasses.replace(r, detection=detection.as_dict()), notes


def depth_not_detected(r: Reranked, detection) -> DepthNotDetectedError:
    """The error of a reranked run whose depth no rule gives: what was tried, and the option that says it."""
    if detection.queries == 0:
        why = f"it shares no query with its first stage {r.first_stage}"
    elif detection.unchanged == detection.queries:
        why = f"every one of its {detection.queries} shared queries is in {r.first_stage}'s own order"
    else:
        why = detection.describe()
    option = phrase(f"depth={{{r.name!r}: K}}", f"--depth {r.name}=K")
    return DepthNotDetectedError(
        f"the rerank depth of {r.name} ({r.run.path}) is not given and cannot be detected: {why}. Give it: "
        f"{option} (K: how many of {r.first_stage}'s top documents it reranked)",
        run=r.name,
        detection=detection.as_dict(),
    )
