"""Arrow column helpers shared by the readers and the evaluator: row hashes, chunk-wise take."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def arrow_of(series: pd.Series) -> pa.ChunkedArray | pa.Array:
    """The arrow data behind a string column (zero-copy for arrow-backed columns)."""
    return pa.array(series.array)


def take(column: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> pa.Array:
    """``column[rows]`` chunk by chunk.

    ``ChunkedArray.take`` concatenates every chunk first: for a string column of
    a million-line run that is a transient copy of the whole column, even when
    a few rows are wanted.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(column, pa.Array):
        return column.take(pa.array(rows))
    if column.num_chunks == 0:
        return pa.array([], type=column.type).take(pa.array(rows))
    bounds = np.cumsum([0] + [len(c) for c in column.chunks])
    chunk_of = np.searchsorted(bounds, rows, side="right") - 1
    grouped = np.argsort(chunk_of, kind="stable")
    splits = np.searchsorted(chunk_of[grouped], np.arange(column.num_chunks + 1))
    parts = [
        column.chunk(c).take(pa.array(rows[grouped[splits[c] : splits[c + 1]]] - bounds[c]))
        for c in range(column.num_chunks)
    ]
    back = np.empty(len(rows), dtype=np.int64)
    back[grouped] = np.arange(len(rows))
    return pa.concat_arrays(parts).take(pa.array(back))


_MIX1, _MIX2, _GOLDEN = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53), np.uint64(0x9E3779B97F4A7C15)
_BYTE_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [2**64 - 1], dtype=np.uint64)


def _mix(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, in place."""
    h ^= h >> np.uint64(33)
    h *= _MIX1
    h ^= h >> np.uint64(33)
    h *= _MIX2
    h ^= h >> np.uint64(33)
    return h


def string_hashes(chunk: pa.Array) -> np.ndarray:
    """A 64-bit hash of every string of a (large_)string array, from its bytes 8 at a time."""
    chunk = chunk.cast(pa.large_string()) if pa.types.is_string(chunk.type) else chunk
    n = len(chunk)
    _, offsets_buf, data_buf = chunk.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=8 * chunk.offset)
    start, length = offsets[:-1], np.diff(offsets)
    data = np.zeros((data_buf.size if data_buf is not None else 0) + 8, dtype=np.uint8)
    if data_buf is not None:
        data[: data_buf.size] = np.frombuffer(data_buf, dtype=np.uint8)
    # every byte position as the start of a little-endian uint64: one gather reads 8 bytes of a string
    words = np.ndarray(shape=(len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    h = length.astype(np.uint64) * _GOLDEN
    for w in range(0, int(length.max()) if n else 0, 8):
        rows = np.flatnonzero(length > w) if w else np.arange(n)
        word = words[start[rows] + w] & _BYTE_MASKS[np.minimum(length[rows] - w, 8)]
        h[rows] = _mix(h[rows] ^ word)
    return h


def row_hashes(query: pa.ChunkedArray, doc: pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each (query, doc) pair; equal pairs hash equal, unequal ones almost never do."""
    out = np.empty(len(query), dtype=np.uint64)
    at = 0
    # chunk by chunk keeps the temporaries in cache; the two columns may be chunked differently
    for qc, dc in zip(_aligned_chunks(query, doc), _aligned_chunks(doc, query)):
        h = _repeated_string_hashes(qc)
        h *= _GOLDEN
        h += string_hashes(dc)
        out[at : at + len(h)] = _mix(h)
        at += len(h)
    return out


def block_starts(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row positions where a block of equal adjacent values begins (0 first where there are rows): a run lists
    each query's lines together, so its query ids' blocks are its queries."""
    n = len(values)
    starts = np.ones(n, dtype=bool)
    if n > 1:
        changed = pc.not_equal(values.slice(1), values.slice(0, n - 1))
        parts = changed.chunks if isinstance(changed, pa.ChunkedArray) else [changed]
        np.concatenate([c.to_numpy(zero_copy_only=False) for c in parts], out=starts[1:])
    return np.flatnonzero(starts)


def _repeated_string_hashes(chunk: pa.Array) -> np.ndarray:
    """``string_hashes(chunk)``, hashing each block of equal adjacent strings once (a run lists a query's
    lines together: a few thousand blocks in a million lines); the values are the same either way."""
    n = len(chunk)
    if n < 2:
        return string_hashes(chunk)
    starts = block_starts(chunk)
    if len(starts) > n // 8:  # not in blocks (a shuffled file): hashing every row is cheaper
        return string_hashes(chunk)
    return np.repeat(string_hashes(chunk.take(pa.array(starts))), np.diff(np.append(starts, n)))


def _aligned_chunks(col: pa.ChunkedArray, other: pa.ChunkedArray) -> Iterator[pa.Array]:
    """``col``'s rows in chunks whose boundaries are the union of both columns' chunk boundaries."""
    bounds = np.union1d(np.cumsum([0] + [len(c) for c in col.chunks]), np.cumsum([0] + [len(c) for c in other.chunks]))
    for lo, hi in itertools.pairwise(bounds):
        part = col.slice(int(lo), int(hi - lo))
        yield part.chunk(0) if part.num_chunks == 1 else part.combine_chunks()  # a view where it can be one


def text_digests(column: pa.ChunkedArray) -> tuple[bytes, bytes]:
    """sha256 of a large_string column's UTF-8 bytes, and of its string lengths, in row order.

    Read straight from the arrow buffers (no per-row objects); the chunking does not change them, and the
    two together determine the column exactly (the bytes alone would not tell ``["ab"]`` from ``["a", "b"]``).
    The lengths are hashed as the narrowest unsigned integers that hold the longest (its width first), so
    short ids cost a byte each.
    """
    data, lengths = hashlib.sha256(), hashlib.sha256()
    parts = []
    for chunk in column.chunks:
        chunk = chunk.cast(pa.large_string()) if not pa.types.is_large_string(chunk.type) else chunk
        n = len(chunk)
        if n == 0:
            continue
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=8 * chunk.offset)
        parts.append(np.diff(offsets))
        if data_buf is not None:
            data.update(memoryview(data_buf)[int(offsets[0]) : int(offsets[-1])])
    longest = max((int(p.max()) for p in parts), default=0)
    width = next(w for w in ("<u1", "<u2", "<u4", "<u8") if longest < 2 ** (8 * int(w[-1])))
    lengths.update(width.encode())
    for p in parts:
        lengths.update(p.astype(width).data)
    return data.digest(), lengths.digest()


def joint_codes(*columns: pd.Series) -> list[np.ndarray]:
    """Integer codes of the values of several string columns, one vocabulary for all: equal strings get equal
    codes, unequal ones unequal codes (arrow's dictionary encoding; no Python strings are made)."""
    return arrow_codes(*(arrow_of(c) for c in columns))


def arrow_codes(*arrays: pa.Array | pa.ChunkedArray) -> list[np.ndarray]:
    """``joint_codes`` of arrow string arrays: one vocabulary for all (equal strings, equal codes)."""
    chunks = [
        ch.cast(pa.large_string())
        for a in arrays
        for ch in (a.chunks if isinstance(a, pa.ChunkedArray) else [a])
        if len(ch)
    ]
    if not chunks:
        return [np.zeros(0, np.int64) for _ in arrays]
    encoded = pc.dictionary_encode(pa.chunked_array(chunks, type=pa.large_string()))
    codes = np.concatenate([ch.indices.to_numpy(zero_copy_only=False).astype(np.int64) for ch in encoded.chunks])
    out, at = [], 0
    for a in arrays:
        out.append(codes[at : at + len(a)])
        at += len(a)
    return out


def coded_merge(left: pd.DataFrame, right: pd.DataFrame, on: list[str], how: str = "left") -> pd.DataFrame:
    """``left.merge(right, on=on, how=how)`` (``how``: left or inner) with the same rows, columns and values, its
    string keys compared as integer codes (``joint_codes``): pandas compares arrow strings as Python objects."""
    if how not in ("left", "inner"):
        raise ValueError(f"coded_merge joins left or inner, not {how!r}")
    lc, rc = left.copy(deep=False), right.copy(deep=False)
    strings = [k for k in on if not pd.api.types.is_numeric_dtype(left[k])]
    for k in strings:
        lc[k], rc[k] = joint_codes(left[k], right[k])
    row = "__coded_merge_row__"
    lc[row] = np.arange(len(left))
    merged = lc.merge(rc, on=on, how=how)
    rows = merged.pop(row).to_numpy()
    for k in strings:
        merged[k] = left[k].array.take(rows)
    return merged


def coded_map(keys: pd.Series, mapping: pd.Series) -> pd.Series:
    """``keys.map(mapping)`` for string keys and a Series indexed by strings (NaN, as float, where ``mapping``
    lacks a key), the keys compared as integer codes (``joint_codes``)."""
    kc, mc = joint_codes(keys, pd.Series(mapping.index, dtype=object))
    lookup = np.full(int(max(kc.max(initial=-1), mc.max(initial=-1))) + 1, -1, np.int64)
    lookup[mc] = np.arange(len(mc))
    pos = lookup[kc]
    values = mapping.to_numpy()
    if (pos < 0).any():
        out = values.astype(np.float64)[np.maximum(pos, 0)]
        out[pos < 0] = np.nan
    else:
        out = values[pos]
    return pd.Series(out, index=keys.index, name=keys.name)


def among(values: pa.Array | pa.ChunkedArray, wanted: Iterable[str] | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per string of ``values``: is it one of ``wanted`` (strings, or an arrow string array), by arrow's set
    lookup (no Python string per value)."""
    if isinstance(wanted, pa.ChunkedArray):
        wanted = wanted.combine_chunks()
    if isinstance(wanted, pa.Array):
        value_set = wanted.cast(pa.large_string())
    else:
        value_set = pa.array(sorted({str(w) for w in wanted}), type=pa.large_string())
    found = pc.is_in(values.cast(pa.large_string()), value_set=value_set)
    return found.to_numpy(zero_copy_only=False).astype(bool, copy=False)


def coded_isin(left: pd.DataFrame, right: pd.DataFrame, on: list[str]) -> np.ndarray:
    """Per row of ``left``: is its ``on`` tuple among ``right``'s (``MultiIndex.isin``), keys compared as integer
    codes (``joint_codes``)."""
    key = np.zeros(len(left) + len(right), np.int64)
    for k in on:
        if pd.api.types.is_numeric_dtype(left[k]) and pd.api.types.is_numeric_dtype(right[k]):
            codes = pd.factorize(np.concatenate([left[k].to_numpy(), right[k].to_numpy()]))[0].astype(np.int64)
        else:
            codes = np.concatenate(joint_codes(left[k], right[k]))
        width = int(codes.max(initial=-1)) + 1
        key = pd.factorize(key * width + codes)[0].astype(np.int64)  # dense again: the next product stays small
    return np.isin(key[: len(left)], key[len(left) :])
