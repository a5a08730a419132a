"""The plain-torch BERT (toolkit.models.native_bert): which folders it runs, the same bits as sentence-transformers
(the oracle) for each pooling, the fallback to sentence-transformers for anything else, and a CLI rerank
that never imports sentence-transformers or transformers (what makes short calls short).
MiniLM's own comparison is in test_batching.py; here tiny random BERTs built from a config."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from samples import CANDIDATES

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TEXTS = ["apple pie recipe with cinnamon", "", "car repair", "a", "how to fix an engine " * 12, "pie"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A 2-layer BERT (random weights) saved with a word-piece tokenizer: the body of the bi-encoders below."""
    from tiny_models import save_tiny_bert

    words = sorted({w for t in TEXTS for w in t.split()} | {"engine"})
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), words, seed=1, layers=2, heads=4)


def _bi_encoder(tiny_bert, tmp_path, pooling: str, normalize: bool = True, **sbert) -> str:
    """A sentence-transformers folder: Transformer (tiny_bert's files), Pooling ``pooling``, Normalize."""
    folder = tmp_path / f"bi-{pooling}"
    folder.mkdir()
    for f in tiny_bert.iterdir():
        (folder / f.name).symlink_to(f)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 20, **sbert}))
    (folder / "1_Pooling").mkdir()
    modes = {f"pooling_mode_{m}": m == pooling for m in ("mean_tokens", "cls_token", "max_tokens")}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16, **modes}))
    return str(folder)


def _sentence_transformers_embed(folder: str, texts: list[str]) -> np.ndarray:
    """The oracle: sentence-transformers' own model on each text alone, padded to its width (twostage's batches
    give every text those bits, whatever it is batched with)."""
    from embedding_oracle import embed_alone
    from sentence_transformers import SentenceTransformer

    return embed_alone(SentenceTransformer(folder, device="cpu"), texts)


@pytest.mark.parametrize("pooling, normalize", [("mean_tokens", True), ("cls_token", False)])
def test_native_bi_encoder_is_bit_identical_to_sentence_transformers(tiny_bert, tmp_path, pooling, normalize):
    from toolkit.reranking.torch_backend import BiEncoder

    folder = _bi_encoder(tiny_bert, tmp_path, pooling, normalize)
    bi = BiEncoder(folder, "cpu", 3)
    d = bi.describe()
    assert d["implementation"] == "native BERT (toolkit.models.native_bert)" and d["max_length"] == 20
    got = bi.embed(TEXTS)
    assert np.array_equal(got, _sentence_transformers_embed(folder, TEXTS))


def test_other_folders_run_through_sentence_transformers(tiny_bert, tmp_path):
    """Max pooling, a lower-casing setting, no tokenizer.json: not the native BERT's; the same scores as before."""
    from toolkit.models import native_bert
    from toolkit.reranking.torch_backend import BiEncoder

    mean = _bi_encoder(tiny_bert, tmp_path, "mean_tokens")
    assert native_bert.plan(mean, "bi-encoder").pooling == "mean"
    assert native_bert.plan(mean, "cross-encoder") is None  # a modules.json: sentence-transformers decides
    assert native_bert.plan(str(tiny_bert), "bi-encoder") is None  # no modules.json
    maxed = _bi_encoder(tiny_bert, tmp_path, "max_tokens")
    assert native_bert.plan(maxed, "bi-encoder") is None
    bi = BiEncoder(maxed, "cpu", 3)
    assert bi.describe()["implementation"] == "sentence-transformers"
    assert np.array_equal(bi.embed(TEXTS), _sentence_transformers_embed(maxed, TEXTS))
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "sentence_bert_config.json").write_text('{"max_seq_length": 20, "do_lower_case": true}')
    for f in os.listdir(mean):
        if not (lower / f).exists():
            (lower / f).symlink_to(os.path.join(mean, f))
    assert native_bert.plan(str(lower), "bi-encoder") is None
    (lower / "sentence_bert_config.json").write_text('{"max_seq_length": 20}')
    assert native_bert.plan(str(lower), "bi-encoder") is not None
    config = json.loads((tiny_bert / "tokenizer_config.json").read_text())
    (lower / "tokenizer_config.json").unlink()
    (lower / "tokenizer_config.json").write_text(json.dumps(config | {"do_lower_case": False}))
    assert native_bert.plan(str(lower), "bi-encoder") is None  # transformers would rebuild the normaliser
    (lower / "tokenizer.json").unlink()
    (lower / "sentence_bert_config.json").write_text('{"max_seq_length": 20}')
    assert native_bert.plan(str(lower), "bi-encoder") is None


def test_cross_encoder_plan_and_weights_that_do_not_fit(tiny_cross_encoder, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from toolkit.models import native_bert

    p = native_bert.plan(tiny_cross_encoder, "cross-encoder")
    assert p.kind == "cross-encoder" and p.max_length == 64  # the positions cap the tokenizer's length
    assert native_bert.plan(tiny_cross_encoder, "cross-encoder", 24).max_length == 24
    odd = tmp_path / "odd"
    odd.mkdir()
    for f in os.listdir(tiny_cross_encoder):
        if f != "model.safetensors":
            (odd / f).symlink_to(os.path.join(tiny_cross_encoder, f))
    sd = load_file(os.path.join(tiny_cross_encoder, "model.safetensors"))
    sd["classifier.extra"] = torch.zeros(1)
    save_file(sd, str(odd / "model.safetensors"))
    with pytest.raises(native_bert.Unsupported, match=r"unexpected \['classifier.extra'\]"):
        native_bert.build(native_bert.plan(str(odd), "cross-encoder"), "cpu")


def test_cli_rerank_imports_neither_sentence_transformers_nor_transformers(minilm, tmp_path):
    """A MiniLM rerank through the CLI, in a fresh interpreter: the model libraries it avoids are never
    imported, and --profile prints the time outside the model work against its unavoidable part."""
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    out = tmp_path / "r.trec"
    code = (
        "import sys, json; from toolkit.cli import main\n"
        "try:\n"
        f"    main(['rerank', '--candidates', {str(cands)!r}, '--model', 'all-MiniLM-L6-v2', '--device', 'cpu',"
        f" '--no-progress', '--profile', '--out', {str(out)!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(json.dumps([m for m in ('sentence_transformers', 'transformers') if m in sys.modules]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == []
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("profile:")]
    names = [ln.split(":", 1)[1].rsplit(" ", 2)[0].strip() for ln in lines]
    for phase in ("import torch", "model load", "read weights (part of model load)", "scoring", "total"):
        assert phase in names, r.stderr
    assert any(ln.startswith("profile: unavoidable (import torch + read weights) ") for ln in lines), r.stderr
    assert any(ln.startswith("profile: outside / unavoidable ") and ln.endswith("(target <= 1.5x)") for ln in lines)
    meta = json.loads((tmp_path / "r.trec.meta.json").read_text())
    assert meta["reranker"]["implementation"] == "native BERT (toolkit.models.native_bert)"
    assert set(meta["libraries"]) == {"torch"}


def test_profile_overhead_by_hand():
    from toolkit.models.profiling import overhead

    o = overhead({"total": 10.0, "scoring": 7.0, "import torch": 1.5, "read weights": 0.5, "model load": 0.9})
    assert o == {"outside": 3.0, "unavoidable": 2.0, "ratio": 1.5}
    assert overhead({"total": 1.0})["ratio"] == float("inf")


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_native_bert_runs_in_half_precision(minilm, tiny_cross_encoder, precision):
    """The casts --precision fp16/bf16 make on CUDA, run on the CPU: the native model's boolean mask and fp32
    pooling accumulator work in either dtype, the embeddings come back as float32 within cosine 0.999 of fp32
    and the cross-encoder's logits within 1e-2 (the GPU figures of each precision are measured by bench_gpu.py)."""
    from toolkit.models import apply_precision
    from toolkit.reranking.torch_backend import BiEncoder, CrossEncoderReranker

    texts = [t for t in TEXTS if t] + ["apple pie recipe with cinnamon and sugar " * 8]
    exact = BiEncoder(minilm, "cpu", 2).embed(texts)
    half = BiEncoder(minilm, "cpu", 2)
    apply_precision(half._net, precision)
    import torch

    assert next(half._net.parameters()).dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    got = half.embed(texts)
    assert got.dtype == np.float32 and got.shape == exact.shape and not np.array_equal(got, exact)
    cos = (got * exact).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(exact, axis=1)
    assert cos.min() > 0.999, cos
    ce = CrossEncoderReranker(tiny_cross_encoder, "cpu", 2, 24)
    want = ce.score("apple pie", texts)
    apply_precision(ce._net, precision)
    assert np.abs(ce.score("apple pie", texts) - want).max() < 1e-2
