"""MS MARCO's official MRR@k, as its ``ms_marco_eval.py`` computes it (the passage ranking task's script, Campos
and van Haasteren, 2018-2019; Anserini and Pyserini run it as ``msmarco_passage_eval``), named ``MRR@10``.

The script reads its reference (the qrels) as lines ``qid<TAB>0<TAB>pid<TAB>1``, each one a relevant passage (it
reads no label), and the run as ``qid<TAB>pid<TAB>rank``; per query of the run that the reference has, it adds
1/rank of the first relevant passage among ranks 1..10, and it divides the sum by the number of queries of the
reference. So a query of the qrels the run lacks counts 0, whether or not ``-c`` is given, and a run query
without qrels is ignored.

twostage reads labels: a passage is relevant when its label is at least the relevance level (``-l``, 1 by
default), which on MS MARCO's own qrels (every label 1) is every line, as the script reads them; with ``-l 0``
every judged passage is, as the script reads graded qrels given whole. The reference of MS MARCO lists relevant
passages only, so a query of the qrels without a relevant passage is not one of its queries: it is left out of
the mean (``msmarco``), where trec_eval's ``recip_rank`` and ir_measures' ``RR@10`` count it 0.

The ranking: MS MARCO's script reads the rank column; a run read in MS MARCO's format has the scores 1/rank
(``toolkit.data.trec_io``), so trec_eval's order, used here as for every trec_eval measure, is that rank order;
a TREC run is ranked as trec_eval ranks it (score descending, ties by document id descending), its rank column
ignored, as trec_eval ignores it.
"""

from __future__ import annotations

import numpy as np

from toolkit.measures.ranked import Ranked
from toolkit.measures.registry import Named, Params, family


@family(
    "msmarco_MRR",
    params=Params.NAMED,
    named=(Named("cutoff", int, required=True, meaning="ranking cutoff threshold (MS MARCO's MaxMRRRank)"),),
    cutoff="required",
    aggregate="msmarco",
    since=0,
    label="MRR",
    source="MS MARCO's ms_marco_eval.py",
)
def msmarco_mrr(r: Ranked, ms, ctx) -> dict:
    """MRR@k as MS MARCO's ``ms_marco_eval.py``: per query, 1 / the rank of the first relevant passage (label >=
    the relevance level) among the first k, 0 when there is none; the mean is the sum over the queries evaluated
    divided by the number of queries of the qrels that have a relevant passage (MS MARCO's reference lists only
    those): a qrels query missing from the run counts 0 even without -c, and a query without a relevant
    passage is left out (its value, 0, is listed per query but not counted).

    Ranking: trec_eval's (score descending, ties by document id descending); on a run read in MS MARCO's format
    (scores 1/rank) that is its rank order, as the script reads it."""
    rows, d = r.rel_rows()
    first = rows[d == 1]
    out = {}
    for m in ms:
        hit = first[r.rank[first] <= m.cutoff]
        value = np.zeros(r.nq)
        value[r.q[hit]] = 1.0 / r.rank[hit].astype(np.float64)
        out[m] = value
    return out
