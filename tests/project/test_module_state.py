"""No hidden state at module level: a module of the toolkit binds no mutable container (``dict``, ``list``,
``set``, their comprehensions, ``defaultdict``, ``OrderedDict``, ``Counter``, ``deque``, weak containers,
``threading.local``) at its top level. A table is a constant made immutable (``MappingProxyType``,
``frozenset``, ``tuple``); a cache is a ``functools.cache``'d function or a declared object; a registry that
declarations fill is a private dict exposed read-only (``NAME = MappingProxyType(_name)``) and written by its
declaration decorator only. ``__all__`` stays a list, by convention. What is left is in ``DECLARED``, each with
its reason.

A scan of the AST of every module under toolkit/; the planted cases show that it finds each form.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: (module, name) -> why this mutable module-level container stays.
DECLARED = {
    ("toolkit.jvm", "_QUIETED"): "Lucene's java.util.logging loggers, kept referenced as long as the JVM (the "
    "process) lives, since java.util.logging holds its loggers weakly and would forget their level",
}

_MUTABLE_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "bytearray",
        "defaultdict",
        "OrderedDict",
        "Counter",
        "ChainMap",
        "deque",
        "local",
        "WeakValueDictionary",
        "WeakKeyDictionary",
        "WeakSet",
    }
)
_MUTABLE_NODES = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _called(node: ast.expr) -> str | None:
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _top_level(body: list[ast.stmt]):
    """The statements run at import: the module's, and those inside its top-level ``if``/``try``/``with``."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _top_level(part)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)
        else:
            yield node


def _pairs(target: ast.expr, value: ast.expr):
    """(name, the expression bound to it) of an assignment, unpacking ``A, B = x, y`` element by element."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(value.elts) == len(target.elts)
    ):
        for t, v in zip(target.elts, value.elts):
            yield from _pairs(t, v)


def mutable_bindings(source: str) -> list[tuple[int, str]]:
    """(line, name) of each module-level name bound to a mutable container in ``source``, except ``__all__``
    and a private dict that the module exposes read-only (``MappingProxyType(_name)``)."""
    tree = ast.parse(source)
    wrapped = {
        arg.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node) == "MappingProxyType"
        for arg in node.args
        if isinstance(arg, ast.Name)
    }
    found = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            for name, bound in _pairs(target, value):
                if not (isinstance(bound, _MUTABLE_NODES) or _called(bound) in _MUTABLE_CALLS) or name == "__all__":
                    continue
                if name in wrapped and name.startswith("_") and isinstance(bound, ast.Dict) and not bound.keys:
                    continue  # a declared registry: filled by its declarations, read through the proxy
                found.append((node.lineno, name))
    return found


def _modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((REPO / "toolkit").rglob("*.py"))
    }


def test_no_module_holds_a_mutable_container_that_is_not_declared():
    found = [
        f"{module}:{line} {name}"
        for module, path in _modules().items()
        for line, name in mutable_bindings(path.read_text(encoding="utf-8"))
        if (module, name) not in DECLARED
    ]
    assert found == [], "make each immutable, a functools.cache'd function, or a read-only registry:\n" + "\n".join(
        found
    )


def test_every_declared_container_still_exists():
    modules = _modules()
    stale = [
        key
        for key in DECLARED
        if key[0] not in modules or key[1] not in {n for _, n in mutable_bindings(modules[key[0]].read_text())}
    ]
    assert stale == []


@pytest.mark.parametrize(
    "source, names",
    [
        ("X = {}", ["X"]),
        ("X: dict[str, int] = {'a': 1}", ["X"]),
        ("X = [1, 2]", ["X"]),
        ("X = {1, 2}", ["X"]),
        ("X = {k: 1 for k in 'ab'}", ["X"]),
        ("X = [k for k in 'ab']", ["X"]),
        ("X = {k for k in 'ab'}", ["X"]),
        ("X = dict(a=1)", ["X"]),
        ("X = list('ab')", ["X"]),
        ("X = set('ab')", ["X"]),
        ("import collections\nX = collections.defaultdict(list)", ["X"]),
        ("from collections import OrderedDict\nX = OrderedDict()", ["X"]),
        ("import threading\nX = threading.local()", ["X"]),
        ("from threading import local\nX = local()", ["X"]),
        ("import weakref\nX = weakref.WeakValueDictionary()", ["X"]),
        ("X = Y = []", ["X", "Y"]),
        ("A, B = [], {}", ["A", "B"]),
        ("try:\n    X = {}\nexcept ImportError:\n    X = []", ["X", "X"]),
        ("if True:\n    X = []", ["X"]),
        ("_X = {'a': 1}\nX = MappingProxyType(_X)", ["_X"]),  # a filled dict behind a proxy is still a dict
        ("X = {}\nY = MappingProxyType(X)", ["X"]),  # a registry's dict is private
        ("_x = {}", ["_x"]),  # private, but not behind a proxy
    ],
)
def test_each_mutable_form_is_found(source, names):
    assert [n for _, n in mutable_bindings(source)] == names


@pytest.mark.parametrize(
    "source",
    [
        "__all__ = ['a', 'b']",
        "X = ('a', 'b')",
        "X = frozenset({'a'})",
        "from types import MappingProxyType\nX = MappingProxyType({'a': 1})",
        "_X = {}\nX = MappingProxyType(_X)",
        "def f():\n    x = {}\n    return x",
        "class C:\n    def m(self):\n        y = []",
        "X = 1\nY = 'a'",
    ],
)
def test_immutable_and_local_bindings_pass(source):
    assert mutable_bindings(source) == []
