"""The ONNX export cache (``--backend onnx``/``onnx-int8``), verified when read, as the stage and embedding caches
are.

``$TWOSTAGE_CACHE/onnx/<key[:24]>/`` holds ``model.onnx`` (and ``model.int8.onnx``, ``quantization.json``) and
``entry.json``: the key (the sha256 of the model folder's files, ``model_fingerprint``), the exporter (the ONNX
opset and the versions of the libraries that export and quantise) and the sha256 of each ONNX file. A file is
used only when ``entry.json`` is a JSON object naming the key it is stored under and the file has the sha256
recorded for it; otherwise (a truncated or edited file, one copied from another model's folder, one from an
older twostage without a record) a warning names the file and the problem, the file is moved into
``onnx/damaged/`` and the model is exported again. ONNX Runtime runs what the file says, so a file that is not
the export of this model would give other scores without any error. A sound file made by another exporter (an
older opset, another torch) is made again, without a warning: a cold cache would export with this one, and the
scores must not depend on what the cache held.

A cache folder that cannot be made, read or written (read-only, full, over quota, no permission: ``FS_ERRNOS``)
ends the run with one ``CacheUnusableError`` naming the folder (under ``$TWOSTAGE_CACHE`` or the default) and
the fix (``TWOSTAGE_CACHE=DIR``: no option turns this cache off); no output is written.

The folder is opened through the one cache store (``toolkit.guard.store``): an ``onnx`` folder owned by another
user or writable by group or others is neither read nor written (one warning; ``--trust-cache`` trusts it, the
model is exported for this run only otherwise, into a temporary folder removed once ONNX Runtime has loaded it),
and a model folder, ``entry.json`` or ONNX file that is not the user's own and private is not read (the model is
exported again).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from toolkit.guard.store import Setting, Store, seal
from toolkit.models import read_json_object

ENTRY = "entry.json"

FP32, INT8 = "model.onnx", "model.int8.onnx"

#: (model_dir, out_dir, target): writes the fp32 export, or (fp32, target, out_dir): the int8 copy
Export = Callable[[Path, Path, Path], None]
Quantize = Callable[[Path, Path, Path], None]


#: ``_problem``'s answer for a sound file of another exporter: made again, not reported
STALE = "made by another exporter"


def _problem(folder: Path, key: str, name: str, exporter: dict) -> str | None:
    """Why ``folder/name`` is not the export of the model ``key`` by ``exporter`` (None: it is; ``STALE``: it is
    another exporter's)."""
    from toolkit.data.trec_io import sha256_file

    if (folder / ENTRY).exists():  # a record the system refuses to read is the store's error, not damage
        with open(folder / ENTRY, "rb"):
            pass
    entry = read_json_object(folder / ENTRY)
    if not entry:
        return f"has no readable {ENTRY} beside it (written by an older twostage, or not by twostage)"
    if entry.get("key") != key:
        return f"is recorded for another model (key {str(entry.get('key'))[:24]}), not {key[:24]}"
    if entry.get("exporter") != exporter:
        return STALE
    recorded = (entry.get("files") or {}).get(name) if isinstance(entry.get("files"), dict) else None
    if not recorded:
        return f"has no sha256 recorded in {folder / ENTRY}"
    if sha256_file(folder / name) != recorded:
        return "does not match its recorded sha256 (damaged, edited, or replaced)"
    return None


def _verified(store: Store, folder: Path, key: str, name: str, exporter: dict) -> Path | None:
    """``folder/name`` when it is there, the user's own and passes its check; else None (a failed file reported,
    moved aside; a foreign one reported and left; another exporter's left to be replaced)."""
    path = folder / name
    if not path.is_file() or not store.readable(folder, folder / ENTRY, path):
        return None
    problem = _problem(folder, key, name, exporter)
    if problem is None:
        return path
    if problem == STALE:
        return None
    store.damaged(path, f"{path} {problem}", "the model is exported again", f"{folder.name}-{name}", noun="file")
    return None


def _record(folder: Path, key: str, names: list[str], exporter: dict) -> None:
    from toolkit.data.trec_io import sha256_file, write_json

    entry = read_json_object(folder / ENTRY)
    same = entry and entry.get("key") == key and entry.get("exporter") == exporter
    files = dict(entry["files"]) if same and isinstance(entry.get("files"), dict) else {}
    files |= {n: sha256_file(folder / n) for n in names}
    write_json(folder / ENTRY, {"key": key, "exporter": exporter, "files": files})
    seal(folder / ENTRY, *(folder / n for n in names))


def _make(model_dir: Path, folder: Path, store: Store, key: str, quantize: bool, steps: tuple, exporter: dict) -> Path:
    """The export (and int8 copy) in ``folder``, verified ones reused; each new file recorded. A verified int8
    copy is used without reading the fp32 export it was made from (hashing it would cost a start-up a full read)."""
    export, quantize_to = steps
    store.make(folder)
    if quantize and (int8 := _verified(store, folder, key, INT8, exporter)) is not None:
        return int8
    fp32 = _verified(store, folder, key, FP32, exporter)
    if fp32 is None:
        fp32 = folder / FP32
        if fp32.is_symlink() or fp32.exists():  # one not read (another user's, another exporter's): replaced
            fp32.unlink()
        _written(fp32, lambda: export(model_dir, folder, fp32))
        _record(folder, key, [FP32], exporter)
    if not quantize:
        return fp32
    int8 = folder / INT8
    if int8.is_symlink() or int8.exists():
        int8.unlink()
    _written(int8, lambda: quantize_to(fp32, int8, folder))
    _record(folder, key, [INT8], exporter)
    return int8


def _written(target: Path, write: Callable[[], None]) -> None:
    """``write()``, which makes ``target``; a write that fails (a full disk) leaves no partial file behind."""
    try:
        write()
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


@contextlib.contextmanager
def cached_onnx(
    model_dir: str | os.PathLike,
    root: str | os.PathLike,
    quantize: bool,
    export: Export,
    quantize_to: Quantize,
    opset: int,
    trust: bool | None = None,
    setting: Setting | None = None,
    libraries: dict | None = None,
) -> Iterator[tuple[Path, bool]]:
    """(the ONNX file of ``model_dir``, whether it is cached) for the block: from ``root`` when its files pass
    their check and were made by this exporter (``opset`` and the ``libraries``' versions), else exported (and
    quantised) there; in a temporary folder, removed after the block, when ``root`` is not trusted (``trust``: as
    ``toolkit.guard.store.trusted``). A ``root`` the file system refuses is ``CacheUnusableError`` (``setting``:
    how it was set; default: under ``$TWOSTAGE_CACHE``, no option)."""
    from toolkit.models import model_fingerprint

    exporter = json.loads(json.dumps({"opset": opset, **(libraries or {})}, sort_keys=True))
    model_dir, root = Path(model_dir), Path(root)
    key = model_fingerprint(str(model_dir))
    found: Path | None = None
    store = Store(root, "ONNX cache", trust, setting)
    if store.usable:
        with store.guarded():  # an error about another file (the model's) is raised as it came
            found = _make(model_dir, root / key[:24], store, key, quantize, (export, quantize_to), exporter)
    if found is not None:
        yield found, True
        return
    tmp = Path(tempfile.mkdtemp(prefix="twostage-onnx-"))
    try:
        scratch = Store(tmp, "ONNX cache", trust=True)
        yield _make(model_dir, tmp / key[:24], scratch, key, quantize, (export, quantize_to), exporter), False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["ENTRY", "cached_onnx"]
