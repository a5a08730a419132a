"""The ONNX export cache heals (issue 24, item 6): an export is checked against its record (the model's key and
the file's sha256) whenever it is read; a damaged, planted or unrecorded file is reported by name, moved aside
and exported again; a cache that cannot be written is a warning and the model is exported for the run only.

A tiny sentence-transformers folder (a 1-layer BERT with 16 dimensions, mean pooling, Normalize), so each export
takes a fraction of a second. Oracle: the model's embeddings computed with transformers and torch directly (mean
of the last hidden states over the attention mask, L2-normalised). Before, a truncated model.onnx stopped every
later rerank with ONNX Runtime's traceback, and another model's export in its place was used silently.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from toolkit.errors import TwostageWarning

pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")

TEXTS = ["apple pie recipe", "car repair", "how to fix an engine", "a"]
WORDS = sorted({w for t in TEXTS for w in t.split()} | {"first", "example", "sentence", "second", "one"})


def _tiny_bi_encoder(folder: Path, seed: int) -> str:
    from tiny_models import save_tiny_bert

    folder.mkdir(parents=True)
    save_tiny_bert(folder, WORDS, seed=seed)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True})
    )
    (folder / "2_Normalize").mkdir()
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return str(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-bi")
    return _tiny_bi_encoder(root / "a", 0), _tiny_bi_encoder(root / "b", 1)


def _expected(model: str) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, net = AutoTokenizer.from_pretrained(model), AutoModel.from_pretrained(model).eval()
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = net(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "onnx"


def _embed(model: str, backend: str = "onnx") -> tuple[np.ndarray, dict]:
    from toolkit.reranking.backends import load_reranker

    r = load_reranker(model, device="cpu", batch_size=2, backend=backend)
    return r.embed(TEXTS), r.describe()


def _warnings(said) -> str:
    """The ``TwostageWarning``s a ``pytest.warns`` block recorded, one a line."""
    return "\n".join(str(w.message) for w in said if issubclass(w.category, TwostageWarning))


def _folder(cache: Path) -> Path:
    (folder,) = [p for p in cache.iterdir() if p.name != "damaged"]
    return folder


@pytest.mark.parametrize("name", ["model.onnx", "model.int8.onnx"])
def test_a_damaged_export_is_named_moved_aside_and_made_again(models, cache, name):
    backend = "onnx-int8" if "int8" in name else "onnx"
    first, _ = _embed(models[0], backend)
    path = _folder(cache) / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a torn copy, a full disk, bit rot
    with pytest.warns(TwostageWarning) as said:
        again, info = _embed(models[0], backend)
    assert f"ONNX cache file {path} does not match its recorded sha256" in _warnings(said)
    assert [p.name.split("-")[1] for p in (cache / "damaged").iterdir()] == [name]
    assert np.array_equal(again, first) and info["onnx_file"] == str(path)
    if backend == "onnx":
        assert np.abs(again - _expected(models[0])).max() <= 1e-5


def test_another_models_export_is_not_used(models, cache):
    """Well-formed ONNX of another model, with or without its record: before, served silently (other scores)."""
    _embed(models[1])
    other = _folder(cache)
    exact = _expected(models[0])
    first, _ = _embed(models[0])
    (mine,) = [p for p in cache.iterdir() if p not in (other, cache / "damaged")]
    assert np.abs(first - exact).max() <= 1e-5
    shutil.copy(other / "model.onnx", mine / "model.onnx")  # the file alone: its sha256 is not the recorded one
    with pytest.warns(TwostageWarning) as said:
        planted, _ = _embed(models[0])
    assert f"{mine / 'model.onnx'} does not match its recorded sha256" in _warnings(said)
    assert np.abs(planted - exact).max() <= 1e-5
    for n in ("model.onnx", "entry.json"):  # with its record: recorded for another model's key
        shutil.copy(other / n, mine / n)
    with pytest.warns(TwostageWarning) as said:
        copied, _ = _embed(models[0])
    assert f"{mine / 'model.onnx'} is recorded for another model" in _warnings(said)
    assert np.abs(copied - exact).max() <= 1e-5
    (mine / "entry.json").unlink()  # an export of an older twostage: no record
    with pytest.warns(TwostageWarning) as said:
        _embed(models[0])
    assert f"{mine / 'model.onnx'} has no readable entry.json" in _warnings(said)
    assert len(list((cache / "damaged").iterdir())) == 3


@pytest.mark.parametrize("options", ["ro,size=64k", "size=4k"])
def test_an_unwritable_cache_is_a_warning_and_the_run_goes_on(models, tmp_path, monkeypatch, options):
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs root")
    try:
        monkeypatch.setenv("TWOSTAGE_CACHE", str(disk))
        with pytest.warns(TwostageWarning) as said:
            got, info = _embed(models[0])
        assert np.abs(got - _expected(models[0])).max() <= 1e-5
        assert _warnings(said).count("cannot be written") == 1 and str(disk / "onnx") in _warnings(said)
        assert info["onnx_file"].startswith("(exported for this run only")
        assert not [p for p in disk.rglob("*") if p.is_file()]  # no partial export left on the full disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)
