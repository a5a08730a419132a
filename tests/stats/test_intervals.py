"""Bootstrap intervals, d_z, corrections (bh), families (all pairs, Tukey HSD) and identical runs.

Oracles: scipy.stats.bootstrap (the same resamples drawn from the same generator, so the ends agree to the last
bits), statsmodels' multipletests, a plain-Python Tukey HSD, hand-computed cases.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from needs import required
from scipy import stats

from toolkit.errors import ConfigError
from toolkit.stats.intervals import bootstrap_ci, effect_size, paired_interval
from toolkit.stats.paired import compare_runs, identical_runs
from toolkit.stats.significance import adjust, tukey_hsd


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize(("n", "level", "resamples", "seed"), [(43, 0.95, 10_000, 7), (12, 0.9, 3_000, 1)])
def test_bootstrap_equals_scipy(method, n, level, resamples, seed):
    gen = np.random.default_rng(100 + n)
    a = gen.random(n)
    b = np.clip(a + gen.normal(0.03, 0.15, n), 0, 1)
    ours, dz = paired_interval(a, b, level, resamples, method, seed)
    theirs = stats.bootstrap(
        (b, a),
        lambda x, y, axis=-1: np.mean(x - y, axis=axis),
        paired=True,
        vectorized=True,
        confidence_level=level,
        n_resamples=resamples,
        method=method,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    assert ours.low == pytest.approx(theirs.low, rel=1e-12, abs=1e-15)
    assert ours.high == pytest.approx(theirs.high, rel=1e-12, abs=1e-15)
    d = b - a
    assert dz == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-14)
    # another seed moves the interval: the comparison above can fail
    other = bootstrap_ci(d, level, resamples, method, seed + 1)
    assert (other.low, other.high) != (ours.low, ours.high)


def test_bootstrap_large_sample_is_chunked_like_one_draw():
    d = np.random.default_rng(5).normal(0, 1, 3000)  # 3000 x 1000 indices: drawn in several chunks
    ours = bootstrap_ci(d, 0.95, 1000, "percentile", 3)
    theirs = stats.bootstrap((d,), np.mean, n_resamples=1000, method="percentile", rng=np.random.default_rng(3))
    assert (ours.low, ours.high) == pytest.approx(tuple(theirs.confidence_interval), rel=1e-12)


def test_effect_size_edges_and_constant_interval():
    assert effect_size([0.1, 0.3]) == pytest.approx(0.2 / math.sqrt(0.02))
    assert effect_size([0, 0, 0]) == 0.0 and effect_size([0.2, 0.2]) == math.inf and math.isnan(effect_size([1]))
    ci = bootstrap_ci([0.25] * 5, method="bca")
    assert (ci.low, ci.high) == (0.25, 0.25)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1])
def test_level_outside_unit_interval_is_an_error(level):
    with pytest.raises(ConfigError, match="strictly between 0 and 1"):
        bootstrap_ci([0.1, 0.2], level)


def test_bh_holm_bonferroni_equal_statsmodels():
    multitest = required(
        "statsmodels.stats.multitest", "statsmodels is the oracle for the corrections (pip install .[test])"
    )
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.005, 0.04, 0.5])
    for ours, theirs in (("holm", "holm"), ("bonferroni", "bonferroni"), ("bh", "fdr_bh")):
        assert adjust(p, ours) == pytest.approx(multitest.multipletests(p, method=theirs)[1], abs=1e-15)
    # by hand, BH on (0.01, 0.04, 0.03): sorted 0.01*3/1, 0.03*3/2, 0.04*3/3 -> min from the top: 0.03, 0.04, 0.04
    assert adjust([0.01, 0.04, 0.03], "bh") == pytest.approx([0.03, 0.04, 0.04])


def _tukey_by_hand(x: np.ndarray, perms: list[np.ndarray]) -> np.ndarray:
    """Plain Python: the same permutations (one per query per draw), max - min of the permuted means."""
    n, m = x.shape
    means = [sum(x[q][j] for q in range(n)) / n for j in range(m)]
    ranges = []
    for order in perms:
        pm = [sum(x[q][order[q][j]] for q in range(n)) / n for j in range(m)]
        ranges.append(max(pm) - min(pm))
    p = np.ones((m, m))
    for i, j in itertools.permutations(range(m), 2):
        obs = abs(means[i] - means[j])
        p[i, j] = (1 + sum(r >= obs - 1e-9 * max(obs, 1e-300) for r in ranges)) / (1 + len(perms))
    return p


def test_tukey_hsd_equals_plain_python_with_same_shuffles():
    x = np.random.default_rng(2).random((9, 4))
    x[:, 3] += 0.4  # one clearly better system
    ours = tukey_hsd(x, permutations=300, seed=11)
    gen = np.random.default_rng(11)
    orders = gen.random((300, 9, 4)).argsort(axis=2)
    assert ours == pytest.approx(_tukey_by_hand(x, list(orders)), abs=1e-15)
    assert ours[0, 3] < 0.05 and ours[0, 1] > 0.05 and (ours == ours.T).all()


def _tidy(values: dict[str, list[float]], measure: str = "m") -> pd.DataFrame:
    rows = [(r, f"q{i}", measure, v) for r, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows, columns=["run", "query_id", "measure", "value"])


def test_identical_runs_left_out_and_named():
    base = [0.1, 0.5, 0.3, 0.7, 0.2, 0.4]
    t = _tidy({"b": base, "x": [v + 0.1 for v in base], "copy": base, "x2": [v + 0.1 for v in base]})
    assert identical_runs(t, ["b"]) == {"copy": "b", "x2": "x"}
    per_query = {r: g.drop(columns="run") for r, g in t.groupby("run", sort=False)}
    prov = {r: {} for r in per_query}
    res = compare_runs(per_query, prov, ["b"], ["m"], permutations=200)
    assert res.doc["identical"] == {"copy": "b", "x2": "x"}
    assert [c.run for c in res.tests] == ["x"]  # a family of one test: Holm leaves it as it is
    assert res.tests[0].p_adjusted == res.tests[0].p_permutation
    with pytest.raises(ConfigError, match="at least two distinct runs; copy is identical to b"):
        compare_runs({"b": per_query["b"], "copy": per_query["copy"]}, {"b": {}, "copy": {}}, ["b"], ["m"])


def test_all_pairs_family_with_tukey():
    gen = np.random.default_rng(4)
    vals = {r: list(gen.random(15) + shift) for r, shift in (("a", 0), ("b", 0.05), ("c", 0.5))}
    t = _tidy(vals)
    per_query = {r: g.drop(columns="run") for r, g in t.groupby("run", sort=False)}
    prov = {r: {} for r in per_query}
    res = compare_runs(
        per_query, prov, ["a"], ["m"], family="all-pairs", test="tukey", permutations=500, correction="holm"
    )
    pairs = {(c.baseline, c.run) for c in res.tests}
    assert pairs == {("a", "b"), ("a", "c"), ("b", "c")}
    want = tukey_hsd(np.array([vals["a"], vals["b"], vals["c"]]).T, permutations=500, seed=42)
    by = {(c.baseline, c.run): c for c in res.tests}
    assert by[("a", "c")].p_tukey == pytest.approx(want[0, 2]) and by[("a", "c")].p_adjusted == by[("a", "c")].p_tukey
    assert by[("b", "c")].p_adjusted < 0.05 < by[("a", "b")].p_adjusted
    assert "Tukey" in res.doc["tests"]["correction"] and res.doc["tests"]["family"] == "all-pairs"
    assert set(res.doc["results_by_baseline"]) == {"a", "b"}
    # the interval and d_z of every test are those of its pair alone, queries in the table's (sorted id) order
    order = sorted(range(15), key=lambda i: f"q{i}")
    ci, dz = paired_interval(
        [vals["b"][i] for i in order], [vals["c"][i] for i in order], 0.95, 10_000, "percentile", 42
    )
    assert (by[("b", "c")].ci_low, by[("b", "c")].ci_high, by[("b", "c")].d_z) == (ci.low, ci.high, dz)
    with pytest.raises(ConfigError, match="family='all-pairs'"):
        compare_runs(per_query, prov, ["a"], ["m"], test="tukey")


def test_compare_json_carries_interval_effect_size_and_raw_p(cli, tmp_path):
    qrels = "".join(f"{q} 0 d{q}{i} {int(i < 2)}\n" for q in range(1, 9) for i in range(4))
    (tmp_path / "qrels.txt").write_text(qrels)

    def run(name, good):
        lines = []
        for q in range(1, 9):
            order = [0, 1, 2, 3] if q in good else [2, 3, 0, 1]
            lines += [f"{q} Q0 d{q}{i} {r} {10 - r} t\n" for r, i in enumerate(order, 1)]
        (tmp_path / name).write_text("".join(lines))
        return str(tmp_path / name)

    base, sys_ = run("base.txt", {1}), run("sys.txt", {1, 2, 3, 4, 5})
    res = cli("compare", "--qrels", tmp_path / "qrels.txt", base, sys_, "-m", "P.2", "--format", "json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["results"]["P_2"][sys_]
    d = np.array([0, 1, 1, 1, 1, 0, 0, 0], dtype=float)  # P@2 goes 0 -> 1 on queries 2..5
    ci = stats.bootstrap((d,), np.mean, n_resamples=10_000, rng=np.random.default_rng(42)).confidence_interval
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert r["d_z"] == pytest.approx(0.5 / d.std(ddof=1)) and r["p_permutation"] == r["p_adjusted"]
    bad = cli("compare", "--qrels", tmp_path / "qrels.txt", base, sys_, "--ci", "1.2")
    assert bad.exit_code == 2 and "strictly between 0 and 1" in bad.output
    text = cli("compare", "--qrels", tmp_path / "qrels.txt", base, sys_, "-m", "P.2", "--ci-method", "bca").output
    assert "interval: paired bootstrap bca, 0.95, 10000 resamples, seed 42" in text
    assert (
        "+0.5000 [0.1250, 0.8750], d_z 0.94, p_adj 0.125: no significant difference (the uncorrected interval excludes 0)"
        in text
    )


def test_bootstrap_means_of_equals_one_call_per_vector():
    """One draw of indices shared by vectors of one length gives each vector's means to the last bit."""
    import numpy as np

    from toolkit.data.workspace import Workspace
    from toolkit.stats.intervals import bootstrap_ci, bootstrap_means, bootstrap_means_of, prime_bootstrap

    gen = np.random.default_rng(3)
    xs = [gen.normal(size=300), gen.normal(size=300), gen.normal(size=17)]
    together = bootstrap_means_of(xs, 2_000, 11)
    for x, means in zip(xs, together):
        assert np.array_equal(means, bootstrap_means(x, 2_000, np.random.default_rng(11)))
    alone = [bootstrap_ci(x, resamples=2_000, seed=11) for x in xs]
    work = Workspace()
    prime_bootstrap(xs, 2_000, 11, work=work)
    assert [bootstrap_ci(x, resamples=2_000, seed=11, work=work) for x in xs] == alone


@pytest.mark.parametrize("n", [63, 64, 65, 1_000, 20_000])
@pytest.mark.parametrize("count", [2, 3, 5])
def test_bootstrap_means_of_pairs_equal_the_plain_means(n, count):
    """Vectors gathered two by two (side by side, each row summed along its column) give ``d[idx].mean(axis=-1)``
    of the indices default_rng(seed) draws, to the last bit, odd counts included."""
    import numpy as np

    from toolkit.stats.intervals import bootstrap_means_of

    gen = np.random.default_rng(n + count)
    xs = [gen.normal(size=n) * 10.0 ** gen.integers(-3, 4) for _ in range(count)]
    resamples = 40 if n > 1_000 else 500
    idx = np.random.default_rng(5).integers(0, n, (resamples, n))
    for x, means in zip(xs, bootstrap_means_of(xs, resamples, 5)):
        assert np.array_equal(means, x[idx].mean(axis=-1))
