"""The oracle of a text's embedding: sentence-transformers' own tokenizer and modules on that text alone.

twostage pads every text to its own width (its token length rounded up to 8, at most the maximum length) and
batches texts of one width, so that a text's vector is the same bits whatever it is batched with. The oracle
takes the text on its own, through sentence-transformers' ``preprocess`` (its tokenizer, its truncation),
pads the features to that width by hand (pad id, attention 0, token type 0) and runs the model's modules:
no neighbour at all. The rule is restated here, not imported, so a change of it in toolkit.models.batching fails
the tests that use this.
"""

from __future__ import annotations

import numpy as np

MULTIPLE = 8


def width(length: int, max_length: int) -> int:
    """``length`` rounded up to a multiple of 8, never beyond ``max_length`` unless already longer."""
    rounded = -(-length // MULTIPLE) * MULTIPLE
    return max(length, min(rounded, max_length))


def embed_alone(model, texts: list[str]) -> np.ndarray:
    """L2-normalised float32 embeddings of ``texts`` by the sentence-transformers ``model``, each text alone."""
    import torch

    pad_id = model.tokenizer.pad_token_id or 0
    rows = []
    with torch.inference_mode():
        for text in texts:
            features = model.preprocess([text])
            n = int(features["input_ids"].shape[1])
            extra = width(n, int(model.max_seq_length)) - n
            fill = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": 0}
            padded = {
                k: torch.nn.functional.pad(v, (0, extra), value=fill[k]) if k in fill else v
                for k, v in features.items()
            }
            emb = model(padded)["sentence_embedding"]
            rows.append(torch.nn.functional.normalize(emb.float(), p=2, dim=1).numpy()[0])
    return np.stack(rows)
