"""What one diagnosis computes once and reads many times (``Workspace``): held by its caller and passed down.

A diagnosis reads every run at several depths and in several pairs; the sorts, alignments and prepared
judgments it needs are computed once in its workspace (``once``) and the runs put in trec_eval order are marked
there (``mark_ordered``), so that the sorts of them find them in order. A workspace lives as long as its caller
holds it: what it keeps goes with it. ``NO_WORKSPACE`` (every default) computes each time and remembers nothing:
the results are the same, only slower.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from typing import Any, Final, TypeVar

import numpy as np
import pandas as pd

_T = TypeVar("_T")


class _Same:
    """An object as a key, by identity (frames and arrays are not hashable); the key holds the object, so its
    identity is not reused while the key lives."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return object.__hash__(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


class Workspace:
    """What one diagnosis computes once and reads many times; held by its caller and passed down.

    ``once(name, keys, args, compute)`` computes once per (name, the objects ``keys``, ``args``): a DataFrame
    result is handed out as a shallow copy (copy-on-write), so a caller that adds a column changes only its own;
    numpy results are read-only. ``keep_only(names)`` lets go of the rest (their memory is freed; asked again,
    they are computed again). ``mark_ordered`` / ``is_ordered``: the frames known to be in trec_eval order at
    a score precision, for as long as each frame lives (a frame is never changed in place: runs are records)."""

    keeps = True  # what ``once`` computes is kept (``NO_WORKSPACE``: not)

    def __init__(self) -> None:
        self._memo: dict[tuple, tuple[tuple, Any]] = {}
        self._ordered: dict[_Same, frozenset[str]] = {}

    @staticmethod
    def _key(name: str, keys: tuple[Any, ...], args: tuple) -> tuple:
        return (name, tuple(_Same(k) for k in keys), args)

    def once(self, name: str, keys: tuple[Any, ...], args: tuple, compute: Callable[[], _T]) -> _T:
        key = self._key(name, keys, args)
        if key not in self._memo:
            value = compute()
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, np.ndarray):
                    v.flags.writeable = False
            self._memo[key] = (keys, value)
        value = self._memo[key][1]
        return value.copy(deep=False) if isinstance(value, pd.DataFrame) else value  # type: ignore[return-value]

    def has(self, name: str, keys: tuple[Any, ...], args: tuple) -> bool:
        """Whether ``once(name, keys, args, ...)`` was computed already (and not let go)."""
        return self._key(name, keys, args) in self._memo

    def keep_only(self, names: Collection[str]) -> None:
        """Let go of every result ``once`` keeps except those named in ``names`` (what the caller's later steps
        still read)."""
        for key in [k for k in self._memo if k[0] not in names]:
            del self._memo[key]

    def mark_ordered(self, frame: pd.DataFrame, score_precision: str) -> None:
        """Note that ``frame``'s rows are in trec_eval order at ``score_precision`` (for as long as it lives:
        the mark holds the frame weakly, and goes when the frame does)."""
        ordered = self._ordered

        def forget(ref: weakref.ref, ordered: dict = ordered) -> None:
            for key in [k for k in ordered if k.obj is ref]:
                del ordered[key]

        key = _Same(weakref.ref(frame, forget))
        for held in ordered:
            if held.obj() is frame:
                ordered[held] = ordered[held] | {score_precision}
                return
        ordered[key] = frozenset((score_precision,))

    def is_ordered(self, frame: pd.DataFrame, score_precision: str) -> bool:
        """Whether ``frame`` was put in trec_eval order at ``score_precision`` in this workspace
        (``ranking.in_trec_order``, ``ranking.order_run``)."""
        return any(held.obj() is frame and score_precision in precisions for held, precisions in self._ordered.items())


class _NoWorkspace(Workspace):
    """Computes every time and remembers nothing: outside a diagnosis."""

    keeps = False

    def once(self, name: str, keys: tuple[Any, ...], args: tuple, compute: Callable[[], _T]) -> _T:
        return compute()

    def has(self, name: str, keys: tuple[Any, ...], args: tuple) -> bool:
        return False

    def keep_only(self, names: Collection[str]) -> None:
        return None

    def mark_ordered(self, frame: pd.DataFrame, score_precision: str) -> None:
        return None

    def is_ordered(self, frame: pd.DataFrame, score_precision: str) -> bool:
        return False


#: The default of every ``work=``: no workspace (each result computed where it is asked for).
NO_WORKSPACE: Final[Workspace] = _NoWorkspace()

__all__ = ["NO_WORKSPACE", "Workspace"]
