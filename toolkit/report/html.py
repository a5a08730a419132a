"""Shared building blocks of every report: self-contained HTML (inline CSS, images as data URIs), Markdown tables,
number formatting and matplotlib figures as PNG bytes.

matplotlib is imported only when a figure is made, so importing a report module stays light.
"""

from __future__ import annotations

import base64
import io
import json
from types import MappingProxyType

from toolkit.guard.escape import html_text, markdown_cell

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
    """``value`` as HTML text or attribute value (``toolkit.guard.escape.html_text``)."""
    return html_text(value)


def html_table(
    headers: list[str], rows: list[list[object]], numeric: set[int] | None = None, table_id: str | None = None
) -> str:
    """A plain HTML table; cells are escaped; columns in ``numeric`` are right-aligned."""
    numeric = numeric or set()
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{esc(c)}</td>' if i in numeric else f"<td>{esc(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def provenance_html(prov: dict) -> str:
    return (
        "<details><summary>Provenance (how every number was computed)</summary><pre>"
        + esc(json.dumps(prov, indent=2, default=str))
        + "</pre></details>"
    )


def html_page(title: str, body: str, extra_css: str = "", script: str = "") -> str:
    """One self-contained page: inline CSS and (optionally) an inline script; nothing is fetched."""
    tail = f"<script>{script}</script>" if script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}{extra_css}</style></head><body>{body}{tail}</body></html>\n"
    )


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table; headers and cells are escaped (``toolkit.guard.escape.markdown_cell``: no HTML, no link, no
    extra cell), except ``toolkit.guard.escape.Raw`` cells, which twostage formatted itself."""
    lines = ["| " + " | ".join(markdown_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(markdown_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def fmt(value, digits: int = 4) -> str:
    """A table cell: '–' for missing, integers as such, other numbers with ``digits`` decimals."""
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) > 1):
        return str(int(value))
    return f"{float(value):.{digits}f}"


def signed(value, digits: int = 4) -> str:
    """A difference with its sign; never '-0.0000'."""
    if value is None or value != value:
        return ""
    text = f"{float(value):+.{digits}f}"
    return "+" + text[1:] if text.startswith("-") and not text.strip("-0.") else text


def p_value(p: float | None) -> str:
    """A p-value: 4 decimals, or scientific notation below 0.001."""
    if p is None or p != p:
        return "–"
    return f"{p:.4f}" if p >= 0.001 else f"{p:.1e}"


# ------------------------------------------------------------------ figures
class _AggFigures:
    """What the report's plotting code asks of pyplot (``subplots`` and ``close``), without pyplot: each figure
    is a ``matplotlib.figure.Figure`` on its own Agg canvas (no display needed), so no backend is switched,
    pyplot's list of figures (the caller's own) is left alone, and a figure is freed with its last reference."""

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, **kwargs):
        """``pyplot.subplots``'s figure and axes, drawn by Agg."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, **kwargs)

    @staticmethod
    def close(fig=None) -> None:
        """Nothing to close: pyplot never held the figure."""


def pyplot() -> _AggFigures:
    """The figures of the report's plots, drawn on Agg (no display needed), pyplot and its backend untouched."""
    return _AggFigures()


#: The resolution of every figure's PNG.
FIGURE_DPI = 110
#: Pillow's options for every figure's PNG: zlib level 3 (of the report's figures, both faster to write and
#: smaller than Pillow's default 6).
PNG_OPTIONS = MappingProxyType({"compress_level": 3})


def figure_png(fig) -> bytes:
    """A matplotlib figure as PNG bytes, cut to its artists (``bbox_inches="tight"``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight", pil_kwargs=dict(PNG_OPTIONS))
    return buf.getvalue()


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure_data_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI (the page then opens from disk with no other files)."""
    return png_data_uri(figure_png(fig))


def script_json(obj: object) -> str:
    """JSON safe inside an inline ``<script>``: every '<' escaped, so no '</script>' or '<!--' in a text can end
    or disturb the element (JSON.parse reads \\u003c back as '<')."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    return text.replace("<", "\\u003c")
