"""Properties of the inputs door (``toolkit.guard.readers``): the id rule's answer is the reference's, through every
reader of ids, with the place of the refused character.

The reference, written from the rule's statement in ``docs/security.md`` and not from its code: an id is refused
exactly when it is empty or holds a character that is a format character (Unicode category Cf), a control (Cc), a
surrogate (Cs), whitespace (``str.isspace``) or a line break (``str.splitlines``). Ids are drawn from all of Unicode
with such characters inserted at random places, and each is given to the rule itself, to the file readers (run,
qrels, preferences, topics TSV and JSONL, candidates JSON, JSONL corpus) and to the DataFrame and dict adapters.
"""

from __future__ import annotations

import json
import sys
import tempfile
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolkit.data.adapters import as_qrels, as_run
from toolkit.data.corpus import iter_jsonl_docs
from toolkit.data.texts import read_candidates
from toolkit.data.trec_io import read_prefs, read_qrels, read_run, read_topics
from toolkit.errors import InputFormatError
from toolkit.guard.readers import id_problem

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def refused_char(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cf", "Cc", "Cs") or ch.isspace() or len(("a" + ch + "b").splitlines()) > 1


def refused(value: str) -> bool:
    return not value or any(refused_char(c) for c in value)


def first_refused(value: str) -> int:
    return next(i for i, c in enumerate(value) if refused_char(c))


ALL = [chr(cp) for cp in range(sys.maxunicode + 1)]
FORMAT = [c for c in ALL if unicodedata.category(c) == "Cf"]
BLANKS = [c for c in ALL if c.isspace() or len(("a" + c + "b").splitlines()) > 1]
CONTROLS = [c for c in ALL if unicodedata.category(c) == "Cc"]
SURROGATES = [chr(cp) for cp in range(0xD800, 0xE000)]
#: The refused characters a file carries inside an id's field, refused there by the id rule: format characters,
#: blanks that are no TREC column or line break (no-break space, U+3000, ...) and C1 controls.
IN_FIELD = sorted(
    {*FORMAT, *(c for c in BLANKS if not c.isascii() and c not in "\x85\u2028\u2029"), *CONTROLS[33:]} - {"\x85"}
)
#: Refused in a whole TREC file, wherever they are, by the file's own rules (named with line and column).
IN_FILE = [c for c in CONTROLS if c.isascii() and c not in "\t\n\r"] + ["\x85", "\u2028", "\u2029"]

#: Any character (surrogates included), a refused one inserted at random places.
anything = st.characters(exclude_categories=())
refused_chars = st.sampled_from(sorted({*FORMAT, *BLANKS, *CONTROLS, *SURROGATES}))
any_id = st.lists(st.one_of(st.text(anything, max_size=4), refused_chars), max_size=6).map("".join)
#: What a text file's id field can hold as it is: no layout (space, tab, line ends), controls or surrogates.
printable = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zs", "Zl", "Zp"))
field_id = st.lists(
    st.one_of(st.text(printable, min_size=1, max_size=4), st.sampled_from(IN_FIELD)), min_size=1, max_size=6
).map("".join)


def test_the_reference_covers_every_class():
    assert {"\ufeff", "\u200b", "\u200d", "\u202e", "\u2060", "\u2066", "\u00ad", "\U000e0001"} <= set(FORMAT)
    assert {" ", "\t", "\n", "\x85", "\xa0", "\u2028", "\u3000"} <= set(BLANKS)
    assert {"\x00", "\x7f", "\x9f"} <= set(CONTROLS) and len(CONTROLS) == 65
    assert not any(refused_char(c) for c in "q1文档-7é\u0627\U0001f600\ue000")


@SETTINGS
@given(any_id)
def test_the_rule_answers_as_the_reference(value):
    problem = id_problem(value)
    assert (problem is not None) == refused(value), (value, problem)
    if value and problem is not None:
        at = first_refused(value)
        assert f"(U+{ord(value[at]):04X}" in problem and f"at position {at}" in problem, (value, problem)


def _refusal(read, path) -> str | None:
    try:
        read(path)
    except InputFormatError as exc:
        return str(exc)
    return None


def _check(message: str | None, value: str, prefix: str, column: int | None) -> None:
    """Refused iff the reference refuses ``value``; a refusal names the place and the first refused character."""
    assert (message is not None) == refused(value), (value, message)
    if message is None:
        return
    assert message.startswith(prefix), (prefix, message)
    if not value:
        assert message.startswith(prefix + "'' is empty"), message
        return
    at = first_refused(value)
    assert f"(U+{ord(value[at]):04X}" in message and f"at position {at}" in message, (value, message)
    if column is not None:
        assert f"(column {column + at})" in message, (value, column + at, message)


@SETTINGS
@given(field_id, st.sampled_from(["run-query", "run-doc", "qrels-query", "qrels-doc", "prefs-doc", "topics-tsv"]))
def test_text_files_refuse_as_the_reference_with_line_and_column(value, where):
    assume(value not in ("q0", "d1") and not value.startswith("#"))
    layouts = {  # (file name, second line, column where the id begins, reader, what)
        "run-query": ("run.trec", "q0 Q0 d1 1 2.0 r\n{} Q0 d2 1 1.0 r\n", 1, read_run, "query"),
        "run-doc": ("run.trec", "q0 Q0 d1 1 2.0 r\nq1 Q0 {} 1 1.0 r\n", 7, read_run, "document"),
        "qrels-query": ("qrels.txt", "q0 0 d1 1\n{} 0 d2 1\n", 1, read_qrels, "query"),
        "qrels-doc": ("qrels.txt", "q0 0 d1 1\nq1 0 {} 1\n", 6, read_qrels, "document"),
        "prefs-doc": ("prefs.txt", "q0 a 0 d1 1\nq1 a 0 {} 2\n", 8, read_prefs, "document"),
        "topics-tsv": ("topics.tsv", "q0\tfirst\n{}\tsecond\n", 1, read_topics, "query"),
    }
    name, text, column, read, what = layouts[where]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text.format(value), encoding="utf-8")
        _check(_refusal(read, path), value, f"{path}:2: {what} id ", column)


@SETTINGS
@given(
    st.text(printable, min_size=1, max_size=6),
    st.sampled_from(IN_FILE),
    st.integers(0, 6),
    st.sampled_from(["run", "qrels", "topics-tsv"]),
)
def test_text_files_refuse_controls_and_line_separators_with_line_and_column(base, bad, at, where):
    """Controls and Unicode line separators anywhere in a TREC file are refused by the file's rules, NUL included
    (the read stops there), each with the line and the column of the character."""
    at = min(at, len(base))
    value = base[:at] + bad + base[at:]
    name, text, column, read = {
        "run": ("run.trec", "q0 Q0 d1 1 2.0 r\nq1 Q0 {} 1 1.0 r\n", 7, read_run),
        "qrels": ("qrels.txt", "q0 0 d1 1\nq1 0 {} 1\n", 6, read_qrels),
        "topics-tsv": ("topics.tsv", "q0\tfirst\nq{}\tsecond\n", 2, read_topics),
    }[where]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text.format(value), encoding="utf-8")
        message = _refusal(read, path)
    assert message is not None and message.startswith(f"{path}:2: "), (value, message)
    named = "NUL" if bad == "\0" else f"U+{ord(bad):04X}"
    assert named in message and f"column {column + at}" in message, (value, column + at, message)


@SETTINGS
@given(any_id.filter(lambda v: not any(0xD800 <= ord(c) <= 0xDFFF for c in v)), st.sampled_from(["q", "d"]))
def test_json_files_refuse_as_the_reference(value, field):
    """Candidates JSON, a JSONL corpus and JSONL topics: any character reaches the id (JSON escapes it), so every
    class is drawn; the refusal names the line (the entry and hit) and the position in the id. (A surrogate in a
    JSON file is an escape, refused on its own: ``readers/candidates-lone-surrogate``.)"""
    assume(value not in ("q0", "d1"))
    qid, doc = (value, "d2") if field == "q" else ("q1", value)
    hits = [{"qid": "q0", "docid": "d1", "score": 2.0, "content": "a"}]
    cands = [{"query": "first", "hits": hits}, {"query": "second", "hits": [{"qid": qid, "docid": doc, "score": 1}]}]
    what = "query" if field == "q" else "document"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cands.json"
        path.write_text(json.dumps(cands), encoding="utf-8")
        _check(_refusal(read_candidates, path), value, f"{path}: entry 1, hit 0: {what} id ", None)
        path = Path(tmp) / "docs.jsonl"
        path.write_text(json.dumps({"id": "d1", "contents": "a"}) + "\n" + json.dumps({"id": doc, "contents": "b"}))
        if field == "d":
            _check(_refusal(lambda p: list(iter_jsonl_docs([p])), path), value, f"{path}:2: document id ", None)
        path = Path(tmp) / "topics.jsonl"
        path.write_text(json.dumps({"qid": "q0", "text": "a"}) + "\n" + json.dumps({"qid": qid, "text": "b"}))
        if field == "q":
            _check(_refusal(read_topics, path), value, f"{path}:2: query id ", None)


@SETTINGS
@given(any_id, st.sampled_from(["frame-query", "frame-doc", "dict-doc", "qrels-frame-doc"]))
def test_frames_and_dicts_refuse_as_the_reference(value, where):
    assume(value not in ("q0", "d1"))

    def texts(*values: str) -> pd.Series:  # object columns: pandas' own text type cannot hold a surrogate
        return pd.Series(values, dtype=object)

    if where == "frame-query":
        frame = pd.DataFrame({"qid": texts("q0", value), "docno": texts("d1", "d2"), "score": [2.0, 1.0]})
        message, prefix = _refusal(as_run, frame), "<DataFrame>: row 1: query id "
    elif where == "frame-doc":
        frame = pd.DataFrame({"qid": texts("q0", "q1"), "docno": texts("d1", value), "score": [2.0, 1.0]})
        message, prefix = _refusal(as_run, frame), "<DataFrame>: row 1: document id "
    elif where == "dict-doc":
        message, prefix = _refusal(as_run, {"q0": {"d1": 2.0, value: 1.0}}), "<dict>: row 1: document id "
    else:
        frame = pd.DataFrame({"qid": texts("q0", "q1"), "docno": texts("d1", value), "label": [1, 0]})
        message, prefix = _refusal(as_qrels, frame), "<DataFrame>: row 1: document id "
    _check(message, value, prefix, None)


@pytest.mark.parametrize("ch", ["\ufeff", "\u200b", "\u202e", "\u2060", "\U000e0041"])
def test_a_format_character_is_refused_in_an_ascii_run_through_the_fast_path(tmp_path, ch):
    """The C check of a run's ids runs when the file holds the lead bytes of a refused character: an otherwise
    ASCII run of 2,000 lines with one format character in line 1,500 is refused there."""
    lines = [f"q{i % 20} Q0 d{i} {i // 20 + 1} {5000 - i} r\n" for i in range(2000)]
    lines[1499] = lines[1499].replace(" d1499 ", f" d14{ch}99 ")
    path = tmp_path / "run.trec"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(InputFormatError) as err:
        read_run(path)
    assert str(err.value).startswith(f"{path}:1500: document id {'d14' + ch + '99'!r} holds"), str(err.value)
    assert f"(U+{ord(ch):04X}" in str(err.value) and "at position 3 (column 11)" in str(err.value)
