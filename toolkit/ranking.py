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

from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .records import DOC_ID, QUERY_ID, SCORE

ScorePrecision = Literal["float32", "float64"]
SCORE_PRECISIONS: tuple[str, ...] = ("float32", "float64")
#: What Pyserini's bundled trec_eval (9.0.x, float scores) does.
DEFAULT_SCORE_PRECISION: ScorePrecision = "float32"


def sort_key_scores(scores: np.ndarray, score_precision: ScorePrecision) -> np.ndarray:
    """Scores as trec_eval compares them (atof, then stored as float or double)."""
    if score_precision == "float32":
        return scores.astype(np.float32)
    if score_precision == "float64":
        return scores.astype(np.float64, copy=False)
    raise ValueError(f"score precision must be one of {SCORE_PRECISIONS}, not {score_precision!r}")


def trec_order(query_key, scores: np.ndarray, doc_ids, score_precision: ScorePrecision) -> np.ndarray:
    """Positions in (query key asc, score desc, doc id desc) order: trec_eval's ``comp_sim_docno``.

    ``query_key`` may be the query ids themselves or any codes that sort like them
    (the evaluator passes indices into the sorted qrels query ids).
    """
    table = pa.table({"q": query_key, "s": sort_key_scores(scores, score_precision), "d": doc_ids})
    return pc.sort_indices(table, sort_keys=[("q", "ascending"), ("s", "descending"), ("d", "descending")]).to_numpy()


def order_indices(frame: pd.DataFrame, score_precision: ScorePrecision) -> np.ndarray:
    """Row positions of ``frame`` in trec_eval order."""
    return trec_order(pa.array(frame[QUERY_ID].array), frame[SCORE].to_numpy(), pa.array(frame[DOC_ID].array),
                      score_precision)


def order_run(frame: pd.DataFrame, score_precision: ScorePrecision = DEFAULT_SCORE_PRECISION) -> pd.DataFrame:
    """A copy of ``frame`` in trec_eval order with a 1-based ``rank`` column per query."""
    ordered = frame.take(order_indices(frame, score_precision)).reset_index(drop=True)
    ordered["rank"] = within_group_rank(ordered[QUERY_ID].to_numpy())
    return ordered


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


def top_k(frame: pd.DataFrame, k: int, score_precision: ScorePrecision = DEFAULT_SCORE_PRECISION) -> pd.DataFrame:
    """The first ``k`` documents of every query in trec_eval order."""
    ordered = order_run(frame, score_precision)
    return ordered[ordered["rank"] <= k].reset_index(drop=True)
