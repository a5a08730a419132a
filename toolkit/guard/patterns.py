"""The one door for regular expressions from outside: compiled on RE2, a linear-time engine, or refused.

A judge template's ``answer:`` pattern (and the answer marker made from it) and the rules of a query-type file
are patterns someone else may have written. Python's ``re`` backtracks: ``((?:a|aa)+)#`` over a passage of 42
``a`` takes longer than anyone waits. Every such pattern is compiled here, by ``compile_pattern``, on RE2
(Google's engine, through the maintained ``google-re2`` binding), which matches in time linear in the text
whatever the pattern; the compiled ``Pattern`` is what the code behind the door matches with, so the language
checked is the language run.

Input language: RE2's syntax (https://github.com/google/re2/wiki/Syntax): literals, ``.``, classes
(``[a-z]``, ``\\d``, ``\\s``, ``\\w``, ``\\p{L}``), groups (``(...)``, ``(?:...)``, ``(?P<name>...)``),
alternation, the repetitions ``* + ? {n,m}`` (greedy or lazy, ``m`` at most 1000), anchors ``^ $ \\A \\z \\b``,
and the flags ``(?i) (?m) (?s) (?U)``. Refused, as one ``InputFormatError(source, line, reason)`` naming the
pattern and what RE2 said: backreferences (``\\1``), lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``),
possessive and atomic groups, Python's ``\\Z`` (RE2 writes ``\\z``), ``(?x)``, a pattern RE2 cannot hold in
its memory bound (``MAX_PATTERN_MEMORY``), and text that is not UTF-8 (a lone surrogate). What RE2 means by what
it accepts is what runs, and differs from Python's ``re`` in a few places: ``\\d``, ``\\s``, ``\\w`` and ``\\b``
are ASCII (``\\d`` is ``[0-9]``: an answer ``٣`` is no label), ``\\s`` does not hold ``\\v``, ``$`` without
``(?m)`` matches only at the very end (not before a final newline), and a group repeated by ``*`` keeps the text
of its last non-empty iteration (``re`` may keep an empty last one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from toolkit.errors import InputFormatError

#: The memory RE2 may use for one compiled pattern (bytes, its default): a larger program is refused.
MAX_PATTERN_MEMORY = 8 << 20

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: How much of a refused pattern its error message quotes.
_QUOTED = 200


def _options(ignore_case: bool) -> Any:
    import re2

    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.case_sensitive = not ignore_case
    options.log_errors = False  # RE2 would print the refused pattern, raw, on stderr
    return options


class Pattern:
    """A regular expression compiled on RE2 (``compile_pattern`` makes them): ``search`` and ``finditer`` as
    Python's ``re`` has them, in linear time. ``text`` is the pattern as written."""

    __slots__ = ("_regexp", "ignore_case", "text")

    def __init__(self, text: str, ignore_case: bool, regexp: Any) -> None:
        self.text, self.ignore_case, self._regexp = text, ignore_case, regexp

    @property
    def groups(self) -> int:
        """The number of capturing groups."""
        return int(self._regexp.groups)

    def search(self, text: str) -> Any:
        """The first match in ``text``, or None."""
        return self._regexp.search(_encodable(text))

    def finditer(self, text: str) -> Iterator[Any]:
        """Every non-overlapping match in ``text``, left to right, as ``re.finditer`` finds them, but that after
        an empty match the next one starts at least one character further (``re`` may find a longer match at the
        same place, for a pattern that prefers the empty one: ``a*?``, ``|a``)."""
        last = None
        for match in self._regexp.finditer(_encodable(text)):
            if match.span() != last:  # google-re2 yields an empty match found ahead of where it searched twice
                yield match
            last = match.span()

    def __reduce__(self) -> tuple:
        # a pattern travels (to a worker process) as its text, compiled again there
        return (_compiled, (self.text, self.ignore_case))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and (self.text, self.ignore_case) == (other.text, other.ignore_case)

    def __hash__(self) -> int:
        return hash((self.text, self.ignore_case))

    def __repr__(self) -> str:
        return f"Pattern({self.text!r}{', ignore_case=True' if self.ignore_case else ''})"


def _encodable(text: str) -> str:
    """``text`` as RE2 can read it (UTF-8): a lone surrogate (a JSON ``\\ud800`` in an answer) becomes U+FFFD,
    one character for one, so positions stay those of ``text``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text


def _compiled(text: str, ignore_case: bool) -> Pattern:
    import re2

    return Pattern(text, ignore_case, re2.compile(text, _options(ignore_case)))


def compile_pattern(
    text: str,
    source: str,
    line: int | None = None,
    *,
    what: str = "",
    ignore_case: bool = False,
    min_groups: int = 0,
) -> Pattern:
    """``text`` compiled on RE2, or an ``InputFormatError(source, line, ...)`` naming ``what`` (the key it was
    given under, e.g. ``answer:``), the pattern and RE2's reason (the module docstring says what is refused);
    ``min_groups``: the capturing groups it needs."""
    import re2

    said = f"{what} " if what else ""
    if not isinstance(text, str):
        raise InputFormatError(source, line, f"{said}must be a regular expression, not {text!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputFormatError(source, line, f"{said}bad regular expression {_quoted(text)}: not UTF-8 text") from None
    try:
        pattern = _compiled(text, ignore_case)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "not a regular expression"
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise InputFormatError(
            source,
            line,
            f"{said}bad regular expression {_quoted(text)}: {reason}; patterns run on RE2, in time linear in the "
            "text, which has no backreferences (\\1) and no lookaround ((?=, (?!, (?<=, (?<!) and writes the end "
            "of the text \\z",
        ) from None
    if pattern.groups < min_groups:
        raise InputFormatError(
            source, line, f"{said}{_quoted(text)} has {pattern.groups} group(s), it needs {min_groups}: use (...)"
        )
    return pattern


def _quoted(text: str) -> str:
    """The pattern as an error message names it: quoted, cut after ``_QUOTED`` characters."""
    return repr(text) if len(text) <= _QUOTED else repr(text[:_QUOTED]) + f"... ({len(text):,} characters)"


__all__ = ["MAX_PATTERN_MEMORY", "Pattern", "compile_pattern"]
