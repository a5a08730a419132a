"""No markup from data in an experiment's outputs: the payloads of
tests/report/test_escaping.py as the experiment's name, its stage names (and so every configuration name,
input and tuned label), a baseline named by such a stage and as a query id, run through a small experiment
(the six-document index, BM25/QLD/RM3/fusion: no model) into ``index.html`` and ``results.csv``.

An experiment writes no Markdown and no LaTeX; its diagnosis folders (rerank stages) are the diagnosis
writer's, checked with the same payloads in tests/report/test_escaping.py.

Oracles: the HTML parser of the escaping tests (no on* attribute, no javascript: URL, every row as wide as its
header), Python's csv module (every row as wide as the header, each text cell exactly ``csv_text`` of the
name, each number cell the float the table holds).
"""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from tests.experiments.test_experiment import QRELS, TOPICS, experiment, run
from tests.report.test_escaping import assert_inert_html, assert_no_formula
from toolkit.experiments.stage_cache import StageCache
from toolkit.guard.escape import csv_text

#: Stage names: script tags, event handlers, an attribute break, a javascript: text, an RTL override, formulas
#: (= + - @ tab CR), pipes, LaTeX's specials and a matplotlib math text (a legend label).
STAGES = {
    "bm": "<script>window.pwned=1</script>",
    "qld": "<img src=x onerror=window.pwned=2>",
    "rm3": '"><svg/onload=window.pwned=3>',
    "fuse": '=HYPERLINK("javascript:window.pwned=4")|a|b',
    "fuse2": "@SUM(1+1)|\u202erevo",
    "fuse3": "+cmd",
    "fuse4": "-2+3",
    "fuse5": "\t=1",
    "fuse6": "\r=2",
    "qld2": "$x^{2}$ \\&%#_{}~ $\\frac{$",
}
NAME = "<script>window.pwned=9</script>|x'\"><b onmouseover=window.pwned=10>"
QID = "=1+2|<b>"


def _q(name: str) -> str:
    return json.dumps(name)  # a YAML double-quoted scalar (JSON's escapes are YAML's)


@pytest.fixture(scope="module")
def result(tiny_index, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("payload-experiment")
    s = STAGES
    stages = f"""\
{_q(s["bm"])}:
  type: bm25
  k1: [0.6, 1.2]
  b: 0.4
  tune: {{metric: map, queries: ["1", "2"]}}
{_q(s["qld"])}:
  type: qld
  mu: [50, 500]
{_q(s["qld2"])}:
  type: qld
  mu: [100, 1000]
{_q(s["rm3"])}:
  type: rm3
  input: {_q(s["bm"])}
  fb_docs: 2
  fb_terms: 3
"""
    for key in ("fuse", "fuse2", "fuse3", "fuse4", "fuse5", "fuse6"):
        stages += f"{_q(s[key])}:\n  type: fuse\n  inputs: [{_q(s['bm'])}, {_q(s['rm3'])}]\n"
    path = experiment(tmp, tiny_index, stages, extra=f"  baseline: {_q(s['bm'])}\n")
    path.write_text(path.read_text().replace("name: tiny\n", f"name: {_q(NAME)}\n", 1))
    # one query id a payload too (its topic and judgements renamed)
    (tmp / "topics.tsv").write_text(TOPICS.replace("5\t", f"{QID}\t"))
    (tmp / "qrels.txt").write_text(QRELS + f"{QID} 0 d6 1\n")
    res, _ = run(path, tmp / "out", StageCache(tmp / "cache"))
    return res


def test_experiment_page_is_inert(result):
    page = (result.out / "index.html").read_text()
    assert_inert_html(page, "experiment index.html")
    assert "<script" not in page.lower() and "<svg" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.pwned=9&lt;/script&gt;|x&#x27;&quot;&gt;&lt;b onmouseover" in page  # the title
    assert "\u202e" not in page and "[U+202E]revo" in page
    # every configuration is one row; its name shown as text
    assert page.count("<tr") == 1 + len(result.table)
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;[tuned]" in page
    assert '<h2>The grid</h2><img class="plot"' in page  # the legend's math text did not stop the plot


def test_results_csv_cells_are_text_and_numbers_are_kept(result):
    with open(result.out / "results.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert len({len(r) for r in rows}) == 1 and len(body) == len(result.table)  # no cell shifted, no row split
    assert_no_formula(rows, "results.csv")
    table = result.table.reset_index(drop=True)
    for i, row in enumerate(body):
        for col, cell in zip(header, row):
            want = table.at[i, col]
            if isinstance(want, str):
                assert cell == csv_text(want), (col, cell, want)
            elif pd.isna(want):
                assert cell == "", (col, cell)
            elif isinstance(want, bool):
                assert cell == str(want)
            else:
                assert float(cell) == float(want), (col, cell, want)  # numbers untouched (no quote, same double)
    configs = {r[0] for r in body}
    for name in STAGES.values():
        assert csv_text(name) in configs or any(c.startswith(csv_text(name) + "(") for c in configs), name
    assert '\'=HYPERLINK("javascript:window.pwned=4")|a|b' in configs and "'\t=1" in configs and "'\r=2" in configs


def test_a_line_break_in_a_cell_is_quoted():
    """Python's csv module quotes a cell only for the characters of its line end: with ``\\n`` line ends a bare
    carriage return stayed unquoted and split the row for every reader."""
    from toolkit.guard.escape import CSV_LINE_END, csv_newlines

    frame = pd.DataFrame({"name": ["a\rb", 'q"\r\n"x', "plain"], "value": [-0.5, 1.0, 2.5]})
    text = csv_newlines(frame.to_csv(index=False, lineterminator=CSV_LINE_END))
    assert text == 'name,value\n"a\rb",-0.5\n"q""\r\n""x",1.0\nplain,2.5\n'
    assert list(csv.reader(io.StringIO(text, newline=""))) == [
        ["name", "value"],
        ["a\rb", "-0.5"],
        ['q"\r\n"x', "1.0"],
        ["plain", "2.5"],
    ]


def _as_html_text(name: str) -> str:
    """What a browser shows of ``name`` written as HTML text: a bidirectional control as ``[U+XXXX]``
    (toolkit.guard.escape), a carriage return as a line feed (HTML's input-stream preprocessing)."""
    return name.replace("\u202e", "[U+202E]").replace("\r\n", "\n").replace("\r", "\n")


def test_experiment_page_in_chromium(result, tmp_path):
    """``index.html`` opened in a browser: nothing a payload names runs (not on load, not on a mouse over or the
    focus), the console stays free of errors, every row of the results table is as wide as its header, and each
    configuration's name is its row's text (no cell moved, no name cut)."""
    from browser import chromium, probe

    driver = chromium(tmp_path)
    try:
        state = probe(driver, (result.out / "index.html").as_uri())
        assert state["pwned"] is None, state
        assert state["handlers"] == 0 and state["js"] == 0, state
        assert state["console"] == [], state["console"]
        table = state["rows"][0]
        assert len(table) == 1 + len(result.table) and len(set(table)) == 1, table
        names = driver.execute_script(
            "const t = document.querySelector('table');"
            "const i = [...t.tHead.rows[0].cells].findIndex(c => c.textContent === 'config');"
            "return [...t.tBodies[0].rows].map(r => r.cells[i].textContent)"
        )
        assert sorted(names) == sorted(_as_html_text(c) for c in result.table["config"])
        assert driver.title == "Experiment " + _as_html_text(NAME)
    finally:
        driver.quit()


#: A rerank stage's name and the query id it sees: its diagnosis folder, the link to it and the pages inside.
RERANK = "<img src=x onerror=window.pwned=41>|=rr\u202e"


@pytest.fixture(scope="module")
def reranked(tiny_index, tiny_cross_encoder, tmp_path_factory):
    """One BM25 stage and a payload-named rerank stage over it (the tiny random cross-encoder, top 2)."""
    tmp = tmp_path_factory.mktemp("payload-rerank")
    stages = (
        f"{_q(STAGES['bm'])}: {{type: bm25}}\n"
        f"{_q(RERANK)}:\n  type: rerank\n  input: {_q(STAGES['bm'])}\n  model: {tiny_cross_encoder}\n"
        "  depth: 2\n  device: cpu\n"
    )
    path = experiment(tmp, tiny_index, stages)
    (tmp / "topics.tsv").write_text(TOPICS.replace("5\t", f"{QID}\t"))
    (tmp / "qrels.txt").write_text(QRELS + f"{QID} 0 d6 1\n")
    res, _ = run(path, tmp / "out", StageCache(tmp / "cache"))
    return res


def test_a_rerank_stage_with_a_payload_name_writes_inert_pages(reranked, tmp_path):
    """The experiment page links the stage's diagnosis (an escaped href to a folder of a sanitised name); that
    diagnosis' index.html and report.md (rendered by a CommonMark renderer) hold no markup from the names."""
    from markdown_it import MarkdownIt

    page = (reranked.out / "index.html").read_text()
    assert_inert_html(page, "experiment index.html")
    folders = [p for p in (reranked.out / "diagnosis").iterdir() if p.is_dir()]
    assert len(folders) == 1 and "<" not in folders[0].name and "\u202e" not in folders[0].name
    assert f'href="diagnosis/{folders[0].name}/index.html"' in page
    diagnosis = (folders[0] / "index.html").read_text()
    assert_inert_html(diagnosis, "rerank diagnosis index.html")
    assert RERANK not in diagnosis and "&lt;img src=x onerror=window.pwned=41&gt;" in diagnosis
    md = MarkdownIt("commonmark", {"html": True}).enable("table").render((folders[0] / "report.md").read_text())
    assert_inert_html(md, "rerank diagnosis report.md")
    from browser import chromium, probe

    driver = chromium(tmp_path)
    try:
        for url in ((reranked.out / "index.html").as_uri(), (folders[0] / "index.html").as_uri()):
            state = probe(driver, url)
            assert state["pwned"] is None and state["handlers"] == 0 and state["js"] == 0, (url, state)
            assert state["console"] == [], (url, state["console"])
            assert all(len(set(widths)) <= 1 for widths in state["rows"]), (url, state["rows"])
    finally:
        driver.quit()
