"""One cache store: the stage cache (``toolkit.experiments.stage_cache``), the embedding cache
(``toolkit.jobs.embed_cache``), the ONNX export cache (``toolkit.reranking.onnx_cache``) and the judgments cache
(``toolkit.llm.answer_cache``) open their folder, check their entries and set damaged ones aside here.

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
- **A folder that cannot be used.** A cache folder the system cannot reach or make (a file or a loop of
  symbolic links on its path, a name too long, a missing folder that cannot be made there, as under
  ``HOME=/proc/1``), read or write (full, over quota or the file-size limit, read-only, no permission: the errnos
  of ``toolkit.guard.preflight.FS_ERRNOS``), whenever the cache meets it (opening, reading, writing), ends the
  work with one ``toolkit.errors.CacheUnusableError`` (one ``Error:`` line in the CLI, exit 1): it names the
  folder as the user set it (an option, ``$TWOSTAGE_CACHE`` or the default under ``$HOME``: ``Setting``), the
  reason, and the way to run without the cache (where the command has one) or with another folder. The work
  stops before any output is written, so the previous outputs stay. ``Store.cannot`` is that decision, for
  every cache; an error of another kind (another errno, a file outside the cache) is raised as it came. An entry
  that is absent when read (removed by another process since it was listed) is a miss, not an error.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from toolkit.errors import CacheUnusableError, phrase
from toolkit.notices import warn

#: The folder inside a cache where damaged entries are moved aside.
DAMAGED = "damaged"

#: How a message names the way to trust a cache: ``--trust-cache`` in the CLI, ``trust_cache=True`` in the library.
TRUST_HINT = phrase("trust_cache=True", "--trust-cache")

_TRUST: contextvars.ContextVar[bool] = contextvars.ContextVar("twostage_trust_cache", default=False)

#: The mode of the folders the store makes (the umask may take bits away, never add group or other write).
FOLDER_MODE = 0o755

#: The variable that sets the folder of every cache (``cache_root``).
CACHE_ENV = "TWOSTAGE_CACHE"


def cache_root() -> Path:
    """The folder the caches live in: ``$TWOSTAGE_CACHE``, else ``~/.cache/twostage``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "twostage")


def root_origin() -> str:
    """Where ``cache_root()`` came from, in words for a message: the variable, or the default under ``$HOME``."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return f"under {CACHE_ENV}={given}"
    home = os.environ.get("HOME")
    return f"the default: ~/.cache/twostage with {f'HOME={home}' if home else 'HOME unset'}, {CACHE_ENV} not set"


@dataclass(frozen=True)
class Setting:
    """How a cache's folder was set, for the error that says it cannot be used (``unusable``).

    ``folder``: the folder to name (default: the store's own), as the user gave it when ``given``, else the
    default under ``cache_root()``; ``option``: the option that chooses the folder, as ``toolkit.errors.phrase``
    (``phrase("cache=FOLDER", "--cache DIR")``), None where the command has none; ``off``: the option that runs
    without the cache (``phrase("cache=False", "--no-cache")``), None where there is none."""

    folder: str | os.PathLike | None = None
    given: bool = False
    option: str | None = None
    off: str | None = None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def about(exc: OSError, folder: str | os.PathLike) -> bool:
    """Whether ``exc`` is about the cache ``folder``: it names no file, or a file in the folder or on the way to
    it (a parent that cannot be made or followed); an error naming another file (a model read by an export) is
    not the cache's."""
    if exc.filename is None:
        return True
    named = Path(os.path.abspath(os.fsdecode(exc.filename)))
    home = Path(os.path.abspath(folder))
    return _within(named, home) or _within(home, named)


def unusable(
    what: str,
    folder: str | os.PathLike,
    words: str,
    setting: Setting | None = None,
    filename: str | os.PathLike | None = None,
    code: int | None = None,
) -> CacheUnusableError:
    """The error saying that the ``what`` in ``folder`` cannot be used: the folder as it was set (``setting``),
    the reason (``words``, and the file the system named when it lies on the way to the folder) and the fix."""
    setting = setting or Setting()
    named = os.fspath(setting.folder if setting.folder is not None else folder)
    # a folder outside the default root was given by someone, if not through an option the message can name
    given = setting.given or not _within(Path(os.path.abspath(named)), Path(os.path.abspath(cache_root())))
    origin = (f"from {setting.option}" if setting.option else "as given") if given else root_origin()
    at = ""
    if filename is not None and not _within(Path(os.path.abspath(filename)), Path(os.path.abspath(folder))):
        at = f" at {os.fsdecode(filename)}"
    choose = [setting.option] if setting.option else []
    if not given:
        choose.append(f"{CACHE_ENV}=DIR")
    fix = f"run without it ({setting.off}), or " if setting.off else ""
    fix += "choose a folder you can write" + (f": {' or '.join(choose)}" if choose else "")
    return CacheUnusableError(
        f"the {what} {named} ({origin}) cannot be used: {words}{at}; {fix}",
        folder=named,
        errno=code,
        filename=os.fsdecode(filename) if filename is not None else None,
    )


def cannot(exc: BaseException, what: str, folder: str | os.PathLike, setting: Setting | None = None) -> NoReturn:
    """``exc`` met by the ``what`` in ``folder``: a ``CacheUnusableError`` (``unusable``) when it is an ``OSError``
    of ``FS_ERRNOS`` about the folder (``about``); any other error is raised as it came."""
    from toolkit.guard.preflight import FS_ERRNOS, fs_words

    if isinstance(exc, OSError) and exc.errno in FS_ERRNOS and about(exc, folder):
        raise unusable(what, folder, fs_words(exc), setting, exc.filename, exc.errno) from exc
    raise exc


@contextlib.contextmanager
def cache_errors(what: str, folder: str | os.PathLike, setting: Setting | None = None) -> Iterator[None]:
    """Inside the block, an ``OSError`` of ``FS_ERRNOS`` about ``folder`` ends the work as ``cannot`` says: for a
    cache that is no ``Store`` (the derived corpora, downloads, index checksums and indexes under
    ``$TWOSTAGE_CACHE``)."""
    try:
        yield
    except OSError as exc:
        cannot(exc, what, folder, setting)


def probe(what: str, folder: str | os.PathLike, setting: Setting | None = None) -> None:
    """Make ``folder`` (and its missing parents, each ``0755``) and write a probe file in it, removed at once: a
    cache that cannot be written is ``cannot``'s error before the work, rather than after its first result."""
    import tempfile

    with cache_errors(what, folder, setting):
        _make(Path(folder))
        fd, name = tempfile.mkstemp(prefix=".twostage-write-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)


def _make(target: Path) -> Path:
    """``target`` and its missing parents, each ``0755`` whatever the umask."""
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


def _move_aside(path: str | os.PathLike, cache_folder: str | os.PathLike, label: str | None = None) -> Path:
    """Move a damaged entry (file or folder) into ``cache_folder/damaged/`` under a unique name, so it is computed
    again and can still be inspected; returns where it went (an ``OSError`` when it cannot be moved)."""
    target = Path(cache_folder) / DAMAGED / f"{label or Path(path).name}-{_stamp()}"
    target.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def _write_aside(record: dict, cache_folder: str | os.PathLike, label: str) -> Path:
    """Keep a damaged record (a database row) as JSON in ``cache_folder/damaged/``; returns where."""
    import json

    target = Path(cache_folder) / DAMAGED / f"{label}-{_stamp()}.json"
    target.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return target


def foreign(path: str | os.PathLike, follow: bool = False) -> str | None:
    """Why ``path`` may hold what someone else put there: owned by another user, writable by group or others,
    or (``follow=False``) a symbolic link; None when it is the current user's own and private (or absent)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # a loop of links, a name too long, no permission to look: nothing to trust
        return f"cannot be looked at ({exc.strerror or exc})"
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

    def __init__(
        self, folder: str | os.PathLike, what: str, trust: bool | None = None, setting: Setting | None = None
    ) -> None:
        self.folder = Path(folder)
        self.what = what
        self.setting = setting or Setting()
        self.trust = trusted(trust)
        self.usable = True
        self.untrusted: list[str] = []  # entries not read because of who may have written them
        self.set_aside: list[str] = []  # entries moved aside because they failed their check
        try:
            os.stat(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            pass  # made when first written; a path that cannot be made is said then (``cannot``)
        except OSError as exc:
            self.cannot(exc)
        if not self.trust:
            why = foreign(self.folder, follow=True)
            if why is not None:
                self.usable = False
                warn(
                    f"the {what} {self.folder} is not read: it {why}, so another user could have planted what it "
                    f"holds; the work goes on without it. If you trust it, pass {TRUST_HINT}; else make it yours "
                    f"and private (chmod go-w) or choose another cache folder"
                )

    def cannot(self, exc: BaseException) -> NoReturn:
        """The folder cannot be reached, read or written (``exc``, an ``OSError`` of ``FS_ERRNOS`` about it): one
        ``CacheUnusableError`` naming the folder as it was set, the reason and the fix; any other error is raised
        as it came (``toolkit.guard.store.cannot``)."""
        cannot(exc, self.what, self.folder, self.setting)

    def fail(self, words: str, filename: str | os.PathLike | None = None, code: int | None = None) -> NoReturn:
        """As ``cannot``, for a refusal a native library reports in its own words (SQLite's)."""
        raise unusable(self.what, self.folder, words, self.setting, filename, code)

    @contextlib.contextmanager
    def guarded(self) -> Iterator[None]:
        """Inside the block, an ``OSError`` of ``FS_ERRNOS`` about the folder is ``cannot``'s error."""
        try:
            yield
        except OSError as exc:
            self.cannot(exc)

    def probe(self) -> None:
        """Make the folder and write a probe file in it (removed at once), so that a cache that cannot be written
        is said before the work rather than after its first result (``cannot``); nothing when it is not used."""
        if self.usable:
            probe(self.what, self.folder, self.setting)

    def make(self, folder: str | os.PathLike | None = None) -> Path:
        """Create ``folder`` (default: the cache folder) and its missing parents, each ``0755``."""
        return _make(Path(folder) if folder is not None else self.folder)

    def readable(self, *paths: str | os.PathLike) -> bool:
        """Whether the entries ``paths`` may be read: each is the user's own, private, and no link (always, with
        trust). The first that is not is named in one warning per cache; the caller computes it again. An entry
        the system cannot look at (no permission on its folder, a name too long) is ``cannot``'s error."""
        if self.trust:
            return True
        for p in paths:
            try:
                os.lstat(p)
            except FileNotFoundError:
                continue  # absent: a miss, which the caller finds
            except OSError as exc:
                self.cannot(exc)
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
        ``damaged/``; ``then`` says what the cache does instead ("computed again"). Returns where it went. A
        folder that refuses the move (``FS_ERRNOS``) is ``cannot``'s error."""
        where = self.aside(path, label)
        self.set_aside.append(str(path))
        warn(f"{self.what} {noun} {problem}; it is {where} and {then}")
        return where

    def aside(self, path: str | os.PathLike, label: str | None = None) -> str:
        """Move ``path`` into ``damaged/`` under a unique name, without a warning; returns what happened ("moved to
        ..."). A folder that refuses the move (``FS_ERRNOS``) is ``cannot``'s error; an entry another process
        moved first is gone already, and another refusal leaves it in place."""
        try:
            return f"moved to {_move_aside(path, self.folder, label)}"
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not os.path.lexists(path):
                return "gone already (set aside by another process)"
            self._refused(exc)
            return f"left in place, could not be moved aside ({exc.strerror or exc})"

    def damaged_record(self, record: dict, problem: str, then: str, label: str) -> str:
        """As ``damaged`` for a record read from a database (written aside as JSON, the caller deletes it)."""
        try:
            where = f"kept in {_write_aside(record, self.folder, label)}"
        except OSError as exc:
            self._refused(exc)
            where = f"not kept, could not be written aside ({exc.strerror or exc})"
        self.set_aside.append(label)
        warn(f"{self.what} entry {problem}; it is {where} and {then}")
        return where

    def _refused(self, exc: OSError) -> None:
        """``cannot``'s error for an ``OSError`` of ``FS_ERRNOS`` about the folder; nothing for another."""
        from toolkit.guard.preflight import FS_ERRNOS

        if exc.errno in FS_ERRNOS and about(exc, self.folder):
            self.cannot(exc)


__all__ = [
    "CACHE_ENV",
    "DAMAGED",
    "TRUST_HINT",
    "Setting",
    "Store",
    "about",
    "cache_errors",
    "cache_root",
    "cannot",
    "foreign",
    "probe",
    "root_origin",
    "seal",
    "trusted",
    "trusting",
    "unusable",
]
