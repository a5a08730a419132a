"""Lucene search without Pyserini's Python wrappers: nothing heavy imported, the same hits as Pyserini's.

Oracle: Pyserini's own ``LuceneSearcher.batch_search`` (the code path ``twostage bm25`` used before) on the same
index; the CACM figures (MAP 0.3123 BM25, 0.3648 RM3, 0.3265 QL) are checked in tests/retrieval/test_retrieval.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.data.records import Topic, Topics
from toolkit.retrieval.lucene import RM3, LuceneRetriever

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "faiss", "sentence_transformers", "pyserini.encode", "pyserini.search.lucene")
TOPICS = Topics((Topic("1", "time sharing system"), Topic("2", "matrix algorithms"), Topic("3", "zzqxw")))


def _env() -> dict[str, str]:
    # PYTHONPATH kept: without it the subprocess imports /work/main's toolkit through the editable install.
    return os.environ | {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_search_in_a_fresh_process_loads_no_heavy_module(tiny_index):
    code = (
        "import json, sys\n"
        "from toolkit.data.records import Topic, Topics\n"
        "from toolkit.retrieval.lucene import RM3, LuceneRetriever\n"
        f"t = Topics((Topic('1', 'time sharing system'),))\n"
        f"r = LuceneRetriever({str(tiny_index)!r})\n"
        "a = r.search(t, hits=3)\n"
        "r.configure('qld', mu=100.0, rm3=RM3(fb_docs=2))\n"
        "b = r.search(t, hits=3)\n"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules],\n"
        "    'rows': [len(a.run), len(b.run)], 'top': a.run.frame['doc_id'].iloc[0]}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["heavy"] == []
    assert got["rows"] == [3, 3] and got["top"] in ("d1", "d2")


def test_cli_bm25_in_a_fresh_process_loads_no_heavy_module(tiny_index, tmp_path):
    """``twostage bm25`` end to end, with the modules it loaded printed at exit by a wrapper."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\ttime sharing system\n2\tmatrix algorithms\n")
    out = tmp_path / "run.trec"
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr))\n"
        "from toolkit.cli import main\n"
        f"main(['bm25', '--index', {str(tiny_index)!r}, '--topics', {str(topics)!r}, '--hits', '4', '--out', {str(out)!r}])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
    # the documents sharing a term with each query, nothing else (BM25 scores only matching terms)
    got = [line.split()[:3:2] for line in out.read_text().splitlines()]
    assert got == [["1", "d1"], ["1", "d2"], ["1", "d5"], ["2", "d3"], ["2", "d4"], ["2", "d6"]]
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert meta["parameters"]["k1"] == 0.9 and meta["versions"]["anserini"] == "1.7.1"


@pytest.mark.parametrize(
    "params",
    [
        {"model": "bm25", "k1": 0.9, "b": 0.4},
        {"model": "bm25", "k1": 1.2, "b": 0.75},
        {"model": "qld", "mu": 50.0},
        {"model": "bm25", "k1": 0.9, "b": 0.4, "rm3": RM3(fb_terms=5, fb_docs=2, original_query_weight=0.6)},
        {"model": "qld", "mu": 50.0, "rm3": RM3(fb_terms=5, fb_docs=2)},
    ],
    ids=["bm25", "bm25-1.2-0.75", "qld", "bm25-rm3", "qld-rm3"],
)
def test_hits_equal_pyserinis_searcher(tiny_index, params):
    from toolkit.jvm import import_pyserini

    lucene = import_pyserini("pyserini.search.lucene")
    oracle = lucene.LuceneSearcher(str(tiny_index))
    if params["model"] == "bm25":
        oracle.set_bm25(params["k1"], params["b"])
    else:
        oracle.set_qld(params["mu"])
    if "rm3" in params:
        rm3 = params["rm3"]
        oracle.set_rm3(rm3.fb_terms, rm3.fb_docs, rm3.original_query_weight)
    qids = [t.query_id for t in TOPICS.topics]
    expected = oracle.batch_search([t.text for t in TOPICS.topics], qids, k=10, threads=2)
    want = [(q, h.docid, h.score) for q in qids for h in expected.get(q, [])]
    res = LuceneRetriever(tiny_index, **params).search(TOPICS, hits=10, threads=2)
    f = res.run.frame
    assert list(zip(f["query_id"], f["doc_id"], f["score"])) == want
    assert res.empty_queries == ("3",)


def test_configure_switches_parameters_on_the_open_searcher(tiny_index):
    """One searcher, several settings: each result equals a retriever built for that setting alone."""
    shared = LuceneRetriever(tiny_index)
    for k1, b in [(0.6, 0.4), (1.2, 0.75), (0.9, 0.4)]:
        shared.configure("bm25", k1, b)
        alone = LuceneRetriever(tiny_index, "bm25", k1, b).search(TOPICS, hits=10).run.frame
        assert shared.search(TOPICS, hits=10).run.frame.equals(alone)
        assert shared.params() == {"model": "bm25", "k1": k1, "b": b, "rm3": None}
    with pytest.raises(Exception, match="BM25 b must be in"):
        shared.configure("bm25", 0.9, 3.0)
