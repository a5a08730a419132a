"""Tiny model folders with random weights, built in a test from a config. ``save_tiny_bert``: a word-piece
vocabulary of the given words, the fast tokenizer's files, and the weights of a ``BertModel`` (a bi-encoder's
body or a dense encoder) or, with ``classifier=True``, a ``BertForSequenceClassification`` with one logit (a
cross-encoder). ``save_tiny_t5``: a monoT5-shaped ``T5ForConditionalGeneration`` with a unigram tokenizer."""

from __future__ import annotations

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
