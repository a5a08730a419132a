"""A real two-node Ray cluster on this machine for the tests: ``ray start --head`` and a second
``ray start --address``, each with one CPU, every port chosen free, in a private temp dir.

Reachable from this machine only (tests/jobs/test_ray_security.py lists its sockets): every node's
address is 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's "this machine only" switch,
for every process of the cluster) and Ray binds its servers to the node address; there is no
dashboard and no Ray Client server; token authentication is on, with a token of the cluster's
own (0600, in the 0700 temp dir; Ray's session files go one folder down, in ``ray/``, which Ray
makes 0777). ``client_env`` is what a driver needs to connect (twostage's ``--ray 127.0.0.1:PORT``
turns the switch on by itself). ``ray start`` is run through ``_RAY_START`` (see there).

Both ``ray start --block`` processes are our children in their own sessions; stopping sends
SIGTERM to each (``--block`` then shuts down what it started), then SIGKILLs their process
groups, then any process still naming our temp dir (those are ours alone). ``ray stop`` is
never used: it would stop every Ray on the machine, other users' too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

NODE_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


#: ``ray start`` with two of its decisions changed (in its own process only): no Ray Client server (Ray starts
#: one, on port 10001, whenever ``ray[client]`` is importable, and ``--ray-client-server-port`` has no "none":
#: port 0 is refused); and a second node allowed with the switch on (``ray start --address`` refuses to add a
#: node then, "not supported on Windows and OSX"), its node address 127.0.0.1 as for the head.
_RAY_START = (
    "import sys, ray._private.ray_constants as c, ray._private.services as v, ray.scripts.scripts as s\n"
    "s.get_ray_client_dependency_error = lambda: 'no Ray Client server for the test cluster'\n"
    "c.ENABLE_RAY_CLUSTER = True\n"
    "v.get_node_ip_address = lambda address=None: v.get_localhost_ip()\n"
    "sys.argv[0] = 'ray'\n"
    "s.main()\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, cpus_per_node: int = 1):
        self.tmp = Path(tempfile.mkdtemp(prefix="tsray", dir="/tmp"))  # short: Ray's socket paths are limited
        self.base = 20000 + (os.getpid() % 200) * 100  # worker port ranges of our own: base .. base + 99
        self.port = self.free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cpus = cpus_per_node
        self.procs: list[subprocess.Popen] = []
        self.token = self.tmp / "auth_token"  # mkdtemp made the folder 0700
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        self.env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_USAGE_STATS_ENABLED": "0",
            **self.client_env(),
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        }

    def client_env(self) -> dict[str, str]:
        """The environment a driver (or a node) needs to join this cluster: its token."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token)}

    def _start(self, args: list[str], name: str, worker_ports: tuple[int, int]) -> None:
        ports = [x for flag in NODE_PORT_FLAGS for x in (flag, str(self.free_port()))]
        cmd = [
            sys.executable,
            "-c",
            _RAY_START,
            "start",
            *args,
            "--num-cpus",
            str(self.cpus),
            "--block",
            "--disable-usage-stats",
            "--min-worker-port",
            str(worker_ports[0]),
            "--max-worker-port",
            str(worker_ports[1]),
            *ports,
        ]
        with open(self.tmp / f"{name}.log", "w") as log:  # the child keeps its own descriptor
            self.procs.append(
                subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
            )

    def free_port(self) -> int:
        """A free port outside this cluster's worker port ranges (the kernel's ephemeral ports can fall there, and
        Ray refuses a component port inside a worker range)."""
        while True:
            port = free_port()
            if not self.base <= port < self.base + 100:
                return port

    def start(self, timeout: float = 120) -> RayCluster:
        base = self.base
        self._start(
            [
                "--head",
                "--port",
                str(self.port),
                "--include-dashboard",
                "false",
                "--temp-dir",
                str(self.tmp / "ray"),
            ],
            "head",
            (base, base + 49),
        )
        deadline = time.time() + timeout
        while not _listening(self.port):
            self._check(deadline, "head")
        self._start(["--address", self.address], "worker", (base + 50, base + 99))
        code = (
            "import ray, time, sys\n"
            f"ray.init(address={self.address!r}, log_to_driver=False)\n"
            f"end = time.time() + {timeout}\n"
            "while sum(n['Alive'] for n in ray.nodes()) < 2 and time.time() < end: time.sleep(0.5)\n"
            "sys.exit(0 if sum(n['Alive'] for n in ray.nodes()) >= 2 else 1)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=timeout + 30
        )
        if r.returncode:
            self.stop()
            raise RuntimeError(f"the second Ray node did not join: {r.stderr[-2000:]}")
        return self

    def _check(self, deadline: float, what: str) -> None:
        for p in self.procs:
            if p.poll() is not None:
                log = (self.tmp / f"{what}.log").read_text()[-2000:]
                self.stop()
                raise RuntimeError(f"ray start ({what}) exited: {log}")
        if time.time() > deadline:
            self.stop()
            raise RuntimeError(f"Ray {what} did not start in time")
        time.sleep(0.3)

    def worker_pids(self) -> list[int]:
        """Processes of Ray workers (actors) of this cluster."""
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        return [
            int(line.split(None, 1)[0])
            for line in out.splitlines()
            if "default_worker.py" in line and str(self.tmp) in line
        ]

    def leftovers(self) -> list[int]:
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        return [
            int(line.split(None, 1)[0]) for line in out.splitlines() if str(self.tmp) in line and "ps -eo" not in line
        ]

    def stop(self) -> None:
        for p in reversed(self.procs):  # the worker node first, then the head
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=60)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            if p.poll() is None:
                p.wait(timeout=10)
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def running_cluster(cpus_per_node: int = 1) -> Iterator[RayCluster]:
    """A started ``RayCluster`` with its ``client_env`` in ``os.environ`` (for the drivers the tests start), both
    undone on exit, also on failure."""
    c = RayCluster(cpus_per_node).start()
    saved = {k: os.environ.get(k) for k in c.client_env()}
    os.environ.update(c.client_env())
    try:
        yield c
    finally:
        c.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
