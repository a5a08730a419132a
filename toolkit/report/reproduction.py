"""``twostage reproduce``'s outputs: the Markdown table on stdout, NAME.md, NAME.html and NAME.json.

Reads a ``reproduce.Reproduction`` (the spec, one result per row and per cell); computes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.guard.escape import Raw, markdown_code
from toolkit.guard.escape import markdown_text as md
from toolkit.report.html import esc, html_page, html_table, markdown_table, provenance_html, signed

if TYPE_CHECKING:
    from toolkit.reproduction.runner import Reproduction


def _fmt(value: float | None, d: int, with_sign: bool = False) -> str:
    if value is None:
        return "—"
    return signed(value, d) if with_sign else f"{value:.{d}f}"


_TABLE_HEADERS = ("system", "measure", "settings", "published", "measured", "delta", "status", "source")


def _sources(rep: Reproduction) -> list[str]:
    """Distinct source texts in order of appearance; the table cites them as [1], [2], ..."""
    return list(dict.fromkeys(c.source for c in rep.cells if c.source))


def _table_rows(rep: Reproduction) -> list[list[str]]:
    out = []
    refs = {s: Raw(f"[{i}]") for i, s in enumerate(_sources(rep), 1)}
    for c in rep.cells:
        col = rep.spec.column(c.column)
        status = c.status if not c.reason or c.status in ("skipped", "error") else f"{c.status} ({c.reason})"
        out.append(
            [
                c.label,
                c.column,
                col.describe(),
                _fmt(c.published, c.decimals),
                _fmt(c.measured, c.decimals),
                _fmt(c.delta, c.decimals, with_sign=True),
                status if c.status not in ("skipped", "error") else c.status,
                refs.get(c.source, ""),
            ]
        )
    return out


def render_markdown(rep: Reproduction) -> str:
    spec = rep.spec
    lines = [
        f"# {md(spec.title)}",
        "",
        f"Spec {markdown_code(spec.name)} ({md(spec.path.name)}). {md(spec.description)}".strip(),
        "",
    ]
    if spec.source:
        lines += [f"Published figures: {md(spec.source)}", ""]
    lines += [markdown_table(_TABLE_HEADERS, _table_rows(rep))]
    lines += [f"{i}. {md(s)}" for i, s in enumerate(_sources(rep), 1)] + [""]
    off = [c for c in rep.cells if c.status == "off"]
    for c in off:
        lines += [
            f"## Off: {md(c.label)} / {md(c.column)}: published {_fmt(c.published, c.decimals)}, measured "
            f"{_fmt(c.measured, c.decimals)} (delta {_fmt(c.delta, c.decimals, True)}, tolerance "
            f"{c.tolerance:g})",
            "",
        ]
        if c.reason:
            lines += [md(c.reason), ""]
        lines += [
            markdown_table(
                ["field", "published", "measured", ""],
                [[f, p, m, Raw("**differs**") if p != m else ""] for f, p, m in c.side_by_side],
            )
        ]
    not_run = [r for r in rep.rows if r.status != "ok"]
    if not_run:
        lines += ["## Not measured", ""]
        lines += [
            f"- {md(r.label)} ({markdown_code(r.id)}): **{md(r.status.upper())}**: {md(r.reason)}" for r in not_run
        ]
        lines.append("")
    lines += _programs_markdown(rep)
    lines += [f"**{md(rep.verdict())}**", ""]
    return "\n".join(lines)


def _programs_markdown(rep: Reproduction) -> list[str]:
    """Every program the spec ran, as indented code (nothing in it is read as Markdown or HTML)."""
    from toolkit.reproduction.runner import shown

    if not rep.programs:
        return ["Programs run: none.", ""]
    lines = ["## Programs run", ""]
    lines += [f"    [{p['step']}] exit {p['exit_status']}: {shown(p['argv'])}" for p in rep.programs]
    return lines + [""]


def render_json(rep: Reproduction) -> dict:
    spec = rep.spec
    return {
        "spec": spec.name,
        "title": spec.title,
        "file": str(spec.path),
        "source": spec.source,
        "data": rep.data,
        "verdict": rep.verdict(),
        "counts": rep.counts(),
        "columns": [
            {
                "id": c.id,
                "measure": c.measure.name,
                "trec_eval_args": c.trec_eval_args,
                "settings": c.settings.describe(),
            }
            for c in spec.columns
        ],
        "rows": [
            {
                "id": r.id,
                "label": r.label,
                "status": r.status,
                "reason": r.reason,
                "run": r.run_path,
                "commands": r.commands,
                "provenance": r.provenance,
            }
            for r in rep.rows
        ],
        "cells": [c.as_dict() for c in rep.cells],
        "programs_run": rep.programs,
    }


def render_html(rep: Reproduction) -> str:
    spec = rep.spec
    body = [
        f"<h1>{esc(spec.title)}</h1>",
        f'<p class="muted">Spec <code>{esc(spec.name)}</code> ({esc(spec.path)}). {esc(spec.description)}</p>',
    ]
    if spec.source:
        body.append(f"<p>Published figures: {esc(spec.source)}</p>")
    cls = "bad" if rep.failed else "warn" if rep.skipped else "ok"
    body.append(f'<p class="{cls}"><strong>{esc(rep.verdict())}</strong></p>')
    body.append(html_table(_TABLE_HEADERS, _table_rows(rep), numeric={3, 4, 5}))
    body.append('<ol class="muted">' + "".join(f"<li>{esc(s)}</li>" for s in _sources(rep)) + "</ol>")
    for c in (c for c in rep.cells if c.status == "off"):
        body.append(
            f"<h2>Off: {esc(c.label)} / {esc(c.column)}</h2><p>published {_fmt(c.published, c.decimals)}, "
            f"measured {_fmt(c.measured, c.decimals)}, delta {_fmt(c.delta, c.decimals, True)} "
            f"(tolerance {c.tolerance:g}). {esc(c.reason)}</p>"
        )
        body.append(
            html_table(
                ["field", "published", "measured", ""],
                [[f, p, m, "differs" if p != m else ""] for f, p, m in c.side_by_side],
            )
        )
    not_run = [r for r in rep.rows if r.status != "ok"]
    if not_run:
        body.append(
            "<h2>Not measured</h2>"
            + html_table(["system", "status", "reason"], [[r.label, r.status, r.reason] for r in not_run])
        )
    if rep.programs:
        from toolkit.reproduction.runner import shown

        body.append(
            "<h2>Programs run</h2>"
            + html_table(
                ["step", "exit status", "command"],
                [[p["step"], p["exit_status"], shown(p["argv"])] for p in rep.programs],
            )
        )
    for r in rep.rows:
        for cid, prov in r.provenance.items():
            body.append(f"<h2>{esc(r.label)} / {esc(cid)}</h2>" + provenance_html(prov))
    return html_page(spec.title, "\n".join(body))


def write_outputs(rep: Reproduction, out: Path) -> list[Path]:
    """``OUT/<name>.md``, ``.html`` and ``.json``, each written atomically."""
    from toolkit.data.trec_io import atomic_write, write_json

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{rep.spec.name}.md", out / f"{rep.spec.name}.html", out / f"{rep.spec.name}.json"]
    with atomic_write(paths[0]) as fh:
        fh.write(render_markdown(rep))
    with atomic_write(paths[1]) as fh:
        fh.write(render_html(rep))
    write_json(paths[2], render_json(rep))
    return paths
