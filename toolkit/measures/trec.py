"""Every trec_eval measure over qrels, one declaration and one vectorised function each.

Each function's docstring is the measure's exact definition. Shared
vocabulary (trec_eval 10 unless stated; the code follows trec_eval's
``m_*.c`` files, whose names are given):

- The ranking is trec_eval's (``ranking.py``): score descending, ties by
  document id descending; the run's rank column is ignored. ``-M N`` keeps
  the first N; ``-J`` then drops documents that are not judged.
- N = documents retrieved (num_ret), R = relevant judged documents
  (num_rel: qrels labels >= the level ``-l``), "relevant" = label >= ``-l``.
  A retrieved document absent from the qrels is *unpooled* (code -1), one in
  the qrels with a negative label is *unjudged* (code -2); both are
  non-relevant unless a definition says otherwise.
- "rank" is 1-based; P@k = relevant among the first k / k.
- Sums run in rank order, one addition at a time, and logarithms come from
  the C library, so values agree with trec_eval to the last bit.
- A query with nothing that a definition divides by scores 0, as in
  trec_eval (0/0 is only produced where trec_eval produces it, and printed
  as trec_eval prints it).

``ctx`` carries the settings (trec_eval generation, twostage gain and
discount, ``-N``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.measures.gains import Discount, Gain, GainTable, ideal
from toolkit.measures.ranked import NONPOOL, UNJUDGED, Ranked, c_log, c_log2, divide, log2_table, segment_cumsum
from toolkit.measures.registry import Measure, Params, family

MIN_GEO_MEAN = 0.00001
INFAP_EPSILON = 0.00001
LONG_DEFAULTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class Context:
    """What a compute function may read besides the ranking."""

    version: int = 9
    gain: Gain = field(default_factory=Gain)
    discount: Discount = field(default_factory=Discount)
    num_docs: int = 0  # -N
    judged_compat: str = "twostage"
    qrels: object = None
    run: object = None


Values = dict  # Measure -> per-query float64 array (or str array for relstring)


def _param(ctx: Context, x: float) -> float:
    """A floating-point parameter (a double in trec_eval 9.0.4 and 10; only scores are floats in 9.x)."""
    return float(x)


def _cut_count(r: Ranked, mask: np.ndarray, k: int) -> np.ndarray:
    return r.count(mask & (r.rank <= k))


# ---------------------------------------------------------------- counts
@family("runid", aggregate="none", value_type="string", binary=False, rel_format="any", per_query=False)
def runid(r: Ranked, ms: list[Measure], ctx: Context) -> Values:
    """Run id: the tag (sixth column) of the results file's last line (``m_runid.c``). Summary line only."""
    return {}


@family("num_q", aggregate="count", value_type="long", binary=False, rel_format="any", per_query=False)
def num_q(r: Ranked, ms: list[Measure], ctx: Context) -> Values:
    """Number of queries averaged over: those in both qrels and run, or every qrels query with ``-c``.

    Summary line only (``m_num_q.c``)."""
    return {ms[0]: np.ones(r.nq)}


@family("num_ret", aggregate="sum", value_type="long", binary=False, placeholder="zero")
def num_ret(r: Ranked, ms, ctx) -> Values:
    """N: documents retrieved, after ``-M`` and ``-J``. The summary is the sum (``m_num_ret.c``)."""
    return {ms[0]: r.num_ret.astype(np.float64)}


@family("num_rel", aggregate="sum", value_type="long", complete_total=True)
def num_rel(r: Ranked, ms, ctx) -> Values:
    """R: judged documents with label >= ``-l`` (retrieved or not). The summary is the sum.

    With ``-c`` the summary is instead the number of qrels lines with a label
    > 0 over every judged query, whatever ``-l``, ``-M``, ``-J`` or ``-Z``
    (per-query values follow ``-l``): both generations' ``te_calc_avg_num_rel``
    go back to the qrels there (``m_num_rel.c``)."""
    return {ms[0]: r.num_rel.astype(np.float64)}


@family("num_rel_ret", aggregate="sum", value_type="long")
def num_rel_ret(r: Ranked, ms, ctx) -> Values:
    """Relevant documents retrieved. The summary is the sum (``m_num_rel_ret.c``)."""
    return {ms[0]: r.num_rel_ret}


@family("num_nonrel_judged_ret", aggregate="sum", value_type="long")
def num_nonrel_judged_ret(r: Ranked, ms, ctx) -> Values:
    """Judged non-relevant documents retrieved (0 <= label < ``-l``): N - unpooled - unjudged - relevant.

    The summary is the sum (``m_num_nonrel_judged_ret.c``)."""
    return {ms[0]: r.count((r.code >= 0) & (r.code < r.level))}


# ------------------------------------------------------- average precision
def _precisions(r: Ranked) -> tuple[np.ndarray, np.ndarray]:
    """(relevant row indices, precision at each: its count among relevant / its rank)."""
    rows, d = r.rel_rows()
    return rows, d / r.rank[rows].astype(np.float64)


def average_precision(r: Ranked, k: int | None = None) -> np.ndarray:
    """Per query, the sum of the precisions at each relevant document retrieved (in the top ``k`` when given) over
    the relevant documents: ``map``, ``gm_map`` and ``map_cut.k``, and ``prefs``' ``map_avgjg`` per judgment group."""
    rows, prec = _precisions(r)
    if k is not None:
        keep = r.rank[rows] <= k
        rows, prec = rows[keep], prec[keep]
    s = r.sum(prec, rows)
    return np.where(r.num_rel > 0, divide(s, r.num_rel), 0.0)


@family("map", label="MAP")
def map_(r: Ranked, ms, ctx) -> Values:
    """Average precision: (1/R) * sum over relevant retrieved documents of P@(their rank); 0 when R = 0.

    Relevant documents not retrieved contribute 0. Buckley & Voorhees,
    'Retrieval System Evaluation', TREC: Experiment and Evaluation in IR,
    MIT Press 2005 (``m_map.c``)."""
    return {ms[0]: average_precision(r)}


@family("gm_map", aggregate="gm", per_query=False)
def gm_map(r: Ranked, ms, ctx) -> Values:
    """Geometric mean AP. Per query the value kept is log(max(AP, 0.00001)); the summary is exp(their mean).

    With ``-c`` a query missing from the run counts as log(0.00001). Not
    printed per query (``m_gm_map.c``); Robertson, 'On GMAP', CIKM 2006."""
    return {ms[0]: c_log(np.maximum(average_precision(r), MIN_GEO_MEAN))}


@family("map_cut", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS, label="MAP")
def map_cut(r: Ranked, ms, ctx) -> Values:
    """AP@k: (1/R) * sum over relevant documents at ranks <= k of P@rank; 0 when R = 0 (``m_map_cut.c``)."""
    return {m: average_precision(r, m.cutoff) for m in ms}


# --------------------------------------------------------------- precision
@family("P", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS)
def precision(r: Ranked, ms, ctx) -> Values:
    """P@k: relevant documents among the first k / k, k fixed even when N < k (``m_P.c``)."""
    return {m: _cut_count(r, r.rel, m.cutoff) / float(m.cutoff) for m in ms}


@family("relative_P", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS)
def relative_P(r: Ranked, ms, ctx) -> Values:
    """Relevant among the first k / min(k, R): P@k up to R, recall after; 0 when R = 0 (``m_rel_P.c``)."""
    R = r.num_rel
    return {m: np.where(R > 0, divide(_cut_count(r, r.rel, m.cutoff), np.minimum(m.cutoff, R)), 0.0) for m in ms}


@family("recall", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS, label="R")
def recall(r: Ranked, ms, ctx) -> Values:
    """R@k: relevant documents among the first k / R; 0 when R = 0 (``m_recall.c``)."""
    R = r.num_rel
    return {m: np.where(R > 0, divide(_cut_count(r, r.rel, m.cutoff), R), 0.0) for m in ms}


@family("success", params=Params.LONG_CUTOFFS, defaults=(1, 5, 10), label="Success")
def success(r: Ranked, ms, ctx) -> Values:
    """Success@k: 1 if a relevant document is among the first k, else 0 (Tomlinson; ``m_success.c``)."""
    return {m: (_cut_count(r, r.rel, m.cutoff) > 0).astype(np.float64) for m in ms}


@family("Rprec", label="R-prec")
def Rprec(r: Ranked, ms, ctx) -> Values:
    """R-precision: relevant among the first min(N, R) / R; 0 when that minimum is 0.

    The point where precision equals recall (Buckley & Voorhees 2005; ``m_Rprec.c``)."""
    R, N = r.num_rel, r.num_ret
    look = np.minimum(N, R)
    hits = r.count(r.rel & (r.rank <= look[r.q]))
    return {ms[0]: np.where(look > 0, divide(hits, R), 0.0)}


@family("recip_rank", label="RR")
def recip_rank(r: Ranked, ms, ctx) -> Values:
    """Reciprocal rank: 1 / rank of the first relevant document; 0 if none is retrieved (``m_recip_rank.c``)."""
    rows, d = r.rel_rows()
    first = rows[d == 1]
    out = np.zeros(r.nq)
    out[r.q[first]] = 1.0 / r.rank[first].astype(np.float64)
    return {ms[0]: out}


def _rprec_cutoffs(pcts: np.ndarray, R: np.ndarray, ctx: Context) -> np.ndarray:
    """trec_eval's ``(long) (pct * R + 0.9)``, in doubles."""
    return np.trunc(pcts[None, :] * R[:, None].astype(np.float64) + 0.9).astype(np.int64)


@family("Rprec_mult", params=Params.DOUBLE_CUTOFFS, defaults=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0))
def Rprec_mult(r: Ranked, ms, ctx) -> Values:
    """Precision at multiples of R: P@c with c = floor(x * R + 0.9) for each multiple x.

    When c > N the missing documents count as non-relevant (relevant
    retrieved / c); c = 0 gives 0 (``m_Rprec_mult.c``)."""
    return rprec_mult(r, ms, ctx)


def rprec_mult(r: Ranked, ms, ctx) -> Values:
    """``Rprec_mult``'s values (see its family), shared with ``prefs``' ``Rprec_mult_avgjg``."""
    rel = r.rel
    pcts = np.array([_param(ctx, m.cutoff) for m in ms])
    cuts = _rprec_cutoffs(pcts, r.num_rel, ctx)
    N = r.num_ret
    nrr = r.count(rel)
    out = {}
    for j, m in enumerate(ms):
        c = cuts[:, j]
        hits = r.count(rel & (r.rank <= c[r.q]))
        inside = divide(hits, c)
        out[m] = np.where(c > N, divide(nrr, c), np.where(c > 0, inside, 0.0))
    return out


# --------------------------------------------- interpolated precision
def _recall_cutoffs(pcts: np.ndarray, R: np.ndarray, ctx: Context) -> np.ndarray:
    """Relevant-document counts for recall points: lround(pct * R) in trec_eval 10, (long)(pct * R + 0.9) in 9."""
    if ctx.version == 9:
        return _rprec_cutoffs(pcts, R, ctx)
    x = pcts[None, :] * R[:, None].astype(np.float64)
    t = np.trunc(x)
    return (t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0.0)).astype(np.int64)


def _interpolated(r: Ranked, cuts: np.ndarray) -> np.ndarray:
    """trec_eval's interpolated-precision walk (``m_iprec_at_recall.c``, ``m_11pt_avg.c``), all queries at once.

    For a count c of relevant documents, 1 <= c <= relevant retrieved, the
    value is max over ranks >= the c-th relevant document's of P@rank. trec_eval
    walks the cutoffs from the last one while walking the ranking backwards:
    trailing cutoffs above the relevant retrieved count are 0; a cutoff is
    assigned when the walk reaches its count; a cutoff the walk can no longer
    reach (0, or above the previous one) and all before it get the precision
    at recall 0 (the best P@rank, or relevant retrieved / N when none).
    Returns (queries, cutoffs) values in the cutoffs' own order.
    """
    nq, k = cuts.shape
    rows, prec = _precisions(r)
    q_rel = r.q[rows]
    # best precision from each relevant document down: a reversed running maximum per query
    smax = pd.Series(prec[::-1]).groupby(q_rel[::-1]).cummax().to_numpy()[::-1] if len(rows) else prec
    nrr = np.bincount(q_rel, minlength=nq)
    rel_start = np.concatenate(([0], np.cumsum(nrr)[:-1]))
    final = np.where(
        nrr > 0, smax[np.minimum(rel_start, max(len(smax) - 1, 0))] if len(smax) else 0.0, divide(nrr, r.num_ret)
    )
    out = np.zeros((nq, k))
    ptr_live = np.ones(nq, dtype=bool)  # the walk is still assigning
    skipping = np.ones(nq, dtype=bool)  # still in the leading skip of cutoffs above relevant retrieved
    level = nrr.copy()
    for p in range(k - 1, -1, -1):
        c = cuts[:, p]
        skip = skipping & (c > nrr)
        skipping &= skip
        todo = ~skip
        hit = todo & ptr_live & (c >= 1) & (c <= level)
        idx = np.minimum(rel_start + c - 1, max(len(smax) - 1, 0))
        if len(smax):
            out[hit, p] = smax[idx[hit]]
        level = np.where(hit, c, level)
        ptr_live &= ~(todo & ~hit)
        stuck = todo & ~hit
        out[stuck, p] = final[stuck]
    return out


@family("iprec_at_recall", params=Params.DOUBLE_CUTOFFS, defaults=RECALL_POINTS)
def iprec_at_recall(r: Ranked, ms, ctx) -> Values:
    """Interpolated precision at recall x: max P@rank over ranks at or after the c-th relevant document.

    c = round(x * R) in trec_eval 10 (lround, halves away from zero);
    trec_eval 9 used floor(x * R + 0.9), and ``--trec-eval 9`` does too.
    The walk's edge cases are in ``_interpolated``. The standard 11-point
    recall-precision curve (``m_iprec_at_recall.c``)."""
    pcts = np.array([_param(ctx, m.cutoff) for m in ms])
    vals = _interpolated(r, _recall_cutoffs(pcts, r.num_rel, ctx))
    return {m: vals[:, j] for j, m in enumerate(ms)}


def _check_11pt(m: Measure) -> str | None:
    return "11pt_avg needs at least one recall point" if not m.param_values() else None


@family("11pt_avg", params=Params.DOUBLE_PARAMS, defaults=RECALL_POINTS, check=_check_11pt)
def pt11_avg(r: Ranked, ms, ctx) -> Values:
    """Mean interpolated precision over the given recall points (default 0, 0.1, ..., 1), in the given order.

    Same cutoffs and walk as iprec_at_recall; the sum runs from the last
    point to the first, as trec_eval adds them (``m_11pt_avg.c``)."""
    out = {}
    for m in ms:
        pts = np.array([_param(ctx, x) for x in m.param_values()])
        vals = _interpolated(r, _recall_cutoffs(pts, r.num_rel, ctx))
        s = np.zeros(r.nq)
        for p in range(len(pts) - 1, -1, -1):
            s = s + vals[:, p]
        out[m] = s / float(len(pts))
    return out


@family("yaap")
def yaap(r: Ranked, ms, ctx) -> Values:
    """Yet another average precision: log((1 + S) / (1 + R - S)), S = sum over relevant retrieved of P@(its rank).

    S is AP's sum before dividing by R (added in rank order); the natural
    logarithm of the C library. 0 when R = 0 and nothing is retrieved
    relevant; negative when S < R / 2. Robertson, 'On Smoothing Average
    Precision', ECIR 2012 (``m_yaap.c``; in 9.0.4 too, in no nickname)."""
    rows, prec = _precisions(r)
    s = r.sum(prec, rows)
    return {ms[0]: c_log((1.0 + s) / (1.0 + r.num_rel.astype(np.float64) - s))}


# --------------------------------------------------- incomplete judgments
def _judged_nonrel(r: Ranked) -> np.ndarray:
    return (r.code >= 0) & (r.code < r.level)


def _bpref(r: Ranked) -> np.ndarray:
    rows, _ = r.rel_rows()
    R = r.num_rel
    num_nonrel = r.rel_levels[:, r.levels < max(r.level, 0)].sum(axis=1)
    nonrel_before = r.running_count(_judged_nonrel(r))[rows]
    qr = r.q[rows]
    frac = divide(np.minimum(nonrel_before, R[qr]), np.minimum(num_nonrel[qr], R[qr]))
    term = np.where(nonrel_before > 0, 1.0 - frac, 1.0)
    s = r.sum(term, rows)
    return np.where(R > 0, divide(s, R), s)


@family("bpref")
def bpref(r: Ranked, ms, ctx) -> Values:
    """bpref = (1/R) * sum over relevant retrieved d of (1 - min(n_d, R) / min(NR, R)).

    n_d = judged non-relevant documents ranked above d, NR = judged
    non-relevant documents for the query; unpooled and unjudged documents are
    skipped; a term is 1 when n_d = 0. Buckley & Voorhees, 'Retrieval
    Evaluation with Incomplete Information', SIGIR 2004 (``m_bpref.c``)."""
    return {ms[0]: _bpref(r)}


@family("gm_bpref", aggregate="gm", per_query=False)
def gm_bpref(r: Ranked, ms, ctx) -> Values:
    """bpref averaged geometrically: per query log(max(bpref, 0.00001)), summary exp(mean) (``m_gm_bpref.c``)."""
    return {ms[0]: c_log(np.maximum(_bpref(r), MIN_GEO_MEAN))}


@family("infAP")
def infAP(r: Ranked, ms, ctx) -> Values:
    """Inferred AP (Yilmaz & Aslam, CIKM 2006), for judgments sampled from the pool.

    Over relevant retrieved documents at 0-based position j, with r, n, u the
    relevant, judged non-relevant and unjudged (label < 0 in the qrels)
    documents above it: 1 if j = 0, else 1/(j+1) + (j/(j+1)) * ((r + n + u)/j)
    * ((r + 1e-5)/(r + n + 2e-5)); summed and divided by R. Unpooled
    documents are skipped (``m_infap.c``)."""
    rows, d = r.rel_rows()
    nonrel = r.running_count(_judged_nonrel(r))[rows]
    unj = r.running_count(r.code == UNJUDGED)[rows]
    fj = (r.rank[rows] - 1).astype(np.float64)
    rel_before = (d - 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((d - 1 + nonrel + unj) / fj) * (
            (rel_before + INFAP_EPSILON) / ((d - 1 + nonrel) + 2 * INFAP_EPSILON)
        )
    term = np.where(fj == 0, 1.0, term)
    s = r.sum(term, rows)
    R = r.num_rel
    return {ms[0]: np.where(R > 0, divide(s, R), s)}


# ------------------------------------------------------------ set measures
@family("set_P")
def set_P(r: Ranked, ms, ctx) -> Values:
    """Set precision: relevant retrieved / N; 0 when N = 0 (``m_set_P.c``)."""
    N = r.num_ret
    return {ms[0]: np.where(N > 0, divide(r.num_rel_ret, N), 0.0)}


@family("set_relative_P")
def set_relative_P(r: Ranked, ms, ctx) -> Values:
    """Relevant retrieved / min(N, R); 0 when N or R is 0 (``m_set_rel_P.c``)."""
    N, R = r.num_ret, r.num_rel
    return {ms[0]: np.where((N > 0) & (R > 0), divide(r.num_rel_ret, np.minimum(N, R)), 0.0)}


@family("set_recall")
def set_recall(r: Ranked, ms, ctx) -> Values:
    """Set recall: relevant retrieved / R; 0 when R = 0 (``m_set_recall.c``)."""
    R = r.num_rel
    return {ms[0]: np.where(R > 0, divide(r.num_rel_ret, R), 0.0)}


@family("set_map")
def set_map(r: Ranked, ms, ctx) -> Values:
    """Unranked AP: relevant retrieved^2 / (N * R), set precision times set recall; 0 when N or R is 0 (``m_set_map.c``)."""
    N, R, nrr = r.num_ret.astype(np.float64), r.num_rel.astype(np.float64), r.num_rel_ret
    return {ms[0]: np.where((N > 0) & (R > 0), divide(nrr * nrr, N * R), 0.0)}


def _check_one(m: Measure) -> str | None:
    return f"{m.family} takes one parameter, got {len(m.params)}" if m.params and len(m.params) != 1 else None


@family("set_F", params=Params.DOUBLE_PARAMS, defaults=(1.0,), check=_check_one)
def set_F(r: Ranked, ms, ctx) -> Values:
    """F measure of the retrieved set: (x + 1) * P * R' / (x * P + R'), P = set precision, R' = set recall.

    x (default 1) weighs recall against precision; 0 when nothing relevant
    is retrieved. Van Rijsbergen's E, 1979 (``m_set_F.c``)."""
    out = {}
    nrr = r.num_rel_ret
    P = divide(nrr, r.num_ret)
    Rc = divide(nrr, r.num_rel)
    for m in ms:
        x = _param(ctx, m.param_values()[0])
        out[m] = np.where(nrr > 0, divide((x + 1.0) * P * Rc, x * P + Rc), 0.0)
    return out


def _check_utility(m: Measure) -> str | None:
    if m.params and len(m.params) != 4:
        return (
            f"utility takes 4 coefficients (relevant retrieved, non-relevant retrieved, relevant missed, "
            f"non-relevant missed), got {len(m.params)}"
        )
    return None


@family(
    "utility",
    params=Params.DOUBLE_PARAMS,
    defaults=(1.0, -1.0, 0.0, 0.0),
    check=_check_utility,
    placeholder="zero_if_bare",
)
def utility(r: Ranked, ms, ctx) -> Values:
    """Set utility p1*a + p2*b + p3*c + p4*d: a relevant retrieved, b non-relevant retrieved,
    c relevant not retrieved, d non-relevant not retrieved = (-N docs) + a - N - R.

    Default 1,-1,0,0; the summary is the mean (``m_utility.c``)."""
    out = {}
    nrr, N, R = r.num_rel_ret, r.num_ret.astype(np.float64), r.num_rel.astype(np.float64)
    d = float(ctx.num_docs) + nrr - N - R
    for m in ms:
        p = m.param_values()
        out[m] = p[0] * nrr + p[1] * (N - nrr) + p[2] * (R - nrr) + p[3] * d
    return out


# ---------------------------------------------------------------- gains
def _pairs(m: Measure) -> tuple[tuple[int, float], ...]:
    return tuple((int(k), float(v)) for k, v in m.params if k != "p")


def _table(m: Measure, ctx: Context, twostage_gain: bool) -> GainTable:
    pairs = tuple((lvl, _param(ctx, g)) for lvl, g in _pairs(m))
    if twostage_gain and ctx.gain.kind != "linear":
        return GainTable(pairs=(), gain=ctx.gain, trec_sort=False)
    return GainTable(pairs=pairs)


def _gain_rows(r: Ranked, table: GainTable) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows whose gain is not 0, their gains)."""
    g = table.of_labels(r.code)
    rows = np.flatnonzero(g != 0)
    return rows, g[rows]


def _dcg_terms(r: Ranked, rows: np.ndarray, gains: np.ndarray, discount: Discount) -> np.ndarray:
    return gains / discount.divisors(r.rank[rows])


def _ideal_terms(r: Ranked, table: GainTable, discount: Discount):
    ide = ideal(r.rel_levels, r.levels, r.num_rel_levels, table)
    return ide, ide.gain / discount.divisors(ide.pos + 1)


def _check_gain_pairs(m: Measure) -> str | None:
    for k, _ in m.params:
        if k == "p" and m.family.startswith("rbp"):
            continue
        if not isinstance(k, int) or k < 0:
            return (
                f"{m.family}: {k!r}= is not a relevance level (a non-negative integer); "
                "trec_eval 9 reads it as level 0 and trec_eval 10 ignores it, twostage refuses it"
            )
    return None


@family("ndcg", params=Params.PAIRS, gain=True, binary=False, check=_check_gain_pairs, label="nDCG")
def ndcg(r: Ranked, ms, ctx) -> Values:
    """nDCG over the whole ranking: DCG / IDCG, DCG = sum over retrieved d of gain(d) / log2(rank + 1).

    gain(label) = label unless given as ``ndcg.L=G`` (or twostage's --gain);
    IDCG is the DCG of the ideal ranking of every judged document with gain
    > 0 (see ``gains.py``); 0 when IDCG = 0. Documents with gain 0
    contribute nothing; ``-l`` does not apply. Järvelin & Kekäläinen, ACM
    TOIS 20(4), 2002 (``m_ndcg.c``)."""
    out = {}
    for m in ms:
        dcg, idcg = _dcg_and_ideal(r, m, ctx)
        out[m] = np.where(idcg > 0, divide(dcg, idcg), 0.0)
    return out


def _dcg_and_ideal(r: Ranked, m: Measure, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Per query (DCG of the whole ranking, DCG of the ideal ranking): ``te_calc_ndcg``'s two sums.

    DCG adds every retrieved document whose gain is not 0 (negative gains
    too) in rank order; the ideal adds the judged documents with gain > 0 by
    decreasing gain, position by position."""
    table = _table(m, ctx, twostage_gain=True)
    if not m.params:
        ctx.gain.check_covers(r.levels[r.rel_levels.nonzero()[1]], "qrels")
    rows, g = _gain_rows(r, table)
    dcg = r.sum(_dcg_terms(r, rows, g, ctx.discount), rows)
    ide, terms = _ideal_terms(r, table, ctx.discount)
    return dcg, np.bincount(ide.q, weights=terms, minlength=r.nq)


@family("dcg", params=Params.PAIRS, gain=True, binary=False, since=10, check=_check_gain_pairs, label="DCG")
def dcg(r: Ranked, ms, ctx) -> Values:
    """DCG over the whole ranking, not normalised: sum over retrieved d with gain(d) != 0 of gain(d) / log2(rank + 1).

    Gains as for ndcg (the label unless ``dcg.L=G``; negative gains count);
    0 when nothing retrieved has a gain. ``-l`` does not apply. trec_eval 10
    computes it in ``te_calc_ndcg`` (``m_ndcg.c``) and prints the results' sum."""
    return {m: _dcg_and_ideal(r, m, ctx)[0] for m in ms}


@family("ideal_dcg", params=Params.PAIRS, gain=True, binary=False, since=10, check=_check_gain_pairs, ceiling=False)
def ideal_dcg(r: Ranked, ms, ctx) -> Values:
    """DCG of the ideal ranking: sum over positions i of the i-th largest gain g_i > 0 / log2(i + 1).

    The ideal ranking holds every judged document of the query with gain > 0,
    retrieved or not, by decreasing gain (as for ndcg's denominator); it
    depends on the qrels only, so the run just decides which queries count.
    0 when no judged document has a gain > 0. trec_eval 10 computes it in
    ``te_calc_ndcg`` (``m_ndcg.c``) and prints the ideal sum."""
    return {m: _dcg_and_ideal(r, m, ctx)[1] for m in ms}


@family("ndcg_cut", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS, gain=True, binary=False, label="nDCG")
def ndcg_cut(r: Ranked, ms, ctx) -> Values:
    """nDCG@k: DCG@k / IDCG@k with gain(label) = label (or twostage's --gain), discount log2(rank + 1).

    DCG@k sums over retrieved documents at ranks <= k with gain > 0; IDCG@k
    over the first k of the ideal ranking (every judged document with gain
    > 0, by decreasing gain, retrieved or not). When IDCG@k = 0 the value is
    DCG@k (0). ``-l`` does not apply. Järvelin & Kekäläinen, ACM TOIS 20(4),
    2002 (``m_ndcg_cut.c``)."""
    table = GainTable(gain=ctx.gain, trec_sort=ctx.gain.kind == "linear")
    ctx.gain.check_covers(r.levels[r.rel_levels.nonzero()[1]], "qrels")
    g = table.of_labels(r.code)
    rows = np.flatnonzero(g > 0)
    terms = _dcg_terms(r, rows, g[rows], ctx.discount)
    ide, iterms = _ideal_terms(r, table, ctx.discount)
    out = {}
    for m in ms:
        k = m.cutoff
        inside = r.rank[rows] <= k
        dcg = np.bincount(r.q[rows][inside], weights=terms[inside], minlength=r.nq)
        ii = ide.pos < k
        idcg = np.bincount(ide.q[ii], weights=iterms[ii], minlength=r.nq)
        out[m] = np.where(idcg > 0, divide(dcg, idcg), dcg)
    return out


def _prefix_at(
    q_rows: np.ndarray, key_rows: np.ndarray, cum: np.ndarray, q: np.ndarray, key: np.ndarray, big: int
) -> np.ndarray:
    """For each (q, key): cum at the last row of query q with key_rows <= key (0 if none)."""
    if not len(cum):
        return np.zeros(len(q))
    keys = q_rows.astype(np.int64) * big + key_rows
    at = np.searchsorted(keys, q.astype(np.int64) * big + key, side="right") - 1
    ok = (at >= 0) & (q_rows[np.maximum(at, 0)] == q)
    return np.where(ok, cum[np.maximum(at, 0)], 0.0)


@family("ndcg_rel", params=Params.PAIRS, binary=False, check=_check_gain_pairs)
def ndcg_rel(r: Ranked, ms, ctx) -> Values:
    """nDCG averaged over the relevant documents (gain > 0) of the ideal ranking.

    Each retrieved document with gain > 0 at rank i adds DCG@i / IDCG@min(i,
    n), n = documents with gain > 0 in the ideal ranking; each of those not
    retrieved adds DCG / IDCG of the whole ranking; the sum is divided by n
    (0 when the sum is not > 0). Gains as for ndcg (``m_ndcg_rel.c``)."""
    out = {}
    for m in ms:
        table = _table(m, ctx, twostage_gain=False)
        rows, g = _gain_rows(r, table)
        ide, iterms = _ideal_terms(r, table, Discount())
        big = int(max(r.rank.max(initial=0), ide.n.max(initial=0), 1)) + 2
        terms = g / log2_table(big)[r.rank[rows] + 1]
        cum = segment_cumsum(terms, r.q[rows])
        icum = segment_cumsum(iterms, ide.q)
        pos_rows = g > 0
        qp = r.q[rows][pos_rows]
        at_ideal = np.minimum(r.rank[rows][pos_rows], ide.n[qp])
        idcg_i = _prefix_at(ide.q, ide.pos + 1, icum, qp, at_ideal, big)
        s = np.bincount(qp, weights=divide(cum[pos_rows], idcg_i), minlength=r.nq)
        dcg = np.bincount(r.q[rows], weights=terms, minlength=r.nq)
        idcg = np.bincount(ide.q, weights=iterms, minlength=r.nq)
        missed = (ide.n - np.bincount(qp, minlength=r.nq)).astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf + -inf where IDCG is 0: np.where below keeps trec_eval's 0
            s = s + divide(missed * dcg, idcg)
        out[m] = np.where(s > 0, divide(s, ide.n), 0.0)
    return out


@family("Rndcg", params=Params.PAIRS, binary=False, check=_check_gain_pairs)
def Rndcg(r: Ranked, ms, ctx) -> Values:
    """nDCG averaged at the R-levels: the ideal-ranking positions where the gain level changes.

    With the ideal ranking's gains g_1..g_n > 0 (n documents with gain > 0)
    and g_{n+1} <= 0, each position p in 1..n with g_{p+1} != g_p (p = n
    always) adds DCG@min(p, N) / IDCG@p; when n + 1 < N one more point adds
    DCG@N / IDCG@n (unjudged documents have gain 0). The value is the mean of
    the points; 0 when R = 0 (``m_Rndcg.c``)."""
    out = {}
    big = int(max(r.rank.max(initial=0), 1)) + 2
    R, N = r.num_rel, r.num_ret
    for m in ms:
        table = _table(m, ctx, twostage_gain=False)
        rows, g = _gain_rows(r, table)
        terms = g / log2_table(big)[r.rank[rows] + 1]
        cum = segment_cumsum(terms, r.q[rows])
        ide, iterms = _ideal_terms(r, table, Discount())
        icum = segment_cumsum(iterms, ide.q)
        # a point after ideal position p (1-based) where the next gain differs, and after the last one
        nxt_same = np.zeros(len(ide.q), dtype=bool)
        if len(ide.q) > 1:
            nxt_same[:-1] = (ide.q[1:] == ide.q[:-1]) & (ide.gain[1:] == ide.gain[:-1])
        pts = np.flatnonzero(~nxt_same)
        pq, pp = ide.q[pts], ide.pos[pts] + 1
        big2 = max(big, int(ide.n.max(initial=0)) + 2)
        dcg_p = _prefix_at(r.q[rows], r.rank[rows], cum, pq, np.minimum(pp, N[pq]), big2)
        vals = divide(dcg_p, icum[pts])
        extra_q = np.flatnonzero((ide.n > 0) & (ide.n + 1 < N))
        dcg_all = np.bincount(r.q[rows], weights=terms, minlength=r.nq)
        idcg_all = np.bincount(ide.q, weights=iterms, minlength=r.nq)
        allq = np.concatenate([pq, extra_q])
        allv = np.concatenate([vals, divide(dcg_all[extra_q], idcg_all[extra_q])])
        order = np.argsort(allq, kind="stable")  # per query: R-levels in order, then the extra point
        s = np.bincount(allq[order], weights=allv[order], minlength=r.nq)
        cnt = np.bincount(allq, minlength=r.nq)
        out[m] = np.where(R > 0, divide(s, cnt), 0.0)
    return out


@family("G", params=Params.PAIRS, binary=False, check=_check_gain_pairs)
def G(r: Ranked, ms, ctx) -> Values:
    """Normalized gain G (experimental, trec_eval 2008): sum of gain(d) / log2(2 + C_i - S_i) / sum of ideal gains.

    For the document at 0-based position i, S_i is the sum of the results'
    gains up to and including i, and C_i the sum over positions t <= i of
    max(ideal gain at t, 1), the ideal gain being 0 past the ideal ranking.
    Gains as for ndcg; 0 when the ideal gains sum to 0 (``m_G.c``)."""
    out = {}
    for m in ms:
        table = _table(m, ctx, twostage_gain=False)
        rows, g = _gain_rows(r, table)
        ide = ideal(r.rel_levels, r.levels, r.num_rel_levels, table)
        sum_results = segment_cumsum(g, r.q[rows])
        sum_cost = _ideal_cost_at(r, ide, rows)
        contrib = g / c_log2((2.0 + sum_cost) - sum_results)
        rg = np.bincount(r.q[rows], weights=contrib, minlength=r.nq)
        sum_ideal = np.bincount(ide.q, weights=ide.gain, minlength=r.nq)
        out[m] = np.where(sum_ideal > 0, divide(rg, sum_ideal), 0.0)
    return out


def _ideal_cost_at(r: Ranked, ide, rows: np.ndarray) -> np.ndarray:
    """G's running cost sum_{t <= i} max(ideal gain at t, 1) at each row's position, added position by position."""
    out = np.zeros(len(rows))
    if not len(rows):
        return out
    pos = r.rank[rows] - 1
    qs = np.unique(r.q[rows])
    istart = np.concatenate(([0], np.cumsum(ide.n)[:-1]))
    cost = np.zeros(len(qs))
    by_pos = np.argsort(pos, kind="stable")
    pos_sorted = pos[by_pos]
    slot = np.searchsorted(qs, r.q[rows])
    lo = 0
    for i in range(int(pos.max()) + 1):
        inside = i < ide.n[qs]
        ig = (
            np.where(inside, ide.gain[np.minimum(istart[qs] + i, max(len(ide.gain) - 1, 0))], 0.0)
            if len(ide.gain)
            else np.zeros(len(qs))
        )
        cost = cost + np.where(inside & (ig >= 1.0), ig, 1.0)
        hi = np.searchsorted(pos_sorted, i, side="right")
        take = by_pos[lo:hi]
        out[take] = cost[slot[take]]
        lo = hi
    return out


@family("binG")
def binG(r: Ranked, ms, ctx) -> Values:
    """Binary G: (1/R) * sum over relevant retrieved d of 1 / log2(2 + non-relevant documents above d).

    Non-relevant includes unpooled and unjudged; 0 when nothing relevant is
    retrieved (``m_binG.c``)."""
    rows, d = r.rel_rows()
    arg = 2 + r.rank[rows] - d
    s = r.sum(1.0 / log2_table(int(arg.max(initial=2)))[arg], rows)
    return {ms[0]: np.where(r.num_rel_ret > 0, divide(s, r.num_rel), 0.0)}


# -------------------------------------------------------- rank-biased precision
def _rbp_p(m: Measure, ctx: Context) -> float:
    return _param(ctx, dict(m.params).get("p", 0.9))


def _check_rbp(m: Measure) -> str | None:
    if m.family == "rbp_resid" and any(k != "p" for k, _ in m.params):
        return "rbp_resid takes only the persistence, e.g. rbp_resid.p=0.8"
    err = _check_gain_pairs(m)
    if err:
        return err
    p = dict(m.params).get("p", 0.9)
    return None if 0 < p < 1 else f"{m.family}: persistence p={p:g} must lie strictly between 0 and 1"


def _powers(p: float, n: int) -> np.ndarray:
    """1, p, p*p, ... multiplied one step at a time as trec_eval does (n + 1 values)."""
    return np.concatenate(([1.0], np.cumprod(np.full(n, p)))) if n else np.array([1.0])


@family("rbp", params=Params.PAIRS, binary=False, since=10, check=_check_rbp)
def rbp(r: Ranked, ms, ctx) -> Values:
    """Rank-biased precision (1 - p) * sum over retrieved d of gain(d) * p^(rank - 1), p = 0.9 unless ``rbp.p=X``.

    Gains as for ndcg (``rbp.2=1`` etc.), rescaled to (g - lo)/(hi - lo) when
    any lies outside [0, 1], with lo = min(0, the query's gains) and hi =
    max(0, the query's gains): the range always spans 0 (graded labels 0..3
    become 0, 1/3, 2/3, 1; a single gain 3 becomes 1; gains -2, -1 become 0,
    0.5). That is trec_eval 10's output: its ``m_rbp.c`` starts min and max
    uninitialised, and the binary built from it behaves as if both start at 0
    (checked against it, all gains equal included, where a true min/max is
    0/0). Moffat & Zobel, ACM TOIS 27(1), 2008 (``m_rbp.c``, trec_eval 10)."""
    out = {}
    big = int(r.rank.max(initial=0))
    for m in ms:
        p = _rbp_p(m, ctx)
        table = GainTable(pairs=_pairs(m))
        g = np.zeros(len(r.code))
        labelled = r.code >= 0
        raw = table.of_labels(r.code)
        for nrl in np.unique(r.num_rel_levels):
            gains = table.bounds(int(nrl))
            if not gains:
                continue
            lo, hi = min(0.0, *gains), max(0.0, *gains)
            sel = labelled & (r.num_rel_levels[r.q] == nrl)
            g[sel] = (raw[sel] - lo) / (hi - lo) if (lo < 0 or hi > 1) else raw[sel]
        rows = np.flatnonzero(g != 0)
        pw = _powers(p, big)
        s = r.sum(g[rows] * pw[r.rank[rows] - 1], rows)
        out[m] = (1.0 - p) * s
    return out


def _position_sum(r: Ranked, weight: np.ndarray, select) -> tuple[np.ndarray, np.ndarray]:
    """Per query, sum of weight[i] over positions i whose code satisfies ``select``, in rank order; and the count."""
    start, codes = r.positions()
    n = r.num_ret
    order = np.argsort(-n, kind="stable")
    ns = n[order]
    acc = np.zeros(r.nq)
    cnt = np.zeros(r.nq, dtype=np.int64)
    for i in range(int(n.max(initial=0))):
        live = order[: np.searchsorted(-ns, -i, side="left")]
        hit = select(codes[start[live] + i])
        acc[live] = acc[live] + np.where(hit, weight[i], 0.0)
        cnt[live] += hit
    return acc, cnt


@family(
    "rbp_resid",
    params=Params.PAIRS,
    binary=False,
    since=10,
    check=_check_rbp,
    placeholder="zero_if_bare",
    ceiling=False,
)
def rbp_resid(r: Ranked, ms, ctx) -> Values:
    """RBP's residual: p^N + (1 - p) * sum over unjudged retrieved d of p^(rank - 1), when any is unjudged, else 0.

    Unjudged means not in the qrels or labelled < 0: the most RBP could rise
    if they were all relevant (Moffat & Zobel 2008; ``m_rbp_resid.c``)."""
    out = {}
    for m in ms:
        p = _rbp_p(m, ctx)
        pw = _powers(p, int(r.num_ret.max(initial=0)))
        s, cnt = _position_sum(r, pw, lambda c: c < 0)
        out[m] = np.where(cnt > 0, pw[r.num_ret] + (1.0 - p) * s, 0.0)
    return out


@family(
    "unj", params=Params.LONG_CUTOFFS, defaults=(5, 10, 20), binary=False, since=10, placeholder="zero", ceiling=False
)
def unj(r: Ranked, ms, ctx) -> Values:
    """Unjudged@k: documents among the first k that are not in the qrels or labelled < 0, divided by k.

    Past N the missing documents count as judged; a red flag for a run the
    judgments do not cover (Soboroff 2023, ``m_unjudged.c``, trec_eval 10)."""
    judged = r.code >= 0
    return {m: (np.minimum(m.cutoff, r.num_ret) - _cut_count(r, judged, m.cutoff)) / float(m.cutoff) for m in ms}


def _check_relstring(m: Measure) -> str | None:
    if m.params and (len(m.params) != 1 or m.params[0] < 0 or not float(m.params[0]).is_integer()):
        return "relstring takes one length, a non-negative integer (e.g. relstring.20)"
    return None


@family(
    "relstring",
    params=Params.DOUBLE_PARAMS,
    defaults=(10.0,),
    aggregate="none",
    value_type="string",
    binary=False,
    check=_check_relstring,
    placeholder="clear_if_bare",
)
def relstring(r: Ranked, ms, ctx) -> Values:
    """The labels of the first n retrieved documents (default 10) as a string, per query only.

    A digit for labels 0-9, '>' above 9, '-' for a document not in the qrels,
    '.' for one labelled < 0 (pooled, unjudged) (``m_relstring.c``)."""
    start, codes = r.positions()
    out = {}
    for m in ms:
        n = int(m.param_values()[0])
        ln = np.minimum(n, r.num_ret)
        strings = []
        for s0, length in zip(start.tolist(), ln.tolist()):
            strings.append("".join(_rel_char(c) for c in codes[s0 : s0 + length].tolist()))
        out[m] = np.array(strings, dtype=object)
    return out


def _rel_char(c: int) -> str:
    if c > 9:
        return ">"
    if c >= 0:
        return chr(48 + c)
    return "-" if c == NONPOOL else "." if c == UNJUDGED else "<"


# ------------------------------------------------------------ judged@k
@family(
    "judged",
    params=Params.LONG_CUTOFFS,
    defaults=(5, 10, 20, 100),
    binary=False,
    since=0,
    label="judged",
    ceiling=False,
)
def judged(r: Ranked, ms, ctx) -> Values:
    """Judged@k (twostage; not a trec_eval measure): of the first min(k, N) documents in trec_eval's order,
    the fraction with a judgment (a qrels label >= 0); 0 when N = 0. Averaged over queries.

    Pyserini's judged.k (``--judged-compat pyserini``) differs: it takes the
    first k *lines of the file* per query and pools all pairs of all run
    queries (a micro-average; any qrels line counts, even a negative label)."""
    if ctx.judged_compat == "pyserini":
        return _pyserini_judged(r, ms, ctx)
    judged_rows = r.code >= 0
    return {
        m: np.where(r.num_ret > 0, divide(_cut_count(r, judged_rows, m.cutoff), np.minimum(r.num_ret, m.cutoff)), 0.0)
        for m in ms
    }


def _pyserini_judged(r: Ranked, ms, ctx) -> Values:
    """Pyserini's judged.k: first k file lines per query, all run queries, pairs pooled (the pooled value rides along)."""
    from toolkit.data.ranking import within_group_rank
    from toolkit.data.records import DOC_ID, QUERY_ID

    frame = ctx.run.frame
    q = frame[QUERY_ID].to_numpy(dtype=object)
    codes, uniq = pd.factorize(q)
    order = np.argsort(codes, kind="stable")
    file_rank = np.empty(len(q), dtype=np.int64)
    file_rank[order] = within_group_rank(codes[order])
    pairs = pd.MultiIndex.from_frame(ctx.qrels.frame[[QUERY_ID, DOC_ID]])
    is_judged = pd.MultiIndex.from_frame(frame[[QUERY_ID, DOC_ID]]).isin(pairs)
    qpos = {qid: i for i, qid in enumerate(r.qids.tolist())}
    out = {}
    for m in ms:
        top = file_rank <= m.cutoff
        per = np.zeros(r.nq)
        num = np.bincount(codes[top], weights=is_judged[top], minlength=len(uniq))
        den = np.bincount(codes[top], minlength=len(uniq))
        for i, qid in enumerate(uniq):
            if qid in qpos and den[i]:
                per[qpos[qid]] = num[i] / den[i]
        out[m] = per
        out[("pooled", m)] = float(is_judged[top].sum() / max(top.sum(), 1))
    return out
