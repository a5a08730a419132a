"""Qrels with their origin: human / fill / judge policies on hand-computed examples, the
provenance of ``eval``, ``compare`` and ``diagnose`` stating the policy and counts, and judged@k per origin."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from judge_server import write_qrels

import toolkit as ts
from toolkit.cli import main
from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.errors import ConfigError
from toolkit.evaluation.checks import judged_by_origin
from toolkit.quality.qrels_origin import merge_qrels

HUMAN = [("q1", "a", 2), ("q1", "b", 0), ("q1", "c", -1), ("q2", "a", 1)]
JUDGE = [("q1", "a", 0), ("q1", "c", 3), ("q1", "d", 1), ("q2", "b", 2), ("q3", "a", 3)]


def _labels(q):
    return sorted((r.query_id, r.doc_id, r.relevance) for r in q.frame.itertuples())


def test_policies_hand_computed():
    human, judge = qrels_from_rows(HUMAN), qrels_from_rows(JUDGE)
    fill = merge_qrels(human, judge, "fill")
    # human labels kept (q1 a stays 2, not the judge's 0); the human -1 on q1 c is a hole the judge fills (3);
    # q1 d and q2 b are holes; q3 has no human label at all, so the judge's q3 a is left out
    assert _labels(fill) == [
        ("q1", "a", 2),
        ("q1", "b", 0),
        ("q1", "c", 3),
        ("q1", "d", 1),
        ("q2", "a", 1),
        ("q2", "b", 2),
    ]
    c = fill.origin.counts
    assert (c["human_labels_used"], c["judge_labels_used"]) == (3, 3)
    assert c["judge_labels_on_judged_documents"] == 1 and c["judge_labels_on_queries_without_human_labels"] == 1
    origin = {(r.query_id, r.doc_id): r.origin for r in fill.origin.labels.itertuples()}
    assert origin[("q1", "c")] == "judge" and origin[("q1", "a")] == "human"
    assert _labels(merge_qrels(human, judge, "human")) == sorted(HUMAN)
    assert _labels(merge_qrels(human, judge, "judge")) == sorted(JUDGE)
    assert len({merge_qrels(human, judge, p).sha256 for p in ("human", "fill", "judge")}) == 3
    with pytest.raises(ConfigError, match="policy"):
        merge_qrels(human, judge, "both")


def test_judged_by_origin_adds_up_to_judged():
    fill = merge_qrels(qrels_from_rows(HUMAN), qrels_from_rows(JUDGE), "fill")
    run = run_from_rows([("q1", "a", 5.0), ("q1", "c", 4.0), ("q1", "x", 3.0), ("q1", "d", 2.0), ("q2", "b", 1.0)])
    got = judged_by_origin(run, fill.origin, (2, 4))
    # q1 top 2: a (human), c (judge); q2 top min(2, 1) = 1: b (judge)
    assert got["judged_2"] == {"human": pytest.approx((1 / 2 + 0) / 2), "judge": pytest.approx((1 / 2 + 1) / 2)}
    # q1 top 4: a human, c judge, x none, d judge; q2: b judge
    assert got["judged_4"] == {"human": pytest.approx((1 / 4) / 2), "judge": pytest.approx((2 / 4 + 1) / 2)}
    ev = ts.evaluate(fill, run, ["judged.2", "judged.4"])
    for k in (2, 4):
        split = ev.provenance["qrels"]["origin"]["judged_by_origin"][f"judged_{k}"]
        assert split["human"] + split["judge"] == pytest.approx(ev.summary[f"judged_{k}"])


def test_eval_with_judge_qrels_equals_eval_of_the_merged_file(tmp_path):
    human = write_qrels(tmp_path / "human.qrels", HUMAN)
    judge = write_qrels(tmp_path / "judge.qrels", JUDGE)
    merged = write_qrels(
        tmp_path / "merged.qrels",
        [("q1", "a", 2), ("q1", "b", 0), ("q1", "c", 3), ("q1", "d", 1), ("q2", "a", 1), ("q2", "b", 2)],
    )
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d 1 4.0 r\nq1 Q0 c 2 3.0 r\nq1 Q0 b 3 2.0 r\nq2 Q0 b 1 2.0 r\nq2 Q0 a 2 1.0 r\n")
    runner = CliRunner()
    args = ["eval", "-m", "ndcg_cut.10", "-m", "P.2", "--format", "json"]
    res = runner.invoke(main, [*args, "--judge-qrels", judge, "--qrels-policy", "fill", human, str(run)])
    assert res.exit_code == 0, res.output
    plain = runner.invoke(main, [*args, merged, str(run)])
    got, want = json.loads(res.stdout), json.loads(plain.stdout)
    assert got["all"] == want["all"]
    origin = got["provenance"]["qrels"]["origin"]
    assert origin["policy"] == "fill" and origin["counts"]["judge_labels_used"] == 3
    assert origin["sources"]["judge"]["path"] == judge
    assert "qrels policy fill: 3 human labels, 3 judge labels used" in res.stderr
    text = runner.invoke(main, ["eval", "-m", "P.2", "--judge-qrels", judge, human, str(run)])
    assert "# qrels origin: policy fill, 3 human labels, 3 judge labels; judged_10 human" in text.stdout


def test_compare_and_diagnose_take_judge_qrels(tmp_path):
    human = write_qrels(
        tmp_path / "human.qrels", [(f"q{q}", f"d{d}", (q + d) % 3) for q in range(6) for d in range(0, 10, 2)]
    )
    judge = write_qrels(
        tmp_path / "judge.qrels", [(f"q{q}", f"d{d}", (q * d) % 4) for q in range(6) for d in range(10)]
    )
    runs = []
    for r in range(2):
        p = tmp_path / f"r{r}.trec"
        p.write_text(
            "".join(f"q{q} Q0 d{d} 0 {((d * (r + 2)) % 10) + 0.5} r{r}\n" for q in range(6) for d in range(10))
        )
        runs.append(str(p))
    runner = CliRunner()
    res = runner.invoke(
        main, ["compare", "--qrels", human, "--judge-qrels", judge, "--format", "json", "--permutations", "100", *runs]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert "qrels policy fill" in res.stderr
    assert "(policy fill)" in json.dumps(doc)
    fill = ts.merge_qrels(human, judge, "fill")
    want = ts.evaluate(fill, runs[1], "ndcg_cut.10").summary["ndcg_cut_10"]
    text = runner.invoke(main, ["compare", "--qrels", human, "--judge-qrels", judge, "--permutations", "100", *runs])
    assert f" {want:.4f} " in text.stdout
    out = tmp_path / "diag"
    res = runner.invoke(
        main,
        [
            "diagnose",
            "--qrels",
            human,
            "--judge-qrels",
            judge,
            "--qrels-policy",
            "judge",
            "--first-stage",
            runs[0],
            "--reranked",
            runs[1],
            "--out",
            str(out),
            "--permutations",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert '"policy": "judge"' in json.dumps(summary["provenance"])
