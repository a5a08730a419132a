"""Repeated runs of one system: statistics against a plain-Python computation (nDCG@10 by hand, statistics'
mean and stdev), per-query means everywhere, repeat pairs in comparisons, and the errors for repeats that
are not repeats."""

from __future__ import annotations

import random
import statistics

import pytest
from rankllm import collection, first_stage_lists, ndcg10, oracle_order, rank_llm_run, run_lists

from toolkit.data.records import run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.diagnosis.repeats import repeat_pairs_won, repeat_stats
from toolkit.errors import ConfigError


def _shuffled(lists, k, seed, path):
    def order(q, top):
        out = list(top)
        random.Random(f"{seed}-{q}").shuffle(out)
        if out[-1] == top[-1]:
            out[-1], out[0] = out[0], out[-1]
        return out

    return rank_llm_run(lists, k, order=order, path=path)


@pytest.fixture(scope="module")
def setup():
    qrels, first = collection(n_queries=10, length=40, seed=5)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    rv = [_shuffled(lists, 20, s, f"rv.{s}.trec") for s in range(3)]
    other = [_shuffled(lists, 20, s, f"other.{s}.trec") for s in (10, 11)]
    d = diagnose(
        DiagnosisInputs(qrels, first, {"rv": rv, "other": other}), DiagnosisOptions(worst_n=0, permutations=200)
    )
    return qrels, first, lists, rv, other, d


def test_repeat_statistics_against_plain_python(setup):
    qrels, _, _, rv, other, d = setup
    qids = list(d.rows("rv")["query_id"])
    for name, runs in (("rv", rv), ("other", other)):
        per_run = [ndcg10(qrels, run_lists(r), qids) for r in runs]
        means = [statistics.mean(v.values()) for v in per_run]
        stats = next(p for p in d.pipelines if p.name == name).repeats
        assert stats["n"] == len(runs) and stats["means"] == pytest.approx(means, abs=1e-12)
        assert stats["mean"] == pytest.approx(statistics.mean(means), abs=1e-12)
        assert (stats["min"], stats["max"]) == pytest.approx((min(means), max(means)), abs=1e-12)
        assert stats["sd"] == pytest.approx(statistics.stdev(means), abs=1e-12)
        per_query_sd = statistics.mean(statistics.stdev([v[q] for v in per_run]) for q in qids)
        assert stats["per_query_sd"] == pytest.approx(per_query_sd, abs=1e-12)
        assert stats["runs"] == [r.path for r in runs]
        # the per-query rows, the decomposition and the system mean read the per-query mean over repeats
        rows = d.rows(name).set_index("query_id")
        mean_q = {q: statistics.mean(v[q] for v in per_run) for q in qids}
        assert rows["reranked_ndcg_cut_10"].to_dict() == pytest.approx(mean_q, abs=1e-12)
        dec = next(p for p in d.pipelines if p.name == name).decomposition.means()
        assert dec["reranked"] == pytest.approx(statistics.mean(means), abs=1e-12)
        assert (rows["lost_in_reranking"] + rows["reranked_ndcg_cut_10"]).to_numpy() == pytest.approx(
            rows["ceiling_ndcg_cut_10"].to_numpy()
        )
    summary = d.summary()["reranked_runs"][0]["repeats"]
    assert {"n", "means", "mean", "min", "max", "sd", "per_query_sd"} <= set(summary)


def test_comparisons_use_per_query_means_and_report_repeat_pairs(setup):
    qrels, _, _, rv, other, d = setup
    qids = list(d.rows("rv")["query_id"])
    rv_means = [statistics.mean(ndcg10(qrels, run_lists(r), qids).values()) for r in rv]
    other_means = [statistics.mean(ndcg10(qrels, run_lists(r), qids).values()) for r in other]
    c = next(c for c in d.comparisons if c["family"] == "between reranked runs")
    assert (c["baseline"], c["run"]) == ("rv", "other")
    assert c["delta"] == pytest.approx(statistics.mean(other_means) - statistics.mean(rv_means), abs=1e-12)
    won = sum(b > a for a in rv_means for b in other_means) / (len(rv_means) * len(other_means))
    assert c["repeat_pairs"] == 6 and c["repeat_pairs_won"] == pytest.approx(won)
    spread = max(max(rv_means) - min(rv_means), max(other_means) - min(other_means))
    assert c["within_repeat_spread"] == (abs(c["delta"]) < spread)
    assert ("smaller than the spread" in c["reading"]) == c["within_repeat_spread"]
    assert repeat_pairs_won([0.5, 0.7], [0.6]) == 0.5


def test_a_difference_within_the_repeat_spread_says_so():
    """One system's repeats range from the first stage's own order to the best order: any other system
    within that range differs by less than the spread."""
    qrels, first = collection(n_queries=10, length=40, seed=7)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    wide = [rank_llm_run(lists, 20, order=oracle_order(qrels)), rank_llm_run(lists, 20, order=lambda q, t: t)]
    mid = _shuffled(lists, 20, 3, "mid.trec")
    d = diagnose(
        DiagnosisInputs(qrels, first, {"wide": wide, "mid": mid}),
        DiagnosisOptions(depth=20, worst_n=0, permutations=200),
    )
    c = next(c for c in d.comparisons if c["family"] == "between reranked runs")
    stats = d.primary.repeats
    assert stats["max"] - stats["min"] > abs(c["delta"])
    assert c["within_repeat_spread"] and "smaller than the spread of wide's repeats" in c["reading"]


def test_repeat_stats_of_one_run():
    import pandas as pd

    s = repeat_stats([pd.Series([0.2, 0.4])])
    assert (s["n"], s["mean"], s["sd"], s["per_query_sd"]) == (1, pytest.approx(0.3), 0.0, 0.0)


def test_repeats_that_are_not_repeats_are_errors_naming_the_runs(setup):
    qrels, first, lists, rv, _, _ = setup
    fewer = run_from_rows([r for r in rv[1].frame.itertuples(index=False) if r[0] != "q3"], path="rv.short.trec")
    with pytest.raises(ConfigError, match=r"repeats of rv hold different queries: rv.short.trec \(repeat 2\)"):
        diagnose(DiagnosisInputs(qrels, first, {"rv": [rv[0], fewer]}))
    deeper = _shuffled(lists, 30, 1, "rv.30.trec")
    with pytest.raises(ConfigError, match=r"repeats of rv have different rerank depths: rv.0.trec .* top 20, rv.30"):
        diagnose(DiagnosisInputs(qrels, first, {"rv": [rv[0], deeper]}))


def test_the_page_names_the_repeat_whose_lists_are_read(setup, tmp_path):
    """Agreement and the query views read one list per system: the page says which file that is."""
    from toolkit.report.diagnosis_page import write_diagnosis_report

    *_, d = setup
    write_diagnosis_report(d, tmp_path / "out")
    html = (tmp_path / "out" / "index.html").read_text()
    md = (tmp_path / "out" / "report.md").read_text()
    want = "first repeat (rv: rv.0.trec; other: other.10.trec)"
    assert want in html and want in md
