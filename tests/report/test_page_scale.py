"""The diagnosis page at MS MARCO dev scale: a synthetic diagnosis of 6,980 queries (a first
stage 20 deep and three reranked runs of it, from ``scripts/bench_page.py``) gives a self-contained index.html
under 8 MB whose explorer data decodes to exactly what the report computed; in headless Chromium the explorer
opens, draws only the rows in view, finds a query by its id and sorts a column over every query, each within a
generous bound (the measured seconds are printed).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUERIES = 6980
LIMIT_S = 10.0  # generous: each step takes well under a second on a laptop


def _bench_page():
    spec = importlib.util.spec_from_file_location("bench_page", REPO / "scripts" / "bench_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """(diagnosis, report folder, index.html's text) for 6,980 synthetic queries."""
    import warnings

    from toolkit.report.diagnosis_page import write_diagnosis_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diag = _bench_page().synthetic_diagnosis(QUERIES, depth=20, rerank_depth=20, permutations=100)
    out = tmp_path_factory.mktemp("scale") / "report"
    t = time.perf_counter()
    write_diagnosis_report(diag, out)
    print(f"report of {QUERIES} queries written in {time.perf_counter() - t:.1f} s")
    return diag, out, (out / "index.html").read_text(encoding="utf-8")


def test_page_is_small_and_its_data_exact(big):
    from toolkit.report.diagnosis_explore import explore_data, read_explore_data

    diag, out, html = big
    size = (out / "index.html").stat().st_size
    print(f"index.html at {QUERIES} queries: {size / 1e6:.2f} MB")
    assert size < 8_000_000
    assert len(diag.rows(diag.primary.name)) == QUERIES
    assert f"The explorer covers all {QUERIES:,} queries of this diagnosis." in html
    assert '"encoding":"gzip+base64"' in html
    assert "<noscript><p" in html and "per_query.csv beside this page has every value" in html
    data = read_explore_data(html)
    assert data == explore_data(diag)  # the same values, only encoded differently
    assert len(data["rows"]) == len(data["views"]) == QUERIES
    # an independent look at one value: the explorer's row holds the per-query CSV's figure
    pq = diag.rows("rr2").set_index("query_id")
    q = data["rows"][1234]["query_id"]
    assert data["rows"][1234]["m:rr2"] == pq.loc[q, "reranked_ndcg_cut_10"]
    assert [line["system"] for line in data["detail_rows"][q]] == ["first", "rr1", "rr2", "rr3"]


def _until(driver, condition: str, what: str) -> float:
    """Seconds until the script ``condition`` returns true (at most LIMIT_S, else the test fails)."""
    from selenium.webdriver.support.ui import WebDriverWait

    t = time.perf_counter()
    WebDriverWait(driver, LIMIT_S, poll_frequency=0.02).until(lambda d: d.execute_script(condition), what)
    return time.perf_counter() - t


def _drawn(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#explore-table tbody tr[data-qid]')].map(r => r.dataset.qid)"
    )


def test_explorer_in_chromium(big, tmp_path):
    from browser import chromium, console_errors

    diag, out, _ = big
    rows = diag.rows("rr1")
    values = dict(zip(rows["query_id"], rows["reranked_ndcg_cut_10"]))
    driver = chromium(tmp_path)
    try:
        t = time.perf_counter()
        driver.get((out / "index.html").as_uri())
        opened = time.perf_counter() - t
        ready = _until(driver, "return document.getElementById('explore').classList.contains('ready')", "ready")
        print(f"\nopened in {opened:.2f} s, explorer ready {ready:.2f} s later")
        assert driver.find_element("id", "explore-count").text == f"{QUERIES} of {QUERIES} queries shown"
        drawn = _drawn(driver)
        assert 20 <= len(drawn) <= 300, len(drawn)  # the rows in view and a margin, not 6,980
        assert not console_errors(driver)

        # search a query id: typing it in the query column's box filters every query
        target = max(values, key=lambda q: (len(q), q))  # a long id: few others contain it
        box = driver.find_element("css selector", "input[data-filter='query_id']")
        t = time.perf_counter()
        box.send_keys(target)
        found = time.perf_counter() - t + _until(
            driver, f"return [...document.querySelectorAll('#explore-table tbody tr')].some(r => r.dataset.qid === "
            f"{target!r})", "the searched query's row"
        )  # fmt: skip
        expected = sorted(q for q in values if target in q)
        _until(driver, f"return document.querySelectorAll('#explore-table tbody tr').length === {len(expected)}", "n")
        assert sorted(_drawn(driver)) == expected
        print(f"search for {target}: its row shown in {found:.2f} s")
        box.send_keys("\b" * len(target))
        _until(driver, f"return document.getElementById('explore-count').textContent.startsWith('{QUERIES} of')", "")

        # sort a column over every query: the first row is the lowest value, then (again) the highest
        header = driver.find_element("css selector", "#explore-table th[data-key='m:rr1']")
        lowest = min(values.values())
        first = min(q for q, v in values.items() if v == lowest)  # ties: the explorer orders by query id
        t = time.perf_counter()
        header.click()
        asc = time.perf_counter() - t + _until(
            driver, f"const r = document.querySelector('#explore-table tbody tr[data-qid]'); return r && "
            f"r.dataset.qid === {first!r}", "ascending"
        )  # fmt: skip
        highest = max(values.values())
        t = time.perf_counter()
        header.click()
        desc = time.perf_counter() - t + _until(
            driver, "const r = document.querySelector('#explore-table tbody tr[data-qid]'); return r && "
            f"{sorted(q for q, v in values.items() if v == highest)!r}.includes(r.dataset.qid)", "descending"
        )  # fmt: skip
        assert header.get_attribute("aria-sort") == "descending"
        print(f"sorted ascending in {asc:.2f} s, descending in {desc:.2f} s")
        assert asc < LIMIT_S and desc < LIMIT_S and found < LIMIT_S

        # scrolled to the end, the last rows are drawn; the last one opens by its link
        last = first  # descending, ties by query id descending: the lowest value's smallest id comes last
        scrolled = _until(
            driver,
            "const w = document.querySelector('.explore-wrap'); w.scrollTop = w.scrollHeight; "
            f"return [...document.querySelectorAll('#explore-table tbody tr')].some(r => r.dataset.qid === "
            f"{last!r})",
            "the last row after scrolling",
        )
        print(f"scrolled to the end in {scrolled:.2f} s")
        assert len(_drawn(driver)) <= 300
        driver.find_element("css selector", f"#explore-table tbody tr[data-qid='{last}'] a").click()
        # the detail is drawn on the address' change, after the click returns: wait for it (a loaded machine)
        _until(driver, "return !!document.getElementById('detail-title')", "the query's detail")
        assert driver.find_element("id", "detail-title").text.startswith(last + ": ")
        assert not console_errors(driver)
    finally:
        driver.quit()
