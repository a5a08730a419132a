"""DL19 BM25 top 100 reranked rank_llm-style at depth 20 (a seeded shuffle and the best order of the top 20,
each followed by BM25's ranks 21-100 in BM25's order; no model): the depth is detected, the tail is not
introduced, and the loss is split at the real depth."""

from __future__ import annotations

import random

import pytest
from rankllm import first_stage_lists, oracle_order, rank_llm_run

from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
from toolkit.diagnosis.depths import detect_depth
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions


@pytest.fixture(scope="module")
def dl19_runs(msmarco):
    from toolkit.data.trec_io import read_qrels, read_run

    qrels = read_qrels(msmarco / "qrels.dl19-passage.txt")
    bm25 = read_run(msmarco / "runs" / "run.dl19.bm25.top100.txt")
    lists = first_stage_lists(bm25.frame.itertuples(index=False))

    def shuffle(q, top):
        out = list(top)
        random.Random(f"dl19-{q}").shuffle(out)
        return out

    return qrels, bm25, rank_llm_run(lists, 20, order=shuffle), rank_llm_run(lists, 20, order=oracle_order(qrels))


@pytest.mark.data
def test_dl19_depth_20_is_detected_and_its_tail_is_not_introduced(dl19_runs):
    qrels, bm25, shuffled, oracle = dl19_runs
    for rr in (shuffled, oracle):
        det = detect_depth(bm25, rr)
        assert (det.depth, det.held, det.queries) == (20, 43, 43)
    d = diagnose(
        DiagnosisInputs(qrels, {"bm25": bm25}, {"shuffled20": shuffled, "oracle20": oracle}),
        DiagnosisOptions(worst_n=0, permutations=500),
    )
    for p in d.pipelines:
        assert (p.depth, p.depth_from) == (20, "detected")
        chk = p.reorder_check
        # BM25's ranks 21-100 of all 43 queries: the 3440 documents once reported as "introduced"
        assert chk["only_reorders"] and chk["tail_documents"] == 43 * 80 and chk["introduced_documents"] == 0
    assert not any("introduced" in n for n in d.notes)
    keys = {r["key"] for r in d.headline}
    assert "recall_20" in keys and "recall_1000" not in keys and "recall_100" not in keys
    oracle_rows = d.rows("oracle20")
    assert oracle_rows["lost_in_reranking"].abs().max() < 1e-12  # the best order of the top 20 is the ceiling
    m = next(p for p in d.pipelines if p.name == "oracle20").decomposition.means()
    assert m["reranked"] == pytest.approx(m["ceiling"], abs=1e-12)


@pytest.mark.data
def test_dl19_the_split_at_the_real_depth_against_the_longest_list(dl19_runs):
    """The shuffled depth-20 run diagnosed at its detected depth and, as before, at its longest list (100):
    at 100 the candidates are blamed less and the reranking more, for the same run."""
    qrels, bm25, shuffled, _ = dl19_runs
    real = diagnose(
        DiagnosisInputs(qrels, bm25, {"rv20": shuffled}), DiagnosisOptions(worst_n=0, permutations=200)
    ).primary.decomposition.means()
    as100 = diagnose(
        DiagnosisInputs(qrels, bm25, {"rv20": shuffled}), DiagnosisOptions(depth=100, worst_n=0, permutations=200)
    ).primary
    longest = as100.decomposition.means()
    assert as100.depth_from == "given"
    assert real["reranked"] == pytest.approx(longest["reranked"], abs=1e-12)  # the run is the same
    # what BM25's top 20 and top 100 lack does not depend on the reranker: the candidate side of the split the
    # issue reports for rank_llm's RankVicuna top-20 run (0.2738 at depth 20, 0.1078 read as a rerank of 100)
    assert (round(real["lost_in_candidates"], 4), round(longest["lost_in_candidates"], 4)) == (0.2738, 0.1078)
    assert real["lost_in_candidates"] > longest["lost_in_candidates"] + 0.05
    assert real["lost_in_reranking"] < longest["lost_in_reranking"] - 0.05
    for m in (real, longest):
        assert m["lost_in_candidates"] + m["lost_in_reranking"] == pytest.approx(m["ideal"] - m["reranked"])


def _with_foreign_queries(run, n=3, length=100):
    """``run`` plus ``n`` queries the first stage and the qrels do not hold (unjudged: evaluation ignores
    them), ``length`` documents each in no first-stage order."""
    import pandas as pd

    from toolkit.data.records import Run

    extra = pd.DataFrame(
        [(f"foreign{i}", f"f{i}d{r}", 1.0 / (r + 1)) for i in range(n) for r in range(length)],
        columns=run.frame.columns,
    )
    return Run(frame=pd.concat([run.frame, extra], ignore_index=True), path="rv20+foreign.trec")


@pytest.mark.data
def test_dl19_foreign_queries_leave_the_detection_on_the_shared_queries(dl19_runs):
    """The audit's case: a top-20 rank_llm-style run plus 3 queries BM25 lacks was detected on 43 of 46
    queries, under the 95 % rule, and diagnosed as a rerank of its longest list (lost in candidates 0.1078).
    The detection reads the 43 shared queries: depth 20, lost in candidates 0.2738."""
    qrels, bm25, shuffled, _ = dl19_runs
    run = _with_foreign_queries(shuffled)
    det = detect_depth(bm25, run)
    assert (det.depth, det.held, det.queries, det.foreign) == (20, 43, 43, 3)
    assert det.describe().startswith("detected on 43 of 43 shared queries")
    assert det.as_dict()["queries_only_in_reranked"] == 3
    d = diagnose(DiagnosisInputs(qrels, bm25, {"rv20": run}), DiagnosisOptions(worst_n=0, permutations=200))
    p = d.primary
    assert (p.depth, p.depth_from) == (20, "detected")
    assert round(p.decomposition.means()["lost_in_candidates"], 4) == 0.2738
    assert any("rerank depth 20 detected on 43 of 43 shared queries" in n for n in d.notes)
    rec = d.summary()["reranked_runs"][0]["depth_detection"]
    assert (rec["shared_queries"], rec["held"], rec["queries_only_in_reranked"]) == (43, 43, 3)


@pytest.mark.data
def test_dl19_half_a_run_its_missing_queries_are_labelled_missing_and_out_of_the_split(dl19_runs, tmp_path):
    """The shuffled depth-20 run without 22 of DL19's 43 queries: once those 22 were labelled reranker-hurt and
    their whole loss counted as lost in reranking (22 of 22). Now: label ``missing``, counted, warned about, out
    of the loss split, whose means are checked against a plain-Python nDCG@10 over the 21 queries kept."""
    import math

    from rankllm import ndcg10, run_lists

    from toolkit.data.records import QUERY_ID, Run
    from toolkit.errors import TwostageWarning
    from toolkit.report.diagnosis_page import write_diagnosis_report

    qrels, bm25, shuffled, _ = dl19_runs
    qids = sorted(bm25.frame[QUERY_ID].unique().tolist())
    kept, dropped = qids[::2], qids[1::2]
    assert (len(kept), len(dropped)) == (22, 21) or (len(kept), len(dropped)) == (21, 22)
    kept, dropped = (kept, dropped) if len(dropped) == 22 else (dropped, kept)
    half = Run(frame=shuffled.frame[shuffled.frame[QUERY_ID].isin(kept)].reset_index(drop=True), path="half.trec")
    with pytest.warns(TwostageWarning, match=r"half lacks 22 queries that bm25 and the qrels hold"):
        d = diagnose(
            DiagnosisInputs(qrels, {"bm25": bm25}, {"half": half}), DiagnosisOptions(worst_n=5, permutations=200)
        )
    p = d.primary
    assert (p.depth, p.depth_from) == (20, "detected")  # on the 21 shared queries
    rows = d.rows().set_index("query_id")
    assert sorted(rows.index[rows["diagnosis"] == "missing"]) == sorted(dropped)
    assert d.label_counts["missing"] == 22 and d.label_counts["reranker-hurt"] < 22
    assert rows.loc[dropped, ["lost_in_candidates", "lost_in_reranking"]].isna().all().all()
    s = d.summary()
    assert s["reranked_runs"][0]["missing_queries"] == 22
    assert sorted(s["reranked_runs"][0]["missing_query_ids"]) == sorted(dropped)
    assert any("half lacks 22 queries" in n for n in s["notes"])
    # the hand computation: ideal (1 with a relevant document), the best order of BM25's top 20 then its
    # tail, and the run itself, each by plain-Python nDCG@10, over the 21 queries the run holds
    lists = run_lists(bm25)
    labels = {(q, dd): int(r) for q, dd, r in qrels.frame.itertuples(index=False)}
    best = {
        q: sorted(lists[q][:20], key=lambda x: (-max(labels.get((q, x), 0), 0), lists[q].index(x))) + lists[q][20:]
        for q in kept
    }
    ceiling, reranked = ndcg10(qrels, best, kept), ndcg10(qrels, run_lists(half), kept)
    ideal = {q: 1.0 if any(g > 0 for (qq, _), g in labels.items() if qq == q) else 0.0 for q in kept}
    hand_c = math.fsum(ideal[q] - ceiling[q] for q in kept) / len(kept)
    hand_r = math.fsum(ceiling[q] - reranked[q] for q in kept) / len(kept)
    m = p.decomposition.means()
    assert (m["queries"], m["missing_queries"]) == (21, 22)
    assert m["lost_in_candidates"] == pytest.approx(hand_c, abs=1e-12)
    assert m["lost_in_reranking"] == pytest.approx(hand_r, abs=1e-12)
    assert m["reranked"] == pytest.approx(math.fsum(reranked.values()) / 21, abs=1e-12)
    # the systems table and the headline keep -c: a missing query scores 0 there, over all 43
    rr = next(x for x in s["systems"] if x["name"] == "half")
    assert rr["means"]["ndcg_cut_10"] == pytest.approx(math.fsum(reranked.values()) / 43, abs=1e-12)
    # the missing queries are no one's worst or most hurt query
    assert not {w["query_id"] for w in d.worst} & set(dropped)
    assert not {x["query_id"] for x in d.hurt_most["half"]} & set(dropped)
    write_diagnosis_report(d, tmp_path / "out")
    html = (tmp_path / "out" / "index.html").read_text()
    assert "22 queries bm25 and the qrels hold are missing from it: labelled missing" in html
