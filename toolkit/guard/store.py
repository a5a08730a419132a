"""One cache store: the stage cache (``toolkit.experiments.cache``), the embedding cache
(``toolkit.jobs.embed_cache``), the ONNX export cache (``toolkit.reranking.onnx_cache``) and the judgments cache
(``toolkit.judging.cache``) open their folder, check their entries and set damaged ones aside here.

- **Trust.** A cache folder that is owned by another user, or writable by group or others, is not read (nor
  written): one ``TwostageWarning`` says why and how to trust it (``--trust-cache``; ``trust_cache=True`` in the
  library), and the work goes on without the cache. An entry inside a trusted folder that is owned by another
  user, writable by group or others, or a symbolic link is not read either (one warning per cache, naming the
  first), and is computed again. Anyone who can write there could have planted an answer that a checksum alone
  cannot catch (whoever plants an entry can compute its checksum too). Folders the store makes are ``0755``
  whatever the umask, and the entries each cache writes are sealed (no group or other write), so a cache of
  one's own is trusted under a ``umask 002`` too.
- **Checks.** Each cache checks an entry against its key and the checksum of its content whenever it reads it
  (each says how in its module); the store gives them the one way to fail: ``Store.damaged`` moves the entry
  (file, folder, or a database row written out as JSON) into ``damaged/`` inside the cache folder, under a
  unique name, and issues one warning naming where it went; the caller computes it again.
- ``trusting(True)`` makes the caches opened inside the block trust their folders (the library's
  ``trust_cache=True`` and the CLI's ``--trust-cache`` are this); a cache given ``trust=`` explicitly uses that.
  Ray workers open their caches untrusted (the flag is not sent to them).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from toolkit.errors import phrase
from toolkit.notices import warn

#: The folder inside a cache where damaged entries are moved aside.
DAMAGED = "damaged"

#: How a message names the way to trust a cache: ``--trust-cache`` in the CLI, ``trust_cache=True`` in the library.
TRUST_HINT = phrase("trust_cache=True", "--trust-cache")

_TRUST: contextvars.ContextVar[bool] = contextvars.ContextVar("twostage_trust_cache", default=False)

#: The mode of the folders the store makes (the umask may take bits away, never add group or other write).
FOLDER_MODE = 0o755


@contextlib.contextmanager
def trusting(trust: bool = True) -> Iterator[None]:
    """Within the block, caches opened without an explicit ``trust=`` trust their folders when ``trust``."""
    token = _TRUST.set(bool(trust))
    try:
        yield
    finally:
        _TRUST.reset(token)


def trusted(trust: bool | None = None) -> bool:
    """``trust`` when given, else whether the caller is inside ``trusting(True)``."""
    return _TRUST.get() if trust is None else bool(trust)


def _stamp() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def set_aside(path: str | os.PathLike, cache_folder: str | os.PathLike, label: str | None = None) -> str:
    """Move a damaged cache entry (file or folder) into ``cache_folder/damaged/`` under a unique name, so it is
    computed again and can still be inspected; returns what happened, for the warning ("moved to ..." or
    "left in place, could not be moved aside (why)")."""
    target = Path(cache_folder) / DAMAGED / f"{label or Path(path).name}-{_stamp()}"
    try:
        target.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        os.replace(path, target)
    except OSError as exc:
        return f"left in place, could not be moved aside ({exc.strerror or exc})"
    return f"moved to {target}"


def write_aside(record: dict, cache_folder: str | os.PathLike, label: str) -> str:
    """Keep a damaged record (a database row) as JSON in ``cache_folder/damaged/``; returns what happened."""
    import json

    target = Path(cache_folder) / DAMAGED / f"{label}-{_stamp()}.json"
    try:
        target.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        return f"not kept, could not be written aside ({exc.strerror or exc})"
    return f"kept in {target}"


def foreign(path: str | os.PathLike, follow: bool = False) -> str | None:
    """Why ``path`` may hold what someone else put there: owned by another user, writable by group or others,
    or (``follow=False``) a symbolic link; None when it is the current user's own and private (or absent)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (twostage writes none in a cache)"
    if st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid}, you are {os.geteuid()})"
    if st.st_mode & 0o022:
        who = "group and others" if st.st_mode & 0o022 == 0o022 else "its group" if st.st_mode & 0o020 else "others"
        return f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def seal(*paths: str | os.PathLike) -> None:
    """Take group and other write permission off what a cache just wrote (a ``umask 002`` leaves it on)."""
    for p in paths:
        with contextlib.suppress(OSError):
            st = os.lstat(p)
            if st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode):
                os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o022)


class Store:
    """One cache folder: whether it may be read, its entries' trust, and damaged entries set aside.

    ``what`` names the cache in warnings ("stage cache"); ``trust`` as for ``trusted``. ``usable`` is False when
    the folder is not trusted: the cache then neither reads nor writes it."""

    def __init__(self, folder: str | os.PathLike, what: str, trust: bool | None = None) -> None:
        self.folder = Path(folder)
        self.what = what
        self.trust = trusted(trust)
        self.usable = True
        self.untrusted: list[str] = []  # entries not read because of who may have written them
        self.set_aside: list[str] = []  # entries moved aside because they failed their check
        if not self.trust:
            why = foreign(self.folder, follow=True)
            if why is not None:
                self.usable = False
                warn(
                    f"the {what} {self.folder} is not read: it {why}, so another user could have planted what it "
                    f"holds; the work goes on without it. If you trust it, pass {TRUST_HINT}; else make it yours "
                    f"and private (chmod go-w) or choose another cache folder"
                )

    def make(self, folder: str | os.PathLike | None = None) -> Path:
        """Create ``folder`` (default: the cache folder) and its missing parents, each ``0755``."""
        target = Path(folder) if folder is not None else self.folder
        missing = []
        p = target
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        for p in reversed(missing):
            with contextlib.suppress(FileExistsError):
                p.mkdir(mode=FOLDER_MODE)
            seal(p)
        return target

    def readable(self, *paths: str | os.PathLike) -> bool:
        """Whether the entries ``paths`` may be read: each is the user's own, private, and no link (always, with
        trust). The first that is not is named in one warning per cache; the caller computes it again."""
        if self.trust:
            return True
        for p in paths:
            why = foreign(p)
            if why is None:
                continue
            if not self.untrusted:
                warn(
                    f"the {self.what} {self.folder} holds entries that are not read: {p} {why} (it may have been "
                    f"planted); such entries are computed again. If you trust them, pass {TRUST_HINT}"
                )
            self.untrusted.append(str(p))
            return False
        return True

    def damaged(
        self, path: str | os.PathLike, problem: str, then: str, label: str | None = None, noun: str = "entry"
    ) -> str:
        """Report an entry that failed its check (``problem``: what is wrong, naming the file) and move it into
        ``damaged/``; ``then`` says what the cache does instead ("computed again"). Returns where it went."""
        where = set_aside(path, self.folder, label)
        self.set_aside.append(str(path))
        warn(f"{self.what} {noun} {problem}; it is {where} and {then}")
        return where

    def damaged_record(self, record: dict, problem: str, then: str, label: str) -> str:
        """As ``damaged`` for a record read from a database (written aside as JSON, the caller deletes it)."""
        where = write_aside(record, self.folder, label)
        self.set_aside.append(label)
        warn(f"{self.what} entry {problem}; it is {where} and {then}")
        return where


__all__ = ["DAMAGED", "TRUST_HINT", "Store", "foreign", "seal", "set_aside", "trusted", "trusting", "write_aside"]
