"""One pipeline for model inputs, shared by the bi-encoder, the cross-encoder and the dense encoder.

Texts (or query-passage pairs) are tokenised once, by the Rust tokenizer's batch call (parallel,
no padding, the GIL released), grouped by *width*: each input's own token length rounded up to a
multiple of ``WIDTH_MULTIPLE`` (never beyond the maximum length), a function of the input alone.
Widest first (an out-of-memory batch fails at once), the inputs of one width are cut into batches,
built in a background thread (in pinned memory on CUDA, copied without blocking) while the device
computes the current batch. The outputs stay on the device in one tensor and come back in one copy
at the end.

Why widths: an input's output must not depend on the inputs batched with it, or an embedding cache
filled by one run would serve another run other bits than that run computes (and a near tie between
two passages would then order them by the cache's history). Two things move an output's last bits on
a CPU: padding (an input padded to a neighbour's length: 106 of 120 DL19 passages moved when padded by
7 tokens), and the number of token rows a matrix product sees (MKL takes other kernels for row counts
that are not a multiple of 4, up to 51 rows at 32 threads). Padding each input to its own width, a
multiple of 8, settles both: measured on this CPU (torch 2.13, MKL, AVX2), a text's vector is the same
bits alone, among any neighbours, in batches of any size and order, at 1, 2, 4 or 16 threads
(tests/models/test_batching.py checks the neighbours). On CUDA the kernels may also change with
the number of rows, so every batch there is run with ``batch_size`` rows (a short one filled with
copies of its first input): one shape per width. An out-of-memory retry in smaller batches changes
the CUDA shape (it warns). A cross-encoder's classification head is a product with one output column,
whose CPU kernel changes with the number of pairs: its scores can move in the last bits with the pairs
batched together (no cache keeps them; the same command forms the same batches).

On CUDA, tokenising runs ahead in windows of ``CUDA_WINDOW_BATCHES`` batches, each grouped on its
own, so that tokenising overlaps the GPU work; a batch that runs out of device memory is retried in halves.

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

#: Every input is padded to its own length rounded up to a multiple of this many tokens (see the module; few
#: shapes for CUDA's tensor cores too).
WIDTH_MULTIPLE = 8
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


def widths(lengths: np.ndarray, multiple: int, cap: int) -> np.ndarray:
    """Each input's padded width, from its own length alone: rounded up to ``multiple``, never beyond ``cap``
    (the maximum length) unless the input is longer."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if multiple <= 1:
        return lengths
    rounded = -(-lengths // multiple) * multiple
    return np.maximum(lengths, np.minimum(rounded, cap))


def pad_batch(tokens: Tokens, offsets: np.ndarray, idx: np.ndarray, pad_id: int, multiple: int, cap: int):
    """(input_ids, attention_mask, token_type_ids) numpy arrays of the inputs ``idx``, padded to the widest
    member's width (``widths``: all members share it when ``plan_batches`` made the batch)."""
    lens = tokens.lengths[idx]
    width = int(widths(lens, multiple, cap).max()) if len(lens) else 0
    mask = np.arange(width)[None, :] < lens[:, None]
    starts = offsets[idx] - np.concatenate([[0], np.cumsum(lens)[:-1]])  # row j's ids: starts[j] + its positions
    take = np.repeat(starts, lens) + np.arange(int(lens.sum()))
    ids = np.full((len(idx), width), pad_id, dtype=np.int64)
    ids[mask] = tokens.ids[take]
    types = np.zeros((len(idx), width), dtype=np.int64)
    if tokens.type_ids is not None:
        types[mask] = tokens.type_ids[take]
    return ids, mask.astype(np.int64), types


def plan_batches(lengths: np.ndarray, batch_size: int, multiple: int = 1, cap: int | None = None) -> list[np.ndarray]:
    """Positions per batch: inputs of one width (``widths``; without ``multiple``, one token length), widest
    first, in input order within a width, at most ``batch_size`` each. No input is padded to a neighbour's
    length, so its output does not depend on which inputs share its batch."""
    lengths = np.asarray(lengths, dtype=np.int64)
    w = widths(lengths, multiple, int(cap if cap is not None else lengths.max(initial=0)))
    order = np.argsort(-w, kind="stable")
    cuts = np.flatnonzero(np.diff(w[order])) + 1  # where the width changes
    out: list[np.ndarray] = []
    for group in np.split(order, cuts):
        out += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    return [b for b in out if len(b)]


# -------------------------------------------------------------- the runner
@dataclass
class PipelineStats:
    """What one run did: inputs, batches, padded tokens, out-of-memory retries, filler rows."""

    inputs: int = 0
    batches: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    oom_splits: int = 0
    filler_rows: int = 0  # fixed_rows: rows run only to keep a batch's shape


class ModelPipeline:
    """Runs ``forward`` (features on the device -> a tensor with one row per input) over inputs.

    ``device``: a resolved device (``cpu``, ``cuda``, ``cuda:1``...). ``window``: inputs tokenised
    and grouped together (``None``: all at once, the CPU default; on CUDA ``CUDA_WINDOW_BATCHES``
    batches). ``pad_multiple``: width rounding (``WIDTH_MULTIPLE``; 1: each input's exact length). ``fixed_rows``:
    run every batch with ``batch_size`` rows, a short one filled with copies of its first input (default:
    on CUDA, whose kernels may change with the number of rows; a CPU's do not, see the module).
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
        fixed_rows: bool | None = None,
    ):
        if batch_size < 1:
            raise ConfigError("--batch-size must be >= 1")
        self.tokenizer = tokenizer
        self.forward = forward
        self.device = device
        self.cuda = device.startswith("cuda")
        self.batch_size = batch_size
        self.window = window if window is not None else (CUDA_WINDOW_BATCHES * batch_size if self.cuda else None)
        self.pad_multiple = pad_multiple or WIDTH_MULTIPLE
        self.type_ids = type_ids
        self.fixed_rows = self.cuda if fixed_rows is None else fixed_rows
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
                plan = plan_batches(tokens.lengths, self.batch_size, self.pad_multiple, self.tokenizer.max_length)
                for idx in plan:
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
            if self.fixed_rows and rows < self.max_rows:  # one shape per width: copies of the first row after
                fill = [0] * (self.max_rows - rows)
                full = {k: torch.cat([t, t[fill]]) for k, t in feats.items()}
                result = self.forward(full)[:rows]
                self.stats.filler_rows += len(fill)
            else:
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
