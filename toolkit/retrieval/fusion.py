"""Run fusion: reciprocal rank fusion and score interpolation, in trec_eval's order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.data.ranking import CANDIDATE_PRECISION, top_k
from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, Run
from toolkit.errors import ConfigError
from toolkit.retrieval.search import DEFAULT_HITS, validate_hits


# ---------------------------------------------------------------- fusion
def rrf(runs: list[Run], k: float = 60.0, depth: int = DEFAULT_HITS, hits: int = DEFAULT_HITS) -> Run:
    """Reciprocal rank fusion (Cormack et al., SIGIR 2009): score(d) = sum over runs of
    1 / (k + rank(d)), ranks from each run's trec_eval order cut at ``depth``; the same
    definition as Pyserini's ``reciprocal_rank_fusion`` (k=60, depth 1000)."""
    if len(runs) < 2:
        raise ConfigError("fusion needs at least two runs")
    if not k > 0:
        raise ConfigError(f"RRF k must be > 0, not {k}")
    parts = []
    for r in runs:
        ranked = top_k(r.frame, depth, score_precision=CANDIDATE_PRECISION)
        parts.append(
            pd.DataFrame(
                {
                    QUERY_ID: ranked[QUERY_ID],
                    DOC_ID: ranked[DOC_ID],
                    SCORE: 1.0 / (k + ranked["rank"].to_numpy(dtype=np.float64)),
                }
            )
        )
    return _sum_and_cut(parts, hits, "rrf")


def interpolate(
    runs: list[Run], alpha: float = 0.5, depth: int = DEFAULT_HITS, hits: int = DEFAULT_HITS, normalize: str = "none"
) -> Run:
    """Score interpolation of two runs: alpha * s1 + (1 - alpha) * s2; a document missing
    from one run contributes 0 there (Pyserini's ``interpolation``). ``normalize='minmax'``
    rescales each query's scores to [0, 1] first (scores of different models are on
    different scales)."""
    if len(runs) != 2:
        raise ConfigError(f"interpolation takes exactly two runs, got {len(runs)}")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"--alpha must be in [0, 1], not {alpha}")
    if normalize not in ("none", "minmax"):
        raise ConfigError(f"--normalize must be none or minmax, not {normalize!r}")
    parts = []
    for weight, r in zip((alpha, 1.0 - alpha), runs):
        ranked = top_k(r.frame, depth, score_precision=CANDIDATE_PRECISION)
        s = ranked[SCORE].to_numpy(dtype=np.float64)
        if normalize == "minmax":
            g = ranked.groupby(QUERY_ID, sort=False)[SCORE]
            lo, hi = g.transform("min").to_numpy(), g.transform("max").to_numpy()
            span = np.where(hi > lo, hi - lo, 1.0)
            s = (s - lo) / span
        parts.append(pd.DataFrame({QUERY_ID: ranked[QUERY_ID], DOC_ID: ranked[DOC_ID], SCORE: weight * s}))
    return _sum_and_cut(parts, hits, "interpolation")


def _sum_and_cut(parts: list[pd.DataFrame], hits: int, tag: str) -> Run:
    validate_hits(hits)
    merged = pd.concat(parts, ignore_index=True).groupby([QUERY_ID, DOC_ID], sort=False, as_index=False)[SCORE].sum()
    top = top_k(merged, hits, score_precision=CANDIDATE_PRECISION)[[QUERY_ID, DOC_ID, SCORE]]
    return Run(frame=top.reset_index(drop=True), tag=tag)
