"""Assessor agreement: kappa against scikit-learn / statsmodels / hand-computed values, Fleiss'
kappa against statsmodels, Kendall's tau against scipy, tau_ap against hand-computed examples, flipped pairs on
constructed per-query values, and ``twostage agreement`` end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from needs import lacking, required

from toolkit.cli import main
from toolkit.errors import NoCommonQueriesError
from toolkit.quality.assessor_agreement import (
    cohen_kappa,
    fleiss_kappa,
    kendall_tau,
    label_agreement,
    ranking_agreement,
    tau_ap,
)


def _judgments(rows):
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"]).astype({"relevance": "int64"})


def _random_labels(seed, n=300, k=4):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, k, n)
    noise = rng.integers(-1, 2, n) * (rng.random(n) < 0.4)
    y = np.clip(x + noise, 0, k - 1)
    return x.tolist(), y.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weights", [None, "linear"])
def test_cohen_kappa_matches_sklearn(seed, weights):
    metrics = required("sklearn.metrics", "scikit-learn is the oracle for Cohen's kappa (pip install .[test])")
    x, y = _random_labels(seed)
    ours = cohen_kappa(x, y, weights=weights, labels=[0, 1, 2, 3])
    theirs = metrics.cohen_kappa_score(x, y, weights=weights, labels=[0, 1, 2, 3])
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_cohen_kappa_matches_statsmodels():
    inter = required(
        "statsmodels.stats.inter_rater", "statsmodels is the oracle for Fleiss' kappa (pip install .[test])"
    )
    x, y = _random_labels(7)
    table = np.zeros((4, 4))
    for u, v in zip(x, y):
        table[u, v] += 1
    assert cohen_kappa(x, y) == pytest.approx(inter.cohens_kappa(table).kappa, abs=1e-12)
    # statsmodels' linear weights are |i - j| over the category positions: the same as our values 0..3
    assert cohen_kappa(x, y, "linear") == pytest.approx(inter.cohens_kappa(table, wt="linear").kappa, abs=1e-12)


def test_kappa_hand_computed():
    # 10 documents: A = 0 0 0 0 1 1 1 2 2 2, B = 0 0 0 1 1 1 2 2 2 0
    x = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    y = [0, 0, 0, 1, 1, 1, 2, 2, 2, 0]
    # confusion: [[3,1,0],[0,2,1],[1,0,2]]; p_o = 7/10; rows 4,3,3, columns 4,3,3; p_e = (16+9+9)/100 = 0.34
    assert cohen_kappa(x, y) == pytest.approx((0.7 - 0.34) / (1 - 0.34))
    # linear: observed disagreement sum w*O = 1*1 + 1*1 + 2*1 = 4; expected E = outer(rows, cols)/10,
    # sum w*E = (1*(4*3) + 2*(4*3) + 1*(3*4) + 1*(3*3) + 2*(3*4) + 1*(3*3)) / 10 = (12+24+12+9+24+9)/10 = 9
    assert cohen_kappa(x, y, "linear") == pytest.approx(1 - 4 / 9)


def test_linear_weights_follow_label_values_not_positions():
    # labels 0 and 3 only: a disagreement weighs 3 whatever the positions, so the weighted kappa equals the
    # unweighted one (every disagreement has the same weight); scikit-learn (positions) would agree here too,
    # but with labels 0, 1, 3 a 0-vs-3 disagreement weighs 3 here and 2 there.
    x = [0, 0, 1, 3, 3, 1, 0, 3]
    y = [0, 3, 1, 3, 0, 1, 1, 3]
    labels = [0, 1, 3]
    conf = np.zeros((3, 3))
    pos = {0: 0, 1: 1, 3: 2}
    for u, v in zip(x, y):
        conf[pos[u], pos[v]] += 1
    w = np.abs(np.subtract.outer(labels, labels))
    e = np.outer(conf.sum(1), conf.sum(0)) / conf.sum()
    assert cohen_kappa(x, y, "linear") == pytest.approx(1 - (w * conf).sum() / (w * e).sum())


def test_kappa_undefined_when_chance_agreement_is_perfect():
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))


def test_fleiss_kappa_matches_statsmodels():
    inter = required(
        "statsmodels.stats.inter_rater", "statsmodels is the oracle for Fleiss' kappa (pip install .[test])"
    )
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, 80)
    ratings = np.stack([np.where(rng.random(80) < 0.7, truth, rng.integers(0, 3, 80)) for _ in range(4)], axis=1)
    table, _ = inter.aggregate_raters(ratings)
    assert fleiss_kappa(table) == pytest.approx(inter.fleiss_kappa(table, method="fleiss"), abs=1e-12)


def test_label_agreement_counts_only_documents_both_judged():
    a = _judgments([("q1", "d1", 2), ("q1", "d2", 0), ("q1", "d3", 1), ("q1", "d9", -1), ("q2", "d1", 1)])
    b = _judgments([("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d4", 0), ("q1", "d9", 2), ("q3", "d1", 0)])
    got = label_agreement(a, b)
    assert got.documents_both == 2  # d1, d2 of q1; d9 is unjudged (-1) in A; q2/q3 are not common
    assert (got.queries_common, got.queries_only_a, got.queries_only_b) == (1, 1, 1)
    assert (got.documents_only_a, got.documents_only_b) == (1, 2)
    assert got.labels == (0, 1, 2)
    assert got.confusion.tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 1]]
    assert got.mean_abs_difference == pytest.approx(0.5)


def test_no_common_query_is_an_error():
    a = _judgments([("q1", "d1", 1)])
    b = _judgments([("q2", "d1", 1)])
    with pytest.raises(NoCommonQueriesError, match="share no query"):
        label_agreement(a, b)


def test_kendall_tau_matches_scipy():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(5)
    a = dict(zip("abcdefgh", rng.random(8)))
    b = {k: v + rng.normal(0, 0.2) for k, v in a.items()}
    keys = sorted(a)
    assert kendall_tau(a, b) == pytest.approx(kendalltau([a[k] for k in keys], [b[k] for k in keys]).statistic)


def test_tau_ap_hand_computed_weighs_swaps_at_the_top_more():
    ref = {"s1": 0.4, "s2": 0.3, "s3": 0.2, "s4": 0.1}
    top_swap = {"s1": 0.3, "s2": 0.4, "s3": 0.2, "s4": 0.1}  # B: s2 s1 s3 s4
    bottom_swap = {"s1": 0.4, "s2": 0.3, "s3": 0.1, "s4": 0.2}  # B: s1 s2 s4 s3
    # top swap: C(2)/1 = 0 (s2 above s1 is wrong), C(3)/2 = 1, C(4)/3 = 1 -> 2/3 * 2 - 1 = 1/3
    assert tau_ap(ref, top_swap) == pytest.approx(1 / 3)
    # bottom swap: 1/1 + 2/2 + 2/3 -> 2/3 * (8/3) - 1 = 7/9
    assert tau_ap(ref, bottom_swap) == pytest.approx(7 / 9)
    assert kendall_tau(ref, top_swap) == pytest.approx(kendall_tau(ref, bottom_swap)) == pytest.approx(4 / 6)
    assert tau_ap(ref, ref) == 1.0
    assert tau_ap(ref, {k: -v for k, v in ref.items()}) == pytest.approx(-1.0)


def _table(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = [(run, f"q{i}", v) for run, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows, columns=["run", "query_id", "value"])


def test_flipped_pairs_lost_gained_reversed():
    n = 12
    base = np.linspace(0.2, 0.6, n)
    up = base + 0.1  # better on every query: exact p = 2 / 2^12
    a = _table({"r1": base.tolist(), "r2": up.tolist(), "r3": base.tolist()})
    # under B: r2 no better than r1 (lost), r3 better than r1 everywhere (gained)
    b = _table({"r1": base.tolist(), "r2": (base + np.tile([0.1, -0.1], n // 2)).tolist(), "r3": up.tolist()})
    got = ranking_agreement(a, b, "m", permutations=10_000)
    kinds = {(f["run_1"], f["run_2"]): f["kind"] for f in got.flipped_pairs}
    # A: r1<r2 sig, r1 vs r3 n.s., r2>r3 sig; B: r1 vs r2 n.s., r1<r3 sig, r2 vs r3: r3 better on half the
    # queries by 0.2 and tied on the other half -> exact p = 2/2^6 = 0.03125, 3 tests Holm -> not significant
    assert kinds == {("r1", "r2"): "lost", ("r1", "r3"): "gained", ("r2", "r3"): "lost"}
    assert got.pairs_tested == 3
    assert got.significant_a == 2 and got.significant_b == 1
    p = 2 / 2**n
    flips = {(f["run_1"], f["run_2"]): f for f in got.flipped_pairs}
    # Holm over 3 tests, p-values (p, 1, p): the smallest is multiplied by 3, the next by 2 then raised to 3p
    assert flips[("r1", "r2")]["p_adjusted_a"] == pytest.approx(3 * p)
    # reversed: the same pair significant in opposite directions
    c = _table({"r1": base.tolist(), "r2": (base - 0.1).tolist(), "r3": base.tolist()})
    rev = ranking_agreement(a, c, "m")
    assert {(f["run_1"], f["run_2"]): f["kind"] for f in rev.flipped_pairs}[("r1", "r2")] == "reversed"


# ------------------------------------------------------------------ the API and the CLI
def _write(path, rows):
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in rows))
    return str(path)


@pytest.fixture
def two_assessors(tmp_path):
    rng = np.random.default_rng(11)
    docs = [(f"q{q}", f"d{d}") for q in range(1, 9) for d in range(30)]
    x = rng.integers(0, 4, len(docs))
    y = np.clip(x + rng.integers(-1, 2, len(docs)) * (rng.random(len(docs)) < 0.35), 0, 3)
    qa = _write(tmp_path / "a.qrels", [(q, d, int(v)) for (q, d), v in zip(docs, x)])
    qb = _write(tmp_path / "b.qrels", [(q, d, int(v)) for (q, d), v in zip(docs, y) if d != "d29"])
    runs = []
    for r in range(4):
        lines = []
        for q in range(1, 9):
            scores = rng.random(30) + (x[(q - 1) * 30 : q * 30] * 0.1 * r)
            lines += [f"q{q} Q0 d{d} 0 {s:.6f} run{r}\n" for d, s in enumerate(scores)]
        p = tmp_path / f"run{r}.trec"
        p.write_text("".join(lines))
        runs.append(str(p))
    both = [(v, w) for (q, d), v, w in zip(docs, x, y) if d != "d29"]
    return qa, qb, runs, both


def test_cli_json_keys_and_values(two_assessors):
    metrics = required("sklearn.metrics", "scikit-learn is the oracle for Cohen's kappa (pip install .[test])")
    qa, qb, runs, both = two_assessors
    res = CliRunner().invoke(main, ["agreement", "--format", "json", "--permutations", "500", qa, qb, *runs])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for key in ("documents_both", "confusion", "kappa", "kappa_linear", "kendall_tau", "tau_ap", "flipped_pairs"):
        assert key in doc
    x, y = [v for v, _ in both], [w for _, w in both]
    assert doc["documents_both"] == len(both) == 8 * 29
    assert doc["kappa"] == pytest.approx(metrics.cohen_kappa_score(x, y))
    assert doc["kappa_linear"] == pytest.approx(metrics.cohen_kappa_score(x, y, weights="linear"))
    assert doc["confusion"] == metrics.confusion_matrix(x, y, labels=[0, 1, 2, 3]).tolist()
    # the rankings: each run's mean nDCG@10 under each qrels, as `twostage eval` computes it
    from toolkit.api.evaluation import evaluate

    for key, q in (("means_a", qa), ("means_b", qb)):
        for r in runs:
            name = r.rsplit("/", 1)[1].removesuffix(".trec")
            assert doc["ranking"][key][name] == pytest.approx(evaluate(q, r, "ndcg_cut.10").summary["ndcg_cut_10"])
    from scipy.stats import kendalltau

    names = sorted(doc["ranking"]["means_a"])
    expected = kendalltau([doc["ranking"]["means_a"][n] for n in names], [doc["ranking"]["means_b"][n] for n in names])
    assert doc["kendall_tau"] == pytest.approx(expected.statistic)


def test_cli_text_and_library_agree(two_assessors):
    import toolkit as ts

    qa, qb, _, _ = two_assessors
    res = CliRunner().invoke(main, ["agreement", qa, qb])
    assert res.exit_code == 0, res.output
    a = ts.agreement(qa, qb)
    assert f"kappa {a.kappa:.4f}" in res.stdout
    assert f"documents_both {a.first.documents_both}" in res.stdout
    assert a.confusion.to_numpy().sum() == a.first.documents_both


def test_cli_no_common_query(tmp_path):
    qa = _write(tmp_path / "a.qrels", [("1", "d1", 1)])
    qb = _write(tmp_path / "b.qrels", [("2", "d1", 1)])
    res = CliRunner().invoke(main, ["agreement", qa, qb])
    assert res.exit_code == 1
    assert "share no query" in res.stderr and res.stderr.count("\n") == 1


def test_cli_one_run_is_a_usage_error(two_assessors):
    qa, qb, runs, _ = two_assessors
    res = CliRunner().invoke(main, ["agreement", qa, qb, runs[0]])
    assert res.exit_code == 2 and "at least two runs" in res.stderr


def test_judgment_groups_fleiss_on_trec_eval_test_file(shared_data):
    inter = required(
        "statsmodels.stats.inter_rater", "statsmodels is the oracle for Fleiss' kappa (pip install .[test])"
    )
    import toolkit as ts

    path = shared_data / "trec_eval-test" / "qrels.123"
    if not path.is_file():
        lacking(f"{path} missing")
    got = ts.agreement(str(path), rel_format="qrels_jg")
    assert got.names == ("jg=0", "jg=1", "jg=2")
    assert len(got.pairs) == 3
    # independent: the file read by pandas, documents every group judged, statsmodels' Fleiss kappa
    f = pd.read_csv(path, sep=r"\s+", header=None, names=["q", "jg", "d", "r"], dtype={"q": str, "d": str})
    wide = f[f["r"] >= 0].pivot_table(index=["q", "d"], columns="jg", values="r").dropna()
    table, _ = inter.aggregate_raters(wide.to_numpy().astype(int))
    assert got.documents_all == len(wide)
    assert got.fleiss_kappa == pytest.approx(inter.fleiss_kappa(table), abs=1e-12)
    pair01 = f[f["jg"].isin([0, 1]) & (f["r"] >= 0)].pivot_table(index=["q", "d"], columns="jg", values="r").dropna()
    assert got.pairs[0].documents_both == len(pair01)
    metrics = required("sklearn.metrics", "scikit-learn is the oracle for Cohen's kappa (pip install .[test])")
    assert got.kappa == pytest.approx(metrics.cohen_kappa_score(pair01[0].astype(int), pair01[1].astype(int)))
