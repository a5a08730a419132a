"""The shared model-input pipeline (toolkit.models.inputs): tokenised once, exact on the CPU, out-of-memory
retries, and the precision/device errors. Oracles: the model's own Hugging Face tokenizer call and
sentence-transformers' own preprocess + forward (the path before the pipeline and the native BERT)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from toolkit.errors import ConfigError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TEXTS = [
    "apple pie recipe with cinnamon",
    "",
    "   leading and trailing spaces   ",
    "Ünïcödé naïve café, 東京 and emoji 🙂",
    "word " * 400,  # truncated at the maximum length
    "car repair",
    "how to fix an engine that will not start in the cold",
    "a",
] * 3


@pytest.fixture(scope="module")
def bi(minilm):
    from toolkit.reranking.torch_backend import BiEncoder

    return BiEncoder(minilm, "cpu", 4)


@pytest.fixture(scope="module")
def st_minilm(minilm):
    """The oracle: sentence-transformers' own model."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm, device="cpu")


@pytest.fixture(scope="module")
def ce(tiny_cross_encoder):
    from toolkit.reranking.torch_backend import CrossEncoderReranker

    return CrossEncoderReranker(tiny_cross_encoder, "cpu", 4, 24)


def _old_embed(model, texts, batch_size):
    """The path before the pipeline: tokenise for lengths, then sentence-transformers' preprocess per batch."""
    import torch

    from toolkit.models import batched_by_length

    enc = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    lengths = np.array([len(x) for x in enc["input_ids"]])

    def forward(batch):
        with torch.inference_mode():
            emb = model(model.preprocess(batch))["sentence_embedding"]
            return torch.nn.functional.normalize(emb.float(), p=2, dim=1).numpy()

    return batched_by_length(texts, lengths, batch_size, forward)


def test_token_ids_are_the_hf_tokenizers(bi, ce, st_minilm, minilm, tiny_cross_encoder):
    from transformers import AutoTokenizer

    from toolkit.models.inputs import Tokenizer

    hf = st_minilm.tokenizer
    for tokenizer in (Tokenizer(hf, 32), bi._pipeline.tokenizer):  # from the HF tokenizer, from tokenizer.json
        tokens = tokenizer.encode(TEXTS)
        ref = hf(TEXTS, truncation="longest_first", max_length=tokenizer.max_length)["input_ids"]
        assert tokens.lengths.tolist() == [len(r) for r in ref]
        assert tokens.ids.tolist() == [i for r in ref for i in r]
    assert bi._pipeline.tokenizer.pad_id == hf.pad_token_id
    pairs = [("apple pie " * 20, t) for t in TEXTS]
    hf = AutoTokenizer.from_pretrained(tiny_cross_encoder)
    got = ce._pipeline.tokenizer.encode(pairs)
    ref = hf([a for a, _ in pairs], [b for _, b in pairs], truncation="longest_first", max_length=24)
    assert got.ids.tolist() == [i for r in ref["input_ids"] for i in r]
    assert got.type_ids.tolist() == [i for r in ref["token_type_ids"] for i in r]


def test_bi_encoder_embeddings_are_bit_identical_to_the_per_batch_path(bi, st_minilm):
    """The native BERT through the pipeline against sentence-transformers' model through the old path."""
    assert bi.describe()["implementation"].startswith("native BERT")
    new = bi.embed(TEXTS)
    old = _old_embed(st_minilm, TEXTS, 4)
    assert new.dtype == np.float32 and new.shape == (len(TEXTS), 384)
    assert np.array_equal(new, old)


def test_every_text_is_tokenised_exactly_once(bi, monkeypatch):
    """One batch call over all the texts, nothing else tokenises."""
    tok = bi._pipeline.tokenizer
    calls = []
    real = tok._rust.encode_batch_fast if hasattr(tok._rust, "encode_batch_fast") else tok._rust.encode_batch

    class Counting:
        def __getattr__(self, name):
            return getattr(tok._rust_real, name)

        def encode_batch_fast(self, inputs, **kw):
            calls.append(list(inputs))
            return real(inputs, **kw)

        encode_batch = encode_batch_fast

    tok._rust_real = tok._rust
    monkeypatch.setattr(tok, "_rust", Counting())
    before = tok.inputs_tokenized
    bi.embed(TEXTS)
    assert tok.inputs_tokenized - before == len(TEXTS)
    assert sorted(t for c in calls for t in c) == sorted(TEXTS) and len(calls) == 1


def test_cross_encoder_scores_are_the_models_logits(ce):
    """Batch size 1: the same batches as sentence-transformers' predict, so the same bits; batched across
    queries, the scores move in the last float bits only (batch composition)."""
    import torch
    from sentence_transformers import CrossEncoder

    from toolkit.reranking.torch_backend import CrossEncoderReranker

    q = "apple pie"
    one = CrossEncoderReranker(ce.model_name, "cpu", 1, 24)
    assert one.describe()["implementation"].startswith("native BERT")
    ref = CrossEncoder(ce.model_name, device="cpu", max_length=24).predict(
        [(q, t) for t in TEXTS], batch_size=1, activation_fn=torch.nn.Identity(), show_progress_bar=False
    )
    assert np.array_equal(one.score(q, TEXTS), np.asarray(ref, dtype=np.float32).astype(np.float64))
    many = ce.score_many([(q, TEXTS), ("car", TEXTS[:3]), ("none", [])])
    assert [len(m) for m in many] == [len(TEXTS), 3, 0]
    assert np.allclose(many[0], ref, atol=1e-6) and np.allclose(many[1], ce.score("car", TEXTS[:3]), atol=1e-6)


def test_cuda_batching_on_the_cpu_pads_to_eight_and_windows(bi):
    """The CUDA layout (windows sorted on their own, widths rounded to 8) run on the CPU: the same
    embeddings to float rounding (padding positions are masked)."""
    from toolkit.models.inputs import ModelPipeline

    p = ModelPipeline(bi._pipeline.tokenizer, bi._embed_forward, "cpu", 4, window=10, pad_multiple=8)
    got = p.run(TEXTS)
    assert p.stats.padded_tokens % 8 == 0 and p.stats.padded_tokens > p.stats.tokens
    assert np.allclose(got, bi.embed(TEXTS), atol=2e-6)


def test_out_of_memory_batch_is_retried_smaller(bi, monkeypatch):
    import torch

    from toolkit.models.inputs import ModelPipeline

    real = bi._embed_forward
    seen = []

    def forward(features):
        rows = features["input_ids"].shape[0]
        seen.append(rows)
        if rows > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(features)

    p = ModelPipeline(bi._pipeline.tokenizer, forward, "cpu", 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = p.run(TEXTS)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(said) == 2 and "retrying in batches of 4" in said[0] and "retrying in batches of 2" in said[1]
    assert p.stats.oom_splits == 2 and p.max_rows == 2
    assert max(seen[seen.index(2) :]) == 2  # once halved, later batches start at the smaller size
    assert np.allclose(got, bi.embed(TEXTS), atol=2e-6)

    def never(features):
        raise RuntimeError("CUDA error: out of memory")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigError, match=r"--batch-size 1: one input of \d+ tokens does not fit"):
            ModelPipeline(bi._pipeline.tokenizer, never, "cpu", 4).run(TEXTS)

    def other(features):
        raise ValueError("not a memory problem")

    with pytest.raises(ValueError, match="not a memory problem"):
        ModelPipeline(bi._pipeline.tokenizer, other, "cpu", 4).run(TEXTS)


def test_precision_and_device_errors_name_the_setting():
    import torch

    from toolkit.models import PRECISION_EFFECTS, resolve_device, resolve_precision

    assert resolve_precision("auto", "cuda") == "fp32" and resolve_precision("auto", "cpu") == "fp32"
    for p in ("fp16", "bf16", "tf32"):
        with pytest.raises(ConfigError, match=rf"--precision {p} needs --device cuda"):
            resolve_precision(p, "cpu")
        assert resolve_precision(p, "cuda:0") == p and p in PRECISION_EFFECTS
    with pytest.raises(ConfigError, match="--precision must be one of"):
        resolve_precision("int4", "cuda")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="--device cuda: CUDA is not available"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match="--batch-size must be >= 1"):
        from toolkit.models.inputs import ModelPipeline

        ModelPipeline(None, None, "cpu", 0)


def test_sidecar_states_the_precision_effect(bi, ce):
    assert bi.describe()["precision"] == "fp32" and bi.describe()["precision_effect"].startswith("none: exact")
    assert ce.describe()["precision_effect"].startswith("none: exact")
