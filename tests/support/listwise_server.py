"""A local OpenAI-compatible server on 127.0.0.1 that ranks windows of passages, for the listwise reranker's tests
(tests/reranking/test_listwise_rerank.py, tests/reranking/test_rank_llm_parity.py). It serves
``/chat/completions`` and the Responses API's ``/responses`` (rank_llm's OpenAI client) from the same answers, so
that twostage and rank_llm asked by one server can be compared request for request.

The server reads the window's passages from the user messages (``[i] text`` lines, i from 1, or ``[A]`` with
letters) and answers with a RankGPT-style ranking (``[2] > [1] > [3]``). ``order``:

- ``"relevance"``: each passage holds ``doc=ID``; by ``server.relevance[doc]`` descending, equal values by
  document id (so the answer does not depend on the order of the window);
- ``"hash"``: by the sha256 of the passage's text (any text; the same whatever the order of the window);
- ``"input"``: the window's own order, ``[1] > [2] > ...``.

With ``server.breaking`` a known share of answers is broken, chosen by the window's passages in order
(``mode_of``): ``duplicates`` (the best one named again third), ``unknown`` (an identifier k+5 named second),
``missing`` (the last two left out), ``none_parsed`` (no identifier at all), ``think`` (a wrong ranking inside
``<think>...</think>`` before the right one), else ``ok``. With ``server.digits`` ``"fancy"`` the numbers of an
answer are written in the digits rank_llm maps to ASCII (superscript, subscript, circled, fullwidth; chosen by
the window), with ``"letters"`` as A, B, .... ``fail_after`` N: every request after the first N answered gets
HTTP 400 (a job that stops half way); ``delay`` seconds: each answer waits that long before it is sent;
``answer``: when set, every window is answered with that text. A request asking for ``logprobs`` (first-token
reranking) is answered with one token and its ``top_logprobs``: the identifiers in the ranking's order, the
best first. Every request is counted (``requests``) and kept (``bodies``: (path, JSON body)), with the windows
asked (``windows``), and every answer written out (``sent``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "duplicates", "unknown", "missing", "none_parsed", "think")
STYLES = {
    "superscript": "⁰¹²³⁴⁵⁶⁷⁸⁹",
    "subscript": "₀₁₂₃₄₅₆₇₈₉",
    "fullwidth": "０１２３４５６７８９",
    "circled": "⓪①②③④⑤⑥⑦⑧⑨",  # ⓪ is no digit rank_llm maps: a 0 is written in fullwidth then
}


def _h(parts: list[str]) -> int:
    return int(hashlib.sha256("\t".join(parts).encode()).hexdigest(), 16)


def mode_of(docs: list[str]) -> str:
    """How the server breaks its answer to a window of these passages (in prompt order), when breaking."""
    return MODES[_h(docs) % len(MODES)]


def ideal(docs: list[str], relevance: dict[str, float]) -> list[int]:
    """0-based positions of the window by relevance descending, equal ones by document id."""
    return sorted(range(len(docs)), key=lambda i: (-relevance[docs[i]], docs[i]))


def hashed(texts: list[str]) -> list[int]:
    """0-based positions of the window by the sha256 of each passage's text."""
    return sorted(range(len(texts)), key=lambda i: hashlib.sha256(texts[i].encode()).hexdigest())


def styled(number: int, docs: list[str]) -> str:
    """``number`` in the digits of the window's style (circled only where every digit is 1-9)."""
    style = list(STYLES)[(_h(docs) >> 8) % len(STYLES)]
    if style == "circled" and "0" in str(number):
        style = "fullwidth"
    return "".join(STYLES[style][int(c)] for c in str(number))


def answer_ids(keys: list[str], best: list[int], breaking: bool) -> list[int] | None:
    """The 1-based identifiers of the answer (None: an answer without any)."""
    k = len(keys)
    ids = [i + 1 for i in best]
    mode = mode_of(keys) if breaking else "ok"
    if mode == "duplicates":
        ids = ids[:2] + [ids[0]] + ids[2:]
    elif mode == "unknown":
        ids = ids[:1] + [k + 5] + ids[1:]
    elif mode == "missing":
        ids = ids[:-2]
    elif mode == "none_parsed":
        return None
    return ids


def answer_text(docs: list[str], relevance: dict[str, float], order: str, breaking: bool, digits: str = "ascii") -> str:
    """The answer to a window of ``docs`` (document ids, or the passages' texts with ``order="hash"``)."""
    k = len(docs)
    best = ideal(docs, relevance) if order == "relevance" else hashed(docs) if order == "hash" else list(range(k))
    ids = answer_ids(docs, best, breaking)
    if ids is None:
        return "I cannot rank these passages."

    def write(i: int) -> str:
        if digits == "letters":
            return chr(64 + i)
        return styled(i, docs) if digits == "fancy" else str(i)

    text = " > ".join(f"[{write(i)}]" for i in ids)
    if (mode_of(docs) if breaking else "ok") == "think":
        return "<think>maybe [1] > [2], no: " + " > ".join(f"[{write(i)}]" for i in reversed(ids)) + "</think>\n" + text
    return text


PASSAGE_LINE = re.compile(r"^\[(\d+|[A-Z])\] (.*)$", re.M)


def window_of(body: dict) -> list[str]:
    """The passages' texts of the window a request asks about: the ``[i] text`` lines of its user messages."""
    messages = body.get("messages") or body.get("input") or []
    user = "\n".join(m["content"] for m in messages if m.get("role") == "user")
    return [m.group(2) for m in PASSAGE_LINE.finditer(user)]


class ListwiseServer:
    def __init__(
        self,
        relevance: dict[str, float] | None = None,
        order: str = "relevance",
        breaking: bool = False,
        digits: str = "ascii",
    ):
        self.relevance = dict(relevance or {})
        self.order = order
        self.breaking = breaking
        self.digits = digits
        self.fail_after: int | None = None
        self.answer: str | None = None
        self.delay = 0.0
        self.requests = 0
        self.answered = 0
        self.sent = 0  # answers written out in full
        self.windows: list[list[str]] = []
        self.bodies: list[tuple[str, dict]] = []
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
                passages = window_of(req)
                if server.order == "hash":
                    keys = passages
                else:
                    keys = [m.group(1) for m in (re.search(r"doc=(\S+)", p) for p in passages) if m]
                with server.lock:
                    server.requests += 1
                    server.bodies.append((self.path, req))
                    if server.fail_after is not None and server.answered >= server.fail_after:
                        fail = True
                    else:
                        fail = False
                        server.answered += 1
                        server.windows.append(keys)
                if fail:
                    self._send(400, {"error": "stopped"})
                    return
                if server.delay:
                    time.sleep(server.delay)
                answer = server.answer or answer_text(
                    keys, server.relevance, server.order, server.breaking, server.digits
                )
                if self.path.endswith("/responses"):
                    self._send(200, _response(req, answer))
                elif req.get("logprobs"):
                    self._send(200, _first_token(req, keys, server))
                else:
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


def _response(req: dict, answer: str) -> dict:
    """A Responses API answer (what rank_llm's OpenAI client reads: ``output[-1].content[0].text``)."""
    return {
        "id": "resp_x",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": req["model"],
        "output": [
            {
                "type": "message",
                "id": "msg_x",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


def _first_token(req: dict, keys: list[str], server: ListwiseServer) -> dict:
    """One token with its ``top_logprobs``: the window's identifiers in the ranking's order, the best first at
    -0.1, each next 1.0 lower, with a word and a superscript digit (no identifier) between them."""
    k = len(keys)
    if server.order == "relevance":
        best = ideal(keys, server.relevance)
    elif server.order == "hash":
        best = hashed(keys)
    else:
        best = list(range(k))
    letters = req["messages"][-2]["content"].find("[A]") >= 0
    ids = [chr(65 + i) if letters else str(i + 1) for i in best][: req.get("top_logprobs", 20) - 2]
    top = [{"token": t, "logprob": -0.1 - n, "bytes": list(t.encode())} for n, t in enumerate(ids)]
    top[1:1] = [
        {"token": "The", "logprob": -0.5, "bytes": list(b"The")},
        {"token": "²", "logprob": -0.6, "bytes": [194, 178]},
    ]
    return {
        "id": "x",
        "object": "chat.completion",
        "model": req["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": top[0]["token"]},
                "logprobs": {"content": [{**top[0], "top_logprobs": top}]},
            }
        ],
    }
