"""docs/security.md's section "The doors": every guarantee (a bullet under a door's heading) cites a case of the table, and every cited case exists."""

from __future__ import annotations

import re
from pathlib import Path

from test_table import CASES

from toolkit.guard import DOORS

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
CITE = re.compile(r"`((?:" + "|".join(DOORS) + r")/[\w.-]+)`")


def _doors_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## The doors\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _guarantees(section: str) -> list[str]:
    """The bullets under the door headings: each states one guarantee (a bullet runs to the next bullet, heading
    or blank line)."""
    body = section.split("\n### ", 1)[1]
    return [m.group(0) for m in re.finditer(r"(?m)^- .*(?:\n(?!- |#|\s*\n)[ \t]+.*)*", body)]


def test_every_cited_case_is_in_the_table():
    ids = {c.id for c in CASES}
    cited = set(CITE.findall(_doors_section()))
    assert cited, "the doors section cites no case"
    assert cited <= ids, f"cited but not in the table: {sorted(cited - ids)}"


def test_every_door_has_guarantees_and_each_cites_a_case():
    section = _doors_section()
    for door in DOORS:
        assert f"(`toolkit.guard.{door}`)" in section, f"no heading for the door {door}"
    guarantees = _guarantees(section)
    assert guarantees, "the doors section states no guarantee"
    for guarantee in guarantees:
        assert CITE.search(guarantee), f"a guarantee without a case: {guarantee[:200]!r}"


def _sections() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    parts = re.split(r"(?m)^## ", text)[1:]
    return {p.split("\n", 1)[0]: p for p in parts}


def test_every_section_names_the_tests_that_hold_it_and_they_exist():
    """Outside the doors' bullets the page says which test holds each rule: every ``##`` section names at least
    one test file (or cites a case), and every test file it names exists."""
    repo = DOC.parents[1]
    ids = {c.id for c in CASES}
    for heading, body in _sections().items():
        files = set(re.findall(r"tests/[\w/]+\.py", body))
        cited = set(CITE.findall(body))
        assert files or cited, f"section {heading!r} names no test"
        missing = sorted(f for f in files if not (repo / f).is_file())
        assert not missing, f"section {heading!r} names tests that do not exist: {missing}"
        assert cited <= ids, f"section {heading!r} cites cases not in the table: {sorted(cited - ids)}"
