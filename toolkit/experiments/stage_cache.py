"""The stage cache: every stage's run kept under a key made of its inputs' content and its parameters.

A key is the SHA-256 of a canonical JSON of the stage type, its parameters and the checksums of
what it reads (index, topics, upstream run, model files), so a renamed topics file with the same
queries hits the cache and an edited one misses it (PyTerrier's ``save_dir`` keys by name and
serves stale runs when topics change). An entry is a folder ``<key>/`` holding ``run.trec`` and
``entry.json``; it is built in a temporary sibling and renamed into place in one step, so a
killed experiment leaves either a whole entry or none, and the next run recomputes only what
is missing. Experiments that share a stage share its entry.

An entry is checked whenever it is read: ``entry.json`` must be a JSON object naming the key it is stored
under, and ``run.trec`` must have the sha256 ``entry.json`` records. An entry that fails (damaged, truncated,
edited, copied under another key) is reported with a warning naming the file, moved aside into
``<cache>/damaged/`` and computed again. A cache folder that cannot be made, read or written (read-only, full,
over quota, no permission: ``FS_ERRNOS``) ends the experiment with one ``CacheUnusableError`` naming the folder
as it was set (``--cache-dir``, ``$TWOSTAGE_CACHE`` or the default) and the fix; ``probe`` says it before any
stage runs, and nothing is written into ``--out``.

The folder is opened through the one cache store (``toolkit.guard.store``): a cache folder owned by another
user or writable by group or others is neither read nor written (one warning; ``--trust-cache`` trusts it),
and an entry (its folder, ``entry.json``, ``run.trec``) that is not the user's own and private is not read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from toolkit.data.records import Run
from toolkit.data.trec_io import read_run, sha256_file, write_json, write_run
from toolkit.errors import TwostageError, phrase
from toolkit.guard.store import Setting, Store, seal

RUN_FILE = "run.trec"
ENTRY_FILE = "entry.json"


def stage_key(kind: str, params: dict, inputs: dict) -> str:
    """SHA-256 of the canonical JSON of (kind, params, input checksums)."""
    doc = json.dumps({"kind": kind, "params": params, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def default_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "stages"


def index_folder() -> Path:
    """Where an experiment builds the indexes it names by collection: ``$TWOSTAGE_CACHE/indexes``."""
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "indexes"


@contextlib.contextmanager
def building_index(name: str) -> Iterator[Path]:
    """The folder ``name`` in the index cache (``index_folder``), for a build (or its reuse) in the block. The
    cache is made and written to first unless the index is there already, so that a folder the file system
    refuses is one ``CacheUnusableError`` naming it before the build, as is such an error during the build
    (``toolkit.guard.store.cache_errors``)."""
    from toolkit.guard.store import cache_errors, probe

    folder = index_folder()
    with cache_errors("index cache", folder):
        if not (folder / name).exists():
            probe("index cache", folder)
        yield folder / name


class StageCache:
    """Runs by stage key in ``folder`` (default ``$TWOSTAGE_CACHE/stages``); ``trust``: read it even when another
    user owns it or may write to it (default: as ``toolkit.guard.store.trusting`` says)."""

    def __init__(self, folder: str | os.PathLike | None = None, trust: bool | None = None):
        self.folder = Path(folder) if folder else default_folder()
        setting = Setting(self.folder, bool(folder), phrase("cache_dir=FOLDER", "--cache-dir DIR"))
        self.store = Store(self.folder, "stage cache", trust, setting)

    def probe(self) -> None:
        """The folder made and written to (a probe file, removed at once): a cache that cannot be written is one
        ``CacheUnusableError`` before any stage runs, not after the first one (``Store.probe``)."""
        self.store.probe()

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / key

    def get(self, key: str) -> tuple[Run, dict] | None:
        """The cached run and its entry record, or None: nothing stored, or an entry that fails its check
        (reported, moved aside, so the caller computes it again)."""
        p = self.path(key)
        if not self.store.usable or not p.exists():
            return None
        entry, run_file = p / ENTRY_FILE, p / RUN_FILE
        if not self.store.readable(p.parent, p, entry, run_file):
            return None
        from toolkit.guard.preflight import FS_ERRNOS

        try:
            record = json.loads(entry.read_text(encoding="utf-8"))
            problem = _entry_problem(record, key, run_file)
            if problem is None:
                return read_run(run_file, run_format="trec"), record
        except FileNotFoundError:
            return None  # replaced by another process since it was found: a miss
        except OSError as exc:
            if exc.errno in FS_ERRNOS:  # the file system refused it (no permission, ...): not damage
                self.store.cannot(exc)
            problem = (entry, f"unreadable ({exc})")
        except (ValueError, TwostageError) as exc:  # JSONDecodeError and a damaged run are ValueErrors
            problem = (entry if isinstance(exc, json.JSONDecodeError) else run_file, f"unreadable ({exc})")
        self._set_aside(p, f"{problem[0]}: {problem[1]}")
        return None

    def _set_aside(self, entry: Path, problem: str) -> None:
        """Report a failed entry and move it out of the way (into ``damaged/``), so it is computed again."""
        self.store.damaged(entry, problem, "computed again")

    def put(self, key: str, run: Run, record: dict, hits: int | None = None) -> tuple[Run, dict]:
        """Write the run and its record atomically (temporary folder, then one rename); returns the run as read
        back. A folder the file system refuses is the store's ``CacheUnusableError`` (nothing half-written left);
        an untrusted one is not written, and the run is read back from a temporary folder."""
        if self.store.usable:
            with self.store.guarded():
                return self._put(key, run, record, hits)
        path = _scratch() / f"{key}.trec"  # the run as the cache would give it back, kept until exit
        write_run(run, path, tag=run.tag or "twostage", depth=hits)
        record = record | {"key": key, "run_sha256": sha256_file(path), "cached": False}
        return read_run(path, run_format="trec"), record

    def _put(self, key: str, run: Run, record: dict, hits: int | None) -> tuple[Run, dict]:
        final = self.path(key)
        self.store.make(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=final.parent))
        try:
            write_run(run, tmp / RUN_FILE, tag=run.tag or "twostage", depth=hits)
            record = record | {"key": key, "run_sha256": sha256_file(tmp / RUN_FILE)}
            write_json(tmp / ENTRY_FILE, record)
            seal(tmp / RUN_FILE, tmp / ENTRY_FILE)
            if final.exists():  # a concurrent writer or a forced recompute: replace the whole entry
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return read_run(final / RUN_FILE, run_format="trec"), record


@functools.cache  # one folder per process
def _scratch() -> Path:
    """A temporary folder for the runs of an untrusted cache, removed when the process exits."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix="twostage-uncached-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _entry_problem(record: object, key: str, run_file: Path) -> tuple[Path, str] | None:
    """The file of an entry read back that is not what its key says, and why (None: the entry is sound)."""
    entry = run_file.with_name(ENTRY_FILE)
    if not isinstance(record, dict):
        return entry, "not a JSON object"
    if record.get("key") != key:
        return entry, f"records the key {record.get('key')!r}, not the key it is stored under"
    if not run_file.is_file():
        return run_file, "missing"
    if sha256_file(run_file) != record.get("run_sha256"):
        return run_file, f"does not match the sha256 its {ENTRY_FILE} records"
    return None
