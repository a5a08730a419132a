"""The diagnosis page in a real browser: headless Chromium driven through Selenium (Debian's ``chromium`` and
``chromium-driver``; ``scripts/install_chromium.sh`` installs them in CI; the tests skip with the reason when
they are missing).

The page is opened from disk with every network request refused (an unreachable proxy and no host
resolution), and the tests check what it shows: the headline numbers, every plot decoded, and the query
explorer: sorting, filtering, opening a query (by a click and by its ``#q=`` link), the side-by-side lists
with grades, unjudged documents, rank movement and highlighted query terms, each against the report's own
CSV and the qrels.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from browser import chromium
from samples import tiny, write_tiny


def _browser(tmp_path: Path):
    return chromium(tmp_path)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The tiny collection's report, open in the browser: (driver, report folder, summary, per-query rows)."""
    tmp = tmp_path_factory.mktemp("browser")
    qp = write_tiny(tmp)
    from click.testing import CliRunner

    from toolkit.cli import main

    texts = tmp / "corpus.jsonl"
    texts.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in tiny()[3].items()))
    out = tmp / "reports" / "tiny"
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--qrels",
            str(qp),
            "--first-stage",
            str(tmp / "first.trec"),
            "--reranked",
            str(tmp / "rr.trec"),
            "--topics",
            str(tmp / "topics.tsv"),
            "--corpus",
            str(texts),
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    driver = _browser(tmp)
    try:
        driver.get((out / "index.html").as_uri())
        with open(out / "per_query.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        yield driver, out, json.loads((out / "summary.json").read_text()), rows
    finally:
        driver.quit()


def _js(driver, script: str):
    return driver.execute_script(script)


def _visible_ids(driver) -> list[str]:
    return _js(driver, "return [...document.querySelectorAll('#explore-table tbody tr')].map(r => r.dataset.qid)")


def test_headline_and_plots(page):
    driver, _out, summary, _ = page
    assert driver.title == "Two-stage diagnosis: rr over first"  # the default title names the runs
    assert _js(driver, "return document.styleSheets.length") >= 1
    imgs = _js(
        driver,
        "return [...document.images].map(i => ({id: i.id, w: i.naturalWidth, h: i.naturalHeight, ok: i.complete}))",
    )
    assert sorted(i["id"] for i in imgs) == [
        "plot-ceiling_vs_reranked",
        "plot-decomposition",
        "plot-depth_curve",
        "plot-judged_hist",
        "plot-promotion_profile",
        "plot-query_types",
        "plot-stage_scatter",
    ]
    assert all(i["ok"] and i["w"] > 100 and i["h"] > 100 for i in imgs), imgs
    for row in summary["headline"]:
        for stage, key in (("first_stage", "first"), ("reranked", "reranked")):
            v = row[stage]
            if v is not None:
                text = str(int(v)) if row["key"] == "num_q" else f"{v:.4f}"
                assert driver.find_element("id", f"h-{row['key']}-{key}").text == text
    d = summary["decomposition"]
    cells = _js(
        driver,
        "return [...document.querySelectorAll('#decomposition tbody tr:first-child td')].map(td => td.textContent)",
    )
    assert cells[4:9] == [
        f"{d[k]:.4f}" for k in ("ceiling", "reranked", "ideal", "lost_in_candidates", "lost_in_reranking")
    ]


def test_nothing_is_fetched(page):
    """Every resource is inline: the page loaded with the network refused, and asked for nothing."""
    driver, out, *_ = page
    names = _js(driver, "return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(n.startswith("data:") for n in names), names
    html = (out / "index.html").read_text()
    assert "<link" not in html and 'src="http' not in html and 'href="http' not in html
    assert _js(driver, "return document.getElementById('explore').classList.contains('ready')")


def test_sort_and_filter(page):
    driver, _, summary, rows = page
    assert len(_visible_ids(driver)) == len(rows) == 7
    header = driver.find_element("css selector", "#explore-table th[data-key='m:rr']")
    header.click()
    by_value = sorted(rows, key=lambda r: (float(r["reranked_ndcg_cut_10"]), r["query_id"]))
    assert _visible_ids(driver) == [r["query_id"] for r in by_value]
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert _visible_ids(driver)[0] in {r["query_id"] for r in rows if float(r["reranked_ndcg_cut_10"]) == 1.0}
    from selenium.webdriver.support.ui import Select

    label = Select(driver.find_element("css selector", "select[data-filter='label:rr']"))
    label.select_by_value("candidates-missed")
    assert sorted(_visible_ids(driver)) == sorted(r["query_id"] for r in rows if r["diagnosis"] == "candidates-missed")
    assert (
        driver.find_element("id", "explore-count").text
        == f"{summary['labels']['candidates-missed']} of 7 queries shown"
    )
    label.select_by_value("")
    box = driver.find_element("css selector", "input[data-filter='lost_r:rr']")
    box.send_keys(">0.5")
    assert sorted(_visible_ids(driver)) == sorted(r["query_id"] for r in rows if float(r["lost_in_reranking"]) > 0.5)
    box.clear()
    box.send_keys("x")  # clear() fires no input event; typing does
    box.send_keys("\b")
    assert len(_visible_ids(driver)) == 7


def test_delta_column_sorts_and_filters(page):
    """The delta against the first stage (reranked - first stage, from per_query.csv) is a column of its own."""
    driver, _, _summary, rows = page
    delta = {r["query_id"]: float(r["delta_ndcg_cut_10"]) for r in rows}
    header = driver.find_element("css selector", "#explore-table th[data-key='delta:rr']")
    assert header.text.startswith("Δ vs first")
    header.click()
    assert _visible_ids(driver) == [q for q, _ in sorted(delta.items(), key=lambda x: (x[1], x[0]))]
    assert _visible_ids(driver)[0] == "q2"  # the query the reranker hurt: r1 from rank 1 to rank 10
    cells = _js(
        driver,
        "const i = [...document.querySelectorAll('#explore-table thead tr:first-child th')]"
        ".findIndex(th => th.dataset.key === 'delta:rr');"
        "return [...document.querySelectorAll('#explore-table tbody tr')].map(tr => tr.children[i].textContent)",
    )
    assert cells[0] == f"{delta['q2']:.4f}"
    box = driver.find_element("css selector", "input[data-filter='delta:rr']")
    box.send_keys("<0")
    assert _visible_ids(driver) == ["q2"]
    box.send_keys("\b\b>0")
    assert _visible_ids(driver) == ["q1"]
    box.send_keys("\b\b")
    assert len(_visible_ids(driver)) == 7


def test_open_a_query_side_by_side(page):
    driver, _, _summary, rows = page
    qrels, _first, _reranked, _texts, _queries = tiny()
    grades = {(q, d): r for q, d, r in qrels.frame.itertuples(index=False)}
    driver.find_element("css selector", "#explore-table tbody tr[data-qid='q2'] a").click()
    assert driver.current_url.endswith("#q=q2")
    assert driver.find_element("id", "detail-title").text == "q2: what causes rust"
    lists = {
        s: _js(
            driver,
            f"return [...document.querySelectorAll(\"#query-detail .system-list[data-system='{s}'] "
            'tbody tr")].map(tr => [...tr.children].map(td => td.textContent))',
        )
        for s in ("first", "rr")
    }
    first_order = ["r1"] + [f"n{i}" for i in range(9)]
    rr_order = [f"n{i}" for i in range(9)] + ["r1"]
    assert [r[1] for r in lists["first"]] == first_order and [r[1] for r in lists["rr"]] == rr_order
    for system in lists.values():
        for _, doc, grade, *_ in system:
            assert grade == (str(grades[("q2", doc)]) if ("q2", doc) in grades else "unjudged")
    # rank movement against the first stage: n0 was #2, now #1 (up 1); r1 went from #1 to #10 (down 9)
    assert lists["rr"][0][3] == "▲1" and lists["rr"][9][3] == "▼9"
    assert lists["first"][0][3] == "→ #10"
    values = _js(
        driver,
        "return [...document.querySelectorAll('#detail-values tbody tr')]"
        ".map(tr => [...tr.children].map(td => td.textContent))",
    )
    row = next(r for r in rows if r["query_id"] == "q2")
    assert values[1][:4] == [
        "rr",
        "reranked top 10",
        f"{float(row['reranked_ndcg_cut_10']):.4f}",
        f"{float(row['delta_ndcg_cut_10']):.4f}",
    ]
    assert values[1][7] == "reranker-hurt"


def test_query_link_and_highlighted_terms(page):
    driver, out, *_ = page
    driver.get((out / "index.html").as_uri() + "#q=q1")
    assert driver.find_element("id", "detail-title").text == "q1: how to bake apple pie"
    marks = _js(
        driver,
        "return [...document.querySelectorAll(\"#query-detail .system-list[data-system='rr'] "
        "tr[data-doc='a'] mark\")].map(m => m.textContent)",
    )
    assert marks == ["apple", "pie"]  # "apple pie recipe": the query's words; "how", "to" are stopwords
    snippet = driver.find_element(
        "css selector", "#query-detail .system-list[data-system='rr'] tr[data-doc='a'] td.snippet"
    ).text
    assert snippet == "apple pie recipe"
    # a query that is not in the report says so
    driver.get((out / "index.html").as_uri() + "#q=nope")
    assert "No query nope" in driver.find_element("id", "query-detail").text


def test_screenshot_is_not_blank(page, tmp_path):
    driver, *_ = page
    shot = tmp_path / "shot.png"
    driver.save_screenshot(str(shot))
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert shot.stat().st_size > 20_000 and pixels.std() > 0.05  # text, tables and plots, not an empty page


@pytest.mark.data
def test_dl19_page(msmarco, dl19_minilm, tmp_path):
    """The real report: 43 queries, a worst query opened, its lists' grades equal the qrels' and its snippets
    hold the query's terms."""
    from click.testing import CliRunner

    from toolkit.cli import main
    from toolkit.data.trec_io import read_qrels
    from toolkit.diagnosis.query_views import query_terms

    out = tmp_path / "dl19"
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
    summary = json.loads((out / "summary.json").read_text())
    worst = summary["worst_queries"][0]
    driver = _browser(tmp_path)
    try:
        driver.get((out / "index.html").as_uri() + f"#q={worst['query_id']}")
        assert len(_visible_ids(driver)) == 43
        assert driver.find_element("id", "detail-title").text.startswith(worst["query_id"] + ": ")
        rows = _js(
            driver,
            "return [...document.querySelectorAll(\"#query-detail .system-list[data-system='minilm'] "
            "tbody tr\")].map(tr => [tr.dataset.doc, tr.querySelector('td.grade').textContent])",
        )
        assert [d for d, _ in rows] == [i["doc_id"] for i in worst["top_10"]]
        q = read_qrels(msmarco / "qrels.dl19-passage.txt").frame
        g = dict(
            zip(q[q["query_id"] == worst["query_id"]]["doc_id"], q[q["query_id"] == worst["query_id"]]["relevance"])
        )
        assert [grade for _, grade in rows] == [str(g[d]) if d in g else "unjudged" for d, _ in rows]
        marks = _js(driver, "return [...document.querySelectorAll('#query-detail mark')].map(m => m.textContent)")
        terms = query_terms(worst["query"])
        assert marks and all(any(m.lower().startswith(t) for t in terms) for m in marks)
    finally:
        driver.quit()
