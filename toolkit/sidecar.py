"""A run's settings sidecar, ``RUN.meta.json``."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def meta_path(run_path: str | os.PathLike) -> Path:
    """The settings sidecar of a reranked run: ``RUN.meta.json``."""
    return Path(str(run_path) + ".meta.json")


def read_meta(run_path: str | os.PathLike) -> dict | None:
    """The sidecar of ``run_path`` if there is one (None otherwise, or when unreadable)."""
    p = meta_path(run_path)
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        log.warning("ignoring unreadable sidecar %s", p)
        return None
