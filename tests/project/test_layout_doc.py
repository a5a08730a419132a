"""docs/layout.md tells the truth, as tests/guard/test_security_doc.py keeps docs/security.md true:

- its tree lists every package of the toolkit (``pkgutil.walk_packages``) and every module of each, each led by
  the first line of its docstring, verbatim (`` …`` where the first paragraph goes on);
- its "may import" table is what the import contracts of pyproject.toml allow (``scripts/layout_table.py``);
- both blocks are what ``scripts/layout_table.py --write`` writes, so a stale page names the command to run;
- no docstring, comment or page (toolkit/, docs/*.md, README.md) names a toolkit file or module that does not
  exist: ``toolkit.x.y`` resolves to a module (and its next name to a name that module defines),
  ``toolkit/x/y.py`` and ``x/y.py`` (x a package) are files, and a bare ``y.py`` is a file of the repository or
  one of the few files of other projects named on purpose (``EXTERNAL``).
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "layout.md"

#: bare file names of other projects, named on purpose: (name, where and why)
EXTERNAL = {
    "_base.py": "pyserini/search/_base.py, whose topic names the catalog reads (data/catalog.py)",
    "_openai.py": "pyserini/encode/_openai.py, which builds an OpenAI client at import (jvm.py)",
    "setup.py": "pyserini/setup.py, which asks for jdk.incubator.vector (jvm.py)",
    "click.py": "a file beside a spec that must not be imported (reproduction runner, docs/security.md)",
    "toolkit.py": "a file beside a spec that must not be imported (docs/security.md)",
    "yaml.py": "a file beside a spec that must not be imported (docs/security.md)",
    "ms_marco_eval.py": "MS MARCO's official evaluation script, which MRR@10 follows (measures/msmarco.py)",
    "compat_provider.py": "ir_measures' provider of the compat measure (measures/compat.py)",
    "bayesfuse.py": "ranx's fusion source, the definition fuse follows (retrieval/fusion.py)",
    "segfuse.py": "ranx's fusion source, the definition fuse follows (retrieval/fusion.py)",
}


def _script():
    spec = importlib.util.spec_from_file_location("layout_table", REPO / "scripts" / "layout_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def layout():
    return _script()


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines() or ["(no docstring)"]
    return lines[0].strip() + (" …" if len(lines) > 1 and lines[1].strip() else "")


def _listed(text: str) -> dict[str, dict[str, str]]:
    """{package ("" for the root): {"": its lead line, module file name: its line}} as the page lists them."""
    out: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        head = re.fullmatch(r"### `(\w+)/`: (.*)", line)
        if head:
            current = "" if head[1] == "toolkit" else head[1]
            out[current] = {"": head[2].replace("\\|", "|")}
            continue
        row = re.fullmatch(r"\| `(\w+\.py)` \| (.*) \|", line)
        if row and current is not None:
            out[current][row[1]] = row[2].replace("\\|", "|")
    return out


def test_every_package_and_module_is_listed_with_its_docstring(layout):
    text = DOC.read_text(encoding="utf-8")
    listed = _listed(layout.block(text, layout.TREE))
    import toolkit

    packages = {m.name.removeprefix("toolkit.") for m in pkgutil.walk_packages(toolkit.__path__, "toolkit.") if m.ispkg}
    assert set(listed) == packages | {""}, sorted(set(listed) ^ (packages | {""}))
    for package, entries in listed.items():
        folder = REPO / "toolkit" / package
        assert entries[""] == _first_line(folder / "__init__.py"), package
        files = {p.name for p in folder.glob("*.py")} - {"__init__.py"}
        assert set(entries) - {""} == files, (package, sorted((set(entries) - {""}) ^ files))
        for name, line in entries.items():
            if name:
                assert line == _first_line(folder / name), f"{package}/{name}"


def test_the_may_import_table_is_what_the_contracts_allow(layout):
    table = layout.block(DOC.read_text(encoding="utf-8"), layout.TABLE)
    assert table == layout.render_table()
    rows = dict(re.findall(r"^\| (.+?) \| (.+) \|$", table, re.M)[1:])
    # spot checks written by hand from pyproject.toml: the foundation imports only itself, the CLI everything
    assert rows["`data/`"] == "root modules, `guard/`, `models/`"
    assert "`api/`" in rows["`cli/`"] and "`cli/`" not in rows["`api/`"]
    assert "`diagnosis/`" not in rows["`quality/`"] and "`quality/`" in rows["`diagnosis/`"]
    assert "`reranking/`" not in rows["`retrieval/`"] and "`retrieval/`" not in rows["`reranking/`"]
    assert "`judging/`" not in rows["`llm/`"] and "`llm/`" in rows["`judging/`"]


def test_the_page_is_what_the_script_writes(layout):
    text = DOC.read_text(encoding="utf-8")
    assert layout.written(text) == text, "docs/layout.md is stale: run python scripts/layout_table.py --write"


def test_a_stale_page_is_found(layout, tmp_path):
    """The check fails on a page listing a module that is gone, or missing one that is there."""
    text = DOC.read_text(encoding="utf-8")
    gone = text.replace("| `trec.py` |", "| `trec_measures.py` |")
    assert gone != text and layout.written(gone) != gone
    assert _listed(layout.block(gone, layout.TREE))["measures"].get("trec_measures.py")


# ---------------------------------------------------------------- names of files and modules that exist


@cache
def _basenames() -> frozenset[str]:
    """The file names of the repository (tracked, and the toolkit's modules not yet added)."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return frozenset({Path(p).name for p in files} | {p.name for p in (REPO / "toolkit").rglob("*.py")})


@cache
def _defined(module_file: Path) -> frozenset[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(module_file.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING blocks, optional imports
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return frozenset(names)


def _module_file(dotted: str, root: Path) -> Path | None:
    path = root / dotted.replace(".", "/")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def dotted_problem(name: str, root: Path = REPO) -> str | None:
    """Why ``toolkit.a.b.c`` names nothing (None when it resolves): the longest prefix that is a module, then
    one name that module defines (or a submodule); what follows (methods, fields) is not checked."""
    parts = name.split(".")
    k = 1
    while k < len(parts) and _module_file(".".join(parts[: k + 1]), root):
        k += 1
    if k == len(parts):
        return None
    module = _module_file(".".join(parts[:k]), root)
    if module is None or parts[k] in _defined(module):
        return None
    return f"{'.'.join(parts[: k + 1])}: {'.'.join(parts[:k])} defines no {parts[k]!r}"


PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*)(\w+\.py)\b")
DOTTED = re.compile(r"(?<![\w.])toolkit(?:\.\w+)+")


def path_problem(prefix: str, name: str, root: Path = REPO) -> str | None:
    """Why a file name written in a docstring, comment or page names nothing (None when it is fine)."""
    basenames = _basenames() if root == REPO else frozenset()
    packages = {p.parent.name for p in (root / "toolkit").glob("*/__init__.py")}
    first = prefix.split("/")[0] if prefix else ""
    if prefix.startswith(("toolkit/", "tests/", "scripts/", "docs/")):
        return None if (root / prefix / name).is_file() else f"{prefix}{name}: no such file"
    if first in packages:
        found = (root / "toolkit" / prefix / name).is_file() or (root / "tests" / prefix / name).is_file()
        return None if found else f"{prefix}{name}: no such file in toolkit/ or tests/"
    if prefix:  # another project's path (../shared/..., pyserini/...): not ours to check
        return None
    return None if name in basenames or name in EXTERNAL else f"{name}: no file of that name"


def _texts() -> list[Path]:
    return [*sorted((REPO / "toolkit").rglob("*.py")), *sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


def test_no_text_names_a_file_or_module_that_does_not_exist():
    bad = []
    for path in _texts():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{n}"
            for m in DOTTED.finditer(line):
                if m[0].endswith(".py"):  # a file name (toolkit.py), checked below as one
                    continue
                if problem := dotted_problem(m[0].rstrip(".")):
                    bad.append(f"{where}: {problem}")
            for m in PATH.finditer(line):
                if problem := path_problem(m[1], m[2]):
                    bad.append(f"{where}: {problem}")
    assert not bad, "\n".join(bad)


def test_a_name_that_does_not_exist_is_found():
    assert dotted_problem("toolkit.quality.holes.hole_bounds") is None
    assert (
        dotted_problem("toolkit.evaluation.holes") == "toolkit.evaluation.holes: toolkit.evaluation defines no 'holes'"
    )
    assert dotted_problem("toolkit.stats.verdict.no_such_thing") is not None
    assert path_problem("", "trec_measures.py") == "trec_measures.py: no file of that name"
    assert path_problem("evaluation/", "holes.py") is not None
    assert path_problem("toolkit/quality/", "holes.py") is None
    assert path_problem("quality/", "test_holes.py") is None  # tests/quality/test_holes.py
    assert path_problem("../shared/tools/gpu/", "gpu_precision.py") is None
    assert path_problem("", "yaml.py") is None
