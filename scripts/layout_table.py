"""The generated parts of docs/layout.md: every package and module with its docstring's first line, and which
package may import which, derived from the import contracts in pyproject.toml ([tool.importlinter]).

    python scripts/layout_table.py            # prints both blocks
    python scripts/layout_table.py --write    # rewrites them in docs/layout.md, between their markers
    python scripts/layout_table.py --check    # exit 1 when docs/layout.md is stale

The prose around the blocks is written by hand. tests/project/test_layout_doc.py fails when a block differs from
what this script writes, so a new module, a changed docstring or a changed contract is a run of --write. Reads the
sources (ast) and pyproject.toml only; imports nothing of the toolkit.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "layout.md"
TREE = (
    "<!-- layout-tree: begin (scripts/layout_table.py --write; edit the docstrings) -->",
    "<!-- layout-tree: end -->",
)
TABLE = (
    "<!-- may-import: begin (scripts/layout_table.py --write; edit [tool.importlinter]) -->",
    "<!-- may-import: end -->",
)

#: the packages bottom to top (the order the map lists them in); one not named here comes last, by name
ORDER = (
    "guard",
    "data",
    "models",
    "llm",
    "measures",
    "evaluation",
    "stats",
    "quality",
    "jobs",
    "retrieval",
    "reranking",
    "judging",
    "diagnosis",
    "reproduction",
    "report",
    "experiments",
    "api",
    "cli",
)
ROOT = "root modules"


def summary(path: Path) -> str:
    """The first line of a module's docstring, followed by `` …`` when its first paragraph goes on; ``(no
    docstring)`` when it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return "(no docstring)"
    lines = doc.splitlines()
    more = len(lines) > 1 and lines[1].strip() != ""
    return lines[0].strip() + (" …" if more else "")


def packages(repo: Path = REPO) -> list[str]:
    """The toolkit's subpackages, in ``ORDER`` (then any other by name)."""
    found = sorted(p.parent.name for p in (repo / "toolkit").glob("*/__init__.py"))
    return [p for p in ORDER if p in found] + [p for p in found if p not in ORDER]


def modules(folder: Path) -> list[Path]:
    """The modules of a package folder (or the root's loose modules), ``__init__.py`` excluded, by name."""
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_tree(repo: Path = REPO) -> str:
    """Every package (led by its docstring's first line) and its modules (each with its own)."""
    out = [
        f"### `toolkit/`: {_cell(summary(repo / 'toolkit' / '__init__.py'))}",
        "",
        "| root module | |",
        "|---|---|",
    ]
    out += [f"| `{m.name}` | {_cell(summary(m))} |" for m in modules(repo / "toolkit")]
    for pkg in packages(repo):
        folder = repo / "toolkit" / pkg
        out += ["", f"### `{pkg}/`: {_cell(summary(folder / '__init__.py'))}", "", "| module | |", "|---|---|"]
        out += [f"| `{m.name}` | {_cell(summary(m))} |" for m in modules(folder)]
    return "\n".join(out)


def contracts(repo: Path = REPO) -> list[dict]:
    return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def units(repo: Path = REPO) -> dict[str, list[str]]:
    """What the table has a row for: the root modules together, then each package; each with its modules'
    dotted names as the contracts name them."""
    root = [f"toolkit.{m.stem}" for m in modules(repo / "toolkit")]
    return {ROOT: root, **{p: [f"toolkit.{p}"] for p in packages(repo)}}


def may_import(repo: Path = REPO) -> dict[str, list[str]]:
    """For each unit, the units it may import: every other one that no forbidden contract forbids it, that no
    independence contract keeps apart from it and that sits in no higher layer than it."""
    cs = contracts(repo)
    us = units(repo)
    forbidden: set[tuple[str, str]] = set()
    for c in cs:
        if c["type"] == "forbidden":
            forbidden |= {(s, f) for s in c["source_modules"] for f in c["forbidden_modules"]}
        elif c["type"] == "independence":
            forbidden |= {(a, b) for a in c["modules"] for b in c["modules"] if a != b}
        elif c["type"] == "layers":
            levels = [[m.strip() for m in layer.replace(":", "|").split("|")] for layer in c["layers"]]
            for hi, upper in enumerate(levels):
                for lower in levels[hi + 1 :]:
                    forbidden |= {(low, up) for low in lower for up in upper}
                if "|" in c["layers"][hi]:  # independent siblings
                    forbidden |= {(a, b) for a in upper for b in upper if a != b}
        else:
            raise ValueError(f"contract type {c['type']!r} is not rendered: teach scripts/layout_table.py")
    out = {}
    for name, members in us.items():
        out[name] = [
            other
            for other, theirs in us.items()
            if other != name and not any((m, t) in forbidden for m in members for t in theirs)
        ]
    return out


def render_table(repo: Path = REPO) -> str:
    def show(unit: str) -> str:
        return "root modules" if unit == ROOT else f"`{unit}/`"

    out = ["| package | may import |", "|---|---|"]
    for unit, allowed in may_import(repo).items():
        out.append(f"| {show(unit)} | {', '.join(show(a) for a in allowed) or 'nothing of the toolkit'} |")
    return "\n".join(out)


def block(text: str, markers: tuple[str, str]) -> str:
    """The text between a pair of markers (without them)."""
    start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
    return text[start:end].strip("\n")


def written(text: str, repo: Path = REPO) -> str:
    """``text`` (docs/layout.md) with both blocks as this script renders them."""
    for markers, body in ((TREE, render_tree(repo)), (TABLE, render_table(repo))):
        start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
        text = text[:start] + "\n" + body + "\n" + text[end:]
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the blocks in docs/layout.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/layout.md is stale")
    args = ap.parse_args()
    if not (args.write or args.check):
        print(render_tree() + "\n\n" + render_table())
        return 0
    current = DOC.read_text(encoding="utf-8")
    fresh = written(current)
    if args.write:
        if fresh != current:
            DOC.write_text(fresh, encoding="utf-8")
        print(f"{DOC.relative_to(REPO)}: {'rewritten' if fresh != current else 'up to date'}")
        return 0
    if args.check and fresh != current:
        print(f"{DOC.relative_to(REPO)} is stale: run python scripts/layout_table.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
