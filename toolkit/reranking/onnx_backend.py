"""An optional faster bi-encoder backend: the model's transformer run by ONNX Runtime.

``twostage rerank --backend onnx`` exports the sentence-transformers model's transformer
(``torch.onnx.export``, the TorchScript exporter, dynamic batch and sequence axes) once into
``$TWOSTAGE_CACHE/onnx/<model fingerprint>/model.onnx`` (checked against its recorded sha256 whenever it is
read: ``toolkit.reranking.onnx_cache``) and runs it with ONNX Runtime;
``--backend onnx-int8`` runs a copy whose MatMul weights are quantised to int8 per output
channel (``onnxruntime.quantization.quantize_dynamic``; activations quantised on the fly). Pooling (mean or CLS, from the model's
``1_Pooling/config.json``) and L2 normalisation are done in numpy exactly as
sentence-transformers does them, with the same tokenizer and maximum length.

``onnx`` reproduces the torch embeddings to about 1e-6; ``onnx-int8`` moves them (cosine to
the exact embedding about 0.99) and can change the ranking: the benchmark (``scripts/bench_rerank.py``) prints the
speed-up and the nDCG@10 change. The default backend stays torch (exact).

onnxruntime, onnx and torch are imported inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from toolkit.errors import ConfigError
from toolkit.guard.readers import read_json
from toolkit.models import library_versions

log = logging.getLogger(__name__)

OPSET = 17
#: The libraries whose versions make an export what it is (the exporter, the model code, the quantiser).
EXPORTER_LIBRARIES = ("torch", "transformers", "onnx", "onnxruntime")


def _pipeline(model_dir: Path) -> tuple[str, bool, int | None]:
    """(pooling, normalize, max_seq_length) of a Transformer + Pooling [+ Normalize] sentence-transformers folder."""
    modules = model_dir / "modules.json"
    if not modules.is_file():
        raise ConfigError(
            f"--backend onnx needs a local sentence-transformers folder (modules.json); {model_dir} has none"
        )
    modules_list = read_json(modules)  # through the inputs door: a regular file, bounded in size and nesting
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules_list]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k not in ("Normalize",) for k in kinds[2:]):
        raise ConfigError(
            f"--backend onnx supports Transformer + Pooling [+ Normalize] models; {model_dir} has {kinds}"
        )
    pool_dir = next(m["path"] for m in modules_list if m.get("type", "").endswith("Pooling"))
    pool = read_json(model_dir / pool_dir / "config.json")
    if pool.get("pooling_mode_mean_tokens"):
        pooling = "mean"
    elif pool.get("pooling_mode_cls_token"):
        pooling = "cls"
    else:
        raise ConfigError(f"--backend onnx supports mean or CLS pooling; {model_dir} uses {pool}")
    bert = model_dir / "sentence_bert_config.json"
    max_len = read_json(bert).get("max_seq_length") if bert.is_file() else None
    return pooling, "Normalize" in kinds, max_len


def _export_fp32(model_dir: str | os.PathLike, out_dir: Path, fp32: Path) -> None:
    """``model_dir``'s transformer exported to ``fp32`` (TorchScript exporter, dynamic batch and sequence axes)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    sample = tok(["a first example sentence", "a second one"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class ByName(torch.nn.Module):  # forward's positional order differs between transformers versions
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(names, tensors))).last_hidden_state

    tmp = out_dir / f".model.onnx.{os.getpid()}.tmp"
    import warnings

    with _removed_on_error(tmp), torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter: still the robust one here
        torch.onnx.export(
            ByName(),
            tuple(sample[n] for n in names),
            str(tmp),
            dynamo=False,
            input_names=names,
            output_names=["last_hidden_state"],
            opset_version=OPSET,
            dynamic_axes={
                **{n: {0: "batch", 1: "sequence"} for n in names},
                "last_hidden_state": {0: "batch", 1: "sequence"},
            },
        )
        os.replace(tmp, fp32)
    log.info("twostage: exported %s to %s", model_dir, fp32)


@contextlib.contextmanager
def _removed_on_error(tmp: Path) -> Iterator[None]:
    """A temporary file that a failed export (a full disk) would leave in the cache is removed."""
    try:
        yield
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _quantize(fp32: Path, target: Path, out_dir: Path) -> None:
    """An int8 copy of ``fp32`` at ``target`` (dynamic quantisation), its settings in ``quantization.json``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from toolkit.data.trec_io import atomic_write

    tmp = out_dir / f".model.int8.onnx.{os.getpid()}.tmp"
    # MatMul weights only, one scale per output channel: on MiniLM the cosine to the fp32 embedding
    # is ~0.99 this way, ~0.97 with onnxruntime's defaults (per tensor, embeddings quantised too).
    settings = {"weight_type": QuantType.QInt8, "per_channel": True, "op_types_to_quantize": ["MatMul"]}
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic logs a "pre-process first" hint on the root logger
    try:
        with _removed_on_error(tmp):
            quantize_dynamic(str(fp32), str(tmp), **settings)
            os.replace(tmp, target)
    finally:
        root.setLevel(level)
    with atomic_write(out_dir / "quantization.json") as fh:
        json.dump({"method": "onnxruntime.quantization.quantize_dynamic", **settings}, fh, default=str)


@dataclass
class OnnxBiEncoder:
    """The bi-encoder protocol of ``toolkit.reranking.torch_backend.BiEncoder`` over ONNX Runtime."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    quantize: bool = False
    kind: str = field(default="bi-encoder", init=False)

    def __post_init__(self) -> None:
        from toolkit.extras import require

        require("onnx", f"--backend {self.backend}")
        require("rerank", f"--backend {self.backend}")  # the tokenizer (transformers) and the export (torch)
        import onnxruntime as ort
        from transformers import AutoTokenizer

        from toolkit.data.catalog import cache_dir
        from toolkit.models import resolve_model
        from toolkit.reranking.onnx_cache import cached_onnx

        self._path = Path(resolve_model(self.model_name))
        self._pooling, self._normalize, default_len = _pipeline(self._path)
        self.max_length = self.max_length or default_len or 512
        self._tok = AutoTokenizer.from_pretrained(str(self._path))
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        import torch  # the same thread count torch uses, so the comparison is fair

        opts.intra_op_num_threads = torch.get_num_threads()
        providers = (
            ["CUDAExecutionProvider", "CPUExecutionProvider"]
            if self.device.startswith("cuda")
            else ["CPUExecutionProvider"]
        )
        # the export, checked against its recorded sha256 (or made again); loaded whole by ONNX Runtime, so a
        # temporary export (the cache is not trusted) may go once the session exists
        libraries = library_versions(*EXPORTER_LIBRARIES)
        with cached_onnx(
            self._path, cache_dir() / "onnx", self.quantize, _export_fp32, _quantize, OPSET, libraries=libraries
        ) as (onnx_file, cached):
            self._session = ort.InferenceSession(str(onnx_file), opts, providers=providers)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._file = str(onnx_file) if cached else "(exported for this run only: the ONNX cache is not trusted)"
        self.model_calls = 0

    @property
    def backend(self) -> str:
        return "onnx-int8" if self.quantize else "onnx"

    def _forward(self, texts: list[str], width: int) -> np.ndarray:
        """Embeddings of ``texts``, each padded to ``width`` tokens (their width: ``batched_by_width``)."""
        enc = self._tok(texts, padding="max_length", truncation="longest_first", max_length=width, return_tensors="np")
        feeds = {k: enc[k].astype(np.int64) for k in self._inputs if k in enc}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        self.model_calls += 1
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = enc["attention_mask"][..., None].astype(hidden.dtype)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        enc = self._tok(texts, truncation="longest_first", max_length=self.max_length, add_special_tokens=True)
        return np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised embeddings (sentence-transformers normalises with ``normalize_embeddings=True``), each a
        function of its text alone: fp32 in batches of one width (``toolkit.models.batched_by_width``); int8 one
        text at a time, since dynamic quantisation scales the activations of a whole batch together (a text's
        int8 vector moved with its batch neighbours for 236 of 241 DL19 passages)."""
        from toolkit.models import batched_by_width

        rows = 1 if self.quantize else self.batch_size
        return batched_by_width(texts, self.token_lengths(texts), rows, self._forward, self.max_length)

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        emb = self.embed([query, *texts])
        return (emb[1:] @ emb[0]).astype(np.float64)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": str(self._path),
            "score": "cosine of L2-normalised embeddings (model pooling)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            "backend": self.backend,
            "precision": "int8 MatMul weights, per channel (dynamic quantisation)" if self.quantize else "fp32",
            "onnx_file": str(self._file),
            "onnxruntime_providers": self._session.get_providers(),
        }
