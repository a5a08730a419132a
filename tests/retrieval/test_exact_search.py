"""Exact inner-product search by torch in chunks (the GPU path of a flat dense index), run on the CPU
against FAISS' IndexFlatIP and a numpy oracle (every score, trec_eval's order)."""

from __future__ import annotations

import numpy as np
from needs import required

from toolkit.retrieval.exact_search import exact_search, tie_ranks


def _oracle(docs, queries, k, ranks):
    """Every score, then (score desc, doc-id rank desc): trec_eval's order."""
    s = queries @ docs.T
    out_s, out_i = [], []
    for row in s:
        order = np.lexsort((-ranks, -row))[:k]
        out_s.append(row[order])
        out_i.append(order)
    return np.array(out_s), np.array(out_i)


def _unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_chunked_torch_search_equals_faiss_flat():
    faiss = required("faiss", "dense search needs faiss (the [pyserini] extra)")
    rng = np.random.default_rng(0)
    docs, queries = _unit(rng, 3000, 24), _unit(rng, 37, 24)
    index = faiss.IndexFlatIP(24)
    index.add(docs)
    ref_s, ref_i = index.search(queries, 50)
    # chunks smaller than k and not dividing the sizes: the merge across chunks is exercised
    got_s, got_i = exact_search(docs, queries, 50, "cpu", query_chunk=10, doc_chunk=37)
    assert np.array_equal(got_i, ref_i)
    assert np.allclose(got_s, ref_s, atol=1e-6)
    # k beyond the index: every document, once
    _s, i = exact_search(docs[:20], queries, 50, "cpu", doc_chunk=7)
    assert i.shape == (37, 20) and all(sorted(r) == list(range(20)) for r in i)


def test_ties_follow_trec_eval_order_across_the_cut():
    """Duplicate documents score equal: within the top k and across the cut, the larger doc id first.
    Small integer vectors: every inner product is exact in float32 whatever the summation order."""
    rng = np.random.default_rng(1)
    base = rng.integers(-2, 3, (40, 8)).astype(np.float32)
    docs = np.concatenate([base, base, base])  # every vector three times: ties everywhere
    queries = rng.integers(-2, 3, (9, 8)).astype(np.float32)
    docids = [f"d{i:03d}" for i in rng.permutation(len(docs))]
    ranks = tie_ranks(docids)
    assert [docids[j] for j in np.argsort(ranks)] == sorted(docids)
    for k in (1, 2, 4, 5, 7):  # cuts inside a tie group
        got_s, got_i = exact_search(docs, queries, k, "cpu", ranks, query_chunk=4, doc_chunk=13)
        ref_s, ref_i = _oracle(docs, queries, k, ranks)
        assert np.array_equal(got_i, ref_i), k
        assert np.array_equal(got_s, ref_s)
    assert exact_search(docs, queries[:0], 3)[0].shape == (0, 3)
