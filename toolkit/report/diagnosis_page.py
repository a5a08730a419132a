"""The two-stage diagnosis report, read from a ``diagnose.Diagnosis``: a folder with

- ``index.html``: one self-contained page (inline CSS, script and PNGs; opens from disk, fetches nothing) with
  the headline, the loss decomposition, the rerank-depth curve, every system with its significance, where
  rerankers disagree, the labels, and a query explorer: a per-query table that sorts and filters, and for the
  query in the address (``#q=<id>``) every system's top k side by side, grades and unjudged documents marked,
  rank movement, the query's terms highlighted in the snippets;
- ``report.md`` with ``plots/*.png``; ``per_query.csv`` (one row per reranked run and query);
  ``pairs.csv`` (one row per compared pair of runs and query); ``summary.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from toolkit.diagnosis.compute import FAMILIES, Diagnosis
from toolkit.diagnosis.query_labels import DECISION_ORDER, LABEL_MEANING, LABELS, MIN_TYPE_QUERIES
from toolkit.diagnosis.query_views import without_gc
from toolkit.errors import for_api
from toolkit.guard.escape import csv_table, markdown_code
from toolkit.guard.escape import markdown_text as md
from toolkit.guard.escape import plot_text as pt
from toolkit.report.diagnosis_explore import explore_html, explore_script, repeat_shown, values_of
from toolkit.report.diagnosis_judge import has_judge_labels, judge_parts
from toolkit.report.diagnosis_runs import (
    SYSTEM_COLOURS,
    behaviour_parts,
    depth_parts,
    has_repeats,
    plot_promotion_profile,
    repeats_parts,
)
from toolkit.report.diagnosis_trust import has_verdicts, trust_parts
from toolkit.report.eval_tables import Table, significance_cells, wtl
from toolkit.report.html import (
    esc,
    figure_png,
    fmt,
    html_page,
    markdown_table,
    p_value,
    provenance_html,
    pyplot,
    signed,
)
from toolkit.report.sections import Part, Plots, Section, render_html, render_markdown

#: Colours of the diagnosis labels in every plot and table.
LABEL_COLOURS = MappingProxyType(
    {
        "ok": "#1a7f37",
        "reranker-hurt": "#e16f24",
        "reranker-misordered": "#d4a72c",
        "candidates-missed": "#b42318",
        "unjudged-top": "#6e40c9",
        "no-relevant": "#8c959f",
    }
)

EXTRA_CSS = """
body{max-width:1240px}table:not(#explore-table){display:block;max-width:100%;overflow-x:auto}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1rem}.pair td{font-size:.8rem}
figure{margin:0}h3{font-size:1rem;margin-top:1.4rem}
#explore-table{font-size:.8rem}#explore-table th[data-key]{cursor:pointer;white-space:nowrap}
#explore-table th[aria-sort=ascending]::after{content:" ▲"}#explore-table th[aria-sort=descending]::after{content:" ▼"}
#explore-table tr.filters th{background:#fafafa}#explore-table tr.selected td{background:#fff8c5}
#explore-table input,#explore-table select{font-size:.75rem;max-width:9rem}
.side-by-side{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:.8rem}
.side-by-side td{font-size:.78rem}td.unjudged{color:#9a6700;font-style:italic}td.relevant{color:#1a7f37;font-weight:600}
td.nonrelevant{color:#666}td.move{white-space:nowrap}mark{background:#fff3a3;padding:0 .1rem}
.explore-wrap{overflow-x:auto;max-height:38rem;overflow-y:auto;border:1px solid #eee}
#explore:not(.ready) .needs-script{display:none}#explore:not(.loading) #explore-loading{display:none}
"""


# ------------------------------------------------------------------ plots
def plot_decomposition(diag: Diagnosis):
    """Per reranked run, the ideal split into reranked + lost in reranking + lost in candidates (means)."""
    plt = pyplot()
    pipes = diag.pipelines
    fig, ax = plt.subplots(figsize=(7.6, 0.75 * len(pipes) + 1.7))
    for i, p in enumerate(pipes):
        m = p.decomposition.means()
        y = len(pipes) - 1 - i
        ax.barh(y, m["reranked"], color="#0969da", label="reranked" if i == 0 else None)
        ax.barh(
            y,
            m["lost_in_reranking"],
            left=m["reranked"],
            color="#d4a72c",
            label="lost in reranking (ceiling − reranked)" if i == 0 else None,
        )
        ax.barh(
            y,
            m["lost_in_candidates"],
            left=m["ceiling"],
            color="#b42318",
            label="lost in candidates (ideal − ceiling)" if i == 0 else None,
        )
        ax.plot([m["first_stage"]] * 2, [y - 0.4, y + 0.4], color="#222", lw=2, label="first stage" if i == 0 else None)
        for x, v in (
            (m["reranked"] / 2, m["reranked"]),
            (m["reranked"] + m["lost_in_reranking"] / 2, m["lost_in_reranking"]),
            (m["ceiling"] + m["lost_in_candidates"] / 2, m["lost_in_candidates"]),
        ):
            if v > 0.04:
                ax.text(x, y, f"{v:.3f}", ha="center", va="center", color="white", fontsize=8)
    ax.set_yticks(
        range(len(pipes)),
        [f"{pt(p.name)}\n(top {p.depth} of {pt(p.first_stage)})" for p in reversed(pipes)],
        fontsize=8,
    )
    ax.set_xlim(0, max(1.0, max(p.decomposition.means()["ideal"] for p in pipes)))
    ax.set_xlabel(f"mean {diag.measure_label}")
    ax.set_title(f"Where {diag.measure_label} is lost")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    return fig


def plot_depth_curve(diag: Diagnosis):
    """The measure when only the top k are reranked, the ceiling at k and the first stage's R@k."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    seen_first = set()
    for i, p in enumerate(diag.pipelines):
        c = p.decomposition.curve
        approx = "" if p.decomposition.curve_exact else " (approx.)"
        ax.plot(
            c["depth"],
            c["reranked"],
            marker="o",
            color=SYSTEM_COLOURS[i % len(SYSTEM_COLOURS)],
            label=f"{pt(p.name)}: reranked top k{approx}",
        )
        if p.first_stage not in seen_first:  # the ceiling and recall belong to the first stage's candidates
            seen_first.add(p.first_stage)
            shade = "#222" if len(seen_first) == 1 else "#8c959f"
            ax.plot(
                c["depth"],
                c["ceiling"],
                marker="^",
                ls="--",
                color=shade,
                label=f"ceiling at k: best order of {pt(p.first_stage)}'s top k",
            )
            ax.plot(
                c["depth"],
                c["recall"],
                marker="s",
                ls=":",
                color=shade,
                label=f"{pt(p.first_stage)}: R@k (-l {diag.settings['recall_level']})",
            )
    ax.set_xscale("log")
    depths = sorted({int(k) for p in diag.pipelines for k in p.decomposition.curve["depth"]})
    ax.set_xticks(depths, [str(k) for k in depths])
    ax.minorticks_off()
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("rerank depth k (the first stage's top k reordered)")
    ax.set_ylabel(diag.measure_label)
    ax.set_title(f"How deep to rerank: {diag.measure_label} against rerank depth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def plot_ceiling_vs_reranked(diag: Diagnosis):
    """Per query of the primary run: ceiling (x) against reranked (y), coloured by label."""
    plt = pyplot()
    t, m = diag.rows(), diag.measure
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    ax.plot([0, 1], [0, 1], color="#999", lw=1, ls="--")
    for label, colour in LABEL_COLOURS.items():
        g = t[t["diagnosis"] == label]
        if len(g):
            ax.scatter(
                g[f"ceiling_{m}"],
                g[f"reranked_{m}"],
                s=28,
                alpha=0.85,
                color=colour,
                label=f"{label} ({len(g)})",
                edgecolors="white",
                linewidths=0.5,
            )
    ax.axvline(diag.thresholds.ok, color="#b42318", lw=0.8, ls=":")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"ceiling: best order of the top {diag.primary.depth} candidates ({diag.measure_label})")
    ax.set_ylabel(f"reranked {diag.measure_label}")
    ax.set_title("Per query: below the diagonal the reranking lost; left of 1 the candidates did")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_stage_scatter(diag: Diagnosis):
    """Per query and reranked run: first stage (x) against reranked (y); above the diagonal it helped."""
    plt = pyplot()
    m = diag.measure
    pipes = diag.pipelines
    fig, axes = plt.subplots(1, len(pipes), figsize=(4.8 * len(pipes) + 0.4, 4.6), squeeze=False)
    for ax, p in zip(axes[0], pipes):
        t = diag.rows(p.name)
        ax.plot([0, 1], [0, 1], color="#999", lw=1, ls="--")
        for label, colour in LABEL_COLOURS.items():
            g = t[t["diagnosis"] == label]
            if len(g):
                ax.scatter(
                    g[f"first_{m}"],
                    g[f"reranked_{m}"],
                    s=24,
                    color=colour,
                    alpha=0.85,
                    label=label,
                    edgecolors="white",
                    linewidths=0.5,
                )
        d = t[f"delta_{m}"]
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel(f"{pt(p.first_stage)} {diag.measure_label}")
        ax.set_ylabel(f"{pt(p.name)} {diag.measure_label}")
        ax.set_title(f"{pt(p.name)}: better on {int((d > 0).sum())}, worse on {int((d < 0).sum())}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def plot_type_boxes(diag: Diagnosis):
    """Box plots per query type of the primary run's reranked measure and ceiling."""
    plt = pyplot()
    table, m = diag.rows(), diag.measure
    types = sorted(table["query_type"].unique().tolist())
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(types) + 2.2), sharey=True)
    for ax, col, title in (
        (axes[0], f"reranked_{m}", f"reranked {diag.measure_label}"),
        (axes[1], f"ceiling_{m}", f"ceiling (top {diag.primary.depth})"),
    ):
        data = [table.loc[table["query_type"] == t, col].to_numpy() for t in types]
        ax.boxplot(
            data, orientation="horizontal", tick_labels=[f"{pt(t)} ({len(d)})" for t, d in zip(types, data)], widths=0.6
        )
        for i, d in enumerate(data, start=1):
            ax.scatter(d, [i] * len(d), s=10, alpha=0.5, color="#0969da", zorder=3)
        ax.set_xlim(-0.03, 1.03)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"Distribution per query type ({pt(diag.primary.name)})")
    fig.tight_layout()
    return fig


def plot_judged_hist(diag: Diagnosis):
    """Histogram of judged@10 of every run."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    bins = np.linspace(0, 1, 12) - 0.05
    bins[-1] = 1.05
    series, names = _judged_by_system(diag)
    ax.hist(
        series,
        bins=bins,
        label=[pt(n) for n in names],
        color=[SYSTEM_COLOURS[i % len(SYSTEM_COLOURS)] if i else "#8c959f" for i in range(len(names))],
    )
    ax.set_xlabel("judged@10 (share of the top 10 with a qrels label)")
    ax.set_ylabel("queries")
    ax.set_title("Judged coverage of the top 10")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def _judged_by_system(diag: Diagnosis) -> tuple[list[np.ndarray], list[str]]:
    series, names = [], []
    for first in diag.first_stages:
        p = next((x for x in diag.pipelines if x.first_stage == first), None)
        if p is not None:
            series.append(diag.rows(p.name)["first_judged_10"].to_numpy())
            names.append(first)
    for p in diag.pipelines:
        series.append(diag.rows(p.name)["reranked_judged_10"].to_numpy())
        names.append(p.name)
    return series, names


#: The report's plots, in page order.
PLOTS = (
    "decomposition",
    "depth_curve",
    "promotion_profile",
    "ceiling_vs_reranked",
    "stage_scatter",
    "query_types",
    "judged_hist",
)


def diagnosis_plots(diag: Diagnosis) -> dict[str, tuple[str, bytes]]:
    """name -> (caption, PNG) for every plot of the report, in ``PLOTS`` order."""
    made = _plots(diag)
    return {name: made[name] for name in PLOTS}


def _plots(diag: Diagnosis) -> dict[str, tuple[str, bytes]]:
    label = diag.measure_label
    return {
        "decomposition": (
            f"Mean {label}: reranked, lost in reranking, lost in candidates (the bar ends at the "
            "ideal); the black tick is the first stage",
            figure_png(plot_decomposition(diag)),
        ),
        "depth_curve": (
            f"{label} when only the first stage's top k are reranked, the ceiling at k, and R@k",
            figure_png(plot_depth_curve(diag)),
        ),
        "promotion_profile": (
            "Per bucket of first-stage ranks: the share of its relevant candidates each reranked run puts in its "
            "top 10 (solid) and the best order puts there (dashed)",
            figure_png(plot_promotion_profile(diag)),
        ),
        "ceiling_vs_reranked": (
            f"Per query: candidate ceiling vs reranked {label}, coloured by diagnosis",
            figure_png(plot_ceiling_vs_reranked(diag)),
        ),
        "stage_scatter": (f"Per query: first stage vs reranked {label}", figure_png(plot_stage_scatter(diag))),
        "query_types": (f"Reranked {label} and ceiling per query type", figure_png(plot_type_boxes(diag))),
        "judged_hist": ("judged@10 of every run", figure_png(plot_judged_hist(diag))),
    }


# ------------------------------------------------------------------ reading
def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "–"


def enough_depth(curve: pd.DataFrame, tolerance: float = 0.01) -> int:
    """The smallest rerank depth whose reranked value is within ``tolerance`` of reranking every candidate."""
    last = float(curve["reranked"].iloc[-1])
    ok = curve[curve["reranked"] >= last - tolerance]
    return int(ok["depth"].iloc[0])


def diagnosis_takeaways(diag: Diagnosis) -> list[str]:
    """Plain-language reading of the decomposition, the depth curve and the labels."""
    p = diag.primary
    m = p.decomposition.means()
    label, depth = diag.measure_label, p.depth
    lost = m["ideal"] - m["reranked"]
    out = [
        f"{label} went from {m['first_stage']:.4f} ({p.first_stage}) to {m['reranked']:.4f} ({p.name}); the best "
        f"order of the top {depth} candidates would give {m['ceiling']:.4f} (the ceiling), the best ranking of "
        f"the judged documents {m['ideal']:.4f}.",
        f"Of the {lost:.4f} lost to the ideal, {m['lost_in_candidates']:.4f} ({_share(m['lost_in_candidates'], lost)}) "
        f"is lost in the candidates (no reranker of them can win it back) and {m['lost_in_reranking']:.4f} "
        f"({_share(m['lost_in_reranking'], lost)}) in the reranking (a better order of the same candidates "
        "would win it).",
    ]
    curve = p.decomposition.curve
    if len(curve) > 1:
        approx = "" if p.decomposition.curve_exact else " (approximately: see the notes)"
        steps = ", ".join(f"top {int(r.depth)}: {r.reranked:.4f}" for r in curve.itertuples(index=False))
        best = curve.loc[curve["reranked"].idxmax()]
        last = float(curve["reranked"].iloc[-1])
        if int(best["depth"]) < depth and float(best["reranked"]) > last + 0.005:
            advice = (
                f"reranking deeper than {int(best['depth'])} hurts: the top {int(best['depth'])} give "
                f"{float(best['reranked']):.4f}, all {depth} {last:.4f}"
            )
        else:
            advice = f"the smallest depth within 0.01 of reranking all {depth} is {enough_depth(curve)}"
        out.append(
            f"Reranking only the top k{approx}: {steps}; {advice}. The ceiling rises from "
            f"{float(curve['ceiling'].iloc[0]):.4f} at {int(curve['depth'].iloc[0])} to {m['ceiling']:.4f} "
            f"at {depth}."
        )
    head = {r["key"]: r for r in diag.headline}
    r1 = head[f"recall_{depth}"]["first_stage"]
    out.append(
        f"R@{depth} is {r1:.4f}: on average {1 - r1:.1%} of a query's relevant documents (level "
        f"{diag.settings['recall_level']}) are not among the candidates, yet R@{depth} is not the ceiling of "
        f"{label}: the candidates hold enough to reach {m['ceiling']:.4f}, because the top ranks need only "
        "a few of the relevant documents."
    )
    j1, j2 = head["judged_10"]["first_stage"], head["judged_10"]["reranked"]
    if j2 < j1:
        out.append(
            f"judged@10 fell from {j1:.4f} to {j2:.4f}: the reranked top 10 holds more unjudged documents, "
            f"which count as non-relevant, so its {label} is a lower bound."
        )
    c = diag.label_counts
    out.append(
        f"Of {len(diag.rows())} queries ({p.name}): " + ", ".join(f"{c[k]} {k}" for k in LABELS if c.get(k)) + "."
    )
    best = max(diag.pipelines, key=lambda x: x.decomposition.means()["reranked"])
    if len(diag.pipelines) > 1:
        out.append(
            f"Best reranked run by mean {label}: {best.name} ({best.decomposition.means()['reranked']:.4f}); "
            "the significance of each difference is in the tables below."
        )
    return out


# ------------------------------------------------------------------ tables
def headline_rows(diag: Diagnosis) -> list[list[object]]:
    return [
        [
            r["measure"],
            fmt(r["first_stage"]),
            fmt(r["reranked"]),
            "" if r["key"] == "num_q" else signed(None if r["reranked"] is None else r["reranked"] - r["first_stage"]),
        ]
        for r in diag.headline
    ]


def decomposition_table(diag: Diagnosis) -> Table:
    rows = []
    for p in diag.pipelines:
        m = p.decomposition.means()
        lost = m["ideal"] - m["reranked"]
        rows.append(
            [
                p.name,
                p.first_stage,
                p.depth,
                m["first_stage"],
                m["ceiling"],
                m["reranked"],
                m["ideal"],
                m["lost_in_candidates"],
                m["lost_in_reranking"],
                _share(m["lost_in_reranking"], lost),
            ]
        )
    label = diag.measure_label
    return Table(
        [
            "reranked run",
            "first stage",
            "depth N",
            f"first stage {label}",
            "ceiling (best order of top N)",
            f"reranked {label}",
            "ideal",
            "lost in candidates",
            "lost in reranking",
            "share lost in reranking",
        ],
        rows,
        numeric=set(range(2, 10)),
        table_id="decomposition",
    )


def depth_curve_table(diag: Diagnosis) -> Table:
    depths = sorted({int(k) for p in diag.pipelines for k in p.decomposition.curve["depth"]})
    headers, cols = ["depth k"], []
    for p in diag.pipelines:
        headers.append(f"{p.name}: reranked top k")
        cols.append(p.decomposition.curve.set_index("depth")["reranked"])
    # the ceiling and R@k belong to a first stage's candidates (the deepest curve of its reranked runs)
    for f in dict.fromkeys(p.first_stage for p in diag.pipelines):
        p = max((x for x in diag.pipelines if x.first_stage == f), key=lambda x: x.depth)
        c = p.decomposition.curve.set_index("depth")
        headers += [f"{f}: ceiling at k", f"{f}: R@k (-l {diag.settings['recall_level']})"]
        cols += [c["ceiling"], c["recall"]]
    rows = [[k, *(float(c[k]) if k in c.index else None for c in cols)] for k in depths]
    return Table(headers, rows, numeric=set(range(len(headers))), table_id="depth-curve")


def systems_table(diag: Diagnosis) -> Table:
    label = diag.measure_label
    rows = []
    for s in diag.systems:
        mean = s["means"][diag.measure]
        if s["role"] == "first stage":
            rows.append(
                [
                    s["name"],
                    "first stage",
                    mean,
                    None,
                    None,
                    None,
                    "",
                    "",
                    "",
                    "",
                    "",
                    None,
                    None,
                    s["means"]["judged_10"],
                ]
            )
            continue
        d, a = s["decomposition"], s["against_first_stage"]
        rows.append(
            [
                s["name"],
                f"top {s['depth']} of {s['first_stage']}" + (" (listwise)" if s["listwise"] else ""),
                mean,
                d["ceiling"],
                d["lost_in_candidates"],
                d["lost_in_reranking"],
                signed(a.get("delta")),
                p_value(a.get("p_ttest")),
                p_value(a.get("p_permutation")),
                p_value(a.get("p_adjusted")),
                wtl(a) if "wins" in a else "",
                a.get("rbo"),
                a.get("kendall_tau_10"),
                s["means"]["judged_10"],
            ]
        )
    return Table(
        [
            "system",
            "reranks",
            label,
            "ceiling",
            "lost in candidates",
            "lost in reranking",
            "Δ vs first stage",
            "p (t-test)",
            "p (randomization)",
            "p adjusted",
            "W/T/L",
            "RBO vs first stage",
            "τ@10 vs first stage",
            "judged@10",
        ],
        rows,
        numeric={2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13},
        table_id="systems",
    )


def pairwise_table(diag: Diagnosis, family: str) -> Table:
    rows = [
        [c["baseline"], c["run"], *significance_cells(c), c["rbo"], c["kendall_tau_10"]]
        for c in diag.comparisons
        if c["family"] == family
    ]
    return Table(
        [
            "A",
            "B",
            "mean B",
            "Δ (B − A)",
            "p (t-test)",
            "p (randomization)",
            "p adjusted",
            "W/T/L (B vs A)",
            "RBO",
            "τ@10",
        ],
        rows,
        numeric={2, 3, 4, 5, 6, 8, 9},
        table_id="pairs-" + family.replace(" ", "-"),
    )


def disagreement_tables(diag: Diagnosis) -> list[tuple[str, Table]]:
    out = []
    m = diag.measure
    text = dict(zip(diag.rows()["query_id"], diag.rows()["query"]))
    for d in diag.disagreements:
        a, b = d["system_a"], d["system_b"]
        rows = [
            [
                q["query_id"],
                text.get(q["query_id"], ""),
                q[f"{m}_a"],
                q[f"{m}_b"],
                signed(q["delta"]),
                q["rbo"],
                q["kendall_tau_10"],
            ]
            for q in d["queries"]
        ]
        out.append((f"{a} vs {b}", Table(["query", "text", a, b, "Δ", "RBO", "τ@10"], rows, numeric={2, 3, 4, 5, 6})))
    return out


def most_changed_tables(diag: Diagnosis) -> list[tuple[str, Table]]:
    out = []
    for p in diag.pipelines:
        rows = [
            [
                q["query_id"],
                q["query"],
                q["diagnosis"],
                q["rbo"],
                q["kendall_tau_10"],
                q["first_stage"],
                q["reranked"],
                signed(q["reranked"] - q["first_stage"]),
            ]
            for q in diag.most_changed[p.name]
        ]
        out.append(
            (
                p.name,
                Table(
                    ["query", "text", "diagnosis", "RBO", "τ@10", p.first_stage, p.name, "Δ"],
                    rows,
                    numeric={3, 4, 5, 6, 7},
                ),
            )
        )
    return out


def delta_tables(diag: Diagnosis) -> list[tuple[str, Table]]:
    """Per reranked run, the queries it hurt most and helped most (by reranked - first stage)."""
    out = []
    for p in diag.pipelines:
        for what, items in (("hurt most", diag.hurt_most[p.name]), ("helped most", diag.helped_most[p.name])):
            rows = [
                [
                    q["query_id"],
                    q["query"],
                    q["query_type"],
                    q["diagnosis"],
                    q["first_stage"],
                    q["reranked"],
                    signed(q["delta"]),
                    q["ceiling"],
                    q["rbo"],
                ]
                for q in items
            ]
            headers = ["query", "text", "type", "diagnosis", p.first_stage, p.name, "Δ", "ceiling", "RBO"]
            out.append((f"{p.name}: {what}", Table(headers, rows, numeric={4, 5, 6, 7, 8})))
    return out


def labels_table(diag: Diagnosis) -> Table:
    rules = diag.thresholds.describe(diag.measure_label)
    names = [p.name for p in diag.pipelines]
    rows = [[lab, *(p.label_counts[lab] for p in diag.pipelines), LABEL_MEANING[lab], rules[lab]] for lab in LABELS]
    return Table(["label", *names, "meaning", "rule"], rows, numeric=set(range(1, len(names) + 1)), table_id="labels")


def types_table(diag: Diagnosis) -> Table | None:
    tt = diag.types
    if not len(tt):
        return None
    names = [p.name for p in diag.pipelines]
    headers = [
        "type",
        "queries",
        "reading",
        f"mean {diag.measure_label}",
        "median",
        f"mean {diag.primary.first_stage}",
        "mean ceiling",
        "lost in candidates",
        "lost in reranking",
        *(f"mean {n}" for n in names[1:]),
        *LABELS,
    ]
    rows = [
        [
            r["query_type"],
            r["queries"],
            f"too few queries (< {MIN_TYPE_QUERIES}) to read anything into" if r["too_small"] else "",
            r["mean"],
            r["median"],
            r["mean_first_stage"],
            r["mean_ceiling"],
            r["mean_lost_in_candidates"],
            r["mean_lost_in_reranking"],
            *(r[f"mean:{n}"] for n in names[1:]),
            *(r[lab] for lab in LABELS),
        ]
        for r in tt.to_dict(orient="records")
    ]
    return Table(headers, rows, numeric={1} | set(range(3, len(headers))), table_id="types")


def _reorder_text(diag: Diagnosis) -> list[tuple[str, str]]:
    """(css class, sentence) per reranked run."""
    out = []
    for p in diag.pipelines:
        chk = p.reorder_check
        tail = chk.get("tail_documents", 0)
        tail_text = (
            f" Below rank {p.depth} it repeats {p.first_stage}'s own order ({tail} documents in "
            f"{chk.get('queries_with_tail', 0)} queries): the first stage's tail, not reranked and not introduced."
            if tail
            else ""
        )
        if chk["only_reorders"]:
            out.append(
                (
                    "ok",
                    f"Reorder check passed for {p.name}: every document is among {p.first_stage}'s top-"
                    f"{p.depth} candidates of its query or its tail ({chk['candidates_kept']} of "
                    f"{chk['candidates_total']} candidates kept).{tail_text}",
                )
            )
        else:
            ex = ", ".join(f"{e['query_id']}:{e['doc_id']}" for e in chk["examples"][:5])
            out.append(
                (
                    "bad",
                    f"Reorder check FAILED for {p.name}: it introduced {chk['introduced_documents']} "
                    f"documents in {chk['queries_with_introduced_documents']} queries that "
                    f"{p.first_stage}'s top-{p.depth} does not hold and that do not repeat its order below "
                    f"rank {p.depth} ({chk.get('outside_first_stage', 0)} not in {p.first_stage} at all; e.g. "
                    f"{ex}).{tail_text}",
                )
            )
    return out


# ------------------------------------------------------------------ pages
def _top_cell(item: dict) -> tuple[str, str]:
    g = item.get("grade")
    return ("unjudged", "warn") if g is None else (str(g), "ok" if g > 0 else "muted")


def _muted(text_html: str) -> Part:
    return Part.html_only(f'<p class="muted">{text_html}</p>')


def _title(diag: Diagnosis) -> list[Part]:
    sources = diag.settings.get("sources", {})
    return [
        Part(f"<h1>Two-stage diagnosis: {esc(diag.name)}</h1>", (f"# Two-stage diagnosis: {md(diag.name)}\n",)),
        Part(
            '<p class="muted">'
            + "<br>".join(f"{esc(k)}: <code>{esc(v)}</code>" for k, v in sources.items() if v)
            + "</p>",
            (*(f"- {md(k)}: {markdown_code(v)}" for k, v in sources.items() if v), ""),
        ),
        *(Part(f'<p class="warn">Note: {esc(n)}</p>', (f"> Note: {md(n)}\n",)) for n in map(for_api, diag.notes)),
    ]


def _headline(diag: Diagnosis) -> list[Part]:
    s, p = diag.settings, diag.primary
    rows = "".join(
        f'<tr><td>{esc(r["measure"])}</td><td class="num" id="h-{esc(r["key"])}-first">{fmt(r["first_stage"])}</td>'
        f'<td class="num" id="h-{esc(r["key"])}-reranked">{fmt(r["reranked"])}</td><td class="num">{cells[3]}</td>'
        "</tr>"
        for r, cells in zip(diag.headline, headline_rows(diag))
    )
    headers = ["measure", f"first stage ({p.first_stage})", f"reranked ({p.name})", "Δ"]
    takeaways = diagnosis_takeaways(diag)
    return [
        Part(
            f'<table id="headline"><thead><tr><th>measure</th><th>first stage ({esc(p.first_stage)})</th>'
            f"<th>reranked ({esc(p.name)})</th><th>Δ</th></tr></thead><tbody>{rows}</tbody></table>",
            (markdown_table(headers, headline_rows(diag)),),
        ),
        Part(
            '<p class="muted">nDCG@10 and judged@10 at relevance level 1 (nDCG: linear gains of all grades '
            f"unless --gain says otherwise); R@N at relevance level {s['recall_level']} (trec_eval -l "
            f"{s['recall_level']}); query set: {esc(s['query_set'])}. Full provenance at the end.</p>",
            (
                f"nDCG@10 and judged@10 at relevance level 1; R@N at level {s['recall_level']} "
                f"(trec_eval -l {s['recall_level']}); query set: {md(s['query_set'])}.\n",
            ),
        ),
        Part(
            '<ul id="takeaways">' + "".join(f"<li>{esc(t)}</li>" for t in takeaways) + "</ul>",
            (*(f"- {md(t)}" for t in takeaways), ""),
        ),
    ]


def _loss(diag: Diagnosis) -> list[Part]:
    label = esc(diag.measure_label)
    return [
        Part.table(decomposition_table(diag)),
        _muted(
            f"ideal: {label} of the best ranking of every judged document (1 for nDCG "
            "when the query has a relevant document). ceiling: of the best order of the first stage's top N "
            "(judged grades, unjudged as 0). lost in candidates = ideal − ceiling; lost in reranking = ceiling − "
            "reranked; they add up to ideal − reranked, per query and in the mean."
        ),
        Part.plot("decomposition"),
    ]


def _depth(diag: Diagnosis) -> list[Part]:
    exact = all(x.decomposition.curve_exact for x in diag.pipelines)
    return [
        Part.table(depth_curve_table(diag)),
        _muted(
            "Reranked top k: the first stage's top k in the reranked run's order, the rest "
            "below in first-stage order (from the two runs alone; no model is run again). "
            + (
                "Exact for pointwise rerankers (each candidate scored on its own)."
                if exact
                else "An approximation for a listwise reranker or a run that does not hold exactly the candidates "
                "(see the notes)."
            )
            + " Ceiling at k: the top k in the best order."
        ),
        Part.plot("depth_curve", "depth curve"),
    ]


def _systems(diag: Diagnosis) -> list[Part]:
    t = diag.settings["significance"]
    parts = [
        Part.table(systems_table(diag)),
        _muted(
            f"{esc(diag.measure_label)} means over {len(diag.rows())} queries. Against the first stage: "
            f"paired t-test and paired randomization test ({t['permutations']} sign flips, seed {t['seed']}), "
            f"{esc(t['correction'])} correction over the reranked runs of the same first stage (as "
            "<code>twostage compare FIRST R1 R2 ...</code>). W/T/L: queries better / equal / worse than the "
            "first stage. RBO: rank-biased overlap (p = 0.9, extrapolated; Webber, Moffat &amp; Zobel 2010); "
            "τ@10: Kendall's tau-b over the two top-10 lists (Fagin, Kumar &amp; Sivakumar 2003)."
        ),
    ]
    for family in FAMILIES[1:]:
        if any(c["family"] == family for c in diag.comparisons):
            parts += [
                Part.heading(family[0].upper() + family[1:], 3),
                Part.table(pairwise_table(diag, family)),
                _muted(f"Each pair tested as above; {esc(t['correction'])} correction over all pairs."),
            ]
    return parts


def _titled_tables(tables: list[tuple[str, Table]]) -> list[Part]:
    return [part for title, table in tables for part in (Part.heading(title, 3), Part.table(table))]


def _labels(diag: Diagnosis) -> list[Part]:
    order = ", ".join(DECISION_ORDER)
    parts = [
        Part.table(labels_table(diag)),
        _muted(
            f"Decided in the order {order}, from each query's decomposition and its first-stage value. "
            "Thresholds are options of <code>twostage diagnose</code>."
        ),
    ]
    return parts + [
        Part(f'<p class="{cls}" id="reorder-check-{esc(cls)}">{esc(text)}</p>', (f"{md(text)}\n",))
        for cls, text in _reorder_text(diag)
    ]


def _worst_entry_html(w: dict, depth: int, of: str = "", shown: str | None = None) -> str:
    left = "".join(
        f'<tr><td class="num">{i["rank"]}</td><td>{esc(i["doc_id"])}</td>'
        f'<td class="{_top_cell(i)[1]}">{esc(_top_cell(i)[0])}</td><td>{esc(i.get("snippet") or "")}</td></tr>'
        for i in w["top_10"]
    )
    right = "".join(
        f'<tr><td>{esc(i["doc_id"])}</td><td class="num">{i["grade"]}</td><td>{esc(i["where"])}</td>'
        f"<td>{esc(i.get('snippet') or '')}</td></tr>"
        for i in w["best_missed"]
    ) or ('<tr><td colspan="4" class="muted">no relevant judged document outside the top 10</td></tr>')
    return (
        f'<h3><a href="#q={esc(w["query_id"])}">{esc(w["query_id"])}</a>: {esc(w["query"] or "(no query text)")}'
        f'</h3><p class="muted">type {esc(w["query_type"])} · diagnosis <b>{esc(w["diagnosis"])}</b> · '
        f"reranked {w['reranked']:.4f}{esc(of)} (first stage {w['first_stage']:.4f}, ceiling {w['ceiling']:.4f}: lost "
        f"{w['lost_in_candidates']:.4f} in candidates, {w['lost_in_reranking']:.4f} in reranking) · first-stage "
        f"R@{depth} {w['first_recall']:.4f} · judged@10 {w['reranked_judged_10']:.2f}</p>"
        f'<div class="pair"><div><b>Reranked top 10{esc(f" ({shown})" if shown else "")}</b><table><thead><tr>'
        "<th>#</th><th>doc</th><th>grade</th>"
        f"<th>text</th></tr></thead><tbody>{left}</tbody></table></div><div><b>Best judged documents it missed</b>"
        "<table><thead><tr><th>doc</th><th>grade</th><th>where</th><th>text</th></tr></thead>"
        f"<tbody>{right}</tbody></table></div></div>"
    )


def _worst_entry_markdown(w: dict, depth: int, of: str = "", shown: str | None = None) -> list[str]:
    out = [
        f"### {md(w['query_id'])}: {md(w['query'] or '(no query text)')}\n",
        f"type {md(w['query_type'])}, diagnosis **{md(w['diagnosis'])}**, reranked {w['reranked']:.4f}{md(of)} "
        f"(first stage {w['first_stage']:.4f}, ceiling {w['ceiling']:.4f}), first-stage R@{depth} "
        f"{w['first_recall']:.4f}\n",
        *([f"Reranked top 10: {md(shown)}\n"] if shown else []),
        markdown_table(
            ["#", "doc", "grade", "text"],
            [[i["rank"], i["doc_id"], _top_cell(i)[0], (i.get("snippet") or "")[:120]] for i in w["top_10"]],
        ),
    ]
    if w["best_missed"]:
        out += [
            "Best judged documents it missed:\n",
            markdown_table(
                ["doc", "grade", "where", "text"],
                [[i["doc_id"], i["grade"], i["where"], (i.get("snippet") or "")[:120]] for i in w["best_missed"]],
            ),
        ]
    return out


def _worst(diag: Diagnosis) -> list[Part]:
    p = diag.primary
    depth, of, shown = p.depth, values_of(p), repeat_shown(p)
    return [
        Part(_worst_entry_html(w, depth, of, shown), tuple(_worst_entry_markdown(w, depth, of, shown)))
        for w in diag.worst
    ]


def _types(diag: Diagnosis) -> list[Part]:
    s = diag.settings
    rules = s.get("type_rules") or []

    def meaning(r: dict, html: bool) -> str:
        text = r.get("meaning") or ""
        return (f" ({esc(text)})" if html else f": {md(text)}") if text else ""

    listed = (
        " Rules (first match on the lower-cased query wins; no match is 'other'): "
        + "; ".join(f"<b>{esc(r['type'])}</b>{meaning(r, True)} <code>{esc(r['pattern'])}</code>" for r in rules)
        if rules
        else ""
    )
    parts = [_muted(f"Source: {esc(s['query_types'])}.{listed}")]
    if rules:
        parts.append(Part.markdown_only(*(f"- **{md(r['type'])}**{meaning(r, False)}" for r in rules), ""))
    tt = types_table(diag)
    return parts + ([Part.table(tt)] if tt is not None else [])


def _other_plots(diag: Diagnosis) -> list[Part]:
    return [Part.plot(name) for name in PLOTS if name not in ("decomposition", "depth_curve", "promotion_profile")]


def _provenance(diag: Diagnosis) -> list[Part]:
    prov = {
        "settings": diag.settings,
        "thresholds": diag.thresholds.describe(diag.measure_label),
        "evaluation": diag.provenance,
    }
    # An indented code block, not a fence: every Markdown renderer (markdown2 and Markdown.pl have no fences
    # by default) keeps its text literal, so a run name in the JSON never becomes markup.
    block = "\n".join("    " + line for line in json.dumps(prov, indent=2, default=str).splitlines())
    return [Part(provenance_html(prov), (block + "\n",))]


#: The sections of the diagnosis report, in page order; HTML and Markdown are both rendered from this list.
SECTIONS: tuple[Section, ...] = (
    Section(lambda d: None, ("name", "settings", "notes"), _title),
    Section(lambda d: "Headline", ("headline", "pipelines"), lambda d: [*_headline(d), *depth_parts(d)]),
    Section(lambda d: f"Where the loss is: {d.measure_label}", ("pipelines",), _loss),
    Section(
        lambda d: "Hurt most and helped most by the reranker (reranked − first stage)",
        ("hurt_most", "helped_most"),
        lambda d: _titled_tables(delta_tables(d)),
    ),
    Section(lambda d: "How deep to rerank", ("pipelines",), _depth),
    Section(lambda d: "Repeated runs", ("pipelines", "comparisons"), repeats_parts, shown=has_repeats),
    Section(lambda d: "How the reranker treats its candidates", ("pipelines",), behaviour_parts),
    Section(lambda d: "Systems", ("systems", "comparisons"), _systems),
    Section(lambda d: "How far to trust each comparison", ("comparisons", "settings"), trust_parts, shown=has_verdicts),
    Section(lambda d: "Labels from a judge", ("settings",), judge_parts, shown=has_judge_labels),
    Section(
        lambda d: "Where the reranked runs disagree most",
        ("disagreements",),
        lambda d: _titled_tables(disagreement_tables(d)),
        shown=lambda d: bool(d.disagreements),
    ),
    Section(lambda d: "Diagnosis labels", ("pipelines", "thresholds"), _labels),
    Section(
        lambda d: None, ("per_query", "views", "missed"), lambda d: [Part.html_only(explore_html(d))], html_only=True
    ),
    Section(
        lambda d: "Most changed queries (lowest RBO with the first stage)",
        ("most_changed",),
        lambda d: _titled_tables(most_changed_tables(d)),
    ),
    Section(lambda d: f"Worst {len(d.worst)} queries ({d.primary.name}, lowest {d.measure_label})", ("worst",), _worst),
    Section(lambda d: "Query types", ("types", "settings"), _types),
    Section(lambda d: "Plots", (), _other_plots),
    Section(lambda d: "Provenance", ("settings", "thresholds", "provenance"), _provenance),
)


def diagnosis_html(diag: Diagnosis, plots: dict[str, tuple[str, bytes]]) -> str:
    body = render_html(SECTIONS, diag, Plots(png=plots))
    return html_page(f"Two-stage diagnosis: {diag.name}", body, extra_css=EXTRA_CSS, script=explore_script())


def diagnosis_markdown(diag: Diagnosis, plot_files: dict[str, str]) -> str:
    return render_markdown(SECTIONS, diag, Plots(files=plot_files))


def write_diagnosis_report(diag: Diagnosis, out_dir) -> dict[str, str]:
    """Write index.html, report.md (+ plots/*.png), per_query.csv, pairs.csv and summary.json: into a temporary
    folder beside ``out_dir`` that replaces it in one rename (``toolkit.guard.writer``: the set is whole or absent)."""
    from toolkit.guard.writer import result_folder

    names = ("index.html", "report.md", "per_query.csv", "pairs.csv", "summary.json")
    with result_folder(out_dir, "diagnosis", (*names, "plots")) as tmp:
        _write_report_files(diag, tmp)
    return {name: str(Path(out_dir) / name) for name in names}


@without_gc  # the report makes many short-lived containers; none of it needs the scans of a large heap
def _write_report_files(diag: Diagnosis, out: Path) -> None:
    from toolkit.data.trec_io import atomic_write, write_json

    plots = diagnosis_plots(diag)
    plot_files = {}
    for name, (_, png) in plots.items():
        rel = f"plots/{name}.png"
        with atomic_write(out / rel, "wb") as fh:
            fh.write(png)
        plot_files[name] = rel
    paths = {name: out / name for name in ("index.html", "report.md", "per_query.csv", "pairs.csv", "summary.json")}
    with atomic_write(paths["index.html"]) as fh:
        fh.write(diagnosis_html(diag, plots))
    with atomic_write(paths["report.md"]) as fh:
        fh.write(diagnosis_markdown(diag, plot_files))
    for name, frame in (("per_query.csv", diag.per_query), ("pairs.csv", diag.pairs)):
        with atomic_write(paths[name]) as fh:
            fh.write(csv_table(frame))
    write_json(paths["summary.json"], diag.summary())
