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

import numpy as np

from toolkit.data.records import Run, Topics
from toolkit.errors import ConfigError, InputFormatError
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


def check_params(model: str, k1: float, b: float, mu: float, rm3: RM3 | None) -> None:
    if model not in ("bm25", "qld"):
        raise ConfigError(f"unknown Lucene model {model!r} (bm25 or qld)")
    if model == "bm25":
        validate_bm25(k1, b)
    else:
        validate_mu(mu)
    if rm3 is not None:
        rm3.validate()


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
    """BM25 or query likelihood (Dirichlet) over a Lucene index, optionally with RM3, with the hits
    and scores of Anserini's ``SimpleSearcher`` (what Pyserini's ``LuceneSearcher`` wraps), reached
    without importing Pyserini's Python modules: those pull in torch, transformers and faiss, which
    a Lucene search never uses.

    BM25 and QL run on Lucene's ``IndexSearcher`` directly (``lucene_direct``: the same query, sort
    and tie adjustment, without loading each hit's stored document); RM3 and Lucene 8 indexes go
    through ``SimpleSearcher.batch_search``. Both search on ``threads`` threads."""

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
        check_params(model, k1, b, mu, rm3)
        self.index = check_lucene_index(index)
        self.model, self.k1, self.b, self.mu, self.rm3 = model, float(k1), float(b), float(mu), rm3
        self._searcher = None
        self._direct = None

    @property
    def searcher(self):
        """Anserini's ``SimpleSearcher``, configured (opened on first use, then kept: a sweep
        over parameters of one index reuses it through ``configure``)."""
        if self._searcher is None:
            from toolkit.jvm import java_class

            simple = java_class("io.anserini.search.SimpleSearcher")
            try:
                self._searcher = simple(str(self.index))
            except Exception as exc:  # JavaException: corrupt/unsupported index
                raise ConfigError(f"cannot open Lucene index {self.index}: {exc}") from None
            self._apply()
        return self._searcher

    def configure(self, model: str = "bm25", k1: float = 0.9, b: float = 0.4, mu: float = 1000.0, rm3=None) -> None:
        """Switch the open searcher to other parameters (no index reopened), validated as in ``__init__``."""
        check_params(model, k1, b, mu, rm3)
        self.model, self.k1, self.b, self.mu, self.rm3 = model, float(k1), float(b), float(mu), rm3
        if self._searcher is not None:
            self._apply()
        if self._direct is not None:
            self._direct.configure(self.model, self.k1, self.b, self.mu)

    @property
    def direct(self):
        """The index opened on Lucene's ``IndexSearcher`` for BM25/QL without RM3; None where
        ``SimpleSearcher`` must search (RM3, a Lucene 8 index)."""
        if self.rm3 is not None:
            return None
        if self._direct is None:
            from toolkit.retrieval.lucene_direct import DirectSearcher

            self._direct = DirectSearcher(self.index)
            self._direct.configure(self.model, self.k1, self.b, self.mu)
        return None if self._direct.lucene8 else self._direct

    def _apply(self) -> None:
        """Set the similarity and feedback on the Java searcher as Pyserini's wrappers do."""
        s = self._searcher
        if self.model == "bm25":
            s.set_bm25(self.k1, self.b)
        else:
            s.set_qld(self.mu)
        if self.rm3 is None:
            s.unset_rm3()
            return
        # Pyserini's LuceneSearcher.set_rm3: collection class None when the index stores
        # document vectors (RM3 reads them); without them RM3 cannot run on a local index.
        if not s.reader.getTermVectors(0):
            raise ConfigError(f"--rm3 needs an index with document vectors; rebuild {self.index} with docvectors")
        s.set_rm3(None, self.rm3.fb_terms, self.rm3.fb_docs, float(self.rm3.original_query_weight), False, True)

    def _batch_search(self, qids: list[str], texts: list[str], hits: int, threads: int) -> dict:
        """Pyserini's ``LuceneSearcher.batch_search`` without the wrapper: {qid: [ScoredDoc]}."""
        from toolkit.jvm import java_class

        array_list = java_class("java.util.ArrayList")
        jq, jid = array_list(), array_list()
        for text, qid in zip(texts, qids):
            jq.add(text)
            jid.add(qid)
        results = self.searcher.batch_search(jq, jid, int(hits), int(threads))
        return {r.getKey(): r.getValue() for r in results.entrySet().toArray()}

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
        qids = [t.query_id for t in topics.topics]
        texts = [t.text for t in topics.topics]
        direct = self.direct
        if direct is None:
            _ = self.searcher  # opened before the clock starts: seconds measure the search alone
        started = time.perf_counter()
        try:
            if direct is not None:
                found = dict(zip(qids, direct.search_many(texts, hits, threads)))
            else:
                found = self._simple_search(qids, texts, hits, threads)
        except Exception as exc:  # JavaException: a query over Lucene's clause limit is said in words
            too_long = self._over_clause_limit(topics)
            if too_long is None:
                raise
            raise too_long from exc
        empty = tuple(q for q in qids if not len(found[q][0]))
        kept = [q for q in qids if len(found[q][0])]
        qs = np.repeat(kept, [len(found[q][0]) for q in kept]).tolist()
        ds = [d for q in kept for d in found[q][0]]
        ss = np.concatenate([np.asarray(found[q][1], dtype=np.float64) for q in kept]) if kept else []
        seconds = time.perf_counter() - started
        run = Run(frame=results_frame(qs, ds, ss), path="<memory>", tag=self.tag())
        return SearchResult(run, empty, self.params(), seconds, len(qids))

    def _over_clause_limit(self, topics: Topics) -> InputFormatError | None:
        """The error for the first query with more distinct analysed terms than Lucene's clause limit (Anserini
        makes one clause per term: ``IndexSearcher$TooManyClauses``), or None when no query has that many."""
        from toolkit.jvm import java_class

        limit = int(java_class("org.apache.lucene.search.IndexSearcher").getMaxClauseCount())
        analyzer = java_class("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        analyze = java_class("io.anserini.analysis.AnalyzerUtils").analyze
        for t in topics.topics:
            terms = len(set(analyze(analyzer, t.text).toArray()))
            if terms > limit:
                return InputFormatError(
                    topics.path,
                    None,
                    f"query {t.query_id!r} has {terms} distinct terms after analysis, more than the {limit} clauses "
                    "Lucene accepts in one query (TooManyClauses); shorten that query or leave it out of the topics",
                )
        return None

    def _simple_search(self, qids: list[str], texts: list[str], hits: int, threads: int) -> dict:
        """{qid: (ids, scores)} from ``SimpleSearcher.batch_search`` (the scores its float32 values)."""
        results = self._batch_search(qids, texts, hits, threads)
        out = {}
        for qid in qids:
            found = results.get(qid) or []
            out[qid] = ([h.docid for h in found], [h.score for h in found])
        return out

    def tag(self) -> str:
        base = "bm25" if self.model == "bm25" else "qld"
        return base + ("-rm3" if self.rm3 else "")
