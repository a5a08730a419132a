"""Judge backends, one table (``BACKENDS``): an OpenAI-compatible chat endpoint, and a local Hugging Face
causal LM through transformers. Each takes rendered prompts and yields raw answers; parsing, caching and
counting are the job's (``toolkit.judging.job``).

- ``openai``: POST ``{endpoint}/chat/completions`` (vLLM, SGLang, Ollama, llama.cpp's server and hosted
  services speak it) with ``temperature 0``, through the one HTTP client of ``toolkit.guard.client``
  (``Endpoint``: httpx; no redirect followed, answers bounded by ``max_response_bytes``, ``timeout`` a deadline
  for the whole request, loopback endpoints never through a proxy): ``concurrency`` requests in flight; a
  timeout, a failed connection, HTTP 408, 429 or a 5xx is retried up to ``retries`` times after
  ``backoff * 2**attempt`` seconds (or the server's ``Retry-After`` when it is longer and under a minute);
  ``rate`` caps requests per second. Before any prompt is sent, ``check()`` asks ``{endpoint}/models`` with a
  short timeout, so an unreachable endpoint fails fast with one line. The API key is read from
  ``$TWOSTAGE_JUDGE_API_KEY`` (else ``$OPENAI_API_KEY``), sent only to the endpoint's origin and never recorded.
- ``transformers``: ``AutoModelForCausalLM`` from a local folder, greedy decoding of ``max_tokens`` new tokens,
  prompts in batches (left padding), the tokenizer's chat template when it has one, on CPU or GPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from toolkit.errors import ConfigError
from toolkit.guard.client import (
    DEFAULT_BACKOFF,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Endpoint,
    RequestFailed,
    chat_payload,
    chat_text,
)

log = logging.getLogger(__name__)

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
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        rate: float | None = None,
        api_key: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        role: str = "judge",
    ):
        self.endpoint = _base_url(endpoint)
        self.role = role  # what the endpoint is to the caller, in its error messages ("judge endpoint URL ...")
        self.model = model
        self.client = Endpoint(
            self.endpoint,
            api_key or os.environ.get("TWOSTAGE_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY"),
            timeout=timeout,
            max_response_bytes=max_response_bytes,
            concurrency=concurrency,
            retries=retries,
            backoff=backoff,
            rate=rate,
        )
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.rate = rate
        self.max_response_bytes = max_response_bytes

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
            "max_response_bytes": self.max_response_bytes,
        }

    def check(self) -> None:
        """Fail fast when nothing answers at the endpoint (an HTTP error status still means something is there)."""
        try:
            self.client.request_json("GET", "models", timeout=PROBE_TIMEOUT)
        except RequestFailed as exc:
            if exc.status in (401, 403):
                raise ConfigError(
                    f"{self.role} endpoint {self.endpoint} refused the request (HTTP {exc.status}): set "
                    "$TWOSTAGE_JUDGE_API_KEY (or $OPENAI_API_KEY)"
                ) from None
            if exc.status is None and exc.retryable:  # no HTTP answer at all: refused, unreachable, timed out
                raise ConfigError(f"{self.role} endpoint {self.endpoint} is unreachable: {exc.reason}") from None

    def close(self) -> None:
        self.client.close()

    def _payload(self, prompt: Prompt) -> dict:
        return chat_payload(self.model, prompt.user, prompt.system, prompt.max_tokens)

    def _answer(self, reply) -> Answer:
        if reply.data is None:
            return Answer(None, reply.error, reply.attempts)
        try:
            return Answer(chat_text(reply.data), attempts=reply.attempts)
        except ValueError as exc:
            return Answer(None, f"malformed response ({exc})", reply.attempts)

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]:
        """(index, answer) as each request finishes."""
        for i, reply in self.client.post_many("chat/completions", [self._payload(p) for p in prompts]):
            yield i, self._answer(reply)


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
