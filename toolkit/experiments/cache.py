"""The stage cache: every stage's run kept under a key made of its inputs' content and its parameters.

A key is the SHA-256 of a canonical JSON of the stage type, its parameters and the checksums of
what it reads (index, topics, upstream run, model files), so a renamed topics file with the same
queries hits the cache and an edited one misses it (PyTerrier's ``save_dir`` keys by name and
serves stale runs when topics change). An entry is a folder ``<key>/`` holding ``run.trec`` and
``entry.json``; it is built in a temporary sibling and renamed into place in one step, so a
killed experiment leaves either a whole entry or none, and the next run recomputes only what
is missing. Experiments that share a stage share its entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from toolkit.records import Run
from toolkit.trec_io import read_run, sha256_file, write_json, write_run

RUN_FILE = "run.trec"
ENTRY_FILE = "entry.json"


def stage_key(kind: str, params: dict, inputs: dict) -> str:
    """SHA-256 of the canonical JSON of (kind, params, input checksums)."""
    doc = json.dumps({"kind": kind, "params": params, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()


def default_folder() -> Path:
    base = os.environ.get("TWOSTAGE_CACHE") or Path.home() / ".cache" / "twostage"
    return Path(base) / "stages"


class StageCache:
    """Runs by stage key in ``folder`` (default ``$TWOSTAGE_CACHE/stages``)."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder else default_folder()

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / key

    def get(self, key: str) -> tuple[Run, dict] | None:
        """The cached run and its entry record, or None (an incomplete entry counts as none)."""
        p = self.path(key)
        entry = p / ENTRY_FILE
        if not entry.is_file():
            return None
        record = json.loads(entry.read_text(encoding="utf-8"))
        run_file = p / RUN_FILE
        if not run_file.is_file() or sha256_file(run_file) != record.get("run_sha256"):
            return None  # a damaged entry is recomputed, not trusted
        return read_run(run_file), record

    def put(self, key: str, run: Run, record: dict, hits: int | None = None) -> tuple[Run, dict]:
        """Write the run and its record atomically (temporary folder, then one rename)."""
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=final.parent))
        try:
            write_run(run, tmp / RUN_FILE, tag=run.tag or "twostage", depth=hits)
            record = record | {"key": key, "run_sha256": sha256_file(tmp / RUN_FILE)}
            write_json(tmp / ENTRY_FILE, record)
            if final.exists():  # a concurrent writer or a forced recompute: replace the whole entry
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return read_run(final / RUN_FILE), record
