"""Report sections: one declaration per section feeds both the HTML page and the Markdown file.

A ``Section`` names its title, the result fields it reads and a ``body`` that turns the result into blocks;
a block knows how it looks in either format (``Part``: HTML text and Markdown lines; ``Part.table``,
``Part.figure``, ``Part.html_only`` ... build the usual ones). Adding a section is one declaration in the
list a report renders, and the two formats cannot drift apart because neither has its own list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from toolkit.guard.escape import markdown_text
from toolkit.report.eval_tables import Table
from toolkit.report.html import esc, png_data_uri


@dataclass(frozen=True)
class Plots:
    """The figures a body may show: name -> (caption, PNG) inline in HTML, name -> file path in Markdown."""

    png: Mapping[str, tuple[str, bytes]] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """One block of a section: its HTML text and its Markdown lines (joined by newlines); either may be empty,
    for what only one format shows (the explorer is HTML only). ``figure`` names a plot resolved at render."""

    html: str = ""
    markdown: tuple[str, ...] = ()
    figure: str | None = None
    alt: str = ""

    @classmethod
    def heading(cls, text: str, level: int = 2) -> Part:
        return cls(f"<h{level}>{esc(text)}</h{level}>", (f"{'#' * level} {markdown_text(text)}\n",))

    @classmethod
    def table(cls, table: Table) -> Part:
        return cls(table.html(), (table.markdown(),))

    @classmethod
    def html_only(cls, html: str) -> Part:
        return cls(html=html)

    @classmethod
    def markdown_only(cls, *lines: str) -> Part:
        return cls(markdown=tuple(lines))

    @classmethod
    def plot(cls, name: str, alt: str | None = None) -> Part:
        """A figure: inline PNG with its caption in HTML, ``![alt](plots/NAME.png)`` in Markdown."""
        return cls(figure=name, alt=name if alt is None else alt)

    def render_html(self, plots: Plots) -> str:
        if self.figure is None:
            return self.html
        caption, png = plots.png[self.figure]
        return (
            f'<figure><img class="plot" id="plot-{esc(self.figure)}" alt="{esc(caption)}" '
            f'src="{png_data_uri(png)}"><figcaption class="muted">{esc(caption)}</figcaption></figure>'
        )

    def render_markdown(self, plots: Plots) -> list[str]:
        if self.figure is None:
            return list(self.markdown)
        return [f"![{markdown_text(self.alt)}]({plots.files[self.figure]})\n"]


@dataclass(frozen=True)
class Section:
    """One section of a report: its title (an h2 in both formats; None for none), the result fields it reads
    (``reads``: attribute names of the result, checked by the tests), how it renders (``body``), when it
    is shown at all, and whether only the HTML page shows it (``html_only``: the Markdown file neither shows nor
    computes it, for a costly body such as the explorer)."""

    title: Callable[[object], str | None]
    reads: tuple[str, ...]
    body: Callable[[object], Sequence[Part]]
    shown: Callable[[object], bool] = field(default=lambda result: True)
    html_only: bool = False

    def parts(self, result) -> list[Part]:
        if not self.shown(result):
            return []
        title = self.title(result)
        return ([Part.heading(title)] if title else []) + list(self.body(result))


def render_html(sections: Iterable[Section], result, plots: Plots) -> str:
    """The page body: every section's blocks, in order."""
    return "".join(p.render_html(plots) for s in sections for p in s.parts(result))


def render_markdown(sections: Iterable[Section], result, plots: Plots) -> str:
    """The Markdown file: every section's lines, in order, joined by newlines."""
    lines = [line for s in sections if not s.html_only for p in s.parts(result) for line in p.render_markdown(plots)]
    return "\n".join(lines) + "\n"
