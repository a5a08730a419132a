"""What a test needs that may be missing on this machine, said in one of two ways.

- ``required(module, why)`` / ``lacking(why)``: something the CI always has (an oracle package, an extra, the
  shared data, a native trec_eval, Chromium, Java): missing here, the test is skipped with ``why``; missing in
  CI (``CI=true``, which ``.ci/run`` exports), the test fails, so an oracle that stopped running is seen.
- ``optional(reason)``: something no CI run is expected to have (root for a tmpfs or a chown, a network
  namespace): the test is skipped everywhere, its reason starting with ``optional:``.

``tests/conftest.py`` turns every other skip into a failure when ``CI=true`` (a ``pytest.skip`` or
``importorskip`` written without these helpers included), so a new silent skip cannot creep into CI.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

#: the prefix of the one kind of skip CI allows
OPTIONAL = "optional: "


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``: ``.ci/run`` sets it, as most CI services do)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def required(module: str, why: str) -> ModuleType:
    """``module``, imported; missing: skip with ``why`` here, fail in CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        lacking(f"{why} ({module}: {exc})")


def lacking(why: str) -> NoReturn:
    """Something CI always has is missing here: skip with ``why``, or fail in CI."""
    if in_ci():
        pytest.fail(f"CI must have this: {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def optional(reason: str) -> NoReturn:
    """Skip, everywhere: what the test needs is not expected of CI either (say which and why in ``reason``)."""
    pytest.skip(OPTIONAL + reason)


def allowed_in_ci(reason: str) -> bool:
    """Whether a skip with this reason may stand in CI (pytest's ``Skipped: `` prefix aside)."""
    return reason.removeprefix("Skipped: ").startswith(OPTIONAL)


# ---------------------------------------------------------------- the hooks (imported by tests/conftest.py)
def skip_fails_in_ci(report) -> None:
    """In CI, a skipped test or collector whose reason does not start with ``optional:`` is made a failure."""
    if not (in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if allowed_in_ci(reason):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped in CI: {reason}\n(only a skip whose reason starts with 'optional:' may stand in CI: "
        "tests/support/needs.py's required, lacking and optional)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's skip (in setup, call or teardown) seen by ``skip_fails_in_ci``."""
    outcome = yield
    skip_fails_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped as it is collected (a module-level ``required``) seen by ``skip_fails_in_ci``."""
    outcome = yield
    skip_fails_in_ci(outcome.get_result())
