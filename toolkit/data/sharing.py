"""Work shared by the steps of one computation (``shared_sorts``): a diagnosis reads every run at several depths
and in several pairs; each sort, encoding or join of the same frames is done once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import pandas as pd

_T = TypeVar("_T")
_SCOPES = threading.local()


@contextlib.contextmanager
def shared_sorts() -> Iterator[None]:
    """Inside, each run frame is put in trec_eval order once (``ranked_positions``, ``order_run``) and other
    work on the same frames is done once (``shared``), however many steps ask: what a diagnosis, which reads
    every run at several depths and in several pairs, shares. The results are those of computing each time."""
    stack = _SCOPES.__dict__.setdefault("stack", [])
    stack.append(stack[-1] if stack else {})  # a nested scope shares its caller's
    try:
        yield
    finally:
        stack.pop()


def shared(name: str, frames: tuple[Any, ...], args: tuple, compute: Callable[[], _T]) -> _T:
    """``compute()``, once per (``name``, the objects ``frames``, ``args``) inside ``shared_sorts`` (every time
    outside it). A DataFrame result is handed out as a shallow copy (copy-on-write), so a caller that adds a
    column changes only its own; numpy results are read-only."""
    stack = getattr(_SCOPES, "stack", None)
    if not stack:
        return compute()
    cache = stack[-1]
    key = (name, tuple(id(f) for f in frames), args)
    if key not in cache:
        value = compute()
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        cache[key] = (frames, value)  # the frames are held: their ids stay theirs while the scope lasts
    value = cache[key][1]
    return value.copy(deep=False) if isinstance(value, pd.DataFrame) else value  # type: ignore[return-value]


def weakly_shared(name: str, obj: Any, compute: Callable[[], _T]) -> _T:
    """``compute()``, once per (``name``, ``obj``) inside ``shared_sorts`` while ``obj`` lives (every time outside
    it): unlike ``shared``, ``obj`` is not held; its entry goes when it does. For work on a column that only
    the callers' frames keep alive (a temporary column costs nothing beyond its own life)."""
    import weakref

    stack = getattr(_SCOPES, "stack", None)
    if not stack:
        return compute()
    cache = stack[-1]
    key = (name, id(obj), "weak")
    hit = cache.get(key)
    if hit is not None and hit[0]() is obj:
        return hit[1]
    value = compute()
    cache[key] = (weakref.ref(obj), value)
    weakref.finalize(obj, cache.pop, key, None)
    return value
