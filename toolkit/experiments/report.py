"""``index.html`` of an experiment: the configurations ranked by the first measure, each diagnosis linked."""

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


def write_index_html(path: Path, exp, table: pd.DataFrame, primary: str, baseline: str | None, links: dict) -> None:
    from toolkit.trec_io import atomic_write

    ranked = table.sort_values(primary, ascending=False, kind="stable")
    skip = {"stage", "type"}
    cols = [c for c in ranked.columns if c not in skip and not ranked[c].isna().all()]
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
    with atomic_write(path) as fh:
        fh.write(html_page(f"Experiment {exp.name}", body, extra_css="tr.baseline{font-weight:bold}"))
