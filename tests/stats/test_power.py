"""``twostage power`` / ``ts.power`` against scipy's noncentral t and statsmodels' TTestPower; the tests'
calibration on A/A comparisons built from a real pair of DL19 runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from needs import required
from scipy import stats

import toolkit as ts
from toolkit.errors import ConfigError
from toolkit.stats.intervals import bootstrap_ci
from toolkit.stats.power import min_detectable_delta, power_analysis, queries_needed, ttest_power
from toolkit.stats.significance import paired_ttest, permutation_test, tukey_hsd


@pytest.mark.parametrize(("sd", "delta"), [(0.2, 0.05), (0.15, 0.02), (0.3, 0.1), (0.2, 0.2), (0.1, -0.03)])
def test_queries_needed_is_the_smallest_n_reaching_power(sd, delta):
    n = queries_needed(sd, delta, 0.05, 0.8)
    effect = abs(delta) / sd

    def nct_power(k):  # scipy directly: both tails of the noncentral t beyond the central t's critical value
        crit = stats.t.ppf(0.975, k - 1)
        nc = effect * np.sqrt(k)
        return stats.nct.sf(crit, k - 1, nc) + stats.nct.cdf(-crit, k - 1, nc)

    assert nct_power(n) >= 0.8 > nct_power(n - 1)
    smp = required("statsmodels.stats.power", "statsmodels is the oracle for the power analysis (pip install .[test])")
    assert n == int(np.ceil(smp.TTestPower().solve_power(effect_size=effect, alpha=0.05, power=0.8)))
    assert ttest_power(n, effect) == pytest.approx(smp.TTestPower().power(effect, n, 0.05), rel=1e-9)


def test_hand_values_and_min_detectable_delta():
    # Sakai's tables: sd 0.2 (a common nDCG value), delta 0.05 at alpha 0.05, power 0.8 -> 128 topics
    assert queries_needed(0.2, 0.05) == 128
    smp = required("statsmodels.stats.power", "statsmodels is the oracle for the power analysis (pip install .[test])")
    want = smp.TTestPower().solve_power(nobs=43, alpha=0.05, power=0.8) * 0.2
    assert min_detectable_delta(0.2, 43) == pytest.approx(want, rel=1e-7)
    r = power_analysis(sd=0.2, delta=min_detectable_delta(0.2, 43), n_queries=43)
    assert r.queries == 43 and r.power_at_hand == pytest.approx(0.8, abs=1e-8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sd": 0.2, "delta": 0.05, "alpha": 1.0}, "alpha must lie strictly between 0 and 1"),
        ({"sd": 0.2, "delta": 0.05, "power": 0.0}, "power must lie strictly between 0 and 1"),
        ({"sd": 0.0, "delta": 0.05}, "must be > 0"),
        ({"sd": 0.2, "delta": 0.0}, "non-zero"),
        ({"sd": 0.2}, "delta"),
        ({"differences": [0.1]}, "at least 2 paired queries"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        power_analysis(**kwargs)


@pytest.fixture(scope="module")
def dl19_pair(msmarco):
    runs = msmarco / "runs"
    a = ts.evaluate("dl19-passage", str(runs / "run.dl19.bm25.top100.txt"), "ndcg_cut.10", complete=True)
    b = ts.evaluate("dl19-passage", str(runs / "run.dl19.tasb.top100.txt"), "ndcg_cut.10", complete=True)
    pa, pb = a.per_query["ndcg_cut_10"], b.per_query["ndcg_cut_10"]
    return pa.to_numpy(), pb.loc[pa.index].to_numpy(), runs


def test_power_from_two_runs_cli_and_api(dl19_pair, cli):
    a, b, runs = dl19_pair
    d = b - a
    args = [str(runs / "run.dl19.bm25.top100.txt"), str(runs / "run.dl19.tasb.top100.txt")]
    res = cli("power", "--qrels", "dl19-passage", "-c", *args, "-m", "ndcg_cut.10", "--delta", "0.05")
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    want = queries_needed(float(d.std(ddof=1)), 0.05)
    assert lines[-1] == f"queries {want}" and f"queries_at_hand      {len(d)}" in res.stdout
    api = ts.power("dl19-passage", *args, measure="ndcg_cut.10", complete=True)
    assert api.sd == pytest.approx(d.std(ddof=1)) and api.observed_delta == pytest.approx(d.mean())
    assert api.delta == pytest.approx(abs(d.mean())) and api.n_queries == 43
    js = json.loads(cli("power", "--sd", "0.2", "--delta", "0.05", "--format", "json").stdout)
    assert js["queries"] == 128 and js["n_queries"] is None
    bad = cli("power", "--sd", "0.2")
    assert bad.exit_code == 2 and "--delta is needed" in bad.output
    assert cli("power", "--sd", "0.2", "--delta", "0.05", "--power", "1").exit_code == 2


def test_aa_calibration_false_positive_rates(dl19_pair):
    """A/A: for each query the two real values (bm25, tasb) go to "A" and "B" by a fair coin, so H0 holds by
    construction. Over 400 such comparisons, each test rejects at alpha = 0.05 in a share that must lie within
    the binomial 99.9 % interval of 400 draws at 0.05 (counts 8..34 of 400): a miscalibrated test (too liberal,
    or one that never rejects) fails."""
    a, b, _ = dl19_pair
    repeats, alpha = 400, 0.05
    lo_ok, hi_ok = stats.binom.ppf(0.0005, repeats, alpha), stats.binom.ppf(0.9995, repeats, alpha)
    gen = np.random.default_rng(2026)
    rejections = {"t": 0, "randomization": 0, "tukey": 0, "bootstrap interval excludes 0": 0}
    for i in range(repeats):
        swap = gen.random(len(a)) < 0.5
        x, y = np.where(swap, b, a), np.where(swap, a, b)
        rejections["t"] += paired_ttest(x, y)[1] < alpha
        rejections["randomization"] += permutation_test(x, y, permutations=400, seed=i)[0] < alpha
        rejections["tukey"] += tukey_hsd(np.column_stack([x, y]), permutations=400, seed=i)[0, 1] < alpha
        ci = bootstrap_ci(y - x, 1 - alpha, 1000, "percentile", seed=i)
        rejections["bootstrap interval excludes 0"] += ci.low > 0 or ci.high < 0
    for test, k in rejections.items():
        assert lo_ok <= k <= hi_ok, f"{test}: {k} of {repeats} A/A comparisons rejected (allowed {lo_ok}..{hi_ok})"
