"""The cache store's door (``toolkit.guard.store``): damaged, planted and foreign cache entries and sidecars.

For each of the four caches (stage, embedding, ONNX export, judgments), an entry that is truncated, bit-flipped or
stored under another key, and a damaged index or database, is set aside under ``damaged/`` (named in exactly one
warning) and recomputed, with the clean run's result. A cache folder that is world-writable, group-writable or
owned by another uid (tests run as root: ``os.chown(path, 65534, 65534)``) is not read (one warning naming how to
trust it) and is read with ``trust_cache``/``--trust-cache``. Sidecars: a run sidecar recording another run's
checksum is ignored with a warning; a judge sidecar recording another qrels checksum is refused.

The ONNX cases use ``cached_onnx`` with a stand-in exporter (the cache's door is the same whatever writes the
file; ``tests/reranking/test_onnx_cache.py`` runs the real export); the judgments cases run ``ts.judge`` and
``twostage judge`` against the local server of ``tests/support/judge_server.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from doors import Case, cli
from needs import lacking, optional

from toolkit.data.records import run_from_rows
from toolkit.errors import TwostageWarning
from toolkit.guard.store import DAMAGED, trusting

REPO = Path(__file__).resolve().parents[2]
RUN = run_from_rows([("q1", "d1", 2.0), ("q1", "d2", 1.0), ("q2", "d3", 0.5)], tag="bm25")
OTHER = run_from_rows([("q1", "d9", 9.0)], tag="other")
KEY, KEY2 = "a" * 64, "b" * 64


@contextlib.contextmanager
def said() -> Iterator[list[str]]:
    """The ``TwostageWarning`` messages issued in the block."""
    out: list[str] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield out
    out += [str(w.message) for w in seen if issubclass(w.category, TwostageWarning)]


def _one_damaged(messages: list[str], folder: Path) -> str:
    """Exactly one warning, naming an entry moved under ``folder/damaged/`` that exists there."""
    assert len(messages) == 1, messages
    where = Path(messages[0].split("moved to ", 1)[1].split(" and ")[0]) if "moved to " in messages[0] else None
    if where is None:  # a database row is written aside
        where = Path(messages[0].split("kept in ", 1)[1].split(" and ")[0])
    assert where.parent == folder / DAMAGED and where.exists(), messages[0]
    return messages[0]


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


def _require_root(reason: str) -> None:
    if os.geteuid() != 0:
        optional(f"{reason}: needs root (chown to another uid)")


def _foreign(how: str) -> Callable[[Path], None]:
    """Make a folder or file look planted: world-writable, group-writable, or owned by uid 65534."""

    def make(p: Path) -> None:
        if how == "world-writable":
            os.chmod(p, 0o777 if p.is_dir() else 0o666)
        elif how == "group-writable":
            os.chmod(p, 0o775 if p.is_dir() else 0o664)
        else:
            _require_root("a cache owned by another user")
            os.chown(p, 65534, 65534)

    return make


FOREIGN = ("world-writable", "group-writable", "other-uid")


# ------------------------------------------------------------------ the stage cache
def _stage_damaged(damage: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.experiments.stage_cache import ENTRY_FILE, RUN_FILE, StageCache

        cache = StageCache(tmp / "stages")
        clean = cache.put(KEY, RUN, {"stage": "bm25"})[0].frame.values.tolist()
        entry = cache.path(KEY)
        if damage == "truncated":
            _truncate(entry / RUN_FILE)
        elif damage == "bit-flipped":
            _flip(entry / RUN_FILE)
        elif damage == "wrong-key":  # another stage's entry copied under this key
            cache.put(KEY2, OTHER, {"stage": "bm25"})
            shutil.rmtree(entry)
            shutil.copytree(cache.path(KEY2), entry)
        else:  # the entry's index (entry.json) torn
            (entry / ENTRY_FILE).write_text('{"stage": "bm25", "key": ')
        with said() as messages:
            assert StageCache(tmp / "stages").get(KEY) is None
        _one_damaged(messages, tmp / "stages")
        again = StageCache(tmp / "stages")
        again.put(KEY, RUN, {"stage": "bm25"})  # recomputed
        got = again.get(KEY)
        assert got is not None and got[0].frame.values.tolist() == clean

    return run


def _stage_foreign(how: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.experiments.stage_cache import StageCache

        folder = tmp / "stages"
        StageCache(folder).put(KEY, OTHER, {"stage": "bm25"})  # what the planter left: another run
        _foreign(how)(folder)
        with said() as messages:
            cache = StageCache(folder)
            assert cache.get(KEY) is None
            run_, record = cache.put(KEY, RUN, {"stage": "bm25"})  # computed, kept out of the foreign folder
        assert len(messages) == 1 and "trust_cache=True" in messages[0] and str(folder) in messages[0], messages
        assert run_.frame["doc_id"].tolist() == ["d1", "d2", "d3"] and record["cached"] is False
        with said() as messages, trusting(True):
            got = StageCache(folder).get(KEY)
        assert messages == [] and got is not None and got[0].frame["doc_id"].tolist() == ["d9"]  # read, trusted

    return run


def _stage_foreign_entry(tmp: Path) -> None:
    """An entry owned by another uid inside one's own cache folder is not read; it is computed again."""
    from toolkit.experiments.stage_cache import ENTRY_FILE, StageCache

    cache = StageCache(tmp / "stages")
    cache.put(KEY, OTHER, {"stage": "bm25"})
    _foreign("other-uid")(cache.path(KEY) / ENTRY_FILE)
    with said() as messages:
        assert StageCache(tmp / "stages").get(KEY) is None
    assert len(messages) == 1 and "not read" in messages[0] and "uid 65534" in messages[0], messages
    assert "trust_cache=True" in messages[0]
    assert StageCache(tmp / "stages", trust=True).get(KEY) is not None


# ------------------------------------------------------------------ the embedding cache
NS = {"model": "m", "max_length": 8}
TEXTS = ["apple pie", "car repair", "rust"]


def _vectors(texts: list[str]) -> np.ndarray:
    """The stand-in encoder: a deterministic vector per text."""
    return np.array([[len(t), sum(map(ord, t)) % 97, t.count("r")] for t in texts], dtype=np.float32)


def _embed(cache, texts: list[str]) -> tuple[np.ndarray, int]:
    """Vectors of ``texts`` through ``cache`` (misses computed and added); returns them and how many were computed."""
    from toolkit.jobs.embed_cache import text_key

    keys = [text_key(t) for t in texts]
    found = cache.lookup(keys)[0]
    missing = [t for t, f in zip(texts, found) if not f]
    if missing:
        cache.add([text_key(t) for t in missing], _vectors(missing))
    return cache.lookup(keys)[1], len(missing)


def _embedding_damaged(damage: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.jobs.embed_cache import EmbeddingCache, text_key

        cache = EmbeddingCache(tmp / "emb", NS)
        clean, computed = _embed(cache, TEXTS)
        assert computed == 3
        (part,) = cache.folder.glob("part-*.npz")
        if damage == "truncated":
            _truncate(part)
        elif damage == "bit-flipped":
            data = bytearray(part.read_bytes())
            data[data.find(np.float32(len("apple pie")).tobytes())] ^= 0x40  # a vector's value, not the zip's
            part.write_bytes(bytes(data))
        elif damage == "wrong-key":  # a part of another model's namespace, checksum and all
            other = EmbeddingCache(tmp / "emb", {"model": "other", "max_length": 8})
            other.add([text_key("rust")], np.full((1, 3), 5.0, dtype=np.float32))
            part.unlink()
            shutil.copy(next(other.folder.glob("part-*.npz")), part)
        else:  # the folder's index (namespace.json) says another namespace
            (cache.folder / "namespace.json").write_text('{"model": "planted"}')
        with said() as messages:
            again = EmbeddingCache(tmp / "emb", NS)
            got, computed = _embed(again, TEXTS)
        _one_damaged(messages, cache.folder)
        assert np.array_equal(got, clean)
        assert computed == (0 if damage == "index" else 3)  # a damaged index alone loses no vector

    return run


def _embedding_foreign(how: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.jobs.embed_cache import EmbeddingCache, text_key

        planted = EmbeddingCache(tmp / "emb", NS)
        planted.add([text_key("apple pie")], np.full((1, 3), 7.0, dtype=np.float32))  # a planted vector
        _foreign(how)(planted.folder)
        with said() as messages:
            cache = EmbeddingCache(tmp / "emb", NS)
            got, computed = _embed(cache, TEXTS)
        assert len(messages) == 1 and "trust_cache=True" in messages[0] and "is not read" in messages[0], messages
        assert computed == 3 and np.array_equal(got, _vectors(TEXTS)) and len(list(planted.folder.glob("*.npz"))) == 1
        with said() as messages:
            trusted = EmbeddingCache(tmp / "emb", NS, trust=True)
        assert messages == [] and trusted.lookup([text_key("apple pie")])[1].tolist() == [[7.0, 7.0, 7.0]]

    return run


# ------------------------------------------------------------------ the ONNX export cache
def _model(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"name": name}))
    return folder


class _Exporter:
    """A stand-in for the ONNX export: writes bytes that depend on the model folder's files; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def export(self, model_dir: Path, out_dir: Path, target: Path) -> None:
        self.calls += 1
        target.write_bytes(b"ONNX " + (model_dir / "config.json").read_bytes() * 50)

    def quantize(self, fp32: Path, target: Path, out_dir: Path) -> None:
        target.write_bytes(b"INT8 " + fp32.read_bytes()[:40])


def _onnx(model: Path, root: Path, ex: _Exporter, trust: bool | None = None) -> tuple[bytes, bool]:
    from toolkit.reranking.onnx_cache import cached_onnx

    with cached_onnx(model, root, False, ex.export, ex.quantize, 17, trust=trust) as (path, cached):
        return path.read_bytes(), cached


def _onnx_damaged(damage: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.models import model_fingerprint

        model, root, ex = _model(tmp / "model", "a"), tmp / "onnx", _Exporter()
        clean, _ = _onnx(model, root, ex)
        folder = root / model_fingerprint(str(model))[:24]
        if damage == "truncated":
            _truncate(folder / "model.onnx")
        elif damage == "bit-flipped":
            _flip(folder / "model.onnx")
        elif damage == "wrong-key":  # another model's export and record copied in
            other = _model(tmp / "other", "b")
            _onnx(other, root, ex)
            theirs = root / model_fingerprint(str(other))[:24]
            for n in ("model.onnx", "entry.json"):
                shutil.copy(theirs / n, folder / n)
        else:  # the record (entry.json) torn
            (folder / "entry.json").write_text('{"key": ')
        calls = ex.calls
        with said() as messages:
            got, cached = _onnx(model, root, ex)
        _one_damaged(messages, root)
        assert got == clean and cached and ex.calls == calls + 1  # exported again, into the cache

    return run


def _onnx_foreign(how: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        model, root, ex = _model(tmp / "model", "a"), tmp / "onnx", _Exporter()
        clean, _ = _onnx(model, root, ex)
        _foreign(how)(root)
        with said() as messages:
            got, cached = _onnx(model, root, ex)
        assert len(messages) == 1 and "trust_cache=True" in messages[0] and str(root) in messages[0], messages
        assert got == clean and not cached and ex.calls == 2  # exported for this run only
        with said() as messages:
            got, cached = _onnx(model, root, ex, trust=True)
        assert messages == [] and cached and ex.calls == 2

    return run


# ------------------------------------------------------------------ the judgments cache
def _judge_inputs(tmp: Path, server) -> str:
    from judge_server import write_candidates

    queries = {}
    for q in (1, 2):
        docs = []
        for i in range(3):
            d = f"D{q}x{i}"
            server.labels[d] = (q + i) % 4
            docs.append((d, f"[doc {d}] passage {i} for topic {q}."))
        queries[f"q{q}"] = docs
    return write_candidates(tmp / "cand.json", queries)


def _judge(cand: str, server, cache: Path, **kw):
    import toolkit as ts

    return ts.judge(candidates=cand, model="test-judge", endpoint=server.url, depth=3, cache=cache, **kw)


def _rows(cache: Path) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(cache / "judgments.sqlite")) as db:
        return db.execute("SELECT key, response FROM answers ORDER BY key").fetchall()


def _judgments_damaged(damage: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from judge_server import JudgeServer

        server = JudgeServer()
        try:
            cand, cache = _judge_inputs(tmp, server), tmp / "judgments"
            clean = _judge(cand, server, cache).qrels.values.tolist()
            assert server.total == 6
            db_file = cache / "judgments.sqlite"
            (key, response), (key2, _) = _rows(cache)[:2]
            with contextlib.closing(sqlite3.connect(db_file)) as db:
                if damage == "truncated":
                    db.execute("UPDATE answers SET response = ? WHERE key = ?", (response[: len(response) // 2], key))
                elif damage == "bit-flipped":  # "score: 1" read as "score: 0", say
                    flipped = response[:-1] + chr(ord(response[-1]) ^ 0x01)
                    db.execute("UPDATE answers SET response = ? WHERE key = ?", (flipped, key))
                elif damage == "wrong-key":  # another pair's row, checksum and all, copied under this key
                    cols = "model, model_sha, prompt_sha, query_sha, passage_sha, response, created, entry_sha, request_sha"
                    db.execute("DELETE FROM answers WHERE key = ?", (key,))
                    db.execute(f"INSERT INTO answers SELECT ?, {cols} FROM answers WHERE key = ?", (key, key2))
                db.commit()
            if damage == "database":
                db_file.write_bytes(b"garbage, not SQLite" * 300)
            with said() as messages:
                again = _judge(cand, server, cache).qrels.values.tolist()
            _one_damaged(messages, cache)
            assert again == clean
            assert server.total == (12 if damage == "database" else 7)  # only what was set aside is asked again
        finally:
            server.close()

    return run


def _judgments_planted_shared_folder(tmp: Path) -> None:
    """A judgments cache planted by another user in a shared folder, with a valid checksum and
    every answer "0", is not read by ``twostage judge`` (one warning naming --trust-cache); with --trust-cache it
    is."""
    _require_root("a judgments cache planted by another user")
    from judge_server import JudgeServer

    from toolkit.data.trec_io import read_qrels
    from toolkit.llm.answer_cache import entry_sha

    server = JudgeServer()
    try:
        cand = _judge_inputs(tmp, server)
        shared = tmp / "shared"
        shared.mkdir()
        os.chmod(shared, 0o1777)  # /tmp-like: anyone may create a folder there
        cache = shared / "judgments"
        clean = _judge(cand, server, tmp / "own").qrels
        cache.mkdir()  # the planter's cache: twostage's own answers, each made "0" with a valid checksum
        shutil.copy(tmp / "own" / "judgments.sqlite", cache / "judgments.sqlite")
        with contextlib.closing(sqlite3.connect(cache / "judgments.sqlite")) as db:
            for key, response in _rows(tmp / "own"):
                parts = db.execute(
                    "SELECT model_sha, prompt_sha, query_sha, passage_sha, request_sha FROM answers WHERE key = ?",
                    (key,),
                ).fetchone()
                lie = response.rsplit(":", 1)[0] + ": 0"
                db.execute(
                    "UPDATE answers SET response = ?, entry_sha = ? WHERE key = ?",
                    (lie, entry_sha(key, parts, lie), key),
                )
            db.commit()
        for p in [cache, *cache.iterdir()]:
            os.chown(p, 65534, 65534)
        args = ["judge", "--candidates", cand, "--depth", "3", "--endpoint", server.url, "--model", "test-judge"]
        args += ["--cache", str(cache), "--no-progress"]
        asked = server.total
        res = cli(*args, "--out", str(tmp / "a.qrels"))
        assert res.exit_code == 0, res.output
        lines = [ln for ln in res.output.splitlines() if "twostage: warning:" in ln]
        assert len(lines) == 1 and "--trust-cache" in lines[0] and "uid 65534" in lines[0], res.output
        got = read_qrels(tmp / "a.qrels").frame.values.tolist()
        assert got == clean.values.tolist() and server.total == asked + 6  # every pair asked, none planted read
        res = cli(*args, "--trust-cache", "--out", str(tmp / "b.qrels"))
        assert res.exit_code == 0 and "twostage: warning:" not in res.output, res.output
        trusted = read_qrels(tmp / "b.qrels").frame
        assert set(trusted["relevance"]) == {0} and server.total == asked + 6  # the trusted cache answered all
    finally:
        server.close()


def _judgments_foreign(how: str) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        from toolkit.llm.answer_cache import JudgmentCache

        cache = JudgmentCache(tmp / "judgments")
        cache.put("m", "p", "q", "d", "##final score: 2")
        cache.close()
        _foreign(how)(tmp / "judgments")
        with said() as messages:
            untrusted = JudgmentCache(tmp / "judgments")
            assert untrusted.get("m", "p", "q", "d") is None and not untrusted.usable
            untrusted.put("m", "p", "q", "d", "##final score: 3")  # stored nowhere
        assert len(messages) == 1 and "trust_cache=True" in messages[0], messages
        trusted = JudgmentCache(tmp / "judgments", trust=True)
        assert trusted.get("m", "p", "q", "d") == "##final score: 2"
        trusted.close()

    return run


# ------------------------------------------------------------------ sidecars
def _run_sidecar_mismatch(tmp: Path) -> None:
    import toolkit as ts
    from toolkit.data.trec_io import sha256_file, write_json, write_run

    path = tmp / "rr.trec"
    write_run(RUN, path)
    write_json(str(path) + ".meta.json", {"depth": 20, "run": {"path": str(path), "sha256": "0" * 64}})
    with said() as messages:
        run = ts.Run.read(path)
    assert run.meta == {} and len(messages) == 1 and f"ignoring the sidecar {path}.meta.json" in messages[0]
    write_json(str(path) + ".meta.json", {"depth": 20, "run": {"path": str(path), "sha256": sha256_file(path)}})
    with said() as messages:
        assert ts.Run.read(path).meta["depth"] == 20 and messages == []


def _judge_sidecar_other_qrels(tmp: Path) -> None:
    """A judge's sidecar recording another qrels checksum (another job's, or qrels edited since) is refused:
    its judge and calibration are not attributed to these labels; with the matching checksum they are."""
    import toolkit as ts
    from toolkit.data.trec_io import sha256_file, write_json

    human, judged = tmp / "human.qrels", tmp / "judge.qrels"
    human.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    judged.write_text("q1 0 d1 2\nq1 0 d3 1\n")
    meta = {"kind": "twostage judge", "judge": {"backend": "openai", "model": "m"}, "calibration": {"kappa": 0.9}}
    write_json(str(judged) + ".meta.json", meta | {"qrels": {"path": str(judged), "sha256": "f" * 64}})
    with said() as messages:
        merged = ts.merge_qrels(human, judged)
    source = merged.origin.sources["judge"]
    assert "judge" not in source and "calibration" not in source, source
    assert len(messages) == 1 and "ignoring the judge's sidecar" in messages[0] and "f" * 12 in messages[0]
    write_json(str(judged) + ".meta.json", meta | {"qrels": {"path": str(judged), "sha256": sha256_file(judged)}})
    with said() as messages:
        merged = ts.merge_qrels(human, judged)
    assert merged.origin.sources["judge"]["calibration"] == {"kappa": 0.9} and messages == []


def _twostage_under_home(home: str, *args: str) -> subprocess.CompletedProcess:
    """``twostage ARGS`` in a process with ``HOME=home`` and no ``TWOSTAGE_CACHE``: every default cache folder is
    under ``home``."""
    env = {k: v for k, v in os.environ.items() if k != "TWOSTAGE_CACHE"} | {"HOME": home, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli", *args], env=env, capture_output=True, text=True, check=False, timeout=300
    )


def _one_cache_error(said: str, code: int, cache: str, origin: str, fix: str) -> str:
    """Exactly one ``Error:`` line and no traceback in ``said`` (exit status ``code``): the line names the cache
    folder ``cache``, where its setting came from (``origin``), the system's reason and the fix."""
    lines = [ln for ln in said.splitlines() if ln.startswith("Error:")]
    assert code == 1 and "Traceback" not in said and len(lines) == 1, (code, said)
    line = lines[0]
    assert line.startswith(f"Error: the {cache} cannot be used: no such file or folder at /proc/1/.cache; "), line
    assert origin in line and line.endswith(fix), line
    return line


def _cache_under_home_proc_1(tmp: Path) -> None:
    """``HOME=/proc/1`` and no ``TWOSTAGE_CACHE``: the default caches lie under a folder the system cannot make
    (ENOENT; before: a ``FileNotFoundError`` traceback, then one warning and the work done without the cache).
    ``twostage judge`` (the judgments cache) and ``twostage rerank`` (the embedding cache) each end with exactly
    one ``Error:`` line naming the cache folder under ``/proc/1``, its setting (the default under ``HOME``), the
    reason and the fix (the command's flag to run without it, ``--cache DIR``/``--embedding-cache DIR`` or
    ``TWOSTAGE_CACHE=DIR``), exit 1, no traceback; the previous ``--out`` stays byte for byte with nothing beside
    it. The fix works: with ``--no-cache``/``--no-embedding-cache`` the same qrels and run as with a cache of one's
    own (``judge`` in a process of its own, ``rerank`` in this one with the environment changed for the call)."""
    from judge_server import JudgeServer

    from toolkit.models import packaged_minilm

    home = HOME_ORIGIN
    previous = b"q1 0 D1x0 3\n"  # an earlier job's output, kept as it was
    server = JudgeServer()
    try:
        cand = _judge_inputs(tmp, server)
        args = ["judge", "--candidates", cand, "--depth", "3", "--endpoint", server.url, "--model", "test-judge"]
        args += ["--no-progress"]
        assert cli(*args, "--cache", str(tmp / "own"), "--out", str(tmp / "own.qrels")).exit_code == 0
        out = tmp / "judged" / "home.qrels"
        out.parent.mkdir()
        out.write_bytes(previous)
        asked = server.total
        proc = _twostage_under_home("/proc/1", *args, "--out", str(out))
        assert server.total == asked  # refused before any pair is asked
        _one_cache_error(
            proc.stderr,
            proc.returncode,
            f"judgments cache /proc/1/.cache/twostage/judgments {home}",
            home,
            "run without it (--no-cache), or choose a folder you can write: --cache DIR or TWOSTAGE_CACHE=DIR",
        )
        assert out.read_bytes() == previous and sorted(p.name for p in out.parent.iterdir()) == ["home.qrels"]
        fixed = _twostage_under_home("/proc/1", *args, "--no-cache", "--out", str(out))
    finally:
        server.close()
    assert fixed.returncode == 0 and "Error:" not in fixed.stderr, fixed.stderr
    assert out.read_bytes() == (tmp / "own.qrels").read_bytes()
    model = packaged_minilm()
    if model is None:
        lacking("the all-MiniLM-L6-v2 model package is not installed")
    args = ["rerank", "--candidates", cand, "--model", str(model), "--device", "cpu", "--depth", "3", "--tag", "rr"]
    assert cli(*args, "--embedding-cache", str(tmp / "emb"), "--out", str(tmp / "own.trec")).exit_code == 0
    out = tmp / "reranked" / "home.trec"
    out.parent.mkdir()
    out.write_bytes(b"q1 Q0 D1x0 1 1.0 previous\n")
    env = {"HOME": "/proc/1", "TWOSTAGE_CACHE": None}
    res = cli(*args, "--out", str(out), env=env)  # no torch import again
    said = res.output.replace("\r", "\n") + (res.stderr if res.stderr not in res.output else "")
    _one_cache_error(
        said,
        res.exit_code,
        f"embedding cache /proc/1/.cache/twostage/embeddings {home}",
        home,
        "run without it (--no-embedding-cache), or choose a folder you can write: --embedding-cache DIR or "
        "TWOSTAGE_CACHE=DIR",
    )
    assert out.read_bytes() == b"q1 Q0 D1x0 1 1.0 previous\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["home.trec"]
    res = cli(*args, "--no-embedding-cache", "--out", str(out), env=env)
    assert res.exit_code == 0 and "Error:" not in res.output, res.output
    assert out.read_bytes() == (tmp / "own.trec").read_bytes()


@contextlib.contextmanager
def _home(home: str) -> Iterator[None]:
    """``HOME=home`` and no ``TWOSTAGE_CACHE`` in this process for the block (library calls)."""
    saved = {k: os.environ.get(k) for k in ("HOME", "TWOSTAGE_CACHE")}
    os.environ["HOME"] = home
    os.environ.pop("TWOSTAGE_CACHE", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


HOME_ORIGIN = "(the default: ~/.cache/twostage with HOME=/proc/1, TWOSTAGE_CACHE not set)"


def _stage_cache_under_home_proc_1(tmp: Path) -> None:
    """``experiment run`` without ``--cache-dir`` under ``HOME=/proc/1``: one ``Error:`` line naming the stage
    cache under ``/proc/1`` and ``--cache-dir DIR``/``TWOSTAGE_CACHE=DIR`` (no option turns it off), said before
    anything else is read (the index named does not even exist); ``--out`` is not made, nothing is left beside it."""
    import textwrap

    from samples import write_tiny

    write_tiny(tmp)
    exp = tmp / "exp.yaml"
    spec = f"""\
        name: tiny
        topics: {tmp / "topics.tsv"}
        qrels: {tmp / "qrels.txt"}
        index: {{path: {tmp / "no-index"}}}
        hits: 10
        stages:
          bm25: {{type: bm25}}
        """
    exp.write_text(textwrap.dedent(spec))
    before = sorted(p.name for p in tmp.iterdir())
    res = cli("experiment", "run", str(exp), "--out", str(tmp / "exp"), env={"HOME": "/proc/1", "TWOSTAGE_CACHE": None})
    said = res.output + (res.stderr if res.stderr not in res.output else "")
    _one_cache_error(
        said,
        res.exit_code,
        f"stage cache /proc/1/.cache/twostage/stages {HOME_ORIGIN}",
        HOME_ORIGIN,
        "; choose a folder you can write: --cache-dir DIR or TWOSTAGE_CACHE=DIR",
    )
    assert sorted(p.name for p in tmp.iterdir()) == before


def _derived_cache_under_home_proc_1(tmp: Path) -> None:
    """``index --collection corpus.jsonl`` under ``HOME=/proc/1``: the corpus is normalised into the derived-data
    cache first, which cannot be made: one ``Error:`` line naming it and ``TWOSTAGE_CACHE=DIR`` (before: a line
    naming a file under it with "give a path whose folders exist", a path the user never gave); no index, lock or
    temporary folder is left beside ``--out``."""
    from samples import write_tiny_corpus

    corpus, _ = write_tiny_corpus(tmp)
    before = sorted(p.name for p in tmp.iterdir())
    env = {"HOME": "/proc/1", "TWOSTAGE_CACHE": None}
    res = cli("index", "--collection", str(corpus), "--out", str(tmp / "index"), "--no-progress", env=env)
    said = res.output + (res.stderr if res.stderr not in res.output else "")
    _one_cache_error(
        said,
        res.exit_code,
        f"derived-data cache /proc/1/.cache/twostage/derived {HOME_ORIGIN}",
        HOME_ORIGIN,
        "; choose a folder you can write: TWOSTAGE_CACHE=DIR",
    )
    assert sorted(p.name for p in tmp.iterdir()) == before


def _checksum_cache_under_home_proc_1(tmp: Path) -> None:
    """An index's checksum is remembered in ``$TWOSTAGE_CACHE/checksums``; under ``HOME=/proc/1`` that folder
    cannot be made: ``index_checksum`` raises one ``CacheUnusableError`` naming it (before: nothing said, the
    cache silently not kept); with a folder of one's own, the checksum is the files' sha256 and is remembered."""
    from toolkit.errors import CacheUnusableError
    from toolkit.retrieval.indexing import folder_sha256, index_checksum

    index = tmp / "index"
    index.mkdir()
    (index / "segments_1").write_bytes(b"a Lucene segment of its own\n")
    with _home("/proc/1"), pytest.raises(CacheUnusableError) as raised:
        index_checksum(index)
    assert str(raised.value) == (
        f"the index checksum cache /proc/1/.cache/twostage/checksums {HOME_ORIGIN} cannot be used: no such file or "
        "folder at /proc/1/.cache; choose a folder you can write: TWOSTAGE_CACHE=DIR"
    )
    (index / "segments_2").write_bytes(b"another segment\n")  # another signature: not remembered in this process
    assert index_checksum(index) == folder_sha256(index)


def _trust_cache_offered(tmp: Path) -> None:
    """Every command that reads one of these caches takes --trust-cache."""
    for command in (["experiment", "run"], ["rerank"], ["judge"]):
        res = cli(*command, "--help")
        assert res.exit_code == 0 and "--trust-cache" in res.output, command


DAMAGES = ("truncated", "bit-flipped", "wrong-key")
CASES = [
    *(Case("store", f"stage-{d}-entry", _stage_damaged(d)) for d in DAMAGES),
    Case("store", "stage-damaged-index", _stage_damaged("index")),
    *(Case("store", f"stage-{h}-folder", _stage_foreign(h)) for h in FOREIGN),
    Case("store", "stage-other-uid-entry", _stage_foreign_entry),
    *(Case("store", f"embedding-{d}-entry", _embedding_damaged(d)) for d in DAMAGES),
    Case("store", "embedding-damaged-index", _embedding_damaged("index")),
    *(Case("store", f"embedding-{h}-folder", _embedding_foreign(h)) for h in FOREIGN),
    *(Case("store", f"onnx-{d}-entry", _onnx_damaged(d)) for d in DAMAGES),
    Case("store", "onnx-damaged-index", _onnx_damaged("index")),
    *(Case("store", f"onnx-{h}-folder", _onnx_foreign(h)) for h in FOREIGN),
    *(Case("store", f"judgments-{d}-entry", _judgments_damaged(d)) for d in DAMAGES),
    Case("store", "judgments-damaged-database", _judgments_damaged("database")),
    *(Case("store", f"judgments-{h}-folder", _judgments_foreign(h)) for h in FOREIGN),
    Case("store", "judgments-planted-in-shared-folder", _judgments_planted_shared_folder),
    Case("store", "run-sidecar-of-another-run", _run_sidecar_mismatch),
    Case("store", "judge-sidecar-of-other-qrels", _judge_sidecar_other_qrels),
    Case("store", "trust-cache-offered", _trust_cache_offered),
    Case("store", "cache-under-home-proc-1", _cache_under_home_proc_1),
    Case("store", "stage-cache-under-home-proc-1", _stage_cache_under_home_proc_1),
    Case("store", "derived-cache-under-home-proc-1", _derived_cache_under_home_proc_1),
    Case("store", "checksum-cache-under-home-proc-1", _checksum_cache_under_home_proc_1),
]
