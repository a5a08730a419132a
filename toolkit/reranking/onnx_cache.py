"""The ONNX export cache (``--backend onnx``/``onnx-int8``), verified when read and optional when it cannot be
written, as the stage and embedding caches are.

``$TWOSTAGE_CACHE/onnx/<key[:24]>/`` holds ``model.onnx`` (and ``model.int8.onnx``, ``quantization.json``) and
``entry.json``: the key (the sha256 of the model folder's files, ``model_fingerprint``), the ONNX opset and the
sha256 of each ONNX file. A file is used only when ``entry.json`` is a JSON object naming the key it is stored
under and the file has the sha256 recorded for it; otherwise (a truncated or edited file, one copied from
another model's folder, one from an older twostage without a record) a warning names the file and the problem,
the file is moved into ``onnx/damaged/`` and the model is exported again. ONNX Runtime runs what the file says,
so a file that is not the export of this model would give other scores without any error.

A cache that cannot be written (read-only, full, over quota, no permission) is one warning; the model is
exported into a temporary folder for this run, which is removed once ONNX Runtime has loaded it.

The folder is opened through the one cache store (``toolkit.guard.store``): an ``onnx`` folder owned by another
user or writable by group or others is neither read nor written (one warning; ``--trust-cache`` trusts it, the
model is exported for this run only otherwise), and a model folder, ``entry.json`` or ONNX file that is not the
user's own and private is not read (the model is exported again).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from toolkit.guard.preflight import UNWRITABLE
from toolkit.guard.store import Store, seal
from toolkit.models import read_json_object

ENTRY = "entry.json"

FP32, INT8 = "model.onnx", "model.int8.onnx"

#: (model_dir, out_dir, target): writes the fp32 export, or (fp32, target, out_dir): the int8 copy
Export = Callable[[Path, Path, Path], None]
Quantize = Callable[[Path, Path, Path], None]


def _problem(folder: Path, key: str, name: str) -> str | None:
    """Why ``folder/name`` is not the export of the model ``key`` (None: it is)."""
    from toolkit.data.trec_io import sha256_file

    entry = read_json_object(folder / ENTRY)
    if not entry:
        return f"has no readable {ENTRY} beside it (written by an older twostage, or not by twostage)"
    if entry.get("key") != key:
        return f"is recorded for another model (key {str(entry.get('key'))[:24]}), not {key[:24]}"
    recorded = (entry.get("files") or {}).get(name) if isinstance(entry.get("files"), dict) else None
    if not recorded:
        return f"has no sha256 recorded in {folder / ENTRY}"
    if sha256_file(folder / name) != recorded:
        return "does not match its recorded sha256 (damaged, edited, or replaced)"
    return None


def _verified(store: Store, folder: Path, key: str, name: str) -> Path | None:
    """``folder/name`` when it is there, the user's own and passes its check; else None (a failed file reported,
    moved aside; a foreign one reported and left)."""
    path = folder / name
    if not path.is_file() or not store.readable(folder, folder / ENTRY, path):
        return None
    problem = _problem(folder, key, name)
    if problem is None:
        return path
    store.damaged(path, f"{path} {problem}", "the model is exported again", f"{folder.name}-{name}", noun="file")
    return None


def _record(folder: Path, key: str, names: list[str], opset: int) -> None:
    from toolkit.data.trec_io import sha256_file, write_json

    entry = read_json_object(folder / ENTRY)
    files = dict(entry["files"]) if entry and entry.get("key") == key and isinstance(entry.get("files"), dict) else {}
    files |= {n: sha256_file(folder / n) for n in names}
    write_json(folder / ENTRY, {"key": key, "opset": opset, "files": files})
    seal(folder / ENTRY, *(folder / n for n in names))


def _make(model_dir: Path, folder: Path, store: Store, key: str, quantize: bool, steps: tuple, opset: int) -> Path:
    """The export (and int8 copy) in ``folder``, verified ones reused; each new file recorded. A verified int8
    copy is used without reading the fp32 export it was made from (hashing it would cost a start-up a full read)."""
    export, quantize_to = steps
    store.make(folder)
    if quantize and (int8 := _verified(store, folder, key, INT8)) is not None:
        return int8
    fp32 = _verified(store, folder, key, FP32)
    if fp32 is None:
        fp32 = folder / FP32
        if fp32.is_symlink() or fp32.exists():  # one not read (another user's): replaced, not written through
            fp32.unlink()
        export(model_dir, folder, fp32)
        _record(folder, key, [FP32], opset)
    if not quantize:
        return fp32
    int8 = folder / INT8
    if int8.is_symlink() or int8.exists():
        int8.unlink()
    quantize_to(fp32, int8, folder)
    _record(folder, key, [INT8], opset)
    return int8


@contextlib.contextmanager
def cached_onnx(
    model_dir: str | os.PathLike,
    root: str | os.PathLike,
    quantize: bool,
    export: Export,
    quantize_to: Quantize,
    opset: int,
    trust: bool | None = None,
) -> Iterator[tuple[Path, bool]]:
    """(the ONNX file of ``model_dir``, whether it is cached) for the block: from ``root`` when its files pass
    their check, else exported (and quantised) there; in a temporary folder, removed after the block, when
    ``root`` cannot be written or is not trusted (``trust``: as ``toolkit.guard.store.trusted``)."""
    from toolkit.jobs.embed_cache import model_fingerprint

    model_dir, root = Path(model_dir), Path(root)
    key = model_fingerprint(str(model_dir))
    found: Path | None = None
    store = Store(root, "ONNX cache", trust)
    try:
        if store.usable:
            found = _make(model_dir, root / key[:24], store, key, quantize, (export, quantize_to), opset)
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        from toolkit.notices import warn

        warn(
            f"the ONNX cache {root} cannot be written ({exc.strerror or exc}); exporting the model for this run "
            "only (set TWOSTAGE_CACHE to a folder you can write to keep the export)"
        )
    if found is not None:
        yield found, True
        return
    tmp = Path(tempfile.mkdtemp(prefix="twostage-onnx-"))
    try:
        scratch = Store(tmp, "ONNX cache", trust=True)
        yield _make(model_dir, tmp / key[:24], scratch, key, quantize, (export, quantize_to), opset), False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["ENTRY", "cached_onnx"]
