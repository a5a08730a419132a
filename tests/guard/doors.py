"""The table of hostile inputs: one ``Case`` per (door, payload), run by ``test_table.py``.

Each door of ``toolkit.guard.DOORS`` has a module ``cases_<door>.py`` beside this one that defines ``CASES``, a
list of ``Case``. A case performs one attack through the public surface (the CLI through ``cli``, or the library
function the door guards) and asserts the guarantee ``docs/security.md`` states for it: one ``Error:`` line (or a
typed exception), nothing deleted that twostage did not write, nothing from outside run, a bounded cost. Adding a
door adds a ``cases_<door>.py`` module; ``test_table.py`` fails for a door without cases.

A case's ``name`` is its id in the table (``door/name``): ``docs/security.md`` cites it so.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result


@dataclass(frozen=True)
class Case:
    door: str
    name: str
    run: Callable[[Path], None]  # gets a fresh tmp_path; raises AssertionError when the guarantee fails

    @property
    def id(self) -> str:
        return f"{self.door}/{self.name}"


def cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``twostage ARGS`` in-process (click's runner), stderr kept apart from stdout."""
    from toolkit.cli import main

    return CliRunner().invoke(main, list(args), input=input, env=env, catch_exceptions=True)


def assert_one_error(res: Result, *needles: str, code: int | None = None) -> str:
    """The command failed with exactly one ``Error:`` line holding each needle, and no traceback; returns it."""
    out = res.output  # click >= 8.2: stdout and stderr interleaved, as a terminal shows them
    if res.stderr_bytes is not None and res.stderr not in out:  # an older click kept stderr apart
        out += res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), f"traceback: {res.exception!r}\n{out}"
    assert "Traceback" not in out, out
    assert res.exit_code != 0, out
    if code is not None:
        assert res.exit_code == code, (res.exit_code, out)
    lines = [ln for ln in out.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, out
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


class Bounded:
    """``with Bounded(seconds=5, mb=500): ...`` asserts the block took at most that wall time and grew the
    process's peak memory (ru_maxrss) by at most that many megabytes above its peak when the block began."""

    def __init__(self, seconds: float, mb: float | None = None) -> None:
        self.seconds, self.mb = seconds, mb

    def __enter__(self) -> Bounded:
        self.t0 = time.perf_counter()
        self.rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return self

    def __exit__(self, *exc: object) -> None:
        took = time.perf_counter() - self.t0
        assert took <= self.seconds, f"took {took:.1f} s, more than {self.seconds} s"
        if self.mb is not None:
            grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - self.rss0
            assert grew <= self.mb, f"peak memory grew by {grew:.0f} MB, more than {self.mb} MB"
