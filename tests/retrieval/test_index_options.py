"""IndexOptions (toolkit.retrieval.index_options): the options of ``index``, and the dense encoder they describe."""

from __future__ import annotations

import dataclasses

import pytest

from toolkit.errors import OptionConflictError
from toolkit.retrieval.index_options import IndexOptions
from toolkit.retrieval.indexing import EncoderSettings


def test_the_dense_encoder_of_the_options_is_their_encoder_keywords():
    options = IndexOptions(
        dense=True,
        encoder="some/encoder",
        pooling="cls",
        normalize=False,
        max_length=128,
        batch_size=7,
        query_prefix="query: ",
        doc_prefix="passage: ",
        device="cpu",
        precision="fp16",
    )
    encoder = EncoderSettings.of(options)
    assert dataclasses.asdict(encoder) == {
        "model": "some/encoder",
        "pooling": "cls",
        "normalize": False,
        "max_length": 128,
        "batch_size": 7,
        "query_prefix": "query: ",
        "doc_prefix": "passage: ",
        "device": "cpu",  # EncoderSettings' own: where it runs is resolved by on_device
        "precision": "fp32",
    }
    assert encoder.on_device(options.device, "auto") == dataclasses.replace(encoder, device="cpu", precision="fp32")


def test_the_default_encoder_is_the_commands():
    assert EncoderSettings.of(IndexOptions()) == EncoderSettings("all-MiniLM-L6-v2")


def test_ray_without_dense_is_refused_where_the_options_are_built():
    with pytest.raises(OptionConflictError, match="--ray distributes dense encoding"):
        IndexOptions(ray="auto")
