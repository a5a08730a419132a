"""Result sets that appear whole or not at all: a folder of outputs is written beside its target and renamed
into place in one step.

Each file twostage writes is atomic (``trec_io.atomic_write``), but a folder of them is not: a kill or a full
disk between two files leaves a page that says one number beside a summary that says another.
``result_folder(target, kind)`` gives a fresh temporary folder beside ``target`` (same file system, so the
rename is atomic); when the block ends without an error, the folder becomes ``target`` in one rename (an
existing result set is swapped out with ``renameat2(RENAME_EXCHANGE)`` where the system has it, else moved
aside first, so a reader sees the old set, briefly none, or the new one, never a mix), and the old set is
removed. On an error, the temporary folder is removed and ``target`` is untouched.

Each set holds ``.twostage-output.json`` (its kind, a fresh id, when it was written, the sha256 of every
file in it). A target that exists but holds files a set of this kind does not write is refused (it is not
ours to replace): choose another output folder or remove it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

MARKER = ".twostage-output.json"


def _owned(target: Path, kind: str, names: Iterable[str]) -> bool:
    """Whether ``target`` may be replaced: absent, empty, a set of this kind, or only names such a set writes."""
    import json

    if not target.exists():
        return True
    if not target.is_dir():
        return False
    marker = target / MARKER
    if marker.is_file():
        with contextlib.suppress(OSError, ValueError):
            return json.loads(marker.read_text(encoding="utf-8")).get("kind") == kind
        return False
    allowed = set(names) | {MARKER}
    return all(p.name in allowed or p.name.startswith(".") for p in target.iterdir())


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


def _manifest(folder: Path, kind: str, run_id: str) -> dict:
    from toolkit.data.trec_io import sha256_file

    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER)
    return {
        "kind": kind,
        "id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": {p.relative_to(folder).as_posix(): sha256_file(p) for p in files},
    }


@contextlib.contextmanager
def result_folder(target: str | os.PathLike, kind: str, names: Iterable[str] = ()) -> Iterator[Path]:
    """A temporary folder to write a result set into; it replaces ``target`` in one rename when the block ends.

    ``kind`` names the set (``diagnosis``, ``comparison``, ``experiment``); ``names`` are the top-level names
    such a set writes, so an older set of it (written before sets were marked) may be replaced too.

    Raises:
        ConfigError: ``target`` exists and holds what such a set does not write (before anything is written).
    """
    from toolkit.data.trec_io import write_json
    from toolkit.errors import ConfigError

    target = Path(target)
    names = tuple(names)
    if not _owned(target, kind, names):
        raise ConfigError(
            f"{target} exists and holds files that twostage's {kind} output does not write; "
            "choose another output folder or remove it"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder the usual permissions
        run_id = uuid.uuid4().hex
        yield tmp
        write_json(tmp / MARKER, _manifest(tmp, kind, run_id))
        _replace(tmp, target, kind, names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(tmp: Path, target: Path, kind: str, names: tuple[str, ...]) -> None:
    from toolkit.errors import ConfigError

    if not target.exists():
        os.rename(tmp, target)
        return
    if not _owned(target, kind, names):  # written by someone else while this set was computed
        raise ConfigError(f"{target} appeared while the {kind} was written and is not twostage's; not replaced")
    if _exchange(tmp, target):
        return  # the previous set now lies in the temporary name, which the caller removes
    old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
