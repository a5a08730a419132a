"""BM25 and query-likelihood search straight on Lucene's ``IndexSearcher``, as Anserini's ``SimpleSearcher`` does
it, without loading each hit's stored document.

``SimpleSearcher._search`` (Anserini 1.7.1) searches with ``Sort(score, id)`` and then builds its results with
``ScoredDocs.fromTopDocs``, which reads every hit's stored document (``contents`` and ``raw``) only to take its
``id``: on CACM, 64 queries x 1,000 hits, that is about 4 of the 4.4 CPU seconds of a batch search. The id is
already in each hit's sort values (the ``id`` sort field), so this module runs the same Lucene query (Anserini's
``BagOfWordsQueryGenerator`` over its default analyzer), the same similarity, the same sort, and reads docs,
scores and ids from the ``TopFieldDocs`` as one string per query; then it applies Anserini's
``ScoreTiesAdjusterReranker`` (scores rounded to 1e-4, ties pushed apart by 1e-6 each), emulated below in
exact float32 arithmetic. Hits and scores equal ``SimpleSearcher``'s bit for bit (tests/retrieval: CACM, several
k1/b and mu, against Pyserini's ``LuceneSearcher``).

Why one string: pyjnius turns a Java array into a Python list of proxies on access (about 10 us per hit); commons'
``ReflectionToStringBuilder`` renders the whole ``TopFieldDocs`` in Java (``doc=N score=F shardIndex=-1
fields=[F, [hex bytes of the id]]`` per hit), read back by one regular expression. Every hit is accounted for:
a string that does not parse whole is an error, never a shorter run.

RM3 (its feedback reads the first-round hits through Anserini's reranker cascade) and indexes written by Lucene 8
(where ``SimpleSearcher`` skips the id sort and the tie adjustment) stay on ``SimpleSearcher``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from toolkit.errors import ConfigError

# one hit in ReflectionToStringBuilder's rendering of TopFieldDocs under Sort(FIELD_SCORE, id STRING_VAL)
_HIT = re.compile(r"doc=(\d+) score=(\S+) shardIndex=-?\d+ fields=\[[^,\]]*, \[([0-9a-f ]*)\]\]")
_TIE_GAP = np.float32(1e-4)  # ScoreTiesAdjusterReranker's float constants
_TIE_STEP = np.float32(1e-6)


class LuceneSearchError(RuntimeError):
    """Lucene's rendering of a result did not read back whole (a Lucene or Anserini version this code does not know)."""


def float32_exact(texts: list[str]) -> np.ndarray:
    """Java's ``Float.toString`` strings back to the very float32 values.

    Parsing to float64 and narrowing rounds twice; that can only go wrong when the float64 lands exactly
    halfway between two float32 values, so those few are settled against the exact decimal.
    """
    wide = np.array(texts, dtype=np.float64)
    narrow = wide.astype(np.float32)
    back = narrow.astype(np.float64)
    toward = np.nextafter(narrow, np.where(wide > back, np.float32(np.inf), np.float32(-np.inf)))
    halfway = (wide != back) & (wide == (back + toward.astype(np.float64)) / 2)
    for i in np.flatnonzero(halfway):
        exact, mid = Fraction(texts[i]), Fraction(float(wide[i]))
        if exact != mid:  # the decimal lies on one side of the midpoint: the float32 on that side
            narrow[i] = toward[i] if (exact > mid) == (toward[i] > narrow[i]) else narrow[i]
    return narrow


def adjust_ties(scores: np.ndarray) -> np.ndarray:
    """Anserini's ``ScoreTiesAdjusterReranker`` on one ranked list (float32, rank order), bit for bit.

    Each score becomes ``(float) (Math.round(score * 1e4) / 1e4)``; a score within 1e-4 (float) of the adjusted
    score above it is a tie and loses ``1e-6f * dup``, ``dup`` counting the ties in a row. The rounding is
    vectorised; the tie chain is sequential only where a perturbed score decides it (the first candidate break
    after a tie), which is walked in order.
    """
    n = len(scores)
    if n == 0:
        return scores.astype(np.float32)
    x = scores.astype(np.float64) * 1e4
    floor = np.floor(x)
    rounded = ((floor + (x - floor >= 0.5)) / 1e4).astype(np.float32)  # Math.round: half up, then d2f
    gap = np.empty(n, dtype=np.float32)
    gap[0] = np.inf
    gap[1:] = rounded[:-1] - rounded[1:]
    breaks = np.flatnonzero(gap > _TIE_GAP)  # resets unless the score above was perturbed (then checked below)
    index = np.arange(n)
    is_break = np.zeros(n, dtype=bool)
    is_break[breaks] = True
    dup = index - np.maximum.accumulate(np.where(is_break, index, 0))
    for pos, i in enumerate(breaks[1:], start=1):
        if dup[i - 1] == 0:
            continue
        above = rounded[i - 1] - _TIE_STEP * np.float32(dup[i - 1])
        if above - rounded[i] > _TIE_GAP:
            continue
        end = breaks[pos + 1] if pos + 1 < len(breaks) else n  # a tie after all: the chain runs on to the next break
        dup[i:end] = dup[i - 1] + 1 + np.arange(end - i)
    return np.where(dup > 0, rounded - _TIE_STEP * dup.astype(np.float32), rounded).astype(np.float32)


def read_hits(text: str) -> tuple[np.ndarray, list[str]]:
    """(scores as float32, ids) of one rendered ``TopFieldDocs``, every hit or an error."""
    found = _HIT.findall(text)
    if len(found) != text.count(" shardIndex="):
        raise LuceneSearchError(f"read {len(found)} of {text.count(' shardIndex=')} hits from Lucene's result")
    ids = [bytes.fromhex(h).decode("utf-8") for _, _, h in found]
    return float32_exact([s for _, s, _ in found]), ids


@dataclass
class DirectSearcher:
    """An open Lucene index with Anserini's analyzer, query generator and tie-breaking sort."""

    index: Path

    def __post_init__(self) -> None:
        from toolkit.jvm import java_class

        fs, reader_cls = (
            java_class("org.apache.lucene.store.FSDirectory"),
            java_class("org.apache.lucene.index.DirectoryReader"),
        )
        try:
            self.reader = reader_cls.open(fs.open(java_class("java.io.File")(str(self.index)).toPath()))
        except Exception as exc:  # JavaException: corrupt or unsupported index
            raise ConfigError(f"cannot open Lucene index {self.index}: {exc}") from None
        described = self.reader.toString()
        # SimpleSearcher's own test: older indexes are searched without the id sort and tie adjustment
        self.lucene8 = "lucene.version=9" not in described and "lucene.version=10" not in described
        import jnius  # after java_class: importing jnius first would start a JVM without Anserini's jar

        self._as_reader = jnius.cast("org.apache.lucene.index.IndexReader", self.reader)
        sort_field = java_class("org.apache.lucene.search.SortField")
        string_val = java_class("org.apache.lucene.search.SortField$Type").STRING_VAL
        self.sort = java_class("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field("id", string_val))
        # what IndexCollection.DEFAULT_ANALYZER holds, made without loading IndexCollection (0.6 s of reflection)
        self.analyzer = java_class("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        self.generator = java_class("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.render = java_class("org.apache.commons.lang3.builder.ReflectionToStringBuilder").toString
        self.searcher = None

    def configure(self, model: str, k1: float, b: float, mu: float) -> None:
        """A fresh ``IndexSearcher`` with the similarity, as ``SimpleSearcher.set_bm25`` / ``set_qld`` make one."""
        from toolkit.jvm import java_class

        if model == "bm25":
            similarity = java_class("org.apache.lucene.search.similarities.BM25Similarity")(float(k1), float(b))
        else:
            similarity = java_class("org.apache.lucene.search.similarities.LMDirichletSimilarity")(float(mu))
        self.searcher = java_class("org.apache.lucene.search.IndexSearcher")(self._as_reader)
        self.searcher.setSimilarity(similarity)

    def search_many(self, texts: list[str], hits: int, threads: int = 1) -> list[tuple[list[str], np.ndarray]]:
        """Every query's (ids, scores), in order, on ``threads`` Python threads: pyjnius lets go of the GIL
        while Lucene searches, and Lucene's ``IndexSearcher`` is safe to share (Anserini shares it too)."""
        threads = max(1, min(int(threads), len(texts)))
        if threads == 1:
            return [self.search(t, hits) for t in texts]
        import threading

        import jnius

        out: list = [None] * len(texts)
        failed: list[BaseException] = []

        def work(first: int) -> None:
            try:
                for i in range(first, len(texts), threads):
                    out[i] = self.search(texts[i], hits)
            except BaseException as exc:  # re-raised in the calling thread
                failed.append(exc)
            finally:
                jnius.detach()  # a thread that ends attached to the JVM leaks it

        workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if failed:
            raise failed[0]
        return out

    def search(self, text: str, hits: int) -> tuple[list[str], np.ndarray]:
        """One query: (ids, scores as float32) in rank order, ties adjusted as Anserini adjusts them."""
        query = self.generator.buildQuery("contents", self.analyzer, text)
        top = self.searcher.search(query, int(hits), self.sort, True)
        scores, ids = read_hits(self.render(top))
        return ids, adjust_ties(scores)
