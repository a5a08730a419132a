"""trec_eval's ordering, the one ordering used everywhere in the toolkit.

Within a query, documents are ranked by score descending; equal scores are
broken by document id in *descending* byte order (``strcmp(b, a)`` in
trec_eval's ``comp_sim_docno``). The rank column of a run file is ignored.

Score precision: trec_eval 9.x (and the binary bundled in Pyserini's jar)
stores scores as 32-bit floats, trec_eval 10.0 as doubles. Scores that differ
only beyond float32 precision tie under ``float32`` and are then ordered by
document id; under ``float64`` they keep their order.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import arrow_of, block_starts, take
from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace

ScorePrecision = Literal["float32", "float64"]
SCORE_PRECISIONS: tuple[str, ...] = ("float32", "float64")
#: What Pyserini's bundled trec_eval (9.0.x, float scores) does.
DEFAULT_SCORE_PRECISION: ScorePrecision = "float32"
_CHUNK = 1 << 20


def _descending_bits(scores: np.ndarray) -> np.ndarray:
    """uint32 codes whose ascending order is the scores' descending order as float32 (equal floats, equal codes)."""
    with np.errstate(over="ignore"):  # beyond float32's range is inf, as in trec_eval 9.x
        scores32 = scores.astype(np.float32)
    bits = (scores32 + np.float32(0.0)).view(np.uint32)  # + 0.0 turns -0.0 into 0.0: trec_eval sees them equal
    ascending = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    return ~ascending


def _query_codes(query_key) -> np.ndarray:
    """Integer codes that sort like the query ids (integer keys are taken as such)."""
    if isinstance(query_key, np.ndarray) and query_key.dtype.kind in "iu":
        return query_key
    keys = query_key if isinstance(query_key, (pa.Array, pa.ChunkedArray)) else pa.array(query_key, type=pa.string())
    uniques = pc.unique(keys)
    uniques = uniques.take(pc.sort_indices(uniques))
    return pc.index_in(keys, value_set=uniques).to_numpy(zero_copy_only=False)


def trec_order(
    query_key, scores: np.ndarray, doc_ids, score_precision: ScorePrecision, ties: str = "docid_desc"
) -> np.ndarray:
    """Positions in (query key asc, score desc, doc id desc) order: trec_eval's ``comp_sim_docno``.

    ``ties="docid_asc"`` breaks score ties by document id ascending instead:
    the order trec_eval's preference measures use (``form_prefs_counts.c``
    has its own ``comp_sim_docno`` with the comparison the other way round),
    and ir_measures' msmarco, judged, compat and pyndeval providers.
    ``ties="input"`` keeps tied rows in their given order: a stable sort by
    score, as ir_measures' cwl_eval and accuracy providers sort a run.

    ``query_key`` may be the query ids themselves or integer codes that sort like
    them (the evaluator passes indices into the sorted qrels query ids).

    One numeric sort does nearly all the work: (query code, float32 score) packed
    into a uint64, sorted stably (runs are usually already score-ordered per
    query, which timsort exploits). Only rows whose packed key ties (equal
    float32 scores) are then re-sorted by float64 score (in ``float64`` mode)
    and document id, with the strings touched for those rows alone.
    """
    if score_precision not in SCORE_PRECISIONS:
        raise ValueError(f"score precision must be one of {SCORE_PRECISIONS}, not {score_precision!r}")
    if ties not in ("docid_desc", "docid_asc", "input"):
        raise ValueError(f"ties must be docid_desc, docid_asc or input, not {ties!r}")
    scores = np.asarray(scores)
    codes = _query_codes(query_key)
    if len(codes) and (codes.min() < 0 or codes.max() >= 2**32):
        raise ValueError("query codes must lie in [0, 2^32)")
    n = len(codes)
    key = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, _CHUNK):  # chunk by chunk: no full-length temporaries
        hi = min(lo + _CHUNK, n)
        key[lo:hi] = codes[lo:hi]
        key[lo:hi] <<= np.uint64(32)
        key[lo:hi] |= _descending_bits(scores[lo:hi])
    order = np.argsort(key, kind="stable")
    same = np.empty(max(n - 1, 0), dtype=bool)
    for lo in range(0, n - 1, _CHUNK):
        hi = min(lo + _CHUNK, n - 1)
        sorted_key = key[order[lo : hi + 1]]
        np.equal(sorted_key[1:], sorted_key[:-1], out=same[lo:hi])
    if not same.any():
        return order
    tied = np.zeros(n, dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    pos = np.flatnonzero(tied)  # tie groups are contiguous runs of these positions
    rows = order[pos]
    table = {"k": key[rows]}
    sort_keys = [("k", "ascending")]
    if score_precision == "float64":
        table["s"] = scores[rows].astype(np.float64) + 0.0
        sort_keys.append(("s", "descending"))
    if ties == "input":
        table["r"] = rows
        sort_keys.append(("r", "ascending"))
    else:
        docs = doc_ids if isinstance(doc_ids, (pa.Array, pa.ChunkedArray)) else pa.array(doc_ids, type=pa.string())
        table["d"] = take(docs, rows)
        sort_keys.append(("d", "descending" if ties == "docid_desc" else "ascending"))
    order[pos] = rows[pc.sort_indices(pa.table(table), sort_keys=sort_keys).to_numpy()]
    return order


def _ranks_in_order(frame: pd.DataFrame) -> np.ndarray:
    """1-based rank of each row within its query, of a frame in trec_eval order (each query's rows together)."""
    queries = arrow_of(frame[QUERY_ID])
    n = len(queries)
    if n == 0:
        return np.zeros(0, dtype=np.int64)  # as within_group_rank gives it
    first = block_starts(queries)
    dtype = np.int32 if n < 2**31 else np.int64
    return np.arange(n, dtype=dtype) - np.repeat(first.astype(dtype), np.diff(np.append(first, n))) + 1


def ranked_positions(
    frame: pd.DataFrame, score_precision: ScorePrecision, *, work: Workspace = NO_WORKSPACE
) -> tuple[np.ndarray, np.ndarray]:
    """(row positions of ``frame`` in trec_eval order, 1-based rank of each within its query); once per frame
    in ``work``."""
    return work.once("ranked_positions", (frame,), (score_precision,), lambda: _positions(frame, score_precision, work))


def _positions(
    frame: pd.DataFrame, score_precision: ScorePrecision, work: Workspace = NO_WORKSPACE
) -> tuple[np.ndarray, np.ndarray]:
    if work.is_ordered(frame, score_precision):
        return np.arange(len(frame), dtype=np.int64), _ranks_in_order(frame)
    codes = _query_codes(arrow_of(frame[QUERY_ID]))
    order = trec_order(codes, frame[SCORE].to_numpy(), arrow_of(frame[DOC_ID]), score_precision)
    return order, within_group_rank(codes[order])


def _is_identity(order: np.ndarray) -> bool:
    """``order`` is 0, 1, ..., n - 1 (checked chunk by chunk: no full-length temporaries)."""
    for lo in range(0, len(order), _CHUNK):
        part = order[lo : lo + _CHUNK]
        if part[0] != lo or not bool((np.diff(part) == 1).all()):
            return False
    return True


def order_run(
    frame: pd.DataFrame, score_precision: ScorePrecision = DEFAULT_SCORE_PRECISION, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """A copy of ``frame`` in trec_eval order with a 1-based ``rank`` column per query (once per frame in
    ``work``, where the result is marked as ordered).

    A frame already in that order (``in_trec_order`` in ``work``) is not copied: the result shares its columns.
    The row positions are not kept beside the result (``ranked_positions`` keeps them for the callers that ask)."""

    def compute() -> pd.DataFrame:
        if work.is_ordered(frame, score_precision):  # no sort: the ranks follow from the query ids
            order, rank = None, _ranks_in_order(frame)
        else:
            order, rank = _positions(frame, score_precision, work)
        if order is None or _is_identity(order):
            del order
            ordered = frame.copy(deep=False)
            if not isinstance(ordered.index, pd.RangeIndex) or ordered.index.start != 0 or ordered.index.step != 1:
                ordered = ordered.reset_index(drop=True)
        else:
            ordered = frame.take(order).reset_index(drop=True)
            del order
        ordered["rank"] = rank
        return ordered

    ordered = work.once("order_run", (frame,), (score_precision,), compute)
    work.mark_ordered(ordered, score_precision)
    return ordered


def in_trec_order(
    run: Run, score_precision: ScorePrecision = DEFAULT_SCORE_PRECISION, *, work: Workspace = NO_WORKSPACE
) -> Run:
    """``run`` with its lines in trec_eval order at ``score_precision`` (``run`` itself when they already are).

    Every figure of trec_eval's ordering is the same for either (it orders the lines itself and ignores the
    file's order); a caller that holds the run for many sorts (a diagnosis) keeps this one copy instead of
    the file's order beside a sorted copy, and the sorts of it find it in order: the frame is marked as
    ordered in ``work`` (``Workspace.is_ordered``), so ``order_run`` and the evaluator rank it there without
    sorting it again."""
    if work.is_ordered(run.frame, score_precision):
        return run
    order, _ = _positions(run.frame, score_precision, work)
    if _is_identity(order):
        work.mark_ordered(run.frame, score_precision)
        return run
    frame = run.frame.take(order).reset_index(drop=True)
    del order
    work.mark_ordered(frame, score_precision)
    return dataclasses.replace(run, frame=frame)


def group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Boolean mask: True where a new group begins in an array sorted by group."""
    starts = np.ones(len(sorted_keys), dtype=bool)
    if len(sorted_keys) > 1:
        starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return starts


def within_group_rank(sorted_keys: np.ndarray) -> np.ndarray:
    """1-based position of each row inside its group (rows already grouped)."""
    n = len(sorted_keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(group_starts(sorted_keys))
    lengths = np.diff(np.append(starts, n))
    dtype = np.int32 if n < 2**31 else np.int64
    return np.arange(n, dtype=dtype) - np.repeat(starts.astype(dtype), lengths) + 1


def top_k(
    frame: pd.DataFrame,
    k: int,
    score_precision: ScorePrecision = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.DataFrame:
    """The first ``k`` documents of every query in trec_eval order."""
    ordered = order_run(frame, score_precision, work=work)
    keep = ordered["rank"].to_numpy() <= k
    if keep.all():  # every list is at most k long: the ordered frame itself, not a filtered copy of it
        return ordered
    return ordered[keep].reset_index(drop=True)


#: Fusion ranks its inputs and cuts its output in the order the evaluator and the diagnosis use
#: (trec_eval 9.x: float32 scores), so a float32 tie at a depth cut is broken the same way everywhere.
CANDIDATE_PRECISION = DEFAULT_SCORE_PRECISION


def candidate_selection() -> dict:
    """How top-N candidates are chosen by fusion and reranking (recorded in their sidecars)."""
    return {"order": "trec_eval: score desc, doc id desc", "score_precision": CANDIDATE_PRECISION}
