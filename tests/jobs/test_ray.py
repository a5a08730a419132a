"""Ray jobs on a real two-node Ray cluster (``tests/ray_cluster.py``): the same results as one
process, a killed worker's shard retried, a killed driver resumed from the manifest.

The cluster (two ``ray start`` nodes, one CPU each) is started once for this module and
stopped afterwards, also when a test fails; no Ray process of ours is left behind. Inputs
are tiny: Ray and MiniLM on these CPUs are slow.

A bi-encoder rerank on Ray is the same run, score for score, as in one process: the workers run with one
thread each and embed other batches (a shard ends mid-way through the one-process batching), but a text's vector
does not depend on its batch or the thread count (toolkit.models.batching). Elsewhere the tolerance is 1e-5: the
dense encoder's index on Ray and the cross-encoder's scores (its one-column head moves a score in its last float
bits with the number of pairs in the batch, ~1e-7 per operation), far below any real score gap (MiniLM's DL19
top-100 cosines are ~0.005 apart on average).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from needs import required
from ray_cluster import running_cluster
from samples import CANDIDATES

from toolkit.data.ranking import order_run
from toolkit.data.trec_io import read_run

required("ray", "the [ray] extra is not installed (pip install -e '.[ray]')")

TOL = 1e-5
TWOSTAGE = str(Path(sys.executable).with_name("twostage"))
DL19_QUERIES = "1037798,104861,1063750"


@pytest.fixture(scope="module")
def cluster():
    """The two-node cluster, its token in the environment of every driver of these tests (loopback only, token
    auth on: tests/jobs/test_ray_security.py); --ray's private Ray uses a token of its own."""
    with running_cluster() as c:
        yield c
    assert c.leftovers() == [], "Ray processes were left behind"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "cache"))


def assert_same_run(got_path, want_path):
    """The same documents per query with scores within TOL, and the same order except between documents whose
    scores are within TOL of each other (batch composition moves a score in its last float bits, which may swap
    two near-equal scores: a tiny random model scores every pair within 1e-8)."""
    got = order_run(read_run(got_path).frame)
    want = order_run(read_run(want_path).frame)
    merged = got.merge(want, on=["query_id", "doc_id"], how="outer", suffixes=("_got", "_want"), indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]
    diff = np.abs(merged["score_got"].to_numpy() - merged["score_want"].to_numpy()).max()
    assert diff <= TOL, diff
    want_score = dict(zip(zip(want["query_id"], want["doc_id"]), want["score"]))
    for q, docs in got.groupby("query_id", sort=False)["doc_id"]:
        scores = [want_score[(q, d)] for d in docs]  # the reference's scores in got's order: non-increasing
        assert all(b <= a + TOL for a, b in itertools.pairwise(scores)), (q, list(docs), scores)
    if diff == 0:
        assert (
            got[["query_id", "doc_id", "rank"]].values.tolist() == want[["query_id", "doc_id", "rank"]].values.tolist()
        )


def assert_identical_run(got_path, want_path):
    """The same (query, document, rank, score) rows, score for score (the tags may differ)."""
    got, want = (read_run(p).frame[["query_id", "doc_id", "score"]] for p in (got_path, want_path))
    assert got.values.tolist() == want.values.tolist()


def manifest(path) -> dict:
    p = Path(str(path) + ".shards") / "manifest.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def driver(*args, timeout=600):
    """A `twostage` command with --ray in its own process (as a user runs it); the pytest process,
    which also runs the JVM for other tests, never becomes a Ray driver."""
    r = subprocess.run([TWOSTAGE, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def wait_for(predicate, timeout, proc=None):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def rerank_args(msmarco, out, depth, *extra):
    return [
        "rerank",
        "--candidates",
        str(msmarco / "candidates" / "dl19.bm25.top100.json"),
        "--model",
        "all-MiniLM-L6-v2",
        "--device",
        "cpu",
        "--depth",
        str(depth),
        "--query-id",
        DL19_QUERIES,
        "--batch-size",
        "8",
        "--no-embedding-cache",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def dl19_reference(msmarco, tmp_path_factory):
    """The one-process rerank (no Ray) of 3 DL19 queries at depth 24."""
    from click.testing import CliRunner

    from toolkit.cli import main

    out = tmp_path_factory.mktemp("ref") / "dl19.ref.trec"
    res = CliRunner().invoke(main, rerank_args(msmarco, out, 24), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.data
def test_rerank_on_ray_equals_one_process_and_survives_a_killed_worker(cluster, msmarco, dl19_reference, tmp_path):
    out = tmp_path / "dl19.ray.trec"
    proc = subprocess.Popen(
        [TWOSTAGE, *rerank_args(msmarco, out, 24, "--ray", cluster.address, "--workers", "2", "--shard-size", "8")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_for(lambda: manifest(out).get("shards"), 240, proc), proc.communicate()
    victim = next(iter(manifest(out)["shards"].values()))["worker"]["pid"]
    os.kill(victim, signal.SIGKILL)  # the worker that finished the first shard, busy with its next one
    _stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    assert_identical_run(out, dl19_reference)
    m = manifest(out)
    pids = {r["worker"]["pid"] for r in m["shards"].values()}
    assert len(m["shards"]) == len(m["identity"]["ranges"]) and len(pids) >= 3  # a restarted worker took over
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert meta["execution"]["engine"] == "ray" and meta["execution"]["workers"] == 2
    assert "shards" in stderr and "computed now" in stderr


@pytest.mark.data
def test_rerank_resumes_after_the_driver_is_killed(cluster, msmarco, dl19_reference, tmp_path, cli):
    out = tmp_path / "dl19.resume.trec"
    args = rerank_args(msmarco, out, 24, "--ray", cluster.address, "--workers", "2", "--shard-size", "8")
    proc = subprocess.Popen([TWOSTAGE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: len(manifest(out).get("shards", {})) >= 2, 240, proc), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = manifest(out)
    total = len(before["identity"]["ranges"])
    assert 2 <= len(before["shards"]) < total, "the job finished before the driver could be killed"
    code, output = driver(*args)
    assert code == 0, output[-3000:]
    after = manifest(out)
    for shard, rec in before["shards"].items():  # finished shards are kept as they were, not recomputed
        assert after["shards"][shard] == rec
    work = json.loads(Path(str(out) + ".meta.json").read_text())["model_work"]
    done_texts = sum(r["texts_embedded"] for r in before["shards"].values())
    assert work["shards_resumed"] == len(before["shards"]) and work["shards_computed"] == total - len(before["shards"])
    assert work["texts_embedded_this_run"] == work["texts_embedded"] - done_texts
    assert work["model_calls_this_run"] == sum(
        r["model_calls"] for s, r in after["shards"].items() if s not in before["shards"]
    )
    assert f"{len(before['shards'])} resumed from the manifest" in output
    assert_identical_run(out, dl19_reference)
    # a changed setting is refused, naming it
    code, output = driver(*rerank_args(msmarco, out, 20, "--ray", cluster.address, "--shard-size", "8"))
    assert code == 1 and "settings.depth: 24 -> 20" in output and "--force" in output


@pytest.mark.data
def test_dense_encode_and_search_on_ray(cluster, shared_data, tmp_path, cli, monkeypatch):
    """CACM's first 48 documents: the index from Ray (one worker killed mid-job) equals the one-process
    index; a Ray batch search over it equals the one-process search."""
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))
    base = [
        "index",
        "--collection",
        "cacm",
        "--dense",
        "--encoder",
        "all-MiniLM-L6-v2",
        "--limit",
        "48",
        "--batch-size",
        "4",
        "--no-progress",
    ]
    local = tmp_path / "cacm.local"
    assert cli(*base, "--out", local).exit_code == 0
    ray_idx = tmp_path / "cacm.ray"
    proc = subprocess.Popen(
        [TWOSTAGE, *base, "--out", str(ray_idx), "--ray", cluster.address, "--workers", "2", "--shard-size", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_for(lambda: manifest(ray_idx).get("shards"), 240, proc), proc.communicate()
    os.kill(next(iter(manifest(ray_idx)["shards"].values()))["worker"]["pid"], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    import faiss

    a, b = faiss.read_index(str(local / "index")), faiss.read_index(str(ray_idx / "index"))
    va, vb = a.reconstruct_n(0, a.ntotal), b.reconstruct_n(0, b.ntotal)
    assert (local / "docid").read_text() == (ray_idx / "docid").read_text() and va.shape == (48, 384)
    assert np.abs(va - vb).max() <= TOL
    meta = json.loads((ray_idx / "index.meta.json").read_text())
    assert (
        meta["execution"]["engine"] == "ray"
        and meta["key"] == json.loads((local / "index.meta.json").read_text())["key"]
    )
    assert len({r["worker"]["pid"] for r in manifest(ray_idx)["shards"].values()}) >= 3
    # batch search: 12 queries in shards of 4, on the workers
    want, got = tmp_path / "local.trec", tmp_path / "ray.trec"
    search = [
        "dense",
        "--index",
        str(local),
        "--topics",
        "cacm",
        "--hits",
        "10",
        "--max-queries",
        "12",
        "--batch-size",
        "4",
        "--no-progress",
    ]
    assert cli(*search, "--out", want).exit_code == 0
    code, output = driver(*search, "--out", got, "--ray", cluster.address, "--workers", "2", "--shard-size", "4")
    assert code == 0, output[-3000:]
    assert_same_run(got, want)
    assert json.loads(Path(str(got) + ".meta.json").read_text())["parameters"]["execution"]["shards"] == 3


def _ray_daemons() -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return {
        int(line.split(None, 1)[0])
        for line in out.splitlines()
        if any(name in line for name in ("gcs_server", "raylet", "default_worker.py"))
    }


def test_private_local_ray_cross_encoder(tiny_cross_encoder, tmp_path, cli):
    """--ray alone: twostage starts a private local Ray, runs the cross-encoder pairs there, stops it."""
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    base = [
        "rerank",
        "--candidates",
        cands,
        "--model",
        tiny_cross_encoder,
        "--device",
        "cpu",
        "--batch-size",
        "2",
        "--no-progress",
    ]
    assert cli(*base, "--out", tmp_path / "one.trec").exit_code == 0
    before = _ray_daemons()
    code, output = driver(*base, "--out", tmp_path / "ray.trec", "--ray", "--workers", "1", "--shard-size", "1")
    assert code == 0, output[-3000:]
    assert_same_run(tmp_path / "ray.trec", tmp_path / "one.trec")
    m = manifest(tmp_path / "ray.trec")
    assert m["job"] == "rerank-pairs" and len(m["shards"]) == 2
    meta = json.loads((tmp_path / "ray.trec.meta.json").read_text())
    assert meta["execution"]["address"] == "local"
    assert meta["reranker"]["precision"] == "fp32" and meta["reranker"]["precision_effect"].startswith("none: exact")
    assert wait_for(lambda: _ray_daemons() <= before, 30), "the private Ray was not stopped"
