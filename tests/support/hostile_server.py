"""Misbehaving HTTP servers on 127.0.0.1 for the client door's cases (tests/guard/cases_client.py), on raw
sockets so that they can do what a well-behaved server library would not: trickle bytes, never end a body,
redirect with a planted ``Location``.

``HostileServer(mode)`` answers ``GET .../models`` with a small JSON list (so the judge's probe passes) and every
``POST`` by ``mode``:

- ``ok``: a chat completion ``server.answer`` (by default ending in ``##final score: 1``; ``500`` for a prompt
  holding ``FAIL500``);
- ``retry-after``: the first time a request is seen (the probe's ``GET`` included), ``503`` with
  ``Retry-After: {server.retry_after}`` (sent as UTF-8, ``²`` by default); when it comes again, as ``ok``;
- ``redirect``: ``302`` to ``server.location``;
- ``huge``: ``200`` and ``server.huge`` bytes with no ``Content-Length`` (closed-delimited), as fast as it can;
- ``endless``: ``200`` and 16 KiB every 5 ms, never ending;
- ``trickle``: the whole answer, status line included, one byte every ``server.gap`` seconds;
- ``gzip``: ``200`` and ``server.huge`` zero bytes gzipped (``Content-Encoding: gzip``, about 0.1% of that);
- ``fail``: ``500`` every time.

Every request is kept whole (``server.requests``: method, path, headers as a lower-cased dict, body bytes);
``server.sent`` counts the body bytes written by ``huge`` and ``endless``. ``Listener`` is a socket that accepts
and records whatever reaches it (a planted proxy, a redirect target) and answers nothing useful.
"""

from __future__ import annotations

import json
import socket
import threading
import time


def _read_request(conn: socket.socket) -> tuple[str, str, dict[str, str], bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return method, path, headers, body


def _response(status: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode() + body


def completion(text: str) -> bytes:
    return json.dumps(
        {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": text}}]}
    ).encode()


def _gzip_zeros(n: int) -> bytes:
    """``n`` zero bytes gzipped, compressed a megabyte at a time (never ``n`` bytes in memory)."""
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    block = b"0" * (1 << 20)
    parts = [z.compress(block) for _ in range(n // len(block))]
    return b"".join([*parts, z.flush()])


class _Server:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                self.handle(conn)
        except OSError:  # the client hung up: what these servers are for
            pass

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class Listener(_Server):
    """Accepts and records: ``connections`` accepted, ``received`` the bytes that reached it."""

    def __init__(self) -> None:
        self.connections = 0
        self.received = b""
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        with self.lock:
            self.connections += 1
        conn.settimeout(2)
        try:
            while chunk := conn.recv(65536):
                with self.lock:
                    self.received += chunk
        except OSError:
            pass


class HostileServer(_Server):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.answer = "Relevant.\n##final score: 1"
        self.retry_after = "\u00b2"
        self.seen: set[tuple[str, bytes]] = set()
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.location = ""
        self.huge = 100 * 1024 * 1024
        self.gap = 0.5
        self.sent = 0
        self.bomb = _gzip_zeros(self.huge) if mode == "gzip" else b""
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    @property
    def posts(self) -> list[tuple[str, str, dict[str, str], bytes]]:
        return [r for r in self.requests if r[0] == "POST"]

    def handle(self, conn: socket.socket) -> None:
        req = _read_request(conn)
        if req is None:
            return
        with self.lock:
            self.requests.append(req)
        if self.mode == "retry-after":
            with self.lock:
                first = (req[0], req[3]) not in self.seen
                self.seen.add((req[0], req[3]))
            if first:
                conn.sendall(_response("503 Service Unavailable", b"{}", f"Retry-After: {self.retry_after}\r\n"))
                return
        if req[0] == "GET":
            conn.sendall(_response("200 OK", b'{"object": "list", "data": [{"id": "m"}]}'))
            return
        if self.mode in ("ok", "retry-after") and b"FAIL500" in req[3]:
            conn.sendall(_response("500 Internal Server Error", b'{"error": "asked to fail"}'))
        elif self.mode in ("ok", "retry-after"):
            conn.sendall(_response("200 OK", completion(self.answer)))
        elif self.mode == "fail":
            conn.sendall(_response("500 Internal Server Error", b'{"error": "boom"}'))
        elif self.mode == "redirect":
            conn.sendall(_response("302 Found", b"{}", f"Location: {self.location}\r\n"))
        elif self.mode in ("huge", "endless"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            block = b"x" * 16384
            while self.mode == "endless" or self.sent < self.huge:
                conn.sendall(block)
                self.sent += len(block)
                if self.mode == "endless":
                    time.sleep(0.005)
        elif self.mode == "gzip":
            conn.sendall(_response("200 OK", self.bomb, "Content-Encoding: gzip\r\n"))
            self.sent += len(self.bomb)
        elif self.mode == "trickle":
            for byte in _response("200 OK", completion("##final score: 1")):
                conn.sendall(bytes([byte]))
                time.sleep(self.gap)
