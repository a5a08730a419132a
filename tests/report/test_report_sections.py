"""One list of report sections feeds both the HTML page and the Markdown file."""

from __future__ import annotations

import dataclasses

import pytest
from samples import tiny

from toolkit.diagnosis.compute import Diagnosis, DiagnosisInputs, diagnose
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.report.diagnosis_page import PLOTS, SECTIONS, diagnosis_html, diagnosis_markdown
from toolkit.report.eval_tables import Table
from toolkit.report.html import esc
from toolkit.report.sections import Part, Plots, Section, render_html, render_markdown


@pytest.fixture(scope="module")
def diag():
    qrels, first, reranked, _, queries = tiny()
    return diagnose(
        DiagnosisInputs(qrels, first, reranked, queries=queries), DiagnosisOptions(worst_n=3, permutations=100)
    )


def test_every_section_reads_a_field_of_the_result():
    fields = {f.name for f in dataclasses.fields(Diagnosis)} | {
        n for n, v in vars(Diagnosis).items() if isinstance(v, property)
    }
    for section in SECTIONS:
        assert set(section.reads) <= fields, section.reads


def test_both_formats_come_from_the_same_sections(diag):
    """Every titled section is a heading in both outputs, in the same order; the figures resolve per format."""
    plots = {name: (f"caption of {name}", b"\x89PNG") for name in PLOTS}
    html = diagnosis_html(diag, plots)
    md = diagnosis_markdown(diag, {name: f"plots/{name}.png" for name in PLOTS})
    titles = [t for s in SECTIONS if s.shown(diag) and (t := s.title(diag))]
    assert "Hurt most and helped most by the reranker (reranked − first stage)" in titles
    positions_html = [html.index(f"<h2>{esc(t)}</h2>") for t in titles]
    positions_md = [md.index(f"\n## {t}\n") for t in titles]
    assert positions_html == sorted(positions_html) and positions_md == sorted(positions_md)
    assert html.count('<img class="plot"') == len(PLOTS) and md.count("](plots/") == len(PLOTS)
    # the explorer is HTML only; the disagreements section is not shown with one reranked run
    assert 'id="explore-table"' in html and "Explore the queries" not in md
    assert "Where the reranked runs disagree most" not in html + md


def test_parts_and_a_new_section():
    table = Table(["a", "b"], [["x", 0.5]])
    section = Section(
        title=lambda r: f"About {r['name']}",
        reads=("name",),
        body=lambda r: [
            Part.table(table),
            Part.html_only("<p>only on the page</p>"),
            Part.markdown_only("only in the file\n"),
            Part.plot("p1", "first plot"),
        ],
    )
    hidden = Section(lambda r: "Hidden", (), lambda r: [Part.heading("never", 3)], shown=lambda r: False)
    plots = Plots(png={"p1": ("a <caption>", b"png")}, files={"p1": "plots/p1.png"})
    html = render_html([section, hidden], {"name": "x & y"}, plots)
    md = render_markdown([section, hidden], {"name": "x & y"}, plots)
    assert html.startswith("<h2>About x &amp; y</h2><table>") and "<p>only on the page</p>" in html
    assert 'alt="a &lt;caption&gt;"' in html and "only in the file" not in html and "Hidden" not in html
    assert md == (
        "## About x & y\n\n| a | b |\n|---|---|\n| x | 0.5000 |\n\nonly in the file\n\n![first plot](plots/p1.png)\n\n"
    )


def test_an_html_only_section_is_not_computed_for_markdown():
    """The explorer is costly (its data for every query): the Markdown file neither shows nor builds it."""
    calls = []
    page = Section(lambda r: None, (), lambda r: calls.append(1) or [Part.html_only("<p>page</p>")], html_only=True)
    plain = Section(lambda r: "Both", (), lambda r: [Part.markdown_only("text\n")])
    assert render_markdown([page, plain], {}, Plots()) == "## Both\n\ntext\n\n" and calls == []
    assert render_html([page, plain], {}, Plots()) == "<p>page</p><h2>Both</h2>" and calls == [1]
