"""The numbers door: one parser per kind of number that comes from outside, each the function the code behind it
uses, each refusing the rest with one typed error whose message never converts the refused value.

Python's ``int()`` and ``float()`` read more than any file format or protocol means: every Unicode decimal digit
(``int("٣") == 3``), blanks around the number, ``_`` between digits; ``str.isdigit()`` is true for ``²``, which
``int()`` refuses; ``int()`` of more than 4,300 digits raises, and an ``int`` that large cannot be printed. So
nothing from outside reaches them directly: a number is read here, from ASCII text of a bounded length, into the
very value the caller uses.

The kinds (the input language of each is the regular expression; anything else is ``NumberRefused``):

- ``natural``: a non-negative integer, ``[0-9]{1,N}`` (HTTP ``Retry-After`` and ``Content-Length``, a port,
  a rerank depth, a measure's cutoff, the identifiers of an LLM's ranking). No sign, no blank, no ``_``.
  ``natural_column`` reads a column of them at once (an MS MARCO run's ranks) in the same language.
- ``integer``: a signed integer, ``[+-]?[0-9]{1,N}`` (relevance labels, the judge's label in its answer).
- ``http_integer``: ``natural`` after the optional whitespace (space, tab) HTTP allows around a field value.
- ``score``: a decimal floating-point number as pyarrow's CSV reader (which reads every run file) reads it,
  ``[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?`` or ``[+-]?(inf|infinity)`` in any case; NaN is refused
  (trec_eval's sort breaks on it), and with ``finite=True`` so are the infinities (and numbers beyond the range
  of a double, which read as infinities): a computation that divides by a range of scores asks for them finite.
- ``json_score``: a score given as a JSON value: a number (``true`` is no score) or a text ``score`` reads.
- ``env_bound``: a positive integer from the environment (``[0-9]{1,N}``, blanks around it ignored), a default
  when the variable is unset or empty; anything else is a ``ConfigError`` naming the variable.
- ``bounded_int``: an integer a YAML or JSON parser already built, at most 64 bits (what numpy and arrow hold).

``show(value)`` is how every refusal shows the value: ``ascii()`` of a text (so ``٣`` reads ``'\\u0663'``, a
control or bidi character is escaped), cut to ``SHOWN`` characters with the length said; a float by its
``repr`` (``inf``, ``1e+300``); an integer wider than 64 bits by its width. Nothing is converted to be shown.
"""

from __future__ import annotations

import math
import os
import re
from numbers import Complex, Integral, Real
from typing import Any

from toolkit.errors import ConfigError, TwostageError

#: Digits an int64 always holds: the default bound of every integer read here.
MAX_DIGITS = 18
#: The characters of a refused value a message shows.
SHOWN = 40
#: ``[+-]?[0-9]+`` in ASCII: ``str.isdigit`` is true for other characters too, so the class is spelled out.
_SIGNED = re.compile(r"[+-]?[0-9]+")
_SCORE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity)", re.IGNORECASE)
_NAN = re.compile(r"[+-]?nan", re.IGNORECASE)
_HTTP_BLANKS = " \t"


class NumberRefused(TwostageError, ValueError):
    """A number the door does not read: ``what`` it was to be, ``shown`` (``show`` of the value, never converted)
    and the ``problem``. A ``ValueError`` too, so a caller that refuses bad values as ``ValueError`` refuses it."""

    def __init__(self, what: str, value: object, problem: str) -> None:
        self.what, self.shown, self.problem = what, show(value), problem
        super().__init__(f"{what} {self.shown} {problem}")


def show(value: object) -> str:
    """A refused value as a message shows it, computed without converting it (module docstring)."""
    if isinstance(value, Complex) and not isinstance(value, Real):
        return ascii(value)
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, Integral):  # Python's and numpy's integers, as the int they are (nothing parsed)
        number = int(value)
        if number.bit_length() > 64:
            return f"<an integer of {number.bit_length():,} bits>"
        return str(number)
    if isinstance(value, Real):  # Python's and numpy's floats, as the same double
        x = float(value)
        return str(int(x)) if math.isfinite(x) and x.is_integer() and abs(x) < 2**53 else repr(x)
    if isinstance(value, str):
        if len(value) <= SHOWN:
            return ascii(value)
        return f"{ascii(value[:SHOWN])[:-1]}...' ({len(value):,} characters)"
    text = ascii(value)
    return f"<{type(value).__name__} {text[:SHOWN]}{'...' if len(text) > SHOWN else ''}>"


def _digits(text: str) -> bool:
    """``text`` is ``[0-9]+``: ASCII decimal digits only (``isdigit`` alone is true for ``²`` and ``٣``)."""
    return text.isascii() and text.isdigit()


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise NumberRefused(what, value, "is not text")
    return value


def natural(text: str, *, what: str = "number", max_digits: int = MAX_DIGITS) -> int:
    """A non-negative integer written ``[0-9]{1,max_digits}``."""
    _text(text, what)
    if not _digits(text):
        raise NumberRefused(what, text, "is not a whole number written in the digits 0-9")
    if len(text) > max_digits:
        raise NumberRefused(what, text, f"has {len(text):,} digits, more than the {max_digits} read")
    return int(text)


def natural_column(texts: Any, *, max_digits: int = MAX_DIGITS) -> tuple[Any, int | None]:
    """``natural`` over a column of texts (a pyarrow string array), vectorised: (the values as int64, or None
    when some text is refused; the position of the first text ``natural`` refuses, or None).

    The language is ``natural``'s, ``[0-9]{1,max_digits}`` in ASCII, matched by RE2 over the whole column
    (pyarrow's own integer parser reads more: ``0x10`` as 16, ``-5``); the caller names the refused text with
    ``natural`` itself, so both say the same."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(texts, pa.ChunkedArray):
        texts = pa.chunked_array([texts])
    ok = pc.match_substring_regex(texts, f"^[0-9]{{1,{max_digits}}}$")
    if pc.all(ok).as_py() is False:
        flags = ok.to_numpy(zero_copy_only=False)
        first = int(flags.argmin())
        return None, first
    return pc.cast(texts, pa.int64()).to_numpy(), None


def integer(text: str, *, what: str = "number", max_digits: int = MAX_DIGITS) -> int:
    """A signed integer written ``[+-]?[0-9]{1,max_digits}``."""
    _text(text, what)
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not _digits(digits):
        raise NumberRefused(what, text, "is not an integer written in the digits 0-9")
    if len(digits) > max_digits:
        raise NumberRefused(what, text, f"has {len(digits):,} digits, more than the {max_digits} read")
    return int(text)


def is_integer(text: str) -> bool:
    """``text`` is ``[+-]?[0-9]+`` (of any length): what ``integer`` reads, its bound apart."""
    return isinstance(text, str) and _SIGNED.fullmatch(text) is not None and text.isascii()


def http_integer(value: str, *, what: str = "header", max_digits: int = MAX_DIGITS) -> int:
    """An HTTP field value that is a non-negative integer (``Retry-After`` seconds, ``Content-Length``): the digits
    0-9 between optional spaces and tabs (RFC 9110's optional whitespace)."""
    return natural(_text(value, what).strip(_HTTP_BLANKS), what=what, max_digits=max_digits)


def score(text: str, *, what: str = "score", finite: bool = False) -> float:
    """A score as pyarrow reads a run file's (module docstring): the same double ``float`` gives for that text."""
    _text(text, what)
    if _NAN.fullmatch(text):
        raise NumberRefused(what, text, "is NaN; trec_eval's sort breaks on NaN, so it is refused")
    if not text.isascii() or not _SCORE.fullmatch(text):
        raise NumberRefused(what, text, "is not a number")
    value = float(text)
    if finite and not math.isfinite(value):
        raise NumberRefused(what, text, _NOT_FINITE)
    return value


_NOT_FINITE = "is not finite (an infinity, or beyond the range of a double)"


def json_score(value: object, *, what: str = "score", finite: bool = False) -> float:
    """A score given as a JSON value: a number (not a boolean) or a text ``score`` reads; NaN refused, and the
    infinities with ``finite``. An integer beyond the range of a double is refused, never an ``OverflowError``."""
    if isinstance(value, str):
        return score(value, what=what, finite=finite)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NumberRefused(what, value, "is not a number")
    if isinstance(value, int):
        if value.bit_length() > 1024:  # float() would raise OverflowError
            raise NumberRefused(what, value, _NOT_FINITE)
        return float(value)
    if math.isnan(value):
        raise NumberRefused(what, value, "is NaN; trec_eval's sort breaks on NaN, so it is refused")
    if finite and math.isinf(value):
        raise NumberRefused(what, value, _NOT_FINITE)
    return value


def first_not_finite(values: Any) -> int | None:
    """The position of the first NaN or infinity in a float array (numpy), None when every value is finite."""
    import numpy as np

    bad = ~np.isfinite(values)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def env_bound(name: str, default: int, *, max_digits: int = 12) -> int:
    """A positive integer from ``$name`` (``[0-9]{1,max_digits}``, blanks around it ignored), ``default`` when
    unset or empty; else a ``ConfigError`` naming the variable and showing its value."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = natural(text, what=name, max_digits=max_digits)
    except NumberRefused as exc:
        raise ConfigError(f"{name}={exc.shown}: expected a positive integer ({exc.problem})") from None
    if value <= 0:
        raise ConfigError(f"{name}={show(text)}: expected a positive integer")
    return value


def bounded_int(value: int, *, what: str = "integer", bits: int = 64) -> int:
    """An integer a parser built (YAML, JSON), refused when wider than ``bits`` bits (sign apart): such a number
    means nothing here, and Python refuses to print one of more than 4,300 digits."""
    if value.bit_length() >= bits:
        raise NumberRefused(what, value, f"is wider than {bits} bits")
    return value


__all__ = [
    "MAX_DIGITS",
    "SHOWN",
    "NumberRefused",
    "bounded_int",
    "env_bound",
    "first_not_finite",
    "http_integer",
    "integer",
    "is_integer",
    "json_score",
    "natural",
    "natural_column",
    "score",
    "show",
]
