"""Warnings that reach the person: what changes what a number means, as a ``TwostageWarning``.

A library call (``evaluate``, ``compare``, ``diagnose``) runs inside ``once()``: each distinct
warning is issued once per call, however often the call evaluates the same input (measure
groups, depths, systems), and each call issues it again: each is issued with a registry of its own
(``warnings.warn_explicit``), so Python's "already shown from this line" memory never hides it, while
the user's own ``warnings.filterwarnings`` still decide (no filter is installed). The warning points at
the caller's line, not at the toolkit's. The CLI shows each as ``twostage: warning: ...`` on stderr
(``toolkit.cli``), phrased with flags.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator
from types import FrameType

from toolkit.errors import TwostageWarning

_SEEN: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("twostage_warnings_seen", default=None)
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(text: str) -> None:
    """Issue ``text`` (which may hold ``errors.phrase`` references) as a ``TwostageWarning`` unless this call
    (``once``) has already said it."""
    seen = _SEEN.get()
    if seen is not None:
        if text in seen:
            return
        seen.add(text)
    frame = _caller_frame()
    if frame is None:  # nothing outside the toolkit called (a thread of its own): where warnings.warn points then
        where, filename, lineno = sys.__dict__, "sys", 1
    else:
        where, filename, lineno = frame.f_globals, frame.f_code.co_filename, frame.f_lineno
    warnings.warn_explicit(
        TwostageWarning(text),
        TwostageWarning,
        filename,
        lineno,
        module=where.get("__name__", "<string>"),
        registry={},  # a fresh one: shown at every call the filters let through, as the ``always`` action would
    )  # no module_globals, as warnings.warn passes none: the source line is read when the warning is shown


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


def _caller_frame() -> FrameType | None:
    """The first frame outside the toolkit (the user's line), above ``warn``."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return frame


__all__ = ["TwostageWarning", "once", "warn"]
