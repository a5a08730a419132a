"""An experiment's grid points as small picklable tasks, and ``Warm``, the one holder that runs them.

Every point the stage cache lacks is computed by ``Warm.run(point)``: in the driver without ``--ray``,
and on each Ray actor with it (``toolkit.experiments.ray_grid``). Both paths build the same point
from the same configuration and run the same code, so a run cannot depend on where it was made.

A point carries what it needs and nothing it can look up: ``SearchPoint`` (Lucene index path, BM25/QL
parameters with or without RM3, topics, threads), ``DensePoint`` (dense index path, the query-side
settings resolved by the driver, hits, topics), ``RerankPoint`` (the upstream run's frame, topics, the
Lucene index its texts come from, the resolved ``RerankerSpec``, depth, the embedding cache folder),
``FusePoint`` (the input runs and the RRF settings). ``Warm`` keeps what is slow to open across the
points it gets: one Lucene searcher per index (switched between points with
``LuceneRetriever.configure``), one ``DenseRetriever`` per (index, batch size, device, precision,
efSearch) with its encoder and FAISS index, one reranker per spec, one embedding cache per (folder,
namespace), one text source per index.

``RerankPoint.lane``: a bi-encoder's vectors come from its embedding cache, filled by the points
that ran before (depth 20 embeds the top 20, depth 50 only what it adds), and a vector computed
with other batch companions can differ in the last float32 bit. So the bi-encoder points of one
model run in one order, the one-process order, one at a time on one Ray actor (a *lane*): the
vectors, the scores and the run files are then the one-process ones byte for byte. Every other
point is a pure function of its fields and may run anywhere, in any order.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkit.data.records import Run, Topics
    from toolkit.reranking.backends import RerankerSpec


@dataclass(frozen=True)
class SearchPoint:
    """One BM25 or QL search (``params["rm3"]``: with RM3), as keyed in the stage cache."""

    index: str
    params: dict  # model, k1 and b or mu, rm3 (None or fb_terms/fb_docs/original_query_weight), hits
    topics: Topics
    threads: int
    kind = "search"
    lane = None  # any actor, in any order

    def compute(self, warm: Warm) -> Run:
        from toolkit.retrieval.lucene import RM3

        p, rm3 = self.params, self.params.get("rm3")
        r = warm.lucene(self.index)
        rm3_value = RM3(int(rm3["fb_terms"]), int(rm3["fb_docs"]), float(rm3["original_query_weight"])) if rm3 else None
        r.configure(p["model"], p.get("k1", 0.9), p.get("b", 0.4), p.get("mu", 1000.0), rm3_value)
        return r.search(self.topics, int(p["hits"]), self.threads).run


@dataclass(frozen=True)
class DensePoint:
    """One dense search: the index's encoder on the queries (device and precision resolved by the driver)."""

    index: str
    batch_size: int
    device: str
    precision: str
    ef_search: int
    hits: int
    topics: Topics
    threads: int
    kind = "dense"
    lane = None  # any actor, in any order

    def compute(self, warm: Warm) -> Run:
        r = warm.dense(self.index, self.batch_size, self.device, self.precision, self.ef_search)
        return r.search(self.topics, self.hits, self.threads, progress=False).run


@dataclass(frozen=True)
class RerankPoint:
    """One rerank of ``first``'s top ``depth`` with ``spec``, texts read from the Lucene index ``texts``.

    ``embeddings``: the embedding cache folder of a bi-encoder (None: no cache). It is named by the
    driver, so every worker uses the driver's (on several machines: a folder they all see).
    ``threads``: torch's thread count for the model (the experiment's ``threads``, as the searches
    use). Set on every point, while it runs (``models.torch_threads``), because it moves float32 results
    in the last bit on short texts, and a process's default differs: torch's own in the driver, one
    thread in a Ray worker.
    """

    first: Run
    topics: Topics
    texts: str
    spec: RerankerSpec  # resolved: its kind is known
    depth: int
    embeddings: str | None
    threads: int
    kind = "rerank"

    @property
    def lane(self) -> Hashable | None:
        """Bi-encoder points of one model and backend share an embedding cache: one lane (see the module)."""
        from toolkit.models import resolve_model

        if self.spec.kind != "bi-encoder" or self.embeddings is None:
            return None
        return ("embeddings", resolve_model(self.spec.model), self.spec.backend, self.embeddings)

    def compute(self, warm: Warm) -> Run:
        from toolkit.models import torch_threads
        from toolkit.reranking.rerank_job import rerank_run
        from toolkit.reranking.rerank_options import RerankOptions

        # the point's thread count while it runs; the process's own is back afterwards
        with torch_threads(max(1, self.threads) if self.spec.backend == "torch" else None):
            built = warm.reranker(self.spec)
            cache = warm.embedding_cache(self.embeddings, built) if self.spec.kind == "bi-encoder" else None
            queries = dict(self.topics.as_dict())
            options = RerankOptions(reranker=self.spec, depth=self.depth)
            res = rerank_run(self.first, queries, warm.text_source(self.texts), built, options, cache=cache)
        return res.run


@dataclass(frozen=True)
class FusePoint:
    """Reciprocal rank fusion of ``runs`` (milliseconds: the driver runs these, see ``distributed``)."""

    runs: tuple[Run, ...]
    k: float
    depth: int
    hits: int
    kind = "fuse"
    lane = None  # any actor, in any order

    def compute(self, warm: Warm) -> Run:
        from toolkit.retrieval.fusion import FuseOptions, fuse

        return fuse(list(self.runs), FuseOptions("rrf", k=self.k, depth=self.depth, hits=self.hits)).run


Point = SearchPoint | DensePoint | RerankPoint | FusePoint


@dataclass
class Warm:
    """What stays open across the points one process computes (the driver's, or one Ray actor's)."""

    lucene_retrievers: dict[str, Any] = field(default_factory=dict)
    dense_retrievers: dict[tuple, Any] = field(default_factory=dict)
    rerankers: dict[Any, Any] = field(default_factory=dict)
    embedding_caches: dict[tuple[str, str], Any] = field(default_factory=dict)
    text_sources: dict[str, Any] = field(default_factory=dict)

    def lucene(self, index: str):
        from toolkit.retrieval.lucene import LuceneRetriever

        if index not in self.lucene_retrievers:
            self.lucene_retrievers[index] = LuceneRetriever(index)
        return self.lucene_retrievers[index]

    def dense(self, index: str, batch_size: int, device: str, precision: str, ef_search: int):
        from toolkit.retrieval.dense import DenseRetriever

        key = (index, batch_size, device, precision, ef_search)
        if key not in self.dense_retrievers:
            self.dense_retrievers[key] = DenseRetriever(
                index, batch_size=batch_size, device=device, ef_search=ef_search, precision=precision
            )
        return self.dense_retrievers[key]

    def reranker(self, spec: RerankerSpec):
        if spec not in self.rerankers:
            self.rerankers[spec] = spec.build()
        return self.rerankers[spec]

    def embedding_cache(self, folder: str | None, built):
        """The cache of ``built``'s vectors in ``folder``: one per namespace, shared by specs that agree on it."""
        if folder is None:
            return None
        from toolkit.jobs.embed_cache import EmbeddingCache
        from toolkit.reranking.rerank_job import embedding_namespace

        namespace = embedding_namespace(built.describe())
        key = (folder, json.dumps(namespace, sort_keys=True, default=str))
        if key not in self.embedding_caches:
            self.embedding_caches[key] = EmbeddingCache(folder, namespace)
        return self.embedding_caches[key]

    def text_source(self, index: str):
        from toolkit.data.texts import lucene_text_source

        if index not in self.text_sources:
            self.text_sources[index] = lucene_text_source(index)
        return self.text_sources[index]

    def run(self, point: Point) -> Run:
        return point.compute(self)

    def __call__(self, point: Point) -> tuple[dict, dict]:
        """A point as a Ray actor's item (``toolkit.jobs.shards.Worker``): the run's frame and tag, and what is warm."""
        run = self.run(point)
        return {"frame": run.frame, "tag": run.tag}, {"kind": point.kind, "warm": self.describe()}

    def describe(self) -> dict:
        return {
            "lucene": len(self.lucene_retrievers),
            "dense": len(self.dense_retrievers),
            "rerankers": len(self.rerankers),
            "texts": len(self.text_sources),
        }


@dataclass(frozen=True)
class WarmSpec:
    """The picklable recipe each Ray actor builds its ``Warm`` from (``toolkit.jobs.shards.WorkerSpec``)."""

    def build(self) -> Warm:
        return Warm()

    def describe(self) -> dict:
        return {"worker": "experiment grid points (Lucene, dense, rerank)"}
