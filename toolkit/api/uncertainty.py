"""How far to trust a number: ``power`` (how many queries a comparison needs), ``holes`` (the bounds of a score
over every labelling of the unjudged documents) and ``pool_test`` (leave-one-run-out pooling)."""

from __future__ import annotations

import os  # noqa: F401  (the verbs' keywords are annotated ``str | os.PathLike | None``: pdoc reads them here)
from collections.abc import Mapping
from typing import Any

import pandas as pd

from toolkit.api.options import EvaluationOptions, PoolTestOptions, PowerOptions
from toolkit.options import verb
from toolkit.quality.pooling import PoolTest
from toolkit.stats.power import PowerResult, power_analysis


def _per_query(qrels: Any, run: Any, measure: str, options: EvaluationOptions) -> pd.Series:
    """One measure's per-query values of a run (query_id -> value), evaluated as ``evaluate`` does."""
    from toolkit.api.evaluation import evaluate

    ev = evaluate(qrels, run, [measure], options=options)
    table = ev.per_query
    if table.shape[1] != 1:
        from toolkit.errors import ConfigError

        raise ConfigError(f"give one numeric measure, not {measure!r} (it gives {', '.join(table.columns)})")
    return table.iloc[:, 0].astype("float64")


@verb(EvaluationOptions, inputs=("qrels", "run_a", "run_b", "measure"))
def paired_differences(
    qrels: Any, run_a: Any, run_b: Any, measure: str = "ndcg_cut.10", *, options: EvaluationOptions
) -> pd.Series:
    """Per query, ``run_b``'s value minus ``run_a``'s, on the queries both were evaluated on (an error when none).

    Every keyword is ``evaluate``'s (a field of ``EvaluationOptions``); ``options=`` takes one whole.

    Args:
        qrels: as for ``evaluate``.
        run_a: the run subtracted, as for ``evaluate``.
        run_b: the other run.
        measure: one numeric measure.
    """
    from toolkit.errors import ConfigError

    a = _per_query(qrels, run_a, measure, options)
    b = _per_query(qrels, run_b, measure, options)
    shared = a.index.intersection(b.index)
    if len(shared) == 0:
        raise ConfigError("the two runs share no evaluated query: nothing to pair")
    return (b.loc[shared] - a.loc[shared]).rename("difference")


@verb(PowerOptions, inputs=("qrels", "run_a", "run_b", "measure"))
def power(
    qrels: Any = None,
    run_a: Any = None,
    run_b: Any = None,
    measure: str = "ndcg_cut.10",
    *,
    options: PowerOptions,
) -> PowerResult:
    """How many queries a two-sided paired t-test needs to detect ``delta`` with ``power`` at ``alpha``.

    Either two runs (``qrels``, ``run_a``, ``run_b``, ``measure``): sd = the sample sd of their per-query
    differences, the queries at hand = the queries they share, and ``delta`` defaults to their observed mean
    difference; or a given ``sd`` (and ``delta``; ``queries`` the queries at hand, optional). The result has
    ``queries`` (needed), and with queries at hand ``power_at_hand`` and ``min_detectable_delta``.
    Every keyword is a field of ``PowerOptions`` (``toolkit.api.options``): the design's, and every ``evaluate``
    keyword (``complete``, ``relevance_level``, ...) for the runs; ``options=`` takes one whole.

    Args:
        qrels: as for ``evaluate``, to evaluate the two runs (None with ``sd``).
        run_a: the first run, as for ``evaluate`` (None with ``sd``).
        run_b: the second run (None with ``sd``).
        measure: the one measure whose per-query differences give sd.
    """
    from toolkit.errors import ConfigError

    o = options
    if run_a is not None or run_b is not None:
        if run_a is None or run_b is None or qrels is None:
            raise ConfigError("power from runs needs qrels and two runs")
        if o.sd is not None:
            raise ConfigError("give either two runs or sd, not both")
        d = paired_differences(qrels, run_a, run_b, measure, options=o.evaluation)
        return power_analysis(
            differences=d.to_numpy(),
            delta=o.delta,
            alpha=o.alpha,
            power=o.power,
            source=f"the per-query differences on {measure}, {len(d)} queries",
        )
    return power_analysis(sd=o.sd, delta=o.delta, alpha=o.alpha, power=o.power, n_queries=o.queries)


@verb(PoolTestOptions, inputs=("qrels", "runs", "measure"))
def pool_test(qrels: Any, runs: Any, measure: str = "ndcg_cut.10", *, options: PoolTestOptions) -> PoolTest:
    """Leave-one-run-out pool test (Zobel 1998): for each run, the judgments of the documents only it brought
    to the pool of depth ``pool_depth`` removed, its ``measure`` again, and its score and rank change.

    Every keyword is a field of ``PoolTestOptions`` (``toolkit.api.options``); ``options=`` takes one whole.

    Args:
        qrels: as for ``evaluate`` (a file, a collection name, a DataFrame, ...).
        runs: ``{name: run}`` or a list of runs (named by file), at least two; each as for ``evaluate``.
        measure: one numeric measure (``ndcg_cut.10``, ``P.10``, ``map``, ``nDCG@10``).
        pool_depth: K, the depth of each run's contribution to the pool (>= 1).
        dedupe: ``error`` (a repeated (query, doc) is an error) or ``first``, as for ``evaluate``.
        relevance_map: relabel the qrels at load time, as for ``evaluate``.
        data_dir: where collection names are looked up, as for ``evaluate``.

    Returns a ``PoolTest``: ``table`` (one row per run: score, score_without, change, rank, rank_without,
    rank_change, unique, unique_judged, unique_relevant), ``to_text()``, ``as_dict()``.

    Raises:
        ConfigError: a pool depth below 1, fewer than two runs, not exactly one numeric measure.
    """
    from toolkit.data.adapters import as_qrels, as_run, system_name
    from toolkit.errors import ConfigError
    from toolkit.measures.names import measure_groups
    from toolkit.quality.pooling import pool_test as run_pool_test

    o = options  # the pool depth was checked where the options were built (PoolTestOptions.validate)
    dedupe = o.dedupe
    if isinstance(runs, Mapping):
        loaded = {str(n): as_run(r, dedupe=dedupe) for n, r in runs.items()}
    else:
        pairs = [(r, as_run(r, dedupe=dedupe)) for r in runs]
        loaded = {system_name(r, rr): rr for r, rr in pairs}
        if len(loaded) < len(pairs):
            raise ConfigError("two runs have the same name; give runs as {name: run}")
    if len(loaded) < 2:
        raise ConfigError(f"a pool test needs at least two runs, got {len(loaded)}")
    s = o.settings
    groups = measure_groups(measure, s.trec_eval)
    chosen = [(g, m) for g in groups for m in g.measures]
    if len(chosen) != 1:
        raise ConfigError(f"give one measure, not {measure!r} ({len(chosen)} measures)")
    group, m = chosen[0]
    q = as_qrels(qrels, dedupe=dedupe, relevance_map=o.relevance_map, data_dir=o.data_dir)
    return run_pool_test(q, loaded, m, o.pool_depth, group.overrides.apply(s))


__all__ = ["paired_differences", "pool_test", "power"]
