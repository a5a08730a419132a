"""ranx 0.3.21's metrics, one declaration and one vectorised function each, under ranx's own names.

ranx (Bassani, ECIR 2022) names a metric ``name[@k][-lN]``: ``@k`` keeps the
first k retrieved documents (none: all of them), ``-lN`` counts labels >= N as
relevant (``ranx/meta/evaluate.py``'s ``extract_metric_and_params``); RBP is
``rbp.P`` with persistence 0.P. Each function's docstring is the metric's
exact definition, read off ranx's code (``ranx/metrics/*.py``), which is what
ranx computes where its documentation says otherwise. Shared vocabulary:

- L = the relevance level: the name's ``-lN``, else twostage's ``-l`` (1 by
  default, ranx's default too). "Relevant" = qrels label >= L. R = relevant
  documents in the qrels, retrieved or not. N = documents retrieved (after
  ``-M``/``-J``). k' = k when ``@k`` is given, else N.
- The ranking is trec_eval's (``ranking.py``): score descending, ties by
  document id descending; scores are compared as doubles, as ranx compares
  them, whatever ``--trec-eval`` or ``--score-precision`` (the family's
  ``score_precision``, as the ir_measures providers' families). ranx itself
  sorts with numba's unstable quicksort, which leaves tied documents in no
  documented order; on a run without ties the two orders are the same, so
  are the values.
- A query with R = 0 scores 0 in every metric. With ``-c`` a judged query
  missing from the run scores 0, as ranx's ``make_comparable`` gives it.
- The ``all`` line is the mean over the evaluated queries, as ranx's
  ``evaluate`` returns (hits included: a mean, not trec_eval's sum).

These are ranx's definitions, not trec_eval's: ``twostage`` reads a name in
ranx's syntax that it already reads otherwise (``ndcg@10``, ``map@100``,
``recall``, ``mrr``, ``bpref``) as before, and a ranx name with a level suffix
(``ndcg@10-l1``) or one only ranx has (``ndcg_burges@10``, ``rbp.8``) here
(``names.py``; docs/evaluate.md compares them side by side).
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pandas as pd

from toolkit.data.ranking import within_group_rank
from toolkit.data.records import QUERY_ID, RELEVANCE
from toolkit.measures.ranked import Ranked, c_power_table, divide, exp2_int, log2_table
from toolkit.measures.registry import Measure, Params, family

#: The ranx release whose code these definitions follow.
RANX_VERSION = "0.3.21"

Values = dict  # Measure -> per-query float64 array


def _ranx(name: str, label: str):
    """A ranx family: named as ranx names it, -l applies (the level decides what is relevant), both trec_eval
    generations' settings, qrels only, scores compared as ranx's float64 (trec_eval's tie order)."""
    return family(f"ranx_{name}", params=Params.RANX, since=0, source="ranx", label=label, score_precision="float64")


# ------------------------------------------------------------ what every metric reads
def level_of(m: Measure, r: Ranked) -> int:
    """The relevance level of ``m``: its own ``-lN``, else the settings' ``-l``."""
    return int(dict(m.params).get("l", r.level))


def _relevant(r: Ranked, level: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows with a label >= level, R per query): ranx's ``clean_qrels``."""
    return r.code >= level, r.rel_levels[:, r.levels >= level].sum(axis=1)


def _top(r: Ranked, m: Measure) -> np.ndarray:
    """Kept rows within the first k (every row without ``@k``)."""
    return np.ones(len(r.q), dtype=bool) if m.cutoff is None else r.rank <= m.cutoff


def _hits(r: Ranked, m: Measure) -> tuple[np.ndarray, np.ndarray]:
    rel, R = _relevant(r, level_of(m, r))
    return r.count(rel & _top(r, m)), R


def _depth(r: Ranked, m: Measure) -> np.ndarray:
    """k': the cutoff, or N without one (ranx's ``k if k != 0 else len(run)``)."""
    return np.full(r.nq, float(m.cutoff)) if m.cutoff is not None else r.num_ret.astype(np.float64)


# ---------------------------------------------------------------- counts
@_ranx("hits", "hits")
def hits(r: Ranked, ms: list[Measure], ctx) -> Values:
    """Hits@k: relevant documents among the first k retrieved (all retrieved without ``@k``).

    The ``all`` line is their mean over queries (``ranx/metrics/hits.py``)."""
    return {m: _hits(r, m)[0] for m in ms}


@_ranx("hit_rate", "hit_rate")
def hit_rate(r: Ranked, ms, ctx) -> Values:
    """Hit rate@k: 1 if a relevant document is among the first k retrieved (any without ``@k``), else 0.

    trec_eval's success.k with a cutoff (``ranx/metrics/hit_rate.py``)."""
    return {m: (_hits(r, m)[0] > 0).astype(np.float64) for m in ms}


@_ranx("precision", "precision")
def precision(r: Ranked, ms, ctx) -> Values:
    """Precision@k: hits@k / k, k fixed even when N < k; without ``@k``: hits / N, 0 when N = 0.

    trec_eval's P.k and set_P (``ranx/metrics/precision.py``)."""
    out = {}
    for m in ms:
        h = _hits(r, m)[0]
        k = _depth(r, m)
        out[m] = np.where(k > 0, divide(h, k), 0.0)
    return out


@_ranx("recall", "recall")
def recall(r: Ranked, ms, ctx) -> Values:
    """Recall@k: hits@k / R (all retrieved without ``@k``); 0 when R = 0.

    trec_eval's recall.k and set_recall (``ranx/metrics/recall.py``)."""
    out = {}
    for m in ms:
        h, R = _hits(r, m)
        out[m] = np.where((R > 0) & (_depth(r, m) > 0), divide(h, R), 0.0)
    return out


@_ranx("f1", "f1")
def f1(r: Ranked, ms, ctx) -> Values:
    """F1@k: 2 * (P * Rc) / (P + Rc) with P = hits@k / k' and Rc = hits@k / R; 0 when R = 0, k' = 0 or P + Rc = 0.

    Computed in that order, as ranx does (``ranx/metrics/f1.py``); without
    ``@k`` it is trec_eval's set_F (beta 1) up to rounding."""
    out = {}
    for m in ms:
        h, R = _hits(r, m)
        k = _depth(r, m)
        p, rc = divide(h, k), divide(h, R)
        with np.errstate(invalid="ignore"):
            value = 2.0 * divide(p * rc, p + rc)
        out[m] = np.where((R > 0) & (k > 0) & (p + rc != 0), value, 0.0)
    return out


@_ranx("r-precision", "r-precision")
def r_precision(r: Ranked, ms, ctx) -> Values:
    """R-precision: relevant documents among the first R retrieved / R; 0 when R = 0.

    trec_eval's Rprec. ranx ignores a cutoff here, so twostage refuses one
    (``ranx/metrics/r_precision.py``)."""
    out = {}
    for m in ms:
        rel, R = _relevant(r, level_of(m, r))
        h = r.count(rel & (r.rank <= R[r.q]))
        out[m] = np.where(R > 0, divide(h, R), 0.0)
    return out


# ------------------------------------------------------------ rank-sensitive
@_ranx("mrr", "mrr")
def mrr(r: Ranked, ms, ctx) -> Values:
    """Reciprocal rank@k: 1 / the rank of the first relevant document if it is among the first k (anywhere
    without ``@k``), else 0; the ``all`` line is MRR.

    trec_eval's recip_rank under ``-M k`` (``ranx/metrics/reciprocal_rank.py``)."""
    out = {}
    for m in ms:
        rel, _ = _relevant(r, level_of(m, r))
        rows = np.flatnonzero(rel & _top(r, m))
        first = rows[np.unique(r.q[rows], return_index=True)[1]]  # rows run in rank order within a query
        value = np.zeros(r.nq)
        value[r.q[first]] = 1.0 / r.rank[first].astype(np.float64)
        out[m] = value
    return out


@_ranx("map", "map")
def map_(r: Ranked, ms, ctx) -> Values:
    """Average precision@k: (1/R) * sum over relevant documents at ranks <= k (all without ``@k``) of P@(rank).

    The denominator is every relevant document of the qrels, not min(k, R):
    trec_eval's map_cut.k and map (``ranx/metrics/average_precision.py``)."""
    out = {}
    for m in ms:
        rel, R = _relevant(r, level_of(m, r))
        rows = np.flatnonzero(rel & _top(r, m))
        before = within_group_rank(r.q[rows]).astype(np.float64)  # relevant up to and including each
        s = r.sum(before / r.rank[rows].astype(np.float64), rows)
        out[m] = np.where(R > 0, divide(s, R), 0.0)
    return out


def _gains(labels: np.ndarray, burges: bool) -> np.ndarray:
    """ranx's gains of relevant labels: the label (Järvelin & Kekäläinen) or 2^label - 1 (Burges)."""
    return exp2_int(labels) - 1.0 if burges else labels.astype(np.float64)


def _dcg(r: Ranked, m: Measure, burges: bool) -> np.ndarray:
    rel, _ = _relevant(r, level_of(m, r))
    rows = np.flatnonzero(rel & _top(r, m))
    terms = _gains(r.code[rows], burges) / log2_table(int(r.rank[rows].max(initial=1)) + 1)[r.rank[rows] + 1]
    return r.sum(terms, rows)


def _ideal_dcg(r: Ranked, m: Measure, burges: bool) -> np.ndarray:
    """DCG of the qrels' documents with label >= L, by decreasing label, over the first k (all without ``@k``)."""
    level = level_of(m, r)
    cols = np.flatnonzero(r.levels >= max(level, 1))[::-1]  # labels 0 gain nothing in either formula
    counts = r.rel_levels[:, cols]
    if m.cutoff is not None:  # no query needs more than k ideal positions
        taken = np.minimum(np.cumsum(counts, axis=1), m.cutoff)
        counts = np.diff(taken, axis=1, prepend=0)
    qi, ji = np.nonzero(counts)
    reps = counts[qi, ji]
    q = np.repeat(qi, reps)
    gain = np.repeat(_gains(r.levels[cols][ji], burges), reps)
    start = np.concatenate(([0], np.cumsum(np.bincount(q, minlength=r.nq))[:-1]))
    pos = np.arange(len(q)) - start[q]  # 0-based ideal position
    return np.bincount(q, weights=gain / log2_table(int(pos.max(initial=0)) + 2)[pos + 2], minlength=r.nq)


@_ranx("dcg", "dcg")
def dcg(r: Ranked, ms, ctx) -> Values:
    """DCG@k (Järvelin & Kekäläinen): sum over relevant documents at ranks <= k of label / log2(rank + 1).

    The gain is the raw label, and only labels >= L count (``-l2``: a label
    1 adds nothing); twostage's ``--gain`` and ``--discount`` do not apply.
    Not normalised (``ranx/metrics/ndcg.py``, ``dcg``)."""
    return {m: _dcg(r, m, burges=False) for m in ms}


@_ranx("dcg_burges", "dcg_burges")
def dcg_burges(r: Ranked, ms, ctx) -> Values:
    """DCG@k (Burges et al. 2005): sum over relevant documents at ranks <= k of (2^label - 1) / log2(rank + 1).

    Only labels >= L count; ``--gain`` and ``--discount`` do not apply
    (``ranx/metrics/ndcg.py``, ``dcg_burges``)."""
    return {m: _dcg(r, m, burges=True) for m in ms}


def _ndcg(r: Ranked, ms, burges: bool) -> Values:
    out = {}
    for m in ms:
        d, ideal = _dcg(r, m, burges), _ideal_dcg(r, m, burges)
        out[m] = np.where(ideal > 0, divide(d, ideal), d)  # ranx divides by 1 when the ideal is 0 (d is 0 then)
    return out


@_ranx("ndcg", "ndcg")
def ndcg(r: Ranked, ms, ctx) -> Values:
    """nDCG@k (Järvelin & Kekäläinen): DCG@k / IDCG@k, gain = the label for labels >= L (0 below), discount
    log2(rank + 1); 0 when IDCG@k = 0.

    IDCG@k is the DCG of the qrels' documents with label >= L by decreasing
    label, first k of them. At L = 1 this is trec_eval's ndcg_cut.k (ndcg
    without ``@k``); at L = 2 labels 1 gain nothing, where trec_eval's ndcg
    ignores ``-l``. ``--gain``/``--discount`` do not apply
    (``ranx/metrics/ndcg.py``, ``ndcg``)."""
    return _ndcg(r, ms, burges=False)


@_ranx("ndcg_burges", "ndcg_burges")
def ndcg_burges(r: Ranked, ms, ctx) -> Values:
    """nDCG@k (Burges et al. 2005): DCG@k / IDCG@k, gain = 2^label - 1 for labels >= L (0 below), discount
    log2(rank + 1); 0 when IDCG@k = 0.

    IDCG@k as for ranx's ndcg, with these gains. trec_eval's ndcg_cut.k
    under ``--gain exp`` at L = 1 (``ranx/metrics/ndcg.py``, ``ndcg_burges``)."""
    return _ndcg(r, ms, burges=True)


# ------------------------------------------------------------ incomplete judgments
def _negative_labels(r: Ranked, ctx) -> np.ndarray:
    """Per query, the qrels lines with a negative label (ranx counts them as judged non-relevant)."""
    frame = ctx.qrels.frame
    labels = frame[RELEVANCE].to_numpy()
    neg = labels < 0
    if not neg.any():
        return np.zeros(r.nq, dtype=np.int64)
    qids = pd.Index(r.qids.tolist())
    at = qids.get_indexer(frame[QUERY_ID].to_numpy()[neg].astype(str))
    return np.bincount(at[at >= 0], minlength=r.nq)


@_ranx("bpref", "bpref")
def bpref(r: Ranked, ms, ctx) -> Values:
    """bpref = (1/R) * sum over relevant retrieved d of (1 - min(n_d, R) / min(R, NR)); 0 when R = 0.

    NR = qrels lines with a label < L, negative labels included (trec_eval
    leaves those out); n_d = such documents ranked above d; documents not in
    the qrels are skipped. When NR = 0 a relevant retrieved document makes
    0/0: the value is NaN, as ranx gives (trec_eval counts such a document
    as 1), and twostage warns. A query with R = 0 scores 0: ranx 0.3.21
    divides by that 0 inside its numba loop, which stops the loop, so it
    also leaves 0 for the queries its thread had not reached yet; twostage
    gives them their value. ranx ignores a cutoff here, so twostage refuses
    one (``ranx/metrics/bpref.py``)."""
    negative = _negative_labels(r, ctx)
    out = {}
    for m in ms:
        level = level_of(m, r)
        rel, R = _relevant(r, level)
        nonrel = r.rel_levels[:, r.levels < level].sum(axis=1) + negative
        rows = np.flatnonzero(rel)
        above = r.running_count(~rel)[rows]  # kept rows are in the qrels: not relevant is judged non-relevant
        qr = r.q[rows]
        with np.errstate(invalid="ignore"):
            term = 1.0 - divide(np.minimum(above, R[qr]), np.minimum(R[qr], nonrel[qr]))
        s = r.sum(term, rows)
        out[m] = np.where(R > 0, divide(s, R), 0.0)
    return out


# ---------------------------------------------------------------- rank-biased precision
@_ranx("rbp", "rbp")
def rbp(r: Ranked, ms, ctx) -> Values:
    """RBP with persistence p (``rbp.P``: p = 0.P): (1 - p) * sum over retrieved d with label >= L of
    label(d) * p^(rank - 1), over the whole ranking.

    The gain is the raw label, as ranx's code has it (its documentation
    says 0 or 1): on graded qrels the value can exceed 1, and it is neither
    trec_eval's rbp (labels rescaled to [0, 1], p = 0.9) nor ir_measures'
    RBP(p=0.8) (binary). Moffat & Zobel, ACM TOIS 27(1), 2008
    (``ranx/metrics/rank_biased_precision.py``)."""
    out = {}
    for m in ms:
        p = float(dict(m.params)["p"])
        rel, _ = _relevant(r, level_of(m, r))
        rows = np.flatnonzero(rel)
        ranks = r.rank[rows]
        powers = c_power_table(p, int(ranks.max(initial=0)))
        weights = r.code[rows].astype(np.float64) * powers[ranks - 1]
        out[m] = (1.0 - p) * r.sum(weights, rows)
    return out


# ---------------------------------------------------------------- what the provenance says
_WHAT = MappingProxyType(
    {
        "ranx_hits": "relevant among the first k (a mean over queries)",
        "ranx_hit_rate": "1 if a relevant document is among the first k",
        "ranx_precision": "relevant among the first k / k (/ N without a cutoff)",
        "ranx_recall": "relevant among the first k / R",
        "ranx_f1": "harmonic mean of precision and recall among the first k",
        "ranx_r-precision": "relevant among the first R / R",
        "ranx_mrr": "1 / rank of the first relevant document among the first k",
        "ranx_map": "AP over the first k, divided by all R relevant",
        "ranx_dcg": "gain = label, discount log2(rank + 1), not normalised",
        "ranx_dcg_burges": "gain 2^label - 1, discount log2(rank + 1), not normalised",
        "ranx_ndcg": "gain = label, discount log2(rank + 1)",
        "ranx_ndcg_burges": "gain 2^label - 1, discount log2(rank + 1)",
        "ranx_bpref": "non-relevant = qrels labels below the level, negative ones included; NaN without any",
        "ranx_rbp": "gain = the raw label (not 0/1), so above 1 on graded qrels",
    }
)
_WHOLE = ("ranx_r-precision", "ranx_bpref", "ranx_rbp")  # no cutoff in ranx


def describe(m: Measure, level: int) -> str:
    """The provenance line of a ranx measure: its definition in short, its cutoff and level, the tie order."""
    own = own_level(m)
    cut = "" if m.family in _WHOLE else f"; k = {m.cutoff}" if m.cutoff else "; no cutoff: k = N, every document"
    return (
        f"{m.name} as ranx {RANX_VERSION}: {_WHAT[m.family]}{cut}; labels >= {level if own is None else own} "
        f"relevant{' (-l)' if own is None else ''}; score ties in trec_eval's order (score desc, docid desc), "
        "where ranx leaves them in its sort's order; scores as float64, as ranx compares them"
    )


def syntax(family_name: str) -> str:
    """How a ranx family's names are written (``twostage measures``): ``ndcg_burges[@k][-lN]``, ``rbp.P[-lN]``."""
    label = family_name.removeprefix("ranx_")
    if family_name == "ranx_rbp":
        return "rbp.P[-lN]"
    return f"{label}[-lN]" if family_name in _WHOLE else f"{label}[@k][-lN]"


def own_level(m: Measure) -> int | None:
    """The level a ranx measure's name gives (``-lN``), None when it follows ``-l`` (or is not ranx's)."""
    if m.spec.params is not Params.RANX:
        return None
    level = dict(m.params).get("l")
    return None if level is None else int(level)


def warnings_for(qrels_frame: pd.DataFrame, measures, level: int) -> list[str]:
    """What a ranx measure's number may not mean: bpref is NaN for a query whose qrels have no label below its
    level once one of its relevant documents is retrieved."""
    out = []
    for m in measures:
        if m.family != "ranx_bpref":
            continue
        at = own_level(m)
        at = level if at is None else at
        below = pd.Series(qrels_frame[RELEVANCE].to_numpy() < at).groupby(qrels_frame[QUERY_ID].to_numpy()).any()
        none = below.index[~below.to_numpy()]
        if len(none):
            names = ", ".join(repr(str(q)) for q in none[:3])
            out.append(
                f"{m.name}: {len(none)} judged queries have no label below {at} (e.g. {names}): ranx's bpref "
                "divides 0 by 0 there once a relevant document is retrieved, and is NaN, as ranx gives it "
                "(trec_eval's bpref counts each such document as 1)"
            )
    return out


__all__ = ["RANX_VERSION", "describe", "level_of", "own_level", "syntax", "warnings_for"]
