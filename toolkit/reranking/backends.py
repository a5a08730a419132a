"""Reranker kinds and backends, and ``RerankerSpec``: what to build, picklable for Ray workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from toolkit.errors import ConfigError
from toolkit.models import PRECISIONS, detect_kind, read_json_object, resolve_device, resolve_model, resolve_precision
from toolkit.reranking.torch_backend import BiEncoder, CrossEncoderReranker

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


@dataclass(frozen=True)
class RerankerSpec:
    """How to build a reranker: picklable, so Ray workers can build their own copy."""

    model: str
    kind: str = "auto"
    device: str = "auto"
    batch_size: int = 64
    max_length: int | None = None
    backend: str = "torch"
    precision: str = "auto"

    def resolved(self) -> RerankerSpec:
        """Kind read from the model's config; the rest checked (the device is resolved where it runs)."""
        from toolkit.reranking.onnx_backend import BACKENDS

        if self.kind not in RERANKER_KINDS:
            raise ConfigError(f"reranker kind must be one of {RERANKER_KINDS}, not {self.kind!r}")
        if self.batch_size < 1:
            raise ConfigError("batch size must be >= 1")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend must be one of {BACKENDS}, not {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision must be one of {PRECISIONS}, not {self.precision!r}")
        kind = detect_kind(resolve_model(self.model)) if self.kind == "auto" else self.kind
        if self.backend != "torch" and kind != "bi-encoder":
            raise ConfigError(f"--backend {self.backend} supports bi-encoders; {self.model} is a {kind}")
        if self.backend != "torch" and self.precision == "fp16":
            raise ConfigError(f"--backend {self.backend} runs fp32 (onnx) or int8 (onnx-int8) weights, not fp16")
        return RerankerSpec(
            self.model, kind, self.device, self.batch_size, self.max_length, self.backend, self.precision
        )

    def describe(self) -> dict:
        """The sidecar's reranker settings before any model is loaded (Ray workers load it)."""
        path = resolve_model(self.model)
        max_length = self.max_length
        if max_length is None and self.kind != "cross-encoder":
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
            "built_by": "each Ray worker",
        }

    def build(self) -> Reranker:
        spec = self.resolved()
        dev = resolve_device(spec.device)
        if spec.backend != "torch":
            from toolkit.reranking.onnx_backend import OnnxBiEncoder

            return OnnxBiEncoder(
                spec.model, dev, spec.batch_size, spec.max_length, quantize=spec.backend == "onnx-int8"
            )
        cls = CrossEncoderReranker if spec.kind == "cross-encoder" else BiEncoder
        return cls(
            model_name=spec.model,
            device=dev,
            batch_size=spec.batch_size,
            max_length=spec.max_length,
            precision=resolve_precision(spec.precision, dev),
        )


def load_reranker(
    model: str,
    kind: str = "auto",
    device: str = "auto",
    batch_size: int = 64,
    max_length: int | None = None,
    backend: str = "torch",
    precision: str = "auto",
) -> Reranker:
    """Build a reranker by kind (``auto`` reads a local model's config)."""
    return RerankerSpec(model, kind, device, batch_size, max_length, backend, precision).build()
