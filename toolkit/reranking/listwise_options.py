"""The listwise reranker's settings: ``ListwiseOptions``, one frozen object validated once (rank_llm's window,
stride, passes, context size, prompt, few-shot examples, API, the order probe, the answer cache and the HTTP
policy); ``toolkit.reranking.listwise`` runs them, ``RerankOptions`` holds them as its ``listwise`` piece.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from toolkit.errors import ConfigError, phrase
from toolkit.guard.client import RequestPolicy
from toolkit.reranking.listwise_prompt import (
    DEFAULT_CONTEXT_SIZE,
    DEFAULT_MAX_PASSAGE_WORDS,
    ListwiseTemplate,
    load_listwise_template,
)

__all__ = ["APIS", "DEFAULT_STRIDE", "DEFAULT_WINDOW", "ListwiseOptions"]

DEFAULT_WINDOW = 20
DEFAULT_STRIDE = 10
APIS = ("chat", "responses")


@dataclass(frozen=True)
class ListwiseOptions:
    """Every setting of the listwise reranker (see the module docstring), validated once here: a value that
    cannot be is a ``ConfigError`` naming the option as the caller wrote it (``passes=`` in the library,
    ``--passes`` in the CLI). ``requests`` holds the HTTP settings shared with the judge."""

    endpoint: str | None = None
    window: int = DEFAULT_WINDOW
    stride: int = DEFAULT_STRIDE
    prompt: str | os.PathLike | None = None
    passes: int = 1
    context_size: int = DEFAULT_CONTEXT_SIZE
    max_passage_words: int = DEFAULT_MAX_PASSAGE_WORDS
    variable_passages: bool | None = None
    few_shot: str | os.PathLike | None = None
    few_shot_examples: int | None = None
    system_message: str | None = None
    alpha: bool = False
    first_token: bool = False
    api: str = "chat"
    tokenizer: str | None = None
    shuffles: int = 0
    seed: int = 42
    qrels: Any = None
    answer_cache: str | os.PathLike | bool = True
    requests: RequestPolicy = field(default_factory=RequestPolicy)

    def __post_init__(self) -> None:
        def whole(name: str, flag: str, value: Any, low: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{phrase(name, flag)} must be a whole number >= {low}, not {value!r}")

        whole("window", "--window", self.window, 2)
        if isinstance(self.stride, bool) or not isinstance(self.stride, int) or not 0 < self.stride <= self.window:
            raise ConfigError(
                f"{phrase('stride', '--stride')} must be between 1 and the window ({self.window}), not "
                f"{self.stride!r}: rank_llm's windows {self.window} passages wide move up by the stride"
            )
        whole("passes", "--passes", self.passes, 1)
        whole("context_size", "--context-size", self.context_size, 1)
        whole("max_passage_words", "--max-passage-words", self.max_passage_words, 1)
        whole("shuffles", "--shuffles", self.shuffles, 0)
        if self.few_shot_examples is not None:
            whole("few_shot_examples", "--few-shot-examples", self.few_shot_examples, 1)
            if self.few_shot is None:
                raise ConfigError(
                    f"{phrase('few_shot_examples', '--few-shot-examples')} needs {phrase('few_shot', '--few-shot')} "
                    "FILE, rank_llm's few-shot examples"
                )
        if self.api not in APIS:
            raise ConfigError(f"{phrase('api', '--api')} must be one of {', '.join(APIS)}, not {self.api!r}")
        if self.api == "responses" and self.endpoint is None:
            raise ConfigError(
                f"{phrase('api', '--api')} responses is an endpoint's: give {phrase('endpoint', '--endpoint')}"
            )
        if self.first_token and self.api == "responses":
            raise ConfigError(
                f"{phrase('first_token', '--first-token')} reads the first token's logprobs, which the chat API "
                f"serves: drop {phrase('api', '--api')} responses"
            )
        if self.qrels is not None and not self.shuffles:
            raise ConfigError(
                f"{phrase('qrels', '--qrels')} is the order probe's nDCG@10 spread: give "
                f"{phrase('shuffles', '--shuffles')} K (K >= 1) with it"
            )
        if self.endpoint is not None and not str(self.endpoint).strip():
            raise ConfigError(f"{phrase('endpoint', '--endpoint')} is empty")

    @classmethod
    def keywords(cls) -> tuple[str, ...]:
        """The keyword arguments ``from_keywords`` takes: the fields, and the HTTP policy's fields."""
        own = tuple(f.name for f in fields(cls) if f.name != "requests")
        return own + tuple(RequestPolicy.keywords())

    @classmethod
    def from_keywords(cls, **kw: Any) -> ListwiseOptions:
        """Options from flat keywords (``window=``, ``concurrency=``...): what ``ts.rerank`` takes."""
        policy = {k: kw.pop(k) for k in RequestPolicy.keywords() if k in kw and kw[k] is not None}
        unknown = sorted(set(kw) - set(cls.keywords()))
        if unknown:
            raise ConfigError(f"{', '.join(unknown)}: no such listwise option")
        return cls(**kw, requests=RequestPolicy.from_keywords(**policy))

    def check(self, depth: int) -> None:
        """The window against the depth: a window of at most the depth."""
        if self.window > depth:
            raise ConfigError(
                f"{phrase('window', '--window')} {self.window} is larger than {phrase('depth', '--depth')} {depth}: "
                "give a window of at most the depth"
            )

    def template(self) -> ListwiseTemplate:
        """The template with the system message and the example ordering these options set."""
        t = load_listwise_template(self.prompt, alpha=self.alpha)
        return t.with_settings(self.system_message, self.variable_passages, self.alpha)

    def few_shot_messages(self) -> list[dict[str, str]]:
        from toolkit.reranking.listwise_prompt import read_few_shot

        return read_few_shot(self.few_shot, self.few_shot_examples) if self.few_shot is not None else []

    def describe(self) -> dict:
        return {
            "window": self.window,
            "stride": self.stride,
            "passes": self.passes,
            "context_size": self.context_size,
            "max_passage_words": self.max_passage_words,
            "variable_passages": self.variable_passages,
            "few_shot": str(self.few_shot) if self.few_shot is not None else None,
            "few_shot_examples": self.few_shot_examples,
            "system_message": self.system_message,
            "alpha": self.alpha,
            "first_token": self.first_token,
            "api": self.api,
            "tokenizer": self.tokenizer,
        }
