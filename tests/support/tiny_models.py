"""Tiny BERT folders with random weights, built in a test from a config: a word-piece vocabulary of the given
words, the fast tokenizer's files, and the weights of a ``BertModel`` (a bi-encoder's body or a dense encoder)
or, with ``classifier=True``, a ``BertForSequenceClassification`` with one logit (a cross-encoder)."""

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
) -> Path:
    """Write the model into ``folder`` (created if absent; the weights seeded by ``seed``) and return it."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = [*SPECIAL, *words]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=32,
        max_position_embeddings=64,
        **({"num_labels": 1} if classifier else {}),
    )
    (BertForSequenceClassification if classifier else BertModel)(config).save_pretrained(folder)
    return folder
