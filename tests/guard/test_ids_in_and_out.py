"""Ids valid on the way out as on the way in: every reader of query and document ids refuses
an empty id and one holding whitespace or a control character, naming the source, the place and the id, as
the run reader refuses them (a TREC line cannot carry them).

The attack: a candidates JSON whose doc id holds a newline made ``rerank`` write planted
TREC lines (``eval`` then scored a document that was never a candidate). Expected texts are written by hand.
"""

from __future__ import annotations

import copy
import json
from collections import namedtuple

import pandas as pd
import pytest
from samples import CANDIDATES

from toolkit.data.adapters import as_qrels, as_run
from toolkit.data.corpus import iter_jsonl_docs
from toolkit.data.texts import read_candidates
from toolkit.data.trec_io import read_topics
from toolkit.errors import InputFormatError

PLANTED = "d2\n1 Q0 planted 1 99.0 x"


def test_rerank_refuses_a_candidates_doc_id_that_would_plant_trec_lines(cli, tiny_cross_encoder, tmp_path):
    cands = copy.deepcopy(CANDIDATES)
    cands[0]["hits"][1]["docid"] = PLANTED
    path = tmp_path / "cands.json"
    path.write_text(json.dumps(cands))
    out = tmp_path / "out.trec"
    res = cli("rerank", "--candidates", path, "--model", tiny_cross_encoder, "--device", "cpu", "--out", out)
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: {path}: entry 0, hit 1: document id 'd2\\n1 Q0 planted 1 99.0 x' holds a newline (U+000A) at "
        "position 2: ids may hold no whitespace and no control characters (a TREC file could not carry them)"
    ]
    assert not out.exists()


def _candidates(tmp_path, qid=1, docid="d1"):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"query": "q", "hits": [{"qid": qid, "docid": docid, "score": 1.0, "content": "t"}]}]))
    return read_candidates, path


def _corpus(tmp_path, doc_id):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "ok", "contents": "x"}) + "\n" + json.dumps({"id": doc_id, "contents": "y"}))
    return lambda p: list(iter_jsonl_docs([p])), path


def _topics(tmp_path, text, name="topics.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_topics, path


@pytest.mark.parametrize(
    ("make", "where", "message"),
    [
        (
            lambda t: _candidates(t, qid="1 2"),
            "",
            "entry 0, hit 0: query id '1 2' holds a space (U+0020) at position 1",
        ),
        (lambda t: _candidates(t, docid="d\r"), "", "entry 0, hit 0: document id 'd\\r' holds a carriage return"),
        (lambda t: _candidates(t, docid=""), "", "entry 0, hit 0: document id '' is empty"),
        (lambda t: _corpus(t, "a\tb"), ":2", "document id 'a\\tb' holds a tab (U+0009) at position 1"),
        (lambda t: _corpus(t, "a\x00"), ":2", "document id 'a\\x00' holds a control character (U+0000)"),
        (lambda t: _topics(t, "q1\tfine\nq 2\tbad\n"), ":2", "query id 'q 2' holds a space"),
        (
            lambda t: _topics(t, '{"qid": "q\\u2028x", "text": "t"}\n', "t.jsonl"),
            ":1",
            "query id 'q\\u2028x' holds whitespace (U+2028) at position 1",
        ),
        (
            lambda t: _topics(t, "<DOC>\n<DOCNO> a b </DOCNO>\ntext\n</DOC>\n", "t.txt"),
            ":2",
            "query id 'a b' holds a space (U+0020) at position 1 (column 10)",
        ),
    ],
)
def test_every_file_reader_refuses_bad_ids_naming_the_file_and_the_id(tmp_path, make, where, message):
    read, path = make(tmp_path)
    with pytest.raises(InputFormatError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}{where}: {message}"), str(err.value)


Doc = namedtuple("Doc", "query_id doc_id score")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: as_run(pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "b\nc"], "score": [2.0, 1.0]})),
            "<DataFrame>: row 1: document id 'b\\nc' holds a newline (U+000A) at position 1",
        ),
        (lambda: as_run({"q 1": {"a": 1.0}}), "<dict>: row 0: query id 'q 1' holds a space"),
        (lambda: as_run([Doc("1", "a", 1.0), Doc("1", "\x1f", 0.5)]), "<iterable>: row 1: document id '\\x1f' holds"),
        (lambda: as_qrels({"1": {"a\u00a0b": 1}}), "<dict>: row 0: document id 'a\\xa0b' holds whitespace (U+00A0)"),
        (
            lambda: as_qrels(pd.DataFrame({"qid": [""], "docno": ["a"], "label": [1]})),
            "<DataFrame>: row 0: query id ''",
        ),
    ],
)
def test_in_memory_inputs_refuse_bad_ids_naming_the_row_and_the_id(make, message):
    with pytest.raises(InputFormatError) as err:
        make()
    assert str(err.value).startswith(message), str(err.value)


def test_ids_of_any_script_and_punctuation_are_kept(tmp_path):
    from toolkit.data.records import id_problem

    ids = ["D1", "msmarco_passage_00_123", "clueweb12-0000tw-00-00000", "文档-7", "éa", "a/b#c", "q.1:2"]
    assert [id_problem(i) for i in ids] == [None] * len(ids)
    run = as_run(pd.DataFrame({"qid": ids, "docno": ids, "score": range(len(ids))}))
    assert run.frame["doc_id"].tolist() == ids
    read, path = _candidates(tmp_path, qid="文档-7", docid="a/b#c")
    assert read(path).run.frame[["query_id", "doc_id"]].values.tolist() == [["文档-7", "a/b#c"]]
