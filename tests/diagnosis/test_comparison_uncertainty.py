"""``diagnose --ci`` / ``ts.diagnose(..., ci=)``: every comparison's bootstrap interval, d_z, hole bounds and
verdict, in summary.json and on the page.

Oracles: scipy.stats.bootstrap on the per-query differences of ``ts.evaluate``'s values (computed apart from the
diagnosis), ``holes.hole_bounds`` for the bounds, and the overlap rule by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import toolkit as ts
from toolkit.errors import ConfigError

R = "../shared/data/msmarco-passage/runs"
RUNS = {"bm25": f"{R}/run.dl19.bm25.top100.txt"}
RERANKED = {"tasb": f"{R}/run.dl19.tasb.top100.txt", "ada": f"{R}/run.dl19.openai-ada2.top100.txt"}


@pytest.fixture(scope="module")
def diag():
    with pytest.warns(ts.TwostageWarning, match="no query texts"):
        return ts.diagnose(
            "dl19-passage",
            RUNS,
            RERANKED,
            depth=100,  # dense runs, no reranking of bm25: no depth to detect
            permutations=200,
            ci=0.9,
            bootstrap=1000,
            ci_method="bca",
            seed=5,
        )


def _values(path):
    ev = ts.evaluate("dl19-passage", path, "ndcg_cut.10", complete=True, relevance_level=2)
    return ev.per_query["ndcg_cut_10"]


def test_intervals_equal_scipy_on_independent_differences(diag):
    values = {n: _values(p) for n, p in {**RUNS, **RERANKED}.items()}
    comps = diag.result.comparisons
    assert {(c["baseline"], c["run"]) for c in comps} == {("bm25", "tasb"), ("bm25", "ada"), ("tasb", "ada")}
    for c in comps:
        a, b = values[c["baseline"]], values[c["run"]]
        d = (b - a.reindex(b.index)).to_numpy()
        assert len(d) == 43
        ci = stats.bootstrap(
            (d,), np.mean, confidence_level=0.9, n_resamples=1000, method="bca", rng=np.random.default_rng(5)
        ).confidence_interval
        assert c["ci_low"] == pytest.approx(ci.low, rel=1e-12) and c["ci_high"] == pytest.approx(ci.high, rel=1e-12)
        assert c["d_z"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
        assert c["direction"] == ("better" if d.mean() > 0 else "worse")
        assert c["verdict"].startswith(f"{d.mean():+.4f} [{ci.low:.4f}, {ci.high:.4f}], d_z {c['d_z']:.2f}")


def test_bounds_equal_hole_bounds_and_overlap_rule(diag):
    from toolkit.data.adapters import as_qrels, as_run
    from toolkit.measures.names import EvalSettings, parse_measure_groups
    from toolkit.quality.holes import hole_bounds

    q = as_qrels("dl19-passage")
    ms = [m for g in parse_measure_groups(["ndcg_cut.10"], 9) for m in g.measures]
    settings = EvalSettings(relevance_level=2, complete=True)
    expected = {}
    for name, path in {**RUNS, **RERANKED}.items():
        mean = hole_bounds(q, as_run(path), ms, settings)["ndcg_cut_10"].mean()
        expected[name] = [mean["min"], mean["max"]]
    bounds = diag.summary["settings"]["uncertainty"]["holes"]["bounds"]
    for name, b in expected.items():
        assert bounds[name] == pytest.approx(b, abs=1e-15)
    # bm25 was pooled to depth 10: no holes; ada's bounds are those docs/statistics.md states
    assert bounds["bm25"][0] == bounds["bm25"][1]
    assert bounds["ada"] == pytest.approx([0.7003, 0.7734], abs=5e-5)
    by = {(c["baseline"], c["run"]): c for c in diag.result.comparisons}
    assert by[("bm25", "tasb")]["bounds_overlap"] is False
    assert by[("bm25", "tasb")]["verdict"].endswith(
        "bounds over the top-k holes disjoint: no labelling of the top-k holes explains it"
    )
    assert by[("tasb", "ada")]["bounds_overlap"] is True  # [0.7169, 0.7850] and [0.7003, 0.7734]
    assert by[("tasb", "ada")]["verdict"].endswith("bounds over the top-k holes overlap: judge more before claiming it")


def test_summary_and_page_carry_them(diag, tmp_path):
    paths = diag.write(tmp_path / "d")
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    c = summary["comparisons"][0]
    assert {"ci_low", "ci_high", "d_z", "direction", "bounds", "baseline_bounds", "bounds_overlap", "verdict"} <= set(c)
    assert summary["settings"]["uncertainty"]["ci"] == {
        **summary["settings"]["uncertainty"]["ci"],
        "level": 0.9,
        "method": "bca",
        "resamples": 1000,
        "seed": 5,
    }
    html = Path(paths["index.html"]).read_text()
    assert "<h2>How far to trust each comparison</h2>" in html and 'id="trust"' in html
    assert "bounds over the top-k holes overlap: judge more before claiming it" in html
    md = (tmp_path / "d" / "report.md").read_text()
    assert "## How far to trust each comparison" in md and "bounds over the top-k holes disjoint" in md


def test_level_outside_unit_interval_is_an_error(cli, tmp_path):
    with pytest.raises(ConfigError, match=r"ci=1\.0.*between 0 and 1"):
        ts.diagnose("dl19-passage", RUNS, RERANKED, ci=1.0)
    res = cli(
        "diagnose",
        "--qrels",
        "dl19-passage",
        "--first-stage",
        RUNS["bm25"],
        "--reranked",
        RERANKED["tasb"],
        "--ci",
        "0",
        "--out",
        tmp_path / "x",
    )
    assert res.exit_code == 2 and "--ci" in res.output and "between 0 and 1" in res.output
