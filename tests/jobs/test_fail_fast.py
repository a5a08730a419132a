"""``--ray`` at a cluster that is not there fails at once, before anything is written; a cluster that
dies mid-job says how many shards are kept. No Ray cluster is started: a closed port stands for a
dead address, and a stand-in for the ``ray`` module for a cluster that stops answering."""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import pytest
from needs import required

from toolkit.errors import ConfigError, TwostageError
from toolkit.jobs import distributed
from toolkit.jobs.distributed import RayExecutor, RayOptions, check_address
from toolkit.jobs.shards import open_manifest, plan, run_job


def closed_port() -> int:
    """A port nothing listens on: bound, then closed (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dead_address_fails_within_15_s_naming_it_and_writes_nothing(cli, tmp_path):
    port = closed_port()
    (tmp_path / "c.json").write_text("[]")
    out = tmp_path / "o.trec"
    started = time.monotonic()
    res = cli("rerank", "--candidates", tmp_path / "c.json", "--model", "m", "--out", out, "--ray", f"127.0.0.1:{port}")
    elapsed = time.monotonic() - started
    assert res.exit_code == 1 and elapsed < 15, (elapsed, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"--ray 127.0.0.1:{port}: no Ray cluster answers there" in lines[0]
    assert f"tried 3 TCP connections to 127.0.0.1:{port}" in lines[0] and "refused" in lines[0]
    assert "resume" not in res.stderr and "manifest" not in res.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "c.json"]  # no o.trec.shards/, no manifest


def test_auto_without_a_cluster_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no `ray start` marker there
    with pytest.raises(ConfigError, match=r"--ray auto: no cluster to join: none \(no RAY_ADDRESS"):
        check_address("auto")
    port = closed_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=rf"--ray 127.0.0.1:{port} \(from RAY_ADDRESS\): no Ray cluster"):
        check_address("auto")


@pytest.mark.parametrize("address", ["localhost", "host:port", "ray://h:99999"])
def test_malformed_address_is_refused_without_waiting(address):
    started = time.monotonic()
    with pytest.raises(ConfigError, match="not an address"):
        RayExecutor(RayOptions(address))
    assert time.monotonic() - started < 1


def test_listening_address_passes_and_local_needs_no_check():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_address(f"127.0.0.1:{server.getsockname()[1]}")
        check_address(f"ray://127.0.0.1:{server.getsockname()[1]}")
    check_address(None)
    check_address("local")


# ------------------------------------------------- a cluster that dies mid-job
class _Ref:
    def __init__(self, value):
        self.value = value


class _Handle:
    def __init__(self, actor):
        self.run = type("Method", (), {"remote": staticmethod(lambda *a: _Ref(actor.run(*a)))})()


class FakeRay:
    """The parts of ``ray`` the executor uses; runs actors in this process and, after ``alive`` results,
    raises what a driver gets when the head node is gone."""

    def __init__(self, alive: int):
        self.alive = alive

    def remote(self, **_):
        return lambda cls: type("ActorClass", (), {"remote": staticmethod(lambda spec: _Handle(cls(spec)))})

    def wait(self, refs, num_returns=1):
        from ray.exceptions import RaySystemError

        if self.alive == 0:
            raise RaySystemError("Failed to connect to GCS at 10.0.0.1:6379\nmore detail")
        self.alive -= 1
        return refs[:1], refs[1:]

    def get(self, ref):
        return ref.value

    def kill(self, actor):
        raise ConnectionError("cluster is gone")  # killing on a dead cluster fails too; must not mask the error


class Spec:
    def build(self):
        return lambda payload: ({"x": np.arange(payload[0], payload[1])}, {"model_calls": 1})

    def describe(self):
        return {"kind": "test"}


def test_cluster_dying_mid_job_says_how_many_shards_are_kept(monkeypatch, tmp_path):
    required("ray", "the pool reads Ray's exception types (the [ray] extra)")
    monkeypatch.setattr(distributed, "connect", lambda options: FakeRay(alive=2))
    manifest = open_manifest(tmp_path / "job", "test", {"ranges": plan(5, 1)})
    executor = RayExecutor(RayOptions("local", workers=1, max_retries=0), in_flight=1)
    with pytest.raises(TwostageError) as err:
        run_job(manifest, Spec(), executor, lambda shard, lo, hi: (lo, hi), progress=False)
    message = str(err.value)
    assert "the Ray cluster (local) failed mid-job: RaySystemError: System error: Failed to connect to GCS" in message
    assert f"2 of 5 shards are finished and kept in {tmp_path / 'job'}" in message
    assert sorted(json.loads((tmp_path / "job" / "manifest.json").read_text())["shards"]) == ["0", "1"]
