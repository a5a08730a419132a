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
from collections.abc import Iterable, Sequence  # noqa: F401 (Iterable: in the annotation of rerank's query_ids)
from pathlib import Path
from typing import Any

from toolkit.api.run import Run
from toolkit.data.texts import rerank_inputs, rerank_query_ids, topics_from, topics_source
from toolkit.jobs.distributed import close_sharding, ray_sharding
from toolkit.options import verb
from toolkit.reranking.rerank_options import RerankOptions

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


def build_index(
    collection: str,
    out: str | os.PathLike | None = None,
    *,
    collection_class: str | None = None,
    dense: bool = False,
    encoder: str = "all-MiniLM-L6-v2",
    pooling: str = "mean",
    normalize: bool = True,
    max_length: int = 256,
    batch_size: int = 32,
    query_prefix: str = "",
    doc_prefix: str = "",
    hnsw: bool = False,
    hnsw_m: int = 32,
    limit: int | None = None,
    threads: int = 2,
    positions: bool = True,
    docvectors: bool = True,
    raw: bool = True,
    device: str = "auto",
    precision: str = "auto",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    cpus_per_worker: float | None = None,
    shard_size: int | None = None,
    max_retries: int | None = None,
    force: bool = False,
    download: bool = True,
    progress: bool = False,
    data_dir: str | os.PathLike | None = None,
) -> tuple[Any, tuple[str, ...]]:
    """``index`` with every option of ``twostage index``; returns the ``IndexInfo`` (path, kind, documents,
    whether it was reused, seconds, its ``index.meta.json``) and what reading the collection noted."""
    from toolkit.data.corpus import resolve_corpus
    from toolkit.errors import ConfigError
    from toolkit.retrieval.indexing import EncoderSettings, build_dense_index, build_lucene_index

    corpus = resolve_corpus(collection, collection_class, data_dir, download)
    out = out or f"indexes/{corpus.name}{'.dense' if dense else ''}"
    if ray is not None and not dense:
        raise ConfigError("--ray distributes dense encoding (--dense); Lucene indexing runs in Anserini")
    if not dense:
        return build_lucene_index(corpus, out, threads, positions, docvectors, raw, force, progress), corpus.notes
    from toolkit.jobs.shards import shards_dir

    sharding = ray_sharding(
        ray, shards_dir(out), workers, gpus_per_worker, force, cpus_per_worker, shard_size, max_retries
    )
    settings = EncoderSettings(encoder, pooling, normalize, max_length, batch_size, query_prefix, doc_prefix)
    settings = _on_device(settings, device, precision, sharding, gpus_per_worker)
    try:
        info = build_dense_index(
            corpus,
            out,
            settings,
            hnsw=hnsw,
            hnsw_m=hnsw_m,
            threads=threads,
            limit=limit,
            force=force,
            progress=progress,
            sharding=sharding,
        )
    finally:
        close_sharding(sharding)
    return info, corpus.notes


def index(
    collection: str,
    out: str | os.PathLike | None = None,
    *,
    dense: bool = False,
    encoder: str = "all-MiniLM-L6-v2",
    pooling: str = "mean",
    normalize: bool = True,
    max_length: int = 256,
    batch_size: int = 32,
    hnsw: bool = False,
    threads: int = 2,
    device: str = "auto",
    precision: str = "auto",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    force: bool = False,
    progress: bool = False,
    data_dir: str | os.PathLike | None = None,
    **options: Any,
) -> Path:
    """Build (or reuse, when built with the same inputs and settings) a Lucene index, or a FAISS index with
    ``dense=True``, as ``twostage index`` does; returns its folder.

    Args:
        collection: a collection name (``cacm``), a JSONL file or folder, or a BEIR folder.
        out: the index folder [default: ``indexes/NAME`` or ``indexes/NAME.dense``].
        dense: build a FAISS index of ``encoder`` embeddings instead of a Lucene index.
        encoder: the dense encoder (a path or a model name).
        pooling: ``mean`` or ``cls``.
        normalize: L2-normalise the vectors (inner product is then cosine).
        max_length: tokens per passage.
        batch_size: passages per encoding batch.
        hnsw: an HNSW index instead of a flat one.
        threads: indexing threads.
        device: ``auto`` (the default: the GPU where there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
        precision: ``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.
        ray: a Ray address: encode as a sharded job (dense only; shards in ``OUT.shards``).
        workers: Ray workers.
        gpus_per_worker: GPUs per Ray worker.
        force: rebuild even when a matching index exists.
        progress: show progress bars.
        data_dir: where collection names are looked up.
        **options: the other options of ``twostage index`` (``collection_class``, ``query_prefix``,
            ``doc_prefix``, ``hnsw_m``, ``limit``, ``positions``, ``docvectors``, ``raw``, ``download``,
            ``cpus_per_worker``, ``shard_size``, ``max_retries``): see ``build_index``.
    """
    from toolkit.api.keywords import check_keywords, keywords_of

    check_keywords("index", options, keywords_of(build_index) - keywords_of(index))
    info, notes = build_index(
        collection,
        out,
        dense=dense,
        encoder=encoder,
        pooling=pooling,
        normalize=normalize,
        max_length=max_length,
        batch_size=batch_size,
        hnsw=hnsw,
        threads=threads,
        device=device,
        precision=precision,
        ray=ray,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        force=force,
        progress=progress,
        data_dir=data_dir,
        **options,
    )
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


def bm25(
    index: str | os.PathLike,
    topics: Any,
    *,
    hits: int = 1000,
    k1: float = 0.9,
    b: float = 0.4,
    qld: bool = False,
    mu: float = 1000.0,
    rm3: bool = False,
    fb_terms: int = 10,
    fb_docs: int = 10,
    original_query_weight: float = 0.5,
    threads: int = 2,
    max_queries: int | None = None,
    data_dir: str | os.PathLike | None = None,
) -> Run:
    """Lucene retrieval through Pyserini: BM25 (``k1``, ``b``), or query likelihood with Dirichlet smoothing
    (``qld=True``, ``mu``); ``rm3=True`` adds RM3 feedback (``fb_terms``, ``fb_docs``, ``original_query_weight``).

    The run's ``meta`` is the sidecar ``twostage bm25 --out`` writes, less the command line.

    Args:
        index: a Lucene index folder.
        topics: a topics file, a collection name, a Pyserini topics name, or ``{qid: text}``.
        hits: documents per query.
        k1: BM25 k1.
        b: BM25 b.
        qld: query likelihood instead of BM25.
        mu: Dirichlet mu (with ``qld``).
        rm3: RM3 pseudo-relevance feedback.
        fb_terms: RM3 feedback terms.
        fb_docs: RM3 feedback documents.
        original_query_weight: RM3 weight of the original query.
        threads: search threads.
        max_queries: only the first N topics.
        data_dir: where collection names are looked up.
    """
    from toolkit.retrieval.lucene import RM3, LuceneRetriever
    from toolkit.retrieval.search import validate_hits

    started = time.perf_counter()
    validate_hits(hits)
    rm3_params = RM3(fb_terms, fb_docs, original_query_weight) if rm3 else None
    retriever = LuceneRetriever(index, "qld" if qld else "bm25", k1, b, mu, rm3_params)
    t, notes = topics_from(topics, data_dir, max_queries)
    result = retriever.search(t, hits, threads)
    return _searched(result, index, topics, t, notes, retriever.params() | {"threads": threads}, hits, started)


def dense(
    index: str | os.PathLike,
    topics: Any,
    *,
    hits: int = 1000,
    batch_size: int = 32,
    ef_search: int = 256,
    device: str = "auto",
    precision: str = "auto",
    threads: int = 2,
    max_queries: int | None = None,
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    shards: str | os.PathLike | None = None,
    force: bool = False,
    progress: bool = False,
    data_dir: str | os.PathLike | None = None,
    **ray_options: Any,
) -> Run:
    """Dense retrieval over a FAISS index built by ``index(..., dense=True)``, queries encoded with the index's
    own encoder. The run's ``meta`` is the sidecar ``twostage dense --out`` writes, less the command line.

    Args:
        index: a dense index folder.
        topics: a topics file, a collection name, a Pyserini topics name, or ``{qid: text}``.
        hits: documents per query.
        batch_size: query encoding batch size.
        ef_search: HNSW efSearch.
        device: ``auto`` (the default: the GPU where there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
        precision: ``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.
        threads: search threads.
        max_queries: only the first N topics.
        ray: a Ray address: encode and search in shards on Ray workers.
        workers: Ray workers.
        gpus_per_worker: GPUs per Ray worker.
        shards: with ``ray``: the folder of the job's manifest and shards (resumable).
        force: with ``ray``: discard a different earlier job's shards.
        progress: show progress bars.
        data_dir: where collection names are looked up.
        **ray_options: with ``ray``: ``cpus_per_worker``, ``shard_size``, ``max_retries`` (as ``--ray``'s).
    """
    from toolkit.retrieval.dense import DenseRetriever
    from toolkit.retrieval.search import validate_hits

    started = time.perf_counter()
    from toolkit.api.keywords import check_keywords

    check_keywords("dense", ray_options, ("cpus_per_worker", "shard_size", "max_retries"))
    validate_hits(hits)
    sharding = ray_sharding(ray, shards, workers, gpus_per_worker, force, **ray_options)
    retriever = DenseRetriever(index, batch_size=batch_size, ef_search=ef_search)
    retriever.settings = _on_device(retriever.settings, device, precision, sharding, gpus_per_worker)
    t, notes = topics_from(topics, data_dir, max_queries)
    try:
        result = retriever.search(t, hits, threads, sharding=sharding, progress=progress)
    finally:
        close_sharding(sharding)
    return _searched(result, index, topics, t, notes, result.params | {"threads": threads}, hits, started)


def fuse(
    runs: Sequence[Any],
    *,
    options: Any = None,
    train_qrels: Any = None,
    **keywords: Any,
) -> Run:
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
        options: a ``FuseOptions``.
        train_qrels: judgments to learn from.
        **keywords: ``FuseOptions`` fields (``method``, ``normalize``, ``weights``, ``params``, ``k``, ``depth``,
            ``hits``, ``resort``) and ``alpha``.
    """
    from dataclasses import fields

    from toolkit.api.keywords import check_keywords
    from toolkit.data.adapters import as_qrels, as_run
    from toolkit.data.ranking import candidate_selection
    from toolkit.errors import ConfigError
    from toolkit.retrieval.fusion import FuseOptions, finite_scores
    from toolkit.retrieval.fusion import fuse as fuse_pool
    from toolkit.retrieval.run_meta import run_meta
    from toolkit.retrieval.search import SearchResult

    started = time.perf_counter()
    names = [f.name for f in fields(FuseOptions)]
    check_keywords("fuse", keywords, [*names, "alpha"])
    if options is not None and not isinstance(options, FuseOptions):
        raise ConfigError(f"options must be a FuseOptions, not {type(options).__name__}")
    settings = {n: getattr(options, n) for n in names} if options is not None else {}
    if settings:  # RRF's k travels in the k field alone, so that a k keyword replaces the options' one
        settings["params"] = {n: v for n, v in settings["params"].items() if n != "k"}
    alpha = keywords.pop("alpha", None)
    settings |= keywords
    if alpha is not None:
        settings["params"] = dict(settings.get("params") or {}) | {"alpha": alpha}
    opts = FuseOptions(**settings)
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
            ids = rerank_query_ids(o.query_ids, o.judged_only)
            with phase("scoring"):
                result = rerank_run(
                    first, queries, texts, reranker, o.depth, o.missing_text, ids, o.progress, o.tag, sharding, cache
                )
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
