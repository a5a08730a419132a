"""The import rules of the layers: import-linter's contracts in pyproject.toml, and no import cycle.

Both checks also run on a copy of the package with one forbidden import added, so a contract
that stopped checking anything (a renamed package, a typo in the configuration) fails here.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.skip("import-linter is not installed (scripts/setup.sh installs it)")
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "toolkit", root / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_contracts_are_kept():
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("toolkit/evaluation/agreement.py", "from toolkit.diagnosis import decompose", "Layers: cli > api > report"),
        ("toolkit/report/comparison.py", "import toolkit.api.comparison", "Layers: cli > api > report"),
        ("toolkit/api/evaluation.py", "import toolkit.cli.eval", "Layers: cli > api > report"),
        ("toolkit/retrieval/fusion.py", "import toolkit.api.run", "do not import it"),
        ("toolkit/retrieval/fusion.py", "import toolkit.reranking.job", "do not import each other"),
        ("toolkit/diagnosis/decompose.py", "from toolkit.models import resolve_device", "import no model or job code"),
        (
            "toolkit/data/trec_io.py",
            "from toolkit.measures import registry",
            "The foundation (root modules, data, guard, models) imports no upper layer",
        ),
        ("toolkit/jobs/shards.py", "import toolkit.cli", "Nothing imports the CLI"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, contract):
    root = _copy(tmp_path)
    path = root / module
    path.write_text(path.read_text() + f"\n\ndef _violation():\n    {line}\n")
    res = _lint(root)
    assert res.returncode != 0
    broken = [ln for ln in res.stdout.splitlines() if "BROKEN" in ln]
    assert any(contract in ln for ln in broken), res.stdout


def _graph(root: Path) -> dict[str, set[str]]:
    """toolkit module -> the toolkit modules it imports (at module level or inside functions)."""
    modules = {}
    for p in (root / "toolkit").rglob("*.py"):
        name = ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = p
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, p in modules.items():
        for node in ast.walk(ast.parse(p.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in modules and t != name and t != "toolkit":
                    graph[name].add(t)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_cycle():
    graph = _graph(REPO)
    assert len(graph) > 40
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_a_cycle_is_found(tmp_path):
    root = _copy(tmp_path)
    path = root / "toolkit" / "data" / "records.py"
    path.write_text(path.read_text() + "\n\ndef _violation():\n    from toolkit.data.ranking import trec_order\n")
    assert _cycle(_graph(root)) is not None


def test_the_root_holds_at_most_eight_modules():
    """The loose modules live in the packages they belong to (data/, guard/, models/); the root keeps a few."""
    root = sorted(p.name for p in (REPO / "toolkit").glob("*.py"))
    assert len(root) <= 8, root


def test_no_module_imports_the_package_root():
    """``from toolkit import NAME`` inside the package names a module (``toolkit/NAME.py`` or a subpackage), never
    an attribute of ``toolkit/__init__`` (the version lives in ``toolkit/version.py``): no layer imports the root."""
    offenders = []
    for path in (REPO / "toolkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name == "toolkit" for a in node.names):
                offenders.append(f"{path}: import toolkit")
            if isinstance(node, ast.ImportFrom) and node.module == "toolkit" and node.level == 0:
                for alias in node.names:
                    here = REPO / "toolkit" / alias.name
                    if not (here.with_suffix(".py").is_file() or (here / "__init__.py").is_file()):
                        offenders.append(f"{path}: from toolkit import {alias.name}")
    assert not offenders, offenders
