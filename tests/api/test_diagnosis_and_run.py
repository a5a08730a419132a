"""``toolkit.diagnose`` against ``twostage diagnose --out`` (same files), the DL19 decomposition's published
numbers, the figures; ``toolkit.fuse`` and ``toolkit.rerank`` against their commands' runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import toolkit as ts


@pytest.fixture(scope="module")
def splade_order(msmarco, tmp_path_factory):
    """BM25's top 100 reordered by SPLADE++'s scores (candidates SPLADE lacks keep BM25's order below): a
    reranked run made without a model."""
    runs = msmarco / "runs"
    bm = ts.Run.read(runs / "run.dl19.bm25.top100.txt").to_frame()
    sp = ts.Run.read(runs / "run.dl19.splade-pp-ed.top100.txt").frame.set_index(["query_id", "doc_id"])["score"]
    s = sp.reindex(pd.MultiIndex.from_frame(bm[["query_id", "doc_id"]])).to_numpy()
    bm["score"] = np.where(np.isnan(s), bm["score"].to_numpy() - 1e6, s)
    path = tmp_path_factory.mktemp("rr") / "splade-order.txt"
    ts.Run.from_frame(bm, tag="splade-order").write(path)
    return runs / "run.dl19.bm25.top100.txt", path


def test_write_is_diagnose_out(cli, msmarco, splade_order, tmp_path):
    first, rr = splade_order
    out = tmp_path / "cli"
    res = cli(
        "diagnose",
        "--qrels",
        "dl19-passage",
        "--first-stage",
        f"bm25={first}",
        "--reranked",
        f"splade-order={rr}",
        "--permutations",
        "500",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    d = ts.diagnose(
        "dl19-passage", {"bm25": str(first)}, {"splade-order": str(rr)}, permutations=500
    )  # default titles: the runs
    files = d.write(tmp_path / "api")
    assert set(files) == {"index.html", "report.md", "per_query.csv", "pairs.csv", "summary.json"}
    for name in ("per_query.csv", "pairs.csv", "report.md"):
        assert (tmp_path / "api" / name).read_text() == (out / name).read_text(), name
    a, c = (json.loads((f / "summary.json").read_text()) for f in (tmp_path / "api", out))
    assert a == c  # the sources too: the library reads and names the inputs as the command does
    assert sorted(p.name for p in (tmp_path / "api" / "plots").iterdir()) == sorted(
        p.name for p in (out / "plots").iterdir()
    )


def test_dl19_decomposition_frames_and_figures(splade_order):
    first, rr = splade_order
    d = ts.diagnose("dl19-passage", str(first), {"splade-order": str(rr)}, permutations=200)
    row = d.decomposition.loc["splade-order"]
    assert round(row["first_stage"], 4) == 0.5058 and round(row["ceiling"], 4) == 0.8922  # the README's figures
    assert row["lost_in_candidates"] == pytest.approx(row["ideal"] - row["ceiling"], abs=1e-12)
    assert row["lost_in_reranking"] == pytest.approx(row["ceiling"] - row["reranked"], abs=1e-12)
    curve = d.depth_curve
    assert list(curve["depth"]) == [10, 20, 30, 50, 100]
    assert curve["ceiling"].iloc[-1] == pytest.approx(row["ceiling"], abs=1e-12)
    assert d.labels.loc["splade-order"].sum() == 43
    assert {"against the first stage"} <= set(d.agreement["family"])
    assert len(d.per_query) == 43
    from matplotlib.figure import Figure

    assert isinstance(d.plot_decomposition(), Figure) and isinstance(d.plot_depth_curve(), Figure)
    html = d._repr_html_()
    assert html.count('<img class="plot"') == 2 and "0.8922" in html


def test_fuse_equals_the_command(cli, msmarco, tmp_path):
    runs = msmarco / "runs"
    a, b = runs / "run.dl19.bm25.top100.txt", runs / "run.dl19.splade-pp-ed.top100.txt"
    assert cli("fuse", a, b, "--hits", "100", "--out", tmp_path / "cli.txt").exit_code == 0
    fused = ts.fuse([a, b], hits=100)
    fused.write(tmp_path / "api.txt")
    assert (tmp_path / "api.txt").read_bytes() == (tmp_path / "cli.txt").read_bytes()
    meta = json.loads((tmp_path / "api.txt.meta.json").read_text())
    assert meta["parameters"]["method"] == "rrf" and meta["parameters"]["k"] == 60.0
    ev = ts.evaluate("dl19-passage", fused, "nDCG@10", complete=True)
    assert (
        ev.summary["ndcg_cut_10"]
        == ts.evaluate("dl19-passage", tmp_path / "cli.txt", "nDCG@10", complete=True).summary["ndcg_cut_10"]
    )


def test_rerank_equals_the_command(cli, tmp_path, tiny_cross_encoder):
    from samples import CANDIDATES

    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    out = tmp_path / "cli.trec"
    res = cli(
        "rerank",
        "--candidates",
        cands,
        "--model",
        tiny_cross_encoder,
        "--device",
        "cpu",
        "--batch-size",
        "2",
        "--no-progress",
        "--tag",
        "t",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    run = ts.rerank(candidates=cands, model=tiny_cross_encoder, batch_size=2, tag="t")
    run.write(tmp_path / "api.trec")
    assert (tmp_path / "api.trec").read_text() == out.read_text()
    assert run.meta["reranker"]["kind"] == "cross-encoder"


def test_diagnose_warns_once_per_input(tmp_path):
    """A first stage with a query of equal scores is evaluated several times (headline, ceiling, curve): the
    warning about it (a ``TwostageWarning``) is issued once, not once per evaluation."""
    import warnings

    from samples import write_tiny

    write_tiny(tmp_path)
    lines = (tmp_path / "first.trec").read_text().splitlines()
    tied = [" ".join(p[:4] + ["1.0"] + p[5:]) if p[0] == "q7" else " ".join(p) for p in (ln.split() for ln in lines)]
    (tmp_path / "tied.trec").write_text("\n".join(tied) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        ts.diagnose(tmp_path / "qrels.txt", str(tmp_path / "tied.trec"), str(tmp_path / "rr.trec"), permutations=50)
    said = [str(w.message) for w in caught if "tied.trec have all scores equal" in str(w.message)]
    assert all(w.category is ts.TwostageWarning for w in caught if "all scores equal" in str(w.message))
    assert said == [
        f"1 of 6 queries in {tmp_path / 'tied.trec'} have all scores equal (e.g. 'q7'): their "
        "order is then the documents' ids (descending), not a ranking"
    ]
