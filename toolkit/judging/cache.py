"""Judge answers cached by content: (the judge's model, the prompt file's sha256, the query text, the passage
text) -> the raw answer. A rerun, or another run sharing documents, asks nothing again; a killed job resumes
where it stopped, because every answer is committed the moment it arrives.

One SQLite file (``judgments.sqlite``) in the cache folder, default ``$TWOSTAGE_CACHE/judgments``. A row keeps
the sha256 of each part of its key beside the key, and a lookup recomputes the key from them, so a row that
does not match its key is not trusted (see below). Only answers are cached; requests that
failed (HTTP errors, timeouts) are not, so a rerun asks them again. Parsing is redone on every read, with the
template's parser.

Table ``prompts`` keeps each rendered prompt (the exact user message sent) once, by its sha256 (the
``rendered_prompt_sha256`` of the records); ``prompt(sha256)`` returns it only when it still hashes to its key.

The file is opened through the one cache store (``toolkit.guard.store``), as the other caches are:

- each row also keeps ``entry_sha``, the sha256 of its key, its parts' digests and its answer; a row that does
  not match its key (copied or edited under another key) or its checksum (a truncated or edited answer) is
  written aside as JSON into ``damaged/``, deleted, named in one warning and asked again. Rows of an older
  twostage carry no checksum: they are asked again (one warning for them all) and replaced.
- a file that is not a SQLite database, or fails SQLite's ``quick_check`` when opened (truncated, overwritten),
  is moved into ``damaged/`` with its ``-wal`` and ``-shm`` files, named in one warning, and a fresh cache is
  started (every answer is asked again).
- a cache folder owned by another user or writable by group or others, or a ``judgments.sqlite`` that is not
  the user's own and private, is not read (nor written): one warning saying why and how to trust it
  (``--trust-cache``, ``trust_cache=True``); the job asks everything and stores nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

from toolkit.guard.store import Store, seal

log = logging.getLogger(__name__)

FILE = "judgments.sqlite"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(model: str, prompt_sha256: str, query: str, passage: str) -> tuple[str, tuple[str, str, str, str]]:
    """(key, its parts' digests): the key is the sha256 of the four digests joined."""
    parts = (_sha(model), prompt_sha256, _sha(query), _sha(passage))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest(), parts


def entry_sha(key: str, parts: tuple[str, ...] | list[str], response: str) -> str:
    """A row's checksum: the sha256 of its key, its parts' digests and its answer."""
    return hashlib.sha256(json.dumps([key, list(parts), response]).encode("utf-8")).hexdigest()


def default_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "judgments"


class JudgmentCache:
    """Raw answers by content key (see the module docstring). ``trust``: read the folder even when another user
    owns it or may write to it (default: ``toolkit.guard.store.trusting``). ``usable`` is False when the cache
    is not read (an untrusted folder or file): ``get`` then finds nothing and ``put`` stores nothing."""

    def __init__(self, folder: str | os.PathLike, trust: bool | None = None):
        self.folder = Path(folder)
        self.path = self.folder / FILE
        self.store = Store(self.folder, "judgments cache", trust)
        self._db: sqlite3.Connection | None = None
        self._legacy_warned = False
        if self.store.usable:
            self.store.make()
            self._db = self._open()
        self.usable = self._db is not None

    def _files(self) -> list[Path]:
        return [self.path, *(self.path.with_name(FILE + s) for s in ("-wal", "-shm"))]

    def _open(self) -> sqlite3.Connection | None:
        """The database, checked (a damaged file set aside and started afresh); None when it is not trusted."""
        if not self.store.readable(*(p for p in self._files() if p.exists() or p.is_symlink())):
            return None
        try:
            return self._connect(check=self.path.exists())
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            problem = f"{self.path} is not a sound SQLite database ({exc})"
        for extra in self._files()[1:]:
            if extra.exists():
                from toolkit.guard.store import set_aside

                set_aside(extra, self.folder)
        self.store.damaged(self.path, problem, "a fresh cache is started (its answers are asked again)", noun="file")
        return self._connect(check=False)

    def _connect(self, check: bool) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        try:
            if check:
                verdict = db.execute("PRAGMA quick_check").fetchone()
                if not verdict or verdict[0] != "ok":
                    raise sqlite3.DatabaseError(f"quick_check: {verdict[0] if verdict else 'no answer'}")
            # write-ahead log, no fsync per answer: a killed process loses nothing committed (the OS holds the
            # log); only a power cut can lose the last answers, which a rerun asks again
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT, model_sha TEXT, "
                "prompt_sha TEXT, query_sha TEXT, passage_sha TEXT, response TEXT NOT NULL, created REAL)"
            )
            columns = {row[1] for row in db.execute("PRAGMA table_info(answers)")}
            if "entry_sha" not in columns:  # a cache of an older twostage: its rows carry no checksum
                db.execute("ALTER TABLE answers ADD COLUMN entry_sha TEXT")
            db.execute("CREATE TABLE IF NOT EXISTS prompts (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL)")
            db.commit()
        except BaseException:
            db.close()
            raise
        seal(*(p for p in self._files() if p.exists()))
        return db

    def put_prompts(self, texts: list[str]) -> None:
        """Keep each rendered prompt once, by the sha256 of its UTF-8 text (nothing when the cache is not usable)."""
        if self._db is None:
            return
        self._db.executemany(
            "INSERT OR IGNORE INTO prompts VALUES (?, ?)", ((_sha(t), t) for t in dict.fromkeys(texts))
        )
        self._db.commit()

    def prompt(self, sha256: str) -> str | None:
        """The rendered prompt with this sha256 (None when absent or when its text no longer matches its key)."""
        if self._db is None:
            return None
        row = self._db.execute("SELECT text FROM prompts WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None or _sha(str(row[0])) != sha256:
            return None
        return str(row[0])

    def get(self, model: str, prompt_sha256: str, query: str, passage: str) -> str | None:
        if self._db is None:
            return None
        key, parts = cache_key(model, prompt_sha256, query, passage)
        row = self._db.execute(
            "SELECT model_sha, prompt_sha, query_sha, passage_sha, response, entry_sha, model FROM answers "
            "WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        if tuple(row[:4]) != parts:
            problem = f"{key[:12]} in {self.path} does not match its key (copied or edited under another key)"
        elif row[5] is None:
            if not self._legacy_warned:
                self._legacy_warned = True
                from toolkit.notices import warn

                warn(
                    f"judgments cache {self.path} holds answers without a checksum (written by an older twostage); "
                    "they are asked again and replaced"
                )
            return None
        elif row[5] != entry_sha(key, parts, str(row[4])):
            problem = f"{key[:12]} in {self.path} does not match its checksum (a damaged or edited answer)"
        else:
            return str(row[4])
        record = {"key": key, "model": row[6], "parts": list(row[:4]), "response": row[4], "entry_sha": row[5]}
        self.store.damaged_record(record, problem, "asked again", f"{FILE}-{key[:12]}")
        self._db.execute("DELETE FROM answers WHERE key = ?", (key,))
        self._db.commit()
        return None

    def put(self, model: str, prompt_sha256: str, query: str, passage: str, response: str) -> None:
        if self._db is None:
            return
        key, parts = cache_key(model, prompt_sha256, query, passage)
        self._db.execute(
            "INSERT OR REPLACE INTO answers (key, model, model_sha, prompt_sha, query_sha, passage_sha, response, "
            "created, entry_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, *parts, response, time.time(), entry_sha(key, parts, response)),
        )
        self._db.commit()

    def __len__(self) -> int:
        if self._db is None:
            return 0
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
