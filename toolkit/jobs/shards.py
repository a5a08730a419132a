"""Sharded, resumable jobs: a manifest beside the output, each shard written atomically.

A job's work (documents to encode, queries to search, passages or queries to rerank) is a
list of items split into fixed ranges (``plan``). The folder ``OUT.shards/`` beside the
output holds ``manifest.json`` and one ``shard-NNNNN.npz`` per finished shard. The manifest
records what the result depends on (``identity``: input checksums, model, settings and the
shard ranges) and, per finished shard, its file, sha256, item count, model calls, the worker
that computed it and when. Running the same job again skips the finished shards (their
files are checked against the recorded sha256) and says so; a job whose identity differs is
refused with the differing fields named, unless ``force``.

Shards are computed by an executor: ``LocalExecutor`` in this process, or
``toolkit.jobs.distributed.RayExecutor`` on a Ray cluster. Workers return arrays to the driver,
which writes the shard files, so no shared filesystem is needed for the outputs, and a
killed driver loses at most the shards in flight.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolkit.errors import ConfigError, TwostageError

log = logging.getLogger(__name__)

FORMAT = "twostage-shards/1"
MANIFEST = "manifest.json"


def shards_dir(out: str | os.PathLike) -> Path:
    """``OUT.shards/``: the manifest and shard files of the job that writes ``OUT``."""
    return Path(str(Path(out)).rstrip("/") + ".shards")


def plan(n: int, shard_size: int) -> list[list[int]]:
    """[lo, hi) ranges of ``shard_size`` items covering ``range(n)`` (the last may be shorter)."""
    if shard_size < 1:
        raise ConfigError(f"--shard-size must be >= 1, not {shard_size}")
    return [[lo, min(lo + shard_size, n)] for lo in range(0, n, shard_size)]


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON values differ, with both values (shortened)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(k, "<absent>"), new.get(k, "<absent>"), f"{prefix}{k}.")
        return out
    if old == new:
        return []

    def short(v: Any) -> str:
        s = json.dumps(v, default=str)
        return s if len(s) <= 60 else s[:57] + "..."

    return [f"{prefix.rstrip('.')}: {short(old)} -> {short(new)}"]


def _sha256(path: Path) -> str:
    from toolkit.data.trec_io import sha256_file

    return sha256_file(path)


@dataclass
class Manifest:
    """The manifest of one job's shard folder (see the module docstring)."""

    folder: Path
    doc: dict
    resumed: int = 0
    run_id: str = field(default_factory=lambda: f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}")

    @property
    def ranges(self) -> list[list[int]]:
        return self.doc["identity"]["ranges"]

    @property
    def finished(self) -> dict[int, dict]:
        return {int(k): v for k, v in self.doc["shards"].items()}

    def pending(self) -> list[int]:
        done = self.finished
        return [i for i in range(len(self.ranges)) if i not in done]

    def shard_path(self, shard: int) -> Path:
        return self.folder / f"shard-{shard:05d}.npz"

    def save(self) -> None:
        from toolkit.data.trec_io import write_json

        self.doc["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_json(self.folder / MANIFEST, self.doc)

    def record(self, shard: int, arrays: dict[str, np.ndarray], info: dict) -> None:
        """Write one shard's arrays atomically, then record the file and its checksum."""
        from toolkit.data.trec_io import atomic_write

        path = self.shard_path(shard)
        with atomic_write(path, "wb") as fh:
            np.savez(fh, **arrays)
        lo, hi = self.ranges[shard]
        self.doc["shards"][str(shard)] = {
            "range": [lo, hi],
            "file": path.name,
            "sha256": _sha256(path),
            "bytes": path.stat().st_size,
            **info,
            "run": self.run_id,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self.save()

    def work_done(self, *counters: str) -> dict:
        """Sums of the workers' counters (texts embedded, model calls) over the shards computed by
        this run (``*_this_run``) and over all finished shards."""
        out: dict = {}
        for c in counters:
            out[c] = sum(int(r.get(c, 0)) for r in self.doc["shards"].values())
            out[f"{c}_this_run"] = sum(
                int(r.get(c, 0)) for r in self.doc["shards"].values() if r.get("run") == self.run_id
            )
        return out

    def load(self, shard: int) -> dict[str, np.ndarray]:
        with np.load(self.shard_path(shard), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def complete(self) -> bool:
        return not self.pending()


def open_manifest(folder: str | os.PathLike, job: str, identity: dict, force: bool = False) -> Manifest:
    """The manifest of ``folder`` for this job, created or resumed.

    ``identity`` holds everything the result depends on (input checksums, model,
    settings, ``ranges``). A different recorded identity is refused, naming the
    differences, unless ``force`` (which discards the old shards). Finished shards
    whose file is missing or does not match its checksum are computed again.
    """
    folder = Path(folder)
    identity = json.loads(json.dumps(identity, default=str))  # as it will read back
    path = folder / MANIFEST
    if path.is_file() and not force:
        from toolkit.errors import InputFormatError
        from toolkit.guard.readers import read_json

        try:
            doc = read_json(path, max_bytes=256 << 20)  # bounded in size and nesting (the inputs door)
        except InputFormatError as exc:
            raise ConfigError(f"{path}: unreadable manifest ({exc.reason}); remove the folder or use --force") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: unreadable manifest (not a JSON object); remove the folder or use --force")
        if doc.get("format") != FORMAT or doc.get("job") != job:
            raise ConfigError(
                f"{path} belongs to another job ({doc.get('job')!r}, {doc.get('format')!r}); "
                "choose another --out or use --force"
            )
        diffs = _differences(doc.get("identity"), identity)
        if diffs:
            n = len(doc.get("shards", {}))
            raise ConfigError(
                f"{path}: the inputs or settings changed since its {n} finished shard(s) were computed: "
                + "; ".join(diffs[:8])
                + ("; ..." if len(diffs) > 8 else "")
                + ". Rerun with the recorded settings to resume, or --force to discard them and start again"
            )
        manifest = Manifest(folder, doc)
        for shard, rec in list(manifest.finished.items()):
            p = folder / rec["file"]
            if not p.is_file() or _sha256(p) != rec["sha256"]:
                log.warning(
                    "twostage: shard %d (%s) is missing or does not match its checksum: computing it again",
                    shard,
                    p.name,
                )
                del doc["shards"][str(shard)]
        manifest.resumed = len(manifest.finished)
        return manifest
    if folder.exists() and force:
        for p in folder.glob("shard-*.npz"):
            p.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": FORMAT,
        "job": job,
        "identity": identity,
        "shards": {},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    manifest = Manifest(folder, doc)
    manifest.save()
    return manifest


# ---------------------------------------------------------------- executors
class Worker(Protocol):
    """Computes one shard: payload in, (named arrays, stats) out. Built once per process."""

    def __call__(self, payload: Any) -> tuple[dict[str, np.ndarray], dict]: ...


class WorkerSpec(Protocol):
    """A picklable recipe for a worker (model settings); ``build()`` loads the model."""

    def build(self) -> Worker: ...

    def describe(self) -> dict: ...


def worker_identity() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


class Executor(Protocol):
    """Runs shards; yields (shard, arrays, info) as each finishes, in any order."""

    description: dict

    def map(self, spec: WorkerSpec, payloads: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, dict, dict]]: ...


@dataclass
class LocalExecutor:
    """In this process, one shard after another (tests and single-machine runs of sharded jobs)."""

    description: dict = field(default_factory=lambda: {"engine": "local"})
    _worker: Worker | None = None

    def map(self, spec: WorkerSpec, payloads: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, dict, dict]]:
        if self._worker is None:
            self._worker = spec.build()
        for shard, payload in payloads:
            started = time.perf_counter()
            arrays, stats = self._worker(payload)
            yield (
                shard,
                arrays,
                {**stats, "worker": worker_identity(), "seconds": round(time.perf_counter() - started, 3)},
            )


@dataclass(frozen=True)
class Sharding:
    """Where and how a job runs sharded: the executor, the shard folder, shard size, ``--force``."""

    executor: Executor
    folder: Path
    shard_size: int | None = None
    force: bool = False

    def size(self, default: int, multiple_of: int = 1) -> int:
        """The shard size, rounded up to a multiple of the batch size (so batches are the same as unsharded)."""
        n = self.shard_size or default
        return max(multiple_of, -(-n // multiple_of) * multiple_of)


@dataclass(frozen=True)
class JobReport:
    shards: int
    resumed: int
    computed: int
    items_computed: int
    seconds: float


def run_job(
    manifest: Manifest,
    spec: WorkerSpec,
    executor: Executor,
    payload: Callable[[int, int, int], Any],
    unit: str = "item",
    progress: bool = True,
    label: str = "job",
    finish: Callable[[int, dict], dict] | None = None,
) -> JobReport:
    """Compute the manifest's unfinished shards with ``executor`` and record each as it finishes.

    ``payload(shard, lo, hi)`` builds a shard's input on the driver (texts, pairs), only
    for the shards still to do, as the executor asks for them. Ctrl-C or a failure
    keeps every finished shard; the message says how to resume. ``finish(shard, arrays)``
    completes a worker's arrays on the driver before they are written (cached rows).
    """
    from toolkit.guard.escape import progress_bar

    total = len(manifest.ranges)
    todo = manifest.pending()
    started = time.perf_counter()
    if manifest.resumed:
        log.info(
            "twostage: %s: resuming from %s: %d of %d shards already finished, %d to do",
            label,
            manifest.folder / MANIFEST,
            manifest.resumed,
            total,
            len(todo),
        )
    elif total:
        log.info(
            "twostage: %s: %d shards (%s), manifest %s",
            label,
            total,
            executor.description.get("engine"),
            manifest.folder / MANIFEST,
        )
    items = sum(hi - lo for lo, hi in (manifest.ranges[i] for i in todo))
    bar = progress_bar(
        total=items,
        desc=f"{label} ({len(todo)} shards)",
        unit=unit,
        file=sys.stderr,
        disable=not progress or not todo,
        dynamic_ncols=True,
    )
    computed = computed_items = 0

    def inputs() -> Iterator[tuple[int, Any]]:
        for shard in todo:
            lo, hi = manifest.ranges[shard]
            yield shard, payload(shard, lo, hi)

    try:
        for shard, arrays, info in executor.map(spec, inputs()):
            manifest.record(shard, finish(shard, arrays) if finish else arrays, info)
            lo, hi = manifest.ranges[shard]
            computed += 1
            computed_items += hi - lo
            bar.update(hi - lo)
            rate = (hi - lo) / info["seconds"] if info.get("seconds") else float("nan")
            msg = (
                f"twostage: {label}: shard {shard + 1}/{total} done ({hi - lo} {unit}s, {rate:.1f}/s, "
                f"{info['worker']['host']} pid {info['worker']['pid']}); "
                f"{len(manifest.finished)}/{total} finished"
            )
            if progress:
                bar.write(msg, file=sys.stderr)
            else:
                log.debug(msg)
    except KeyboardInterrupt:
        bar.close()
        log.error(
            "twostage: %s interrupted: %d of %d shards finished and kept in %s; run the same command "
            "again to do only the other %d",
            label,
            len(manifest.finished),
            total,
            manifest.folder,
            total - len(manifest.finished),
        )
        raise
    except TwostageError as exc:
        bar.close()
        raise TwostageError(
            f"{exc}. {len(manifest.finished)} of {total} shards are finished and kept in "
            f"{manifest.folder}; run the same command again to resume"
        ) from exc
    bar.close()
    if not manifest.complete():  # an executor that stopped early: never assemble a partial result
        raise TwostageError(f"{label}: {len(manifest.pending())} shards were not computed; run again to resume")
    return JobReport(total, manifest.resumed, computed, computed_items, time.perf_counter() - started)
