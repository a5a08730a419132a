"""The fast paths behind the evaluator, each against a plain-Python reference.

- ``ranking.trec_order`` (packed numeric sort, then ties re-sorted by document id)
  against Python's ``sorted`` with trec_eval's comparison;
- ``duplicates.duplicate_rows`` (hash, then verify) against a set of seen pairs,
  including forced hash collisions;
- ``columns.take`` and ``columns.string_hashes`` on chunked and sliced columns.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.data import duplicates
from toolkit.data.columns import string_hashes, take
from toolkit.data.ranking import trec_order

QIDS = ["q1", "q10", "q2", "Q", "é"]
DOCS = ["d1", "d10", "d2", "D1", "", "a" * 9, "a" * 8 + "b", "x" * 17, "x" * 16 + "y", "ü", "üü"]
# ties, signed zeros, infinities, values equal only in float32, beyond float32's range
SCORES = [0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0 - 1e-9, -1.0, 2.5, 2.5, np.inf, -np.inf, 1e39, -1e39, 3e38, 1e-46]


_LARGE_STRING = pa.large_string()


def _chunked(values: list[str], cuts: list[int], type_=_LARGE_STRING) -> pa.ChunkedArray:
    bounds = sorted({0, len(values), *[c % (len(values) + 1) for c in cuts]})
    return pa.chunked_array([pa.array(values[a:b], type=type_) for a, b in itertools.pairwise(bounds)], type=type_)


def _reference_order(qids, scores, docs, precision):
    cast = np.float32 if precision == "float32" else np.float64
    with np.errstate(over="ignore"):
        s = [float(cast(x)) for x in scores]

    def cmp(i, j):
        a, b = qids[i].encode(), qids[j].encode()
        if a != b:
            return -1 if a < b else 1
        if s[i] != s[j]:
            return -1 if s[i] > s[j] else 1
        a, b = docs[i].encode(), docs[j].encode()
        return 0 if a == b else (-1 if a > b else 1)  # document id descending

    return sorted(range(len(qids)), key=functools.cmp_to_key(cmp)), s


rows = st.lists(st.tuples(st.sampled_from(QIDS), st.sampled_from(SCORES), st.sampled_from(DOCS)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(rows, st.sampled_from(["float32", "float64"]), st.lists(st.integers(0, 60), max_size=4))
def test_trec_order_equals_trec_eval_comparison(data, precision, cuts):
    qids = [q for q, _, _ in data]
    scores = np.array([s for _, s, _ in data], dtype=np.float64)
    docs = [d for _, _, d in data]
    expected, cast = _reference_order(qids, scores, docs, precision)
    got = trec_order(_chunked(qids, cuts), scores, _chunked(docs, cuts[::-1]), precision)
    assert sorted(got.tolist()) == list(range(len(data)))

    def keys(order):  # rows equal in (query, score, doc) may come in either order
        return [(qids[i], cast[i], docs[i]) for i in order]

    assert keys(got) == keys(expected)


def test_trec_order_integer_query_codes_and_precision_difference():
    codes = np.array([1, 0, 0, 0], dtype=np.int32)
    scores = np.array([5.0, 1.0, 1.0 + 1e-9, 1.0])
    docs = pa.array(["z", "a", "b", "c"])
    # float32: the three scores of query 0 tie, so document id descending decides: c, b, a
    assert trec_order(codes, scores, docs, "float32").tolist() == [3, 2, 1, 0]
    # float64: 1.0 + 1e-9 ranks first, then the exact tie c, a
    assert trec_order(codes, scores, docs, "float64").tolist() == [2, 3, 1, 0]
    with pytest.raises(ValueError, match="score precision"):
        trec_order(codes, scores, docs, "float16")


def _reference_duplicates(qids, docs):
    seen, out = set(), []
    for i, pair in enumerate(zip(qids, docs)):
        if pair in seen:
            out.append(i)
        seen.add(pair)
    return out


pairs = st.lists(st.tuples(st.sampled_from(QIDS[:3]), st.sampled_from(DOCS)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(pairs, st.lists(st.integers(0, 80), max_size=4), st.lists(st.integers(0, 80), max_size=4))
def test_duplicate_rows_equal_reference(data, qcuts, dcuts):
    qids = [q for q, _ in data]
    docs = [d for _, d in data]
    got = duplicates.duplicate_rows(_chunked(qids, qcuts), _chunked(docs, dcuts))
    assert got.tolist() == _reference_duplicates(qids, docs)


def test_duplicate_rows_verify_exactly_when_hashes_collide(monkeypatch):
    # every pair hashing alike: the exact comparison alone must decide
    monkeypatch.setattr(duplicates, "row_hashes", lambda q, d: np.zeros(len(q), dtype=np.uint64))
    qids = ["q1", "q1", "q2", "q1", "q2", "q2"]
    docs = ["a", "b", "a", "a", "a", "c"]
    got = duplicates.duplicate_rows(_chunked(qids, [2]), _chunked(docs, [3]))
    assert got.tolist() == [3, 4]
    assert duplicates.duplicate_rows(_chunked(["q1", "q1"], []), _chunked(["a", "b"], [])).tolist() == []


def test_string_hashes_depend_on_every_byte_and_the_length():
    values = [
        "",
        "a",
        "a\x00",
        "ab",
        "abcdefgh",
        "abcdefgi",
        "abcdefghi",
        "x" * 16 + "y",
        "x" * 16 + "z",
        "x" * 17,
        "ü",
        "u",
    ]
    h = string_hashes(pa.array(values, type=pa.large_string()))
    assert len(set(h.tolist())) == len(values)
    # the same strings in a sliced, int32-offset array hash alike
    sliced = pa.array(["pad"] + values, type=pa.string()).slice(1)
    assert string_hashes(sliced).tolist() == h.tolist()


def test_take_from_chunked_column_keeps_row_order():
    col = _chunked([f"v{i}" for i in range(10)], [3, 7])
    rows = np.array([9, 0, 4, 4, 3, 8])
    assert take(col, rows).to_pylist() == [f"v{i}" for i in rows]
    assert take(col, np.array([], dtype=np.int64)).to_pylist() == []
    assert take(pa.array(["a", "b"]), np.array([1])).to_pylist() == ["b"]


def test_write_run_lines_in_trec_order_with_exact_scores(tmp_path):
    from toolkit.data.records import run_from_rows
    from toolkit.data.trec_io import read_run, write_run

    rows = [
        ("q2", "a", 1.0),
        ("q1", "b", 0.1 + 0.2),
        ("q1", "c", 0.30000000000000004),
        ("q1", "z", -0.0),
        ("q10", "x", np.inf),
        ("q2", "é", 1e-7),
        ("q2", "b", 1.0 + 2**-52),
    ]
    out = tmp_path / "run.trec"
    write_run(run_from_rows(rows), out, tag="t")
    # hand-ordered: query id, then score desc (float64), then doc id desc; ranks restart per query
    assert out.read_text(encoding="utf-8") == (
        "q1 Q0 c 1 0.30000000000000004 t\n"
        "q1 Q0 b 2 0.30000000000000004 t\n"
        "q1 Q0 z 3 -0 t\n"
        "q10 Q0 x 1 inf t\n"
        "q2 Q0 b 1 1.0000000000000002 t\n"
        "q2 Q0 a 2 1 t\n"
        "q2 Q0 é 3 1e-7 t\n"
    )
    back = read_run(out).frame
    assert sorted(zip(back["query_id"], back["doc_id"], back["score"])) == sorted(rows)
    write_run(run_from_rows(rows), out, tag="t", depth=1)
    assert [line.split()[2] for line in out.read_text(encoding="utf-8").splitlines()] == ["c", "x", "b"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(QIDS), st.floats(allow_nan=False, width=64)), min_size=1, max_size=40))
def test_write_run_scores_read_back_as_the_same_doubles(tmp_path_factory, data):
    from toolkit.data.records import run_from_rows
    from toolkit.data.trec_io import read_run, write_run

    rows = [(q, f"d{i}", s) for i, (q, s) in enumerate(data)]
    out = tmp_path_factory.mktemp("w") / "run.trec"
    write_run(run_from_rows(rows), out)
    back = read_run(out).frame
    assert sorted(zip(back["query_id"], back["doc_id"], back["score"])) == sorted(rows)


@settings(max_examples=150, deadline=None)
@given(rows, st.sampled_from(["float32", "float64"]), st.lists(st.sampled_from(QIDS), max_size=5))
def test_a_run_known_in_order_ranks_and_evaluates_as_when_sorted_again(data, precision, judged_queries):
    """``in_trec_order`` marks its frame: ``order_run`` and the evaluator then take its order without a sort
    (ranks from where the query id changes); every rank and ranked row equals those of sorting it again."""

    import pandas as pd

    from toolkit.data import ranking
    from toolkit.data.records import Qrels, Run
    from toolkit.data.workspace import Workspace
    from toolkit.measures.ranked import build_ranked

    frame = pd.DataFrame(
        {
            "query_id": pd.array([q for q, _, _ in data], dtype="string[pyarrow]"),
            "doc_id": pd.array([d for _, _, d in data], dtype="string[pyarrow]"),
            "score": np.array([s for _, s, _ in data], dtype=np.float64),
        }
    ).drop_duplicates(["query_id", "doc_id"], ignore_index=True)
    work = Workspace()
    run = ranking.in_trec_order(Run(frame=frame), precision, work=work)
    assert work.is_ordered(run.frame, precision)
    other = "float64" if precision == "float32" else "float32"
    assert not work.is_ordered(run.frame, other) or run.frame is frame
    unmarked = Run(frame=run.frame.copy(deep=True))  # the same rows, a frame never marked
    assert not work.is_ordered(unmarked.frame, precision)
    fast, slow = ranking.order_run(run.frame, precision, work=work), ranking.order_run(unmarked.frame, precision)
    pd.testing.assert_frame_equal(fast, slow)
    assert work.is_ordered(fast, precision)
    # a qrels whose queries are a subset (and in another order): the judged rows' indices ascend the same way
    qrels_rows = [(q, d, (len(q) + len(d)) % 3) for q in dict.fromkeys(judged_queries or ["q1"]) for d in DOCS[:6]]
    qrels = Qrels(frame=pd.DataFrame(qrels_rows, columns=["query_id", "doc_id", "relevance"]))
    for level, max_docs, judged_only in [(1, None, False), (2, 3, True)]:
        args = {"level": level, "score_precision": precision, "max_docs": max_docs, "judged_only": judged_only}
        a, b = build_ranked(qrels, run, **args, work=work), build_ranked(qrels, unmarked, **args)
        _assert_same_fields(a, b)


def _assert_same_fields(a: object, b: object, path: str = "") -> None:
    """Two dataclass values field for field: arrays equal element for element, nested dataclasses the same way."""
    for field in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, field.name), getattr(b, field.name)
        if dataclasses.is_dataclass(x):
            _assert_same_fields(x, y, f"{path}{field.name}.")
        else:
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, path + field.name


def test_among_is_membership_of_strings_as_python_sees_it():
    import pyarrow as pa

    from toolkit.data.columns import among

    values = pa.chunked_array([["q1", "q2", "", "q10"], ["q1", "é", "q3"]])
    for wanted in (["q1", "é", "q9"], pa.array(["q1", "é", "q9"]), pa.chunked_array([["q1"], ["é", "q9"]])):
        want = [v in {"q1", "é", "q9"} for v in values.to_pylist()]
        assert among(values, wanted).tolist() == want
    assert among(pa.array(["a", "b"], type=pa.large_string()), []).tolist() == [False, False]
    assert among(pa.array([], type=pa.string()), ["a"]).tolist() == []


def test_block_starts_are_where_adjacent_values_change():
    import pyarrow as pa

    from toolkit.data.columns import block_starts

    values = ["a", "a", "b", "a", "a", "c", "c"]
    want = [i for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
    assert block_starts(pa.array(values)).tolist() == want == [0, 2, 3, 5]
    assert block_starts(pa.chunked_array([values[:3], values[3:4], values[4:]])).tolist() == want
    assert block_starts(pa.array(["x"])).tolist() == [0]
    assert block_starts(pa.array([], type=pa.string())).tolist() == []
