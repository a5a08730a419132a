"""What the command prints, on stdout and stderr: every string passes ``toolkit.guard.escape``'s terminal escape.

One place per channel, so that no text from outside (a spec's title, a run name, a file name, an answer, a
value given to an option) reaches a terminal raw:

- reports and results on stdout, notes on stderr: ``echo`` (a report, by default on stdout: ``terminal_text``;
  a note or a warning, by default on stderr: ``kind="line"``, ``terminal_line``, its line feeds shown too; machine-read
  output, a TREC run, trec_eval's text or CSV: ``kind="data"``, ``terminal_data``, which prints valid data byte
  for byte; JSON: ``kind="json"``, ``terminal_json``, whose escapes read back as the same characters);
- ``Error:`` lines (click's exceptions, usage errors included, and every ``TwostageError``): ``shown_escaped``,
  called by the command group (``toolkit.cli._Group``) on every exception it lets click print;
- warnings (``twostage: warning: ...``) and log lines: ``echo`` and ``TerminalFormatter``, set up by
  ``toolkit.cli.main``; an uncaught exception's traceback: ``escaped_excepthook``;
- progress bars: ``toolkit.guard.escape.progress_bar`` (bars are made below the CLI, in the library).

``tests/guard/test_terminal_channels.py`` fails when a module of ``toolkit/cli`` prints by another way.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import click

from toolkit.guard.escape import terminal_data, terminal_json, terminal_line, terminal_text

Kind = Literal["text", "line", "data", "json"]
_KINDS = MappingProxyType({"text": terminal_text, "line": terminal_line, "data": terminal_data, "json": terminal_json})
#: The ``--format`` values whose output is machine-read (a document saved or read by a program).
_FORMAT_KINDS: Mapping[str, Kind] = MappingProxyType(
    {"json": "json", "csv": "data", "latex": "data", "markdown": "data", "trec": "data"}
)


def kind_of(fmt: str) -> Kind:
    """The ``echo`` kind of a ``--format`` value: JSON, machine-read data (CSV, LaTeX, Markdown, TREC) or a
    report for people (any other)."""
    return _FORMAT_KINDS.get(fmt, "text")


def echo(message: object = "", *, err: bool = False, nl: bool = True, kind: Kind | None = None) -> None:
    """``click.echo`` of ``message`` through the terminal escape of its kind (module docstring); by default a
    report on stdout (``"text"``) and one line on stderr (``"line"``: a note, a warning)."""
    shown = _KINDS[kind or ("line" if err else "text")]
    click.echo(shown(str(message)), err=err, nl=nl)


def shown_escaped(exc: click.ClickException) -> click.ClickException:
    """``exc`` with its message (what click prints after ``Error:``) passed through ``terminal_line`` (one line,
    whatever it holds), once however many groups it passes; returned for ``raise``."""
    if not getattr(exc, "_terminal_escaped", False):
        message = exc.format_message
        exc.format_message = lambda: terminal_line(message())  # type: ignore[method-assign]
        exc._terminal_escaped = True  # type: ignore[attr-defined]
    return exc


class TerminalFormatter(logging.Formatter):
    """A log line (its traceback included) through ``terminal_text``."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_text(super().format(record))


def log_handler() -> logging.Handler:
    """The stderr handler of the command's log: ``%(message)s`` through ``TerminalFormatter``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalFormatter("%(message)s"))
    return handler


def escaped_excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook`` for the command: the traceback Python would print, through ``terminal_text``."""
    import traceback

    sys.stderr.write(terminal_text("".join(traceback.format_exception(kind, value, tb))))
    sys.stderr.flush()


__all__ = ["Kind", "TerminalFormatter", "echo", "escaped_excepthook", "kind_of", "log_handler", "shown_escaped"]
