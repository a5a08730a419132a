"""A real two-node Ray cluster on this machine for the tests: ``ray start --head`` and a second
``ray start --address``, each with one CPU, every port chosen free, in a private temp dir.

Both ``ray start --block`` processes are our children in their own sessions; stopping sends
SIGTERM to each (``--block`` then shuts down what it started), then SIGKILLs their process
groups, then any process still naming our temp dir (those are ours alone). ``ray stop`` is
never used: it would stop every Ray on the machine, other users' too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODE_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, cpus_per_node: int = 1):
        self.ray = str(Path(sys.executable).with_name("ray"))
        self.tmp = Path(tempfile.mkdtemp(prefix="tsray", dir="/tmp"))  # short: Ray's socket paths are limited
        self.base = 20000 + (os.getpid() % 200) * 100  # worker port ranges of our own: base .. base + 99
        self.port = self.free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cpus = cpus_per_node
        self.procs: list[subprocess.Popen] = []
        # RAY_AUTH_MODE explicit: otherwise a token that any earlier local ray.init() left in ~/.ray/auth_token
        # switches `ray start` to token auth while clients connect without one
        self.env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",
        }

    def _start(self, args: list[str], name: str, worker_ports: tuple[int, int]) -> None:
        ports = [x for flag in NODE_PORT_FLAGS for x in (flag, str(self.free_port()))]
        cmd = [
            self.ray,
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
                str(self.tmp),
                "--ray-client-server-port",
                str(self.free_port()),
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
