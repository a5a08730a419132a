"""First-stage retrieval over Pyserini: BM25 (+RM3), query likelihood (+RM3), dense, fusion.

Every retriever takes ``Topics`` and returns a ``SearchResult``: a toolkit
``Run`` plus the ids of queries that retrieved nothing (listed, never silently
absent), the settings used and the time taken. Parameters are validated when a
retriever is built, with errors that say which value is wrong and why.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from toolkit.errors import ConfigError
from toolkit.records import Run, Topics
from toolkit.retrieval.search import DEFAULT_HITS, SearchResult, results_frame, validate_hits


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


def check_lucene_index(index: str | os.PathLike) -> Path:
    p = Path(index)
    if not p.is_dir():
        raise ConfigError(f"index {index} does not exist; build it with `twostage index --out {index} ...`")
    if not any(p.glob("segments_*")):
        hint = " (it is a dense index: use `twostage dense`)" if (p / "docid").is_file() else ""
        raise ConfigError(f"{index} is not a Lucene index (no segments_* file){hint}")
    return p


# ---------------------------------------------------------------- Lucene
class LuceneRetriever:
    """BM25 or query likelihood (Dirichlet) over a Lucene index, optionally with RM3,
    through Pyserini's ``LuceneSearcher.batch_search``."""

    def __init__(
        self,
        index: str | os.PathLike,
        model: str = "bm25",
        k1: float = 0.9,
        b: float = 0.4,
        mu: float = 1000.0,
        rm3: RM3 | None = None,
    ):
        from toolkit.extras import require

        require("pyserini", "Lucene retrieval")
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
            from toolkit.jvm import import_pyserini

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
                    raise ConfigError(
                        f"--rm3 needs an index with document vectors ({exc}); rebuild it with docvectors stored"
                    ) from None
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
        run = Run(frame=results_frame(qs, ds, ss), path="<memory>", tag=self.tag())
        return SearchResult(run, tuple(empty), self.params(), seconds, len(qids))

    def tag(self) -> str:
        base = "bm25" if self.model == "bm25" else "qld"
        return base + ("-rm3" if self.rm3 else "")
