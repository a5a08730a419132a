"""``twostage risk --alpha``: a weight the library refuses (negative, nan, inf, or a number too large for a float)
is a bad value of the flag, exit 2, with the command's usage above it, the same for every such value (the rule is
the library's ``check_alpha``, asked before anything is read); a good weight gives URisk as hand-computed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from toolkit.cli import main

USAGE = "Usage: twostage risk [OPTIONS] RUNS...\nTry 'twostage risk --help' for help.\n\n"


@pytest.mark.parametrize(("given", "shown"), [("-1", "-1.0"), ("nan", "nan"), ("inf", "inf"), ("1e400", "inf")])
def test_a_weight_the_library_refuses_is_a_bad_value_of_alpha(tmp_path, given, shown):
    res = CliRunner().invoke(
        main, ["risk", "--qrels", str(tmp_path / "absent"), "A", "B", "--alpha", given], prog_name="twostage"
    )
    assert res.exit_code == 2, res.output
    assert res.output == (
        USAGE + f"Error: Invalid value for '--alpha': the weight of a loss must be a finite number >= 0, got {shown}\n"
    )


def test_a_finite_weight_gives_urisk_as_computed_by_hand(tmp_path):
    # P.1 per query: baseline (1, 1, 0), run (0, 1, 1): d = (-1, 0, 1); URisk(alpha=2) = (1 - 3 * 1) / 3 = -2/3
    (tmp_path / "q.txt").write_text("q1 0 a 1\nq2 0 a 1\nq3 0 a 1\n")
    (tmp_path / "base").write_text("q1 Q0 a 1 2 b\nq2 Q0 a 1 2 b\nq3 Q0 x 1 2 b\n")
    (tmp_path / "run").write_text("q1 Q0 x 1 2 r\nq2 Q0 a 1 2 r\nq3 Q0 a 1 2 r\n")
    res = CliRunner().invoke(
        main,
        ["risk", "--qrels", str(tmp_path / "q.txt"), "-m", "P.1", "--alpha", "2", "--format", "csv",
         f"base={tmp_path / 'base'}", f"run={tmp_path / 'run'}"],
        prog_name="twostage",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    header, row = (line.split(",") for line in res.output.splitlines())
    got = dict(zip(header, row, strict=True))
    assert (got["alpha"], got["wins"], got["losses"], got["urisk"]) == ("2", "1", "1", "-0.666667"), got
