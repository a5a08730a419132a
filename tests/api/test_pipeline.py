"""``ts.index``, ``ts.bm25`` (plain, RM3, QL) and ``ts.dense`` against their commands and independent oracles.

On a six-document JSONL corpus (fast): the API's run equals ``twostage bm25/dense --out`` byte for byte, its
sidecar written by ``Run.write`` equals the command's less the command line and the clock, the hits equal
Pyserini's own ``LuceneSearcher.batch_search`` on the same index (BM25, RM3, QL), the dense scores equal
sentence-transformers' cosine of the same texts, and the Run goes straight into ``ts.evaluate`` with the values
of the written file. On CACM (slow): Anserini's published regression figures through the API alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from needs import required
from samples import TINY_DOCS as DOCS
from samples import TINY_TOPICS as TOPICS
from samples import write_tiny_corpus

import toolkit as ts

#: d1, d2 relevant to 1; d3, d6 to 2; d5 to 3: hand-made judgments to evaluate with.
QRELS = "1 0 d1 1\n1 0 d2 1\n1 0 d4 0\n2 0 d3 1\n2 0 d6 1\n3 0 d5 1\n"

#: What the sidecar of one call differs from another's in: the command line, the file's path, the clock.
VOLATILE = ("command", "argv", "run", "seconds", "search_seconds", "created")

FLAGS = {
    "bm25": ([], {}),
    "bm25-rm3": (["--rm3", "--fb-docs", "2", "--fb-terms", "5"], {"rm3": True, "fb_docs": 2, "fb_terms": 5}),
    "qld": (["--qld", "--mu", "50"], {"qld": True, "mu": 50.0}),
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tiny-corpus")
    corpus, topics = write_tiny_corpus(folder)
    qrels = folder / "qrels.txt"
    qrels.write_text(QRELS)
    return {"corpus": corpus, "topics": topics, "qrels": qrels, "folder": folder}


@pytest.fixture(scope="module")
def lucene_index(tiny) -> Path:
    required("pyserini", "the [pyserini] extra is not installed")
    path = ts.index(str(tiny["corpus"]), tiny["folder"] / "lucene")
    meta = json.loads((path / "index.meta.json").read_text())
    assert path == tiny["folder"] / "lucene" and meta["documents"] == 6
    return path


def _stable(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if k not in VOLATILE}


def test_index_is_what_the_command_builds(cli, tiny, lucene_index):
    """The command finds the API's index built with its own settings (the same key): it reuses it."""
    res = cli("index", "--collection", tiny["corpus"], "--out", lucene_index, "--no-progress")
    assert res.exit_code == 0, res.output
    assert "reused lucene index" in res.output and res.stdout.strip() == str(lucene_index)


@pytest.mark.parametrize("name", list(FLAGS))
def test_bm25_equals_the_command_and_pyserini(cli, tiny, lucene_index, tmp_path, name):
    flags, kwargs = FLAGS[name]
    out = tmp_path / "cli.trec"
    res = cli("bm25", "--index", lucene_index, "--topics", tiny["topics"], "--hits", "5", *flags, "--out", out)
    assert res.exit_code == 0, res.output
    run = ts.bm25(lucene_index, str(tiny["topics"]), hits=5, **kwargs)
    run.write(tmp_path / "api.trec")
    assert (tmp_path / "api.trec").read_bytes() == out.read_bytes()
    api_meta, cli_meta = (json.loads(Path(f"{p}.meta.json").read_text()) for p in (tmp_path / "api.trec", out))
    assert _stable(api_meta) == _stable(cli_meta)
    assert cli_meta["command"].startswith("twostage bm25") and set(cli_meta) - set(api_meta) == {"command", "argv"}
    assert api_meta["run"]["sha256"] == cli_meta["run"]["sha256"]
    # oracle: Pyserini's own searcher on the same index and query texts
    from toolkit.jvm import import_pyserini

    oracle = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(lucene_index))
    if kwargs.get("qld"):
        oracle.set_qld(kwargs["mu"])
    else:
        oracle.set_bm25(0.9, 0.4)
    if kwargs.get("rm3"):
        oracle.set_rm3(kwargs["fb_terms"], kwargs["fb_docs"], 0.5)
    hits = oracle.batch_search(list(TOPICS.values()), list(TOPICS), k=5, threads=2)
    want = [(q, h.docid, np.float32(h.score)) for q in TOPICS for h in hits.get(q, [])]
    f = run.to_frame()
    assert list(zip(f["query_id"], f["doc_id"], f["score"].astype(np.float32))) == want


def test_bm25_run_goes_straight_into_evaluate(tiny, lucene_index, tmp_path):
    run = ts.bm25(lucene_index, TOPICS, hits=5)  # topics as {qid: text}
    assert run.meta["topics"]["spec"] == "<dict>" and run.meta["queries"] == 3 and run.meta["empty_queries"] == []
    run.write(tmp_path / "run.trec")
    measures = ["map", "P.5", "ndcg_cut.5", "recall.5"]
    a = ts.evaluate(tiny["qrels"], run, measures)
    b = ts.evaluate(tiny["qrels"], tmp_path / "run.trec", measures)
    assert a.to_trec_eval(True, provenance=False) == b.to_trec_eval(True, provenance=False)
    # hand-computed: query 3 retrieves d5 first (the only document with "accounting")
    assert a.per_query.loc["3", "P_5"] == pytest.approx(0.2) and a.per_query.loc["3", "map"] == pytest.approx(1.0)


def test_empty_queries_are_notes(lucene_index):
    run = ts.bm25(lucene_index, {"1": "time sharing", "9": "zzqxw"}, hits=3)
    assert run.meta["empty_queries"] == ["9"] and run.meta["queries_with_results"] == 1
    assert run.notes == ("1 of 2 queries retrieved nothing: 9",)


@pytest.fixture(scope="module")
def dense_index(tiny, minilm) -> Path:
    required("faiss", "the [pyserini] extra is not installed")
    return ts.index(str(tiny["corpus"]), tiny["folder"] / "dense", dense=True, encoder=minilm, device="cpu")


def test_dense_equals_the_command_and_sentence_transformers(cli, tiny, dense_index, minilm, tmp_path):
    out = tmp_path / "cli.trec"
    args = ["--index", dense_index, "--topics", tiny["topics"], "--hits", "4", "--device", "cpu"]
    res = cli("dense", *args, "--no-progress", "--out", out)
    assert res.exit_code == 0, res.output
    run = ts.dense(dense_index, str(tiny["topics"]), hits=4, device="cpu")
    run.write(tmp_path / "api.trec")
    assert (tmp_path / "api.trec").read_bytes() == out.read_bytes()
    api_meta, cli_meta = (json.loads(Path(f"{p}.meta.json").read_text()) for p in (tmp_path / "api.trec", out))
    assert _stable(api_meta) == _stable(cli_meta)
    # oracle: sentence-transformers' own encode (mean pooling, normalised) and cosine, no faiss
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm, device="cpu")
    d = model.encode(list(DOCS.values()), normalize_embeddings=True)
    q = model.encode(list(TOPICS.values()), normalize_embeddings=True)
    f = run.to_frame()
    for i, qid in enumerate(TOPICS):
        cos = d @ q[i]
        top = np.argsort(-cos, kind="stable")[:4]
        got = f[f["query_id"] == qid]
        assert list(got["doc_id"]) == [list(DOCS)[j] for j in top]
        np.testing.assert_allclose(got["score"].to_numpy(), cos[top], atol=1e-5)
    ev = ts.evaluate(tiny["qrels"], run, ["P.2"])
    assert ev.summary["P_2"] == ts.evaluate(tiny["qrels"], out, ["P.2"]).summary["P_2"]


@pytest.mark.data
@pytest.mark.slow
def test_cacm_through_the_api_reproduces_anserini(shared_data, tmp_path):
    """CACM indexed and searched through ``ts`` alone: Anserini's published regression figures."""
    required("pyserini", "the [pyserini] extra is not installed")
    index = ts.index("cacm", tmp_path / "cacm", data_dir=shared_data)
    want = {
        "bm25": ({}, (0.3123, 0.1942)),
        "bm25-rm3": ({"rm3": True}, (0.3648, 0.2224)),
        "qld": ({"qld": True, "mu": 1000.0}, (0.3265, 0.1942)),
    }
    for name, (kwargs, (ap, p30)) in want.items():
        run = ts.bm25(index, "cacm", hits=1000, data_dir=shared_data, **kwargs)
        s = ts.evaluate("cacm", run, ["map", "P.30"], data_dir=shared_data).summary
        assert (round(s["map"], 4), round(s["P_30"], 4)) == (ap, p30), name


def test_fuse_with_options_equals_the_command(cli, tmp_path):
    """``ts.fuse(options=FuseOptions(...), train_qrels=...)`` writes what ``twostage fuse`` writes, and the sidecar
    records the same settings, what was learned and the tie order."""
    from toolkit.retrieval.fusion import TIES, FuseOptions

    a, b, c = (tmp_path / f"{n}.trec" for n in "abc")
    a.write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 2.0 a\n1 Q0 z 3 1.0 a\n2 Q0 x 1 5.0 a\n2 Q0 w 2 4.0 a\n")
    b.write_text("1 Q0 z 1 4.0 b\n1 Q0 x 2 2.0 b\n2 Q0 w 1 1.5 b\n2 Q0 v 2 0.5 b\n")
    c.write_text("1 Q0 y 1 0.9 c\n2 Q0 v 1 0.8 c\n2 Q0 x 2 0.1 c\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 x 1\n1 0 z 0\n2 0 w 2\n")
    for flags, options, train in (
        (["--method", "wsum", "--normalize", "zmuv", "--weights", "0.2,0.3,0.5"],
         FuseOptions("wsum", "zmuv", weights=(0.2, 0.3, 0.5)), None),
        (["--method", "probfuse", "--param", "n_segments=2", "--train-qrels", str(qrels), "--k", "2"],
         FuseOptions("probfuse", params={"n_segments": 2}, hits=2), qrels),
        (["--method", "mixed", "--normalize", "minmax", "--train-qrels", str(qrels), "--param", "step=0.5"],
         FuseOptions("mixed", "minmax", params={"step": 0.5}), qrels),
    ):  # fmt: skip
        out = tmp_path / "cli.trec"
        res = cli("fuse", *flags, a, b, c, "--out", out)
        assert res.exit_code == 0, res.output
        run = ts.fuse([a, b, c], options=options, train_qrels=train)
        run.write(tmp_path / "api.trec")
        assert (tmp_path / "api.trec").read_bytes() == out.read_bytes()
        api_meta, cli_meta = (json.loads(Path(f"{p}.meta.json").read_text()) for p in (tmp_path / "api.trec", out))
        assert _stable(api_meta) == _stable(cli_meta) and cli_meta["parameters"]["ties"] == TIES
    # the weights searched on the judged queries: step 0.5 tries the six triples of 0, 0.5, 1 that sum to 1
    assert cli_meta["parameters"]["searched"]["trials"] == 6 and sum(cli_meta["parameters"]["weights"]) == 1.0
