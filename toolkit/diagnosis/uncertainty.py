"""How far to trust each comparison of a diagnosis: its bootstrap interval at the level asked, its effect size, the
hole bounds of its two systems and a one-line verdict (``twostage diagnose --ci``, ``ts.diagnose(..., ci=)``).

``annotate`` takes a finished ``diagnose.Diagnosis`` and the runs it read, and returns it with every comparison
(reranked vs first stage, between reranked runs, between first stages) carrying

- ``ci_low``, ``ci_high``: the paired bootstrap interval of the mean per-query difference (system_b - system_a,
  the ``delta`` column of ``pairs``) at ``level`` with ``resamples`` and ``method``, drawn from a fresh
  ``numpy.random.default_rng(seed)`` per comparison (what ``twostage compare`` draws for the same pair);
  ``d_z`` as before (mean / sd of the differences, ddof 1);
- ``direction``, ``baseline_bounds``, ``bounds``, ``bounds_overlap`` and ``verdict`` (``evaluation.trust``).

The bounds are those of the diagnosis's measure when it is ``ndcg_cut.k``, ``P.k`` or ``recall.k``
(``evaluation.holes.hole_bounds`` under the settings the measure was evaluated with: the binary relevance level,
``-c``), as means over the diagnosis's queries (a query the run lacks has no holes: both ends 0). A system with
repeats gets the mean over its runs of each run's bounds (still bounds of the mean of the repeats: the lowest
mean is at least the mean of the lowest). ``settings["uncertainty"]`` records how all of it was computed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from toolkit.data.records import QUERY_ID
from toolkit.evaluation.intervals import DEFAULT_RESAMPLES, bootstrap_ci, prime_bootstrap
from toolkit.evaluation.trust import trust_fields


def system_bounds(
    qrels, runs: Mapping[str, Sequence], measure: str, settings, queries: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """``{system: (lowest mean, highest mean)}`` of ``measure`` over ``queries``; empty when the measure has no
    hole bounds (not ndcg_cut.k / P.k / recall.k) or the settings exclude them (-J, another discount)."""
    from toolkit.errors import ConfigError
    from toolkit.evaluation.holes import SUPPORTED, hole_bounds
    from toolkit.measures.names import parse_measure_groups

    ms = [m for g in parse_measure_groups([measure], settings.trec_eval) for m in g.measures]
    chosen = [m for m in ms if m.family in SUPPORTED and m.cutoff]
    if len(chosen) != 1:
        return {}
    m = chosen[0]
    out: dict[str, tuple[float, float]] = {}
    for name, given in runs.items():
        lows, highs = [], []
        for run in given:
            try:
                table = hole_bounds(qrels, run, [m], settings, condensed=False)[m.name].per_query
            except ConfigError:  # -J (no holes) or a discount the bounds do not cover
                return {}
            t = table.reindex(list(queries)).fillna({"min": 0.0, "max": 0.0})
            lows.append(float(t["min"].sum() / len(t)) if len(t) else 0.0)
            highs.append(float(t["max"].sum() / len(t)) if len(t) else 0.0)
        out[name] = (float(np.mean(lows)), float(np.mean(highs)))
    return out


def annotate(
    diag,
    qrels,
    runs: Mapping[str, Sequence],
    settings,
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    method: str = "percentile",
    seed: int = 42,
    alpha: float = 0.05,
):
    """``diag`` (a ``diagnose.Diagnosis``) with the fields of the module docstring in every comparison.

    ``runs``: ``{system name: [run, repeat, ...]}`` for every first stage and reranked system; ``settings``: the
    diagnosis's base ``EvalSettings``, to which its recall level and query set (``diag.settings``) are applied, as
    its measure was evaluated."""
    settings = dataclasses.replace(
        settings, relevance_level=int(diag.settings["recall_level"]), complete=bool(diag.settings["complete"])
    )
    pairs = diag.pairs
    queries = list(dict.fromkeys(pairs[QUERY_ID].tolist()))
    bounds = system_bounds(qrels, runs, diag.measure, settings, queries)
    deltas = []
    for c in diag.comparisons:
        rows = pairs[(pairs["family"] == c["family"]) & (pairs["system_a"] == c["baseline"])]
        deltas.append(rows[rows["system_b"] == c["run"]]["delta"].to_numpy(dtype=np.float64))
    prime_bootstrap(deltas, resamples, seed)  # every comparison's draws in one pass (the same intervals)
    comparisons = []
    for c, d in zip(diag.comparisons, deltas):
        c = dict(c)
        if len(d):
            iv = bootstrap_ci(d, level, resamples, method, seed)
            c["ci_low"], c["ci_high"] = iv.low, iv.high
        c.update(trust_fields(c, bounds.get(c["baseline"]), bounds.get(c["run"]), alpha))
        comparisons.append(c)
    record = {
        "ci": {
            "level": level,
            "method": method,
            "resamples": resamples,
            "seed": seed,
            "what": "paired bootstrap interval of the mean per-query difference (queries resampled with "
            "replacement, numpy.random.default_rng(seed) per comparison, as scipy.stats.bootstrap draws)",
        },
        "effect_size": "d_z = mean of the per-query differences / their sample sd (ddof 1)",
        "holes": {
            "measure": diag.measure,
            "bounds": {k: list(v) for k, v in bounds.items()},
            "what": "per system, the lowest and highest mean over every labelling of its unjudged documents in "
            "the top k, the ideal ranking from the judged documents plus those (toolkit.evaluation.holes); "
            "'bounds over the top-k holes overlap': some labelling of them could erase or reverse the difference",
        }
        if bounds
        else None,
        "verdict": f"the adjusted p-value below {alpha:g} says better / worse; see toolkit.evaluation.verdict",
    }
    settings_record = {**diag.settings, "uncertainty": record}
    return dataclasses.replace(diag, comparisons=comparisons, settings=settings_record)


__all__ = ["annotate", "system_bounds"]
