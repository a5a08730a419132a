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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.api.run import Run
from toolkit.guard.client import DEFAULT_BACKOFF, DEFAULT_CONCURRENCY, DEFAULT_RETRIES, DEFAULT_TIMEOUT

log = logging.getLogger(__name__)


def read_run(path: str | os.PathLike, *, dedupe: str = "error") -> Run:
    """A run file (TREC format) with its ``PATH.meta.json`` sidecar when there is one."""
    return Run.read(path, dedupe=dedupe)


def _sharding(
    ray: str | None,
    shards: str | os.PathLike | None,
    workers: int | None,
    gpus_per_worker: float | None,
    force: bool,
    cpus_per_worker: float | None = None,
    shard_size: int | None = None,
    max_retries: int | None = None,
) -> Any:
    """A Ray ``Sharding`` for ``ray=`` (shards recorded under ``shards``); None runs in this process."""
    if ray is None:
        return None
    from toolkit.errors import ConfigError
    from toolkit.jobs.distributed import RayExecutor, RayOptions
    from toolkit.jobs.shards import Sharding

    if shards is None:
        raise ConfigError("ray= needs shards=FOLDER: where the job's manifest and shard results are kept")
    options = RayOptions(
        ray,
        workers or 2,
        gpus_per_worker or 0.0,
        1.0 if cpus_per_worker is None else cpus_per_worker,
        3 if max_retries is None else max_retries,
    )
    return Sharding(RayExecutor(options), Path(shards), shard_size, force)


def _shutdown(sharding: Any) -> None:
    if sharding is not None:
        from toolkit.jobs.distributed import shutdown

        shutdown()


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


def _topics(topics: Any, data_dir: str | os.PathLike | None, max_queries: int | None) -> tuple[Any, tuple[str, ...]]:
    """The topics (a file, a name, or ``{qid: text}``), the first ``max_queries``, and what reading them noted
    (Cranfield's query renumbering)."""
    from toolkit.data import catalog
    from toolkit.data.records import Topic, Topics
    from toolkit.retrieval.search import limit_topics

    if isinstance(topics, Mapping):
        return limit_topics(Topics(tuple(Topic(str(q), str(t)) for q, t in topics.items())), max_queries), ()
    spec = str(topics)
    t = catalog.resolve_topics(spec, data_dir)
    notes: tuple[str, ...] = ()
    if catalog.is_collection_name(spec) and catalog.get_collection(spec).corpus == "smart":
        notes = tuple(catalog.convert_cranfield(data_dir).notes[1:2])  # the query renumbering
    return limit_topics(t, max_queries), notes


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

    sharding = _sharding(
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
        _shutdown(sharding)
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
    from toolkit.api.sidecars import empty_note, index_record, run_meta, topics_record

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
    t, notes = _topics(topics, data_dir, max_queries)
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
    sharding = _sharding(ray, shards, workers, gpus_per_worker, force, **ray_options)
    retriever = DenseRetriever(index, batch_size=batch_size, ef_search=ef_search)
    retriever.settings = _on_device(retriever.settings, device, precision, sharding, gpus_per_worker)
    t, notes = _topics(topics, data_dir, max_queries)
    try:
        result = retriever.search(t, hits, threads, sharding=sharding, progress=progress)
    finally:
        _shutdown(sharding)
    return _searched(result, index, topics, t, notes, result.params | {"threads": threads}, hits, started)


def fuse(
    runs: Sequence[Any],
    *,
    method: str = "rrf",
    k: float = 60.0,
    alpha: float = 0.5,
    normalize: str = "none",
    depth: int = 1000,
    hits: int = 1000,
) -> Run:
    """Fuse runs: reciprocal rank fusion (``method="rrf"``, constant ``k``) or score interpolation
    (``method="interpolation"``, ``alpha`` the first run's weight, ``normalize`` ``none`` or ``minmax``).
    The run's ``meta`` is the sidecar ``twostage fuse --out`` writes, less the command line.

    Args:
        runs: the runs (paths, ``Run``s, DataFrames, dicts).
        method: ``rrf`` or ``interpolation``.
        k: the RRF constant.
        alpha: interpolation: weight of the first run.
        normalize: interpolation: per-query score normalisation before mixing.
        depth: documents taken from each run.
        hits: documents per query in the result.
    """
    from toolkit.api.inputs import as_run
    from toolkit.api.sidecars import run_meta
    from toolkit.data.ranking import candidate_selection
    from toolkit.errors import ConfigError
    from toolkit.retrieval.fusion import interpolate, rrf
    from toolkit.retrieval.search import SearchResult

    started = time.perf_counter()
    loaded = [as_run(r) for r in runs]
    if method == "rrf":
        fused = rrf(loaded, k, depth, hits)
        params: dict = {"method": "rrf", "k": k, "depth": depth}
    elif method == "interpolation":
        fused = interpolate(loaded, alpha, depth, hits, normalize)
        params = {"method": "interpolation", "alpha": alpha, "normalize": normalize, "depth": depth}
    else:
        raise ConfigError(f"method must be rrf or interpolation, not {method!r}")
    params["candidate_selection"] = candidate_selection()
    qids = set().union(*(set(r.frame["query_id"]) for r in loaded))
    result = SearchResult(fused, (), params, time.perf_counter() - started, len(qids))
    extra = {"inputs": [{"path": r.path, "sha256": r.sha256} for r in loaded]}
    return Run(fused, run_meta(result, hits, params, extra, started))


def _texts(first: Any, candidates: Any, corpus: Any, index: Any) -> Any:
    from toolkit.data.texts import lucene_text_source, read_jsonl_corpus
    from toolkit.errors import ConfigError

    if corpus and index:
        raise ConfigError("give at most one of corpus= or index=")
    if corpus:
        return read_jsonl_corpus(corpus, wanted=set(first.frame["doc_id"].unique().tolist()))
    if index:
        return lucene_text_source(index)
    if candidates is not None:
        return candidates.text_source()
    raise ConfigError("a run needs a text source: corpus=JSONL or index=LUCENE_INDEX (or candidates=JSON)")


def _rerank_inputs(run: Any, candidates: Any, topics: Any, corpus: Any, index: Any) -> tuple[Any, Any, dict, Any]:
    """(the candidates file or None, the first-stage run, the query texts, the document texts)."""
    from toolkit.api.inputs import as_run
    from toolkit.data.texts import read_candidates
    from toolkit.errors import ConfigError

    if (run is None) == (candidates is None):
        raise ConfigError("give exactly one of run= or candidates=")
    cand = read_candidates(candidates) if candidates is not None else None
    first = cand.run if cand is not None else as_run(run)
    queries = dict(cand.topics.as_dict()) if cand is not None else {}
    if topics is not None:
        queries.update(_topics(topics, None, None)[0].as_dict())
    if not queries:
        raise ConfigError("reranking a run needs topics= (query texts)")
    return cand, first, queries, _texts(first, cand, corpus, index)


def _rerank_query_ids(query_ids: Iterable[str] | None, judged_only: Any) -> list[str] | None:
    """The queries to rerank: ``query_ids``, only those judged in ``judged_only`` (or all of those)."""
    ids = [str(q) for q in query_ids or ()]
    if judged_only is not None:
        from toolkit.api.inputs import as_qrels

        judged = set(as_qrels(judged_only).query_ids)
        ids = [q for q in ids if q in judged] if ids else sorted(judged)
    return ids or None


def _embedding_cache(spec: Any, reranker: Any, sharding: Any, embedding_cache: Any) -> Any:
    """The bi-encoder's embedding cache: ``True`` the default folder, a path that folder; None for
    cross-encoders and ``embedding_cache=False``."""
    if spec.kind != "bi-encoder" or embedding_cache is False or embedding_cache is None:
        return None
    from toolkit.jobs.embed_cache import EmbeddingCache, default_folder
    from toolkit.reranking.job import embedding_namespace

    desc = reranker.describe() if sharding is None else spec.describe()  # on Ray the model is built remotely
    folder = default_folder() if embedding_cache is True else embedding_cache
    return EmbeddingCache(folder, embedding_namespace(desc))


def _topics_source(topics: Any, cand: Any) -> dict:
    """Where the query texts came from, as the rerank sidecar records it."""
    given = ("<dict>" if isinstance(topics, Mapping) else str(topics)) if topics is not None else None
    source: str | None = given or (str(cand.path) if cand is not None and cand.path else None)
    resolved = str(Path(source).resolve()) if source and source != "<dict>" and Path(source).is_file() else None
    if resolved is None:
        return {"topics": source, "topics_resolved": None}
    from toolkit.data.trec_io import sha256_file

    return {"topics": source, "topics_resolved": resolved, "topics_sha256": sha256_file(resolved)}


def rerank_job(
    run: Any = None,
    *,
    model: str,
    topics: Any = None,
    candidates: str | os.PathLike | None = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    kind: str = "auto",
    depth: int = 100,
    batch_size: int = 32,
    max_length: int | None = None,
    device: str = "auto",
    backend: str = "torch",
    precision: str = "auto",
    model_type: str | None = None,
    missing_text: str = "error",
    query_ids: Iterable[str] | None = None,
    judged_only: Any = None,
    embedding_cache: str | os.PathLike | bool = False,
    tag: str = "twostage-rerank",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    cpus_per_worker: float | None = None,
    shard_size: int | None = None,
    max_retries: int | None = None,
    shards: str | os.PathLike | None = None,
    force: bool = False,
    progress: bool = False,
    trust_cache: bool = False,
    listwise: Mapping[str, Any] | None = None,
) -> tuple[Any, dict]:
    """``rerank`` with every option of ``twostage rerank``; returns the ``RerankResult`` (run, settings,
    seconds, queries, pairs, missing texts) and where the query texts came from (``topics``,
    ``topics_resolved``). ``trust_cache``: read the embedding, ONNX and answer caches even when another user owns
    them or may write to them (``toolkit.guard.store``). ``backend="listwise"`` takes its own options from
    ``listwise`` (see ``listwise_job``)."""
    from toolkit.guard.store import trusting
    from toolkit.models.profiling import phase
    from toolkit.reranking.backends import LISTWISE, RerankerSpec
    from toolkit.reranking.job import rerank_run

    if backend == LISTWISE:
        if ray is not None:
            from toolkit.errors import ConfigError

            raise ConfigError("the listwise backend runs its requests concurrently in this process; drop --ray")
        with trusting(trust_cache):
            return listwise_job(
                run,
                model=model,
                topics=topics,
                candidates=candidates,
                corpus=corpus,
                index=index,
                depth=depth,
                device=device,
                batch_size=batch_size,
                missing_text=missing_text,
                query_ids=query_ids,
                judged_only=judged_only,
                tag=tag,
                progress=progress,
                **dict(listwise or {}),
            )
    # a Ray address that does not answer fails first, before any input is read
    sharding = _sharding(ray, shards, workers, gpus_per_worker, force, cpus_per_worker, shard_size, max_retries)
    try:  # what the job started is stopped, whatever fails
        with trusting(trust_cache):  # the caches opened by this job (embeddings, ONNX exports)
            with phase("reading"):
                cand, first, queries, texts = _rerank_inputs(run, candidates, topics, corpus, index)
            spec = RerankerSpec(model, kind, device, batch_size, max_length, backend, precision, model_type)
            if sharding is not None and backend == "torch":  # the workers' device, resolved here for the sidecar
                spec = _on_device(spec, device, precision, sharding, gpus_per_worker)
            spec = spec.resolved()
            with phase("model load"):
                reranker = spec if sharding is not None else spec.build()  # on Ray each worker builds its own
            cache = _embedding_cache(spec, reranker, sharding, embedding_cache)
            ids = _rerank_query_ids(query_ids, judged_only)
            with phase("scoring"):
                result = rerank_run(
                    first, queries, texts, reranker, depth, missing_text, ids, progress, tag, sharding, cache
                )
    finally:
        _shutdown(sharding)
    return result, _topics_source(topics, cand)


#: the options only ``backend="listwise"`` takes (``listwise_job``)
LISTWISE_OPTIONS = (
    "endpoint",
    "window",
    "stride",
    "prompt",
    "shuffles",
    "seed",
    "qrels",
    "answer_cache",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "rate",
    "max_response_bytes",
)


def listwise_job(
    run: Any = None,
    *,
    model: str,
    topics: Any = None,
    candidates: str | os.PathLike | None = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    depth: int = 100,
    window: int = 20,
    stride: int = 10,
    prompt: str | os.PathLike | None = None,
    endpoint: str | None = None,
    shuffles: int = 0,
    seed: int = 42,
    qrels: Any = None,
    answer_cache: str | os.PathLike | bool = True,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    rate: float | None = None,
    max_response_bytes: int | None = None,
    device: str = "auto",
    batch_size: int = 8,
    missing_text: str = "error",
    query_ids: Iterable[str] | None = None,
    judged_only: Any = None,
    tag: str = "twostage-rerank",
    progress: bool = False,
) -> tuple[Any, dict]:
    """The listwise LLM reranker (``toolkit.reranking.listwise``): rank_llm's sliding windows of ``window``
    passages ``stride`` apart over the top ``depth``, each window one request to the OpenAI-compatible
    ``endpoint`` serving ``model`` (through ``toolkit.guard.client``: ``concurrency`` requests in flight across
    queries, ``retries``, ``backoff``, ``rate``, ``timeout`` a deadline per request, answers bounded by
    ``max_response_bytes``), or, without ``endpoint``, a local causal LM folder ``model`` run by transformers
    (``device``, ``batch_size``). ``prompt``: a listwise template file; ``answer_cache``: ``True`` the default
    folder ``$TWOSTAGE_CACHE/listwise``, a folder, or ``False``; ``shuffles`` K and ``seed``: the order probe;
    ``qrels`` (a file, a collection name or anything ``as_qrels`` reads): the probe's nDCG@10 of the run and of
    each shuffled run, and their spread. The template, the window and the endpoint are checked before the inputs
    are read."""
    from toolkit.errors import ConfigError
    from toolkit.guard.client import DEFAULT_MAX_RESPONSE_BYTES
    from toolkit.judging.backends import OpenAIChatJudge, TransformersJudge
    from toolkit.models.profiling import phase
    from toolkit.reranking.listwise import check_window, listwise_rerank_run, load_listwise_template

    check_window(depth, window, stride)
    if qrels is not None and not shuffles:
        raise ConfigError("--qrels is the order probe's nDCG@10 spread: give --shuffles K (K >= 1) with it")
    template = load_listwise_template(prompt)
    llm: Any
    if endpoint:
        llm = OpenAIChatJudge(
            endpoint,
            model,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            rate=rate,
            max_response_bytes=max_response_bytes if max_response_bytes is not None else DEFAULT_MAX_RESPONSE_BYTES,
            role="listwise reranker",
        )
    else:
        llm = TransformersJudge(model, device=device, batch_size=batch_size)
    try:
        llm.check()
        with phase("reading"):
            cand, first, queries, texts = _rerank_inputs(run, candidates, topics, corpus, index)
            judged = None
            if qrels is not None:
                from toolkit.api.inputs import as_qrels

                judged = as_qrels(qrels)
        cache = _answer_cache(answer_cache)
        try:
            with phase("scoring"):
                result = listwise_rerank_run(
                    first,
                    queries,
                    texts,
                    llm,
                    depth=depth,
                    window=window,
                    stride=stride,
                    template=template,
                    cache=cache,
                    missing_text=missing_text,
                    query_ids=_rerank_query_ids(query_ids, judged_only),
                    shuffles=shuffles,
                    seed=seed,
                    qrels=judged,
                    tag=tag,
                    progress=progress,
                )
        finally:
            if cache is not None:
                cache.close()
    finally:
        close = getattr(llm, "close", None)
        if close is not None:
            close()
    return result, _topics_source(topics, cand)


def _answer_cache(answer_cache: Any) -> Any:
    """The listwise answers' cache: a ``JudgmentCache`` in its own folder (``True``: ``$TWOSTAGE_CACHE/listwise``)."""
    if answer_cache is False or answer_cache is None:
        return None
    from toolkit.judging.cache import JudgmentCache

    if answer_cache is True:
        from toolkit.data.catalog import cache_dir

        return JudgmentCache(cache_dir() / "listwise")
    return JudgmentCache(answer_cache)


def rerank(
    run: Any = None,
    *,
    model: str,
    topics: Any = None,
    candidates: str | os.PathLike | None = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    kind: str = "auto",
    depth: int = 100,
    batch_size: int = 32,
    max_length: int | None = None,
    device: str = "auto",
    backend: str = "torch",
    precision: str = "auto",
    model_type: str | None = None,
    missing_text: str = "error",
    tag: str = "twostage-rerank",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    shards: str | os.PathLike | None = None,
    progress: bool = False,
    **options: Any,
) -> Run:
    """Rerank a first-stage run's top ``depth`` candidates with a bi- or cross-encoder (``twostage rerank``).

    Args:
        run: the first-stage run (a path, ``Run``, DataFrame or dict); or give ``candidates``.
        model: a model path or name (``all-MiniLM-L6-v2``, ``cross-encoder/ms-marco-MiniLM-L-6-v2``).
        topics: query texts: a file, a collection name, or ``{qid: text}`` (added to the candidates' own).
        candidates: a candidates JSON (first stage, query and passage texts in one file).
        corpus: a JSONL corpus for passage texts.
        index: a Lucene index with stored texts.
        kind: ``auto``, ``bi-encoder`` or ``cross-encoder``.
        depth: candidates reranked per query.
        batch_size: texts per model batch.
        max_length: tokens per text [default: the model's].
        device: ``auto`` (the default: the GPU where there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
        backend: ``torch``, ``onnx``, ``onnx-int8``, or ``rerankers`` (other model families through the
            ``rerankers`` library, by ``model_type``; the ``[rerankers]`` extra).
        precision: ``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.
        model_type: with ``backend="rerankers"``: the library's model type, ``cross-encoder`` or ``t5``.
        missing_text: ``error``, or ``bottom`` (keep a candidate without text below the scored ones).
        tag: the run's tag.
        ray: a Ray address: score in shards on Ray workers.
        workers: Ray workers.
        gpus_per_worker: GPUs per Ray worker.
        shards: with ``ray``: the folder of the job's manifest and shards (resumable).
        progress: show a progress bar.
        **options: with ``backend="listwise"``, its options (``endpoint``, ``window``, ``stride``, ``prompt``,
            ``shuffles``, ``seed``, ``qrels`` (with ``shuffles``: the probe's nDCG@10 spread), ``answer_cache``,
            ``concurrency``, ``timeout``, ``retries``, ``backoff``,
            ``rate``, ``max_response_bytes``: see ``listwise_job``); and
            the other options of ``twostage rerank``: ``query_ids`` (only these queries),
            ``judged_only`` (qrels: only the queries they judge), ``embedding_cache`` (``True``: reuse
            bi-encoder embeddings from ``$TWOSTAGE_CACHE/embeddings``, or a folder), ``trust_cache`` (read the
            embedding and ONNX caches even when another user owns them or may write to them), ``force``,
            ``cpus_per_worker``, ``shard_size``, ``max_retries``: see ``rerank_job``.
    """
    listwise = {k: options.pop(k) for k in LISTWISE_OPTIONS if k in options}
    if listwise and backend != "listwise":
        from toolkit.errors import ConfigError

        raise ConfigError(f"{', '.join(sorted(listwise))}: options of backend='listwise' only")
    from toolkit.api.keywords import check_keywords, keywords_of

    check_keywords("rerank", options, keywords_of(rerank_job) - keywords_of(rerank))
    result, source = rerank_job(
        run,
        model=model,
        topics=topics,
        candidates=candidates,
        corpus=corpus,
        index=index,
        kind=kind,
        depth=depth,
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        backend=backend,
        precision=precision,
        model_type=model_type,
        missing_text=missing_text,
        tag=tag,
        ray=ray,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        shards=shards,
        progress=progress,
        listwise=listwise,
        **options,
    )
    return Run(result.run, dict(result.settings) | source)
