"""The inputs door: one validator of ids, texts, labels, JSON and compressed sizes for every reader.

Every reader of a query or document id, a text, a relevance label, a JSON document or a compressed file
(TREC runs and qrels, topics, candidates JSON, JSONL corpora, run sidecars, model configs, DataFrames and
dicts given to the library) checks it here, so the rules are the same whatever the door a value came in by:

- **Ids** (``id_problem``, ``check_id``, ``check_id_column``): an id is not empty and holds no whitespace, no
  control character (C0, DEL, C1), no character ``str.splitlines()`` breaks on (U+000A..U+000D, U+001C..U+001E,
  U+0085, U+2028, U+2029) and no lone surrogate (U+D800..U+DFFF, which no UTF-8 file can hold): a TREC line
  must carry every id as it is, and a reader that splits on one of them must see the same lines as another.
- **Texts** (``check_text``): a query or passage text holds no lone surrogate (it could not be written back).
- **Line separators in TREC files** (``line_separator``): U+0085, U+2028 and U+2029 are refused anywhere in
  a run or qrels file, not only in its ids: pyarrow's CSV reader (and trec_eval) split lines on ``\\n`` only,
  ``str.splitlines()`` on these too, so two readers of one file would see different lines.
- **Relevance labels** (``check_labels``): integers with ``|label| <= MAX_LABEL`` (10^6); a larger one is an
  error naming the file, the line and the label. No table is sized by a label's value.
- **JSON** (``parse_json``, ``read_json``): at most ``MAX_JSON_DEPTH`` (64) levels of nesting, checked
  before parsing (a 100,000-deep document is one error, not a ``RecursionError``); at most
  ``max_json_bytes()`` bytes; a ``\\ud800`` escape that is not half of a surrogate pair is an error naming
  its line.
- **Compressed files** (``open_input``, ``read_input``): ``.gz`` files are decompressed as a stream; a file
  that expands more than ``max_ratio()`` times (100; ``TWOSTAGE_MAX_COMPRESSION_RATIO``) once past 64 MiB,
  or past ``max_decompressed_bytes()`` in all (8 GiB; ``TWOSTAGE_MAX_DECOMPRESSED_MB``), is refused as
  soon as it does (a 9 MB bomb stops after about 64 MB).

Every refusal is an ``InputFormatError`` naming the source and, where there is one, the line.
"""

from __future__ import annotations

import io
import json
import os
import re
import zlib
from collections.abc import Callable
from typing import IO, Any

from toolkit.errors import InputFormatError

# ---------------------------------------------------------------------- ids
#: What a query or document id may not hold: whitespace (it separates a TREC file's columns; every character
#: Python's ``str.isspace`` and ``str.splitlines`` break on, Unicode line separators included), control
#: characters (C0, DEL, C1) and lone surrogates. An id read from anywhere must be writable to a TREC line as it
#: is: a newline in a candidates JSON's doc id would otherwise plant lines in the run ``rerank`` writes.
_BAD_ID_RANGES = (
    (0x00, 0x20), (0x7F, 0x9F), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
)  # fmt: skip
_SURROGATES = (0xD800, 0xDFFF)
BAD_ID_CHAR = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in (*_BAD_ID_RANGES, _SURROGATES)) + "]")
#: The same class in RE2 syntax, for pyarrow's vectorised ``match_substring_regex`` (arrow strings are valid
#: UTF-8, so they hold no surrogate).
BAD_ID_RE2 = "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in _BAD_ID_RANGES) + "]"
_CHAR_NAMES = {" ": "a space", "\t": "a tab", "\n": "a newline", "\r": "a carriage return"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a query or document id (None: it can)."""
    if not value:
        return "is empty"
    bad = BAD_ID_CHAR.search(value)
    if bad is None:
        return None
    ch = bad.group()
    if 0xD800 <= ord(ch) <= 0xDFFF:
        kind = "a lone surrogate"
    else:
        kind = _CHAR_NAMES.get(ch, "whitespace" if ch.isspace() else "a control character")
    return f"holds {kind} (U+{ord(ch):04X}) at position {bad.start()}"


def check_id(value: str, what: str, source: str, line: int | None = None, where: str = "") -> str:
    """``value`` if it is a valid ``what`` ("query" or "document") id, else ``InputFormatError`` naming the source,
    the line (or ``where``, e.g. "entry 3, hit 0") and the id."""
    problem = id_problem(value)
    if problem is not None:
        raise InputFormatError(source, line, id_error(value, what, problem, where))
    return value


def id_error(value: str, what: str, problem: str, where: str = "") -> str:
    prefix = f"{where}: " if where else ""
    return (
        f"{prefix}{what} id {_show(value)} {problem}: ids may hold no whitespace and no control characters "
        "(a TREC file could not carry them)"
    )


def _show(value: str) -> str:
    """``repr`` of a text, lone surrogates included, that any terminal can print."""
    return repr(value) if not _SURROGATE.search(value) else ascii(value)


def check_id_column(
    ids: Any, what: str, source: str, line_of: Callable[[int], int | None] | None = None, where: str = ""
) -> None:
    """Every id of an arrow string column (``ChunkedArray``) is valid, checked in C; else the error naming the
    first bad row's line (``line_of(row)``) or, without ``line_of``, ``row N``."""
    import numpy as np
    import pyarrow.compute as pc

    bad = pc.or_(pc.equal(pc.utf8_length(ids), 0), pc.match_substring_regex(ids, BAD_ID_RE2))
    if not pc.any(bad).as_py():
        return
    row = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0])
    value = ids[row].as_py()
    line = line_of(row) if line_of is not None else None
    place = where if line_of is not None else (f"{where}row {row}" if not where else f"{where}, row {row}")
    raise InputFormatError(source, line, id_error(value, what, id_problem(value) or "", place))


def check_text(value: str, what: str, source: str, line: int | None = None, where: str = "") -> str:
    """``value`` if it holds no lone surrogate (a text that could not be written back as UTF-8)."""
    if value.isascii():
        return value
    bad = _SURROGATE.search(value)
    if bad is not None:
        prefix = f"{where}: " if where else ""
        raise InputFormatError(
            source, line, f"{prefix}{what} holds a lone surrogate (U+{ord(bad.group()):04X}) at position {bad.start()}"
        )
    return value


# ------------------------------------------------------ TREC line separators
#: U+0085, U+2028 and U+2029 in UTF-8: line breaks for ``str.splitlines()``, not for pyarrow nor trec_eval.
_UNICODE_BREAK = re.compile(rb"\xc2\x85|\xe2\x80[\xa8\xa9]")


def line_separator(data: bytes, source: str) -> InputFormatError | None:
    """The error for the first Unicode line separator (U+0085, U+2028, U+2029) in a TREC file's bytes."""
    m = _UNICODE_BREAK.search(data)
    if m is None:
        return None
    ch = m.group().decode("utf-8")
    start = data.rfind(b"\n", 0, m.start()) + 1
    column = len(data[start : m.start()].decode("utf-8", "replace")) + 1
    return InputFormatError(
        source,
        data.count(b"\n", 0, m.start()) + 1,
        f"line separator U+{ord(ch):04X} at column {column}: str.splitlines() ends a line there, trec_eval does not, "
        "so the file would read as different lines to different tools",
    )


# ------------------------------------------------------------------- labels
#: The largest relevance label (in absolute value) any reader accepts.
MAX_LABEL = 10**6


def check_labels(labels: Any, source: str, line_of: Callable[[int], int | None] | None = None) -> None:
    """Every label (an int64 numpy array) has ``|label| <= MAX_LABEL``; else the error naming the first one's line
    (``line_of(row)``, else ``row N``)."""
    import numpy as np

    out = np.flatnonzero((labels > MAX_LABEL) | (labels < -MAX_LABEL))
    if not len(out):
        return
    row = int(out[0])
    line = line_of(row) if line_of is not None else None
    where = "" if line_of is not None else f"row {row}: "
    raise InputFormatError(
        source,
        line,
        f"{where}relevance label {int(labels[row])} is out of range: labels must be integers within ±{MAX_LABEL:,}",
    )


def parse_label(token: str, source: str, line: int | None) -> int:
    """One relevance label from text: an integer within ``±MAX_LABEL``."""
    if not re.fullmatch(r"[+-]?\d+", token):
        raise InputFormatError(source, line, f"relevance {token!r} is not an integer")
    if len(token.lstrip("+-")) > 7 or abs(int(token)) > MAX_LABEL:
        raise InputFormatError(
            source, line, f"relevance label {token} is out of range: labels must be integers within ±{MAX_LABEL:,}"
        )
    return int(token)


# --------------------------------------------------------- compressed input
RATIO_ENV = "TWOSTAGE_MAX_COMPRESSION_RATIO"
SIZE_ENV = "TWOSTAGE_MAX_DECOMPRESSED_MB"
DEFAULT_RATIO = 100
DEFAULT_MAX_DECOMPRESSED_MB = 8192
#: Below this many decompressed bytes the ratio is not checked (a small file may compress very well).
RATIO_FLOOR = 64 << 20
COMPRESSED_SUFFIXES = (".gz",)


def _env_number(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        from toolkit.errors import ConfigError

        raise ConfigError(f"{name}={text!r}: expected a positive integer") from None
    if value <= 0:
        from toolkit.errors import ConfigError

        raise ConfigError(f"{name}={text!r}: expected a positive integer")
    return value


def max_ratio() -> int:
    """How many times a compressed input may expand (past ``RATIO_FLOOR``): ``TWOSTAGE_MAX_COMPRESSION_RATIO``."""
    return _env_number(RATIO_ENV, DEFAULT_RATIO)


def max_decompressed_bytes() -> int:
    """How many bytes a compressed input may expand to in all: ``TWOSTAGE_MAX_DECOMPRESSED_MB`` (MiB)."""
    return _env_number(SIZE_ENV, DEFAULT_MAX_DECOMPRESSED_MB) << 20


class _Counting(io.RawIOBase):
    """A binary file that counts the bytes read from it (the compressed side of a stream)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.count = fh, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = self.fh.readinto(buf)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0

    def close(self) -> None:
        self.fh.close()
        super().close()


class BoundedStream(io.RawIOBase):
    """A decompressed stream that stops with ``InputFormatError`` once it expands past the bounds."""

    def __init__(self, path: str, inner: IO[bytes], counted: _Counting) -> None:
        self.path, self.inner, self.counted = path, inner, counted
        self.out = 0
        self.ratio, self.limit = max_ratio(), max_decompressed_bytes()

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        try:
            n = self.inner.readinto(buf)  # type: ignore[attr-defined]
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise InputFormatError(self.path, None, f"cannot decompress: {exc}") from None
        self.out += n or 0
        if self.out > self.limit:
            raise InputFormatError(
                self.path,
                None,
                f"decompresses to more than {self.limit >> 20} MiB; raise {SIZE_ENV} if the file is what you meant",
            )
        if self.out > RATIO_FLOOR and self.out > self.ratio * max(self.counted.count, 1):
            raise InputFormatError(
                self.path,
                None,
                f"expands more than {self.ratio} times when decompressed (a compression bomb?); "
                f"raise {RATIO_ENV} if the file is what you meant",
            )
        return n or 0

    def close(self) -> None:
        self.inner.close()
        self.counted.close()
        super().close()


def open_input(path: str | os.PathLike) -> IO[bytes]:
    """The bytes of an input file as a buffered stream: ``.gz`` decompressed with the bounds on size and ratio.

    A missing file or a folder is ``InputFormatError``."""
    import gzip

    p = str(path)
    try:
        raw = open(p, "rb")  # noqa: SIM115 (the caller closes the stream)
    except FileNotFoundError:
        raise InputFormatError(p, None, "no such file") from None
    except IsADirectoryError:
        raise InputFormatError(p, None, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputFormatError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if not p.endswith(COMPRESSED_SUFFIXES):
        return raw
    counted = _Counting(raw)
    inner = gzip.GzipFile(fileobj=io.BufferedReader(counted, 1 << 16), mode="rb")
    return io.BufferedReader(BoundedStream(p, inner, counted), 1 << 20)  # type: ignore[arg-type]


def read_input(path: str | os.PathLike) -> bytes:
    """All the bytes of an input file (``.gz`` decompressed, bounded as ``open_input`` bounds it)."""
    with open_input(path) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise InputFormatError(str(path), None, f"cannot read: {exc}") from None


# --------------------------------------------------------------------- JSON
#: The deepest nesting of arrays and objects any JSON input may have.
MAX_JSON_DEPTH = 64
JSON_SIZE_ENV = "TWOSTAGE_MAX_JSON_MB"
DEFAULT_MAX_JSON_MB = 4096
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: A ``\\uXXXX`` surrogate escape not itself escaped: a valid pair (group 1), else a lone high or low half.
_SURROGATE_ESCAPES = re.compile(
    rb"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)


def max_json_bytes() -> int:
    """The largest JSON document read whole: ``TWOSTAGE_MAX_JSON_MB`` (MiB, default 4096)."""
    return _env_number(JSON_SIZE_ENV, DEFAULT_MAX_JSON_MB) << 20


_DEPTH_BLOCK = 1 << 22


def _too_deep(data: bytes, limit: int) -> int | None:
    """The offset where the nesting of ``data`` first passes ``limit`` levels, else None (strings skipped).

    Vectorised a few MiB at a time: unescaped quotes toggle "inside a string", brackets outside strings count.
    """
    import numpy as np

    if data.count(b"[") + data.count(b"{") <= limit:
        return None
    depth, inside, slashes = 0, False, 0
    block = _DEPTH_BLOCK
    for base in range(0, len(data), block):
        b = np.frombuffer(data, np.uint8, count=min(block, len(data) - base), offset=base)
        idx = np.arange(len(b))
        last_plain = np.maximum.accumulate(np.where(b == 92, -1, idx))  # last non-backslash at or before i
        quotes = np.flatnonzero(b == 34)
        prev = quotes - 1
        before = np.where(prev >= 0, last_plain[np.maximum(prev, 0)], -1)
        run = prev - before  # backslashes right before each quote in this block
        run = np.where(before < 0, run + slashes, run)
        quotes = quotes[run % 2 == 0]
        opens = np.flatnonzero((b == 91) | (b == 123))
        closes = np.flatnonzero((b == 93) | (b == 125))
        parity = int(inside)
        opens = opens[(np.searchsorted(quotes, opens) + parity) % 2 == 0]
        closes = closes[(np.searchsorted(quotes, closes) + parity) % 2 == 0]
        pos = np.concatenate([opens, closes])
        step = np.concatenate([np.ones(len(opens), np.int64), -np.ones(len(closes), np.int64)])
        order = np.argsort(pos, kind="stable")
        level = depth + np.cumsum(step[order])
        if len(level) and level.max() > limit:
            return base + int(pos[order][int(np.argmax(level > limit))])
        depth = int(level[-1]) if len(level) else depth
        inside = (len(quotes) + parity) % 2 == 1
        trail = len(b) - 1 - int(last_plain[-1])
        slashes = trail + (slashes if trail == len(b) else 0)
    return None


def parse_json(data: bytes | str, source: str, line: int | None = None, max_bytes: int | None = None) -> Any:
    """A JSON document (bytes or text) checked for size, nesting and lone surrogate escapes, then parsed.

    ``line``: the document is line ``line`` of a JSONL file (errors name it); else errors name the document's
    own line."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    limit = max_json_bytes() if max_bytes is None else max_bytes
    if len(raw) > limit:
        raise InputFormatError(source, line, f"JSON document of {len(raw):,} bytes, more than the {limit:,} allowed")

    def where(offset: int) -> int:
        return line if line is not None else raw.count(b"\n", 0, offset) + 1

    deep = _too_deep(raw, MAX_JSON_DEPTH)
    if deep is not None:
        raise InputFormatError(source, where(deep), f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputFormatError(source, line if line is not None else exc.lineno, f"invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise InputFormatError(source, where(exc.start), "not valid UTF-8") from None
    except RecursionError:  # not reached: _too_deep bounds the nesting first
        raise InputFormatError(source, line, f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    if _SURROGATE_ESCAPE.search(raw):
        for m in _SURROGATE_ESCAPES.finditer(raw):
            if len(m.group(1)) == 6:
                raise InputFormatError(
                    source,
                    where(m.start(1)),
                    f"lone surrogate escape {m.group(1).decode()} (half of a UTF-16 pair): not a character",
                )
    return doc


def read_json(path: str | os.PathLike, max_bytes: int | None = None) -> Any:
    """The JSON document in ``path`` (``.gz`` decompressed), read through ``parse_json``'s bounds."""
    p = str(path)
    limit = max_json_bytes() if max_bytes is None else max_bytes
    with open_input(p) as fh:
        raw = fh.read(limit + 1)
    return parse_json(raw, p, max_bytes=limit)


def read_json_object(path: str | os.PathLike, max_bytes: int | None = None) -> dict:
    """``read_json`` for a file that must hold a JSON object."""
    doc = read_json(path, max_bytes)
    if not isinstance(doc, dict):
        raise InputFormatError(str(path), None, "expected a JSON object")
    return doc


def iter_json_lines(lines: Any, path: str) -> Any:
    """(1-based line number, object) of every non-blank line of a JSONL file, each read by ``parse_json``.

    Lines split as ``\\n`` splits them (a file object's lines), never on U+2028."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        obj = parse_json(line, str(path), number)
        if not isinstance(obj, dict):
            raise InputFormatError(str(path), number, "expected a JSON object")
        yield number, obj


def jsonl_lines(path: str | os.PathLike) -> Any:
    """The lines of a JSONL file as bytes (``.gz`` bounded), split on ``\\n`` only, a leading BOM dropped."""
    with open_input(path) as fh:
        for number, raw in enumerate(fh, start=1):
            yield raw[3:] if number == 1 and raw.startswith(b"\xef\xbb\xbf") else raw


__all__ = [
    "BAD_ID_CHAR",
    "BAD_ID_RE2",
    "MAX_JSON_DEPTH",
    "MAX_LABEL",
    "check_id",
    "check_id_column",
    "check_labels",
    "check_text",
    "id_error",
    "id_problem",
    "iter_json_lines",
    "jsonl_lines",
    "line_separator",
    "open_input",
    "parse_json",
    "parse_label",
    "read_input",
    "read_json",
    "read_json_object",
]
