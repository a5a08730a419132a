"""An experiment's results page and results.csv: per configuration the hole bounds of the first measure, the
direction, whether the bounds overlap the baseline's, and the verdict line.

Oracle: P@2's bounds by hand from each configuration's run file (every hole in the top 2 non-relevant / relevant;
a query the run lacks counts 0, -c), the overlap rule and the verdict's numbers from the table's own columns."""

from __future__ import annotations

import textwrap
from collections import defaultdict

import pandas as pd
import pytest

from toolkit.experiments.results import run_experiment, safe_name
from toolkit.experiments.stage_cache import StageCache

TOPICS = "1\ttime sharing system\n2\tmatrix algorithms\n3\tcomputer time\n4\tsorting algorithms\n5\tcomputer matrix\n"
# query 3 ("computer time"): b = 0 ranks d1, d2 (judged) first, b = 1 ranks d1, d5 (a hole): the two differ
QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d6 1\n2 0 d3 0\n3 0 d2 1\n3 0 d1 0\n4 0 d4 1\n5 0 d6 1\n"


def _experiment(tmp_path, index):
    (tmp_path / "topics.tsv").write_text(TOPICS)
    (tmp_path / "qrels.txt").write_text(QRELS)
    text = textwrap.dedent(
        f"""\
        name: trust
        topics: {tmp_path / "topics.tsv"}
        qrels: {tmp_path / "qrels.txt"}
        index: {{path: {index}}}
        hits: 10
        evaluation:
          measures: [P.2]
          permutations: 200
          baseline: bm25(b=0.0)
        stages:
          bm25:
            type: bm25
            k1: 1.2
            b: [0.0, 1.0]
          qld:
            type: qld
            mu: 1
        """
    )
    p = tmp_path / "exp.yaml"
    p.write_text(text)
    return p


def _hand_bounds(run_file, judged: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Mean over the judged queries of (relevant in the top 2) / 2 and (relevant + holes) / 2."""
    rows = defaultdict(list)
    for line in run_file.read_text().splitlines():
        q, _, doc, _, score, _ = line.split()
        rows[q].append((float(score), doc))
    lows, highs = [], []
    for q, labels in judged.items():
        top = [d for _, d in sorted(rows.get(q, []), reverse=True)][:2]  # score, then doc id, descending
        rel = sum(1 for d in top if labels.get(d, 0) >= 1)
        holes = sum(1 for d in top if d not in labels)
        lows.append(rel / 2)
        highs.append((rel + holes) / 2)
    return sum(lows) / len(lows), sum(highs) / len(highs)


def test_results_carry_bounds_direction_and_verdict(tiny_index, tmp_path):
    out = tmp_path / "out"
    res = run_experiment(_experiment(tmp_path, tiny_index), out, cache=StageCache(tmp_path / "c"), say=lambda s: None)
    t = res.table.set_index("config")
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    for line in QRELS.splitlines():
        q, _, d, rel = line.split()
        judged[q][d] = int(rel)
    for name in t.index:
        lo, hi = _hand_bounds(out / "runs" / f"{safe_name(name)}.trec", judged)
        assert t.loc[name, "min_P_2"] == pytest.approx(lo, abs=1e-12)
        assert t.loc[name, "max_P_2"] == pytest.approx(hi, abs=1e-12)
        assert t.loc[name, "min_P_2"] <= t.loc[name, "P_2"] <= t.loc[name, "max_P_2"]
    base = "bm25(b=0.0)"
    assert pd.isna(t.loc[base, "verdict_P_2"])  # the baseline is not tested against itself
    tested = [n for n in t.index if isinstance(t.loc[n, "verdict_P_2"], str)]
    assert tested
    for name in tested:
        r = t.loc[name]
        overlap = t.loc[base, "min_P_2"] <= r["max_P_2"] and r["min_P_2"] <= t.loc[base, "max_P_2"]
        assert bool(r["bounds_overlap_P_2"]) is bool(overlap)
        direction = "better" if r["delta_P_2"] > 0 else "worse" if r["delta_P_2"] < 0 else "equal"
        assert r["direction_P_2"] == direction
        assert r["verdict_P_2"].startswith(f"{r['delta_P_2']:+.4f} [{r['ci_low_P_2']:.4f}, {r['ci_high_P_2']:.4f}]")
        clause = (
            "bounds over the top-k holes overlap: judge more before claiming it"
            if overlap
            else "bounds over the top-k holes disjoint"
        )
        assert clause in r["verdict_P_2"]
    page = (out / "index.html").read_text()
    assert "How far to trust each difference (P_2)" in page
    assert t.loc[tested[0], "verdict_P_2"].split(":")[0] in page
    csv = pd.read_csv(out / "results.csv")
    assert {"min_P_2", "max_P_2", "direction_P_2", "bounds_overlap_P_2", "verdict_P_2"} <= set(csv.columns)
    assert list(csv.columns)[-1] == "cache"


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("  ci: 1.5\n", "ci"),
        ("  bootstrap: 0\n", "bootstrap"),
        ("  bootstrap: many\n", "bootstrap"),  # before: reported at ci's line
        ("  ci_method: studentized\n", "ci_method"),
    ],
)
def test_bad_interval_settings_name_their_line(tmp_path, line, key):
    from toolkit.errors import InputFormatError
    from toolkit.experiments.spec import parse_experiment

    p = _experiment(tmp_path, tmp_path / "no-index")
    text = p.read_text().replace("  permutations: 200\n", "  permutations: 200\n" + line)
    p.write_text(text)
    with pytest.raises(InputFormatError, match=rf"exp\.yaml:9: {key}: ") as err:
        parse_experiment(p)
    if key == "ci":
        assert "between 0 and 1" in str(err.value)


def test_interval_settings_reach_the_tests(tiny_index, tmp_path):
    """ci: 0.8 (percentile): each tested configuration's interval is scipy's on its per-query differences."""
    import numpy as np
    from scipy import stats

    import toolkit as ts

    p = _experiment(tmp_path, tiny_index)
    p.write_text(p.read_text().replace("  permutations: 200\n", "  permutations: 200\n  ci: 0.8\n  bootstrap: 500\n"))
    out = tmp_path / "out"
    res = run_experiment(p, out, cache=StageCache(tmp_path / "c"), say=lambda s: None)
    t = res.table.set_index("config")
    base = ts.evaluate(str(tmp_path / "qrels.txt"), str(out / "runs" / "bm25_b-0.0.trec"), "P.2", complete=True)
    other = ts.evaluate(str(tmp_path / "qrels.txt"), str(out / "runs" / "bm25_b-1.0.trec"), "P.2", complete=True)
    d = (other.per_query["P_2"] - base.per_query["P_2"]).to_numpy()
    ci = stats.bootstrap(
        (d,), np.mean, confidence_level=0.8, n_resamples=500, method="percentile", rng=np.random.default_rng(42)
    )
    assert t.loc["bm25(b=1.0)", "ci_low_P_2"] == pytest.approx(ci.confidence_interval.low, abs=1e-12)
    assert t.loc["bm25(b=1.0)", "ci_high_P_2"] == pytest.approx(ci.confidence_interval.high, abs=1e-12)


def test_trust_html_escapes_config_names():
    from toolkit.experiments.report import trust_html

    table = pd.DataFrame(
        [
            {"config": "<img src=x onerror=alert(1)>", "min_P_2": 0.1, "max_P_2": 0.3, "verdict_P_2": "+0.1 <b>x</b>"},
            {"config": "base", "min_P_2": 0.1, "max_P_2": 0.2, "verdict_P_2": None},
        ]
    )
    html = trust_html(table, "P_2")
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html and "<b>x</b>" not in html
    assert html.count("<li>") == 1 and "(bounds [0.1000, 0.3000])" in html
    assert trust_html(table.drop(columns="verdict_P_2"), "P_2") == ""


def _hand_recall_bounds(run_file, judged: dict[str, dict[str, int]]) -> tuple[float, float]:
    """recall@2 by hand: low rel / R (holes non-relevant); high (rel + holes) / (R + holes) (every hole relevant
    joins the relevant set too)."""
    rows = defaultdict(list)
    for line in run_file.read_text().splitlines():
        q, _, doc, _, score, _ = line.split()
        rows[q].append((float(score), doc))
    lows, highs = [], []
    for q, labels in judged.items():
        top = [d for _, d in sorted(rows.get(q, []), reverse=True)][:2]
        rel = sum(1 for d in top if labels.get(d, 0) >= 1)
        holes = sum(1 for d in top if d not in labels)
        n_rel = sum(1 for v in labels.values() if v >= 1)
        lows.append(rel / n_rel)
        highs.append((rel + holes) / (n_rel + holes))
    return sum(lows) / len(lows), sum(highs) / len(highs)


def test_every_measure_gets_bounds_direction_and_verdict(tiny_index, tmp_path):
    """measures [P.2, recall.2, map]: bounds for P_2 and recall_2 (hand-computed), none for map; direction,
    overlap and verdict for each, from the table's own delta, interval and p columns."""
    p = _experiment(tmp_path, tiny_index)
    p.write_text(p.read_text().replace("measures: [P.2]", "measures: [P.2, recall.2, map]"))
    out = tmp_path / "out"
    res = run_experiment(p, out, cache=StageCache(tmp_path / "c"), say=lambda s: None)
    t = res.table.set_index("config")
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    for line in QRELS.splitlines():
        q, _, d, rel = line.split()
        judged[q][d] = int(rel)
    for name in t.index:
        run_file = out / "runs" / f"{safe_name(name)}.trec"
        for m, hand in (("P_2", _hand_bounds), ("recall_2", _hand_recall_bounds)):
            lo, hi = hand(run_file, judged)
            assert t.loc[name, f"min_{m}"] == pytest.approx(lo, abs=1e-12), (name, m)
            assert t.loc[name, f"max_{m}"] == pytest.approx(hi, abs=1e-12), (name, m)
            assert t.loc[name, f"min_{m}"] <= t.loc[name, m] <= t.loc[name, f"max_{m}"]
    assert "min_map" not in t.columns and "max_map" not in t.columns
    base = "bm25(b=0.0)"
    tested = [n for n in t.index if isinstance(t.loc[n, "verdict_P_2"], str)]
    assert tested and all(isinstance(t.loc[n, "verdict_recall_2"], str) for n in tested)
    for name in tested:
        r = t.loc[name]
        for m in ("P_2", "recall_2", "map"):
            direction = "better" if r[f"delta_{m}"] > 0 else "worse" if r[f"delta_{m}"] < 0 else "equal"
            assert r[f"direction_{m}"] == direction, (name, m)
            p_text = f"p_adj {r[f'p_{m}']:.4g}"
            assert r[f"verdict_{m}"].startswith(
                f"{r[f'delta_{m}']:+.4f} [{r[f'ci_low_{m}']:.4f}, {r[f'ci_high_{m}']:.4f}], d_z "
            ) and (p_text in r[f"verdict_{m}"])
        for m in ("P_2", "recall_2"):
            overlap = t.loc[base, f"min_{m}"] <= r[f"max_{m}"] and r[f"min_{m}"] <= t.loc[base, f"max_{m}"]
            assert bool(r[f"bounds_overlap_{m}"]) is bool(overlap)
            clause = (
                "bounds over the top-k holes overlap: judge more before claiming it"
                if overlap
                else "bounds over the top-k holes disjoint"
            )
            assert clause in r[f"verdict_{m}"]
        assert pd.isna(r["bounds_overlap_map"]) and "bounds" not in r["verdict_map"]
    csv = pd.read_csv(out / "results.csv")
    cols = list(csv.columns)
    for m in ("P_2", "recall_2"):
        assert {f"min_{m}", f"max_{m}", f"direction_{m}", f"bounds_overlap_{m}", f"verdict_{m}"} <= set(cols)
    assert {"direction_map", "bounds_overlap_map", "verdict_map"} <= set(cols) and cols[-1] == "cache"
    means = sorted(("P_2", "recall_2", "map"), key=cols.index)  # the table's measure order: its first comes first
    assert means == ["P_2", "recall_2", "map"]  # the experiment file's order, not trec_eval's (map first)
    verdicts = sorted((f"verdict_{m}" for m in means), key=cols.index)
    assert verdicts == [f"verdict_{m}" for m in means]
    page = (out / "index.html").read_text()
    for m in ("P_2", "recall_2", "map"):
        assert f"How far to trust each difference ({m})" in page
        assert t.loc[tested[0], f"verdict_{m}"].split(":")[0] in page
