"""Judge backends, one table (``BACKENDS``): an OpenAI-compatible chat endpoint, and a local Hugging Face
causal LM through transformers. Each takes rendered prompts and yields raw answers; parsing, caching and
counting are the job's (``toolkit.judging.job``).

- ``openai``: POST ``{endpoint}/chat/completions`` (vLLM, SGLang, Ollama, llama.cpp's server and hosted
  services speak it) with ``temperature 0``, through the standard library (``urllib``): ``concurrency``
  requests in flight, each with a ``timeout``; a timeout, a refused connection, HTTP 429 or a 5xx is retried
  up to ``retries`` times after ``backoff * 2**attempt`` seconds (or the server's ``Retry-After`` when it is
  shorter than a minute); ``rate`` caps requests per second. Before any prompt is sent, ``check()`` asks
  ``{endpoint}/models`` with a short timeout, so an unreachable endpoint fails fast with one line. The API key
  is read from ``$TWOSTAGE_JUDGE_API_KEY`` (else ``$OPENAI_API_KEY``) and never recorded.
- ``transformers``: ``AutoModelForCausalLM`` from a local folder, greedy decoding of ``max_tokens`` new tokens,
  prompts in batches (left padding), the tokenizer's chat template when it has one, on CPU or GPU.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Protocol

from toolkit.errors import ConfigError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Prompt:
    """One request: the system message (may be empty), the user message, the longest answer."""

    system: str
    user: str
    max_tokens: int


@dataclass(frozen=True)
class Answer:
    """A raw answer (``text``), or why there is none (``error``: the last failure after every retry)."""

    text: str | None
    error: str = ""
    attempts: int = 1

    @property
    def retries(self) -> int:
        return self.attempts - 1


class Judge(Protocol):
    backend: str
    model: str

    def check(self) -> None: ...

    def identity(self) -> str: ...

    def describe(self) -> dict: ...

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]: ...


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


def _base_url(endpoint: str) -> str:
    url = endpoint.rstrip("/")
    return url.removesuffix("/chat/completions")


class OpenAIChatJudge:
    """An OpenAI-compatible chat completions endpoint (see the module docstring)."""

    backend = "openai"

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        concurrency: int = 8,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 1.0,
        rate: float | None = None,
        api_key: str | None = None,
    ):
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"endpoint {endpoint!r} is not an http:// or https:// URL")
        if concurrency < 1 or retries < 0 or timeout <= 0 or backoff < 0 or (rate is not None and rate <= 0):
            raise ConfigError("concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed")
        self.endpoint = _base_url(endpoint)
        self.model = model
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.rate = rate
        self._limit = _RateLimit(rate)
        self._key = api_key or os.environ.get("TWOSTAGE_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def identity(self) -> str:
        return f"openai:{self.model}"

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model,
            "endpoint": self.endpoint,
            "temperature": 0,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "backoff_s": self.backoff,
            "rate_per_s": self.rate,
        }

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            h["Authorization"] = f"Bearer {self._key}"
        return h

    def check(self) -> None:
        """Fail fast when nothing answers at the endpoint (an HTTP error status still means something is there)."""
        req = urllib.request.Request(self.endpoint + "/models", headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=min(self.timeout, PROBE_TIMEOUT)) as resp:
                resp.read(1 << 16)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise ConfigError(
                    f"judge endpoint {self.endpoint} refused the request (HTTP {exc.code}): set "
                    "$TWOSTAGE_JUDGE_API_KEY (or $OPENAI_API_KEY)"
                ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(f"judge endpoint {self.endpoint} is unreachable: {reason}") from None

    def _post(self, prompt: Prompt) -> str:
        messages = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + [
            {"role": "user", "content": prompt.user}
        ]
        body = json.dumps(
            {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": prompt.max_tokens}
        ).encode()
        req = urllib.request.Request(
            self.endpoint + "/chat/completions", data=body, headers=self._headers(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            data = json.loads(resp.read())
        content = data["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise ValueError("message content is not text")
        return content

    def _one(self, prompt: Prompt) -> Answer:
        error = ""
        for attempt in range(self.retries + 1):
            self._limit.wait()
            wait = self.backoff * 2**attempt
            try:
                return Answer(self._post(prompt), attempts=attempt + 1)
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}"
                if exc.code not in RETRY_STATUSES:
                    return Answer(None, error, attempt + 1)
                after = exc.headers.get("Retry-After") if exc.headers else None
                if after and after.isdigit() and int(after) < 60:
                    wait = max(wait, float(after))
            except TimeoutError:
                error = f"timed out after {self.timeout:g}s"
            except urllib.error.URLError as exc:
                error = f"connection failed: {exc.reason}"
            except (ConnectionError, OSError) as exc:
                error = f"connection failed: {exc}"
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                return Answer(None, f"malformed response ({exc})", attempt + 1)
            if attempt < self.retries:
                log.debug("judge request failed (%s); retry %d in %.1fs", error, attempt + 1, wait)
                time.sleep(wait)
        return Answer(None, error, self.retries + 1)

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]:
        """(index, answer) as each request finishes."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(self._one, p): i for i, p in enumerate(prompts)}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            finally:
                for fut in futures:
                    fut.cancel()


class TransformersJudge:
    """A local causal LM through transformers (see the module docstring)."""

    backend = "transformers"

    def __init__(self, model: str, *, device: str = "auto", batch_size: int = 8):
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        self.model = model
        self.device_option = device
        self.batch_size = batch_size
        self._loaded: tuple | None = None

    def identity(self) -> str:
        from toolkit.jobs.embed_cache import model_fingerprint

        return f"transformers:{model_fingerprint(self.model)}"

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model,
            "device": self.device_option,
            "batch_size": self.batch_size,
            "decoding": "greedy",
        }

    def check(self) -> None:
        self._load()

    def _load(self) -> tuple:
        if self._loaded is None:
            from toolkit.extras import require

            require("rerank", "the transformers judge")
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from toolkit.models import resolve_device

            device = resolve_device(self.device_option)
            try:
                tok = AutoTokenizer.from_pretrained(self.model)
                lm = AutoModelForCausalLM.from_pretrained(self.model)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot load the judge model {self.model!r}: {exc}") from None
            tok.padding_side = "left"
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            lm.to(device).eval()
            self._loaded = (tok, lm, device, torch)
        return self._loaded

    def _text(self, tok, prompt: Prompt) -> str:
        if getattr(tok, "chat_template", None):
            messages = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + [
                {"role": "user", "content": prompt.user}
            ]
            return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return (prompt.system + "\n\n" if prompt.system else "") + prompt.user

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]:
        tok, lm, device, torch = self._load()
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            enc = tok([self._text(tok, p) for p in batch], return_tensors="pt", padding=True).to(device)
            with torch.inference_mode():
                out = lm.generate(
                    **enc,
                    max_new_tokens=max(p.max_tokens for p in batch),
                    do_sample=False,
                    pad_token_id=tok.pad_token_id,
                )
            new = out[:, enc["input_ids"].shape[1] :]
            for j, row in enumerate(new):
                yield start + j, Answer(tok.decode(row, skip_special_tokens=True))


#: backend name -> how it is built from the job's options
BACKENDS = {"openai": OpenAIChatJudge, "transformers": TransformersJudge}
