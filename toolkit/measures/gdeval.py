"""ir_measures' gdeval provider: ``ERR@k`` and ``nDCG(dcg='exp-log2')@k`` as ``gdeval.pl`` computes them.

``gdeval.pl`` is the TREC 2010 Web track's script (version 1.2a, the copy ir_measures 0.4.3 ships and runs
with ``perl``). What it does, and twostage with it:

- Ranking: score descending (numbers, Perl's doubles: float64), ties by document id *descending*
  (``runOrder``: ``$docnoA lt $docnoB`` sorts A after B), trec_eval's tie order; the rank column is ignored.
- Gains: a document's qrels label when it is > 0, else 0 (``$judgment > 0`` lines alone are kept; a document
  absent from the qrels has gain 0). A label above 4 (``$MAX_JUDGMENT``) stops gdeval.pl with a format
  error; twostage refuses the measure on such qrels, naming the label.
- A query whose qrels hold no label > 0 is not printed by gdeval.pl, and ir_measures then gives it 0: so does
  twostage. Queries are numbers in gdeval.pl (``topic =~ /^[0-9]+$/`` after removing a prefix up to a '-');
  twostage evaluates any query id with the same formulas.
- gdeval.pl prints each value rounded to 5 decimals (``%.5f``), which is what ir_measures reads; twostage
  gives the value unrounded (equal to gdeval's when rounded to 5 decimals).
- Logarithms are natural (``log``), from the C library, as Perl's.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from toolkit.errors import UnknownMeasureError
from toolkit.measures.gains import Gain, GainTable, ideal
from toolkit.measures.ranked import Ranked, before_in_group, divide, exp2_int, segment_cumprod
from toolkit.measures.registry import Named, Params, family

#: gdeval.pl's ``$MAX_JUDGMENT``: the largest label it reads.
MAX_JUDGMENT = 4
SOURCE = "ir_measures: gdeval"
_CUTOFF = (Named("cutoff", int, required=True, meaning="ranking cutoff threshold"),)


def _check_labels(r: Ranked, name: str) -> None:
    top = int(r.levels.max()) if len(r.levels) else 0
    if top > MAX_JUDGMENT:
        raise UnknownMeasureError(
            f"{name}: gdeval.pl refuses qrels with a label above {MAX_JUDGMENT} (its $MAX_JUDGMENT); these qrels "
            f"have label {top}"
        )


def _positive_rows(r: Ranked, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows at ranks <= k with a label > 0, their gains 2^label - 1)."""
    rows = np.flatnonzero((r.code > 0) & (r.rank <= k))
    return rows, exp2_int(r.code[rows]) - 1.0


def _log_plus_2(n: int) -> np.ndarray:
    """``t[i] = log(i + 2)`` (natural, C library) for i < n: gdeval's discount of the 0-based position i."""
    return _log_plus_2_of(max(1024, 1 << max(n - 1, 0).bit_length()))  # a power of two >= n: few sizes


@functools.cache
def _log_plus_2_of(size: int) -> np.ndarray:
    table = np.array([math.log(i + 2) for i in range(size)])
    table.flags.writeable = False
    return table


@family(
    "ERR",
    params=Params.NAMED,
    named=_CUTOFF,
    cutoff="required",
    binary=False,
    since=0,
    source=SOURCE,
    score_precision="float64",
)
def err(r: Ranked, ms, ctx) -> dict:
    """ERR@k (Chapelle et al., CIKM 2009) as gdeval.pl: sum over ranks i <= k of R_i / i * prod_{j<i} (1 - R_j).

    R = (2^g - 1) / 2^4 with g the document's label when > 0, else 0 (labels 0..4; 2^4 = 16 is gdeval's
    ``2**$MAX_JUDGMENT``); documents without judgments have R = 0. Ranking score descending (float64), ties
    by document id descending. Added in rank order, ``$score += $r * $decay / ($i + 1)``, ``$decay *= 1 - $r``.
    0 for a query with no label > 0 (gdeval does not print it; ir_measures gives 0)."""
    out = {}
    for m in ms:
        _check_labels(r, m.name)
        rows, g = _positive_rows(r, m.cutoff)
        stop = g / float(2**MAX_JUDGMENT)
        q = r.q[rows]
        decay = before_in_group(segment_cumprod(1.0 - stop, q), q, 1.0)
        out[m] = r.sum(stop * decay / r.rank[rows].astype(np.float64), rows)
    return out


@family(
    "gdeval_nDCG",
    params=Params.NAMED,
    named=_CUTOFF,
    cutoff="required",
    binary=False,
    since=0,
    label="nDCG",
    fixed=(("dcg", "exp-log2"),),
    source=SOURCE,
    score_precision="float64",
)
def gdeval_ndcg(r: Ranked, ms, ctx) -> dict:
    """nDCG@k with exponential gains as gdeval.pl: DCG@k / ideal DCG@k, DCG@k = sum over ranks i <= k of
    (2^g - 1) / log(i + 1).

    g is the document's label when > 0, else 0 (labels 0..4); the ideal ranking is the query's labels > 0 in
    decreasing order, its first k (retrieved or not). The natural logarithm (the ratio is that of log2's).
    Ranking score descending (float64), ties by document id descending. 0 for a query with no label > 0."""
    out = {}
    table = GainTable(gain=Gain("exp"), trec_sort=False)
    ide = ideal(r.rel_levels, r.levels, r.num_rel_levels, table)
    for m in ms:
        _check_labels(r, m.name)
        k = m.cutoff
        rows, g = _positive_rows(r, k)
        logs = _log_plus_2(int(max(k, ide.pos.max(initial=0) + 1)))
        dcg = r.sum(g / logs[r.rank[rows] - 1], rows)
        inside = ide.pos < k
        idcg = np.bincount(ide.q[inside], weights=ide.gain[inside] / logs[ide.pos[inside]], minlength=r.nq)
        out[m] = np.where(idcg > 0, divide(dcg, idcg), 0.0)
    return out
