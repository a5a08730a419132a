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

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import DOC_ID, QUERY_ID, Run

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
    weights = p**depths
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
    run: Run, query_ids: Sequence[str], score_precision: str = DEFAULT_SCORE_PRECISION, depth: int | None = None
) -> dict[str, list[str]]:
    """Each query's documents in trec_eval order (the top ``depth`` when given); [] for a query the run lacks."""
    ordered = order_run(run.frame, score_precision)
    if depth is not None:
        ordered = ordered[ordered["rank"] <= depth]
    grouped = {q: g.tolist() for q, g in ordered.groupby(QUERY_ID, sort=False)[DOC_ID]}
    return {q: grouped.get(q, []) for q in query_ids}


def agreement(
    a: dict[str, list[str]], b: dict[str, list[str]], query_ids: Sequence[str], p: float = RBO_P, k: int = TAU_DEPTH
) -> pd.DataFrame:
    """Per query: ``rbo`` (p) and ``kendall_tau_<k>`` between the lists of ``a`` and ``b``."""
    rows = [(q, rbo(a.get(q, []), b.get(q, []), p), kendall_tau_top(a.get(q, []), b.get(q, []), k)) for q in query_ids]
    return pd.DataFrame(rows, columns=[QUERY_ID, "rbo", f"kendall_tau_{k}"])
