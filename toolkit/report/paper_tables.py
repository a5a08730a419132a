"""The systems x measures tables papers print, from a comparison (``ts.compare``): Markdown, LaTeX and the
notebook's HTML, each with its significance marks (one symbol per baseline, ▲ better / ▼ worse), the best value
of each measure in bold, and the legend that states the test, the correction and its family.

Every name passes the escaper of the format it lands in (``toolkit.guard.escape``); the numbers are the
comparison's means (``Comparison.means``) as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MappingProxyType

import pandas as pd

from toolkit.stats.paired import ComparisonResult

#: Significance marks, one per baseline in order (stated under every table).
SYMBOLS = ("†", "‡", "§", "¶", "*")
LATEX_SYMBOLS = MappingProxyType(
    {
        "†": r"\dagger",
        "‡": r"\ddagger",
        "§": r"\S",
        "¶": r"\P",
        "*": "*",
        "▲": r"\uparrow",
        "▼": r"\downarrow",
    }
)
#: Direction of a significant difference: the marked system is better (▲) or worse (▼) than that baseline.
UP, DOWN = "▲", "▼"

_TEST_NAMES = MappingProxyType(
    {
        "randomization": "paired randomization test",
        "t": "paired t-test",
        "wilcoxon": "Wilcoxon signed-rank test",
        "sign": "sign test",
    }
)


def cells(
    result: ComparisonResult,
    means: pd.DataFrame,
    alpha: float,
    digits: int,
    bold: Callable[[str], str],
    mark: Callable[[str], str],
    escape: Callable[[object], str] = str,
) -> list[list[str]]:
    """The table's cells in one format, a row per system (``means``' rows): each name through ``escape``, the
    numbers with ``bold`` (the best of its measure at ``digits``) and ``mark`` (the marks of the tests whose
    corrected p is below ``alpha``), markup of that format."""
    by = {(c.baseline, c.run, c.measure): c for c in result.tests}
    rows = []
    for name in means.index:
        row = [escape(name)]
        for m in result.measures:
            v = float(means.at[name, m])  # type: ignore[arg-type]  # a float cell; pandas types it as any scalar
            text = f"{v:.{digits}f}"
            best = means[m].round(digits).max()
            if round(v, digits) == best:
                text = bold(text)
            marks = ""
            for i, b in enumerate(result.baselines):
                c, sign = by.get((b, name, m)), 1.0
                if c is None:
                    c, sign = by.get((name, b, m)), -1.0  # the baseline was tested against this system
                if c is not None and c.p_adjusted < alpha and c.delta != 0:
                    marks += SYMBOLS[i % len(SYMBOLS)] + (UP if sign * c.delta > 0 else DOWN)
            row.append(text + (mark(marks) if marks else ""))
        rows.append(row)
    return rows


def legend(result: ComparisonResult, alpha: float = 0.05, name: Callable[[object], str] = str) -> str:
    """What the marks mean at ``alpha``: the symbol of each baseline (its name through ``name``, the escaper of
    the format it lands in), the test, the correction and its family, the systems left out as identical."""
    t = result.doc["tests"]
    test = _TEST_NAMES.get(t["test"], "randomised Tukey HSD")
    marks = "; ".join(f"{SYMBOLS[i % len(SYMBOLS)]} vs {name(b)}" for i, b in enumerate(result.baselines))
    family = "all pairs of systems" if t.get("family") == "all-pairs" else "every system against the baseline(s)"
    left = result.doc.get("identical") or {}
    out = (
        f"{marks}: p < {alpha:g} ({test}, two-sided, {t['correction']} correction of {t['correction_applies_to']}; "
        f"family: {family}); {UP} better, {DOWN} worse than that baseline. "
    )
    if left:
        out += "Left out of the family as identical: " + ", ".join(f"{name(r)} (= {name(s)})" for r, s in left.items())
        out += ". "
    return out + "Bold: the best value of each measure."


def markdown_table(
    result: ComparisonResult, means: pd.DataFrame, alpha: float, digits: int, notes: Sequence[str] = ()
) -> str:
    """The table in Markdown, the legend under it and, when ``notes`` (a heading line, then one line per test),
    those as a list."""
    from toolkit.guard.escape import markdown_text

    rows = cells(result, means, alpha, digits, lambda s: f"**{s}**", lambda s: s, markdown_text)
    head = ["system", *(markdown_text(m) for m in result.measures)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(result.measures)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    out = "\n".join(lines) + f"\n\n{legend(result, alpha, markdown_text)}\n"
    if notes:
        head_line, *tests = notes
        out += f"\n{markdown_text(head_line)}\n\n" + "".join(f"- {markdown_text(t)}\n" for t in tests)
    return out


def latex_table(
    result: ComparisonResult, means: pd.DataFrame, alpha: float, digits: int, notes: Sequence[str] = ()
) -> str:
    """The table as a ``tabular``: marks as superscripts, best in ``\\textbf``; the legend and ``notes`` follow as
    ``%`` comments, for a caption."""
    from toolkit.guard.escape import latex_text

    def mark(s: str) -> str:
        return "$^{" + "".join(LATEX_SYMBOLS[c] for c in s) + "}$"

    rows = cells(result, means, alpha, digits, lambda s: rf"\textbf{{{s}}}", mark, latex_text)
    lines = [
        r"\begin{tabular}{l" + "r" * len(result.measures) + "}",
        r"\toprule",
        " & ".join(["System", *(latex_text(m) for m in result.measures)]) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    said = latex_text(legend(result, alpha))
    for sym, tex in LATEX_SYMBOLS.items():
        said = said.replace(f"{sym} vs", f"${tex}$ vs")
    said = said.replace(f"{UP} better", r"$\uparrow$ better").replace(f"{DOWN} worse", r"$\downarrow$ worse")
    out = "\n".join(lines) + f"\n% {said}\n"
    return out + "".join(f"% {latex_text(t)}\n" for t in notes)


def html_table(result: ComparisonResult, means: pd.DataFrame) -> str:
    """The table as a notebook shows it (p < 0.05, four digits): marks as superscripts, best in bold, the legend
    under it."""
    from toolkit.guard.escape import html_text

    rows = cells(result, means, 0.05, 4, lambda s: f"<b>{s}</b>", lambda s: f"<sup>{s}</sup>", html_text)
    head = "".join(f"<th>{html_text(h)}</th>" for h in ["system", *result.measures])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>{html_text(legend(result))}</p>"


__all__ = ["DOWN", "LATEX_SYMBOLS", "SYMBOLS", "UP", "cells", "html_table", "latex_table", "legend", "markdown_table"]
