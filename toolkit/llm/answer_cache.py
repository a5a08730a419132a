"""Judge answers cached by content: (the judge's model, the prompt file's sha256, the query text, the passage
text, and the request: what decides the answer, ``request_key`` of the backend: the endpoint's URL and API path
and the whole body sent, model, messages, sampling settings and ``max_tokens`` included) -> the raw answer. The
same model name at another endpoint, or the same prompt with another ``max_tokens``, asks again. A rerun, or another run sharing documents, asks nothing again; a killed job resumes
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
  not match its key (copied or edited under another key) or its checksum (a truncated or edited answer), or whose
  answer the caller's parser refuses (``get(..., parse=...)``: an answer cached by an older twostage that this
  one does not read), is written aside as JSON into ``damaged/``, deleted, named in one warning and asked again.
  An answer is put only after it parsed. Rows of an older
  twostage carry no checksum: they are asked again (one warning for them all) and replaced.
- a file that is not a SQLite database, or fails SQLite's ``quick_check`` when opened (truncated, overwritten),
  is moved into ``damaged/`` with its ``-wal`` and ``-shm`` files, named in one warning, and a fresh cache is
  started (every answer is asked again).
- a cache folder owned by another user or writable by group or others, or a ``judgments.sqlite`` that is not
  the user's own and private, is not read (nor written): one warning saying why and how to trust it
  (``--trust-cache``, ``trust_cache=True``); the job asks everything and stores nothing.
- a cache folder or database that cannot be made, opened, read or written (a missing folder that cannot be made,
  as under ``HOME=/proc/1``, a file on its path, read-only, full, over the file-size limit, no permission:
  ``FS_ERRNOS``, or SQLite's words for the same) ends the job with one ``CacheUnusableError`` naming the folder
  as it was set and the fix (``Store.cannot``); nothing is written but the answers already committed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from toolkit.guard.store import Setting, Store, seal

log = logging.getLogger(__name__)

FILE = "judgments.sqlite"

#: SQLite's primary result codes of a database the file system refuses, as the errno they stand for (None: SQLite
#: does not say which, as for a write over the file-size limit): SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR,
#: SQLITE_FULL, SQLITE_CANTOPEN.
_SQLITE_UNWRITABLE = MappingProxyType({3: errno.EACCES, 8: errno.EROFS, 10: None, 13: errno.ENOSPC, 14: errno.ENOENT})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(
    model: str, prompt_sha256: str, query: str, passage: str, request: str = ""
) -> tuple[str, tuple[str, ...]]:
    """(key, its parts' digests): the key is the sha256 of the five digests joined (the request's: ``request``,
    the backend's ``request_key``, what decides the answer)."""
    parts = (_sha(model), prompt_sha256, _sha(query), _sha(passage), _sha(request))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest(), parts


def entry_sha(key: str, parts: tuple[str, ...] | list[str], response: str) -> str:
    """A row's checksum: the sha256 of its key, its parts' digests and its answer."""
    return hashlib.sha256(json.dumps([key, list(parts), response]).encode("utf-8")).hexdigest()


def default_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "judgments"


class JudgmentCache:
    """Raw answers by content key (see the module docstring). ``trust``: read the folder even when another user
    owns it or may write to it (default: ``toolkit.guard.store.trusting``); ``setting``: how the folder was set,
    for the error saying it cannot be used; ``what``: the cache's name in messages. ``usable`` is False when the
    cache is not read (an untrusted folder or file): ``get`` then finds nothing and ``put`` stores nothing."""

    def __init__(
        self,
        folder: str | os.PathLike,
        trust: bool | None = None,
        setting: Setting | None = None,
        what: str = "judgments cache",
    ):
        self.folder = Path(folder)
        self.path = self.folder / FILE
        self.store = Store(self.folder, what, trust, setting)
        self._db: sqlite3.Connection | None = None
        self._legacy_warned = False
        if self.store.usable:
            try:
                self.store.make()
                self._db = self._open()
            except (OSError, sqlite3.Error) as exc:
                self._cannot(exc)
        self.usable = self._db is not None

    def _cannot(self, exc: BaseException) -> NoReturn:
        """The folder or database cannot be made, opened, read or written: the store's ``CacheUnusableError``
        (the database closed first); an error of another kind is raised again."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self.usable = False
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            if not isinstance(exc, sqlite3.OperationalError) or code is None or code & 0xFF not in _SQLITE_UNWRITABLE:
                raise exc
            self.store.fail(f"SQLite says {str(exc)!r}", self.path, _SQLITE_UNWRITABLE[code & 0xFF])
        self.store.cannot(exc)

    def _files(self) -> list[Path]:
        return [self.path, *(self.path.with_name(FILE + s) for s in ("-wal", "-shm"))]

    def _open(self) -> sqlite3.Connection | None:
        """The database, checked (a damaged file set aside and started afresh); None when it is not trusted."""
        if not self.store.readable(*(p for p in self._files() if p.exists() or p.is_symlink())):
            return None
        try:
            return self._connect(check=self.path.exists())
        except sqlite3.OperationalError:
            raise  # full, read-only, cannot be opened, locked: the file system or another process, not damage
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            problem = f"{self.path} is not a sound SQLite database ({exc})"
        for extra in self._files()[1:]:
            if extra.exists():
                self.store.aside(extra)
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
            if "request_sha" not in columns:  # older rows were keyed without the request: never found again
                db.execute("ALTER TABLE answers ADD COLUMN request_sha TEXT")
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
        try:
            self._db.executemany(
                "INSERT OR IGNORE INTO prompts VALUES (?, ?)", ((_sha(t), t) for t in dict.fromkeys(texts))
            )
            self._db.commit()
        except sqlite3.OperationalError as exc:
            self._cannot(exc)

    def prompt(self, sha256: str) -> str | None:
        """The rendered prompt with this sha256 (None when absent or when its text no longer matches its key)."""
        if self._db is None:
            return None
        try:
            row = self._db.execute("SELECT text FROM prompts WHERE sha256 = ?", (sha256,)).fetchone()
        except sqlite3.OperationalError as exc:
            self._cannot(exc)
        if row is None or _sha(str(row[0])) != sha256:
            return None
        return str(row[0])

    def get(
        self,
        model: str,
        prompt_sha256: str,
        query: str,
        passage: str,
        parse: Callable[[str], object] | None = None,
        *,
        request: str = "",
    ) -> str | None:
        """The cached answer for this key, or None (absent, not trusted, or set aside as damaged). With ``parse``,
        the answer is parsed as a fresh one is: one it refuses (a ``ValueError``, such as the numbers door's
        ``NumberRefused``: an answer an older twostage cached that this one does not read) is set aside like any
        damaged entry and asked again."""
        if self._db is None:
            return None
        key, parts = cache_key(model, prompt_sha256, query, passage, request)
        try:
            row = self._db.execute(
                "SELECT model_sha, prompt_sha, query_sha, passage_sha, request_sha, response, entry_sha, model "
                "FROM answers WHERE key = ?",
                (key,),
            ).fetchone()
        except sqlite3.OperationalError as exc:
            self._cannot(exc)
        if row is None:
            return None
        row = (*row[:4], row[4] if row[4] is not None else _sha(""), *row[5:])
        if tuple(row[:5]) != parts:
            problem = f"{key[:12]} in {self.path} does not match its key (copied or edited under another key)"
        elif row[6] is None:
            if not self._legacy_warned:
                self._legacy_warned = True
                from toolkit.notices import warn

                warn(
                    f"{self.store.what} {self.path} holds answers without a checksum (written by an older twostage); "
                    "they are asked again and replaced"
                )
            return None
        elif row[6] != entry_sha(key, parts, str(row[5])):
            problem = f"{key[:12]} in {self.path} does not match its checksum (a damaged or edited answer)"
        else:
            problem = self._unparsed(str(row[5]), parse)
            if problem is None:
                return str(row[5])
            problem = f"{key[:12]} in {self.path} holds an answer that does not parse ({problem})"
        record = {"key": key, "model": row[7], "parts": list(row[:5]), "response": row[5], "entry_sha": row[6]}
        self.store.damaged_record(record, problem, "asked again", f"{FILE}-{key[:12]}")
        try:
            self._db.execute("DELETE FROM answers WHERE key = ?", (key,))
            self._db.commit()
        except sqlite3.OperationalError as exc:
            self._cannot(exc)
        return None

    @staticmethod
    def _unparsed(response: str, parse: Callable[[str], object] | None) -> str | None:
        """Why ``parse`` refuses a cached answer (None: it parses, or there is no parser)."""
        if parse is None:
            return None
        try:
            parse(response)
        except ValueError as exc:
            return str(exc)[:200]
        return None

    def put(
        self, model: str, prompt_sha256: str, query: str, passage: str, response: str, *, request: str = ""
    ) -> None:
        """Keep an answer; callers put only an answer that parsed, so that every later run reads it back."""
        if self._db is None:
            return
        key, parts = cache_key(model, prompt_sha256, query, passage, request)
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, model, model_sha, prompt_sha, query_sha, passage_sha, "
                "request_sha, response, created, entry_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, model, *parts, response, time.time(), entry_sha(key, parts, response)),
            )
            self._db.commit()
        except sqlite3.OperationalError as exc:
            self._cannot(exc)

    def __len__(self) -> int:
        if self._db is None:
            return 0
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
        except sqlite3.OperationalError as exc:
            self._cannot(exc)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
