"""Sharded, resumable jobs without Ray: the manifest, resuming, refusing changed settings, the
embedding cache. The same job code runs on Ray in tests/test_ray.py; here an in-process
executor runs the shards, so each check takes milliseconds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolkit.data.records import run_from_rows
from toolkit.data.texts import TextSource
from toolkit.errors import ConfigError
from toolkit.jobs.embed_cache import EmbeddingCache
from toolkit.jobs.shards import LocalExecutor, Sharding, _differences, plan
from toolkit.reranking.rerank_job import rerank_run
from toolkit.reranking.rerank_options import RerankOptions


class Overlap:
    """A pair reranker: the number of query words in the text; counts every call."""

    kind = "word-overlap"
    model_name = "overlap"

    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.model_calls = 0

    def score(self, query, texts):
        self.calls.append((query, len(texts)))
        self.model_calls += 1
        words = set(query.split())
        return np.array([len(words & set(t.split())) for t in texts], dtype=float)

    def describe(self):
        return {"kind": self.kind, "model": self.model_name, "model_path": None, "max_length": None}


class HashEmbedder:
    """A bi-encoder: normalised bag-of-hashed-words vectors; records every text it embeds."""

    kind = "bi-encoder"
    model_name = "hash"

    def __init__(self):
        self.embedded: list[str] = []
        self.model_calls = 0

    def embed(self, texts):
        self.model_calls += 1
        self.embedded += texts
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, sum(map(ord, w)) % 16] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    def score(self, query, texts):
        e = self.embed([query, *texts])
        return (e[1:] @ e[0]).astype(np.float64)

    def describe(self):
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": None,
            "max_length": None,
            "backend": "test",
            "precision": "fp32",
        }


DOCS = {f"d{i}": " ".join(f"w{(i * j) % 11}" for j in range(1, 6)) for i in range(12)}
QUERIES = {f"q{i}": f"w{i} w{i + 1} w{i + 2}" for i in range(5)}


def first_stage():
    rows = [(q, d, float(len(DOCS) - k)) for q in QUERIES for k, d in enumerate(DOCS) if (k + int(q[1:])) % 2 == 0]
    return run_from_rows(rows, tag="bm25")


TEXTS = TextSource("mem", "mem", lambda ids: {d: DOCS[d] for d in ids if d in DOCS})


def run(model, folder=None, shard_size=1, force=False, depth=6, cache=None, executor=None):
    sharding = Sharding(executor or LocalExecutor(), folder, shard_size, force) if folder else None
    options = RerankOptions.from_keywords(model=model.describe()["model"], depth=depth)
    return rerank_run(first_stage(), QUERIES, TEXTS, model, options, sharding=sharding, cache=cache)


def pairs(result):
    f = result.run.frame
    return {(q, d): s for q, d, s in zip(f["query_id"], f["doc_id"], f["score"])}


def test_plan_and_differences():
    assert plan(5, 2) == [[0, 2], [2, 4], [4, 5]] and plan(0, 3) == []
    with pytest.raises(ConfigError, match="--shard-size must be >= 1"):
        plan(3, 0)
    assert _differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": 0}) == [
        "a.c: 2 -> 3",
        'd: "<absent>" -> 0',
    ]


def test_sharded_pairs_equal_unsharded_and_resume_does_nothing_twice(tmp_path):
    plain = run(Overlap())
    model = Overlap()
    sharded = run(model, tmp_path / "job", shard_size=2)
    assert pairs(sharded) == pairs(plain)
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text())
    assert manifest["job"] == "rerank-pairs" and len(manifest["shards"]) == 3
    assert manifest["identity"]["ranges"] == [[0, 2], [2, 4], [4, 5]]
    assert {r["file"] for r in manifest["shards"].values()} == {f"shard-0000{i}.npz" for i in range(3)}
    assert len(model.calls) == 5 and sharded.settings["model_work"]["model_calls_this_run"] == 5
    again = Overlap()
    resumed = run(again, tmp_path / "job", shard_size=2)
    assert again.calls == [] and pairs(resumed) == pairs(plain)
    assert resumed.settings["model_work"]["shards_resumed"] == 3
    assert resumed.settings["model_work"]["model_calls_this_run"] == 0


def test_changed_setting_is_refused_with_the_difference_named(tmp_path):
    run(Overlap(), tmp_path / "job", shard_size=2)
    with pytest.raises(ConfigError, match=r"settings\.depth: 6 -> 4.*--force"):
        run(Overlap(), tmp_path / "job", shard_size=2, depth=4)
    with pytest.raises(ConfigError, match=r"identity\.ranges|ranges: "):
        run(Overlap(), tmp_path / "job", shard_size=3)
    model = Overlap()
    forced = run(model, tmp_path / "job", shard_size=2, depth=4, force=True)
    assert len(model.calls) == 5 and forced.settings["depth"] == 4


class StopAfter(LocalExecutor):
    """Ctrl-C after ``n`` finished shards."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def map(self, spec, payloads):
        for i, item in enumerate(super().map(spec, payloads)):
            yield item
            if i + 1 == self.n:
                raise KeyboardInterrupt


def test_interrupted_job_resumes_with_only_the_unfinished_shards(tmp_path, caplog):
    first = Overlap()
    with pytest.raises(KeyboardInterrupt):
        run(first, tmp_path / "job", shard_size=1, executor=StopAfter(2))
    assert [q for q, _ in first.calls] == [QUERIES["q0"], QUERIES["q1"], QUERIES["q2"]][: len(first.calls)]
    done = json.loads((tmp_path / "job" / "manifest.json").read_text())["shards"]
    assert sorted(done) == ["0", "1"]
    second = Overlap()
    caplog.set_level("INFO")
    result = run(second, tmp_path / "job", shard_size=1)
    assert [q for q, _ in second.calls] == [QUERIES[q] for q in ("q2", "q3", "q4")]  # q0, q1 not recomputed
    assert "2 of 5 shards already finished, 3 to do" in caplog.text
    assert pairs(result) == pairs(run(Overlap()))


def test_a_corrupt_shard_is_computed_again(tmp_path):
    run(Overlap(), tmp_path / "job", shard_size=2)
    (tmp_path / "job" / "shard-00001.npz").write_bytes(b"not this")
    model = Overlap()
    result = run(model, tmp_path / "job", shard_size=2)
    assert [q for q, _ in model.calls] == [QUERIES["q2"], QUERIES["q3"]]
    assert pairs(result) == pairs(run(Overlap()))


def test_sharded_bi_encoder_and_the_embedding_cache(tmp_path):
    plain_model = HashEmbedder()
    plain = run(plain_model)
    distinct = len(plain_model.embedded)  # each distinct passage id once, and the queries
    model = HashEmbedder()
    sharded = run(model, tmp_path / "job", shard_size=3)
    assert pairs(sharded) == pytest.approx(pairs(plain), abs=1e-6)
    assert sorted(model.embedded) == sorted(plain_model.embedded)  # each distinct text once
    ns = {"model": "hash"}
    cache = EmbeddingCache(tmp_path / "cache", ns)
    cold = HashEmbedder()
    first = run(cold, cache=cache)
    assert len(cold.embedded) == distinct and first.settings["embedding_cache"]["added"] == distinct
    warm = HashEmbedder()
    second = run(warm, cache=EmbeddingCache(tmp_path / "cache", ns))  # a new process would load the same parts
    assert warm.embedded == [] and pairs(second) == pytest.approx(pairs(plain), abs=1e-6)
    assert second.settings["embedding_cache"]["hits"] == distinct
    # sharded with a warm cache: shards are assembled from cached rows, nothing is embedded
    warm_sharded = HashEmbedder()
    third = run(warm_sharded, tmp_path / "job2", shard_size=3, cache=EmbeddingCache(tmp_path / "cache", ns))
    assert warm_sharded.embedded == [] and pairs(third) == pytest.approx(pairs(plain), abs=1e-6)
    # another namespace (another model) shares nothing
    assert len(EmbeddingCache(tmp_path / "cache", {"model": "other"})) == 0


def test_doctor_reports_ray_and_the_cluster_auto_would_join(cli, monkeypatch, tmp_path):
    import socket

    monkeypatch.setenv("TWOSTAGE_DATA", str(tmp_path))
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no `ray start` marker there
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    res = cli("doctor", "--no-jvm")
    assert "ray          2.60.0" in res.stdout
    assert "--ray auto: none (no RAY_ADDRESS" in res.stdout and "--ray alone starts a private local Ray" in res.stdout
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
        res = cli("doctor", "--no-jvm")
    assert f"--ray auto joins 127.0.0.1:{port} (reachable; from RAY_ADDRESS)" in res.stdout


@pytest.mark.parametrize("args", [["--workers", "2"], ["--shard-size", "10"], ["--gpus-per-worker", "1"]])
def test_ray_options_without_ray_are_usage_errors(cli, tmp_path, args):
    (tmp_path / "c.json").write_text("[]")
    res = cli("rerank", "--candidates", tmp_path / "c.json", "--model", "m", "--out", tmp_path / "o.trec", *args)
    assert res.exit_code == 2 and "only apply with --ray" in res.output
