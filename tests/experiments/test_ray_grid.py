"""``twostage experiment run --ray``: grids on a real two-node Ray cluster (``tests/support/ray_cluster.py``).

Oracle: the same experiment run in one process (no Ray). The --ray runs, results.csv included, must equal
it byte for byte: the points are the same point code (``toolkit.experiments.points``) and both go through
the stage cache's file. Also: a worker SIGKILLed after the first point is in the cache (Ray restarts it and
re-runs its point), a driver SIGKILLed mid-sweep (the rerun says what it reused and computes only the rest),
stdout holding only the table (Ray's notices on stderr), a closed port. With models (six documents,
all-MiniLM-L6-v2 on the CPU): rerank, dense and fusion stages, the rerank lane's worker SIGKILLed while it
loads its model, and an exception on a worker reaching the user.

Grid: BM25 k1 0.6/0.9/1.2 x b 0.4/0.75, 5-fold tuned on MAP, then RM3 on each fold's choice (the folds'
choices share points: the first pass submits each once). The drivers are subprocesses (as a user runs
them), so the pytest process, whose JVM other tests use, never becomes a Ray driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from needs import required
from ray_cluster import free_port, running_cluster

from toolkit.experiments.results import run_experiment
from toolkit.experiments.stage_cache import StageCache

required("ray", "the [ray] extra is not installed (pip install -e '.[ray]')")

POINTS = 6  # BM25 points; RM3 adds one per distinct fold choice


@pytest.fixture(scope="module")
def cluster():
    """As tests/jobs/test_ray.py: the cluster's token in the environment of the drivers."""
    with running_cluster() as c:
        yield c
    assert c.leftovers() == [], "Ray processes were left behind"


@pytest.fixture(scope="module")
def exp_file(cacm_index, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("exp") / "cacm.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: cacm-ray
            topics: cacm
            qrels: cacm
            index: {{path: {cacm_index}}}
            hits: 1000
            evaluation: {{measures: [map, P.30, ndcg_cut.10], baseline: bm25, permutations: 500}}
            stages:
              bm25:
                type: bm25
                k1: [0.6, 0.9, 1.2]
                b: [0.4, 0.75]
                tune: {{metric: map, folds: 5, seed: 0}}
              rm3:
                type: rm3
                input: bm25
                fb_terms: 10
                fb_docs: 10
                original_query_weight: 0.5
            """
        )
    )
    return path


@pytest.fixture(scope="module")
def reference(exp_file, shared_data, tmp_path_factory) -> Path:
    """The one-process run: the oracle every --ray run must equal."""
    folder = tmp_path_factory.mktemp("ref")
    run_experiment(exp_file, folder / "out", data_dir=str(shared_data), cache=StageCache(folder / "cache"), say=print)
    return folder / "out"


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path, shared_data):
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "twostage-cache"))
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))


def args(exp_file, out, cache, *extra) -> list[str]:
    # sys.executable -m toolkit.cli with the inherited environment (PYTHONPATH kept): this checkout's code
    base = [sys.executable, "-m", "toolkit.cli", "experiment", "run", str(exp_file), "--out", str(out)]
    return [*base, "--cache-dir", str(cache), *extra]


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/*/entry.json"))


def wait_for(predicate, timeout: float, proc: subprocess.Popen) -> bool:
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def execution_counts(out: Path) -> dict:
    import json

    return json.loads((out / "experiment.json").read_text())["cache"]


def assert_same_results(got: Path, want: Path, ignore_cache_column: bool = False) -> None:
    runs = sorted(p.name for p in (want / "runs").glob("*.trec"))
    assert runs and runs == sorted(p.name for p in (got / "runs").glob("*.trec"))
    for name in runs:
        assert (got / "runs" / name).read_bytes() == (want / "runs" / name).read_bytes(), name
    a, b = (got / "results.csv").read_text(), (want / "results.csv").read_text()
    if ignore_cache_column:  # a resumed run says "reused" where the reference computed: the last column
        a, b = ([line.rsplit(",", 1)[0] for line in t.splitlines()] for t in (a, b))
    assert a == b


def assert_only_the_table(stdout: str, out: Path) -> None:
    """stdout is the results table and nothing else: Ray's notices ("(raylet) A worker died ...") go to stderr."""
    import csv

    lines = stdout.splitlines()
    configs = [row[0] for row in csv.reader((out / "results.csv").read_text().splitlines()[1:])]
    assert lines[0].split()[0] == "config" and [line.split()[0] for line in lines[1:]] == configs, stdout


@pytest.mark.data
def test_ray_grid_equals_one_process_and_survives_a_killed_worker(cluster, exp_file, reference, tmp_path):
    import json

    cache, out = tmp_path / "cache", tmp_path / "out"
    proc = subprocess.Popen(
        args(exp_file, out, cache, "--ray", cluster.address, "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_for(lambda: entries(cache), 240, proc), proc.communicate()
    victim = json.loads(entries(cache)[0].read_text())["worker"]["pid"]
    os.kill(victim, signal.SIGKILL)  # the worker of the first cached point, busy with its next one
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    assert_same_results(out, reference)
    records = [json.loads(p.read_text()) for p in entries(cache)]
    pids = {r["worker"]["pid"] for r in records}
    assert len(pids) >= 3, pids  # a restarted worker took the killed one's points
    assert f"stage bm25: {POINTS} point(s) to compute on Ray (2 workers)" in stderr
    assert f"stage bm25: {POINTS} configuration(s), 0 reused from the cache, {POINTS} computed" in stderr
    execution = json.loads((out / "experiment.json").read_text())["execution"]
    assert execution["engine"] == "ray" and len(execution["points"]) == len(records)
    want = json.loads((reference / "experiment.json").read_text())["cache"]
    assert {k: execution_counts(out)[k] for k in ("computed", "reused")} == {k: want[k] for k in ("computed", "reused")}
    assert_only_the_table(stdout, out)


@pytest.mark.data
def test_killed_driver_resumes_from_the_cache(cluster, exp_file, reference, tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "out"
    cmd = args(exp_file, out, cache, "--ray", cluster.address, "--workers", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: entries(cache), 240, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(entries(cache))
    assert 1 <= done < POINTS, f"{done} points were cached before the driver was killed"
    assert not list(cache.glob("*/.*")), "a half-written entry was left behind"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"stage bm25: {POINTS - done} point(s) to compute on Ray" in r.stderr
    assert f"stage bm25: {POINTS} configuration(s), {done} reused from the cache, {POINTS - done} computed" in r.stderr
    assert_same_results(out, reference, ignore_cache_column=True)


# Models on the six-document collection: a tuned BM25 grid, all-MiniLM-L6-v2 reranking its tuned run at three
# depths (bi-encoder points: one lane), a dense stage over `twostage index --dense`, and the fusion of both (which
# stays in the driver). The rerank stage comes before the dense one, so when its points go out no worker has torch
# loaded yet: the lane's worker spends seconds importing it and loading the model, which is when it is killed.
MODEL_STAGES = """\
bm25: {type: bm25, k1: [0.6, 1.2], b: [0.4, 0.75], tune: {metric: map, folds: 2, seed: 1}}
minilm: {type: rerank, input: bm25, model: all-MiniLM-L6-v2, depth: [2, 4, 6], device: cpu}
dense: {type: dense, index: DENSE, device: cpu}
both: {type: fuse, inputs: [bm25, dense]}
"""


def cli_env(home: Path) -> dict:
    """The driver's environment: its own $TWOSTAGE_CACHE, so its embedding cache starts empty."""
    return os.environ | {"TWOSTAGE_CACHE": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.mark.slow
def test_models_on_ray_equal_one_process_and_survive_a_killed_rerank_worker(
    cluster, tiny_index, tiny_dense_index, tmp_path
):
    """Oracle: the one-process CLI run in a fresh cache. The rerank lane's worker is SIGKILLed while it loads its
    model; Ray restarts it and re-runs the point; the runs and results.csv must still be the one-process ones."""
    import json
    import re
    import select

    from tests.experiments.test_experiment import experiment

    path = experiment(tmp_path, tiny_index, MODEL_STAGES.replace("DENSE", str(tiny_dense_index)))
    ref = subprocess.run(
        args(path, tmp_path / "ref", tmp_path / "ref-cache"),
        capture_output=True,
        text=True,
        env=cli_env(tmp_path / "h1"),
    )
    assert ref.returncode == 0, ref.stderr[-3000:]

    cache, out = tmp_path / "cache", tmp_path / "out"
    cmd = args(path, out, cache, "--ray", cluster.address, "--workers", "2")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path / "h2")
    )
    log, victim, deadline = [], None, time.monotonic() + 240
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            log.append(proc.stderr.readline())
            found = re.search(r"stage minilm: 3 point\(s\) to compute on Ray .* on worker pid (\d+)", log[-1])
            if found:
                victim = int(found.group(1))
                os.kill(victim, signal.SIGKILL)  # the lane's worker, busy with the first rerank point
    stdout, rest = proc.communicate(timeout=300)
    stderr = "".join(log) + rest
    assert victim is not None and proc.returncode == 0, stderr[-3000:]

    assert_same_results(out, tmp_path / "ref")
    assert "stage minilm: 3 point(s) to compute on Ray (2 workers); 3 bi-encoder point(s) in order on worker" in stderr
    assert "stage minilm: 3 configuration(s), 0 reused from the cache, 3 computed" in stderr
    assert "stage dense: 1 point(s) to compute on Ray (2 workers)" in stderr
    assert "stage both: 1 configuration(s), 0 reused from the cache, 1 computed" in stderr
    assert not any(line.startswith("twostage: stage both:") and "on Ray" in line for line in stderr.splitlines())
    records = [json.loads(p.read_text()) for p in entries(cache)]
    rerank_pids = {r["worker"]["pid"] for r in records if r["stage"] == "rerank"}
    assert len(rerank_pids) == 1 and victim not in rerank_pids  # one lane; the restarted worker re-ran the point
    execution = json.loads((out / "experiment.json").read_text())["execution"]
    assert execution["points_by_type"] == {"bm25": 4, "rerank": 3, "dense": 1}
    want = json.loads((tmp_path / "ref" / "experiment.json").read_text())["cache"]
    assert {k: execution_counts(out)[k] for k in ("computed", "reused")} == {k: want[k] for k in ("computed", "reused")}
    assert_only_the_table(stdout, out)


@pytest.mark.slow
def test_a_point_failing_on_a_worker_names_itself_and_its_error(cluster, tiny_index, tiny_dense_index, tmp_path):
    """What the worker raised reaches the user (Ray's notices moved to stderr hide nothing): a dense index whose
    FAISS file is damaged passes the driver's checks (it reads the settings only) and fails on the worker."""
    import shutil

    from tests.experiments.test_experiment import experiment

    broken = tmp_path / "broken.dense"
    shutil.copytree(tiny_dense_index, broken)
    (broken / "index").write_bytes(b"not a FAISS index")
    path = experiment(tmp_path, tiny_index, f"dense: {{type: dense, index: {broken}, device: cpu}}\n")
    cmd = args(path, tmp_path / "out", tmp_path / "cache", "--ray", cluster.address, "--workers", "2")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env(tmp_path / "home"))
    assert r.returncode == 1 and r.stdout == "", r.stderr[-3000:]
    error = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "stage dense: point 1 of 1 (cache key " in error[0], r.stderr[-3000:]
    assert "failed on a Ray worker: RuntimeError: " in error[0] and "read" in error[0], error
    assert not entries(tmp_path / "cache")


def test_closed_port_fails_fast_before_anything_is_written(tmp_path):
    """The shared address check (toolkit.jobs.distributed.check_address): exit 1 naming the address, no folder
    made; Ray's own ray.init would retry for about 14 minutes. --workers without --ray is a usage error."""
    from click.testing import CliRunner

    from toolkit.cli import main

    exp = tmp_path / "exp.yaml"
    exp.write_text("name: unread\n")  # the address is checked before the file is read
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["experiment", "run", str(exp), "--out", str(out), "--ray", address])
    assert res.exit_code == 1 and f"--ray {address}" in res.output and "no Ray cluster answers there" in res.output
    assert not out.exists()
    res = CliRunner().invoke(main, ["experiment", "run", str(exp), "--out", str(out), "--workers", "2"])
    assert res.exit_code == 2 and "--workers only apply with --ray" in res.output
    res = CliRunner().invoke(main, ["experiment", "run", str(exp), "--out", str(out), "--ray", "--shard-size", "4"])
    assert res.exit_code == 2 and "each grid point is one Ray task" in res.output


def test_python_api_checks_the_address_first(tmp_path):
    """ts.experiment(..., ray=ADDRESS) goes through the same check; workers= without ray= is refused."""
    import toolkit as ts
    from toolkit.errors import ConfigError

    exp = tmp_path / "exp.yaml"
    exp.write_text(
        "name: t\ntopics: t.tsv\nqrels: q.txt\nindex: {path: idx}\nstages:\n  bm25: {type: bm25, k1: [0.9]}\n"
    )
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match="no Ray cluster answers there"):
        ts.experiment(exp, tmp_path / "out", ray=address)
    with pytest.raises(ConfigError, match="workers= only applies with ray="):
        ts.experiment(exp, tmp_path / "out", workers=2)
    assert not (tmp_path / "out").exists()
