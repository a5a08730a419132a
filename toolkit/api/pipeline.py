"""First stage and reranking as calls that return runs: ``index``, ``bm25``, ``dense``, ``fuse``, ``rerank``.

Each takes what the matching ``twostage`` command takes and returns a ``Run`` whose ``meta`` holds the
settings its sidecar records; ``Run.write(path)`` writes both. Progress bars are off unless
``progress=True``. ``ray=ADDRESS`` (``"auto"``, ``"local"``, ``ray://host:port``) runs dense encoding,
search and reranking as sharded, resumable Ray jobs, recorded in ``shards/manifest.json``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence  # noqa: F401  (fuse's and rerank's signatures name them)
from pathlib import Path
from typing import Any

from toolkit.api.options import Bm25Options, DenseOptions, IndexOptions
from toolkit.api.run import Run
from toolkit.data.texts import rerank_inputs, topics_from, topics_source
from toolkit.jobs.distributed import close_sharding, ray_sharding
from toolkit.options import verb
from toolkit.reranking.rerank_options import RerankOptions
from toolkit.retrieval.fusion import FuseOptions

log = logging.getLogger(__name__)


def read_run(path: str | os.PathLike, *, dedupe: str = "error", run_format: str | None = None) -> Run:
    """A run file with its ``PATH.meta.json`` sidecar when there is one: TREC's format or MS MARCO's
    (``qid<TAB>pid<TAB>rank``), detected from the first line or named by ``run_format`` (``Run.read``)."""
    return Run.read(path, dedupe=dedupe, run_format=run_format)


def _on_device(settings: Any, device: str, precision: str, sharding: Any, gpus_per_worker: float | None) -> Any:
    """Encoder settings where the model runs: here (``auto``: cuda when available), or on the Ray workers
    (``auto``: cuda when they hold a GPU), resolved on the driver so the sidecar states what the workers run."""
    from dataclasses import replace

    from toolkit.errors import ConfigError
    from toolkit.models import resolve_precision

    if sharding is None:
        return settings.on_device(device, precision)
    dev = ("cuda" if gpus_per_worker else "cpu") if device == "auto" else device
    if dev.startswith("cuda") and not gpus_per_worker:
        raise ConfigError("device cuda with ray= needs gpus_per_worker (Ray hides GPUs from workers without)")
    return replace(settings, device=dev, precision=resolve_precision(precision, dev))


@verb(IndexOptions, inputs=("collection", "out"))
def build_index(
    collection: str, out: str | os.PathLike | None = None, *, options: IndexOptions
) -> tuple[Any, tuple[str, ...]]:
    """``index`` with every option of ``twostage index``; returns the ``IndexInfo`` (path, kind, documents,
    whether it was reused, seconds, its ``index.meta.json``) and what reading the collection noted.

    Args:
        collection: a collection name (``cacm``), a JSONL file or folder, or a BEIR folder.
        out: the index folder [default: ``indexes/NAME`` or ``indexes/NAME.dense``].
    """
    from toolkit.data.corpus import resolve_corpus
    from toolkit.retrieval.indexing import EncoderSettings, build_dense_index, build_lucene_index

    o = options
    corpus = resolve_corpus(collection, o.collection_class, o.data_dir, o.download)
    out = out or f"indexes/{corpus.name}{'.dense' if o.dense else ''}"
    if not o.dense:
        info = build_lucene_index(corpus, out, o.threads, o.positions, o.docvectors, o.raw, o.force, o.progress)
        return info, corpus.notes
    from toolkit.jobs.shards import shards_dir

    sharding = ray_sharding(
        o.ray, shards_dir(out), o.workers, o.gpus_per_worker, o.force, o.cpus_per_worker, o.shard_size, o.max_retries
    )
    encoder = _on_device(EncoderSettings.of(o), o.device, o.precision, sharding, o.gpus_per_worker)
    try:
        info = build_dense_index(corpus, out, o, encoder=encoder, sharding=sharding)
    finally:
        close_sharding(sharding)
    return info, corpus.notes


@verb(IndexOptions, inputs=("collection", "out"))
def index(collection: str, out: str | os.PathLike | None = None, *, options: IndexOptions) -> Path:
    """Build (or reuse, when built with the same inputs and settings) a Lucene index, or a FAISS index with
    ``dense=True``, as ``twostage index`` does; returns its folder.

    Args:
        collection: a collection name (``cacm``), a JSONL file or folder, or a BEIR folder.
        out: the index folder [default: ``indexes/NAME`` or ``indexes/NAME.dense``].
    """
    info, notes = build_index(collection, out, options=options)
    for note in notes:
        log.info("%s", note)
    return info.path


def _searched(
    result: Any, index_path: Any, topics: Any, t: Any, notes: tuple, params: dict, hits: int, started: float
) -> Run:
    """The run of a search with the sidecar ``twostage bm25/dense`` writes (less the command line)."""
    from toolkit.retrieval.run_meta import empty_note, index_record, run_meta, topics_record

    extra = index_record(index_path) | topics_record(topics, t)
    notes = notes + empty_note(result)
    for note in notes:
        log.info("%s", note)
    return Run(result.run, run_meta(result, hits, params, extra, started), notes)


@verb(Bm25Options, inputs=("index", "topics"))
def bm25(index: str | os.PathLike, topics: Any, *, options: Bm25Options) -> Run:
    """Lucene retrieval through Pyserini: BM25 (``k1``, ``b``), or query likelihood with Dirichlet smoothing
    (``qld=True``, ``mu``); ``rm3=True`` adds RM3 feedback (``fb_terms``, ``fb_docs``, ``original_query_weight``).

    The run's ``meta`` is the sidecar ``twostage bm25 --out`` writes, less the command line.

    Args:
        index: a Lucene index folder.
        topics: a topics file, a collection name, a Pyserini topics name, or ``{qid: text}``.
    """
    from toolkit.retrieval.lucene import LuceneRetriever

    started = time.perf_counter()
    o = options
    retriever = LuceneRetriever(index, o.model, o.k1, o.b, o.mu, o.feedback())
    t, notes = topics_from(topics, o.data_dir, o.max_queries)
    result = retriever.search(t, o.hits, o.threads)
    return _searched(result, index, topics, t, notes, retriever.params() | {"threads": o.threads}, o.hits, started)


@verb(DenseOptions, inputs=("index", "topics"))
def dense(index: str | os.PathLike, topics: Any, *, options: DenseOptions) -> Run:
    """Dense retrieval over a FAISS index built by ``index(..., dense=True)``, queries encoded with the index's
    own encoder. The run's ``meta`` is the sidecar ``twostage dense --out`` writes, less the command line.

    Args:
        index: a dense index folder.
        topics: a topics file, a collection name, a Pyserini topics name, or ``{qid: text}``.
    """
    from toolkit.retrieval.dense import DenseRetriever

    started = time.perf_counter()
    o = options
    sharding = ray_sharding(
        o.ray, o.shards, o.workers, o.gpus_per_worker, o.force, o.cpus_per_worker, o.shard_size, o.max_retries
    )
    retriever = DenseRetriever(index, batch_size=o.batch_size, ef_search=o.ef_search)
    retriever.settings = _on_device(retriever.settings, o.device, o.precision, sharding, o.gpus_per_worker)
    t, notes = topics_from(topics, o.data_dir, o.max_queries)
    try:
        result = retriever.search(t, o.hits, o.threads, sharding=sharding, progress=o.progress)
    finally:
        close_sharding(sharding)
    return _searched(result, index, topics, t, notes, result.params | {"threads": o.threads}, o.hits, started)


@verb(FuseOptions, inputs=("runs", "train_qrels"))
def fuse(runs: Sequence[Any], *, train_qrels: Any = None, options: FuseOptions) -> Run:
    """Fuse runs with any method of ranx 0.3.21, Pyserini 1.6 or trectools 0.0.50, by its name (the table and each
    definition: docs/retrieval.md, ``toolkit.retrieval.fusion.METHODS``). The settings are a
    ``toolkit.retrieval.fusion.FuseOptions`` (``options=``) or its fields as keywords (keywords override
    ``options``): ``method`` (default ``rrf``), ``normalize`` (``none``, ``minmax``, ``max``, ``sum``, ``zmuv``,
    ``rank``, ``borda``), ``weights`` (one per run, for ``wsum``, ``wmnz``, ``mixed``, ``w_bordafuse``,
    ``w_condorcet``), ``params`` (the method's parameters by the peer's names: ``{"phi": 0.8}``), ``k`` (RRF's
    constant, 60), ``depth`` (documents taken from each run, 1000), ``hits`` (documents per query in the result,
    1000), ``resort`` (rank each run by score in trec_eval's order, the default; False: in the order of its
    lines); ``alpha`` is interpolation's ``params={"alpha": ...}``. ``train_qrels`` (a path, a collection name or
    any qrels ``ts.evaluate`` takes): the judgments the learning methods (probfuse, segfuse, slidefuse, mapfuse,
    bayesfuse, posfuse) learn from, and with which a parameter not given (weights, RRF's k, phi, gamma, sigma,
    n_segments, w) is searched as ranx's ``optimize_fusion`` does; the training queries are the runs' queries they
    judge. A method that reads scores, or a normalisation that rescales them, reads only finite scores: a run
    holding ``inf`` or ``-inf`` is an ``InputFormatError`` naming its line (or row). Fused ties are broken in
    trec_eval's order (document id descending), as the sidecar's ``ties`` says. The run's ``meta`` is the sidecar
    ``twostage fuse --out`` writes, less the command line.

    Args:
        runs: the runs (paths, ``Run``s, DataFrames, dicts, ranx Runs).
        train_qrels: judgments to learn from.
    """
    from toolkit.data.adapters import as_qrels, as_run
    from toolkit.data.ranking import candidate_selection
    from toolkit.retrieval.fusion import finite_scores
    from toolkit.retrieval.fusion import fuse as fuse_pool
    from toolkit.retrieval.run_meta import run_meta
    from toolkit.retrieval.search import SearchResult

    started = time.perf_counter()
    opts = options
    # a method that reads scores, or a normalisation that rescales them, refuses an infinite one as the runs are
    # read (rank methods fuse such a run: they read ranks)
    finite = finite_scores(opts)
    loaded = [as_run(r, finite=finite) for r in runs]
    train = as_qrels(train_qrels) if train_qrels is not None else None
    fused = fuse_pool(loaded, opts, train)
    params = fused.record | {"candidate_selection": candidate_selection()}
    qids = set().union(*(set(r.frame["query_id"]) for r in loaded))
    result = SearchResult(fused.run, (), params, time.perf_counter() - started, len(qids))
    extra: dict[str, Any] = {"inputs": [{"path": r.path, "sha256": r.sha256} | r.format_fields() for r in loaded]}
    if train is not None:
        extra["train_qrels"] = {"path": train.path, "sha256": train.sha256}
    return Run(fused.run, run_meta(result, opts.hits, params, extra, started))


def _embedding_cache(spec: Any, reranker: Any, sharding: Any, embedding_cache: Any) -> Any:
    """The bi-encoder's embedding cache: ``True`` the default folder, a path that folder; None for
    cross-encoders and ``embedding_cache=False``."""
    if spec.kind != "bi-encoder" or embedding_cache is False or embedding_cache is None:
        return None
    from toolkit.errors import phrase
    from toolkit.guard.store import Setting
    from toolkit.jobs.embed_cache import EmbeddingCache, default_folder
    from toolkit.reranking.rerank_job import embedding_namespace

    desc = reranker.describe() if sharding is None else spec.describe()  # on Ray the model is built remotely
    folder = default_folder() if embedding_cache is True else embedding_cache
    setting = Setting(
        folder,
        embedding_cache is not True,
        phrase("embedding_cache=FOLDER", "--embedding-cache DIR"),
        phrase("embedding_cache=False", "--no-embedding-cache"),
    )
    return EmbeddingCache(folder, embedding_namespace(desc), setting=setting)


def rerank_job(
    run: Any, topics: Any, candidates: Any, corpus: Any, index: Any, options: RerankOptions
) -> tuple[Any, dict]:
    """``rerank`` with every option of ``twostage rerank`` (``options``); returns the ``RerankResult`` (run,
    settings, seconds, queries, pairs, missing texts) and where the query texts came from (``topics``,
    ``topics_resolved``). ``backend="listwise"`` is ``toolkit.api.listwise_rerank.listwise_job``."""
    from toolkit.api.listwise_rerank import listwise_job
    from toolkit.guard.store import trusting
    from toolkit.models.profiling import phase
    from toolkit.reranking.backends import LISTWISE
    from toolkit.reranking.rerank_job import rerank_run

    spec, o = options.reranker, options
    if spec.backend == LISTWISE:
        with trusting(o.trust_cache):
            return listwise_job(run, topics, candidates, corpus, index, options)
    # a Ray address that does not answer fails first, before any input is read
    sharding = ray_sharding(
        o.ray, o.shards, o.workers, o.gpus_per_worker, o.force, o.cpus_per_worker, o.shard_size, o.max_retries
    )
    try:  # what the job started is stopped, whatever fails
        with trusting(o.trust_cache):  # the caches opened by this job (embeddings, ONNX exports)
            with phase("reading"):
                cand, first, queries, texts = rerank_inputs(run, candidates, topics, corpus, index)
            if sharding is not None and spec.backend == "torch":  # the workers' device, resolved here for the sidecar
                spec = _on_device(spec, spec.device, spec.precision, sharding, o.gpus_per_worker)
            spec = spec.resolved()
            with phase("model load"):
                reranker = spec if sharding is not None else spec.build()  # on Ray each worker builds its own
            cache = _embedding_cache(spec, reranker, sharding, o.embedding_cache)
            with phase("scoring"):
                result = rerank_run(first, queries, texts, reranker, o, sharding=sharding, cache=cache)
    finally:
        close_sharding(sharding)
    return result, topics_source(topics, cand)


@verb(RerankOptions, inputs=("run", "topics", "candidates", "corpus", "index"))
def rerank(
    run: Any = None,
    *,
    topics: Any = None,
    candidates: str | os.PathLike | None = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    options: RerankOptions,
) -> Run:
    """Rerank a first-stage run's top ``depth`` candidates with a bi- or cross-encoder (``twostage rerank``).

    Args:
        run: the first-stage run (a path, ``Run``, DataFrame or dict); or give ``candidates``.
        topics: query texts: a file, a collection name, or ``{qid: text}`` (added to the candidates' own).
        candidates: a candidates JSON (first stage, query and passage texts in one file).
        corpus: a JSONL corpus for passage texts.
        index: a Lucene index with stored texts.

    Raises:
        CacheUnusableError: a cache folder (embeddings, listwise answers, ONNX exports) the file system refuses
            (full, read-only, no permission, a missing folder that cannot be made, ...): the rerank stops before
            ``out`` is written; ``embedding_cache=False`` / ``answer_cache=False`` run without those caches.
    """
    result, source = rerank_job(run, topics, candidates, corpus, index, options)
    return Run(result.run, dict(result.settings) | source)
