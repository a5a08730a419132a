"""``twostage diagnose`` with rank_llm-style runs: --depth NAME=K, NAME=RUN1,RUN2 repeats, --window/--stride,
the errors that name runs, and the page (depths stated, hurt/helped before the long tables, paths as given,
a title that names the runs)."""

from __future__ import annotations

import json
import random

import pytest
from rankllm import collection, first_stage_lists, rank_llm_run

from toolkit.data.trec_io import write_run


def _order(seed):
    def order(q, top):
        out = list(top)
        random.Random(f"{seed}-{q}").shuffle(out)
        if out[-1] == top[-1]:
            out[-1], out[0] = out[0], out[-1]
        return out

    return order


@pytest.fixture
def runs(tmp_path):
    qrels, first = collection(n_queries=8, length=40, seed=11)
    lists = first_stage_lists(first.frame.itertuples(index=False))
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels.frame.itertuples(index=False)))
    write_run(first, tmp_path / "bm25.trec")
    for name, k, seed in (("rv20a", 20, 1), ("rv20b", 20, 2), ("rv20c", 20, 3), ("rv40", 40, 4)):
        write_run(rank_llm_run(lists, k, order=_order(seed)), tmp_path / f"{name}.trec")
    return tmp_path


def _base(tmp_path, *reranked):
    """Paths as a user types them, relative to the folder the test moves into."""
    args = ["diagnose", "--qrels", "qrels.txt", "--first-stage", "bm25=bm25.trec"]
    for r in reranked:
        args += ["--reranked", r]
    return [*args, "--permutations", "200", "--worst", "3"]


def test_depth_per_run_repeats_and_the_page(runs, cli, monkeypatch):
    monkeypatch.chdir(runs)
    res = cli(
        *_base(runs, "rv20=rv20a.trec,rv20b.trec,rv20c.trec", "rv40=rv40.trec"),
        "--depth",
        "rv40=40",
        "--window",
        "20",
        "--stride",
        "10",
        "--out",
        "out",
    )
    assert res.exit_code == 0, res.output
    s = json.loads((runs / "out" / "summary.json").read_text())
    assert s["name"] == "rv20, rv40 over bm25"  # the default title names the runs
    by = {r["name"]: r for r in s["reranked_runs"]}
    assert (by["rv20"]["depth"], by["rv20"]["depth_from"]) == (20, "detected")
    assert (by["rv40"]["depth"], by["rv40"]["depth_from"]) == (40, "option")
    assert by["rv20"]["repeats"]["n"] == 3 and by["rv20"]["repeats"]["runs"] == [
        "rv20a.trec",
        "rv20b.trec",
        "rv20c.trec",
    ]
    assert by["rv40"]["repeats"] is None
    assert by["rv20"]["reorder_check"]["only_reorders"] and by["rv20"]["reorder_check"]["tail_documents"] == 3 * 8 * 20
    assert by["rv20"]["behaviour"]["windows"]["windows"] == 3 * 8 * 1  # one window of 20 over the top 20
    assert by["rv40"]["behaviour"]["windows"]["windows"] == 8 * 3  # ranks 21-40, 11-30, 1-20
    assert "R@1000" not in res.output and "recall_1000" not in res.output
    assert "rv20: depth top 20 (detected: below rank 20 it repeats bm25's order in 8 of 8 queries)" in res.output
    assert "rv40: depth top 40 (option)" in res.output and "3 repeats: mean" in res.output
    html = (runs / "out" / "index.html").read_text()
    assert "<h1>Two-stage diagnosis: rv20, rv40 over bm25</h1>" in html
    assert "rv20 reranks bm25&#x27;s top 20 (detected" in html or "rv20 reranks bm25's top 20 (detected" in html
    order = [html.index(h) for h in ("Where the loss is", "Hurt most and helped most", "Systems", "Worst 3")]
    assert order == sorted(order)
    assert "Repeated runs" in html and "How the reranker treats its candidates" in html
    assert 'id="plot-promotion_profile"' in html
    # paths as given, never resolved
    assert "<code>qrels.txt</code>" in html and "<code>bm25.trec</code>" in html
    assert str(runs.resolve()) not in html and str(runs) not in html
    md = (runs / "out" / "report.md").read_text()
    assert md.index("## Hurt most and helped most") < md.index("## Systems")


def test_bad_depths_and_repeats_name_the_runs(runs, cli, monkeypatch):
    monkeypatch.chdir(runs)
    res = cli(*_base(runs, "rv20=rv20a.trec"), "--depth", "nope=5", "--out", "x")
    assert res.exit_code == 2 and "'nope' names no reranked run (reranked runs: rv20)" in res.output
    res = cli(*_base(runs, "rv20=rv20a.trec"), "--depth", "rv20=50", "--out", "x")
    assert res.exit_code == 1 and "--depth 50 for rv20 is larger than the lists of its first stage bm25" in res.output
    res = cli(*_base(runs, "rv=rv20a.trec,rv40.trec"), "--out", "x")
    assert res.exit_code == 1 and "repeats of rv have different rerank depths: rv20a.trec" in res.output
    assert "rv40.trec (repeat 2) the top 40" in res.output
    (runs / "short.trec").write_text(
        "".join(line for line in (runs / "rv20b.trec").read_text().splitlines(True) if not line.startswith("q1 "))
    )
    res = cli(*_base(runs, "rv=rv20a.trec,short.trec"), "--out", "x")
    assert res.exit_code == 1 and "repeats of rv hold different queries: short.trec (repeat 2) has 7" in res.output
    res = cli(*_base(runs, "rv20=rv20a.trec"), "--depth", "x=y", "--out", "x")
    assert res.exit_code == 2 and "expected K or NAME=K" in res.output


def test_a_path_through_a_symlink_is_shown_as_given(runs, cli, monkeypatch, tmp_path_factory):
    link = tmp_path_factory.mktemp("elsewhere") / "linked"
    link.symlink_to(runs, target_is_directory=True)
    monkeypatch.chdir(runs)
    res = cli(
        "diagnose",
        "--qrels",
        link / "qrels.txt",
        "--first-stage",
        f"bm25={link / 'bm25.trec'}",
        "--reranked",
        f"rv20={link / 'rv20a.trec'}",
        "--permutations",
        "100",
        "--out",
        "o",
    )
    assert res.exit_code == 0, res.output
    s = json.loads((runs / "o" / "summary.json").read_text())
    assert s["settings"]["sources"]["qrels"] == str(link / "qrels.txt")
    assert s["reranked_runs"][0]["run"] == str(link / "rv20a.trec")
    html = (runs / "o" / "index.html").read_text()
    assert str(link / "rv20a.trec") in html and str(runs.resolve() / "rv20a.trec") not in html


def test_a_run_whose_depth_no_rule_gives_is_one_error_naming_it(runs, cli, monkeypatch):
    """A run that holds documents the first stage lacks in most queries: no depth fits the rule; `diagnose`
    stops with one Error: line naming the run and --depth NAME=K (once: its longest list, exit 0)."""
    monkeypatch.chdir(runs)
    lines = (runs / "rv20a.trec").read_text().splitlines(True)
    (runs / "odd.trec").write_text("".join(line.replace(" Q0 ", " Q0 new-", 1) for line in lines))
    res = cli(*_base(runs, "odd=odd.trec"), "--out", "x")
    assert res.exit_code == 1, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    assert "the rerank depth of odd (odd.trec) is not given and cannot be detected" in errors[0]
    assert "Give it: --depth odd=K" in errors[0] and "Traceback" not in res.output
    assert not (runs / "x").exists()
    res = cli(*_base(runs, "odd=odd.trec"), "--depth", "odd=20", "--out", "x")
    assert res.exit_code == 0, res.output


def test_byte_identical_repeats_are_named_and_every_view_says_what_it_shows(runs, cli, monkeypatch):
    """rank_llm's seven RankVicuna runs hold four byte-identical files; nothing said so. Two copies of rv20a
    among three repeats: named in summary.json (repeats.identical), warned about, stated on the page; the
    explorer and the worst queries say their values are the mean over repeats and their lists repeat 1's."""
    import shutil

    monkeypatch.chdir(runs)
    shutil.copyfile(runs / "rv20a.trec", runs / "copy.trec")
    res = cli(*_base(runs, "rv20=rv20a.trec,rv20b.trec,copy.trec"), "--out", "out")
    assert res.exit_code == 0, res.output
    s = json.loads((runs / "out" / "summary.json").read_text())
    reps = s["reranked_runs"][0]["repeats"]
    assert reps["n"] == 3 and reps["identical"] == [["rv20a.trec", "copy.trec"]]
    warning = "repeats of rv20: 1 repeat file(s) are byte-identical copies of another (copy.trec is identical to "
    assert f"twostage: warning: {warning}rv20a.trec)" in " ".join(res.output.split())
    html = (runs / "out" / "index.html").read_text()
    assert "Byte-identical repeats: copy.trec = rv20a.trec." in html
    # the explorer: the mean over repeats and the first repeat's list, each labelled
    from toolkit.report.diagnosis_explore import read_explore_data

    data = read_explore_data(html)
    rv = next(x for x in data["systems"] if x["name"] == "rv20")
    assert rv["shown"] == "repeat 1 of 3: rv20a.trec"
    assert any(c["label"] == "nDCG@10 · rv20 (mean of 3 repeats)" for c in data["columns"])
    assert all(
        line["role"] == "reranked top 20 (mean of 3 repeats)"
        for lines in data["detail_rows"].values()
        for line in lines
        if line["system"] == "rv20"
    )
    assert "Reranked top 10 (repeat 1 of 3: rv20a.trec)" in html and "(mean of 3 repeats) (first stage" in html
    assert "sys.shown" in html  # the script shows the label beside the list's heading


def test_different_repeat_files_are_not_called_identical(runs, cli, monkeypatch):
    monkeypatch.chdir(runs)
    res = cli(*_base(runs, "rv20=rv20a.trec,rv20b.trec"), "--out", "out")
    assert res.exit_code == 0, res.output
    s = json.loads((runs / "out" / "summary.json").read_text())
    assert s["reranked_runs"][0]["repeats"]["identical"] == [] and "byte-identical" not in res.output
