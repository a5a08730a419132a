"""ir_measures' compat provider: ``Compat(p=0.95, normalize=True)``, the compatibility measure of Clarke,
Vtyurina & Smucker (TOIS 2021) as ir_measures 0.4.3 computes it (``compat_provider.py``).

Compatibility is the rank-biased overlap (RBO) of the run's ranking with an ideal ranking of the relevant
documents. The provider's rankings, which twostage follows:

- the run: score descending (Python floats: float64), ties by document id *ascending* (it sorts the ids,
  then stably by score);
- the ideal: the query's documents with a qrels label > 0, by label descending, then by the run's score
  descending (0.0 for a document the run does not retrieve, so a retrieved document with a negative score
  comes after the unretrieved ones), then in qrels order (both sorts are stable).
"""

from __future__ import annotations

import numpy as np

from toolkit.measures.ranked import Ranked, divide
from toolkit.measures.registry import Named, Params, family

SOURCE = "ir_measures: compat"


def _ideal_ranks(r: Ranked) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query of each relevant qrels line, its 1-based place in the ideal ranking, the kept row retrieving it or
    -1), over the qrels lines with a label > 0 of the evaluated qrels."""
    index = r.index
    if index is None or r.line is None or r.score is None:
        raise ValueError("Compat reads the qrels lines and scores of the ranked rows (build_ranked gives them)")
    lines = np.flatnonzero(index.labels > 0)
    row_of_line = np.full(len(index.labels), -1, dtype=np.int64)
    row_of_line[r.line] = np.arange(len(r.line))
    row = row_of_line[lines]
    q = index.q_qidx[lines]
    score = np.where(row >= 0, r.score[np.maximum(row, 0)] if len(r.score) else 0.0, 0.0)
    # label desc, score desc, qrels order (np.lexsort: last key first)
    order = np.lexsort((lines, -score, -index.labels[lines], q))
    q, row = q[order], row[order]
    starts = np.concatenate(([0], np.cumsum(np.bincount(q, minlength=r.nq))[:-1]))
    place = np.arange(len(q)) - starts[q] + 1
    return q, place, row


@family(
    "Compat",
    params=Params.NAMED,
    named=(
        Named("p", float, 0.95, meaning="persistence"),
        Named("normalize", bool, True, meaning="apply normalization for finite ideal rankings"),
    ),
    binary=False,
    since=0,
    source=SOURCE,
    ties="docid_asc",
    score_precision="float64",
)
def compat(r: Ranked, ms, ctx) -> dict:
    """Compatibility: RBO(run, ideal) = sum_{d=1..D} p^(d-1) * |run[:d] & ideal[:d]| / d, divided by
    sum_{d=1..D} p^(d-1), with D = max(documents retrieved, relevant documents).

    The ideal ranking holds every document with a label > 0 (see the module docstring for both orders). With
    normalize (the default) the value is divided by RBO(ideal, ideal) when that is > 0. A document at run
    rank a and ideal place b is in both prefixes from depth max(a, b) on. 0 for a query without a document of
    label > 0. Clarke, Vtyurina & Smucker, 'Assessing top-k preferences', TOIS 39(3), 2021."""
    out = {}
    q, place, row = _ideal_ranks(r)
    n_rel = np.bincount(q, minlength=r.nq)
    depth = np.maximum(r.num_ret, n_rel)
    top = int(depth.max(initial=0))
    found = row >= 0
    meet = np.maximum(r.rank[row[found]], place[found])  # depth from which the document is in both prefixes
    mq = q[found]
    d = np.arange(1, top + 1, dtype=np.float64)
    for m in ms:
        p = float(m.value("p"))
        w = np.concatenate(([1.0], np.cumprod(np.full(max(top - 1, 0), p)))) if top else np.zeros(0)
        norm = np.concatenate(([0.0], np.cumsum(w)))  # norm[D] = sum of the first D weights
        over = np.concatenate(([0.0], np.cumsum(w / d)))  # over[D] = sum over d <= D of w_d / d
        score = np.bincount(mq, weights=over[depth[mq]] - over[meet - 1], minlength=r.nq)
        value = divide(score, norm[depth])
        if m.value("normalize"):
            # RBO(ideal, ideal): the overlap at depth d is min(d, n_rel)
            best = norm[np.minimum(n_rel, depth)] + n_rel * (over[depth] - over[np.minimum(n_rel, depth)])
            best = divide(best, norm[depth])
            value = np.where(best > 0, divide(value, best), value)
        out[m] = np.where(depth > 0, value, 0.0)
    return out
