"""First stage and reranking as calls that return runs: ``index``, ``bm25``, ``dense``, ``fuse``, ``rerank``.

Each takes what the matching ``twostage`` command takes and returns a ``Run`` whose ``meta`` holds the
settings its sidecar records; ``Run.write(path)`` writes both. Progress bars are off unless
``progress=True``. ``ray=ADDRESS`` (``"auto"``, ``"local"``, ``ray://host:port``) runs dense encoding,
search and reranking as sharded, resumable Ray jobs, recorded in ``shards/manifest.json``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.api.run import Run


def read_run(path: str | os.PathLike, *, dedupe: str = "error") -> Run:
    """A run file (TREC format) with its ``PATH.meta.json`` sidecar when there is one."""
    return Run.read(path, dedupe=dedupe)


def _sharding(
    ray: str | None, shards: str | os.PathLike | None, workers: int | None, gpus_per_worker: float | None, force: bool
) -> Any:
    """A Ray ``Sharding`` for ``ray=`` (shards recorded under ``shards``); None runs in this process."""
    if ray is None:
        return None
    from toolkit.errors import ConfigError
    from toolkit.jobs.distributed import RayExecutor, RayOptions
    from toolkit.jobs.shards import Sharding

    if shards is None:
        raise ConfigError("ray= needs shards=FOLDER: where the job's manifest and shard results are kept")
    options = RayOptions(ray, workers or 2, gpus_per_worker or 0.0, 1.0, 3)
    return Sharding(RayExecutor(options), Path(shards), None, force)


def _shutdown(sharding: Any) -> None:
    if sharding is not None:
        from toolkit.jobs.distributed import shutdown

        shutdown()


def _topics(topics: Any, data_dir: str | os.PathLike | None, max_queries: int | None) -> Any:
    from toolkit.catalog import resolve_topics
    from toolkit.records import Topic, Topics
    from toolkit.retrieval.search import limit_topics

    if isinstance(topics, Mapping):
        t = Topics(tuple(Topic(str(q), str(text)) for q, text in topics.items()))
    else:
        t = resolve_topics(str(topics), data_dir)
    return limit_topics(t, max_queries)


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
    device: str = "cpu",
    precision: str = "auto",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    force: bool = False,
    progress: bool = False,
    data_dir: str | os.PathLike | None = None,
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
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
        precision: ``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.
        ray: a Ray address: encode as a sharded job (dense only).
        workers: Ray workers.
        gpus_per_worker: GPUs per Ray worker.
        force: rebuild even when a matching index exists.
        progress: show progress bars.
        data_dir: where collection names are looked up.
    """
    from toolkit.corpus import resolve_corpus
    from toolkit.errors import ConfigError
    from toolkit.retrieval.indexing import EncoderSettings, build_dense_index, build_lucene_index

    corpus = resolve_corpus(collection, None, data_dir)
    out = out or f"indexes/{corpus.name}{'.dense' if dense else ''}"
    if ray is not None and not dense:
        raise ConfigError("ray= distributes dense encoding (dense=True); Lucene indexing runs in Anserini")
    if not dense:
        return build_lucene_index(corpus, out, threads, force=force, progress=progress).path
    settings = EncoderSettings(encoder, pooling, normalize, max_length, batch_size).on_device(device, precision)
    sharding = _sharding(ray, str(out) + ".shards", workers, gpus_per_worker, force)
    try:
        info = build_dense_index(
            corpus, out, settings, hnsw=hnsw, threads=threads, force=force, progress=progress, sharding=sharding
        )
    finally:
        _shutdown(sharding)
    return info.path


def _search_meta(result: Any, index_path: Any, topics: Any, t: Any, params: dict, started: float) -> dict:
    from toolkit.retrieval.indexing import read_meta

    return {
        "parameters": params,
        "index": {"path": str(index_path), "meta": read_meta(index_path)},
        "topics": {
            "spec": str(topics) if not isinstance(topics, Mapping) else "<dict>",
            "path": t.path,
            "count": len(t),
        },
        "queries": result.queries,
        "empty_queries": list(result.empty_queries),
        "search_seconds": round(result.seconds, 3),
        "seconds": round(time.perf_counter() - started, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


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
    t = _topics(topics, data_dir, max_queries)
    result = retriever.search(t, hits, threads)
    params = retriever.params() | {"threads": threads, "hits": hits}
    return Run(result.run, _search_meta(result, index, topics, t, params, started))


def dense(
    index: str | os.PathLike,
    topics: Any,
    *,
    hits: int = 1000,
    batch_size: int = 32,
    ef_search: int = 256,
    device: str = "cpu",
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
) -> Run:
    """Dense retrieval over a FAISS index built by ``index(..., dense=True)``, queries encoded with the index's
    own encoder.

    Args:
        index: a dense index folder.
        topics: a topics file, a collection name, a Pyserini topics name, or ``{qid: text}``.
        hits: documents per query.
        batch_size: query encoding batch size.
        ef_search: HNSW efSearch.
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
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
    """
    from toolkit.retrieval.dense import DenseRetriever
    from toolkit.retrieval.search import validate_hits

    started = time.perf_counter()
    validate_hits(hits)
    retriever = DenseRetriever(index, batch_size=batch_size, ef_search=ef_search)
    retriever.settings = retriever.settings.on_device(device, precision)
    t = _topics(topics, data_dir, max_queries)
    sharding = _sharding(ray, shards, workers, gpus_per_worker, force)
    try:
        result = retriever.search(t, hits, threads, sharding=sharding, progress=progress)
    finally:
        _shutdown(sharding)
    params = result.params | {"threads": threads, "hits": hits}
    return Run(result.run, _search_meta(result, index, topics, t, params, started))


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
    from toolkit.errors import ConfigError
    from toolkit.ranking import candidate_selection
    from toolkit.retrieval.fusion import interpolate, rrf

    loaded = [as_run(r) for r in runs]
    if method == "rrf":
        fused = rrf(loaded, k, depth, hits)
        params: dict = {"method": "rrf", "k": k, "depth": depth}
    elif method == "interpolation":
        fused = interpolate(loaded, alpha, depth, hits, normalize)
        params = {"method": "interpolation", "alpha": alpha, "normalize": normalize, "depth": depth}
    else:
        raise ConfigError(f"method must be rrf or interpolation, not {method!r}")
    params |= {"hits": hits, "candidate_selection": candidate_selection()}
    return Run(fused, {"parameters": params, "inputs": [{"path": r.path, "sha256": r.sha256} for r in loaded]})


def _texts(first: Any, candidates: Any, corpus: Any, index: Any) -> Any:
    from toolkit.errors import ConfigError
    from toolkit.texts import lucene_text_source, read_jsonl_corpus

    if corpus and index:
        raise ConfigError("give at most one of corpus= or index=")
    if corpus:
        return read_jsonl_corpus(corpus, wanted=set(first.frame["doc_id"].unique().tolist()))
    if index:
        return lucene_text_source(index)
    if candidates is not None:
        return candidates.text_source()
    raise ConfigError("a run needs a text source: corpus=JSONL or index=LUCENE_INDEX (or candidates=JSON)")


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
    device: str = "cpu",
    backend: str = "torch",
    precision: str = "auto",
    missing_text: str = "error",
    tag: str = "twostage-rerank",
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    shards: str | os.PathLike | None = None,
    progress: bool = False,
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
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        precision: ``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``.
        missing_text: ``error``, or ``bottom`` (keep a candidate without text below the scored ones).
        tag: the run's tag.
        ray: a Ray address: score in shards on Ray workers.
        workers: Ray workers.
        gpus_per_worker: GPUs per Ray worker.
        shards: with ``ray``: the folder of the job's manifest and shards (resumable).
        progress: show a progress bar.
    """
    from toolkit.api.inputs import as_run
    from toolkit.errors import ConfigError
    from toolkit.reranking.backends import RerankerSpec
    from toolkit.reranking.job import rerank_run
    from toolkit.texts import read_candidates

    if (run is None) == (candidates is None):
        raise ConfigError("give exactly one of run= or candidates=")
    cand = read_candidates(candidates) if candidates is not None else None
    first = cand.run if cand is not None else as_run(run)
    queries = dict(cand.topics.as_dict()) if cand is not None else {}
    if topics is not None:
        queries.update(_topics(topics, None, None).as_dict())
    if not queries:
        raise ConfigError("reranking a run needs topics= (query texts)")
    texts = _texts(first, cand, corpus, index)
    spec = RerankerSpec(model, kind, device, batch_size, max_length, backend, precision).resolved()
    sharding = _sharding(ray, shards, workers, gpus_per_worker, False)
    try:
        result = rerank_run(
            first,
            queries,
            texts,
            spec if sharding is not None else spec.build(),
            depth=depth,
            missing_text=missing_text,
            progress=progress,
            tag=tag,
            sharding=sharding,
        )
    finally:
        _shutdown(sharding)
    return Run(result.run, dict(result.settings))
