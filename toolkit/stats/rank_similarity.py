"""How much two rankings of the same query agree: rank-biased overlap and Kendall's tau on the top k.

Both read each run in trec_eval order (``ranking.order_run`` at the given score precision).

- **Rank-biased overlap** (Webber, Moffat & Zobel, "A similarity measure for indefinite rankings", ACM TOIS
  28(4), 2010), the extrapolated form RBO_ext of their eq. 32. With X_d = |S[:d] ∩ L[:d]| the overlap of the
  two prefixes of length d, s and l the lengths of the shorter list S and the longer list L, and p the
  persistence (weight of depth d proportional to p^(d-1)):

      RBO_ext = (1-p)/p * ( sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d )
                + ( (X_l - X_s)/l + X_s/s ) p^l

  where X_d for d > s counts only S's s items. For lists of equal length k it is
  (1-p)/p * sum_{d<=k} X_d/d p^d + X_k/k p^k. 1 for identical lists, 0 for disjoint ones; with p = 0.9 the top
  10 ranks carry 86 % of the weight. Two empty lists agree (1), one empty list does not (0).
- **Kendall's tau-b on the top k** (Kendall 1938; tau-b, which allows ties, Kendall 1945) over the union of
  the two top-k lists, each list cut at k, a document outside a list's top k tied below its k documents (the
  top-k convention of Fagin, Kumar & Sivakumar, "Comparing top k lists", SIAM J. Discrete Math. 17(1), 2003).
  tau-b = (C - D) / sqrt((C + D + T_a)(C + D + T_b)) over the pairs of the union: C concordant, D
  discordant, T_a / T_b tied in one ranking only. 1: the same top k in the same order; -1: the same k
  documents in reverse order; two top-10 lists without a common document give -100/145 = -0.69 (every pair
  across them is discordant). Undefined (NaN) when a ranking ties every pair, e.g. fewer than two documents.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import DOC_ID, QUERY_ID, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.measures.ranked import c_power_table

RBO_P = 0.9
TAU_DEPTH = 10


def rbo(a: Sequence[str], b: Sequence[str], p: float = RBO_P) -> float:
    """RBO_ext of two rankings without repeated items (see the module docstring)."""
    if not 0 < p < 1:
        raise ValueError(f"RBO persistence p must be in (0, 1), not {p}")
    if not len(a) and not len(b):
        return 1.0
    if not len(a) or not len(b):
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, l = len(short), len(long_)  # noqa: E741 (s and l as in Webber et al.'s RBO_ext formula)
    pos_long = {d: i for i, d in enumerate(long_)}
    # an item of S at position i that L holds at position j counts in X_d from depth max(i, j) + 1 on
    first_shared = np.zeros(l + 1, dtype=np.int64)
    for i, d in enumerate(short):
        j = pos_long.get(d)
        if j is not None:
            first_shared[max(i, j) + 1] += 1
    x = np.cumsum(first_shared)[1:]  # x[d-1] = X_d for d = 1..l
    depths = np.arange(1, l + 1, dtype=np.float64)
    weights = c_power_table(p, l + 1)[1:]
    x_s = float(x[s - 1])
    total = float(np.sum(x / depths * weights))
    tail = depths[s:]
    total += float(np.sum(x_s * (tail - s) / (s * tail) * weights[s:]))
    return (1 - p) / p * total + ((float(x[l - 1]) - x_s) / l + x_s / s) * p**l


def kendall_tau_top(a: Sequence[str], b: Sequence[str], k: int = TAU_DEPTH) -> float:
    """Kendall's tau-b over the union of the two top-k lists (see the module docstring)."""
    from scipy.stats import kendalltau

    union = list(dict.fromkeys([*a[:k], *b[:k]]))
    if len(union) < 2:
        return math.nan
    pos_a = {d: i for i, d in enumerate(a[:k])}
    pos_b = {d: i for i, d in enumerate(b[:k])}
    x = [pos_a.get(d, k) for d in union]
    y = [pos_b.get(d, k) for d in union]
    if len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(kendalltau(x, y, variant="b").statistic)


def ranked_lists(
    run: Run,
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    depth: int | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict[str, list[str]]:
    """Each query's documents in trec_eval order (the top ``depth`` when given); [] for a query the run lacks."""
    ordered = order_run(run.frame, score_precision, work=work)
    if depth is not None:
        ordered = ordered[ordered["rank"] <= depth]
    grouped = {q: g.tolist() for q, g in ordered.groupby(QUERY_ID, sort=False)[DOC_ID]}
    return {q: grouped.get(q, []) for q in query_ids}


class RankedLists(Mapping[str, list[str]]):
    """``ranked_lists`` made on demand: each query's documents in trec_eval order (its top ``depth`` when given)
    as a new list when asked, from the run sorted once (``order_run``), so a run of millions of lines is not held
    as Python strings."""

    def __init__(
        self,
        run: Run,
        query_ids: Sequence[str],
        score_precision: str = DEFAULT_SCORE_PRECISION,
        depth: int | None = None,
        *,
        work: Workspace = NO_WORKSPACE,
    ) -> None:
        from toolkit.data.columns import arrow_of

        self._qids = list(query_ids)
        ordered = order_run(run.frame, score_precision, work=work)  # type: ignore[arg-type]
        self._docs = arrow_of(ordered[DOC_ID])
        starts, lengths, slot = query_blocks(ordered, self._qids)
        held = slot >= 0  # each query's rows are one block in trec_eval order
        self._start = np.zeros(len(self._qids), np.int64)
        self._start[slot[held]] = starts[held]
        self._length = np.zeros(len(self._qids), np.int64)
        self._length[slot[held]] = lengths[held]
        if depth is not None:  # the top ``depth`` of each list
            self._length = np.minimum(self._length, depth)
        self._index = {q: i for i, q in enumerate(self._qids)}

    def __getitem__(self, q: str) -> list[str]:
        i = self._index[q]
        n = int(self._length[i])
        return self._docs.slice(int(self._start[i]), n).to_pylist() if n else []

    def __iter__(self):
        return iter(self._qids)

    def __len__(self) -> int:
        return len(self._qids)


def agreement(
    a: dict[str, list[str]] | CodedLists,
    b: dict[str, list[str]] | CodedLists,
    query_ids: Sequence[str],
    p: float = RBO_P,
    k: int = TAU_DEPTH,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.DataFrame:
    """Per query: ``rbo`` (p) and ``kendall_tau_<k>`` between the lists of ``a`` and ``b``.

    ``a`` and ``b``: {query: documents in order}, or both ``CodedLists`` of one ``code_lists`` call over
    ``query_ids`` (what a caller comparing many pairs of runs encodes once). Every query at once, in numpy; the
    values are those of ``rbo`` and ``kendall_tau_top`` per query, to the last bit (the same operations on the
    same numbers, each sum over one query's values in the same order)."""
    if not 0 < p < 1:
        raise ValueError(f"RBO persistence p must be in (0, 1), not {p}")
    qids = list(query_ids)
    if not isinstance(a, CodedLists) or not isinstance(b, CodedLists):
        coded = code_lists({"a": a, "b": b}, qids)  # type: ignore[dict-item]
        a, b = coded["a"], coded["b"]
    if a.queries != len(qids) or b.queries != len(qids):
        raise ValueError("coded lists of another query set")
    return pd.DataFrame({QUERY_ID: qids, "rbo": _rbo_all(a, b, p, work=work), f"kendall_tau_{k}": _tau_all(a, b, k)})


@dataclass(frozen=True)
class CodedLists:
    """One run's ranked lists over a query set as integers: ``codes`` (document codes shared by every run of one
    ``code_lists`` call), query after query, each list in order; ``lengths`` per query. ``distinct``: no code is
    repeated anywhere in ``codes`` (not only within a query), so a code names one row."""

    codes: np.ndarray
    lengths: np.ndarray
    distinct: bool = False

    @property
    def queries(self) -> int:
        return len(self.lengths)

    @property
    def starts(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)

    @property
    def query_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(self.queries, dtype=np.int64), self.lengths)

    @property
    def position(self) -> np.ndarray:
        """0-based position of each row in its query's list."""
        return np.arange(len(self.codes), dtype=np.int64) - np.repeat(self.starts, self.lengths)


def code_lists(lists: Mapping[str, Mapping[str, Sequence[str]]], query_ids: Sequence[str]) -> dict[str, CodedLists]:
    """``{run: {query: documents}}`` as ``CodedLists`` over ``query_ids`` with one document vocabulary (a query a
    run lacks: an empty list)."""
    qids = list(query_ids)
    flat: dict[str, list] = {}
    lengths: dict[str, np.ndarray] = {}
    for name, by_query in lists.items():
        per = [by_query.get(q, ()) for q in qids]
        lengths[name] = np.fromiter((len(x) for x in per), dtype=np.int64, count=len(per))
        flat[name] = list(itertools.chain.from_iterable(per))
    everything = np.array(list(itertools.chain.from_iterable(flat.values())), dtype=object)
    codes = pd.factorize(everything)[0].astype(np.int64) if len(everything) else np.zeros(0, np.int64)
    out, at = {}, 0
    for name in lists:
        n = len(flat[name])
        out[name] = CodedLists(codes[at : at + n], lengths[name])
        at += n
    return out


def query_blocks(ordered: pd.DataFrame, query_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A frame in trec_eval order (``order_run``) as one block of rows per query: each block's first row, its
    length, and the position of its query in ``query_ids`` (-1 when not there). A block begins where the rank
    is 1, so only one query id per block is read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from toolkit.data.columns import arrow_of, take

    starts = np.flatnonzero(ordered["rank"].to_numpy() == 1).astype(np.int64)
    lengths = np.diff(np.append(starts, len(ordered))).astype(np.int64)
    block_qids = take(arrow_of(ordered[QUERY_ID]), starts).cast(pa.large_string())
    wanted = pa.array([str(q) for q in query_ids], type=pa.large_string())
    slot = pc.fill_null(pc.index_in(block_qids, value_set=wanted), -1).to_numpy(zero_copy_only=False)
    return starts, lengths, slot.astype(np.int64)


def code_runs(
    runs: Mapping[str, Run],
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict[str, CodedLists]:
    """``code_lists`` of every run's ``ranked_lists`` over ``query_ids``, made from the runs in trec_eval order
    without a Python string per document.

    Codes only tell documents apart within a query: the longest run (a deep first stage) is not encoded whole.
    The other runs' documents are; the longest run's rows down to their longest list are looked up among them,
    and its deeper rows only where one holds a document the others have and its top does not (in that query);
    a document no other run has gets a code of its own."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from toolkit.data.columns import take

    qids = list(query_ids)
    picked = {name: _picked(r, qids, score_precision, work=work) for name, r in runs.items()}
    if not picked:
        return {}

    def docs_at(name: str, at: np.ndarray | None = None):
        docs, rows, _ = picked[name]
        rows = rows if at is None else rows[at]
        if at is None and len(rows) == len(docs) and np.array_equal(rows, np.arange(len(docs))):
            return docs.cast(pa.large_string())  # every row, in order already: no copy
        return take(docs, rows).cast(pa.large_string())

    big = max(picked, key=lambda n: len(picked[n][1]))
    others = [n for n in picked if n != big]
    parts = [docs_at(n) for n in others]
    chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
    vocabulary = pc.unique(pa.chunked_array(chunks, type=pa.large_string()))
    vocabulary = vocabulary.combine_chunks() if isinstance(vocabulary, pa.ChunkedArray) else vocabulary

    def index_in(values) -> np.ndarray:
        return (
            pc.fill_null(pc.index_in(values, value_set=vocabulary), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        )

    out = {n: CodedLists(index_in(docs_at(n)), picked[n][2]) for n in others}
    coded = CodedLists(np.full(len(picked[big][1]), -1, np.int64), picked[big][2])
    reach = max((int(out[n].lengths.max(initial=0)) for n in others), default=0)
    top, top_query, _ = _head(coded, reach)
    coded.codes[top] = index_in(docs_at(big, top))
    width = len(vocabulary) + 1
    top_keys = np.sort(top_query * width + coded.codes[top])
    missing = np.concatenate(
        [np.zeros(0, np.int64)]
        + [out[n].codes[~_among(out[n].query_of_row * width + out[n].codes, top_keys)] for n in others]
    )
    if len(missing):  # documents of the other runs below the longest run's top, if it holds them at all
        deep = np.ones(len(coded.codes), bool)
        deep[top] = False
        deep = np.flatnonzero(deep)
        holds = pc.is_in(docs_at(big, deep), value_set=vocabulary.take(pa.array(np.unique(missing))))
        deep = deep[holds.to_numpy(zero_copy_only=False)]
        coded.codes[deep] = index_in(docs_at(big, deep))
    alone = np.flatnonzero(coded.codes < 0)
    coded.codes[alone] = width + np.arange(len(alone))  # in no other run: a code of its own
    out[big] = coded
    return {n: out[n] for n in runs}


def _picked(run: Run, qids: list[str], score_precision: str, *, work: Workspace = NO_WORKSPACE):
    """A run in trec_eval order as (its documents, the rows of its lists query after query in the order of
    ``qids``, each query's list length)."""
    from toolkit.data.columns import arrow_of

    ordered = order_run(run.frame, score_precision, work=work)  # type: ignore[arg-type]
    starts, lengths, slot = query_blocks(ordered, qids)
    held = np.flatnonzero(slot >= 0)
    held = held[np.argsort(slot[held], kind="stable")]  # the blocks in the order of ``query_ids``
    n = lengths[held]
    rows = np.repeat(starts[held] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()), dtype=np.int64)
    per_query = np.zeros(len(qids), np.int64)
    per_query[slot[held]] = n
    return arrow_of(ordered[DOC_ID]), rows, per_query


def code_aligned(
    first_name: str,
    first: Run,
    reranked: Mapping[str, tuple[Run, np.ndarray]],
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict[str, CodedLists]:
    """``code_runs`` of a first stage and runs reranked from it, from their alignment: ``reranked`` maps each
    name to (its run, per row of the run in trec_eval order the first stage's row, in trec_eval order, of the
    same query and document, -1 when none: ``depths.alignment``'s ``row_in_first``).

    A first-stage document's code is its row in the first stage (runs list a document once per query); a
    document of a reranked run the first stage's query lacks is coded by its id, after every first-stage row
    (the same code in every reranked run). The codes tell documents apart within a query as ``code_runs``'s do,
    so the agreement computed from them is the same."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from toolkit.data.columns import take

    qids = list(query_ids)
    f_docs, f_rows, f_lengths = _picked(first, qids, score_precision, work=work)
    out = {first_name: CodedLists(f_rows.astype(np.int64, copy=True), f_lengths, distinct=True)}
    lacking = {}
    for name, (run, row_in_first) in reranked.items():
        docs, rows, lengths = _picked(run, qids, score_precision, work=work)
        codes = np.asarray(row_in_first, dtype=np.int64)[rows]
        out[name] = CodedLists(codes, lengths)
        alone = np.flatnonzero(codes < 0)
        if len(alone):
            lacking[name] = (alone, take(docs, rows[alone]).cast(pa.large_string()))
    if lacking:  # documents the first stage's query lacks: coded by their ids, one vocabulary for every run
        chunks = [c for _, d in lacking.values() for c in (d.chunks if isinstance(d, pa.ChunkedArray) else [d])]
        vocabulary = pc.unique(pa.chunked_array(chunks, type=pa.large_string()))
        vocabulary = vocabulary.combine_chunks() if isinstance(vocabulary, pa.ChunkedArray) else vocabulary
        for name, (alone, d) in lacking.items():
            found = pc.index_in(d, value_set=vocabulary).to_numpy(zero_copy_only=False).astype(np.int64)
            out[name].codes[alone] = len(f_docs) + found
    return out


def _head(lists: CodedLists, reach: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, query, position) of the rows of ``lists`` at positions below ``reach`` (no array over every row)."""
    n = np.minimum(lists.lengths, reach)
    query = np.repeat(np.arange(lists.queries, dtype=np.int64), n)
    position = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return lists.starts[query] + position, query, position


def _among(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Per key: is it in ``sorted_keys`` (ascending)."""
    if not len(sorted_keys):
        return np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def _intersect(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.intersect1d(x, y, assume_unique=True, return_indices=True)``'s two index arrays (x and y each without
    repeats, non-negative): one sort of both, each key doubled plus its origin so that equal keys sort x's
    first and every sorted key is distinct (no stable sort needed)."""
    if not len(x) or not len(y):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if max(int(x.max()), int(y.max())) >= 2**62:
        _, ix, iy = np.intersect1d(x, y, assume_unique=True, return_indices=True)
        return ix, iy
    keys = np.concatenate([x * 2, y * 2 + 1])
    order = np.argsort(keys)
    keys = keys[order] >> 1
    pair = np.flatnonzero(keys[1:] == keys[:-1])
    return order[pair], order[pair + 1] - len(x)


def _shared(
    a: CodedLists, b: CodedLists, *, work: Workspace = NO_WORKSPACE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documents a query's two lists share: (query, position in a, position in b), in no particular order.

    The longer run's rows are matched first down to the other run's longest list (where a reranked run's
    documents are in its first stage), then, for the documents still unmatched, below it, rows holding those
    documents only: no sort of the longer run's every row. When one run's codes are ``distinct`` (a first stage's
    rows, ``code_aligned``), the other's codes are looked up as rows of it, without a sort."""
    if a.distinct or b.distinct:
        return _shared_rows(a, b, work=work)
    width = int(max(a.codes.max(initial=-1), b.codes.max(initial=-1))) + 1
    if a.codes.min(initial=0) >= 0 and b.codes.min(initial=0) >= 0 and width <= 8 * (len(a.codes) + len(b.codes)):
        for d in (a, b):  # codes of one run without repeats (runs reranked from one first stage): a lookup
            row_of = _row_of_code(d.codes, width)
            if np.array_equal(row_of[d.codes], np.arange(len(d.codes), dtype=row_of.dtype)):
                return _shared_rows(a, b, d, row_of, work=work)
    swap = len(a.codes) < len(b.codes)
    long_, short = (b, a) if swap else (a, b)
    ks = short.query_of_row * width + short.codes
    reach = int(short.lengths.max(initial=0))
    top, tq, _ = _head(long_, reach)
    il, is_ = _intersect(tq * width + long_.codes[top], ks)
    il = top[il]
    rest = np.ones(len(ks), bool)
    rest[is_] = False
    rest = np.flatnonzero(rest)
    if len(rest):
        wanted = np.zeros(width, bool)
        wanted[short.codes[rest]] = True
        below = wanted[long_.codes]
        below[top] = False
        deep = np.flatnonzero(below)
        dq = np.searchsorted(long_.starts, deep, side="right") - 1
        dl, ds = _intersect(dq * width + long_.codes[deep], ks[rest])
        il, is_ = np.concatenate([il, deep[dl]]), np.concatenate([is_, rest[ds]])
    ia, ib = (is_, il) if swap else (il, is_)
    qa = np.searchsorted(a.starts, ia, side="right") - 1
    qb = np.searchsorted(b.starts, ib, side="right") - 1
    return qa, ia - a.starts[qa], ib - b.starts[qb]


def _row_of_code(codes: np.ndarray, width: int) -> np.ndarray:
    """Per code below ``width``: the (last) row holding it, -1 when none (int32 where the rows fit)."""
    row = np.full(width, -1, np.int32 if len(codes) < 2**31 else np.int64)
    row[codes] = np.arange(len(codes), dtype=row.dtype)
    return row


def _shared_rows(
    a: CodedLists,
    b: CodedLists,
    d: CodedLists | None = None,
    row_of: np.ndarray | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_shared`` where ``a`` or ``b`` has codes without repeats (``distinct``, or ``d`` given with its
    ``row_of``): each code of the other names at most one of its rows (for ``distinct`` codes, the row of each
    code made once per lists in the workspace), a shared document where that row is of the same query."""

    if d is None:
        d = a if a.distinct else b
    swap = d is not a
    o = a if swap else b
    if row_of is None:
        dd = d
        row_of = work.once(
            "coded_rows", (d.codes,), (), lambda: _row_of_code(dd.codes, int(dd.codes.max(initial=-1)) + 1)
        )
    known = np.flatnonzero((o.codes >= 0) & (o.codes < len(row_of)))
    rows = row_of[o.codes[known]]
    held = rows >= 0
    io, id_ = known[held], rows[held].astype(np.int64)
    d_starts, o_starts = d.starts, o.starts
    qo = np.searchsorted(o_starts, io, side="right") - 1
    qd = np.searchsorted(d_starts, id_, side="right") - 1
    same = qo == qd
    q, io, id_ = qo[same], io[same], id_[same]
    po, pd_ = io - o_starts[q], id_ - d_starts[q]
    return (q, po, pd_) if swap else (q, pd_, po)


_ROWS = 2048  # queries per block of the RBO sums (memory only)


def _rbo_all(a: CodedLists, b: CodedLists, p: float, *, work: Workspace = NO_WORKSPACE) -> np.ndarray:
    """``rbo`` of every query's two lists: queries grouped by their (shorter, longer) lengths, each group's
    X_d as one matrix whose rows are summed as ``rbo`` sums them."""
    la, lb = a.lengths, b.lengths
    out = np.where((la == 0) & (lb == 0), 1.0, 0.0)
    q, i, j = _shared(a, b, work=work)
    first = np.maximum(i, j) + 1  # in X_d from depth max(i, j) + 1 on
    short, long_ = np.minimum(la, lb), np.maximum(la, lb)
    both = np.flatnonzero((la > 0) & (lb > 0))
    if not len(both):
        return out
    groups = pd.DataFrame({"s": short[both], "l": long_[both], "row": both}).groupby(["s", "l"], sort=False)["row"]
    blocks = []  # (s, l, queries) of at most _ROWS queries each
    for (s, l), rows in groups:  # noqa: E741 (s and l as in rbo)
        rows = rows.to_numpy()
        blocks += [(int(s), int(l), rows[r0 : r0 + _ROWS]) for r0 in range(0, len(rows), _ROWS)]
    # each query's block and its row in the block; the shared documents ordered by block (a radix sort)
    block_of = np.full(len(la), -1, np.int64)
    slot = np.zeros(len(la), np.int64)
    for n, (_, _, block) in enumerate(blocks):
        block_of[block] = n
        slot[block] = np.arange(len(block))
    of_entry = block_of[q]
    by_block = np.argsort(of_entry.astype(np.int16 if len(blocks) < 2**15 else np.int64), kind="stable")
    ends = np.cumsum(np.bincount(of_entry, minlength=len(blocks)))
    for n, (s, l, block) in enumerate(blocks):  # noqa: E741 (s and l as in rbo)
        if n == 0 or (s, l) != blocks[n - 1][:2]:
            depths = np.arange(1, l + 1, dtype=np.float64)
            weights = c_power_table(p, l + 1)[1:]
            tail = depths[s:]
        mine = by_block[(ends[n - 1] if n else 0) : ends[n]]  # the shared documents of the block's queries
        f = first[mine]
        w = int(f.max(initial=0)) + 1  # X_d stays X_w-1 below the deepest first shared depth
        counts = np.bincount(slot[q[mine]] * w + f, minlength=len(block) * w).reshape(len(block), w)
        reached = np.cumsum(counts, axis=1)
        x = np.empty((len(block), l))  # X_d, d = 1..l, as floats (exact: whole numbers)
        x[:, : w - 1] = reached[:, 1:]
        x[:, w - 1 :] = reached[:, -1:]
        x_s, x_l = x[:, s - 1].copy(), x[:, l - 1].copy()
        terms = np.divide(x, depths, out=x)
        total = np.sum(np.multiply(terms, weights, out=terms), axis=1)
        if l > s:
            # X_s is one of s + 1 counts: each one's sum over the tail once (the same operations per row)
            values, which = np.unique(x_s, return_inverse=True)
            total += np.sum(values[:, None] * (tail - s) / (s * tail) * weights[s:], axis=1)[which.reshape(-1)]
        out[block] = (1 - p) / p * total + ((x_l - x_s) / l + x_s / s) * p**l
    return out


def _tau_all(a: CodedLists, b: CodedLists, k: int) -> np.ndarray:
    """``kendall_tau_top`` of every query's two lists: the union of the two top k (a's, then b's others), each
    document's position in each top k (k when outside it), and tau-b from the counts of concordant, discordant
    and untied pairs, as scipy.stats.kendalltau computes it."""
    nq = a.queries
    tops = []
    for lists in (a, b):
        rows, query, pos = _head(lists, k)  # the top k rows only, not a deep run's every row
        top = np.full((nq, k), -1, np.int64)
        top[query, pos] = lists.codes[rows]
        tops.append((top, np.arange(k)[None, :] < np.minimum(lists.lengths, k)[:, None]))
    out = np.full(nq, np.nan)
    for r0 in range(0, nq, _ROWS):
        (ca, va), (cb, vb) = ((t[r0 : r0 + _ROWS], v[r0 : r0 + _ROWS]) for t, v in tops)
        out[r0 : r0 + len(ca)] = _tau_block(ca, va, cb, vb, k)
    return out


def _tau_block(ca: np.ndarray, valid_a: np.ndarray, cb: np.ndarray, valid_b: np.ndarray, k: int) -> np.ndarray:
    n = len(ca)
    match = (ca[:, :, None] == cb[:, None, :]) & valid_a[:, :, None] & valid_b[:, None, :]  # (q, i in a, j in b)
    small = np.int8 if k < 64 else np.int64  # positions and their signs (whole numbers: counted exactly either way)
    pos = np.arange(k, dtype=small)
    # the union: a's top k (x its position, y its position in b's top k or k), then b's others (x = k)
    x = np.concatenate([pos, np.full(k, k, small)])  # the same for every query
    in_b = np.where(match.any(axis=2), match.argmax(axis=2), k).astype(small)
    y = np.concatenate([in_b, np.broadcast_to(pos, (n, k))], axis=1)
    v = np.concatenate([valid_a, valid_b & ~match.any(axis=1)], axis=1)
    pair = v[:, :, None] & v[:, None, :] & np.triu(np.ones((2 * k, 2 * k), bool), 1)[None]
    sx = np.sign(x[:, None] - x[None, :])[None]
    sy = np.sign(y[:, :, None] - y[:, None, :])
    con_minus_dis = np.where(pair, sx * sy, small(0)).sum(axis=(1, 2), dtype=np.int64)
    untied_x = (pair & (sx != 0)).sum(axis=(1, 2))
    untied_y = (pair & (sy != 0)).sum(axis=(1, 2))
    out = np.full(n, np.nan)
    ok = (v.sum(axis=1) >= 2) & (untied_x > 0) & (untied_y > 0)
    tau = con_minus_dis[ok] / np.sqrt(untied_x[ok]) / np.sqrt(untied_y[ok])
    out[ok] = np.minimum(1.0, np.maximum(-1.0, tau))
    return out
