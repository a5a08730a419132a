"""sentence-transformers rerankers on torch: a bi-encoder (cosine of normalised embeddings) and a cross-encoder (raw logit).

Both feed the model through ``toolkit.models.batching.ModelPipeline``: every text (pair) tokenised once,
length-sorted batches built ahead of the device, outputs kept on the device until one copy back.
The model is a plain-torch BERT (``toolkit.models.native_bert``) where the folder is a BERT bi-encoder or
cross-encoder of the common kind, bit-identical to sentence-transformers on a CPU and without its
import (seconds of a short call); anything else runs the sentence-transformers model's own modules
(its pooling, its head). ``describe()["implementation"]`` says which.

torch (and sentence-transformers, where needed) are imported when a model is built.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from toolkit.extras import require
from toolkit.models import apply_precision, matmul_precision, model_load_error, precision_effect, resolve_model


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
        self._net = _native(self, "bi-encoder")
        if self._net is None:
            from sentence_transformers import SentenceTransformer

            try:
                self._model = SentenceTransformer(resolve_model(self.model_name), device=self.device)
            except Exception as exc:  # any loader failure is a configuration problem for the user
                raise model_load_error(self.model_name, exc) from exc
            if self.max_length is not None:
                self._model.max_seq_length = self.max_length
            self._model.eval()
            self._max_length = self._model.max_seq_length
            limit = int(self._model.max_seq_length or self._model.tokenizer.model_max_length)
            self._pipeline = _pipeline(self._model, limit, self._embed_forward, self)
        apply_precision(self._net if self._net is not None else self._model, self.precision)

    @property
    def model_calls(self) -> int:
        """Forward passes so far (one per batch)."""
        return self._pipeline.model_calls

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        emb = self.embed([query, *texts])
        return (emb[1:] @ emb[0]).astype(np.float64)

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        return self._pipeline.tokenizer.encode(texts).lengths

    def _embed_forward(self, features: dict):
        import torch

        if self._net is not None:
            emb = self._net(features)
        else:
            emb = self._model({**features, "modality": "text"})["sentence_embedding"]
        return torch.nn.functional.normalize(emb.float(), p=2, dim=1)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text: the model's own modules (sentence-transformers'
        ``encode`` pipeline), in batches of similar token length, each text tokenised once."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with matmul_precision(self.precision):
            return self._pipeline.run(texts)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cosine of L2-normalised embeddings (model pooling)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self._max_length,
            "backend": self.backend,
            "implementation": _implementation(self._net),
            "precision": self.precision,
            "precision_effect": precision_effect(self.precision),
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
        self._net = _native(self, "cross-encoder")
        if self._net is None:
            from sentence_transformers import CrossEncoder

            kwargs: dict = {"device": self.device}
            if self.max_length is not None:
                kwargs["max_length"] = self.max_length
            try:
                self._model = CrossEncoder(resolve_model(self.model_name), **kwargs)
            except Exception as exc:
                raise model_load_error(self.model_name, exc) from exc
            self._model.eval()
            self._max_length = getattr(self._model, "max_seq_length", None)
            self._pipeline = _pipeline(self._model, self._model.max_seq_length, self._pair_forward, self)
        apply_precision(self._net if self._net is not None else self._model, self.precision)

    @property
    def model_calls(self) -> int:
        """Forward passes so far (one per batch)."""
        return self._pipeline.model_calls

    def _pair_forward(self, features: dict):
        if self._net is not None:
            scores = self._net(features)
        else:
            scores = self._model({**features, "modality": "text"})["scores"]
        # several labels: the last one is "relevant" by convention; the activation is the identity
        return scores[:, -1] if scores.ndim == 2 else scores

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        return self.score_pairs([(query, t) for t in texts])

    def score_many(self, items: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """Scores of several queries' passages in one pipeline run (batches across queries)."""
        pairs = [(q, t) for q, texts in items for t in texts]
        flat = self.score_pairs(pairs) if pairs else np.zeros(0)
        bounds = np.cumsum([0, *(len(t) for _, t in items)])
        return [flat[a:b] for a, b in itertools.pairwise(bounds)]

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One logit per (query, passage) pair, in order."""
        with matmul_precision(self.precision):
            return self._pipeline.run(pairs).astype(np.float64)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cross-encoder logit (identity activation)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self._max_length,
            "backend": self.backend,
            "implementation": _implementation(self._net),
            "precision": self.precision,
            "precision_effect": precision_effect(self.precision),
        }


def _pipeline(model, max_length: int, forward, owner):
    """The input pipeline of a sentence-transformers model: its tokenizer, at ``max_length``, on its device."""
    from toolkit.models.batching import ModelPipeline, Tokenizer

    return ModelPipeline(Tokenizer(model.tokenizer, max_length), forward, owner.device, owner.batch_size)


def _native(owner, kind: str):
    """``owner``'s model as a plain-torch BERT (its pipeline and maximum length set), or None where
    the folder needs sentence-transformers."""
    from toolkit.models import native_bert
    from toolkit.models.batching import ModelPipeline, Tokenizer

    p = native_bert.plan(resolve_model(owner.model_name), kind, owner.max_length)
    if p is None:
        return None
    try:
        net = native_bert.build(p, owner.device)
    except native_bert.Unsupported:
        return None
    rust, pad_id = native_bert.rust_tokenizer(p)
    forward = owner._embed_forward if kind == "bi-encoder" else owner._pair_forward
    owner._max_length = p.max_length
    owner._pipeline = ModelPipeline(
        Tokenizer(None, p.max_length, rust=rust, pad_id=pad_id), forward, owner.device, owner.batch_size
    )
    return net


def _implementation(net) -> str:
    return "native BERT (toolkit.models.native_bert)" if net is not None else "sentence-transformers"
