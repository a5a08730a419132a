"""``--profile``: where a command's time goes, printed to stderr as ``profile: <phase> <seconds> s`` lines.

A phase is timed only while a profile is active (``start()``), so library calls pay nothing otherwise.
``imports`` is the time from the process' start to ``start()`` (Linux: /proc/self/stat), the
interpreter's and the command's imports.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

_ACTIVE: dict[str, float] | None = None
_STARTED = 0.0


def _since_process_start() -> float | None:
    """Seconds since this process started (Linux), else None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def start() -> None:
    """Begin profiling this process (``imports``: the time since it started)."""
    global _ACTIVE, _STARTED
    _ACTIVE = {}
    _STARTED = time.perf_counter()
    since = _since_process_start()
    if since is not None:
        _ACTIVE["imports (process start to command)"] = since


def active() -> bool:
    return _ACTIVE is not None


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as ``name`` (added up when repeated) while a profile is active."""
    if _ACTIVE is None:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        _ACTIVE[name] = _ACTIVE.get(name, 0.0) + time.perf_counter() - t


def report() -> dict[str, float]:
    """Print the phases to stderr, then the total (imports + the time since ``start()``); returns them."""
    if _ACTIVE is None:
        return {}
    phases = dict(_ACTIVE)
    total = phases.get("imports (process start to command)", 0.0) + time.perf_counter() - _STARTED
    timed = sum(phases.values())
    phases["other"] = max(0.0, total - timed)
    phases["total"] = total
    for name, seconds in phases.items():
        print(f"profile: {name} {seconds:.3f} s", file=sys.stderr)
    return phases
