"""The door of remote calls: one HTTP client, on httpx, for the LLM judge, the listwise reranker and downloads.

``Endpoint(url, key, timeout=..., max_response_bytes=...)`` is one OpenAI-compatible base URL
(``http://localhost:8000/v1``) and its API key. ``post_json(path, payload)`` sends one JSON request (retried as
below) and returns the answer's JSON object; ``call`` does the same and returns a ``Reply`` (never raises);
``post_many(path, payloads)`` sends many, ``concurrency`` in flight, yielding ``(index, Reply)`` as each finishes
(no more than ``concurrency`` requests are ever handed to its threads: one that stops reading, and closes it or
lets it go, leaves no request behind to start).
``chat_payload`` and ``chat_text`` build and read the chat/completions shape. ``download(url, fh, size=...,
sha256=...)`` (``Endpoint.fetch``) is a streamed GET written into a file as it arrives: ``index --download`` and
every other fetch of a file go through it, never through urllib.

What every request is held to:

- **Credentials stay on their origin.** No redirect is followed: a 3xx is a failed request naming its
  ``Location``, so the ``Authorization`` header goes only to the endpoint's own scheme, host and port.
- **Bounded answers.** An answer is read as a stream and counted (after gzip or deflate decoding, which is done
  here with a bound too): one longer than ``max_response_bytes`` (default 4 MiB) is a failed request, and no more
  than the bound (plus one network read) is read or held.
- **A deadline per request.** ``timeout`` bounds the whole request (resolving the host, connecting, sending, the
  headers and the whole body), not each read: every socket operation is given at most the time left (the
  request carries its deadline to this door's httpx transport as a request extension; the transport's network
  layer reads it, per thread), so a server or proxy that trickles a byte at a
  time is cut at the deadline. A download's ``timeout`` bounds the whole download, its retries included.
- **Loopback is decided on the address the connection uses, and never goes through a proxy.** The host is
  resolved once, by ``getaddrinfo`` (the resolver a connection uses: ``127.1``, ``2130706433``, ``0x7f.1`` are
  127.0.0.1 to it), and a direct connection goes to those addresses only, so a later DNS answer cannot move it;
  the ``Host`` header and TLS's server name stay the URL's. When every address reaches this machine (127.0.0.0/8,
  ``::1``, the unspecified ``0.0.0.0`` and ``::``, also IPv4-mapped), the endpoint is reached directly, whatever
  ``http_proxy``, ``HTTPS_PROXY`` or ``ALL_PROXY`` say (its key never reaches a proxy); another host uses the
  environment's proxy unless ``no_proxy`` names it (a host that does not resolve here goes to the proxy, which
  resolves it, or fails when there is none).
- **Retries.** A timeout, a failed connection, HTTP 408, 429 or a 5xx is retried up to ``retries`` times after
  ``backoff * 2**attempt`` seconds (or the server's ``Retry-After`` when it is longer and under a minute); a
  redirect, another 4xx, a too-large or malformed answer is not. ``Retry-After`` and ``Content-Length`` are read
  by the numbers door (``toolkit.guard.numbers.http_integer``: the digits 0-9, at most 18); any other value of
  them (``Retry-After: ²``, an HTTP date) is not used. ``rate`` caps request starts per second.

Only httpx's and httpcore's public interfaces are used: the transport is an ``httpx.BaseTransport`` over an
``httpcore.ConnectionPool`` (or ``HTTPProxy``/``SOCKSProxy``) given this module's network backend.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
import itertools
import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from toolkit.errors import ChecksumError, ConfigError
from toolkit.guard.numbers import NumberRefused, http_integer, natural
from toolkit.options import Options, opt

log = logging.getLogger(__name__)

#: the largest answer read, in bytes (``--max-response-bytes``)
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
#: the largest file ``download`` writes when the caller declares no size
DEFAULT_MAX_DOWNLOAD_BYTES = 1024 * 1024 * 1024
#: The other defaults of every endpoint (``Endpoint``, the judge, the listwise reranker, their CLI options).
DEFAULT_TIMEOUT = 60.0  # seconds, a deadline for each whole request
DEFAULT_CONCURRENCY = 8  # requests in flight
DEFAULT_RETRIES = 4
DEFAULT_BACKOFF = 1.0  # seconds before the first retry, doubling
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RequestPolicy(Options):
    """The HTTP settings of a job that calls an endpoint (the judge's, the listwise reranker's; ``Endpoint``'s
    keywords): the one declaration of their defaults and ranges, checked once where the policy is built. A verb's
    options hold it as a nested piece (``RequestPolicy.piece(doc=...)``: its keywords become the verb's), the
    command line's ``--concurrency --timeout --max-response-bytes --retries --backoff --rate`` set it
    (``toolkit.cli.options.CLIENT``), and ``Endpoint(url, key, policy=...)`` takes it."""

    verb = "Endpoint"

    concurrency: int = opt(DEFAULT_CONCURRENCY, doc="``openai``: requests in flight.")
    timeout: float = opt(
        DEFAULT_TIMEOUT,
        doc="``openai``: the deadline of each request in seconds (connecting, sending and the whole answer).",
    )
    retries: int = opt(
        DEFAULT_RETRIES, doc="``openai``: retries of a failed request (timeouts, refused connections, 429, 5xx)."
    )
    backoff: float = opt(DEFAULT_BACKOFF, doc="``openai``: first retry after this many seconds, doubling.")
    rate: float | None = opt(None, doc="``openai``: at most this many requests per second.")
    max_response_bytes: int = opt(
        DEFAULT_MAX_RESPONSE_BYTES,
        doc="``openai``: the longest answer read (default 4 MiB); a longer one is a failed request.",
    )

    def __post_init__(self) -> None:
        if self.max_response_bytes is None:  # None, as the judge has always taken it: the default bound
            object.__setattr__(self, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
        super().__post_init__()

    def validate(self) -> None:
        c, r, t, b, rate = self.concurrency, self.retries, self.timeout, self.backoff, self.rate
        if c < 1 or r < 0 or t <= 0 or b < 0 or (rate is not None and rate <= 0):
            raise ConfigError("concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed")
        if self.max_response_bytes < 1:
            raise ConfigError(f"max_response_bytes must be >= 1, not {self.max_response_bytes}")

    def endpoint_settings(self) -> dict:
        """The policy as ``Endpoint``'s (and the chat clients') keywords."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: the longest ``Retry-After`` honoured, in seconds
MAX_RETRY_AFTER = 60
#: The environment variables holding the keys twostage sends to an endpoint, in the order they are looked up: an
#: endpoint's key is the first one set. ``twostage reproduce`` passes none of them to a step whose endpoints the
#: command line did not allow (``toolkit.reproduction.runner``).
CREDENTIAL_VARIABLES = ("TWOSTAGE_JUDGE_API_KEY", "OPENAI_API_KEY")
_DEFAULT_PORTS = MappingProxyType({"http": 80, "https": 443})


class RequestFailed(Exception):
    """One request that gave no usable answer: ``reason`` says why; ``retryable`` whether asking again may help."""

    def __init__(
        self, reason: str, *, retryable: bool = False, retry_after: float | None = None, status: int | None = None
    ):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.attempts = 1


@dataclass(frozen=True)
class Reply:
    """An answer's JSON object (``data``), or why there is none (``error``: the last failure after every retry)."""

    data: dict | None
    error: str = ""
    attempts: int = 1
    status: int | None = None


def environment_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The API key of the environment: the first of ``CREDENTIAL_VARIABLES`` set (None when none is)."""
    import os

    env = os.environ if environ is None else environ
    return next((env[name] for name in CREDENTIAL_VARIABLES if env.get(name)), None)


# ------------------------------------------------------------------ hosts and addresses
def is_loopback_address(address: str) -> bool:
    """Whether a connection to this numeric address reaches this machine: 127.0.0.0/8 and ``::1`` (loopback),
    ``0.0.0.0`` and ``::`` (unspecified: a connection to it reaches this machine), also IPv4-mapped
    (``::ffff:127.0.0.1``). A name or anything that is not an address is False."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    ip = getattr(ip, "ipv4_mapped", None) or ip
    return ip.is_loopback or ip.is_unspecified


def resolve(host: str, port: int, timeout: float | None = None) -> tuple[str, ...]:
    """The addresses ``host`` resolves to, as ``getaddrinfo`` gives them for a TCP connection (the resolution
    ``socket.create_connection`` makes), in its order, each once. ``OSError`` (``socket.gaierror``) when there is
    none; ``TimeoutError`` when the resolver takes longer than ``timeout`` seconds (its thread is left to end)."""
    import socket

    def lookup() -> tuple[str, ...]:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        return tuple(dict.fromkeys(str(info[4][0]) for info in infos))

    if timeout is None:
        return lookup()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, lookup()))
        except Exception as exc:  # handed to the caller below
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="twostage-resolve", daemon=True)
    worker.start()
    worker.join(max(timeout, 0.0))
    if not outcome:
        raise TimeoutError(f"resolving {host} took longer than {timeout:g}s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def resolves_to_loopback(host: str, port: int = 0, timeout: float | None = 5.0) -> bool:
    """Whether every address ``host`` resolves to reaches this machine (``is_loopback_address``); False when it
    does not resolve. The one loopback decision of twostage: the endpoints here, ``--ray HOST:PORT``."""
    try:
        addresses = resolve(host.strip("[]"), port, timeout)
    except OSError:
        return False
    return bool(addresses) and all(is_loopback_address(a) for a in addresses)


def canonical_host(host: str) -> str:
    """A host as compared with another: the numeric address for any form the resolver reads as one (``127.1``,
    ``0x7f.1`` and ``2130706433`` are ``127.0.0.1``; ``[::1]`` is ``::1``; no lookup is made), else the name in
    lower case."""
    import socket

    h = host.strip("[]")
    try:
        infos = socket.getaddrinfo(h, 0, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return h.lower()
    return str(infos[0][4][0])


def host_port(text: str) -> tuple[str, int | None]:
    """(canonical host, port or None) of a URL (``scheme://host[:port]/...``: its port, or the scheme's), a
    ``HOST:PORT``, a ``[v6]:PORT`` or a bare host; ``ValueError`` when it names no host."""
    value = text.strip()
    if "://" in value:
        parts = urlsplit(value)
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        if not parts.hostname:
            raise ValueError(f"{text!r} names no host")
        return canonical_host(parts.hostname), port or _DEFAULT_PORTS.get(parts.scheme.lower())
    host, port = value, None
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[1:end], value[end + 1 :]
        if end == -1 or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not HOST, HOST:PORT or a URL")
        port = _port(text, rest[1:]) if rest else None
    elif value.count(":") == 1:
        host, digits = value.split(":")
        port = _port(text, digits)
    if not host or any(c.isspace() or c in "/?#@" for c in host):
        raise ValueError(f"{text!r} is not HOST, HOST:PORT or a URL")
    return canonical_host(host), port


def _port(text: str, digits: str) -> int:
    try:
        port = natural(digits, what="port", max_digits=5)
    except NumberRefused:
        port = 0
    if not 0 < port < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return port


def _header_integer(value: str | None, name: str) -> int | None:
    """A header that is a number of seconds or bytes, read by the numbers door (``toolkit.guard.numbers``): the
    digits 0-9 only, at most 18 of them; None when absent or anything else (``Retry-After: ²``, an HTTP date,
    a number too long to mean anything), which is then not used."""
    if value is None:
        return None
    try:
        return http_integer(value, what=name)
    except NumberRefused:
        return None


def _retry_after(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` asks for, when it says so in digits and under ``MAX_RETRY_AFTER``."""
    seconds = _header_integer(value, "Retry-After")
    return float(seconds) if seconds is not None and seconds < MAX_RETRY_AFTER else None


def chat_payload(model: str, user: str, system: str = "", max_tokens: int | None = None, **extra: Any) -> dict:
    """An OpenAI-compatible chat/completions request, temperature 0 unless ``extra`` says otherwise."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    payload: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    return payload | extra


def chat_text(data: Mapping) -> str:
    """The first choice's message text of a chat/completions answer; ``ValueError`` when there is none."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"no choices[0].message.content ({type(exc).__name__}: {exc})") from None
    if not isinstance(content, str):
        raise ValueError("message content is not text")
    return content


def responses_text(data: Mapping) -> str:
    """The text of a Responses API answer as rank_llm's OpenAI client reads it (``output[-1].content[0].text``);
    ``ValueError`` when there is none."""
    try:
        content = data["output"][-1]["content"][0]["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"no output[-1].content[0].text ({type(exc).__name__}: {exc})") from None
    if not isinstance(content, str):
        raise ValueError("output text is not text")
    return content


def top_logprobs(data: Mapping) -> list[tuple[str, float]]:
    """The first answer token's (token, log-probability) pairs of a chat/completions answer with
    ``logprobs``/``top_logprobs`` (as vLLM and OpenAI serve them); ``ValueError`` when there are none."""
    try:
        first = data["choices"][0]["logprobs"]["content"][0]
        pairs = first["top_logprobs"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"no choices[0].logprobs.content[0].top_logprobs ({type(exc).__name__}: {exc})") from None
    out = []
    for p in pairs:
        if not isinstance(p, dict) or not isinstance(p.get("token"), str):
            raise ValueError("a top_logprobs entry without a token")
        lp = p.get("logprob")
        if isinstance(lp, bool) or not isinstance(lp, (int, float)):
            raise ValueError("a top_logprobs entry without a numeric logprob")
        out.append((p["token"], float(lp)))
    return out


class _RateLimit:
    """At most ``rate`` starts per second across threads (None: no limit)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.lock = threading.Lock()
        self.next = 0.0

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
        if start > now:
            time.sleep(start - now)


#: The request extension (httpx's public ``extensions=``) that carries a request's deadline, in
#: ``time.monotonic()`` seconds, to this door's transport.
DEADLINE = "twostage.deadline"


def _time_left(end: float | None, timeout: float | None, timeout_error: type[Exception]) -> float | None:
    """What an operation may take: ``timeout`` at most, and no later than ``end`` (None: no deadline);
    ``timeout_error`` once ``end`` has passed."""
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise timeout_error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Deadline(threading.local):
    """A transport's deadlines, one per thread: that of the request the thread is making through it (set from the
    request's ``DEADLINE`` extension while the request and its body are under way), read by each operation on
    the connection."""

    at: float | None = None

    def left(self, timeout: float | None, timeout_error: type[Exception]) -> float | None:
        return _time_left(self.at, timeout, timeout_error)


@dataclass(frozen=True)
class Route:
    """How an endpoint is reached: through ``proxy``, or directly (``proxy`` None) to ``addresses``, the host's
    addresses resolved once (empty when it did not resolve: ``error`` says why)."""

    host: str
    port: int
    addresses: tuple[str, ...]
    proxy: str | None
    error: str = ""

    @property
    def loopback(self) -> bool:
        """Every address reaches this machine (``is_loopback_address``)."""
        return bool(self.addresses) and all(is_loopback_address(a) for a in self.addresses)


def _env_proxy(scheme: str, host: str) -> str | None:
    """The environment's proxy for a host that is not this machine (``{scheme}_proxy``, else ``all_proxy``;
    ``no_proxy``)."""
    import urllib.request  # the environment's proxy settings only, parsed as the standard library does

    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if proxy and urllib.request.proxy_bypass(host):
        return None
    return proxy or None


def route(scheme: str, host: str, port: int, timeout: float | None = None) -> Route:
    """Resolve ``host`` once and decide on its addresses: directly when they all reach this machine, else the
    environment's proxy rules. ``TimeoutError`` when resolving takes longer than ``timeout``."""
    try:
        addresses = resolve(host, port, timeout)
    except TimeoutError:
        raise
    except (OSError, UnicodeError) as exc:
        addresses, error = (), f"cannot resolve {host} ({getattr(exc, 'strerror', None) or exc})"
    else:
        error = ""
    local = Route(host, port, addresses, None)
    if local.loopback:
        return local
    proxy = _env_proxy(scheme, host)
    return Route(host, port, () if proxy else addresses, proxy, "" if proxy else error)


@functools.cache
def _transport_class() -> Any:
    """The httpx transport of this door over its httpcore network backend, made once httpx is needed."""
    import httpcore
    import httpx

    # httpcore's exceptions as httpx's, the most specific first (httpx's transport does the same mapping)
    exceptions = [
        (httpcore.ConnectTimeout, httpx.ConnectTimeout),
        (httpcore.ReadTimeout, httpx.ReadTimeout),
        (httpcore.WriteTimeout, httpx.WriteTimeout),
        (httpcore.PoolTimeout, httpx.PoolTimeout),
        (httpcore.TimeoutException, httpx.TimeoutException),
        (httpcore.ConnectError, httpx.ConnectError),
        (httpcore.ReadError, httpx.ReadError),
        (httpcore.WriteError, httpx.WriteError),
        (httpcore.NetworkError, httpx.NetworkError),
        (httpcore.ProxyError, httpx.ProxyError),
        (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
        (httpcore.LocalProtocolError, httpx.LocalProtocolError),
        (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
        (httpcore.ProtocolError, httpx.ProtocolError),
    ]

    @contextlib.contextmanager
    def as_httpx() -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            for theirs, ours in exceptions:
                if isinstance(exc, theirs):
                    raise ours(str(exc)) from exc
            raise

    class Stream(httpcore.NetworkStream):
        """A connection each of whose operations gets at most the time to the request's deadline."""

        def __init__(self, inner: Any, deadline: _Deadline):
            self.inner = inner
            self.deadline = deadline

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.inner.read(max_bytes, self.deadline.left(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, self.deadline.left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
            left = self.deadline.left(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.start_tls(ssl_context, server_hostname, left), self.deadline)

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        """httpcore's synchronous backend under the deadline; a direct route connects only to its addresses."""

        def __init__(self, way: Route, deadline: _Deadline) -> None:
            self.inner = httpcore.SyncBackend()
            self.way = way
            self.deadline = deadline

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            way = self.way
            if way.proxy is not None:  # the proxy's own address: the user's setting, resolved as it says
                left = self.deadline.left(timeout, httpcore.ConnectTimeout)
                return Stream(self.inner.connect_tcp(host, port, left, local_address, socket_options), self.deadline)
            if (host, port) != (way.host, way.port):
                raise httpcore.ConnectError(f"not connecting to {host}:{port}: this client reaches {way.host} only")
            if not way.addresses:
                raise httpcore.ConnectError(way.error or f"cannot resolve {host}")
            failed: Exception | None = None
            for address in way.addresses:  # in the resolver's order, as socket.create_connection tries them
                left = self.deadline.left(timeout, httpcore.ConnectTimeout)
                try:
                    stream = self.inner.connect_tcp(address, port, left, local_address, socket_options)
                    return Stream(stream, self.deadline)
                except httpcore.ConnectError as exc:
                    failed = exc
            assert failed is not None  # addresses is not empty
            raise failed

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            raise httpcore.ConnectError("this client makes TCP connections only")

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    class Body(httpx.SyncByteStream):
        """An answer's body, read under its request's deadline."""

        def __init__(self, inner: Any, deadline: _Deadline, at: float | None):
            self.inner = inner
            self.deadline = deadline
            self.at = at

        def __iter__(self) -> Iterator[bytes]:
            self.deadline.at = self.at
            try:
                with as_httpx():
                    yield from self.inner
            finally:
                self.deadline.at = None

        def close(self) -> None:
            if hasattr(self.inner, "close"):
                self.inner.close()

    class Transport(httpx.BaseTransport):
        """httpx's ``HTTPTransport``, less its options, over a pool given ``Backend`` (httpcore's public
        ``network_backend``): the route decides proxy or not, and the backend where a connection goes. A
        request's ``DEADLINE`` extension bounds every operation of its connection, its body's reads included."""

        def __init__(self, way: Route, max_connections: int) -> None:
            self.deadline = _Deadline()
            pool: dict[str, Any] = {
                "ssl_context": httpx.create_ssl_context(),
                "max_connections": max_connections,
                "max_keepalive_connections": 20,
                "keepalive_expiry": 5.0,
                "network_backend": Backend(way, self.deadline),
            }
            if way.proxy is None:
                self.pool = httpcore.ConnectionPool(**pool)
                return
            proxy = httpx.Proxy(url=way.proxy)
            url = httpcore.URL(
                scheme=proxy.url.raw_scheme, host=proxy.url.raw_host, port=proxy.url.port, target=proxy.url.raw_path
            )
            if proxy.url.scheme in ("http", "https"):
                self.pool = httpcore.HTTPProxy(
                    proxy_url=url,
                    proxy_auth=proxy.raw_auth,
                    proxy_headers=proxy.headers.raw,
                    proxy_ssl_context=proxy.ssl_context,
                    **pool,
                )
            elif proxy.url.scheme in ("socks5", "socks5h"):
                import socksio  # noqa: F401  (httpcore's SOCKS support needs it; the caller names a missing one)

                self.pool = httpcore.SOCKSProxy(proxy_url=url, proxy_auth=proxy.raw_auth, **pool)
            else:
                raise ValueError(f"a proxy is http, https, socks5 or socks5h, not {proxy.url.scheme!r}")

        def handle_request(self, request: Any) -> Any:
            url = request.url
            at = request.extensions.get(DEADLINE)
            sent = httpcore.Request(
                method=request.method,
                url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
                headers=request.headers.raw,
                content=request.stream,
                extensions={k: v for k, v in request.extensions.items() if k != DEADLINE},
            )
            self.deadline.at = at
            try:
                with as_httpx():
                    answer = self.pool.handle_request(sent)
            finally:
                self.deadline.at = None
            return httpx.Response(
                status_code=answer.status,
                headers=answer.headers,
                stream=Body(answer.stream, self.deadline, at),
                extensions=answer.extensions,
            )

        def close(self) -> None:
            self.pool.close()

    return Transport


class Endpoint:
    """One remote endpoint and its key (see the module docstring). Safe to share across threads."""

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        concurrency: int = DEFAULT_CONCURRENCY,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        rate: float | None = None,
        policy: RequestPolicy | None = None,
    ):
        """``policy`` (a ``RequestPolicy``) gives every HTTP setting at once; without it, the keywords build one
        (checked alike)."""
        import httpx

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"endpoint {url!r} is not an http:// or https:// URL")
        if parts.username or parts.password:
            raise ConfigError(f"endpoint {parts.hostname}: give the key in the environment, not in the URL")
        if policy is None:
            policy = RequestPolicy(
                concurrency=concurrency,
                timeout=timeout,
                retries=retries,
                backoff=backoff,
                rate=rate,
                max_response_bytes=max_response_bytes,
            )
        try:  # the host and port as httpx reads them: those its connections ask the network backend for
            parsed = httpx.URL(url)
            self.connect_host = parsed.raw_host.decode("ascii")
            self.port = parsed.port or _DEFAULT_PORTS[parts.scheme]
        except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
            raise ConfigError(f"endpoint {url!r} is not a valid URL ({exc})") from None
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.scheme = parts.scheme
        self.origin = f"{parts.scheme}://{parts.netloc}"  # scheme, host and port: where the key may go
        self.policy = policy
        self.timeout = float(policy.timeout)
        self.max_response_bytes = int(policy.max_response_bytes)
        self.concurrency = policy.concurrency
        self.retries = policy.retries
        self.backoff = policy.backoff
        self.rate = policy.rate
        self._key = key
        self._limit = _RateLimit(policy.rate)
        self._lock = threading.Lock()
        self._client: Any = None
        self._route: Route | None = None

    def __repr__(self) -> str:  # never the key
        return f"Endpoint({self.url!r}, key={'set' if self._key else None}, timeout={self.timeout:g})"

    def __getstate__(self) -> dict:  # a Ray worker resolves the host and builds its connection pool itself
        return self.__dict__ | {"_client": None, "_lock": None, "_limit": None, "_route": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._limit = _RateLimit(self.rate)

    def _routed(self, timeout: float | None) -> Route:
        """The route, resolved once and kept while it resolved (call with ``_lock`` held)."""
        if self._route is None:
            way = route(self.scheme, self.connect_host, self.port, timeout)
            if way.addresses or way.proxy:  # a host that did not resolve is asked again next time
                self._route = way
            return way
        return self._route

    @property
    def loopback(self) -> bool:
        """Whether the host's addresses all reach this machine (then no proxy is ever used)."""
        with self._lock:
            return self._routed(self.timeout).loopback

    @property
    def proxy(self) -> str | None:
        """The proxy requests go through (None: direct); never one for a host that resolves to loopback."""
        with self._lock:
            return self._routed(self.timeout).proxy

    def _http(self, end: float) -> Any:
        """The httpx client of this endpoint, made on first use (its host resolved by ``end`` at the latest)."""
        with self._lock:
            if self._client is None:
                import httpx

                try:
                    way = self._routed(_time_left(end, self.timeout, TimeoutError))
                except TimeoutError as exc:
                    raise httpx.ConnectTimeout(str(exc)) from None
                if not way.addresses and not way.proxy:
                    raise httpx.ConnectError(way.error)
                try:
                    transport = _transport_class()(way, self.concurrency + 1)
                except (ImportError, ValueError) as exc:
                    raise ConfigError(f"endpoint {self.url}: cannot use the proxy {way.proxy!r} ({exc})") from None
                headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
                if self._key:
                    headers["Authorization"] = f"Bearer {self._key}"
                self._client = httpx.Client(
                    transport=transport,
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout),
                    follow_redirects=False,
                    trust_env=False,  # proxies are decided above, per endpoint; no .netrc
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            self._route = None

    def _exchange(
        self,
        method: str,
        path: str,
        payload: Any,
        limit: float,
        sink: Callable[[bytes], object],
        *,
        bound: int,
        headers: dict[str, str] | None = None,
    ) -> int:
        """One request, no retry, its body handed to ``sink`` as it arrives (at most ``bound`` bytes after
        decoding, before the deadline ``limit`` seconds away): the status of a 2xx; ``RequestFailed`` otherwise."""
        import httpx

        url = self.url + "/" + path.lstrip("/")
        end = time.monotonic() + limit
        timed_out = f"timed out after {limit:g}s (the deadline of the whole request)"
        try:
            http = self._http(end)
            with http.stream(method, url, json=payload, headers=headers, extensions={DEADLINE: end}) as resp:
                status = resp.status_code
                if 300 <= status < 400:
                    where = resp.headers.get("location", "")
                    raise RequestFailed(
                        f"HTTP {status}: redirected to {where!r}, not followed (the key goes only to {self.origin})",
                        status=status,
                    )
                if status >= 400:
                    raise RequestFailed(
                        f"HTTP {status}",
                        retryable=status in RETRY_STATUSES,
                        retry_after=_retry_after(resp.headers.get("retry-after")),
                        status=status,
                    )
                self._read(resp, timed_out, sink, bound, end)
                return status
        except httpx.TimeoutException:
            raise RequestFailed(timed_out, retryable=True) from None
        except httpx.TransportError as exc:
            raise RequestFailed(f"connection failed: {exc or type(exc).__name__}", retryable=True) from None

    def request_json(
        self, method: str, path: str, payload: Any = None, *, timeout: float | None = None
    ) -> tuple[int, dict]:
        """One request, no retry: (status, the answer's JSON object) for a 2xx; ``RequestFailed`` otherwise."""
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        body = bytearray()
        status = self._exchange(method, path, payload, limit, body.extend, bound=self.max_response_bytes)
        try:
            data = json.loads(bytes(body))
        except (ValueError, RecursionError) as exc:
            raise RequestFailed(f"malformed response (not JSON: {str(exc)[:80]})", status=status) from None
        if not isinstance(data, dict):
            raise RequestFailed("malformed response (not a JSON object)", status=status)
        return status, data

    @staticmethod
    def _read(resp: Any, timed_out: str, sink: Callable[[bytes], object], bound: int, end: float) -> None:
        """The body into ``sink``, at most ``bound`` bytes after decoding, before the deadline ``end``."""
        too_large = f"answer larger than {bound:,} bytes (max_response_bytes); not read further"
        declared = _header_integer(resp.headers.get("content-length"), "Content-Length")
        if declared is not None and declared > bound:
            raise RequestFailed(too_large.replace("answer", f"answer of {declared:,} bytes,", 1))
        coding = resp.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise RequestFailed(f"answer in an unsupported Content-Encoding {coding!r}")
        inflate = None if coding in ("", "identity") else zlib.decompressobj(47)  # gzip or zlib, detected
        got = 0
        for chunk in resp.iter_raw():
            if time.monotonic() > end:
                raise RequestFailed(timed_out, retryable=True)
            if inflate is not None:
                try:
                    piece = inflate.decompress(chunk, bound - got + 1)
                except zlib.error as exc:
                    raise RequestFailed(f"malformed response ({coding}: {exc})") from None
                if inflate.unconsumed_tail:
                    raise RequestFailed(too_large)
                chunk = piece
            got += len(chunk)
            if got > bound:
                raise RequestFailed(too_large)
            sink(chunk)

    def fetch(self, path: str, fh: BinaryIO, *, size: int | None = None, sha256: str | None = None) -> int:
        """GET ``{url}/{path}`` into the binary file ``fh`` as it arrives (emptied before each attempt), with the
        retries of the module docstring, all within ``timeout`` seconds; at most ``max_response_bytes``, and
        exactly ``size`` bytes when given. The bytes written; ``RequestFailed`` when no whole file came,
        ``ChecksumError`` when its sha256 is not ``sha256``."""
        bound = self.max_response_bytes if size is None else min(size, self.max_response_bytes)
        end = time.monotonic() + self.timeout
        past = f"timed out after {self.timeout:g}s (the deadline of the whole download)"
        for attempt in range(self.retries + 1):
            self._limit.wait()
            left = end - time.monotonic()
            if left <= 0:
                raise RequestFailed(past, retryable=True)
            try:
                written, digest = self._fetch_once(path, fh, left, bound, size)
            except RequestFailed as exc:
                exc.attempts = attempt + 1
                if exc.retryable and time.monotonic() >= end:
                    raise RequestFailed(past, retryable=True) from None
                wait = max(self.backoff * 2**attempt, exc.retry_after or 0.0)
                if not exc.retryable or attempt == self.retries or time.monotonic() + wait >= end:
                    raise
                log.debug(
                    "fetching %s%s failed (%s); retry %d in %.1fs", self.origin, path, exc.reason, attempt + 1, wait
                )
                time.sleep(wait)
                continue
            if sha256 is not None and digest != sha256:
                raise ChecksumError(
                    f"{self.url}/{path.lstrip('/')}: the download's sha256 {digest[:16]}... differs "
                    f"from the expected {sha256[:16]}...; the file is corrupt or a different version"
                )
            return written
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _fetch_once(self, path: str, fh: BinaryIO, left: float, bound: int, size: int | None) -> tuple[int, str]:
        """One attempt of ``fetch`` into the emptied ``fh``: (bytes written, their sha256)."""
        fh.seek(0)
        fh.truncate()
        digest = hashlib.sha256()
        written = 0

        def sink(chunk: bytes) -> None:
            nonlocal written
            fh.write(chunk)
            digest.update(chunk)
            written += len(chunk)

        self._exchange("GET", path, None, left, sink, bound=bound, headers={"Accept": "*/*"})
        if size is not None and written != size:
            raise RequestFailed(f"the answer held {written:,} bytes, not the {size:,} expected", retryable=True)
        return written, digest.hexdigest()

    def call(self, path: str, payload: Any) -> Reply:
        """POST ``payload`` as JSON to ``{url}/{path}`` with the retries of the module docstring; never raises."""
        error, status = "", None
        for attempt in range(self.retries + 1):
            self._limit.wait()
            wait = self.backoff * 2**attempt
            try:
                _status, data = self.request_json("POST", path, payload)
                return Reply(data, attempts=attempt + 1, status=_status)
            except RequestFailed as exc:
                error, status = exc.reason, exc.status
                if not exc.retryable:
                    return Reply(None, error, attempt + 1, status)
                if exc.retry_after is not None:
                    wait = max(wait, exc.retry_after)
            if attempt < self.retries:
                log.debug("request to %s failed (%s); retry %d in %.1fs", self.origin, error, attempt + 1, wait)
                time.sleep(wait)
        return Reply(None, error, self.retries + 1, status)

    def post_json(self, path: str, payload: Any) -> dict:
        """The answer's JSON object of one POST (with retries); ``RequestFailed`` (with ``attempts``) when none."""
        reply = self.call(path, payload)
        if reply.data is None:
            exc = RequestFailed(reply.error, status=reply.status)
            exc.attempts = reply.attempts
            raise exc
        return reply.data

    def post_many(self, path: str, payloads: Iterable[Any]) -> Iterator[tuple[int, Reply]]:
        """(index, Reply) of each payload as its request finishes, ``concurrency`` requests in flight. A request
        is handed to the threads only when one finishes, so a caller that stops reading (an error, a full disk)
        leaves at most the ``concurrency`` requests under way to finish, and none once it closes the iterator
        (``contextlib.closing``; a generator is closed when it is let go)."""
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        todo = iter(enumerate(payloads))
        running: dict[Any, int] = {}
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            while True:
                for i, p in itertools.islice(todo, self.concurrency - len(running)):
                    running[pool.submit(self.call, path, p)] = i
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield running.pop(fut), fut.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


def download(
    url: str,
    fh: BinaryIO,
    *,
    size: int | None = None,
    sha256: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = 2,
    backoff: float = DEFAULT_BACKOFF,
    max_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
) -> int:
    """Fetch ``url`` into the binary file ``fh`` through the one client (``Endpoint.fetch``: no key, no redirect,
    the environment's proxy unless the host is this machine, ``timeout`` a deadline for the whole download, at
    most ``size`` or else ``max_bytes`` bytes, ``sha256`` checked). The bytes written; ``RequestFailed`` or
    ``ChecksumError`` otherwise (``ConfigError`` for a URL that is not http(s))."""
    parts = urlsplit(url)
    endpoint = Endpoint(
        f"{parts.scheme}://{parts.netloc}",
        None,
        timeout=timeout,
        max_response_bytes=max_bytes,
        concurrency=1,
        retries=retries,
        backoff=backoff,
    )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        return endpoint.fetch(target, fh, size=size, sha256=sha256)
    finally:
        endpoint.close()
