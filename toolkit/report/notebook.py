"""What a notebook shows of the library's results: each result's HTML (``_repr_html_``: its table, its notes,
its provenance, its plots inline) and its figures shown as PNG by IPython. Every string passes
``toolkit.guard.escape``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd


def shown_in_notebooks(fig: Any) -> Any:
    """The figure, owned by the caller (pyplot never held it, so no backend shows it a second time), and shown
    as a PNG when it is a cell's value in IPython: the plots are drawn on their own Agg canvas, which registers
    no display. The PNG formatter for ``Figure`` is IPython's own setting, left installed (the same each time)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        from IPython.core.pylabtools import print_figure
        from matplotlib.figure import Figure

        shell.display_formatter.formatters["image/png"].for_type(Figure, lambda f: print_figure(f, "png"))
    return fig


def evaluation_html(name: str, summary: pd.Series, notes: Iterable[str], provenance: Mapping[str, Any]) -> str:
    """An evaluation: the means, the notes, the provenance folded."""
    from toolkit.guard.escape import html_frame, html_text

    table = html_frame(summary.to_frame(), float_format=lambda v: f"{v:.4f}")
    said = "".join(f"<li>{html_text(n)}</li>" for n in notes)
    prov = "".join(f"<tr><th>{html_text(str(k))}</th><td>{html_text(str(v))}</td></tr>" for k, v in provenance.items())
    return (
        f"<div><b>Evaluation</b> of {html_text(name)} ({provenance['queries_evaluated']} queries)</div>{table}"
        + (f"<ul>{said}</ul>" if said else "")
        + f"<details><summary>provenance</summary><table>{prov}</table></details>"
    )


def diagnosis_html(
    title: str, headline: pd.DataFrame, decomposition: pd.DataFrame, plots: Iterable[tuple[str, Callable[[], Any]]]
) -> str:
    """A diagnosis: its one line, the headline and decomposition tables, and each ``(name, draw)`` plot inline."""
    from toolkit.guard.escape import html_frame, html_text
    from toolkit.report.html import figure_data_uri

    figs = "".join(f'<img class="plot" alt="{a}" src="{figure_data_uri(draw())}">' for a, draw in plots)
    return (
        f"<p><b>Diagnosis</b> {html_text(title)}</p>"
        + html_frame(headline, index=False, float_format=lambda v: f"{v:.4f}")
        + html_frame(decomposition, float_format=lambda v: f"{v:.4f}")
        + figs
    )


def run_html(title: str, head: pd.DataFrame) -> str:
    """A run: its one line and its first rows."""
    from toolkit.guard.escape import html_frame, html_text

    return f"<p><b>Run</b> {html_text(title)}</p>{html_frame(head, index=False)}"


__all__ = ["diagnosis_html", "evaluation_html", "run_html", "shown_in_notebooks"]
