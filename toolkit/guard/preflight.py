"""Expected failures found before the work, and said in one line when they come during it.

- ``check_writable(path, option)``: the folder an output goes to can be written (a probe file made and
  removed there; permission bits alone would pass root on a read-only mount), checked when the option is
  parsed, before any input is read;
- ``check_free_space(path, need, what, option)``: room for an estimated output;
- ``native_fs_errno(text, building)``: the errno a native message (Java's, FAISS's) reports for a refused write;
- ``os_error_message(exc)``: an ``OSError`` of the file system (disk full, quota, read-only, permission) as
  one sentence naming the file and the fix (the CLI prints it as its one ``Error:`` line);
- ``build_lock(out)``: one process at a time builds an index into one folder (an advisory ``flock`` on a
  ``.NAME.lock`` file beside it); a second one is refused at once, naming the holder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from toolkit.errors import ConfigError

#: errno -> (what happened, the fix)
_FS_ERRORS = {
    errno.ENOSPC: ("no space left on the device", "free space there or write the output elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", "free space in your quota or write the output elsewhere"),
    errno.EROFS: ("read-only file system", "write the output to a folder on a writable file system"),
    errno.EACCES: ("permission denied", "write the output to a folder you can write, or change its permissions"),
    errno.EPERM: ("operation not permitted", "write the output to a folder you can write"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "give a path whose folders are folders"),
}


#: The errnos of a write refused by the file system (full, over quota, read-only, no permission): what an
#: optional cache turns into a warning and a build into one ``Error:`` line.
UNWRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})

#: What a failing write reports, in the C library's words (Java and FAISS quote ``strerror``), as its errno.
#: Only writes fail so, except for a denied access, which counts only on a path in the folder being built.
NATIVE_FS_ERRORS = (
    ("No space left on device", errno.ENOSPC, False),
    ("Disk quota exceeded", errno.EDQUOT, False),
    ("Read-only file system", errno.EROFS, False),
    ("AccessDeniedException", errno.EACCES, True),
    ("Permission denied", errno.EACCES, True),
)


def native_fs_errno(text: str, building: str) -> int | None:
    """The errno of a file-system failure writing into ``building`` that a native message (Java, FAISS) reports."""
    return next((code for said, code, own in NATIVE_FS_ERRORS if said in text and (not own or building in text)), None)


def os_error_message(exc: OSError) -> str | None:
    """One sentence for a file-system ``OSError`` (naming its file and the fix); None for any other error."""
    known = _FS_ERRORS.get(exc.errno or 0)
    if known is None:
        return None
    what, fix = known
    name = exc.filename if exc.filename is not None else "(file not named by the system)"
    return f"{name}: {what}; {fix}"


def _existing_folder(path: Path) -> Path:
    """The nearest folder of ``path`` that exists (``path`` itself when it is one)."""
    p = path
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    return p


def check_writable(path: str | os.PathLike, option: str = "--out", folder: bool = False) -> None:
    """``ConfigError`` unless an output at ``path`` (a file, or a ``folder``) could be written.

    Nothing is left behind: no folder is made; a probe file is created in the nearest existing folder
    and removed at once.
    """
    target = Path(path).absolute()
    existing = _existing_folder(target if folder else target.parent)
    if target.exists() and target.is_dir() != folder:
        kind = "a folder" if target.is_dir() else "a file"
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
