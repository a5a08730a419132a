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

Temporary folders. A write makes ``.NAME.twostage-new-TOKEN.tmp`` beside ``target`` (``TOKEN``: 32 random hex
digits, ``secrets.token_hex``), locks it (``flock``) and writes into it, before anything else, its marker
``.twostage-temporary.json``: the folder's name, the token, its device and inode, and the writing process. The
marker is the proof that this module made the folder: the stale-folder sweep (``remove_stale``, run by the next
write into the same parent) removes a folder only when its name carries a token, its marker (a regular file,
not a link, owned by this user) holds that token, that very name and the folder's own device and inode (a
marker copied into another folder, or a folder copied or renamed, does not match), and the folder is older
than a day, not locked, owned by this user, and its process is gone. A name alone proves nothing: a user's
``.thesis.building4194999/`` or ``.photos.20240101.tmp/`` beside ``--out`` is never touched, and neither are
the temporary folders of earlier versions (``.NAME.XXXXXXXX.tmp``, ``.NAME.buildingPID``,
``.NAME.twostage-new-XXXXXXXX.tmp``), which carry no marker: remove those by hand. A set swapped out is marked
the same way before it is moved (so a kill while it is removed leaves it sweepable), and a marker is removed
last when a folder is removed. A set just put in place loses its marker; one left there by a kill in between is
recognised by its inode and replaced with the set.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import logging
import os
import re
import secrets
import shutil
import stat
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

log = logging.getLogger("toolkit")

MARKER = ".twostage-output.json"
#: The temporary folders this module makes beside a target (``new``: being written; ``old``: a set moved aside),
#: each named with the random token its marker holds.
TEMP = re.compile(r"^\..*\.twostage-(?:new|old)-([0-9a-f]{32})\.tmp$")
#: The marker a temporary folder holds from its first instant (the module says what it proves).
TEMP_MARKER = ".twostage-temporary.json"
#: The most of ``target``'s name a temporary folder's name repeats (a long name would leave no room for the token).
_NAME_PART = 64
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
            if entry.name == TEMP_MARKER and _marked(folder):
                continue  # the marker of a set a kill left just after its rename: this module's own
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
            if rel == TEMP_MARKER and _marked(folder):
                continue  # the marker of a set a kill left just after its rename: this module's own
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
        if p.is_symlink() or rel in (MARKER, TEMP_MARKER):
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
        OSError: the file system refused a write (full, over quota, over the file-size limit, read-only, no
            permission, a path that cannot be made), naming ``target`` as given (or the file of the set under
            it), never the temporary folder; ``target`` is left as it was.
    """
    from toolkit.data.trec_io import write_json
    from toolkit.guard.preflight import make_folder

    names = tuple(names)
    given = os.fspath(target)
    try:
        target = check_target(target, kind, names)
        make_folder(target.parent)
    except OSError as exc:
        raise as_given(exc, given) from exc
    remove_stale(target.parent)
    try:
        tmp, token, fd = _make_temporary(target)
    except OSError as exc:
        raise as_given(exc, given) from exc
    at_tmp: int | None = os.fstat(fd).st_ino  # what lies at tmp now: the new set, or after a swap the old one
    installing = False
    try:
        try:
            yield tmp
            write_json(tmp / MARKER, _manifest(tmp, kind, run_id=uuid.uuid4().hex, known=known))
            installing = True
            at_tmp = _install(tmp, target, kind, names, token)
        except OSError as exc:
            raise as_given(exc, given, tmp) from exc
    finally:
        if installing:  # the previous set after a swap, or the new one put back: only on the proof it is ours
            _remove_ours(tmp, token, at_tmp)
        else:  # the failed set, still where this process made it and holds it locked
            _remove(tmp)
        os.close(fd)


def as_given(exc: OSError, given: str, tmp: Path | None = None) -> OSError:
    """``exc`` naming the path the caller was given (``given``, or the file under it) where it names the
    temporary folder ``tmp``, another temporary folder of this module beside the target, the resolved target,
    a folder on the way to it, or no file at all; an error naming another file (an input read inside the block)
    is returned as it is."""
    from toolkit.guard.preflight import FS_ERRNOS, naming

    if exc.errno is None:
        return exc
    if exc.filename is None:
        return naming(exc, given) if exc.errno in FS_ERRNOS else exc
    name = os.path.abspath(os.fsdecode(exc.filename))
    target = os.path.realpath(os.path.expanduser(given))
    parent = os.path.dirname(target)
    bases = [str(tmp)] if tmp is not None else []
    if name.startswith(parent + os.sep) and TEMP.match(name[len(parent) + 1 :].split(os.sep, 1)[0]):
        bases.append(os.path.join(parent, name[len(parent) + 1 :].split(os.sep, 1)[0]))
    for base in [*bases, target]:
        if name == base or name.startswith(base + os.sep):
            rel = name[len(base) + 1 :]
            inside = rel and rel != TEMP_MARKER  # the marker is this module's, not a file of the set
            return naming(exc, os.path.join(given, rel) if inside else given)
    if target.startswith(name.rstrip(os.sep) + os.sep):  # a folder on the way that could not be made
        return naming(exc, given)
    return exc


def _make_temporary(target: Path) -> tuple[Path, str, int]:
    """A fresh temporary folder beside ``target`` (named with a random token), locked, its marker written first;
    (the folder, its token, the open descriptor holding the lock)."""
    import fcntl

    from toolkit.guard.preflight import current_umask

    stem = os.fsdecode(os.fsencode(target.name)[:_NAME_PART])
    for _ in range(8):
        token = secrets.token_hex(16)
        tmp = target.with_name(f".{stem}.twostage-new-{token}.tmp")
        try:
            os.mkdir(tmp, 0o700)  # private until the marker is written and the usual permissions given
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free name for a temporary folder", str(target))
    fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # in use: the stale-folder sweep of another writer leaves it alone
        _mark(tmp, tmp.name, token)
        os.chmod(tmp, 0o777 & ~current_umask())
    except BaseException:
        _remove(tmp)
        os.close(fd)
        raise
    return tmp, token, fd


def _mark(folder: Path, name: str, token: str) -> None:
    """Write ``folder``'s marker: it is (to be) named ``name``, carries ``token``, and is the folder with this
    device and inode (a copy of the marker in another folder, or of the folder, proves nothing)."""
    st = os.stat(folder, follow_symlinks=False)
    doc = {
        "token": token,
        "folder": name,
        "device": st.st_dev,
        "inode": st.st_ino,
        "pid": os.getpid(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    fd = os.open(folder / TEMP_MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, json.dumps(doc).encode())
    finally:
        os.close(fd)


def _unmark(folder: Path) -> None:
    """Take the marker out of a set now in place (one a kill leaves there is recognised by its inode)."""
    with contextlib.suppress(OSError):
        os.unlink(folder / TEMP_MARKER)


def _marker(dir_fd: int) -> dict | None:
    """The marker of the folder open as ``dir_fd`` when it is this module's and names this very folder: a
    regular file (not a link, nor a FIFO) owned by this user, holding a token and a name, and the folder's own
    device and inode; None otherwise."""
    try:
        fd = os.open(TEMP_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size > 4096:
            return None
        doc = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    here = os.fstat(dir_fd)
    if not isinstance(doc, dict) or not isinstance(doc.get("token"), str) or not isinstance(doc.get("folder"), str):
        return None
    if type(doc.get("device")) is not int or type(doc.get("inode")) is not int:
        return None
    if (doc["device"], doc["inode"]) != (here.st_dev, here.st_ino):
        return None
    return doc


def _marked(folder: Path) -> bool:
    """Whether ``folder`` holds a marker of this module naming it (by device and inode)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return _marker(fd) is not None
    finally:
        os.close(fd)


def _remove(path: Path, fd: int | None = None) -> None:
    """Remove a folder this module made, its marker last: a kill part-way leaves it marked, so still swept.
    With ``fd`` (the folder, open, its marker checked), what it holds is removed through that descriptor, so a
    folder put at ``path`` meanwhile loses nothing."""
    try:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in os.scandir(fd if fd is not None else path)]
    except OSError:
        return
    for name, is_dir in entries:
        if name == TEMP_MARKER:
            continue
        if is_dir:
            if fd is not None:
                shutil.rmtree(name, ignore_errors=True, dir_fd=fd)
            else:
                shutil.rmtree(path / name, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(name if fd is not None else path / name, dir_fd=fd)
    with contextlib.suppress(OSError):
        os.unlink(TEMP_MARKER if fd is not None else path / TEMP_MARKER, dir_fd=fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)  # empty by now, or not the folder checked: then it stays


def _remove_ours(path: Path, token: str, inode: int | None) -> None:
    """Remove ``path`` when it is this write's: its marker holds ``token`` and its name, or it is the folder
    (``inode``) this process put there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return  # renamed into place, or never made
    try:
        marker = _marker(fd)
        ours = marker is not None and marker["token"] == token and marker["folder"] == path.name
        if ours or os.fstat(fd).st_ino == inode:
            _remove(path, fd)
    finally:
        os.close(fd)


def _install(tmp: Path, target: Path, kind: str, names: tuple[str, ...], token: str) -> int | None:
    """Put the set at ``tmp`` in place of ``target``; the previous set, if any, is left at ``tmp``, marked with
    ``token``. Returns the inode of what lies at ``tmp`` now (None: nothing)."""
    from toolkit.errors import ConfigError

    if not os.path.lexists(target):
        try:
            os.rename(tmp, target)  # onto nothing (or an empty folder, which POSIX rename replaces)
            _unmark(target)
            return None
        except OSError as exc:  # a folder with entries appeared there meanwhile: checked below
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    foreign = first_foreign(target, kind, names)
    if foreign is not None:  # written there by someone else while this set was computed
        raise ConfigError(_foreign_message(target, kind, foreign) + " (it appeared while the set was written)")
    previous = os.stat(target).st_ino
    try:
        _mark(target, tmp.name, token)  # marked before it moves: a kill while it is removed leaves it swept later
    except OSError:
        _unmark(target)  # the previous set as it was
        raise
    if _exchange(tmp, target):
        late = first_foreign(tmp, kind, names, checksums=False)
        if late is not None:  # added in the instant between the check and the swap: put it all back
            _exchange(tmp, target)
            _unmark(target)
            raise ConfigError(_foreign_message(target, kind, late) + " (it appeared while the set was written)")
        _unmark(target)
        return previous  # the previous set now lies at tmp, which the caller removes
    old = tmp.with_name(tmp.name.replace(".twostage-new-", ".twostage-old-"))
    try:
        _mark(target, old.name, token)
        os.rename(target, old)
    except OSError:
        _unmark(target)  # the previous set as it was
        raise
    try:
        os.rename(tmp, target)
    except OSError:
        os.rename(old, target)  # the previous set back in place
        _unmark(target)
        raise
    late = first_foreign(old, kind, names, checksums=False)
    if late is not None:
        os.rename(target, tmp)
        os.rename(old, target)
        _unmark(target)
        raise ConfigError(_foreign_message(target, kind, late) + " (it appeared while the set was written)")
    _unmark(target)
    _remove_ours(old, token, previous)
    return None


def remove_stale(parent: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders a killed writer left in ``parent`` (as the module says: only those whose
    marker proves this module made them); returns them."""
    import fcntl

    removed: list[Path] = []
    try:
        entries = list(os.scandir(os.fspath(Path(parent))))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        named = TEMP.match(entry.name)
        if not named:
            continue  # a name proves nothing, but without this one there is no token to check
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < STALE_SECONDS:
            continue
        path = Path(entry.path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            here = os.fstat(fd)  # the folder opened is the one checked (not one put at its name meanwhile)
            if (here.st_ino, here.st_uid) != (st.st_ino, os.getuid()) or now - here.st_mtime < STALE_SECONDS:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a writer is using it
            marker = _marker(fd)
            if marker is None or marker["token"] != named.group(1) or marker["folder"] != entry.name:
                continue  # not proven this module's: a user's folder, a copy, or an earlier version's
            pid = marker.get("pid")
            if type(pid) is int and pid != os.getpid() and _running(pid):
                continue  # its process (or one with its number) still runs
            _remove(path, fd)
            if os.path.lexists(path):
                log.warning("twostage: could not remove the stale temporary folder %s", path)
                continue
            removed.append(path)
            log.info("twostage: removed %s, a temporary folder left by an interrupted write", path)
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
