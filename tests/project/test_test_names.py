"""Tests are named and described by the behaviour they check, and the test tree mirrors the source tree.

- no test file, test function, test class, docstring or comment under tests/ cites an issue number (the word
  followed by a number, with or without a space, ``_`` or ``#``): a reader learns what is checked, not where it
  was asked for;
- every folder of tests/ is named after a package of the toolkit, or is one of ``cli`` (the command line),
  ``jvm`` (toolkit/jvm.py), ``project`` (the repository as a whole: layers, docs, install), ``support`` (helpers)
  and ``fixtures`` (data).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
ISSUE = re.compile(r"(?<![a-z])issue[ _]?#?\d+", re.I)
OTHER_FOLDERS = {"cli", "jvm", "project", "support", "fixtures"}


def citations(text: str) -> list[str]:
    """Every line of ``text`` that cites an issue number."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if ISSUE.search(line)]


def test_no_test_cites_an_issue_number():
    bad = [str(p.relative_to(REPO)) for p in TESTS.rglob("*") if ISSUE.search(p.name)]
    for p in sorted(TESTS.rglob("*.py")):
        bad += [f"{p.relative_to(REPO)}:{c}" for c in citations(p.read_text(encoding="utf-8"))]
    assert not bad, "\n".join(bad)


def test_an_issue_number_is_found_in_each_form():
    word = "iss" + "ue"  # spelled apart, so that this file cites none itself
    text = (
        f'def test_{word}15_x():\n    """As {word} 24, item 2 says."""\n    # {word.title()} #3\n    t{word} 5 cells\n'
    )
    assert [c.split(":")[0] for c in citations(text)] == ["1", "2", "3"]
    assert citations(f"an {word} with 24 queries; {word}s are filed\n") == []


def test_each_test_folder_mirrors_a_package():
    packages = {p.parent.name for p in (REPO / "toolkit").glob("*/__init__.py")}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    assert folders, TESTS
    assert folders <= packages | OTHER_FOLDERS, sorted(folders - packages - OTHER_FOLDERS)
