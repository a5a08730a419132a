"""Paired tests against scipy on the same per-query values; Holm/Bonferroni by hand; win/tie/loss."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats

from toolkit.errors import ConfigError
from toolkit.stats.significance import adjust, compare_table, paired_ttest, permutation_test, win_tie_loss

# Per-query nDCG-like values with ties and equal queries (as real runs have).
A = np.array([0.50, 0.20, 0.90, 0.00, 0.35, 0.60, 0.61, 0.10, 0.75, 0.40, 0.33, 0.80])
B = np.array([0.55, 0.20, 0.95, 0.10, 0.30, 0.70, 0.61, 0.25, 0.70, 0.52, 0.40, 0.80])


def _mean_diff(x, y, axis=0):
    return np.mean(x - y, axis=axis)


def test_ttest_equals_scipy_ttest_rel():
    t, p = paired_ttest(A, B)
    ref = stats.ttest_rel(B, A)
    assert t == pytest.approx(ref.statistic, rel=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-10)


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0]), st.floats(0, 1, allow_nan=False)),
        min_size=3,
        max_size=60,
    )
)
@settings(max_examples=60, deadline=None)
def test_ttest_property_equals_scipy(pairs):
    a = np.array([x for x, _ in pairs])
    b = np.array([y for _, y in pairs])
    assume(np.ptp(b - a) >= 1e-9)  # scipy gives NaN without variance; those edge cases are tested below
    t, p = paired_ttest(a, b)
    ref = stats.ttest_rel(b, a)
    assert p == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-14)
    assert t == pytest.approx(ref.statistic, rel=1e-8)


@given(st.floats(0, 60, allow_nan=False), st.integers(1, 10_000))
@settings(max_examples=300, deadline=None)
def test_ttest_tail_is_scipy_t_sf_to_the_bit(t, df):
    """paired_ttest takes its tail from scipy.special.stdtr (no scipy.stats import): the very value of
    2 * scipy.stats.t.sf(|t|, df), which earlier versions computed, for every t and df."""
    from scipy.special import stdtr

    assert 2.0 * stdtr(df, -t) == 2.0 * stats.t.sf(t, df=df)


def test_ttest_edge_cases():
    assert paired_ttest(A, A) == (0.0, 1.0)  # no difference at all
    t, p = paired_ttest(A, A + 0.1)  # every query up by the same amount
    assert p == 0.0 and t == np.inf
    assert paired_ttest([0.3], [0.5]) == (0.0, 1.0)  # one query: nothing to test


def test_exact_permutation_equals_scipy():
    # 12 queries: 4096 sign vectors, enumerated by both.
    p, exact = permutation_test(A, B, permutations=10_000, seed=1)
    ref = stats.permutation_test(
        (B, A), _mean_diff, permutation_type="samples", vectorized=True, n_resamples=10_000, alternative="two-sided"
    )
    assert exact
    assert p == pytest.approx(ref.pvalue, rel=1e-12)


def _exact_sign_flip_p(a, b) -> float:
    """The two-sided sign-flip p-value with exact rational arithmetic: every assignment whose
    |sum of differences| is >= the observed one counts (no floating-point noise near 0)."""
    from fractions import Fraction
    from itertools import product

    d = [Fraction(str(y)) - Fraction(str(x)) for x, y in zip(a, b)]
    observed = abs(sum(d))
    hits = sum(abs(sum(s * v for s, v in zip(signs, d))) >= observed for signs in product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.2, 0.5, 1.0]), st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0])),
        min_size=2,
        max_size=10,
    )
)
@example([(0.2, 1.0), (0.5, 0.2), (1.0, 0.0), (0.2, 0.7)])  # mean difference 0, computed as -1.4e-17
@example([(0.0, 0.2), (0.0, 0.5), (0.2, 0.0), (1.0, 0.5)])  # ditto; scipy's float sums call it 0.875
@settings(max_examples=40, deadline=None)
def test_exact_permutation_property_equals_exact_enumeration(pairs):
    a = np.array([x for x, _ in pairs])
    b = np.array([y for _, y in pairs])
    p, exact = permutation_test(a, b, permutations=2 ** len(a))
    assert exact
    assert p == pytest.approx(_exact_sign_flip_p(a, b), rel=1e-12)


def test_sampled_permutation_close_to_scipy_and_seeded():
    rng = np.random.default_rng(7)
    a = rng.uniform(size=40)
    b = np.clip(a + rng.normal(0.03, 0.15, size=40), 0, 1)
    p1, exact = permutation_test(a, b, permutations=20_000, seed=123)
    p2, _ = permutation_test(a, b, permutations=20_000, seed=123)
    p3, _ = permutation_test(a, b, permutations=20_000, seed=124)
    assert not exact
    assert p1 == p2  # same seed, same p
    assert p1 != p3  # the seed is really used
    ref = stats.permutation_test(
        (b, a),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=20_000,
        alternative="two-sided",
        rng=np.random.default_rng(5),
    )
    # Two independent Monte Carlo estimates: standard error ~ sqrt(p(1-p)/N) < 0.004.
    assert abs(p1 - ref.pvalue) < 0.015
    assert 1 / 20_001 <= p1 <= 1


def test_sampled_permutation_never_zero_and_generator_wins_over_seed():
    a = np.zeros(30)
    b = np.ones(30)
    p, exact = permutation_test(a, b, permutations=999, seed=0)
    assert not exact and p == pytest.approx(1 / 1000)  # only the observed assignment is as extreme
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    x = np.linspace(0, 1, 30)
    y = x[::-1]
    assert permutation_test(x, y, 500, seed=99, rng=g1) == permutation_test(x, y, 500, seed=1, rng=g2)


def test_permutation_rejects_bad_input():
    with pytest.raises(ConfigError, match="same length"):
        permutation_test([1, 2], [1, 2, 3])
    with pytest.raises(ConfigError, match="permutations"):
        permutation_test([1, 2], [1, 2], permutations=0)
    with pytest.raises(ConfigError, match="finite"):
        paired_ttest([1.0, np.nan], [1.0, 2.0])


def test_corrections_equal_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(11)
    for n in (1, 2, 5, 17):
        p = rng.uniform(0, 0.2, size=n)
        for method in ("holm", "bonferroni"):
            assert adjust(p, method).tolist() == pytest.approx(multipletests(p, method=method)[1].tolist(), abs=1e-15)


def test_holm_hand_computed():
    # p sorted: 0.01 (x4) = 0.04; 0.02 (x3) = 0.06; 0.03 (x2) = 0.06; 0.04 (x1) = 0.04 -> running max 0.06
    p = [0.03, 0.01, 0.04, 0.02]
    assert adjust(p, "holm").tolist() == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert adjust(p, "bonferroni").tolist() == pytest.approx([0.12, 0.04, 0.16, 0.08])
    assert adjust([0.5, 0.3], "holm").tolist() == pytest.approx([0.6, 0.6])  # capped by monotonicity
    assert adjust([0.9, 0.8], "bonferroni").tolist() == [1.0, 1.0]  # capped at 1
    assert adjust([0.2], "holm").tolist() == [0.2]  # one comparison: unchanged
    assert adjust(p, "none").tolist() == p
    with pytest.raises(ConfigError, match="unknown correction"):
        adjust(p, "fdr_tsbh")  # statsmodels has it; twostage does not


def test_win_tie_loss():
    assert win_tie_loss(A, B) == (7, 3, 2)
    assert win_tie_loss(A, B, eps=0.06) == (5, 7, 0)


def test_compare_table_per_measure_family():
    rows = []
    for run, vals in (("base", A), ("x", B), ("y", A[::-1])):
        for i, v in enumerate(vals):
            rows.append((run, f"q{i}", "ndcg_cut_10", float(v)))
            rows.append((run, f"q{i}", "P_10", float(v > 0.4)))
    table = pd.DataFrame(rows, columns=["run", "query_id", "measure", "value"])
    before = table.copy()
    out = compare_table(table, "base", permutations=5000, seed=3, correction="holm")
    pd.testing.assert_frame_equal(table, before)  # input not modified
    assert [(c.measure, c.run) for c in out] == [
        ("ndcg_cut_10", "x"),
        ("ndcg_cut_10", "y"),
        ("P_10", "x"),
        ("P_10", "y"),
    ]
    nd = [c for c in out if c.measure == "ndcg_cut_10"]
    assert nd[0].delta == pytest.approx(np.mean(B - A))
    assert nd[0].p_ttest == pytest.approx(stats.ttest_rel(B, A).pvalue)
    from statsmodels.stats.multitest import multipletests

    holm = multipletests([c.p_permutation for c in nd], method="holm")[1]
    assert [c.p_adjusted for c in nd] == pytest.approx(holm.tolist())
    assert compare_table(table, "base", permutations=5000, seed=3) == out  # deterministic
    with pytest.raises(ConfigError, match="baseline"):
        compare_table(table, "nope")


def test_permutation_test_equals_one_matrix_product_per_batch():
    """The sign vectors multiplied a few rows at a time give the p-value of one product per batch of 2,000."""
    import numpy as np

    from toolkit.stats.significance import permutation_test

    gen = np.random.default_rng(5)
    for n, perms in ((300, 5_000), (1_001, 2_345)):
        a, b = gen.random(n), gen.random(n) + 0.01
        d = b - a
        threshold = abs(float(d.mean()))
        threshold -= 1e-9 * max(threshold, float(np.abs(d).mean()), 1e-300)
        rng, hits, done = np.random.default_rng(9), 0, 0
        while done < perms:
            size = min(2_000, perms - done)
            signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
            hits += int((np.abs(signs @ d) / n >= threshold).sum())
            done += size
        assert permutation_test(a, b, permutations=perms, seed=9) == ((1 + hits) / (1 + perms), False)


def test_primed_permutation_tests_equal_their_own_and_leave_the_same_state():
    """In a workspace, prime_permutations's one draw of signs gives each test's own p-value, and the
    generator a primed test is handed is left where its own draws leave it (the next test goes on alike)."""
    from toolkit.data.workspace import Workspace
    from toolkit.stats.significance import prime_permutations

    gen = np.random.default_rng(3)
    n = 1_001
    pairs = [(gen.random(n), gen.random(n) + s) for s in (0.0, 0.01, 0.02)]
    pairs.append((gen.random(7), gen.random(7)))  # exact: not primed, still its own
    pairs.append((gen.random(30), gen.random(30) + 0.1))  # another length: its own draw
    own = [(permutation_test(a, b, permutations=777, rng=np.random.default_rng(11)), None) for a, b in pairs]
    rng = np.random.default_rng(11)
    permutation_test(*pairs[0], 777, rng=rng)
    own_next = permutation_test(*pairs[1], permutations=777, rng=rng)
    work = Workspace()
    prime_permutations([b - a for a, b in pairs], 777, 11, work=work)
    primed = [
        (permutation_test(a, b, permutations=777, rng=np.random.default_rng(11), work=work), None) for a, b in pairs
    ]
    rng = np.random.default_rng(11)
    first = permutation_test(*pairs[0], 777, rng=rng, work=work)  # primed: rng moved on as its own draws move it
    assert permutation_test(*pairs[1], permutations=777, rng=rng, work=work) == own_next
    assert first == own[0][0]
    assert primed == own
    assert not primed[0][0][1] and primed[3][0][1]  # sampled; exact
