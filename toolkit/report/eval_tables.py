"""Tables of evaluation results shared by the reports: systems x measures, and paired significance rows.

A significance row reads one comparison as ``significance.Comparison.as_dict`` gives it (mean, delta,
p_ttest, p_permutation, p_adjusted, wins, ties, losses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolkit.report.html import esc, fmt, html_table, markdown_table, p_value

SIGNIFICANCE_HEADERS = ("mean", "delta", "p (t-test)", "p (randomization)", "p adjusted", "W/T/L")


def wtl(r: Mapping) -> str:
    return f"{r['wins']}/{r['ties']}/{r['losses']}"


def significance_cells(r: Mapping) -> list[str]:
    """mean, delta, the three p-values and W/T/L of one comparison, formatted."""
    return [
        f"{r['mean']:.4f}",
        f"{r['delta']:+.4f}",
        p_value(r["p_ttest"]),
        p_value(r["p_permutation"]),
        p_value(r["p_adjusted"]),
        wtl(r),
    ]


def significance_rows(results: Mapping[str, Mapping]) -> list[list[str]]:
    """One row per compared run: its name, then ``significance_cells``."""
    return [[run, *significance_cells(r)] for run, r in results.items()]


class Table:
    """Headers, rows of raw values, and how to show them: the same table as HTML and as Markdown.

    Floats are formatted with ``fmt`` (4 decimals); ``numeric`` columns are right-aligned in HTML.
    """

    def __init__(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        numeric: set[int] | None = None,
        table_id: str | None = None,
    ):
        self.headers = list(headers)
        self.rows = [[fmt(v) if isinstance(v, float) or v is None else v for v in r] for r in rows]
        self.numeric = (
            numeric
            if numeric is not None
            else {
                i
                for i in range(len(self.headers))
                if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
            }
        )
        self.table_id = table_id

    def html(self) -> str:
        return html_table(self.headers, self.rows, self.numeric, self.table_id)

    def markdown(self) -> str:
        return markdown_table(self.headers, self.rows)


def caption(text: str) -> str:
    return f'<p class="muted">{esc(text)}</p>'
