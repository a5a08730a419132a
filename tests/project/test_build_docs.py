"""scripts/build_docs.sh renders the API reference from the docstrings (pdoc): run into a temporary folder, its
pages exist and document the public verbs with their keywords, and what it writes by default is git-ignored."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from needs import lacking, required

REPO = Path(__file__).resolve().parents[2]


def test_build_docs_renders_the_public_api(tmp_path):
    required("pdoc", "pdoc renders the API reference (pip install .[test])")
    out = tmp_path / "api"
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "build_docs.sh"), str(out)],
        cwd=tmp_path,  # a relative or absolute OUT is the caller's, wherever the script lives
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(out / "index.html")
    assert (out / "index.html").exists() and (out / "search.js").exists()
    page = (out / "toolkit.html").read_text(encoding="utf-8")
    for name in ("evaluate", "compare", "diagnose", "Evaluation", "Comparison", "Diagnosis", "Run"):
        assert f'id="{name}"' in page, name
    # each verb's section carries its signature and its documented keywords
    for verb, keywords in {
        "evaluate": ("relevance_level", "complete", "gain"),
        "compare": ("baseline", "correction", "permutations"),
        "diagnose": ("first_stage", "reranked", "curve_depths"),
    }.items():
        start = page.index(f'<section id="{verb}">')
        end = page.find("<section id=", start + 1)
        section = page[start : end if end > 0 else None]
        for kw in keywords:
            assert re.search(rf"\b{kw}\b", section), (verb, kw)


def test_the_default_output_is_git_ignored():
    if not (REPO / ".git").exists():
        lacking("not a git checkout")
    res = subprocess.run(["git", "check-ignore", "-q", "site/api/index.html"], cwd=REPO, timeout=60)
    assert res.returncode == 0  # 1: not ignored
    assert "site/api" in (REPO / "scripts" / "build_docs.sh").read_text()  # the default the ignore rule covers
