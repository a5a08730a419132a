"""No markup from data in an experiment's outputs (issue 24, item 2): the payloads of
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
from toolkit.escape import csv_text
from toolkit.experiments.cache import StageCache

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
    from toolkit.escape import CSV_LINE_END, csv_newlines

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
    (toolkit.escape), a carriage return as a line feed (HTML's input-stream preprocessing)."""
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
