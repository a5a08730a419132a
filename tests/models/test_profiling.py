"""``--profile``'s phases: timed only between ``start()`` and ``report()`` (or ``stop()``), a nested phase printed
under its parent and not counted twice, and nothing left active once the profile is reported."""

from __future__ import annotations

import time

from toolkit.models import profiling


def test_phases_are_timed_only_while_a_profile_is_under_way(capsys):
    with profiling.phase("before"):
        pass
    assert not profiling.active()
    profiling.start()
    try:
        assert profiling.active()
        with profiling.phase("scoring"):
            with profiling.phase("read weights", part_of="scoring"):
                time.sleep(0.02)
            time.sleep(0.01)
        with profiling.phase("scoring"):  # a phase repeated adds up
            time.sleep(0.01)
    finally:
        phases = profiling.report()
    assert not profiling.active()  # the report ends the profile
    assert "before" not in phases
    assert phases["scoring"] >= phases["read weights"] + 0.02 > 0.04
    # the total counts a nested phase once (inside its parent), the rest is "other"
    top = sum(v for k, v in phases.items() if k not in ("read weights", "other", "total"))
    assert abs(phases["total"] - (top + phases["other"])) < 1e-9
    err = capsys.readouterr().err
    assert "profile:   read weights (part of scoring)" in err
    assert err.index("profile: scoring") < err.index("profile:   read weights (part of scoring)")
    assert profiling.report() == {}  # nothing to report any more


def test_stop_ends_a_profile_without_a_report(capsys):
    profiling.start()
    profiling.stop()
    assert not profiling.active() and profiling.report() == {}
    assert capsys.readouterr().err == ""
