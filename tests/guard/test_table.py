"""One parametrised table of hostile inputs, run against every door (``doors.py`` says how a door adds its cases)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from doors import Case

from toolkit.guard import DOORS

HERE = Path(__file__).parent


def _cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(HERE.glob("cases_*.py")):
        cases += importlib.import_module(path.stem).CASES
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_door(case: Case, tmp_path: Path) -> None:
    case.run(tmp_path)


def test_every_door_has_cases_and_every_case_a_door():
    doors = {c.door for c in CASES}
    assert set(DOORS) <= doors, f"doors without a case in the table: {sorted(set(DOORS) - doors)}"
    assert doors <= set(DOORS), f"cases for doors toolkit.guard.DOORS does not name: {sorted(doors - set(DOORS))}"
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "two cases share an id"
