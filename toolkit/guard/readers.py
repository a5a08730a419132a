"""The inputs door: one opening function for every data file, and one validator of ids, texts, labels, JSON and
compressed sizes for every reader.

Every reader of a query or document id, a text, a relevance label, a JSON document or a compressed file
(TREC runs and qrels, topics, candidates JSON, JSONL corpora, run sidecars, model configs, DataFrames and
dicts given to the library) checks it here, so the rules are the same whatever the door a value came in by:

- **Opening** (``open_input``, ``read_input``, ``open_stdin``; ``open_regular`` for bytes as they are): a data
  file is a regular file or standard input (``-``, where a reader takes it), decided on ``stat`` and again on
  the opened descriptor (``fstat``: opened without waiting, so a FIFO swapped in is refused too); a folder, a
  device (``/dev/zero``), a FIFO or a socket is one error naming what it is. A text input is refused at its
  first NUL byte (``NulByteError``, with the line and column) before anything after it is read.
- **Ids** (``id_problem``, ``check_id``, ``check_id_column``): an id is not empty and holds no whitespace, no
  control character (C0, DEL, C1), no character ``str.splitlines()`` breaks on (U+000A..U+000D, U+001C..U+001E,
  U+0085, U+2028, U+2029), no lone surrogate (U+D800..U+DFFF, which no UTF-8 file can hold) and no format
  character (Unicode category Cf, ``format_characters``: U+FEFF, zero-width and bidi controls, ...): a TREC line
  must carry every id as it is, a reader that splits on one of them must see the same lines as another, and an
  id must not look like another id it is not. Refusals name the line and, where the reader knows it, the column.
- **Texts** (``check_text``): a query or passage text holds no lone surrogate (it could not be written back).
- **Line separators in TREC files** (``line_separator``): U+0085, U+2028 and U+2029 are refused anywhere in
  a run or qrels file, not only in its ids: pyarrow's CSV reader (and trec_eval) split lines on ``\\n`` only,
  ``str.splitlines()`` on these too, so two readers of one file would see different lines.
- **Relevance labels** (``parse_label``, ``check_labels``): integers with ``|label| <= MAX_LABEL`` (10^6), read
  from text by the numbers door (``toolkit.guard.numbers``: ``[+-]?[0-9]+``, ASCII digits only); a larger one is
  an error naming the file, the line and the label as written (an infinity in a DataFrame is shown ``inf``, never
  converted). No table is sized by a label's value.
- **JSON** (``parse_json``, ``read_json``): at most ``MAX_JSON_DEPTH`` (64) levels of nesting, checked
  before parsing (a 100,000-deep document is one error, not a ``RecursionError``); at most
  ``max_json_bytes()`` bytes; a ``\\ud800`` escape that is not half of a surrogate pair is an error naming
  its line; so is an integer of more than 4,300 digits (Python's ``int`` refuses to read it).
- **Compressed files** (``open_input``, ``read_input``): ``.gz`` files are decompressed as a stream; a file
  that expands more than ``max_ratio()`` times (100; ``TWOSTAGE_MAX_COMPRESSION_RATIO``) once past 64 MiB,
  or past ``max_decompressed_bytes()`` in all (8 GiB; ``TWOSTAGE_MAX_DECOMPRESSED_MB``), is refused as
  soon as it does (a 9 MB bomb stops after about 64 MB).

Every refusal is an ``InputFormatError`` naming the source and, where there is one, the line.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import IO, Any

from toolkit.errors import InputFormatError
from toolkit.guard.numbers import SHOWN, NumberRefused, env_bound, integer, is_integer, show

# ---------------------------------------------------------------------- ids
#: What a query or document id may not hold besides format characters: whitespace (it separates a TREC file's
#: columns; every character Python's ``str.isspace`` and ``str.splitlines`` break on, Unicode line separators
#: included), control characters (C0, DEL, C1) and lone surrogates. An id read from anywhere must be writable to
#: a TREC line as it is: a newline in a candidates JSON's doc id would otherwise plant lines in the run ``rerank``
#: writes.
_BAD_ID_RANGES = (
    (0x00, 0x20), (0x7F, 0x9F), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
    (0x2065, 0x2065),  # unassigned, inside the format block U+2060-U+206F: refused as the block is
)  # fmt: skip
_SURROGATES = (0xD800, 0xDFFF)
#: The characters an ASCII id may not hold (no format character is ASCII): checked without the full rule.
_ASCII_BAD_ID = re.compile("[\x00-\x20\x7f]")
_CHAR_NAMES = MappingProxyType({" ": "a space", "\t": "a tab", "\n": "a newline", "\r": "a carriage return"})
_SURROGATE = re.compile("[\ud800-\udfff]")

#: The format characters (Unicode category Cf) of the Unicode version of the table, as ranges: what a scan of
#: ``unicodedata`` over every code point finds under that version (the table case ``ids-refuse-every-format-
#: character`` scans again and compares). Under another version the scan itself is the rule (``format_characters``).
_FORMAT_TABLE = (
    "14.0.0",
    (
        (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891),
        (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064),
        (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
        (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
    ),
)  # fmt: skip


def _ranges(points: Iterable[int]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for cp in points:
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return tuple((a, b) for a, b in out)


def scan_format_characters() -> tuple[tuple[int, int], ...]:
    """Every code point whose ``unicodedata.category`` is ``Cf`` (format), over all code points, as ranges."""
    import sys
    import unicodedata

    return _ranges(cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf")


@functools.cache
def format_characters() -> tuple[tuple[int, int], ...]:
    """The format characters (category Cf: the byte-order mark U+FEFF, zero-width U+200B-U+200D, bidi controls
    U+200E/F, U+202A-U+202E, U+2066-U+2069, word joiner and invisible operators U+2060-U+2064, the soft hyphen
    U+00AD, tags U+E0001, U+E0020-U+E007F, ...) of this Python's ``unicodedata``, as ranges. An id holding one
    looks like the id without it and is another id: ``q2`` and ``\\ufeffq2`` are two queries.

    The table of the module when its Unicode version is this Python's, else the scan over all code points
    (about 0.2 s, once per process)."""
    import unicodedata

    version, table = _FORMAT_TABLE
    return table if unicodedata.unidata_version == version else scan_format_characters()


class _IdRule:
    """The id rule's refused characters, compiled three ways: a Python regex, an RE2 class (arrow) and the UTF-8
    prefixes of the non-ASCII ones (the run and qrels readers' trigger for the C check of ids)."""

    def __init__(self, format_ranges: tuple[tuple[int, int], ...]) -> None:
        ranges = sorted((*_BAD_ID_RANGES, *format_ranges))
        self.format = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in format_ranges) + "]")
        self.char = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in (*ranges, _SURROGATES)) + "]")
        # arrow strings are valid UTF-8, so they hold no surrogate
        self.re2 = "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges) + "]"
        prefixes: set[bytes] = set()
        for a, b in ranges:
            for cp in range(max(a, 0x80), b + 1):
                raw = chr(cp).encode("utf-8")
                # a two-byte character's lead byte alone (a few more files checked, far fewer prefixes searched)
                prefixes.add(raw[:1] if len(raw) == 2 else raw[:-1])
        self.prefixes = tuple(sorted(prefixes))
        self.leads = bytes(sorted({p[0] for p in prefixes}))
        self.not_leads = bytes(b for b in range(256) if b not in self.leads)
        self.by_lead = {lead: tuple(p for p in self.prefixes if p[0] == lead) for lead in self.leads}

    def may_hold(self, data: bytes) -> bool:
        """Whether UTF-8 ``data`` may hold a non-ASCII character the rule refuses (never False when it does)."""
        present = data.translate(None, self.not_leads)  # the lead bytes of interest it holds: one C pass
        if not present:
            return False
        return any(bytes([lead]) in present and any(p in data for p in group) for lead, group in self.by_lead.items())


@functools.cache
def _rule() -> _IdRule:
    return _IdRule(format_characters())


def __getattr__(name: str) -> Any:
    # the compiled rule, under the names it had when it was two constants; built on first use, not at import
    if name == "BAD_ID_CHAR":
        return _rule().char
    if name == "BAD_ID_RE2":
        return _rule().re2
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def may_hold_refused_id_char(data: bytes) -> bool:
    """Whether UTF-8 bytes may hold a non-ASCII character the id rule refuses (a no-break space, U+2028, a
    format character...): their UTF-8 prefixes, searched only under the lead bytes ``data`` holds. False for
    ASCII at the cost of one ``isascii``; never False when such a character is there (it may be True without)."""
    return not data.isascii() and _rule().may_hold(data)


def _first_bad(value: str) -> re.Match | None:
    return (_ASCII_BAD_ID if value.isascii() else _rule().char).search(value)


def _kind(ch: str) -> str:
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return f"a lone surrogate (U+{ord(ch):04X})"
    if not ch.isascii() and _rule().format.match(ch):
        import unicodedata

        name = unicodedata.name(ch, "")
        mark = ", a byte-order mark: two files joined?" if ch == "\ufeff" else ""
        return f"an invisible format character (U+{ord(ch):04X}{' ' + name if name else ''}{mark})"
    if ch == "\u2065":
        return "an unassigned character of the invisible format block (U+2065)"
    kind = _CHAR_NAMES.get(ch, "whitespace" if ch.isspace() else "a control character")
    return f"{kind} (U+{ord(ch):04X})"


def id_problem(value: str, column: int | None = None) -> str | None:
    """Why ``value`` cannot be a query or document id (None: it can).

    The place is the 0-based position in the id, and with ``column`` (the 1-based column where the id begins in
    its line) the column of the character in the line."""
    if not value:
        return "is empty"
    bad = _first_bad(value)
    if bad is None:
        return None
    at = f" (column {column + bad.start()})" if column is not None else ""
    return f"holds {_kind(bad.group())} at position {bad.start()}{at}"


def check_id(
    value: str, what: str, source: str, line: int | None = None, where: str = "", column: int | None = None
) -> str:
    """``value`` if it is a valid ``what`` ("query" or "document") id, else ``InputFormatError`` naming the source,
    the line (or ``where``, e.g. "entry 3, hit 0"), the id, and with ``column`` (the 1-based column where the id
    begins in its line) the column of the refused character."""
    problem = id_problem(value, column)
    if problem is not None:
        raise InputFormatError(source, line, id_error(value, what, problem, where))
    return value


def id_error(value: str, what: str, problem: str, where: str = "") -> str:
    prefix = f"{where}: " if where else ""
    bad = _first_bad(value) if value else None
    if bad is not None and not bad.group().isascii() and _rule().format.match(bad.group()):
        why = (
            "ids may hold no format characters (byte-order marks, zero-width and bidi controls): "
            "the id would look like another and be another"
        )
    else:
        why = "ids may hold no whitespace and no control characters (a TREC file could not carry them)"
    return f"{prefix}{what} id {_show(value)} {problem}: {why}"


def _show(value: str) -> str:
    """``repr`` of a text, lone surrogates included, that any terminal can print."""
    return repr(value) if not _SURROGATE.search(value) else ascii(value)


def check_id_column(
    ids: Any,
    what: str,
    source: str,
    line_of: Callable[[int], int | None] | None = None,
    where: str = "",
    column_of: Callable[[int], int | None] | None = None,
) -> None:
    """Every id of an arrow string column (``ChunkedArray``) is valid, checked in C; else the error naming the
    first bad row's line (``line_of(row)``) or, without ``line_of``, ``row N``, and with ``column_of(row)`` (the
    1-based column where that row's id begins in its line) the column of the refused character."""
    import numpy as np
    import pyarrow.compute as pc

    # an all-ASCII column needs only the ASCII part of the rule (no format character is ASCII)
    ascii_only = pc.all(pc.string_is_ascii(ids)).as_py() is not False
    pattern = "[\\x00-\\x20\\x7f]" if ascii_only else _rule().re2
    bad = pc.or_(pc.equal(pc.utf8_length(ids), 0), pc.match_substring_regex(ids, pattern))
    if not pc.any(bad).as_py():
        return
    row = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0])
    value = ids[row].as_py()
    line = line_of(row) if line_of is not None else None
    column = column_of(row) if column_of is not None else None
    place = where if line_of is not None else (f"{where}row {row}" if not where else f"{where}, row {row}")
    raise InputFormatError(source, line, id_error(value, what, id_problem(value, column) or "", place))


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


_BOM = b"\xef\xbb\xbf"


# ------------------------------------------------------ TREC line separators
#: U+0085, U+2028 and U+2029 in UTF-8: line breaks for ``str.splitlines()``, not for pyarrow nor trec_eval.
_UNICODE_BREAK = re.compile(rb"\xc2\x85|\xe2\x80[\xa8\xa9]")


def line_separator(data: bytes, source: str) -> InputFormatError | None:
    """The error for the first Unicode line separator (U+0085, U+2028, U+2029) in a TREC file's bytes."""
    m = _UNICODE_BREAK.search(data)
    if m is None:
        return None
    ch = m.group().decode("utf-8")
    start = data.rfind(b"\n", 0, m.start()) + 1 or (3 if data.startswith(_BOM) else 0)  # a leading BOM is no column
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
    # shown as it is (``inf`` too), never converted: ``int(inf)`` is an OverflowError
    raise InputFormatError(source, line, f"{where}relevance label {show(labels[row])} {_OUT_OF_RANGE}")


_OUT_OF_RANGE = f"is out of range: labels must be integers within ±{MAX_LABEL:,}"


def parse_label(token: str, source: str, line: int | None) -> int:
    """One relevance label from text: ``[+-]?[0-9]+`` (ASCII digits: the numbers door's ``integer``) within
    ``±MAX_LABEL``."""
    if not is_integer(token):
        raise InputFormatError(source, line, f"relevance {show(token)} is not an integer")
    try:
        value = integer(token, what="relevance label", max_digits=len(str(MAX_LABEL)))
    except NumberRefused:  # more digits than any label within the range has
        value = None
    if value is None or abs(value) > MAX_LABEL:
        shown = token if len(token) <= SHOWN else show(token)
        raise InputFormatError(source, line, f"relevance label {shown} {_OUT_OF_RANGE}")
    return value


# --------------------------------------------------------- compressed input
RATIO_ENV = "TWOSTAGE_MAX_COMPRESSION_RATIO"
SIZE_ENV = "TWOSTAGE_MAX_DECOMPRESSED_MB"
DEFAULT_RATIO = 100
DEFAULT_MAX_DECOMPRESSED_MB = 8192
#: Below this many decompressed bytes the ratio is not checked (a small file may compress very well).
RATIO_FLOOR = 64 << 20
COMPRESSED_SUFFIXES = (".gz",)


def _env_number(name: str, default: int) -> int:
    """A bound from the environment, through the numbers door (``env_bound``: ASCII digits, at most 12)."""
    return env_bound(name, default)


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

    def settle(self) -> None:
        """Read on, discarding, to the ratio's floor: raises the bound's error when the stream is a bomb (a
        stream of zeros is a compression bomb before it is a text holding a NUL byte)."""
        while self.out <= RATIO_FLOOR and self.read(1 << 20):
            pass


# ------------------------------------------------------------ opening files
#: What a path that is not a regular file is, by ``stat`` mode (a symbolic link is followed to what it names).
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)
_PIECE = 1 << 22  # bytes read at a time from a text input (each searched for a NUL byte before it is used)


def _not_regular(path: str, mode: int) -> InputFormatError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InputFormatError(
        path,
        None,
        f"is {kind}, not a regular file: twostage reads data from regular files only "
        "(a run also from standard input, given as '-')",
    )


def _open_fd(path: str) -> int:
    """A read-only descriptor of the regular file ``path``; ``InputFormatError`` for anything else (a folder, a
    device such as /dev/zero, a FIFO, a socket), ``OSError`` when it cannot be opened.

    Decided twice: on ``stat`` before opening (opening a FIFO waits for a writer, opening a device may act on it)
    and on ``fstat`` of the descriptor opened without waiting (``O_NONBLOCK``), so a FIFO swapped in between is
    refused as well; what is read is what was checked."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike) -> IO[bytes]:
    """The bytes of the regular file ``path`` as they are (no decompression, NUL bytes kept: checksums, binary
    files). Anything that is not a regular file is ``InputFormatError`` naming what it is, checked on the opened
    descriptor; ``OSError`` (a missing file, no permission) passes through for the caller to word."""
    return os.fdopen(_open_fd(os.fspath(path)), "rb")


class NulByteError(InputFormatError):
    """A NUL byte in a text input, where reading stopped: ``line`` and ``column`` (1-based, in characters)."""

    def __init__(self, path: str, line: int, column: int) -> None:
        self.column = column
        super().__init__(path, line, f"NUL at column {column}: a text input holds no NUL byte (a binary file?)")


def _characters(data: bytes) -> int:
    """How many UTF-8 characters ``data`` holds (its bytes less continuation bytes; an invalid byte counts one)."""
    return len(data.translate(None, _CONTINUATION))


_CONTINUATION = bytes(range(0x80, 0xC0))


class _TextStream(io.RawIOBase):
    """The bytes of a text input, refused with ``NulByteError`` at the first NUL byte, before what follows it is
    read. ``again()`` reads the input from its start once more (only to place the NUL: its line and column);
    without it (standard input) lines and columns are counted as the bytes go by."""

    def __init__(self, name: str, inner: Any, again: Callable[[], Any] | None) -> None:
        self.name, self.inner, self.again = name, inner, again
        self.offset = 0  # bytes handed on so far
        self.lines = self.column = 0  # standard input only: newlines so far, characters since the last one
        self.bom = False  # the input begins with a byte-order mark (its encoding mark: no column of line 1)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        data = self.inner.read(min(size, _PIECE)) or b""  # handed on as read: no copy
        self._pass(data)
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        out = io.BytesIO()
        while data := self.inner.read(_PIECE):
            self._pass(data)
            out.write(data)
        return out.getvalue()

    def _pass(self, data: bytes) -> None:
        if not data:
            return
        if not self.offset:
            self.bom = data.startswith(_BOM)
        at = data.find(b"\0")
        if at >= 0:
            raise self._nul(data, at)
        if self.again is None:
            self._count(data)
        self.offset += len(data)

    def _count(self, data: bytes) -> None:
        last = data.rfind(b"\n")
        if last < 0:
            self.column += _characters(data)
        else:
            self.lines += data.count(b"\n")
            self.column = _characters(data[last + 1 :])

    def _nul(self, data: bytes, at: int) -> NulByteError:
        if isinstance(self.inner, BoundedStream):
            self.inner.settle()
        if self.again is not None:  # count the lines before this piece from the input's start
            with self.again() as fh:
                left = self.offset
                while left > 0 and (piece := fh.read(min(left, _PIECE))):
                    self._count(piece)
                    left -= len(piece)
        self._count(data[:at])
        return NulByteError(self.name, self.lines + 1, self.column + 1 - (self.bom and not self.lines))

    def close(self) -> None:
        if self.again is not None:  # standard input stays open
            self.inner.close()
        super().close()


def _bytes_of(path: str) -> Any:
    """The raw stream of ``path``: a regular file's bytes, ``.gz`` decompressed with the bounds on size and ratio."""
    import gzip

    raw = io.FileIO(_open_fd(path), "rb")
    if not path.endswith(COMPRESSED_SUFFIXES):
        return raw
    counted = _Counting(raw)
    inner = gzip.GzipFile(fileobj=io.BufferedReader(counted, 1 << 16), mode="rb")
    return BoundedStream(path, inner, counted)


def _text_input(path: str | os.PathLike) -> _TextStream:
    p = os.fspath(path)
    try:
        return _TextStream(p, _bytes_of(p), lambda: _bytes_of(p))
    except FileNotFoundError:
        raise InputFormatError(p, None, "no such file") from None
    except OSError as exc:
        raise InputFormatError(p, None, f"cannot read: {exc.strerror or exc}") from None


def open_input(path: str | os.PathLike, buffered: bool = True) -> IO[bytes]:
    """The bytes of the text input ``path`` as a buffered stream: a regular file only (``open_regular``'s rule),
    ``.gz`` decompressed with the bounds on size and ratio, refused at its first NUL byte (``NulByteError``, with
    the line and column) before anything after it is read.

    ``buffered=False``: a stream for reads of large pieces (``read(n)`` hands on each piece as it was read, no
    copy), no lines. A missing file, a folder, a device, a FIFO or a socket is ``InputFormatError``."""
    raw = _text_input(path)
    return io.BufferedReader(raw, 1 << 20) if buffered else raw  # type: ignore[arg-type,return-value]


def open_stdin() -> IO[bytes]:
    """Standard input as ``open_input`` reads a file: refused at its first NUL byte, named ``-``."""
    import sys

    return io.BufferedReader(_TextStream("-", sys.stdin.buffer, None), 1 << 20)  # type: ignore[arg-type]


def read_input(path: str | os.PathLike) -> bytes:
    """All the bytes of a text input (``open_input``'s rules: a regular file, ``.gz`` bounded, no NUL byte)."""
    with _text_input(path) as fh:
        try:
            return fh.readall()
        except OSError as exc:
            raise InputFormatError(os.fspath(path), None, f"cannot read: {exc}") from None


# --------------------------------------------------------------------- JSON
#: The deepest nesting of arrays and objects any JSON input may have.
MAX_JSON_DEPTH = 64
JSON_SIZE_ENV = "TWOSTAGE_MAX_JSON_MB"
DEFAULT_MAX_JSON_MB = 4096
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: A JSON integer longer than Python reads (``sys.get_int_max_str_digits()``, 4,300 digits by default): a value
#: (the document, or after ``[``, ``,`` or ``:``), else any such run of digits (to name a line).
_LONG_NUMBER = re.compile(rb"(?:\A|[\[,:])\s*-?([0-9]{4301,})")
_LONG_DIGITS = re.compile(rb"()([0-9]{4301,})")
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
    except ValueError:  # an integer of more than sys.get_int_max_str_digits() digits: int() refuses it
        long = _LONG_NUMBER.search(raw) or _LONG_DIGITS.search(raw)
        group = (1 if long.group(1) else 2) if long else 0
        size = f"of {len(long.group(group)):,} digits" if long else "of more than 4,300 digits"
        raise InputFormatError(
            source,
            where(long.start(group)) if long else line,
            f"JSON integer {size}: an integer is read with at most 4,300 digits",
        ) from None
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
    "MAX_JSON_DEPTH",
    "MAX_LABEL",
    "NulByteError",
    "check_id",
    "check_id_column",
    "check_labels",
    "check_text",
    "format_characters",
    "id_error",
    "id_problem",
    "iter_json_lines",
    "jsonl_lines",
    "line_separator",
    "may_hold_refused_id_char",
    "open_input",
    "open_regular",
    "open_stdin",
    "parse_json",
    "parse_label",
    "read_input",
    "read_json",
    "read_json_object",
    "scan_format_characters",
]
