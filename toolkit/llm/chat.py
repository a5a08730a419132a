"""Judge backends, one table (``BACKENDS``): an OpenAI-compatible chat endpoint, and a local Hugging Face
causal LM through transformers. Each takes rendered prompts and yields raw answers; parsing, caching and
counting are the job's (``toolkit.judging.judge_job``).

- ``openai``: POST ``{endpoint}/chat/completions`` (vLLM, SGLang, Ollama, llama.cpp's server and hosted
  services speak it) with ``temperature 0``, or (``api="responses"``, the listwise reranker's rank_llm OpenAI
  client) ``{endpoint}/responses`` with the model and the messages as ``input``, as rank_llm sends it, through the one HTTP client of ``toolkit.guard.client``
  (``Endpoint``: httpx; no redirect followed, answers bounded by ``max_response_bytes``, ``timeout`` a deadline
  for the whole request, loopback endpoints never through a proxy): ``concurrency`` requests in flight; a
  timeout, a failed connection, HTTP 408, 429 or a 5xx is retried up to ``retries`` times after
  ``backoff * 2**attempt`` seconds (or the server's ``Retry-After`` when it is longer and under a minute);
  ``rate`` caps requests per second. Before any prompt is sent, ``check()`` asks ``{endpoint}/models`` with a
  short timeout, so an unreachable endpoint fails fast with one line. The API key is read from
  ``$TWOSTAGE_JUDGE_API_KEY`` (else ``$OPENAI_API_KEY``), sent only to the endpoint's origin and never recorded.
- ``transformers``: ``AutoModelForCausalLM`` from a local folder, greedy decoding of ``max_tokens`` new tokens,
  prompts in batches (left padding), the tokenizer's chat template when it has one, on CPU or GPU.

Each backend says what decides an answer (``request_key``): for an endpoint its URL with the API path and the
whole request body (the model, the messages, the sampling settings, ``max_tokens``); for a local model its
fingerprint, the exact text it reads and the decoding settings. The answer caches key on it, so the same model
name at another endpoint, another ``max_tokens`` or other messages ask again.

First-token reranking (``Prompt.first_token``): the endpoint is asked for one token after the messages and an
assistant message ``[`` (vLLM's ``continue_final_message``) with ``logprobs`` and ``top_logprobs``; the local
model's log-softmax of the next token after the prompt text, its ``FIRST_LOGPROBS`` best; either way the
answer's ``logprobs`` are (token, log-probability) pairs, best first.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType
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
    environment_key,
    responses_text,
    top_logprobs,
)

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 10.0
#: new tokens a local model writes for a prompt that says no ``max_tokens``
DEFAULT_MAX_NEW_TOKENS = 200
#: the API paths of an OpenAI-compatible endpoint, by ``api``
API_PATHS = MappingProxyType({"chat": "chat/completions", "responses": "responses"})
#: the log-probabilities asked of the first token (the most OpenAI serves; vLLM's default --max-logprobs)
TOP_LOGPROBS = 20
#: the log-probabilities of a local model's first token: what rank_llm asks its in-process vLLM for (FIRST)
FIRST_LOGPROBS = 30


@dataclass(frozen=True)
class Prompt:
    """One request: the system message (may be empty), the user message, the longest answer (None: not said).
    ``messages`` (role, content) pairs, when given, are the whole conversation in place of ``system`` and
    ``user``; ``text`` the exact text a local model reads (no chat template applied again); ``min_tokens`` the
    shortest answer of a local model; ``first_token``: the first token's log-probabilities are the answer."""

    system: str
    user: str
    max_tokens: int | None
    messages: tuple[tuple[str, str], ...] | None = None
    text: str | None = None
    min_tokens: int | None = None
    first_token: bool = False

    def chat(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [{"role": r, "content": c} for r, c in self.messages]
        return ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": self.user}
        ]


@dataclass(frozen=True)
class Answer:
    """A raw answer (``text``), or why there is none (``error``: the last failure after every retry)."""

    text: str | None
    error: str = ""
    attempts: int = 1
    logprobs: list[tuple[str, float]] | None = None

    @property
    def retries(self) -> int:
        return self.attempts - 1


class Judge(Protocol):
    backend: str
    model: str

    def check(self) -> None: ...

    def identity(self) -> str: ...

    def describe(self) -> dict: ...

    def request_key(self, prompt: Prompt) -> str: ...

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]: ...


def template_text(tokenizer, messages: Sequence[dict]) -> str:
    """The prompt a local causal LM reads: its chat template with the generation prompt (rank_llm's
    ``apply_chat_template(..., add_generation_prompt=True)``), or, for a tokenizer without one, the messages'
    contents joined by blank lines."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages)


def _key(obj: dict) -> str:
    """A request key: the canonical JSON of what decides the answer."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


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
        api: str = "chat",
        extra: dict | None = None,
    ):
        if api not in API_PATHS:
            raise ConfigError(f"api must be one of {', '.join(API_PATHS)}, not {api!r}")
        self.api = api
        self.extra = dict(extra or {})  # fields every chat request carries (rank_llm's vLLM path: chat_template_kwargs)
        self.endpoint = _base_url(endpoint)
        self.role = role  # what the endpoint is to the caller, in its error messages ("judge endpoint URL ...")
        self.model = model
        self.client = Endpoint(
            self.endpoint,
            api_key or environment_key(),
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
            "api": self.api,
            "temperature": 0 if self.api == "chat" else None,
            **({"extra": self.extra} if self.extra else {}),
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

    def listwise_prompt(self, messages: Sequence[dict], max_tokens: int | None, first_token: bool) -> Prompt:
        """A listwise window's request: its messages as they are."""
        return Prompt("", "", max_tokens, tuple((m["role"], m["content"]) for m in messages), first_token=first_token)

    def _payload(self, prompt: Prompt) -> dict:
        if self.api == "responses":  # rank_llm's OpenAI client: the model and the messages, nothing else
            payload: dict = {"model": self.model, "input": prompt.chat()}
            if prompt.max_tokens is not None:
                payload["max_output_tokens"] = prompt.max_tokens
            return payload
        messages = prompt.chat()
        if prompt.first_token:  # one token after "[" in the answer, with its alternatives' logprobs
            return {
                "model": self.model,
                "messages": [*messages, {"role": "assistant", "content": "["}],
                "temperature": 0,
                "max_tokens": 1,
                "logprobs": True,
                "top_logprobs": TOP_LOGPROBS,
                "add_generation_prompt": False,
                "continue_final_message": True,
            } | self.extra
        payload = chat_payload(self.model, "", max_tokens=prompt.max_tokens) | {"messages": messages}
        return payload | self.extra

    def request_key(self, prompt: Prompt) -> str:
        """What decides the answer: the URL asked (the endpoint and the API path) and the whole body."""
        return _key({"url": f"{self.endpoint}/{API_PATHS[self.api]}", "body": self._payload(prompt)})

    def _answer(self, reply, prompt: Prompt) -> Answer:
        if reply.data is None:
            return Answer(None, reply.error, reply.attempts)
        try:
            if prompt.first_token:
                return Answer("", attempts=reply.attempts, logprobs=top_logprobs(reply.data))
            text = responses_text(reply.data) if self.api == "responses" else chat_text(reply.data)
            return Answer(text, attempts=reply.attempts)
        except ValueError as exc:
            return Answer(None, f"malformed response ({exc})", reply.attempts)

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]:
        """(index, answer) as each request finishes."""
        for i, reply in self.client.post_many(API_PATHS[self.api], [self._payload(p) for p in prompts]):
            yield i, self._answer(reply, prompts[i])


@contextlib.contextmanager
def closed_after(answers: Iterator[tuple[int, Answer]]) -> Iterator[Iterator[tuple[int, Answer]]]:
    """``answers`` (what a judge's ``answer`` yields), closed however the block that reads it ends (when it can
    be: a generator is): a reader stopped by an error leaves no request of it to start (``Endpoint.post_many``)."""
    try:
        yield answers
    finally:
        close = getattr(answers, "close", None)
        if close is not None:
            close()


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
        from toolkit.models import model_fingerprint

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

    def tokenizer(self):
        return self._load()[0]

    def listwise_prompt(self, messages: Sequence[dict], max_tokens: int | None, first_token: bool) -> Prompt:
        """A listwise window's request as rank_llm's in-process vLLM path makes it: the chat-templated text,
        ``ftfy.fix_text`` applied, then ``[`` for first-token reranking; exactly ``max_tokens`` new tokens."""
        from ftfy import fix_text

        text = fix_text(template_text(self.tokenizer(), messages)) + ("[" if first_token else "")
        pairs = tuple((m["role"], m["content"]) for m in messages)
        return Prompt("", "", max_tokens, pairs, text=text, min_tokens=max_tokens, first_token=first_token)

    def request_key(self, prompt: Prompt) -> str:
        """What decides the answer: the model's fingerprint, the exact text read, the decoding."""
        return _key(
            {
                "model": self.identity(),
                "text": prompt.text if prompt.text is not None else self._text(self.tokenizer(), prompt),
                "max_new_tokens": prompt.max_tokens,
                "min_new_tokens": prompt.min_tokens,
                "decoding": "first-token logprobs" if prompt.first_token else "greedy",
            }
        )

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
        if prompt.text is not None:
            return prompt.text
        if prompt.messages is not None or getattr(tok, "chat_template", None):
            return template_text(tok, prompt.chat())
        return (prompt.system + "\n\n" if prompt.system else "") + prompt.user

    def answer(self, prompts: Sequence[Prompt]) -> Iterator[tuple[int, Answer]]:
        tok, lm, device, torch = self._load()
        first = [i for i, p in enumerate(prompts) if p.first_token]
        for i in first:
            yield i, self._first_token(prompts[i])
        rest = [i for i, p in enumerate(prompts) if not p.first_token]
        for start in range(0, len(rest), self.batch_size):
            batch = [prompts[i] for i in rest[start : start + self.batch_size]]
            enc = tok([self._text(tok, p) for p in batch], return_tensors="pt", padding=True).to(device)
            # a batch decodes to its longest max_tokens; each answer is cut to its own
            longest = max((p.max_tokens or DEFAULT_MAX_NEW_TOKENS) for p in batch)
            shortest = [p.min_tokens for p in batch if p.min_tokens is not None]
            extra = {"min_new_tokens": min(shortest)} if shortest else {}
            with torch.inference_mode():
                out = lm.generate(
                    **enc, max_new_tokens=longest, do_sample=False, pad_token_id=tok.pad_token_id, **extra
                )
            new = out[:, enc["input_ids"].shape[1] :]
            for j, row in enumerate(new):
                cut = batch[j].max_tokens or longest
                yield rest[start + j], Answer(tok.decode(row[:cut], skip_special_tokens=True))

    def _first_token(self, prompt: Prompt) -> Answer:
        """The next token's log-probabilities after the prompt's text (rank_llm's FIRST): the
        ``FIRST_LOGPROBS`` best, each as the tokenizer decodes it alone."""
        tok, lm, device, torch = self._load()
        enc = tok(self._text(tok, prompt), return_tensors="pt").to(device)
        with torch.inference_mode():
            logits = lm(**enc).logits[0, -1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        top = torch.topk(logprobs, min(FIRST_LOGPROBS, logprobs.shape[-1]))
        pairs = [(tok.decode([int(i)]), float(v)) for v, i in zip(top.values.tolist(), top.indices.tolist())]
        return Answer("", logprobs=pairs)


#: backend name -> how it is built from the job's options
BACKENDS = MappingProxyType({"openai": OpenAIChatJudge, "transformers": TransformersJudge})
