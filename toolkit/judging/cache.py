"""Judge answers cached by content: (the judge's model, the prompt file's sha256, the query text, the passage
text) -> the raw answer. A rerun, or another run sharing documents, asks nothing again; a killed job resumes
where it stopped, because every answer is committed the moment it arrives.

One SQLite file (``judgments.sqlite``) in the cache folder, default ``$TWOSTAGE_CACHE/judgments``. A row keeps
the sha256 of each part of its key beside the key, and a lookup recomputes the key from them, so a row that
does not match its key is ignored (and logged) rather than trusted. Only answers are cached; requests that
failed (HTTP errors, timeouts) are not, so a rerun asks them again. Parsing is redone on every read, with the
template's parser.

Table ``prompts`` keeps each rendered prompt (the exact user message sent) once, by its sha256 (the
``rendered_prompt_sha256`` of the records); ``prompt(sha256)`` returns it only when it still hashes to its key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

log = logging.getLogger(__name__)

FILE = "judgments.sqlite"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(model: str, prompt_sha256: str, query: str, passage: str) -> tuple[str, tuple[str, str, str, str]]:
    """(key, its parts' digests): the key is the sha256 of the four digests joined."""
    parts = (_sha(model), prompt_sha256, _sha(query), _sha(passage))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest(), parts


def default_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "judgments"


class JudgmentCache:
    """Raw answers by content key (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / FILE
        self._db = sqlite3.connect(self.path, timeout=60)
        # write-ahead log, no fsync per answer: a killed process loses nothing committed (the OS holds the log);
        # only a power cut can lose the last answers, which a rerun asks again
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT, model_sha TEXT, prompt_sha TEXT, "
            "query_sha TEXT, passage_sha TEXT, response TEXT NOT NULL, created REAL)"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS prompts (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL)")
        self._db.commit()

    def put_prompts(self, texts: list[str]) -> None:
        """Keep each rendered prompt once, by the sha256 of its UTF-8 text."""
        self._db.executemany(
            "INSERT OR IGNORE INTO prompts VALUES (?, ?)", ((_sha(t), t) for t in dict.fromkeys(texts))
        )
        self._db.commit()

    def prompt(self, sha256: str) -> str | None:
        """The rendered prompt with this sha256 (None when absent or when its text no longer matches its key)."""
        row = self._db.execute("SELECT text FROM prompts WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None or _sha(str(row[0])) != sha256:
            return None
        return str(row[0])

    def get(self, model: str, prompt_sha256: str, query: str, passage: str) -> str | None:
        key, parts = cache_key(model, prompt_sha256, query, passage)
        row = self._db.execute(
            "SELECT model_sha, prompt_sha, query_sha, passage_sha, response FROM answers WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        if tuple(row[:4]) != parts:
            log.warning("judgment cache %s: entry %s does not match its key; ignored", self.path, key[:12])
            return None
        return str(row[4])

    def put(self, model: str, prompt_sha256: str, query: str, passage: str, response: str) -> None:
        key, parts = cache_key(model, prompt_sha256, query, passage)
        self._db.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, *parts, response, time.time()),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()
