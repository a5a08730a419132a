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
``<cache>/damaged/`` and computed again. A cache that cannot be written (read-only, full, over quota) is
a warning, and the experiment runs without it: the run is kept in a temporary folder instead.

The folder is opened through the one cache store (``toolkit.guard.store``): a cache folder owned by another
user or writable by group or others is neither read nor written (one warning; ``--trust-cache`` trusts it),
and an entry (its folder, ``entry.json``, ``run.trec``) that is not the user's own and private is not read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from toolkit.data.records import Run
from toolkit.data.trec_io import read_run, sha256_file, write_json, write_run
from toolkit.errors import TwostageError
from toolkit.guard.preflight import UNWRITABLE
from toolkit.guard.store import Store, seal

RUN_FILE = "run.trec"
ENTRY_FILE = "entry.json"


def unwritable(exc: OSError) -> bool:
    """Whether ``exc`` says the cache's disk or folder takes no writes (rather than a bug or a lost file)."""
    return exc.errno in UNWRITABLE


def stage_key(kind: str, params: dict, inputs: dict) -> str:
    """SHA-256 of the canonical JSON of (kind, params, input checksums)."""
    doc = json.dumps({"kind": kind, "params": params, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def default_folder() -> Path:
    base = os.environ.get("TWOSTAGE_CACHE") or Path.home() / ".cache" / "twostage"
    return Path(base) / "stages"


class StageCache:
    """Runs by stage key in ``folder`` (default ``$TWOSTAGE_CACHE/stages``); ``trust``: read it even when another
    user owns it or may write to it (default: as ``toolkit.guard.store.trusting`` says)."""

    def __init__(self, folder: str | os.PathLike | None = None, trust: bool | None = None):
        self.folder = Path(folder) if folder else default_folder()
        self.store = Store(self.folder, "stage cache", trust)
        self._warned = False

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
        try:
            record = json.loads(entry.read_text(encoding="utf-8"))
            problem = _entry_problem(record, key, run_file)
            if problem is None:
                return read_run(run_file), record
        except (OSError, ValueError, TwostageError) as exc:  # JSONDecodeError and a damaged run are ValueErrors
            problem = (entry if isinstance(exc, (OSError, json.JSONDecodeError)) else run_file, f"unreadable ({exc})")
        self._set_aside(p, f"{problem[0]}: {problem[1]}")
        return None

    def _set_aside(self, entry: Path, problem: str) -> None:
        """Report a failed entry and move it out of the way (into ``damaged/``), so it is computed again."""
        self.store.damaged(entry, problem, "computed again")

    def put(self, key: str, run: Run, record: dict, hits: int | None = None) -> tuple[Run, dict]:
        """Write the run and its record atomically (temporary folder, then one rename); returns the run as read
        back. A cache that takes no writes is a warning, and the run is read back from a temporary folder."""
        try:
            if self.store.usable:
                return self._put(key, run, record, hits)
        except OSError as exc:
            if not unwritable(exc):
                raise
            if not self._warned:
                from toolkit.errors import phrase
                from toolkit.notices import warn

                warn(
                    f"the stage cache {self.folder} cannot be written ({exc.strerror or exc}); running without it "
                    f"(use {phrase('cache_dir=', '--cache-dir')} to choose another folder)"
                )
                self._warned = True
        path = _scratch() / f"{key}.trec"  # the run as the cache would give it back, kept until exit
        write_run(run, path, tag=run.tag or "twostage", depth=hits)
        record = record | {"key": key, "run_sha256": sha256_file(path), "cached": False}
        return read_run(path), record

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
        return read_run(final / RUN_FILE), record


_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """A temporary folder for the runs of an unwritable cache, removed when the process exits."""
    if not _SCRATCH:
        import atexit

        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="twostage-uncached-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


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
