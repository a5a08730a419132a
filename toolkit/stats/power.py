"""How many queries a comparison needs: the power of a two-sided paired t-test, from the noncentral t.

Sakai's topic set size design ("Topic set size design", Information Retrieval Journal 19(3), 2016; *Statistical
Reform in Information Retrieval?*, 2014): with sigma the standard deviation of the per-query differences of two
systems, delta the smallest difference worth detecting and n queries, the paired t statistic follows a
noncentral t distribution with n - 1 degrees of freedom and noncentrality lambda = sqrt(n) delta / sigma, so the
power of the two-sided test at level alpha is

    power(n) = P(T'_{n-1, lambda} >= t_{1-alpha/2, n-1}) + P(T'_{n-1, lambda} <= -t_{1-alpha/2, n-1})

(``scipy.stats.nct``; statsmodels' ``TTestPower`` computes the same). ``queries_needed`` is the smallest n >= 2
with power(n) >= the target power; ``min_detectable_delta`` is the delta at which n queries reach it (solved
by bisection on delta / sigma). sigma is estimated from two runs' per-query values (sample sd, ddof 1) or
given.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from toolkit.errors import ConfigError, OptionError, phrase

DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
MAX_QUERIES = 10_000_000


def check_design(alpha: float, power: float, sd: float | None = None, delta: float | None = None) -> None:
    """The rules of a design: ``alpha`` and ``power`` strictly between 0 and 1, ``sd`` finite and > 0, ``delta``
    finite and non-zero (each an ``OptionError`` naming the option, in the library's and the command line's
    words)."""
    if not 0.0 < alpha < 1.0:
        raise OptionError(
            f"{phrase('alpha', '--alpha')} must lie strictly between 0 and 1, got {alpha}",
            keyword="alpha",
            flag="--alpha",
        )
    if not 0.0 < power < 1.0:
        raise OptionError(
            f"{phrase('power', '--power')} must lie strictly between 0 and 1, got {power}",
            keyword="power",
            flag="--power",
        )
    if sd is not None and not (math.isfinite(sd) and sd > 0):
        raise OptionError(
            phrase(f"the standard deviation of the per-query differences must be > 0, got {sd}", "must be > 0"),
            keyword="sd",
            flag="--sd",
        )
    if delta is not None and not (math.isfinite(delta) and delta != 0):
        raise OptionError(
            phrase(f"the difference to detect (delta) must be a non-zero number, got {delta}", "must be non-zero"),
            keyword="delta",
            flag="--delta",
        )


def ttest_power(n: int, effect: float, alpha: float = DEFAULT_ALPHA) -> float:
    """Power of the two-sided paired t-test with ``n`` queries at standardized effect ``effect`` = delta / sd."""
    from scipy.stats import nct
    from scipy.stats import t as t_dist

    if n < 2:
        return 0.0
    df = n - 1
    crit = float(t_dist.ppf(1.0 - alpha / 2.0, df))
    nc = abs(effect) * math.sqrt(n)
    return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))


def queries_needed(sd: float, delta: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> int:
    """The smallest number of queries (>= 2) for which the paired t-test detects ``delta`` with ``power``."""
    check_design(alpha, power, sd, delta)
    from scipy.stats import norm

    effect = abs(delta) / sd
    # the normal approximation, a little low for the t; step down while still enough, then up until enough
    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    n = max(2, math.ceil((z / effect) ** 2))
    if n > MAX_QUERIES:
        raise ConfigError(f"detecting {delta} with sd {sd} needs more than {MAX_QUERIES} queries")
    while n > 2 and ttest_power(n - 1, effect, alpha) >= power:
        n -= 1
    while ttest_power(n, effect, alpha) < power:
        n += 1
    return n


def min_detectable_delta(
    sd: float, n: int, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER, tol: float = 1e-10
) -> float:
    """The smallest difference that ``n`` queries detect with ``power`` (a t-test with sd ``sd``)."""
    check_design(alpha, power, sd)
    if n < 2:
        raise ConfigError(f"a paired t-test needs at least 2 queries, got {n}")
    lo, hi = 0.0, 1.0
    while ttest_power(n, hi, alpha) < power:
        hi *= 2.0
    while hi - lo > tol * max(hi, 1.0):
        mid = (lo + hi) / 2.0
        if ttest_power(n, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi * sd


@dataclass(frozen=True)
class PowerResult:
    """The design: sd of the differences, delta, alpha, target power, the queries it needs; and with the queries
    at hand (``n_queries``), their power at delta and the smallest difference they detect."""

    sd: float
    delta: float
    alpha: float
    power: float
    queries: int
    n_queries: int | None
    power_at_hand: float | None
    min_detectable_delta: float | None
    observed_delta: float | None = None
    source: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def to_text(self) -> str:
        """The report ``twostage power`` prints; its last line is ``queries N``."""
        lines = [
            f"# two-sided paired t-test, alpha {self.alpha:g}, power {self.power:g}: noncentral t "
            "(Sakai's topic set size design)",
        ]
        if self.source:
            lines.append(f"# sd from {self.source}")
        lines.append(f"sd                   {self.sd:.4f}")
        if self.observed_delta is not None:
            lines.append(f"observed_delta       {self.observed_delta:+.4f}")
        lines.append(f"delta                {self.delta:.4f}  (effect size {abs(self.delta) / self.sd:.3f})")
        if self.n_queries is not None:
            lines.append(f"queries_at_hand      {self.n_queries}")
            lines.append(f"power_at_hand        {self.power_at_hand:.4f}  (to detect delta)")
            lines.append(f"min_detectable_delta {self.min_detectable_delta:.4f}  (with {self.n_queries} queries)")
        lines.append(f"queries {self.queries}")
        return "\n".join(lines) + "\n"


def power_analysis(
    *,
    sd: float | None = None,
    differences=None,
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    n_queries: int | None = None,
    source: str = "",
) -> PowerResult:
    """The design from a given ``sd`` or from per-query ``differences`` (then sd = their sample sd, the queries at
    hand = their number, and delta defaults to their mean's magnitude)."""
    observed = None
    if differences is not None:
        d = np.asarray(differences, dtype=np.float64)
        if len(d) < 2:
            raise ConfigError(f"power needs at least 2 paired queries, got {len(d)}")
        sd = float(d.std(ddof=1))
        observed = float(d.mean())
        n_queries = len(d)
        if delta is None:
            delta = abs(observed)
    if sd is None:
        raise ConfigError("give the sd of the per-query differences, or two runs to estimate it from")
    if delta is None:
        raise ConfigError("give the difference to detect (delta)")
    check_design(alpha, power, sd, delta)
    need = queries_needed(sd, delta, alpha, power)
    at_hand = mdd = None
    if n_queries is not None:
        at_hand = ttest_power(n_queries, abs(delta) / sd, alpha)
        mdd = min_detectable_delta(sd, n_queries, alpha, power)
    return PowerResult(float(sd), abs(float(delta)), alpha, power, need, n_queries, at_hand, mdd, observed, source)


__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_POWER",
    "PowerResult",
    "check_design",
    "min_detectable_delta",
    "power_analysis",
    "queries_needed",
    "ttest_power",
]
