"""Exact inner-product search with torch, in chunks: the flat (``IndexFlatIP``) dense search on a GPU.

The index's vectors go to the device once (fp32: ``4 * documents * dim`` bytes, 13.5 GB for MS MARCO's
8.8 M passages at 384 dimensions); queries are scored ``QUERY_CHUNK`` at a time against ``DOC_CHUNK``
documents at a time (a ``QUERY_CHUNK x DOC_CHUNK`` fp32 score block, 1 GiB by default), keeping each
query's best ``k + 1`` as it goes. The hits are those of FAISS' flat index: the same scores (fp32 inner
products, to float rounding) and, on ties, trec_eval's order (higher score first, then doc id
descending). A tie across the cut (the ``k``-th and ``k+1``-th best equal) is settled by a second pass
over that query's tied documents, so the cut is trec_eval's too.

torch is imported inside the functions.
"""

from __future__ import annotations

import numpy as np

#: Queries scored at once.
QUERY_CHUNK = 1024
#: Documents scored at once per query chunk (QUERY_CHUNK x DOC_CHUNK fp32 scores: 1 GiB).
DOC_CHUNK = 262_144


def tie_ranks(docids) -> np.ndarray:
    """Per document, its rank in ascending doc-id string order: on equal scores the larger rank comes
    first (trec_eval sorts ties by doc id descending)."""
    ids = np.asarray(docids, dtype=object)
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids))
    return ranks


def exact_search(
    vectors,
    queries: np.ndarray,
    k: int,
    device: str = "cpu",
    ranks: np.ndarray | None = None,
    query_chunk: int = QUERY_CHUNK,
    doc_chunk: int = DOC_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores float32, row indices int64) of the ``k`` best documents per query by inner product, in
    trec_eval's order; ``ranks`` (``tie_ranks`` of the doc ids) breaks ties (default: the row index).
    ``vectors``: the documents (numpy or a tensor already on ``device``)."""
    import torch

    n = int(vectors.shape[0])
    k = min(int(k), n)
    nq = len(queries)
    if k <= 0 or nq == 0:
        return np.zeros((nq, max(k, 0)), np.float32), np.zeros((nq, max(k, 0)), np.int64)
    docs = vectors if isinstance(vectors, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(vectors))
    docs = docs.to(device=device, dtype=torch.float32)
    rank_t = torch.from_numpy(np.arange(n) if ranks is None else np.asarray(ranks)).to(device)
    out_s = np.empty((nq, k), np.float32)
    out_i = np.empty((nq, k), np.int64)
    keep = min(k + 1, n)  # one more than asked: a tie across the cut shows
    with torch.inference_mode():
        for q0 in range(0, nq, query_chunk):
            q = torch.from_numpy(np.ascontiguousarray(queries[q0 : q0 + query_chunk], dtype=np.float32)).to(device)
            best_s = torch.full((len(q), 0), float("-inf"), device=device)
            best_i = torch.zeros((len(q), 0), dtype=torch.int64, device=device)
            for d0 in range(0, n, doc_chunk):
                scores = q @ docs[d0 : d0 + doc_chunk].T
                s, i = torch.topk(scores, min(keep, scores.shape[1]), dim=1)
                best_s, pos = torch.topk(torch.cat([best_s, s], 1), min(keep, best_s.shape[1] + s.shape[1]), dim=1)
                best_i = torch.gather(torch.cat([best_i, i + d0], 1), 1, pos)
            s_np, i_np = best_s.cpu().numpy(), best_i.cpu().numpy()
            r_np = rank_t[best_i].cpu().numpy()
            for r in range(len(q)):
                row_s, row_i, row_r = s_np[r], i_np[r], r_np[r]
                if keep > k and row_s[k] == row_s[k - 1]:  # a tie across the cut: every tied document
                    row_s, row_i, row_r = _with_ties(q[r], docs, rank_t, doc_chunk, k)
                order = np.lexsort((-row_r, -row_s))[:k]
                out_s[q0 + r], out_i[q0 + r] = row_s[order], row_i[order]
    return out_s, out_i


def _with_ties(query, docs, rank_t, doc_chunk: int, k: int):
    """A query whose k-th and (k+1)-th best tie, scored again alone (one kernel for every score, so equal
    means equal): the hits above the k-th score plus every document tied with it."""
    import torch

    q = query[None, :]
    s_all = torch.cat([(q @ docs[d0 : d0 + doc_chunk].T)[0] for d0 in range(0, int(docs.shape[0]), doc_chunk)])
    cut = torch.topk(s_all, k).values[-1]
    i = torch.nonzero(s_all >= cut).flatten()
    return s_all[i].cpu().numpy(), i.cpu().numpy(), rank_t[i].cpu().numpy()
