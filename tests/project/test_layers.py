"""The import rules of the layers: import-linter's contracts in pyproject.toml, and no import cycle.

Both checks also run on a copy of the package with forbidden imports added, at least one for every contract,
each of which must be reported under the contract it breaks: a contract that stopped checking anything (a
renamed package, a typo in the configuration) fails here.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from needs import lacking

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        lacking("import-linter is not installed (scripts/setup.sh installs it)")
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        # wide enough that no contract's name is wrapped over two lines
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "COLUMNS": "1000"},
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "toolkit", root / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def _contracts() -> list[str]:
    return [
        c["name"] for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    ]


def test_contracts_are_kept():
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(_contracts())} kept, 0 broken" in res.stdout, res.stdout


#: (module, the import planted in it, the start of the contract it breaks, the edge lint-imports names)
PLANTED = [
    (
        "toolkit/stats/rank_similarity.py",
        "from toolkit.diagnosis import decompose",
        "Layers:",
        "toolkit.stats.rank_similarity -> toolkit.diagnosis.decompose",
    ),
    (
        "toolkit/quality/holes.py",
        "from toolkit.diagnosis import decompose",
        "Layers:",
        "toolkit.quality.holes -> toolkit.diagnosis.decompose",
    ),
    (
        "toolkit/stats/verdict.py",
        "import toolkit.quality.pooling",
        "Layers:",
        "toolkit.stats.verdict -> toolkit.quality.pooling",
    ),
    (
        "toolkit/evaluation/groups.py",
        "import toolkit.stats.paired",
        "Layers:",
        "toolkit.evaluation.groups -> toolkit.stats.paired",
    ),
    (
        "toolkit/report/compare_page.py",
        "import toolkit.api.comparison",
        "Layers:",
        "toolkit.report.compare_page -> toolkit.api.comparison",
    ),
    ("toolkit/api/evaluation.py", "import toolkit.cli.eval", "Layers:", "toolkit.api.evaluation -> toolkit.cli.eval"),
    (
        "toolkit/retrieval/fusion.py",
        "import toolkit.experiments.spec",
        "Experiments: only the API",
        "toolkit.retrieval.fusion -> toolkit.experiments.spec",
    ),
    (
        "toolkit/experiments/spec.py",
        "import toolkit.api.run",
        "Experiments import neither",
        "toolkit.experiments.spec -> toolkit.api.run",
    ),
    (
        "toolkit/retrieval/fusion.py",
        "import toolkit.reranking.rerank_job",
        "Retrieval and reranking",
        "toolkit.retrieval.fusion -> toolkit.reranking.rerank_job",
    ),
    (
        "toolkit/diagnosis/decompose.py",
        "from toolkit.models import resolve_device",
        "Results layers import no model",
        "toolkit.diagnosis.decompose -> toolkit.models",
    ),
    (
        "toolkit/jobs/embed_cache.py",
        "import toolkit.measures.names",
        "Jobs import only",
        "toolkit.jobs.embed_cache -> toolkit.measures.names",
    ),
    (
        "toolkit/data/trec_io.py",
        "from toolkit.measures import registry",
        "The foundation",
        "toolkit.data.trec_io -> toolkit.measures.registry",
    ),
    ("toolkit/jobs/shards.py", "import toolkit.cli", "Nothing imports the CLI", "toolkit.jobs.shards -> toolkit.cli"),
    (
        "toolkit/retrieval/fusion.py",
        "import toolkit.api.run",
        "The public API sits on top",
        "toolkit.retrieval.fusion -> toolkit.api.run",
    ),
    (
        "toolkit/judging/judge_job.py",
        "import toolkit.reranking.rerank_job",
        "Judging imports no",
        "toolkit.judging.judge_job -> toolkit.reranking.rerank_job",
    ),
    (
        "toolkit/report/html.py",
        "import toolkit.judging.prompt",
        "The results layers do not import the judges",
        "toolkit.report.html -> toolkit.judging.prompt",
    ),
    (
        "toolkit/llm/chat.py",
        "import toolkit.judging.prompt",
        "LLM access",
        "toolkit.llm.chat -> toolkit.judging.prompt",
    ),
]


def _broken_sections(stdout: str, names: list[str]) -> dict[str, str]:
    """The part of lint-imports' report under "Broken contracts" for each contract it names there."""
    report = stdout.partition("Broken contracts")[2]
    starts = sorted((report.index(n + "\n"), n) for n in names if n + "\n" in report)
    return {
        n: report[at : (starts[i + 1][0] if i + 1 < len(starts) else len(report))] for i, (at, n) in enumerate(starts)
    }


def test_every_contract_has_a_planted_violation():
    names = _contracts()
    for *_, prefix, _edge in PLANTED:
        assert sum(n.startswith(prefix) for n in names) == 1, prefix
    assert {n for n in names if any(n.startswith(p[2]) for p in PLANTED)} == set(names)


def test_each_planted_import_breaks_its_contract(tmp_path):
    root = _copy(tmp_path)
    for i, (module, line, _prefix, _edge) in enumerate(PLANTED):
        path = root / module
        path.write_text(path.read_text() + f"\n\ndef _violation_{i}():\n    {line}\n")
    res = _lint(root)
    assert res.returncode != 0
    names = _contracts()
    sections = _broken_sections(res.stdout, names)
    for _module, _line, prefix, edge in PLANTED:
        name = next(n for n in names if n.startswith(prefix))
        assert edge in sections.get(name, ""), f"{name}: {edge} not reported\n{res.stdout}"


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
