"""The diagnosis page's line on model precision: what each reranked run's model ran in, where that is not
fp32, and the change it causes against fp32 as the run's ``twostage rerank`` sidecar states it
(``reranker.precision_effect``: fp16, bf16, tf32 on CUDA; ``--backend onnx-int8``'s int8 weights)."""

from __future__ import annotations

from collections.abc import Mapping


def precision_line(metas: Mapping[str, Mapping]) -> str | None:
    """``name: backend precision: effect`` for each run (by name: its sidecar) whose reranker did not run
    exact fp32, joined by ``; ``; None when every one did (or no sidecar says)."""
    parts = []
    for name, meta in metas.items():
        reranker = (meta or {}).get("reranker") or {}
        precision = reranker.get("precision")
        if not precision or precision in ("fp32", "auto"):
            continue
        effect = reranker.get("precision_effect") or "its change against fp32 is not recorded in the sidecar"
        parts.append(f"{name}: {reranker.get('backend', 'torch')} {precision}: {effect}")
    return "; ".join(parts) or None
