"""Risk-sensitive evaluation of runs against a baseline: URisk and TRisk.

Pure functions of per-query values: two aligned arrays (``a`` = baseline, ``b`` = run, one value per query,
the same query order) or the tidy per-query table (``run, query_id, measure, value``) ``risk_table`` takes.

Definitions (d_i = b_i - a_i over the n = |Q| queries both were evaluated on; alpha >= 0):

- **risk-adjusted difference** z_i = d_i where d_i > 0 (a win), (1 + alpha) d_i where d_i < 0 (a loss), 0 on
  a tie: a loss weighs 1 + alpha times a win of the same size.
- **URisk** (Wang, Bennett & Collins-Thompson, "Robust ranking models via risk-sensitive optimization",
  SIGIR 2012; the TREC 2013-2014 Web track's risk-sensitive measure): URisk = (1/n) [sum of the wins' d_i -
  (1 + alpha) sum of the losses' |d_i|] = mean(z). alpha = 0 gives the mean difference; the larger alpha, the
  more a run is penalised for doing worse than the baseline on some queries. Positive: the run's gains
  outweigh its (weighted) losses.
- **TRisk** (Dinçer, Macdonald & Ounis, "Hypothesis testing for the risk-sensitive evaluation of retrieval
  systems", SIGIR 2014): URisk divided by its standard error, TRisk = URisk / (sd(z) / sqrt(n)), sd with
  ddof = 1: the one-sample t statistic of the z_i, so |TRisk| > 2 reads as a significant gain (positive) or
  loss (negative) at about the 0.05 level. ``p`` is its two-sided p-value from Student's t with n - 1 degrees
  of freedom, i.e. ``scipy.stats.ttest_1samp(z, 0)``. Edge cases as the paired t-test's
  (``significance.paired_ttest``): every z_i 0 gives TRisk 0, p 1; every z_i the same non-zero value gives
  +-inf, p 0; n < 2 gives 0, p 1.

twostage's default alpha is 1 (a loss counts twice); ``risk_table`` takes several alphas at once (papers
often report 1, 5 and 10 side by side).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ConfigError
from toolkit.stats.significance import paired, paired_ttest

DEFAULT_ALPHA = 1.0


def check_alpha(alpha: Any) -> float:
    """``alpha`` as a float, or a ``ConfigError`` naming it when it is not a finite number >= 0."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(alpha) or alpha < 0:
        raise ConfigError(f"alpha (the risk weight of a loss) must be a number >= 0, got {alpha!r}")
    return float(alpha)


def risk_adjusted(a, b, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Per query z_i: b_i - a_i where it is a win or a tie, (1 + alpha) (b_i - a_i) where it is a loss."""
    alpha = check_alpha(alpha)
    d = paired(a, b)
    return np.where(d < 0, (1.0 + alpha) * d, d)


def urisk(a, b, alpha: float = DEFAULT_ALPHA) -> float:
    """URisk of ``b`` against the baseline ``a`` (module docstring); 0 without queries."""
    z = risk_adjusted(a, b, alpha)
    return float(z.mean()) if len(z) else 0.0


def trisk(a, b, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """TRisk of ``b`` against the baseline ``a`` and its two-sided p-value (module docstring)."""
    z = risk_adjusted(a, b, alpha)
    t, p = paired_ttest(np.zeros_like(z), z)
    return float(t), float(p)


@dataclass(frozen=True)
class RiskResult:
    """One run against the baseline on one measure at one alpha."""

    measure: str
    run: str
    baseline: str
    alpha: float
    n_queries: int
    mean: float
    baseline_mean: float
    delta: float  # the mean difference (URisk at alpha 0)
    wins: int
    ties: int
    losses: int
    win_sum: float  # sum of the wins' differences
    loss_sum: float  # sum of the losses' |differences|
    urisk: float
    trisk: float
    p: float

    def as_dict(self) -> dict:
        d = asdict(self)
        if math.isinf(d["trisk"]):  # JSON has no infinity
            d["trisk"] = "inf" if d["trisk"] > 0 else "-inf"
        return d


def risk_of(a, b, alpha: float, measure: str = "", run: str = "", baseline: str = "") -> RiskResult:
    """Every number of ``RiskResult`` for one pair of aligned arrays."""
    d = paired(a, b)
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    t, p = trisk(a_, b_, alpha)
    n = len(d)
    return RiskResult(
        measure=measure,
        run=run,
        baseline=baseline,
        alpha=check_alpha(alpha),
        n_queries=n,
        mean=float(b_.mean()) if n else 0.0,
        baseline_mean=float(a_.mean()) if n else 0.0,
        delta=float(d.mean()) if n else 0.0,
        wins=int((d > 0).sum()),
        ties=int((d == 0).sum()),
        losses=int((d < 0).sum()),
        win_sum=float(d[d > 0].sum()),
        loss_sum=float(-d[d < 0].sum()),
        urisk=urisk(a_, b_, alpha),
        trisk=t,
        p=p,
    )


def risk_table(per_query: pd.DataFrame, baseline: str, alphas: Sequence[float] = (DEFAULT_ALPHA,)) -> list[RiskResult]:
    """Every run of a tidy table (run, query_id, measure, value) against ``baseline``, per measure (in the table's
    order) and alpha (in the order given), each pair on the queries both have."""
    needed = {"run", "query_id", "measure", "value"}
    if not needed <= set(per_query.columns):
        raise ConfigError(f"per-query table needs columns {sorted(needed)}, has {sorted(per_query.columns)}")
    alphas = [check_alpha(x) for x in alphas]
    if not alphas:
        raise ConfigError("give at least one alpha")
    runs = list(dict.fromkeys(per_query["run"].tolist()))
    if baseline not in runs:
        raise ConfigError(f"baseline {baseline!r} is not among the runs ({', '.join(runs)})")
    out: list[RiskResult] = []
    for measure in dict.fromkeys(per_query["measure"].tolist()):
        wide = per_query[per_query["measure"] == measure].pivot(index="query_id", columns="run", values="value")
        for alpha in alphas:
            for run in (r for r in runs if r != baseline):
                pair = wide[[baseline, run]].dropna()
                out.append(risk_of(pair[baseline].to_numpy(), pair[run].to_numpy(), alpha, measure, run, baseline))
    return out


__all__ = ["DEFAULT_ALPHA", "RiskResult", "check_alpha", "risk_adjusted", "risk_of", "risk_table", "trisk", "urisk"]
