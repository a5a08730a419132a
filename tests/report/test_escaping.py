"""No markup from data: names, ids and texts carrying payloads go through every output, and none of them is
markup in the format it lands in.

The payloads: script tags, event handlers, attribute breaks, ``javascript:`` links and autolinks, an RTL
override (U+202E), spreadsheet formulas, pipes and LaTeX's special characters, as query ids, document ids,
query and document texts and run names (file names). The outputs: the diagnosis folder (index.html, report.md,
per_query.csv, pairs.csv), compare's tables (Markdown, LaTeX, notebook HTML, compare.html), eval's CSV (one run
per query, several runs), the notebook reprs of an evaluation, a run and a diagnosis. Markdown is rendered
with CommonMark renderers (markdown-it-py; mistune and markdown2 when installed) and every page opened in
headless Chromium: no payload runs (``window.pwned`` stays unset, no element has an ``on*`` attribute, no
``javascript:`` link) and no table cell moves (every row has as many cells as its header).
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from browser import chromium
from samples import tiny

from toolkit.guard.escape import csv_text, latex_text, markdown_cell, markdown_code, markdown_text

#: Query ids (no whitespace: ids never hold any) and the texts, document ids and run names built from them.
QIDS = [
    "<script>window.pwned=1</script>",
    "<img/src=x/onerror=window.pwned=2>",
    '"><svg/onload=window.pwned=3>',
    "javascript:window.pwned=4",
    "=HYPERLINK(1)|a|b",
    "q6\\&%$#_{}~^",  # not a bidi control: the readers refuse one in an id (TEXTS hold one)
    "@q7+1-2",
]
TEXTS = [
    "<script>window.pwned=11</script> how to bake apple pie",
    "<img src=x onerror=window.pwned=12> what causes rust",
    "x' onmouseover='window.pwned=13' y=\"  [click](javascript:window.pwned=14)",
    "<javascript:window.pwned=15> | pipes | here |",
    "=1+2 \\ & % $ # _ { } ~ ^ < >",
    "\u202ereversed text</td><td>extra cell",
    "-2+3 @SUM(A1) +cmd",
]
RUN_FIRST = "first<img src=x onerror=window.pwned=21>"
RUN_RERANKED = "rr'|\"><b onmouseover=window.pwned=22>x"


def _payload_collection(folder: Path) -> dict:
    """The tiny collection (tests/support/samples.py) with payload ids, texts and run names, as files."""
    qrels, first, reranked, texts, queries = tiny()
    qmap = {f"q{i}": q for i, q in enumerate(QIDS, 1)}
    dmap = {"a": "<img/src=x/onerror=window.pwned=31>", "r1": "=cmd|'/C'!A0", "n0": "|n0|"}

    def d(x: str) -> str:
        return dmap.get(x, x)

    qp = folder / "qrels.txt"
    qp.write_text("".join(f"{qmap[q]} 0 {d(doc)} {g}\n" for q, doc, g in qrels.frame.itertuples(index=False)))
    runs = {}
    for name, run in ((RUN_FIRST, first), (RUN_RERANKED, reranked)):
        path = folder / f"{name}.trec"
        path.write_text(
            "".join(
                f"{qmap[q]} Q0 {d(doc)} 1 {s!r} {name.split('<')[0].split(chr(39))[0]}\n"
                for q, doc, s in run.frame[["query_id", "doc_id", "score"]].itertuples(index=False)
            )
        )
        runs[name] = path
    topics = folder / "topics.tsv"
    topics.write_text("".join(f"{qmap[q]}\t{TEXTS[int(q[1:]) - 1]}\n" for q in queries))
    corpus = folder / "corpus.jsonl"
    doc_texts = {d(k): v for k, v in texts.items()} | {d("n0"): TEXTS[1], d("a"): TEXTS[2]}
    corpus.write_text("".join(json.dumps({"id": k, "contents": v}) + "\n" for k, v in doc_texts.items()))
    return {"qrels": qp, "first": runs[RUN_FIRST], "reranked": runs[RUN_RERANKED], "topics": topics, "corpus": corpus}


# ------------------------------------------------------------------ checks shared by every output
class _Tags(HTMLParser):
    """Every start tag with its attributes, and the cells of every table row (colspans counted)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: list[list[int]] = []
        self._open: list[list[int]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._open.append([])
        elif tag == "tr" and self._open:
            self._open[-1].append(0)
        elif tag in ("td", "th") and self._open and self._open[-1]:
            self._open[-1][-1] += int(a.get("colspan") or 1)

    def handle_endtag(self, tag):
        if tag == "table" and self._open:
            self.tables.append(self._open.pop())


def assert_inert_html(text: str, where: str) -> None:
    """No payload became markup: no on* attribute, no javascript: URL, no element a payload names, no script
    holding a payload, images only our data: PNGs; every table row as wide as its first row."""
    p = _Tags()
    p.feed(text)
    for tag, attrs in p.tags:
        assert not [k for k in attrs if k.lower().startswith("on")], (where, tag, attrs)
        for k in ("href", "src", "action", "formaction"):
            v = (attrs.get(k) or "").strip().lower()
            assert not v.startswith(("javascript:", "data:text")), (where, tag, attrs)
        assert tag not in ("svg", "iframe", "object", "embed", "b") or not any(
            "pwned" in str(v) for v in attrs.values()
        ), (where, tag, attrs)
        if tag == "img":
            src = attrs.get("src") or ""
            assert src.startswith("data:image/png;base64,") or re.fullmatch(r"plots/\w+\.png", src), (where, attrs)
    # at most the page's own scripts (the explorer's data and code): a '</script>' in the data would end it early
    # and make another element of the rest
    kinds = [a.get("type") for tag, a in p.tags if tag == "script"]
    assert kinds.count("application/json") <= 1 and kinds.count(None) <= 1 and len(kinds) <= 2, (where, kinds)
    for rows in p.tables:
        assert len(set(rows)) <= 1, (where, rows)


def assert_inert_markdown(md: str, where: str) -> None:
    """The Markdown rendered by each CommonMark renderer at hand is inert HTML with stable tables."""
    from markdown_it import MarkdownIt

    rendered = {"markdown-it": MarkdownIt("commonmark", {"html": True}).enable("table").render(md)}
    try:
        import mistune

        rendered["mistune"] = mistune.create_markdown(escape=False, plugins=["table"])(md)
    except ImportError:
        pass
    try:
        import markdown2

        rendered["markdown2"] = markdown2.markdown(md, extras=["tables"])
    except ImportError:
        pass
    for name, html in rendered.items():
        assert_inert_html(html, f"{where} ({name})")
        assert "<script" not in html.lower() and "<img src=x" not in html.lower(), (where, name)
    # every GFM table row has as many cells as its header
    for block in re.findall(r"((?:^\|.*\|\n)+)", md, flags=re.M):
        counts = {len(re.findall(r"(?<!\\)\|", re.sub(r"\\\\", "", line))) for line in block.splitlines()}
        assert len(counts) == 1, (where, block)


def assert_no_formula(rows: list[list[str]], where: str) -> None:
    number = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.I)
    for row in rows:
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                assert number.fullmatch(cell), (where, cell)


def _latex_inert(tex: str, columns: int, where: str) -> None:
    """Each row of the tabular has exactly ``columns - 1`` column separators; no special character is bare."""
    body = tex.split(r"\midrule")[1].split(r"\bottomrule")[0]
    for line in body.strip().splitlines():
        assert line.endswith(r" \\"), (where, line)
        cells = re.sub(r"\\[&%$#_{}]|\\text\w+\{\}|\\textbf\{[0-9.]+\}|\$\^\{[^$]*\}\$", "", line[:-3])
        assert cells.count("&") == columns - 1, (where, line)
        assert not re.search(r"[%$#_{}~^<>|]", cells), (where, line)
        assert "\\" not in cells, (where, line)
    legend = tex.rstrip("\n").splitlines()[-1]
    assert legend.startswith("% ") and "\n" not in legend


# ------------------------------------------------------------------ the escapers themselves
@pytest.mark.parametrize(
    "value, html_md",
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("a|b", "a|b"),
        ("a\\|b", "a\\|b"),
        ("&lt;b&gt;", "&amp;lt;b&amp;gt;"),
        ("x & y", "x &amp; y"),
        ("`a|b`", "`a|b`"),
        ("\u202eabc", "[U+202E]abc"),
        ("two\nlines", "two lines"),
    ],
)
def test_markdown_cell_renders_as_the_text(value, html_md):
    from markdown_it import MarkdownIt

    md = f"| h | i |\n|---|---|\n| {markdown_cell(value)} | z |\n"
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert f"<td>{html_md}</td>\n<td>z</td>" in html
    assert markdown_text("x & y") == "x & y" and markdown_text("a_b") == "a_b"  # readable where harmless


def test_markdown_code_cannot_be_closed():
    from markdown_it import MarkdownIt

    for text in ("a`b", "``<script>``", "plain"):
        html = MarkdownIt("commonmark", {"html": True}).render(markdown_code(text))
        assert "<script" not in html and html.count("<code>") == 1, html


def test_latex_specials_and_csv_cells():
    assert latex_text(r"\ & % $ # _ { } ~ ^ < > |") == (
        r"\textbackslash{} \& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textless{} \textgreater{} "
        r"\textbar{}"
    )
    assert latex_text("a\nb") == "a b"
    cells = ["=1+2", "+x", "-x", "@x", "\tx", "\rx", "-1", "+2.5", "-1e-3", "ok", "a=b"]
    assert [csv_text(c) for c in cells] == ["'=1+2", "'+x", "'-x", "'@x", "'\tx", "'\rx", "-1", "+2.5", "-1e-3"] + [
        "ok",
        "a=b",
    ]
    assert csv_text(-1.5) == -1.5 and csv_text(None) is None


# ------------------------------------------------------------------ every output
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _payload_collection(tmp_path_factory.mktemp("payloads"))


@pytest.fixture(scope="module")
def diagnosis_folder(files, tmp_path_factory):
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("diagnosis") / "report"
    args = ["diagnose", "--qrels", files["qrels"], "--first-stage", files["first"], "--reranked", files["reranked"]]
    args += ["--topics", files["topics"], "--corpus", files["corpus"], "--out", out, "--worst", "7"]
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def comparison(files):
    import toolkit as ts

    return ts.compare(
        files["qrels"],
        {RUN_FIRST: files["first"], RUN_RERANKED: files["reranked"], "|=x|": files["reranked"]},
        measures=["ndcg_cut.10", "P.5"],
        permutations=200,
    )


def test_diagnosis_folder_is_inert(diagnosis_folder):
    out = diagnosis_folder
    html = (out / "index.html").read_text()
    assert_inert_html(html, "index.html")
    assert RUN_RERANKED not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    md = (out / "report.md").read_text()
    assert_inert_markdown(md, "report.md")
    # shown as [U+202E] in text; the explorer's data keeps ids exact (its cells are set as text, each isolated)
    assert "\u202e" not in re.sub(r"<script.*?</script>", "", html, flags=re.S) + md
    for name in ("per_query.csv", "pairs.csv"):
        with open(out / name, newline="") as fh:
            rows = list(csv.reader(fh))
        assert len({len(r) for r in rows}) == 1, name
        assert_no_formula(rows, name)
    with open(out / "per_query.csv", newline="") as fh:
        qids = {r["query_id"] for r in csv.DictReader(fh)}
    assert "'=HYPERLINK(1)|a|b" in qids and "'@q7+1-2" in qids and QIDS[0] in qids


def test_compare_tables_are_inert(comparison, tmp_path):
    md = comparison.to_markdown()
    assert_inert_markdown(md, "compare markdown")
    assert "| \\|=x\\| |" in md
    tex = comparison.to_latex()
    _latex_inert(tex, 3, "compare latex")
    assert r"first\textless{}img src=x onerror=window.pwned=21\textgreater{}" in tex
    assert_inert_html(comparison._repr_html_(), "Comparison._repr_html_")
    comparison.write(tmp_path / "cmp")
    assert_inert_html((tmp_path / "cmp" / "compare.html").read_text(), "compare.html")


def test_eval_csv_and_reprs_are_inert(files, cli):
    import toolkit as ts

    res = cli("eval", "-q", "--format", "csv", "-m", "P.5", files["qrels"], files["first"])
    rows = [r for r in csv.reader(io.StringIO(res.stdout)) if r and not r[0].startswith("#")]
    assert_no_formula(rows, "eval csv")
    assert any(r[0] == "'=HYPERLINK(1)|a|b" for r in rows) and any(r[0] == QIDS[0] for r in rows)
    res = cli("eval", "-q", "--format", "csv", "-m", "P.5", files["qrels"], files["first"], files["reranked"])
    rows = [r for r in csv.reader(io.StringIO(res.stdout)) if r and not r[0].startswith("#")]
    assert_no_formula(rows, "eval csv, several runs")
    assert len({len(r) for r in rows}) == 1
    ev = ts.evaluate(files["qrels"], files["first"], "P.5")
    assert_inert_html(ev._repr_html_(), "Evaluation._repr_html_")
    run = ts.Run.read(files["reranked"])
    assert_inert_html(run._repr_html_(), "Run._repr_html_")
    d = ts.diagnose(files["qrels"], files["first"], files["reranked"], topics=str(files["topics"]))
    assert_inert_html(d._repr_html_(), "Diagnosis._repr_html_")


def test_pages_in_chromium(diagnosis_folder, comparison, tmp_path):
    """Each page opened in a browser: nothing a payload names runs, and no table row gains or loses a cell."""
    from markdown_it import MarkdownIt
    from selenium.webdriver.support.ui import WebDriverWait

    comparison.write(tmp_path / "cmp")
    pages = {
        "index.html": (diagnosis_folder / "index.html").as_uri(),
        "compare.html": (tmp_path / "cmp" / "compare.html").as_uri(),
    }
    md_html = (
        MarkdownIt("commonmark", {"html": True}).enable("table").render((diagnosis_folder / "report.md").read_text())
    )
    for name, html in (("report.md.html", md_html), ("repr.html", comparison._repr_html_())):
        (tmp_path / name).write_text(f"<!doctype html><meta charset=utf-8><body>{html}</body>")
        pages[name] = (tmp_path / name).as_uri()
    pages["explorer"] = pages["index.html"] + "#q=" + quote(QIDS[0], safe="")
    driver = chromium(tmp_path)
    try:
        for name, url in pages.items():
            driver.get(url)
            WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
            # every image has loaded or failed, so any onerror would have run
            driver.execute_async_script(
                "const done = arguments[0]; Promise.all([...document.images].map(i => i.complete ? 0 : "
                "new Promise(r => { i.onload = i.onerror = r; }))).then(() => setTimeout(done, 50));"
            )
            state = driver.execute_script(
                "return {pwned: window.pwned === undefined ? null : String(window.pwned),"
                " handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes]"
                ".some(a => a.name.startsWith('on'))).length,"
                " js: [...document.querySelectorAll('a[href]')].filter(a => a.protocol === 'javascript:').length,"
                " rows: [...document.querySelectorAll('table')].map(t => [...t.rows].map(r => [...r.cells]"
                ".reduce((n, c) => n + c.colSpan, 0)))}"
            )
            assert state["pwned"] is None, (name, state["pwned"])
            assert state["handlers"] == 0 and state["js"] == 0, (name, state)
            for widths in state["rows"]:
                assert len(set(widths)) <= 1, (name, widths)
        # the explorer opened the payload query: its id is shown as text
        assert QIDS[0] in driver.execute_script("return document.body.innerText")
    finally:
        driver.quit()


def test_compressed_explorer_in_chromium(files, tmp_path, monkeypatch):
    """The payload page with its explorer data gzip-compressed (as a page of thousands of queries carries it):
    decompressed in the browser, it is exactly the report's data, and no payload in it runs or becomes markup."""
    from click.testing import CliRunner
    from selenium.webdriver.support.ui import WebDriverWait

    from toolkit.cli import main
    from toolkit.report import diagnosis_explore
    from toolkit.report.diagnosis_explore import read_explore_data

    monkeypatch.setattr(diagnosis_explore, "COMPRESS_ABOVE", 0)
    out = tmp_path / "report"
    args = ["diagnose", "--qrels", files["qrels"], "--first-stage", files["first"], "--reranked", files["reranked"]]
    args += ["--topics", files["topics"], "--corpus", files["corpus"], "--out", out, "--worst", "7"]
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    html = (out / "index.html").read_text()
    assert '"encoding":"gzip+base64"' in html
    assert_inert_html(html, "index.html, compressed")
    data = read_explore_data(html)
    assert {r["query_id"] for r in data["rows"]} >= set(QIDS[:5])
    driver = chromium(tmp_path)
    try:
        driver.get((out / "index.html").as_uri() + "#q=" + quote(QIDS[1], safe=""))
        WebDriverWait(driver, 20).until(
            lambda d: d.execute_script("return document.getElementById('explore').classList.contains('ready')")
        )
        # what the browser decoded is the report's data, value for value
        assert driver.execute_script("return document.getElementById('explore').explorerData") == data
        state = driver.execute_script(
            "for (const e of document.querySelectorAll('*')) for (const k of ['mouseover', 'focus'])"
            " e.dispatchEvent(new Event(k, {bubbles: true}));"
            "return {pwned: window.pwned === undefined ? null : String(window.pwned),"
            " handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes]"
            ".some(a => a.name.startsWith('on'))).length,"
            " js: [...document.querySelectorAll('a[href]')].filter(a => a.protocol === 'javascript:').length,"
            " ids: [...document.querySelectorAll('#explore-table tbody tr')].map(r => r.dataset.qid),"
            " title: document.getElementById('detail-title').textContent}"
        )
        assert state["pwned"] is None and state["handlers"] == 0 and state["js"] == 0, state
        assert sorted(state["ids"]) == sorted(r["query_id"] for r in data["rows"])  # ids kept exact, as text
        assert state["title"].startswith(QIDS[1] + ": ")
        # a browser without DecompressionStream says why the explorer is empty
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": "delete window.DecompressionStream"})
        driver.get((out / "index.html").as_uri())
        text = driver.find_element("id", "query-detail").text
        assert "cannot read its data: this browser has no DecompressionStream" in text, text
        assert "per_query.csv beside this page" in text
    finally:
        driver.quit()


def test_csv_newlines_without_quotes_is_the_quote_aware_rewrite():
    """The quote-free shortcut (a plain replace) gives what the quote-aware rewrite gives, and a quoted cell's line
    break stays."""
    import random

    from toolkit.guard.escape import _CSV_ROW_END, csv_newlines

    rnd = random.Random(5)
    for _ in range(300):
        text = "".join(rnd.choice(["a", ",", "\r\n", "\r", "\n", "1.5", '"', '""']) for _ in range(rnd.randrange(30)))
        assert csv_newlines(text) == _CSV_ROW_END.sub(lambda m: m.group(1) or "\n", text)
    assert csv_newlines('a,"x\r\ny"\r\nb,c\r\n') == 'a,"x\r\ny"\nb,c\n'
    assert csv_newlines("a,b\r\n1,2\r\n") == "a,b\n1,2\n"
