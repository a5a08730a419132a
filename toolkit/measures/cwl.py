"""ir_measures' cwl_eval provider: the C/W/L measures RBP, SDCG, INST, INSQ, NERR8-11 and BPM as cwl_eval 1.0.12
computes them (Azzopardi, Thomas & Moffat, SIGIR 2019), through ir_measures 0.4.3's provider.

What the provider does, and twostage with it:

- Ranking: score descending (Python floats: float64), ties in the run's own line order (a stable sort:
  ``as_sorted_namedtuple_iter``). The rank column is ignored.
- Every ranking is exactly ``MAX_N`` = 1000 positions long (``RankingMaker(max_n=1000)``): documents below
  rank 1000 are dropped, a shorter ranking is padded with documents of gain 0.
- Gains, per qrels line (``IrmQrelHandler``): the label, negative ones raised to 0, then either binary
  (``rel=R``: 1 when label >= R, else 0) or graded (``min_rel``/``max_rel``: clipped to [min_rel, max_rel]
  and scaled to (label - min_rel) / (max_rel - min_rel)). A document absent from the qrels has gain 0.
  ``min_rel`` must be below ``max_rel``.
- Each measure is a continuation vector c (c_i: the chance to go on from position i to i + 1); the weight of
  position i is W_i = prod_{j<i} c_j / sum_{t=1..1000} prod_{j<t} c_j, and the measure is the expected
  utility sum_i W_i * g_i (``CWLMetric._do_score``).
- A query of the qrels absent from the run is 0 in ir_measures; twostage's query set (``-c``) applies.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from toolkit.measures.ranked import Ranked
from toolkit.measures.registry import Measure, Named, Params, family

#: cwl_eval's ranking length as ir_measures asks for it (``max_n=1000``, cwl_eval's default).
MAX_N = 1000
SOURCE = "ir_measures: cwl_eval"
#: Queries whose positions are built as one dense block at a time (bounds memory: rows x MAX_N floats).
_BLOCK = 2048

_CUT = Named("cutoff", int, required=True, meaning="ranking cutoff threshold")
_MIN = Named("min_rel", int, 0, meaning="minimum relevance score")
_MAX = Named("max_rel", int, required=True, meaning="maximum relevance score")
_T = Named("T", float, 1.0, meaning="total desired gain (normalized)")


def _check(m: Measure) -> str | None:
    """What cwl_eval refuses: a cutoff below 1, min_rel not below max_rel (``IrmQrelHandler``'s assertion)."""
    if m.cutoff is not None and m.cutoff < 1:
        return f"{m.name}: the cutoff must be a positive integer"
    names = {p.name for p in m.spec.named}
    if "max_rel" in names and not m.value("min_rel") < m.value("max_rel"):
        return f"{m.name}: min_rel must be less than max_rel (cwl_eval's qrels handler)"
    if "p" in names and not 0 < m.value("p") <= 1:
        return f"{m.name}: the persistence p must lie in (0, 1]"
    return None


#: What every cwl_eval family shares: named parameters, graded gains, in every version, ties in the run's line
#: order, scores read as float64 (cwl_eval sorts by Python floats), cwl_eval's own refusals (``_check``)
_cwl_family = functools.partial(
    family,
    params=Params.NAMED,
    binary=False,
    since=0,
    source=SOURCE,
    check=_check,
    ties="input",
    score_precision="float64",
)


def _graded(r: Ranked, m: Measure) -> np.ndarray:
    """Per kept row, the graded gain: max(label, 0) clipped to [min_rel, max_rel], scaled into [0, 1]."""
    lo, hi = m.value("min_rel"), m.value("max_rel")
    label = np.maximum(r.labels(), 0).astype(np.float64)
    return (np.minimum(np.maximum(label, lo), hi) - lo) / (hi - lo)


def _rows(r: Ranked, gains: np.ndarray, width: int = MAX_N) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows within the first ``width`` positions with a gain > 0, their gains)."""
    rows = np.flatnonzero((gains > 0) & (r.rank <= width))
    return rows, gains[rows]


def _weights(c: np.ndarray) -> np.ndarray:
    """W from continuation probabilities c (last axis: positions), as ``CWLMetric.w_vector``."""
    head = np.cumprod(c[..., :-1], axis=-1)
    prod = np.concatenate([np.ones((*c.shape[:-1], 1)), head], axis=-1)
    w1 = 1.0 / np.sum(prod, axis=-1)
    return prod * w1[..., None]


def _by_position(r: Ranked, rows: np.ndarray, g: np.ndarray, c: list[float]) -> np.ndarray:
    """Expected utility when c depends on the position alone: sum over rows of W[rank - 1] * gain."""
    w = _weights(np.array(c, dtype=np.float64))
    return r.sum(w[r.rank[rows] - 1] * g, rows)


def _by_query(r: Ranked, rows: np.ndarray, g: np.ndarray, width: int, cvec) -> np.ndarray:
    """Expected utility when c depends on the gains: each query's ``width`` positions as one row of a block.

    ``cvec(G)`` gives the continuation probabilities of a block of gain rows; positions from ``width`` on are
    0 in c for the measures that use a width below ``MAX_N`` (their weight there is 0)."""
    out = np.zeros(r.nq)
    queries = np.unique(r.q[rows])
    slot = np.searchsorted(queries, r.q[rows])
    for lo in range(0, len(queries), _BLOCK):
        hi = min(lo + _BLOCK, len(queries))
        inside = (slot >= lo) & (slot < hi)
        gains = np.zeros((hi - lo, width))
        gains[slot[inside] - lo, r.rank[rows[inside]] - 1] = g[inside]
        w = _weights(cvec(gains))
        out[queries[lo:hi]] = np.sum(w * gains, axis=1)
    return out


@_cwl_family(
    "RBP",
    named=(
        Named("p", float, 0.8, meaning="persistence"),
        Named("rel", int, required=True, meaning="minimum relevance score to be considered relevant (inclusive)"),
    ),
)
def rbp(r: Ranked, ms, ctx) -> dict:
    """Rank-biased precision (Moffat & Zobel, TOIS 2008) as cwl_eval's RBP: binary gains (label >= rel),
    c_i = p at every position, so sum over ranks i <= 1000 of g_i * p^(i-1) * (1 - p) / (1 - p^1000).

    Not trec_eval 10's ``rbp`` (graded gains, p = 0.9 by default, no truncation): ``RBP(p=0.9,rel=1)`` and
    ``rbp.p=0.9`` differ on graded qrels. Ranking score descending (float64), ties in the run's line order."""
    out = {}
    for m in ms:
        p = float(m.value("p"))
        rows, g = _rows(r, (np.maximum(r.labels(), 0) >= m.value("rel")).astype(np.float64))
        out[m] = _by_position(r, rows, g, [p] * MAX_N)
    return out


@_cwl_family(
    "SDCG",
    named=(_CUT, Named("dcg", str, "log2", choices=("log2",), meaning="DCG formulation"), _MIN, _MAX),
    cutoff="required",
)
def sdcg(r: Ranked, ms, ctx) -> dict:
    """Scaled DCG@k as cwl_eval's NDCG-k: sum over ranks i <= k of g_i / log2(i + 1), divided by
    sum over i <= k of 1 / log2(i + 1): DCG against k documents of the highest grade, not the qrels' ideal.

    Graded gains in [0, 1] (min_rel, max_rel). c_i = log2(i + 1) / log2(i + 2) for i < k, 0 after (each
    log2 as ``math.log(x, 2)``). Ranking score descending (float64), ties in the run's line order."""
    out = {}
    for m in ms:
        k = m.cutoff
        c = [math.log(i + 1, 2.0) / math.log(i + 2, 2.0) if i < k else 0.0 for i in range(1, MAX_N + 1)]
        rows, g = _rows(r, _graded(r, m))
        out[m] = _by_position(r, rows, g, c)
    return out


def _inst_c(t: float):
    def cvec(gains: np.ndarray) -> np.ndarray:
        i = np.arange(gains.shape[1], dtype=np.float64)[None, :]
        ti = t - np.cumsum(gains, axis=1)
        return (((i + 1.0) + t + ti - 1.0) / ((i + 1.0) + t + ti)) ** 2.0

    return cvec


@_cwl_family(
    "INST",
    named=(_T, _MIN, _MAX),
)
def inst(r: Ranked, ms, ctx) -> dict:
    """INST (Moffat et al., ADCS 2015; Bailey et al., SIGIR 2015) as cwl_eval: c_i = ((i + T + T_i - 1) /
    (i + T + T_i))^2 with T_i = T - (the gain of ranks 1..i), over 1000 positions; expected utility
    sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        rows, g = _rows(r, _graded(r, m))
        out[m] = _by_query(r, rows, g, MAX_N, _inst_c(float(m.value("T"))))
    return out


@_cwl_family(
    "INSQ",
    named=(_T, _MIN, _MAX),
)
def insq(r: Ranked, ms, ctx) -> dict:
    """INSQ (Moffat, Scholer & Thomas, ADCS 2012) as cwl_eval: c_i = ((i + 2T - 1) / (i + 2T))^2 at rank i,
    over 1000 positions; expected utility sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        t = float(m.value("T"))
        c = [(((i + 1.0) + (2.0 * t) - 1.0) / ((i + 1.0) + (2.0 * t))) ** 2.0 for i in range(MAX_N)]
        rows, g = _rows(r, _graded(r, m))
        out[m] = _by_position(r, rows, g, c)
    return out


def _nerr_cut(k: int, scale):
    def cvec(gains: np.ndarray) -> np.ndarray:
        c = np.zeros_like(gains)
        n = min(k - 1, gains.shape[1])
        rank = np.arange(1, n + 1, dtype=np.float64)[None, :]
        c[:, :n] = scale(rank) * (1.0 - gains[:, :n])
        return c

    return cvec


@_cwl_family(
    "NERR8",
    named=(_CUT, _MIN, _MAX),
    cutoff="required",
)
def nerr8(r: Ranked, ms, ctx) -> dict:
    """NERR, equation (8) of Azzopardi, Moffat & Mackenzie (ICTIR 2021) as cwl_eval: c_i = 1 - g_i for
    ranks i < k, 0 from rank k on; expected utility sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        width = min(m.cutoff, MAX_N)
        rows, g = _rows(r, _graded(r, m), width)
        out[m] = _by_query(r, rows, g, width, _nerr_cut(m.cutoff, lambda rank: 1.0))
    return out


@_cwl_family(
    "NERR9",
    named=(_CUT, _MIN, _MAX),
    cutoff="required",
)
def nerr9(r: Ranked, ms, ctx) -> dict:
    """NERR, equation (9) of Azzopardi, Moffat & Mackenzie (ICTIR 2021) as cwl_eval: c_i = i / (i + 1) *
    (1 - g_i) for ranks i < k, 0 from rank k on; expected utility sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        width = min(m.cutoff, MAX_N)
        rows, g = _rows(r, _graded(r, m), width)
        out[m] = _by_query(r, rows, g, width, _nerr_cut(m.cutoff, lambda rank: 1.0 * rank / (rank + 1.0)))
    return out


@_cwl_family(
    "NERR10",
    named=(Named("p", float, 0.9, meaning="persistence"), _MIN, _MAX),
)
def nerr10(r: Ranked, ms, ctx) -> dict:
    """NERR, equation (10) of Azzopardi, Moffat & Mackenzie (ICTIR 2021) as cwl_eval: c_i = p * (1 - g_i) at
    every rank (RBP's patience), over 1000 positions; expected utility sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        p = float(m.value("p"))
        rows, g = _rows(r, _graded(r, m))
        out[m] = _by_query(r, rows, g, MAX_N, lambda gains, p=p: p * (1 - gains))
    return out


@_cwl_family(
    "NERR11",
    named=(_T, _MIN, _MAX),
)
def nerr11(r: Ranked, ms, ctx) -> dict:
    """NERR, equation (11) of Azzopardi, Moffat & Mackenzie (ICTIR 2021) as cwl_eval: c_i = ((i + 2T - 1) /
    (i + 2T))^2 * (1 - g_i) at rank i (INSQ's goal T), over 1000 positions; expected utility sum_i W_i * g_i.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        t = float(m.value("T"))

        def cvec(gains: np.ndarray, t: float = t) -> np.ndarray:
            rank = np.arange(1, gains.shape[1] + 1, dtype=np.float64)[None, :]
            return (((rank + (2.0 * t) - 1.0) / (rank + (2.0 * t))) ** 2.0) * (1.0 - gains)

        rows, g = _rows(r, _graded(r, m))
        out[m] = _by_query(r, rows, g, MAX_N, cvec)
    return out


@_cwl_family(
    "BPM",
    named=(_CUT, _T, _MIN, _MAX),
    cutoff="required",
)
def bpm(r: Ranked, ms, ctx) -> dict:
    """The static Bejeweled Player Model (Zhang et al., SIGIR 2017) as cwl_eval's BPM-Static: c_i = 1 while the
    gain of ranks 1..i is below T and i < K (K = the cutoff, every document costing 1), else 0; expected
    utility sum_i W_i * g_i, so the mean gain of the ranks the user reads.

    Graded gains in [0, 1] (min_rel, max_rel). Ranking score descending (float64), ties in the run's line
    order."""
    out = {}
    for m in ms:
        t, k = float(m.value("T")), m.cutoff
        width = min(k, MAX_N)

        def cvec(gains: np.ndarray, t: float = t, k: int = k) -> np.ndarray:
            rank = np.arange(1, gains.shape[1] + 1)[None, :]
            return ((np.cumsum(gains, axis=1) < t) & (rank < k)).astype(np.float64)

        rows, g = _rows(r, _graded(r, m), width)
        out[m] = _by_query(r, rows, g, width, cvec)
    return out
