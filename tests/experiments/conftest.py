"""A six-document Lucene index (built once per session) shared by the experiment tests."""

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
