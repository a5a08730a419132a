"""Embeddings cached by (model, text hash): a second rerank over the same texts embeds nothing.

A cache is one folder per *namespace*: everything that changes a vector (the model's
fingerprint, which is a hash of its files, the maximum length, pooling, normalisation, the
backend and its precision). Its ``namespace.json`` says what it holds. Entries are added
as ``part-*.npz`` files (16-byte BLAKE2b digests of the exact UTF-8 text, and float32
vectors), each written atomically under a unique name, so concurrent writers and
interrupted runs never leave a half-written part behind. The default folder is
``$TWOSTAGE_CACHE/embeddings`` (``~/.cache/twostage/embeddings``); it costs 4 bytes per
dimension per distinct text (1.5 KiB per passage for a 384-dimensional model).

Each part also holds ``check``: the sha256 of the namespace and of the part's keys and vectors, so a part
is verified whenever it is read. A part that fails (truncated, damaged, edited, or copied in from another
model's folder, or written before parts were checked) is reported with a warning naming the file, moved
aside into ``damaged/`` and never used: its texts are embedded again. A cache folder that cannot be made, read
or written (read-only, full, over quota, no permission: ``FS_ERRNOS``) ends the run with one
``CacheUnusableError`` naming the folder as it was set (``--embedding-cache``, ``$TWOSTAGE_CACHE`` or the
default) and the fix (``--no-embedding-cache`` where the command has it); no output is written.

The folder is opened through the one cache store (``toolkit.guard.store``): a namespace folder owned by another
user or writable by group or others is neither read nor written (one warning; ``--trust-cache`` trusts it), and
a part that is not the user's own and private is not read. Parts are checked once, when the cache is opened
(one sha256 over each part's bytes, as fast as reading them); lookups are then dictionary reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np

from toolkit.guard.store import Setting, Store, seal

KEY_BYTES = 16


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


def default_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "embeddings"


class EmbeddingCache:
    """Vectors by text for one namespace; ``lookup`` finds what is there, ``add`` stores new ones. ``trust``: read
    the folder even when another user owns it or may write to it (default: ``toolkit.guard.store.trusting``);
    ``setting``: how ``folder`` was set, for the error saying it cannot be used (default: the default folder,
    with no option to choose another)."""

    def __init__(
        self, folder: str | os.PathLike, namespace: dict, trust: bool | None = None, setting: Setting | None = None
    ):
        self.namespace = json.loads(json.dumps(namespace, sort_keys=True, default=str))
        self._digest = hashlib.sha256(json.dumps(self.namespace, sort_keys=True).encode()).hexdigest()
        self.folder = Path(folder) / self._digest[:24]
        self._rows: dict[bytes, tuple[int, int]] = {}
        self._parts: list[np.ndarray] = []
        self.hits = 0
        self.misses = 0
        self.added = 0
        setting = setting or Setting()
        if setting.folder is None:  # named as set: the folder given, not its namespace's
            setting = Setting(folder, setting.given, setting.option, setting.off)
        self.store = Store(self.folder, "embedding cache", trust, setting)
        self.set_aside = self.store.set_aside
        self.writable = self.store.usable
        if self.store.usable and self.folder.is_dir():
            self._check_namespace()
            with self.store.guarded():  # a folder that cannot be listed: the store's error
                parts = sorted(self.folder.glob("part-*.npz"))
            for p in parts:
                if self.store.readable(p):
                    self._load(p)

    def _check_namespace(self) -> None:
        """``namespace.json`` (the folder's index: what its vectors are of) must say this namespace; a damaged or
        foreign one is set aside (and written again with the next part)."""
        p = self.folder / "namespace.json"
        if not p.exists() or not self.store.readable(p):
            return
        from toolkit.guard.preflight import FS_ERRNOS

        try:
            recorded = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return  # removed since: written again with the next part
        except OSError as exc:
            if exc.errno in FS_ERRNOS:  # the file system refused it (no permission, ...): not damage
                self.store.cannot(exc)
            recorded = None
        except ValueError:
            recorded = None
        if recorded != self.namespace:
            self.store.damaged(
                p,
                "is damaged or describes another namespace than its folder's",
                "written again (the parts are checked on their own)",
                noun="index",
            )

    def _check(self, keys: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """The part's checksum: sha256 over this namespace, then the keys' and the vectors' shapes and bytes."""
        h = hashlib.sha256(self._digest.encode())
        for a in (keys, vectors):
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        return np.frombuffer(h.digest(), dtype=np.uint8)

    def _load(self, p: Path) -> None:
        """Serve a part's vectors once it passes its check; else report it and move it aside."""
        from toolkit.guard.preflight import FS_ERRNOS

        try:
            with np.load(p, allow_pickle=False) as z:
                keys, vectors = z["keys"], z["vectors"]
                check = z["check"] if "check" in z.files else None
        except FileNotFoundError:
            return None  # set aside by another process since it was listed: a miss
        except OSError as exc:
            if exc.errno in FS_ERRNOS:  # the file system refused it (no permission, ...): not damage
                self.store.cannot(exc)
            return self._set_aside(p, f"unreadable ({exc})")
        except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            return self._set_aside(p, f"unreadable ({exc})")
        if check is None:
            return self._set_aside(p, "carries no checksum (written by an older twostage, or not by twostage)")
        shape_ok = keys.dtype == np.uint8 and keys.ndim == 2 and keys.shape[1] == KEY_BYTES and vectors.ndim == 2
        if not shape_ok or len(keys) != len(vectors) or vectors.dtype != np.float32:
            return self._set_aside(p, f"holds keys {keys.shape} and vectors {vectors.shape} that do not fit together")
        if self._parts and vectors.shape[1] != self._parts[0].shape[1]:
            return self._set_aside(
                p, f"holds {vectors.shape[1]}-dimensional vectors, the others {self._parts[0].shape[1]}"
            )
        if not np.array_equal(check, self._check(keys, vectors)):
            return self._set_aside(p, "does not match its checksum (damaged, edited, or from another model's cache)")
        part = len(self._parts)
        self._parts.append(vectors)
        for i, k in enumerate(keys):
            self._rows.setdefault(k.tobytes(), (part, i))
        return None

    def _set_aside(self, p: Path, problem: str) -> None:
        self.store.damaged(p, f"{p} {problem}", "its texts are embedded again", noun="part")

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
        fresh = [i for i, k in enumerate(keys) if k not in self._rows]
        if not fresh:
            return
        keys_arr = np.frombuffer(b"".join(keys[i] for i in fresh), dtype=np.uint8).reshape(len(fresh), KEY_BYTES)
        vecs = np.ascontiguousarray(vectors[fresh], dtype=np.float32)
        if self.writable:
            with self.store.guarded():  # the file system refuses the folder: the store's error, no output written
                self._write_part(keys_arr, vecs)
        part = len(self._parts)  # served for the rest of this run either way
        self._parts.append(vecs)
        for j, i in enumerate(fresh):
            self._rows[keys[i]] = (part, j)
        self.added += len(fresh)

    def _write_part(self, keys_arr: np.ndarray, vecs: np.ndarray) -> None:
        from toolkit.data.trec_io import atomic_write, write_json

        self.store.make()
        if not (self.folder / "namespace.json").exists():
            write_json(self.folder / "namespace.json", self.namespace)
            seal(self.folder / "namespace.json")
        name = f"part-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}.npz"
        with atomic_write(self.folder / name, "wb") as fh:
            np.savez(fh, keys=keys_arr, vectors=vecs, check=self._check(keys_arr, vecs))
        seal(self.folder / name)

    def describe(self) -> dict:
        return {
            "folder": str(self.folder),
            "entries_before": len(self) - self.added,
            "hits": self.hits,
            "misses": self.misses,
            "added": self.added,
            "set_aside": self.set_aside,
            "writable": self.writable,
        }
