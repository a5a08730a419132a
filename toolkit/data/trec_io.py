"""Strict, gz-aware reading and writing of TREC runs, qrels and topics.

Parsing is vectorised (pyarrow's CSV reader) on a whitespace-normalised copy of
the file; when that fast path rejects the file, a line-by-line pass over the
original text finds the first bad line and reports it as ``file:line: reason``.
Accepted quirks: a UTF-8 byte-order mark at the start, CRLF line endings, runs of tabs and
spaces between columns, leading/trailing whitespace and blank lines. Everything
else that trec_eval would misread (non-numeric or NaN scores, wrong column
counts, duplicate documents, non-integer labels, empty files) is an error.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import io
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from toolkit.data.columns import arrow_of, take
from toolkit.data.duplicates import duplicate_rows
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, SUBTOPIC, Qrels, Run, Topic, Topics
from toolkit.errors import InputFormatError, phrase
from toolkit.guard.numbers import NumberRefused, first_not_finite, integer, natural, natural_column, score, show
from toolkit.guard.readers import (
    MAX_LABEL,
    NulByteError,
    check_id,
    check_id_column,
    check_labels,
    check_text,
    id_problem,
    iter_json_lines,
    line_separator,
    may_hold_refused_id_char,
    open_input,
    open_regular,
    open_stdin,
    parse_label,
    read_input,
)

DedupePolicy = Literal["error", "first"]

_WS_RUN = re.compile(rb"[ \t]+")
#: ASCII control characters other than the tab, newline and carriage return the parser reads as layout.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NOT_CONTROL = bytes(b for b in range(256) if not _CONTROL.fullmatch(bytes([b])))
_EDGE_WS = re.compile(rb"(?m)^ | $")
_NAN_TEXT = re.compile(r"[+-]?nan", re.IGNORECASE)


# ---------------------------------------------------------------- raw bytes
def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, gunzipped when it ends in .gz (bounded in size and ratio: ``toolkit.guard.readers``)."""
    return read_input(path)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a regular file's bytes (``open_regular``: a device or a FIFO is ``InputFormatError``)."""
    h = hashlib.sha256()
    with open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def folder_sha256(folder: str | os.PathLike, skip=lambda path: False) -> str:
    """sha256 over a folder's files in name order: each relative name, a NUL, then its bytes.

    ``skip(path)`` leaves a file out (metadata, locks, caches).
    """
    root = Path(folder)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if not p.is_file() or skip(p):
            continue
        h.update(str(p.relative_to(root)).encode() + b"\0")
        with open_regular(p) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _trec_bytes(path: str) -> bytes:
    """``read_bytes`` for a TREC file: a NUL byte is refused in the words of the other control characters."""
    try:
        return read_bytes(path)
    except NulByteError as exc:
        raise _nul_error(exc) from None


def _nul_error(exc: NulByteError) -> InputFormatError:
    return InputFormatError(exc.path, exc.line, f"NUL at column {exc.column}; {_CONTROL_WHY}")


_CONTROL_WHY = "ids must be printable text (trec_eval aborts on a NUL and compares other control characters as bytes)"


def _scan(path: str) -> tuple[str, bytes | None, bool, bool]:
    """One streaming pass: (sha256, the one byte that separates its columns when the file needs no normalising
    (a space, or a tab in a file without spaces, as MS MARCO's runs are written; None when it has both, a BOM, CRs
    or comment lines), file has content, file may hold a non-ASCII character the id rule refuses:
    ``may_hold_refused_id_char``).

    A control character anywhere in the file is an error naming its line (``_control_error``), and so is a
    Unicode line separator (U+0085, U+2028, U+2029: ``toolkit.guard.readers.line_separator``): the pass stops at
    the piece that holds the first one, and only the bytes up to there are read again to name its line. A NUL
    byte stops it where it is (the door, ``open_input``, refuses it before handing on what follows).
    """
    h = hashlib.sha256()
    odd = tabs = spaces = False
    content = False
    nonascii = False
    tail = b""
    read = 0  # bytes of the file before the current piece
    try:
        with open_input(path, buffered=False) as fh:
            after_newline = True
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
                # a leading byte-order mark is the file's encoding mark (dropped by _normalise), not part of an id
                body = chunk[3:] if not read and chunk.startswith(b"\xef\xbb\xbf") else chunk
                # single-byte searches are memchr-fast; double spaces and edge blanks surface as
                # column-count errors in the fast parse and send it down the normalising path
                odd = odd or body is not chunk or b"\r" in chunk or b"\n#" in chunk
                odd = odd or (after_newline and chunk.startswith(b"#"))
                tabs = tabs or b"\t" in chunk
                spaces = spaces or b" " in chunk
                after_newline = chunk.endswith(b"\n")
                content = content or not chunk.isspace()
                read += len(chunk)
                # deleting every other byte is a C loop: ~0.1 s per 256 MiB, where a regex search takes ~1 s
                if chunk.translate(None, _NOT_CONTROL):
                    raise _control_error(_head(path, read), path)
                if not chunk.isascii():  # a character's 2-3 bytes may straddle two chunks
                    edge = tail + body[:2]
                    if line_separator(edge, path) is not None or line_separator(chunk, path) is not None:
                        raise line_separator(_head(path, read), path) or InputFormatError(path, None, "line separator")
                    # the UTF-8 prefixes of the non-ASCII characters the id rule refuses (blanks, C1 controls,
                    # format characters), searched under the lead bytes present: é, 文 and most scripts hold none
                    nonascii = nonascii or may_hold_refused_id_char(edge) or may_hold_refused_id_char(body)
                tail = chunk[-2:]
    except NulByteError as exc:
        raise _nul_error(exc) from None
    except (OSError, EOFError) as exc:
        raise InputFormatError(path, None, f"cannot read: {exc}") from None
    delimiter = None if odd or (tabs and spaces) else b"\t" if tabs else b" "
    return h.hexdigest(), delimiter, content, nonascii


def _head(path: str, size: int) -> bytes:
    """The first ``size`` bytes of a TREC file (error path: to name the line of what the scan found in them)."""
    try:
        with open_input(path) as fh:
            return fh.read(size)
    except NulByteError as exc:
        raise _nul_error(exc) from None


def _control_error(data: bytes, path: str) -> InputFormatError:
    """The first control character of ``data``, as an error naming its line and column (1-based, in characters,
    as every column the readers name).

    An id holding one cannot mean what the user thinks: trec_eval aborts on a NUL (9.0.4 crashes,
    10 fails in malloc), compares other control characters as bytes, and a terminal shows neither.
    """
    m = _CONTROL.search(data)
    at, byte = (m.start(), m.group()[0]) if m else (0, 0)  # the scan saw one, so m is set
    start = data.rfind(b"\n", 0, at) + 1 or (3 if data.startswith(b"\xef\xbb\xbf") else 0)  # past a leading BOM
    column = len(data[start:at].decode("utf-8", "replace")) + 1
    name = "NUL" if byte == 0 else f"control character U+{byte:04X}"
    return InputFormatError(path, data.count(b"\n", 0, at) + 1, f"{name} at column {column}; {_CONTROL_WHY}")


_COMMENT = re.compile(rb"(?m)^#[^\n]*(?:\n|$)")


def _normalise(data: bytes, path: str) -> tuple[bytes, int]:
    """Strip a BOM, turn CRLF into LF, collapse column whitespace to one space, drop comment lines.

    A comment line is one whose first non-blank character is '#', as trec_eval 10
    reads them; returns the bytes and how many comment lines were dropped.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            line = data[: data.index(b"\r")].count(b"\n") + 1
            raise InputFormatError(path, line, "stray carriage return (\\r) inside a line")
    if b"\t" in data or b"  " in data:
        data = _WS_RUN.sub(b" ", data)
    if b"\n " in data or b" \n" in data or data.startswith(b" ") or data.endswith(b" "):
        data = _EDGE_WS.sub(b"", data)
    comments = 0
    if data.startswith(b"#") or b"\n#" in data:
        data, comments = _COMMENT.subn(b"", data)
    if not data or data.isspace():
        raise InputFormatError(
            path,
            None,
            "empty file: no lines to read" if not comments else f"no lines to read besides {comments} comment line(s)",
        )
    return data, comments


def _text_lines(data: bytes, path: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of every non-blank line of the original file."""
    for number, _, fields in _content_lines(data, path):
        yield number, fields


def _content_lines(data: bytes, path: str) -> Iterator[tuple[int, str, list[str]]]:
    """(1-based line number, text, fields) of every non-blank line of the original file (a leading BOM dropped)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputFormatError(path, line, "not valid UTF-8") from None
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            yield number, line, fields


def _line_of_row(path: str, row: int) -> int:
    """The line number of the row-th (0-based) non-blank line (error path only: re-reads the file)."""
    return _place_of_row(path, row, 0)[0]


_COLUMN_TEXT = re.compile(r"[^ \t]+")


def _place_of_row(path: str, row: int, field: int) -> tuple[int, int | None]:
    """(line number, 1-based column where column ``field`` begins) of the row-th (0-based) non-blank line, the
    columns split as the parser splits them, on spaces and tabs (error path only: re-reads the file)."""
    for i, (number, line, _) in enumerate(_content_lines(_trec_bytes(path), path)):
        if i == row:
            starts = [m.start() + 1 for m in _COLUMN_TEXT.finditer(line)]
            return number, starts[field] if field < len(starts) else None
    return -1, None


def _arrow_read(source, names: tuple[str, ...], types: dict[str, pa.DataType], delimiter: str = " ") -> pa.Table:
    return pacsv.read_csv(
        source,
        read_options=pacsv.ReadOptions(column_names=list(names), block_size=1 << 22),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            include_columns=[n for n in names if n in types],
        ),
    )


_TRAILING = re.compile(rb"(?m)^((?:[^ \n]+ ){5}[^ \n]+) [^\n]*$")


#: The id columns of a TREC run or qrels: (column, what it holds, its field on the line).
_TREC_IDS = (("query_id", "query", 0), ("doc_id", "document", 2))


def _parse_table(
    path: str, names, types, locate, trailing: bool = False, ids=_TREC_IDS
) -> tuple[pa.Table, str, int, int]:
    """Fast path: arrow straight from the file; else normalise in memory; else find the bad line.

    Returns the table, the file's sha256, the number of comment lines skipped
    and, when ``trailing`` (runs: trec_eval ignores whatever follows the tag),
    the number of lines whose text after the sixth column was ignored. Ids are
    checked by ``toolkit.guard.readers.check_id_column`` when the file holds
    any non-ASCII byte (an ASCII file's only bad id characters are the control
    characters ``_scan`` refused already and the blanks arrow splits on).
    """
    sha, delimiter, content, nonascii = _scan(path)
    if not content:
        raise InputFormatError(path, None, "empty file: no lines to read")
    table = None
    if delimiter is not None:
        # arrow reads the file through the door (a regular file, read as it was checked), never by its name; a
        # doubled separator or an edge blank fails here (a column too many) and is normalised below
        with open_input(path, buffered=False) as fh, contextlib.suppress(pa.ArrowInvalid, pa.ArrowTypeError):
            table, comments, cut = _arrow_read(fh, names, types, delimiter.decode()), 0, 0
    if table is None:
        raw = _trec_bytes(path)
        data, comments = _normalise(raw, path)
        cut = 0
        if trailing:
            data, cut = _TRAILING.subn(rb"\1", data)
        try:
            table = _arrow_read(io.BytesIO(data), names, types)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise locate(raw, path) from None
        del raw, data
    if nonascii:
        for column, what, field in ids:
            check_id_column(
                table.column(column),
                what,
                path,
                lambda row: _line_of_row(path, row),
                column_of=lambda row, field=field: _place_of_row(path, row, field)[1],
            )
    return table, sha, comments, cut


def _locate_run_error(data: bytes, path: str) -> InputFormatError:
    """The first line arrow could not read, found by the numbers door's ``score`` (arrow's own language)."""
    for number, fields in _text_lines(data, path):
        if len(fields) < 6:
            return InputFormatError(
                path,
                number,
                f"expected 6 columns (query_id Q0 doc_id rank score tag), found {len(fields)}"
                + (_MSMARCO_HINT if len(fields) == 3 else ""),
            )
        try:
            score(fields[4])
        except NumberRefused as exc:
            nan = _NAN_TEXT.fullmatch(fields[4])
            return InputFormatError(path, number, f"score {exc.problem}" if nan else str(exc))
    return InputFormatError(path, None, "could not be parsed as a TREC run")


def _locate_qrels_error(data: bytes, path: str) -> InputFormatError:
    for number, fields in _text_lines(data, path):
        if len(fields) != 4:
            return InputFormatError(
                path, number, f"expected 4 columns (query_id iteration doc_id relevance), found {len(fields)}"
            )
        try:
            parse_label(fields[3], path, number)
        except InputFormatError as exc:
            return exc
    return InputFormatError(path, None, "could not be parsed as TREC qrels")


def _dedupe(table: pa.Table, path: str, policy: DedupePolicy, what: str, hint: str = "") -> tuple[pa.Table, int]:
    """``table`` without the rows that repeat an earlier (query, document) pair (diversity qrels: an earlier
    (query, subtopic, document)), under ``policy``; ``hint`` ends the error."""
    docs = table.column("doc_id")
    if "iteration" in table.column_names:  # a document is judged once per subtopic: the pair is (subtopic, doc)
        docs = pc.binary_join_element_wise(table.column("iteration"), docs, pa.scalar(" ", pa.large_string()))
    dups = duplicate_rows(table.column("query_id"), docs)
    if len(dups) == 0:
        return table, 0
    if policy == "first":
        keep = np.ones(table.num_rows, dtype=bool)
        keep[dups] = False
        return table.filter(pa.array(keep)), len(dups)
    row = int(dups[0])
    q, d = table.column("query_id")[row].as_py(), table.column("doc_id")[row].as_py()
    under = f" under subtopic {table.column('iteration')[row].as_py()!r}" if "iteration" in table.column_names else ""
    raise InputFormatError(
        path,
        _line_of_row(path, row),
        f"{what} lists document {d!r} twice for query {q!r}{under} ({len(dups)} duplicate line(s) in all); "
        f"trec_eval refuses this; pass {phrase('dedupe=' + repr('first'), '--dedupe first')} to keep the first "
        f"occurrence{hint}",
    )


def _frame(table: pa.Table, columns: dict[str, str]) -> pd.DataFrame:
    """Arrow columns -> DataFrame with arrow-backed strings (no per-row Python objects)."""
    out = {}
    for src, dst in columns.items():
        col = table.column(src)
        if pa.types.is_large_string(col.type):  # what the readers ask arrow for: pandas keeps it as is
            out[dst] = pd.Series(pd.arrays.ArrowStringArray(col), copy=False)
        else:
            out[dst] = col.to_numpy()
    return pd.DataFrame(out, copy=False)


# --------------------------------------------------------------------- runs
#: Why a reader asked for finite scores refuses an infinity (``read_run(..., finite=True)``).
FINITE_WHY = (
    "scores are weighed and rescaled here (fusion by interpolation, min-max), where an infinity makes every other "
    "score 0 or NaN; give finite scores"
)


def read_run(
    path: str | os.PathLike,
    dedupe: DedupePolicy = "error",
    *,
    finite: bool = False,
    run_format: RunFormat | None = None,
) -> Run:
    """Parse a run (``-`` reads it from standard input): a TREC run (``qid Q0 docid rank score tag``) or an MS
    MARCO run (``qid<TAB>pid<TAB>rank``, ``_read_msmarco_run``).

    ``run_format``: ``trec``, ``msmarco``, or ``auto`` (``detect_run_format``: the first content line decides);
    None takes the format of the enclosing ``runs_read_as`` block (``auto`` outside any).

    Lines whose first non-blank character is '#' are comments (trec_eval 10),
    skipped and counted. ``tag`` is the first line's tag, ``last_tag`` the last
    line's (what trec_eval prints as runid). A NaN score is refused; ``inf`` and
    ``-inf`` are read as trec_eval reads them (first and last), unless ``finite``:
    then they are refused too, with the line (a computation that rescales scores
    asks for it, once, here).
    """
    path = str(path)
    fmt = _run_format(run_format)
    if path == "-":
        return _read_stdin_run(dedupe, finite, fmt)
    return _read_run_file(path, dedupe, finite, fmt)


def _read_run_file(path: str, dedupe: DedupePolicy, finite: bool, fmt: RunFormat, shown: str | None = None) -> Run:
    """``read_run`` of a file; ``shown`` is the name a warning gives it (``-`` for the spool of standard input)."""
    if fmt == "auto":
        fmt = detect_run_format(path)
    if fmt == "msmarco":
        return _read_msmarco_run(path, dedupe, shown or path)
    names = ("query_id", "q0", "doc_id", "rank", "score", "tag")
    types = {"query_id": pa.large_string(), "doc_id": pa.large_string(), "score": pa.float64()}
    table, sha, comments, trailing = _parse_table(path, names, types, _locate_run_error, trailing=True)
    pa.default_memory_pool().release_unused()  # the CSV reader's scratch buffers
    score = table.column("score").to_numpy()
    nan = np.isnan(score)
    if nan.any():
        raise InputFormatError(
            path,
            _line_of_row(path, int(np.flatnonzero(nan)[0])),
            "score is NaN; trec_eval's sort breaks on NaN, so it is refused",
        )
    infinite = first_not_finite(score) if finite else None
    if infinite is not None:
        raise InputFormatError(
            path, _line_of_row(path, infinite), f"score {show(score[infinite])} is not finite: {FINITE_WHY}"
        )
    table, dropped = _dedupe(table, path, dedupe, "run")
    frame = _frame(table, {"query_id": QUERY_ID, "doc_id": DOC_ID, "score": SCORE})
    del table
    pa.default_memory_pool().release_unused()
    first, last = _edge_tags(path)
    return Run(
        frame=frame,
        path=path,
        tag=first,
        sha256=sha,
        duplicates_dropped=dropped,
        last_tag=last,
        comment_lines=comments,
        trailing_text_lines=trailing,
    )


def _read_stdin_run(dedupe: DedupePolicy, finite: bool = False, run_format: RunFormat = "auto") -> Run:
    """A run piped on standard input: spooled to a temporary file in 1 MiB pieces (never held whole in memory, as a
    run file is not), then read as a file is; errors still name '-' and the line. The spool stops at the first
    NUL byte (``open_stdin``): ``-`` fed from /dev/zero is one error, not a full disk."""
    import dataclasses
    import shutil

    fd, tmp = tempfile.mkstemp(prefix="twostage-stdin-", suffix=".run")
    try:
        with os.fdopen(fd, "wb") as fh, open_stdin() as stdin:
            try:
                shutil.copyfileobj(stdin, fh, 1 << 20)
            except NulByteError as exc:
                raise _nul_error(exc) from None
        try:
            run = _read_run_file(tmp, dedupe, finite, run_format, shown="-")
        except InputFormatError as exc:
            raise InputFormatError("-", exc.line, exc.reason) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return dataclasses.replace(run, path="-")


# ------------------------------------------------------------ MS MARCO runs
#: The formats ``read_run`` reads: TREC's, MS MARCO's, or the one the first content line has.
RunFormat = Literal["trec", "msmarco", "auto"]
#: The tag of a run read in MS MARCO's format (which has none): what Pyserini 1.6's
#: ``convert_msmarco_run_to_trec_run`` writes (Anserini's own script writes ``ANSERINI``).
MSMARCO_TAG = "anserini"
#: The highest rank an MS MARCO run may give. A rank becomes the score 1/rank; up to here those scores are distinct
#: even as 32-bit floats (trec_eval 9 compares scores so; the first two equal ones are 1/11,864,338 and the next),
#: so trec_eval's order is the rank order. MS MARCO's collection has 8,841,823 passages.
MSMARCO_MAX_RANK = 10_000_000

_RUN_FORMAT: contextvars.ContextVar[str] = contextvars.ContextVar("twostage_run_format", default="auto")
_MSMARCO_HINT = (
    "; an MS MARCO run (query_id<TAB>doc_id<TAB>rank) is read as one when its first line is (a whole-number rank "
    "third), or with " + phrase("run_format='msmarco'", "--run-format msmarco")
)
_TREC_HINT = "; a TREC run is read with " + phrase("run_format='trec'", "--run-format trec") + " or auto"
#: The longest piece of a line the detection reads at a time (a first line longer than this is read as TREC).
_DETECT_PIECE = 1 << 16
_RANK_TEXT = re.compile(rb"[0-9]+")


def _run_format(run_format: str | None) -> RunFormat:
    fmt = _RUN_FORMAT.get() if run_format is None else run_format
    if fmt not in get_args(RunFormat):
        from toolkit.errors import ConfigError

        raise ConfigError(f"run_format must be one of {', '.join(get_args(RunFormat))}, not {show(fmt)}")
    return fmt  # type: ignore[return-value]


@contextlib.contextmanager
def runs_read_as(run_format: RunFormat) -> Iterator[None]:
    """Inside the block, ``read_run`` reads a run in ``run_format`` unless its caller names one: what a command's
    ``--run-format`` sets for every run it reads (the runs twostage writes and reads back itself name ``trec``)."""
    token = _RUN_FORMAT.set(_run_format(run_format))
    try:
        yield
    finally:
        _RUN_FORMAT.reset(token)


def detect_run_format(path: str | os.PathLike) -> RunFormat:
    """``msmarco`` when the file's first content line (not blank, not a '#' comment) has three columns and the third
    is a whole number in the digits 0-9 (a rank), else ``trec`` (a TREC run has six columns; whatever else the
    file holds, the TREC reader names the line and the problem). Reads only up to that line."""
    try:
        with open_input(path) as fh:
            inside = False  # the piece read continues a line (a long comment line)
            while True:
                piece = fh.readline(_DETECT_PIECE)
                if not piece:
                    return "trec"
                whole = piece.endswith(b"\n")
                if inside:
                    inside = not whole
                    continue
                fields = piece.removeprefix(b"\xef\xbb\xbf").split()
                if not fields or fields[0].startswith(b"#"):
                    inside = not whole
                    continue
                if not whole and len(piece) >= _DETECT_PIECE:
                    return "trec"
                return "msmarco" if len(fields) == 3 and _RANK_TEXT.fullmatch(fields[2]) else "trec"
    except (NulByteError, InputFormatError, OSError, EOFError):
        return "trec"  # the TREC reader meets the same problem and names it


def _read_msmarco_run(path: str, dedupe: DedupePolicy, shown: str) -> Run:
    """An MS MARCO run (``qid<TAB>pid<TAB>rank``, what MS MARCO's ``ms_marco_eval.py`` reads and many rerankers
    write): each rank becomes the score 1/rank, and the run's tag ``anserini``, as Pyserini's
    ``convert_msmarco_run_to_trec_run`` makes a TREC run of it, so a measure ranks the passages in rank order.

    Columns are separated as in a TREC run (tabs or spaces); comment lines, a BOM and CRLF are read as there.
    Refused, naming the line: a line without three columns; a rank that is not a whole number in the digits 0-9
    (the numbers door's ``natural``: not ``+3``, ``0x10``, ``٣``), below 1 or above ``MSMARCO_MAX_RANK``; a rank
    given twice for a query (MS MARCO's script keeps the later passage and drops the other without a word); a
    passage given twice for a query (unless ``dedupe="first"``; MS MARCO's script prints a message and counts its
    better rank). Ranks that skip numbers (a query ranked 1, 2, 4) are read in their order, and a warning says so:
    MS MARCO's script counts a passage at the rank written, here at its position (score 1/rank).
    """
    names = ("query_id", "doc_id", "rank")
    types = {name: pa.large_string() for name in names}
    ids = (("query_id", "query", 0), ("doc_id", "document", 1))
    table, sha, comments, _ = _parse_table(path, names, types, _locate_msmarco_error, ids=ids)
    pa.default_memory_pool().release_unused()
    ranks, bad = natural_column(table.column("rank"))
    if bad is not None:
        line = _line_of_row(path, bad)
        try:
            natural(table.column("rank")[bad].as_py(), what="rank")
        except NumberRefused as exc:
            raise InputFormatError(path, line, str(exc)) from None
    out_of_range = np.flatnonzero((ranks < 1) | (ranks > MSMARCO_MAX_RANK))
    if len(out_of_range):
        row = int(out_of_range[0])
        rank = int(ranks[row])
        why = "ranks start at 1" if rank < 1 else f"the highest rank read is {MSMARCO_MAX_RANK:,}"
        raise InputFormatError(path, _line_of_row(path, row), f"rank {rank} is out of range: {why}")
    rows = pa.chunked_array([pa.array(np.arange(len(ranks)))])
    table = pa.table({"query_id": table.column("query_id"), "doc_id": table.column("doc_id"), "row": rows})
    table, dropped = _dedupe(table, path, dedupe, "run")
    kept = table.column("row").to_numpy()
    if dropped:
        ranks = ranks[kept]
    frame = _frame(table, {"query_id": QUERY_ID, "doc_id": DOC_ID})
    del table
    _check_ranks(path, shown, frame[QUERY_ID], ranks, kept)
    frame[SCORE] = 1.0 / ranks.astype(np.float64)
    pa.default_memory_pool().release_unused()
    return Run(
        frame=frame,
        path=path,
        tag=MSMARCO_TAG,
        sha256=sha,
        duplicates_dropped=dropped,
        last_tag=MSMARCO_TAG,
        comment_lines=comments,
        run_format="msmarco",
    )


def _locate_msmarco_error(data: bytes, path: str) -> InputFormatError:
    """The first line arrow could not read as three columns."""
    for number, fields in _text_lines(data, path):
        if len(fields) != 3:
            return InputFormatError(
                path,
                number,
                f"expected 3 columns (query_id<TAB>doc_id<TAB>rank) of an MS MARCO run, found {len(fields)}"
                + (_TREC_HINT if len(fields) == 6 else ""),
            )
    return InputFormatError(path, None, "could not be parsed as an MS MARCO run")


def _check_ranks(path: str, shown: str, query: pd.Series, ranks: np.ndarray, kept: np.ndarray) -> None:
    """Refuse a rank given twice for a query, naming both lines (``kept``: each row's row in the file); warn when
    some query's ranks skip numbers. One sort of (query, rank) keys: ranks are at most ``MSMARCO_MAX_RANK``."""
    codes, uniques = pd.factorize(query, sort=False)
    keys = codes.astype(np.int64) * (MSMARCO_MAX_RANK + 1) + ranks
    ordered = np.sort(keys)
    if (ordered[1:] == ordered[:-1]).any():
        order = np.argsort(keys, kind="stable")  # error path: which rows, in file order within a key
        same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        later = order[same + 1]
        at = int(np.argmin(later))
        row, earlier = int(later[at]), int(order[same[at]])
        raise InputFormatError(
            path,
            _line_of_row(path, int(kept[row])),
            f"query {str(uniques[codes[row]])!r} has rank {int(ranks[row])} twice (also on line "
            f"{_line_of_row(path, int(kept[earlier]))}); each rank is one passage's (MS MARCO's script would keep "
            "the later passage and drop the other)",
        )
    del ordered
    counts = np.bincount(codes, minlength=len(uniques))
    highest = np.zeros(len(uniques), dtype=np.int64)
    np.maximum.at(highest, codes, ranks)
    gaps = np.flatnonzero(highest > counts)  # distinct ranks >= 1: 1..n exactly when the highest is the count
    if not len(gaps):
        return
    first = int(gaps[0])
    from toolkit import notices

    notices.warn(
        f"{len(gaps)} of {len(uniques)} queries of the MS MARCO run {shown} skip ranks (e.g. query "
        f"{str(uniques[first])!r}: {int(counts[first])} passages, ranks up to {int(highest[first])}): each is ranked "
        "in rank order (score 1/rank), its passages at positions 1, 2, 3, ...; MS MARCO's script counts a passage "
        "at the rank written, so its MRR@10 can differ"
    )


def _content_fields(line: bytes) -> list[str] | None:
    fields = line.decode("utf-8-sig", "replace").split()
    return fields if fields and not fields[0].startswith("#") else None


def _edge_tags(path: str) -> tuple[str, str]:
    """The tag column of the first and of the last content line (the file parsed already, so both exist)."""
    first = last = None
    with open_input(path) as fh:
        for raw_line in fh:
            first = _content_fields(raw_line)
            if first:
                break
    if path.endswith(".gz"):
        with open_input(path) as fh:
            for raw_line in fh:
                last = _content_fields(raw_line) or last
    else:
        with open_regular(path) as fh:
            end = fh.seek(0, os.SEEK_END)
            block, tail = 1 << 16, b""
            while end > 0 and last is None:
                start = max(0, end - block)
                fh.seek(start)
                tail = fh.read(end - start) + tail
                lines = tail.split(b"\n")
                complete = lines if start == 0 else lines[1:]
                for raw_line in reversed(complete):
                    last = _content_fields(raw_line)
                    if last:
                        break
                end = start

    def tag(fields):
        return fields[5] if fields and len(fields) >= 6 else ""

    return tag(first), tag(last)


# -------------------------------------------------------------------- qrels
#: What the duplicate-line error of ordinary qrels adds: the same document under several values of the second
#: column is what diversity qrels look like.
_DIVERSITY_HINT = (
    " (TREC diversity qrels, `qid subtopic docid rel`, judge a document once per subtopic: read them with "
    + phrase("rel_format='qrels_div'", "-R qrels_div")
    + ")"
)


def read_qrels(
    path: str | os.PathLike,
    dedupe: DedupePolicy = "error",
    relevance_map: dict[int, int] | None = None,
    relevance_map_name: str = "",
    subtopics: bool = False,
) -> Qrels:
    """Parse TREC qrels (``qid iteration docid relevance``), integer labels.

    ``relevance_map`` (original -> new label) is applied to every line; a label
    it does not cover is an error, never a silent default. ``subtopics``: the
    file is TREC diversity qrels (``qid subtopic docid relevance``, the Web
    track's format, ``-R qrels_div``): the second column is kept as the
    ``subtopic`` column and a line repeats another only with the same query,
    subtopic and document. Ordinary qrels ignore the second column, and a
    document listed twice for a query is an error that names ``-R qrels_div``.
    """
    path = str(path)
    names = ("query_id", "iteration", "doc_id", "relevance")
    types = {"query_id": pa.large_string(), "doc_id": pa.large_string(), "relevance": pa.int64()}
    if subtopics:
        types["iteration"] = pa.large_string()
    table, sha, comments, _ = _parse_table(path, names, types, _locate_qrels_error)
    check_labels(table.column("relevance").to_numpy(), path, lambda row: _line_of_row(path, row))
    table, dropped = _dedupe(table, path, dedupe, "qrels", "" if subtopics else _DIVERSITY_HINT)
    columns = {"query_id": QUERY_ID, "doc_id": DOC_ID, "relevance": RELEVANCE}
    frame = _frame(table, columns | ({"iteration": SUBTOPIC} if subtopics else {}))
    if relevance_map:
        frame = apply_relevance_map(frame, relevance_map, path)
        check_labels(frame[RELEVANCE].to_numpy(), f"{path} (after the relevance map)")
    return Qrels(
        frame=frame,
        path=path,
        sha256=sha,
        relevance_map=dict(relevance_map or {}),
        relevance_map_name=relevance_map_name,
        duplicates_dropped=dropped,
        comment_lines=comments,
    )


def apply_relevance_map(frame: pd.DataFrame, mapping: dict[int, int], path: str) -> pd.DataFrame:
    labels = frame[RELEVANCE].to_numpy()
    uncovered = sorted(set(np.unique(labels).tolist()) - set(mapping))
    if uncovered:
        raise InputFormatError(
            path, None, f"relevance map {format_label_map(mapping)} does not cover label(s) {uncovered}"
        )
    keys = np.array(sorted(mapping), dtype=np.int64)
    values = np.array([mapping[k] for k in keys], dtype=np.int64)
    out = frame.copy()
    out[RELEVANCE] = values[np.searchsorted(keys, labels)]
    return out


def parse_label_map(text: str) -> dict[int, int]:
    """Parse ``"1:4,2:3,-1:0"`` into {1: 4, 2: 3, -1: 0}; raises ValueError on bad syntax."""
    mapping: dict[int, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([+-]?[0-9]+)\s*:\s*([+-]?[0-9]+(?:\.[0-9]+)?)", part)
        if not m:
            raise ValueError(f"{show(part)} is not LABEL:VALUE (e.g. 2:4)")
        key = integer(m.group(1), what="label", max_digits=len(str(MAX_LABEL)))  # NumberRefused is a ValueError
        if key in mapping:
            raise ValueError(f"label {key} appears twice")
        value = score(m.group(2), what="value", finite=True)
        mapping[key] = int(value) if value.is_integer() else value  # type: ignore[assignment]
    if not mapping:
        raise ValueError("empty map")
    return mapping


def format_label_map(mapping: dict[int, float]) -> str:
    return ",".join(f"{k}:{mapping[k]:g}" for k in sorted(mapping))


# ------------------------------------------------- prefs, judgment groups, z-scores
#: A field of a small TREC-like file: columns are separated by spaces and tabs, as trec_eval and the run reader
#: separate them; a no-break space or another Unicode blank stays inside its field, where the id rule refuses it.
_FIELD = re.compile(r"[^ \t]+")
_LAYOUT = " \t\r"


def _small_table(
    path: str, ncols: int, what: str, layout: str, ids: tuple[tuple[int, str], ...] = ()
) -> tuple[list[tuple[int, list[str]]], str, int]:
    """(line number, fields) of every content line of a small text file; '#' lines are comments (counted).

    ``ids``: (field index, "query" or "document") of the fields that are ids, each held to the id rule with its
    line and column."""
    path = str(path)
    raw = _trec_bytes(path)
    if raw.translate(None, _NOT_CONTROL):
        raise _control_error(raw, path)
    separator = line_separator(raw, path) if not raw.isascii() else None
    if separator is not None:
        raise separator
    comments = 0
    rows = []
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFormatError(path, raw[: exc.start].count(b"\n") + 1, "not valid UTF-8") from None
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        fields = _FIELD.findall(line)
        if not fields:
            continue
        if fields[0].startswith("#"):
            comments += 1
            continue
        if len(fields) != ncols:
            raise InputFormatError(path, number, f"expected {ncols} columns ({layout}) for {what}, found {len(fields)}")
        for index, kind in ids:
            if id_problem(fields[index]) is not None:
                column = [m.start() + 1 for m in _FIELD.finditer(line)][index]
                check_id(fields[index], kind, path, number, column=column)
        rows.append((number, fields))
    if not rows:
        raise InputFormatError(path, None, f"empty file: no {what} lines")
    return rows, sha256_bytes(raw), comments


def _number(path: str, number: int, token: str, what: str) -> float:
    """A number of a small table, read as a run's score is (the numbers door: ASCII, NaN refused)."""
    try:
        return score(token, what=what)
    except NumberRefused as exc:
        raise InputFormatError(path, number, f"{what} is NaN" if _NAN_TEXT.fullmatch(token) else str(exc)) from None


def _no_repeats(path: str, rows, keys, what: str) -> None:
    seen: dict[tuple, int] = {}
    for (number, _), key in zip(rows, keys):
        if key in seen:
            raise InputFormatError(path, number, f"repeats line {seen[key]} ({what} {key!r}); each may appear once")
        seen[key] = number


def read_prefs(path: str | os.PathLike, kind: str = "prefs"):
    """Preferences (``qid jg jsg docno rel_level``), or with ``kind="qrels_prefs"`` qrels read as preferences.

    qrels_prefs (trec_eval's ``get_qrels_prefs.c``): the iteration column is
    the judgment group, the sub-group is '0', the label is the rel_level.
    """
    from toolkit.data.records import Prefs

    path = str(path)
    if kind == "prefs":
        rows, sha, comments = _small_table(
            path, 5, "preferences", "query_id jg jsg doc_id rel_level", ids=((0, "query"), (3, "document"))
        )
        recs = [(f[0], f[1], f[2], f[3], _number(path, n, f[4], "rel_level")) for n, f in rows]
    elif kind == "qrels_prefs":
        rows, sha, comments = _small_table(
            path, 4, "qrels read as preferences", "query_id jg doc_id relevance", ids=((0, "query"), (2, "document"))
        )
        recs = [(f[0], f[1], "0", f[2], _number(path, n, f[3], "relevance")) for n, f in rows]
    else:
        raise ValueError(kind)
    _no_repeats(path, rows, [(r[0], r[1], r[2], r[3]) for r in recs], "query, jg, jsg, document")
    frame = pd.DataFrame(recs, columns=[QUERY_ID, "jg", "jsg", DOC_ID, "rel_level"])
    return Prefs(frame=frame.astype({"rel_level": "float64"}), path=path, sha256=sha, kind=kind, comment_lines=comments)


def read_qrels_jg(path: str | os.PathLike):
    """Qrels per judgment group (``qid jg docno relevance``, trec_eval's ``get_qrels_jg.c``): integer labels."""
    from toolkit.data.records import JudgmentGroups

    path = str(path)
    rows, sha, comments = _small_table(
        path, 4, "judgment-group qrels", "query_id jg doc_id relevance", ids=((0, "query"), (2, "document"))
    )
    recs = [(f[0], f[1], f[2], parse_label(f[3], path, n)) for n, f in rows]
    _no_repeats(path, rows, [(r[0], r[1], r[2]) for r in recs], "query, jg, document")
    frame = pd.DataFrame(recs, columns=[QUERY_ID, "jg", DOC_ID, RELEVANCE]).astype({RELEVANCE: "int64"})
    return JudgmentGroups(frame=frame, path=path, sha256=sha, comment_lines=comments)


def read_zscores(path: str | os.PathLike) -> dict[tuple[str, str], tuple[float, float]]:
    """trec_eval's ``-Z`` file: ``qid measure mean stddev`` per line -> {(qid, measure): (mean, stddev)}."""
    path = str(path)
    rows, _, _ = _small_table(path, 4, "z-score means", "query_id measure mean stddev", ids=((0, "query"),))
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for n, f in rows:
        key = (f[0], f[1])
        if key in out:
            raise InputFormatError(path, n, f"query {f[0]!r} measure {f[1]!r} appears twice")
        std = _number(path, n, f[3], "stddev")
        if std < 0:
            raise InputFormatError(path, n, f"stddev {f[3]!r} is negative")
        out[key] = (_number(path, n, f[2], "mean"), std)
    return out


# ------------------------------------------------------------------- topics
def read_topics(path: str | os.PathLike) -> Topics:
    """Read topics as TSV (``qid<TAB>text``), JSONL, TREC ``<top>`` or Anserini ``<DOC>`` blocks."""
    path = str(path)
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise InputFormatError(path, raw[: exc.start].count(b"\n") + 1, "not valid UTF-8") from None
    stripped = text.lstrip()
    if not stripped:
        raise InputFormatError(path, None, "empty file: no topics")
    if stripped.startswith("{"):
        topics = _topics_jsonl(text, path)
    elif "<top>" in text or "<DOC>" in text:
        # TREC and <DOC> blocks: each id checked with the line and column where it stands
        placed = _topics_trec(text) if "<top>" in text else _topics_docblocks(text)
        for topic, at in placed:
            start = text.rfind("\n", 0, at) + 1
            check_id(topic.query_id, "query", path, text.count("\n", 0, at) + 1, column=at - start + 1)
        topics = [topic for topic, _ in placed]
    else:
        topics = _topics_tsv(text, path)
    if not topics:
        raise InputFormatError(path, None, "no topics found")
    seen: set[str] = set()
    for t in topics:
        if t.query_id in seen:
            raise InputFormatError(path, None, f"query id {t.query_id!r} appears twice")
        seen.add(t.query_id)
    return Topics(topics=tuple(topics), path=path)


def _topics_tsv(text: str, path: str) -> list[Topic]:
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if "\t" not in line:
            raise InputFormatError(path, number, "expected 'query_id<TAB>text'")
        qid, query = line.split("\t", 1)
        # only the layout blanks around the id go (as a TREC file's columns): a no-break space or U+2028 at
        # its end is part of the id, and refused with it, not dropped
        column = len(qid) - len(qid.lstrip(_LAYOUT)) + 1
        out.append(
            Topic(
                check_id(qid.strip(_LAYOUT), "query", path, number, column=column),
                check_text(query.strip(), "query text", path, number),
            )
        )
    return out


def _topics_jsonl(text: str, path: str) -> list[Topic]:
    out = []
    for number, obj in iter_json_lines(text.split("\n"), path):
        qid = next((obj[k] for k in ("query_id", "qid", "_id", "id") if k in obj), None)
        query = next((obj[k] for k in ("text", "query", "title", "contents") if k in obj), None)
        if qid is None or query is None:
            raise InputFormatError(path, number, "JSON topic needs an id (qid/_id/id) and a text (text/query/title)")
        out.append(Topic(check_id(str(qid), "query", path, number), check_text(str(query), "query text", path, number)))
    return out


def _topics_trec(text: str) -> list[tuple[Topic, int]]:
    """(topic, offset of its id in ``text``) of every ``<top>`` block with a number and a title."""
    out = []
    for m in re.finditer(r"<top>(.*?)</top>", text, flags=re.S):
        block = m.group(1)
        num = re.search(r"<num>\s*(?:Number:)?\s*(\S+)", block)
        title = re.search(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<desc>|<narr>|<\w+>|$)", block, flags=re.S)
        if num and title:
            out.append((Topic(num.group(1).strip(), " ".join(title.group(1).split())), m.start(1) + num.start(1)))
    return out


def _topics_docblocks(text: str) -> list[tuple[Topic, int]]:
    """(topic, offset of its id in ``text``) of every ``<DOC>`` block."""
    out = []
    for m in re.finditer(r"<DOC>\s*<DOCNO>\s*(.*?)\s*</DOCNO>(.*?)</DOC>", text, flags=re.S):
        qid = m.group(1)
        at = m.start(1) + len(qid) - len(qid.lstrip())
        out.append((Topic(qid.strip(), " ".join(m.group(2).split())), at))
    return out


# ------------------------------------------------------------------ writing
#: The files written inside ``written_together()``, waiting to be put in place: (temporary file, target, the
#: path as given).
_PENDING: contextvars.ContextVar[list[tuple[str, Path, str]] | None] = contextvars.ContextVar(
    "twostage_pending_writes", default=None
)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success (inside
    ``written_together()``: when that block ends, with the other files it writes).

    An ``OSError`` of the file system (making the folder, the temporary file, a write, the rename: disk full,
    file-size limit, read-only, a loop of links, ...) names ``path`` as given, never the temporary file, and
    leaves what was at ``path`` as it was; an error of the block naming another file (an input) is kept as is.
    """
    from toolkit.guard.preflight import current_umask, make_folder, naming

    target = Path(path)
    # the temporary name repeats at most 64 bytes of the target's, so a long name that fits still fits
    stem = os.fsdecode(os.fsencode(target.name)[:64])
    try:
        make_folder(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise naming(exc, path) from exc
    pending = _PENDING.get()
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the file the usual permissions
        if pending is not None:
            pending.append((tmp, target, os.fspath(path)))
            return
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.filename is None or os.fsdecode(exc.filename) in (tmp, str(target)):  # a write, flush or rename
            raise naming(exc, path) from exc
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def written(path: str | os.PathLike) -> Path:
    """The file holding what was written for ``path``: inside ``written_together()``, the temporary file waiting
    to be put in place (to hash it for a sidecar); else ``path``."""
    target = Path(path)
    for tmp, pending, _ in _PENDING.get() or ():
        if pending == target:
            return Path(tmp)
    return target


@contextlib.contextmanager
def written_together() -> Iterator[None]:
    """The files ``atomic_write`` writes in the block (a run and its sidecar) are put in place together when it
    ends: all of them, or, when the file system refuses one (a rename that fails), none, each previous file back
    where it was (kept under a second name, a hard link, until all are in place). On an error in the block
    nothing is put in place."""
    if _PENDING.get() is not None:  # nested: the outer block puts them in place
        yield
        return
    pending: list[tuple[str, Path, str]] = []
    token = _PENDING.set(pending)
    try:
        yield
    except BaseException:
        for tmp, _, _ in pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    finally:
        _PENDING.reset(token)
    _put_in_place(pending)


def _put_in_place(pending: list[tuple[str, Path, str]]) -> None:
    from toolkit.guard.preflight import naming

    done: list[tuple[Path, bool, str | None]] = []  # (target, whether a file was there, its second name)
    try:
        for tmp, target, given in pending:
            existed = os.path.lexists(target)
            aside = _keep_aside(target) if existed else None
            try:
                os.replace(tmp, target)
            except OSError as exc:
                if aside is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(aside)
                raise naming(exc, given) from exc
            done.append((target, existed, aside))
    except BaseException:
        for target, existed, aside in reversed(done):  # the previous files back, or none where there was none
            with contextlib.suppress(OSError):
                if aside is not None:
                    os.replace(aside, target)
                elif not existed:
                    os.unlink(target)
        for tmp, _, _ in pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for _, _, aside in done:
        if aside is not None:
            with contextlib.suppress(OSError):
                os.unlink(aside)


def _keep_aside(target: Path) -> str | None:
    """A second name (a hard link) for the file at ``target``, to put it back; None where the file system makes
    no hard links (the file is then replaced for good)."""
    stem = os.fsdecode(os.fsencode(target.name)[:64])
    aside = str(target.with_name(f".{stem}.{secrets.token_hex(8)}.previous"))
    try:
        os.link(target, aside, follow_symlinks=False)
    except OSError:
        return None
    return aside


def write_json(path: str | os.PathLike, obj: object) -> None:
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")


def write_run(run: Run, path: str | os.PathLike, tag: str | None = None, depth: int | None = None) -> None:
    """Write ``run`` in trec_eval order (float64 scores) with ranks 1..n per query.

    Scores are written as the shortest text that reads back as the same double
    (arrow's float-to-string cast: ``38.661416``, ``1`` for 1.0, ``1e-7``), so
    writing manufactures no ties. Lines are built by arrow a block at a time.
    """
    from toolkit.data.ranking import ranked_positions

    order, rank = ranked_positions(run.frame, "float64")
    if depth is not None:
        keep = rank <= depth
        order, rank = order[keep], rank[keep]
    tag = tag if tag is not None else (run.tag or "twostage")
    queries, docs = arrow_of(run.frame[QUERY_ID]), arrow_of(run.frame[DOC_ID])
    scores = run.frame[SCORE].to_numpy()
    with atomic_write(path, "wb") as fh:
        for start in range(0, len(order), _WRITE_BLOCK):
            rows = order[start : start + _WRITE_BLOCK]
            lines = pc.binary_join_element_wise(
                take(queries, rows).cast(pa.large_string()),
                pa.scalar("Q0", pa.large_string()),
                take(docs, rows).cast(pa.large_string()),
                pc.cast(pa.array(rank[start : start + _WRITE_BLOCK]), pa.large_string()),
                pc.cast(pa.array(scores[rows]), pa.large_string()),
                pa.scalar(tag + "\n", pa.large_string()),
                pa.scalar(" ", pa.large_string()),
            )
            # the joined strings laid end to end are the block's lines
            _, offsets, data = lines.buffers()
            bounds = np.frombuffer(offsets, dtype=np.int64, count=len(lines) + 1, offset=8 * lines.offset)
            fh.write(memoryview(data)[bounds[0] : bounds[-1]])


_WRITE_BLOCK = 1 << 19
