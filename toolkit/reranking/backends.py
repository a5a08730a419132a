"""Reranker kinds and backends, and ``RerankerSpec``: what to build, picklable for Ray workers.

``BACKENDS`` is the one table of ways to run a reranker model: per backend, the kinds it runs
(each with the function that builds one) and the precisions it accepts. A new backend is one
module (a class with ``score``/``describe``, and ``embed`` for bi-encoders) plus one entry here;
the CLI takes its ``--backend`` choices from this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

import numpy as np

from toolkit.errors import ConfigError
from toolkit.models import (
    PRECISIONS,
    detect_kind,
    precision_effect,
    read_json_object,
    resolve_device,
    resolve_model,
    resolve_precision,
)
from toolkit.reranking import rerankers_backend

RERANKER_KINDS = ("auto", "bi-encoder", "cross-encoder")


# --------------------------------------------------------------- protocol
class Reranker(Protocol):
    """Scores passages for a query; larger is better. Implementations are stateless per call."""

    kind: str
    model_name: str

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """One float score per text, in the order given."""
        ...

    def describe(self) -> dict:
        """Settings for the run's sidecar (model, device, batch size, ...)."""
        ...


# ------------------------------------------------------------ the table
#: How a backend builds one kind: (the resolved spec, the resolved device) -> a reranker.
Builder = Callable[["RerankerSpec", str], Reranker]


@dataclass(frozen=True)
class Backend:
    """One way of running reranker models."""

    builders: Mapping[str, Builder]  # kind -> builder; the kinds this backend runs
    precisions: tuple[str, ...] = PRECISIONS  # the --precision values it accepts
    weights: str = ""  # what its weights are, when it refuses a precision (for the error message)


def _torch(kind: str) -> Builder:
    def build(spec: RerankerSpec, device: str) -> Reranker:
        from toolkit.reranking.torch_backend import BiEncoder, CrossEncoderReranker

        cls = CrossEncoderReranker if kind == "cross-encoder" else BiEncoder
        precision = resolve_precision(spec.precision, device)
        return cls(spec.model, device, spec.batch_size, spec.max_length, precision)

    return build


def _onnx(quantize: bool) -> Builder:
    def build(spec: RerankerSpec, device: str) -> Reranker:
        from toolkit.reranking.onnx_backend import OnnxBiEncoder

        return OnnxBiEncoder(spec.model, device, spec.batch_size, spec.max_length, quantize=quantize)

    return build


_ONNX_WEIGHTS = "fp32 (onnx) or int8 (onnx-int8)"


def _rerankers(spec: RerankerSpec, device: str) -> Reranker:
    from toolkit.reranking.rerankers_backend import LibraryReranker

    precision = resolve_precision(spec.precision, device)
    return LibraryReranker(spec.model, str(spec.model_type), device, spec.batch_size, precision)


BACKENDS: Mapping[str, Backend] = MappingProxyType(
    {
        "torch": Backend({"bi-encoder": _torch("bi-encoder"), "cross-encoder": _torch("cross-encoder")}),
        "onnx": Backend({"bi-encoder": _onnx(quantize=False)}, ("auto", "fp32"), _ONNX_WEIGHTS),
        "onnx-int8": Backend({"bi-encoder": _onnx(quantize=True)}, ("auto", "fp32"), _ONNX_WEIGHTS),
        # other model families through the rerankers library: the kind is the --model-type
        rerankers_backend.BACKEND: Backend(
            dict.fromkeys(rerankers_backend.MODEL_TYPES, _rerankers),
            rerankers_backend.PRECISIONS,
            rerankers_backend.WEIGHTS,
        ),
    }
)
DEFAULT_BACKEND = "torch"
#: The listwise LLM reranker (``toolkit.reranking.listwise``): not a scoring model, so not in ``BACKENDS``; it
#: reorders windows of passages by an LLM's answer, over an endpoint or a local causal LM.
LISTWISE = "listwise"
#: every ``--backend`` of ``twostage rerank``
RERANK_BACKENDS = (*BACKENDS, LISTWISE)


# ------------------------------------------------------------------ spec
@dataclass(frozen=True)
class RerankerSpec:
    """How to build a reranker: picklable, so Ray workers can build their own copy."""

    model: str
    kind: str = "auto"
    device: str = "auto"
    batch_size: int = 64
    max_length: int | None = None
    backend: str = DEFAULT_BACKEND
    precision: str = "auto"
    model_type: str | None = None  # --backend rerankers: the library's model type (also the kind)

    def resolved(self) -> RerankerSpec:
        """Kind read from the model's config; the rest checked (the device is resolved where it runs)."""
        if self.batch_size < 1:
            raise ConfigError("batch size must be >= 1")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend must be one of {tuple(BACKENDS)}, not {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision must be one of {PRECISIONS}, not {self.precision!r}")
        if self.backend == rerankers_backend.BACKEND:
            return rerankers_backend.resolved(self)
        if self.model_type is not None:
            raise ConfigError(f"--model-type goes with --backend {rerankers_backend.BACKEND}")
        if self.kind not in RERANKER_KINDS:
            raise ConfigError(f"reranker kind must be one of {RERANKER_KINDS}, not {self.kind!r}")
        kind = detect_kind(resolve_model(self.model)) if self.kind == "auto" else self.kind
        backend = BACKENDS[self.backend]
        if kind not in backend.builders:
            runs = " and ".join(f"{k}s" for k in backend.builders)
            raise ConfigError(f"--backend {self.backend} supports {runs}; {self.model} is a {kind}")
        if self.precision not in backend.precisions:
            raise ConfigError(f"--backend {self.backend} runs {backend.weights} weights, not {self.precision}")
        return RerankerSpec(
            self.model, kind, self.device, self.batch_size, self.max_length, self.backend, self.precision
        )

    def describe(self) -> dict:
        """The sidecar's reranker settings before any model is loaded (Ray workers load it)."""
        path = resolve_model(self.model)
        max_length = self.max_length
        if max_length is None and self.kind in ("auto", "bi-encoder"):
            max_length = read_json_object(Path(path) / "sentence_bert_config.json").get("max_seq_length")
        return {
            "kind": self.kind,
            "model": self.model,
            "model_path": path,
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": max_length,
            "backend": self.backend,
            "precision": self.precision,
            "precision_effect": precision_effect(self.precision),
            "built_by": "each Ray worker",
        } | (rerankers_backend.describe_spec(self) if self.backend == rerankers_backend.BACKEND else {})

    def build(self) -> Reranker:
        spec = self.resolved()
        return BACKENDS[spec.backend].builders[spec.kind](spec, resolve_device(spec.device))


def load_reranker(
    model: str,
    kind: str = "auto",
    device: str = "auto",
    batch_size: int = 64,
    max_length: int | None = None,
    backend: str = DEFAULT_BACKEND,
    precision: str = "auto",
    model_type: str | None = None,
) -> Reranker:
    """Build a reranker by kind (``auto`` reads a local model's config); ``backend="rerankers"`` by ``model_type``."""
    return RerankerSpec(model, kind, device, batch_size, max_length, backend, precision, model_type).build()
