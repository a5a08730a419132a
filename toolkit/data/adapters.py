"""Adapters from the inputs people already have to the toolkit's ``Run`` and ``Qrels``.

Accepted: a path (TREC format, gz allowed), a collection name (qrels only: ``dl19-passage``), a pandas
DataFrame (PyTerrier's ``qid, docno, score[, rank]`` and ``qid, docno, label``; ir_datasets'
``query_id, doc_id, relevance``; twostage's ``query_id, doc_id, score``; TREC's ``docid``), a
pytrec_eval / ranx style ``{qid: {docid: value}}`` dict, ranx ``Run`` / ``Qrels`` objects, an
iterable of ir_measures ``ScoredDoc`` / ``Qrel`` tuples, and the toolkit's own ``Run`` / ``Qrels``.
An in-memory input with no rows is refused as empty (``InputFormatError``: "the run is empty").

In-memory inputs are validated as files are (``as_run(..., finite=True)`` refuses infinite scores too, as
``read_run``'s ``finite`` does): a missing column, a NaN or non-numeric score, a
non-integer label, an empty id or one holding whitespace, a control or a format character, or a repeated
(query, document) pair raises ``InputFormatError`` naming the row
(0-based position in the frame, or in the iterable); nothing is dropped unless ``dedupe="first"``
asks for it, and then the count is in the provenance. Integer query or document ids (a frame read
with ``pd.read_csv``) are converted to their decimal text, and a log message says so; ids of any
other non-text type are refused.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from operator import methodcaller
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run
from toolkit.errors import ConfigError, InputFormatError, phrase
from toolkit.guard.numbers import first_not_finite, show
from toolkit.guard.readers import check_id, check_id_column, check_labels

log = logging.getLogger(__name__)

#: Column names accepted for each field, in the order they are looked for.
QUERY_COLUMNS = ("query_id", "qid")
DOC_COLUMNS = ("doc_id", "docno", "docid")
SCORE_COLUMNS = ("score",)
LABEL_COLUMNS = ("relevance", "label")

FRAME = "<DataFrame>"
DICT = "<dict>"
ITERABLE = "<iterable>"


def _column(frame: pd.DataFrame, names: tuple[str, ...], what: str, where: str) -> str:
    for n in names:
        if n in frame.columns:
            return n
    raise InputFormatError(
        where, None, f"no {what} column: expected one of {', '.join(names)}; the columns are {list(frame.columns)}"
    )


def _show(value: object) -> str:
    """A cell as the user wrote it (numpy scalars as Python numbers)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _id_kind(v: object) -> int:
    """1 text, 2 integer (converted), 0 anything else (refused: floats, None, bools)."""
    if isinstance(v, str):
        return 1
    return 2 if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) else 0


def _chunked(a: Any) -> Any:
    """A large_string ``ChunkedArray`` (string columns are cast: their offsets are 32-bit)."""
    import pyarrow as pa

    if not isinstance(a, pa.ChunkedArray):
        a = pa.chunked_array([a])
    return a.cast(pa.large_string()) if not pa.types.is_large_string(a.type) else a


def _not_text(values: pd.Series, row: int, what: str, where: str) -> InputFormatError:
    return InputFormatError(
        where, None, f"row {row}: {what} id {_show(values.iloc[row])} is not text (give ids as str or int)"
    )


def _ids(values: pd.Series, what: str, where: str) -> Any:
    """Ids as a large_string arrow column: text as it is, integers as decimal text (logged), anything else refused.

    Arrow-backed text is taken without a copy and object columns of ``str`` are converted in C; only a column
    that mixes kinds, or holds a text UTF-8 cannot encode (a lone surrogate), is looked at row by row, to name
    the first bad row.
    """
    try:
        return _ids_of(values, what, where)
    except UnicodeEncodeError:
        for row, value in enumerate(values.tolist()):
            if isinstance(value, str):
                check_id(value, what, where, where=f"row {row}")
        raise  # not reached: the conversion failed on a text holding a lone surrogate, which check_id refuses


def _ids_of(values: pd.Series, what: str, where: str) -> Any:
    import pyarrow as pa

    if isinstance(values.array, pd.arrays.ArrowStringArray):
        text = _chunked(pa.array(values.array))
    elif pd.api.types.is_integer_dtype(values.dtype):
        if values.hasnans:  # a nullable Int64 column with a missing value
            raise _not_text(values, int(np.flatnonzero(values.isna().to_numpy())[0]), what, where)
        log.info("%s: integer %s ids converted to text (str)", where, what)
        text = _chunked(pa.array(values.to_numpy()))  # arrow's cast writes the same decimal text as str()
    elif pd.api.types.is_object_dtype(values.dtype):
        try:  # all text (PyTerrier's frames): converted in C, no Python loop
            text = _chunked(pa.array(values.to_numpy(), type=pa.large_string(), from_pandas=True))
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            return _mixed_ids(values, what, where)
    elif pd.api.types.is_string_dtype(values.dtype):
        text = _chunked(pa.array(values.to_numpy(dtype=object), type=pa.large_string(), from_pandas=True))
    elif len(values):
        raise _not_text(values, 0, what, where)
    else:  # an empty column has no dtype worth checking
        text = _chunked(pa.array([], pa.large_string()))
    if text.null_count:
        raise _not_text(values, int(np.flatnonzero(text.is_null().to_numpy(zero_copy_only=False))[0]), what, where)
    return _valid_ids(text, what, where)


def _valid_ids(text: Any, what: str, where: str) -> Any:
    """``text`` if no id is empty or holds whitespace, a control or a format character (``toolkit.guard.readers``,
    as for files), checked in C; else the error naming the first such row and its id."""
    check_id_column(text, what, where)
    return text


def _mixed_ids(values: pd.Series, what: str, where: str) -> Any:
    """An object column that is not all text: integers become text (logged), the first other value is refused."""
    import pyarrow as pa

    kind = values.map(_id_kind).to_numpy()
    bad = np.flatnonzero(kind == 0)
    if len(bad):
        raise _not_text(values, int(bad[0]), what, where)
    log.info("%s: integer %s ids converted to text (str)", where, what)
    return _valid_ids(
        _chunked(pa.array(values.astype("str").to_numpy(dtype=object), type=pa.large_string())), what, where
    )


def _text_column(text: Any) -> pd.Series:
    """An arrow-backed text column with a fresh index, as the file readers make (no per-row Python objects)."""
    return pd.Series(pd.arrays.ArrowStringArray(text), copy=False)


def _numbers(values: pd.Series, what: str, where: str, finite: bool = False) -> np.ndarray:
    """The values as float64: text read by pandas' own ASCII parser (``٣`` and ``1_0`` are not numbers), NaN
    refused, and with ``finite`` the infinities too (``toolkit.data.trec_io.FINITE_WHY``)."""
    if values.dtype == np.float64:
        out = values.to_numpy()  # already numbers: no conversion, no copy
    else:
        try:
            out = pd.to_numeric(values, errors="raise").to_numpy(dtype=np.float64)
        except (ValueError, TypeError):
            parsed = pd.to_numeric(values, errors="coerce")
            row = int(np.flatnonzero(parsed.isna().to_numpy() & values.notna().to_numpy())[0])
            raise InputFormatError(
                where, None, f"row {row}: {what} {_show(values.iloc[row])} is not a number"
            ) from None
    nan = np.isnan(out)
    if nan.any():
        row = int(np.flatnonzero(nan)[0])
        raise InputFormatError(
            where, None, f"row {row}: {what} is NaN; trec_eval's sort breaks on NaN, so it is refused"
        )
    infinite = first_not_finite(out) if finite else None
    if infinite is not None:
        raise _not_finite(where, f"row {infinite}", what, out[infinite])
    return out


def _not_finite(where: str, place: str, what: str, value: float) -> InputFormatError:
    from toolkit.data.trec_io import FINITE_WHY

    return InputFormatError(where, None, f"{place}: {what} {show(value)} is not finite: {FINITE_WHY}")


def _for_hashing(a: Any) -> Any:
    """``a`` cut in pieces of 2**19 rows, so the pair hashing's temporaries stay small."""
    import pyarrow as pa

    step = 1 << 19
    return pa.chunked_array([c.slice(i, step) for c in a.chunks for i in range(0, len(c), step)], type=a.type)


def _dedupe(
    query: Any, doc: Any, values: np.ndarray, where: str, dedupe: str, what: str
) -> tuple[Any, Any, np.ndarray, int]:
    """Repeated (query, doc) rows, found as files' are (64-bit pair hashes, then the exact strings)."""
    import pyarrow as pa

    from toolkit.data.duplicates import duplicate_rows

    rows = duplicate_rows(_for_hashing(query), _for_hashing(doc))
    if not len(rows):
        return query, doc, values, 0
    if dedupe == "first":
        keep = np.ones(len(values), dtype=bool)
        keep[rows] = False
        mask = pa.array(keep)
        return query.filter(mask), doc.filter(mask), values[keep], len(rows)
    row = int(rows[0])
    q, d = query[row].as_py(), doc[row].as_py()
    raise InputFormatError(
        where,
        None,
        f"row {row}: {what} lists document {d!r} twice for query {q!r} ({len(rows)} duplicate row(s) in all); "
        f"trec_eval refuses this; pass {phrase('dedupe=' + repr('first'), '--dedupe first')} to keep the first "
        "occurrence",
    )


def _frame_sha256(query: Any, doc: Any, values: np.ndarray) -> str:
    """The sha256 content checksum of an in-memory table, for provenance to tell inputs apart.

    It covers, in row order, each id column's UTF-8 bytes and string lengths and the values as little-endian
    float64 (scores) or int64 (labels): equal tables give equal checksums whatever their dtype or chunking,
    a change of one id or one value changes it, and so does a change of row order.
    """
    from toolkit.data.columns import text_digests

    h = hashlib.sha256(b"twostage in-memory table v2\0")
    for column in (query, doc):
        for digest in text_digests(column):
            h.update(digest)
    h.update(hashlib.sha256(np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).data).digest())
    return h.hexdigest()


def _checked(
    query: Any, doc: Any, values: np.ndarray, where: str, dedupe: str, what: str
) -> tuple[Any, Any, np.ndarray, int, str]:
    """The duplicate check and the checksum at once: the checksum in a thread (hashlib and numpy release the
    GIL on large buffers, so on two cores it costs almost nothing), taken again if ``dedupe="first"`` drops."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_frame_sha256, query, doc, values)
        out_query, out_doc, out_values, dropped = _dedupe(query, doc, values, where, dedupe, what)
        sha = pending.result()
    if dropped:
        sha = _frame_sha256(out_query, out_doc, out_values)
    return out_query, out_doc, out_values, dropped, sha


def _table(query: Any, doc: Any, name: str, values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({QUERY_ID: _text_column(query), DOC_ID: _text_column(doc), name: values}, copy=False)


# --------------------------------------------------------------------- runs
def run_from_frame(
    frame: pd.DataFrame, *, dedupe: str = "error", tag: str = "", where: str = FRAME, finite: bool = False
) -> Run:
    """A ``Run`` from a DataFrame with query, document and score columns (any rank column is ignored); with
    ``finite``, an infinite score is refused (as ``read_run``'s ``finite``)."""
    q = _column(frame, QUERY_COLUMNS, "query id", where)
    d = _column(frame, DOC_COLUMNS, "document id", where)
    s = _column(frame, SCORE_COLUMNS, "score", where)
    query, doc = _ids(frame[q], "query", where), _ids(frame[d], "document", where)
    scores = _numbers(frame[s], "score", where, finite)
    query, doc, scores, dropped, sha = _checked(query, doc, scores, where, dedupe, "run")
    if not tag and "name" in frame.columns and frame["name"].nunique() == 1:
        tag = str(frame["name"].iloc[0])  # PyTerrier's transformer name
    out = _table(query, doc, SCORE, scores)
    return Run(frame=out, path=where, tag=tag, sha256=sha, duplicates_dropped=dropped, last_tag=tag)


def _nested_frame(obj: Mapping, value: str, where: str) -> pd.DataFrame:
    """``{qid: {doc: value}}`` as columns, built in C: keys and values chained, query ids repeated by count."""
    import pyarrow as pa

    inner = list(obj.values())
    for qid, docs_of in zip(obj, inner):  # one check per query, not per document
        if not isinstance(docs_of, Mapping):
            raise InputFormatError(where, None, f"query {qid!r}: expected {{doc_id: {value}}}, got {type(docs_of)}")
    counts = np.fromiter(map(len, inner), dtype=np.int64, count=len(inner))
    n = int(counts.sum())
    qids = pd.Series(list(obj), dtype=object)
    try:  # text ids (the usual case): arrow columns the frame path takes without another conversion
        qid_text = pa.array(qids.to_numpy(), type=pa.large_string())
        doc_text = pa.array(chain.from_iterable(inner), type=pa.large_string(), size=n)
        if qid_text.null_count or doc_text.null_count:
            raise pa.ArrowInvalid("None is not text")  # the frame path names the row, showing None as given
        query: pd.Series = _text_column(_chunked(qid_text.take(pa.array(np.repeat(np.arange(len(inner)), counts)))))
        doc: pd.Series = _text_column(_chunked(doc_text))
    except (pa.ArrowTypeError, pa.ArrowInvalid, UnicodeEncodeError):  # ints or worse: the frame path names the row
        query = pd.Series(np.repeat(qids.to_numpy(), counts), dtype=object)
        doc = pd.Series(list(chain.from_iterable(inner)), dtype=object)
    values = map(methodcaller("values"), inner)
    try:
        numbers = pd.Series(np.fromiter(chain.from_iterable(values), dtype=np.float64, count=n))
    except (ValueError, TypeError):  # the frame path names the first row that is not a number
        numbers = pd.Series(list(chain.from_iterable(map(methodcaller("values"), inner))), dtype=object)
    return pd.DataFrame({QUERY_ID: query, DOC_ID: doc, value: numbers}, copy=False)


def _tuples_frame(items: Iterable, fields: tuple[str, ...], where: str) -> pd.DataFrame:
    rows = list(items)
    for i, r in enumerate(rows):
        if not all(hasattr(r, f) for f in fields):
            raise InputFormatError(where, None, f"row {i}: expected a tuple with fields {', '.join(fields)}, got {r!r}")
    return pd.DataFrame({f: pd.Series([getattr(r, f) for r in rows], dtype=object) for f in fields})


def _ranx(obj: Any) -> dict | None:
    """A ranx ``Run``/``Qrels`` as its ``{qid: {docid: value}}`` dict (ranx is not imported); None otherwise."""
    if type(obj).__module__.split(".")[0] == "ranx" and callable(getattr(obj, "to_dict", None)):
        return obj.to_dict()
    return None


_R = TypeVar("_R", Run, Qrels)


def _not_empty(out: _R, what: str) -> _R:
    if not len(out.frame):
        raise InputFormatError(
            out.path,
            None,
            f"the {what} {'are' if what == 'qrels' else 'is'} empty: it has no (query, document, value) rows",
        )
    return out


def run_label(run: Any, i: int) -> str:
    """The name of the ``i``-th of several runs given without names: a path's file name without .gz, .trec,
    .txt, .run, .json; else the run's tag (or runid); else ``run<i+1>``."""
    from pathlib import Path

    if isinstance(run, (str, os.PathLike)):
        name = Path(run).name
        for suffix in (".gz", ".trec", ".txt", ".run", ".json"):
            name = name.removesuffix(suffix)
        return name
    tag = getattr(run, "tag", "") or getattr(run, "runid", "")
    return str(tag) if tag else f"run{i + 1}"


def name_runs(runs: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    """``{name: run}``: a mapping as given (names as text), a sequence named by ``run_label``; two runs of a
    sequence with one name are an error."""
    if isinstance(runs, Mapping):
        return {str(k): v for k, v in runs.items()}
    named: dict[str, Any] = {}
    for i, r in enumerate(runs):
        name = run_label(r, i)
        if name in named:
            raise ConfigError(f"two runs named {name!r}; pass a dict {{name: run}}")
        named[name] = r
    return named


def system_name(given: Any, run: Run | None = None) -> str:
    """The name a user gave a system: a run file's name (without .txt, .trec, .run, .gz), a ranx run's name, a
    PyTerrier frame's single ``name``; else ``run``. Never the run's tag (Pyserini writes ``rank`` or
    ``Anserini`` in every file)."""
    from pathlib import Path

    if isinstance(given, (str, os.PathLike)):
        name = Path(given).name
        for suffix in (".gz", ".trec", ".txt", ".run", ".json"):
            name = name.removesuffix(suffix)
        return name
    if _ranx(given) is not None and getattr(given, "name", None):
        return str(given.name)
    if isinstance(given, pd.DataFrame) and "name" in given.columns and given["name"].nunique() == 1:
        return str(given["name"].iloc[0])
    return "run"


def as_run(obj: Any, *, dedupe: str = "error", finite: bool = False, run_format: str | None = None) -> Run:
    """A ``Run`` from a path, a DataFrame, a ``{qid: {docid: score}}`` dict, a ranx ``Run``, ir_measures
    ``ScoredDoc``s, a ``toolkit.Run`` or a ``records.Run``; see the module docstring for the validation. With
    ``finite``, a run holding an infinite score is refused, naming its line or row (a computation that rescales
    scores asks for it; ``eval`` reads ``inf`` as trec_eval does). A path is read in ``run_format`` (``trec``,
    ``msmarco``, ``auto``; None: auto, or the enclosing ``runs_read_as`` block's), as ``read_run`` reads it."""
    from toolkit.data.trec_io import read_run

    inner = getattr(obj, "inner", None)
    run = obj if isinstance(obj, Run) else inner if isinstance(inner, Run) else None
    if run is not None:
        infinite = first_not_finite(run.frame[SCORE].to_numpy(dtype=np.float64)) if finite else None
        if infinite is not None:
            raise _not_finite(run.path or "<Run>", f"row {infinite}", "score", run.frame[SCORE].iloc[infinite])
        return run
    if isinstance(obj, (str, os.PathLike)):
        return read_run(obj, dedupe=dedupe, finite=finite, run_format=run_format)  # type: ignore[arg-type]
    ranx = _ranx(obj)
    if ranx is not None:
        where = f"<ranx Run {getattr(obj, 'name', '') or ''}>".replace(" >", ">")
        frame = _nested_frame(ranx, SCORE, where)
        return _not_empty(run_from_frame(frame, dedupe=dedupe, where=where, finite=finite), "run")
    if isinstance(obj, pd.DataFrame):
        return _not_empty(run_from_frame(obj, dedupe=dedupe, finite=finite), "run")
    if isinstance(obj, Mapping):
        frame = _nested_frame(obj, SCORE, DICT)
        return _not_empty(run_from_frame(frame, dedupe=dedupe, where=DICT, finite=finite), "run")
    if isinstance(obj, Iterable):
        frame = _tuples_frame(obj, ("query_id", "doc_id", "score"), ITERABLE)
        return _not_empty(run_from_frame(frame, dedupe=dedupe, where=ITERABLE, finite=finite), "run")
    raise ConfigError(
        f"cannot read a run from {type(obj).__name__}: give a path, a DataFrame, a dict, a ranx Run or ScoredDocs"
    )


# -------------------------------------------------------------------- qrels
def qrels_from_frame(frame: pd.DataFrame, *, dedupe: str = "error", where: str = FRAME) -> Qrels:
    """A ``Qrels`` from a DataFrame with query, document and integer label columns."""
    q = _column(frame, QUERY_COLUMNS, "query id", where)
    d = _column(frame, DOC_COLUMNS, "document id", where)
    r = _column(frame, LABEL_COLUMNS, "relevance label", where)
    labels = _numbers(frame[r], "relevance label", where)
    check_labels(labels, where)  # |label| <= MAX_LABEL, before the cast to int64
    frac = labels != np.floor(labels)
    if frac.any():
        row = int(np.flatnonzero(frac)[0])
        raise InputFormatError(where, None, f"row {row}: relevance {_show(frame[r].iloc[row])} is not an integer")
    query, doc = _ids(frame[q], "query", where), _ids(frame[d], "document", where)
    query, doc, labels, dropped, sha = _checked(query, doc, labels.astype(np.int64), where, dedupe, "qrels")
    out = _table(query, doc, RELEVANCE, labels)
    return Qrels(frame=out, path=where, sha256=sha, duplicates_dropped=dropped)


def _relabel(qrels: Qrels, relevance_map: str | None) -> Qrels:
    import dataclasses

    from toolkit.data.catalog import relevance_map as parse_map
    from toolkit.data.trec_io import apply_relevance_map

    if not relevance_map:
        return qrels
    mapping, name = parse_map(relevance_map)
    frame = apply_relevance_map(qrels.frame, mapping, qrels.path)
    return dataclasses.replace(qrels, frame=frame, relevance_map=mapping, relevance_map_name=name)


def as_qrels(
    obj: Any,
    *,
    dedupe: str = "error",
    relevance_map: str | None = None,
    data_dir: str | os.PathLike | None = None,
    subtopics: bool = False,
) -> Qrels:
    """A ``Qrels`` from a path, a collection name, a DataFrame, a ``{qid: {docid: label}}`` dict, ir_measures
    ``Qrel``s or a ``records.Qrels``; ``relevance_map`` (``1:0,2:1`` or a preset) relabels at load time.
    ``subtopics``: diversity qrels (``qid subtopic docid rel``): a file read with its second column as the
    subtopic, a DataFrame with a ``subtopic`` (or ``iteration``) column, ir_measures ``Qrel``s whose
    ``iteration`` is the subtopic (as ir_measures reads diversity qrels)."""
    from toolkit.data.catalog import resolve_qrels

    if subtopics:
        return _diversity_qrels(obj, dedupe, relevance_map, data_dir)
    if isinstance(obj, Qrels):
        return _relabel(obj, relevance_map)
    if isinstance(obj, (str, os.PathLike)):
        source = resolve_qrels(str(obj), data_dir)
        for note in source.notes:
            log.info("%s", note)
        if relevance_map:
            from toolkit.data.catalog import relevance_map as parse_map

            mapping, name = parse_map(relevance_map)
            return source.read(dedupe, mapping, name)
        return source.read(dedupe)
    ranx = _ranx(obj)
    if ranx is not None:
        frame = _nested_frame(ranx, RELEVANCE, "<ranx Qrels>")
        return _relabel(
            _not_empty(qrels_from_frame(frame, dedupe=dedupe, where="<ranx Qrels>"), "qrels"), relevance_map
        )
    if isinstance(obj, pd.DataFrame):
        return _relabel(_not_empty(qrels_from_frame(obj, dedupe=dedupe), "qrels"), relevance_map)
    if isinstance(obj, Mapping):
        frame = _nested_frame(obj, RELEVANCE, DICT)
        return _relabel(_not_empty(qrels_from_frame(frame, dedupe=dedupe, where=DICT), "qrels"), relevance_map)
    if isinstance(obj, Iterable):
        frame = _tuples_frame(obj, ("query_id", "doc_id", "relevance"), ITERABLE)
        return _relabel(_not_empty(qrels_from_frame(frame, dedupe=dedupe, where=ITERABLE), "qrels"), relevance_map)
    raise ConfigError(
        f"cannot read qrels from {type(obj).__name__}: give a path, a name, a DataFrame, a dict, a ranx Qrels or Qrels"
    )


def _diversity_qrels(obj: Any, dedupe: str, relevance_map: str | None, data_dir: Any) -> Qrels:
    """Diversity qrels (``as_qrels(..., subtopics=True)``): from a file, a DataFrame or ir_measures ``Qrel``s."""
    from toolkit.data.catalog import resolve_qrels
    from toolkit.data.records import SUBTOPIC

    if isinstance(obj, Qrels):
        if not obj.diversity:
            raise InputFormatError(obj.path, None, "these qrels have no subtopic column: they are not diversity qrels")
        return _relabel(obj, relevance_map)
    if isinstance(obj, (str, os.PathLike)):
        source = resolve_qrels(str(obj), data_dir)
        mapping: dict[int, int] = {}
        name = ""
        if relevance_map:
            from toolkit.data.catalog import relevance_map as parse_map

            mapping, name = parse_map(relevance_map)
        return source.read(dedupe, mapping or None, name, subtopics=True)
    where = FRAME
    if not isinstance(obj, pd.DataFrame):
        where = ITERABLE
        obj = _tuples_frame(obj, ("query_id", "doc_id", "relevance", "iteration"), ITERABLE)
    column = next((c for c in (SUBTOPIC, "iteration") if c in obj.columns), None)
    if column is None:
        raise InputFormatError(where, None, "diversity qrels need a subtopic (or iteration) column")
    subtopic = np.array(_ids(obj[column], "subtopic", where).to_pylist(), dtype=object)
    parts = []
    dropped = 0
    # each subtopic's judgments are ordinary qrels (a document once per query): checked, then put together
    for value in pd.unique(subtopic):
        rows = np.flatnonzero(subtopic == value)
        part = qrels_from_frame(obj.iloc[rows].reset_index(drop=True), dedupe=dedupe, where=f"{where} subtopic {value}")
        dropped += part.duplicates_dropped
        parts.append((rows, part.frame.assign(**{SUBTOPIC: value})))
    frame = pd.concat([f for _, f in parts], ignore_index=True)
    if not dropped:  # the rows in the order given (the order ndeval's subtopic numbering follows)
        order = np.argsort(np.concatenate([r for r, _ in parts]), kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
    sha = hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()).hexdigest()
    return _relabel(Qrels(frame=frame, path=where, sha256=sha, duplicates_dropped=dropped), relevance_map)
