"""The public surface: ``import toolkit`` stays light, every public name is documented (a docstring, and an
``Args:`` section naming exactly the parameters), the pdoc reference builds with warnings as errors, and mypy
is clean on the public API."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from needs import lacking, required

import toolkit

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pyserini", "jnius", "torch", "faiss", "matplotlib", "ray", "transformers", "sentence_transformers")


def _python(code: str) -> subprocess.CompletedProcess:
    # PYTHONPATH kept: without it the subprocess would import /work/main's toolkit through the editable install
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_import_toolkit_loads_nothing_until_used():
    code = (
        "import sys, json, toolkit\n"
        "before = sorted(m for m in ('pandas', 'numpy', 'pyarrow', 'toolkit.api') if m in sys.modules)\n"
        "toolkit.evaluate, toolkit.compare, toolkit.diagnose, toolkit.Run, toolkit.bm25, toolkit.rerank\n"
        f"after = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(json.dumps([before, after, toolkit.__file__]))"
    )
    res = _python(code)
    assert res.returncode == 0, res.stderr
    before, after, where = json.loads(res.stdout.strip().splitlines()[-1])
    assert before == [] and after == []
    assert where == str(REPO / "toolkit" / "__init__.py")


def test_all_names_resolve_and_unknown_names_raise():
    assert set(toolkit.__all__) == set(toolkit._PUBLIC) | {"__version__"}
    for name in toolkit.__all__:
        assert getattr(toolkit, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'evaluat'"):
        toolkit.evaluat  # noqa: B018
    assert "evaluate" in dir(toolkit)


_ARGS = re.compile(r"^\s*Args:\s*$")
_ARG = re.compile(r"^ {4,8}(\*{0,2}\w+)(?: \(.*\))?:")


def documented_args(doc: str) -> list[str] | None:
    """The parameter names of a Google-style ``Args:`` section (None when there is none)."""
    lines = doc.splitlines()
    start = next((i for i, ln in enumerate(lines) if _ARGS.match(ln)), None)
    if start is None:
        return None
    names = []
    indent = len(lines[start]) - len(lines[start].lstrip())
    for ln in lines[start + 1 :]:
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        m = _ARG.match(ln[indent:])
        if m:
            names.append(m.group(1).lstrip("*"))
    return names


def doc_problems(obj, qualname: str) -> list[str]:
    """Why ``obj``'s documentation is not good enough: no docstring, or Args naming other parameters."""
    doc = inspect.getdoc(obj)
    if not doc:
        return [f"{qualname}: no docstring"]
    args = documented_args(doc)
    if args is None or not callable(obj):
        return []
    params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
    out = [f"{qualname}: documents {a!r}, which is not a parameter" for a in args if a not in params]
    out += [f"{qualname}: parameter {p!r} is not in its Args section" for p in params if p not in args]
    return out


def _public_members():
    for name in toolkit.__all__:
        obj = getattr(toolkit, name)
        if name.startswith("__"):
            continue
        yield name, obj
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                target = member.fget if isinstance(member, property) else member
                if callable(target):
                    yield f"{name}.{attr}", target


def test_every_public_name_is_documented():
    problems = [p for q, obj in _public_members() for p in doc_problems(obj, q)]
    assert problems == []
    assert len(list(_public_members())) >= 50  # 13 names and their public methods and properties


def test_the_checker_catches_bad_docstrings():
    def undocumented(a):
        pass

    def wrong(a, b):
        """Do it.

        Args:
            a: one.
            c: a parameter that does not exist.
        """

    assert doc_problems(undocumented, "f") == ["f: no docstring"]
    assert doc_problems(wrong, "g") == [
        "g: documents 'c', which is not a parameter",
        "g: parameter 'b' is not in its Args section",
    ]


def test_pdoc_reference_builds_without_warnings(tmp_path):
    required("pdoc", "pdoc renders the API reference (pip install .[test])")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run(
        [sys.executable, "-W", "error", "-m", "pdoc", "-d", "google", "-o", str(tmp_path), "toolkit", "!toolkit.[!a]*"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    html = (tmp_path / "toolkit.html").read_text()
    for name in toolkit.__all__:
        if not name.startswith("__"):
            assert f'id="{name}"' in html, name
    assert "relevance_level" in html and "Raises" in html


@pytest.mark.slow  # a cold mypy run over the API and what it imports: about 100 s on 2 cores
def test_mypy_is_clean_on_the_public_api(tmp_path):
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.exists():
        lacking("mypy is not installed (scripts/setup.sh installs it)")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run(
        [str(mypy), "--cache-dir", str(tmp_path / "cache")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout
