"""``index.html`` of an experiment: the configurations ranked by the first measure, each diagnosis linked,
and a plot of the grid: the first measure against each swept parameter."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from toolkit.report.html import esc, html_page


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    return esc(v)


def swept(table: pd.DataFrame, params: list[str]) -> list[str]:
    """The grid parameters that take more than one value (the axes worth a plot)."""
    return [p for p in params if p in table.columns and table[p].dropna().nunique() > 1]


def grid_figure(table: pd.DataFrame, params: list[str], primary: str):
    """One panel per swept parameter: ``primary`` of every configuration against the parameter's value, one
    colour per stage; where other parameters vary too, a line joins the best value at each setting. None when
    nothing is swept."""
    from toolkit.guard.escape import plot_text
    from toolkit.report.html import pyplot

    axes_of = swept(table, params)
    if not axes_of or primary not in table.columns:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(axes_of), figsize=(4.2 * len(axes_of), 3.2), squeeze=False)
    for ax, p in zip(axes[0], axes_of):
        rows = table[table[p].notna() & table[primary].notna()]
        numeric = pd.api.types.is_numeric_dtype(rows[p].dropna().infer_objects())
        order = sorted(rows[p].unique(), key=lambda v: float(v) if numeric else str(v))
        where = {v: i for i, v in enumerate(order)}
        for stage, g in rows.groupby("stage", sort=False):
            x = g[p].astype(float) if numeric else g[p].map(where)
            ax.scatter(x, g[primary], s=18, alpha=0.6, label=plot_text(stage))
            best = g.assign(_x=x.to_numpy()).groupby("_x")[primary].max().sort_index()
            ax.plot(best.index, best.to_numpy(), linewidth=1)
        if not numeric:
            ax.set_xticks(range(len(order)), [plot_text(v) for v in order])
        ax.set_xlabel(p)
        ax.set_ylabel(primary)
        ax.grid(alpha=0.3)
        if rows["stage"].nunique() > 1:
            ax.legend(fontsize=7)
    fig.suptitle(f"{primary} over the grid (line: best at each setting)", fontsize=9)
    fig.tight_layout()
    return fig


def trust_html(table: pd.DataFrame, primary: str, measures: list[str] | None = None) -> str:
    """ "How far to trust each difference": per measure (``primary`` first, then the others of ``measures``), one
    line per configuration tested against the baseline, its verdict (``experiments.trust_columns``); empty without one."""
    sections: list[str] = []
    for m in dict.fromkeys([primary, *(measures or [])]):
        col = f"verdict_{m}"
        if col not in table.columns:
            continue
        lo, hi = f"min_{m}", f"max_{m}"
        items = []
        for r in table.to_dict(orient="records"):
            if not isinstance(r.get(col), str):
                continue
            bounds = f" (bounds [{r[lo]:.4f}, {r[hi]:.4f}])" if lo in r and isinstance(r.get(lo), float) else ""
            items.append(f"<li><b>{esc(r['config'])}</b>{esc(bounds)}: {esc(r[col])}</li>")
        note = (
            ""
            if sections
            else '<p class="muted">'
            + esc(
                "Difference to the baseline [bootstrap interval], effect size d_z, corrected p-value and the verdict; "
                "bounds: the lowest and highest mean over every labelling of the unjudged documents in the top k, "
                "the ideal ranking from the judged documents plus those (ndcg_cut.k, P.k, recall.k), and whether "
                "they overlap the baseline's (the top-k holes could explain the difference)."
            )
            + "</p>"
        )
        sections.append(f"<h2>How far to trust each difference ({esc(m)})</h2>{note}<ul>{''.join(items)}</ul>")
    return "".join(sections)


def write_index_html(
    path: Path,
    exp,
    table: pd.DataFrame,
    primary: str,
    baseline: str | None,
    links: dict,
    params: list[str] | None = None,
    measures: list[str] | None = None,
) -> None:
    from toolkit.data.trec_io import atomic_write
    from toolkit.report.html import figure_data_uri

    ranked = table.sort_values(primary, ascending=False, kind="stable")
    skip = {"stage", "type"}
    cols = [c for c in ranked.columns if c not in skip and not c.startswith("verdict_") and not ranked[c].isna().all()]
    head = "".join(f"<th>{esc(c)}</th>" for c in ["rank", *cols, "diagnosis"])
    rows = []
    for i, r in enumerate(ranked.to_dict(orient="records"), 1):
        link = links.get(r["config"])
        diag = f'<a href="{esc(link)}">diagnosis</a>' if link else ""
        mark = ' class="baseline"' if r["config"] == baseline else ""
        rows.append(
            f"<tr{mark}><td>{i}</td>" + "".join(f"<td>{_cell(r[c])}</td>" for c in cols) + f"<td>{diag}</td></tr>"
        )
    body = (
        f"<h1>Experiment {esc(exp.name)}</h1>"
        f"<p>{len(table)} configurations ranked by {esc(primary)}"
        + (
            f"; differences and p-values ({esc(exp.evaluation['correction'])}-corrected) against {esc(baseline)}"
            if baseline
            else ""
        )
        + ". Tuned rows give the held-out score (each query scored by a choice made without it) beside the best"
        ' in-sample score. Files: <a href="results.csv">results.csv</a>, <a href="experiment.json">experiment.json</a>.</p>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    body += trust_html(table, primary, measures)
    fig = grid_figure(table, params or [], primary)
    if fig is not None:
        alt = f"{primary} against {', '.join(swept(table, params or []))}"
        body += f'<h2>The grid</h2><img class="plot" alt="{esc(alt)}" src="{figure_data_uri(fig)}">'

    with atomic_write(path) as fh:
        fh.write(html_page(f"Experiment {exp.name}", body, extra_css="tr.baseline{font-weight:bold}"))
