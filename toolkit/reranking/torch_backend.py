"""sentence-transformers rerankers on torch: a bi-encoder (cosine of normalised embeddings) and a cross-encoder (raw logit).

torch and sentence-transformers are imported when a model is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from toolkit.extras import require
from toolkit.models import batched_by_length, model_load_error, resolve_model


@dataclass
class BiEncoder:
    """Cosine of normalised embeddings from a sentence-transformers model."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    precision: str = "fp32"
    kind: str = field(default="bi-encoder", init=False)
    backend: str = field(default="torch", init=False)

    def __post_init__(self) -> None:
        require("rerank", "a sentence-transformers bi-encoder")
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(resolve_model(self.model_name), device=self.device)
        except Exception as exc:  # any loader failure is a configuration problem for the user
            raise model_load_error(self.model_name, exc) from exc
        if self.max_length is not None:
            self._model.max_seq_length = self.max_length
        if self.precision == "fp16":
            self._model.half()
        self._model.eval()
        self.model_calls = 0

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        emb = self.embed([query, *texts])
        return (emb[1:] @ emb[0]).astype(np.float64)

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        enc = self._model.tokenizer(texts, truncation=True, max_length=self._model.max_seq_length)
        return np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch
        from sentence_transformers.util import batch_to_device

        with torch.inference_mode():
            features = batch_to_device(self._model.preprocess(texts), self._model.device)
            emb = self._model(features)["sentence_embedding"]
            emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
        self.model_calls += 1
        return emb.cpu().numpy()

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text: the model's own modules (sentence-transformers'
        ``encode`` pipeline), in batches of similar token length."""
        return batched_by_length(texts, self.token_lengths(texts), self.batch_size, self._forward)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cosine of L2-normalised embeddings (model pooling)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self._model.max_seq_length,
            "backend": self.backend,
            "precision": self.precision,
        }


@dataclass
class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``: one logit per (query, passage) pair."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    precision: str = "fp32"
    kind: str = field(default="cross-encoder", init=False)
    backend: str = field(default="torch", init=False)

    def __post_init__(self) -> None:
        require("rerank", "a sentence-transformers cross-encoder")
        from sentence_transformers import CrossEncoder

        kwargs: dict = {"device": self.device}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        try:
            self._model = CrossEncoder(resolve_model(self.model_name), **kwargs)
        except Exception as exc:
            raise model_load_error(self.model_name, exc) from exc
        if self.precision == "fp16":
            self._model.half()
        self.model_calls = 0

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        import torch

        scores = self._model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.model_calls += 1
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 2:  # several labels: the last one is "relevant" by convention
            scores = scores[:, -1]
        return scores

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cross-encoder logit (identity activation)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": getattr(self._model, "max_seq_length", None),
            "backend": self.backend,
            "precision": self.precision,
        }
