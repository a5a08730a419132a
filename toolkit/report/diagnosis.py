"""The two-stage diagnosis report: index.html (self-contained), report.md with plots/*.png, per_query.csv and
summary.json, all read from a ``diagnose.Diagnosis``."""

from __future__ import annotations

import json

from .html import esc, figure_png, html_page, html_table, markdown_table, png_data_uri, provenance_html
from .html import pyplot as _pyplot


# ------------------------------------------------------------ diagnosis report
#: Colours of the diagnosis labels in every plot and table.
LABEL_COLOURS = {
    "ok": "#1a7f37",
    "reranker-misordered": "#d4a72c",
    "candidates-missed": "#b42318",
    "unjudged-top": "#6e40c9",
    "no-relevant": "#8c959f",
}


def plot_recall_vs_ndcg(table, depth: int = 100):
    """Per query: first-stage R@depth (x) against reranked nDCG@10 (y), coloured by diagnosis."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for label, colour in LABEL_COLOURS.items():
        g = table[table["diagnosis"] == label]
        if len(g):
            ax.scatter(g[f"first_recall_{depth}"], g["reranked_ndcg_10"], s=28, alpha=0.85, color=colour,
                       label=f"{label} ({len(g)})", edgecolors="white", linewidths=0.5)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"first-stage R@{depth} (ceiling for any reranker of these candidates)")
    ax.set_ylabel("reranked nDCG@10")
    ax.set_title("Per query: candidate recall vs. top-10 quality")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_type_boxes(table, depth: int = 100):
    """Box plots per query type of reranked nDCG@10 and first-stage R@depth."""
    plt = _pyplot()
    types = sorted(table["query_type"].unique().tolist())
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(types) + 2.2), sharey=True)
    for ax, col, title in ((axes[0], "reranked_ndcg_10", "reranked nDCG@10"),
                           (axes[1], f"first_recall_{depth}", f"first-stage R@{depth}")):
        data = [table.loc[table["query_type"] == t, col].to_numpy() for t in types]
        ax.boxplot(data, orientation="horizontal", tick_labels=[f"{t} ({len(d)})" for t, d in zip(types, data)], widths=0.6)
        for i, d in enumerate(data, start=1):
            ax.scatter(d, [i] * len(d), s=10, alpha=0.5, color="#0969da", zorder=3)
        ax.set_xlim(-0.03, 1.03)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Distribution per query type")
    fig.tight_layout()
    return fig


def plot_judged_hist(table):
    """Histogram of judged@10 for both stages."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    bins = np.linspace(0, 1, 12) - 0.05
    bins[-1] = 1.05
    ax.hist([table["first_judged_10"], table["reranked_judged_10"]], bins=bins, label=["first stage", "reranked"],
            color=["#8c959f", "#0969da"])
    ax.set_xlabel("judged@10 (share of the top 10 with a qrels label)")
    ax.set_ylabel("queries")
    ax.set_title("Judged coverage of the top 10")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_stage_ndcg(table):
    """Per query: first-stage nDCG@10 (x) vs reranked nDCG@10 (y); above the diagonal the reranker helped."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5.0))
    ax.plot([0, 1], [0, 1], color="#999", lw=1, ls="--")
    for label, colour in LABEL_COLOURS.items():
        g = table[table["diagnosis"] == label]
        if len(g):
            ax.scatter(g["first_ndcg_10"], g["reranked_ndcg_10"], s=26, color=colour, alpha=0.85, label=label,
                       edgecolors="white", linewidths=0.5)
    better = int((table["delta_ndcg_10"] > 0).sum())
    worse = int((table["delta_ndcg_10"] < 0).sum())
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("first-stage nDCG@10")
    ax.set_ylabel("reranked nDCG@10")
    ax.set_title(f"Per query: reranker better on {better}, worse on {worse}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def diagnosis_plots(diag) -> dict[str, tuple[str, bytes]]:
    """name -> (caption, PNG) for the four diagnosis plots."""
    depth = diag.settings["candidate_depth"]
    t = diag.per_query
    return {
        "recall_vs_ndcg": (f"First-stage R@{depth} vs reranked nDCG@10 per query, coloured by diagnosis",
                           figure_png(plot_recall_vs_ndcg(t, depth))),
        "query_types": ("Reranked nDCG@10 and first-stage recall per query type", figure_png(plot_type_boxes(t, depth))),
        "judged_hist": ("judged@10 of both stages", figure_png(plot_judged_hist(t))),
        "stage_ndcg": ("First-stage vs reranked nDCG@10 per query", figure_png(plot_stage_ndcg(t))),
    }


def _fmt(v, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int,)) or (isinstance(v, float) and v.is_integer() and abs(v) > 1):
        return str(int(v))
    return f"{float(v):.{digits}f}"


def _delta(a, b) -> str:
    if a is None or b is None:
        return ""
    d = float(b) - float(a)
    return f"{d:+.4f}"


def diagnosis_takeaways(diag) -> list[str]:
    """Plain-language reading of the headline numbers."""
    h = {r["key"]: r for r in diag.headline}
    depth = diag.settings["candidate_depth"]
    rk = f"recall_{depth}"
    n1, n2 = h["ndcg_cut_10"]["first_stage"], h["ndcg_cut_10"]["reranked"]
    r1, r2 = h[rk]["first_stage"], h[rk]["reranked"]
    j1, j2 = h["judged_10"]["first_stage"], h["judged_10"]["reranked"]
    out = []
    if diag.reorder_check["only_reorders"] and abs(r1 - r2) < 1e-12:
        out.append(f"nDCG@10 went from {n1:.4f} to {n2:.4f} while R@{depth} stayed at {r1:.4f}: the reranker only "
                   f"reordered the same candidates, so R@{depth} is the ceiling on what it can find.")
    else:
        out.append(f"nDCG@10 went from {n1:.4f} to {n2:.4f}; R@{depth} went from {r1:.4f} to {r2:.4f}.")
    out.append(f"On average {1 - r1:.1%} of a query's relevant documents (level {diag.settings['recall_level']}) are "
               f"not among the first stage's top {depth}: no reranker of these candidates can reach them.")
    if j2 < j1:
        out.append(f"judged@10 fell from {j1:.4f} to {j2:.4f}: the reranked top 10 holds more unjudged documents, "
                   "which count as non-relevant, so its nDCG@10 is a lower bound.")
    c = diag.label_counts
    parts = [f"{c[k]} {k}" for k in ("ok", "reranker-misordered", "candidates-missed", "unjudged-top", "no-relevant")
             if c.get(k)]
    out.append(f"Of {len(diag.per_query)} queries: " + ", ".join(parts) + ".")
    return out


def _top_cell(item: dict) -> tuple[str, str]:
    g = item.get("grade")
    grade = "unjudged" if g is None else str(g)
    cls = "warn" if g is None else ("ok" if g > 0 else "muted")
    return grade, cls


def diagnosis_html(diag, plots: dict[str, tuple[str, bytes]]) -> str:
    s = diag.settings
    depth = s["candidate_depth"]
    src = s.get("sources", {})
    parts = [f"<h1>Two-stage diagnosis: {esc(diag.name)}</h1>"]
    parts.append("<p class=\"muted\">" + "<br>".join(
        f"{esc(k)}: <code>{esc(v)}</code>" for k, v in src.items() if v) + "</p>")
    for note in diag.notes:
        parts.append(f"<p class=\"warn\">Note: {esc(note)}</p>")
    # headline
    parts.append("<h2>Headline</h2>")
    rows = []
    for r in diag.headline:
        key = r["key"]
        rows.append(
            f"<tr><td>{esc(r['measure'])}</td>"
            f"<td class=\"num\" id=\"h-{esc(key)}-first\">{_fmt(r['first_stage'])}</td>"
            f"<td class=\"num\" id=\"h-{esc(key)}-reranked\">{_fmt(r['reranked'])}</td>"
            f"<td class=\"num\">{'' if key == 'num_q' else _delta(r['first_stage'], r['reranked'])}</td></tr>"
        )
    parts.append("<table id=\"headline\"><thead><tr><th>measure</th><th>first stage</th><th>reranked</th><th>Δ</th>"
                 "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    parts.append("<p class=\"muted\">nDCG@10 and judged@10 at relevance level 1 (nDCG: linear gains of all grades); "
                 f"R@{depth} at relevance level {s['recall_level']} (trec_eval -l {s['recall_level']}); "
                 f"query set: {esc(s['query_set'])}. Full provenance at the end.</p>")
    parts.append("<ul>" + "".join(f"<li>{esc(t)}</li>" for t in diagnosis_takeaways(diag)) + "</ul>")
    # labels
    parts.append("<h2>Diagnosis</h2>")
    rules = diag.thresholds.describe()
    parts.append(html_table(
        ["label", "queries", "meaning", "rule"],
        [[f"{lab}", diag.label_counts[lab], _label_meaning(lab), rules[lab]] for lab in _labels()],
        numeric={1},
    ))
    parts.append("<p class=\"muted\">Labels are decided in the order no-relevant, ok, unjudged-top, candidates-missed, "
                 "reranker-misordered. Thresholds are options of <code>twostage diagnose</code>.</p>")
    chk = diag.reorder_check
    if chk["only_reorders"]:
        parts.append(f"<p class=\"ok\" id=\"reorder-check\">Reorder check passed: every reranked document is among the "
                     f"first stage's top-{depth} candidates of its query ({chk['candidates_kept']} of "
                     f"{chk['candidates_total']} candidates kept).</p>")
    else:
        ex = ", ".join(f"{e['query_id']}:{e['doc_id']}" for e in chk["examples"])
        parts.append(f"<p class=\"bad\" id=\"reorder-check\">Reorder check FAILED: the reranked run introduced "
                     f"{chk['introduced_documents']} documents in {chk['queries_with_introduced_documents']} queries "
                     f"that the first stage's top-{depth} does not hold (e.g. {esc(ex)}).</p>")
    if chk["queries_only_in_reranked"] or chk["queries_only_in_first_stage"]:
        parts.append(f"<p class=\"warn\">Queries only in the reranked run: {esc(chk['queries_only_in_reranked'][:20])}; "
                     f"only in the first stage: {esc(chk['queries_only_in_first_stage'][:20])}.</p>")
    # plots
    parts.append("<h2>Plots</h2>")
    for name, (caption, png) in plots.items():
        parts.append(f"<figure><img class=\"plot\" id=\"plot-{esc(name)}\" alt=\"{esc(caption)}\" "
                     f"src=\"{png_data_uri(png)}\"><figcaption class=\"muted\">{esc(caption)}</figcaption></figure>")
    # types
    parts.append("<h2>Query types</h2>")
    parts.append(f"<p class=\"muted\">Source: {esc(s['query_types'])}." + (
        " Rules (first match on the lower-cased query wins; no match is 'other'): " + "; ".join(
            f"<b>{esc(r['type'])}</b> <code>{esc(r['pattern'])}</code>" for r in s["type_rules"]) if s.get("type_rules")
        else "") + "</p>")
    tt = diag.types
    if len(tt):
        headers = ["type", "queries", "mean nDCG@10", "median nDCG@10", "mean first nDCG@10", f"mean R@{depth}",
                   f"median R@{depth}"] + list(_labels())
        rows = [[r["query_type"], r["queries"], _fmt(r["mean_ndcg_10"]), _fmt(r["median_ndcg_10"]),
                 _fmt(r["mean_first_ndcg_10"]), _fmt(r[f"mean_recall_{depth}"]), _fmt(r[f"median_recall_{depth}"])]
                + [r[lab] for lab in _labels()] for r in tt.to_dict(orient="records")]
        parts.append(html_table(headers, rows, numeric=set(range(1, len(headers)))))
    # worst
    parts.append(f"<h2>Worst {len(diag.worst)} queries (lowest reranked nDCG@10)</h2>")
    for w in diag.worst:
        parts.append(
            f"<h3>{esc(w['query_id'])}: {esc(w['query'] or '(no query text)')}</h3><p class=\"muted\">"
            f"type {esc(w['query_type'])} · diagnosis <b>{esc(w['diagnosis'])}</b> · reranked nDCG@10 "
            f"{w['reranked_ndcg_10']:.4f} (first stage {w['first_ndcg_10']:.4f}) · first-stage R@{depth} "
            f"{w[f'first_recall_{depth}']:.4f} · judged@10 {w['reranked_judged_10']:.2f}</p>")
        left = "".join(
            f"<tr><td class=\"num\">{i['rank']}</td><td>{esc(i['doc_id'])}</td>"
            f"<td class=\"{_top_cell(i)[1]}\">{esc(_top_cell(i)[0])}</td><td>{esc(i.get('snippet') or '')}</td></tr>"
            for i in w["top_10"])
        right = "".join(
            f"<tr><td>{esc(i['doc_id'])}</td><td class=\"num\">{i['grade']}</td><td>{esc(i['where'])}</td>"
            f"<td>{esc(i.get('snippet') or '')}</td></tr>" for i in w["best_missed"]) or (
            "<tr><td colspan=\"4\" class=\"muted\">no relevant judged document outside the top 10</td></tr>")
        parts.append(
            "<div class=\"pair\"><div><b>Reranked top 10</b><table><thead><tr><th>#</th><th>doc</th><th>grade</th>"
            f"<th>text</th></tr></thead><tbody>{left}</tbody></table></div><div><b>Best judged documents it missed</b>"
            "<table><thead><tr><th>doc</th><th>grade</th><th>where</th><th>text</th></tr></thead>"
            f"<tbody>{right}</tbody></table></div></div>")
    # per query
    parts.append("<h2>Per query</h2>")
    pq = diag.per_query
    cols = [c for c in pq.columns]
    rows = [[_fmt(v) if isinstance(v, float) else v for v in r] for r in pq.itertuples(index=False)]
    parts.append("<details open><summary>All queries (also in per_query.csv)</summary><div style=\"overflow-x:auto\">"
                 + html_table(cols, rows, numeric=set(range(4, len(cols)))) + "</div></details>")
    # provenance
    parts.append("<h2>Provenance</h2>")
    parts.append(provenance_html({"settings": diag.settings, "thresholds": diag.thresholds.describe(),
                                  "evaluation": diag.provenance}))
    return html_page(f"Two-stage diagnosis: {diag.name}", "".join(parts)).replace(
        "</style>", ".pair{display:grid;grid-template-columns:1fr 1fr;gap:1rem}.pair td{font-size:.8rem}"
                    "figure{margin:0}h3{font-size:1rem;margin-top:1.4rem}</style>", 1)


def _labels():
    from ..diagnose import LABELS

    return LABELS


def _label_meaning(label: str) -> str:
    from ..diagnose import LABEL_MEANING

    return LABEL_MEANING[label]


def diagnosis_markdown(diag, plot_files: dict[str, str]) -> str:
    s = diag.settings
    depth = s["candidate_depth"]
    out = [f"# Two-stage diagnosis: {diag.name}\n"]
    for k, v in s.get("sources", {}).items():
        if v:
            out.append(f"- {k}: `{v}`")
    out.append("")
    for note in diag.notes:
        out.append(f"> Note: {note}\n")
    out.append("## Headline\n")
    out.append(markdown_table(["measure", "first stage", "reranked", "Δ"], [
        [r["measure"], _fmt(r["first_stage"]), _fmt(r["reranked"]),
         "" if r["key"] == "num_q" else _delta(r["first_stage"], r["reranked"])] for r in diag.headline]))
    out.append(f"nDCG@10 and judged@10 at relevance level 1; R@{depth} at level {s['recall_level']} "
               f"(trec_eval -l {s['recall_level']}); query set: {s['query_set']}.\n")
    out += [f"- {t}" for t in diagnosis_takeaways(diag)]
    out.append("\n## Diagnosis\n")
    rules = diag.thresholds.describe()
    out.append(markdown_table(["label", "queries", "rule"],
                              [[lab, diag.label_counts[lab], rules[lab]] for lab in _labels()]))
    chk = diag.reorder_check
    out.append("Reorder check: " + ("passed (the reranked run only reorders first-stage candidates)."
                                    if chk["only_reorders"] else
                                    f"FAILED: {chk['introduced_documents']} introduced documents in "
                                    f"{chk['queries_with_introduced_documents']} queries.") + "\n")
    out.append("## Plots\n")
    for name, path in plot_files.items():
        out.append(f"![{name}]({path})\n")
    out.append("## Query types\n")
    if len(diag.types):
        tt = diag.types
        out.append(markdown_table(
            ["type", "queries", "mean nDCG@10", "median nDCG@10", f"mean R@{depth}", f"median R@{depth}"]
            + list(_labels()),
            [[r["query_type"], r["queries"], _fmt(r["mean_ndcg_10"]), _fmt(r["median_ndcg_10"]),
              _fmt(r[f"mean_recall_{depth}"]), _fmt(r[f"median_recall_{depth}"])] + [r[lab] for lab in _labels()]
             for r in tt.to_dict(orient="records")]))
    out.append(f"## Worst {len(diag.worst)} queries\n")
    for w in diag.worst:
        out.append(f"### {w['query_id']}: {w['query'] or '(no query text)'}\n")
        out.append(f"type {w['query_type']}, diagnosis **{w['diagnosis']}**, reranked nDCG@10 "
                   f"{w['reranked_ndcg_10']:.4f} (first stage {w['first_ndcg_10']:.4f}), first-stage R@{depth} "
                   f"{w[f'first_recall_{depth}']:.4f}\n")
        out.append(markdown_table(["#", "doc", "grade", "text"], [
            [i["rank"], i["doc_id"], _top_cell(i)[0], (i.get("snippet") or "")[:120]] for i in w["top_10"]]))
        if w["best_missed"]:
            out.append("Best judged documents it missed:\n")
            out.append(markdown_table(["doc", "grade", "where", "text"], [
                [i["doc_id"], i["grade"], i["where"], (i.get("snippet") or "")[:120]] for i in w["best_missed"]]))
    out.append("## Provenance\n")
    out.append("```json\n" + json.dumps({"settings": diag.settings, "thresholds": diag.thresholds.describe(),
                                         "evaluation": diag.provenance}, indent=2, default=str) + "\n```\n")
    return "\n".join(out) + "\n"


def write_diagnosis_report(diag, out_dir) -> dict[str, str]:
    """Write index.html (self-contained), report.md (+ plots/*.png), per_query.csv and summary.json."""
    from pathlib import Path

    from ..diagnose import write_per_query_csv
    from ..trec_io import atomic_write, write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = diagnosis_plots(diag)
    plot_files = {}
    for name, (_, png) in plots.items():
        rel = f"plots/{name}.png"
        with atomic_write(out / rel, "wb") as fh:
            fh.write(png)
        plot_files[name] = rel
    paths = {
        "index.html": out / "index.html",
        "report.md": out / "report.md",
        "per_query.csv": out / "per_query.csv",
        "summary.json": out / "summary.json",
    }
    with atomic_write(paths["index.html"]) as fh:
        fh.write(diagnosis_html(diag, plots))
    with atomic_write(paths["report.md"]) as fh:
        fh.write(diagnosis_markdown(diag, plot_files))
    write_per_query_csv(diag, paths["per_query.csv"])
    write_json(paths["summary.json"], diag.summary())
    return {k: str(v) for k, v in paths.items()}
