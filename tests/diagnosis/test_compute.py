"""Two-stage diagnosis: labels from the loss decomposition, query types, the reorder check, worst queries,
report files, CLI.

A tiny inline collection has one query per label, with values computed by
hand; real-data checks use the DL19 BM25 run and reorderings of it (no model).
"""

from __future__ import annotations

import csv
import json
import math

import pandas as pd
import pytest
from samples import N, tiny, write_tiny

from toolkit.data.records import run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, check_reordering, diagnose
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.diagnosis.query_labels import LABELS, Thresholds, label_query
from toolkit.diagnosis.query_types import (
    DEFAULT_TYPE_RULES,
    TypeRule,
    classify_query,
    load_type_rules,
    read_query_types,
)
from toolkit.errors import ConfigError, DepthNotDetectedError, InputFormatError


def _log2(r):
    return math.log2(r + 1)


def test_tiny_labels_and_values():
    qrels, first, reranked, texts, queries = tiny()
    before = (qrels.frame.copy(), first.frame.copy(), reranked.frame.copy())
    d = diagnose(
        DiagnosisInputs(
            qrels, first, reranked, queries=queries, texts=lambda ids: {i: texts[i] for i in ids if i in texts}
        )
    )
    t = d.per_query.set_index("query_id")
    assert list(t.index) == ["q1", "q2", "q3", "q4", "q5", "q6", "q7"]  # -c: every qrels query, one row each
    assert d.primary.depth == 10 and d.primary.depth_from == "detected"  # every query holds the rule at 10
    assert t["diagnosis"].to_dict() == {
        "q1": "ok",
        "q2": "reranker-hurt",  # the first stage had r1 at rank 1: not the candidates' fault
        "q3": "reranker-misordered",
        "q4": "unjudged-top",
        "q5": "ok",
        "q6": "candidates-missed",
        "q7": "no-relevant",
    }
    # q2: r1 at rank 10 of 4 relevant (all grade 2); the best order of its candidates puts r1 first
    idcg = sum(2 / _log2(r) for r in range(1, 5))
    assert t.loc["q2", "reranked_ndcg_cut_10"] == pytest.approx((2 / _log2(10)) / idcg)
    assert t.loc["q2", "first_ndcg_cut_10"] == pytest.approx(2 / idcg)
    assert t.loc["q2", "ceiling_ndcg_cut_10"] == pytest.approx(2 / idcg) and t.loc["q2", "ideal_ndcg_cut_10"] == 1
    assert t.loc["q2", "lost_in_candidates"] == pytest.approx(1 - 2 / idcg)
    assert t.loc["q2", "lost_in_reranking"] == pytest.approx(2 / idcg - (2 / _log2(10)) / idcg)
    assert t.loc["q2", "first_recall_10"] == 0.25
    assert (t.loc["q2", "num_rel"], t.loc["q2", "rel_in_candidates"], t.loc["q2", "rel_missing_from_candidates"]) == (
        4,
        1,
        3,
    )
    # q3: s1, s2 at ranks 9 and 10; both are candidates, so the ceiling is 1 and all the loss is the reranker's
    assert t.loc["q3", "reranked_ndcg_cut_10"] == pytest.approx((2 / _log2(9) + 2 / _log2(10)) / (2 + 2 / _log2(2)))
    assert t.loc["q3", "ceiling_ndcg_cut_10"] == 1 and t.loc["q3", "lost_in_candidates"] == 0
    assert t.loc["q3", "first_recall_10"] == 1.0 and t.loc["q3", "rel_in_top_10"] == 2
    # q4: 9 unjudged of 10
    assert t.loc["q4", "reranked_judged_10"] == pytest.approx(0.1) and t.loc["q4", "unjudged_in_top_10"] == 9
    # q5: grade 1 only: relevant for nDCG (all grades) but not for recall (level 2)
    assert t.loc["q5", "num_rel"] == 0 and t.loc["q5", "reranked_ndcg_cut_10"] == 1.0
    # q6: in no run, scores 0 under -c; its ceiling is 0 too: all of it is lost in the candidates
    assert t.loc["q6", ["first_ndcg_cut_10", "reranked_ndcg_cut_10", "first_recall_10"]].tolist() == [0, 0, 0]
    assert t.loc["q6", ["ceiling_ndcg_cut_10", "lost_in_candidates", "lost_in_reranking"]].tolist() == [0, 1, 0]
    # q7: nothing to find
    assert t.loc["q7", ["ideal_ndcg_cut_10", "ceiling_ndcg_cut_10", "lost_in_candidates"]].tolist() == [0, 0, 0]
    assert d.label_counts == {
        "ok": 2,
        "reranker-hurt": 1,
        "reranker-misordered": 1,
        "candidates-missed": 1,
        "unjudged-top": 1,
        "no-relevant": 1,
        "missing": 0,  # q6 is in no run, the first stage included: not missing from the reranked run
    }
    losses = t["lost_in_candidates"] + t["lost_in_reranking"]
    assert (losses - (t["ideal_ndcg_cut_10"] - t["reranked_ndcg_cut_10"])).abs().max() < 1e-15
    means = d.summary()["decomposition"]
    assert means["ceiling"] == pytest.approx(t["ceiling_ndcg_cut_10"].mean())
    assert means["lost_in_candidates"] + means["lost_in_reranking"] == pytest.approx(
        means["ideal"] - means["reranked"], abs=1e-15
    )
    head = {r["key"]: r for r in d.headline}
    assert head["num_q"]["first_stage"] == 7
    assert head["ndcg_cut_10"]["reranked"] == pytest.approx(t["reranked_ndcg_cut_10"].mean())
    assert head["recall_10"]["first_stage"] == pytest.approx(t["first_recall_10"].mean())
    assert "recall_1000" not in head  # the first stage is not deeper than the rerank depth
    assert d.reorder_check["only_reorders"]
    # inputs untouched
    assert before[0].equals(qrels.frame) and before[1].equals(first.frame) and before[2].equals(reranked.frame)


def test_tiny_types_worst_and_summary():
    qrels, first, reranked, texts, queries = tiny()
    d = diagnose(
        DiagnosisInputs(
            qrels, first, reranked, queries=queries, texts=lambda ids: {i: texts[i] for i in ids if i in texts}
        ),
        DiagnosisOptions(worst_n=3, missed_shown=2),
    )
    t = d.per_query.set_index("query_id")
    assert t["query_type"].to_dict() == {
        "q1": "procedure",
        "q2": "symptoms/causes",
        "q3": "entity/factoid",
        "q4": "identifier-like",
        "q5": "other",
        "q6": "long-form",
        "q7": "other",
    }
    types = d.types.set_index("query_type")
    assert types.loc["other", "queries"] == 2 and types["too_small"].all()  # 7 queries: no type has 5
    assert types.loc["other", "mean_ceiling"] == pytest.approx(0.5)  # q5 1, q7 0 (nothing to find)
    # lowest nDCG@10, ties by query id; q7 (no-relevant: nothing to find) is not listed
    assert [w["query_id"] for w in d.worst] == ["q6", "q2", "q4"]
    q2 = next(w for w in d.worst if w["query_id"] == "q2")
    assert [i["doc_id"] for i in q2["top_10"]] == N[:9] + ["r1"]
    assert q2["top_10"][0]["grade"] == 0 and q2["top_10"][0]["snippet"] == "filler zero"
    assert q2["top_10"][-1]["snippet"] == "first relevant"
    # best judged documents it missed: r2.. (not in the candidates), r1 is in the top 10 so not listed
    assert [m["doc_id"] for m in q2["best_missed"]] == ["r2", "r3"]
    assert all(m["where"] == "not in the candidates" and m["snippet"] is None for m in q2["best_missed"])
    q4 = next(w for w in d.worst if w["query_id"] == "q4")
    assert q4["top_10"][0]["grade"] is None  # shown as "unjudged"
    summary = json.loads(json.dumps(d.summary(), allow_nan=False))
    assert summary["labels"]["ok"] == 2 and summary["thresholds"]["ok"] == 0.6
    assert set(summary["label_meaning"]) == set(LABELS)
    assert set(summary["decomposition"]) == {
        "system",
        "first_stage_run",
        "measure",
        "depth",
        "first_stage",
        "ceiling",
        "reranked",
        "ideal",
        "lost_in_candidates",
        "lost_in_reranking",
        "queries",  # the queries of the split
        "missing_queries",  # those the reranked run lacks, out of it
    }
    assert [p["depth"] for p in summary["depth_curve"]] == [10] and summary["depth_curve_exact"]


def test_reorder_check_flags_introduced_documents():
    qrels, first, reranked, _, _ = tiny()
    rows = reranked.frame.values.tolist() + [["q1", "intruder", 99.0], ["q9", "x", 1.0]]
    bad = run_from_rows([tuple(r) for r in rows], tag="bad")
    chk = check_reordering(first, bad, depth=100)
    assert not chk["only_reorders"]
    assert chk["introduced_documents"] == 2 and chk["introduced_per_query"] == {"q1": 1, "q9": 1}
    assert chk["queries_only_in_reranked"] == ["q9"]
    # q1's intruder breaks the depth rule in 1 of the 6 shared queries (q9 is only in the run): no depth is
    # detected, and diagnose says so instead of reading the run as a rerank of its longest list
    with pytest.raises(DepthNotDetectedError, match=r"at most 5 of 6; 1 queries only in the reranked run"):
        diagnose(DiagnosisInputs(qrels, first, bad))
    d = diagnose(DiagnosisInputs(qrels, first, bad), DiagnosisOptions(depth=10))
    assert d.per_query.set_index("query_id").loc["q1", "introduced_docs"] == 1
    assert "introduced 2 documents" in d.notes[0]
    # depth matters: the top 5 of the first stage does not hold q1's a and b
    assert check_reordering(first, reranked, depth=5)["introduced_per_query"]["q1"] == 5


@pytest.mark.parametrize(
    "ideal, first, reranked, ceiling, unjudged, expected",
    [
        (0, 0.0, 0.0, 0.0, 0, "no-relevant"),
        (1, 0.0, 0.6, 0.6, 10, "ok"),  # ok wins over every absolute label
        (1, 0.0, 0.59, 1.0, 4, "unjudged-top"),
        (1, 0.0, 0.59, 1.0, 3, "reranker-misordered"),  # exactly 30% unjudged is still judged enough
        (1, 0.0, 0.1, 0.59, 0, "candidates-missed"),  # even the best order of the candidates is not ok
        (1, 0.0, 0.1, 0.6, 0, "reranker-misordered"),  # a better order of the candidates would be ok
        (0.5, 0.0, 0.3, 0.5, 0, "ok"),  # relative to the ideal (P@k of a query with few relevant)
        (0.5, 0.0, 0.2, 0.29, 0, "candidates-missed"),
        # relative to the first stage, decided before the absolute labels (hurt 0.05 x ideal)
        (1, 0.387, 0.236, 0.5, 0, "reranker-hurt"),  # DL19 489204's values: not candidates-missed
        (1, 1.0, 0.9, 1.0, 0, "reranker-hurt"),  # ok in absolute terms, but worse than the first stage
        (1, 0.65, 0.6, 1.0, 0, "ok"),  # exactly 0.05 lower: within the tolerance
        (0.5, 0.5, 0.48, 0.5, 0, "ok"),  # 0.02 < 0.05 x 0.5: the tolerance is a share of the ideal
        (0.5, 0.5, 0.47, 0.5, 0, "reranker-hurt"),  # 0.03 > 0.025
    ],
)
def test_label_rules(ideal, first, reranked, ceiling, unjudged, expected):
    assert label_query(ideal, reranked, ceiling, unjudged, Thresholds(), first_stage=first) == expected


def test_tiny_hurt_and_helped_most():
    """Sorted by reranked - first stage (not by the reranked value): q2 lost r1 from rank 1 to rank 10, q1 got
    a and b from ranks 9, 10 to 1, 2; every other query kept its value."""
    qrels, first, reranked, _, queries = tiny()
    d = diagnose(DiagnosisInputs(qrels, first, reranked, queries=queries), DiagnosisOptions(worst_n=5))
    idcg_q2 = sum(2 / _log2(r) for r in range(1, 5))
    idcg_q1 = 3 + 2 / _log2(2)
    (hurt,) = d.hurt_most["reranked"]
    assert hurt["query_id"] == "q2" and hurt["diagnosis"] == "reranker-hurt"
    assert hurt["delta"] == pytest.approx((2 / _log2(10) - 2) / idcg_q2)
    assert hurt["first_stage"] == pytest.approx(2 / idcg_q2) and hurt["query"] == "what causes rust"
    (helped,) = d.helped_most["reranked"]
    assert helped["query_id"] == "q1" and helped["reranked"] == 1.0
    assert helped["delta"] == pytest.approx(1 - (3 / _log2(9) + 2 / _log2(10)) / idcg_q1)
    t = d.per_query.set_index("query_id")["delta_ndcg_cut_10"]
    assert t.drop(["q1", "q2"]).abs().max() == 0
    summary = d.summary()
    assert [q["query_id"] for q in summary["hurt_most"]["reranked"]] == ["q2"]
    assert summary["thresholds"]["hurt"] == 0.05 and "reranker-hurt" in summary["threshold_rules"]
    # a larger tolerance turns the label off for q2; it falls back to the absolute labels
    loose = diagnose(DiagnosisInputs(qrels, first, reranked, queries=queries), DiagnosisOptions(hurt=0.5))
    assert loose.per_query.set_index("query_id").loc["q2", "diagnosis"] == "candidates-missed"


def test_thresholds_validated():
    with pytest.raises(ConfigError, match="threshold ok must be within"):
        Thresholds(ok=1.5)


def test_rules_file_replaces_defaults(tmp_path):
    p = tmp_path / "rules.tsv"
    p.write_text("# my rules\nmedical\t\\b(disease|pain)\\b\nplace\t\\b(city|country)\\b\n")
    rules = load_type_rules(p)
    assert rules == (TypeRule("medical", r"\b(disease|pain)\b"), TypeRule("place", r"\b(city|country)\b"))
    assert classify_query("back pain how to treat", rules) == "medical"
    assert classify_query("how to cook rice", rules) == "other"
    y = tmp_path / "rules.yaml"
    y.write_text("rules:\n  - {type: medical, pattern: 'pain'}\n  - {type: place, pattern: city, meaning: a place}\n")
    assert load_type_rules(y) == (TypeRule("medical", "pain"), TypeRule("place", "city", "a place"))
    assert len(DEFAULT_TYPE_RULES) == 7  # the defaults are left as they are


@pytest.mark.parametrize(
    "content, message",
    [
        ("medical\t(unclosed\n", r"rules.tsv:1: bad regular expression"),
        ("\n# only comment\nno tab here\n", r"rules.tsv:3: expected 'type<TAB>regular expression'"),
        ("# nothing\n", "no rules"),
    ],
)
def test_rules_file_errors(tmp_path, content, message):
    p = tmp_path / "rules.tsv"
    p.write_text(content)
    with pytest.raises(InputFormatError, match=message):
        load_type_rules(p)


def test_one_inputs_value_serves_diagnose_and_its_uncertainty():
    """A ``DiagnosisInputs`` is read, never changed: ``diagnose`` and ``diagnose_with_uncertainty`` given the same
    value give the same per-query table and tests (the second adds the intervals' record), the type rules
    given as a generator classify the queries in both, and the query texts are the value's own (the caller's
    dict changed afterwards changes nothing)."""
    from toolkit.diagnosis.compute import diagnose_with_uncertainty

    qrels, first, reranked, _, queries = tiny()
    queries = dict(queries)
    rules = (r for r in [TypeRule("cooking", "bake")])
    inputs = DiagnosisInputs(qrels, first, reranked, queries=queries, type_rules=rules)
    queries["q1"] = "something else"
    options = DiagnosisOptions(worst_n=3, permutations=100, bootstrap=200)
    plain = diagnose(inputs, options)
    annotated = diagnose_with_uncertainty(inputs, options)
    assert inputs.work is None and inputs.type_rules == (TypeRule("cooking", "bake"),)
    for d in (plain, annotated):
        row = d.per_query.set_index("query_id").loc["q1"]
        assert (row["query"], row["query_type"]) == ("how to bake apple pie", "cooking")
        assert d.settings["type_rules"] == [{"type": "cooking", "pattern": "bake", "meaning": ""}]
    pd.testing.assert_frame_equal(plain.per_query, annotated.per_query, check_exact=True)
    assert [(c["run"], c["delta"], c["p_permutation"]) for c in plain.comparisons] == [
        (c["run"], c["delta"], c["p_permutation"]) for c in annotated.comparisons
    ]
    assert "uncertainty" not in plain.settings and annotated.settings["uncertainty"]["ci"]["resamples"] == 200
    assert all(c["ci_low"] <= c["delta"] <= c["ci_high"] for c in annotated.comparisons)
    assert {k: v for k, v in annotated.settings.items() if k != "uncertainty"} == plain.settings


def test_query_types_file(tmp_path):
    p = tmp_path / "types.tsv"
    p.write_text("q1\tcooking\nq2\tscience\n")
    assert read_query_types(p) == {"q1": "cooking", "q2": "science"}
    qrels, first, reranked, _, queries = tiny()
    d = diagnose(DiagnosisInputs(qrels, first, reranked, queries=queries, query_types=read_query_types(p)))
    assert d.per_query.set_index("query_id")["query_type"].to_dict() == {
        "q1": "cooking",
        "q2": "science",
        "q3": "unlisted",
        "q4": "unlisted",
        "q5": "unlisted",
        "q6": "unlisted",
        "q7": "unlisted",
    }
    assert any("not in the query-types file" in n for n in d.notes)
    p.write_text("q1\tcooking\nq1\tagain\n")
    with pytest.raises(InputFormatError, match=r"types\.tsv:2: query 'q1' is typed twice"):
        read_query_types(p)


def test_cli_diagnose_writes_report(tmp_path, cli):
    qp = write_tiny(tmp_path)
    out = tmp_path / "reports" / "tiny"
    res = cli(
        "diagnose",
        "--qrels",
        qp,
        "--first-stage",
        tmp_path / "first.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--topics",
        tmp_path / "topics.tsv",
        "--out",
        out,
        "--worst",
        "2",
    )
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} >= {
        "index.html",
        "report.md",
        "per_query.csv",
        "pairs.csv",
        "summary.json",
        "plots",
    }
    with open(out / "per_query.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7 and [r["diagnosis"] for r in rows][:3] == ["ok", "reranker-hurt", "reranker-misordered"]
    assert {r["system"] for r in rows} == {"rr"} and {r["first_stage_run"] for r in rows} == {"first"}
    assert {"ceiling_ndcg_cut_10", "lost_in_candidates", "lost_in_reranking", "rbo", "kendall_tau_10"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["queries"] == 7 and len(summary["worst_queries"]) == 2
    html = (out / "index.html").read_text()
    assert html.count("data:image/png;base64,") == 7 and "<link" not in html and 'src="http' not in html
    assert "Reorder check passed" in html and "how to bake apple pie" in html
    md = (out / "report.md").read_text()
    assert (
        "| nDCG@10 |" in md
        and "## Worst 2 queries (rr, lowest nDCG@10)" in md
        and "## Where the loss is: nDCG@10" in md
    )
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "ceiling_vs_reranked.png",
        "decomposition.png",
        "depth_curve.png",
        "judged_hist.png",
        "promotion_profile.png",
        "query_types.png",
        "stage_scatter.png",
    ]


def test_cli_diagnose_options_and_errors(tmp_path, cli):
    qp = write_tiny(tmp_path)
    base = ["diagnose", "--qrels", qp, "--first-stage", tmp_path / "first.trec", "--reranked", tmp_path / "rr.trec"]
    res = cli(*base, "--out", tmp_path / "o", "--ok-ndcg", "0.0", "--hurt", "1", "--no-complete")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((tmp_path / "o" / "per_query.csv").read_text().splitlines()))
    assert len(rows) == 6  # q6 is in no run and --no-complete leaves it out
    assert {r["diagnosis"] for r in rows} == {"ok", "no-relevant"}
    assert {r["query_type"] for r in rows} == {"unknown"}  # no query texts given
    res = cli(*base, "--out", tmp_path / "o2", "--ok-ndcg", "2")
    assert res.exit_code == 2
    res = cli(*base, "--out", tmp_path / "o2", "--hurt", "-0.1")
    assert res.exit_code == 2 and "--hurt" in res.output
    (tmp_path / "bad.trec").write_text("q1 Q0 a 1 notanumber x\n")
    res = cli(
        "diagnose",
        "--qrels",
        qp,
        "--first-stage",
        tmp_path / "bad.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--out",
        tmp_path / "o3",
    )
    assert res.exit_code == 1 and "bad.trec:1: score 'notanumber' is not a number" in res.output


# ------------------------------------------------------------------ real data
@pytest.fixture(scope="module")
def dl19(msmarco):
    from toolkit.data.trec_io import read_qrels, read_run

    return read_qrels(msmarco / "qrels.dl19-passage.txt"), read_run(msmarco / "runs" / "run.dl19.bm25.top100.txt")


@pytest.mark.data
def test_dl19_reordered_keeps_recall(dl19):
    """Reversing BM25's order is a pure reordering: R@100 stays 0.4910, BM25 nDCG@10 is 0.5058 (trec_eval)."""
    qrels, bm25 = dl19
    rev = run_from_rows(list(zip(bm25.frame["query_id"], bm25.frame["doc_id"], -bm25.frame["score"])), tag="rev")
    d = diagnose(DiagnosisInputs(qrels, bm25, rev), DiagnosisOptions(worst_n=2))
    head = {r["key"]: r for r in d.headline}
    assert round(head["recall_100"]["first_stage"], 4) == 0.4910
    assert round(head["recall_100"]["reranked"], 4) == 0.4910
    assert round(head["ndcg_cut_10"]["first_stage"], 4) == 0.5058
    assert head["ndcg_cut_10"]["reranked"] < 0.5058
    assert head["num_q"]["first_stage"] == 43 and len(d.per_query) == 43
    assert d.reorder_check["only_reorders"] and d.reorder_check["candidates_kept"] == 4300


def _reorder_by(first, other):
    """``first``'s documents in ``other``'s order (those ``other`` lacks after them, in ``first``'s order),
    scored -position so that no two tie."""
    from toolkit.data.ranking import order_run

    f = order_run(first.frame, "float32")[["query_id", "doc_id", "rank"]]
    o = order_run(other.frame, "float32")[["query_id", "doc_id", "rank"]].rename(columns={"rank": "other_rank"})
    t = f.merge(o, on=["query_id", "doc_id"], how="left")
    t["key"] = t["other_rank"].fillna(10_000 + t["rank"])
    t = t.sort_values(["query_id", "key"], kind="stable")
    t["score"] = -t.groupby("query_id").cumcount().astype(float)
    return run_from_rows(list(zip(t["query_id"], t["doc_id"], t["score"])), tag="reordered")


@pytest.mark.data
def test_dl19_reranker_hurt_against_pytrec_eval(dl19, msmarco):
    """BM25's top 100 in SPLADE++'s order: 489204 goes from 0.387 to 0.236 and is labelled
    reranker-hurt (it was candidates-missed); every label and delta checked against pytrec_eval's nDCG@10."""
    import pytrec_eval
    from oracles import pytrec_inputs

    from toolkit.data.trec_io import read_run

    qrels, bm25 = dl19
    rr = _reorder_by(bm25, read_run(msmarco / "runs" / "run.dl19.splade-pp-ed.top100.txt"))
    d = diagnose(DiagnosisInputs(qrels, bm25, rr), DiagnosisOptions(worst_n=43, permutations=100))
    t = d.per_query.set_index("query_id")
    assert (round(t.loc["489204", "first_ndcg_cut_10"], 3), round(t.loc["489204", "reranked_ndcg_cut_10"], 3)) == (
        0.387,
        0.236,
    )
    assert t.loc["489204", "diagnosis"] == "reranker-hurt"
    q, r_first = pytrec_inputs(qrels.frame, bm25.frame[["query_id", "doc_id", "score"]])
    _, r_rr = pytrec_inputs(qrels.frame, rr.frame[["query_id", "doc_id", "score"]])
    ev = pytrec_eval.RelevanceEvaluator(q, {"ndcg_cut.10"})
    first, reranked = ev.evaluate(r_first), ev.evaluate(r_rr)
    delta = {x: reranked[x]["ndcg_cut_10"] - first[x]["ndcg_cut_10"] for x in first}
    assert t["delta_ndcg_cut_10"].to_dict() == pytest.approx(delta, abs=1e-9)
    hurt = {x for x, v in delta.items() if v < -0.05 - 1e-12}  # every DL19 query has a relevant passage: ideal 1
    assert set(t.index[t["diagnosis"] == "reranker-hurt"]) == hurt == {"359349", "489204"}
    by_delta = sorted(delta, key=lambda x: (delta[x], x))
    assert [w["query_id"] for w in d.hurt_most["reranked"]] == [x for x in by_delta if delta[x] < 0]
    assert [w["query_id"] for w in d.helped_most["reranked"]] == [x for x in by_delta[::-1] if delta[x] > 0][:43]


@pytest.mark.data
def test_dl19_other_first_stage_is_flagged(dl19, msmarco):
    from toolkit.data.trec_io import read_run

    qrels, bm25 = dl19
    tasb = read_run(msmarco / "runs" / "run.dl19.tasb.top100.txt")
    with pytest.raises(DepthNotDetectedError, match=r"at most 0 of 43"):  # tasb is no reranking of bm25
        diagnose(DiagnosisInputs(qrels, bm25, tasb), DiagnosisOptions(worst_n=0))
    d = diagnose(DiagnosisInputs(qrels, bm25, tasb), DiagnosisOptions(depth=100, worst_n=0))
    assert not d.reorder_check["only_reorders"] and d.reorder_check["introduced_documents"] > 1000
    assert round({r["key"]: r for r in d.headline}["recall_100"]["reranked"], 4) == 0.6097


@pytest.mark.data
def test_cli_diagnose_reads_texts_from_sidecar(dl19, msmarco, tmp_path, cli):
    """The exact user form: no --topics; query texts and snippets come from the reranked run's sidecar."""
    _qrels, bm25 = dl19
    from toolkit.data.trec_io import write_json, write_run

    rr = tmp_path / "runs" / "dl19.rev.trec"
    rev = run_from_rows(list(zip(bm25.frame["query_id"], bm25.frame["doc_id"], -bm25.frame["score"])), tag="rev")
    write_run(rev, rr)
    cands = msmarco / "candidates" / "dl19.bm25.top100.json"
    write_json(
        str(rr) + ".meta.json",
        {
            "texts": {"kind": "candidates-json", "path": str(cands)},
            "reranker": {"model": "reverse"},
            "topics": str(cands),
        },
    )
    out = tmp_path / "reports" / "dl19-rev"
    res = cli(
        "diagnose",
        "--qrels",
        msmarco / "qrels.dl19-passage.txt",
        "--first-stage",
        msmarco / "runs" / "run.dl19.bm25.top100.txt",
        "--reranked",
        rr,
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    w = summary["worst_queries"][0]
    assert w["query"] and all(i["snippet"] for i in w["top_10"])
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str})
    assert len(pq) == 43 and pq["query"].str.len().min() > 0 and "diagnosis" in pq


def test_cli_recall_level_follows_the_qrels(tmp_path, cli):
    """Binary qrels (CACM-like): the default recall level is 1, graded qrels (DL) get 2; both stated."""
    (tmp_path / "qrels.txt").write_text("1 0 D1 1\n1 0 D2 1\n1 0 D3 0\n")
    (tmp_path / "first.trec").write_text("1 Q0 D3 1 3 f\n1 Q0 D1 2 2 f\n1 Q0 X 3 1 f\n")
    (tmp_path / "rr.trec").write_text("1 Q0 D1 1 3 r\n1 Q0 D3 2 2 r\n1 Q0 X 3 1 r\n")
    res = cli(
        "diagnose",
        "--qrels",
        tmp_path / "qrels.txt",
        "--first-stage",
        tmp_path / "first.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--out",
        tmp_path / "o",
        "--depth",
        "3",  # a depth beyond the first stage's 3 documents is an error
    )
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["settings"]["recall_level"] == 1
    head = {r["key"]: r for r in s["headline"]}
    assert head["recall_3"]["first_stage"] == 0.5 and head["recall_3"]["reranked"] == 0.5
    assert "R@3 (-l 1)" in (tmp_path / "o" / "index.html").read_text()


def test_condensed_ndcg_beside_plain_on_dl19_ada2(msmarco):
    # ada2's top 10 holds unjudged passages: nDCG@10 0.7035, condensed (-J) 0.7374 (trec_eval -J gives the same)
    from toolkit.data.trec_io import read_qrels, read_run
    from toolkit.diagnosis.compute import DiagnosisInputs, diagnose

    qrels = read_qrels(msmarco / "qrels.dl19-passage.txt")
    run = read_run(msmarco / "runs" / "run.dl19.openai-ada2.top100.txt")
    # the run as its own rerank: no depth to detect
    diag = diagnose(DiagnosisInputs(qrels, run, run), DiagnosisOptions(depth=100, worst_n=0))
    rows = {r["key"]: r for r in diag.headline}
    assert f"{rows['ndcg_cut_10']['reranked']:.4f}" == "0.7035"
    assert f"{rows['ndcg_cut_10_condensed']['reranked']:.4f}" == "0.7374"
    assert (diag.per_query["reranked_ndcg_cut_10_condensed"] >= diag.per_query["reranked_ndcg_cut_10"] - 1e-12).all()


# ------------------------------------------------------------ several systems
def _external_run(path, reranked):
    """A reranked run as another tool writes it: no sidecar, scores 1/rank, its own tag, tabs and odd spacing."""
    rows = sorted(reranked.frame.itertuples(index=False), key=lambda r: (r.query_id, -r.score, r.doc_id))
    lines, rank, last = [], 0, None
    for r in rows:
        rank = rank + 1 if r.query_id == last else 1
        last = r.query_id
        lines.append(f"{r.query_id}\tQ0  {r.doc_id} {rank}\t{1 / rank!r}   llm-listwise\n")
    path.write_text("".join(lines))


def test_cli_two_rerankers_one_external(tmp_path, cli):
    """A twostage run and an outside (listwise) run over one first stage: decomposition, curves, the tests
    against the first stage (equal to `twostage compare`'s) and between them, disagreements."""
    qp = write_tiny(tmp_path)
    _qrels, first, _reranked, _, _ = tiny()
    # the outside reranker: the first stage's order, but the best candidate first for q2 and q3
    rows = [tuple(r) for r in first.frame.itertuples(index=False)]
    boost = {("q2", "r1"), ("q3", "s1"), ("q3", "s2")}
    ext = run_from_rows([(q, d, s + (100 if (q, d) in boost else 0)) for q, d, s in rows])
    _external_run(tmp_path / "llm.txt", ext)
    out = tmp_path / "o"
    res = cli(
        "diagnose",
        "--qrels",
        qp,
        "--first-stage",
        f"bm25={tmp_path / 'first.trec'}",
        "--reranked",
        f"dense={tmp_path / 'rr.trec'}",
        "--reranked",
        f"llm={tmp_path / 'llm.txt'}",
        "--listwise",
        "llm",
        "--out",
        out,
        "--permutations",
        "500",
    )
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    runs = {r["name"]: r for r in s["reranked_runs"]}
    assert [r["name"] for r in s["systems"]] == ["bm25", "dense", "llm"]
    assert runs["llm"]["listwise"] and not runs["llm"]["depth_curve_exact"] and runs["dense"]["depth_curve_exact"]
    assert any("llm is listwise" in n for n in s["notes"])
    assert runs["llm"]["decomposition"]["ceiling"] == runs["dense"]["decomposition"]["ceiling"]  # same candidates
    pq = pd.read_csv(out / "per_query.csv", dtype={"query_id": str})
    assert len(pq) == 14 and list(pq["system"].unique()) == ["dense", "llm"]
    llm = pq[pq["system"] == "llm"].set_index("query_id")
    assert llm.loc["q3", "reranked_ndcg_cut_10"] == 1.0 and llm.loc["q3", "diagnosis"] == "ok"
    assert llm.loc["q2", "diagnosis"] == "candidates-missed"  # its best: r1 first, still below 0.6
    pairs = pd.read_csv(out / "pairs.csv", dtype={"query_id": str})
    assert pairs.groupby("family").size().to_dict() == {"against the first stage": 14, "between reranked runs": 7}
    # against the first stage: the same numbers as `twostage compare bm25 dense llm`
    cmp = cli(
        "compare",
        "--qrels",
        qp,
        "-c",
        tmp_path / "first.trec",
        tmp_path / "rr.trec",
        tmp_path / "llm.txt",
        "-m",
        "ndcg_cut.10",
        "--permutations",
        "500",
        "--format",
        "json",
    )
    doc = json.loads(cmp.stdout)["results"]["ndcg_cut_10"]
    against = {c["run"]: c for c in s["comparisons"] if c["family"] == "against the first stage"}
    for name, path in (("dense", tmp_path / "rr.trec"), ("llm", tmp_path / "llm.txt")):
        for key in ("mean", "delta", "p_ttest", "p_permutation", "p_adjusted", "wins", "ties", "losses"):
            assert against[name][key] == pytest.approx(doc[str(path)][key], rel=1e-12), (name, key)
    between = [c for c in s["comparisons"] if c["family"] == "between reranked runs"]
    assert len(between) == 1 and (between[0]["baseline"], between[0]["run"]) == ("dense", "llm")
    assert between[0]["p_adjusted"] == between[0]["p_permutation"]  # one pair: nothing to correct
    d = s["disagreements"][0]
    assert (d["system_a"], d["system_b"]) == ("dense", "llm")
    dense = pq[pq["system"] == "dense"].set_index("query_id")["reranked_ndcg_cut_10"]
    shown = [(q["query_id"], q["delta"]) for q in d["queries"]]
    assert len(shown) == 5 and all(
        delta == pytest.approx(llm.loc[q, "reranked_ndcg_cut_10"] - dense[q]) for q, delta in shown
    )
    assert [abs(x) for _, x in shown] == sorted((abs(x) for _, x in shown), reverse=True)
    # q1: a, b ninth and tenth (llm) against first (dense); q3: s1, s2 first (llm) against ninth and tenth
    # (dense); q2: r1 first (llm) against tenth
    assert [q for q, _ in shown[:3]] == ["q1", "q3", "q2"]
    html = (out / "index.html").read_text()
    assert "Where the reranked runs disagree most" in html and "Between reranked runs" in html


def test_several_first_stages_pairing(tmp_path):
    """Each reranked run is paired with the first stage whose candidates hold its documents (or as told)."""
    qrels, first, reranked, _, _ = tiny()
    other = run_from_rows([(q, d + "-x", s) for q, d, s in first.frame.itertuples(index=False)])
    d = diagnose(DiagnosisInputs(qrels, {"a": first, "b": other}, {"rr": reranked}), DiagnosisOptions(worst_n=0))
    assert d.primary.first_stage == "a" and any("taken as a reranking of a (100.0%" in n for n in d.notes)
    assert [c["family"] for c in d.comparisons] == ["against the first stage", "between first stages"]
    from toolkit.diagnosis.reranked import Reranked

    forced = diagnose(
        DiagnosisInputs(qrels, {"a": first, "b": other}, [Reranked("rr", reranked, "b", 10)]),
        DiagnosisOptions(worst_n=0),
    )
    assert forced.primary.first_stage == "b" and not forced.reorder_check["only_reorders"]
    with pytest.raises(ConfigError, match="no first stage named 'c'"):
        diagnose(DiagnosisInputs(qrels, {"a": first}, [Reranked("rr", reranked, "c", 10)]))
    with pytest.raises(ConfigError, match="every run needs its own name; repeated: a"):
        diagnose(DiagnosisInputs(qrels, {"a": first}, {"a": reranked}))


def test_cli_measure_depth_and_name_errors(tmp_path, cli):
    qp = write_tiny(tmp_path)
    base = ["diagnose", "--qrels", qp, "--first-stage", tmp_path / "first.trec", "--reranked", tmp_path / "rr.trec"]
    res = cli(*base, "--out", tmp_path / "p", "-m", "P.5", "--depth", "5", "--curve-depths", "2,3")
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert s["decomposition"]["measure"] == "P_5" and s["decomposition"]["depth"] == 5
    assert [p["depth"] for p in s["depth_curve"]] == [2, 3, 5]
    pq = pd.read_csv(tmp_path / "p" / "per_query.csv", dtype={"query_id": str}).set_index("query_id")
    # q2 at level 2: 4 relevant, the top-5 candidates hold r1 only: ceiling P@5 = 1/5, ideal 4/5
    assert (pq.loc["q2", "ceiling_P_5"], pq.loc["q2", "ideal_P_5"]) == pytest.approx((0.2, 0.8))
    for args, message in (
        (["-m", "judged.10"], "has no ceiling"),
        (["--listwise", "nope"], "no reranked run named"),
        (["--pair", "rr=nope"], "no run named"),
        (["--curve-depths", "a,b"], "expected depths"),
    ):
        res = cli(*base, "--out", tmp_path / "x", *args)
        assert res.exit_code == 2 and message in res.output, res.output
    args = ["diagnose", "--qrels", qp, "--first-stage", tmp_path / "first.trec", "--reranked", tmp_path / "first.trec"]
    same = cli(*args, "--out", tmp_path / "same")
    # the first stage's own order has no detectable depth: one error naming the run and the option (once: its
    # longest list, silently)
    assert same.exit_code == 1 and "is in first's own order" in same.output, same.output
    assert "Give it: --depth first (reranked)=K" in same.output
    same = cli(*args, "--depth", "10", "--out", tmp_path / "same")
    assert same.exit_code == 0  # the same file twice: the reranked one is named 'first (reranked)'
    assert json.loads((tmp_path / "same" / "summary.json").read_text())["decomposition"]["system"] == "first (reranked)"


def test_cli_reads_depth_and_listwise_from_the_sidecar(tmp_path, cli):
    qp = write_tiny(tmp_path)
    from toolkit.data.trec_io import write_json

    write_json(
        str(tmp_path / "rr.trec") + ".meta.json",
        {"depth": 8, "listwise": True, "reranker": {"model": "some-llm", "kind": "listwise"}},
    )
    res = cli(
        "diagnose",
        "--qrels",
        qp,
        "--first-stage",
        tmp_path / "first.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--out",
        tmp_path / "o",
    )
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "o" / "summary.json").read_text())["reranked_runs"][0]
    assert (run["depth"], run["depth_from"], run["listwise"]) == (8, "sidecar", True)


def test_diagnosis_modules_import_light():
    import subprocess
    import sys

    code = (
        "import sys, toolkit.cli, toolkit.cli.diagnose, toolkit.diagnosis.compute, toolkit.diagnosis.decompose, toolkit.stats.rank_similarity, "
        "toolkit.diagnosis.query_views, toolkit.report.diagnosis_page, toolkit.report.compare_page, toolkit.report.reproduction; "
        "bad = [m for m in ('torch', 'sentence_transformers', 'matplotlib', 'pyserini', 'jnius', 'faiss', 'scipy', "
        "'selenium') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
