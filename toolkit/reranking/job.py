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
that need them, so ``import toolkit.reranking.job`` stays light.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from toolkit import __version__
from toolkit.errors import ConfigError
from toolkit.ranking import CANDIDATE_PRECISION, candidate_selection, top_k
from toolkit.records import DOC_ID, QUERY_ID, Run, run_from_rows
from toolkit.reranking.backends import Reranker, RerankerSpec
from toolkit.texts import TextSource

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
    """What changes a bi-encoder vector: the model's files, maximum length, backend and precision."""
    from toolkit.jobs.embed_cache import model_fingerprint

    d = reranker_description
    return {
        "model": model_fingerprint(str(d.get("model_path") or d.get("model"))),
        "max_length": d.get("max_length"),
        "backend": d.get("backend", "torch"),
        "precision": d.get("precision", "fp32"),
        "pooling": "model pooling, L2-normalised",
    }


def _embed_all(
    texts: list[str],
    segments: list[int],
    worker_spec,
    reranker_desc: dict,
    sharding,
    cache,
    identity: dict,
    progress: bool,
) -> tuple[np.ndarray, dict]:
    """Embeddings of ``texts`` (rows in order): cached ones looked up, the others computed in
    chunks of ``EMBED_SHARD`` in this process, or as a sharded job when ``sharding`` is given.
    ``segments`` are boundaries no chunk crosses (passages | queries)."""
    from toolkit.jobs.shards import open_manifest, plan, run_job

    keys = None
    found = np.zeros(len(texts), dtype=bool)
    cached: np.ndarray | None = None
    if cache is not None:
        from toolkit.jobs.embed_cache import text_key

        keys = [text_key(t) for t in texts]
        found, cached = cache.lookup(keys)
    size = sharding.size(EMBED_SHARD) if sharding else EMBED_SHARD
    bounds = [0, *segments, len(texts)]
    ranges = [[a + lo, a + hi] for a, b in itertools.pairwise(bounds) for lo, hi in plan(b - a, size)]
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
        with tqdm(
            total=todo,
            desc="rerank: embed texts",
            unit="text",
            file=sys.stderr,
            disable=not progress or not todo,
            dynamic_ncols=True,
        ) as bar:
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
            fill(lo, hi, vecs, np.arange(lo, hi))
    stats.update(manifest.work_done("texts_embedded", "model_calls"))
    stats.update(
        shards=report.shards,
        shards_resumed=report.resumed,
        shards_computed=report.computed,
        manifest=str(manifest.folder / "manifest.json"),
    )
    return (out if out is not None else np.zeros((0, 0), np.float32)), stats


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
        from tqdm.auto import tqdm

        worker = worker_spec.build()
        with tqdm(
            total=sum(len(docs_by_query[q]) for q in qids),
            desc=f"rerank ({kind})",
            unit="passage",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        ) as bar:
            for i, q in enumerate(qids):
                arrays, info = worker(items(i, i + 1))
                out[q] = arrays["scores"]
                stats["model_calls"] += info["model_calls"]
                bar.update(len(out[q]))
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
    stats.update(
        shards=report.shards,
        shards_resumed=report.resumed,
        shards_computed=report.computed,
        manifest=str(manifest.folder / "manifest.json"),
    )
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
    worker). ``sharding`` (``toolkit.jobs.shards.Sharding``) runs the model work as a sharded,
    resumable job; ``cache`` (``toolkit.jobs.embed_cache.EmbeddingCache``) serves and keeps a
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
        "inputs": {
            "first_stage_sha256": first_stage.sha256,
            "texts": texts.describe(),
            "candidates_sha256": _texts_sha256(f"{q}\t{d}" for q in qids for d in have_by_query[q]),
            "queries_sha256": _texts_sha256(queries[q] for q in qids),
        },
        "model": {k: desc.get(k) for k in ("model", "model_path", "kind", "max_length", "backend", "precision")},
        "settings": {"depth": depth, "missing_text": missing_text, "candidate_selection": candidate_selection()},
    }
    if identity["model"]["model_path"]:
        from toolkit.jobs.embed_cache import model_fingerprint

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
        vectors, work_stats = _embed_all(
            work,
            [len(unique)],
            worker_spec,
            desc,
            sharding,
            cache,
            identity | {"work_sha256": _texts_sha256(work)},
            progress,
        )
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
        scores_by_query, work_stats = _score_pairs(
            qids, have_by_query, queries, found, worker_spec, sharding, identity, progress, kind
        )
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
        "missing_texts": len(missing),
        "first_stage": {"path": first_stage.path, "sha256": first_stage.sha256, "tag": first_stage.tag},
        "texts": texts.describe(),
        "seconds": round(seconds, 3),
        "libraries": _library_versions(),
    }
    return RerankResult(
        run=run,
        settings=settings,
        seconds=seconds,
        queries=len(qids),
        pairs=len(cands),
        missing_texts=len(missing),
    )


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
    )


def _library_versions() -> dict:
    out = {}
    for name in ("torch", "sentence_transformers", "transformers"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = getattr(mod, "__version__", "?")
    return out
