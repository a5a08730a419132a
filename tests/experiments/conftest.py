"""A six-document Lucene index (built once per session) shared by the experiment tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DOCS = {
    "d1": "time sharing systems for computers",
    "d2": "the operating system of a time sharing computer",
    "d3": "matrix inversion algorithms",
    "d4": "algorithms for sorting and searching",
    "d5": "computer time and cost accounting",
    "d6": "numerical methods for matrix problems",
}


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from toolkit.cli import main

    folder = tmp_path_factory.mktemp("light")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS.items()))
    out = folder / "index"
    res = CliRunner().invoke(main, ["index", "--collection", str(corpus), "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    return out
