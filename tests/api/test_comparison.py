"""``toolkit.compare``: the CLI's JSON, PyTerrier's table shape, several baselines with one Holm correction
(statsmodels as the oracle), paper tables, per-query long forms.

Oracles: ``twostage compare`` (tested against scipy and an exact enumeration in tests/evaluation), scipy's
``ttest_rel``, statsmodels' ``multipletests`` and ir_measures' ``iter_calc``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from needs import required
from scipy import stats

import toolkit as ts
from toolkit.errors import ConfigError, ProvenanceMismatchError


@pytest.fixture(scope="module")
def runs(msmarco):
    r = msmarco / "runs"
    return {
        "bm25": str(r / "run.dl19.bm25.top100.txt"),
        "splade": str(r / "run.dl19.splade-pp-ed.top100.txt"),
        "rm3": str(r / "run.dl19.bm25-rm3.top100.txt"),
    }


@pytest.fixture(scope="module")
def two_baselines(runs):
    return ts.compare(
        "dl19-passage",
        runs,
        baseline=["bm25", "splade"],
        measures=["nDCG@10", "R@100"],
        complete=True,
        relevance_level=2,
        permutations=2000,
    )


def test_api_equals_cli_json(cli, runs):
    args = [f"{k}={v}" for k, v in runs.items()]
    res = cli(
        "compare", "--qrels", "dl19-passage", "-c", *args, "-m", "nDCG@10", "--permutations", "500", "--format", "json"
    )
    assert res.exit_code == 0, res.output
    api = ts.compare("dl19-passage", runs, measures="nDCG@10", complete=True, permutations=500)
    assert json.loads(json.dumps(api.doc, default=str)) == json.loads(res.stdout)
    assert set(api.doc["results"]["nDCG@10"]) == {"splade", "rm3"}


def test_table_has_pyterrier_shape_and_scipy_values(runs):
    c = ts.compare("dl19-passage", runs, measures=["nDCG@10", "P@10"], complete=True, test="t", correction="none")
    t = c.table
    assert list(t["name"]) == ["bm25", "splade", "rm3"] and set(t["baseline"]) == {"bm25"}
    for col in (
        "nDCG@10",
        "nDCG@10 +",
        "nDCG@10 -",
        "nDCG@10 p-value",
        "nDCG@10 p-value corrected",
        "P@10",
        "P@10 delta",
        "P@10 =",
    ):
        assert col in t.columns
    assert np.isnan(t.loc[0, "nDCG@10 p-value"])  # the baseline's own row
    wide = c.per_query.pivot_table(index="query_id", columns=["measure", "run"], values="value")
    for i, name in ((1, "splade"), (2, "rm3")):
        a, b = wide[("nDCG@10", "bm25")], wide[("nDCG@10", name)]
        assert t.loc[i, "nDCG@10 p-value"] == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9)
        assert t.loc[i, "nDCG@10 p-value corrected"] == t.loc[i, "nDCG@10 p-value"]  # correction none
        assert t.loc[i, "nDCG@10 delta"] == pytest.approx((b - a).mean(), abs=1e-12)
        assert t.loc[i, "nDCG@10 +"] == int((b > a).sum()) and t.loc[i, "nDCG@10 -"] == int((b < a).sum())
    assert t.loc[1, "nDCG@10"] == pytest.approx(0.7308, abs=5e-5)  # SPLADE++ ED on DL19, -c


def test_several_baselines_one_holm_over_the_family(two_baselines, runs):
    from statsmodels.stats.multitest import multipletests

    tests = two_baselines.tests
    # bm25 -> splade, rm3; splade -> rm3 (the pair of baselines is tested once)
    pairs = set(zip(tests["baseline"], tests["run"]))
    assert pairs == {("bm25", "splade"), ("bm25", "rm3"), ("splade", "rm3")}
    for _, family in tests.groupby("measure"):
        want = multipletests(family["p_permutation"], method="holm")[1]
        assert family["p_adjusted"].to_numpy() == pytest.approx(want, abs=1e-15)
    # each baseline's raw p-values are those of a comparison with that baseline alone (same seed)
    alone = ts.compare(
        "dl19-passage",
        {k: runs[k] for k in ("splade", "rm3")},
        measures=["nDCG@10", "R@100"],
        complete=True,
        relevance_level=2,
        permutations=2000,
    ).tests
    mine = tests[tests["baseline"] == "splade"].set_index("measure")["p_permutation"]
    assert mine.to_dict() == alone.set_index("measure")["p_permutation"].to_dict()
    assert "over the 3 (baseline, run) comparison(s)" in two_baselines.doc["tests"]["correction_applies_to"]


def test_markdown_and_latex_tables(two_baselines, cli, runs):
    md = two_baselines.to_markdown()
    lines = md.splitlines()
    assert lines[0] == "| system | nDCG@10 | R@100 |"
    splade = next(ln for ln in lines if ln.startswith("| splade"))
    assert "**0.7308**†▲" in splade  # best nDCG@10 in bold, significantly above bm25
    assert "† vs bm25; ‡ vs splade: p < 0.05 (paired randomization test" in md and "holm correction" in md
    rm3 = next(ln for ln in lines if ln.startswith("| rm3"))
    assert rm3 == "| rm3 | 0.5216‡▼ | 0.5259†▲‡▼ |"  # above bm25 on R@100, below splade on both: directions marked
    assert "▲ better, ▼ worse than that baseline" in md and "family: every system against the baseline(s)" in md
    tex = two_baselines.to_latex()
    assert r"\textbf{0.7308}$^{\dagger\uparrow}$" in tex and "System & nDCG@10 & R@100" in tex and tex.count(r"\\") >= 4
    assert r"$\dagger$ vs bm25; $\ddagger$ vs splade" in tex
    args = [f"{k}={v}" for k, v in runs.items()]
    res = cli(
        "compare",
        "--qrels",
        "dl19-passage",
        "-c",
        "-l",
        "2",
        *args,
        "--baseline",
        "bm25",
        "--baseline",
        "splade",
        "-m",
        "nDCG@10",
        "-m",
        "R@100",
        "--permutations",
        "2000",
        "--format",
        "markdown",
    )
    assert res.exit_code == 0, res.output
    assert res.stdout == md
    assert "<table>" in two_baselines._repr_html_() and "<b>0.7308</b>" in two_baselines._repr_html_()


def test_per_query_long_forms_match_ir_measures(two_baselines, runs, msmarco):
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    pq = two_baselines.per_query
    assert list(pq.columns) == ["run", "query_id", "measure", "value"]
    qrels = list(ir_measures.read_trec_qrels(str(msmarco / "qrels.dl19-passage.txt")))
    theirs = {
        m.query_id: m.value
        for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, ir_measures.read_trec_run(runs["splade"]))
    }
    ours = pq[(pq["run"] == "splade") & (pq["measure"] == "nDCG@10")].set_index("query_id")["value"]
    assert set(ours.index) == set(theirs)
    assert max(abs(ours[q] - theirs[q]) for q in theirs) < 1e-6  # float32 (trec_eval 9) vs doubles
    pt = two_baselines.to_pyterrier()
    assert list(pt.columns) == ["name", "qid", "measure", "value"] and len(pt) == 3 * 43 * 2


def test_evaluations_as_inputs_and_refusals(runs):
    a = ts.evaluate("dl19-passage", runs["bm25"], "nDCG@10", complete=True)
    b = ts.evaluate("dl19-passage", runs["splade"], "nDCG@10", complete=True)
    c = ts.compare(None, {"a": a, "b": b}, measures="nDCG@10", permutations=100)
    assert c.means.loc["b", "nDCG@10"] == b.summary["nDCG@10"]
    other = ts.evaluate("dl19-passage", runs["splade"], "nDCG@10", complete=True, gain="exp")
    with pytest.raises(ProvenanceMismatchError, match="gain"):
        ts.compare(None, {"a": a, "b": other}, measures="nDCG@10")
    with pytest.raises(ConfigError, match="not among the systems"):
        ts.compare(None, {"a": a, "b": b}, baseline="c")
    with pytest.raises(ConfigError, match="two runs named"):
        ts.compare("dl19-passage", [runs["bm25"], runs["bm25"]])
