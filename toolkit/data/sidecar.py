"""A run's settings sidecar, ``RUN.meta.json``, read back only when it still describes the files beside it.

A sidecar twostage writes records the sha256 of its run (``run.sha256``) and of the inputs it names (the
texts of a rerank, ``texts.sha256``; its topics file, ``topics_sha256``). ``read_meta`` checks them: a
sidecar whose run is not the file beside it (a later job rewrote the run, a kill came between the run and
its sidecar) or whose texts or topics file changed since is ignored with a warning naming the sidecar, so
no setting of another job (a depth of 20 for a depth-10 run) is used. A relative ``texts.path`` or
``topics`` is resolved against the sidecar's folder, not the current one. A sidecar that records no
checksum (written by hand, for a reranker outside twostage) is used as it is: there is nothing to check.
Each problem is one ``TwostageWarning`` (``twostage: warning: ignoring the sidecar ...`` in the CLI).

The judge's sidecar, ``QRELS.meta.json`` (``twostage judge --out QRELS``: which judge, its prompt, its
calibration), is read by ``read_judge_meta`` only when the sha256 it records for its qrels (``qrels.sha256``)
is that of the qrels file beside it: a sidecar of another judging job (or one whose qrels were edited since)
would attribute these labels to a judge, a prompt and a calibration that did not produce them. Such a sidecar,
or one that records no checksum, is refused with a warning and the qrels are read as plain qrels.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.notices import warn

#: ``kind`` of the sidecar ``twostage judge`` writes beside its qrels.
JUDGE_KIND = "twostage judge"


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
    meta = _read_object(p)
    if meta is None:
        return None
    meta, problem = _checked(meta, Path(run_path), p.parent)
    if problem:
        warn(f"ignoring the sidecar {p}: {problem}")
        return None
    return meta


def _read_object(p: Path) -> dict | None:
    """The JSON object in ``p``; None, with a warning, when it is unreadable or not an object."""
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_json

    try:
        meta = read_json(p, max_bytes=SIDECAR_MAX_BYTES)  # bounded in size and nesting (the inputs door)
    except InputFormatError as exc:
        warn(f"ignoring the unreadable sidecar {p} ({exc.reason})")
        return None
    except OSError as exc:
        warn(f"ignoring the unreadable sidecar {p} ({exc.strerror or exc})")
        return None
    if not isinstance(meta, dict):
        warn(f"ignoring the sidecar {p}: not a JSON object")
        return None
    return meta


def read_judge_meta(qrels_path: str | os.PathLike) -> dict | None:
    """The sidecar ``twostage judge`` wrote beside ``qrels_path`` when it still describes that file (its
    recorded ``qrels.sha256`` is the file's); None when there is none or it is another kind of sidecar, and
    None with a warning when it records another qrels checksum, or none (module docstring)."""
    p = meta_path(qrels_path)
    if not p.exists():
        return None
    meta = _read_object(p)
    if meta is None or meta.get("kind") != JUDGE_KIND:
        return None
    recorded = meta.get("qrels")
    sha = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not isinstance(sha, str) or not sha:
        warn(
            f"ignoring the judge's sidecar {p}: it records no checksum of its qrels, so nothing says they are {qrels_path}"
        )
        return None
    actual = _sha256(Path(qrels_path))
    if actual != sha:
        warn(
            f"ignoring the judge's sidecar {p}: it records the qrels sha256 {sha[:12]}..., but {qrels_path} has "
            f"{actual[:12]}... (the sidecar of another judging job, or qrels edited since); its judge, prompt and "
            "calibration are not attributed to these labels"
        )
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
