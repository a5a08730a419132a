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
that need them, so ``import toolkit.reranking.rerank_job`` stays light.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolkit.data.ranking import CANDIDATE_PRECISION, candidate_selection, top_k
from toolkit.data.records import DOC_ID, QUERY_ID, Run, run_from_rows
from toolkit.data.texts import TextSource, rerank_query_ids
from toolkit.errors import ConfigError
from toolkit.reranking.backends import Reranker, RerankerSpec
from toolkit.version import __version__

if TYPE_CHECKING:
    from toolkit.reranking.rerank_options import RerankOptions

MISSING_TEXT_POLICIES = ("error", "bottom")


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
        return {"vectors": vecs}, {
            "texts_embedded": len(texts),
            "model_calls": getattr(self.reranker, "model_calls", 0) - before,
        }


class _PairWorker:
    def __init__(self, reranker: Reranker):
        self.reranker = reranker

    def __call__(self, items: list[tuple[str, list[str]]]) -> tuple[dict, dict]:
        before = getattr(self.reranker, "model_calls", 0)
        many = getattr(self.reranker, "score_many", None)  # one pipeline run across queries, where offered
        if many is not None:
            parts = [np.asarray(s, dtype=np.float64) for s in many(items)]
        else:
            parts = [np.asarray(self.reranker.score(q, texts), dtype=np.float64) for q, texts in items]
        scores = np.concatenate(parts) if parts else np.zeros(0)
        return {"scores": scores}, {
            "pairs_scored": len(scores),
            "model_calls": getattr(self.reranker, "model_calls", 0) - before,
        }


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
    """What changes a bi-encoder vector: the model's files, maximum length, backend and precision, the kind of
    device and the library versions that compute it (another torch may give other bits), and how its batch is
    formed. A text's vector depends on nothing else: not on the texts embedded with it (its batch holds texts
    of its own width only, ``toolkit.models.batching``), so a cache filled by any run serves exactly the vectors
    a run with a cold cache computes. On CUDA every batch has ``batch_size`` rows, so the batch size is part
    of the namespace there; on a CPU it changes no bit and runs with any batch size share the cache."""
    from toolkit.models import library_versions, model_fingerprint

    d = reranker_description
    backend = d.get("backend", "torch")
    device = str(d.get("device") or "cpu").split(":")[0]
    libraries = ("tokenizers", "torch", "transformers", "sentence-transformers")
    if backend.startswith("onnx"):
        from toolkit.reranking.onnx_backend import EXPORTER_LIBRARIES

        libraries += EXPORTER_LIBRARIES
    computed: dict = {"device": device, "libraries": library_versions(*sorted(set(libraries)))}
    if device == "cuda":
        computed["rows"] = d.get("batch_size")
    return {
        "model": model_fingerprint(str(d.get("model_path") or d.get("model"))),
        "max_length": d.get("max_length"),
        "backend": backend,
        "precision": d.get("precision", "fp32"),
        "pooling": "model pooling, L2-normalised",
        "batching": "each text padded to its own length rounded up to 8 tokens",
        "computed": computed,
    }


class _Embeddings:
    """The embedding matrix of ``texts`` being filled: rows found in the cache first, the rest as computed."""

    def __init__(self, texts: list[str], cache):
        self.texts = texts
        self.cache = cache
        self.keys: list[str] | None = None
        self.found = np.zeros(len(texts), dtype=bool)
        self.cached: np.ndarray | None = None
        self.out: np.ndarray | None = None
        if cache is not None:
            from toolkit.jobs.embed_cache import text_key

            self.keys = [text_key(t) for t in texts]
            self.found, self.cached = cache.lookup(self.keys)
        self.cached_rows = np.flatnonzero(self.found)
        if self.cached is not None and len(self.cached):
            self.fill(self.cached, self.cached_rows)

    def fill(self, vecs: np.ndarray, rows: np.ndarray) -> None:
        if self.out is None:
            self.out = np.empty((len(self.texts), vecs.shape[1]), dtype=np.float32)
        self.out[rows] = vecs

    def missing(self, lo: int, hi: int) -> np.ndarray:
        """Rows in [lo, hi) the cache did not hold."""
        return lo + np.flatnonzero(~self.found[lo:hi])

    def add_to_cache(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        if self.cache is not None and len(rows):
            self.cache.add([self.keys[i] for i in rows], vecs)

    def shard_vectors(self, lo: int, hi: int, rows: np.ndarray, vecs: np.ndarray) -> np.ndarray:
        """All of [lo, hi)'s vectors: those computed for ``rows`` and the cached others."""
        if len(rows) == hi - lo:
            return vecs
        width = self.cached.shape[1] if self.cached is not None else vecs.shape[1]
        full = np.empty((hi - lo, width), dtype=np.float32)
        have = np.flatnonzero(self.found[lo:hi])
        full[have] = self.cached[np.searchsorted(self.cached_rows, lo + have)]
        if len(rows):
            full[rows - lo] = vecs
        return full

    def matrix(self) -> np.ndarray:
        return self.out if self.out is not None else np.zeros((0, 0), np.float32)


def _embed_all(
    texts: list[str],
    segments: list[int],
    worker_spec,
    sharding,
    cache,
    identity: dict,
    progress: bool,
) -> tuple[np.ndarray, dict]:
    """Embeddings of ``texts`` (rows in order): cached ones looked up, the others computed in
    chunks of ``EMBED_SHARD`` in this process, or as a sharded job when ``sharding`` is given.
    ``segments`` are boundaries no chunk crosses (passages | queries)."""
    from toolkit.jobs.shards import plan

    emb = _Embeddings(texts, cache)
    size = sharding.size(EMBED_SHARD) if sharding else EMBED_SHARD
    bounds = [0, *segments, len(texts)]
    ranges = [[a + lo, a + hi] for a, b in itertools.pairwise(bounds) for lo, hi in plan(b - a, size)]
    stats = {"texts_embedded": 0, "model_calls": 0, "from_cache": int(emb.found.sum())}
    if sharding is None:
        _embed_here(emb, ranges, worker_spec.build(), stats, progress)
    else:
        _embed_sharded(emb, worker_spec, sharding, {**identity, "ranges": ranges}, stats, progress)
    return emb.matrix(), stats


def _embed_here(emb: _Embeddings, ranges: list[list[int]], worker, stats: dict, progress: bool) -> None:
    """Embed the rows the cache lacks, chunk by chunk, in this process."""
    from toolkit.guard.escape import progress_bar

    todo = int((~emb.found).sum())
    with progress_bar(
        total=todo,
        desc="rerank: embed texts",
        unit="text",
        file=sys.stderr,
        disable=not progress or not todo,
        dynamic_ncols=True,
    ) as bar:
        for lo, hi in ranges:
            rows = emb.missing(lo, hi)
            if not len(rows):
                continue
            arrays, info = worker([emb.texts[i] for i in rows])
            emb.fill(arrays["vectors"], rows)
            emb.add_to_cache(rows, arrays["vectors"])
            stats["texts_embedded"] += info["texts_embedded"]
            stats["model_calls"] += info["model_calls"]
            bar.update(len(rows))


def _embed_sharded(emb: _Embeddings, worker_spec, sharding, identity: dict, stats: dict, progress: bool) -> None:
    """Embed the rows the cache lacks as a resumable sharded job over ``identity["ranges"]``; each shard
    stores all its vectors."""
    from toolkit.jobs.shards import open_manifest, run_job

    manifest = open_manifest(sharding.folder, "rerank-embed", identity, sharding.force)
    pending_rows: dict[int, np.ndarray] = {}

    def payload(shard: int, lo: int, hi: int) -> list[str]:
        rows = emb.missing(lo, hi)
        pending_rows[shard] = rows
        return [emb.texts[i] for i in rows]

    def finish(shard: int, arrays: dict) -> dict:
        lo, hi = manifest.ranges[shard]
        rows = pending_rows.pop(shard)
        emb.add_to_cache(rows, arrays["vectors"])
        return {"vectors": emb.shard_vectors(lo, hi, rows, arrays["vectors"])}

    report = run_job(
        manifest,
        worker_spec,
        sharding.executor,
        payload,
        unit="text",
        progress=progress,
        label="rerank: embed",
        finish=finish,
    )
    for shard, rec in sorted(manifest.finished.items()):
        lo, hi = rec["range"]
        vecs = manifest.load(shard)["vectors"]
        if len(vecs):
            emb.fill(vecs, np.arange(lo, hi))
    stats.update(manifest.work_done("texts_embedded", "model_calls"))
    stats.update(_job_stats(report, manifest))


def _job_stats(report, manifest) -> dict:
    """What the sidecar says about a sharded job: shards, resumed, computed, and the manifest's path."""
    return {
        "shards": report.shards,
        "shards_resumed": report.resumed,
        "shards_computed": report.computed,
        "manifest": str(manifest.folder / "manifest.json"),
    }


def _score_pairs(
    qids: list[str],
    docs_by_query: dict[str, list[str]],
    queries: Mapping[str, str],
    found: Mapping[str, str],
    worker_spec,
    sharding,
    identity: dict,
    progress: bool,
    kind: str,
) -> tuple[dict[str, np.ndarray], dict]:
    """Scores per query from a pair (cross-encoder) reranker, in this process or as a sharded job."""
    from toolkit.jobs.shards import open_manifest, plan, run_job

    def items(lo: int, hi: int) -> list[tuple[str, list[str]]]:
        return [(queries[q], [found[d] for d in docs_by_query[q]]) for q in qids[lo:hi]]

    stats = {"model_calls": 0}
    out: dict[str, np.ndarray] = {}
    if sharding is None:
        from toolkit.guard.escape import progress_bar

        worker = worker_spec.build()
        with progress_bar(
            total=sum(len(docs_by_query[q]) for q in qids),
            desc=f"rerank ({kind})",
            unit="passage",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        ) as bar:
            for lo in range(0, len(qids), PAIR_SHARD_QUERIES):  # the same chunks as a sharded job's
                hi = min(len(qids), lo + PAIR_SHARD_QUERIES)
                arrays, info = worker(items(lo, hi))
                at = 0
                for q in qids[lo:hi]:
                    n = len(docs_by_query[q])
                    out[q] = arrays["scores"][at : at + n]
                    at += n
                stats["model_calls"] += info["model_calls"]
                bar.update(at)
        return out, stats
    ranges = plan(len(qids), sharding.size(PAIR_SHARD_QUERIES))
    manifest = open_manifest(sharding.folder, "rerank-pairs", {**identity, "ranges": ranges}, sharding.force)
    report = run_job(
        manifest,
        worker_spec,
        sharding.executor,
        lambda s, lo, hi: items(lo, hi),
        unit="query",
        progress=progress,
        label=f"rerank ({kind})",
    )
    for shard, rec in sorted(manifest.finished.items()):
        lo, hi = rec["range"]
        scores = manifest.load(shard)["scores"]
        at = 0
        for q in qids[lo:hi]:
            n = len(docs_by_query[q])
            out[q] = scores[at : at + n]
            at += n
    stats.update(manifest.work_done("pairs_scored", "model_calls"))
    stats.update(_job_stats(report, manifest))
    return out, stats


def rerank_run(
    first_stage: Run,
    queries: Mapping[str, str],
    texts: TextSource,
    reranker: Reranker | RerankerSpec,
    options: RerankOptions,
    *,
    sharding=None,
    cache=None,
) -> RerankResult:
    """Re-score the top ``options.depth`` candidates of every query (trec_eval order) with ``reranker``.

    Only the top ``depth`` candidates are kept, so the reranked run holds
    exactly the first stage's candidate set in a new order. A candidate with no
    text is an error (``missing_text="error"``) or kept below every scored
    candidate in first-stage order (``"bottom"``). A query with no text in
    ``queries`` is an error. ``first_stage`` is not modified. ``options`` (a ``RerankOptions``) gives the depth,
    the missing-text policy, the queries (``query_ids``, ``judged_only``), the run's tag and the progress bar.

    ``reranker`` is the model of ``options.reranker``: built, or a ``RerankerSpec`` (built here, or by each Ray
    worker). ``sharding`` (``toolkit.jobs.shards.Sharding``) runs the model work as a sharded,
    resumable job; ``cache`` (``toolkit.jobs.embed_cache.EmbeddingCache``) serves and keeps a
    bi-encoder's embeddings. Either way the scores are the same (see docs/distributed.md's
    tolerance).
    """
    query_ids = rerank_query_ids(options.query_ids, options.judged_only)
    depth, missing_text, progress = options.depth, options.missing_text, options.progress
    if depth < 1:
        raise ConfigError("--depth must be >= 1")
    if missing_text not in MISSING_TEXT_POLICIES:
        raise ConfigError(f"missing-text policy must be one of {MISSING_TEXT_POLICIES}")
    work = candidates_of(first_stage, queries, texts, depth, missing_text, query_ids)
    model = _Model.of(reranker, sharding)
    identity = _job_identity(work, first_stage, queries, texts, model.desc, depth, missing_text)
    start = time.perf_counter()
    if model.kind == "bi-encoder":
        scores_by_query, work_stats, unique = _bi_encoder_scores(
            work, queries, model, sharding, cache, identity, progress
        )
    else:
        worker_spec = _worker_spec(model.built, model.spec, sharding, "pairs")
        scores_by_query, work_stats = _score_pairs(
            work.qids, work.have_by_query, queries, work.found, worker_spec, sharding, identity, progress, model.kind
        )
        unique = None
    rows = _reranked_rows(work, scores_by_query)
    seconds = time.perf_counter() - start
    run = run_from_rows(rows, tag=options.tag)
    settings = _settings(work, model, options, unique, work_stats, sharding, cache, first_stage, texts)
    settings["seconds"] = round(seconds, 3)
    settings["libraries"] = _library_versions()
    return RerankResult(run, settings, seconds, len(work.qids), len(work.cands), work.missing)


@dataclass(frozen=True)
class _Candidates:
    """The candidates to rerank: per query (sorted ids) its top-N documents, and those with a text."""

    cands: object  # the top-N frame
    qids: list[str]
    found: Mapping[str, str]  # doc id -> text
    missing: int  # candidates without a text
    docs_by_query: dict[str, list[str]]
    have_by_query: dict[str, list[str]]


def candidates_of(
    first_stage: Run,
    queries: Mapping[str, str],
    texts: TextSource,
    depth: int,
    missing_text: str,
    query_ids: Iterable[str] | None,
) -> _Candidates:
    """The top ``depth`` of the selected queries with their texts; a query or (with "error") a candidate
    without text is an error."""
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
    docs_by_query = {q: g[DOC_ID].tolist() for q, g in cands.groupby(QUERY_ID, sort=True)}
    have_by_query = {q: [d for d in docs if d in found] for q, docs in docs_by_query.items()}
    return _Candidates(cands, qids, found, len(missing), docs_by_query, have_by_query)


@dataclass(frozen=True)
class _Model:
    """The reranker as given: built here (``built``) or a spec Ray workers build (``spec``), and its settings."""

    built: Reranker | None
    spec: RerankerSpec | None
    kind: str
    desc: dict

    @classmethod
    def of(cls, reranker: Reranker | RerankerSpec, sharding) -> _Model:
        built = None if isinstance(reranker, RerankerSpec) else reranker
        spec = reranker.resolved() if isinstance(reranker, RerankerSpec) else None
        if built is None and sharding is None:
            built = spec.build()
        if built is not None:
            return cls(built, spec, built.kind, built.describe())
        return cls(None, spec, spec.kind, spec.describe())


def _job_identity(
    work: _Candidates,
    first_stage: Run,
    queries: Mapping[str, str],
    texts: TextSource,
    desc: dict,
    depth: int,
    missing_text: str,
) -> dict:
    """What a sharded job's manifest must match to be resumed: inputs, model and settings."""
    qids = work.qids
    identity = {
        "inputs": {
            "first_stage_sha256": first_stage.sha256,
            "texts": texts.describe(),
            "candidates_sha256": _texts_sha256(f"{q}\t{d}" for q in qids for d in work.have_by_query[q]),
            "queries_sha256": _texts_sha256(queries[q] for q in qids),
        },
        "model": {k: desc.get(k) for k in ("model", "model_path", "kind", "max_length", "backend", "precision")},
        "settings": {"depth": depth, "missing_text": missing_text, "candidate_selection": candidate_selection()},
    }
    if identity["model"]["model_path"]:
        from toolkit.models import model_fingerprint

        identity["model"]["fingerprint"] = model_fingerprint(str(identity["model"]["model_path"]))
    return identity


def _bi_encoder_scores(
    work: _Candidates, queries: Mapping[str, str], model: _Model, sharding, cache, identity: dict, progress: bool
) -> tuple[dict[str, np.ndarray], dict, list[str]]:
    """Cosines of each query with its candidates; returns them per query, the job's stats and the
    distinct passages embedded."""
    # A bi-encoder's passage embedding does not depend on the query: embed each distinct
    # candidate once (CACM's top-100 lists share most documents).
    found = work.found
    unique = sorted(set(work.cands[DOC_ID]) & set(found), key=lambda d: (-len(found[d]), d))
    texts = [found[d] for d in unique] + [queries[q] for q in work.qids]
    worker_spec = _worker_spec(model.built, model.spec, sharding, "embed")
    identity = identity | {"work_sha256": _texts_sha256(texts)}
    vectors, stats = _embed_all(texts, [len(unique)], worker_spec, sharding, cache, identity, progress)
    position = {d: i for i, d in enumerate(unique)}
    scores: dict[str, np.ndarray] = {}
    for i, q in enumerate(work.qids):
        docs = work.have_by_query[q]
        query_vector = vectors[len(unique) + i]
        scores[q] = (vectors[[position[d] for d in docs]] @ query_vector).astype(np.float64) if docs else np.zeros(0)
    return scores, stats, unique


def _reranked_rows(work: _Candidates, scores_by_query: Mapping[str, np.ndarray]) -> list[tuple[str, str, float]]:
    """(query, doc, score) rows: the scored candidates, then those without text below them in first-stage order."""
    rows: list[tuple[str, str, float]] = []
    for q in work.qids:
        docs = work.have_by_query[q]
        scores = scores_by_query[q]
        if not np.all(np.isfinite(scores)):
            raise ConfigError(f"the model returned a non-finite score for query {q!r}")
        rows += [(q, d, float(s)) for d, s in zip(docs, scores)]
        lacking = [d for d in work.docs_by_query[q] if d not in work.found]
        if lacking:  # below every scored one, first-stage order kept
            floor = (float(np.min(scores)) if len(scores) else 0.0) - 1.0
            rows += [(q, d, floor - i) for i, d in enumerate(lacking)]
    return rows


def _settings(
    work: _Candidates,
    model: _Model,
    options: RerankOptions,
    unique: list[str] | None,
    work_stats: dict,
    sharding,
    cache,
    first_stage: Run,
    texts: TextSource,
) -> dict:
    """The sidecar's record of a rerank (seconds and library versions are added once the work is done). ``depth``
    is the depth used: the option, or the candidates' longest list when that is shorter (a 20-deep candidates
    file reranked with ``--depth 100`` reranked 20); ``depth_option`` the option as given."""
    depth = options.depth
    sizes = work.cands.groupby(QUERY_ID).size()  # type: ignore[attr-defined]
    used = min(depth, int(sizes.max())) if len(sizes) else depth
    return {
        "twostage": __version__,
        "reranker": model.desc,
        "depth": used,
        "depth_option": depth,
        "candidate_selection": candidate_selection(),
        "missing_text": options.missing_text,
        "queries": len(work.qids),
        "pairs_scored": len(work.cands) - work.missing,
        "passages_embedded": len(unique) if unique is not None else None,
        "model_work": work_stats,
        "execution": sharding.executor.description if sharding is not None else {"engine": "in-process"},
        "embedding_cache": cache.describe() if cache is not None else None,
        "missing_texts": work.missing,
        "first_stage": first_stage.identity(),
        "texts": texts.describe(),
    }


def _worker_spec(built: Reranker | None, spec: RerankerSpec | None, sharding, role: str):
    """The built model itself for work in this process; a spec each Ray worker builds from otherwise."""
    from toolkit.jobs.shards import LocalExecutor

    if built is not None and (sharding is None or isinstance(sharding.executor, LocalExecutor)):
        return _Built(_EmbedWorker(built) if role == "embed" else _PairWorker(built))
    return RerankWorkerSpec(spec or _spec_of(built), role)


def _spec_of(reranker: Reranker) -> RerankerSpec:
    d = reranker.describe()
    return RerankerSpec(
        d["model"],
        d["kind"],
        d.get("device", "auto"),
        d.get("batch_size", 64),
        d.get("max_length"),
        d.get("backend", "torch"),
        d.get("precision", "auto"),
        d.get("model_type"),
    )


def _library_versions() -> dict:
    out = {}
    for name in ("torch", "sentence_transformers", "transformers", "rerankers"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = getattr(mod, "__version__", "?")
    return out
