"""Ray clusters that only this machine can reach: twostage's private local Ray (``--ray``
alone) and the test suite's two-node cluster (``tests/support/ray_cluster.py``).

Each is started inside a network namespace of its own where the machine has a routable address
(10.200.0.1/24 on a veth pair, with a default route: what Ray takes as "the node's address" when it
is allowed to; nothing is ever sent there). Oracle: /proc (``tests/support/sockets.py``): the TCP
sockets in LISTEN and the bound UDP sockets of every process of the cluster (the driver, everything
below it, the ``ray start`` processes and everything below them), none of which may be on anything
but loopback. Before the fix each cluster listened on ``::`` (every interface) and the test
suite's also ran a Ray Client server. Authentication is checked with a raw gRPC call to the GCS:
refused (UNAUTHENTICATED) without the token, answered with it; the token file is 0600 in a 0700
folder, and nothing is written into ``~/.ray``.

One cluster start per test (the private one about 10 s, the two-node one about 30 s here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import optional, required

from toolkit.errors import ConfigError
from toolkit.jobs.distributed import check_address, current_cluster

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"
ROUTABLE = "10.200.0.1"


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def netns():
    """A network namespace with loopback and a routable 10.200.0.1/24 (a veth pair, both ends inside)."""
    required("ray", "the [ray] extra is not installed (pip install -e '.[ray]')")
    if shutil.which("ip") is None:
        optional("`ip` (iproute2) is not installed: cannot make a network namespace")
    name = f"tsray{os.getpid()}"
    made = _ip("netns", "add", name)
    if made.returncode:
        optional(f"`ip netns add` is not available here ({made.stderr.strip()}): needs root / CAP_SYS_ADMIN")
    try:
        steps = [
            ["-n", name, "link", "set", "lo", "up"],
            ["-n", name, "link", "add", "tsa", "type", "veth", "peer", "name", "tsb"],
            ["-n", name, "addr", "add", f"{ROUTABLE}/24", "dev", "tsa"],
            ["-n", name, "link", "set", "tsa", "up"],
            ["-n", name, "link", "set", "tsb", "up"],
            ["-n", name, "route", "add", "default", "via", "10.200.0.2", "dev", "tsa"],
        ]
        for step in steps:
            r = _ip(*step)
            if r.returncode:
                optional(f"cannot set up the namespace (`ip {' '.join(step)}`: {r.stderr.strip()})")
        yield name
    finally:
        _ip("netns", "del", name)


def run_in(netns: str, code: str, tmp_path: Path, timeout: int = 400) -> dict:
    """Run ``code`` in the namespace (HOME in tmp_path: a Ray writing ~/.ray shows); it prints one JSON line."""
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN", "RAY_ADDRESS"):
        env.pop(key, None)
    (tmp_path / "home").mkdir()
    r = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    result["home_ray"] = sorted(p.name for p in (tmp_path / "home").rglob("*"))
    return result


PRELUDE = textwrap.dedent(
    """\
    import json, os, socket, stat, subprocess, sys, time
    from sockets import descendants, listening

    def routable():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))  # no packet: a route lookup
        return s.getsockname()[0]

    def gcs_answers(address, token=None):
        import grpc

        with grpc.insecure_channel(address) as channel:
            call = channel.unary_unary(
                "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            metadata = [("authorization", f"Bearer {token}")] if token else None
            try:
                call(b"", timeout=20, metadata=metadata)
                return "OK"
            except grpc.RpcError as exc:
                return exc.code().name

    def modes(token):
        if not token or not os.path.exists(token):
            return None
        return [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (token, os.path.dirname(token))]

    def read(token):
        return open(token).read() if token and os.path.exists(token) else None
    """
)

PRIVATE = """
from toolkit.jobs.distributed import RayOptions, connect, shutdown

ray = connect(RayOptions(workers=2))

@ray.remote
class Echo:
    def pid(self):
        return os.getpid()

actors = [Echo.remote() for _ in range(2)]
workers = ray.get([a.pid.remote() for a in actors])
node = ray._private.worker.global_worker.node
token = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
found = listening(descendants(os.getpid()))
result = {
    "routable": routable(),
    "node": node.node_ip_address,
    "workers": workers,
    "listeners": found,
    "token_modes": modes(token),
    "auth_mode": os.environ.get("RAY_AUTH_MODE"),
    "without_token": gcs_answers(node.gcs_address),
    "wrong_token": gcs_answers(node.gcs_address, "0" * 64),
    "with_token": gcs_answers(node.gcs_address, read(token)),
}
shutdown()
result["token_left"] = os.path.exists(token)
result["env_after"] = os.environ.get("RAY_AUTH_MODE")
print(json.dumps(result))
"""

SUITE = """
from ray_cluster import RayCluster

cluster = RayCluster().start()
try:
    code = (
        "import ray, os, time\\n"
        f"ray.init(address={cluster.address!r}, log_to_driver=False)\\n"
        "@ray.remote(num_cpus=1)\\n"
        "class Echo:\\n"
        "    def pid(self): return os.getpid()\\n"
        "actors = [Echo.remote() for _ in range(2)]\\n"
        "print(sorted(ray.get([a.pid.remote() for a in actors])), flush=True)\\n"
        "time.sleep(600)\\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", code], env=cluster.env, stdout=subprocess.PIPE, text=True)
    workers = json.loads(driver.stdout.readline())
    pids = set(descendants(driver.pid))
    for p in cluster.procs:
        pids |= descendants(p.pid)
    found = listening(pids)
    head = cluster.address
    token = getattr(cluster, "token", None)
    result = {
        "routable": routable(),
        "workers": workers,
        "in_cluster": sorted(set(workers) & pids),
        "listeners": found,
        "token_modes": modes(token and str(token)),
        "without_token": gcs_answers(head),
        "with_token": gcs_answers(head, read(token)),
        "client_server": sum("ray_client_server" in " ".join(open(f"/proc/{p}/cmdline").read().split("\\0"))
                             for p in pids if os.path.exists(f"/proc/{p}")),
    }
    driver.kill()
    driver.wait()
finally:
    cluster.stop()
print(json.dumps(result))
"""


def assert_loopback_only(result: dict) -> None:
    from sockets import Listener, exposed

    listeners = [Listener(*x) for x in result["listeners"]]
    assert result["routable"] == ROUTABLE  # the namespace offers Ray a network address
    names = {x.name for x in listeners}
    assert {"gcs_server", "raylet"} <= names, names  # the oracle sees the cluster's servers
    assert exposed(listeners) == [], exposed(listeners)


def test_private_local_ray_listens_on_loopback_only_with_its_own_token(netns, tmp_path):
    result = run_in(netns, PRIVATE, tmp_path)
    assert_loopback_only(result)
    assert result["node"] == "127.0.0.1" and len(set(result["workers"])) == 2
    assert result["auth_mode"] == "token"
    assert result["without_token"] == "UNAUTHENTICATED" and result["wrong_token"] == "UNAUTHENTICATED"
    assert result["with_token"] == "OK"
    assert result["token_modes"] == ["0o600", "0o700"]
    assert result["home_ray"] == []  # no ~/.ray/auth_token
    assert result["token_left"] is False and result["env_after"] is None  # shutdown removes and restores


def test_the_test_suites_cluster_listens_on_loopback_only_with_a_token(netns, tmp_path):
    result = run_in(netns, SUITE, tmp_path)
    assert_loopback_only(result)
    assert len(result["workers"]) == 2 and result["in_cluster"] == result["workers"]
    assert result["client_server"] == 0  # no Ray Client server
    assert result["without_token"] == "UNAUTHENTICATED" and result["with_token"] == "OK"
    assert result["token_modes"] == ["0o600", "0o700"]
    assert result["home_ray"] == []


# ------------------------------------------------------------ --ray auto and the address file of `ray start`
def marker_in(tmp_path: Path, folder_mode: int, file_mode: int = 0o600, address: str = "127.0.0.1:1") -> Path:
    folder = tmp_path / "ray"
    folder.mkdir()
    marker = folder / "ray_current_cluster"
    marker.write_text(address)
    marker.chmod(file_mode)
    folder.chmod(folder_mode)
    return marker


@pytest.fixture
def ray_tmpdir(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    return tmp_path


def test_auto_uses_an_address_file_of_ones_own_in_a_private_folder(ray_tmpdir):
    marker = marker_in(ray_tmpdir, 0o700, address="127.0.0.1:6379")
    assert current_cluster() == ("127.0.0.1:6379", f"{marker} (the last `ray start --head` on this machine)")


@pytest.mark.parametrize(
    ("folder_mode", "file_mode", "why"),
    [
        (0o777, 0o644, r"which other users can write \(mode 0777\): anyone could have written it"),  # Ray's /tmp/ray
        (0o1777, 0o644, r"which other users can write \(mode 1777\)"),  # sticky: others still create files there
        (0o770, 0o600, r"which other users can write \(mode 0770\)"),
        (0o700, 0o620, r"it is writable by other users \(mode 0620\)"),
    ],
)
def test_auto_refuses_an_address_file_others_could_have_written(ray_tmpdir, folder_mode, file_mode, why):
    marker = marker_in(ray_tmpdir, folder_mode, file_mode)
    with pytest.raises(ConfigError, match=rf"--ray auto: refusing the address file {marker}: .*{why}") as err:
        check_address("auto")
    assert "--ray HOST:PORT or RAY_ADDRESS=HOST:PORT" in str(err.value)


def test_auto_refuses_an_address_file_of_another_user_or_a_link(ray_tmpdir):
    marker = marker_in(ray_tmpdir, 0o700)
    if os.getuid() == 0:  # root can hand the file to another user; others cannot, and skip this half
        os.chown(marker, 65534, 65534)
        with pytest.raises(ConfigError, match=r"it belongs to user id 65534, not to you \(0\)"):
            current_cluster()
        os.chown(marker, 0, 0)
    target = ray_tmpdir / "elsewhere"
    target.write_text("10.0.0.1:6379")
    marker.unlink()
    marker.symlink_to(target)
    with pytest.raises(ConfigError, match=r"is not a plain file \(a link or something else\)"):
        current_cluster()


def test_doctor_says_why_auto_refuses(cli, ray_tmpdir):
    marker_in(ray_tmpdir, 0o777, 0o644)
    res = cli("doctor", "--no-jvm")
    assert "ray cluster  --ray auto: refusing the address file" in res.stdout, res.output


def test_a_loopback_address_keeps_the_driver_on_loopback():
    """--ray 127.0.0.1:PORT: Ray by default swaps a loopback address for the machine's network address (and
    the cluster, listening on loopback only, is then not found); twostage keeps it."""
    from toolkit.jobs.distributed import _loopback

    assert _loopback("127.0.0.1:6379") and _loopback("localhost:1") and _loopback("ray://127.0.0.2:10001")
    assert _loopback("[::1]:6379") and not _loopback("10.0.0.1:6379") and not _loopback("head.example:6379")
