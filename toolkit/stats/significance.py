"""Paired significance tests over per-query values, multiple-comparison corrections, win/tie/loss.

Everything here is a pure function of per-query numbers: two aligned arrays
(``a`` = baseline, ``b`` = system, one value per query, same query order) or
the tidy per-query table (``run, query_id, measure, value``) that
``compare_table`` takes. Nothing is modified in place; randomness only comes
from an explicit ``numpy.random.Generator`` built from a seed the caller
chooses, and that seed is reported back with every result.

Definitions (d_i = b_i - a_i, n queries):

- **paired t-test** (Student 1908): t = mean(d) / (sd(d) / sqrt(n)) with sd
  the sample standard deviation (ddof = 1), two-sided p = 2 * P(T_{n-1} >= |t|).
  Same as ``scipy.stats.ttest_rel(b, a)``. Edge cases, where scipy returns
  NaN: all d_i equal to 0 gives t = 0, p = 1; all d_i equal to the same
  non-zero value gives t = +-inf, p = 0; n < 2 gives p = 1 (nothing to test).
- **paired randomization (permutation) test** (Fisher 1935; Smucker, Allan &
  Carterette, CIKM 2007, for IR): under H0 the labels "baseline"/"system" are
  exchangeable within each query, i.e. each d_i keeps or flips its sign with
  probability 1/2. Statistic T = mean(d); two-sided p = P(|T*| >= |T|).
  When ``permutations >= 2**n`` all 2**n sign vectors are enumerated and p is
  exact (the observed assignment counts once among them). Otherwise
  ``permutations`` random sign vectors are drawn from ``numpy.random.default_rng(seed)``
  and p = (1 + #{|T*| >= |T|}) / (1 + permutations) (Phipson & Smyth 2010:
  never 0, a valid p-value). "|T*| >= |T|" is compared with a relative
  tolerance of 1e-9 so that floating-point noise in sums of the same values
  in another order does not decide it (scipy does the same).
  The exact case equals ``scipy.stats.permutation_test((b, a), statistic=mean
  difference, permutation_type='samples', alternative='two-sided')``.
- **Wilcoxon signed-rank test** (Wilcoxon 1945): ``scipy.stats.wilcoxon(d)`` with scipy's defaults
  (zero differences dropped, ``zero_method="wilcox"``; no continuity correction; exact distribution when
  n <= 50 and no ties, else the normal approximation; two-sided). All d_i equal to 0 (or n = 0) gives p = 1.
- **sign test** (binomial): of the n' queries with d_i != 0, k moved up; under H0 k ~ Binomial(n', 1/2),
  two-sided exact p = min(1, 2 * P(K <= min(k, n' - k))), which is ``scipy.stats.binomtest(k, n', 0.5)``'s.
  n' = 0 gives p = 1.
- **Holm** (1979) step-down correction of m p-values: sort p ascending,
  p_(1) <= ... <= p_(m); adjusted p_(j) = max_{k <= j} min(1, (m - k + 1) * p_(k)).
  **Bonferroni**: min(1, m * p). Both control the family-wise error rate;
  Holm is uniformly more powerful, hence the default.
- **Benjamini-Hochberg** (1995), ``bh``: sort p ascending; adjusted p_(j) = min_{k >= j} min(1, m p_(k) / k).
  It controls the false discovery rate (the expected share of false claims among the claims), not the
  family-wise error: the choice when many comparisons are screened. ``fdr_bh`` is statsmodels' name for it.
- **Šidák** (1967), ``sidak``: 1 - (1 - p)^m; **Holm-Šidák**, ``holm-sidak``: Holm's step-down with Šidák's
  factor, adjusted p_(j) = max_{k <= j} 1 - (1 - p_(k))^(m - k + 1). Family-wise error under independence (or
  positive dependence); slightly more powerful than Bonferroni / Holm.
- **Benjamini-Yekutieli** (2001), ``fdr_by``: BH with every p multiplied by c(m) = sum_{i=1..m} 1/i; controls
  the false discovery rate under any dependence.
  Every correction equals ``statsmodels.stats.multitest.multipletests(p, method=...)[1]`` (``bh`` is its
  ``fdr_bh``, ``holm-sidak`` its ``holm-sidak``).
- **randomised Tukey HSD** (Carterette, "Multiple testing in statistical analysis of systems-based
  information retrieval experiments", ACM TOIS 30(1), 2012): for all pairs of m systems over the same n
  queries, each permutation shuffles the m values of every query among the systems independently; the
  statistic is the range max_j mean_j - min_j mean_j of the permuted system means, and the p-value of a pair
  is p = (1 + #{range* >= |mean_b - mean_a|}) / (1 + permutations). One null distribution (the largest
  difference any pair could show by chance) serves every pair, so these p-values already control the
  family-wise error over all pairs and take no further correction.
- **Monte-Carlo standard error** of a sampled p-value (randomization test, randomised Tukey HSD):
  se = sqrt(p (1 - p) / B) for B random permutations (0 when every sign vector was enumerated). A corrected
  p-value carries the error scaled as the correction scales that p-value (p_adjusted / p). Within
  ``MC_FLIP_SE`` standard errors of alpha, another seed could give the other decision: the verdict says so.
- **win / tie / loss** of the system against the baseline: d_i > eps, |d_i| <= eps,
  d_i < -eps, with eps = 0 by default (values of the same ranking are
  bit-identical, so exact ties are real ties).

In ``compare_table`` the correction family is, per measure, the m = (number
of runs - 1) comparisons of each run against the baseline, and it is applied
to the permutation-test p-values (the primary test); t-test, Wilcoxon and
sign-test p-values are reported uncorrected next to them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import ConfigError
from toolkit.stats.draws import coin_flips
from toolkit.stats.intervals import check_ci_options, paired_interval

CORRECTIONS = ("holm", "bonferroni", "bh", "none", "holm-sidak", "sidak", "fdr_bh", "fdr_by")


def check_level(alpha: float, name: str = "alpha") -> float:
    """``alpha`` when it is a significance level in (0, 1), else a ``ConfigError`` naming it as ``name`` (a
    keyword, or ``errors.phrase`` for a message in each front end's words)."""
    if not 0 < alpha < 1:
        raise ConfigError(f"{name} must be in (0, 1), not {alpha}")
    return alpha


def check_permutations(permutations: int, name: str = "permutations") -> int:
    """``permutations`` when it is >= 1 (a randomization test's draws), else a ``ConfigError`` naming it."""
    if permutations < 1:
        raise ConfigError(f"{name} must be >= 1, got {permutations}")
    return permutations


def check_correction(method: str, name: str = "correction") -> str:
    """``method`` when it is one of ``CORRECTIONS``, else a ``ConfigError`` naming it."""
    if method not in CORRECTIONS:
        raise ConfigError(f"unknown {name} {method!r}; choose one of {', '.join(CORRECTIONS)}")
    return method


#: ``--test`` / ``test=``: the test whose p-values are corrected and marked -> its field of ``Comparison``.
TESTS = MappingProxyType(
    {
        "randomization": "p_permutation",
        "t": "p_ttest",
        "tukey": "p_tukey",
        "wilcoxon": "p_wilcoxon",
        "sign": "p_sign",
    }
)
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 42
_REL_TOL = 1e-9
#: A sampled p-value within this many Monte-Carlo standard errors of alpha could fall on either side of it.
MC_FLIP_SE = 3.0


def mc_se(p: float, permutations: int, exact: bool = False) -> float:
    """The Monte-Carlo standard error sqrt(p (1 - p) / B) of a p-value from ``permutations`` random draws; 0 when
    ``exact`` (every assignment enumerated)."""
    if exact or permutations < 1 or not 0.0 <= p <= 1.0:
        return 0.0
    return math.sqrt(p * (1.0 - p) / permutations)


def scaled_se(p: float, p_adjusted: float, se: float) -> float:
    """``se`` of a raw p carried to its corrected value (scaled as the correction scales p; capped where the
    corrected value is 1, since it cannot move further up)."""
    if se == 0.0 or p <= 0.0:
        return 0.0
    return se * (p_adjusted / p)


def could_flip(p: float, se: float, alpha: float) -> bool:
    """Whether a p-value with Monte-Carlo error ``se`` lies within ``MC_FLIP_SE`` errors of ``alpha``."""
    return se > 0.0 and abs(p - alpha) <= MC_FLIP_SE * se


_CHUNK = 512  # sign vectors per batch: bounds memory at CHUNK x n (a multiple of 16 rows, and of 4: the same draws)
_ROWS = 16  # sign vectors multiplied at once (a multiple of the 4 rows a BLAS gemv kernel takes together)


def paired(a, b) -> np.ndarray:
    """The per-query differences ``b - a`` of two paired arrays of values; unequal lengths or a value that is not
    a finite number are refused."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ConfigError(f"paired test needs two 1-d arrays of the same length, got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ConfigError("paired test: per-query values must be finite numbers")
    return b - a


def paired_ttest(a, b) -> tuple[float, float]:
    """Two-sided paired t-test of ``b`` against ``a``; returns (t, p). See the module docstring."""
    from scipy.special import stdtr  # what scipy.stats.t.sf(x, df) computes (stdtr(df, -x)), without scipy.stats

    d = paired(a, b)
    n = len(d)
    if n < 2:
        return 0.0, 1.0
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0 or sd <= abs(mean) * 1e-14:
        # No variance: identical differences. Zero -> no evidence; non-zero -> every query moved the same way.
        if mean == 0.0:
            return 0.0, 1.0
        return math.copysign(math.inf, mean), 0.0
    t = mean / (sd / math.sqrt(n))
    p = float(2.0 * stdtr(n - 1, -abs(t)))
    return t, min(1.0, p)


def wilcoxon_test(a, b) -> float:
    """Two-sided Wilcoxon signed-rank p-value of ``b - a`` (``scipy.stats.wilcoxon`` with its defaults)."""
    import warnings

    from scipy.stats import wilcoxon

    d = paired(a, b)
    if not np.any(d != 0.0):
        return 1.0
    with warnings.catch_warnings():  # scipy warns on few non-zero differences; the p-value is still its own
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        return float(wilcoxon(d).pvalue)


def sign_test(a, b) -> float:
    """Two-sided exact sign test of ``b - a`` over the queries with a non-zero difference (module docstring)."""
    from scipy.stats import binom

    d = paired(a, b)
    up, down = int((d > 0).sum()), int((d < 0).sum())
    n = up + down
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(up, down), n, 0.5)))


def permutation_test(
    a,
    b,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = DEFAULT_SEED,
    rng: np.random.Generator | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[float, bool]:
    """Two-sided paired randomization test of mean(b - a); returns (p, exact).

    ``rng`` wins over ``seed`` when both are given; the caller then owns the
    generator's state. ``exact`` tells whether all 2**n sign assignments were
    enumerated (``permutations >= 2**n``) or ``permutations`` were sampled.
    """
    check_permutations(permutations)
    d = paired(a, b)
    n = len(d)
    if n == 0:
        return 1.0, True
    threshold = _threshold(d)
    if n <= 20 and permutations >= 2**n:
        # Exact: every sign vector once (2**20 x 20 is the largest matrix built here, in chunks).
        hits = 0
        total = 0
        for chunk in _all_signs(n):
            stats = np.abs(chunk @ d) / n
            hits += int((stats >= threshold).sum())
            total += len(chunk)
        return hits / total, True
    gen = rng if rng is not None else np.random.default_rng(seed)

    key = (d.tobytes(), permutations, _state_key(gen))
    if work.has("permutation", (), key):  # primed (prime_permutations): its p and the generator's state after
        held: tuple[float, Mapping[str, Any]] = work.once("permutation", (), key, lambda: (math.nan, {}))  # not called
        gen.bit_generator.state = held[1]
        return held[0], False
    (hits,) = _sampled_hits([d], [threshold], permutations, gen)
    return (1 + hits) / (1 + permutations), False


def _threshold(d: np.ndarray) -> float:
    """|mean(d)| less its tolerance: a permuted statistic at least this large counts as extreme."""
    observed = abs(float(d.mean()))
    # the tolerance scales with the differences, not only the statistic: a true mean of 0 is
    # computed as rounding noise (~1e-17) that the permuted sums need not reproduce exactly
    return observed - _REL_TOL * max(observed, float(np.abs(d).mean()), 1e-300)


def _state_key(gen: np.random.Generator) -> tuple[str, str]:
    """A generator's bit generator and state, as a key."""
    return type(gen.bit_generator).__name__, repr(gen.bit_generator.state)


def _sampled_hits(
    ds: list[np.ndarray], thresholds: list[float], permutations: int, gen: np.random.Generator
) -> list[int]:
    """For every d of ``ds`` (all of one length n), how many of ``permutations`` random sign vectors drawn from
    ``gen`` give |mean| >= its threshold: the sign vectors drawn once for all of them, each d's sums those of a
    test of it alone (the same 16-row float64 blocks times d)."""
    n = len(ds[0])
    hits = [0] * len(ds)
    done = 0
    rows = np.empty((min(_ROWS, _CHUNK), n))
    sums = np.empty((len(ds), min(_CHUNK, permutations)))
    while done < permutations:
        size = min(_CHUNK, permutations - done)
        signs = coin_flips(gen, size, n)  # gen.integers(0, 2, (size, n), dtype=np.int8): the same values
        signs *= 2
        signs -= 1
        for i in range(0, size, len(rows)):  # a few rows at a time as float64 (in cache), each row's sum the same
            block = rows[: min(len(rows), size - i)]
            block[...] = signs[i : i + len(block)]
            for j, d in enumerate(ds):
                sums[j, i : i + len(block)] = block @ d
        for j, threshold in enumerate(thresholds):
            stats = np.abs(sums[j, :size]) / n
            hits[j] += int((stats >= threshold).sum())
        done += size
    return hits


def prime_permutations(xs, permutations: int, seed: int | None, *, work: Workspace = NO_WORKSPACE) -> None:
    """In a workspace (``work``): the sampled randomization tests that ``permutation_test(x, ...)`` will run
    with a fresh ``default_rng(seed)`` (``rng=default_rng(seed)`` or ``seed=seed``), for every paired difference x
    of ``xs``, in one pass per length (the sign vectors drawn once); outside it, nothing. The p-values, and the
    generator's state each test leaves, are the same either way."""

    if not work.keeps or int(permutations) < 1:
        return
    ds = [np.asarray(x, dtype=np.float64) for x in xs]
    ds = [d for d in ds if d.ndim == 1 and len(d) and np.isfinite(d).all()]
    ds = [d for d in ds if not (len(d) <= 20 and permutations >= 2 ** len(d))]  # exact: no draws to share
    start = _state_key(np.random.default_rng(seed))
    keys = [
        k
        for k in dict.fromkeys((d.tobytes(), int(permutations), start) for d in ds)
        if not work.has("permutation", (), k)
    ]
    todo = [np.frombuffer(key[0], dtype=np.float64) for key in keys]
    for n in dict.fromkeys(len(d) for d in todo):
        same = [i for i, d in enumerate(todo) if len(d) == n]
        gen = np.random.default_rng(seed)
        hits = _sampled_hits([todo[i] for i in same], [_threshold(todo[i]) for i in same], int(permutations), gen)
        after = gen.bit_generator.state
        for i, h in zip(same, hits):

            def held(
                value: tuple[float, Mapping[str, Any]] = ((1 + h) / (1 + int(permutations)), after),
            ) -> tuple[float, Mapping[str, Any]]:
                return value

            work.once("permutation", (), keys[i], held)


def _all_signs(n: int):
    """All 2**n vectors in {-1, +1}^n, in chunks (rows), as float64 matrices."""
    per = max(1, _CHUNK * 8)
    it = itertools.product((1.0, -1.0), repeat=n)
    while True:
        block = list(itertools.islice(it, per))
        if not block:
            return
        yield np.array(block, dtype=np.float64)


def adjust(pvalues, method: str = "holm") -> np.ndarray:
    """Corrected p-values (``CORRECTIONS``: Holm, Bonferroni, Benjamini-Hochberg, Holm-Šidák, Šidák,
    Benjamini-Yekutieli, or none; see the module docstring); order preserved."""
    p = np.asarray(pvalues, dtype=np.float64)
    check_correction(method)
    m = len(p)
    if m == 0 or method == "none":
        return p.copy()
    if method == "bonferroni":
        return np.minimum(1.0, p * m)
    if method == "sidak":
        with np.errstate(divide="ignore"):  # p = 1: log1p(-1) = -inf, and the adjusted p is 1
            return np.minimum(1.0, -np.expm1(m * np.log1p(-p)))
    if method in ("bh", "fdr_bh", "fdr_by"):
        factor = float(np.sum(1.0 / np.arange(1, m + 1))) if method == "fdr_by" else 1.0
        order = np.argsort(p, kind="stable")
        scaled = np.minimum(1.0, p[order] * factor * m / np.arange(1, m + 1))
        out = np.empty(m)
        out[order] = np.minimum.accumulate(scaled[::-1])[::-1]
        return out
    order = np.argsort(p, kind="stable")
    if method == "holm-sidak":
        with np.errstate(divide="ignore"):
            scaled = np.minimum(1.0, -np.expm1((m - np.arange(m)) * np.log1p(-p[order])))
    else:
        scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.maximum.accumulate(scaled)
    return out


def tukey_hsd(
    values,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = DEFAULT_SEED,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Randomised Tukey HSD p-values of every pair of systems: ``values`` is n queries x m systems.

    Returns the symmetric m x m matrix of p-values (1 on the diagonal); see the module docstring.
    """
    check_permutations(permutations)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ConfigError(f"Tukey HSD needs a queries x systems matrix with at least two systems, got {x.shape}")
    if not np.isfinite(x).all():
        raise ConfigError("Tukey HSD: per-query values must be finite numbers")
    n, m = x.shape
    means = x.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    scale = max(float(np.abs(x).mean()) if x.size else 0.0, 1e-300)
    threshold = observed - _REL_TOL * np.maximum(observed, scale)
    gen = rng if rng is not None else np.random.default_rng(seed)
    hits = np.zeros((m, m), dtype=np.int64)
    rows = max(1, (_CHUNK * 20) // max(n * m, 1))
    done = 0
    while done < permutations:
        size = min(rows, permutations - done)
        order = gen.random((size, n, m)).argsort(axis=2)
        shuffled = np.take_along_axis(np.broadcast_to(x, (size, n, m)), order, axis=2)
        pm = shuffled.mean(axis=1)
        ranges = pm.max(axis=1) - pm.min(axis=1)
        hits += (ranges[:, None, None] >= threshold[None, :, :]).sum(axis=0)
        done += size
    p = (1 + hits) / (1 + permutations)
    np.fill_diagonal(p, 1.0)
    return p


def win_tie_loss(a, b, eps: float = 0.0) -> tuple[int, int, int]:
    """Queries where ``b`` beats, ties, and loses to ``a`` (|b - a| <= eps is a tie)."""
    d = paired(a, b)
    return int((d > eps).sum()), int((np.abs(d) <= eps).sum()), int((d < -eps).sum())


@dataclass(frozen=True)
class Comparison:
    """One run against the baseline on one measure."""

    measure: str
    run: str
    baseline: str
    n_queries: int
    mean: float
    baseline_mean: float
    delta: float
    t: float
    p_ttest: float
    p_permutation: float
    permutation_exact: bool
    p_adjusted: float
    wins: int
    ties: int
    losses: int
    ci_low: float = math.nan  # bootstrap interval of delta (intervals.bootstrap_ci)
    ci_high: float = math.nan
    d_z: float = math.nan  # effect size: mean(d) / sd(d, ddof=1)
    p_tukey: float | None = None  # randomised Tukey HSD (all-pairs families only)
    p_wilcoxon: float = math.nan  # Wilcoxon signed-rank test (scipy.stats.wilcoxon's defaults)
    p_sign: float = math.nan  # exact sign test over the queries with a non-zero difference
    permutations: int = DEFAULT_PERMUTATIONS  # random sign flips drawn (when not exact)
    p_permutation_se: float = 0.0  # Monte-Carlo standard error of p_permutation (0 when exact)
    p_adjusted_se: float = 0.0  # that error carried to p_adjusted (0 for the t-test's)

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("t", "d_z"):
            if isinstance(d[k], float) and math.isinf(d[k]):  # JSON has no infinity
                d[k] = "inf" if d[k] > 0 else "-inf"
        return d


def compare_table(
    per_query: pd.DataFrame,
    baseline: str,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    correction: str = "holm",
    level: float = 0.95,
    resamples: int = 10_000,
    ci_method: str = "percentile",
    *,
    work: Workspace = NO_WORKSPACE,
) -> list[Comparison]:
    """Compare every run of a tidy table (run, query_id, measure, value) with ``baseline``.

    Each comparison also carries the paired bootstrap interval of its delta at ``level`` (``resamples``,
    ``ci_method``; a fresh ``default_rng(seed)`` per comparison, so an interval does not depend on which other
    runs are compared) and the effect size d_z (``intervals``).

    Per measure, runs are paired on the queries they share with the
    baseline (callers that need identical query sets check provenance before
    calling). One generator, ``default_rng(seed)``, is consumed in order
    measure by measure and run by run in the table's order, so the same call
    gives the same p-values.
    """
    needed = {"run", "query_id", "measure", "value"}
    if not needed <= set(per_query.columns):
        raise ConfigError(f"per-query table needs columns {sorted(needed)}, has {sorted(per_query.columns)}")
    check_ci_options(level, resamples, ci_method)
    runs = list(dict.fromkeys(per_query["run"].tolist()))
    if baseline not in runs:
        raise ConfigError(f"baseline {baseline!r} is not among the runs ({', '.join(runs)})")
    others = [r for r in runs if r != baseline]
    rng = np.random.default_rng(seed)
    out: list[Comparison] = []
    for measure in dict.fromkeys(per_query["measure"].tolist()):
        wide = per_query[per_query["measure"] == measure].pivot(index="query_id", columns="run", values="value")
        rows = []
        for run in others:
            pair = wide[[baseline, run]].dropna()
            a, b = pair[baseline].to_numpy(), pair[run].to_numpy()
            t, p_t = paired_ttest(a, b)
            p_perm, exact = permutation_test(a, b, permutations=permutations, rng=rng, work=work)
            w, ti, lo = win_tie_loss(a, b)
            if len(a):
                ci, dz = paired_interval(a, b, level, resamples, ci_method, seed, work=work)
                ci_low, ci_high = ci.low, ci.high
            else:
                ci_low = ci_high = dz = math.nan
            rows.append(
                {
                    "measure": measure,
                    "run": run,
                    "baseline": baseline,
                    "n_queries": len(a),
                    "mean": float(b.mean()) if len(b) else 0.0,
                    "baseline_mean": float(a.mean()) if len(a) else 0.0,
                    "delta": float((b - a).mean()) if len(a) else 0.0,
                    "t": float(t),
                    "p_ttest": p_t,
                    "p_permutation": p_perm,
                    "permutation_exact": exact,
                    "permutations": permutations,
                    "p_permutation_se": mc_se(p_perm, permutations, exact),
                    "wins": w,
                    "ties": ti,
                    "losses": lo,
                    "ci_low": ci_low,
                    "ci_high": ci_high,
                    "d_z": dz,
                    "p_wilcoxon": wilcoxon_test(a, b),
                    "p_sign": sign_test(a, b),
                }
            )
        adjusted = adjust([r["p_permutation"] for r in rows], correction)
        out += [
            Comparison(
                p_adjusted=float(pa_), p_adjusted_se=scaled_se(r["p_permutation"], pa_, r["p_permutation_se"]), **r
            )
            for r, pa_ in zip(rows, adjusted)
        ]
    return out


def comparability(provenances: dict[str, dict], query_sets: dict[str, set[str]], baseline: str) -> dict[str, tuple]:
    """Why results cannot be compared with the baseline: {field: (baseline's value, other's value)}.

    Checks the provenance fields that change a number (``evaluate.COMPARABLE_FIELDS``
    plus the qrels file) and the set of evaluated queries (a paired test needs
    the same queries on both sides). Empty when everything agrees.
    """
    from toolkit.evaluation.evaluate import provenance_differences

    diff: dict[str, tuple] = {}
    base_q = query_sets[baseline]
    for run, prov in provenances.items():
        if run == baseline:
            continue
        for field, (x, y) in provenance_differences(provenances[baseline], prov).items():
            diff[f"{field} ({baseline} vs {run})"] = (x, y)
        q = query_sets[run]
        if q != base_q:
            only_base, only_run = sorted(base_q - q), sorted(q - base_q)

            def show(ids: list[str]) -> str:
                return ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")

            diff[f"evaluated queries ({baseline} vs {run})"] = (
                f"{len(base_q)} queries" + (f", {len(only_base)} not in {run}: {show(only_base)}" if only_base else ""),
                f"{len(q)} queries" + (f", {len(only_run)} not in {baseline}: {show(only_run)}" if only_run else ""),
            )
    return diff
