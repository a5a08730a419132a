"""In-memory inputs (``toolkit.data.adapters``): every form gives the file's values, the content checksum, and the
validation of dicts and object columns naming the row.

Oracles: the same run read from a TREC file by ``read_run`` (itself checked against trec_eval elsewhere),
pytrec_eval's per-query values on the same dict, and hand-built frames whose checksums must (not) agree.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from needs import required

import toolkit as ts
from toolkit.data.adapters import as_qrels, as_run
from toolkit.errors import InputFormatError

QRELS = {"q1": {"d0": 2, "d1": 0, "d3": 1, "d7": 1}, "q2": {"d2": 1, "d5": 0}, "q3": {"d9": 1}}
MEASURES = ["P.5", "map", "ndcg_cut.3", "recall.5", "recip_rank"]
PYTREC = {"P.5": "P_5", "map": "map", "ndcg_cut.3": "ndcg_cut_3", "recall.5": "recall_5", "recip_rank": "recip_rank"}

# deliberate ties: four score values over ten documents
RUNS = st.dictionaries(
    st.tuples(st.sampled_from(["q1", "q2", "q3", "q4"]), st.sampled_from([f"d{i}" for i in range(10)])),
    st.sampled_from([0.5, 1.0, 1.5, 2.0]),
    min_size=1,
    max_size=25,
).map(lambda pairs: {("q1", "d0"): 1.0, **pairs})  # a judged query is always there


def _frame(pairs: dict) -> pd.DataFrame:
    return pd.DataFrame({"qid": [q for q, _ in pairs], "docno": [d for _, d in pairs], "score": list(pairs.values())})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUNS)
def test_every_form_of_a_random_run_gives_the_files_values(pairs):
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    pytrec_eval = required(
        "pytrec_eval", "pytrec_eval is an independent oracle of trec_eval's measures (pip install .[test])"
    )
    nested: dict = {}
    for (q, d), s in pairs.items():
        nested.setdefault(q, {})[d] = s
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.txt"
        path.write_text("".join(f"{q} Q0 {d} {i + 1} {s!r} t\n" for i, ((q, d), s) in enumerate(pairs.items())))
        want = ts.evaluate(QRELS, path, MEASURES).per_query
    arrow = _frame(pairs)
    assert isinstance(arrow["qid"].array, pd.arrays.ArrowStringArray)
    forms = {
        "arrow": arrow,
        "object": arrow.astype({"qid": object, "docno": object}),
        "dict": nested,
        "scored_docs": [ir_measures.ScoredDoc(q, d, s) for (q, d), s in pairs.items()],
    }
    for name, run in forms.items():
        pd.testing.assert_frame_equal(ts.evaluate(QRELS, run, MEASURES).per_query, want, obj=name)
    # an independent oracle: trec_eval's C code through pytrec_eval, on the queries both evaluate
    oracle = pytrec_eval.RelevanceEvaluator(QRELS, set(PYTREC)).evaluate(nested)
    for q, values in oracle.items():
        for m, key in PYTREC.items():
            assert want.loc[q, key] == pytest.approx(values[key], abs=1e-12), (q, m)


# ------------------------------------------------------------------ checksum
def test_checksum_is_of_the_content():
    base = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["ab", "c", "x"], "score": [3.0, 2.0, 1.0]})
    sha = as_run(base).sha256
    same = {
        "object columns": base.astype({"qid": object, "docno": object}),
        "a dict": {"q1": {"ab": 3.0, "c": 2.0}, "q2": {"x": 1.0}},
        "chunked differently": pd.DataFrame(
            {
                "qid": pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([["q1"], ["q1", "q2"]]))),
                "docno": pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([["ab", "c"], ["x"]]))),
                "score": [3, 2, 1],
            }
        ),
    }
    for name, obj in same.items():
        assert as_run(obj).sha256 == sha, name
    different = {
        "one score": base.assign(score=[3.0, 2.0, 1.5]),
        "one doc id": base.assign(docno=["ab", "d", "x"]),
        "the same bytes cut elsewhere": base.assign(docno=["a", "bc", "x"]),
        "one query id": base.assign(qid=["q1", "q1", "q3"]),
        "row order (documented: it counts)": base.iloc[[1, 0, 2]],
    }
    shas = {name: as_run(obj).sha256 for name, obj in different.items()}
    assert sha not in shas.values() and len(set(shas.values())) == len(shas), shas
    labels = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": [1, 0]})
    assert as_qrels(labels).sha256 != as_qrels(labels.assign(label=[1, 1])).sha256
    assert as_qrels(labels).sha256 == as_qrels({"q1": {"a": 1, "b": 0}}).sha256


def test_dedupe_first_keeps_the_first_and_counts():
    frame = pd.DataFrame({"qid": ["q1", "q1", "q1", "q2"], "docno": ["a", "b", "a", "a"], "score": [3.0, 2, 1, 1]})
    run = as_run(frame.astype({"qid": object}), dedupe="first")
    assert run.duplicates_dropped == 1
    assert list(zip(run.frame["query_id"], run.frame["doc_id"], run.frame["score"])) == [
        ("q1", "a", 3.0),
        ("q1", "b", 2.0),
        ("q2", "a", 1.0),
    ]
    assert run.sha256 == as_run(frame.iloc[[0, 1, 3]]).sha256


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"q1": {"a": 1.0}, "q2": [("b", 1.0)]}, "<dict>: query 'q2': expected {doc_id: score}"),
        ({"q1": {"a": 1.0, 2.5: 1.0}}, "<dict>: row 1: document id 2.5 is not text"),
        ({"q1": {"a": 1.0}, None: {"b": 1.0}}, "<dict>: row 1: query id None is not text"),
        ({"q1": {"a": 1.0, "b": "x"}}, "<dict>: row 1: score 'x' is not a number"),
        ({"q1": {"a": 1.0}, "q2": {"b": 2.0, "a": 1.0, "b2": math.nan}}, "<dict>: row 3: score is NaN"),
        ({"q1": {"a": 1.0, "b": 1.0}, "q2": {"b": 1.0}}, None),
        (
            pd.DataFrame({"qid": pd.Series(["q1", "q1", "q2"], dtype=object), "docno": ["a", None, "c"], "score": 1.0}),
            "<DataFrame>: row 1: document id nan is not text",
        ),
        (
            pd.DataFrame({"qid": pd.Series(["q1", 7, 2.5], dtype=object), "docno": ["a", "b", "c"], "score": 1.0}),
            "<DataFrame>: row 2: query id 2.5 is not text",
        ),
        (
            pd.DataFrame({"qid": pd.Series(["q1", "q1"], dtype=object), "docno": ["a", "a"], "score": [1.0, 2.0]}),
            "<DataFrame>: row 1: run lists document 'a' twice for query 'q1'",
        ),
        (
            pd.DataFrame({"qid": pd.array([1, None], dtype="Int64"), "docno": ["a", "b"], "score": [1.0, 2.0]}),
            "<DataFrame>: row 1: query id <NA> is not text",
        ),
    ],
)
def test_bad_inputs_name_the_row(run, message):
    if message is None:  # the same doc under two queries is no repeat
        assert len(as_run(run).frame) == 3
        return
    with pytest.raises(InputFormatError) as err:
        as_run(run)
    assert message in str(err.value)


def test_mixed_and_integer_ids_become_text(caplog):
    frame = pd.DataFrame({"qid": pd.Series(["q1", 7], dtype=object), "docno": [10, 11], "score": [1.0, 2.0]})
    with caplog.at_level("INFO"):
        run = as_run(frame)
    assert list(run.frame["query_id"]) == ["q1", "7"] and list(run.frame["doc_id"]) == ["10", "11"]
    assert sum("ids converted to text" in m for m in caplog.messages) == 2
    assert as_run({1: {10: 0.5}, 2: {10: 0.25}}).frame["query_id"].tolist() == ["1", "2"]
    assert isinstance(run.frame["query_id"].array, pd.arrays.ArrowStringArray)
    assert pa.array(run.frame["doc_id"].array).type == pa.large_string()


def test_empty_dict_and_frame_say_they_are_empty():
    for empty in ({}, pd.DataFrame({"qid": [], "docno": [], "score": []}), {"q1": {}}, []):
        with pytest.raises(InputFormatError, match="the run is empty"):
            as_run(empty)
    with pytest.raises(InputFormatError, match="the qrels are empty"):
        as_qrels({})
    with pytest.raises(InputFormatError, match="the run is empty"):  # not the wrong-qrels hint
        ts.evaluate({"q1": {"d1": 1}}, {}, "P@10")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q1", "q22", "", "q333333333"]), st.integers(1, 30)), max_size=8))
def test_block_hashing_equals_row_hashing(blocks):
    # the duplicate check hashes each block of a run's equal query ids once; the hashes must be string_hashes'
    from toolkit.data.columns import _repeated_string_hashes, string_hashes

    column = pa.array([q for q, n in blocks for _ in range(n)], type=pa.large_string())
    for part in (column, column.slice(min(3, len(column)))):
        assert _repeated_string_hashes(part).tolist() == string_hashes(part).tolist()
