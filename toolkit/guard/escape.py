"""Escaping for every format a text from outside lands in: HTML, Markdown, LaTeX and CSV.

A run name, query text, document id, stage name or note is data in every output, never markup. Every
writer of a page, a Markdown file, a LaTeX table or a CSV file escapes what it did not write itself through
this one module, so the rules live in one place:

- HTML (``html_text``): the five characters ``& < > " '`` as entities (safe in text and in quoted
  attributes), as pandas' ``to_html`` does;
- Markdown (``markdown_text``): CommonMark renderers pass raw HTML through, so ``<`` and ``>`` are
  backslash-escaped (no tag, no autolink), as are ``[ ]`` (no link, no image: no ``javascript:`` URL),
  ``|`` (no new table cell), `````` ` ``````, ``*`` and ``\\``; an ``&`` that would start an entity
  reference is escaped; line breaks become spaces (a row stays one row). ``markdown_code`` puts a text in a
  code span that no backtick inside can close;
- LaTeX (``latex_text``): the ten special characters ``\\ & % $ # _ { } ~ ^`` and ``< > |``, which
  the default OT1 encoding prints as other glyphs, as text commands; line breaks become spaces;
- plot labels (``plot_text``): matplotlib reads a text holding two ``$`` as math (``$\\frac{$`` stops the
  drawing with a parse error, ``$x^2$`` is typeset), so every ``$`` is escaped as ``\\$`` (printed as ``$``);
- CSV (``csv_text``, ``csv_frame``): a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return gets a leading ``'`` so a spreadsheet shows it as text instead of running it as a formula
  (OWASP's advice); numbers, and texts that are numbers (``-0.5``), are left as they are. A cell holding a
  line break is quoted whatever the break: Python's csv module quotes only for the characters of its line end,
  so with ``\n`` line ends a bare carriage return stayed unquoted and readers (Python's csv, spreadsheets) split
  the row there. Writers use ``CSV_LINE_END`` and pass the text through ``csv_newlines`` (``\n`` line ends).

In the three formats people read (HTML, Markdown, LaTeX), the Unicode bidirectional embedding, override
and isolate controls (U+202A..U+202E, U+2066..U+2069) are shown as ``[U+202E]``: otherwise a name can
reverse the text that follows it on screen ("Trojan Source"). CSV keeps every character (it is data).

``Raw`` marks a text the writer built itself in the target format (``**differs**`` in a Markdown cell):
the table helpers pass it through unchanged.

Terminals (``terminal_text``): a terminal acts on what it prints, so every string twostage prints (reports on
stdout, ``Error:`` lines, warnings, log lines, progress bars) passes this escape, once per channel (the CLI's
``toolkit.cli.terminal``; progress bars through ``progress_bar``). It shows, in the same ``[U+XXXX]`` style as
above, every character a terminal would act on or that hides or reorders text: the C0 controls but the line
feed and the tab (a report's lines and trec_eval's columns), so ESC (every escape sequence: ``ESC c`` resets the
terminal, ``ESC ( 0`` switches its character set, OSC sets titles and links), BEL and the carriage return (it
would let a text overwrite its own line); DEL; the C1 controls U+0080..U+009F (CSI and OSC on their own); every
format character (Unicode category Cf: the bidi controls, U+200E/U+200F/U+061C marks, zero-width characters,
the BOM, tag characters); the line and paragraph separators U+2028/U+2029; lone surrogates (a file name that was
not UTF-8). The escape is injective: a ``[`` that would start a text reading ``[U+XXXX]`` is itself shown as
``[U+005B]``, so every ``[U+XXXX]`` on screen stands for that one character and two different texts never look
the same. A text printed as one line (an ``Error:`` line, a warning: ``terminal_line``) shows its line feeds too. Machine-read output (a TREC run, trec_eval's text, CSV: ``terminal_data``; JSON: ``terminal_json``)
shows the same characters (JSON as ``\\uXXXX`` escapes, which read back as the same text) and leaves every
``[`` as it is: ids may hold no control or format character, so valid data is printed byte for byte.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from types import MappingProxyType
from typing import Any


class Raw(str):
    """Text already in the target format, written by twostage itself (never data from outside)."""


_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def visible_controls(text: str) -> str:
    """Bidirectional embedding/override/isolate controls as ``[U+XXXX]`` (what people read stays in order)."""
    return _BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


# ------------------------------------------------------------------ HTML
def html_text(value: object) -> str:
    """``value`` as HTML text or a quoted attribute value: entities for ``& < > " '``, bidi controls shown."""
    return html.escape(visible_controls(str(value)), quote=True)


def html_frame(frame: Any, **to_html: Any) -> str:
    """A DataFrame as an HTML table (pandas escapes the cells; bidi controls in labels and cells are shown)."""

    def show(v: object) -> object:
        return visible_controls(v) if isinstance(v, str) else v

    shown = frame.rename(index=show, columns=show)
    shown = shown.apply(lambda col: col.map(show)) if len(shown.columns) else shown
    return shown.to_html(escape=True, **to_html)


# ------------------------------------------------------------------ Markdown
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])|&(?=#?[0-9A-Za-z]+;)|\r\n|[\r\n]")


def _md_replace(m: re.Match) -> str:
    if m.group(1):
        return "\\" + m.group(1)
    return "\\&" if m.group(0) == "&" else " "


def markdown_text(value: object) -> str:
    """``value`` as Markdown text (paragraph, heading, list item or table cell) that renders as itself."""
    if isinstance(value, Raw):
        return str(value)
    return _MD_SPECIAL.sub(_md_replace, visible_controls(str(value)))


def markdown_code(value: object) -> str:
    """``value`` as a Markdown code span: fenced by more backticks than any run inside it, line breaks as
    spaces (inside a code span backslashes are literal, so escaping is by the fence alone). In a table the
    ``|`` is still escaped: GFM splits cells before it reads code spans."""
    text = re.sub(r"\r\n|[\r\n]", " ", visible_controls(str(value)))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_cell(value: object) -> str:
    """A Markdown table cell: ``markdown_text``; ``Raw`` passes through with only its ``|`` escaped."""
    if isinstance(value, Raw):
        return re.sub(r"(?<!\\)\|", r"\|", str(value))
    return markdown_text(value)


# ------------------------------------------------------------------ LaTeX
_LATEX = MappingProxyType(
    {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "<": r"\textless{}",
        ">": r"\textgreater{}",
        "|": r"\textbar{}",
        "\r\n": " ",
        "\r": " ",
        "\n": " ",
    }
)
_LATEX_SPECIAL = re.compile("|".join(re.escape(k) for k in sorted(_LATEX, key=len, reverse=True)))


def latex_text(value: object) -> str:
    """``value`` as LaTeX text: each special character as the command that prints it, in one pass."""
    if isinstance(value, Raw):
        return str(value)
    return _LATEX_SPECIAL.sub(lambda m: _LATEX[m.group()], visible_controls(str(value)))


# ------------------------------------------------------------------ plots
def plot_text(value: object) -> str:
    """``value`` as a matplotlib label, title or tick text: printed as it is, never read as math text."""
    return str(value).replace("$", r"\$")


# ------------------------------------------------------------------ CSV
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.IGNORECASE)


def csv_text(value: Any) -> Any:
    """A CSV cell: a text starting with ``= + - @``, a tab or a carriage return is prefixed with ``'`` (a
    spreadsheet then shows it instead of evaluating it); numbers and number texts are returned unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


#: The line end to give ``csv.writer`` and ``DataFrame.to_csv``: every cell holding ``\r`` or ``\n`` is then
#: quoted. ``csv_newlines`` turns the row ends (never those inside a quoted cell) into ``\n``.
CSV_LINE_END = "\r\n"
_CSV_ROW_END = re.compile(r'("[^"]*")|\r\n')


def csv_newlines(text: str) -> str:
    """CSV written with ``CSV_LINE_END`` with ``\n`` row ends; line breaks inside quoted cells are kept.

    Quotes come in pairs in CSV (a ``"`` in a cell is doubled, and such a cell is quoted), so each quoted
    stretch is matched whole and every ``\r\n`` outside one ends a row (with no quote at all, every one does)."""
    if '"' not in text:
        return text.replace("\r\n", "\n")
    return _CSV_ROW_END.sub(lambda m: m.group(1) or "\n", text)


def csv_frame(frame: Any) -> Any:
    """A copy of ``frame`` whose text cells and column names are ``csv_text``; numeric columns untouched."""
    out = frame.rename(columns=lambda c: csv_text(c) if isinstance(c, str) else c)
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            out[col] = out[col].map(csv_text)
    return out


def csv_table(frame: Any) -> str:
    """``csv_newlines(csv_frame(frame).to_csv(index=False, lineterminator=CSV_LINE_END))``: the same text.

    pandas turns each float column into text with numpy's ``astype(str)`` (the shortest text that reads back
    as the same number, as Python's ``repr`` writes it, ~5x slower) and hands the cells to ``csv.writer``; here
    float and integer columns are turned into text by ``repr``/``str`` (once per distinct value) and written by
    the same ``csv.writer`` (missing cells empty, as pandas's ``na_rep``); ``csv_text`` is applied to every cell
    of an object column and, in a text column, to the cells that start as a formula (found by the column's
    vectorised ``startswith``). Columns of any other kind than float64, int64, text or object, or labels that are
    not plain, are left to pandas."""
    import csv
    import io

    import numpy as np
    import pandas as pd

    plain = len(frame.columns) > 0 and not isinstance(frame.columns, pd.MultiIndex)
    if not plain or not all(str(dt) in ("float64", "int64", "object", "string", "str") for dt in frame.dtypes):
        return csv_newlines(csv_frame(frame).to_csv(index=False, lineterminator=CSV_LINE_END))
    cells = []
    for i in range(len(frame.columns)):
        col = frame.iloc[:, i]
        if col.dtype == np.float64:
            v = col.to_numpy()
            text = _texts_of_distinct(v, repr)
            for j in np.flatnonzero(np.isnan(v)).tolist():
                text[j] = ""
        elif col.dtype == np.int64:
            text = _texts_of_distinct(col.to_numpy(), str)
        else:  # the cells as csv_text gives them (csv.writer writes each with str), missing ones empty
            text = col.tolist()
            if col.dtype == object:
                text = list(map(csv_text, text))
            else:
                formula = col.str.startswith(_FORMULA_START).to_numpy(dtype=bool, na_value=False)
                for j in np.flatnonzero(formula).tolist():
                    text[j] = csv_text(text[j])
            for j in np.flatnonzero(col.isna().to_numpy()).tolist():
                text[j] = ""
        cells.append(text)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=CSV_LINE_END)
    writer.writerow([str(csv_text(c)) if isinstance(c, str) else str(c) for c in frame.columns])
    writer.writerows(zip(*cells))
    return csv_newlines(buf.getvalue())


def _texts_of_distinct(values: Any, text: Any) -> list[str]:
    """``list(map(text, values.tolist()))`` for a float64 or int64 array, ``text`` called once per distinct bit
    pattern (so 0.0 and -0.0 stay apart; a column repeats its values often)."""
    import numpy as np

    distinct, at = np.unique(np.ascontiguousarray(values).view(np.int64), return_inverse=True)
    texts = list(map(text, distinct.view(values.dtype).tolist()))
    return list(map(texts.__getitem__, at.ravel().tolist()))


# ------------------------------------------------------------------ terminals
#: The Unicode categories a terminal must not receive raw: controls (Cc), format characters (Cf, bidi controls
#: included), lone surrogates (Cs), line and paragraph separators (Zl, Zp).
TERMINAL_SHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: The two controls a terminal text keeps: a report's line breaks and trec_eval's column separators.
TERMINAL_KEPT = frozenset("\n\t")
# A look-alike of what the escape writes: its ``[`` is shown too, so that the escape is injective.
_LOOK_ALIKE = r"\[(?=U\+[0-9A-F]{4,6}\])"
# In an ASCII text only these can be shown; in any other text every character outside printable ASCII is a
# candidate, taken in runs and looked at one by one only when the run is not all printable.
_ASCII_SHOWN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|" + _LOOK_ALIKE)
_ASCII_SHOWN_DATA = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CANDIDATES = re.compile(r"[^\x20-\x7e\n\t]+|" + _LOOK_ALIKE)
_CANDIDATES_DATA = re.compile(r"[^\x20-\x7e\n\t]+")


def terminal_shown(char: str) -> bool:
    """True for a character ``terminal_text`` shows as ``[U+XXXX]`` (what a terminal acts on or hides)."""
    return char not in TERMINAL_KEPT and unicodedata.category(char) in TERMINAL_SHOWN_CATEGORIES


def _shown_run(run: str, show) -> str:
    if run.isprintable():  # letters, digits, marks and spaces of any script: nothing to show
        return run
    return "".join(show(c) if terminal_shown(c) else c for c in run)


def _as_code_point(char: str) -> str:
    return f"[U+{ord(char):04X}]"


def _as_json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: JSON writes the UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape(text: str, ascii_shown: re.Pattern, candidates: re.Pattern, show) -> str:
    if text.isascii():
        return ascii_shown.sub(lambda m: show(m.group()), text) if ascii_shown.search(text) else text
    return candidates.sub(lambda m: _shown_run(m.group(), show) if m.group() != "[" else show("["), text)


def terminal_text(value: object) -> str:
    """``value`` as text a terminal prints as it is: each character it would act on or that hides or reorders
    text (C0 controls but line feed and tab, DEL, C1 controls, format characters, U+2028/U+2029, lone
    surrogates) shown as ``[U+XXXX]``, and a ``[`` starting a look-alike of that as ``[U+005B]`` (the module
    docstring). A text without such characters is returned unchanged."""
    return _escape(str(value), _ASCII_SHOWN, _CANDIDATES, _as_code_point)


def terminal_line(value: object) -> str:
    """``terminal_text`` for a text printed as one line (an ``Error:`` line, a warning): its line feeds are shown
    too (``[U+000A]``), so a name holding one cannot start a line of its own."""
    return terminal_text(value).replace("\n", "[U+000A]")


def terminal_data(value: object) -> str:
    """Machine-read text (a TREC run, trec_eval's output, CSV) for a terminal: the characters ``terminal_text``
    shows, shown alike, every other character (``[`` included) kept, so valid data is printed byte for byte."""
    return _escape(str(value), _ASCII_SHOWN_DATA, _CANDIDATES_DATA, _as_code_point)


def terminal_json(text: str) -> str:
    """JSON text for a terminal: each character ``terminal_text`` shows written as its JSON escape (``\\u202e``;
    outside the BMP as a surrogate pair), which a JSON reader reads back as the same character. Such characters
    occur only inside JSON strings (``json.dumps`` escapes the C0 controls itself), so the document means the
    same."""
    return _escape(text, _ASCII_SHOWN_DATA, _CANDIDATES_DATA, _as_json_escape)


@functools.cache
def _progress_class(auto: bool) -> Any:
    if auto:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm

    class TerminalBar(tqdm):  # type: ignore[misc, valid-type]
        """A tqdm bar whose description, postfix and unit, and the lines ``write`` prints, pass
        ``terminal_text`` (what the bar shows is built from ``format_dict``, in the terminal and in notebooks)."""

        @property
        def format_dict(self) -> Any:
            shown = super().format_dict
            for key in ("prefix", "postfix", "unit"):
                if isinstance(shown.get(key), str):
                    shown[key] = terminal_text(shown[key])
            return shown

        @classmethod
        def write(cls, s: str, file: Any = None, end: str = "\n", nolock: bool = False) -> None:
            super().write(terminal_text(s), file=file, end=end, nolock=nolock)

    return TerminalBar


def progress_bar(*, auto: bool = True, **options: Any) -> Any:
    """A tqdm progress bar (``tqdm.auto``'s, or plain ``tqdm``'s with ``auto=False``) whose description, postfix
    and written lines pass ``terminal_text``: every progress bar of twostage is made here."""
    return _progress_class(auto)(**options)


__all__ = [
    "CSV_LINE_END",
    "Raw",
    "csv_frame",
    "csv_newlines",
    "csv_table",
    "csv_text",
    "html_frame",
    "html_text",
    "latex_text",
    "markdown_cell",
    "markdown_code",
    "markdown_text",
    "plot_text",
    "progress_bar",
    "terminal_data",
    "terminal_json",
    "terminal_line",
    "terminal_shown",
    "terminal_text",
    "visible_controls",
]
