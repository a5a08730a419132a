"""How far to trust a number: ``power`` (how many queries a comparison needs), ``holes`` (the bounds of a score
over every labelling of the unjudged documents) and ``pool_test`` (leave-one-run-out pooling)."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from toolkit.evaluation.power import DEFAULT_ALPHA, DEFAULT_POWER, PowerResult, power_analysis


def _per_query(qrels: Any, run: Any, measure: str, **options: Any) -> pd.Series:
    """One measure's per-query values of a run (query_id -> value), evaluated as ``evaluate`` does."""
    from toolkit.api.evaluation import evaluate

    ev = evaluate(qrels, run, [measure], **options)
    table = ev.per_query
    if table.shape[1] != 1:
        from toolkit.errors import ConfigError

        raise ConfigError(f"give one numeric measure, not {measure!r} (it gives {', '.join(table.columns)})")
    return table.iloc[:, 0].astype("float64")


def paired_differences(qrels: Any, run_a: Any, run_b: Any, measure: str = "ndcg_cut.10", **options: Any) -> pd.Series:
    """Per query, ``run_b``'s value minus ``run_a``'s, on the queries both were evaluated on (an error when none)."""
    from toolkit.errors import ConfigError

    a = _per_query(qrels, run_a, measure, **options)
    b = _per_query(qrels, run_b, measure, **options)
    shared = a.index.intersection(b.index)
    if len(shared) == 0:
        raise ConfigError("the two runs share no evaluated query: nothing to pair")
    return (b.loc[shared] - a.loc[shared]).rename("difference")


def power(
    qrels: Any = None,
    run_a: Any = None,
    run_b: Any = None,
    measure: str = "ndcg_cut.10",
    *,
    sd: float | None = None,
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    queries: int | None = None,
    data_dir: str | os.PathLike | None = None,
    **options: Any,
) -> PowerResult:
    """How many queries a two-sided paired t-test needs to detect ``delta`` with ``power`` at ``alpha``.

    Either two runs (``qrels``, ``run_a``, ``run_b``, ``measure``): sd = the sample sd of their per-query
    differences, the queries at hand = the queries they share, and ``delta`` defaults to their observed mean
    difference; or a given ``sd`` (and ``delta``; ``queries`` the queries at hand, optional). The result has
    ``queries`` (needed), and with queries at hand ``power_at_hand`` and ``min_detectable_delta``.
    ``**options``: every ``evaluate`` keyword (``complete``, ``relevance_level``, ...).
    """
    from toolkit.errors import ConfigError

    if run_a is not None or run_b is not None:
        if run_a is None or run_b is None or qrels is None:
            raise ConfigError("power from runs needs qrels and two runs")
        if sd is not None:
            raise ConfigError("give either two runs or sd, not both")
        d = paired_differences(qrels, run_a, run_b, measure, data_dir=data_dir, **options)
        return power_analysis(
            differences=d.to_numpy(),
            delta=delta,
            alpha=alpha,
            power=power,
            source=f"the per-query differences on {measure}, {len(d)} queries",
        )
    return power_analysis(sd=sd, delta=delta, alpha=alpha, power=power, n_queries=queries)


__all__ = ["paired_differences", "power"]
