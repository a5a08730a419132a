"""``twostage experiment run --ray``: a CACM grid on a real two-node Ray cluster (``tests/support/ray_cluster.py``).

Oracle: the same experiment run in one process (no Ray). The --ray runs, results.csv included, must equal
it byte for byte: the searches are the same Lucene searches and both go through the stage cache's file.
Also: a worker SIGKILLed after the first point is in the cache (Ray restarts it and re-runs its point),
a driver SIGKILLed mid-sweep (the rerun says what it reused and computes only the rest), a closed port.

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
from ray_cluster import RayCluster, free_port

from toolkit.experiments.cache import StageCache
from toolkit.experiments.results import run_experiment

pytest.importorskip("ray", reason="the [ray] extra is not installed (pip install -e '.[ray]')")

POINTS = 6  # BM25 points; RM3 adds one per distinct fold choice


@pytest.fixture(scope="module")
def cluster():
    old = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # as tests/jobs/test_ray.py: no token auth, no ~/.ray/auth_token
    c = RayCluster().start()
    try:
        yield c
    finally:
        c.stop()
        if old is None:
            os.environ.pop("RAY_AUTH_MODE")
        else:
            os.environ["RAY_AUTH_MODE"] = old
    assert c.leftovers() == [], "Ray processes were left behind"


@pytest.fixture(scope="module")
def cacm_index(shared_data, tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("indexes") / "cacm"
    args = ["index", "--collection", "cacm", "--out", str(out), "--data-dir", str(shared_data), "--no-progress"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


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
    # the table on stdout (Ray's raylet prints its worker-died notice there too, which twostage cannot stop)
    assert any(line.split()[:1] == ["config"] and "map" in line for line in stdout.splitlines()), stdout


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
