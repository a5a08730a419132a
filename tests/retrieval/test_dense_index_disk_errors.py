"""A full disk or a read-only folder while building a dense index: one ``Error:`` line naming
the index folder and the fix, not FAISS's "RuntimeError: Error in void faiss::write_index(...) ... write error in
.../.idx.building123/index: 61395 != 128000 (No space left on device)" trace; no partial index is left behind.

The file systems are real tmpfs mounts (root only; skipped with the reason elsewhere: the ``mounts`` fixture of
test_index_disk_errors.py) and the index is written by the real code path with a tiny random bi-encoder (one
layer, 32 dimensions; 1,000 documents make a 128,000-byte FAISS index). A folder too small for the estimated index
is refused before the encoder is loaded; to fail while writing, after every check, the folder FAISS writes into is
mounted (full-size 64 KiB, or read-only) just before FAISS writes.
"""

from __future__ import annotations

import json
import shutil

import pytest
from needs import required

from tests.retrieval.test_index_disk_errors import mounts  # noqa: F401  (a fixture)
from toolkit.guard.preflight import human_bytes

required("faiss", "dense indexes need faiss (the [pyserini] extra)")
required("pyserini", "dense indexes need the [pyserini] extra")

WORDS = [f"w{i}" for i in range(50)]
DOCS = 1000
DIM = 32


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(corpus, encoder folder): 1,000 five-word documents and a 1-layer BERT with random weights."""
    from tiny_models import save_tiny_bert

    folder = tmp_path_factory.mktemp("dense-disk")
    model = save_tiny_bert(folder / "encoder", WORDS, seed=0, hidden=DIM)
    corpus = folder / "corpus.jsonl"
    with open(corpus, "w") as fh:
        for i in range(DOCS):
            fh.write(
                json.dumps({"id": f"d{i}", "contents": " ".join(WORDS[(i * j + i) % 50] for j in range(5))}) + "\n"
            )
    return corpus, model


def build(cli, inputs, out):
    corpus, model = inputs
    return cli("index", "--dense", "--collection", corpus, "--encoder", model, "--device", "cpu", "--no-progress",
               "--out", out)  # fmt: skip


def test_a_folder_too_small_for_the_index_is_refused_before_encoding(cli, inputs, mounts, monkeypatch, tmp_path):  # noqa: F811
    import toolkit.retrieval.indexing as indexing

    loaded = []
    monkeypatch.setattr(indexing, "Encoder", lambda *a, **k: loaded.append(a) or pytest.fail("encoder loaded"))
    disk = tmp_path / "disk"
    mounts(disk, "size=64k")
    out = disk / "index"
    res = build(cli, inputs, out)
    assert res.exit_code == 1, res.output
    free = shutil.disk_usage(disk).free  # as the check saw it: after the build lock's file was made
    need = DOCS * (4 * DIM + 12)  # float32 vectors and about 12 bytes of docid per document: 140,000 bytes
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: --out {out}: the dense index ({DOCS} documents of {DIM} dimensions) needs about "
        f"{human_bytes(need)}, but {disk} has {human_bytes(free)} free; free space there or choose another folder"
    )
    assert "Traceback" not in res.stderr and not loaded
    assert [p.name for p in disk.iterdir()] == [".index.lock"]  # the build lock's file stays (by design)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ("size=64k", "no space left on the device; free space there or write the output elsewhere"),
        ("ro,size=64k", "read-only file system; write the output to a folder on a writable file system"),
    ],
)
def test_faiss_failing_to_write_the_index_is_one_line(cli, inputs, mounts, monkeypatch, tmp_path, options, said):  # noqa: F811
    import toolkit.retrieval.indexing as indexing

    real = indexing._write_faiss
    targets = []

    def write_faiss(faiss, folder, *args):  # the folder FAISS writes into, mounted as it starts
        mounts(folder, options)
        targets.append(folder)
        return real(faiss, folder, *args)

    monkeypatch.setattr(indexing, "_write_faiss", write_faiss)
    out = tmp_path / "index"
    res = build(cli, inputs, out)
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == f"Error: {out}: {said}"
    assert "write_index" not in res.stderr and "Traceback" not in res.stderr
    assert targets and not out.exists()
    # the partial build is removed (all but the mount point, which cannot be removed while mounted)
    assert list(targets[0].iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".index.lock", targets[0].name])


def test_the_index_still_builds_where_there_is_room(cli, inputs, mounts, tmp_path):  # noqa: F811
    """200 KiB hold the index (about 137 KB estimated), not the index and a sharded job's embeddings (below)."""
    disk = tmp_path / "disk"
    mounts(disk, "size=200k")
    res = build(cli, inputs, disk / "index")
    assert res.exit_code == 0, res.output
    from toolkit.retrieval.indexing import read_meta

    assert read_meta(disk / "index")["documents"] == DOCS
    assert (disk / "index" / "index").stat().st_size > 4 * DIM * DOCS
    assert sorted(p.name for p in disk.iterdir()) == [".index.lock", "index"]


def test_a_sharded_build_counts_its_shards_too(inputs, mounts, tmp_path):  # noqa: F811
    """A sharded job (``--ray``; here in this process) keeps every shard's embeddings in ``OUT.shards`` beside the
    index: the estimate adds them, and the library names ``out`` as its keyword."""
    from toolkit.data.corpus import resolve_corpus
    from toolkit.errors import ConfigError
    from toolkit.jobs.shards import LocalExecutor, Sharding, shards_dir
    from toolkit.retrieval.index_options import IndexOptions
    from toolkit.retrieval.indexing import build_dense_index

    corpus_path, model = inputs
    disk = tmp_path / "disk"
    mounts(disk, "size=200k")
    out = disk / "index"
    sharding = Sharding(LocalExecutor(), shards_dir(out), shard_size=250)
    options = IndexOptions(dense=True, encoder=str(model), device="cpu")
    with pytest.raises(ConfigError) as err:
        build_dense_index(resolve_corpus(str(corpus_path)), out, options, sharding=sharding)
    need = DOCS * (4 * DIM + 12) + DOCS * 4 * DIM  # the index, and the shards' float32 vectors: 268,000 bytes
    free = shutil.disk_usage(disk).free
    assert str(err.value) == (
        f"out {out}: the dense index ({DOCS} documents of {DIM} dimensions, and its shards) needs about "
        f"{human_bytes(need)}, but {disk} has {human_bytes(free)} free; free space there or choose another folder"
    )
    assert sorted(p.name for p in disk.iterdir()) == [".index.lock"]
