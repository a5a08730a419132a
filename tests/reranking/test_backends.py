"""The reranker backends table: kinds, precisions and builders resolved from ``BACKENDS`` alone."""

from __future__ import annotations

import json
from types import MappingProxyType

import numpy as np
import pytest

from toolkit.errors import ConfigError
from toolkit.reranking import backends
from toolkit.reranking.backends import BACKENDS, Backend, RerankerSpec, load_reranker


class _Constant:
    """A toy backend's reranker: every text scores its length (enough to check what was built, and how)."""

    kind = "cross-encoder"

    def __init__(self, spec: RerankerSpec, device: str):
        self.model_name, self.device, self.batch_size = spec.model, device, spec.batch_size

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        return np.array([len(t) for t in texts], dtype=np.float64)

    def describe(self) -> dict:
        return {"kind": self.kind, "model": self.model_name, "device": self.device, "backend": "toy"}


@pytest.fixture
def cross_encoder_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    return str(tmp_path)


def test_a_new_backend_is_one_table_entry(monkeypatch, cross_encoder_folder):
    toy = Backend({"cross-encoder": _Constant}, ("auto", "fp32"), "fp32")
    monkeypatch.setattr(backends, "BACKENDS", MappingProxyType({**BACKENDS, "toy": toy}))
    model = load_reranker(cross_encoder_folder, device="cpu", batch_size=3, backend="toy")
    assert isinstance(model, _Constant) and (model.device, model.batch_size) == ("cpu", 3)
    assert model.score("q", ["ab", "abcd"]).tolist() == [2.0, 4.0]
    # the table's kinds and precisions are what is checked
    with pytest.raises(ConfigError, match="--backend toy supports cross-encoders; m is a bi-encoder"):
        RerankerSpec("m", kind="bi-encoder", backend="toy").resolved()
    with pytest.raises(ConfigError, match="--backend toy runs fp32 weights, not fp16"):
        RerankerSpec(cross_encoder_folder, backend="toy", precision="fp16").resolved()


def test_unknown_backend_lists_the_table(cross_encoder_folder):
    with pytest.raises(
        ConfigError, match=r"--backend must be one of \('torch', 'onnx', 'onnx-int8', 'rerankers'\), not 'tf'"
    ):
        RerankerSpec(cross_encoder_folder, backend="tf").resolved()


def test_builtin_table():
    assert list(BACKENDS) == ["torch", "onnx", "onnx-int8", "rerankers"]
    assert set(BACKENDS["torch"].builders) == {"bi-encoder", "cross-encoder"}
    assert set(BACKENDS["onnx"].builders) == set(BACKENDS["onnx-int8"].builders) == {"bi-encoder"}
    assert "fp16" in BACKENDS["torch"].precisions and "fp16" not in BACKENDS["onnx"].precisions
    assert backends.DEFAULT_BACKEND == "torch"


def test_cli_backend_and_kind_choices_come_from_the_library():
    from toolkit.cli.rerank import rerank

    params = {p.name: p for p in rerank.params}
    assert list(params["backend"].type.choices) == list(backends.RERANK_BACKENDS)  # the scoring backends + listwise
    assert params["backend"].default == backends.DEFAULT_BACKEND
    assert list(params["kind"].type.choices) == list(backends.RERANKER_KINDS)
