"""The client door's input language, generated: every form ``inet_aton`` reads an IPv4 address in (one to four
parts, each decimal, octal or hex, the last part filling the rest of the 32 bits, with or without a trailing
dot), IPv6 forms (``::1``, ``::ffff:127.x.y.z``, bracketed in the URL) and the names of the hosts file. The
door's answer (``Endpoint.loopback``, and with a proxy planted in the environment ``Endpoint.proxy``) must be
what the system resolver says: loopback exactly when every address ``getaddrinfo`` gives reaches this machine
(127.0.0.0/8, ``::1``, or the unspecified address), read here from the address bytes (``inet_aton``,
``inet_pton``), not through ``ipaddress``. Then: the connection goes to the address resolved once, with the
URL's name as Host and TLS server name.
"""

from __future__ import annotations

import os
import socket
from unittest import mock

import httpx
import pytest
from hostile_server import HostileServer, Listener
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolkit.errors import ConfigError
from toolkit.guard.client import Endpoint, host_port

PLANTED = "http://192.0.2.55:3128"
PROXY_ENV = {
    **dict.fromkeys(("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"), PLANTED),
    "no_proxy": "",
    "NO_PROXY": "",
}


def _reaches_this_machine(host: str) -> bool:
    """The oracle: every address the system resolver gives for ``host`` is 127.0.0.0/8, ::1 or unspecified."""
    try:
        infos = socket.getaddrinfo(host, 80, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False

    def local(address: str) -> bool:
        if ":" not in address:
            raw = socket.inet_aton(address)
            return raw[0] == 127 or raw == bytes(4)
        raw = socket.inet_pton(socket.AF_INET6, address.split("%")[0])
        if raw[:12] == bytes(10) + b"\xff\xff":  # IPv4-mapped
            return raw[12] == 127 or raw[12:] == bytes(4)
        return raw in (bytes(15) + b"\x01", bytes(16))

    return bool(infos) and all(local(info[4][0]) for info in infos)


def _part(value: int, base: str, pad: int) -> str:
    if base == "oct":
        return "0" + "0" * pad + format(value, "o")
    if base in ("hex", "HEX"):
        return ("0x" if base == "hex" else "0X") + "0" * pad + format(value, "x" if base == "hex" else "X")
    return str(value)


@st.composite
def ipv4_forms(draw) -> str:
    """An IPv4 address as ``inet_aton`` reads it: 1-4 parts, the last filling the rest, each in any base."""
    first = draw(st.sampled_from([127, 127, 0, 10, 192, 126, 128, 255]))
    rest = draw(st.integers(0, 2**24 - 1))
    value = first << 24 | rest
    n = draw(st.integers(1, 4))
    widths = [8] * (n - 1) + [32 - 8 * (n - 1)]
    parts, shift = [], 32
    for width in widths:
        shift -= width
        parts.append((value >> shift) & ((1 << width) - 1))
    text = ".".join(
        _part(p, draw(st.sampled_from(["dec", "oct", "hex", "HEX"])), draw(st.integers(0, 2))) for p in parts
    )
    return text + ("." if draw(st.integers(0, 9)) == 0 else "")


IPV6_FORMS = st.sampled_from(
    [
        "::1",
        "0:0:0:0:0:0:0:1",
        "0000::0001",
        "::",
        "::2",
        "fe80::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:127.9.8.7",
        "::ffff:7f00:1",
        "::ffff:10.0.0.1",
        "::ffff:0.0.0.0",
        "::127.0.0.1",  # IPv4-compatible (deprecated): not loopback
    ]
)
NAMES = st.sampled_from(["localhost", "LOCALHOST", "LocalHost"])


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@settings(max_examples=150, deadline=None)
@given(st.one_of(ipv4_forms(), IPV6_FORMS, NAMES), st.integers(1, 65535))
@example("127.1", 8000)
@example("2130706433", 8000)
@example("0x7f.1", 8000)
@example("0177.0.0.1", 8000)
@example("017700000001", 8000)
@example("127.0.0.1.", 8000)
@example("0", 8000)
def test_loopback_is_what_the_resolver_says(host, port):
    url = f"http://{_url_host(host)}:{port}/v1"
    with mock.patch.dict(os.environ, PROXY_ENV):
        try:
            endpoint = Endpoint(url, "KEY", timeout=10)
        except ConfigError:
            # refused as the URL is read: only a URL httpx itself refuses (so nothing could be sent to it)
            with pytest.raises(httpx.InvalidURL):
                httpx.URL(url)
            return
        expected = _reaches_this_machine(host)
        assert endpoint.loopback is expected, (host, endpoint.loopback)
        assert endpoint.proxy == (None if expected else PLANTED), (host, endpoint.proxy)


@settings(max_examples=60, deadline=None)
@given(ipv4_forms(), st.one_of(st.none(), st.integers(1, 65535)))
def test_allowed_hosts_compare_by_the_address_the_resolver_reads(host, port):
    """``--allow-endpoint`` and a spec's endpoint are compared as the resolver reads them: any inet_aton form of
    an address is that address; a form it does not read is compared as the name it then is."""
    given_text = host if port is None else f"{host}:{port}"
    parsed_host, parsed_port = host_port(given_text)
    assert parsed_port == port
    try:
        numeric = socket.getaddrinfo(host, 0, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)[0][4][0]
    except OSError:
        numeric = host.lower()
    assert parsed_host == numeric


class _Resolver:
    """``socket.getaddrinfo`` answering a made-up name with scripted addresses (each call the next one)."""

    def __init__(self, name: str, answers: list[str]):
        self.name, self.answers, self.asked = name, answers, 0
        self.real = socket.getaddrinfo

    def __call__(self, host, port, *args, **kwargs):
        if host != self.name:
            return self.real(host, port, *args, **kwargs)
        address = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return self.real(address, port, *args, **kwargs)


def test_the_connection_goes_to_the_address_resolved_once_with_the_name_as_host():
    server = HostileServer("ok")  # answers and closes each connection: every request connects again
    # after the first answer the name would move to a host nobody listens on
    resolver = _Resolver("pinned.invalid", ["127.0.0.1", "192.0.2.1"])
    try:
        with mock.patch.object(socket, "getaddrinfo", resolver), mock.patch.dict(os.environ, PROXY_ENV):
            endpoint = Endpoint(f"http://pinned.invalid:{server.port}/v1", "KEY", timeout=5, retries=0)
            assert endpoint.loopback and endpoint.proxy is None
            for _ in range(3):
                assert endpoint.post_json("chat/completions", {"model": "m"})["choices"]
            endpoint.close()
        assert resolver.asked == 1
        assert [r[2]["host"] for r in server.posts] == [f"pinned.invalid:{server.port}"] * 3
        assert all(r[2]["authorization"] == "Bearer KEY" for r in server.posts)
    finally:
        server.close()


def test_tls_is_started_with_the_name_not_the_address():
    listener = Listener()  # records the TLS ClientHello, whose server_name extension holds the name in clear
    resolver = _Resolver("pinned.invalid", ["127.0.0.1"])
    try:
        with mock.patch.object(socket, "getaddrinfo", resolver):
            endpoint = Endpoint(f"https://pinned.invalid:{listener.port}/v1", "KEY", timeout=1, retries=0)
            reply = endpoint.call("chat/completions", {"model": "m"})
            endpoint.close()
        assert reply.data is None and reply.error.startswith("timed out after 1s"), reply
        assert listener.connections == 1 and b"pinned.invalid" in listener.received
        assert b"KEY" not in listener.received
    finally:
        listener.close()


def test_a_name_that_does_not_resolve_goes_to_the_proxy_or_fails():
    with mock.patch.object(socket, "getaddrinfo", side_effect=socket.gaierror(-2, "Name or service not known")):
        with mock.patch.dict(os.environ, PROXY_ENV):
            assert Endpoint("http://nowhere.invalid/v1").proxy == PLANTED  # the proxy resolves it
        with mock.patch.dict(os.environ, dict.fromkeys(PROXY_ENV, "")):
            endpoint = Endpoint("http://nowhere.invalid/v1", timeout=2, retries=0)
            reply = endpoint.call("chat/completions", {})
            assert reply.data is None and "cannot resolve nowhere.invalid" in reply.error, reply


#: Modules that open connections or speak HTTP. Only the client door imports them; the exceptions, with why:
NETWORK_MODULES = ("urllib.request", "urllib3", "http.client", "requests", "httpx", "httpcore", "aiohttp", "socket")
ALLOWED = {
    "toolkit/guard/client.py": set(NETWORK_MODULES),  # the door itself
    "toolkit/jobs/shards.py": {"socket"},  # socket.gethostname(): names the worker in a shard's record
    "toolkit/jobs/distributed.py": {"socket"},  # a TCP probe of a Ray cluster's port before Ray joins it
}


def test_no_remote_call_goes_around_the_door():
    """Every module of the toolkit that imports a network module is the door or a listed exception."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found: dict[str, set[str]] = {}
    for path in sorted((root / "toolkit").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                hit = next((m for m in NETWORK_MODULES if name == m or name.startswith(m + ".")), None)
                if hit:
                    found.setdefault(rel, set()).add(hit)
    outside = {rel: mods - ALLOWED.get(rel, set()) for rel, mods in found.items()}
    assert {rel: mods for rel, mods in outside.items() if mods} == {}
    assert "toolkit/guard/client.py" in found  # the walk does see imports
