"""What two modules share is public in the module that owns it: no module of the toolkit imports another
module's private name (``from toolkit.x import _name``) or reads one through the other module
(``module._name``, ``toolkit.x.y._name``). Names with two leading and trailing underscores are not private.

A scan of the AST of every module under toolkit/; the planted cases show that it finds each form.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_names(root: Path) -> set[str]:
    out = set()
    for p in (root / "toolkit").rglob("*.py"):
        out.add(".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"))
    return out


def offences(source: str, here: str, modules: set[str]) -> list[str]:
    """Every reach into another toolkit module's private names in ``source`` (the module ``here``)."""
    found = []
    aliases: dict[str, str] = {}  # local name -> the toolkit module it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("toolkit"):
                continue
            for a in node.names:
                target = f"{node.module}.{a.name}"
                if target in modules:  # a module imported from its package
                    aliases[a.asname or a.name] = target
                elif _private(a.name) and node.module != here:
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        owner = _dotted(node.value, aliases)
        if owner is not None and owner in modules and owner != here:
            found.append(f"line {node.lineno}: {owner}.{node.attr}")
    return found


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The toolkit module an expression names (``holes``, ``toolkit.quality.holes``), or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id, node.id if node.id == "toolkit" else None)
    if head is None:
        return None
    return ".".join([head, *reversed(parts)])


def test_no_module_reaches_into_another_modules_private_names():
    modules = _module_names(REPO)
    assert len(modules) > 100
    bad = []
    for p in sorted((REPO / "toolkit").rglob("*.py")):
        here = ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        bad += [f"{p.relative_to(REPO)} {o}" for o in offences(p.read_text(encoding="utf-8"), here, modules)]
    assert not bad, "\n".join(bad)


def test_each_form_is_found():
    modules = {"toolkit.a", "toolkit.b", "toolkit.pkg", "toolkit.pkg.c"}
    planted = """
from toolkit.b import _hidden, shown
from toolkit.pkg import c
import toolkit.pkg.c as cc
import toolkit.b

def f():
    c._one(); cc._two(); toolkit.b._three; toolkit.pkg.c._four
    c.__doc__; shown._attr_of_an_object
"""
    got = offences(planted, "toolkit.a", modules)
    assert sorted(got) == [
        "line 2: from toolkit.b import _hidden",
        "line 8: toolkit.b._three",
        "line 8: toolkit.pkg.c._four",
        "line 8: toolkit.pkg.c._one",
        "line 8: toolkit.pkg.c._two",
    ]
    # inside toolkit.b its own private names are its own
    assert sorted(offences(planted, "toolkit.b", modules)) == [
        "line 8: toolkit.pkg.c._four",
        "line 8: toolkit.pkg.c._one",
        "line 8: toolkit.pkg.c._two",
    ]
