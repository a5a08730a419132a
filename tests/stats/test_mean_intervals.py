"""``twostage eval --ci`` / ``ts.evaluate(..., ci=...)``: the bootstrap interval of each measure's mean over the
queries. Oracle: scipy.stats.bootstrap on the per-query values (the same generator, so the same resamples), and
hand-computed per-query values on a tiny case."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

import toolkit as ts
from toolkit.cli import main
from toolkit.errors import ConfigError

R = "../shared/data/msmarco-passage/runs"


def _write(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    return str(p)


@pytest.fixture
def tiny(tmp_path):
    """Four queries, each with one relevant document at a known rank: P@2 per query is 0.5, 0.5, 0, 0.5."""
    qrels = _write(
        tmp_path,
        "q.txt",
        [(q, 0, f"d{q}", 1) for q in "1234"] + [(q, 0, "x", 0) for q in "1234"],
    )
    ranks = {"1": ["d1", "x"], "2": ["x", "d2"], "3": ["x", "y", "d3"], "4": ["d4", "z"]}
    run = _write(
        tmp_path, "r.txt", [(q, "Q0", d, i + 1, 10 - i, "t") for q, ds in ranks.items() for i, d in enumerate(ds)]
    )
    return qrels, run


def _scipy(values, level, resamples, method, seed):
    return stats.bootstrap(
        (np.asarray(values, dtype=float),),
        np.mean,
        confidence_level=level,
        n_resamples=resamples,
        method=method,
        rng=np.random.default_rng(seed),
    ).confidence_interval


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_evaluate_ci_equals_scipy_on_hand_values(tiny, method):
    qrels, run = tiny
    ev = ts.evaluate(qrels, run, ["P.2", "recip_rank"], ci=0.9, bootstrap=2000, ci_method=method, seed=3)
    p2 = [0.5, 0.5, 0.0, 0.5]  # hand-computed
    rr = [1.0, 0.5, 1 / 3, 1.0]
    assert ev.per_query["P_2"].tolist() == p2
    t = ev.intervals
    assert list(t.columns) == ["mean", "ci_low", "ci_high"]
    for name, values in (("P_2", p2), ("recip_rank", rr)):
        theirs = _scipy(values, 0.9, 2000, method, 3)
        assert t.loc[name, "ci_low"] == pytest.approx(theirs.low, rel=1e-12)
        assert t.loc[name, "ci_high"] == pytest.approx(theirs.high, rel=1e-12)
        assert t.loc[name, "mean"] == pytest.approx(np.mean(values))
    # an interval of the P@2 mean (0.375): its ends are means of resampled values in {0, 0.5}
    assert 0.0 <= t.loc["P_2", "ci_low"] < 0.375 < t.loc["P_2", "ci_high"] <= 0.5


def test_no_ci_without_the_keyword_and_counts_get_none(tiny):
    qrels, run = tiny
    ev = ts.evaluate(qrels, run, ["P.2", "num_rel"])
    assert ev.ci is None and ev.intervals.empty and "_ci_low" not in ev.to_trec_eval()
    ev = ts.evaluate(qrels, run, ["P.2", "num_rel"], ci=0.95, bootstrap=500)
    assert list(ev.intervals.index) == ["P_2"]  # num_rel is a sum over queries, not a mean


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2])
def test_level_outside_unit_interval_is_an_error_naming_it(tiny, bad):
    qrels, run = tiny
    with pytest.raises(ConfigError, match=r"ci=.*strictly between 0 and 1"):
        ts.evaluate(qrels, run, "P.2", ci=bad)
    res = CliRunner().invoke(main, ["eval", "-m", "P.2", "--ci", str(bad), qrels, run])
    assert res.exit_code == 2 and "--ci" in res.output and "between 0 and 1" in res.output


def test_cli_text_json_csv_carry_the_interval(tiny):
    qrels, run = tiny
    args = ["eval", "-m", "P.2", "-m", "num_rel", "--ci", "0.9", "--bootstrap", "2000", "--seed", "3"]
    ev = ts.evaluate(qrels, run, ["P.2", "num_rel"], ci=0.9, bootstrap=2000, seed=3)
    theirs = _scipy([0.5, 0.5, 0.0, 0.5], 0.9, 2000, "percentile", 3)
    res = CliRunner().invoke(main, [*args, "--no-provenance", qrels, run])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    i = lines.index("P_2                   \tall\t0.3750")
    assert lines[i + 1] == f"P_2_ci_low            \tall\t{theirs.low:.4f}"
    assert lines[i + 2] == f"P_2_ci_high           \tall\t{theirs.high:.4f}"
    assert not any(line.startswith("num_rel_ci") for line in lines)
    assert res.output == ev.to_trec_eval(provenance=False)
    doc = json.loads(CliRunner().invoke(main, [*args, "--format", "json", qrels, run]).output)
    assert doc["ci"]["level"] == 0.9 and doc["ci"]["method"] == "percentile" and doc["ci"]["seed"] == 3
    assert doc["ci"]["measures"]["P_2"]["ci_low"] == pytest.approx(theirs.low, rel=1e-12)
    assert doc["ci"]["measures"]["P_2"]["ci_high"] == pytest.approx(theirs.high, rel=1e-12)
    out = CliRunner().invoke(main, [*args, "--format", "csv", "--no-provenance", qrels, run]).output
    rows = list(csv.reader(io.StringIO(out)))
    got = {r[1]: float(r[2]) for r in rows[1:] if r[0] == "all"}
    assert got["P_2_ci_low"] == pytest.approx(theirs.low, rel=1e-12)
    assert got["P_2_ci_high"] == pytest.approx(theirs.high, rel=1e-12)
    assert "num_rel_ci_low" not in got


def test_csv_interval_rows_keep_a_label_with_a_line_break_in_one_cell(tiny):
    """A display label holding a carriage return: its interval rows are quoted like its own row, so every row of
    the CSV keeps its three cells (before, the interval rows were appended to the text unquoted)."""
    qrels, run = tiny
    ev = ts.evaluate(qrels, run, ["P.2"], ci=0.9, bootstrap=200, seed=3, labels={"P_2": "P\r@2"})
    rows = list(csv.reader(io.StringIO(ev.to_csv(provenance=False), newline="")))
    assert all(len(r) == 3 for r in rows), rows
    assert [r[1] for r in rows if r[0] == "all"] == ["P\r@2", "P\r@2_ci_low", "P\r@2_ci_high"]


def test_cli_several_runs_json_and_csv(tiny, tmp_path):
    """Several runs: each run's JSON entry has its ``ci``; the wide CSV has NAME_ci_low/NAME_ci_high columns on the
    'all' rows; the values are scipy's on each run's per-query values."""
    qrels, run = tiny
    other = _write(tmp_path, "other.txt", [(q, "Q0", d, 1, 5, "t") for q, d in (("1", "d1"), ("2", "d2"), ("3", "x"))])
    args = ["eval", "-m", "P.2", "--ci", "0.9", "--bootstrap", "1000", "--seed", "2"]
    values = {"r.txt": [0.5, 0.5, 0.0, 0.5], "other.txt": [0.5, 0.5, 0.0]}  # by hand (P@2: one relevant at most)
    doc = json.loads(CliRunner().invoke(main, [*args, "--format", "json", qrels, run, other]).stdout)
    assert [r["run"] for r in doc["runs"]] == ["r.txt", "other.txt"]
    for entry in doc["runs"]:
        theirs = _scipy(values[entry["run"]], 0.9, 1000, "percentile", 2)
        assert entry["ci"]["measures"]["P_2"]["ci_low"] == pytest.approx(theirs.low, rel=1e-12)
        assert entry["ci"]["measures"]["P_2"]["ci_high"] == pytest.approx(theirs.high, rel=1e-12)
    out = CliRunner().invoke(main, [*args, "-q", "--format", "csv", "--no-provenance", qrels, run, other]).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["run", "query_id", "P_2", "P_2_ci_low", "P_2_ci_high"]
    for r in rows:
        if r["query_id"] != "all":
            assert r["P_2_ci_low"] == "" and r["P_2_ci_high"] == ""
            continue
        theirs = _scipy(values[r["run"]], 0.9, 1000, "percentile", 2)
        assert float(r["P_2_ci_low"]) == pytest.approx(theirs.low, rel=1e-12)
        assert float(r["P_2_ci_high"]) == pytest.approx(theirs.high, rel=1e-12)


def test_dl19_bm25_interval_equals_scipy_with_complete_and_labels():
    """Real data, -c -l 2: the interval is of the per-query values the mean is taken over (43 queries)."""
    run = f"{R}/run.dl19.bm25.top100.txt"
    ev = ts.evaluate(
        "dl19-passage",
        run,
        ["nDCG@10", "P.10"],
        complete=True,
        relevance_level=2,
        ci=0.95,
        bootstrap=3000,
        ci_method="bca",
        seed=11,
    )
    t = ev.intervals
    for label in ("nDCG@10", "P_10"):
        values = ev.per_query[label].to_numpy()
        assert len(values) == 43
        theirs = _scipy(values, 0.95, 3000, "bca", 11)
        assert t.loc[label, "ci_low"] == pytest.approx(theirs.low, rel=1e-12)
        assert t.loc[label, "ci_high"] == pytest.approx(theirs.high, rel=1e-12)
        assert t.loc[label, "mean"] == pytest.approx(ev.summary[label], abs=1e-15)
    # the JSON keys the labels, the text keeps trec_eval's names
    assert "nDCG@10" in json.loads(ev.to_json())["ci"]["measures"]
    high = t.loc["nDCG@10", "ci_high"]
    assert f"ndcg_cut_10_ci_high   \tall\t{high:.4f}\n" in ev.to_trec_eval()
