"""How far to trust each comparison of a diagnosis: its bootstrap interval at the level asked, its effect size, the
hole bounds of its two systems and a one-line verdict (``twostage diagnose --ci``, ``ts.diagnose(..., ci=)``).

``annotate`` takes a finished ``diagnose.Diagnosis`` and the runs it read, and returns it with every comparison
(reranked vs first stage, between reranked runs, between first stages) carrying

- ``ci_low``, ``ci_high``: the paired bootstrap interval of the mean per-query difference (system_b - system_a,
  the ``delta`` column of ``pairs``) at ``level`` with ``resamples`` and ``method``, drawn from a fresh
  ``numpy.random.default_rng(seed)`` per comparison (what ``twostage compare`` draws for the same pair);
  ``d_z`` as before (mean / sd of the differences, ddof 1);
- ``direction``, ``baseline_bounds``, ``bounds``, ``bounds_overlap`` and ``verdict`` (``stats.trust``).

The bounds, given by the caller, are those of the diagnosis's measure when it is ``ndcg_cut.k``, ``P.k`` or
``recall.k`` (``quality.holes.system_bounds`` under the settings the measure was evaluated with,
``evaluated_with``: the binary relevance level, ``-c``), as means over the diagnosis's queries (a query the run
lacks has no holes: both ends 0). A system with repeats gets the mean over its runs of each run's bounds (still
bounds of the mean of the repeats: the lowest mean is at least the mean of the lowest). ``settings["uncertainty"]`` records how all of it was computed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from toolkit.data.records import QUERY_ID
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.stats.intervals import DEFAULT_RESAMPLES, bootstrap_ci, prime_bootstrap
from toolkit.stats.trust import trust_fields


def evaluated_with(diag, settings):
    """The settings ``diag``'s measure was evaluated with: ``settings`` (the diagnosis's base ``EvalSettings``) with
    its recall level and ``-c`` (``diag.settings``); the hole bounds are computed under these."""
    return dataclasses.replace(
        settings, relevance_level=int(diag.settings["recall_level"]), complete=bool(diag.settings["complete"])
    )


def compared_queries(diag) -> list[str]:
    """The diagnosis's queries, in the order of its ``pairs`` table: the ones the bounds are means over."""
    return list(dict.fromkeys(diag.pairs[QUERY_ID].tolist()))


def annotate(
    diag,
    bounds: Mapping[str, tuple[float, float]],
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    method: str = "percentile",
    seed: int = 42,
    alpha: float = 0.05,
    work: Workspace = NO_WORKSPACE,
):
    """``diag`` (a ``diagnose.Diagnosis``) with the fields of the module docstring in every comparison.

    ``bounds``: ``{system name: (lowest mean, highest mean)}`` of the diagnosis's measure over its queries
    (``toolkit.quality.holes.system_bounds`` under ``evaluated_with(diag, settings)`` over ``compared_queries(diag)``);
    empty when the measure has none."""
    pairs = diag.pairs
    deltas = []
    for c in diag.comparisons:
        rows = pairs[(pairs["family"] == c["family"]) & (pairs["system_a"] == c["baseline"])]
        deltas.append(rows[rows["system_b"] == c["run"]]["delta"].to_numpy(dtype=np.float64))
    prime_bootstrap(deltas, resamples, seed, work=work)  # every comparison's draws in one pass (the same intervals)
    comparisons = []
    for c, d in zip(diag.comparisons, deltas):
        c = dict(c)
        if len(d):
            iv = bootstrap_ci(d, level, resamples, method, seed, work=work)
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
            "the top k, the ideal ranking from the judged documents plus those (toolkit.quality.holes); "
            "'bounds over the top-k holes overlap': some labelling of them could erase or reverse the difference",
        }
        if bounds
        else None,
        "verdict": f"the adjusted p-value below {alpha:g} says better / worse; see toolkit.stats.verdict",
    }
    settings_record = {**diag.settings, "uncertainty": record}
    return dataclasses.replace(diag, comparisons=comparisons, settings=settings_record)


__all__ = ["annotate", "compared_queries", "evaluated_with"]
