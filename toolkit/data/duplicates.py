"""Repeated (query, document) pairs of a run or qrels: the rows that repeat an earlier pair, in file order.

The one finder with which the file readers (``trec_io``) and the in-memory adapters (``adapters``) refuse or drop
duplicates.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import row_hashes, take


def duplicate_rows(query: pa.ChunkedArray, doc: pa.ChunkedArray) -> np.ndarray:
    """Row numbers that repeat an earlier (query, doc) pair, in file order.

    Hash, then verify: rows whose 64-bit pair hash occurs more than once are the
    only candidates (usually none), and among those the exact strings decide.
    """
    ordered = row_hashes(query, doc)
    ordered.sort()  # in place: one array of hashes in memory, not two
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(repeated):
        return np.zeros(0, dtype=np.int64)
    repeated = np.unique(repeated)
    h = row_hashes(query, doc)  # again, in file order (only when some hash repeats)
    at = np.clip(np.searchsorted(repeated, h), 0, len(repeated) - 1)
    candidates = np.flatnonzero(repeated[at] == h)
    return candidates[_exact_duplicates(take(query, candidates), take(doc, candidates))]


def _exact_duplicates(query, doc) -> np.ndarray:
    """Positions that repeat an earlier (query, doc) pair: a stable sort, then adjacent rows compared."""
    n = len(query)
    if n < 2:
        return np.zeros(0, dtype=np.int64)
    order = pc.sort_indices(pa.table({"q": query, "d": doc}), sort_keys=[("q", "ascending"), ("d", "ascending")])
    q_sorted, d_sorted = query.take(order), doc.take(order)
    same = pc.and_(pc.equal(q_sorted[1:], q_sorted[:-1]), pc.equal(d_sorted[1:], d_sorted[:-1]))
    order = order.to_numpy()
    return np.sort(order[1:][same.to_numpy(zero_copy_only=False)])
