"""``Endpoint.post_many``: ``concurrency`` requests in flight, answers as each finishes, and a reader that stops
(an error while reading the answers, a full disk) leaves no request behind: at most those already under way
finish, and once the iterator is closed nothing more is sent. Against a local server that counts what it gets."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolkit.guard.client import Endpoint


class Counting:
    """A loopback server answering each POST after ``delay`` seconds with ``{"n": its number}``."""

    def __init__(self, delay: float):
        self.received = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                with server.lock:
                    server.received += 1
                    n = server.received
                time.sleep(delay)
                body = json.dumps({"n": n}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Counting(delay=0.2)
    yield s
    s.close()


def test_every_payload_is_answered_once_with_its_index(server):
    endpoint = Endpoint(server.url, None, concurrency=3, retries=0)
    got = dict(endpoint.post_many("chat/completions", [{"i": i} for i in range(7)]))
    endpoint.close()
    assert sorted(got) == list(range(7)) and all(r.data is not None for r in got.values())
    assert sorted(r.data["n"] for r in got.values()) == list(range(1, 8)) and server.received == 7


def test_a_reader_that_stops_leaves_no_request_to_start(server):
    endpoint = Endpoint(server.url, None, concurrency=2, retries=0)
    answers = endpoint.post_many("chat/completions", [{"i": i} for i in range(20)])
    first = next(answers)
    assert first[1].data is not None
    answers.close()  # what contextlib.closing, or letting the generator go, does
    time.sleep(1.0)  # five times a request's time: any request still handed out would have arrived
    endpoint.close()
    # the two first requests, and at most the one started when the first finished: never the 20
    assert 2 <= server.received <= 3, server.received


def test_a_reader_that_fails_midway_closes_the_answers_and_sends_no_more(tmp_path, server):
    from toolkit.llm.chat import closed_after

    endpoint = Endpoint(server.url, None, concurrency=2, retries=0)
    with pytest.raises(OSError), closed_after(endpoint.post_many("x", [{"i": i} for i in range(20)])) as answers:
        for _ in answers:
            raise OSError("no space left on device")  # a cache write failing, say
    time.sleep(1.0)
    endpoint.close()
    assert 2 <= server.received <= 3, server.received
