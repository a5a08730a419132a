"""One basename, one module: no two modules of the toolkit share a file name, except ``__init__.py`` and a
verb's two front ends, ``toolkit/api/X.py`` and ``toolkit/cli/X.py`` (with, for the options, the root module
that both build on: ``toolkit/options.py``, the options objects' base, beside ``api/options.py``, the verbs'
options, and ``cli/options.py``, their shared flags). And no two test modules share one (pytest
imports test modules by their basename: a second one would fail to import, or shadow the first).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def repeated(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """Basename -> the paths (relative to ``root``) of every basename held by more than one file."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        by_name[p.name].append(p.relative_to(root).as_posix())
    return {name: sorted(where) for name, where in by_name.items() if len(where) > 1}


#: Root modules whose front ends share their name (see above).
FRONT_END_ROOTS = ("options.py",)


def front_end_pair(where: list[str]) -> bool:
    """Whether the files are exactly one verb's ``api/X.py`` and ``cli/X.py`` (and, for a name of
    ``FRONT_END_ROOTS``, the root module ``X.py``)."""
    parents = sorted(Path(w).parent.as_posix() for w in where)
    if parents == [".", "api", "cli"]:
        return Path(where[0]).name in FRONT_END_ROOTS
    return parents == ["api", "cli"]


def test_toolkit_modules_have_unique_basenames():
    found = repeated(sorted((REPO / "toolkit").rglob("*.py")), REPO / "toolkit")
    bad = {n: w for n, w in found.items() if n != "__init__.py" and not front_end_pair(w)}
    assert not bad, bad
    assert any(front_end_pair(w) for w in found.values())  # the exception is still needed, and recognised


def test_a_repeated_basename_is_found():
    paths = [Path("t/api/risk.py"), Path("t/cli/risk.py"), Path("t/stats/risk.py"), Path("t/a/x.py"), Path("t/b/x.py")]
    found = repeated(paths, Path("t"))
    assert found == {"risk.py": ["api/risk.py", "cli/risk.py", "stats/risk.py"], "x.py": ["a/x.py", "b/x.py"]}
    assert not front_end_pair(found["risk.py"]) and not front_end_pair(found["x.py"])
    assert front_end_pair(["api/risk.py", "cli/risk.py"])
    assert front_end_pair(["api/options.py", "cli/options.py", "options.py"])
    assert not front_end_pair(["api/risk.py", "cli/risk.py", "risk.py"])


def test_test_modules_have_unique_basenames():
    tests = [p for p in sorted((REPO / "tests").rglob("*.py")) if p.name not in ("conftest.py", "__init__.py")]
    assert not repeated(tests, REPO / "tests")
