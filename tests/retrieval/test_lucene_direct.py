"""BM25/QL on Lucene's IndexSearcher (toolkit.retrieval.lucene_direct) against Anserini's SimpleSearcher.

Oracles: Pyserini's ``LuceneSearcher.batch_search`` on CACM (64 queries x 1,000 hits; k1=0 makes every matching
document tie, so the tie adjustment is exercised on thousands of ties); a literal transcription of Anserini
1.7.1's ``ScoreTiesAdjusterReranker.rerank`` bytecode (one float32 operation at a time, ``Math.round`` through
fractions) for the vectorised adjustment; exact fractions for the float32 parsing.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.retrieval.lucene_direct import LuceneSearchError, adjust_ties, float32_exact, read_hits

F = np.float32


def anserini_ties(scores: list[float]) -> list[np.float32]:
    """ScoreTiesAdjusterReranker.rerank as its bytecode runs it (javap -c, Anserini 1.7.1)."""
    s = [F(x) for x in scores]
    dup = 0
    for i in range(len(s)):
        wide = float(s[i]) * 10000.0  # f2d, dmul 10000.0d
        s[i] = F(math.floor(Fraction(wide) + Fraction(1, 2)) / 10000.0)  # Math.round (half up), l2d, ddiv, d2f
        if i == 0 or F(s[i - 1] - s[i]) > F(1e-4):  # fsub, fcmpl > 1.0E-4f
            dup = 0
        else:
            dup += 1
            s[i] = F(s[i] - F(F(1e-6) * F(dup)))  # fmul 1.0E-6f * i2f(dup), fsub
    return s


# scores on a 1e-4 grid with small offsets: exact ties, near ties, and steps of one grid unit (where float32
# differences fall either side of 1e-4f and a perturbed score above decides)
near_grid = st.builds(
    lambda k, off: float(F(k * 1e-4 + off)),
    st.integers(min_value=0, max_value=400_000),
    st.sampled_from([0.0, 0.0, 0.0, 1e-7, -1e-7, 4.9e-5, 5e-5, -5e-5, 2e-6]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(near_grid, min_size=0, max_size=300), st.booleans())
def test_adjust_ties_equals_anserinis_loop(scores, ranked):
    if ranked:
        scores = sorted(scores, reverse=True)
    got = adjust_ties(np.asarray(scores, dtype=np.float32))
    assert got.dtype == np.float32
    assert [float(x) for x in got] == [float(x) for x in anserini_ties(scores)]


def test_adjust_ties_long_chain_and_one_step_gaps():
    """A run of 150 ties (the perturbation passes 1e-4 after 100 of them) and one-step gaps after a tie."""
    scores = [12.5] * 150 + [12.4999, 12.4998, 12.4998, 12.4997, 3.0, 3.0, 2.9999]
    want = anserini_ties(scores)
    assert [float(x) for x in adjust_ties(np.asarray(scores, dtype=np.float32))] == [float(x) for x in want]
    assert len({float(x) for x in want}) > 100  # the chain really is pushed apart


def test_float32_exact_settles_double_rounding():
    """A decimal just above (below) a float32 midpoint parses to float64 *at* the midpoint; the exact decimal
    decides, as Java's Float.parseFloat does."""
    lo = F(0.3)
    hi = np.nextafter(lo, F(1))
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    exact_above = mid + Fraction(1, 10**40)
    exact_below = mid - Fraction(1, 10**40)
    texts = [_decimal(exact_above), _decimal(exact_below), _decimal(mid)]
    assert all(float(t) == float(mid) for t in texts)  # all three land on the midpoint as float64
    got = float32_exact(texts)
    even = lo if int(lo.view(np.uint32)) % 2 == 0 else hi
    assert [float(x) for x in got] == [float(hi), float(lo), float(even)]
    rng = np.random.default_rng(0)
    floats = rng.uniform(0, 50, 5000).astype(np.float32)
    assert np.array_equal(float32_exact([np.format_float_positional(f, unique=True) for f in floats]), floats)


def _decimal(x: Fraction, digits: int = 60) -> str:
    whole = x.numerator * 10**digits // x.denominator  # truncated: 60 digits keep the 1e-40 offsets
    return f"{whole // 10**digits}.{whole % 10**digits:0{digits}d}"


def test_read_hits_takes_every_hit_or_fails():
    text = (
        'org.apache.lucene.search.TopFieldDocs@1[fields={<score>,<string_val: "id">},scoreDocs={'
        "doc=3 score=2.5 shardIndex=-1 fields=[2.5, [64 31]],doc=0 score=1.0E-5 shardIndex=-1 fields=[1.0E-5, [c3 a9 20 78]]"
        "},totalHits=2 hits]"
    )
    scores, ids = read_hits(text)
    assert ids == ["d1", "é x"] and [float(s) for s in scores] == [2.5, float(F(1e-5))]
    with pytest.raises(LuceneSearchError, match="read 1 of 2 hits"):
        read_hits(text.replace("fields=[2.5, [64 31]]", "fields=[2.5, null]"))


def test_search_many_keeps_query_order_and_raises_a_threads_error():
    from toolkit.jvm import start_jvm
    from toolkit.retrieval.lucene_direct import DirectSearcher

    start_jvm()  # search_many imports jnius: the JVM must be the toolkit's
    searcher = object.__new__(DirectSearcher)
    searcher.search = lambda text, hits: ([text] * hits, np.zeros(hits, np.float32))
    texts = [f"q{i}" for i in range(7)]
    for threads in (1, 3, 20):
        assert [ids for ids, _ in searcher.search_many(texts, 2, threads)] == [[t, t] for t in texts]

    def broken(text, hits):
        if text == "q5":
            raise ValueError("query q5 failed")
        return [], np.zeros(0, np.float32)

    searcher.search = broken
    with pytest.raises(ValueError, match="query q5 failed"):
        searcher.search_many(texts, 2, 3)


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize(
    "model, k1, b, mu, threads",
    [
        ("bm25", 0.9, 0.4, 0.0, 1),
        ("bm25", 1.2, 0.75, 0.0, 3),
        ("bm25", 0.0, 0.4, 0.0, 2),
        ("qld", 0.0, 0.0, 1000.0, 2),
    ],
    ids=["bm25", "bm25-1.2-0.75-3-threads", "bm25-k1=0-all-ties", "qld"],
)
def test_cacm_hits_and_scores_equal_pyserinis(cacm_index, shared_data, model, k1, b, mu, threads):
    from toolkit.data.trec_io import read_topics
    from toolkit.jvm import import_pyserini
    from toolkit.retrieval.lucene import LuceneRetriever

    topics = read_topics(shared_data / "cacm" / "topics.cacm.txt")
    oracle = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(cacm_index))
    oracle.set_bm25(k1, b) if model == "bm25" else oracle.set_qld(mu)
    qids = [t.query_id for t in topics.topics]
    expected = oracle.batch_search([t.text for t in topics.topics], qids, k=1000, threads=2)
    want = [(q, h.docid, h.score) for q in qids for h in expected.get(q, [])]
    retriever = LuceneRetriever(cacm_index, model, k1 or 0.9, b, mu or 1000.0)
    retriever.configure(model, k1, b, mu or 1000.0)
    assert retriever.direct is not None  # the IndexSearcher path, not SimpleSearcher
    f = retriever.search(topics, hits=1000, threads=threads).run.frame
    assert len(f) == len(want) > 50_000
    assert list(zip(f["query_id"], f["doc_id"], f["score"])) == want
