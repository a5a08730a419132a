"""A memo of file checksums already computed in this process (``ChecksumMemo``): one declared instance per
purpose (the catalogue's verified files, the indexes' checksums), never a bare module dict."""

from __future__ import annotations

from collections.abc import Hashable


class ChecksumMemo:
    """The sha256 of files already hashed in this process, under a key that changes when their bytes may have
    (a stat signature: path, size, modification time): a declared per-process cache, one instance per purpose."""

    def __init__(self) -> None:
        self._known: dict[Hashable, str] = {}

    def get(self, key: Hashable) -> str | None:
        return self._known.get(key)

    def put(self, key: Hashable, sha: str) -> None:
        self._known[key] = sha

    def clear(self) -> None:
        self._known.clear()


__all__ = ["ChecksumMemo"]
