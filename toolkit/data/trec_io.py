"""Strict, gz-aware reading and writing of TREC runs, qrels and topics.

Parsing is vectorised (pyarrow's CSV reader) on a whitespace-normalised copy of
the file; when that fast path rejects the file, a line-by-line pass over the
original text finds the first bad line and reports it as ``file:line: reason``.
Accepted quirks: a UTF-8 byte-order mark, CRLF line endings, runs of tabs and
spaces between columns, leading/trailing whitespace and blank lines. Everything
else that trec_eval would misread (non-numeric or NaN scores, wrong column
counts, duplicate documents, non-integer labels, empty files) is an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from toolkit.data.columns import arrow_of, row_hashes, take
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run, Topic, Topics
from toolkit.errors import InputFormatError, phrase
from toolkit.guard.readers import (
    check_id,
    check_id_column,
    check_labels,
    check_text,
    iter_json_lines,
    line_separator,
    open_input,
    parse_label,
    read_input,
)

DedupePolicy = Literal["error", "first"]

_UMASK = os.umask(0)
os.umask(_UMASK)

_WS_RUN = re.compile(rb"[ \t]+")
#: ASCII control characters other than the tab, newline and carriage return the parser reads as layout.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NOT_CONTROL = bytes(b for b in range(256) if not _CONTROL.fullmatch(bytes([b])))
_EDGE_WS = re.compile(rb"(?m)^ | $")


# ---------------------------------------------------------------- raw bytes
def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, gunzipped when it ends in .gz (bounded in size and ratio: ``toolkit.guard.readers``)."""
    return read_input(path)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
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
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


#: UTF-8 prefixes of every non-ASCII character ``BAD_ID_RE2`` refuses (U+0080-U+00A0, U+1680, U+2000-U+202F,
#: U+205F, U+3000): a file without any of them needs no check of its ids beyond the scan's.
_SUSPECT = (b"\xc2", b"\xe1\x9a\x80", b"\xe2\x80", b"\xe2\x81\x9f", b"\xe3\x80\x80")


def _scan(path: str) -> tuple[str, bool, bool, bool]:
    """One streaming pass: (sha256, file needs normalising (whitespace, BOM, CRLF, comment lines), file has content,
    file may hold a non-ASCII character the id rule refuses).

    A control character anywhere in the file is an error naming its line (``_control_error``), and so is a
    Unicode line separator (U+0085, U+2028, U+2029: ``toolkit.guard.readers.line_separator``).
    """
    h = hashlib.sha256()
    odd = False
    content = False
    control = False
    nonascii = False
    separator = False
    tail = b""
    try:
        with open_input(path) as fh:
            first = True
            after_newline = True
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
                if first and chunk.startswith(b"\xef\xbb\xbf"):
                    odd = True
                first = False
                # single-byte searches are memchr-fast; double spaces and edge blanks surface as
                # column-count errors in the fast parse and send it down the normalising path
                odd = odd or b"\t" in chunk or b"\r" in chunk or b"\n#" in chunk
                odd = odd or (after_newline and chunk.startswith(b"#"))
                after_newline = chunk.endswith(b"\n")
                content = content or not chunk.isspace()
                # deleting every other byte is a C loop: ~0.1 s per 256 MiB, where a regex search takes ~1 s
                control = control or bool(chunk.translate(None, _NOT_CONTROL))
                if not chunk.isascii():  # a character's 2-3 bytes may straddle two chunks
                    edge = tail + chunk[:2]
                    separator = separator or line_separator(edge, path) is not None
                    separator = separator or line_separator(chunk, path) is not None
                    # lead bytes of the non-ASCII blanks and controls the id rule refuses (substring
                    # searches run at memchr speed; é, 文 and most scripts hold none of them)
                    nonascii = nonascii or any(lead in edge or lead in chunk for lead in _SUSPECT)
                tail = chunk[-2:]
    except FileNotFoundError:
        raise InputFormatError(path, None, "no such file") from None
    except IsADirectoryError:
        raise InputFormatError(path, None, "is a directory, expected a file") from None
    except (OSError, EOFError) as exc:
        raise InputFormatError(path, None, f"cannot read: {exc}") from None
    if control:
        raise _control_error(read_bytes(path), path)
    if separator:
        raise line_separator(read_bytes(path), path) or InputFormatError(path, None, "line separator")
    return h.hexdigest(), odd, content, nonascii


def _control_error(data: bytes, path: str) -> InputFormatError:
    """The first control character of ``data``, as an error naming its line and column.

    An id holding one cannot mean what the user thinks: trec_eval aborts on a NUL (9.0.4 crashes,
    10 fails in malloc), compares other control characters as bytes, and a terminal shows neither.
    """
    m = _CONTROL.search(data)
    at, byte = (m.start(), m.group()[0]) if m else (0, 0)  # the scan saw one, so m is set
    start = data.rfind(b"\n", 0, at) + 1
    name = "NUL" if byte == 0 else f"control character U+{byte:04X}"
    return InputFormatError(
        path,
        data.count(b"\n", 0, at) + 1,
        f"{name} at column {at - start + 1}; ids must be printable text "
        "(trec_eval aborts on a NUL and compares other control characters as bytes)",
    )


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
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputFormatError(path, line, "not valid UTF-8") from None
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            yield number, fields


def _line_of_row(path: str, row: int) -> int:
    """The line number of the row-th (0-based) non-blank line (error path only: re-reads the file)."""
    for i, (number, _) in enumerate(_text_lines(read_bytes(path), path)):
        if i == row:
            return number
    return -1


def _arrow_read(source, names: tuple[str, ...], types: dict[str, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(
        source,
        read_options=pacsv.ReadOptions(column_names=list(names), block_size=1 << 22),
        parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            include_columns=[n for n in names if n in types],
        ),
    )


_TRAILING = re.compile(rb"(?m)^((?:[^ \n]+ ){5}[^ \n]+) [^\n]*$")


def _parse_table(path: str, names, types, locate, trailing: bool = False) -> tuple[pa.Table, str, int, int]:
    """Fast path: arrow straight from the file; else normalise in memory; else find the bad line.

    Returns the table, the file's sha256, the number of comment lines skipped
    and, when ``trailing`` (runs: trec_eval ignores whatever follows the tag),
    the number of lines whose text after the sixth column was ignored. Ids are
    checked by ``toolkit.guard.readers.check_id_column`` when the file holds
    any non-ASCII byte (an ASCII file's only bad id characters are the control
    characters ``_scan`` refused already and the blanks arrow splits on).
    """
    sha, odd, content, nonascii = _scan(path)
    if not content:
        raise InputFormatError(path, None, "empty file: no lines to read")
    table = None
    if not odd:
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowTypeError):  # maybe only double spaces or edge blanks
            table, comments, cut = _arrow_read(path, names, types), 0, 0
    if table is None:
        raw = read_bytes(path)
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
        for column, what in (("query_id", "query"), ("doc_id", "document")):
            check_id_column(table.column(column), what, path, lambda row: _line_of_row(path, row))
    return table, sha, comments, cut


def _parse_score(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _locate_run_error(data: bytes, path: str) -> InputFormatError:
    for number, fields in _text_lines(data, path):
        if len(fields) < 6:
            return InputFormatError(
                path, number, f"expected 6 columns (query_id Q0 doc_id rank score tag), found {len(fields)}"
            )
        score = _parse_score(fields[4])
        if score is None or "_" in fields[4]:
            return InputFormatError(path, number, f"score {fields[4]!r} is not a number")
        if math.isnan(score):
            return InputFormatError(path, number, "score is NaN; trec_eval's sort breaks on NaN, so it is refused")
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


def _duplicate_rows(query: pa.ChunkedArray, doc: pa.ChunkedArray) -> np.ndarray:
    """Row numbers that repeat an earlier (query, doc) pair, in file order.

    Hash, then verify: rows whose 64-bit pair hash occurs more than once are the
    only candidates (usually none), and among those the exact strings decide.
    """
    ordered = row_hashes(query, doc)
    ordered.sort()  # in place: one array of hashes in memory, not two
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(repeated):
        return np.zeros(0, dtype=np.int64)
    repeated = np.unique(repeated)
    h = row_hashes(query, doc)  # again, in file order (only when some hash repeats)
    at = np.clip(np.searchsorted(repeated, h), 0, len(repeated) - 1)
    candidates = np.flatnonzero(repeated[at] == h)
    return candidates[_exact_duplicates(take(query, candidates), take(doc, candidates))]


def _exact_duplicates(query, doc) -> np.ndarray:
    """Positions that repeat an earlier (query, doc) pair: a stable sort, then adjacent rows compared."""
    n = len(query)
    if n < 2:
        return np.zeros(0, dtype=np.int64)
    order = pc.sort_indices(pa.table({"q": query, "d": doc}), sort_keys=[("q", "ascending"), ("d", "ascending")])
    q_sorted, d_sorted = query.take(order), doc.take(order)
    same = pc.and_(pc.equal(q_sorted[1:], q_sorted[:-1]), pc.equal(d_sorted[1:], d_sorted[:-1]))
    order = order.to_numpy()
    return np.sort(order[1:][same.to_numpy(zero_copy_only=False)])


def _dedupe(table: pa.Table, path: str, policy: DedupePolicy, what: str) -> tuple[pa.Table, int]:
    dups = _duplicate_rows(table.column("query_id"), table.column("doc_id"))
    if len(dups) == 0:
        return table, 0
    if policy == "first":
        keep = np.ones(table.num_rows, dtype=bool)
        keep[dups] = False
        return table.filter(pa.array(keep)), len(dups)
    row = int(dups[0])
    q, d = table.column("query_id")[row].as_py(), table.column("doc_id")[row].as_py()
    raise InputFormatError(
        path,
        _line_of_row(path, row),
        f"{what} lists document {d!r} twice for query {q!r} ({len(dups)} duplicate line(s) in all); "
        f"trec_eval refuses this; pass {phrase('dedupe=' + repr('first'), '--dedupe first')} to keep the first occurrence",
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
def read_run(path: str | os.PathLike, dedupe: DedupePolicy = "error") -> Run:
    """Parse a TREC run (``qid Q0 docid rank score tag``); ``-`` reads it from standard input.

    Lines whose first non-blank character is '#' are comments (trec_eval 10),
    skipped and counted. ``tag`` is the first line's tag, ``last_tag`` the last
    line's (what trec_eval prints as runid).
    """
    path = str(path)
    if path == "-":
        return _read_stdin_run(dedupe)
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


def _read_stdin_run(dedupe: DedupePolicy) -> Run:
    """A run piped on standard input: spooled to a temporary file in 1 MiB pieces (never held whole in memory, as a
    run file is not), then read as a file is; errors still name '-' and the line."""
    import dataclasses
    import shutil
    import sys

    fd, tmp = tempfile.mkstemp(prefix="twostage-stdin-", suffix=".run")
    try:
        with os.fdopen(fd, "wb") as fh:
            shutil.copyfileobj(sys.stdin.buffer, fh, 1 << 20)
        try:
            run = read_run(tmp, dedupe)
        except InputFormatError as exc:
            raise InputFormatError("-", exc.line, exc.reason) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return dataclasses.replace(run, path="-")


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
        with open(path, "rb") as fh:
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
def read_qrels(
    path: str | os.PathLike,
    dedupe: DedupePolicy = "error",
    relevance_map: dict[int, int] | None = None,
    relevance_map_name: str = "",
) -> Qrels:
    """Parse TREC qrels (``qid iteration docid relevance``), integer labels.

    ``relevance_map`` (original -> new label) is applied to every line; a label
    it does not cover is an error, never a silent default.
    """
    path = str(path)
    names = ("query_id", "iteration", "doc_id", "relevance")
    types = {"query_id": pa.large_string(), "doc_id": pa.large_string(), "relevance": pa.int64()}
    table, sha, comments, _ = _parse_table(path, names, types, _locate_qrels_error)
    check_labels(table.column("relevance").to_numpy(), path, lambda row: _line_of_row(path, row))
    table, dropped = _dedupe(table, path, dedupe, "qrels")
    frame = _frame(table, {"query_id": QUERY_ID, "doc_id": DOC_ID, "relevance": RELEVANCE})
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
        m = re.fullmatch(r"([+-]?\d+)\s*:\s*([+-]?\d+(?:\.\d+)?)", part)
        if not m:
            raise ValueError(f"{part!r} is not LABEL:VALUE (e.g. 2:4)")
        key = int(m.group(1))
        if key in mapping:
            raise ValueError(f"label {key} appears twice")
        value = float(m.group(2))
        mapping[key] = int(value) if value.is_integer() else value  # type: ignore[assignment]
    if not mapping:
        raise ValueError("empty map")
    return mapping


def format_label_map(mapping: dict[int, float]) -> str:
    return ",".join(f"{k}:{mapping[k]:g}" for k in sorted(mapping))


# ------------------------------------------------- prefs, judgment groups, z-scores
def _small_table(path: str, ncols: int, what: str, layout: str) -> tuple[list[tuple[int, list[str]]], str, int]:
    """(line number, fields) of every content line of a small text file; '#' lines are comments (counted)."""
    path = str(path)
    raw = read_bytes(path)
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
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith("#"):
            comments += 1
            continue
        if len(fields) != ncols:
            raise InputFormatError(path, number, f"expected {ncols} columns ({layout}) for {what}, found {len(fields)}")
        rows.append((number, fields))
    if not rows:
        raise InputFormatError(path, None, f"empty file: no {what} lines")
    return rows, sha256_bytes(raw), comments


def _number(path: str, number: int, token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputFormatError(path, number, f"{what} {token!r} is not a number") from None
    if math.isnan(value):
        raise InputFormatError(path, number, f"{what} is NaN")
    return value


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
        rows, sha, comments = _small_table(path, 5, "preferences", "query_id jg jsg doc_id rel_level")
        recs = [(f[0], f[1], f[2], f[3], _number(path, n, f[4], "rel_level")) for n, f in rows]
    elif kind == "qrels_prefs":
        rows, sha, comments = _small_table(path, 4, "qrels read as preferences", "query_id jg doc_id relevance")
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
    rows, sha, comments = _small_table(path, 4, "judgment-group qrels", "query_id jg doc_id relevance")
    recs = []
    for n, f in rows:
        recs.append(
            (check_id(f[0], "query", path, n), f[1], check_id(f[2], "document", path, n), parse_label(f[3], path, n))
        )
    _no_repeats(path, rows, [(r[0], r[1], r[2]) for r in recs], "query, jg, document")
    frame = pd.DataFrame(recs, columns=[QUERY_ID, "jg", DOC_ID, RELEVANCE]).astype({RELEVANCE: "int64"})
    return JudgmentGroups(frame=frame, path=path, sha256=sha, comment_lines=comments)


def read_zscores(path: str | os.PathLike) -> dict[tuple[str, str], tuple[float, float]]:
    """trec_eval's ``-Z`` file: ``qid measure mean stddev`` per line -> {(qid, measure): (mean, stddev)}."""
    path = str(path)
    rows, _, _ = _small_table(path, 4, "z-score means", "query_id measure mean stddev")
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
    elif "<top>" in text:
        topics = _topics_trec(text)
    elif "<DOC>" in text:
        topics = _topics_docblocks(text)
    else:
        topics = _topics_tsv(text, path)
    if not topics:
        raise InputFormatError(path, None, "no topics found")
    seen: set[str] = set()
    for t in topics:
        check_id(t.query_id, "query", path)  # TREC and <DOC> blocks; TSV and JSONL were checked with their line
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
        out.append(
            Topic(check_id(qid.strip(), "query", path, number), check_text(query.strip(), "query text", path, number))
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


def _topics_trec(text: str) -> list[Topic]:
    out = []
    for block in re.findall(r"<top>(.*?)</top>", text, flags=re.S):
        num = re.search(r"<num>\s*(?:Number:)?\s*(\S+)", block)
        title = re.search(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<desc>|<narr>|<\w+>|$)", block, flags=re.S)
        if num and title:
            out.append(Topic(num.group(1).strip(), " ".join(title.group(1).split())))
    return out


def _topics_docblocks(text: str) -> list[Topic]:
    out = []
    for qid, body in re.findall(r"<DOC>\s*<DOCNO>\s*(.*?)\s*</DOCNO>(.*?)</DOC>", text, flags=re.S):
        out.append(Topic(qid.strip(), " ".join(body.split())))
    return out


# ------------------------------------------------------------------ writing
@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if exc.filename is None:  # a write or flush that failed (disk full): name the file it was for
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
