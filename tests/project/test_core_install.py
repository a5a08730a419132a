"""The core install (`pip install .`, no extras) evaluates, compares and diagnoses run files, and a command
that needs an extra says which one in one line.

A fresh venv is built in a temporary folder with ``python3.11 -m venv`` and ``pip install REPO`` (pip
installs the pinned core wheels from its cache or the configured index; building the venv takes about
a minute here, hence ``slow``). The commands run from that venv's ``twostage`` script, without
PYTHONPATH and from a folder without the checkout, so they import only what the core install holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from needs import lacking
from samples import write_tiny

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# Hand-computed (linear gain, log2 discount, trec_eval 9 order):
# q1: run d2 (0), d1 (1), d3 (2), d4 (unjudged); q2: e2 (unjudged), e1 (1).
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 e1 1\n"
RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq1 Q0 d3 3 1.0 t\nq1 Q0 d4 4 0.5 t\nq2 Q0 e2 1 2.0 t\nq2 Q0 e1 2 1.0 t\n"
# map: q1 (1/2 + 2/3) / 2 = 0.583333, q2 1/2 -> 0.541667; P_5: (2/5 + 1/5) / 2 = 0.3;
# ndcg_cut_10: q1 (1/log2(3) + 2/log2(4)) / (2 + 1/log2(3)) = 0.619905, q2 (1/log2(3)) / 1 = 0.630930 -> 0.625417
EXPECTED = {"map": 0.541667, "P_5": 0.3, "ndcg_cut_10": 0.625417}

EXTRA_PACKAGES = ("pyserini", "torch", "transformers", "sentence-transformers", "faiss-cpu", "ray", "onnxruntime")


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """A venv with `pip install REPO` only: the core dependencies, no extras."""
    python = shutil.which("python3.11")
    if python is None:
        lacking("python3.11 is not on PATH")
    venv = tmp_path_factory.mktemp("core") / "venv"
    env = _clean_env()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=env)
    # A copy of the checkout without its .venv or build leftovers, so pip builds from the sources only.
    src = tmp_path_factory.mktemp("src")
    for name in ("toolkit", "pyproject.toml", "README.md"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, src / name)
    res = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(src)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return venv


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH (so the venv's own installed copy is what runs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["TWOSTAGE_DATA"] = str(Path(os.environ.get("TWOSTAGE_CACHE", "/tmp")) / "no-data-here")
    return env


def _twostage(venv: Path, cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "twostage"), *map(str, args)], cwd=cwd, env=_clean_env(), capture_output=True, text=True
    )


def test_core_install_holds_no_extra(core):
    res = subprocess.run(
        [str(core / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {line.split("==")[0].lower() for line in res.stdout.splitlines()}
    assert "twostage" in installed and {"numpy", "pandas", "pyarrow", "click", "scipy", "matplotlib"} <= installed
    assert not installed & set(EXTRA_PACKAGES), installed & set(EXTRA_PACKAGES)


def test_core_eval_matches_hand_computed_and_pytrec_eval(core, tmp_path):
    import pytrec_eval

    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    res = _twostage(core, tmp_path, "eval", "-m", "map", "-m", "P.5", "-m", "ndcg_cut.10", "qrels.txt", "run.txt")
    assert res.returncode == 0, res.stderr
    got = {}
    for line in res.stdout.splitlines():
        if line.startswith("#"):
            continue
        name, qid, value = line.split("\t")
        assert qid == "all"
        got[name.strip()] = float(value)
    assert got == pytest.approx(EXPECTED, abs=5e-5)
    # the same at full precision against pytrec_eval
    res = _twostage(core, tmp_path, "eval", "-q", "--format", "json", "-m", "map", "qrels.txt", "run.txt")
    assert res.returncode == 0, res.stderr
    import json

    per_query = {q: v["map"] for q, v in json.loads(res.stdout)["per_query"].items()}
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"e1": 1}}
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d3": 1.0, "d4": 0.5}, "q2": {"e2": 2.0, "e1": 1.0}}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    assert per_query == {q: pytest.approx(v["map"], abs=1e-12) for q, v in oracle.items()}


def test_core_diagnose_gives_the_full_installs_diagnosis(core, tmp_path, cli):
    qp = write_tiny(tmp_path)
    args = ["diagnose", "--qrels", qp, "--first-stage", tmp_path / "first.trec", "--reranked", tmp_path / "rr.trec"]
    res = _twostage(core, tmp_path, *args, "--out", tmp_path / "core")
    assert res.returncode == 0, res.stderr
    here = cli(*args, "--out", tmp_path / "full")
    assert here.exit_code == 0, here.output
    core_rows = (tmp_path / "core" / "per_query.csv").read_text()
    assert core_rows == (tmp_path / "full" / "per_query.csv").read_text()
    import csv

    diagnosis = {r["query_id"]: r["diagnosis"] for r in csv.DictReader(core_rows.splitlines())}
    # what tests/support/samples.tiny() was built to show
    assert diagnosis["q2"] == "reranker-hurt" and diagnosis["q3"] == "reranker-misordered"
    assert diagnosis["q6"] == "candidates-missed"
    assert diagnosis["q4"] == "unjudged-top" and diagnosis["q7"] == "no-relevant"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["bm25", "--index", "idx", "--topics", "t.tsv", "--out", "r.trec"], "pyserini"),
        (["dense", "--index", "idx", "--topics", "t.tsv", "--out", "r.trec"], "pyserini"),
        (["index", "--collection", "c.jsonl", "--out", "idx"], "pyserini"),
        (
            ["rerank", "--run", "r.trec", "--topics", "t.tsv", "--corpus", "c.jsonl", "--model", "m", "--out", "o"],
            "rerank",
        ),
    ],
)
def test_commands_needing_an_extra_name_it_in_one_line(core, tmp_path, args, extra):
    res = _twostage(core, tmp_path, *args)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"Error: twostage {args[0]} needs the [{extra}] extra ")
    assert f"pip install 'twostage[{extra}]'" in lines[0]
    assert "Traceback" not in res.stderr


def test_core_doctor_names_the_missing_extras(core, tmp_path):
    res = _twostage(core, tmp_path, "doctor", "--no-jvm")
    assert res.returncode == 0, res.stdout + res.stderr  # a core install is a working install
    assert "[pyserini] missing (pyserini is not installed)" in res.stdout
    assert "pyserini     not installed (the [pyserini] extra)" in res.stdout
    assert "java         not checked: index, bm25, dense need the [pyserini] extra" in res.stdout
