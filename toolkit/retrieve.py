"""First-stage retrieval over Pyserini: BM25 (+RM3), query likelihood (+RM3), dense, fusion.

Every retriever takes ``Topics`` and returns a ``SearchResult``: a toolkit
``Run`` plus the ids of queries that retrieved nothing (listed, never silently
absent), the settings used and the time taken. Parameters are validated when a
retriever is built, with errors that say which value is wrong and why.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from .errors import ConfigError
from .ranking import DEFAULT_SCORE_PRECISION, top_k
from .records import DOC_ID, QUERY_ID, SCORE, Run, Topics

log = logging.getLogger(__name__)

DEFAULT_HITS = 1000
#: Fusion ranks its inputs and cuts its output in the order the evaluator and the diagnosis use
#: (trec_eval 9.x: float32 scores), so a float32 tie at a depth cut is broken the same way everywhere.
CANDIDATE_PRECISION = DEFAULT_SCORE_PRECISION


def candidate_selection() -> dict:
    """How top-N candidates are chosen by fusion and reranking (recorded in their sidecars)."""
    return {"order": "trec_eval: score desc, doc id desc", "score_precision": CANDIDATE_PRECISION}


@dataclass(frozen=True)
class SearchResult:
    run: Run
    empty_queries: tuple[str, ...]
    params: dict
    seconds: float
    queries: int

    def describe(self) -> str:
        return f"{self.queries} queries, {len(self.run)} hits, {self.seconds:.2f}s"


class Retriever(Protocol):
    """Anything that turns topics into a ranked run."""

    def search(self, topics: Topics, hits: int = DEFAULT_HITS, threads: int = 1) -> SearchResult: ...

    def params(self) -> dict: ...


# ----------------------------------------------------------- parameters
@dataclass(frozen=True)
class RM3:
    """RM3 pseudo-relevance feedback (Pyserini's ``set_rm3`` defaults = Anserini's)."""

    fb_terms: int = 10
    fb_docs: int = 10
    original_query_weight: float = 0.5

    def validate(self) -> None:
        if self.fb_terms < 1:
            raise ConfigError(f"--fb-terms must be >= 1, not {self.fb_terms}")
        if self.fb_docs < 1:
            raise ConfigError(f"--fb-docs must be >= 1, not {self.fb_docs}")
        if not 0.0 <= self.original_query_weight <= 1.0 or math.isnan(self.original_query_weight):
            raise ConfigError(f"--original-query-weight must be in [0, 1], not {self.original_query_weight}")


def validate_bm25(k1: float, b: float) -> None:
    if not (k1 >= 0.0) or math.isinf(k1):
        raise ConfigError(f"BM25 k1 must be a finite number >= 0 (typical 0.9-1.2), not {k1}")
    if not (0.0 <= b <= 1.0):
        raise ConfigError(f"BM25 b must be in [0, 1] (typical 0.4-0.75), not {b}")


def validate_mu(mu: float) -> None:
    if not (mu > 0.0) or math.isinf(mu):
        raise ConfigError(f"query likelihood mu must be a finite number > 0 (typical 1000-2500), not {mu}")


def validate_hits(hits: int) -> None:
    if hits < 1:
        raise ConfigError(f"--hits must be >= 1, not {hits}")


def check_lucene_index(index: str | os.PathLike) -> Path:
    p = Path(index)
    if not p.is_dir():
        raise ConfigError(f"index {index} does not exist; build it with `twostage index --out {index} ...`")
    if not any(p.glob("segments_*")):
        hint = " (it is a dense index: use `twostage dense`)" if (p / "docid").is_file() else ""
        raise ConfigError(f"{index} is not a Lucene index (no segments_* file){hint}")
    return p


def _frame(rows_q: list[str], rows_d: list[str], rows_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {QUERY_ID: pd.array(rows_q, dtype="str"), DOC_ID: pd.array(rows_d, dtype="str"),
         SCORE: np.asarray(rows_s, dtype=np.float64)}
    )


# ---------------------------------------------------------------- Lucene
class LuceneRetriever:
    """BM25 or query likelihood (Dirichlet) over a Lucene index, optionally with RM3,
    through Pyserini's ``LuceneSearcher.batch_search``."""

    def __init__(self, index: str | os.PathLike, model: str = "bm25", k1: float = 0.9, b: float = 0.4,
                 mu: float = 1000.0, rm3: RM3 | None = None):
        if model not in ("bm25", "qld"):
            raise ConfigError(f"unknown Lucene model {model!r} (bm25 or qld)")
        if model == "bm25":
            validate_bm25(k1, b)
        else:
            validate_mu(mu)
        if rm3 is not None:
            rm3.validate()
        self.index = check_lucene_index(index)
        self.model, self.k1, self.b, self.mu, self.rm3 = model, float(k1), float(b), float(mu), rm3
        self._searcher = None

    @property
    def searcher(self):
        """The configured ``LuceneSearcher`` (created on first use; starts the JVM)."""
        if self._searcher is None:
            from .jvm import import_pyserini

            lucene = import_pyserini("pyserini.search.lucene")
            try:
                s = lucene.LuceneSearcher(str(self.index))
            except Exception as exc:  # JavaException: corrupt/unsupported index
                raise ConfigError(f"cannot open Lucene index {self.index}: {exc}") from None
            if self.model == "bm25":
                s.set_bm25(self.k1, self.b)
            else:
                s.set_qld(self.mu)
            if self.rm3 is not None:
                try:
                    s.set_rm3(self.rm3.fb_terms, self.rm3.fb_docs, self.rm3.original_query_weight)
                except TypeError as exc:
                    raise ConfigError(f"--rm3 needs an index with document vectors ({exc}); "
                                      "rebuild it with docvectors stored") from None
            self._searcher = s
        return self._searcher

    def params(self) -> dict:
        p: dict = {"model": self.model}
        if self.model == "bm25":
            p |= {"k1": self.k1, "b": self.b}
        else:
            p |= {"mu": self.mu}
        p["rm3"] = asdict(self.rm3) if self.rm3 else None
        return p

    def search(self, topics: Topics, hits: int = DEFAULT_HITS, threads: int = 1) -> SearchResult:
        validate_hits(hits)
        searcher = self.searcher
        qids = [t.query_id for t in topics.topics]
        texts = [t.text for t in topics.topics]
        started = time.perf_counter()
        results = searcher.batch_search(texts, qids, k=hits, threads=threads)
        qs: list[str] = []
        ds: list[str] = []
        ss: list[float] = []
        empty = []
        for qid in qids:
            found = results.get(qid) or []
            if not found:
                empty.append(qid)
                continue
            for hit in found:
                ds.append(hit.docid)
                ss.append(hit.score)
            qs.extend([qid] * len(found))
        seconds = time.perf_counter() - started
        run = Run(frame=_frame(qs, ds, ss), path="<memory>", tag=self.tag())
        return SearchResult(run, tuple(empty), self.params(), seconds, len(qids))

    def tag(self) -> str:
        base = "bm25" if self.model == "bm25" else "qld"
        return base + ("-rm3" if self.rm3 else "")


# ----------------------------------------------------------------- dense
class DenseRetriever:
    """Exact (flat) or HNSW inner-product search over a FAISS index built by
    ``indexing.build_dense_index``, encoding queries with the index's own encoder settings."""

    def __init__(self, index: str | os.PathLike, batch_size: int | None = None, device: str = "cpu",
                 ef_search: int = 256, precision: str = "fp32"):
        from .indexing import EncoderSettings, read_meta

        p = Path(index)
        if not p.is_dir():
            raise ConfigError(f"index {index} does not exist; build it with `twostage index --dense --out {index} ...`")
        if not (p / "index").is_file() or not (p / "docid").is_file():
            hint = " (it is a Lucene index: use `twostage bm25`)" if any(p.glob("segments_*")) else ""
            raise ConfigError(f"{index} is not a dense index (needs files 'index' and 'docid'){hint}")
        meta = read_meta(p)
        enc = (meta.get("settings") or {}).get("encoder")
        if not enc:
            raise ConfigError(f"{index}/index.meta.json does not record the encoder; rebuild with `twostage index --dense`")
        fields = {k: enc[k] for k in ("model", "pooling", "normalize", "max_length", "query_prefix", "doc_prefix")}
        self.settings = EncoderSettings(**fields, batch_size=batch_size or 32, device=device, precision=precision)
        self.index = p
        self.meta = meta
        self.ef_search = ef_search
        self._faiss = None
        self._docids: np.ndarray | None = None
        self._encoder = None

    def params(self) -> dict:
        return {"model": "dense", "encoder": asdict(self.settings), "faiss": self.meta.get("faiss")}

    def _load(self, threads: int):
        from .indexing import Encoder
        from .jvm import quiet_faiss

        quiet_faiss()
        import faiss

        if self._faiss is None:
            self._faiss = faiss.read_index(str(self.index / "index"))
            if hasattr(self._faiss, "hnsw"):
                self._faiss.hnsw.efSearch = self.ef_search
            ids = (self.index / "docid").read_text(encoding="utf-8").split("\n")[: self._faiss.ntotal]
            self._docids = np.asarray(ids, dtype=object)
        if self._encoder is None:
            self._encoder = Encoder(self.settings, threads)
        faiss.omp_set_num_threads(max(1, threads))

    def search_arrays(self, texts: list[str], hits: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row indices), one row per query text, ``min(hits, index size)`` columns (-1: no hit)."""
        self._load(threads)
        vecs = self._encoder.encode_batched(texts, queries=True)
        return self._faiss.search(vecs, min(hits, self._faiss.ntotal))

    def search(self, topics: Topics, hits: int = DEFAULT_HITS, threads: int = 1, sharding=None,
               progress: bool = True) -> SearchResult:
        """Batch search; ``sharding`` runs it as a sharded, resumable job (query ranges, on Ray:
        every worker opens the index from its path, so the path must be readable there)."""
        validate_hits(hits)
        started = time.perf_counter()
        qids = [t.query_id for t in topics.topics]
        texts = [t.text for t in topics.topics]
        job = None
        if sharding is None:
            scores, idx = self.search_arrays(texts, hits, threads)
        else:
            scores, idx, job = self._search_sharded(qids, texts, hits, sharding, progress)
        if self._docids is None:
            ids = (self.index / "docid").read_text(encoding="utf-8").split("\n")
            self._docids = np.asarray(ids[: int(self.meta.get("documents") or len(ids))], dtype=object)
        docids = self._docids
        qs, ds, ss, empty = [], [], [], []
        for qid, row_s, row_i in zip(qids, scores, idx):
            keep = row_i >= 0
            if not keep.any():
                empty.append(qid)
                continue
            n = int(keep.sum())
            qs.extend([qid] * n)
            ds.extend(docids[row_i[keep]].tolist())
            ss.extend(row_s[keep].astype(np.float64).tolist())
        seconds = time.perf_counter() - started
        run = Run(frame=_frame(qs, ds, ss), tag="dense")
        params = self.params() | ({"execution": job} if job else {})
        return SearchResult(run, tuple(empty), params, seconds, len(qids))

    def _search_sharded(self, qids: list[str], texts: list[str], hits: int, sharding, progress: bool):
        import hashlib

        from .indexing import index_checksum
        from .shards import open_manifest, plan, run_job

        qhash = hashlib.sha256("\n".join(f"{q}\t{t}" for q, t in zip(qids, texts)).encode()).hexdigest()
        identity = {"index": {"path": str(self.index.resolve()), "sha256": index_checksum(self.index)},
                    "encoder": self.settings.result_settings(), "hits": hits, "ef_search": self.ef_search,
                    "queries_sha256": qhash, "ranges": plan(len(qids), sharding.size(1000, self.settings.batch_size))}
        manifest = open_manifest(sharding.folder, "dense-search", identity, sharding.force)
        spec = SearchWorkerSpec(str(self.index.resolve()), self.settings, hits, self.ef_search)
        report = run_job(manifest, spec, sharding.executor, lambda s, lo, hi: texts[lo:hi], unit="query",
                         progress=progress, label="dense search")
        parts = [manifest.load(i) for i in range(len(manifest.ranges))]
        width = max((p["idx"].shape[1] for p in parts if p["idx"].ndim == 2), default=0)
        scores = np.concatenate([p["scores"] for p in parts]) if parts else np.zeros((0, width), np.float32)
        idx = np.concatenate([p["idx"] for p in parts]) if parts else np.zeros((0, width), np.int64)
        job = {**sharding.executor.description, "manifest": str(manifest.folder / "manifest.json"),
               "shards": report.shards, "shards_resumed": report.resumed, "shards_computed": report.computed,
               **manifest.work_done("queries", "model_calls")}
        return scores, idx, job


class _SearchWorker:
    def __init__(self, spec: SearchWorkerSpec):
        self.retriever = DenseRetriever(spec.index, spec.settings.batch_size, spec.settings.device, spec.ef_search,
                                        spec.settings.precision)
        self.hits = spec.hits

    def __call__(self, texts: list[str]):
        self.retriever._load(1)
        before = self.retriever._encoder.model_calls
        scores, idx = self.retriever.search_arrays(list(texts), self.hits)
        return {"scores": scores, "idx": idx}, {"queries": len(texts),
                                                "model_calls": self.retriever._encoder.model_calls - before}


@dataclass(frozen=True)
class SearchWorkerSpec:
    index: str
    settings: object  # indexing.EncoderSettings
    hits: int
    ef_search: int

    def build(self):
        return _SearchWorker(self)


# ---------------------------------------------------------------- fusion
def rrf(runs: list[Run], k: float = 60.0, depth: int = DEFAULT_HITS, hits: int = DEFAULT_HITS) -> Run:
    """Reciprocal rank fusion (Cormack et al., SIGIR 2009): score(d) = sum over runs of
    1 / (k + rank(d)), ranks from each run's trec_eval order cut at ``depth``; the same
    definition as Pyserini's ``reciprocal_rank_fusion`` (k=60, depth 1000)."""
    if len(runs) < 2:
        raise ConfigError("fusion needs at least two runs")
    if not k > 0:
        raise ConfigError(f"RRF k must be > 0, not {k}")
    parts = []
    for r in runs:
        ranked = top_k(r.frame, depth, score_precision=CANDIDATE_PRECISION)
        parts.append(pd.DataFrame({QUERY_ID: ranked[QUERY_ID], DOC_ID: ranked[DOC_ID],
                                   SCORE: 1.0 / (k + ranked["rank"].to_numpy(dtype=np.float64))}))
    return _sum_and_cut(parts, hits, "rrf")


def interpolate(runs: list[Run], alpha: float = 0.5, depth: int = DEFAULT_HITS, hits: int = DEFAULT_HITS,
                normalize: str = "none") -> Run:
    """Score interpolation of two runs: alpha * s1 + (1 - alpha) * s2; a document missing
    from one run contributes 0 there (Pyserini's ``interpolation``). ``normalize='minmax'``
    rescales each query's scores to [0, 1] first (scores of different models are on
    different scales)."""
    if len(runs) != 2:
        raise ConfigError(f"interpolation takes exactly two runs, got {len(runs)}")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"--alpha must be in [0, 1], not {alpha}")
    if normalize not in ("none", "minmax"):
        raise ConfigError(f"--normalize must be none or minmax, not {normalize!r}")
    parts = []
    for weight, r in zip((alpha, 1.0 - alpha), runs):
        ranked = top_k(r.frame, depth, score_precision=CANDIDATE_PRECISION)
        s = ranked[SCORE].to_numpy(dtype=np.float64)
        if normalize == "minmax":
            g = ranked.groupby(QUERY_ID, sort=False)[SCORE]
            lo, hi = g.transform("min").to_numpy(), g.transform("max").to_numpy()
            span = np.where(hi > lo, hi - lo, 1.0)
            s = (s - lo) / span
        parts.append(pd.DataFrame({QUERY_ID: ranked[QUERY_ID], DOC_ID: ranked[DOC_ID], SCORE: weight * s}))
    return _sum_and_cut(parts, hits, "interpolation")


def _sum_and_cut(parts: list[pd.DataFrame], hits: int, tag: str) -> Run:
    validate_hits(hits)
    merged = pd.concat(parts, ignore_index=True).groupby([QUERY_ID, DOC_ID], sort=False, as_index=False)[SCORE].sum()
    top = top_k(merged, hits, score_precision=CANDIDATE_PRECISION)[[QUERY_ID, DOC_ID, SCORE]]
    return Run(frame=top.reset_index(drop=True), tag=tag)


# ------------------------------------------------------------ utilities
def limit_topics(topics: Topics, n: int | None) -> Topics:
    if n is None:
        return topics
    return Topics(topics=topics.topics[:n], path=topics.path)
