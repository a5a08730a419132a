"""The loss decomposition on real data: DL19, BM25 top-100 -> all-MiniLM-L6-v2 (``twostage diagnose``).

Every number the report gives is recomputed here from the files with plain Python (the qrels, the BM25 run,
the reranked run; trec_eval's order: score as a 32-bit float descending, document id descending; nDCG@10 with
linear gains and log2(rank + 1), the ideal over all judged grades), and the ceiling also by pytrec_eval on
the best-ordered candidate lists. The reranked run is made once per test session (conftest.dl19_minilm).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.data


def read_qrels(path):
    grades = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        q, _, d, r = line.split()
        grades[q][d] = int(r)
    return grades


def read_ranked(path):
    """query -> documents in trec_eval 9.x order (float32 score descending, then document id descending)."""
    rows = defaultdict(list)
    for line in Path(path).read_text().splitlines():
        q, _, d, _, s, *_ = line.split()
        rows[q].append((d, float(np.float32(s))))
    out = {}
    for q, docs in rows.items():
        docs.sort(key=lambda x: x[0], reverse=True)
        docs.sort(key=lambda x: x[1], reverse=True)  # stable: ties keep document id descending
        out[q] = [d for d, _ in docs]
    return out


def dcg(gains, k=10):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]) if g > 0)


def ndcg(docs, grades, k=10):
    ideal = dcg(sorted((g for g in grades.values() if g > 0), reverse=True), k)
    return dcg([grades.get(d, 0) for d in docs], k) / ideal if ideal else 0.0


def best_order(docs, grades):
    return sorted(docs, key=lambda d: -max(grades.get(d, 0), 0))


@pytest.fixture(scope="module")
def report(msmarco, dl19_minilm, tmp_path_factory):
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("dl19") / "dl19-minilm"
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--qrels",
            str(msmarco / "qrels.dl19-passage.txt"),
            "--first-stage",
            f"bm25={msmarco / 'runs' / 'run.dl19.bm25.top100.txt'}",
            "--reranked",
            f"minilm={dl19_minilm}",
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def independent(msmarco, dl19_minilm):
    grades = read_qrels(msmarco / "qrels.dl19-passage.txt")
    bm25 = read_ranked(msmarco / "runs" / "run.dl19.bm25.top100.txt")
    minilm = read_ranked(dl19_minilm)
    return grades, bm25, minilm


def test_decomposition_equals_an_independent_computation(report, independent):
    _, s = report
    grades, bm25, minilm = independent
    assert len(grades) == 43
    per = {}
    for q, g in grades.items():
        cands = bm25.get(q, [])[:100]
        per[q] = {
            "first_stage": ndcg(cands, g),
            "ceiling": ndcg(best_order(cands, g), g),
            "reranked": ndcg(minilm.get(q, []), g),
            "ideal": 1.0 if any(v > 0 for v in g.values()) else 0.0,
        }
    mean = {k: sum(v[k] for v in per.values()) / len(per) for k in ("first_stage", "ceiling", "reranked", "ideal")}
    d = s["decomposition"]
    assert (d["measure"], d["depth"]) == ("ndcg_cut_10", 100)
    for k in ("first_stage", "ceiling", "reranked", "ideal"):
        assert d[k] == pytest.approx(mean[k], abs=1e-12), k
    assert d["lost_in_candidates"] == pytest.approx(mean["ideal"] - mean["ceiling"], abs=1e-12)
    assert d["lost_in_reranking"] == pytest.approx(mean["ceiling"] - mean["reranked"], abs=1e-12)
    # the figures docs/diagnosis.md quotes
    assert (f"{d['first_stage']:.4f}", f"{d['reranked']:.4f}", f"{d['ceiling']:.2f}") == ("0.5058", "0.6424", "0.89")


def test_per_query_losses_add_up_and_match(report, independent):
    import pandas as pd

    out, _ = report
    grades, bm25, minilm = independent
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str}).set_index("query_id")
    assert len(pq) == 43 and set(pq["system"]) == {"minilm"} and set(pq["first_stage_run"]) == {"bm25"}
    total = pq["lost_in_candidates"] + pq["lost_in_reranking"]
    assert (total - (pq["ideal_ndcg_cut_10"] - pq["reranked_ndcg_cut_10"])).abs().max() < 1e-12
    for q, g in grades.items():
        assert pq.loc[q, "ceiling_ndcg_cut_10"] == pytest.approx(ndcg(best_order(bm25[q][:100], g), g), abs=1e-12)
        assert pq.loc[q, "reranked_ndcg_cut_10"] == pytest.approx(ndcg(minilm[q], g), abs=1e-12)
    # candidates-missed now means: not even the best order of the candidates reaches the ok threshold
    missed = pq[pq["diagnosis"] == "candidates-missed"]
    assert len(missed) and (missed["ceiling_ndcg_cut_10"] < 0.6).all()
    misordered = pq[pq["diagnosis"] == "reranker-misordered"]
    assert (misordered["ceiling_ndcg_cut_10"] >= 0.6).all() and (misordered["reranked_ndcg_cut_10"] < 0.6).all()


def test_ceiling_by_pytrec_eval(independent):
    """The ceiling once more, by pytrec_eval (NIST trec_eval's C code) on the best-ordered candidate lists."""
    import pytrec_eval

    grades, bm25, _ = independent
    run = {q: {d: float(100 - i) for i, d in enumerate(best_order(bm25[q][:100], g))} for q, g in grades.items()}
    values = pytrec_eval.RelevanceEvaluator(dict(grades), {"ndcg_cut.10"}).evaluate(run)
    ours = {q: ndcg(best_order(bm25[q][:100], g), g) for q, g in grades.items()}
    assert all(values[q]["ndcg_cut_10"] == pytest.approx(ours[q], abs=1e-9) for q in grades)


def test_depth_curve(report, independent):
    _, s = report
    grades, bm25, minilm = independent
    curve = s["depth_curve"]
    assert [p["depth"] for p in curve] == [10, 20, 30, 50, 100] and s["depth_curve_exact"]
    # the last point is the reranked run itself, and the full ceiling
    assert f"{curve[-1]['reranked']:.4f}" == "0.6424"
    assert curve[-1]["reranked"] == pytest.approx(s["decomposition"]["reranked"], abs=1e-12)
    assert curve[-1]["ceiling"] == pytest.approx(s["decomposition"]["ceiling"], abs=1e-12)
    # the ceiling can only grow with depth (each deeper candidate list holds the shallower one)
    ceilings = [p["ceiling"] for p in curve]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(ceilings)) and ceilings[-1] > ceilings[0]
    for p in curve:
        k = p["depth"]
        reranked, ceiling, recall = [], [], []
        for q, g in grades.items():
            cands = bm25[q][:100]
            top = set(cands[:k])
            reordered = [d for d in minilm[q] if d in top] + cands[k:]
            reranked.append(ndcg(reordered, g))
            ceiling.append(ndcg(best_order(cands[:k], g) + cands[k:], g))
            relevant = {d for d, r in g.items() if r >= 2}
            recall.append(len(relevant & top) / len(relevant) if relevant else 0.0)
        assert p["reranked"] == pytest.approx(np.mean(reranked), abs=1e-12), k
        assert p["ceiling"] == pytest.approx(np.mean(ceiling), abs=1e-12), k
        assert p["recall"] == pytest.approx(np.mean(recall), abs=1e-12), k
    assert f"{curve[-1]['recall']:.4f}" == "0.4910"  # R@100 at -l 2, as trec_eval gives it


def test_agreement_and_significance(report, independent):
    from scipy import stats

    from toolkit.stats.rank_similarity import rbo

    _out, s = report
    grades, bm25, minilm = independent
    c = next(x for x in s["comparisons"] if x["family"] == "against the first stage")
    a = np.array([ndcg(bm25[q], grades[q]) for q in sorted(grades)])
    b = np.array([ndcg(minilm[q], grades[q]) for q in sorted(grades)])
    assert c["p_ttest"] == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9)
    assert (c["wins"], c["ties"], c["losses"]) == (int((b > a).sum()), int((b == a).sum()), int((b < a).sum()))
    mean_rbo = np.mean([rbo(bm25[q], minilm[q], 0.9) for q in sorted(grades)])
    assert c["rbo"] == pytest.approx(mean_rbo, abs=1e-12)


def test_two_rerankers_one_made_outside_twostage(msmarco, dl19_minilm, independent, tmp_path):
    """MiniLM beside a reranked run written by another tool (no sidecar, scores 1/rank): the BM25 top 100 in
    TAS-B's order, marked listwise. Both share the ceiling; each decomposition, the tests against BM25 (equal
    to `twostage compare`'s) and the test between them (t-test equal to scipy's) hold."""
    from click.testing import CliRunner
    from scipy import stats

    from toolkit.cli import main

    grades, bm25, minilm = independent
    tasb = read_ranked(msmarco / "runs" / "run.dl19.tasb.top100.txt")
    ext = {}
    with open(tmp_path / "ext.txt", "w") as fh:
        for q in sorted(bm25):
            pos = {d: i for i, d in enumerate(tasb.get(q, []))}
            ext[q] = sorted(bm25[q][:100], key=lambda d: (pos.get(d, 10**6), bm25[q].index(d)))
            fh.writelines(f"{q} Q0 {d} {i + 1} {1 / (i + 1)!r} other-tool\n" for i, d in enumerate(ext[q]))
    out = tmp_path / "two"
    first = msmarco / "runs" / "run.dl19.bm25.top100.txt"
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--qrels",
            str(msmarco / "qrels.dl19-passage.txt"),
            "--first-stage",
            f"bm25={first}",
            "--reranked",
            f"minilm={dl19_minilm}",
            "--reranked",
            f"ext={tmp_path / 'ext.txt'}",
            "--listwise",
            "ext",
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    runs = {r["name"]: r for r in s["reranked_runs"]}
    assert runs["ext"]["reorder_check"]["only_reorders"] and runs["ext"]["depth"] == 100
    assert runs["ext"]["listwise"] and not runs["ext"]["depth_curve_exact"]
    assert runs["ext"]["decomposition"]["ceiling"] == runs["minilm"]["decomposition"]["ceiling"]
    b = np.array([ndcg(minilm[q], grades[q]) for q in sorted(grades)])
    e = np.array([ndcg(ext[q], grades[q]) for q in sorted(grades)])
    assert runs["ext"]["decomposition"]["reranked"] == pytest.approx(e.mean(), abs=1e-12)
    between = next(c for c in s["comparisons"] if c["family"] == "between reranked runs")
    assert (between["baseline"], between["run"]) == ("minilm", "ext")
    assert between["p_ttest"] == pytest.approx(stats.ttest_rel(e, b).pvalue, rel=1e-9)
    cmp = CliRunner().invoke(
        main,
        [
            "compare",
            "--qrels",
            str(msmarco / "qrels.dl19-passage.txt"),
            "-c",
            str(first),
            str(dl19_minilm),
            str(tmp_path / "ext.txt"),
            "--format",
            "json",
        ],
    )
    doc = json.loads(cmp.stdout)["results"]["ndcg_cut_10"]
    for c in (x for x in s["comparisons"] if x["family"] == "against the first stage"):
        path = str(dl19_minilm) if c["run"] == "minilm" else str(tmp_path / "ext.txt")
        assert (c["p_permutation"], c["p_adjusted"]) == (doc[path]["p_permutation"], doc[path]["p_adjusted"])
    assert len(s["disagreements"][0]["queries"]) == 5
