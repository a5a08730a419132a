"""ir_measures' judged, msmarco and accuracy providers: ``Judged@k``, ``RR@k`` and ``Accuracy`` as
ir_measures 0.4.3 computes them where it picks these providers (``Judged`` always; ``RR`` with a cutoff,
which pytrec_eval does not take; ``Accuracy`` always).

Their rankings, which twostage follows: judged and msmarco sort a query's documents by score descending
(Python floats: float64), ties by document id *ascending* (``key=(-score, doc_id)``); accuracy sorts by score
alone, stably, so tied documents keep the run's line order. The rank column is ignored.
"""

from __future__ import annotations

import numpy as np

from toolkit.measures.ranked import Ranked, divide
from toolkit.measures.registry import Named, Params, family

_CUT = Named("cutoff", int, meaning="ranking cutoff threshold")
_REL = Named("rel", int, 1, meaning="minimum relevance score to be considered relevant (inclusive)")


@family(
    "Judged",
    params=Params.NAMED,
    named=(_CUT,),
    cutoff="optional",
    binary=False,
    since=0,
    source="ir_measures: judged",
    ties="docid_asc",
    score_precision="float64",
    ceiling=False,
)
def judged(r: Ranked, ms, ctx) -> dict:
    """Judged@k as ir_measures' judged provider: of the first min(k, N) documents, the fraction that has a qrels
    line (any label, a negative one included); without a cutoff, of all N retrieved.

    Ranking score descending (float64), ties by document id ascending. Unlike twostage's ``judged.k``
    (trec_eval's order, labels >= 0) and Pyserini's (file order, pooled over queries)."""
    out = {}
    for m in ms:
        k = m.cutoff if m.cutoff is not None else None
        inside = np.ones(len(r.rank), dtype=bool) if k is None else r.rank <= k
        depth = r.num_ret if k is None else np.minimum(r.num_ret, k)
        out[m] = np.where(depth > 0, divide(r.count(inside), depth), 0.0)
    return out


@family(
    "msmarco_RR",
    params=Params.NAMED,
    named=(Named("cutoff", int, required=True, meaning="ranking cutoff threshold"), _REL),
    cutoff="required",
    binary=False,
    since=0,
    label="RR",
    source="ir_measures: msmarco",
    ties="docid_asc",
    score_precision="float64",
)
def msmarco_rr(r: Ranked, ms, ctx) -> dict:
    """RR@k as ir_measures' msmarco provider (its copy of MS MARCO's ``msmarco_eval.compute_metrics``):
    1 / the rank of the first document among the first k with a qrels label >= rel; 0 when there is none.

    Ranking score descending (float64), ties by document id ascending; the run's rank column is ignored
    (ir_measures passes the documents sorted). trec_eval's ``-M k -m recip_rank`` breaks ties by document id
    descending instead. A query without a relevant document counts 0 (ir_measures' default)."""
    out = {}
    labels = r.labels()
    for m in ms:
        hit = np.flatnonzero((labels >= m.value("rel")) & (r.rank <= m.cutoff))
        first = hit[np.unique(r.q[hit], return_index=True)[1]] if len(hit) else hit
        value = np.zeros(r.nq)
        value[r.q[first]] = 1.0 / r.rank[first].astype(np.float64)
        out[m] = value
    return out


@family(
    "Accuracy",
    params=Params.NAMED,
    named=(_CUT, _REL),
    cutoff="optional",
    aggregate="mean_defined",
    binary=False,
    since=0,
    source="ir_measures: accuracy",
    ties="input",
    score_precision="float64",
)
def accuracy(r: Ranked, ms, ctx) -> dict:
    """Accuracy as ir_measures' accuracy provider: among the first k documents (all retrieved without a
    cutoff), the fraction of (relevant, non-relevant) pairs in which the relevant one is ranked first:
    1 - sum over relevant d of (non-relevant above d) / (non-relevant * relevant).

    Relevant: label >= rel, a document without judgment counting as label 0 (so with rel <= 0 it is
    relevant). NaN (undefined, left out of the mean, as ir_measures leaves the query out) when no relevant
    document is among them, and when none is non-relevant (where ir_measures stops with a division by zero).
    The mean is over the queries with a value. Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    labels = r.labels()
    for m in ms:
        rel = m.value("rel")
        depth = r.num_ret if not m.cutoff else np.minimum(r.num_ret, m.cutoff)
        inside = r.rank <= depth[r.q]
        # the rows that differ from an unjudged document (label 0): relevant ones when rel > 0, else non-relevant
        odd = inside & ((labels >= rel) if rel > 0 else (labels < rel))
        rows = np.flatnonzero(odd)
        n_odd = r.count(odd)
        before = (r.rank[rows] - 1).astype(np.float64) - (_count_before(r.q[rows]))  # the other kind above
        if rel > 0:
            n_rel, n_non = n_odd, depth - n_odd
            above = r.sum(before, rows)  # non-relevant above each relevant document
        else:
            n_non, n_rel = n_odd, depth - n_odd
            # non-relevant above relevant = all (relevant, non-relevant) pairs minus relevant above non-relevant
            above = n_rel * n_non - r.sum(before, rows)
        pairs = (n_rel * n_non).astype(np.float64)
        out[m] = np.where((n_rel > 0) & (n_non > 0), 1.0 - divide(above, pairs), np.nan)
    return out


def _count_before(q: np.ndarray) -> np.ndarray:
    """For rows grouped by query, how many earlier rows of the same query there are."""
    if not len(q):
        return np.zeros(0)
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    return (np.arange(len(q)) - np.repeat(starts, np.diff(np.append(starts, len(q))))).astype(np.float64)
