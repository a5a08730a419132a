"""The ONNX export cache heals: an export is checked against its record (the model's key and
the file's sha256) whenever it is read; a damaged, planted or unrecorded file is reported by name, moved aside
and exported again; a cache that cannot be written is one ``CacheUnusableError`` naming its folder (set by
``$TWOSTAGE_CACHE``) and the fix, with no partial export left on the disk.

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
from needs import optional, required

from toolkit.errors import CacheUnusableError, TwostageWarning

required("onnxruntime", "the [onnx] extra is not installed")

TEXTS = ["apple pie recipe", "car repair", "how to fix an engine", "a"]
WORDS = sorted({w for t in TEXTS for w in t.split()} | {"first", "example", "sentence", "second", "one"})


def _tiny_bi_encoder(folder: Path, seed: int) -> str:
    from tiny_models import save_tiny_bi_encoder

    return str(save_tiny_bi_encoder(folder, WORDS, seed=seed))


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


@pytest.mark.parametrize(
    ("options", "words"), [("ro,size=64k", "read-only file system"), ("size=4k", "no space left on the device")]
)
def test_an_unwritable_cache_is_one_error_naming_it(models, tmp_path, monkeypatch, recwarn, options, words):
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)], capture_output=True, text=True)
    if r.returncode:
        optional(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs root")
    try:
        monkeypatch.setenv("TWOSTAGE_CACHE", str(disk))
        with pytest.raises(CacheUnusableError) as raised:
            _embed(models[0])
        # no option turns this cache off: the variable that chose its folder is the fix
        assert str(raised.value) == (
            f"the ONNX cache {disk / 'onnx'} (under TWOSTAGE_CACHE={disk}) cannot be used: {words}; choose a folder "
            "you can write: TWOSTAGE_CACHE=DIR"
        )
        assert not [w for w in recwarn if issubclass(w.category, TwostageWarning)]
        assert not [p for p in disk.rglob("*") if p.is_file()]  # no partial export left on the full disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_an_export_by_another_exporter_is_made_again_without_a_warning(models, cache):
    """A sound export recorded for another exporter (an older opset, another torch) is what a cache filled by an
    older twostage holds: a cold cache would export with this one, so it is exported again, quietly, and the
    record then names this exporter."""
    import warnings

    first, _ = _embed(models[0])
    folder = _folder(cache)
    entry = json.loads((folder / "entry.json").read_text())
    assert entry["exporter"]["opset"] == 17 and set(entry["exporter"]) == {
        "opset",
        "torch",
        "transformers",
        "onnx",
        "onnxruntime",
    }
    old = entry | {"exporter": entry["exporter"] | {"opset": 13, "torch": "1.13.1"}}
    (folder / "entry.json").write_text(json.dumps(old))
    stamp = (folder / "model.onnx").stat().st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error", TwostageWarning)  # no warning: nothing is damaged
        again, _ = _embed(models[0])
    assert np.array_equal(again, first) and (folder / "model.onnx").stat().st_mtime_ns != stamp
    assert json.loads((folder / "entry.json").read_text())["exporter"] == entry["exporter"]
    assert not (cache / "damaged").exists()
