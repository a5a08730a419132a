"""The options of ``rerank`` (``twostage rerank``): one frozen object that the library's keywords and the command's
flags build alike (``toolkit.options``; the flags in ``toolkit.cli.rerank``).

It holds the reranker's own settings as a ``RerankerSpec`` (model, kind, device, batch size, ...), the job's
(depth, queries, caches, Ray sharding, progress) and, for ``backend="listwise"``, a ``ListwiseOptions`` (its HTTP
settings ``toolkit.guard.client.RequestPolicy``'s). The rules between options live in ``RerankOptions.validate``,
worded with ``toolkit.errors.phrase`` for both front ends: the library says ``window: options of
backend='listwise' only``, the command line ``--window is for --backend listwise``.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from toolkit.errors import OptionConflictError, phrase
from toolkit.guard.client import RequestPolicy
from toolkit.options import Options, nested, opt
from toolkit.reranking.backends import LISTWISE, RerankerSpec
from toolkit.reranking.listwise_options import ListwiseOptions

__all__ = ["RerankOptions"]

#: the documentation of ``RerankerSpec``'s fields as the verb's keywords
_SPEC_DOCS = MappingProxyType(
    {
        "model": "a model path or name (``all-MiniLM-L6-v2``, ``cross-encoder/ms-marco-MiniLM-L-6-v2``); with "
        "``backend='listwise'`` the endpoint's model name, or a local causal LM folder.",
        "kind": "``auto``, ``bi-encoder`` or ``cross-encoder``.",
        "device": "``auto`` (the default: the GPU where there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.",
        "batch_size": "texts per model batch.",
        "max_length": "tokens per text [default: the model's].",
        "backend": "``torch``, ``onnx``, ``onnx-int8``, ``rerankers`` (other model families through the ``rerankers`` "
        "library, by ``model_type``; the ``[rerankers]`` extra), or ``listwise`` (an LLM reorders sliding windows of "
        "passages: ``ListwiseOptions``).",
        "precision": "``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.",
        "model_type": "with ``backend='rerankers'``: the library's model type, ``cross-encoder`` or ``t5``.",
    }
)
#: where the library's defaults differ from ``RerankerSpec``'s (the command line's)
_SPEC_DEFAULTS = MappingProxyType({"batch_size": 32})

_SPEC_FIELDS = tuple(dataclasses.fields(RerankerSpec))


def _spec_keywords() -> list[tuple[str, Any, Any, str]]:
    out = []
    for f in _SPEC_FIELDS:
        default = _SPEC_DEFAULTS.get(f.name, f.default)
        out.append((f.name, inspect.Parameter.empty if default is dataclasses.MISSING else default, f.type, ""))
    return [(n, d, a, _SPEC_DOCS[n]) for n, d, a, _ in out]


def _spec(given: dict) -> RerankerSpec:
    return RerankerSpec(**{**_SPEC_DEFAULTS, **given})


#: ``ListwiseOptions``' own fields (its ``requests`` are ``RequestPolicy``'s keywords)
_LISTWISE_FIELDS = tuple(f for f in dataclasses.fields(ListwiseOptions) if f.name != "requests")
_LISTWISE_DOCS = MappingProxyType(
    {
        "endpoint": "``backend='listwise'``: an OpenAI-compatible base URL serving ``model`` (without it, ``model`` is "
        "a local causal LM folder run by transformers).",
        "qrels": "``backend='listwise'`` with ``shuffles``: qrels to record the order probe's nDCG@10 spread.",
        "answer_cache": "``backend='listwise'``: True (``$TWOSTAGE_CACHE/listwise``), a folder, or False (ask "
        "everything, store nothing).",
    }
)


def _listwise_keywords() -> list[tuple[str, Any, Any, str]]:
    own = [
        (f.name, f.default, f.type, _LISTWISE_DOCS.get(f.name, "``backend='listwise'``: see ``ListwiseOptions``."))
        for f in _LISTWISE_FIELDS
    ]
    http = [(k.name, k.default, k.annotation, k.doc) for k in RequestPolicy.keywords().values()]
    return own + http


def _listwise(given: dict) -> ListwiseOptions:
    endpoint = given.get("endpoint")
    if endpoint is not None and not str(endpoint).strip():
        raise OptionConflictError(phrase("endpoint", "--endpoint") + " is empty", keyword="endpoint", flag="--endpoint")
    given, policy = dict(given), RequestPolicy.keywords()
    http = {k: given.pop(k) for k in policy if k in given}
    # None stands for the policy's default (as ``ListwiseOptions.from_keywords`` reads it)
    http = {k: v for k, v in http.items() if v is not None or policy[k].default is None}
    return ListwiseOptions(**given, requests=RequestPolicy.from_keywords(**http))


def _listwise_values(o: ListwiseOptions) -> dict[str, Any]:
    return {f.name: getattr(o, f.name) for f in _LISTWISE_FIELDS} | o.requests.describe()


#: the listwise flags the command line has always refused with another backend, in one message
_LISTWISE_ONLY = (
    "passes",
    "context_size",
    "max_passage_words",
    "variable_passages",
    "few_shot",
    "few_shot_examples",
    "system_message",
    "alpha",
    "first_token",
    "api",
    "tokenizer",
)


@dataclass(frozen=True)
class RerankOptions(Options):
    """The options of ``rerank`` (``twostage rerank``): every keyword but the inputs (the first-stage run or
    candidates, and the query and passage texts). ``model`` has no default: it is always given."""

    verb = "rerank"

    reranker: RerankerSpec = nested(
        _spec_keywords(), _spec, dataclasses.asdict, doc="the reranker (``toolkit.reranking.backends.RerankerSpec``)"
    )
    depth: int = opt(100, doc="candidates reranked per query.")
    missing_text: str = opt(
        "error", doc="``error``, or ``bottom`` (keep a candidate without text below the scored ones)."
    )
    query_ids: Iterable[str] | None = opt(None, doc="rerank only these queries.")
    judged_only: Any = opt(None, doc="qrels (a file or a name): rerank only the queries they judge.")
    tag: str = opt("twostage-rerank", doc="the run's tag.")
    progress: bool = opt(False, doc="show a progress bar.")
    embedding_cache: str | os.PathLike | bool = opt(
        False, doc="``True``: reuse bi-encoder embeddings from ``$TWOSTAGE_CACHE/embeddings``, or a folder."
    )
    trust_cache: bool = opt(
        False,
        doc="read the embedding, ONNX and answer caches even when another user owns them or may write to them "
        "(``toolkit.guard.store``).",
    )
    ray: str | None = opt(None, doc="a Ray address: score in shards on Ray workers.")
    workers: int | None = opt(None, doc="Ray workers.")
    gpus_per_worker: float | None = opt(None, doc="GPUs per Ray worker.")
    cpus_per_worker: float | None = opt(None, doc="CPUs per Ray worker.")
    shard_size: int | None = opt(None, doc="items per shard (part of the job's identity: keep it when resuming).")
    max_retries: int | None = opt(None, doc="times Ray restarts a dead worker and re-runs its shard.")
    shards: str | os.PathLike | None = opt(
        None, doc="with ``ray``: the folder of the job's manifest and shards (resumable)."
    )
    force: bool = opt(False, doc="with ``ray``: discard the shards of a different earlier job at ``shards``.")
    listwise: ListwiseOptions = nested(
        _listwise_keywords(), _listwise, _listwise_values, doc="the listwise reranker's settings (``ListwiseOptions``)"
    )

    def validate(self) -> None:
        spec = self.reranker
        if spec.backend == LISTWISE:
            if self.ray is not None:
                raise OptionConflictError(
                    phrase(
                        "the listwise backend runs its requests concurrently in this process; drop --ray",
                        "--backend listwise runs its requests concurrently in this process; drop --ray",
                    ),
                    keyword="ray",
                    flag="--ray",
                )
            if spec.kind != "auto":
                raise OptionConflictError(
                    phrase(
                        "kind= is for the scoring backends; backend='listwise' reorders windows",
                        "--kind is for the scoring backends; --backend listwise reorders windows",
                    ),
                    keyword="kind",
                    flag="--kind",
                )
            self.listwise.check(self.depth)  # a window of at most the depth
            return
        defaults = dict(_listwise_keywords_defaults())
        given = [k for k, v in _listwise_values(self.listwise).items() if v != defaults[k]]
        if not given:
            return
        if "endpoint" in given:
            cli = "--endpoint is for --backend listwise"
        elif set(given) & set(_LISTWISE_ONLY):
            cli = (
                "--passes, --context-size, --max-passage-words, --variable-passages, --few-shot, --system-message, "
                "--alpha, --first-token, --api and --tokenizer are for --backend listwise"
            )
        elif "qrels" in given:
            cli = "--qrels is for --backend listwise --shuffles K (the order probe)"
        else:
            named = [f"--{k.replace('_', '-')}" for k in given]
            cli = f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} for --backend listwise"
        raise OptionConflictError(
            phrase(f"{', '.join(sorted(given))}: options of backend='listwise' only", cli),
            keyword=given[0],
            flag=f"--{given[0].replace('_', '-')}",
        )


def _listwise_keywords_defaults() -> list[tuple[str, Any]]:
    return [(n, d) for n, d, _, _ in _listwise_keywords()]
