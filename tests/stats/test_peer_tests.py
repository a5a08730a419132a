"""What peers have: the Wilcoxon signed-rank and sign tests (scipy), statsmodels' corrections (multipletests).

Each p-value is checked against scipy on the same per-query differences, the sign test also against a binomial
sum written out here, the Wilcoxon test against an enumeration of every sign assignment of the ranks; each
correction against ``statsmodels.stats.multitest.multipletests`` on seeded random p-value vectors (with ties,
zeros and ones) and on hypothesis-drawn ones; then through ``twostage compare --test`` and ``ts.compare``.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests

from toolkit.errors import ConfigError
from toolkit.stats.significance import CORRECTIONS, TESTS, adjust, compare_table, sign_test, wilcoxon_test

# Per-query values with ties and equal queries (as real runs have).
A = np.array([0.50, 0.20, 0.90, 0.00, 0.35, 0.60, 0.61, 0.10, 0.75, 0.40, 0.33, 0.80])
B = np.array([0.55, 0.20, 0.95, 0.10, 0.30, 0.70, 0.61, 0.25, 0.70, 0.52, 0.40, 0.80])

#: our name -> statsmodels' method name
STATSMODELS = {
    "holm": "holm",
    "bonferroni": "bonferroni",
    "bh": "fdr_bh",
    "fdr_bh": "fdr_bh",
    "fdr_by": "fdr_by",
    "holm-sidak": "holm-sidak",
    "sidak": "sidak",
}


# ------------------------------------------------------------------ sign test
def test_sign_test_by_hand():
    # d = B - A: 7 up (0.05, 0.05, 0.10, 0.10, 0.15, 0.12, 0.07), 2 down (-0.05, -0.05), 3 ties (left out)
    # p = 2 * P(K <= 2), K ~ Bin(9, 1/2) = 2 * (1 + 9 + 36) / 512 = 92 / 512
    assert sign_test(A, B) == pytest.approx(92 / 512, rel=1e-12)
    assert sign_test(A, B) == pytest.approx(stats.binomtest(7, 9, 0.5).pvalue, rel=1e-12)
    assert sign_test(A, A) == 1.0  # no non-tied query: nothing to test
    assert sign_test([0.1], [0.2]) == 1.0  # one query up: 2 * P(K <= 0) = 2 * 1/2
    assert sign_test([0.1, 0.2, 0.3, 0.4, 0.5], [0.2] * 5) == pytest.approx(stats.binomtest(1, 4, 0.5).pvalue)


@given(st.lists(st.sampled_from([-0.3, -0.1, 0.0, 0.05, 0.2, 0.5]), min_size=1, max_size=80))
@settings(max_examples=80, deadline=None)
def test_sign_test_equals_binomtest(diffs):
    d = np.array(diffs)
    k, n = int((d > 0).sum()), int((d != 0).sum())
    expected = 1.0 if n == 0 else stats.binomtest(k, n, 0.5).pvalue
    assert sign_test(np.zeros_like(d), d) == pytest.approx(expected, rel=1e-10, abs=1e-300)


# ------------------------------------------------------------------ Wilcoxon
def _wilcoxon_enumerated(d: np.ndarray) -> float:
    """Exact two-sided p of the signed-rank statistic min(W+, W-), zeros dropped, no ties: every one of the
    2^n sign assignments of the ranks 1..n counted."""
    d = d[d != 0]
    n = len(d)
    ranks = stats.rankdata(np.abs(d))
    w_plus = ranks[d > 0].sum()
    total = n * (n + 1) / 2
    observed = min(w_plus, total - w_plus)
    hits = 0
    for signs in itertools.product((0, 1), repeat=n):
        w = sum(r for r, s in zip(ranks, signs) if s)
        if min(w, total - w) <= observed + 1e-9:
            hits += 1
    return hits / 2**n


def test_wilcoxon_by_enumeration_and_scipy():
    d = np.array([0.12, -0.03, 0.25, 0.08, -0.11, 0.31, 0.04, 0.19, 0.0, -0.07])  # one zero, no tied |d|
    base = np.full_like(d, 0.4)
    p = wilcoxon_test(base, base + d)
    assert p == pytest.approx(_wilcoxon_enumerated(d), rel=1e-9)
    assert p == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12)
    # ties in |d| and zeros: scipy's defaults (normal approximation) on the differences, as they are
    assert wilcoxon_test(A, B) == pytest.approx(stats.wilcoxon(B - A).pvalue, rel=1e-12)
    assert wilcoxon_test(A, A) == 1.0  # every difference 0: nothing to test


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0]), st.floats(0, 1, allow_nan=False)),
        min_size=1,
        max_size=70,
    )
)
@settings(max_examples=60, deadline=None)
def test_wilcoxon_equals_scipy(pairs):
    a = np.array([x for x, _ in pairs])
    b = np.array([y for _, y in pairs])
    d = b - a
    if not np.any(d != 0):
        assert wilcoxon_test(a, b) == 1.0
        return
    with warnings.catch_warnings():  # scipy warns on few non-zero differences
        warnings.simplefilter("ignore")
        ref = stats.wilcoxon(d).pvalue
    assert wilcoxon_test(a, b) == pytest.approx(ref, rel=1e-10, abs=1e-300)


# ------------------------------------------------------------------ corrections
def test_every_correction_is_offered():
    assert set(STATSMODELS) | {"none"} == set(CORRECTIONS)
    assert CORRECTIONS[0] == "holm"  # the default


@pytest.mark.parametrize("method", sorted(STATSMODELS))
def test_corrections_equal_statsmodels_on_random_vectors(method):
    rng = np.random.default_rng(20260)
    for size in (1, 2, 3, 5, 10, 37, 200):
        for _ in range(20):
            p = rng.uniform(0, 1, size) ** rng.uniform(0.3, 4)  # from all-small to all-large
            if size > 3:  # ties, exact zeros and ones, as rounded and permutation p-values have
                p[rng.integers(0, size, 2)] = p[0]
                p[rng.integers(0, size)] = 1.0
                p[rng.integers(0, size)] = 0.0
            ours = adjust(p, method)
            with np.errstate(divide="ignore"):  # statsmodels' Sidak forms take log1p(-1) for p = 1
                ref = multipletests(p, method=STATSMODELS[method])[1]
            assert ours == pytest.approx(ref, rel=1e-12, abs=1e-15), (method, p)


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=40), st.sampled_from(sorted(STATSMODELS)))
@settings(max_examples=200, deadline=None)
def test_corrections_equal_statsmodels_property(pvalues, method):
    p = np.array(pvalues)
    with np.errstate(divide="ignore"):
        ref = multipletests(p, method=STATSMODELS[method])[1]
    assert adjust(p, method) == pytest.approx(ref, rel=1e-12, abs=1e-15)


def test_corrections_by_hand():
    p = np.array([0.01, 0.04, 0.03])
    # Sidak: 1 - (1 - p)^3
    assert adjust(p, "sidak") == pytest.approx(1 - (1 - p) ** 3)
    # Holm-Sidak, sorted 0.01, 0.03, 0.04: 1 - 0.99^3, max(that, 1 - 0.97^2), max(..., 1 - 0.96)
    first = 1 - 0.99**3
    second = max(first, 1 - 0.97**2)
    third = max(second, 0.04)
    assert adjust(p, "holm-sidak") == pytest.approx([first, third, second])
    # Benjamini-Yekutieli: BH with every p times 1 + 1/2 + 1/3 = 11/6; BH of (0.01, 0.03, 0.04) is 0.03, 0.04, 0.04
    assert adjust(p, "fdr_by") == pytest.approx(np.array([0.03, 0.04, 0.04]) * 11 / 6)
    assert adjust(p, "fdr_bh") == pytest.approx(adjust(p, "bh"))
    with pytest.raises(ConfigError, match="fdr_tsbh"):
        adjust(p, "fdr_tsbh")


# ------------------------------------------------------------------ in compare
def _table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 30)
    runs = {"base": base, "up": np.clip(base + rng.normal(0.08, 0.1, 30), 0, 1), "same": base.copy()}
    runs["same"][:4] += 0.01
    rows = [(r, f"q{i}", "m", float(v)) for r, vals in runs.items() for i, v in enumerate(vals)]
    return pd.DataFrame(rows, columns=["run", "query_id", "measure", "value"])


def test_compare_table_carries_wilcoxon_and_sign():
    t = _table()
    wide = t.pivot(index="query_id", columns="run", values="value")
    for c in compare_table(t, "base", permutations=200, resamples=200):
        d = (wide[c.run] - wide["base"]).to_numpy()
        assert c.p_wilcoxon == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12)
        assert c.p_sign == pytest.approx(stats.binomtest(int((d > 0).sum()), int((d != 0).sum()), 0.5).pvalue)
        assert c.as_dict()["p_wilcoxon"] == c.p_wilcoxon and c.as_dict()["p_sign"] == c.p_sign


def test_tests_constant_names_the_fields():
    from toolkit.stats.significance import Comparison

    fields = set(Comparison.__dataclass_fields__)
    assert {"wilcoxon", "sign"} <= set(TESTS) and set(TESTS.values()) <= fields


@pytest.fixture(scope="module")
def dl19(msmarco):
    """DL19 nDCG@10 per query of bm25, bm25-rm3 and tasb from pytrec_eval, the independent evaluator."""
    import pytrec_eval
    from oracles import pytrec_inputs

    from toolkit.data.trec_io import read_qrels, read_run

    qrels = msmarco / "qrels.dl19-passage.txt"
    q = read_qrels(qrels)
    runs = {n: str(msmarco / "runs" / f"run.dl19.{n}.top100.txt") for n in ("bm25", "bm25-rm3", "tasb")}
    per = {}
    for n, path in runs.items():
        qq, rr = pytrec_inputs(q.frame, read_run(path).frame)
        res = pytrec_eval.RelevanceEvaluator(qq, {"ndcg_cut.10"}).evaluate(rr)
        per[n] = pd.Series({k: v["ndcg_cut_10"] for k, v in res.items()}).sort_index()
    return qrels, runs, per


@pytest.mark.parametrize("test,key", [("wilcoxon", "p_wilcoxon"), ("sign", "p_sign")])
@pytest.mark.parametrize("correction", ["holm-sidak", "fdr_by"])
def test_cli_compare_test_and_correction_on_dl19(dl19, cli, test, key, correction):
    qrels, runs, per = dl19
    args = [f"{n}={p}" for n, p in runs.items()]
    result = cli(
        "compare", "--qrels", qrels, *args, "-m", "ndcg_cut.10", "--test", test, "--correction", correction,
        "--permutations", "100", "--bootstrap", "100", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["tests"]["test"] == test and doc["tests"]["correction"] == correction
    assert key in doc["tests"]["correction_applies_to"]
    (res,) = doc["results"].values()  # the one measure, whatever its key's spelling
    x = per["bm25"]
    raw = []
    for n in ("bm25-rm3", "tasb"):
        d = (per[n].loc[x.index] - x).to_numpy()
        expected = (
            stats.wilcoxon(d).pvalue
            if test == "wilcoxon"
            else stats.binomtest(int((d > 0).sum()), int((d != 0).sum()), 0.5).pvalue
        )
        assert res[n][key] == pytest.approx(expected, rel=1e-9)
        raw.append(res[n][key])
    adjusted = multipletests(raw, method=correction)[1]
    assert [res["bm25-rm3"]["p_adjusted"], res["tasb"]["p_adjusted"]] == pytest.approx(adjusted, rel=1e-12)
    text = cli(
        "compare", "--qrels", qrels, *args, "-m", "ndcg_cut.10", "--test", test, "--correction", correction,
        "--permutations", "100", "--bootstrap", "100",
    ).output  # fmt: skip
    assert f"correction: {correction} (on {key}" in text
    column = {"p_wilcoxon": "p_wilcox", "p_sign": "p_sign"}[key]
    assert column in text.splitlines()[3]
    tasb_line = next(ln for ln in text.splitlines() if ln.split()[1:2] == ["tasb"])
    shown = tasb_line.split()[6]  # measure run mean delta p_ttest p_perm p_<test> p_adj W/T/L
    assert float(shown) == pytest.approx(res["tasb"][key], rel=0.06)


def test_library_compare_wilcoxon_and_legend(dl19):
    import toolkit as ts

    qrels, runs, per = dl19
    c = ts.compare(qrels, runs, measures="ndcg_cut.10", test="wilcoxon", correction="fdr_bh", permutations=50,
                   bootstrap=50)  # fmt: skip
    tests = c.tests.set_index("run")
    d = (per["tasb"] - per["bm25"]).to_numpy()
    assert tests.loc["tasb", "p_wilcoxon"] == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-9)
    raw = tests.loc[["bm25-rm3", "tasb"], "p_wilcoxon"].to_numpy()
    assert tests.loc[["bm25-rm3", "tasb"], "p_adjusted"].to_numpy() == pytest.approx(
        multipletests(raw, method="fdr_bh")[1]
    )
    assert "Wilcoxon signed-rank test" in c.legend and "fdr_bh correction" in c.legend
    table = c.table.set_index("name")
    (m,) = c.measures
    assert table.loc["tasb", f"{m} p-value"] == tests.loc["tasb", "p_wilcoxon"]
    with pytest.raises(ConfigError, match="test must be one of"):
        ts.compare(qrels, runs, measures="ndcg_cut.10", test="mannwhitney")
    assert not math.isnan(tests.loc["tasb", "p_sign"])


def test_cli_refuses_unknown_test_and_correction(dl19, cli):
    qrels, runs, _ = dl19
    a, b = list(runs.values())[:2]
    bad = cli("compare", "--qrels", qrels, a, b, "--test", "mannwhitney")
    assert bad.exit_code == 2 and "wilcoxon" in bad.output and "sign" in bad.output
    bad = cli("compare", "--qrels", qrels, a, b, "--correction", "fdr_tsbh")
    assert bad.exit_code == 2 and "holm-sidak" in bad.output and "fdr_by" in bad.output


def test_the_numbers_docs_compare_shows(dl19):
    """docs/compare.md: DL19 nDCG@10, TAS-B vs BM25, p_wilcoxon 6.0e-06 and p_sign 1.7e-04 (W/T/L 34/0/9)."""
    _, _, per = dl19
    d = (per["tasb"] - per["bm25"]).to_numpy()
    assert (int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum())) == (34, 0, 9)
    assert f"{wilcoxon_test(per['bm25'].to_numpy(), per['tasb'].to_numpy()):.1e}" == "6.0e-06"
    assert f"{sign_test(per['bm25'].to_numpy(), per['tasb'].to_numpy()):.1e}" == "1.7e-04"


def test_options_from_the_library_constants():
    from toolkit.cli import main

    test = next(p for p in main.commands["compare"].params if p.name == "test")
    assert list(test.type.choices) == list(TESTS) and test.default == "randomization"
    for command in ("compare", "diagnose", "agreement"):
        correction = next(p for p in main.commands[command].params if p.name == "correction")
        assert list(correction.type.choices) == list(CORRECTIONS)


def test_compare_html_names_the_chosen_test(dl19, cli, tmp_path):
    qrels, runs, _ = dl19
    out = tmp_path / "cmp"
    args = [f"{n}={p}" for n, p in list(runs.items())[:2]]
    result = cli("compare", "--qrels", qrels, *args, "--test", "sign", "--correction", "sidak", "--permutations", "50",
                 "--bootstrap", "50", "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert "sidak correction of the sign-test p-values" in html
    assert json.loads((out / "compare.json").read_text())["tests"]["test"] == "sign"
