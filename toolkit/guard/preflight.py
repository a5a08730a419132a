"""Expected failures found before the work, and said in one line when they come during it.

- ``check_writable(path, option)``: the folder an output goes to can be written (a probe file made and
  removed there; permission bits alone would pass root on a read-only mount), checked when the option is
  parsed, before any input is read;
- ``check_free_space(path, need, what, option)``: room for an estimated output;
- ``native_fs_errno(text, building)``: the errno a native message (Java's, FAISS's) reports for a refused write;
- ``os_error_message(exc)``: an ``OSError`` of the file system (``FS_ERRNOS``: disk full, quota, file-size limit,
  read-only, permission, a missing folder, a file or a loop of links on the path, a name too long) as one
  sentence naming the file and the fix (the CLI prints it as its one ``Error:`` line); ``naming(exc, path)``: the
  same error naming the path the user gave instead of a temporary file written for it;
- ``build_lock(out)``: one process at a time builds an index into one folder (an advisory ``flock`` on a
  ``.NAME.lock`` file beside it); a second one is refused at once, naming the holder;
- ``current_umask()``: the process's umask, read without changing it where the system allows, for the
  permissions a written file or folder is given.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

from toolkit.errors import ConfigError

#: errno -> (what happened, the fix): every error the file system gives a write, a cache or a folder it makes
_FS_ERRORS = MappingProxyType(
    {
        errno.ENOSPC: ("no space left on the device", "free space there or write the output elsewhere"),
        errno.EDQUOT: ("disk quota exceeded", "free space in your quota or write the output elsewhere"),
        errno.EFBIG: (
            "file too large (over the file-size limit, ulimit -f, or what the file system holds)",
            "raise the limit (ulimit -f) or write the output to another file system",
        ),
        errno.EROFS: ("read-only file system", "write the output to a folder on a writable file system"),
        errno.EACCES: ("permission denied", "write the output to a folder you can write, or change its permissions"),
        errno.EPERM: ("operation not permitted", "write the output to a folder you can write"),
        errno.ENOENT: ("no such file or folder", "give a path whose folders exist or can be made"),
        errno.ENOTDIR: ("a part of the path is a file, not a folder", "give a path whose folders are folders"),
        errno.ELOOP: ("a symbolic link on the path leads back to itself", "give a path without a loop of links"),
        errno.ENAMETOOLONG: ("the name is longer than the file system allows", "give a shorter name or path"),
        errno.EISDIR: ("a folder, not a file", "give a file path"),
    }
)

#: The errnos of the file system refusing a write, a cache or a folder (full, over quota or the file-size
#: limit, read-only, no permission, a path that cannot be made): a write names its file in one ``Error:`` line,
#: the previous output kept; a cache ends the work with one ``CacheUnusableError`` naming its folder
#: (``toolkit.guard.store.cannot``).
FS_ERRNOS = frozenset(_FS_ERRORS)

#: What a failing write reports, in the C library's words (Java and FAISS quote ``strerror``), as its errno.
#: Only writes fail so, except for a denied access, which counts only on a path in the folder being built.
NATIVE_FS_ERRORS = (
    ("No space left on device", errno.ENOSPC, False),
    ("Disk quota exceeded", errno.EDQUOT, False),
    ("Read-only file system", errno.EROFS, False),
    ("File too large", errno.EFBIG, False),
    ("AccessDeniedException", errno.EACCES, True),
    ("Permission denied", errno.EACCES, True),
)


def native_fs_errno(text: str, building: str) -> int | None:
    """The errno of a file-system failure writing into ``building`` that a native message (Java, FAISS) reports."""
    return next((code for said, code, own in NATIVE_FS_ERRORS if said in text and (not own or building in text)), None)


def os_error_message(exc: OSError) -> str | None:
    """One sentence for a file-system ``OSError`` (naming its file and the fix): the words of ``FS_ERRNOS``, or
    the system's for another error that names a file; None for an error that names none (a socket's, a bug)."""
    known = _FS_ERRORS.get(exc.errno or 0)
    if known is None and exc.filename is None:
        return None
    name = os.fsdecode(exc.filename) if exc.filename is not None else "(file not named by the system)"
    if known is None:
        return f"{name}: {(exc.strerror or type(exc).__name__).lower()}; check the path and the file system there"
    what, fix = known
    return f"{name}: {what}; {fix}"


def fs_words(exc: OSError) -> str:
    """What happened, in the words of ``os_error_message`` (the system's for an errno it does not know)."""
    known = _FS_ERRORS.get(exc.errno or 0)
    return known[0] if known else (exc.strerror or type(exc).__name__).lower()


def naming(exc: OSError, path: str | os.PathLike) -> OSError:
    """``exc`` (same class and errno) naming ``path``: the file the user asked for, not a temporary one."""
    if exc.errno is None or (exc.filename is not None and os.fsdecode(exc.filename) == os.fspath(path)):
        return exc
    return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), os.fspath(path))


def make_folder(folder: str | os.PathLike) -> None:
    """``folder`` and its missing parents; an ``OSError`` saying why not (not ``FileExistsError`` when what is in
    the way is a file, ``ENOTDIR``, or a loop of symbolic links, ``ELOOP``)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        os.stat(folder)  # a loop of links: ELOOP
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder)) from None


def _existing_folder(path: Path) -> Path:
    """The nearest folder of ``path`` that exists (``path`` itself when it is one); an ``OSError`` other than a
    missing entry (a loop of links, a name too long, no permission to look) is raised."""
    p = path
    while True:
        try:
            os.stat(p)
            return p
        except (FileNotFoundError, NotADirectoryError):  # absent, or under a file (said by the caller)
            if p.parent == p:
                return p
            p = p.parent


def check_writable(path: str | os.PathLike, option: str = "--out", folder: bool = False) -> None:
    """``ConfigError`` unless an output at ``path`` (a file, or a ``folder``) could be written.

    Nothing is left behind: no folder is made; a probe file is created in the nearest existing folder
    and removed at once. A path the system cannot follow (a loop of links, a name too long) is refused too.
    """
    target = Path(path).absolute()
    try:
        existing = _existing_folder(target if folder else target.parent)
        try:
            kind = "a folder" if stat.S_ISDIR(os.stat(target).st_mode) else "a file"
        except (FileNotFoundError, NotADirectoryError):
            kind = None
    except OSError as exc:
        what, fix = _FS_ERRORS.get(exc.errno or 0, (exc.strerror or type(exc).__name__, "choose another path"))
        raise ConfigError(f"{option} {path}: {what}; {fix}") from None
    if kind is not None and (kind == "a folder") != folder:
        raise ConfigError(f"{option} {path}: {target} is {kind}; give a {'folder' if folder else 'file'} path")
    if not existing.is_dir():
        raise ConfigError(f"{option} {path}: {existing} is a file, not a folder; give a path whose folders are folders")
    try:
        fd, probe = tempfile.mkstemp(prefix=".twostage-write-probe-", dir=existing)
    except OSError as exc:
        what, fix = _FS_ERRORS.get(exc.errno or 0, (exc.strerror or type(exc).__name__, "choose another path"))
        raise ConfigError(f"{option} {path}: cannot write in {existing} ({what}); {fix}") from None
    os.close(fd)
    os.unlink(probe)


def check_free_space(path: str | os.PathLike, need: int, what: str, option: str = "--out") -> None:
    """``ConfigError`` when the file system of ``path`` has less than ``need`` bytes free for ``what``."""
    folder = _existing_folder(Path(path).absolute())
    free = shutil.disk_usage(folder).free
    if need > free:
        raise ConfigError(
            f"{option} {path}: {what} needs about {human_bytes(need)}, but {folder} has {human_bytes(free)} free; "
            "free space there or choose another folder"
        )


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def lock_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(f".{out.name}.lock")


@contextlib.contextmanager
def build_lock(out: str | os.PathLike, what: str = "index") -> Iterator[None]:
    """Hold the build lock of ``out`` while building it; ``ConfigError`` at once when another process holds it.

    The lock is an advisory ``flock`` (released by the kernel when its holder exits, even when killed), on a
    file beside the output holding the holder's pid; the file itself stays (removing it would race).
    """
    import fcntl

    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ConfigError(
                f"{out}: another process (pid {holder}) is building this {what} now (lock {path}); wait for it to "
                "finish and run again (its result will be reused), or give another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read at each call (a caller may change it between two writes). On Linux it is read
    from ``/proc/self/status`` ("Umask:"), which changes nothing; elsewhere it is read the only way POSIX
    offers, by setting it and setting it back, under a lock so that two readers in threads cannot leave
    ``0`` behind."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask
