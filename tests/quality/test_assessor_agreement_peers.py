"""Quadratically weighted kappa (against scikit-learn) and Krippendorff's alpha (against Krippendorff's own worked
example, computed by hand from its coincidence matrix, and a brute force over every pair of values written
here), and both through ``twostage agreement`` / ``ts.agreement``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from needs import lacking
from sklearn.metrics import cohen_kappa_score

from toolkit.cli import main
from toolkit.errors import ConfigError
from toolkit.quality.assessor_agreement import (
    cohen_kappa,
    coincidence_matrix,
    krippendorff_alpha,
    label_agreement,
)

# Krippendorff, "Computing Krippendorff's alpha-reliability" (2011), the example with missing data: 4 observers,
# 12 units (None: no value). Published: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPPENDORFF = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
LABELS = [1, 2, 3, 4, 5]


def _counts(data, labels=LABELS) -> np.ndarray:
    out = np.zeros((len(data[0]), len(labels)), dtype=np.int64)
    for coder in data:
        for u, v in enumerate(coder):
            if v is not None:
                out[u, labels.index(v)] += 1
    return out


def _brute_force_alpha(data, level: str) -> float:
    """Krippendorff's alpha from its definition as disagreements over pairs of values: D_o averages delta^2 over
    the ordered pairs of values within each unit (each unit's pairs weighted 1/(m_u - 1)), D_e over every ordered
    pair of distinct positions among all pairable values; alpha = 1 - D_o / D_e."""
    units = [[c[u] for c in data if c[u] is not None] for u in range(len(data[0]))]
    units = [vs for vs in units if len(vs) >= 2]
    values = [v for vs in units for v in vs]
    n = len(values)
    freq = {v: values.count(v) for v in set(values)}

    def delta2(c, k):
        if level == "nominal":
            return float(c != k)
        if level == "interval":
            return float((c - k) ** 2)
        lo, hi = min(c, k), max(c, k)
        between = sum(f for g, f in freq.items() if lo <= g <= hi)
        return (between - (freq[c] + freq[k]) / 2) ** 2

    observed = sum(
        delta2(vs[i], vs[j]) / (len(vs) - 1) for vs in units for i in range(len(vs)) for j in range(len(vs)) if i != j
    )
    expected = sum(delta2(values[i], values[j]) for i in range(n) for j in range(n) if i != j)
    return 1.0 - (observed / n) / (expected / (n * (n - 1)))


def test_krippendorff_worked_example_by_hand():
    o = coincidence_matrix(_counts(KRIPPENDORFF))
    # the coincidence matrix of Krippendorff's example (unit 12 has one value and drops out)
    third = 1 / 3
    expected = np.array(
        [
            [7, 4 * third, third, third, 0],
            [4 * third, 10, 4 * third, third, 0],
            [third, 4 * third, 8, third, 0],
            [third, third, third, 4, 0],
            [0, 0, 0, 0, 3],
        ]
    )
    assert o == pytest.approx(expected)
    assert o.sum(axis=1) == pytest.approx([9, 13, 10, 5, 3]) and o.sum() == pytest.approx(40)
    # ordinal squared distances from n_c = 9, 13, 10, 5, 3: (sum of n_g from c to k - (n_c + n_k) / 2)^2
    d = {(1, 2): 11**2, (1, 3): 22.5**2, (1, 4): 30**2, (1, 5): 34**2, (2, 3): 11.5**2, (2, 4): 19**2,
         (2, 5): 23**2, (3, 4): 7.5**2, (3, 5): 11.5**2, (4, 5): 4**2}  # fmt: skip
    n_c = {1: 9, 2: 13, 3: 10, 4: 5, 5: 3}
    observed = sum(o[c - 1, k - 1] * v for (c, k), v in d.items())
    assert observed == pytest.approx(945.5)
    expected_sum = sum(n_c[c] * n_c[k] * v for (c, k), v in d.items())
    assert expected_sum == pytest.approx(199740)
    by_hand = 1 - (40 - 1) * 945.5 / 199740
    assert krippendorff_alpha(_counts(KRIPPENDORFF), LABELS) == pytest.approx(by_hand, abs=1e-12)
    assert round(by_hand, 3) == 0.815  # the published value
    assert round(krippendorff_alpha(_counts(KRIPPENDORFF), LABELS, "nominal"), 3) == 0.743
    assert round(krippendorff_alpha(_counts(KRIPPENDORFF), LABELS, "interval"), 3) == 0.849
    with pytest.raises(ConfigError, match="level"):
        krippendorff_alpha(_counts(KRIPPENDORFF), LABELS, "ratio")


@pytest.mark.parametrize("level", ["ordinal", "interval", "nominal"])
def test_krippendorff_equals_brute_force(level):
    assert krippendorff_alpha(_counts(KRIPPENDORFF), LABELS, level) == pytest.approx(
        _brute_force_alpha(KRIPPENDORFF, level), abs=1e-12
    )
    rng = np.random.default_rng(5)
    for trial in range(15):
        coders, units = int(rng.integers(2, 5)), int(rng.integers(5, 25))
        truth = rng.integers(0, 4, units)
        data = []
        for _ in range(coders):
            row = np.clip(truth + rng.integers(-1, 2, units) * (rng.random(units) < 0.4), 0, 3)
            data.append([None if rng.random() < 0.2 else int(v) for v in row])
        counts = _counts(data, [0, 1, 2, 3])
        if (counts.sum(axis=1) >= 2).sum() < 2 or len({v for r in data for v in r if v is not None}) < 2:
            continue
        ours = krippendorff_alpha(counts, [0, 1, 2, 3], level)
        assert ours == pytest.approx(_brute_force_alpha(data, level), abs=1e-10), (trial, data)


def test_krippendorff_edges():
    assert math.isnan(krippendorff_alpha(np.array([[2, 0], [2, 0]]), [0, 1]))  # one value only
    assert krippendorff_alpha(np.array([[2, 0], [0, 2]]), [0, 1]) == 1.0  # perfect agreement
    assert math.isnan(krippendorff_alpha(np.array([[1, 0], [0, 1]]), [0, 1]))  # no unit has two values


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_quadratic_kappa_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, 300)
    y = np.clip(x + rng.integers(-2, 3, 300) * (rng.random(300) < 0.4), 0, 3)
    ours = cohen_kappa(x.tolist(), y.tolist(), weights="quadratic", labels=[0, 1, 2, 3])
    assert ours == pytest.approx(cohen_kappa_score(x, y, weights="quadratic", labels=[0, 1, 2, 3]), abs=1e-12)


def test_quadratic_kappa_by_hand():
    # 4 documents, labels 0..2: A = 0, 1, 2, 2; B = 0, 2, 2, 1. O: (0,0) 1, (1,2) 1, (2,2) 1, (2,1) 1.
    # rows r = 1, 1, 2; columns c = 1, 1, 2; E = r c / 4; weights (i - j)^2.
    # sum w O = 1 + 1 = 2; sum w E = (1*1*1 + 1*2*4 + 1*1*1 + 1*2*1 + 2*1*4 + 2*1*1) / 4 = 22 / 4
    a, b = [0, 1, 2, 2], [0, 2, 2, 1]
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(1 - 2 / (22 / 4))
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"))


def _write(path, rows):
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in rows))
    return str(path)


def test_agreement_reports_both_through_cli_and_library(tmp_path):
    import toolkit as ts

    rng = np.random.default_rng(11)
    docs = [(f"q{q}", f"d{d}") for q in range(1, 7) for d in range(25)]
    x = rng.integers(0, 4, len(docs))
    y = np.clip(x + rng.integers(-1, 2, len(docs)) * (rng.random(len(docs)) < 0.35), 0, 3)
    qa = _write(tmp_path / "a.qrels", [(q, d, int(v)) for (q, d), v in zip(docs, x)])
    qb = _write(tmp_path / "b.qrels", [(q, d, int(v)) for (q, d), v in zip(docs, y) if d != "d24"])
    both = [(int(v), int(w)) for (q, d), v, w in zip(docs, x, y) if d != "d24"]
    xs, ys = [v for v, _ in both], [w for _, w in both]
    res = CliRunner().invoke(main, ["agreement", "--format", "json", qa, qb])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kappa_quadratic"] == pytest.approx(cohen_kappa_score(xs, ys, weights="quadratic"), abs=1e-12)
    assert doc["krippendorff_alpha"] == pytest.approx(
        _brute_force_alpha([xs, ys], "ordinal"), abs=1e-12
    )  # two coders, every unit judged by both
    a = ts.agreement(qa, qb)
    assert a.kappa_quadratic == doc["kappa_quadratic"] and a.krippendorff_alpha == doc["krippendorff_alpha"]
    text = CliRunner().invoke(main, ["agreement", qa, qb]).stdout
    assert f"kappa_quadratic {a.kappa_quadratic:.4f}" in text
    assert f"krippendorff_alpha {a.krippendorff_alpha:.4f} (ordinal)" in text


def test_judgment_groups_krippendorff_over_every_group(shared_data):
    import toolkit as ts

    path = shared_data / "trec_eval-test" / "qrels.123"
    if not path.is_file():
        lacking(f"{path} missing")
    got = ts.agreement(str(path), rel_format="qrels_jg")
    # independent: the file read by pandas; a document counts when at least two groups judged it (label >= 0)
    f = pd.read_csv(path, sep=r"\s+", header=None, names=["q", "jg", "d", "r"], dtype={"q": str, "d": str})
    f = f[f["r"] >= 0]
    wide = f.pivot_table(index=["q", "d"], columns="jg", values="r")
    wide = wide[wide.notna().sum(axis=1) >= 2]
    assert got.documents_pairable == len(wide)
    data = [[None if math.isnan(v) else int(v) for v in wide[g]] for g in wide.columns]
    # the brute force is O(n^2) in values: check it on a seeded sample of documents, the full count below
    rng = np.random.default_rng(0)
    pick = sorted(rng.choice(len(wide), 150, replace=False))
    sample = [[row[i] for i in pick] for row in data]
    labels = sorted({v for row in sample for v in row if v is not None})
    assert krippendorff_alpha(_counts(sample, labels), labels) == pytest.approx(
        _brute_force_alpha(sample, "ordinal"), abs=1e-10
    )
    labels = sorted({v for row in data for v in row if v is not None})
    assert got.krippendorff_alpha_all == pytest.approx(krippendorff_alpha(_counts(data, labels), labels), abs=1e-12)
    pair01 = wide[[0, 1]].dropna().astype(int)
    values = np.array(sorted(set(pair01[0]) | set(pair01[1])), dtype=float)
    o = pd.crosstab(pair01[0], pair01[1]).reindex(index=values, columns=values, fill_value=0).to_numpy(float)
    e = np.outer(o.sum(axis=1), o.sum(axis=0)) / o.sum()
    w = (values[:, None] - values[None, :]) ** 2  # the labels' values (a 6 but no 5 in this file)
    assert got.pairs[0].kappa_quadratic == pytest.approx(1 - (w * o).sum() / (w * e).sum(), abs=1e-12)
    # the numbers docs/agreement.md shows for this file
    assert f"{got.pairs[0].kappa_quadratic:.4f}" == "0.8527" and f"{got.krippendorff_alpha:.4f}" == "0.9151"
    assert f"{got.krippendorff_alpha_all:.4f}" == "0.9360" and got.documents_pairable == 3377
    doc = got.to_dict()
    assert doc["krippendorff_alpha_all"] == pytest.approx(got.krippendorff_alpha_all)
    assert doc["documents_pairable"] == got.documents_pairable


def test_label_agreement_declared_scale_leaves_alpha_unchanged():
    rows_a = [("1", f"d{i}", v) for i, v in enumerate([0, 1, 1, 2, 0, 2])]
    rows_b = [("1", f"d{i}", v) for i, v in enumerate([0, 1, 2, 2, 1, 2])]
    a = pd.DataFrame(rows_a, columns=["query_id", "doc_id", "relevance"])
    b = pd.DataFrame(rows_b, columns=["query_id", "doc_id", "relevance"])
    used = label_agreement(a, b)
    declared = label_agreement(a, b, labels=[0, 1, 2, 3])
    # an unused label has no frequency: the ordinal distances between the used ones do not change
    assert declared.krippendorff_alpha == pytest.approx(used.krippendorff_alpha, abs=1e-12)
    assert declared.kappa_quadratic == pytest.approx(
        cohen_kappa_score([0, 1, 1, 2, 0, 2], [0, 1, 2, 2, 1, 2], weights="quadratic", labels=[0, 1, 2, 3])
    )
    assert {"kappa_quadratic", "krippendorff_alpha"} <= set(used.as_dict())
