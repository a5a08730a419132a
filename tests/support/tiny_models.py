"""Tiny model folders with random weights, built in a test from a config. ``save_tiny_bert``: a word-piece
vocabulary of the given words, the fast tokenizer's files, and the weights of a ``BertModel`` (a bi-encoder's
body or a dense encoder) or, with ``classifier=True``, a ``BertForSequenceClassification`` with one logit (a
cross-encoder). ``save_tiny_bi_encoder``: that body as a sentence-transformers folder (mean pooling, Normalize),
16 dimensions. ``save_tiny_t5``: a monoT5-shaped ``T5ForConditionalGeneration`` with a unigram tokenizer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def save_tiny_bert(
    folder: Path,
    words: Iterable[str],
    *,
    seed: int,
    hidden: int = 16,
    layers: int = 1,
    heads: int = 2,
    classifier: bool = False,
    init_std: float = 0.02,
) -> Path:
    """Write the model into ``folder`` (created if absent; the weights seeded by ``seed``, drawn with ``init_std``:
    transformers' 0.02 gives a tiny classifier nearly equal logits) and return it."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = [*SPECIAL, *words]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab=str(folder / "vocab.txt")).save_pretrained(folder)  # transformers 5 ignores vocab_file=
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=init_std,
        **({"num_labels": 1} if classifier else {}),
    )
    (BertForSequenceClassification if classifier else BertModel)(config).save_pretrained(folder)
    return folder


def save_tiny_bi_encoder(folder: Path, words: Iterable[str], *, seed: int) -> Path:
    """A sentence-transformers bi-encoder in ``folder`` (made here, absent before): ``save_tiny_bert``'s 1-layer
    body with 16 dimensions, mean pooling and Normalize, sequences up to 32 tokens. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    save_tiny_bert(folder, words, seed=seed)
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
    return folder


def save_tiny_t5(folder: Path, words: Iterable[str], *, seed: int, hidden: int = 16, init_std: float = 1.0) -> Path:
    """A monoT5-shaped folder: a ``T5ForConditionalGeneration`` with random weights (seeded by ``seed``) and a
    fast unigram tokenizer whose pieces are ``▁WORD`` for each of ``words`` (plus ``false`` and ``true``, the
    tokens a monoT5 reranker reads) and the single letters, built here without a download."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pieces = sorted({*words, "false", "true"})
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -3.0)]
    vocab += [("▁" + w, -1.0) for w in pieces] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz0123456789:"]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=len(vocab),
        d_model=hidden,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        initializer_factor=init_std,
    )
    T5ForConditionalGeneration(config).save_pretrained(folder)
    return folder


#: a chat template for the tiny causal LM: each message as <role>content, then <assistant> to answer
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<assistant>"
    "{% endif %}"
)


def save_tiny_causal_lm(folder: Path, *, seed: int, hidden: int = 16) -> Path:
    """A ``GPT2LMHeadModel`` with random weights (seeded by ``seed``) and a character-level fast tokenizer (each
    printable ASCII character one token, ``<unk>`` for the rest, ``<eos>`` its end and padding), with a chat
    template (``TINY_CHAT_TEMPLATE``): a local causal LM for the listwise reranker, built without a download."""
    import string

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chars = sorted(set(string.printable) - set("\x0b\x0c"))
    vocab = {"<unk>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>")
    fast.chat_template = TINY_CHAT_TEMPLATE
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(vocab), n_positions=4096, n_embd=hidden, n_layer=1, n_head=2, bos_token_id=1, eos_token_id=1
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder
