"""A local OpenAI-compatible chat server on 127.0.0.1 that ranks windows of passages, for the listwise reranker's
tests (tests/reranking/test_listwise_rerank.py).

Each passage holds ``doc=ID``; the server reads the window's passages in prompt order (``[i] ...`` lines, i from 1)
and answers with a RankGPT-style ranking (``[2] > [1] > [3]``). ``order``:

- ``"relevance"``: by ``server.relevance[doc]`` descending, equal values by document id (so the answer does not
  depend on the order of the window);
- ``"input"``: the window's own order, ``[1] > [2] > ...``.

With ``server.breaking`` a known share of answers is broken, chosen by the window's documents in order
(``mode_of``): ``duplicates`` (the best one named again third), ``unknown`` (an identifier k+5 named second),
``missing`` (the last two left out), ``none_parsed`` (no identifier at all), ``think`` (a wrong ranking inside
``<think>...</think>`` before the right one), else ``ok``. ``fail_after`` N: every request after the first N
answered gets HTTP 400 (a job that stops half way); ``delay`` seconds: each answer waits that long before it is
sent (a job slow enough to be killed half way). ``down``: nothing listens (see ``closed_port_url``). Every
request is counted (``requests``), with the windows asked (``windows``), and every answer written out (``sent``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "duplicates", "unknown", "missing", "none_parsed", "think")


def mode_of(docs: list[str]) -> str:
    """How the server breaks its answer to a window of these documents (in prompt order), when breaking."""
    h = int(hashlib.sha256("\t".join(docs).encode()).hexdigest(), 16)
    return MODES[h % len(MODES)]


def ideal(docs: list[str], relevance: dict[str, float]) -> list[int]:
    """0-based positions of the window by relevance descending, equal ones by document id."""
    return sorted(range(len(docs)), key=lambda i: (-relevance[docs[i]], docs[i]))


def answer_text(docs: list[str], relevance: dict[str, float], order: str, breaking: bool) -> str:
    k = len(docs)
    best = ideal(docs, relevance) if order == "relevance" else list(range(k))
    ids = [i + 1 for i in best]
    mode = mode_of(docs) if breaking else "ok"
    if mode == "duplicates":
        ids = ids[:2] + [ids[0]] + ids[2:]
    elif mode == "unknown":
        ids = ids[:1] + [k + 5] + ids[1:]
    elif mode == "missing":
        ids = ids[:-2]
    elif mode == "none_parsed":
        return "I cannot rank these passages."
    text = " > ".join(f"[{i}]" for i in ids)
    if mode == "think":
        return "<think>maybe [1] > [2], no: " + " > ".join(f"[{i}]" for i in reversed(ids)) + "</think>\n" + text
    return text


class ListwiseServer:
    def __init__(self, relevance: dict[str, float] | None = None, order: str = "relevance", breaking: bool = False):
        self.relevance = dict(relevance or {})
        self.order = order
        self.breaking = breaking
        self.fail_after: int | None = None
        self.delay = 0.0
        self.requests = 0
        self.answered = 0
        self.sent = 0  # answers written out in full
        self.windows: list[list[str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "test-ranker"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(length))
                text = req["messages"][-1]["content"]
                docs = [m.group(2) for m in re.finditer(r"^\[(\d+)\] .*?doc=(\S+)", text, re.M)]
                with server.lock:
                    server.requests += 1
                    if server.fail_after is not None and server.answered >= server.fail_after:
                        fail = True
                    else:
                        fail = False
                        server.answered += 1
                        server.windows.append(docs)
                if fail:
                    self._send(400, {"error": "stopped"})
                    return
                if server.delay:
                    time.sleep(server.delay)
                answer = answer_text(docs, server.relevance, server.order, server.breaking)
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": req["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
                    },
                )
                with server.lock:
                    server.sent += 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
