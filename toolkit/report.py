"""Self-contained report output: HTML pages with inline CSS and images, Markdown, CSV/JSON.

Shared by diagnosis, comparison and reproduction reports. matplotlib is
imported only inside ``figure_data_uri``'s callers' plotting functions.
"""

from __future__ import annotations

import base64
import html
import io
import json

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}th,td{border:1px solid #ddd;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#666;font-size:.85rem}.ok{color:#1a7f37}.bad{color:#b42318}.warn{color:#9a6700}
img.plot{max-width:100%;border:1px solid #eee;margin:.5rem 0}
details{margin:.4rem 0}code,pre{background:#f6f8fa;padding:.1rem .3rem;border-radius:3px;font-size:.85rem}
pre{padding:.6rem;overflow-x:auto}
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def figure_data_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI (the page then opens from disk with no other files)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def html_table(headers: list[str], rows: list[list[object]], numeric: set[int] | None = None) -> str:
    """A plain HTML table; cells are escaped; columns in ``numeric`` are right-aligned."""
    numeric = numeric or set()
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td class=\"num\">{esc(c)}</td>" if i in numeric else f"<td>{esc(c)}</td>"
                         for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def provenance_html(prov: dict) -> str:
    return "<details><summary>Provenance (how every number was computed)</summary><pre>" + esc(
        json.dumps(prov, indent=2, default=str)
    ) + "</pre></details>"


def html_page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
