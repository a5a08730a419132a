"""Other model families through AnswerDotAI's ``rerankers`` library: ``--backend rerankers --model-type TYPE``.

The library gives monoT5-style sequence-to-sequence rerankers, cross-encoders and others one interface,
``Reranker(model, model_type=...)`` whose ``rank(query, docs, doc_ids)`` returns every document with its score.
``LibraryReranker`` calls exactly that, one query at a time with the library's own batching, and hands the
scores back in the candidates' order, so a run equals the library's own scores on the same model (the job then
orders and breaks ties as for every backend). Nothing is changed in what the library computes:

- ``cross-encoder`` (``TransformerRanker``): the model's logit for the (query, passage) pair (one-label
  models; a folder whose name holds ``monobert`` scores ``logit[1] - logit[0]``, as the library does).
- ``t5`` (``T5Ranker``): the probability of the "true" token against the "false" token at the first decoding
  step (``"Query: {query} Document: {text} Relevant:"``, inputs truncated at 512 tokens). The tokens are the
  library's for the hub names it knows (``castorini/monot5-*``, ``unicamp-dl/*``), ``▁false``/``▁true`` else.

The model types offered are those this extra installs everything for and the tests build offline
(``MODEL_TYPES``); the library's ColBERT ranker does not load under transformers 5 (see docs/reranking.md).
The library and torch are imported when a model is built; it prints to stdout, which goes to stderr here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from toolkit.errors import ConfigError
from toolkit.extras import require
from toolkit.models import model_load_error, precision_effect, resolve_model

BACKEND = "rerankers"

#: ``--model-type`` values, as the library names them -> what the score is.
SCORES: Mapping[str, str] = MappingProxyType(
    {
        "cross-encoder": "the model's logit (rerankers TransformerRanker)",
        "t5": "P(true) against false at the first decoding step (rerankers T5Ranker)",
    }
)
MODEL_TYPES = tuple(SCORES)

#: The precisions the library's ``dtype`` takes (``auto`` is fp32, as for every backend).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
WEIGHTS = "fp32, fp16 or bf16 (the library's dtype)"
_DTYPES = MappingProxyType({"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"})


def resolved(spec: Any) -> Any:
    """``spec`` (a ``backends.RerankerSpec``, not imported here: backends imports this module) with its kind set
    to its model type, or a ``ConfigError`` where the two do not fit."""
    if spec.model_type not in MODEL_TYPES:
        given = "missing" if spec.model_type is None else repr(spec.model_type)
        raise ConfigError(f"--backend {BACKEND} needs --model-type, one of {MODEL_TYPES} (it is {given})")
    if spec.precision not in PRECISIONS:
        raise ConfigError(f"--backend {BACKEND} runs {WEIGHTS} weights, not {spec.precision}")
    if spec.kind not in ("auto", spec.model_type):
        raise ConfigError(f"--kind {spec.kind} does not apply to --backend {BACKEND}: --model-type names the family")
    if spec.max_length is not None:
        raise ConfigError(f"--max-length does not apply to --backend {BACKEND}: the library truncates by its own rule")
    return dataclasses.replace(spec, kind=spec.model_type)


def describe_spec(spec: Any) -> dict:
    """What the sidecar says of a model each Ray worker loads (the library's version as installed here)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = version("rerankers")
    except PackageNotFoundError:
        library = "not installed"
    return {"model_type": spec.model_type, "score": SCORES.get(str(spec.model_type)), "rerankers_version": library}


@dataclass
class LibraryReranker:
    """A ``rerankers.Reranker`` of one model type: one score per passage, the library's own."""

    model_name: str
    model_type: str
    device: str = "cpu"
    batch_size: int = 64
    precision: str = "fp32"
    backend: str = field(default=BACKEND, init=False)
    model_calls: int = field(default=0, init=False)  # batches the library ran (one forward pass each)

    def __post_init__(self) -> None:
        require("rerankers", f"--backend {BACKEND}")
        if self.model_type not in MODEL_TYPES:
            raise ConfigError(f"--model-type must be one of {MODEL_TYPES}, not {self.model_type!r}")
        import rerankers

        self.kind = self.model_type
        self._path = resolve_model(self.model_name)
        self._version = rerankers.__version__
        with contextlib.redirect_stdout(sys.stderr):  # the library's notices are not the command's output
            try:
                ranker = rerankers.Reranker(
                    self._path,
                    model_type=self.model_type,
                    verbose=0,
                    device=self.device,
                    batch_size=self.batch_size,
                    dtype=_DTYPES[self.precision],
                )
            except Exception as exc:  # any loader failure is a configuration problem for the user
                raise model_load_error(self.model_name, exc) from exc
        if ranker is None:  # the library's answer to a family whose dependencies are missing
            raise ConfigError(
                f"rerankers cannot build a {self.model_type} ranker here: pip install 'twostage[rerankers]'"
            )
        self._ranker = ranker

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """The library's score of each text, in the order given (``rank`` returns them sorted, by document id)."""
        if not texts:
            return np.zeros(0)
        with contextlib.redirect_stdout(sys.stderr):
            ranked = self._ranker.rank(query, list(texts), doc_ids=list(range(len(texts))))
        self.model_calls += math.ceil(len(texts) / self.batch_size)
        out = np.full(len(texts), np.nan)
        for result in ranked.results:
            if np.ndim(result.score) != 0:
                raise ConfigError(
                    f"{self.model_name} gives {np.size(result.score)} scores per passage; --model-type "
                    f"{self.model_type} needs a model with one (a one-label cross-encoder)"
                )
            out[int(result.document.doc_id)] = float(result.score)
        return out

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": self._path,
            "model_type": self.model_type,
            "ranker": type(self._ranker).__name__,
            "score": SCORES[self.model_type],
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": None,  # the library's own truncation
            "backend": self.backend,
            "precision": self.precision,
            "precision_effect": precision_effect(self.precision),
            "rerankers_version": self._version,
        }
