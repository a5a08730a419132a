"""``--profile``: where a command's time goes, printed to stderr as ``profile: <phase> <seconds> s`` lines.

A phase is timed only while a profile is active (``start()``), so library calls pay nothing otherwise.
``imports`` is the time from the process' start to ``start()`` (Linux: /proc/self/stat), the
interpreter's and the command's imports. A phase ``part_of`` another is printed indented under it and
not added to the total twice.

``report`` ends with the figures of "short calls stay short" (issue 28): the time outside the model work
(``MODEL_WORK``), the unavoidable part of it (``UNAVOIDABLE``: importing torch, creating the CUDA context,
reading the weights, each timed alone), and their ratio.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

IMPORTS = "imports (process start to command)"
#: The phase that is the model work itself.
MODEL_WORK = "scoring"
#: The phases no implementation avoids: each is timed alone, in the same run.
UNAVOIDABLE = ("import torch", "CUDA context", "read weights")
#: The ratio "short calls stay short" asks for (outside the model work / unavoidable).
TARGET_RATIO = 1.5


@dataclass
class Profile:
    """One ``--profile``: the seconds of each phase, the phase each nested one is part of, and when it began
    (``time.perf_counter()``)."""

    started: float
    seconds: dict[str, float] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)


#: The profile under way (``start()`` to ``report()``), else None: phases are then not timed.
_CURRENT: Profile | None = None


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
    global _CURRENT
    _CURRENT = Profile(time.perf_counter())
    since = _since_process_start()
    if since is not None:
        _CURRENT.seconds[IMPORTS] = since


def stop() -> None:
    """End the profile under way without a report (a command that failed)."""
    global _CURRENT
    _CURRENT = None


def active() -> bool:
    return _CURRENT is not None


@contextlib.contextmanager
def phase(name: str, part_of: str | None = None) -> Iterator[None]:
    """Time the block as ``name`` (added up when repeated) while a profile is active; ``part_of``: the
    phase that contains it."""
    profile = _CURRENT
    if profile is None:
        yield
        return
    if part_of is not None:
        profile.parent[name] = part_of
    t = time.perf_counter()
    try:
        yield
    finally:
        profile.seconds[name] = profile.seconds.get(name, 0.0) + time.perf_counter() - t


def overhead(phases: dict[str, float]) -> dict[str, float]:
    """From a report's phases: ``outside`` (total minus the model work), ``unavoidable`` and ``ratio``."""
    outside = phases.get("total", 0.0) - phases.get(MODEL_WORK, 0.0)
    unavoidable = sum(phases.get(name, 0.0) for name in UNAVOIDABLE)
    return {
        "outside": outside,
        "unavoidable": unavoidable,
        "ratio": outside / unavoidable if unavoidable > 0 else float("inf"),
    }


def report() -> dict[str, float]:
    """Print the phases to stderr, then the total (imports + the time since ``start()``) and the time outside
    the model work against its unavoidable part; returns the phases. The profile ends here: later phases are
    not timed (until the next ``start()``)."""
    global _CURRENT
    profile, _CURRENT = _CURRENT, None
    if profile is None:
        return {}
    phases = dict(profile.seconds)
    total = phases.get(IMPORTS, 0.0) + time.perf_counter() - profile.started
    timed = sum(s for name, s in phases.items() if name not in profile.parent)
    phases["other"] = max(0.0, total - timed)
    phases["total"] = total
    top = [name for name in phases if name not in profile.parent]
    for name in top:
        print(f"profile: {name} {phases[name]:.3f} s", file=sys.stderr)
        for child in (c for c, parent in profile.parent.items() if parent == name and c in phases):
            print(f"profile:   {child} (part of {name}) {phases[child]:.3f} s", file=sys.stderr)
    o = overhead(phases)
    parts = " + ".join(name for name in UNAVOIDABLE if name in phases) or "none timed"
    print(f"profile: outside the model work ({MODEL_WORK}) {o['outside']:.3f} s", file=sys.stderr)
    print(f"profile: unavoidable ({parts}) {o['unavoidable']:.3f} s", file=sys.stderr)
    print(
        f"profile: outside / unavoidable {o['ratio']:.2f}x (target <= {TARGET_RATIO}x)",
        file=sys.stderr,
    )
    return phases
