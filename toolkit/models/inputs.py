"""One pipeline for model inputs, shared by the bi-encoder, the cross-encoder and the dense encoder.

Texts (or query-passage pairs) are tokenised once, by the Rust tokenizer's batch call (parallel,
no padding, the GIL released), sorted by token length (longest first: an out-of-memory batch fails
at once), cut into batches padded to the longest member (on CUDA rounded up to a multiple of
``CUDA_PAD_MULTIPLE``, so the tensor cores see few distinct shapes), built in a background thread
(in pinned memory on CUDA, copied without blocking) while the device computes the current batch.
The outputs stay on the device in one tensor and come back in one copy at the end.

On a CPU the batches are exactly those of the earlier per-batch path (global sort by token length,
padding to the longest member), so the CPU scores are bit-identical to it. On CUDA, tokenising runs
ahead in windows of ``CUDA_WINDOW_BATCHES`` batches, each sorted on its own, so that tokenising
overlaps the GPU work; a batch that runs out of device memory is retried in halves.

torch is imported inside the functions that use it.
"""

from __future__ import annotations

import itertools
import queue
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.errors import ConfigError

#: On CUDA, batches are padded to a multiple of this many tokens (tensor-core friendly, few shapes).
CUDA_PAD_MULTIPLE = 8
#: On CUDA, texts are tokenised and sorted in windows of this many batches (overlapping the GPU work).
CUDA_WINDOW_BATCHES = 32
#: Batches built ahead of the device.
PREFETCH_BATCHES = 4


# ----------------------------------------------------------------- tokens
@dataclass(frozen=True)
class Tokens:
    """Token ids of many inputs, unpadded: all ids in one flat array, ``lengths`` per input."""

    ids: np.ndarray  # int64, concatenated
    lengths: np.ndarray  # int64, one per input
    type_ids: np.ndarray | None = None  # int64, concatenated like ids (pairs: 0 query, 1 passage)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths)])

    def __len__(self) -> int:
        return len(self.lengths)


class Tokenizer:
    """A Hugging Face tokenizer's Rust backend, truncating to ``max_length``, never padding.

    The same ids as ``tokenizer(texts, truncation="longest_first", max_length=max_length)`` (the
    call sentence-transformers makes), from one batch call over all the inputs. ``calls`` and
    ``inputs_tokenized`` count the work (the tests check every input is tokenised exactly once).
    ``rust``: a ``tokenizers.Tokenizer`` of its own (a model's ``tokenizer.json``, set to truncate here)
    instead of ``hf_tokenizer``, with its ``pad_id``.
    """

    def __init__(self, hf_tokenizer, max_length: int, *, rust=None, pad_id: int = 0):
        self.max_length = int(max_length)
        self._hf = hf_tokenizer
        if rust is None:
            pad_id = getattr(hf_tokenizer, "pad_token_id", None) or 0
            backend = getattr(hf_tokenizer, "backend_tokenizer", None) or getattr(hf_tokenizer, "_tokenizer", None)
            if backend is not None and hasattr(backend, "encode_batch"):
                from tokenizers import Tokenizer as RustTokenizer

                rust = RustTokenizer.from_str(backend.to_str())  # a copy: the model's own stays as it was
        self.pad_id = int(pad_id)
        if rust is not None:
            rust.no_padding()
            rust.enable_truncation(self.max_length, stride=0, strategy="longest_first", direction="right")
        self._rust = rust
        self.calls = 0
        self.inputs_tokenized = 0

    def encode(self, inputs: Sequence[str] | Sequence[tuple[str, str]]) -> Tokens:
        """Tokens of ``inputs``: texts, or (query, passage) pairs."""
        self.calls += 1
        self.inputs_tokenized += len(inputs)
        if not len(inputs):
            return Tokens(np.zeros(0, np.int64), np.zeros(0, np.int64))
        pairs = isinstance(inputs[0], tuple)
        if self._rust is not None:
            batch = getattr(self._rust, "encode_batch_fast", self._rust.encode_batch)
            encs = batch(list(inputs), add_special_tokens=True)
            ids = [e.ids for e in encs]
            types = [e.type_ids for e in encs] if pairs else None
        else:  # a Python-only tokenizer: its own batch call
            if pairs:
                a, b = zip(*inputs)
                enc = self._hf(list(a), list(b), truncation="longest_first", max_length=self.max_length)
            else:
                enc = self._hf(list(inputs), truncation="longest_first", max_length=self.max_length)
            ids = enc["input_ids"]
            types = enc.get("token_type_ids") if pairs else None
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        total = int(lengths.sum())
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
        tflat = np.fromiter(itertools.chain.from_iterable(types), dtype=np.int64, count=total) if types else None
        return Tokens(flat, lengths, tflat)


# -------------------------------------------------------------- batching
@dataclass(frozen=True)
class Batch:
    rows: np.ndarray  # positions of its inputs in the whole input list
    features: dict  # input_ids, attention_mask, token_type_ids: int64 tensors (pinned on CUDA)


def pad_batch(tokens: Tokens, offsets: np.ndarray, idx: np.ndarray, pad_id: int, multiple: int, cap: int):
    """(input_ids, attention_mask, token_type_ids) numpy arrays of the inputs ``idx``, padded to the longest
    (rounded up to ``multiple``, never beyond ``cap`` unless the longest is longer)."""
    lens = tokens.lengths[idx]
    longest = int(lens.max()) if len(lens) else 0
    width = -(-longest // multiple) * multiple if multiple > 1 else longest
    width = max(longest, min(width, cap))
    mask = np.arange(width)[None, :] < lens[:, None]
    starts = offsets[idx] - np.concatenate([[0], np.cumsum(lens)[:-1]])  # row j's ids: starts[j] + its positions
    take = np.repeat(starts, lens) + np.arange(int(lens.sum()))
    ids = np.full((len(idx), width), pad_id, dtype=np.int64)
    ids[mask] = tokens.ids[take]
    types = np.zeros((len(idx), width), dtype=np.int64)
    if tokens.type_ids is not None:
        types[mask] = tokens.type_ids[take]
    return ids, mask.astype(np.int64), types


def plan_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Positions per batch: sorted by token length, longest first (stable), ``batch_size`` each."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


# -------------------------------------------------------------- the runner
@dataclass
class PipelineStats:
    """What one run did: inputs, batches, padded tokens, out-of-memory retries."""

    inputs: int = 0
    batches: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    oom_splits: int = 0


class ModelPipeline:
    """Runs ``forward`` (features on the device -> a tensor with one row per input) over inputs.

    ``device``: a resolved device (``cpu``, ``cuda``, ``cuda:1``...). ``window``: inputs tokenised
    and sorted together (``None``: all at once, the CPU default; on CUDA ``CUDA_WINDOW_BATCHES``
    batches). ``pad_multiple``: batch width rounding (1 on CPU, ``CUDA_PAD_MULTIPLE`` on CUDA).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        forward: Callable,
        device: str,
        batch_size: int,
        window: int | None = None,
        pad_multiple: int | None = None,
        type_ids: bool = True,
    ):
        if batch_size < 1:
            raise ConfigError("--batch-size must be >= 1")
        self.tokenizer = tokenizer
        self.forward = forward
        self.device = device
        self.cuda = device.startswith("cuda")
        self.batch_size = batch_size
        self.window = window if window is not None else (CUDA_WINDOW_BATCHES * batch_size if self.cuda else None)
        self.pad_multiple = pad_multiple or (CUDA_PAD_MULTIPLE if self.cuda else 1)
        self.type_ids = type_ids
        self.max_rows = batch_size  # lowered after an out-of-memory batch
        self.stats = PipelineStats()
        self.model_calls = 0

    # the producer side: tokenise windows, build padded batches ahead of the device
    def _windows(self, n: int) -> list[tuple[int, int]]:
        size = self.window or n
        return [(lo, min(n, lo + size)) for lo in range(0, n, size)]

    def _produce(self, inputs, out: queue.Queue, stop: threading.Event) -> None:
        import torch

        try:
            for lo, hi in self._windows(len(inputs)):
                tokens = self.tokenizer.encode(inputs[lo:hi])
                offsets = tokens.offsets
                for idx in plan_batches(tokens.lengths, self.batch_size):
                    if stop.is_set():
                        return
                    arrays = pad_batch(
                        tokens, offsets, idx, self.tokenizer.pad_id, self.pad_multiple, self.tokenizer.max_length
                    )
                    names = ("input_ids", "attention_mask", "token_type_ids")
                    feats = {k: torch.from_numpy(a) for k, a in zip(names, arrays) if self.type_ids or k != names[2]}
                    if self.cuda:
                        feats = {k: t.pin_memory() for k, t in feats.items()}
                    self.stats.tokens += int(tokens.lengths[idx].sum())
                    self.stats.padded_tokens += int(arrays[0].size)
                    out.put(Batch(lo + idx, feats))
            out.put(None)
        except BaseException as exc:  # handed to the consumer, raised there
            out.put(exc)

    def run(self, inputs: Sequence) -> np.ndarray:
        """One output row per input, in input order, as float32 numpy (one copy back from the device)."""
        import torch

        n = len(inputs)
        self.stats = PipelineStats(inputs=n)
        if not n:
            return np.zeros((0, 0), dtype=np.float32)
        q: queue.Queue = queue.Queue(maxsize=PREFETCH_BATCHES)
        stop = threading.Event()
        producer = threading.Thread(target=self._produce, args=(inputs, q, stop), daemon=True)
        producer.start()
        out = None
        try:
            with torch.inference_mode():
                while True:
                    item = q.get()
                    if item is None:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    feats = {k: t.to(self.device, non_blocking=self.cuda) for k, t in item.features.items()}
                    rows = torch.from_numpy(item.rows).to(self.device, non_blocking=self.cuda)
                    result = self._forward_fitting(feats)
                    if out is None:
                        out = torch.empty((n, *result.shape[1:]), dtype=torch.float32, device=result.device)
                    out[rows] = result.float()
                    self.stats.batches += 1
        finally:
            stop.set()
            while producer.is_alive():  # unblock a producer waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    producer.join(0.01)
        assert out is not None
        return out.cpu().numpy()

    def _forward_fitting(self, feats: dict):
        """``forward`` over ``feats``, in pieces of at most ``max_rows`` rows; an out-of-memory piece is
        retried in halves (and later batches use the smaller size)."""
        import torch

        rows = int(feats["input_ids"].shape[0])
        if rows > self.max_rows:
            step = self.max_rows  # a piece that runs out of memory lowers max_rows for the pieces after it
            parts = [
                self._forward_fitting({k: t[lo : lo + step] for k, t in feats.items()}) for lo in range(0, rows, step)
            ]
            return torch.cat(parts)
        try:
            result = self.forward(feats)
            self.model_calls += 1
            return result
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            if self.cuda:
                torch.cuda.empty_cache()
            width = int(feats["input_ids"].shape[1])
            if rows == 1:
                raise ConfigError(
                    f"--batch-size 1: one input of {width} tokens does not fit in {self.device} memory; "
                    "lower --max-length or use a device with more memory"
                ) from exc
            self.max_rows = max(1, rows // 2)
            self.stats.oom_splits += 1
            warnings.warn(
                f"out of {self.device} memory with {rows} inputs of {width} tokens; retrying in batches of "
                f"{self.max_rows} (a smaller --batch-size avoids the retry)",
                RuntimeWarning,
                stacklevel=2,
            )
            return self._forward_fitting(feats)


def is_out_of_memory(exc: BaseException) -> bool:
    """A device out-of-memory error (CUDA's own class, or a RuntimeError saying so)."""
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", None) or getattr(torch, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
