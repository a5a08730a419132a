"""The shared model-input pipeline (toolkit.models.batching): tokenised once, exact on the CPU, each input's output
independent of the inputs batched with it, out-of-memory retries, and the precision/device errors. Oracles: the
model's own Hugging Face tokenizer call, and sentence-transformers' own preprocess + forward of each text alone,
padded to its width (tests/support/embedding_oracle.py)."""

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

#: Texts of one token length (one word-piece per word): batches of several rows form.
SAME_LENGTH = [
    f"{a} {b} recipe with {c}" for a in ("apple", "pear", "plum") for b in ("pie", "tart") for c in ("honey", "cream")
]


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


def test_token_ids_are_the_hf_tokenizers(bi, ce, st_minilm, minilm, tiny_cross_encoder):
    from transformers import AutoTokenizer

    from toolkit.models.batching import Tokenizer

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


def test_bi_encoder_embeddings_are_bit_identical_to_each_text_alone(bi, st_minilm):
    """The native BERT through the pipeline, in batches of 4, against sentence-transformers' model on each text
    alone padded to its width: the same bits, so no text's vector depends on the texts batched with it."""
    from embedding_oracle import embed_alone

    assert bi.describe()["implementation"].startswith("native BERT")
    texts = TEXTS + SAME_LENGTH
    new = bi.embed(texts)
    assert new.dtype == np.float32 and new.shape == (len(texts), 384)
    assert np.array_equal(new, embed_alone(st_minilm, texts))


def test_a_vector_does_not_depend_on_its_batch_neighbours(bi):
    """The same texts among other texts, in other orders, batch sizes and layouts (exact lengths on one side,
    CUDA's fixed rows on the other): each text's vector the same bits as alone."""
    from toolkit.models.batching import ModelPipeline

    texts = TEXTS[:8] + SAME_LENGTH
    alone = np.stack([bi.embed([t])[0] for t in texts])
    others = ["word " * n for n in (3, 5, 9, 40)] + [t.replace("recipe", "guide") for t in SAME_LENGTH]
    mixed = others[:3] + texts[::-1] + others[3:]
    for batch_size, fixed_rows in ((1, False), (3, False), (64, False), (5, True)):
        p = ModelPipeline(bi._pipeline.tokenizer, bi._embed_forward, "cpu", batch_size, fixed_rows=fixed_rows)
        got = p.run(mixed)
        assert np.array_equal(got[3 : 3 + len(texts)][::-1], alone), batch_size
        assert p.stats.batches < len(mixed) or batch_size == 1  # batches of several rows did form
    assert np.array_equal(bi.embed(texts), alone)


def test_batches_hold_one_width_each():
    from toolkit.models.batching import WIDTH_MULTIPLE, plan_batches, widths

    lengths = np.array([5, 9, 5, 12, 9, 9, 5, 3, 16, 15])
    batches = plan_batches(lengths, 2)  # multiple 1: one exact length per batch
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    assert [lengths[b].tolist() for b in batches] == [[16], [15], [12], [9, 9], [9], [5, 5], [5], [3]]
    assert [b.tolist() for b in batches][3:5] == [[1, 4], [5]]  # input order within a width
    assert WIDTH_MULTIPLE == 8
    assert widths(lengths, 8, 14).tolist() == [8, 14, 8, 14, 14, 14, 8, 8, 16, 15]  # capped unless longer
    rounded = plan_batches(lengths, 4, 8, 14)
    assert [widths(lengths[b], 8, 14).tolist() for b in rounded] == [[16], [15], [14] * 4, [8] * 4]


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
    """Batch size 1: the logit of the model sentence-transformers' CrossEncoder loads, on the pair padded to its
    width, bit for bit; batched across queries, the classification head (one output column, a kernel that
    changes with the number of pairs) moves the scores in the last float bits only."""
    import torch
    from embedding_oracle import width
    from sentence_transformers import CrossEncoder

    from toolkit.reranking.torch_backend import CrossEncoderReranker

    q = "apple pie"
    one = CrossEncoderReranker(ce.model_name, "cpu", 1, 24)
    assert one.describe()["implementation"].startswith("native BERT")
    oracle = CrossEncoder(ce.model_name, device="cpu", max_length=24)
    ref = []
    with torch.inference_mode():
        for t in TEXTS:
            n = len(oracle.tokenizer([q], [t], truncation="longest_first", max_length=24)["input_ids"][0])
            f = oracle.tokenizer(
                [q], [t], truncation="longest_first", max_length=width(n, 24), padding="max_length", return_tensors="pt"
            )
            ref.append(float(oracle.model(**f).logits[0, -1]))
    assert np.array_equal(one.score(q, TEXTS), np.asarray(ref, dtype=np.float32).astype(np.float64))
    many = ce.score_many([(q, TEXTS), ("car", TEXTS[:3]), ("none", [])])
    assert [len(m) for m in many] == [len(TEXTS), 3, 0]
    assert np.allclose(many[0], ref, atol=1e-6) and np.allclose(many[1], ce.score("car", TEXTS[:3]), atol=1e-6)


def test_cuda_batching_on_the_cpu_pads_to_eight_keeps_one_shape_per_width_and_windows(bi, monkeypatch):
    """The CUDA layout (windows grouped on their own, widths rounded to 8, every batch ``batch_size`` rows) run
    on the CPU: the same embeddings to float rounding (padding positions are masked), each text's the same bits
    among any neighbours, and one shape per width."""
    from toolkit.models.batching import ModelPipeline

    shapes = []

    def forward(features):
        shapes.append(tuple(features["input_ids"].shape))
        return bi._embed_forward(features)

    def cuda_layout(texts):
        p = ModelPipeline(bi._pipeline.tokenizer, forward, "cpu", 4, window=10, pad_multiple=8, fixed_rows=True)
        return p, p.run(texts)

    texts = TEXTS + SAME_LENGTH
    p, got = cuda_layout(texts)
    assert p.stats.padded_tokens % 8 == 0 and p.stats.padded_tokens > p.stats.tokens and p.stats.filler_rows > 0
    assert {rows for rows, _ in shapes} == {4} and all(width % 8 == 0 for _, width in shapes)
    assert np.allclose(got, bi.embed(texts), atol=2e-6)
    _, alone = cuda_layout(["how to fix an engine that will not start in the cold"])
    _, among = cuda_layout([*SAME_LENGTH, "word " * 30, "how to fix an engine that will not start in the cold"])
    assert np.array_equal(alone[0], among[-1]) and np.array_equal(among[: len(SAME_LENGTH)], got[len(TEXTS) :])


def test_out_of_memory_batch_is_retried_smaller(bi, monkeypatch):
    import torch

    from toolkit.models.batching import ModelPipeline

    real = bi._embed_forward
    seen = []

    def forward(features):
        rows = features["input_ids"].shape[0]
        seen.append(rows)
        if rows > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(features)

    texts = ["word " * 300] * 8 + TEXTS  # a first batch of 8 inputs of one length
    p = ModelPipeline(bi._pipeline.tokenizer, forward, "cpu", 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = p.run(texts)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(said) == 2 and "retrying in batches of 4" in said[0] and "retrying in batches of 2" in said[1]
    assert p.stats.oom_splits == 2 and p.max_rows == 2
    assert max(seen[seen.index(2) :]) == 2  # once halved, later batches start at the smaller size
    assert np.array_equal(got, bi.embed(texts))  # on the CPU the number of rows changes no bit

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
        from toolkit.models.batching import ModelPipeline

        ModelPipeline(None, None, "cpu", 0)


def test_sidecar_states_the_precision_effect(bi, ce):
    assert bi.describe()["precision"] == "fp32" and bi.describe()["precision_effect"].startswith("none: exact")
    assert ce.describe()["precision_effect"].startswith("none: exact")
