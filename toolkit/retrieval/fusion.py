"""Run fusion: every method and normalisation of ranx 0.3.21, Pyserini 1.6 and trectools 0.0.50, under their
names, in trec_eval's order.

One table holds the methods (``METHODS``) and one the normalisations (``NORMALIZATIONS``): each is one declaration
(the ``method`` / ``normalization`` decorator on its vectorised function, whose docstring is its exact
definition), with its peer, what it reads (ranks, scores), its parameters, whether it takes one weight per run and
whether it learns from judgments. ``fuse(runs, options, train)`` is the one entry: ``FuseOptions`` holds every
setting, validated once.

How every method sees the runs (the ``Pool``): each run is ranked in trec_eval's order (score descending, ties by
document id descending, scores compared as float32 as trec_eval 9 does; with ``resort=False``, in the order of its
lines, as Pyserini reads a run without ``--resort``), cut at ``depth`` documents per query, normalised per query,
and laid side by side over the union of the runs' documents: a (runs x candidates) matrix of ranks and one of
scores. A method is a few array operations over those matrices; only Condorcet (which compares every pair of a
query's candidates) and the searches of ranx's ``optimize_fusion`` (one fusion per trial) loop, over queries and
trials, never over lines. The fused run is cut at ``hits`` per query in trec_eval's order: a fused tie is broken
by document id descending, where ranx leaves it in its sort's order and Pyserini and trectools put document id
ascending (``TIES``, written in the run's sidecar).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import arrow_of, take
from toolkit.data.ranking import CANDIDATE_PRECISION, ranked_positions, top_k, within_group_rank
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run
from toolkit.errors import ConfigError, phrase
from toolkit.guard import numbers
from toolkit.measures.ranked import c_log, c_power_table
from toolkit.options import Options, opt
from toolkit.retrieval.search import DEFAULT_HITS, validate_hits

#: How a fused run orders equal scores (the sidecar says it).
TIES = (
    "trec_eval's order: fused score descending, then document id descending (scores compared as float32, as "
    "trec_eval 9); ranx leaves equal scores in its sort's order, Pyserini and trectools put document id ascending"
)

#: ranx's stand-in log-odds of a document a run does not hold (``bayesfuse.py``: log(0.001 / 0.999)).
MISSING_LOG_ODDS = math.log(0.001 / 0.999)
#: SegFuse's segment boundaries (ranx ``segfuse.py``: 10 * 2**(k-1) - 5 for k = 1..10, after 0).
SEGFUSE_BOUNDS = np.array([0] + [10 * 2 ** (k - 1) - 5 for k in range(1, 11)], dtype=np.int64)
#: BayesFuse's cut-offs (ranx ``bayesfuse.py``): the positions [0, 5), [5, 10), ... share one log-odds each.
BAYESFUSE_CUTS = np.array([0, 5, 10, 15, 20, 30, 100, 200, 500, 1000], dtype=np.int64)


# ---------------------------------------------------------------- declarations
@dataclass(frozen=True)
class Param:
    """A method's parameter: its name as the peer spells it, int, float or str, its default (None: none, the
    method cannot run without it unless a search with judgments finds it) and the values it accepts."""

    name: str
    kind: type
    default: Any = None
    domain: str = ""
    accepts: Callable[[Any], bool] = lambda v: True
    meaning: str = ""


def _positive(name: str, kind: type = float, default: Any = None, meaning: str = "") -> Param:
    return Param(name, kind, default, "> 0", lambda v: v > 0, meaning)


def _unit(name: str, default: Any = None, meaning: str = "") -> Param:
    return Param(name, float, default, "in [0, 1]", lambda v: 0.0 <= v <= 1.0, meaning)


def _count(name: str, default: Any = None, meaning: str = "", least: int = 1) -> Param:
    return Param(name, int, default, f">= {least}", lambda v: v >= least, meaning)


METRIC_KEYWORD = "params['metric']"
METRIC = Param("metric", str, "ndcg", "a measure name", lambda v: bool(v), "what the search maximises (ranx: ndcg)")


@dataclass(frozen=True)
class Search:
    """ranx's ``optimize_fusion`` for a method: the trials (each a value of ``target``, or a weight per run) and
    the knobs that shape them, with ranx's defaults; the trial with the best mean ``metric`` over the judged
    queries wins, the last of equals (ranx keeps a trial scoring ``>=`` the best so far)."""

    target: str  # the parameter searched, or "weights"
    knobs: tuple[Param, ...]
    trials: Callable[[Mapping[str, Any], int], list]


@dataclass(frozen=True)
class Method:
    """One fusion method: ``compute(pool, args) -> fused score per candidate``; its docstring is the definition."""

    name: str
    compute: Callable[[Pool, Mapping[str, Any]], np.ndarray]
    peer: str
    reads: str  # "ranks", "scores" or "ranks and scores"
    params: tuple[Param, ...] = ()
    weights: bool = False
    learns: Callable[[Pool, np.ndarray, Mapping[str, Any]], dict] | None = None  # tables estimated from judgments
    search: Search | None = None
    runs: tuple[int, int | None] = (2, None)
    whole_run_range: bool = False  # reads each run's min and max over all its documents (Pyserini's normalize)

    @property
    def definition(self) -> str:
        return " ".join((self.compute.__doc__ or "").split())

    @property
    def needs_judgments(self) -> bool:
        return self.learns is not None

    @property
    def reads_scores(self) -> bool:
        return "scores" in self.reads


@dataclass(frozen=True)
class Normalization:
    """One per-query score normalisation, applied to each run (after the depth cut) before fusing."""

    name: str
    apply: Callable[[Pool], Pool]
    peer: str
    rescales: bool  # divides by a range, a sum or a deviation: needs finite scores
    aliases: tuple[str, ...] = ()

    @property
    def definition(self) -> str:
        return " ".join((self.apply.__doc__ or "").split())


_METHODS: dict[str, Method] = {}
_NORMALIZATIONS: dict[str, Normalization] = {}
_NORMALIZATION_NAMES: dict[str, str] = {}
#: Declared registries, filled at import by ``@method`` and ``@normalization`` only, read-only here.
METHODS: Mapping[str, Method] = MappingProxyType(_METHODS)
NORMALIZATIONS: Mapping[str, Normalization] = MappingProxyType(_NORMALIZATIONS)
#: every spelling of a normalisation (its name and aliases) -> its name
NORMALIZATION_NAMES: Mapping[str, str] = MappingProxyType(_NORMALIZATION_NAMES)


def method(name: str, *, peer: str, reads: str, **declared: Any) -> Callable:
    """Declare ``name`` as the fusion method computed by the decorated function (its docstring: the definition)."""

    def register(fn: Callable) -> Callable:
        _METHODS[name] = Method(name, fn, peer, reads, **declared)
        return fn

    return register


def normalization(name: str, *, peer: str, rescales: bool, aliases: tuple[str, ...] = ()) -> Callable:
    """Declare ``name`` as the normalisation computed by the decorated function (its docstring: the definition)."""

    def register(fn: Callable) -> Callable:
        _NORMALIZATIONS[name] = Normalization(name, fn, peer, rescales, aliases)
        for spelling in (name, *aliases):
            _NORMALIZATION_NAMES[spelling] = name
        return fn

    return register


# ---------------------------------------------------------------- options
def _say(keyword: str, value: Any, flag: str) -> str:
    """``keyword=value`` in the library's words, ``--flag value`` in the CLI's (the value as the numbers door shows
    a refused one: escaped, cut, never converted)."""
    shown = numbers.show(value)
    plain = value if isinstance(value, str) and shown == repr(value) else shown
    return phrase(f"{keyword}={shown}", f"{flag} {plain}")


def _number(value: Any, kind: type, what: str) -> Any:
    """A parameter value read through the numbers door: text from the command line, or a Python number."""
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise numbers.NumberRefused(what, value, "is not a whole number")
        return numbers.integer(value, what=what) if isinstance(value, str) else int(value)
    return numbers.json_score(value, what=what, finite=True)


@dataclass(frozen=True)
class FuseOptions(Options):
    """Every setting of a fusion, checked once here: ``method`` (a name of ``METHODS``), ``normalize`` (of
    ``NORMALIZATIONS``), ``weights`` (one per run, for the weighted methods; text ``"0.3,0.7"`` or numbers),
    ``params`` (the method's parameters by the peer's names, ``{"phi": 0.8}``; text values are read as the
    command line gives them), ``k`` (RRF's constant: ranx's ``k``, Pyserini's ``--rrf.k``; ``params["k"]`` is the
    same), ``depth`` (documents taken from each run), ``hits`` (documents per query in the result: Pyserini's
    ``--k``), ``resort`` (rank each run by its scores in trec_eval's order, the default; False: in the order of
    its lines, as Pyserini without ``--resort``), ``alpha`` (interpolation's ``params["alpha"]``, which it
    replaces). The options of ``ts.fuse`` (``twostage fuse``)."""

    verb = "fuse"

    method: str = opt("rrf", doc="the fusion method, by the name ranx, Pyserini or trectools gives it.")
    normalize: str = opt(
        "none", doc="``none``, ``minmax``, ``max``, ``sum``, ``zmuv``, ``rank`` or ``borda`` (per query, per run)."
    )
    weights: Any = opt(
        None, doc="one weight per run (``wsum``, ``wmnz``, ``mixed``, ``w_bordafuse``, ``w_condorcet``)."
    )
    params: Mapping[str, Any] = field(
        default_factory=dict,
        metadata={"doc": "the method's parameters by the peer's names (``{\"phi\": 0.8}``)."},
    )
    k: float | None = opt(None, doc="RRF's constant (60).")
    depth: int = opt(DEFAULT_HITS, doc="documents taken from each run.")
    hits: int = opt(DEFAULT_HITS, doc="documents per query in the result.")
    resort: bool = opt(
        True, doc="rank each run by score in trec_eval's order (the default); False: in the order of its lines."
    )
    alpha: float | None = opt(None, doc='interpolation\'s ``params={"alpha": ...}``.')

    @classmethod
    def from_call(
        cls,
        verb: str,
        options: FuseOptions | None,
        given: Mapping[str, Any],
        allowed: Iterable[str] | None = None,
    ) -> FuseOptions:
        """As ``Options.from_call``; RRF's ``k`` travels in the ``k`` field alone, so that a ``k`` keyword replaces
        the value ``options`` holds (in its ``params`` too)."""
        if options is not None and "k" in given and "params" not in given and isinstance(options, cls):
            given = {**given, "params": {n: v for n, v in options.params.items() if n != "k"}}
        return super().from_call(verb, options, given, allowed)

    def validate(self) -> None:
        m = METHODS.get(self.method) if isinstance(self.method, str) else None
        if m is None:
            raise ConfigError(
                f"{_say('method', self.method, '--method')}: not a fusion method; the methods: {', '.join(METHODS)}"
            )
        norm = NORMALIZATION_NAMES.get(self.normalize) if isinstance(self.normalize, str) else None
        if norm is None:
            raise ConfigError(
                f"{_say('normalize', self.normalize, '--normalize')}: not a normalisation; the normalisations: "
                f"{', '.join(NORMALIZATIONS)}"
            )
        object.__setattr__(self, "normalize", norm)
        if m.name == "normalize" and norm != "none":
            raise ConfigError(
                f"{_say('normalize', norm, '--normalize')}: the method normalize is Pyserini's min-max of each "
                "run, then the sum; it takes no other normalisation (sum with a normalisation fuses that way)"
            )
        if norm == "borda" and "ranks" in m.reads:
            raise ConfigError(
                f"{_say('normalize', 'borda', '--normalize')}: borda gives every run every candidate of the query, "
                f"those it lacks with one tied score, so {m.name}, which reads ranks, would rank them in no "
                "defined order (ranx: a Python set's); borda normalises for the methods that read scores only"
            )
        object.__setattr__(self, "weights", self._weights(m))
        params = dict(self.params or {})
        if self.alpha is not None:
            params["alpha"] = self.alpha
        k = self.k
        if "k" in params:
            if k is not None and params["k"] != k:
                raise ConfigError(f"k is given twice ({k!r} and params k={params['k']!r}): give it once")
            k = params.pop("k")
        if k is not None:
            if m.name != "rrf":
                raise ConfigError(f"{_say('k', k, '--rrf.k')}: k is RRF's constant; {m.name} does not use it")
            try:
                params["k"] = _number(k, float, "k")
            except numbers.NumberRefused as err:
                raise ConfigError(f"{phrase('k=', '--rrf.k')}: {err}") from None
        object.__setattr__(self, "params", MappingProxyType(self._params(m, params)))
        object.__setattr__(self, "k", self.params.get("k"))
        if self.alpha is not None:
            object.__setattr__(self, "alpha", self.params.get("alpha"))
        for name, flag in (("depth", "--depth"), ("hits", "--hits")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{_say(name, value, flag)}: give a whole number >= 1")
        if not isinstance(self.resort, bool):
            raise ConfigError(f"resort={self.resort!r}: give True or False")

    def _weights(self, m: Method) -> tuple[float, ...] | None:
        given = self.weights
        if given is None:
            return None
        if not m.weights:
            weighted = ", ".join(n for n, x in METHODS.items() if x.weights)
            raise ConfigError(
                f"{phrase('weights=', '--weights')}: {m.name} takes no weights (the weighted methods: {weighted})"
            )
        items = given.split(",") if isinstance(given, str) else list(given)
        try:
            out = tuple(_number(v.strip() if isinstance(v, str) else v, float, "weight") for v in items)
        except numbers.NumberRefused as err:
            raise ConfigError(f"{phrase('weights=', '--weights')}: {err}") from None
        if not out:
            raise ConfigError(f"{phrase('weights=', '--weights')}: give one weight per run")
        return out

    @staticmethod
    def _params(m: Method, given: dict[str, Any]) -> dict[str, Any]:
        known = {p.name: p for p in m.params}
        if m.search is not None:
            known |= {p.name: p for p in (*m.search.knobs, METRIC)}
        out: dict[str, Any] = {}
        for name, value in given.items():
            p = known.get(name)
            if p is None:
                said = phrase(f"params={{{name!r}: ...}}", f"--param {name}=...")
                has = ", ".join(known) or "none"
                raise ConfigError(f"{said}: {m.name} has no parameter {name!r} (its parameters: {has})")
            try:
                v = value if p.kind is str else _number(value, p.kind, name)
            except numbers.NumberRefused as err:
                raise ConfigError(f"{phrase(f'params[{name!r}]', f'--param {name}')}: {err}") from None
            if p.kind is str and not isinstance(v, str):
                raise ConfigError(f"{m.name}'s {name} is a text, not {v!r}")
            if not p.accepts(v):
                raise ConfigError(f"{m.name}'s {name} must be {p.domain}, not {v!r}")
            if p is METRIC:
                _metric(v)
            out[name] = v
        return out

    def describe(self) -> dict:
        """The settings as the sidecar records them."""
        out = {"method": self.method, "normalize": self.normalize}
        if self.weights is not None:
            out["weights"] = list(self.weights)
        return out | dict(self.params) | {"depth": self.depth, "resort": self.resort}


# ---------------------------------------------------------------- the pool
@dataclass(frozen=True)
class Pool:
    """The runs side by side over the union of their documents, per query (candidates sorted by query).

    ``queries`` (Q,) the query ids in order; ``query`` (C,) each candidate's index into them; ``doc_ids`` the
    distinct document ids (arrow) and ``doc`` (C,) each candidate's index into them; ``present`` (R, C) whether
    run r holds the candidate (within the depth); ``rank`` (R, C) its 1-based rank there (0 where absent);
    ``score`` (R, C) its (normalised) score (NaN where absent); ``length`` (R, Q) the documents run r holds for
    each query; ``extent`` (R, Q, 2) each run's lowest and highest score per query over all its documents, for
    the methods that read it.
    """

    queries: np.ndarray
    query: np.ndarray
    doc_ids: pa.Array
    doc: np.ndarray
    present: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    length: np.ndarray
    extent: np.ndarray | None = None

    @property
    def runs(self) -> int:
        return self.present.shape[0]

    @property
    def size(self) -> np.ndarray:
        """Candidates per query (Q,)."""
        return np.bincount(self.query, minlength=len(self.queries))

    @property
    def count(self) -> np.ndarray:
        """Runs holding each candidate (C,)."""
        return self.present.sum(axis=0)

    def filled(self, value: float) -> np.ndarray:
        """The score matrix with ``value`` where a run lacks the candidate."""
        return np.where(self.present, self.score, value)

    def starts(self) -> np.ndarray:
        """Where each query's candidates begin, and the end (Q + 1,)."""
        return np.searchsorted(self.query, np.arange(len(self.queries) + 1))

    def subset(self, keep_queries: np.ndarray) -> Pool:
        """The pool of the queries ``keep_queries`` (a boolean mask over ``queries``), renumbered."""
        rows = keep_queries[self.query]
        renumber = np.cumsum(keep_queries) - 1
        extent = self.extent[:, keep_queries] if self.extent is not None else None
        return Pool(
            self.queries[keep_queries],
            renumber[self.query[rows]],
            self.doc_ids,
            self.doc[rows],
            self.present[:, rows],
            self.rank[:, rows],
            self.score[:, rows],
            self.length[:, keep_queries],
            extent,
        )

    def text_rank(self) -> np.ndarray:
        """Each distinct document id's position in the ids' byte order (trec_eval's ``strcmp``) (D,)."""
        order = pc.sort_indices(self.doc_ids).to_numpy()
        out = np.empty(len(order), dtype=np.int64)
        out[order] = np.arange(len(order))
        return out

    def with_scores(self, score: np.ndarray, present: np.ndarray | None = None) -> Pool:
        p = self.present if present is None else present
        return Pool(self.queries, self.query, self.doc_ids, self.doc, p, self.rank, score, self.length, self.extent)


def _strings(column: pd.Series) -> pa.ChunkedArray:
    """A string column as arrow large strings (zero-copy for the readers' arrow-backed columns)."""
    data = arrow_of(column if column.dtype == "string" else column.astype("string"))
    data = data if isinstance(data, pa.ChunkedArray) else pa.chunked_array([data])
    return data.cast(pa.large_string()) if data.type != pa.large_string() else data


def _codes(columns: list[pa.ChunkedArray], sort: bool) -> tuple[np.ndarray, pa.Array]:
    """(a code per row of the columns one after another, the distinct values): one hashing pass over every row;
    with ``sort`` the codes follow the values' order (byte order: trec_eval's ``strcmp``)."""
    encoded = pa.chunked_array([c for col in columns for c in col.chunks], type=pa.large_string()).dictionary_encode()
    if encoded.num_chunks == 0:
        return np.zeros(0, dtype=np.int64), pa.array([], type=pa.large_string())
    values = encoded.chunks[-1].dictionary  # every chunk shares the one dictionary
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in encoded.chunks]).astype(np.int64)
    if sort:
        order = pc.sort_indices(values).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes, values = rank[codes], values.take(pa.array(order))
    return codes, values


def build_pool(runs: Sequence[Run], depth: int, resort: bool, extent: bool = False) -> Pool:
    """The runs ranked (trec_eval's order, or their lines' with ``resort=False``), cut at ``depth``, side by side."""
    sizes = np.cumsum([0] + [len(r.frame) for r in runs])
    q_all, q_values = _codes([_strings(r.frame[QUERY_ID]) for r in runs], sort=True)
    d_all, d_values = _codes([_strings(r.frame[DOC_ID]) for r in runs], sort=False)
    n_runs, n_q, n_docs = len(runs), len(q_values), max(len(d_values), 1)
    parts = []
    ranges = np.full((n_runs, n_q, 2), np.nan) if extent else None
    for i, r in enumerate(runs):
        qcode = q_all[sizes[i] : sizes[i + 1]]
        if resort:
            order, rank = ranked_positions(r.frame, CANDIDATE_PRECISION)
        else:  # the order of the lines: a stable sort by query keeps each query's lines as written
            order = np.argsort(qcode, kind="stable")
            rank = within_group_rank(qcode[order])
        keep = rank <= depth
        rows = order[keep]
        scores = r.frame[SCORE].to_numpy(dtype=np.float64)
        parts.append((qcode[rows], d_all[sizes[i] : sizes[i + 1]][rows], rank[keep], scores[rows]))
        if ranges is not None:  # each query's range over all the run's documents (Pyserini's normalize)
            grouped = pd.Series(scores).groupby(qcode)
            low, high = grouped.min(), grouped.max()
            ranges[i, low.index.to_numpy(), 0] = low.to_numpy()
            ranges[i, high.index.to_numpy(), 1] = high.to_numpy()
    qcode = np.concatenate([p[0] for p in parts])
    key = qcode * n_docs + np.concatenate([p[1] for p in parts])
    cand, where = np.unique(key, return_inverse=True)
    n_cand = len(cand)
    present = np.zeros((n_runs, n_cand), dtype=bool)
    rank = np.zeros((n_runs, n_cand), dtype=np.int64)
    score = np.full((n_runs, n_cand), np.nan)
    length = np.zeros((n_runs, n_q), dtype=np.int64)
    lo = 0
    for i, p in enumerate(parts):
        hi = lo + len(p[2])
        at = where[lo:hi]
        present[i, at] = True
        rank[i, at] = p[2]
        score[i, at] = p[3]
        length[i] = np.bincount(p[0], minlength=n_q)
        lo = hi
    return Pool(
        np.array(q_values.to_pylist(), dtype=object),
        cand // n_docs,
        d_values,
        cand % n_docs,
        present,
        rank,
        score,
        length,
        ranges,
    )


def _per_run(pool: Pool, reduce: str) -> np.ndarray:
    """A per-query statistic of each run's scores (R, Q): ``min``, ``max``, ``sum``, ``mean`` or ``std``
    (population), over the documents the run holds (pandas' grouped reductions, NaN for an empty query)."""
    out = np.full((pool.runs, len(pool.queries)), np.nan)
    for r in range(pool.runs):
        held = pool.present[r]
        g = pd.Series(pool.score[r, held]).groupby(pool.query[held])
        stat = g.std(ddof=0) if reduce == "std" else g.agg(reduce)
        out[r, stat.index.to_numpy()] = stat.to_numpy()
    return out


def _at(table: np.ndarray, pool: Pool) -> np.ndarray:
    """A per-(run, query) table (R, Q) spread to the candidates (R, C)."""
    return table[:, pool.query]


def _span_divide(top: np.ndarray, lo: np.ndarray, hi: np.ndarray, floor: float) -> np.ndarray:
    """(top - lo) / max(hi - lo, floor) elementwise for finite values; where hi - lo overflows a double, the same
    quotient of halves (halving a double is exact), never an infinite range."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        span = hi - lo
        wide = np.isinf(span)
        out = (top - lo) / np.maximum(span, floor)
    if wide.any():
        out[wide] = (top[wide] / 2 - lo[wide] / 2) / (hi[wide] / 2 - lo[wide] / 2)
    return out


# ---------------------------------------------------------------- normalisations
@normalization("none", peer="ranx norm=None; Pyserini; trectools", rescales=False)
def _none(pool: Pool) -> Pool:
    """The scores as the runs give them."""
    return pool


@normalization("minmax", peer="ranx min-max (min_max_norm)", rescales=True, aliases=("min-max", "min_max"))
def _minmax(pool: Pool) -> Pool:
    """(s - min) / max(max - min, 1e-9) over the query's documents in the run: a query whose scores are all equal
    gets 0 for each (ranx's floor 1e-9 on the range); a range beyond the largest double is divided in halves."""
    lo, hi = _at(_per_run(pool, "min"), pool), _at(_per_run(pool, "max"), pool)
    return pool.with_scores(np.where(pool.present, _span_divide(pool.score, lo, hi, 1e-9), np.nan))


@normalization("max", peer="ranx max (max_norm)", rescales=True)
def _max(pool: Pool) -> Pool:
    """s / max(max, 1e-9): each score over the query's highest (ranx's floor 1e-9: a highest score <= 0 divides
    by 1e-9)."""
    hi = _at(_per_run(pool, "max"), pool)
    with np.errstate(over="ignore"):
        return pool.with_scores(np.where(pool.present, pool.score / np.maximum(hi, 1e-9), np.nan))


@normalization("sum", peer="ranx sum (sum_norm)", rescales=True)
def _sum(pool: Pool) -> Pool:
    """(s - min) / max(sum - n * min, 1e-9), n the query's documents in the run: scores shifted to start at 0,
    over their total."""
    lo = _per_run(pool, "min")
    total = _at(_per_run(pool, "sum") - pool.length * lo, pool)
    shifted = (pool.score - _at(lo, pool)) / np.maximum(total, 1e-9)
    return pool.with_scores(np.where(pool.present, shifted, np.nan))


@normalization("zmuv", peer="ranx zmuv (zmuv_norm)", rescales=True)
def _zmuv(pool: Pool) -> Pool:
    """(s - mean) / max(std, 1e-9): zero mean, unit variance per query (population standard deviation)."""
    mean, std = _at(_per_run(pool, "mean"), pool), _at(_per_run(pool, "std"), pool)
    return pool.with_scores(np.where(pool.present, (pool.score - mean) / np.maximum(std, 1e-9), np.nan))


@normalization("rank", peer="ranx rank (rank_norm)", rescales=False)
def _rank(pool: Pool) -> Pool:
    """1 - (rank - 1) / n: 1 for the first of the query's n documents in the run, down by 1/n per rank."""
    n = _at(pool.length, pool)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pool.with_scores(np.where(pool.present, 1.0 - (pool.rank - 1) / n, np.nan))


@normalization("borda", peer="ranx borda (borda_norm)", rescales=False)
def _borda(pool: Pool) -> Pool:
    """Over the query's N candidates (every run's documents): 1 - (rank - 1) / N for a document the run holds;
    for one it lacks, 0.5 - (n - 1) / (2N), n the run's documents for the query; every run then holds every
    candidate (for the methods that read scores only: those a run lacks tie)."""
    n_cand = pool.size[pool.query]
    n = _at(pool.length, pool)
    held = 1.0 - (pool.rank - 1) / n_cand
    lacked = 0.5 - (n - 1) / (2 * n_cand)
    return pool.with_scores(np.where(pool.present, held, lacked), np.ones_like(pool.present))


# ---------------------------------------------------------------- score combinations (CombSUM and friends)
_COMBOS = "ranx 0.3.21 fuse(method={0!r}) (comb_{0}); trectools 0.0.50 fusion.combos(strategy={0!r})"


def _present_sum(pool: Pool) -> np.ndarray:
    return np.where(pool.present, pool.score, 0.0).sum(axis=0)


@method("sum", peer=_COMBOS.format("sum"), reads="scores")
def comb_sum(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombSUM (Fox and Shaw, TREC 1993): the sum of the document's scores over the runs that hold it."""
    return _present_sum(pool)


@method("max", peer=_COMBOS.format("max"), reads="scores")
def comb_max(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombMAX (Fox and Shaw, TREC 1993): the highest of the document's scores over the runs that hold it (ranx
    counts a run that lacks it as -1e9: the same unless all its scores are below -1e9)."""
    return pool.filled(-np.inf).max(axis=0)


@method("min", peer=_COMBOS.format("min"), reads="scores")
def comb_min(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombMIN (Fox and Shaw, TREC 1993): the lowest of the document's scores over the runs that hold it (ranx
    counts a run that lacks it as 1e9: the same unless all its scores are above 1e9)."""
    return pool.filled(np.inf).min(axis=0)


@method("med", peer=_COMBOS.format("med"), reads="scores")
def comb_med(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombMED (Fox and Shaw, TREC 1993): the median of the document's scores over the runs that hold it (the
    mean of the middle two for an even count)."""
    masked = np.ma.masked_array(pool.score, mask=~pool.present)
    return np.ma.median(masked, axis=0).filled(np.nan)


@method("anz", peer=_COMBOS.format("anz"), reads="scores")
def comb_anz(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombANZ (Fox and Shaw, TREC 1993): CombSUM over the number of runs that hold the document (their mean)."""
    return _present_sum(pool) / pool.count


@method("mnz", peer=_COMBOS.format("mnz"), reads="scores")
def comb_mnz(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombMNZ (Fox and Shaw, TREC 1993): CombSUM times the number of runs that hold the document."""
    return _present_sum(pool) * pool.count


def _float_trials(name: str, low: float, high: float, step: float) -> Search:
    """ranx's grid for one float (``optimize_rbc`` and friends): ``round(x, d)`` for x in
    ``numpy.arange(min, max + step, step)``, d the digits of ``step`` after the point."""

    def trials(knobs: Mapping[str, Any], runs: int) -> list:
        lo, hi, step_ = (knobs.get(f"min_{name}", low), knobs.get(f"max_{name}", high), knobs.get("step", step))
        digits = str(step_)[::-1].find(".")
        return [round(float(x), digits) for x in np.arange(lo, hi + step_, step_)]

    step_param = Param("step", float, step, "> 0", lambda v: v > 0, "the grid's step")
    knobs = (Param(f"min_{name}", float, low), Param(f"max_{name}", float, high), step_param)
    return Search(name, knobs, trials)


def _int_trials(name: str, low: int, high: int, step: int | None = None) -> Search:
    """ranx's grid for one integer: ``range(min, max + 1, step)``."""

    def trials(knobs: Mapping[str, Any], runs: int) -> list:
        return list(
            range(knobs.get(f"min_{name}", low), knobs.get(f"max_{name}", high) + 1, knobs.get("step", step or 1))
        )

    knobs = (_count(f"min_{name}", low), _count(f"max_{name}", high))
    if step is not None:
        knobs += (_count("step", step, "the grid's step"),)
    return Search(name, knobs, trials)


def _weight_trials(knobs: Mapping[str, Any], runs: int) -> list:
    """ranx's weight grid (``optimize_weights``): every tuple of ``round(x, d)`` for x in
    ``numpy.arange(0, 1 + step, step)`` whose Python ``sum`` is exactly 1.0 (so, as ranx, a tuple whose sum is
    1.0000000000000002 in doubles is not tried)."""
    step = knobs.get("step", 0.1)
    digits = str(step)[::-1].find(".")
    grid = [round(float(x), digits) for x in np.arange(0, 1 + step, step)]
    return [seq for seq in product(*[grid] * runs) if sum(seq) == 1.0]


WEIGHT_SEARCH = Search(
    "weights", (Param("step", float, 0.1, "> 0", lambda v: v > 0, "the grid's step"),), _weight_trials
)


@method(
    "gmnz",
    peer="ranx 0.3.21 fuse(method='gmnz') (comb_gmnz)",
    reads="scores",
    params=(Param("gamma", float, None, "a number", meaning="the exponent of the count"),),
    search=_float_trials("gamma", 0.01, 1.0, 0.01),
)
def comb_gmnz(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """CombGMNZ (Lee, SIGIR 1997): CombSUM times (the number of runs that hold the document) ** gamma."""
    return _present_sum(pool) * pool.count.astype(np.float64) ** args["gamma"]


@method("wsum", peer="ranx 0.3.21 fuse(method='wsum')", reads="scores", weights=True, search=WEIGHT_SEARCH)
def wsum(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Weighted sum: the sum over runs of weight_r * score_r, 0 for a run that lacks the document."""
    w = np.asarray(args["weights"], dtype=np.float64)[:, None]
    return (w * pool.filled(0.0)).sum(axis=0)


@method(
    "wmnz",
    peer="ranx 0.3.21 fuse(method='wmnz')",
    reads="scores",
    weights=True,
    search=WEIGHT_SEARCH,
)
def wmnz(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """WMNZ (Wu and Crestani, CIKM 2002): CombSUM times the sum of the weights of the runs that hold the
    document."""
    w = np.asarray(args["weights"], dtype=np.float64)[:, None]
    return _present_sum(pool) * np.where(pool.present, w, 0.0).sum(axis=0)


@method("mixed", peer="ranx 0.3.21 fuse(method='mixed')", reads="scores", weights=True, search=WEIGHT_SEARCH)
def mixed(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Mixed (ranx): the sum of weight_r * score_r over the runs that hold the document, times the square root of
    their number."""
    w = np.asarray(args["weights"], dtype=np.float64)[:, None]
    return np.where(pool.present, pool.score * w, 0.0).sum(axis=0) * np.sqrt(pool.count)


@method(
    "average",
    peer="Pyserini 1.6 fusion --method average (pyserini.fusion.average)",
    reads="scores",
)
def average(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Pyserini's average: the sum over runs of score_r * (1 / number of runs), 0 for a run that lacks the
    document (so a document one run lacks is averaged with a 0)."""
    return (pool.filled(0.0) * (1 / pool.runs)).sum(axis=0)


@method(
    "interpolation",
    peer="Pyserini 1.6 fusion --method interpolation (pyserini.fusion.interpolation)",
    reads="scores",
    params=(_unit("alpha", 0.5, "the first run's weight"),),
    runs=(2, 2),
)
def interpolation(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Score interpolation of two runs: alpha * score_1 + (1 - alpha) * score_2, 0 for a run that lacks the
    document."""
    a = args["alpha"]
    s = pool.filled(0.0)
    return s[0] * a + s[1] * (1 - a)


@method(
    "normalize",
    peer="Pyserini 1.6 fusion --method normalize (pyserini.fusion.normalize)",
    reads="scores",
    whole_run_range=True,
)
def pyserini_normalize(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Pyserini's normalize: each run's scores min-max normalised per query over all the run's documents for the
    query (before the depth cut), (s - min) / (max - min), and 1 where max = min; then their sum, 0 for a run that
    lacks the document."""
    assert pool.extent is not None
    lo, hi = pool.extent[:, :, 0][:, pool.query], pool.extent[:, :, 1][:, pool.query]
    scaled = np.where(hi == lo, 1.0, _span_divide(pool.score, lo, hi, 0.0))
    return np.where(pool.present, scaled, 0.0).sum(axis=0)


@method("vector_space_fusion", peer="trectools 0.0.50 fusion.vector_space_fusion", reads="scores")
def vector_space_fusion(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """trectools' vector space fusion: each candidate is the vector of its scores in the runs (0 where a run lacks
    it); the pivot is the candidate with the highest first-run score (of equals, the least document id as text);
    a candidate's score is 1 / (its Euclidean distance to the pivot + 0.1). trectools fuses two runs (a third
    makes its merge fail); here each run is one coordinate."""
    v = pool.filled(0.0)
    text_rank = pool.text_rank()
    order = np.lexsort((text_rank[pool.doc], -v[0], pool.query))
    first = order[pool.starts()[:-1][pool.size > 0]]
    pivot_of = np.zeros(len(pool.queries), dtype=np.int64)
    pivot_of[pool.query[first]] = first
    pivot = v[:, pivot_of[pool.query]]
    return 1.0 / (np.sqrt(((v - pivot) ** 2).sum(axis=0)) + 0.1)


# ---------------------------------------------------------------- rank-based methods
_RRF_PEER = (
    "ranx 0.3.21 fuse(method='rrf'); Pyserini 1.6 fusion --method rrf (reciprocal_rank_fusion, --rrf.k); "
    "trectools 0.0.50 fusion.reciprocal_rank_fusion"
)


@method(
    "rrf",
    peer=_RRF_PEER,
    reads="ranks",
    params=(_positive("k", float, 60.0, "the constant added to each rank"),),
    search=_int_trials("k", 10, 100, 10),
)
def rrf(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): the sum over the runs that hold the
    document of 1 / (k + rank)."""
    return np.where(pool.present, 1.0 / (args["k"] + pool.rank), 0.0).sum(axis=0)


def _inverse_square_ranks(pool: Pool) -> np.ndarray:
    return np.where(pool.present, 1.0 / np.maximum(pool.rank, 1).astype(np.float64) ** 2, 0.0).sum(axis=0)


@method("isr", peer="ranx 0.3.21 fuse(method='isr')", reads="ranks")
def isr(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Inverse square rank (Mourão, Martins and Magalhães, 2015): the sum of 1 / rank**2 over the runs that hold
    the document, times their number."""
    return _inverse_square_ranks(pool) * pool.count


@method("log_isr", peer="ranx 0.3.21 fuse(method='log_isr')", reads="ranks")
def log_isr(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Log_ISR (Mourão et al., 2015): the sum of 1 / rank**2 over the runs that hold the document, times the
    natural log of their number (0 for a document one run holds)."""
    return _inverse_square_ranks(pool) * _log_of_counts(pool.count, 0.0)


@method(
    "logn_isr",
    peer="ranx 0.3.21 fuse(method='logn_isr')",
    reads="ranks",
    params=(_unit("sigma", 0.01, "added to the count inside the log"),),
    search=_float_trials("sigma", 0.01, 1.0, 0.01),
)
def logn_isr(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """LogN_ISR (Mourão et al., 2015): the sum of 1 / rank**2 over the runs that hold the document, times
    log(their number + sigma)."""
    return _inverse_square_ranks(pool) * _log_of_counts(pool.count, args["sigma"])


def _log_of_counts(count: np.ndarray, plus: float) -> np.ndarray:
    """log(count + plus) of whole-number counts from the C library (numpy's ``log`` differs from it in the last
    bit on some CPUs), through a table of the few distinct counts."""
    table = c_log(np.arange(int(count.max(initial=0)) + 1, dtype=np.float64) + plus)
    return table[count]


def _borda_points(pool: Pool) -> np.ndarray:
    """Each run's Borda points (R, C): N - (rank - 1) for a document it holds, N the query's candidates; for one
    it lacks, (N - n + 1) / 2, n the run's documents for the query (the mean of the points left)."""
    n_cand = pool.size[pool.query].astype(np.float64)
    lacked = (n_cand - _at(pool.length, pool) + 1) / 2
    return np.where(pool.present, n_cand - (pool.rank - 1), lacked)


@method(
    "borda_count",
    peer="trectools 0.0.50 fusion.borda_count (named there, not implemented: it prints TODO); ranx's bordafuse",
    reads="ranks",
)
@method("bordafuse", peer="ranx 0.3.21 fuse(method='bordafuse')", reads="ranks")
def bordafuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Borda fuse (Aslam and Montague, SIGIR 2001): the sum over runs of the document's Borda points, N - (rank -
    1) in a run that holds it (N the query's candidates over all runs), (N - n + 1) / 2 in a run of n documents
    that lacks it."""
    return _borda_points(pool).sum(axis=0)


@method(
    "w_bordafuse",
    peer="ranx 0.3.21 fuse(method='w_bordafuse') (weighted_bordafuse)",
    reads="ranks",
    weights=True,
    search=WEIGHT_SEARCH,
)
def w_bordafuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Weighted Borda fuse: the sum over runs of weight_r times the document's Borda points in run r (bordafuse)."""
    w = np.asarray(args["weights"], dtype=np.float64)[:, None]
    return (w * _borda_points(pool)).sum(axis=0)


def _condorcet(pool: Pool, weights: np.ndarray) -> np.ndarray:
    """N - position in the Condorcet order, query by query (every pair of the query's candidates is compared)."""
    out = np.zeros(len(pool.query))
    bounds = pool.starts()
    text_rank = pool.text_rank()
    for q in range(len(pool.queries)):
        lo, hi = bounds[q], bounds[q + 1]
        if hi == lo:
            continue
        pos = np.where(pool.present[:, lo:hi], pool.rank[:, lo:hi], np.iinfo(np.int64).max)
        votes = np.zeros((hi - lo, hi - lo))
        for r in range(pool.runs):  # run by run in order, as ranx adds the votes
            votes += weights[r] * (pos[r][:, None] < pos[r][None, :])
        wins = (votes > votes.T).sum(axis=1)
        order = np.lexsort((-text_rank[pool.doc[lo:hi]], -wins))
        out[lo + order] = (hi - lo) - np.arange(hi - lo)
    return out


@method("condorcet", peer="ranx 0.3.21 fuse(method='condorcet')", reads="ranks")
def condorcet(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Condorcet fuse (Montague and Aslam, CIKM 2002): a document beats another when more runs rank it above the
    other than the other above it (a document a run holds is above one it lacks; a run holding neither does not
    vote); the query's N candidates are ordered by the number of candidates each beats (ties by document id
    descending) and scored N - position. Where the majorities are transitive (no Condorcet cycle) this is the one
    order every pairwise sort gives, ranx's included; ranx sorts with a comparison that counts a run holding neither
    document for the second, so where majorities cycle or tie its order follows its input's, a Python set's."""
    return _condorcet(pool, np.ones(pool.runs))


@method(
    "w_condorcet",
    peer="ranx 0.3.21 fuse(method='w_condorcet') (weighted_condorcet)",
    reads="ranks",
    weights=True,
    search=WEIGHT_SEARCH,
)
def w_condorcet(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Weighted Condorcet fuse: condorcet with each run's vote counting its weight (the weights of the runs
    ranking a document above another are summed, run by run)."""
    return _condorcet(pool, np.asarray(args["weights"], dtype=np.float64))


@method(
    "rbc",
    peer="ranx 0.3.21 fuse(method='rbc')",
    reads="ranks",
    params=(_unit("phi", None, "the persistence"),),
    search=_float_trials("phi", 0.01, 1.0, 0.01),
)
def rbc(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """Rank-biased centroids (Bailey, Moffat, Scholer and Thomas, SIGIR 2017): the sum over the runs that hold the
    document of (1 - phi) * phi ** (rank - 1)."""
    return _rbp_weights(pool, args["phi"])


def _rbp_weights(pool: Pool, p: float) -> np.ndarray:
    powers = c_power_table(p, max(int(pool.rank.max(initial=0)), 1))  # C's pow, the same on every CPU
    return np.where(pool.present, (1 - p) * powers[np.maximum(pool.rank - 1, 0)], 0.0).sum(axis=0)


@method(
    "rank_biased_precision_fusion",
    peer="trectools 0.0.50 fusion.rank_biased_precision_fusion",
    reads="ranks",
    params=(Param("p", float, 0.8, "in (0, 1]", lambda v: 0.0 < v <= 1.0, "the persistence"),),
)
def rank_biased_precision_fusion(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """trectools' RBP fusion: the sum over the runs that hold the document of (1 - p) * p ** (rank - 1) (rbc with
    phi = p; trectools takes each run's first 1,000 documents)."""
    return _rbp_weights(pool, args["p"])


# ---------------------------------------------------------------- methods that learn from judgments
def _hits(pool: Pool, relevant: np.ndarray) -> np.ndarray:
    """(R, C): the candidate is relevant and the run holds it."""
    return pool.present & relevant[None, :]


def _sequential(table: np.ndarray) -> np.ndarray:
    """Column sums of ``table`` added row after row (as ranx adds its queries), not pairwise."""
    return np.cumsum(table, axis=0)[-1] if len(table) else np.zeros(table.shape[1:])


def _position_probs(pool: Pool, relevant: np.ndarray) -> list[np.ndarray]:
    """Each run's probability of relevance per position (ranx's ``estimate_probs``): at position i, the judged
    queries' relevant documents at i over the judged queries whose list reaches i."""
    hits = _hits(pool, relevant)
    out = []
    for r in range(pool.runs):
        at = pool.rank[r, pool.present[r]] - 1
        den = np.bincount(at)
        num = np.bincount(at, weights=hits[r, pool.present[r]], minlength=len(den))
        out.append(num / np.maximum(den, 1))
    return out


def _learn_position_probs(pool: Pool, relevant: np.ndarray, args: Mapping[str, Any]) -> dict:
    return {"probs": _position_probs(pool, relevant)}


@method(
    "posfuse",
    peer="ranx 0.3.21 fuse(method='posfuse') with optimize_fusion(method='posfuse')'s probs (posfuse_train)",
    reads="ranks",
    learns=_learn_position_probs,
)
def posfuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """PosFuse (Lillis et al.): the sum over the runs that hold the document of the run's probability of relevance
    at the document's rank, learned from the judged queries (relevant documents at that rank over the judged
    queries whose list reaches it); 0 beyond the longest list learned."""
    out = np.zeros(pool.present.shape[1])
    for r, probs in enumerate(args["probs"]):
        i = pool.rank[r] - 1
        ok = pool.present[r] & (i < len(probs))
        out += np.where(ok, probs[np.where(ok, i, 0)], 0.0)
    return out


def _probfuse_probs(pool: Pool, relevant: np.ndarray, n_segments: int) -> list[np.ndarray]:
    """ranx's ``estimate_probfuse_probs``: per judged query, the run's list cut into ``n_segments`` segments of
    ceil(n / n_segments) documents; a segment's probability is its relevant documents over its documents, summed over
    the judged queries (those segments that hold documents) and divided by the number of judged queries."""
    hits = _hits(pool, relevant)
    n_q = len(pool.queries)
    out = []
    for r in range(pool.runs):
        held = pool.present[r]
        q = pool.query[held]
        size = -(-pool.length[r] // n_segments)  # ceil
        seg = (pool.rank[r, held] - 1) // np.maximum(size[q], 1)
        cell = q * n_segments + seg
        docs = np.bincount(cell, minlength=n_q * n_segments).reshape(n_q, n_segments)
        rel = np.bincount(cell, weights=hits[r, held], minlength=n_q * n_segments).reshape(n_q, n_segments)
        mean = np.where(docs > 0, rel / np.maximum(docs, 1), 0.0)
        out.append(_sequential(mean) / n_q)
    return out


def _learn_probfuse(pool: Pool, relevant: np.ndarray, args: Mapping[str, Any]) -> dict:
    return {"probs": _probfuse_probs(pool, relevant, args["n_segments"])}


@method(
    "probfuse",
    peer="ranx 0.3.21 fuse(method='probfuse') with optimize_fusion(method='probfuse') (probfuse_train)",
    reads="ranks",
    params=(_count("n_segments", None, "segments of each list"),),
    learns=_learn_probfuse,
    search=_int_trials("n_segments", 1, 100),
)
def probfuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """ProbFuse (Lillis et al., SIGIR 2006): each run's list for the query is cut into n_segments segments of
    ceil(n / n_segments) documents; a document in segment k (from 1) scores the run's learned probability of
    relevance of segment k, over k; the sum over the runs that hold it."""
    out = np.zeros(pool.present.shape[1])
    for r, probs in enumerate(args["probs"]):
        size = -(-pool.length[r] // len(probs))
        seg = (pool.rank[r] - 1) // np.maximum(size[pool.query], 1)
        seg = np.where(pool.present[r], seg, 0)
        out += np.where(pool.present[r], probs[seg] / (seg + 1), 0.0)
    return out


def _segfuse_probs(pool: Pool, relevant: np.ndarray) -> list[np.ndarray]:
    """ranx's SegFuse estimate: for each of the ten segments [0, 5), [5, 15), [15, 35), ... (positions), the
    judged queries' relevant documents in it over the segment's size, summed over the queries and divided by their
    number."""
    n_q = len(pool.queries)
    return [_sequential(rates) / n_q for rates in _segment_rates(pool, relevant, SEGFUSE_BOUNDS)]


def _segment_rates(pool: Pool, relevant: np.ndarray, bounds: np.ndarray) -> list[np.ndarray]:
    """Per run, (queries, segments): the relevant documents the run holds in each segment of positions
    [bounds[k], bounds[k + 1]) of each query, over the segment's size (what SegFuse and BayesFuse learn from)."""
    hits = _hits(pool, relevant)
    n_q, n_seg = len(pool.queries), len(bounds) - 1
    sizes = np.diff(bounds)
    out = []
    for r in range(pool.runs):
        held = pool.present[r] & (pool.rank[r] <= bounds[-1])
        seg = np.searchsorted(bounds, pool.rank[r, held] - 1, side="right") - 1
        cell = pool.query[held] * n_seg + seg
        rel = np.bincount(cell, weights=hits[r, held], minlength=n_q * n_seg).reshape(n_q, n_seg)
        out.append(rel / sizes)
    return out


@method(
    "segfuse",
    peer="ranx 0.3.21 fuse(method='segfuse') with optimize_fusion(method='segfuse')'s probs (segfuse_train)",
    reads="ranks and scores",
    learns=lambda pool, relevant, args: {"probs": _segfuse_probs(pool, relevant)},
)
def segfuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """SegFuse (Shokouhi, ECIR 2007): a document at a position in the k-th of the segments [0, 5), [5, 15), [15,
    35), ..., [2555, 5115) scores the run's learned probability of relevance of that segment times (its score +
    1); 0 from position 5115; the sum over the runs that hold it."""
    out = np.zeros(pool.present.shape[1])
    for r, probs in enumerate(args["probs"]):
        i = pool.rank[r] - 1
        ok = pool.present[r] & (i < SEGFUSE_BOUNDS[-1])
        seg = np.searchsorted(SEGFUSE_BOUNDS, np.where(ok, i, 0), side="right") - 1
        out += np.where(ok, probs[seg] * (pool.score[r] + 1), 0.0)
    return out


@method(
    "slidefuse",
    peer="ranx 0.3.21 fuse(method='slidefuse') with optimize_fusion(method='slidefuse') (slidefuse_train)",
    reads="ranks",
    params=(_count("w", None, "the window's half-width", least=0),),
    learns=_learn_position_probs,
    search=_int_trials("w", 1, 100),
)
def slidefuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """SlideFuse (Lillis et al., ECIR 2008): a document at position p (from 0) of a run's n scores the mean of the
    run's learned probabilities of relevance per position (posfuse's) over the window [max(p - w, 0), min(p + w,
    n - 1)] (a window past the learned positions adds nothing for them but still counts them); the sum over the
    runs that hold it."""
    w = args["w"]
    out = np.zeros(pool.present.shape[1])
    for r, probs in enumerate(args["probs"]):
        cum = np.concatenate([[0.0], np.cumsum(probs)])
        p = pool.rank[r] - 1
        n = _at(pool.length, pool)[r]
        a, b = np.maximum(p - w, 0), np.minimum(p + w, n - 1)
        total = cum[np.clip(b + 1, 0, len(probs))] - cum[np.clip(a, 0, len(probs))]
        with np.errstate(invalid="ignore", divide="ignore"):
            out += np.where(pool.present[r], total / (b - a + 1), 0.0)
    return out


def _average_precision(pool: Pool, relevant: np.ndarray, judged_relevant: np.ndarray) -> np.ndarray:
    """Each run's mean average precision over the judged queries (ranx's ``map``): per query, the precision at
    each relevant document retrieved, summed, over the query's relevant documents in the judgments (0 when it has
    none); their mean."""
    hits = _hits(pool, relevant)
    out = np.zeros(pool.runs)
    for r in range(pool.runs):
        held = np.flatnonzero(pool.present[r])
        order = held[np.lexsort((pool.rank[r, held], pool.query[held]))]
        h = hits[r, order].astype(np.float64)
        q = pool.query[order]
        start = np.searchsorted(q, np.arange(len(pool.queries)))
        cum = np.cumsum(h)
        found = cum - np.concatenate([[0.0], cum])[start[q]]
        precision_sum = np.bincount(
            q, weights=np.where(h > 0, found / pool.rank[r, order], 0.0), minlength=len(pool.queries)
        )
        ap = np.where(judged_relevant > 0, precision_sum / np.maximum(judged_relevant, 1), 0.0)
        out[r] = ap.mean() if len(ap) else 0.0
    return out


@method(
    "mapfuse",
    peer="ranx 0.3.21 fuse(method='mapfuse') with optimize_fusion(method='mapfuse')'s map_scores (mapfuse_train)",
    reads="ranks",
    learns=lambda pool, relevant, args: {
        "map_scores": list(_average_precision(pool, relevant, args["_relevant_count"]))
    },
)
def mapfuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """MAPFuse (Lillis et al., 2010): the sum over the runs that hold the document of the run's MAP over the judged
    queries (ranx's map: relevance >= 1) divided by the document's rank."""
    m = np.asarray(args["map_scores"], dtype=np.float64)[:, None]
    return np.where(pool.present, m / np.maximum(pool.rank, 1), 0.0).sum(axis=0)


def _bayes_log_odds(pool: Pool, relevant: np.ndarray) -> list[np.ndarray]:
    """ranx's ``estimate_bayesfuse_log_odds``: for each of the segments [0, 5), [5, 10), [10, 15), [15, 20), [20,
    30), [30, 100), [100, 200), [200, 500), [500, 1000) (positions), the mean over the judged queries of (relevant
    documents in it / its size), added query by query; 0.001 is added to a mean of 0 and to a complement 1 - mean of
    0; the segment's log-odds are log(mean / (1 - mean))."""
    n_q, sizes = len(pool.queries), np.diff(BAYESFUSE_CUTS)
    out = []
    for rates in _segment_rates(pool, relevant, BAYESFUSE_CUTS):
        mean = _sequential(rates / n_q)
        mean = np.where(mean == 0, mean + 0.001, mean)
        complement = 1 - mean
        complement = np.where(complement == 0, complement + 0.001, complement)
        out.append(np.repeat(c_log((mean / complement).ravel()).reshape(mean.shape), sizes))
    return out


@method(
    "bayesfuse",
    peer="ranx 0.3.21 fuse(method='bayesfuse') with optimize_fusion(method='bayesfuse')'s log_odds",
    reads="ranks",
    learns=lambda pool, relevant, args: {"log_odds": _bayes_log_odds(pool, relevant)},
)
def bayesfuse(pool: Pool, args: Mapping[str, Any]) -> np.ndarray:
    """BayesFuse (Aslam and Montague, SIGIR 2001): the sum over runs of the run's learned log-odds of relevance at
    the document's position (one per segment of positions, learned from the judged queries), log(0.001 / 0.999)
    for a run that lacks the document; a document beyond rank 1,000 counts as lacked (ranx reads past its table
    there)."""
    out = np.zeros(pool.present.shape[1])
    for r, odds in enumerate(args["log_odds"]):
        i = pool.rank[r] - 1
        ok = pool.present[r] & (i < len(odds))
        out += np.where(ok, odds[np.where(ok, i, 0)], MISSING_LOG_ODDS)
    return out


# ---------------------------------------------------------------- fusing
@dataclass(frozen=True)
class Fused:
    """A fused run and what made it: ``record`` (the settings, each parameter as used, the definition, the peer,
    the tie order, and what was learned or searched)."""

    run: Run
    record: dict


def finite_scores(options: FuseOptions) -> bool:
    """Whether the runs must be read with finite scores: the method reads scores or the normalisation rescales
    them (an infinity makes the others 0 or NaN)."""
    return METHODS[options.method].reads_scores or NORMALIZATIONS[options.normalize].rescales


def _frame(pool: Pool, scores: np.ndarray, hits: int) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            QUERY_ID: pd.Series(
                pd.arrays.ArrowStringArray(take(pa.array(pool.queries, pa.large_string()), pool.query))
            ),
            DOC_ID: pd.Series(pd.arrays.ArrowStringArray(take(pool.doc_ids, pool.doc))),
            SCORE: scores,
        }
    )
    return top_k(frame, hits, score_precision=CANDIDATE_PRECISION)[[QUERY_ID, DOC_ID, SCORE]].reset_index(drop=True)


def _relevance(pool: Pool, qrels: Qrels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidates judged relevant (C,), queries the judgments hold (Q,), relevant documents per query (Q,)):
    relevant is a label >= 1, as ranx's hit lists."""
    frame = qrels.frame
    q = pd.Index(pool.queries).get_indexer(frame[QUERY_ID].astype(str).to_numpy(dtype=object))
    judged = np.zeros(len(pool.queries), dtype=bool)
    judged[q[q >= 0]] = True
    rel = (frame[RELEVANCE].to_numpy() >= 1) & (q >= 0)
    n_rel = np.bincount(q[rel], minlength=len(pool.queries))
    docs = _strings(frame[DOC_ID])
    d = pc.fill_null(pc.index_in(docs, value_set=pool.doc_ids), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    d = d[rel]
    n_docs = max(len(pool.doc_ids), 1)
    keys = q[rel][d >= 0] * n_docs + d[d >= 0]
    relevant = np.isin(pool.query * n_docs + pool.doc, keys)
    return relevant, judged, n_rel


def _missing(m: Method, options: FuseOptions) -> list[str]:
    """What the method still needs (parameters without a default, weights) after ``options``."""
    need = [p.name for p in m.params if p.default is None and p.name not in options.params]
    if m.weights and options.weights is None:
        need.append("weights")
    return need


def _searched(m: Method, options: FuseOptions, train: Qrels | None) -> bool:
    """Whether ranx's ``optimize_fusion`` search runs: judgments given and the searched parameter not."""
    if train is None or m.search is None:
        return False
    if m.search.target == "weights":
        return options.weights is None
    return m.search.target not in options.params


def _check(m: Method, options: FuseOptions, n_runs: int, train: Qrels | None) -> None:
    low, high = m.runs
    if n_runs < low or (high is not None and n_runs > high):
        words = {2: "two", 3: "three"}
        many = f"exactly {words.get(low, low)}" if high == low else f"at least {words.get(low, low)}"
        raise ConfigError(f"{m.name} fuses {many} runs, not {n_runs}")
    if options.weights is not None and len(options.weights) != n_runs:
        raise ConfigError(
            f"{phrase('weights=', '--weights')}: {len(options.weights)} weights for {n_runs} runs; give one per run"
        )
    said = phrase("train_qrels=", "--train-qrels")
    if train is None:
        if m.needs_judgments:
            raise ConfigError(
                f"{m.name} learns from judgments: give {said} (qrels of queries the runs hold; ranx's "
                f"optimize_fusion(qrels, runs, method={m.name!r}))"
            )
        missing = _missing(m, options)
        if missing:
            how = " and ".join(phrase("weights=", "--weights") if n == "weights" else _param_hint(n) for n in missing)
            search = f", or {said} to search it as ranx's optimize_fusion does" if m.search else ""
            raise ConfigError(f"{m.name} needs {how}{search}")
        knobs = [n for n in options.params if m.search and n in {p.name for p in (*m.search.knobs, METRIC)}]
        knobs = [n for n in knobs if n != m.search.target] if m.search else knobs
        if knobs:
            raise ConfigError(f"{m.name}: {', '.join(knobs)} shape the search with {said}, which is not given")
    elif not m.needs_judgments and not _searched(m, options, train):
        given = " (its parameters are given)" if m.search else ""
        raise ConfigError(f"{said}: {m.name} has nothing to learn from judgments{given}")


def _param_hint(name: str) -> str:
    return phrase(f"params={{{name!r}: ...}}", f"--param {name}=...")


def fuse(runs: Sequence[Run], options: FuseOptions, train: Qrels | None = None) -> Fused:
    """Fuse ``runs`` as ``options`` says; ``train``: judgments for the methods that learn (the runs' queries that
    it judges are the training queries) and for ranx's ``optimize_fusion`` searches of a parameter not given."""
    m = METHODS[options.method]
    _check(m, options, len(runs), train)
    validate_hits(options.hits)
    pool = build_pool(runs, options.depth, options.resort, extent=m.whole_run_range)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, where it shows
        pool = NORMALIZATIONS[options.normalize].apply(pool)
    args: dict[str, Any] = {p.name: p.default for p in m.params if p.default is not None}
    args |= dict(options.params)
    if options.weights is not None:
        args["weights"] = options.weights
    record = options.describe() | {k: v for k, v in args.items() if k not in ("weights",)}
    if train is not None:
        args, learned = _learn(m, pool, train, args, options)
        record |= learned
    with np.errstate(over="ignore", invalid="ignore"):
        scores = m.compute(pool, args)
    _check_finite(pool, scores, m.name, options.normalize)
    frame = _frame(pool, scores, options.hits)
    record |= {"definition": m.definition, "peer": m.peer, "ties": TIES}
    return Fused(Run(frame=frame, tag=m.name), record)


def _check_finite(pool: Pool, scores: np.ndarray, method: str, normalize: str) -> None:
    """Finite scores in, finite scores out: a sum or a rescaling of scores near the largest double can overflow;
    such a fused score is refused (it would sort nowhere), naming its query and document."""
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        c = int(bad[0])
        raise ConfigError(
            f"{method} (normalize {normalize}): the fused score of query {str(pool.queries[pool.query[c]])!a}, "
            f"document {pool.doc_ids[int(pool.doc[c])].as_py()!a} overflows a double ({scores[c]}): scores "
            "this large cannot be combined; rescale them (--normalize minmax)"
        )


def _learn(m: Method, pool: Pool, train: Qrels, args: dict, options: FuseOptions) -> tuple[dict, dict]:
    """The tables and parameters learned from ``train`` over the judged queries the runs hold, and their record."""
    relevant, judged, n_rel = _relevance(pool, train)
    if not judged.any():
        raise ConfigError(
            f"{phrase('train_qrels=', '--train-qrels')}: the judgments hold none of the runs' queries: nothing to "
            "learn from"
        )
    sub = pool.subset(judged)
    sub_relevant = relevant[judged[pool.query]]
    args = args | {"_relevant_count": n_rel[judged]}
    learned: dict[str, Any] = {"training_queries": int(judged.sum())}
    if _searched(m, options, train):
        best, report = _search(m, sub, sub_relevant, train, args, options)
        args = args | best
        learned["searched"] = report
    elif m.learns is not None:
        args = args | m.learns(sub, sub_relevant, args)
    args.pop("_relevant_count", None)
    for key in ("probs", "log_odds", "map_scores"):
        if key in args:
            learned[key] = (
                [np.asarray(v, dtype=float).tolist() for v in args[key]]
                if key != "map_scores"
                else [float(v) for v in args[key]]
            )
    for key in (m.search.target,) if m.search else ():
        if key in args and key != "weights":
            learned[key] = args[key]
    if "weights" in args and options.weights is None:
        learned["weights"] = list(args["weights"])
    return args, learned


def _metric(name: str) -> Any:
    """The one measure a search maximises, by any name ``twostage eval -m`` takes."""
    from toolkit.errors import UnknownMeasureError
    from toolkit.measures.names import parse_measures

    try:
        measures = parse_measures([name])
    except UnknownMeasureError as err:
        raise ConfigError(f"{phrase(METRIC_KEYWORD, '--param metric')}: {err}") from None
    if len(measures) != 1:
        raise ConfigError(f"metric {name!r} names {len(measures)} measures; the search maximises one")
    return measures[0]


def _search(
    m: Method, pool: Pool, relevant: np.ndarray, train: Qrels, args: dict, options: FuseOptions
) -> tuple[dict, dict]:
    """ranx's ``optimize_fusion``: every trial fused over the judged queries and scored by the mean ``metric``;
    the last trial scoring at least the best so far wins (ranx's ``>=``), starting from 0."""
    from toolkit.evaluation.evaluate import evaluate, prepare_judgments

    assert m.search is not None
    measure = _metric(options.params.get("metric", METRIC.default))
    prepared = prepare_judgments(train)
    target = m.search.target
    best_score: float = 0.0
    best: dict[str, Any] = {}
    trials = m.search.trials(options.params, pool.runs)
    if not trials:
        raise ConfigError(f"{m.name}: the search's grid is empty (check its min, max and step)")
    for value in trials:
        trial = args | {target: value}
        if m.learns is not None:
            trial |= m.learns(pool, relevant, trial)
        fused = Run(frame=_frame(pool, m.compute(pool, trial), options.hits))
        score = evaluate(prepared, fused, [measure], warn=False).summary[measure]
        if score >= best_score:
            best_score, best = score, {target: value} | {k: trial[k] for k in ("probs",) if k in trial}
    report = {"metric": measure.name, "trials": len(trials), "best": best_score}
    return best, report
