"""Choosing a grid point without reporting the score it was chosen on.

Input: a table of per-query values of the tuning metric, one column per grid point (in grid
order), one row per query of the evaluated set (queries a point did not retrieve for hold 0,
as ``-c`` counts them). Two protocols:

- k-fold cross-validation over queries: the queries, sorted, are shuffled by
  ``numpy.random.default_rng(seed)`` and cut into k folds with ``numpy.array_split``; for each
  fold the point with the best mean over the other folds is chosen (ties: the first in grid
  order) and scored on that fold alone. The held-out score is the mean over all queries of the
  value of the point chosen for each query's fold, so every query is scored by a choice made
  without it.
- a separate tuning set: the point with the best mean on the tuning queries is chosen and
  scored on the remaining queries.

Beside it, ``best_in_sample`` is the mean of the best point on the very queries it is reported
on: the number a sweep without tuning would report; their difference is the optimism.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.errors import ConfigError


@dataclass(frozen=True)
class TuneResult:
    metric: str
    protocol: str  # "5-fold cross-validation (seed 0)" / "tuning set (N queries)"
    folds: tuple[tuple[str, ...], ...]  # the test queries of each fold (one fold: the evaluation queries)
    chosen: tuple[str, ...]  # the point chosen for each fold
    heldout: float  # mean over the evaluation queries of the chosen points' values
    heldout_per_query: pd.Series
    best_in_sample: float
    best_in_sample_point: str
    evaluated_queries: int

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "protocol": self.protocol,
            "folds": [list(f) for f in self.folds],
            "chosen": list(self.chosen),
            "heldout": self.heldout,
            "best_in_sample": self.best_in_sample,
            "best_in_sample_point": self.best_in_sample_point,
            "optimism": self.best_in_sample - self.heldout,
            "evaluated_queries": self.evaluated_queries,
        }


def make_folds(queries: list[str], k: int, seed: int) -> list[list[str]]:
    if k > len(queries):
        raise ConfigError(f"{k}-fold cross-validation needs at least {k} queries, the evaluation has {len(queries)}")
    order = np.array(sorted(queries), dtype=object)
    np.random.default_rng(seed).shuffle(order)
    return [sorted(part.tolist()) for part in np.array_split(order, k)]


def _best(table: pd.DataFrame, rows: list[str]) -> str:
    means = table.loc[rows].mean(axis=0)
    return str(means.index[int(np.argmax(means.to_numpy()))])  # argmax: the first of equal means


def cross_validate(table: pd.DataFrame, metric: str, k: int, seed: int) -> TuneResult:
    folds = make_folds(table.index.tolist(), k, seed)
    chosen, held = [], []
    for test in folds:
        train = [q for q in table.index if q not in set(test)]
        point = _best(table, train)
        chosen.append(point)
        held.append(table.loc[test, point])
    per_query = pd.concat(held).reindex(table.index)
    best = _best(table, table.index.tolist())
    return TuneResult(
        metric,
        f"{k}-fold cross-validation over queries (seed {seed})",
        tuple(tuple(f) for f in folds),
        tuple(chosen),
        float(per_query.mean()),
        per_query,
        float(table[best].mean()),
        best,
        len(table),
    )


def tuning_set(table: pd.DataFrame, metric: str, tuning: tuple[str, ...]) -> TuneResult:
    tune_q = [q for q in table.index if q in set(tuning)]
    test_q = [q for q in table.index if q not in set(tuning)]
    if not tune_q or not test_q:
        raise ConfigError(
            f"the tuning set shares {len(tune_q)} queries with the evaluated ones and leaves {len(test_q)} to test; "
            "both must be non-empty"
        )
    point = _best(table, tune_q)
    per_query = table.loc[test_q, point]
    best = _best(table, test_q)
    return TuneResult(
        metric,
        f"tuning set ({len(tune_q)} queries; scored on the other {len(test_q)})",
        (tuple(test_q),),
        (point,),
        float(per_query.mean()),
        per_query,
        float(table.loc[test_q, best].mean()),
        best,
        len(test_q),
    )
