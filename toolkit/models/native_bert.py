"""BERT models in plain torch, for short calls: no transformers or sentence-transformers import.

Importing sentence-transformers (and through it transformers' model machinery, torch.distributed,
torch._dynamo, sympy, scipy) costs more than importing torch itself: on a 2-core CPU 3.5-4.7 s of a
small ``twostage rerank`` against 1.1 s for torch (docs/gpu.md). The common reranker models are a
BERT with mean or CLS pooling (all-MiniLM-L6-v2 and its kind) or a BERT with a classification head
(cross-encoders such as ms-marco-MiniLM-L-6-v2); this module runs those with the same operations in
the same order as transformers' ``BertModel`` (sdpa attention) and sentence-transformers' pooling, so
the outputs are bit-identical on a CPU (tests/models/test_native_bert.py checks it against both).

``plan`` says whether a model folder is one of those (``None``: anything else, which the callers run
through sentence-transformers as before): a ``bert`` config (absolute positions, gelu, an encoder),
``model.safetensors``, ``tokenizer.json``; a bi-encoder's ``modules.json`` exactly Transformer, Pooling
(mean or CLS), optionally Normalize, with no prompts and no tokenizer settings of its own; a
cross-encoder's ``BertForSequenceClassification`` without a ``modules.json``.

torch is imported by this module: import it only when a model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from toolkit.models import profiling, read_json_object


@dataclass(frozen=True)
class Plan:
    """A model folder the native BERT runs."""

    folder: Path
    kind: str  # bi-encoder | cross-encoder
    config: dict
    max_length: int
    pooling: str = "mean"  # bi-encoder: mean | cls
    normalize: bool = False  # bi-encoder: a Normalize module after the pooling


def _bert_config(folder: Path) -> dict | None:
    config = read_json_object(folder / "config.json")
    supported = (
        config.get("model_type") == "bert"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and config.get("hidden_act") == "gelu"
        and not config.get("is_decoder")
        and not config.get("add_cross_attention")
        and not config.get("chunk_size_feed_forward")
        and (folder / "model.safetensors").is_file()
        and (folder / "tokenizer.json").is_file()
        and _tokenizer_agrees(folder)
    )
    return config if supported else None


def _tokenizer_agrees(folder: Path) -> bool:
    """Whether ``tokenizer.json`` alone tokenises as the Hugging Face tokenizer does: a BERT tokenizer whose
    ``tokenizer_config.json`` asks for other lower-casing or accent stripping than the file's normaliser
    gets a new normaliser from transformers (then sentence-transformers runs the model)."""
    normalizer = read_json_object(folder / "tokenizer.json").get("normalizer") or {}
    settings = read_json_object(folder / "tokenizer_config.json")
    pairs = {
        "do_lower_case": "lowercase",
        "strip_accents": "strip_accents",
        "tokenize_chinese_chars": "handle_chinese_chars",
    }
    asked = {k: settings[k] for k in pairs if k in settings}
    if normalizer.get("type") != "BertNormalizer":
        return not asked
    return all(normalizer.get(pairs[k]) == v for k, v in asked.items())


def _default_max_length(folder: Path, config: dict) -> int:
    """sentence-transformers' default: the tokenizer's ``model_max_length`` capped at the positions."""
    positions = int(config.get("max_position_embeddings", 512))
    declared = read_json_object(folder / "tokenizer_config.json").get("model_max_length")
    return min(int(declared), positions) if isinstance(declared, int | float) and declared > 0 else positions


def _bi_encoder(folder: Path, config: dict, max_length: int | None) -> Plan | None:
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_json

    try:  # through the inputs door: a regular file, bounded in size and nesting
        modules_list = read_json(folder / "modules.json", max_bytes=64 << 20)
    except InputFormatError:
        return None
    if not isinstance(modules_list, list) or not all(isinstance(m, dict) for m in modules_list):
        return None
    types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules_list]
    if types not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    if modules_list[0].get("path", "") not in ("", "."):
        return None
    st = read_json_object(folder / "config_sentence_transformers.json")
    if st.get("prompts") or st.get("default_prompt_name"):
        return None
    sbert = read_json_object(folder / "sentence_bert_config.json")
    if set(sbert) - {"max_seq_length", "do_lower_case"} or sbert.get("do_lower_case"):
        return None
    pooling = read_json_object(folder / str(modules_list[1].get("path", "1_Pooling")) / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    mode = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(next(iter(modes), ""))
    if len(modes) != 1 or mode is None or pooling.get("include_prompt") is False:
        return None
    if max_length is None:
        declared = sbert.get("max_seq_length")
        max_length = int(declared) if isinstance(declared, int) else _default_max_length(folder, config)
    return Plan(folder, "bi-encoder", config, max_length, mode, types[-1] == "Normalize")


def plan(model_path: str, kind: str, max_length: int | None = None) -> Plan | None:
    """The native plan of a local model folder for ``kind``, or None (run it through sentence-transformers)."""
    folder = Path(model_path)
    config = _bert_config(folder) if folder.is_dir() else None
    if config is None:
        return None
    if kind == "bi-encoder":
        return _bi_encoder(folder, config, max_length)
    if kind != "cross-encoder" or (folder / "modules.json").exists():
        return None
    if config.get("architectures") != ["BertForSequenceClassification"]:
        return None
    if max_length is None:
        max_length = _default_max_length(folder, config)
    return Plan(folder, "cross-encoder", config, max_length)


# ------------------------------------------------------------------ the network
# Every parameter comes from the weights file: no random initialisation (the meta device would avoid it
# too, but its first use imports torch's meta registrations, seconds on a small CPU).
class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class _LayerNorm(nn.LayerNorm):
    def reset_parameters(self) -> None:
        pass


class _Embeddings(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h = c["hidden_size"]
        self.word_embeddings = _Embedding(c["vocab_size"], h, padding_idx=c.get("pad_token_id"))
        self.position_embeddings = _Embedding(c["max_position_embeddings"], h)
        self.token_type_embeddings = _Embedding(c.get("type_vocab_size", 2), h)
        self.LayerNorm = _LayerNorm(h, eps=c.get("layer_norm_eps", 1e-12))

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(x + self.position_embeddings(positions))


class _Dense(nn.Module):
    """``dense`` then LayerNorm of the sum with the block's input (BertSelfOutput, BertOutput)."""

    def __init__(self, n_in: int, h: int, eps: float):
        super().__init__()
        self.dense = _Linear(n_in, h)
        self.LayerNorm = _LayerNorm(h, eps=eps)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class _SelfAttention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.head_size = h // self.heads
        self.query, self.key, self.value = _Linear(h, h), _Linear(h, h), _Linear(h, h)

    def forward(self, x, mask):
        shape = (*x.shape[:-1], -1, self.head_size)
        q = self.query(x).view(*shape).transpose(1, 2)
        k = self.key(x).view(*shape).transpose(1, 2)
        v = self.value(x).view(*shape).transpose(1, 2)
        out = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.head_size**-0.5, is_causal=False
        )
        return out.transpose(1, 2).contiguous().reshape(*x.shape[:-1], -1).contiguous()


class _Attention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.self = _SelfAttention(c)
        self.output = _Dense(c["hidden_size"], c["hidden_size"], c.get("layer_norm_eps", 1e-12))

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class _Intermediate(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.dense = _Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _Dense(c["intermediate_size"], c["hidden_size"], c.get("layer_norm_eps", 1e-12))

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class _Encoder(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))


class _Pooler(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.dense = _Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, hidden):
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    """transformers' ``BertModel`` at inference (sdpa attention): the last hidden state."""

    def __init__(self, c: dict):
        super().__init__()
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)

    def forward(self, input_ids, attention_mask, token_type_ids):
        x = self.embeddings(input_ids, token_type_ids)
        mask = None  # no padding: no mask (as transformers' sdpa path), else a boolean (B, 1, L, L) view
        if not bool(attention_mask.all()):
            b, n = attention_mask.shape
            mask = attention_mask.bool()[:, None, None, :].expand(b, 1, n, n)
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return x


class SentenceEncoder(nn.Module):
    """A sentence-transformers bi-encoder: BERT, mean or CLS pooling, optionally L2-normalised."""

    def __init__(self, p: Plan):
        super().__init__()
        self.bert = BertModel(p.config)
        self.pooling = p.pooling
        self.normalize = p.normalize

    def forward(self, features: dict):
        mask = features["attention_mask"]
        tokens = self.bert(features["input_ids"], mask, features["token_type_ids"])
        if self.pooling == "cls":
            first = mask.to(torch.int).argmax(dim=1)
            emb = torch.gather(tokens, 1, first[:, None, None].expand(-1, 1, tokens.shape[-1])).squeeze(1)
        else:  # sentence-transformers' Pooling, mean mode
            acc = torch.float32 if tokens.dtype in (torch.float16, torch.bfloat16) else tokens.dtype
            m = mask.unsqueeze(-1).to(tokens.dtype)
            total = (tokens * m).sum(dim=1, dtype=acc)
            count = torch.clamp(m.sum(dim=1, dtype=acc), min=1e-9)
            emb = (total / count).to(tokens.dtype)
        return nn.functional.normalize(emb, p=2, dim=-1) if self.normalize else emb


class PairClassifier(nn.Module):
    """transformers' ``BertForSequenceClassification`` at inference: the logits."""

    def __init__(self, p: Plan):
        super().__init__()
        labels = p.config.get("id2label")
        self.bert = BertModel(p.config)
        self.pooler = _Pooler(p.config)
        self.classifier = _Linear(p.config["hidden_size"], len(labels) if labels else p.config.get("num_labels", 2))

    def forward(self, features: dict):
        hidden = self.bert(features["input_ids"], features["attention_mask"], features["token_type_ids"])
        return self.classifier(self.pooler(hidden))


class Unsupported(Exception):
    """The folder's weights do not fit the native BERT (the caller falls back to sentence-transformers)."""


def _state_dict(p: Plan) -> dict:
    """The weights under this module's names (a bi-encoder's ``bert.`` prefix added where absent)."""
    from safetensors.torch import load

    with profiling.phase("read weights", part_of="model load"):  # read here, not paged in by the first batch
        from toolkit.guard.readers import open_regular

        with open_regular(p.folder / "model.safetensors") as fh:  # a regular file (never a FIFO or a device)
            raw = load(fh.read())
    out = {}
    for name, tensor in raw.items():
        if name.endswith(("position_ids", "token_type_ids")) or name.startswith("cls."):
            continue  # buffers and pre-training heads: unused
        if p.kind == "cross-encoder":
            name = name.replace("bert.pooler.", "pooler.", 1)
        elif not name.startswith("bert."):
            name = "bert." + name
        if name.startswith("bert.pooler."):
            continue  # a bi-encoder's pooler: sentence-transformers never runs it
        out[name] = tensor.float() if tensor.is_floating_point() else tensor  # fp32, as --precision expects
    return out


def build(p: Plan, device: str) -> nn.Module:
    """The network of ``p`` with its weights, in eval mode on ``device``; ``Unsupported`` when its
    weights are not those of the architecture its config declares."""
    net: nn.Module = SentenceEncoder(p) if p.kind == "bi-encoder" else PairClassifier(p)  # uninitialised
    state = _state_dict(p)
    expected = set(net.state_dict())
    if set(state) != expected:
        missing, extra = sorted(expected - set(state))[:3], sorted(set(state) - expected)[:3]
        raise Unsupported(f"weights do not match a BERT {p.kind}: missing {missing}, unexpected {extra}")
    net.load_state_dict(state, assign=True)
    return net.eval().to(device)


def rust_tokenizer(p: Plan):
    """The folder's ``tokenizer.json`` and its padding id."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(p.folder / "tokenizer.json"))
    pad = read_json_object(p.folder / "tokenizer_config.json").get("pad_token") or "[PAD]"
    pad = pad.get("content") if isinstance(pad, dict) else pad
    pad_id = tok.token_to_id(str(pad))
    return tok, int(pad_id if pad_id is not None else p.config.get("pad_token_id") or 0)
