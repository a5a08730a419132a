"""Confidence intervals and effect sizes of a mean and of a paired difference over queries.

Everything is a pure function of per-query numbers. Randomness comes only from
``numpy.random.default_rng(seed)`` (or a generator the caller passes), so the same seed gives the same interval.

Definitions (x_i one value per query, n queries; for a paired difference x_i = b_i - a_i):

- **Paired bootstrap** (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993): ``resamples`` times, draw
  n query indices with replacement and take the mean of those x_i; the indices are drawn exactly as
  ``scipy.stats.bootstrap`` draws them (``rng.integers(0, n, (resamples, n))``, in row chunks, which give the
  same stream), so for the same generator the interval equals scipy's to the last bits. Resampling queries
  (not values of a system) keeps each query's pair together: that is what makes it *paired*.
- **percentile** interval: the alpha/2 and 1 - alpha/2 percentiles of the bootstrap means (``numpy.percentile``,
  linear interpolation), alpha = 1 - level.
- **BCa** (bias-corrected and accelerated; Efron 1987; Efron & Tibshirani 1993, eq. 14.9-14.15): percentiles at
  Phi(z0 + (z0 + z)/(1 - a (z0 + z))) for z = Phi^-1(alpha/2) and Phi^-1(1 - alpha/2), with the bias
  correction z0 = Phi^-1(share of bootstrap means below the observed mean, ties counting half) and the
  acceleration a = sum(U^3) / (6 sum(U^2)^1.5) from the jackknife means (U_i = (n - 1)(mean of the leave-one-out
  means - leave-one-out mean i)). When every value is the same, both ends are that value.
- **d_z** (Cohen 1988, the standardized mean difference of paired samples; Lakens 2013): mean(x) / sd(x) with
  sd the sample standard deviation (ddof = 1). 0 when every x_i is 0; +-inf when every x_i is the same non-zero
  value; NaN with fewer than two queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import ConfigError

CI_METHODS = ("percentile", "bca")
DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 10_000
_CHUNK_CELLS = 65_536  # indices drawn per batch (rows x n): the batch and its gathered values stay in cache;
# any batch gives the same stream as one draw, and each row's mean is its own pairwise sum, so the same bits
_PAIR_MIN = 64  # rows of this many values or more: two arrays gathered side by side (``_means_of``)


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a mean: its ends, level, method, resamples and seed (None: a caller's rng)."""

    low: float
    high: float
    level: float
    method: str
    resamples: int
    seed: int | None

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def check_level(level: float) -> float:
    """``level`` as a float in (0, 1), else a ConfigError naming it."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise ConfigError(f"interval level must be a number in (0, 1), got {level!r}") from None
    if not 0.0 < lv < 1.0:
        raise ConfigError(f"interval level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    return lv


def check_ci_options(level: float, resamples: int, method: str) -> None:
    """Raise ConfigError for a level outside (0, 1), fewer than one resample or an unknown method."""
    check_level(level)
    if int(resamples) < 1:
        raise ConfigError(f"bootstrap resamples must be >= 1, got {resamples}")
    if method not in CI_METHODS:
        raise ConfigError(f"unknown interval method {method!r}; choose one of {', '.join(CI_METHODS)}")


def effect_size(x) -> float:
    """d_z = mean(x) / sd(x, ddof=1) of paired differences (see the module docstring for the edge cases)."""
    d = np.asarray(x, dtype=np.float64)
    if len(d) < 2:
        return math.nan
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0 or sd <= abs(mean) * 1e-14:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / sd


def bootstrap_means(x, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` means of x resampled with replacement (indices drawn as scipy.stats.bootstrap draws them)."""
    d = np.asarray(x, dtype=np.float64)
    n = len(d)
    return _means_of([d], n, resamples, rng)[0]


def _means_of(ds: list[np.ndarray], n: int, resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``resamples`` bootstrap means of every array of ``ds`` (all of length ``n``), from one draw of indices.

    Each batch of indices gathers every array into one reused buffer (``np.take``, unbuffered) and sums its rows
    (``np.add.reduce`` along the rows, numpy's pairwise sum of each row, as ``mean`` sums); the sums are divided
    by n at the end, as ``mean`` divides them: the same bits as ``d[idx].mean(axis=-1)``. Arrays go two by two
    (``_PAIR_MIN`` values or more): one gather of their side-by-side values per index, each row summed along its
    strided column, the same pairwise sum of the same values in the same order."""
    sums = [np.empty(resamples) for _ in ds]
    paired = n >= _PAIR_MIN and len(ds) > 1
    groups = (
        [list(range(i, min(i + 2, len(ds)))) for i in range(0, len(ds), 2)] if paired else [[i] for i in range(len(ds))]
    )
    tables = [ds[g[0]] if len(g) == 1 else np.ascontiguousarray(np.stack([ds[i] for i in g], axis=1)) for g in groups]
    rows = max(1, min(resamples, _CHUNK_CELLS // max(n, 1)))
    buf = np.empty((rows, n))
    buf2 = np.empty((rows, n, 2)) if paired else None
    done = 0
    while done < resamples:
        size = min(rows, resamples - done)
        idx = rng.integers(0, n, (size, n))
        for g, table in zip(groups, tables):
            if len(g) == 1:
                gathered = buf[:size]
                np.take(table, idx, out=gathered, mode="clip")  # the indices lie in [0, n): "clip" never moves one
                np.add.reduce(gathered, axis=-1, out=sums[g[0]][done : done + size])
                continue
            both = buf2[:size]  # type: ignore[index]
            np.take(table, idx, axis=0, out=both, mode="clip")
            for j, i in enumerate(g):
                np.add.reduce(both[:, :, j], axis=-1, out=sums[i][done : done + size])
        done += size
    for s in sums:
        s /= n
    return sums


def bootstrap_means_of(xs, resamples: int, seed: int | None) -> list[np.ndarray]:
    """``bootstrap_means(x, resamples, default_rng(seed))`` of every ``x`` in ``xs`` (each with its own fresh
    generator, as if called one by one), drawing the indices once for all the ``x`` of one length: a fresh
    generator draws the same indices for the same length, so the means are those of the calls one by one, to the
    last bit (the same gathers and means of the same numbers)."""
    ds = [np.asarray(x, dtype=np.float64) for x in xs]
    out: dict[int, np.ndarray] = {}
    for n in dict.fromkeys(len(d) for d in ds):
        same = [i for i, d in enumerate(ds) if len(d) == n]
        out.update(zip(same, _means_of([ds[i] for i in same], n, resamples, np.random.default_rng(seed))))
    return [out[i] for i in range(len(ds))]


def prime_bootstrap(xs, resamples: int, seed: int | None, *, work: Workspace = NO_WORKSPACE) -> None:
    """In a workspace (``work``): compute the bootstrap means that ``bootstrap_ci(x, resamples=resamples,
    seed=seed)`` will ask for, for every ``x`` in ``xs``, in one pass (``bootstrap_means_of``); outside it, nothing
    (each call computes its own). The intervals are the same either way."""

    if not work.keeps or int(resamples) < 1:
        return
    ds = [np.asarray(x, dtype=np.float64) for x in xs]
    ds = [d for d in ds if d.ndim == 1 and len(d) and np.isfinite(d).all()]
    keys = [
        k for k in dict.fromkeys((d.tobytes(), int(resamples), seed) for d in ds) if not work.has("bootstrap", (), k)
    ]
    todo = [np.frombuffer(key[0], dtype=np.float64) for key in keys]
    for key, means in zip(keys, bootstrap_means_of(todo, int(resamples), seed)):
        work.once("bootstrap", (), key, lambda means=means: means)


def bootstrap_ci(
    x,
    level: float = DEFAULT_LEVEL,
    resamples: int = DEFAULT_RESAMPLES,
    method: str = "percentile",
    seed: int | None = 42,
    rng: np.random.Generator | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> Interval:
    """Bootstrap confidence interval of mean(x); for a paired difference pass x = b - a.

    ``rng`` wins over ``seed``. The same as ``scipy.stats.bootstrap((x,), np.mean, confidence_level=level,
    n_resamples=resamples, method=method, rng=np.random.default_rng(seed))``'s interval.
    """
    from scipy.special import ndtr, ndtri

    check_ci_options(level, resamples, method)
    d = np.asarray(x, dtype=np.float64)
    if d.ndim != 1 or len(d) == 0:
        raise ConfigError("a confidence interval needs at least one per-query value")
    if not np.isfinite(d).all():
        raise ConfigError("confidence interval: per-query values must be finite numbers")
    if rng is not None:
        means = bootstrap_means(d, int(resamples), rng)
    else:  # the same draws from default_rng(seed): one computation per differences in a workspace
        key = (d.tobytes(), int(resamples), seed)
        means = work.once("bootstrap", (), key, lambda: bootstrap_means(d, int(resamples), np.random.default_rng(seed)))
    alpha = (1.0 - float(level)) / 2.0
    if np.ptp(d) == 0.0:  # no spread: every resample mean is the value (BCa's z0 would be infinite)
        v = float(d[0])
        return Interval(v, v, float(level), method, int(resamples), seed if rng is None else None)
    if method == "percentile":
        lo_q, hi_q = alpha, 1.0 - alpha
    else:
        theta = float(d.mean())
        share = (np.count_nonzero(means < theta) + np.count_nonzero(means <= theta)) / (2.0 * len(means))
        z0 = float(ndtri(share))
        n = len(d)
        jack = (d.sum() - d) / (n - 1)  # leave-one-out means
        u = (n - 1) * (jack.mean() - jack)
        den = float(np.sum(u**2) / n**2)
        a = (float(np.sum(u**3) / n**3) / den**1.5) / 6.0 if den > 0 else 0.0
        z_lo, z_hi = float(ndtri(alpha)), -float(ndtri(alpha))
        lo_q = float(ndtr(z0 + (z0 + z_lo) / (1 - a * (z0 + z_lo))))
        hi_q = float(ndtr(z0 + (z0 + z_hi) / (1 - a * (z0 + z_hi))))
        if not (math.isfinite(lo_q) and math.isfinite(hi_q)):
            lo_q, hi_q = alpha, 1.0 - alpha
    low, high = np.percentile(means, [lo_q * 100.0, hi_q * 100.0])
    return Interval(float(low), float(high), float(level), method, int(resamples), seed if rng is None else None)


def paired_interval(
    a,
    b,
    level: float = DEFAULT_LEVEL,
    resamples: int = DEFAULT_RESAMPLES,
    method: str = "percentile",
    seed: int | None = 42,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[Interval, float]:
    """The bootstrap interval of mean(b - a) and the effect size d_z of the paired differences."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ConfigError(f"paired interval needs two 1-d arrays of the same length, got {a.shape} and {b.shape}")
    d = b - a
    return bootstrap_ci(d, level, resamples, method, seed, work=work), effect_size(d)


__all__ = [
    "CI_METHODS",
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "Interval",
    "bootstrap_ci",
    "bootstrap_means",
    "bootstrap_means_of",
    "check_ci_options",
    "check_level",
    "effect_size",
    "paired_interval",
    "prime_bootstrap",
]
