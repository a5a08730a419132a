"""The door of remote calls: one HTTP client, on httpx, for the LLM judge and every later endpoint.

``Endpoint(url, key, timeout=..., max_response_bytes=...)`` is one OpenAI-compatible base URL
(``http://localhost:8000/v1``) and its API key. ``post_json(path, payload)`` sends one JSON request (retried as
below) and returns the answer's JSON object; ``call`` does the same and returns a ``Reply`` (never raises);
``post_many(path, payloads)`` sends many, ``concurrency`` in flight, yielding ``(index, Reply)`` as each finishes.
``chat_payload`` and ``chat_text`` build and read the chat/completions shape.

What every request is held to:

- **Credentials stay on their origin.** No redirect is followed: a 3xx is a failed request naming its
  ``Location``, so the ``Authorization`` header goes only to the endpoint's own scheme, host and port.
- **Bounded answers.** An answer is read as a stream and counted (after gzip or deflate decoding, which is done
  here with a bound too): one longer than ``max_response_bytes`` (default 4 MiB) is a failed request, and no more
  than the bound (plus one network read) is read or held.
- **A deadline per request.** ``timeout`` bounds the whole request (connecting, sending, the headers and the whole
  body), not each read: every socket operation is given at most the time left (a thread-local deadline read by
  the network layer under httpx), so a server that trickles a byte at a time is cut at the deadline.
- **Loopback bypasses proxies.** An endpoint on 127.0.0.0/8, ``::1`` or ``localhost`` is reached directly, whatever
  ``http_proxy``, ``HTTPS_PROXY`` or ``ALL_PROXY`` say (its key never reaches a proxy); another host uses the
  environment's proxy unless ``no_proxy`` names it.
- **Retries.** A timeout, a failed connection, HTTP 408, 429 or a 5xx is retried up to ``retries`` times after
  ``backoff * 2**attempt`` seconds (or the server's ``Retry-After`` when it is longer and under a minute); a
  redirect, another 4xx, a too-large or malformed answer is not. ``rate`` caps request starts per second.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolkit.errors import ConfigError

log = logging.getLogger(__name__)

#: the largest answer read, in bytes (``--max-response-bytes``)
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
#: The other defaults of every endpoint (``Endpoint``, the judge, the listwise reranker, their CLI options).
DEFAULT_TIMEOUT = 60.0  # seconds, a deadline for each whole request
DEFAULT_CONCURRENCY = 8  # requests in flight
DEFAULT_RETRIES = 4
DEFAULT_BACKOFF = 1.0  # seconds before the first retry, doubling
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: the longest ``Retry-After`` honoured, in seconds
MAX_RETRY_AFTER = 60
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


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


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (also IPv4-mapped) and the names of the local host."""
    h = host.strip("[]").rstrip(".").lower()
    if h in LOOPBACK_NAMES or h.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(h)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


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


# The deadline of the request this thread is making (time.monotonic() seconds), read by the network layer.
_deadline = threading.local()


def _time_left(timeout: float | None, timeout_error: type[Exception]) -> float | None:
    end = getattr(_deadline, "at", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise timeout_error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


@functools.cache
def _deadline_backend() -> Any:
    """httpcore's synchronous network backend, each socket operation given at most the time to the deadline."""
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: Any):
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
            return Stream(
                self.inner.start_tls(ssl_context, server_hostname, _time_left(timeout, httpcore.ConnectTimeout))
            )

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.SyncBackend()

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            left = _time_left(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.connect_tcp(host, port, left, local_address, socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            left = _time_left(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.connect_unix_socket(path, left, socket_options))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return Backend()


def _env_proxy(scheme: str, host: str) -> str | None:
    """The environment's proxy for a non-loopback host (``{scheme}_proxy``, else ``all_proxy``; ``no_proxy``)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if proxy and urllib.request.proxy_bypass(host):
        return None
    return proxy or None


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
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"endpoint {url!r} is not an http:// or https:// URL")
        if parts.username or parts.password:
            raise ConfigError(f"endpoint {parts.hostname}: give the key in the environment, not in the URL")
        if concurrency < 1 or retries < 0 or timeout <= 0 or backoff < 0 or (rate is not None and rate <= 0):
            raise ConfigError("concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed")
        if max_response_bytes < 1:
            raise ConfigError(f"max_response_bytes must be >= 1, not {max_response_bytes}")
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.scheme = parts.scheme
        self.origin = f"{parts.scheme}://{parts.netloc}"  # scheme, host and port: where the key may go
        self.loopback = is_loopback(self.host)
        self.timeout = float(timeout)
        self.max_response_bytes = int(max_response_bytes)
        self.concurrency = concurrency
        self.retries = retries
        self.backoff = backoff
        self.rate = rate
        self._key = key
        self._limit = _RateLimit(rate)
        self._lock = threading.Lock()
        self._client: Any = None

    def __repr__(self) -> str:  # never the key
        return f"Endpoint({self.url!r}, key={'set' if self._key else None}, timeout={self.timeout:g})"

    def __getstate__(self) -> dict:  # a Ray worker builds its own connection pool
        return self.__dict__ | {"_client": None, "_lock": None, "_limit": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._limit = _RateLimit(self.rate)

    @property
    def proxy(self) -> str | None:
        """The proxy requests go through (None: direct); never one for a loopback endpoint."""
        return None if self.loopback else _env_proxy(self.scheme, self.host)

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                try:
                    transport = httpx.HTTPTransport(
                        proxy=self.proxy, limits=httpx.Limits(max_connections=self.concurrency + 1)
                    )
                except (ImportError, ValueError) as exc:
                    raise ConfigError(f"endpoint {self.url}: cannot use the proxy {self.proxy!r} ({exc})") from None
                # the one place httpx's internals are reached: its pool's network backend, so that each socket
                # operation gets at most the time to the request's deadline (tests/security/cases_client.py)
                transport._pool._network_backend = _deadline_backend()
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

    def request_json(
        self, method: str, path: str, payload: Any = None, *, timeout: float | None = None
    ) -> tuple[int, dict]:
        """One request, no retry: (status, the answer's JSON object) for a 2xx; ``RequestFailed`` otherwise."""
        import httpx

        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        url = self.url + "/" + path.lstrip("/")
        _deadline.at = time.monotonic() + limit
        timed_out = f"timed out after {limit:g}s (the deadline of the whole request)"
        try:
            with self._http().stream(method, url, json=payload) as resp:
                status = resp.status_code
                if 300 <= status < 400:
                    where = resp.headers.get("location", "")
                    raise RequestFailed(
                        f"HTTP {status}: redirected to {where!r}, not followed (the key goes only to {self.origin})",
                        status=status,
                    )
                if status >= 400:
                    after = resp.headers.get("retry-after", "")
                    raise RequestFailed(
                        f"HTTP {status}",
                        retryable=status in RETRY_STATUSES,
                        retry_after=float(after) if after.isdigit() and int(after) < MAX_RETRY_AFTER else None,
                        status=status,
                    )
                body = self._read(resp, timed_out)
        except httpx.TimeoutException:
            raise RequestFailed(timed_out, retryable=True) from None
        except httpx.TransportError as exc:
            raise RequestFailed(f"connection failed: {exc or type(exc).__name__}", retryable=True) from None
        finally:
            _deadline.at = None
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise RequestFailed(f"malformed response (not JSON: {str(exc)[:80]})", status=status) from None
        if not isinstance(data, dict):
            raise RequestFailed("malformed response (not a JSON object)", status=status)
        return status, data

    def _read(self, resp: Any, timed_out: str) -> bytes:
        """The body, at most ``max_response_bytes`` after decoding, before the deadline."""
        bound = self.max_response_bytes
        too_large = f"answer larger than {bound:,} bytes (max_response_bytes); not read further"
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > bound:
            raise RequestFailed(too_large.replace("answer", f"answer of {int(declared):,} bytes,", 1))
        coding = resp.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise RequestFailed(f"answer in an unsupported Content-Encoding {coding!r}")
        inflate = None if coding in ("", "identity") else zlib.decompressobj(47)  # gzip or zlib, detected
        body = bytearray()
        for chunk in resp.iter_raw():
            if time.monotonic() > _deadline.at:
                raise RequestFailed(timed_out, retryable=True)
            if inflate is not None:
                try:
                    piece = inflate.decompress(chunk, bound - len(body) + 1)
                except zlib.error as exc:
                    raise RequestFailed(f"malformed response ({coding}: {exc})") from None
                if inflate.unconsumed_tail:
                    raise RequestFailed(too_large)
                chunk = piece
            body += chunk
            if len(body) > bound:
                raise RequestFailed(too_large)
        return bytes(body)

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
        """(index, Reply) of each payload as its request finishes, ``concurrency`` requests in flight."""
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(self.call, path, p): i for i, p in enumerate(payloads)}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            finally:
                for fut in futures:
                    fut.cancel()
