"""``compare --holes`` and the trust fields of every comparison (direction, hole bounds, overlap, verdict).

Oracles: hand-computed P@2 bounds on a tiny case (P@k's extremes are closed form: every hole non-relevant /
relevant) and ``holes.hole_bounds`` itself on DL19; the verdict's text from its rule."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import toolkit as ts
from toolkit.cli import main
from toolkit.stats.trust import direction, trust_fields

R = "../shared/data/msmarco-passage/runs"


def _write(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    return str(p)


def _run(tmp_path, name, ranks):
    rows = [(q, "Q0", d, i + 1, 10 - i, name) for q, ds in ranks.items() for i, d in enumerate(ds)]
    return _write(tmp_path, name + ".txt", rows)


@pytest.fixture
def three(tmp_path):
    """P@2 per query (holes u*): A 0.5, 0 (no holes: bounds [0.25, 0.25]); B 0.5, 0.5 (u1 a hole: [0.5, 0.75]);
    C 0, 0 (u3, u4 holes: [0, 0.5])."""
    qrels = _write(
        tmp_path, "q.txt", [(1, 0, "d1", 1), (1, 0, "x", 0), (2, 0, "d2", 1), (2, 0, "x", 0), (2, 0, "y", 0)]
    )
    runs = {
        "A": _run(tmp_path, "A", {"1": ["d1", "x"], "2": ["x", "y"]}),
        "B": _run(tmp_path, "B", {"1": ["d1", "u1"], "2": ["d2", "x"]}),
        "C": _run(tmp_path, "C", {"1": ["u3", "x"], "2": ["x", "u4"]}),
    }
    return qrels, runs


def test_compare_holes_hand_computed(three):
    qrels, runs = three
    cmp = ts.compare(qrels, runs, measures="P.2", holes=True, permutations=100, bootstrap=200)
    doc = cmp.doc
    assert doc["holes"]["P_2"] == {"A": [0.25, 0.25], "B": [0.5, 0.75], "C": [0.0, 0.5]}
    b, c = doc["results"]["P_2"]["B"], doc["results"]["P_2"]["C"]
    assert b["delta"] == pytest.approx(0.25) and b["direction"] == "better"
    assert b["baseline_bounds"] == [0.25, 0.25] and b["bounds"] == [0.5, 0.75] and b["bounds_overlap"] is False
    assert b["verdict"].startswith("+0.2500 [") and b["verdict"].endswith(
        "bounds over the top-k holes disjoint: no labelling of the top-k holes explains it"
    )
    assert c["delta"] == pytest.approx(-0.25) and c["direction"] == "worse"
    assert c["bounds_overlap"] is True and c["verdict"].endswith(
        "; bounds over the top-k holes overlap: judge more before claiming it"
    )
    text = cmp.to_text()
    assert "bounds over the top-k holes overlap: judge more before claiming it" in text and "# bounds:" in text
    json.loads(cmp.to_json())  # stays valid JSON
    t = cmp.table.set_index("name")
    assert t.loc["C", "P_2 direction"] == "worse" and t.loc["C", "P_2 bounds overlap"] is True
    assert t.loc["B", "P_2 verdict"] == b["verdict"] and pd.isna(t.loc["A", "P_2 verdict"])


def test_compare_without_holes_has_direction_and_verdict_only(three):
    qrels, runs = three
    doc = ts.compare(qrels, runs, measures="P.2", permutations=100, bootstrap=200).doc
    r = doc["results"]["P_2"]["B"]
    assert r["direction"] == "better" and r["bounds"] is None and r["bounds_overlap"] is None
    assert "bounds" not in r["verdict"] and "holes" not in doc


def test_cli_compare_holes_text_json_and_html(three, tmp_path):
    qrels, runs = three
    args = ["compare", "--qrels", qrels, *(f"{n}={p}" for n, p in runs.items()), "-m", "P.2", "--holes"]
    args += ["--permutations", "100", "--bootstrap", "200"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "bounds over the top-k holes overlap: judge more before claiming it" in res.output
    doc = json.loads(CliRunner().invoke(main, [*args, "--format", "json"]).output)
    assert doc["results"]["P_2"]["C"]["bounds_overlap"] is True
    out = tmp_path / "cmp"
    assert CliRunner().invoke(main, [*args, "--out", str(out)]).exit_code == 0
    html = (out / "compare.html").read_text()
    assert "<th>verdict</th>" in html and "bounds over the top-k holes overlap: judge more before claiming it" in html


def test_dl19_bounds_equal_hole_bounds():
    from toolkit.data.adapters import as_qrels, as_run
    from toolkit.measures.names import EvalSettings, parse_measure_groups
    from toolkit.quality.holes import hole_bounds

    runs = {"bm25": f"{R}/run.dl19.bm25.top100.txt", "ada": f"{R}/run.dl19.openai-ada2.top100.txt"}
    doc = ts.compare(
        "dl19-passage", runs, measures="ndcg_cut.10", relevance_level=2, holes=True, permutations=200, bootstrap=500
    ).doc
    q = as_qrels("dl19-passage")
    ms = [m for g in parse_measure_groups(["ndcg_cut.10"], 9) for m in g.measures]
    for name, path in runs.items():
        mean = hole_bounds(q, as_run(path), ms, EvalSettings(relevance_level=2))["ndcg_cut_10"].mean()
        assert doc["holes"]["ndcg_cut_10"][name] == pytest.approx([mean["min"], mean["max"]], abs=1e-15)
    r = doc["results"]["ndcg_cut_10"]["ada"]
    expected = (r["baseline_bounds"][0] <= r["bounds"][1]) and (r["bounds"][0] <= r["baseline_bounds"][1])
    assert r["bounds_overlap"] is expected


def test_trust_fields_rules():
    r = {"delta": 0.021, "ci_low": 0.008, "ci_high": 0.034, "d_z": 0.41, "p_adjusted": 0.2}
    f = trust_fields(r, (0.40, 0.52), (0.50, 0.60))
    assert f["bounds_overlap"] is True and f["direction"] == "better"
    assert f["verdict"] == (
        "+0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.2: no significant difference (the uncorrected interval "
        "excludes 0); bounds over the top-k holes overlap: judge more before claiming it"
    )
    assert trust_fields(r, (0.40, 0.49), (0.50, 0.60))["bounds_overlap"] is False
    assert direction(0) == "equal" and direction(-1e-9) == "worse" and direction(None) == "equal"


def test_paper_tables_carry_interval_dz_bounds_and_verdict(three):
    """Markdown and LaTeX keep their cells and add one line per test under the legend. Hand-computed: P@2 per
    query A (0.5, 0), B (0.5, 0.5), C (0, 0): B - A = (0, 0.5), mean +0.25, sd 0.3536, d_z 0.71; C - A = (-0.5,
    0), d_z -0.71; bounds as in ``three``. The interval and p_adj come from the (tested) comparison document."""
    qrels, runs = three
    cmp = ts.compare(qrels, runs, measures="P.2", holes=True, permutations=100, bootstrap=200)
    res = cmp.doc["results"]["P_2"]
    b, c = res["B"], res["C"]

    def line(run, r, tail):
        return (
            f"P_2, {run} vs A: {r['delta']:+.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}], d_z {r['d_z']:.2f}, "
            f"p_adj {r['p_adjusted']:.4g}: no significant difference; {tail}"
        )

    want_b = line(
        "B",
        b,
        "bounds over the top-k holes disjoint: no labelling of the top-k holes explains it (bounds A [0.2500, 0.2500], B [0.5000, 0.7500])",
    )
    want_c = line(
        "C",
        c,
        "bounds over the top-k holes overlap: judge more before claiming it (bounds A [0.2500, 0.2500], C [0.0000, 0.5000])",
    )
    assert want_b.startswith("P_2, B vs A: +0.2500 [") and ", d_z 0.71, p_adj 1:" in want_b
    assert want_c.startswith("P_2, C vs A: -0.2500 [") and ", d_z -0.71, p_adj 1:" in want_c
    assert cmp.notes()[1:] == [want_b, want_c]
    assert "0.95 paired bootstrap interval (percentile)" in cmp.notes()[0] and "unjudged" in cmp.notes()[0]
    md = cmp.to_markdown()
    table = md.split("\n\n")[0].splitlines()
    assert table[2:] == ["| A | 0.2500 |", "| B | **0.5000** |", "| C | 0.0000 |"]  # cells unchanged
    esc = str.maketrans({"[": "\\[", "]": "\\]"})
    assert f"- {want_b.translate(esc)}\n" in md and md.endswith(f"- {want_c.translate(esc)}\n")
    assert cmp.to_markdown(notes=False) == md.split("\nPer test:")[0]
    tex = cmp.to_latex()
    assert tex.endswith("% " + want_c.replace("_", r"\_") + "\n") and ("% " + want_b.replace("_", r"\_")) in tex
    assert r"\end{tabular}" in tex and tex.count(r"\\") == 4  # header + three rows: the tabular is as before
    # at another alpha the verdict is recomputed (p_adj 1 stays not significant, the text stays the same)
    assert cmp.notes(alpha=0.5)[1:] == [want_b, want_c]


def test_paper_table_notes_without_holes_and_escaped(three):
    qrels, runs = three
    named = {"<b>|x": runs["A"], "B": runs["B"]}
    cmp = ts.compare(qrels, named, measures="P.2", permutations=100, bootstrap=200)
    notes = cmp.notes()
    assert len(notes) == 2 and "bounds" not in "".join(notes) and notes[1].startswith("P_2, B vs <b>|x: +0.2500")
    md = cmp.to_markdown()
    assert "- P_2, B vs \\<b\\>\\|x: +0.2500 \\[" in md and "<b>" not in md
    assert r"% P\_2, B vs \textless{}b\textgreater{}\textbar{}x: +0.2500 [" in cmp.to_latex()
