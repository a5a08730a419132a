"""Repeated runs of one reranker configuration: one system, several runs.

LLM rerankers are not deterministic: rank_llm published seven runs of one RankVicuna configuration on DL19
whose nDCG@10 spans 0.6665-0.6840. The diagnosis treats the runs given under one name as repeats of one system:

- its per-query value of every measure is the mean over the repeats (so every system mean is the mean over
  repeats of the repeat means, the queries being the same); the decomposition, the labels and the comparisons
  between systems read those per-query means;
- its spread: each repeat's mean (``means``), their ``mean``, ``min``, ``max`` and sample standard deviation
  (``sd``, n - 1 in the denominator; 0 for one run), and ``per_query_sd``: the mean over queries of each
  query's sample standard deviation over the repeats;
- for a comparison of A and B, the share of repeat pairs (one repeat of A against one of B, every such pair)
  in which A's mean is higher than B's (``repeat_pairs_won``); a difference smaller than the larger repeat
  spread (max - min) of the two is said to be within it.

Repeats must hold the same queries and have the same rerank depth; anything else is an error naming the runs.
Byte-identical repeat files (rank_llm's seven RankVicuna runs hold four identical ones) are named
(``identical``: which files are identical to which) and warned about: they count as repeats, so the spread
understates the nondeterminism.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.data.records import QUERY_ID
from toolkit.errors import ConfigError

if TYPE_CHECKING:
    from toolkit.diagnosis.depths import DepthDetection


def check_repeats(r: Any, detections: Sequence[DepthDetection]) -> None:
    """Every repeat of ``r`` holds the run's queries and, when depths are detected, the run's depth."""
    if not r.repeats:
        return
    base = set(r.run.frame[QUERY_ID].unique().tolist())
    for i, (run, det) in enumerate(zip(r.runs[1:], detections[1:]), start=2):
        queries = set(run.frame[QUERY_ID].unique().tolist())
        if queries != base:
            only = sorted(queries ^ base)[:5]
            raise ConfigError(
                f"repeats of {r.name} hold different queries: {run.path} (repeat {i}) has {len(queries)}, "
                f"{r.run.path} (repeat 1) {len(base)}; e.g. {', '.join(only)} in only one. Repeats of one "
                "system must hold the same queries"
            )
        d0 = detections[0].depth
        if d0 is not None and det.depth is not None and det.depth != d0:
            raise ConfigError(
                f"repeats of {r.name} have different rerank depths: {r.run.path} (repeat 1) reranks the top "
                f"{d0}, {run.path} (repeat {i}) the top {det.depth}. Repeats of one system share a depth; give "
                "the runs different names"
            )


def identical_repeats(runs: Sequence[Any]) -> list[list[str]]:
    """The repeat files that are byte-identical (the same sha256 of the file as read): one list of paths per
    group of two or more, the first path the one the others are identical to, in the order given. Runs read
    from no file (no checksum) are never called identical."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        if run.sha256:
            groups.setdefault(run.sha256, []).append(run.path)
    return [paths for paths in groups.values() if len(paths) > 1]


def identical_note(name: str, identical: Sequence[Sequence[str]]) -> str:
    """The warning about byte-identical repeats: which files are identical to which."""
    said = "; ".join(f"{', '.join(g[1:])} {'is' if len(g) == 2 else 'are'} identical to {g[0]}" for g in identical)
    n = sum(len(g) - 1 for g in identical)
    return (
        f"repeats of {name}: {n} repeat file(s) are byte-identical copies of another ({said}); each still counts "
        "as a repeat, so the spread over repeats understates the reranker's nondeterminism"
    )


def repeat_stats(values: Sequence[pd.Series]) -> dict:
    """``{"n", "means", "mean", "min", "max", "sd", "per_query_sd"}`` of per-query values of each repeat
    (Series over the same queries)."""
    matrix = np.column_stack([v.to_numpy(dtype=np.float64) for v in values]) if values else np.zeros((0, 0))
    n = matrix.shape[1]
    means = [float(v.mean()) if len(v) else 0.0 for v in values]
    sd = float(np.std(means, ddof=1)) if n > 1 else 0.0
    per_query = float(np.std(matrix, axis=1, ddof=1).mean()) if n > 1 and len(matrix) else 0.0
    return {
        "n": n,
        "means": means,
        "mean": float(np.mean(means)) if means else 0.0,
        "min": min(means) if means else 0.0,
        "max": max(means) if means else 0.0,
        "sd": sd,
        "per_query_sd": per_query,
    }


def mean_frame(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The per-query mean over repeats of per-query tables with the same index and columns."""
    if len(frames) == 1:
        return frames[0]
    stacked = np.stack([f.to_numpy(dtype=np.float64) for f in frames])
    return pd.DataFrame(stacked.mean(axis=0), index=frames[0].index, columns=frames[0].columns)


def repeat_pairs_won(a_means: Sequence[float], b_means: Sequence[float]) -> float:
    """The share of (repeat of A, repeat of B) pairs in which A's mean is higher than B's."""
    pairs = [(x, y) for x in a_means for y in b_means]
    return sum(x > y for x, y in pairs) / len(pairs) if pairs else 0.0


def spread(stats: dict | None) -> float:
    return float(stats["max"] - stats["min"]) if stats else 0.0


def comparison_reading(row: dict, repeats: dict[str, dict]) -> dict:
    """What a comparison row gains when either side has repeats: the share of repeat pairs in which the
    run beats the baseline, and whether the difference is within the repeat spread, in words."""
    a, b = repeats.get(row["baseline"]), repeats.get(row["run"])
    if not (a and a["n"] > 1) and not (b and b["n"] > 1):
        return {}
    a_means = a["means"] if a else [row["baseline_mean"]]
    b_means = b["means"] if b else [row["mean"]]
    widest = max(spread(a), spread(b))
    who = row["baseline"] if spread(a) >= spread(b) else row["run"]
    out = {
        "repeat_pairs": len(a_means) * len(b_means),
        "repeat_pairs_won": repeat_pairs_won(b_means, a_means),
        "within_repeat_spread": bool(abs(row["delta"]) < widest),
    }
    if out["within_repeat_spread"]:
        out["reading"] = (
            f"the difference {row['delta']:+.4f} of {row['run']} over {row['baseline']} is smaller than the "
            f"spread of {who}'s repeats ({widest:.4f}): repeating the runs could reverse it ({row['run']} is "
            f"ahead in {out['repeat_pairs_won']:.0%} of {out['repeat_pairs']} repeat pairs)"
        )
    else:
        out["reading"] = (
            f"the difference {row['delta']:+.4f} of {row['run']} over {row['baseline']} exceeds the repeat "
            f"spread ({widest:.4f}); {row['run']} is ahead in {out['repeat_pairs_won']:.0%} of "
            f"{out['repeat_pairs']} repeat pairs"
        )
    return out


def mean_decomposition(decs: Sequence):
    """One ``Decomposition`` of a system from its repeats' (same first stage, depth and queries): the
    reranked value per query and on the depth curve is the mean over repeats; the ceiling, ideal and first
    stage are the repeats' own (they do not depend on the reranked run); ``uncovered`` and ``introduced``
    are the largest of any repeat."""
    import dataclasses

    if len(decs) == 1:
        return decs[0]
    first = decs[0]
    pq = first.per_query.copy()
    pq["reranked"] = np.mean([d.per_query["reranked"].to_numpy() for d in decs], axis=0)
    pq["lost_in_reranking"] = (pq["ceiling"] - pq["reranked"]).where(pq["lost_in_reranking"].notna())
    curve = first.curve.copy()
    curve["reranked"] = np.mean([d.curve["reranked"].to_numpy() for d in decs], axis=0)
    return dataclasses.replace(
        first,
        per_query=pq,
        curve=curve,
        uncovered=max(d.uncovered for d in decs),
        introduced=max(d.introduced for d in decs),
    )


def merge_checks(checks: Sequence[dict]) -> dict:
    """One reorder check of a system from its repeats': counts summed, every repeat's check kept."""
    if len(checks) == 1:
        return checks[0]
    out = dict(checks[0])
    for key in ("introduced_documents", "outside_first_stage", "tail_documents", "candidates_kept", "candidates_total"):
        out[key] = sum(c[key] for c in checks)
    per_query: dict[str, int] = {}
    for c in checks:
        for q, v in c["introduced_per_query"].items():
            per_query[q] = per_query.get(q, 0) + v
    out["introduced_per_query"] = per_query
    out["queries_with_introduced_documents"] = len(per_query)
    out["only_reorders"] = all(c["only_reorders"] for c in checks)
    out["examples"] = [e for c in checks for e in c["examples"]][: len(checks[0]["examples"]) or 10]
    out["repeats"] = len(checks)
    return out
