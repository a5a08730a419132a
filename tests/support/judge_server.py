"""A local OpenAI-compatible chat server on 127.0.0.1 for the judge's tests (tests/judging), and helpers that
write small collections to judge.

The server answers each prompt by the document id it finds in the passage (``[doc ID]``): the label the test
assigned to that document (``server.labels``), in the shape of the default template's answer. Passage text
can ask for misbehaviour: ``MALFORMED`` (no final score), ``OUTSIDE`` (a label of 7), ``FAIL500:N`` (HTTP 500
the first N times), ``SLOW`` (answers after ``server.slow`` seconds). Every request is counted per document.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JudgeServer:
    def __init__(self):
        self.labels: dict[str, int] = {}
        self.requests: Counter = Counter()
        self.models_probes = 0
        self.slow = 2.0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
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
                    with server.lock:
                        server.models_probes += 1
                    self._send(200, {"object": "list", "data": [{"id": "test-judge"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(length))
                text = req["messages"][-1]["content"]
                doc = re.search(r"\[doc (\S+?)\]", text).group(1)
                with server.lock:
                    server.requests[doc] += 1
                    n = server.requests[doc]
                fail = re.search(r"FAIL500:(\d+)", text)
                if fail and n <= int(fail.group(1)):
                    self._send(500, {"error": "boom"})
                    return
                if "SLOW" in text:
                    time.sleep(server.slow)
                if "MALFORMED" in text:
                    answer = "I think it is quite relevant."
                elif "OUTSIDE" in text:
                    answer = "Very relevant.\n##final score: 7"
                else:
                    answer = f"The passage addresses the query.\n##final score: {server.labels[doc]}"
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": req["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def write_candidates(path, queries: dict[str, list[tuple[str, str]]]) -> str:
    """A candidates JSON: {qid: [(docid, passage text)]} in rank order (scores descending)."""
    data = [
        {
            "query": f"what is topic {qid}",
            "hits": [
                {"qid": qid, "docid": d, "rank": i + 1, "score": float(100 - i), "content": text}
                for i, (d, text) in enumerate(docs)
            ],
        }
        for qid, docs in queries.items()
    ]
    path.write_text(json.dumps(data))
    return str(path)


def write_qrels(path, rows) -> str:
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in rows))
    return str(path)
