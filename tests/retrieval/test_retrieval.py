"""Retrieval: parameter checks, corpora, fusion (fast); CACM reproduction and dense runs (slow, real data).

The CACM index comes from tests/conftest.py (built once per session, about 15 s, in a temporary folder);
the reproduction targets are Anserini's published CACM regression figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolkit.data.corpus import iter_corpus_texts, resolve_corpus
from toolkit.data.records import Topic, Topics, run_from_rows
from toolkit.data.trec_io import read_qrels, read_run
from toolkit.errors import ConfigError, InputFormatError
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.retrieval.dense import DenseRetriever
from toolkit.retrieval.fusion import FuseOptions, fuse
from toolkit.retrieval.lucene import RM3, LuceneRetriever


def rrf(runs, k=60.0, depth=1000, hits=1000):
    return fuse(runs, FuseOptions("rrf", k=k, depth=depth, hits=hits)).run


def interpolate(runs, alpha=0.5, depth=1000, hits=1000, normalize="none"):
    options = FuseOptions("interpolation", normalize, params={"alpha": alpha}, depth=depth, hits=hits)
    return fuse(runs, options).run


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------- parameter checks
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k1": -0.1}, r"BM25 k1 must be a finite number >= 0"),
        ({"k1": float("nan")}, r"BM25 k1"),
        ({"b": 1.5}, r"BM25 b must be in \[0, 1\]"),
        ({"model": "qld", "mu": 0}, r"mu must be a finite number > 0"),
        ({"rm3": RM3(fb_terms=0)}, r"--fb-terms must be >= 1"),
        ({"rm3": RM3(original_query_weight=2)}, r"--original-query-weight must be in \[0, 1\]"),
        ({"model": "tfidf"}, r"unknown Lucene model"),
    ],
)
def test_bad_parameters(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LuceneRetriever(tmp_path, **kwargs)


def test_missing_and_wrong_indexes(tmp_path):
    with pytest.raises(ConfigError, match=r"does not exist; build it with `twostage index"):
        LuceneRetriever(tmp_path / "nope")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "docid").write_text("a\n")
    (tmp_path / "d" / "index").write_text("")
    with pytest.raises(ConfigError, match=r"not a Lucene index .*dense index: use `twostage dense`"):
        LuceneRetriever(tmp_path / "d")
    with pytest.raises(ConfigError, match=r"not a dense index"):
        DenseRetriever(tmp_path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["bm25", "--index", "{tmp}/missing", "--topics", "cacm", "--out", "{tmp}/r"], "does not exist"),
        (["bm25", "--index", "{tmp}", "--topics", "cacm", "--k1", "-1", "--out", "{tmp}/r"], "k1 must be"),
        (["bm25", "--index", "{tmp}", "--topics", "cacm", "--b", "2", "--out", "{tmp}/r"], "b must be in"),
        (["bm25", "--index", "{tmp}", "--topics", "cacm", "--hits", "0", "--out", "{tmp}/r"], "--hits must be >= 1"),
        (["dense", "--index", "{tmp}/missing", "--topics", "cacm", "--out", "{tmp}/r"], "does not exist"),
        (["fuse", "{tmp}/a.trec", "--out", "{tmp}/r"], "at least two runs"),
        (["index", "--collection", "dl19-passage", "--out", "{tmp}/i"], "has no corpus in the data folder"),
        (["index", "--collection", "no-such-corpus", "--out", "{tmp}/i"], "neither an existing file/folder"),
    ],
)
def test_cli_user_errors_exit_1_without_traceback(cli, tmp_path, args, message):
    (tmp_path / "a.trec").write_text("1 Q0 d 1 1.0 t\n")
    res = cli(*[a.format(tmp=tmp_path) for a in args])
    assert res.exit_code == 1, res.output
    assert "Error:" in res.output and message in res.output
    assert "Traceback" not in res.output


@pytest.mark.data
def test_unknown_topics_name(cli, tmp_path, shared_data):
    from toolkit.data.catalog import resolve_topics

    with pytest.raises(ConfigError, match=r"unknown topics 'no-such-topics'"):
        resolve_topics("no-such-topics", shared_data)


def test_doctor_reports_versions_java_and_data(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("TWOSTAGE_DATA", str(tmp_path))  # an empty data folder
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "cache"))
    res = cli("doctor", "--no-jvm")
    assert res.exit_code == 0, res.output
    for word in ("python", "pyserini", "torch", "faiss-cpu", "java", "anserini", f"data folder  {tmp_path}"):
        assert word in res.stdout
    assert "jdk.incubator.vector: absent (not requested)" in res.stdout or "vector: yes" in res.stdout
    assert "cacm          corpus missing, topics missing, qrels missing" in res.stdout


# ------------------------------------------------------------------ fusion
def test_rrf_hand_computed():
    a = run_from_rows([("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 1.0)])
    b = run_from_rows([("1", "z", 9.0), ("1", "x", 8.0)])
    fused = rrf([a, b], k=60)
    got = dict(zip(fused.frame["doc_id"], fused.frame["score"]))
    assert got == pytest.approx({"x": 1 / 61 + 1 / 62, "z": 1 / 63 + 1 / 61, "y": 1 / 62})
    assert list(fused.frame["doc_id"]) == ["x", "z", "y"]


def test_rrf_uses_trec_eval_order_for_ties():
    # equal scores: trec_eval ranks doc id descending, so "b" is rank 1
    a = run_from_rows([("1", "a", 1.0), ("1", "b", 1.0)])
    b = run_from_rows([("1", "c", 1.0)])
    got = dict(zip(*(rrf([a, b], k=1).frame[c] for c in ("doc_id", "score"))))
    assert got == pytest.approx({"b": 1 / 2, "a": 1 / 3, "c": 1 / 2})


def test_interpolation_hand_computed():
    a = run_from_rows([("1", "x", 10.0), ("1", "y", 0.0)])
    b = run_from_rows([("1", "y", 1.0), ("2", "q", 5.0)])
    got = {(q, d): s for q, d, s in interpolate([a, b], alpha=0.25).frame.itertuples(index=False)}
    assert got == pytest.approx({("1", "x"): 2.5, ("1", "y"): 0.75, ("2", "q"): 3.75})
    mm = {(q, d): s for q, d, s in interpolate([a, b], alpha=0.5, normalize="minmax").frame.itertuples(index=False)}
    assert mm == pytest.approx({("1", "x"): 0.5, ("1", "y"): 0.0, ("2", "q"): 0.0})


@pytest.mark.parametrize("method", ["rrf", "interpolation"])
def test_fusion_agrees_with_pyserini(tmp_path, method):
    """Oracle: Pyserini's own fusion (pyserini.fusion, pure pandas: no JVM) on the same files."""
    import numpy as np
    from pyserini.fusion import interpolation as pys_interpolation
    from pyserini.fusion import reciprocal_rank_fusion
    from pyserini.trectools import TrecRun

    from toolkit.data.trec_io import write_run

    rng = np.random.default_rng(7)
    paths = []
    for name in ("a", "b"):
        rows = [(str(q), f"d{d}", float(rng.random())) for q in range(1, 6) for d in rng.choice(40, 25, replace=False)]
        paths.append(tmp_path / f"{name}.trec")
        write_run(run_from_rows(rows), paths[-1], tag=name)
    ours = [read_run(p) for p in paths]
    theirs = [TrecRun(str(p)) for p in paths]
    # No final cut: RRF produces many exact ties (1/(60+r) from either run), which the
    # toolkit breaks in trec_eval order (doc id descending) and Pyserini otherwise.
    if method == "rrf":
        mine, ref = rrf(ours, k=60, depth=20), reciprocal_rank_fusion(theirs, rrf_k=60, depth=20)
    else:
        mine, ref = interpolate(ours, 0.3, depth=20), pys_interpolation(theirs, alpha=0.3, depth=20)
    ref_frame = ref.to_numpy()
    got = {(q, d): s for q, d, s in mine.frame.itertuples(index=False)}
    expected = {(str(r[0]), str(r[2])): float(r[4]) for r in ref_frame}
    assert got.keys() == expected.keys()
    assert got == pytest.approx(expected, rel=1e-12)


def test_fusion_checks():
    a = run_from_rows([("1", "x", 1.0)])
    with pytest.raises(ConfigError, match="exactly two"):
        interpolate([a, a, a])
    with pytest.raises(ConfigError, match=r"alpha must be in \[0, 1\], not 1.5"):
        interpolate([a, a], alpha=1.5)


def test_fuse_cli_writes_run_and_meta(cli, tmp_path):
    (tmp_path / "a.trec").write_text("1 Q0 x 1 3 a\n1 Q0 y 2 2 a\n")
    (tmp_path / "b.trec").write_text("1 Q0 y 1 9 b\n")
    out = tmp_path / "f.trec"
    res = cli("fuse", tmp_path / "a.trec", tmp_path / "b.trec", "--out", out)
    assert res.exit_code == 0, res.output
    assert [line.split()[2] for line in out.read_text().splitlines()] == ["y", "x"]
    meta = json.loads((tmp_path / "f.trec.meta.json").read_text())
    assert meta["parameters"]["method"] == "rrf" and len(meta["inputs"]) == 2
    assert meta["command"].startswith("twostage fuse")


# ----------------------------------------------------------------- corpora
def test_jsonl_corpus_title_text_and_contents(tmp_path, cache):
    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "a", "contents": "alpha"}\n{"_id": "b", "title": "T", "text": "beta"}\n')
    c = resolve_corpus(str(p))
    assert c.collection_class == "JsonCollection" and c.inputs == (p,)
    assert list(iter_corpus_texts(c)) == [("a", "alpha"), ("b", "T\nbeta")]
    assert resolve_corpus(str(p)).input_dir == c.input_dir  # normalised once


@pytest.mark.parametrize(
    "line, message",
    [('{"contents": "x"}', "no id field"), ('{"id": "a"}', "needs 'contents'"), ("{oops", "invalid JSON")],
)
def test_jsonl_corpus_errors(tmp_path, cache, line, message):
    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "z", "contents": "ok"}\n' + line + "\n")
    with pytest.raises(InputFormatError, match=rf"c\.jsonl:2: .*{message}"):
        resolve_corpus(str(p))


def test_beir_folder(tmp_path, cache):
    beir = tmp_path / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "one"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    c = resolve_corpus(str(beir))
    assert c.name == "scifact" and list(iter_corpus_texts(c)) == [("d1", "one")]
    assert read_qrels(c.qrels).frame.values.tolist() == [["q1", "d1", 1]]
    from toolkit.data.catalog import resolve_topics

    assert resolve_topics(c.topics).topics == (Topic("q1", "what"),)


def test_anserini_class_passthrough(tmp_path):
    (tmp_path / "trec").mkdir()
    (tmp_path / "trec" / "doc1").write_text("<DOC><DOCNO>1</DOCNO><TEXT>x</TEXT></DOC>")
    c = resolve_corpus(str(tmp_path / "trec"), collection_class="TrecCollection")
    assert c.collection_class == "TrecCollection" and c.input_dir == tmp_path / "trec" and c.format == "anserini"
    with pytest.raises(ConfigError, match="dense indexing reads JSONL"):
        list(iter_corpus_texts(c))


# --------------------------------------------------------- real collections
@pytest.mark.data
@pytest.mark.slow
def test_index_is_reused_when_inputs_match(cli, cacm_index, shared_data):
    meta = json.loads((cacm_index / "index.meta.json").read_text())
    assert meta["documents"] == 3204 and meta["settings"]["collection_class"] == "HtmlCollection"
    assert meta["inputs"][0]["sha256"].startswith("4e318d89")
    res = cli("index", "--collection", "cacm", "--out", cacm_index, "--data-dir", shared_data, "--no-progress")
    assert res.exit_code == 0 and "reused lucene index" in res.output


#: Anserini's published CACM regression (and what Pyserini 1.6.0 gives on this machine).
CACM_TARGETS = [
    ("bm25", [], {"map": 0.3123, "P_30": 0.1942}),
    ("bm25-rm3", ["--rm3"], {"map": 0.3648, "P_30": 0.2224}),
    ("qld", ["--qld", "--mu", "1000"], {"map": 0.3265, "P_30": 0.1942}),
    ("qld-rm3", ["--qld", "--mu", "1000", "--rm3"], {"map": 0.3629, "P_30": 0.2250}),
]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("name, flags, expected", CACM_TARGETS, ids=[t[0] for t in CACM_TARGETS])
def test_cacm_reproduces_anserini_regression(
    cli, cacm_index, shared_data, tmp_path, monkeypatch, name, flags, expected
):
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))
    out = tmp_path / f"cacm.{name}.trec"
    res = cli("bm25", "--index", cacm_index, "--topics", "cacm", "--hits", "1000", *flags, "--out", out)
    assert res.exit_code == 0, res.output
    run = read_run(out)
    qrels = read_qrels(shared_data / "cacm" / "qrels.cacm.txt")
    got = evaluate(qrels, run, parse_measures(["map", "P.30"]), EvalSettings()).aggregate
    assert {k: round(v, 4) for k, v in got.items()} == expected
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert meta["queries"] == 64 and meta["empty_queries"] == []
    assert meta["index"]["path"] == str(cacm_index.resolve()) and len(meta["index"]["sha256"]) == 64
    assert meta["parameters"]["hits"] == 1000 and meta["versions"]["pyserini"] == "1.6.0"
    assert meta["command"].startswith("twostage bm25") and "--topics cacm" in meta["command"]
    if name == "bm25":  # the command as users write it, evaluated by collection name
        ev = cli("eval", "-m", "map", "-m", "P.30", "--no-provenance", "cacm", out)
        assert ev.exit_code == 0 and ev.stdout.split() == ["map", "all", "0.3123", "P_30", "all", "0.1942"]


@pytest.mark.data
@pytest.mark.slow
def test_queries_without_results_are_listed(cacm_index):
    topics = Topics((Topic("1", "time sharing system"), Topic("99", "zzqxw qqxzv")))
    res = LuceneRetriever(cacm_index).search(topics, hits=5)
    assert res.empty_queries == ("99",)
    assert set(res.run.frame["query_id"]) == {"1"} and len(res.run) == 5


@pytest.mark.data
@pytest.mark.slow
def test_dense_subset_end_to_end(cli, shared_data, tmp_path, monkeypatch):
    """all-MiniLM-L6-v2 over the first 64 CACM documents: index, reuse, search, meta."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))
    idx = tmp_path / "cacm.dense"
    args = [
        "index",
        "--collection",
        "cacm",
        "--dense",
        "--encoder",
        "all-MiniLM-L6-v2",
        "--limit",
        "64",
        "--out",
        idx,
        "--no-progress",
    ]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    meta = json.loads((idx / "index.meta.json").read_text())
    assert meta["documents"] == 64 and meta["dim"] == 384 and meta["faiss"] == "IndexFlatIP"
    assert meta["settings"]["encoder"]["pooling"] == "mean" and meta["settings"]["encoder"]["normalize"] is True
    assert "reused dense index" in cli(*args).output
    out = tmp_path / "dense.trec"
    res = cli("dense", "--index", idx, "--topics", "cacm", "--hits", "20", "--max-queries", "5", "--out", out)
    assert res.exit_code == 0, res.output
    run = read_run(out)
    assert sorted(run.frame["query_id"].unique()) == ["1", "2", "3", "4", "5"] and len(run) == 100
    assert run.frame["score"].between(-1.0001, 1.0001).all()  # cosine scores
    # a document's own text, used as a query, finds that document first
    retr = DenseRetriever(idx)
    doc_id, text = next(iter_corpus_texts(resolve_corpus("cacm", data=shared_data)))
    top = retr.search(Topics((Topic("self", text),)), hits=1).run.frame
    assert top["doc_id"].tolist() == [doc_id] and top["score"].iloc[0] == pytest.approx(1.0, abs=1e-4)
    # the GPU's exact search (torch, in chunks), forced on the CPU: the same hits as FAISS' flat index
    monkeypatch.setenv("TWOSTAGE_EXACT_SEARCH", "torch")
    out_torch = tmp_path / "dense.torch.trec"
    res = cli("dense", "--index", idx, "--topics", "cacm", "--hits", "20", "--max-queries", "5", "--out", out_torch)
    assert res.exit_code == 0, res.output
    a, b = read_run(out).frame, read_run(out_torch).frame
    assert a[["query_id", "doc_id"]].values.tolist() == b[["query_id", "doc_id"]].values.tolist()
    assert np.allclose(a["score"], b["score"], atol=1e-6)


def test_doctor_without_pyserini_names_the_extra_and_passes(cli, monkeypatch, tmp_path):
    """A core install is a working install: doctor names the missing [pyserini] extra, checks no Java, exits 0."""
    import toolkit.extras

    real = toolkit.extras.missing
    monkeypatch.setattr(toolkit.extras, "missing", lambda extra: "pyserini" if extra == "pyserini" else real(extra))
    monkeypatch.setenv("TWOSTAGE_DATA", str(tmp_path))
    res = cli("doctor", "--no-jvm")
    assert res.exit_code == 0, res.output
    assert "[pyserini] missing (pyserini is not installed)" in res.stdout
    assert (
        "java         not checked: index, bm25, dense need the [pyserini] extra: pip install 'twostage[pyserini]'"
        in res.stdout
    )
