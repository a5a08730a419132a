"""A run's settings sidecar, ``RUN.meta.json``, read back only when it still describes the files beside it.

A sidecar twostage writes records the sha256 of its run (``run.sha256``) and of the inputs it names (the
texts of a rerank, ``texts.sha256``; its topics file, ``topics_sha256``). ``read_meta`` checks them: a
sidecar whose run is not the file beside it (a later job rewrote the run, a kill came between the run and
its sidecar) or whose texts or topics file changed since is ignored with a warning naming the sidecar, so
no setting of another job (a depth of 20 for a depth-10 run) is used. A relative ``texts.path`` or
``topics`` is resolved against the sidecar's folder, not the current one. A sidecar that records no
checksum (written by hand, for a reranker outside twostage) is used as it is: there is nothing to check.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


#: The largest sidecar read (a sidecar holds settings and checksums: a few KB).
SIDECAR_MAX_BYTES = 16 << 20


def meta_path(run_path: str | os.PathLike) -> Path:
    """The settings sidecar of a reranked run: ``RUN.meta.json``."""
    return Path(str(run_path) + ".meta.json")


def read_meta(run_path: str | os.PathLike) -> dict | None:
    """The sidecar of ``run_path`` if there is one and it still describes the files it names (None otherwise,
    with a warning naming the sidecar when it is unreadable or does not match)."""
    p = meta_path(run_path)
    if not p.exists():
        return None
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_json

    try:
        meta = read_json(p, max_bytes=SIDECAR_MAX_BYTES)  # bounded in size and nesting (the inputs door)
    except InputFormatError as exc:
        log.warning("twostage: ignoring the unreadable sidecar %s (%s)", p, exc.reason)
        return None
    if not isinstance(meta, dict):
        log.warning("twostage: ignoring the sidecar %s: not a JSON object", p)
        return None
    meta, problem = _checked(meta, Path(run_path), p.parent)
    if problem:
        log.warning("twostage: ignoring the sidecar %s: %s", p, problem)
        return None
    return meta


def _sha256(path: Path) -> str:
    from toolkit.data.trec_io import sha256_file

    return sha256_file(path)


def _beside(folder: Path, name: object) -> Path | None:
    """A file the sidecar names: absolute as given, relative to the sidecar's folder (None when absent)."""
    if not isinstance(name, str) or not name or name == "<dict>":
        return None
    path = Path(name)
    path = path if path.is_absolute() else folder / path
    return path if path.is_file() else None


def _checked(meta: dict, run: Path, folder: Path) -> tuple[dict, str | None]:
    """The sidecar with the files it names resolved against its folder, or why it no longer describes them."""
    recorded = meta.get("run")
    if isinstance(recorded, dict) and recorded.get("sha256"):
        if not run.is_file():
            return meta, None  # read for a run held in memory elsewhere: nothing to compare
        if _sha256(run) != recorded["sha256"]:
            return (
                meta,
                f"it records another run than {run} (sha256 {recorded['sha256'][:12]}...; the run was rewritten since)",
            )
    meta = dict(meta)
    texts = meta.get("texts")
    if isinstance(texts, dict) and texts.get("path") and texts.get("kind") != "lucene":
        found = _beside(folder, texts["path"]) or _beside(folder, texts.get("resolved"))
        if found is not None:
            if texts.get("sha256") and _sha256(found) != texts["sha256"]:
                return meta, f"its texts file {found} changed since the run was made (sha256 differs)"
            meta["texts"] = texts | {"path": str(found)}
    topics = _beside(folder, meta.get("topics")) or _beside(folder, meta.get("topics_resolved"))
    if topics is not None:
        if meta.get("topics_sha256") and _sha256(topics) != meta["topics_sha256"]:
            return meta, f"its topics file {topics} changed since the run was made (sha256 differs)"
        meta["topics"] = str(topics)
    return meta, None
