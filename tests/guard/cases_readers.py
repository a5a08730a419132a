"""The inputs door (``toolkit.guard.readers``): hostile ids, texts, labels, JSON and compressed files, each
through the reader that meets it (the CLI where a command reads it alone, else the library function).

Expected messages are written by hand from the rules in ``docs/security.md``; bounds are ``doors.Bounded``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
import zlib
from functools import partial
from pathlib import Path

import doors
import pytest

from toolkit.errors import InputFormatError

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"
RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq2 Q0 d3 1 1.0 r\n"
SEPARATORS = {"0085": "\u0085", "2028": "\u2028", "2029": "\u2029"}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _raises(call, *needles: str) -> str:
    """``call()`` raises ``InputFormatError`` (no other exception) whose message holds every needle."""
    with pytest.raises(InputFormatError) as err:
        call()
    for n in needles:
        assert n in str(err.value), (n, str(err.value))
    return str(err.value)


# ------------------------------------------------------------ line separators
def _separator_in_run(code: str, tmp: Path) -> None:
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = _write(tmp / "run.trec", RUN.replace("d2", "d2" + SEPARATORS[code] + "x"))
    doors.assert_one_error(doors.cli("eval", str(qrels), str(run)), f"{run}:2:", f"U+{code}")


def _separator_in_qrels(code: str, tmp: Path) -> None:
    qrels = _write(tmp / "qrels.txt", QRELS.replace("d3", "d3" + SEPARATORS[code]))
    run = _write(tmp / "run.trec", RUN)
    doors.assert_one_error(doors.cli("eval", str(qrels), str(run)), f"{qrels}:3:", f"U+{code}")


def _separator_in_topics(code: str, tmp: Path) -> None:
    from toolkit.data.trec_io import read_topics

    tsv = _write(tmp / "topics.tsv", f"q1\tfirst\nq{SEPARATORS[code]}2\tsecond\n")
    _raises(partial(read_topics, tsv), f"{tsv}:2:", f"U+{code}")
    jsonl = _write(tmp / "topics.jsonl", json.dumps({"qid": "q" + SEPARATORS[code], "text": "t"}) + "\n")
    _raises(partial(read_topics, jsonl), f"{jsonl}:1:", f"U+{code}")


def _separator_in_candidates(code: str, tmp: Path) -> None:
    from toolkit.data.texts import read_candidates

    hits = [{"qid": "q1", "docid": "d" + SEPARATORS[code], "score": 1.0, "content": "t"}]
    path = _write(tmp / "cands.json", json.dumps([{"query": "q", "hits": hits}]))
    _raises(partial(read_candidates, path), f"{path}: entry 0, hit 0: document id", f"U+{code}")


def _separator_in_corpus(code: str, tmp: Path) -> None:
    from toolkit.data.corpus import iter_jsonl_docs

    path = _write(tmp / "docs.jsonl", '{"id": "a", "contents": "x"}\n' + json.dumps({"id": SEPARATORS[code]}))
    path.write_text(path.read_text()[:-1] + ', "contents": "y"}\n')
    _raises(lambda: list(iter_jsonl_docs([path])), f"{path}:2: document id", f"U+{code}")


def fuse_planted_line(tmp: Path) -> None:
    """A doc id that ``str.splitlines()`` + ``str.split()`` read as a second run line (U+2028, then no-break
    spaces): ``fuse`` refuses the run, writes nothing, names the line."""
    planted = "d2\u2028q1\u00a0Q0\u00a0planted\u00a01\u00a099\u00a0x"
    assert ["q1", "Q0", "planted", "1", "99", "x"] in [ln.split() for ln in planted.splitlines()]  # the attack is real
    a = _write(tmp / "a.trec", RUN.replace("d2", planted))
    b = _write(tmp / "b.trec", RUN)
    out = tmp / "fused.trec"
    doors.assert_one_error(doors.cli("fuse", str(a), str(b), "--out", str(out)), f"{a}:2:", "U+2028")
    assert not out.exists()


def prefs_separator(tmp: Path) -> None:
    """Preference and judgment-group files (``-R prefs``, ``-R qrels_jg``) refuse U+2028 too: ``str.split()``
    would have made it a column break."""
    from toolkit.data.trec_io import read_prefs, read_qrels_jg

    prefs = _write(tmp / "prefs.txt", "q1 a 0 d1 1\nq1 a 0 d\u20282 2\n")
    _raises(partial(read_prefs, prefs), f"{prefs}:2: line separator U+2028")
    jg = _write(tmp / "jg.txt", "q1 a d1 1\nq1 a d2 100000000\n")
    _raises(partial(read_qrels_jg, jg), f"{jg}:2: relevance label 100000000 is out of range")


def beir_qrels_checked(tmp: Path) -> None:
    """A BEIR ``qrels/test.tsv`` goes through the same id and label rules before it becomes TREC qrels."""
    import os

    from toolkit.data.corpus import beir_qrels_to_trec

    os.environ["TWOSTAGE_CACHE"], saved = str(tmp / "cache"), os.environ.get("TWOSTAGE_CACHE")
    try:
        tsv = _write(tmp / "a.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\u2028q9\t1\n")
        _raises(partial(beir_qrels_to_trec, tsv), f"{tsv}:3: document id 'd2\\u2028q9' holds whitespace (U+2028)")
        tsv = _write(tmp / "b.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t2000000000\n")
        _raises(partial(beir_qrels_to_trec, tsv), f"{tsv}:2: relevance label 2000000000 is out of range")
        tsv = _write(tmp / "c.tsv", "query-id\tcorpus-id\tscore\nq1\td1\tx\n")
        _raises(partial(beir_qrels_to_trec, tsv), f"{tsv}:2: relevance 'x' is not an integer")
        tsv = _write(tmp / "d.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t2\n")
        assert beir_qrels_to_trec(tsv).read_text() == "q1 0 d1 2\n"
    finally:
        if saved is None:
            del os.environ["TWOSTAGE_CACHE"]
        else:
            os.environ["TWOSTAGE_CACHE"] = saved


def run_other_unicode_space_in_id(tmp: Path) -> None:
    """A no-break space (U+00A0) inside a run's doc id: arrow splits only on ' ', the id rule still refuses it."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = _write(tmp / "run.trec", RUN.replace("d3", "d\u00a03"))
    doors.assert_one_error(
        doors.cli("eval", str(qrels), str(run)), f"{run}:3:", "document id 'd\\xa03' holds whitespace (U+00A0)"
    )


def ids_refuse_every_line_break(tmp: Path) -> None:
    """Every code point ``str.splitlines()`` breaks on or ``str.isspace()`` calls blank, every control character
    and every surrogate is refused in an id; printable letters of other scripts are kept."""
    from toolkit.guard.readers import id_problem

    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        bad = len(("a" + ch + "b").splitlines()) > 1 or ch.isspace() or cp < 0x20 or 0x7F <= cp <= 0x9F
        bad = bad or 0xD800 <= cp <= 0xDFFF
        if bad:
            assert id_problem("a" + ch + "b") is not None, hex(cp)
    assert [id_problem(i) for i in ("文档-7", "é", "a/b#c", "\U0001f600")] == [None] * 4


# --------------------------------------------------------------- surrogates
def surrogate_in_candidates(tmp: Path) -> None:
    from toolkit.data.texts import read_candidates

    path = tmp / "cands.json"
    path.write_text('[{"query": "q", "hits": [{"qid": "q1", "docid": "d\\ud800", "score": 1, "content": "t"}]}]')
    _raises(partial(read_candidates, path), f"{path}:1: lone surrogate escape \\ud800")
    path.write_text('[{"query": "q", "hits": [{"qid": "q1", "docid": "d", "score": 1, "content": "t\\udfff"}]}]')
    _raises(partial(read_candidates, path), f"{path}:1: lone surrogate escape \\udfff")
    path.write_text('[{"query": "q\\ud83d\\ude00", "hits": [{"qid": "q1", "docid": "d", "score": 1}]}]')  # a pair
    from toolkit.data.texts import read_candidates as again

    assert again(path).topics.as_dict() == {"q1": "q\U0001f600"}


def surrogate_in_corpus(tmp: Path) -> None:
    from toolkit.data.corpus import iter_jsonl_docs

    path = tmp / "docs.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"id": "b", "contents": "\\udc00 text"}\n')
    _raises(lambda: list(iter_jsonl_docs([path])), f"{path}:2: lone surrogate escape \\udc00")


def surrogate_in_topics(tmp: Path) -> None:
    from toolkit.data.trec_io import read_topics

    path = tmp / "topics.jsonl"
    path.write_text('{"qid": "1", "text": "ok"}\n{"qid": "2\\ud800", "text": "t"}\n')
    _raises(partial(read_topics, path), f"{path}:2: lone surrogate escape \\ud800")


def surrogate_in_run_file(tmp: Path) -> None:
    """A run whose bytes encode a surrogate (CESU-8 style, ``ED A0 80``): not UTF-8, named by line."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = tmp / "run.trec"
    run.write_bytes(RUN.encode().replace(b"d3", b"d3\xed\xa0\x80"))
    doors.assert_one_error(doors.cli("eval", str(qrels), str(run)), f"{run}:3:", "not valid UTF-8")


def surrogate_in_dict(tmp: Path) -> None:
    import pandas as pd

    from toolkit.data.adapters import as_qrels, as_run

    _raises(lambda: as_run({"q1": {"a": 1.0, "b\ud800": 0.5}}), "<dict>: row 1: document id", "lone surrogate (U+D800)")
    frame = pd.DataFrame({"qid": ["q\udfff"], "docno": ["a"], "label": [1]}, dtype=object)
    _raises(lambda: as_qrels(frame), "<DataFrame>: row 0: query id", "lone surrogate (U+DFFF)")


# ---------------------------------------------------------------- deep JSON
DEEP = 100_000


def deep_json_candidates(tmp: Path) -> None:
    from toolkit.data.texts import read_candidates

    path = tmp / "cands.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with doors.Bounded(2, 200):
        _raises(partial(read_candidates, path), f"{path}:1: JSON nested more than 64 levels deep")


def deep_json_corpus_line(tmp: Path) -> None:
    from toolkit.data.corpus import iter_jsonl_docs

    path = tmp / "docs.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"id": "b", "contents": ' + "[" * DEEP + "]" * DEEP + "}\n")
    with doors.Bounded(2, 200):
        _raises(lambda: list(iter_jsonl_docs([path])), f"{path}:2: JSON nested more than 64 levels deep")


def deep_json_sidecar(tmp: Path) -> None:
    """A run sidecar nested 100,000 deep is ignored with one warning naming it, as any unreadable sidecar."""
    from toolkit.data.sidecar import meta_path, read_meta

    run = _write(tmp / "run.trec", RUN)
    meta_path(run).write_text('{"run": ' + "[" * DEEP + "]" * DEEP + "}")
    import warnings

    from toolkit.errors import TwostageWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_meta(run) is None
    messages = [str(w.message) for w in caught if issubclass(w.category, TwostageWarning)]
    assert messages == [f"ignoring the unreadable sidecar {meta_path(run)} (JSON nested more than 64 levels deep)"], (
        messages
    )


def json_depth_64_is_read(tmp: Path) -> None:
    """The bound is 64 levels: 64 is read, 65 is refused, brackets inside strings do not count."""
    from toolkit.guard.readers import parse_json

    doc = parse_json(("[" * 64 + "]" * 64).encode(), "x")
    for _ in range(63):
        (doc,) = doc
    assert doc == []
    doc = parse_json(("[" * 63 + '"[[[[\\"{{{{"' + "]" * 63).encode(), "x")
    for _ in range(63):
        doc = doc[0]
    assert doc == '[[[["{{{{'
    _raises(lambda: parse_json(("[" * 65 + "]" * 65).encode(), "x"), "x:1: JSON nested more than 64 levels deep")


def json_size_bound(tmp: Path) -> None:
    """``TWOSTAGE_MAX_JSON_MB`` bounds a JSON document's size (here 1 MiB); a sidecar over 16 MiB is ignored."""
    import os

    from toolkit.data.sidecar import meta_path, read_meta
    from toolkit.data.texts import read_candidates

    hits = [{"qid": "q1", "docid": f"d{i}", "score": 1.0, "content": "x" * 100} for i in range(12_000)]
    path = _write(tmp / "cands.json", json.dumps([{"query": "q", "hits": hits}]))
    assert 1 << 20 < path.stat().st_size < 2 << 20
    assert len(read_candidates(path).run) == 12_000
    os.environ["TWOSTAGE_MAX_JSON_MB"] = "1"
    try:
        _raises(partial(read_candidates, path), f"{path}: JSON document of", "more than the 1,048,576 allowed")
    finally:
        del os.environ["TWOSTAGE_MAX_JSON_MB"]
    run = _write(tmp / "run.trec", RUN)
    meta_path(run).write_text('{"note": "' + "x" * (16 << 20) + '"}')
    assert read_meta(run) is None


# ------------------------------------------------------------ compressed input
def _bomb(path: Path, gigabytes: int = 9) -> Path:
    """A gzip file of ``gigabytes`` GB of zeros, about 9 MB per 9 GB: one 64 MiB member, repeated."""
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    with open(path, "wb") as fh:
        for _ in range(gigabytes * 16):
            fh.write(member)
    return path


def gzip_bomb_run(tmp: Path) -> None:
    qrels = _write(tmp / "qrels.txt", QRELS)
    bomb = _bomb(tmp / "run.trec.gz")
    assert 5 << 20 < bomb.stat().st_size < 20 << 20
    with doors.Bounded(5, 500):
        res = doors.cli("eval", str(qrels), str(bomb))
    doors.assert_one_error(res, f"{bomb}: expands more than 100 times", "TWOSTAGE_MAX_COMPRESSION_RATIO")


def gzip_bomb_qrels(tmp: Path) -> None:
    bomb = _bomb(tmp / "qrels.txt.gz")
    run = _write(tmp / "run.trec", RUN)
    with doors.Bounded(5, 500):
        res = doors.cli("eval", str(bomb), str(run))
    doors.assert_one_error(res, f"{bomb}: expands more than 100 times")


def gzip_bomb_corpus(tmp: Path) -> None:
    from toolkit.data.corpus import iter_jsonl_docs

    bomb = _bomb(tmp / "docs.jsonl.gz")
    with doors.Bounded(5, 500):
        _raises(lambda: list(iter_jsonl_docs([bomb])), f"{bomb}: expands more than 100 times")


def gzip_real_run_is_read(tmp: Path) -> None:
    """A real gzipped run (a few times smaller) is read as the plain one; the ratio bound can be raised."""
    from toolkit.data.trec_io import read_run

    lines = "".join(
        f"{q} Q0 D{q * 7919 % 104729 + i} {i + 1} {100 - i / 7:.4f} bm25\n" for q in range(300) for i in range(300)
    )
    plain = _write(tmp / "run.trec", lines)
    packed = tmp / "run.trec.gz"
    packed.write_bytes(gzip.compress(lines.encode()))
    a, b = read_run(plain), read_run(packed)
    assert a.frame.equals(b.frame) and len(a) == 90_000


def gzip_bound_is_overridable(tmp: Path) -> None:
    """``TWOSTAGE_MAX_DECOMPRESSED_MB`` bounds the size in all (here 1 MiB for a 2 MiB file)."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = tmp / "run.trec.gz"
    run.write_bytes(gzip.compress((RUN * 30_000).encode()[: 2 << 20]))
    res = doors.cli("eval", str(qrels), str(run), env={"TWOSTAGE_MAX_DECOMPRESSED_MB": "1"})
    doors.assert_one_error(res, f"{run}: decompresses to more than 1 MiB", "TWOSTAGE_MAX_DECOMPRESSED_MB")


def gzip_corrupt(tmp: Path) -> None:
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = tmp / "run.trec.gz"
    data = gzip.compress(RUN.encode() * 100)
    run.write_bytes(data[:20] + b"\xff" * 40 + data[60:])
    doors.assert_one_error(doors.cli("eval", str(qrels), str(run)), f"{run}: cannot")
    assert zlib  # the error is zlib's or gzip's, reported as one line


# ------------------------------------------------------------------- labels
def _label_case(label: int, tmp: Path) -> None:
    qrels = _write(tmp / "qrels.txt", QRELS.replace("q2 0 d3 2", f"q2 0 d3 {label}"))
    run = _write(tmp / "run.trec", RUN)
    with doors.Bounded(5, 300):
        res = doors.cli("eval", str(qrels), str(run), "-m", "ndcg")
    doors.assert_one_error(res, f"{qrels}:3: relevance label {label} is out of range", "±1,000,000")


def label_limit_is_read(tmp: Path) -> None:
    """A label of exactly 10^6 is read and counts as its value (nDCG by hand), with a gain table of 3 entries."""
    import toolkit as ts

    run = _write(tmp / "run.trec", RUN + "q2 Q0 d4 2 0.5 r\n")
    big = _write(tmp / "big.txt", QRELS + "q2 0 d4 1000000\n")
    with doors.Bounded(5, 200):
        value = ts.evaluate(str(big), str(run), ["ndcg"]).per_query.loc["q2", "ndcg"]
    import math

    idcg = 1e6 + 2 / math.log2(3)
    dcg = 2 + 1e6 / math.log2(3)
    assert value == pytest.approx(dcg / idcg, rel=1e-12)


def label_in_dict(tmp: Path) -> None:
    from toolkit.data.adapters import as_qrels

    with doors.Bounded(2, 100):
        _raises(lambda: as_qrels({"q1": {"a": 2 * 10**9}}), "<dict>: row 0: relevance label 2000000000 is out of range")


# --------------------------------------------------------------------- fuzz
def fuzz_random_lines(tmp: Path) -> None:
    """Random bytes and random Unicode lines through every file reader: only ``InputFormatError`` comes out."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from toolkit.data.corpus import iter_jsonl_docs
    from toolkit.data.texts import read_candidates
    from toolkit.data.trec_io import read_qrels, read_run, read_topics
    from toolkit.guard.readers import read_json

    readers = [
        ("run.trec", read_run),
        ("qrels.txt", read_qrels),
        ("topics.tsv", read_topics),
        ("topics.jsonl", read_topics),
        ("cands.json", read_candidates),
        ("docs.jsonl", lambda p: list(iter_jsonl_docs([p]))),
        ("meta.json", read_json),
        ("run.trec.gz", read_run),
    ]
    token = st.one_of(
        st.sampled_from(["q1", "Q0", "d1", "1", "-3", "1e400", "nan", "#", "{", "}", "[", "]", '"', "\\ud800", ":"]),
        st.text(min_size=1, max_size=6),
    )
    line = st.lists(token, max_size=7).map(" ".join)
    text = st.lists(line, min_size=1, max_size=6).map("\n".join)
    payload = st.one_of(st.binary(max_size=200), text.map(lambda s: s.encode("utf-8", "surrogatepass")))

    @settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(readers), payload)
    def check(reader, data: bytes) -> None:
        name, read = reader
        path = tmp / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        with contextlib.suppress(InputFormatError):  # anything else (a traceback) fails the case
            read(path)

    check()


# ------------------------------------------------------- format characters
def run_bom_inside_joined_by_cat(tmp: Path) -> None:
    """Two runs that each start with a byte-order mark, joined with ``cat``: each alone is read (a leading BOM
    is the file's encoding mark), the joined file is one error naming line 3, column 1 and U+FEFF; before,
    ``q2`` and ``\\ufeffq2`` were two queries and P@2 of q2 fell from 1.0 to 0.5 without a word."""
    qrels = _write(tmp / "qrels.txt", "q1 0 d1 1\nq1 0 d2 1\nq2 0 d3 1\nq2 0 d4 1\n")
    a = tmp / "a.trec"
    a.write_bytes(b"\xef\xbb\xbfq1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\n")
    b = tmp / "b.trec"
    b.write_bytes(b"\xef\xbb\xbfq2 Q0 d3 1 3.0 r\nq2 Q0 d4 2 2.0 r\n")
    joined = tmp / "ab.trec"
    joined.write_bytes(a.read_bytes() + b.read_bytes())
    import toolkit as ts

    for one in (a, b):  # a leading BOM keeps working: P@2 is 1.0 for the run's query
        assert ts.evaluate(str(qrels), str(one), ["P.2"]).per_query["P_2"].tolist() == [1.0]
    doors.assert_one_error(
        doors.cli("eval", str(qrels), str(joined), "-m", "P.2"),
        f"{joined}:3: query id '\\ufeffq2' holds an invisible format character (U+FEFF",
        "at position 0 (column 1)",
    )


def _format_in_qrels(code: str, tmp: Path) -> None:
    """A zero-width space (U+200B) or a right-to-left override (U+202E) inside a qrels doc id: one error naming
    the line, the column and the character, through the CLI."""
    qrels = tmp / "qrels.txt"
    qrels.write_text(QRELS.replace("d3", "d" + chr(int(code, 16)) + "3"), encoding="utf-8")
    run = _write(tmp / "run.trec", RUN)
    doors.assert_one_error(
        doors.cli("eval", str(qrels), str(run)),
        f"{qrels}:3: document id 'd\\u{code.lower()}3' holds an invisible format character (U+{code}",
        "at position 1 (column 7)",
    )


def topics_word_joiner(tmp: Path) -> None:
    """WORD JOINER (U+2060) in a topics id, TSV, JSONL and TREC ``<top>`` blocks: the line (and in TSV and TREC
    blocks the column) named."""
    from toolkit.data.trec_io import read_topics

    tsv = _write(tmp / "topics.tsv", "q1\tfirst\nq\u20602\tsecond\n")
    _raises(partial(read_topics, tsv), f"{tsv}:2: query id 'q\\u20602' holds", "(U+2060 WORD JOINER)", "(column 2)")
    jsonl = _write(tmp / "topics.jsonl", '{"qid": "1", "text": "a"}\n{"qid": "q\\u2060", "text": "t"}\n')
    _raises(partial(read_topics, jsonl), f"{jsonl}:2: query id 'q\\u2060' holds", "U+2060", "at position 1")
    trec = _write(tmp / "topics.txt", "<top>\n<num> Number: 7\u2060\n<title> t\n</top>\n")
    _raises(partial(read_topics, trec), f"{trec}:2: query id '7\\u2060' holds", "U+2060", "at position 1 (column 16)")


def ids_refuse_every_format_character(tmp: Path) -> None:
    """Every code point of Unicode category Cf, found by a scan of ``unicodedata`` over all code points, is
    refused in an id by each form of the rule (Python, arrow's RE2, the run reader's trigger for the C check),
    and the rule's table is that scan."""
    import unicodedata

    import pyarrow as pa

    from toolkit.guard.readers import (
        check_id_column,
        format_characters,
        id_problem,
        may_hold_refused_id_char,
        scan_format_characters,
    )

    found = [cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"]
    assert len(found) > 150 and 0xFEFF in found and 0x2060 in found and 0xE0001 in found
    assert [cp for a, b in format_characters() for cp in range(a, b + 1)] == found
    assert format_characters() == scan_format_characters()
    for cp in found:
        value = "a" + chr(cp) + "b"
        assert f"format character (U+{cp:04X}" in (id_problem(value) or ""), hex(cp)
        assert may_hold_refused_id_char(value.encode()), hex(cp)
        with pytest.raises(InputFormatError, match=f"U\\+{cp:04X}"):
            check_id_column(pa.chunked_array([["ok", value]], pa.large_string()), "document", "<t>")
    # letters, marks and symbols of other scripts stay ids; U+2065, unassigned inside the format block
    # U+2060-U+206F, is refused with the block
    assert [id_problem(i) for i in ("文档-7", "é", "\u0627\u0644", "\U0001f600")] == [None] * 4
    assert id_problem("a\u2065b") is not None


# ------------------------------------------------------ what a data file is
def _device_run(tmp: Path) -> None:
    """``twostage eval QRELS /dev/zero``: one error naming the file and what it is, at once (before: never
    ended)."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    with doors.Bounded(5, 100):
        res = doors.cli("eval", str(qrels), "/dev/zero")
    doors.assert_one_error(res, "/dev/zero: is a character device, not a regular file")


def _device_qrels(tmp: Path) -> None:
    run = _write(tmp / "run.trec", RUN)
    with doors.Bounded(5, 100):
        res = doors.cli("eval", "/dev/zero", str(run))
    doors.assert_one_error(res, "/dev/zero: is a character device, not a regular file")


def _device_in_spec(tmp: Path) -> None:
    """``run: /dev/zero`` in a reproduction spec someone sends: ``twostage reproduce`` is one error naming it (the
    run is read through the same door), at once (before: never ended)."""
    _write(tmp / "qrels.txt", QRELS)
    spec = _write(
        tmp / "spec.yaml",
        "name: tiny\npaths: spec\ncolumns:\n  - {id: MAP, measure: map}\nrows:\n  - id: sys\n"
        "    qrels: qrels.txt\n    run: /dev/zero\n    cells: {MAP: 0.5}\n",
    )
    with doors.Bounded(20, 300):
        res = doors.cli("reproduce", str(spec), "--out", str(tmp / "out"))
    doors.assert_one_error(res, "/dev/zero: is a character device, not a regular file")


def fifo_run(tmp: Path) -> None:
    """A FIFO given as a run is refused without waiting for a writer (opening a FIFO for reading waits for one;
    the door decides on ``stat``, then on the descriptor opened without waiting)."""
    import os
    import threading

    qrels = _write(tmp / "qrels.txt", QRELS)
    fifo = tmp / "run.fifo"
    os.mkfifo(fifo)
    # should the reader wait on the FIFO, a writer comes after 10 s and closes: the case then fails, not hangs
    writer = threading.Thread(target=lambda: (threading.Event().wait(10), open(fifo, "wb").close()), daemon=True)
    writer.start()
    try:
        with doors.Bounded(5, 100):
            res = doors.cli("eval", str(qrels), str(fifo))
        doors.assert_one_error(res, f"{fifo}: is a FIFO (a named pipe), not a regular file")
    finally:  # let the writer's open return (a reader opened without waiting), whatever the outcome
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join(15)
        os.close(reader)


def folder_qrels(tmp: Path) -> None:
    folder = tmp / "judgments"
    folder.mkdir()
    run = _write(tmp / "run.trec", RUN)
    doors.assert_one_error(doors.cli("eval", str(folder), str(run)), f"{folder}: is a folder, not a regular file")


def every_reader_refuses_devices(tmp: Path) -> None:
    """Each reader of data (run, qrels, topics, candidates, corpus, JSON, prefs, a spec, a prompt template,
    checksums) refuses /dev/zero at once, naming what it is."""
    from toolkit.data.corpus import iter_jsonl_docs
    from toolkit.data.texts import read_candidates
    from toolkit.data.trec_io import read_prefs, read_qrels, read_run, read_topics, sha256_file
    from toolkit.guard.readers import read_json
    from toolkit.guard.specs import load_yaml
    from toolkit.judging.prompt import load_template

    readers = [
        read_run,
        read_qrels,
        read_topics,
        read_candidates,
        lambda p: list(iter_jsonl_docs([Path(p)])),
        read_json,
        read_prefs,
        load_yaml,
        load_template,
        sha256_file,
    ]
    with doors.Bounded(10, 200):
        for read in readers:
            _raises(partial(read, "/dev/zero"), "/dev/zero: is a character device, not a regular file")


# ------------------------------------------------------------------ NUL bytes
def _sparse(path: Path, head: bytes, size: int = 16 << 30) -> Path:
    """``head``, then a hole to ``size`` bytes (16 GiB by default) that reads as NUL bytes and takes no room."""
    path.write_bytes(head)
    with open(path, "r+b") as fh:
        fh.truncate(size)
    return path


def run_nul_stops_at_once(tmp: Path) -> None:
    """A NUL byte in the middle of a long run file (200,000 lines, then a NUL, then 16 GiB that read as NULs)
    stops the read where it is: one error naming line 200,001 and column 8, in bounded time and memory (before:
    the file was read to its end first). Standard input stops at its first NUL too."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    lines = "".join(f"q{i % 50} Q0 d{i} {i // 50 + 1} {1e6 - i} r\n" for i in range(200_000))
    run = _sparse(tmp / "run.trec", lines.encode() + b"q1 Q0 d\x00x 1 1.0 r\n")
    with doors.Bounded(10, 400):
        res = doors.cli("eval", str(qrels), str(run))
    doors.assert_one_error(res, f"{run}:200001: NUL at column 8")
    res = doors.cli("eval", str(qrels), "-", input=RUN + "q2 Q0 d9\x00 2 0.5 r\n" + "\x00" * (1 << 20))
    doors.assert_one_error(res, "-:4: NUL at column 9")


def every_reader_stops_at_nul(tmp: Path) -> None:
    """Topics, candidates, corpus, JSON and YAML files that hold a NUL byte, then 16 GiB that read as NULs: each
    stops at the NUL with its line and column, in bounded time and memory."""
    from toolkit.data.corpus import iter_jsonl_docs
    from toolkit.data.texts import read_candidates
    from toolkit.data.trec_io import read_topics
    from toolkit.guard.readers import read_json
    from toolkit.guard.specs import load_yaml

    cases = [
        ("topics.tsv", b"q1\tfirst\nq2\tsec\x00ond\n", read_topics, ":2: NUL at column 7"),
        ("cands.json", b'[{"query": "q",\n "hits": [\x00', read_candidates, ":2: NUL at column 11"),
        ("docs.jsonl", b'{"id": "a", "contents": "x"}\n{"id": \x00', lambda p: list(iter_jsonl_docs([p])), ":2:"),
        ("meta.json", b'{"a":\n\n 1\x00', read_json, ":3: NUL at column 3"),
        ("exp.yaml", b"name: x\x00", load_yaml, ":1: NUL at column 8"),
        ("docs.jsonl.gz", gzip.compress(b'{"id": "a", "contents": "x"}\n\x00'), None, None),
    ]
    with doors.Bounded(10, 400):
        for name, head, read, where in cases:
            if read is None:  # a gzipped corpus holding a NUL after its first line (no hole: compressed)
                path = tmp / name
                path.write_bytes(head)
                _raises(lambda path=path: list(iter_jsonl_docs([path])), f"{path}:2: NUL at column 1")
                continue
            path = _sparse(tmp / name, head)
            _raises(partial(read, path), f"{path}{where}")


CASES = [
    *(
        doors.Case("readers", f"{reader}-separator-u{code}", partial(make, code))
        for code in SEPARATORS
        for reader, make in (
            ("run", _separator_in_run),
            ("qrels", _separator_in_qrels),
            ("topics", _separator_in_topics),
            ("candidates", _separator_in_candidates),
            ("corpus", _separator_in_corpus),
        )
    ),
    doors.Case("readers", "fuse-planted-line", fuse_planted_line),
    doors.Case("readers", "prefs-separator-u2028", prefs_separator),
    doors.Case("readers", "beir-qrels-checked", beir_qrels_checked),
    doors.Case("readers", "run-unicode-space-in-id", run_other_unicode_space_in_id),
    doors.Case("readers", "ids-refuse-every-line-break", ids_refuse_every_line_break),
    doors.Case("readers", "candidates-lone-surrogate", surrogate_in_candidates),
    doors.Case("readers", "corpus-lone-surrogate", surrogate_in_corpus),
    doors.Case("readers", "topics-lone-surrogate", surrogate_in_topics),
    doors.Case("readers", "run-encoded-surrogate", surrogate_in_run_file),
    doors.Case("readers", "dict-lone-surrogate", surrogate_in_dict),
    doors.Case("readers", "candidates-deep-json", deep_json_candidates),
    doors.Case("readers", "corpus-deep-json-line", deep_json_corpus_line),
    doors.Case("readers", "sidecar-deep-json", deep_json_sidecar),
    doors.Case("readers", "json-depth-bound", json_depth_64_is_read),
    doors.Case("readers", "json-size-bound", json_size_bound),
    doors.Case("readers", "run-gzip-bomb", gzip_bomb_run),
    doors.Case("readers", "qrels-gzip-bomb", gzip_bomb_qrels),
    doors.Case("readers", "corpus-gzip-bomb", gzip_bomb_corpus),
    doors.Case("readers", "gzip-real-run", gzip_real_run_is_read),
    doors.Case("readers", "gzip-size-bound", gzip_bound_is_overridable),
    doors.Case("readers", "gzip-corrupt", gzip_corrupt),
    doors.Case("readers", "qrels-label-1e8", partial(_label_case, 10**8)),
    doors.Case("readers", "qrels-label-2e9", partial(_label_case, 2 * 10**9)),
    doors.Case("readers", "qrels-label-at-limit", label_limit_is_read),
    doors.Case("readers", "dict-label-2e9", label_in_dict),
    doors.Case("readers", "fuzz-random-lines", fuzz_random_lines),
    doors.Case("readers", "run-bom-inside-joined-by-cat", run_bom_inside_joined_by_cat),
    doors.Case("readers", "qrels-zero-width-space-in-doc-id", partial(_format_in_qrels, "200B")),
    doors.Case("readers", "qrels-right-to-left-override-in-doc-id", partial(_format_in_qrels, "202E")),
    doors.Case("readers", "topics-word-joiner-in-id", topics_word_joiner),
    doors.Case("readers", "ids-refuse-every-format-character", ids_refuse_every_format_character),
    doors.Case("readers", "run-dev-zero", _device_run),
    doors.Case("readers", "qrels-dev-zero", _device_qrels),
    doors.Case("readers", "spec-run-dev-zero", _device_in_spec),
    doors.Case("readers", "run-fifo", fifo_run),
    doors.Case("readers", "qrels-folder", folder_qrels),
    doors.Case("readers", "every-reader-refuses-devices", every_reader_refuses_devices),
    doors.Case("readers", "run-nul-stops-at-once", run_nul_stops_at_once),
    doors.Case("readers", "every-reader-stops-at-nul", every_reader_stops_at_nul),
]
