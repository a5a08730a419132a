"""The one writer of result folders: every command that writes a folder (``--out``) goes through here, and it
never deletes or replaces anything twostage did not write.

Each file twostage writes is atomic (``trec_io.atomic_write``), but a folder of them is not: a kill or a full
disk between two files leaves a page that says one number beside a summary that says another.
``result_folder(target, kind, names)`` gives a fresh temporary folder beside ``target`` (same file system, so
the rename is atomic); when the block ends without an error, the folder becomes ``target`` in one rename (an
existing result set is swapped out with ``renameat2(RENAME_EXCHANGE)`` where the system has it, else moved
aside first, so a reader sees the old set, briefly none, or the new one, never a mix), and the old set is
removed. On an error, the temporary folder is removed and ``target`` is untouched.

What may be replaced. Each set holds a manifest, ``.twostage-output.json``: its kind, a fresh id, when it was
written, the sha256 of every file in it (``files``) and its folders (``folders``). An existing ``target`` is
replaced only when each entry in it is one the manifest lists, with the checksum it lists; anything else
(a file or folder twostage did not write, dot-files such as ``.git/`` and ``.env`` included, a symbolic link,
a listed file changed since: its sha256 differs) is foreign, and the write is refused before anything is
computed into it, with a ``ConfigError`` naming the folder and the first foreign entry. A folder with no
manifest (written before manifests existed) is taken over only when it is empty or holds nothing but names
such a set writes. The check is made before the set is written, again just before the swap, and once more on
the swapped-out set (a file added in between is swapped back, never removed). The manifest also records each
file's ``os.stat`` (size, inode, modification and change time): a file whose stat is unchanged is not read
again to compare its sha256 (its change time moves on every write and cannot be set back by a user), so a
large set (an index: ``toolkit.retrieval.indexing``, which hands its sha256s over in ``known``) is read once.

Where. ``target`` is resolved first (``--out .``, ``--out "$PWD"``, relative parts, symbolic links): a link
is followed and the set is written into the folder it points at; the link stays. The current folder, or a
folder holding it, is refused (the swap would pull it from under the shell).

Temporary folders are named ``.NAME.twostage-new-XXXXXXXX.tmp`` beside ``target`` and locked (``flock``) while
a writer uses them; they are removed on failure. One left by a kill is removed by the next write into the same
folder when it is older than a day, not locked, and owned by this user (older twostage versions named them
``.NAME.XXXXXXXX.tmp``: those are removed only when they hold a manifest; their index builds
``.NAME.buildingPID``: only when no process PID runs). Nothing else there is touched.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

log = logging.getLogger("toolkit")

MARKER = ".twostage-output.json"
#: The temporary folders this module makes beside a target (``new``: being written; ``old``: a set moved aside).
TEMP = re.compile(r"^\..+\.twostage-(?:new|old)-[a-z0-9_]{8}\.tmp$")
#: The temporary folders of earlier versions, removed only when they hold a manifest.
OLD_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
#: The build folders of earlier versions' index builds (``.NAME.buildingPID``), removed only when their process
#: is gone.
OLD_BUILD = re.compile(r"^\..+\.building(\d+)$")
#: A temporary folder untouched this long (and not locked) was left by a kill.
STALE_SECONDS = 24 * 3600


def resolve_target(target: str | os.PathLike) -> Path:
    """The folder a result set is written into: absolute, ``~``, ``.`` and ``..`` resolved, symbolic links
    followed (a link's target, not the link, receives the set)."""
    from toolkit.errors import ConfigError

    path = Path(os.path.realpath(Path(target).expanduser()))
    if path.name in ("", ".", ".."):
        raise ConfigError(f"{target}: cannot write a result folder at the file system's root; choose another folder")
    return path


def _foreign_message(target: Path, kind: str, entry: str) -> str:
    return (
        f"{target} holds {entry}, which twostage's {kind} output did not write; nothing was written (twostage "
        f"replaces only the files listed in its {MARKER}): choose another output folder, or move {entry} away"
    )


def first_foreign(
    folder: str | os.PathLike, kind: str, names: Iterable[str] = (), checksums: bool = True
) -> str | None:
    """The first entry of ``folder`` that twostage's ``kind`` output did not write (as the module says), quoted
    and with the reason where it is not plain; None when ``folder`` is absent or may be replaced whole.

    Entries are visited breadth-first in name order, so a top-level ``.env`` is named before a nested file.
    ``names`` (of a folder without a manifest) may be glob patterns (``segments_*``). ``checksums=False`` skips
    comparing the listed files' sha256 (the check made on a set just swapped out); a file whose ``os.stat`` is
    the one the manifest recorded for it (size, inode, modification and change time) is not read again.
    """
    folder = Path(folder)
    if not os.path.lexists(folder):
        return None
    if folder.is_symlink() or not folder.is_dir():
        return f"'{folder.name}' (not a folder)"
    marker = folder / MARKER
    if not os.path.lexists(marker):
        patterns = tuple(names)
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if not any(fnmatch.fnmatchcase(entry.name, p) for p in patterns) or entry.is_symlink():
                return repr(entry.name) + (" (a symbolic link)" if entry.is_symlink() else "")
        return None
    manifest = _read_manifest(marker)
    if manifest is None:
        return f"'{MARKER}' (not a manifest twostage can read)"
    if manifest.get("kind") != kind:
        return f"'{MARKER}' (the manifest of a twostage {manifest.get('kind')} output, not of a {kind})"
    files: dict[str, str] = manifest["files"]
    folders = set(manifest.get("folders") or ()) | {p for f in files for p in _parents(f)}
    todo: deque[str] = deque([""])
    while todo:
        rel_dir = todo.popleft()
        for entry in sorted(os.scandir(folder / rel_dir), key=lambda e: e.name):
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink():
                return f"'{rel}' (a symbolic link)"
            if entry.is_dir():
                if rel not in folders:
                    return repr(rel)
                todo.append(rel)
            elif not entry.is_file():
                return f"'{rel}' (not a regular file)"
            elif rel != MARKER and rel not in files and not (entry.name == MARKER and rel_dir in folders):
                return repr(rel)
    if checksums:
        from toolkit.data.trec_io import sha256_file

        stats = manifest.get("stats") if isinstance(manifest.get("stats"), dict) else {}
        for rel, sha in sorted(files.items()):
            path = folder / rel
            if not path.is_file() or stats.get(rel) == _stat(path):
                continue  # unchanged since hashed: a change time cannot be set back
            if sha256_file(path) != sha:
                return f"'{rel}' (changed since twostage wrote it: its sha256 differs from the manifest's)"
    return None


def _stat(path: Path) -> list[int]:
    """What ``os.stat`` says of a file that changes when it is written or replaced (the change time is set by
    the system on every write, rename into place or ``touch``, and cannot be set back by a user)."""
    st = path.stat()
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _read_manifest(marker: Path) -> dict | None:
    try:
        manifest = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) and _safe_rel(k) for k, v in manifest["files"].items()):
        return None
    folders = manifest.get("folders", [])
    if not isinstance(folders, list) or not all(isinstance(f, str) and _safe_rel(f) for f in folders):
        return None
    return manifest


def _safe_rel(rel: str) -> bool:
    """A relative path that stays inside its folder (a manifest is a file anyone could edit)."""
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in rel.split("/"))


def check_target(target: str | os.PathLike, kind: str, names: Iterable[str] = ()) -> Path:
    """The resolved folder a ``kind`` result set may be written into (``resolve_target``); call it before long
    work, so a refusal comes first.

    Raises:
        ConfigError: ``target`` holds an entry twostage did not write (named), is not a folder, or is the
            current folder or holds it.
    """
    from toolkit.errors import ConfigError

    path = resolve_target(target)
    foreign = first_foreign(path, kind, names)
    if foreign is not None:
        raise ConfigError(_foreign_message(path, kind, foreign))
    cwd = Path(os.path.realpath(os.getcwd()))
    if path == cwd or path in cwd.parents:
        raise ConfigError(
            f"{path} is the current folder or holds it; twostage puts a result folder in place by renaming it, "
            f"which would pull the current folder from under you: choose a folder inside it (e.g. --out {kind})"
        )
    return path


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _manifest(folder: Path, kind: str, run_id: str, known: dict[str, str] | None = None) -> dict:
    """What the set in ``folder`` holds: every file but the top-level marker (nested sets' markers included),
    with its sha256 (from ``known`` where the writer of the set hashed it already) and its ``os.stat``
    (``_stat``), and every folder."""
    from toolkit.data.trec_io import sha256_file

    known = known or {}
    files: dict[str, str] = {}
    stats: dict[str, list[int]] = {}
    folders: list[str] = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink() or rel == MARKER:
            continue
        if p.is_dir():
            folders.append(rel)
        elif p.is_file():
            files[rel] = known.get(rel) or sha256_file(p)
            stats[rel] = _stat(p)
    return {
        "kind": kind,
        "id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": files,
        "folders": folders,
        "stats": stats,
    }


@contextlib.contextmanager
def result_folder(
    target: str | os.PathLike, kind: str, names: Iterable[str] = (), known: dict[str, str] | None = None
) -> Iterator[Path]:
    """A temporary folder to write a result set into; it replaces ``target`` in one rename when the block ends.

    ``kind`` names the set (``diagnosis``, ``comparison``, ``experiment``, ``reproduction``, ``lucene-index``,
    ``dense-index``); ``names`` are the top-level names (or glob patterns) such a set writes, so a set written
    before manifests existed may be taken over. ``target`` is resolved first (``check_target``): a symbolic
    link is followed, the link stays. ``known`` maps relative file names to the sha256 the block computed
    already (a large index is hashed once); the block may fill it in, and the other files are hashed here.

    Raises:
        ConfigError: ``target`` holds an entry twostage did not write, or is the current folder (before
            anything is written; ``check_target``), or such an entry appeared while the set was written.
    """
    import fcntl

    from toolkit.data.trec_io import write_json

    names = tuple(names)
    target = check_target(target, kind, names)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.twostage-new-", suffix=".tmp", dir=target.parent))
    fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # in use: the stale-folder sweep of another writer leaves it alone
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder the usual permissions
        run_id = uuid.uuid4().hex
        yield tmp
        write_json(tmp / MARKER, _manifest(tmp, kind, run_id, known))
        _install(tmp, target, kind, names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the failed set, or after a swap the previous one
        os.close(fd)


def _install(tmp: Path, target: Path, kind: str, names: tuple[str, ...]) -> None:
    """Put the set at ``tmp`` in place of ``target``; the previous set, if any, is left at ``tmp``."""
    from toolkit.errors import ConfigError

    if not os.path.lexists(target):
        try:
            os.rename(tmp, target)  # onto nothing (or an empty folder, which POSIX rename replaces)
            return
        except OSError as exc:  # a folder with entries appeared there meanwhile: checked below
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    foreign = first_foreign(target, kind, names)
    if foreign is not None:  # written there by someone else while this set was computed
        raise ConfigError(_foreign_message(target, kind, foreign) + " (it appeared while the set was written)")
    if _exchange(tmp, target):
        late = first_foreign(tmp, kind, names, checksums=False)
        if late is not None:  # added in the instant between the check and the swap: put it all back
            _exchange(tmp, target)
            raise ConfigError(_foreign_message(target, kind, late) + " (it appeared while the set was written)")
        return  # the previous set now lies at tmp, which the caller removes
    old = tmp.with_name(tmp.name.replace(".twostage-new-", ".twostage-old-"))
    os.rename(target, old)
    os.rename(tmp, target)
    late = first_foreign(old, kind, names, checksums=False)
    if late is not None:
        os.rename(target, tmp)
        os.rename(old, target)
        raise ConfigError(_foreign_message(target, kind, late) + " (it appeared while the set was written)")
    shutil.rmtree(old, ignore_errors=True)


def remove_stale(parent: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders a killed writer left in ``parent`` (as the module says); returns them."""
    import fcntl

    removed: list[Path] = []
    try:
        entries = list(os.scandir(os.fspath(Path(parent))))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        current = TEMP.match(entry.name)
        build = OLD_BUILD.match(entry.name)
        if not current and not build and not OLD_TEMP.match(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < STALE_SECONDS:
            continue
        path = Path(entry.path)
        if build and _running(int(build.group(1))):
            continue  # an earlier version's index build whose process may still be at work
        if not current and not build and not (path / MARKER).is_file():
            continue  # an earlier version's name without its manifest: it may be anyone's
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a writer is using it
        try:
            shutil.rmtree(path)
            removed.append(path)
            log.info("twostage: removed %s, a temporary folder left by an interrupted write", path)
        except OSError as exc:
            log.warning("twostage: could not remove the stale temporary folder %s (%s)", path, exc)
        finally:
            os.close(fd)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # another user's process (EPERM), or a pid the system cannot name: leave it be
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
