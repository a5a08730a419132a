"""One judged workflow, against the local judge server on 127.0.0.1: ``judge --run RUN
--candidates C.json``; qrels of another year refused before anything is asked; ``--holes-only
--calibrate-sample N --seed S`` recording the calibration in the holes file's sidecar, which the diagnosis page
then shows; the calibration's system ranking under the full human qrels (BM25's top-k only made BM25 first); a
judge near chance warned about wherever its labels are used; the explorer marking the judge's grades."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from judge_server import write_candidates, write_qrels
from needs import required

import toolkit as ts
from toolkit.cli import main
from toolkit.data.trec_io import read_qrels
from toolkit.errors import NoCommonQueriesError

QUERIES = [f"q{q}" for q in range(4)]


def _judge_labels(server) -> None:
    for q in range(4):
        for i in range(8):
            server.labels[f"q{q}d{i}"] = (q + i) % 4


def _candidates(tmp_path, server) -> str:
    """Four queries, eight passages each (q{q}d0 first), the judge's label of each set on the server."""
    _judge_labels(server)
    queries = {f"q{q}": [(f"q{q}d{i}", f"[doc q{q}d{i}] passage {i} on topic {q}") for i in range(8)] for q in range(4)}
    return write_candidates(tmp_path / "cand.json", queries)


def _run(path, order) -> str:
    """A run listing q{q}d{i} for i in ``order``, best first."""
    path.write_text("".join(f"q{q} Q0 q{q}d{i} {r + 1} {20 - r} x\n" for q in range(4) for r, i in enumerate(order)))
    return str(path)


def _human(tmp_path, disagree=False) -> tuple[str, dict]:
    """Humans judged the even documents: the judge's label, except q{q}d6 (one off); with ``disagree`` every
    human label is the judge's + 2 (mod 4)."""
    rows = {}
    for q in range(4):
        for i in range(0, 8, 2):
            judge = (q + i) % 4
            rows[(f"q{q}", f"q{q}d{i}")] = (judge + 2) % 4 if disagree else (judge + 1) % 4 if i == 6 else judge
    return write_qrels(tmp_path / "human.qrels", [(q, d, r) for (q, d), r in rows.items()]), rows


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_run_with_candidates_judges_the_runs_documents_with_the_candidates_texts(tmp_path, judge_server):
    cand = _candidates(tmp_path, judge_server)
    rr = _run(tmp_path / "rr.trec", [7, 6, 5, 4, 3, 2, 1, 0])  # the candidates reversed
    out = tmp_path / "rr.judge.qrels"
    res = _invoke(
        "judge", "--run", rr, "--candidates", cand, "--depth", 2, "--endpoint", judge_server.url,
        "--model", "test-judge", "--no-cache", "--no-progress", "--out", out,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    got = {(r.query_id, r.doc_id): r.relevance for r in read_qrels(out).frame.itertuples()}
    assert got == {(f"q{q}", f"q{q}d{i}"): (q + i) % 4 for q in range(4) for i in (7, 6)}
    meta = json.loads((tmp_path / "rr.judge.qrels.meta.json").read_text())
    assert meta["run"]["path"] == rr and meta["texts"]["path"] == cand
    assert sorted(judge_server.requests) == sorted(f"q{q}d{i}" for q in range(4) for i in (6, 7))


def test_another_years_qrels_are_refused_before_anything_is_asked(tmp_path, judge_server):
    cand = _candidates(tmp_path, judge_server)
    other = write_qrels(tmp_path / "dl20.qrels", [("1030303", "8726436", 2), ("1037496", "4", 0)])
    out = tmp_path / "holes.qrels"
    res = _invoke(
        "judge", "--candidates", cand, "--qrels", other, "--holes-only", "--depth", 8,
        "--endpoint", judge_server.url, "--model", "test-judge", "--no-cache", "--no-progress", "--out", out,
    )  # fmt: skip
    assert res.exit_code == 1
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "no query in common" in errors[0] and "the judge asks nothing" in errors[0]
    assert "allow" not in errors[0]  # judge has no --allow-no-common
    assert judge_server.total == 0 and not out.exists()
    with pytest.raises(NoCommonQueriesError, match="run: 4 queries"):
        ts.judge(candidates=cand, qrels=other, holes_only=True, model="m", endpoint=judge_server.url, cache=False)
    # half a year's qrels: the other queries' documents are all holes, which fill never uses: a warning
    half = write_qrels(tmp_path / "half.qrels", [("q0", "q0d0", 1), ("q1", "q1d0", 0)])
    with pytest.warns(ts.TwostageWarning, match=r"2 of 4 queries of .* have no human label"):
        j = ts.judge(candidates=cand, qrels=half, holes_only=True, depth=2, model="m", endpoint=judge_server.url)
    assert len(j.records) == 6  # q0, q1: d1; q2, q3: d0 and d1


def _holes_with_sample(tmp_path, server, human, *extra):
    cand = _candidates(tmp_path, server)
    out = tmp_path / "holes.qrels"
    res = _invoke(
        "judge", "--candidates", cand, "--qrels", human, "--holes-only", "--calibrate-sample", 5, "--seed", 7,
        "--depth", 8, "--endpoint", server.url, "--model", "test-judge", "--no-cache", "--no-progress",
        "--out", out, *extra,
    )  # fmt: skip
    return cand, out, res


def _sampled(seed=7, n=5):
    """The oracle of the sample: the human-judged documents of the top 8 in query and rank order, drawn as
    numpy's default_rng(seed).choice without replacement."""
    population = [(f"q{q}", f"q{q}d{i}") for q in range(4) for i in range(0, 8, 2)]
    return [population[k] for k in sorted(np.random.default_rng(seed).choice(len(population), n, replace=False))]


def test_holes_only_with_a_calibration_sample_records_the_calibration(tmp_path, judge_server):
    metrics = required("sklearn.metrics", "scikit-learn is the oracle for Cohen's kappa (pip install .[test])")
    human, rows = _human(tmp_path)
    first = _run(tmp_path / "first.trec", range(8))
    second = _run(tmp_path / "second.trec", [1, 3, 5, 7, 0, 2, 4, 6])
    _, out, res = _holes_with_sample(tmp_path, judge_server, human, "--rank", first, "--rank", second)
    assert res.exit_code == 0, res.output
    sample = _sampled()
    holes = [(f"q{q}", f"q{q}d{i}") for q in range(4) for i in range(1, 8, 2)]
    # asked: every hole and the five sampled human-judged documents, nothing else
    assert sorted(judge_server.requests) == sorted(d for _, d in holes + sample)
    written = {(r.query_id, r.doc_id) for r in read_qrels(out).frame.itertuples()}
    assert written == set(holes)  # OUT holds the holes; the sample stays in the records
    meta = json.loads((tmp_path / "holes.qrels.meta.json").read_text())
    assert sorted((r["query_id"], r["doc_id"]) for r in meta["records"] if r["calibration_sample"]) == sample
    cal = meta["calibration"]
    assert cal["sample"] == {"requested": 5, "drawn": 5, "population": 16, "seed": 7, "depth": 8}
    h = [rows[p] for p in sample]
    j = [(int(p[0][1:]) + int(p[1][-1])) % 4 for p in sample]
    assert cal["documents_both"] == 5
    assert cal["kappa"] == pytest.approx(metrics.cohen_kappa_score(h, j))
    # the ranking: the human qrels (all 16 labels) against the same filled with the judge's 16 hole labels
    assert cal["ranking_qrels"]["human"]["human_labels"] == 16
    assert {k: v for k, v in cal["ranking_qrels"]["judge"].items() if k != "documents"} == {
        "human_labels": 16,
        "judge_labels_replacing_human": 0,
        "judge_labels_filling_holes": 16,
        "judge_labels_left_out": 0,
    }
    runs = {"first": first, "second": second}
    under_human = {n: ts.evaluate(human, r, "ndcg_cut.10").result.aggregate["ndcg_cut_10"] for n, r in runs.items()}
    filled = ts.merge_qrels(human, str(out), "fill")
    under_filled = {n: ts.evaluate(filled, r, "ndcg_cut.10").result.aggregate["ndcg_cut_10"] for n, r in runs.items()}
    assert cal["ranking"]["means_a"] == pytest.approx(under_human)
    assert cal["ranking"]["means_b"] == pytest.approx(under_filled)
    assert "twostage: calibration on 5 human-judged documents (a sample of 5 of 16, seed 7)" in res.stderr


def test_the_diagnosis_page_shows_the_holes_files_calibration_and_marks_judge_grades(tmp_path, judge_server):
    human, _ = _human(tmp_path)
    _, out, res = _holes_with_sample(tmp_path, judge_server, human)
    assert res.exit_code == 0, res.output
    kappa = json.loads((tmp_path / "holes.qrels.meta.json").read_text())["calibration"]["kappa"]
    first = _run(tmp_path / "first.trec", range(8))
    rr = _run(tmp_path / "rr.trec", [1, 3, 5, 7, 0, 2, 4, 6])
    diag = tmp_path / "diag"
    res = _invoke(
        "diagnose", "--qrels", human, "--judge-qrels", out, "--first-stage", first, "--reranked", rr,
        "--out", diag, "--permutations", 50,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    md = (diag / "report.md").read_text()
    assert f"judge calibrated on 5 human-judged documents: kappa {kappa:.3f}" in md
    assert "twostage judge --holes-only --calibrate-sample, on a sample of 5 of the 16 human-judged" in md
    assert "No calibration was recorded" not in md and "near chance" not in md
    html = (diag / "index.html").read_text()
    from toolkit.report.diagnosis_explore import read_explore_data

    data = read_explore_data(html)
    # every odd document is a hole the judge filled, and every one is shown (8 documents, top 10)
    assert data["judge_labelled"] == {f"q{q}": [f"q{q}d{i}" for i in (1, 3, 5, 7)] for q in range(4)}
    summary = json.loads((diag / "summary.json").read_text())
    assert summary["settings"]["judge_labelled"] == data["judge_labelled"]


def test_the_explorer_marks_the_judges_grades_in_a_browser(tmp_path, judge_server):
    from browser import chromium

    human, _ = _human(tmp_path)
    _, out, res = _holes_with_sample(tmp_path, judge_server, human)
    first = _run(tmp_path / "first.trec", range(8))
    rr = _run(tmp_path / "rr.trec", [1, 3, 5, 7, 0, 2, 4, 6])
    diag = tmp_path / "diag"
    res = _invoke(
        "diagnose", "--qrels", human, "--judge-qrels", out, "--first-stage", first, "--reranked", rr,
        "--out", diag, "--permutations", 50,
    )  # fmt: skip
    assert res.exit_code == 0, res.output

    driver = chromium(tmp_path)  # the marks as a reader sees them (skips without Chromium)
    try:
        driver.get((diag / "index.html").as_uri() + "#q=q1")
        cells = driver.execute_script(
            "return [...document.querySelectorAll(\"#query-detail .system-list[data-system='first'] tbody tr\")]"
            ".map(tr => [tr.children[1].textContent, tr.children[2].textContent, tr.children[2].className])"
        )
    finally:
        driver.quit()
    assert cells[1] == ["q1d1", "2 (judge)", "grade relevant judge"]  # a hole, filled: (1 + 1) % 4
    assert cells[0] == ["q1d0", "1", "grade relevant"]  # human


def test_a_judge_near_chance_is_warned_about_wherever_its_labels_are_used(tmp_path, judge_server):
    human, _ = _human(tmp_path, disagree=True)
    _, out, res = _holes_with_sample(tmp_path, judge_server, human)
    assert res.exit_code == 0, res.output
    cal = json.loads((tmp_path / "holes.qrels.meta.json").read_text())["calibration"]
    # every sampled label is the human's + 2 (mod 4): the diagonal is empty, kappa below 0
    assert cal["confusion"][0][0] == cal["confusion"][1][1] == 0 and cal["kappa"] < 0
    assert cal["near_chance"] is True and cal["kappa_threshold"] == 0.4
    assert "twostage: warning: the judge is near chance" in res.stderr
    first = _run(tmp_path / "first.trec", range(8))
    res = _invoke("eval", "-m", "ndcg_cut.10", "--judge-qrels", out, human, first)
    assert res.exit_code == 0, res.output
    assert f"the judge of {out} is near chance: its calibration has kappa {cal['kappa']:.3f}" in res.stderr
    assert "16 of its labels are used here" in res.stderr
    with pytest.warns(ts.TwostageWarning, match="near chance"):
        ts.merge_qrels(human, str(out), "fill")
    rr = _run(tmp_path / "rr.trec", [1, 3, 5, 7, 0, 2, 4, 6])
    diag = tmp_path / "diag"
    res = _invoke(
        "diagnose", "--qrels", human, "--judge-qrels", out, "--first-stage", first, "--reranked", rr,
        "--out", diag, "--permutations", 50,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "near chance" in res.stderr
    md = (diag / "report.md").read_text()
    assert "The judge is near chance" in md and "(near chance: below the kappa threshold 0.4)" in md
    # the human policy uses none of the judge's labels: no warning
    res = _invoke("eval", "-m", "ndcg_cut.10", "--judge-qrels", out, "--qrels-policy", "human", human, first)
    assert res.exit_code == 0 and "near chance" not in res.stderr
    # a threshold the judge passes: recorded, and no warning anywhere
    (tmp_path / "t").mkdir()
    human_t, _ = _human(tmp_path / "t", disagree=True)
    _, out_t, res = _holes_with_sample(tmp_path / "t", judge_server, human_t, "--kappa-threshold", -1)
    assert res.exit_code == 0 and "near chance" not in res.stderr
    assert json.loads((tmp_path / "t" / "holes.qrels.meta.json").read_text())["calibration"]["near_chance"] is False
    res = _invoke("eval", "-m", "ndcg_cut.10", "--judge-qrels", out_t, human_t, first)
    assert res.exit_code == 0 and "near chance" not in res.stderr


def test_calibration_ranks_under_the_full_human_qrels(tmp_path, judge_server):
    # BM25's top 4 per query holds one relevant document (label 1) and three non-relevant ones; a dense run
    # finds two highly relevant documents BM25's top 4 lacks. The judge agrees with the humans on every label.
    human_rows, queries = [], {}
    for q in QUERIES:
        bm25 = [f"{q}b{i}" for i in range(4)]
        for i, d in enumerate(bm25):
            human_rows.append((q, d, 1 if i == 0 else 0))
            judge_server.labels[d] = 1 if i == 0 else 0
        human_rows += [(q, f"{q}e0", 3), (q, f"{q}e1", 3)]
        queries[q] = [(d, f"[doc {d}] text") for d in bm25]
    cand = write_candidates(tmp_path / "bm25.json", queries)
    human = write_qrels(tmp_path / "human.qrels", human_rows)
    bm25_run = tmp_path / "bm25.trec"
    bm25_run.write_text("".join(f"{q} Q0 {q}b{i} {i + 1} {10 - i} bm25\n" for q in QUERIES for i in range(4)))
    dense = tmp_path / "dense.trec"
    order = ["e0", "b1", "e1", "b2"]
    dense.write_text("".join(f"{q} Q0 {q}{d} {i + 1} {10 - i} dense\n" for q in QUERIES for i, d in enumerate(order)))
    runs = {"bm25": str(bm25_run), "dense": str(dense)}
    # the example: under the documents both judged (BM25's top 4) BM25 ranks first, under the full qrels last
    both = write_qrels(tmp_path / "both.qrels", [r for r in human_rows if r[1][-2] == "b"])
    assert ts.evaluate(both, runs["bm25"], "ndcg_cut.10").result.aggregate["ndcg_cut_10"] == pytest.approx(1.0)
    assert ts.evaluate(both, runs["dense"], "ndcg_cut.10").result.aggregate["ndcg_cut_10"] < 1.0
    full = {n: ts.evaluate(human, r, "ndcg_cut.10").result.aggregate["ndcg_cut_10"] for n, r in runs.items()}
    assert full["bm25"] < full["dense"]
    cal = ts.calibrate_judge(
        candidates=cand,
        qrels=human,
        model="test-judge",
        endpoint=judge_server.url,
        depth=4,
        runs=runs,
        cache=False,
        permutations=200,
        out=tmp_path / "cal.qrels",
    )
    d = cal.to_dict()
    assert d["documents_both"] == 16 and d["kappa"] == 1.0
    assert d["ranking"]["means_a"] == pytest.approx(full) and d["ranking"]["means_b"] == pytest.approx(full)
    assert d["ranking"]["ranking_a"] == ["dense", "bm25"] and d["kendall_tau"] == 1.0
    used = d["ranking_qrels"]
    assert used["human"]["human_labels"] == 24
    assert (used["judge"]["human_labels"], used["judge"]["judge_labels_replacing_human"]) == (8, 16)
    assert used["judge"]["judge_labels_filling_holes"] == 0
    meta = json.loads((tmp_path / "cal.qrels.meta.json").read_text())
    assert meta["calibration"]["ranking_qrels"] == used and meta["calibration"]["near_chance"] is False
