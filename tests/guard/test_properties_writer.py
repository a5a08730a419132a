"""Every OS error a write or a cache can meet, at every call the write makes to the system (property tests).

The input language of the writer door (``toolkit.guard.writer``, with ``trec_io.atomic_write`` and the cache
store): what the file system answers to each call a write makes. Each example makes one call of the write (the
k-th ``os.replace``, ``os.rename``, ``os.mkdir``, ``os.fsync`` or file-creating ``os.open`` on a path under the
test's folder, counted on a clean run) fail with one errno of ``FS_ERRNOS`` (ENOSPC, EDQUOT, EFBIG, EROFS,
EACCES, EPERM, ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG), raised as the system raises it (naming the file it was
called with, or none for ``fsync``). A command writing an output says it in exactly one ``Error:`` line naming
the path the user gave (never a temporary file), with no traceback, and leaves the previous output byte for byte
and nothing beside it. A command using a cache (``judge``'s judgments, ``rerank``'s listwise answers, embeddings
and ONNX exports, ``experiment run``'s stages) whose calls under the cache folder fail so says it in exactly one
``Error:`` line naming the cache folder as it was set (the option, or ``$TWOSTAGE_CACHE``), the reason and the
fix, with no traceback, and leaves the previous output byte for byte and nothing beside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from doors import assert_one_error, cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from samples import write_tiny

from toolkit.guard.preflight import FS_ERRNOS, fs_words, os_error_message
from toolkit.guard.writer import TEMP

ERRNOS = (
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.ELOOP,
    errno.ENAMETOOLONG,
)
CALLS = ("replace", "rename", "mkdir", "fsync", "open")


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_errno_of_the_issue_is_known_and_said_in_words():
    assert set(ERRNOS) <= FS_ERRNOS
    for code in ERRNOS:
        said = os_error_message(OSError(code, os.strerror(code), "/data/out.trec"))
        assert said is not None and said.startswith("/data/out.trec: ") and "; " in said, said


class Inject:
    """Count the calls of ``os.<name>`` on paths under ``root`` (``code=None``), or make the ``k``-th of them
    raise ``OSError(code)`` as the system would (naming the file it was called with)."""

    def __init__(self, root: Path, name: str, code: int | None = None, k: int = 0) -> None:
        self.root, self.name, self.code, self.k = str(root), name, code, k
        self.calls = 0
        self.fired = False
        self.real = getattr(os, name)

    def _path(self, args: tuple, kwargs: dict) -> str | None:
        if self.name == "fsync":
            try:
                return os.readlink(f"/proc/self/fd/{args[0] if not hasattr(args[0], 'fileno') else args[0].fileno()}")
            except OSError:
                return None
        if self.name == "open":
            flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
            if not flags & os.O_CREAT:
                return None  # reading: not a write
        path = args[0]
        if kwargs.get("dir_fd") is not None or kwargs.get("src_dir_fd") is not None:
            return None
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None
        if self.name == "mkdir" and os.path.lexists(path):
            return None  # the system says EEXIST first, whatever else is wrong
        return os.path.abspath(os.fsdecode(path))

    def __call__(self, *args, **kwargs):
        path = self._path(args, kwargs)
        if path is not None and (path + os.sep).startswith(self.root + os.sep):
            self.calls += 1
            if self.code is not None and self.calls == self.k:
                self.fired = True
                if self.name == "fsync":
                    raise OSError(self.code, os.strerror(self.code))
                if self.name in ("replace", "rename"):
                    raise OSError(self.code, os.strerror(self.code), os.fsdecode(args[0]), None, os.fsdecode(args[1]))
                raise OSError(self.code, os.strerror(self.code), os.fsdecode(args[0]))
        return self.real(*args, **kwargs)

    @contextlib.contextmanager
    def active(self) -> Iterator[Inject]:
        with mock.patch.object(os, self.name, self):
            yield self


def _entries(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ writes: one Error: line, the previous output kept
def _fuse(root: Path):
    return cli("fuse", str(root / "first.trec"), str(root / "rr.trec"), "--out", str(root / "out" / "fused.trec"))


def _eval(root: Path):
    return cli("eval", str(root / "qrels.txt"), str(root / "rr.trec"), "--out", str(root / "out" / "eval.txt"))


def _compare(root: Path):
    runs = [str(root / "first.trec"), str(root / "rr.trec")]
    return cli(
        "compare",
        "--qrels",
        str(root / "qrels.txt"),
        "--permutations",
        "20",
        "--bootstrap",
        "20",
        *runs,
        "--out",
        str(root / "out" / "cmp"),
    )


def _compare_without_swap(root: Path):
    """As on a file system without ``renameat2(RENAME_EXCHANGE)``: the old set is moved aside first."""
    with mock.patch("toolkit.guard.writer._exchange", return_value=False):
        return _compare(root)


#: (command, the path the user gave as --out, relative to the test's folder, examples)
WRITES: dict[str, tuple[Callable, str, int]] = {
    "fuse": (_fuse, "out/fused.trec", 25),
    "eval": (_eval, "out/eval.txt", 25),
    "compare": (_compare, "out/cmp", 12),  # a second a run: fewer examples
    "compare-moving-the-old-set-aside": (_compare_without_swap, "out/cmp", 12),
}


@contextlib.contextmanager
def _written(command: Callable) -> Iterator[tuple[Path, dict[str, int], dict[str, bytes]]]:
    """A folder holding the inputs and a previous output; the calls a rewrite makes, by function; the output's
    bytes."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        write_tiny(root)
        assert command(root).exit_code == 0
        counts = {}
        for name in CALLS:
            with Inject(root / "out", name).active() as counter:
                res = command(root)
            assert res.exit_code == 0, res.output
            counts[name] = counter.calls
        yield root, counts, _snapshot(root / "out")


@pytest.mark.parametrize("entry", sorted(WRITES))
def test_every_os_error_of_a_write_is_one_error_line_and_the_previous_output_stays(entry):
    command, out, examples = WRITES[entry]
    with _written(command) as (root, counts, before):
        calls = [(name, k) for name in CALLS for k in range(1, counts[name] + 1)]
        assert {name for name, _ in calls} >= {"replace", "open", "fsync"}, counts

        @_settings(examples)
        @given(code=st.sampled_from(ERRNOS), call=st.sampled_from(calls))
        def one(code: int, call: tuple[str, int]) -> None:
            name, k = call
            with Inject(root / "out", name, code, k).active() as inject:
                res = command(root)
            assert inject.fired, (name, k)
            line = assert_one_error(res, str(root / out), code=1)
            assert fs_words(OSError(code, os.strerror(code))) in line, line
            assert ".tmp" not in line and ".twostage-temporary" not in line, line
            assert _snapshot(root / "out") == before
            left = [
                p.name
                for p in (root / "out").rglob("*")
                if TEMP.match(p.name) or p.name.endswith((".tmp", ".previous"))
            ]
            assert not left, left

        one()


# ------------------------------------------------------------------ caches: one Error: line naming the cache folder
WORDS = ["apple", "pie", "car", "repair", "engine", "topic", "passage", "doc", "for"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Iterator[Path]:
    """A folder holding what the commands read: candidates judged by a local judge and ranked by a local listwise
    server (their URLs in ``servers.json``), a tiny bi-encoder, and a six-document Lucene index with an experiment
    file over it."""
    import json
    import textwrap

    from judge_server import JudgeServer, write_candidates
    from listwise_server import ListwiseServer
    from samples import write_tiny_corpus
    from tiny_models import save_tiny_bi_encoder

    root = tmp_path_factory.mktemp("cache-inputs")
    judge = JudgeServer()
    queries = {}
    for q in (1, 2):
        docs = []
        for i in range(3):
            d = f"D{q}x{i}"
            judge.labels[d] = (q + i) % 4
            docs.append((d, f"[doc {d}] doc={d} passage {i} for topic {q}"))
        queries[f"q{q}"] = docs
    lists = ListwiseServer({f"D{q}x{i}": float(i) for q in (1, 2) for i in range(3)})
    try:
        write_candidates(root / "cand.json", queries)
        (root / "servers.json").write_text(json.dumps({"judge": judge.url, "listwise": lists.url}))
        save_tiny_bi_encoder(root / "model", WORDS, seed=0)
        corpus, topics = write_tiny_corpus(root)
        (root / "qrels.txt").write_text("1 0 d1 1\n2 0 d3 1\n3 0 d5 1\n")
        res = cli("index", "--collection", str(corpus), "--out", str(root / "index"), "--no-progress")
        assert res.exit_code == 0, res.output
        spec = f"""\
            name: tiny
            topics: {topics}
            qrels: {root / "qrels.txt"}
            index: {{path: {root / "index"}}}
            hits: 10
            stages:
              bm25: {{type: bm25}}
            """
        (root / "exp.yaml").write_text(textwrap.dedent(spec))
        yield root
    finally:
        judge.close()
        lists.close()


def _url(root: Path, server: str) -> str:
    import json

    return json.loads((root / "servers.json").read_text())[server]


def _judge(root: Path, cache: Path, out: Path):
    args = ["judge", "--candidates", str(root / "cand.json"), "--endpoint", _url(root, "judge"), "--model", "j"]
    return cli(*args, "--depth", "3", "--no-progress", "--cache", str(cache), "--out", str(out))


def _listwise(root: Path, cache: Path, out: Path):
    args = ["rerank", "--candidates", str(root / "cand.json"), "--backend", "listwise", "--model", "r"]
    args += ["--endpoint", _url(root, "listwise"), "--depth", "3", "--window", "2", "--stride", "1"]
    return cli(*args, "--no-progress", "--answer-cache", str(cache), "--out", str(out))


def _bi_encoder(root: Path, *extra: str) -> list[str]:
    args = ["rerank", "--candidates", str(root / "cand.json"), "--model", str(root / "model"), "--device", "cpu"]
    return [*args, "--depth", "3", "--tag", "rr", *extra]


def _embedding(root: Path, cache: Path, out: Path):
    return cli(*_bi_encoder(root, "--embedding-cache", str(cache), "--out", str(out)))


def _onnx(root: Path, cache: Path, out: Path):
    """The ONNX export cache has no option of its own: its folder is ``$TWOSTAGE_CACHE/onnx``."""
    args = _bi_encoder(root, "--backend", "onnx", "--no-embedding-cache", "--out", str(out))
    return cli(*args, env={"TWOSTAGE_CACHE": str(cache)})


def _stage(root: Path, cache: Path, out: Path):
    return cli("experiment", "run", str(root / "exp.yaml"), "--cache-dir", str(cache), "--out", str(out))


#: cache -> (the command, given the inputs, a cache folder and --out; the file or folder of --out; the folder the
#: Error: line names, given the cache folder; how the line says the setting and the fix; examples)
CACHES: dict[str, tuple[Callable, str, Callable[[Path], Path], tuple[str, str], int]] = {
    "judgments": (
        _judge,
        "judged.qrels",
        lambda c: c,
        ("(from --cache DIR)", "run without it (--no-cache), or choose a folder you can write: --cache DIR"),
        25,
    ),
    "listwise-answers": (
        _listwise,
        "listwise.trec",
        lambda c: c,
        ("(from --answer-cache DIR)", "run without it (--no-answer-cache), or choose a folder you can write"),
        25,
    ),
    "embedding": (
        _embedding,
        "reranked.trec",
        lambda c: c,
        ("(from --embedding-cache DIR)", "run without it (--no-embedding-cache), or choose a folder you can write"),
        25,
    ),
    "onnx": (
        _onnx,
        "onnx.trec",
        lambda c: c / "onnx",
        ("(under TWOSTAGE_CACHE=", "a folder you can write: TWOSTAGE_CACHE=DIR"),
        12,
    ),
    "stage": (
        _stage,
        "experiment",
        lambda c: c,
        ("(from --cache-dir DIR)", "choose a folder you can write: --cache-dir DIR"),
        15,
    ),
}


@pytest.mark.parametrize("entry", sorted(CACHES))
def test_every_os_error_of_a_cache_is_one_error_line_and_the_previous_output_stays(inputs, entry):
    """Each example: a fresh cache folder, one call the command makes under it failing with one errno. The command
    says it in one ``Error:`` line naming the cache folder as it was set, the setting, the reason and the fix;
    no traceback; the previous output byte for byte, nothing beside it."""
    command, out_name, named, (origin, fix), examples = CACHES[entry]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        out = root / "out" / out_name
        out.parent.mkdir()
        counts = {}
        for name in CALLS:  # each on a fresh folder, as each example gets; the last run's output is the previous
            with Inject(root / f"counted-{name}", name).active() as counter:
                res = command(inputs, root / f"counted-{name}" / "cache", out)
            assert res.exit_code == 0, res.output
            counts[name] = counter.calls
        before, entries = _snapshot(root / "out"), _entries(root / "out")
        assert before, "no previous output"
        calls = [(name, k) for name in CALLS for k in range(1, counts[name] + 1)]
        assert {name for name, _ in calls} >= {"mkdir"}, counts
        tries = iter(range(10**6))

        @_settings(examples)
        @given(code=st.sampled_from(ERRNOS), call=st.sampled_from(calls))
        def one(code: int, call: tuple[str, int]) -> None:
            name, k = call
            cache = root / f"try{next(tries)}" / "cache"
            with Inject(cache.parent, name, code, k).active() as inject:
                res = command(inputs, cache, out)
            assert inject.fired, (name, k)
            line = assert_one_error(res, f" {named(cache)} (", code=1)
            assert line.startswith("Error: the "), line
            assert f"cannot be used: {fs_words(OSError(code, os.strerror(code)))}" in line, line
            assert origin in line and fix in line, line
            assert _snapshot(root / "out") == before
            assert _entries(root / "out") == entries  # no temporary file or folder left beside it

        one()
