"""docs/security.md's section "The doors": every guarantee cites a case of the table, and every cited case exists."""

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


def _statements(section: str) -> list[str]:
    """The bullets and paragraphs under the door headings (headings, tables' rule rows and the intro excluded)."""
    body = section.split("\n### ", 1)[1]
    blocks: list[str] = []
    for chunk in re.split(r"\n\s*\n", body):
        for item in re.split(r"\n(?=- )", chunk.strip()):
            item = item.strip()
            if not item or item.startswith("### ") or "\n" not in item and item.endswith(")") and "issue" in item:
                continue
            if re.fullmatch(r"[^\n]*\(`toolkit\.guard\.\w+`\)", item.split("\n")[0]) and "\n" not in item:
                continue  # a door's heading line
            blocks.append(item)
    return blocks


def test_every_cited_case_is_in_the_table():
    ids = {c.id for c in CASES}
    cited = set(CITE.findall(_doors_section()))
    assert cited, "the doors section cites no case"
    assert cited <= ids, f"cited but not in the table: {sorted(cited - ids)}"


def test_every_door_has_guarantees_and_each_cites_a_case():
    section = _doors_section()
    for door in DOORS:
        assert f"(`toolkit.guard.{door}`)" in section, f"no heading for the door {door}"
    for statement in _statements(section):
        if statement.startswith("(issue"):
            continue
        assert CITE.search(statement), f"a guarantee without a case: {statement[:200]!r}"
