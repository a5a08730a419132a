"""Warnings that reach the person: what changes what a number means, as a ``TwostageWarning``.

A library call (``evaluate``, ``compare``, ``diagnose``) runs inside ``once()``: each distinct
warning is issued once per call, however often the call evaluates the same input (measure
groups, depths, systems), and each call issues it again (the category's filter is ``always``,
appended, so the user's own ``warnings.filterwarnings`` still wins). The warning points at the
caller's line, not at the toolkit's. The CLI shows each as ``twostage: warning: ...`` on stderr
(``toolkit.cli``), phrased with flags.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator

from toolkit.errors import TwostageWarning

_SEEN: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("twostage_warnings_seen", default=None)
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep

warnings.filterwarnings("always", category=TwostageWarning, append=True)


def warn(text: str) -> None:
    """Issue ``text`` (which may hold ``errors.phrase`` references) as a ``TwostageWarning`` unless this call
    (``once``) has already said it."""
    seen = _SEEN.get()
    if seen is not None:
        if text in seen:
            return
        seen.add(text)
    warnings.warn(TwostageWarning(text), stacklevel=_caller_level())


@contextlib.contextmanager
def once() -> Iterator[None]:
    """Within the block, each warning is issued once (nested blocks share the outer one's)."""
    if _SEEN.get() is not None:
        yield
        return
    token = _SEEN.set(set())
    try:
        yield
    finally:
        _SEEN.reset(token)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside the toolkit (the user's line)."""
    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level


__all__ = ["TwostageWarning", "once", "warn"]
