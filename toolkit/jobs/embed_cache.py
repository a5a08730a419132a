"""Embeddings cached by (model, text hash): a second rerank over the same texts embeds nothing.

A cache is one folder per *namespace*: everything that changes a vector (the model's
fingerprint, which is a hash of its files, the maximum length, pooling, normalisation, the
backend and its precision). Its ``namespace.json`` says what it holds. Entries are added
as ``part-*.npz`` files (16-byte BLAKE2b digests of the exact UTF-8 text, and float32
vectors), each written atomically under a unique name, so concurrent writers and
interrupted runs never leave a half-written part behind. The default folder is
``$TWOSTAGE_CACHE/embeddings`` (``~/.cache/twostage/embeddings``); it costs 4 bytes per
dimension per distinct text (1.5 KiB per passage for a 384-dimensional model).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

KEY_BYTES = 16


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


@lru_cache(maxsize=16)
def model_fingerprint(model_path: str) -> str:
    """sha256 over a local model folder's files (relative name and bytes); a hub name stands for itself."""
    from toolkit.trec_io import folder_sha256

    folder = Path(model_path)
    if not folder.is_dir():
        return "name:" + model_path
    return folder_sha256(folder, skip=lambda p: "__pycache__" in p.parts or p.name.startswith("."))


def default_folder() -> Path:
    from toolkit.catalog import cache_dir

    return cache_dir() / "embeddings"


class EmbeddingCache:
    """Vectors by text for one namespace; ``lookup`` finds what is there, ``add`` stores new ones."""

    def __init__(self, folder: str | os.PathLike, namespace: dict):
        self.namespace = json.loads(json.dumps(namespace, sort_keys=True, default=str))
        digest = hashlib.sha256(json.dumps(self.namespace, sort_keys=True).encode()).hexdigest()[:24]
        self.folder = Path(folder) / digest
        self._rows: dict[bytes, tuple[int, int]] = {}
        self._parts: list[np.ndarray] = []
        self.hits = 0
        self.misses = 0
        self.added = 0
        if self.folder.is_dir():
            for p in sorted(self.folder.glob("part-*.npz")):
                try:
                    with np.load(p, allow_pickle=False) as z:
                        keys, vectors = z["keys"], z["vectors"]
                except (OSError, ValueError, KeyError) as exc:
                    log.warning("twostage: ignoring unreadable embedding cache part %s (%s)", p, exc)
                    continue
                part = len(self._parts)
                self._parts.append(vectors)
                for i, k in enumerate(keys):
                    self._rows.setdefault(k.tobytes(), (part, i))

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, vectors of the found keys in order, or None when none is found)."""
        where = [self._rows.get(k) for k in keys]
        found = np.array([w is not None for w in where], dtype=bool)
        self.hits += int(found.sum())
        self.misses += int(len(keys) - found.sum())
        if not found.any():
            return found, None
        return found, np.stack([self._parts[p][i] for p, i in (w for w in where if w is not None)])

    def add(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store new vectors (keys already present are skipped) as one atomically written part."""
        from toolkit.trec_io import atomic_write, write_json

        fresh = [i for i, k in enumerate(keys) if k not in self._rows]
        if not fresh:
            return
        keys_arr = np.frombuffer(b"".join(keys[i] for i in fresh), dtype=np.uint8).reshape(len(fresh), KEY_BYTES)
        vecs = np.ascontiguousarray(vectors[fresh], dtype=np.float32)
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / "namespace.json").exists():
            write_json(self.folder / "namespace.json", self.namespace)
        name = f"part-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}.npz"
        with atomic_write(self.folder / name, "wb") as fh:
            np.savez(fh, keys=keys_arr, vectors=vecs)
        part = len(self._parts)
        self._parts.append(vecs)
        for j, i in enumerate(fresh):
            self._rows[keys[i]] = (part, j)
        self.added += len(fresh)

    def describe(self) -> dict:
        return {
            "folder": str(self.folder),
            "entries_before": len(self) - self.added,
            "hits": self.hits,
            "misses": self.misses,
            "added": self.added,
        }
