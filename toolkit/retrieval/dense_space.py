"""A dense index build that fails on its output's file system, said in one line before or during the work.

- ``check_dense_room``: before encoding (hours on a large corpus), the output folder can be written and its file
  system has room for the estimated index (and, for a sharded job, for the shard embeddings beside it);
- ``as_output_error``: a failure writing the index (Python's ``OSError``, or FAISS's ``RuntimeError`` whose
  message carries the system's words, e.g. "(No space left on device)") as an ``OSError`` naming the index
  folder, which the CLI prints as one ``Error:`` line with the fix (``toolkit.guard.preflight.os_error_message``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from toolkit.errors import phrase
from toolkit.guard.preflight import FS_ERRNOS, check_free_space, check_writable, native_fs_errno

#: Bytes per document of the ``docid`` file assumed by the estimate (ids are not read before encoding).
DOCID_BYTES = 12


def encoder_dim(model_path: str) -> int | None:
    """The vector size of the encoder at ``model_path`` from its configuration alone (no weights loaded); None
    when the configuration cannot be read (the encoder then fails with its own message)."""
    try:
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(model_path).hidden_size)
    except Exception:  # not found offline, not a transformers model: no estimate
        return None


def dense_index_bytes(documents: int, dim: int, hnsw: bool = False, hnsw_m: int = 32) -> int:
    """About the bytes of a FAISS index of ``documents`` vectors of ``dim`` float32 with its ``docid`` file: the
    vectors, plus for HNSW its level-0 graph (2M int32 neighbours) and per-vector level and offset."""
    per_doc = 4 * dim + DOCID_BYTES + ((8 * hnsw_m + 12) if hnsw else 0)
    return documents * per_doc


def check_dense_room(
    out: Path, documents: int | None, dim: int | None, hnsw: bool, hnsw_m: int, shards: Path | None
) -> None:
    """``ConfigError`` (naming ``out`` and the fix) when the index cannot be written there: a folder that takes no
    writes, or less free space than the estimated index (plus the shard embeddings ``shards`` will hold, less
    what it holds already) when the document count and vector size are known."""
    option = phrase("out", "--out")
    check_writable(out, option, folder=True)
    if documents is None or dim is None:
        return
    need = dense_index_bytes(documents, dim, hnsw, hnsw_m)
    if shards is not None:
        held = 0
        with contextlib.suppress(OSError):
            held = sum(p.stat().st_size for p in shards.rglob("*") if p.is_file())
        need += max(0, documents * 4 * dim - held)
    what = f"the dense index ({documents} documents of {dim} dimensions{', and its shards' if shards else ''})"
    check_free_space(out, need, what, option)


def as_output_error(exc: BaseException, out: Path, building: Path) -> OSError | None:
    """``exc`` as an ``OSError`` naming ``out`` when it is the file system refusing a write into ``building``
    (the temporary folder of ``out``); None for any other failure."""
    if isinstance(exc, OSError) and exc.errno in FS_ERRNOS:
        code = exc.errno
    elif isinstance(exc, RuntimeError):  # FAISS: "... write error in PATH: 61395 != 128000 (No space left ...)"
        code = native_fs_errno(str(exc), str(building))
    else:
        return None
    if code is None:
        return None
    return OSError(code, os.strerror(code), str(out))
