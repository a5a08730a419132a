"""A run joined to its judgments, in trec_eval's order: what every qrels measure reads.

``build_ranked`` does what trec_eval's ``form_res_rels`` does for every query
at once: it puts each query's documents in trec_eval's order
(``ranking.trec_order``), cuts at ``-M``, drops unjudged documents under
``-J``, and gives each retrieved document a relevance code: its qrels label
(>= 0), ``UNJUDGED`` (-2: in the qrels with a negative label, "pooled but not
judged") or ``NONPOOL`` (-1: not in the qrels). Only the rows that are in
the qrels are kept (usually about 1 % of a deep run); a retrieved document
that is not kept is ``NONPOOL`` by construction, which every measure can
count from ``num_ret``.

The helpers at the bottom keep sums in trec_eval's order of addition
(per query, in rank order, one addition at a time), so values agree with
trec_eval to the last bit, not only to four decimals: ``np.bincount`` adds
its weights in input order; ``segment_cumsum`` is a running sum per query.
Logarithms come from the C library (``math``), as trec_eval's do.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import arrow_of
from toolkit.data.ranking import group_starts, order_run, trec_order, within_group_rank
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace

#: Relevance code of a retrieved document absent from the qrels (trec_eval's RELVALUE_NONPOOL).
NONPOOL = -1
#: Relevance code of a retrieved document in the qrels with a negative label (RELVALUE_UNJUDGED).
UNJUDGED = -2


@dataclass
class Ranked:
    """Per kept row (in the qrels), sorted by (query, rank): ``q``, ``rank`` (1-based), ``code``.

    Per query (indexed like ``qids``, the sorted qrels query ids):
    ``num_ret`` (after -M/-J), ``rel_levels`` (qrels documents per label
    >= 0, whether retrieved or not: column j counts label ``levels[j]``), ``in_run``.
    """

    qids: np.ndarray
    q: np.ndarray
    rank: np.ndarray
    code: np.ndarray
    num_ret: np.ndarray
    rel_levels: np.ndarray  # (nq, len(levels)) int64
    in_run: np.ndarray
    level: int
    levels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the distinct judged labels >= 0
    extra_queries: int = 0
    line: np.ndarray | None = None  # per kept row: its qrels line (a row of the qrels frame); None if not known
    score: np.ndarray | None = None  # per kept row: its score (float64); None if not known
    index: QrelsIndex | None = None  # the qrels these rows were coded against (their lines' labels, queries)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def nq(self) -> int:
        return len(self.qids)

    # ---------------------------------------------------------- per query
    @property
    def num_rel(self) -> np.ndarray:
        """Relevant documents in the qrels: labels >= the level (only labels >= 0 count)."""
        return self._memo("num_rel", lambda: self.rel_levels[:, self.levels >= max(self.level, 0)].sum(axis=1))

    @property
    def num_rel_levels(self) -> np.ndarray:
        """1 + the highest label >= 0 judged for the query (0 when none): trec_eval's num_rel_levels."""

        def calc():
            present = self.rel_levels > 0
            if not present.shape[1]:
                return np.zeros(len(present), dtype=np.int64)
            top = present.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1)
            return np.where(present.any(axis=1), self.levels[top] + 1, 0)

        return self._memo("num_rel_levels", calc)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per-query number of kept rows where ``mask`` holds."""
        return np.bincount(self.q, weights=mask, minlength=self.nq)

    def sum(self, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Per-query sum of ``values`` over kept rows (or over ``rows``), added in rank order."""
        q = self.q if rows is None else self.q[rows]
        return np.bincount(q, weights=values, minlength=self.nq)

    # ------------------------------------------------------------ per row
    @property
    def rel(self) -> np.ndarray:
        """Kept rows relevant at the level (trec_eval: ``rel >= relevance_level``)."""
        return self._memo("rel", lambda: self.code >= self.level)

    @property
    def num_rel_ret(self) -> np.ndarray:
        return self._memo("num_rel_ret", lambda: self.count(self.rel))

    def running_count(self, mask: np.ndarray) -> np.ndarray:
        """Per kept row: how many rows of its query up to and including it satisfy ``mask``."""
        c = np.cumsum(mask, dtype=np.int64)
        starts = self.starts
        before = c[starts] - mask[starts]
        return c - np.repeat(before, np.diff(np.append(starts, len(c))))

    @property
    def starts(self) -> np.ndarray:
        """Index of each non-empty query's first kept row (rows are grouped by query)."""
        return self._memo("starts", lambda: np.flatnonzero(group_starts(self.q)))

    def rel_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(row indices of relevant kept rows, their 1-based count within the query)."""

        def calc():
            rows = np.flatnonzero(self.rel)
            return rows, within_group_rank(self.q[rows]).astype(np.int64)

        return self._memo("rel_rows", calc)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Every retrieved position: (start of each query in a flat array of num_ret codes, the codes).

        Positions that are not kept rows are NONPOOL. Built on demand (relstring,
        rbp_resid), about 4 bytes per retrieved document.
        """

        def calc():
            start = np.concatenate(([0], np.cumsum(self.num_ret)[:-1])).astype(np.int64)
            codes = np.full(int(self.num_ret.sum()), NONPOOL, dtype=np.int32)
            codes[start[self.q] + self.rank - 1] = self.code
            return start, codes

        return self._memo("positions", calc)

    def labels(self) -> np.ndarray:
        """Per kept row, its qrels label as the qrels give it (negative ones included); where the rows' qrels
        lines are not known (rows coded without them), a negative label reads as -1."""

        def calc():
            if self.index is not None and self.line is not None:
                return self.index.labels[self.line].astype(np.int64)
            return np.where(self.code >= 0, self.code, -1).astype(np.int64)

        return self._memo("labels", calc)

    def _memo(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]


@dataclass(frozen=True)
class QrelsIndex:
    """A qrels factorised once, for any number of runs and settings (nothing here depends on ``-l``, ``-M``, ``-J``).

    ``qids`` the sorted query ids (trec_eval's strcmp order), ``q_qidx`` each qrels line's query index,
    ``labels`` the labels in file order, ``rel_levels`` documents per (query, label >= 0), and the sorted
    (query, document) keys with their relevance codes that ``doc_codes`` looks run rows up in, and the qrels
    line of each key (``qline``).
    """

    qids: np.ndarray
    q_qidx: np.ndarray
    labels: np.ndarray
    rel_levels: np.ndarray
    levels: np.ndarray
    docs: pa.Array
    n_docs: np.int64
    qkeys: np.ndarray
    qcodes: np.ndarray
    qline: np.ndarray


def index_qrels(qrels: Qrels, qids: np.ndarray | None = None, q_qidx: np.ndarray | None = None) -> QrelsIndex:
    """Factorise ``qrels`` (query ids, document keys, labels) once; ``qids``/``q_qidx`` when already known."""
    if q_qidx is None or qids is None:
        q_qidx, uniques = pd.factorize(qrels.frame[QUERY_ID], sort=True)
        qids = np.array(uniques.tolist(), dtype=object)
    q_qidx = np.asarray(q_qidx, dtype=np.int64)
    labels = qrels.frame[RELEVANCE].to_numpy()
    doc_col = arrow_of(qrels.frame[DOC_ID])
    docs = pc.unique(doc_col)
    n_docs = np.int64(max(len(docs), 1))
    qkeys = q_qidx * n_docs + pc.index_in(doc_col, value_set=docs).to_numpy(zero_copy_only=False)
    order = np.argsort(qkeys, kind="stable")
    rel_levels, levels = _rel_levels(q_qidx, labels, len(qids))
    return QrelsIndex(
        qids=qids,
        q_qidx=q_qidx,
        labels=labels,
        rel_levels=rel_levels,
        levels=levels,
        docs=docs,
        n_docs=n_docs,
        qkeys=qkeys[order],
        qcodes=np.where(labels >= 0, labels, UNJUDGED)[order].astype(np.int32),
        qline=order.astype(np.int64),
    )


def build_ranked(
    qrels: Qrels,
    run: Run,
    *,
    level: int,
    score_precision: str,
    max_docs: int | None,
    judged_only: bool,
    qids: np.ndarray | None = None,
    q_qidx: np.ndarray | None = None,
    index: QrelsIndex | None = None,
    ties: str = "docid_desc",
    work: Workspace = NO_WORKSPACE,
) -> Ranked:
    """Join ``run`` to ``qrels`` and rank it as trec_eval does (see the module docstring).

    ``index``: the qrels already factorised (``index_qrels``), so evaluating one qrels many times
    factorises it once. ``ties``: how score ties are broken (``ranking.trec_order``), for the families
    that follow another tool's order; trec_eval's is ``docid_desc``."""
    index = index if index is not None else index_qrels(qrels, qids, q_qidx)
    # the judged rows in trec_eval order depend on the run, the qrels and the score precision alone (not on the
    # level, -M or -J): in a workspace, a run evaluated under several settings is ranked once
    rows = work.once(
        "judged rows in trec_eval order",
        (run.frame, index),
        (score_precision, ties),
        lambda: _judged_rows(
            index, _ordered_if_made(run.frame, score_precision, ties, work), score_precision, ties, work
        ),
    )
    return _cut(index, rows, level=level, max_docs=max_docs, judged_only=judged_only)


def _ordered_if_made(
    frame: pd.DataFrame, score_precision: str, ties: str = "docid_desc", work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """``frame``'s rows in trec_eval order when ``work`` has put them so already (its judged rows are then
    ranked without a sort: the same rows, queries, ranks and codes), else ``frame``. Another tie order needs
    the file's own order (``input``) or its own sort: ``frame`` itself."""
    if ties == "docid_desc" and work.has("order_run", (frame,), (score_precision,)):
        return order_run(frame, score_precision, work=work)  # type: ignore[arg-type]
    return frame


def _judged_rows(
    index: QrelsIndex,
    frame: pd.DataFrame,
    score_precision: str,
    ties: str = "docid_desc",
    work: Workspace = NO_WORKSPACE,
) -> tuple:
    queries = arrow_of(frame[QUERY_ID])
    qidx_all = pc.index_in(queries, value_set=pa.array(index.qids, type=pa.string()))
    doc = arrow_of(frame[DOC_ID])
    score = frame[SCORE].to_numpy()
    extra = 0
    if qidx_all.null_count:  # run queries without judgments: trec_eval ignores them
        keep = pc.is_valid(qidx_all)
        extra = pc.count_distinct(queries.filter(pc.invert(keep))).as_py()
        doc, qidx_all = doc.filter(keep), qidx_all.filter(keep)
        score = score[keep.to_numpy(zero_copy_only=False)]
    qidx = qidx_all.to_numpy(zero_copy_only=False).astype(np.int32)
    del qidx_all
    code = doc_codes(index, qidx, doc)  # in file order; permuted below
    pa.default_memory_pool().release_unused()
    # qids are sorted, so ordering by their index orders queries as trec_eval does; a frame already in that
    # order (``ranking.in_trec_order``, ``order_run``) keeps its rows' order: its judged queries' indices ascend
    in_order = ties == "docid_desc" and work.is_ordered(frame, score_precision)
    if in_order and not bool((qidx[1:] < qidx[:-1]).any()):
        order = np.arange(len(qidx), dtype=np.int64)
    else:
        order = trec_order(qidx, score, doc, score_precision, ties)
    q, rank, kept, counts, rows = _rows_in_order(index, qidx, code, order, with_rows=True)
    line = _lines(index, qidx[rows], take_rows(doc, rows))
    kept_score = np.asarray(score[rows], dtype=np.float64)
    del doc, score
    return q, rank, kept, counts, extra, line, kept_score


def take_rows(values, rows: np.ndarray):
    """The arrow ``values`` at ``rows``."""
    return values.take(pa.array(rows))


def _lines(index: QrelsIndex, qidx: np.ndarray, doc) -> np.ndarray:
    """The qrels line of each (query index, document) pair, every pair being in the qrels."""
    if not len(qidx):
        return np.zeros(0, dtype=np.int64)
    keys = qidx.astype(np.int64) * index.n_docs + pc.index_in(doc, value_set=index.docs).to_numpy(zero_copy_only=False)
    return index.qline[np.searchsorted(index.qkeys, keys)]


def ranked_codes(
    index: QrelsIndex,
    qidx: np.ndarray,
    code: np.ndarray,
    order: np.ndarray,
    *,
    level: int,
    max_docs: int | None,
    judged_only: bool,
    extra_queries: int = 0,
) -> Ranked:
    """``build_ranked`` of a run already coded: each row's query index into ``index.qids`` (``qidx``), its
    relevance code (``code``, as ``doc_codes`` gives it) and the rows in trec_eval order (``order``: grouped by
    ``qidx`` ascending, each query's rows in rank order). A run the toolkit builds as a permutation of rows
    it has coded once (the diagnosis's reorderings) is ranked without touching its strings again."""
    rows = (*_rows_in_order(index, qidx, code, order), extra_queries, None, None)
    return _cut(index, rows, level=level, max_docs=max_docs, judged_only=judged_only)


def _rows_in_order(index: QrelsIndex, qidx: np.ndarray, code: np.ndarray, order: np.ndarray, with_rows: bool = False):
    """(query, rank, code) of the rows in the qrels, in trec_eval order, and the rows per query (and, with
    ``with_rows``, the positions of those rows in the arrays given)."""
    counts = np.bincount(qidx, minlength=len(index.qids))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.flatnonzero(code[order] != NONPOOL)
    rows = order[pos]
    q, kept = qidx[rows].astype(np.int64), code[rows].astype(np.int64)
    rank = (pos - starts[q] + 1).astype(np.int64)
    return (q, rank, kept, counts, rows) if with_rows else (q, rank, kept, counts)


def _cut(index: QrelsIndex, rows: tuple, *, level: int, max_docs: int | None, judged_only: bool) -> Ranked:
    """The ranked rows cut at ``-M`` and, under ``-J``, to the judged documents."""
    q, rank, code, counts, extra, line, score = rows
    nq = len(index.qids)
    num_ret = counts.astype(np.int64)
    if max_docs is not None:
        cut = rank <= max_docs
        q, rank, code = q[cut], rank[cut], code[cut]
        line, score = (x[cut] if x is not None else None for x in (line, score))
        num_ret = np.minimum(num_ret, max_docs)
    if judged_only:
        judged = code >= 0
        q, code = q[judged], code[judged]
        line, score = (x[judged] if x is not None else None for x in (line, score))
        rank = within_group_rank(q).astype(np.int64)
        num_ret = np.bincount(q, minlength=nq).astype(np.int64)
    return Ranked(
        qids=index.qids,
        q=q,
        rank=rank,
        code=code,
        num_ret=num_ret,
        rel_levels=index.rel_levels,
        levels=index.levels,
        in_run=counts > 0,
        level=level,
        extra_queries=extra,
        line=line,
        score=score,
        index=index,
    )


def code_rows(index: QrelsIndex, query_ids, doc_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of a run (its ``query_ids`` and ``doc_ids`` columns) that ``ranked_codes`` reads:
    (the positions of the rows whose query is judged, their query index into ``index.qids``, their relevance
    code), as ``build_ranked`` computes them."""
    qidx_all = pc.index_in(arrow_of(query_ids), value_set=pa.array(index.qids, type=pa.string()))
    keep = pc.is_valid(qidx_all).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(keep)
    doc = arrow_of(doc_ids)
    if len(rows) < len(keep):
        doc, qidx_all = doc.filter(pa.array(keep)), qidx_all.filter(pa.array(keep))
    qidx = qidx_all.to_numpy(zero_copy_only=False).astype(np.int32)
    return rows, qidx, doc_codes(index, qidx, doc)


def _rel_levels(q_qidx: np.ndarray, labels: np.ndarray, nq: int) -> tuple[np.ndarray, np.ndarray]:
    """Documents per (query, judged label), one column per distinct label >= 0 (never one per value up to the
    largest: a label of 10^6 costs one column), and those labels."""
    judged = labels >= 0
    levels, col = np.unique(labels[judged].astype(np.int64), return_inverse=True)
    out = np.zeros((nq, len(levels)), dtype=np.int64)
    np.add.at(out, (q_qidx[judged], col.reshape(-1)), 1)
    return out, levels


def doc_codes(index: QrelsIndex, qidx: np.ndarray, doc_id) -> np.ndarray:
    """Relevance code of each run row (``qidx``, ``doc_id``): its label, UNJUDGED or NONPOOL."""
    qkeys, qcodes, n_docs = index.qkeys, index.qcodes, index.n_docs
    r_d = pc.index_in(doc_id, value_set=index.docs)
    code = np.full(len(qidx), NONPOOL, dtype=np.int32)
    if not len(qkeys) or r_d.null_count == len(r_d):
        return code
    hit = pc.is_valid(r_d).to_numpy(zero_copy_only=False)
    rkeys = qidx[hit].astype(np.int64) * n_docs + r_d.drop_null().to_numpy(zero_copy_only=False)
    pos = np.clip(np.searchsorted(qkeys, rkeys), 0, len(qkeys) - 1)
    found = qkeys[pos] == rkeys
    sub = np.full(len(rkeys), NONPOOL, dtype=np.int32)
    sub[found] = qcodes[pos[found]]
    code[hit] = sub
    return code


# ------------------------------------------------------ sums in trec_eval's order
def segment_cumsum(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` within each run of equal ``groups`` (rows grouped), one addition at a time.

    A global cumulative sum minus each group's offset is off in the last bits;
    this adds position by position across all groups at once, so it costs one
    numpy step per position of the longest group.
    """
    return _segment_running(values, groups, np.add)


def segment_cumprod(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running product of ``values`` within each run of equal ``groups`` (rows grouped), one multiplication at
    a time, as a loop over a ranking multiplies (``segment_cumsum``'s order)."""
    return _segment_running(values, groups, np.multiply)


def _segment_running(values: np.ndarray, groups: np.ndarray, step: np.ufunc) -> np.ndarray:
    """``step`` applied position by position within each group: out[i] = step(out[i - 1], values[i])."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    out = np.empty(n, dtype=np.float64)
    if not n:
        return out
    starts = np.flatnonzero(group_starts(groups))
    lengths = np.diff(np.append(starts, n))
    by_len = np.argsort(-lengths, kind="stable")
    starts, lengths = starts[by_len], lengths[by_len]
    out[starts] = values[starts]
    for t in range(1, int(lengths[0])):
        live = starts[: np.searchsorted(-lengths, -t, side="left")]  # groups longer than t
        out[live + t] = step(out[live + t - 1], values[live + t])
    return out


def before_in_group(running: np.ndarray, groups: np.ndarray, first: float) -> np.ndarray:
    """The running value before each row (``first`` at a group's first row) from the running value at each."""
    out = np.empty(len(running), dtype=np.float64)
    if not len(running):
        return out
    out[1:] = running[:-1]
    out[group_starts(groups)] = first
    return out


def powers(base: float, n: int) -> np.ndarray:
    """1, base, base*base, ...: ``n`` values, each the previous times ``base`` (a loop's ``w *= base``)."""
    return np.concatenate(([1.0], np.cumprod(np.full(max(n - 1, 0), base)))) if n else np.zeros(0)


def c_power_table(base: float, n: int) -> np.ndarray:
    """``t[d] = base ** d`` for 0 <= d < n, each from the C library's ``pow`` (numpy's ``power`` is not the C
    library's on every CPU: its AVX-512 kernels differ from it in the last bit, so a figure summed from them would
    move with the machine)."""
    return np.fromiter((base**d for d in range(n)), dtype=np.float64, count=max(n, 0))


def exp2_int(x: np.ndarray) -> np.ndarray:
    """2 ** x of whole numbers, exactly (``ldexp``: no rounding on any CPU)."""
    return np.ldexp(1.0, np.asarray(x).astype(np.int64))


def log2_table(n: int) -> np.ndarray:
    """``t[i] = log2(i)`` for 0 < i <= n from the C library (t[0] is unused); read-only."""
    return _log2_table_of(max(1024, 1 << n.bit_length()))  # a power of two > n: few sizes, each made once


@functools.cache
def _log2_table_of(size: int) -> np.ndarray:
    table = np.array([-math.inf] + [math.log2(i) for i in range(1, size)])
    table.flags.writeable = False
    return table


def _c(fn):
    def safe(v: float) -> float:
        if v > 0:
            return fn(v)
        return -math.inf if v == 0 else math.nan  # what C's log gives where Python's raises

    return safe


_log2, _log = _c(math.log2), _c(math.log)


def c_log2(x) -> np.ndarray:
    """The C library's log2 of each element (numpy's own may differ in the last bit)."""
    x = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(_log2, x.tolist()), dtype=np.float64, count=len(x))


def c_log(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(_log, x.tolist()), dtype=np.float64, count=len(x))


def divide(a, b) -> np.ndarray:
    """IEEE division as C does it (x/0 = inf, 0/0 = nan), without numpy's warnings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
