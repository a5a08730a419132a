"""ir_measures' pyndeval provider: the TREC Web track's novelty and diversity measures as ndeval computes them
(``ndeval.c`` 4.5, through pyndeval 0.0.8 and ir_measures 0.4.3): ``alpha_DCG@k``, ``alpha_nDCG@k``,
``ERR_IA@k``, ``nERR_IA@k``, ``NRBP``, ``nNRBP``, ``AP_IA``, ``P_IA@k`` and ``StRecall@k``.

They read diversity qrels (``qid subtopic docid rel``, ``-R qrels_div``): a document is relevant to a subtopic
when its label for that subtopic is >= ``rel`` (default 1), a document absent from the qrels to none. Of a
query, S is the number of subtopics some document is relevant to (``actualSubtopics``); a subtopic nothing is
relevant to is ignored.

- Ranking: score descending (float64), ties by document id ascending (pyndeval sorts by ``(-score, doc_id)``
  and hands ndeval the ranks). The rank column of the file is ignored.
- Gain: the document at 0-based position i earns, for each subtopic j it is relevant to, (1 - alpha)^c_j,
  c_j being the documents above it relevant to j; its score s_i is the sum over j (in the order subtopics
  first appear in the qrels, as ndeval numbers them).
- The ideal ranking (for the ``n`` measures) is ndeval's greedy one over the query's judged documents: at each
  position the document with the largest score given those placed, ties to the largest document id.
- Cutoffs k <= 20 (ndeval's ``DEPTH``; pyndeval refuses more). ``alpha`` (alpha_DCG, alpha_nDCG, NRBP,
  nNRBP) and ``beta`` (NRBP, nNRBP) default to 0.5; the other measures use alpha = 0.5.
- ndeval's quirks, kept: alpha_DCG@1 and ERR_IA@1 are not divided by their "ideal ideal" (its loops start at
  position 1); nERR_IA@k and alpha_nDCG@k are 0 where the run's alpha_DCG@k is 0. One deliberate difference:
  for a query no document is relevant to, ndeval's nNRBP divides 0 by 0 (NaN); twostage gives 0, as for
  every other measure.
"""

from __future__ import annotations

import math
from types import MappingProxyType

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import arrow_of, take
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SUBTOPIC, Qrels
from toolkit.measures.ranked import Ranked, divide, powers
from toolkit.measures.registry import Measure, Named, Params, family

SOURCE = "ir_measures: pyndeval"
#: ndeval's ``DEPTH``: the deepest cutoff it computes.
DEPTH = 20
ALPHA = BETA = 0.5

_CUT = Named("cutoff", int, required=True, meaning="ranking cutoff threshold (at most 20)")
_REL = Named("rel", int, 1, meaning="minimum relevance score to be considered relevant (inclusive)")
_ALPHA = Named("alpha", float, ALPHA, meaning="redundancy intolerance")
_BETA = Named("beta", float, BETA, meaning="patience")


# ------------------------------------------------------------------ the judgments
def _pairs(qrels: Qrels) -> tuple[np.ndarray, np.ndarray]:
    """Each diversity qrels line's (query, document) pair as a number, in the order pairs first appear, and
    the first line of each pair."""
    f = qrels.frame
    key = pc.binary_join_element_wise(arrow_of(f[QUERY_ID]), arrow_of(f[DOC_ID]), pa.scalar(" ", pa.large_string()))
    codes = _codes(key)
    _, first = np.unique(codes, return_index=True)  # codes number pairs by first appearance: first ascends
    return codes, first


def collapse(qrels: Qrels) -> Qrels:
    """Diversity qrels as plain qrels, one line per judged (query, document) in the order they first appear,
    labelled with the document's highest label: what ``build_ranked`` joins a run to (a document is judged
    when any of its lines is; its subtopics are read from ``entries``)."""
    f = qrels.frame
    codes, first = _pairs(qrels)
    top = np.full(len(first), np.iinfo(np.int64).min)
    np.maximum.at(top, codes, f[RELEVANCE].to_numpy().astype(np.int64))
    frame = pd.DataFrame(
        {
            QUERY_ID: f[QUERY_ID].take(first).reset_index(drop=True),
            DOC_ID: f[DOC_ID].take(first).reset_index(drop=True),
            RELEVANCE: top,
        }
    )
    return Qrels(frame=frame, path=qrels.path, sha256=qrels.sha256)


def entries(qrels: Qrels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each diversity qrels line as (its line in ``collapse(qrels)``, its subtopic's number, its label).

    Subtopics are numbered in the order they first appear in the qrels (pyndeval's ``subtopic_map``), so that
    sums over a document's subtopics run in ndeval's order."""
    f = qrels.frame
    line, _ = _pairs(qrels)
    return line, _codes(arrow_of(f[SUBTOPIC])), f[RELEVANCE].to_numpy().astype(np.int64)


def _codes(values) -> np.ndarray:
    """Each value's number, values numbered in the order they first appear (one dictionary for all chunks)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pc.dictionary_encode(values).indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _check(m: Measure) -> str | None:
    if m.cutoff is not None and not 1 <= m.cutoff <= DEPTH:
        return f"{m.name}: ndeval computes cutoffs 1 to {DEPTH} only (its DEPTH; pyndeval refuses more)"
    return None


# ------------------------------------------------------------------ one evaluation
class _Div:
    """A ranking against diversity qrels at one relevance level, alpha and beta: the run's and the ideal
    ranking's scores by position, what every measure of the family reads."""

    def __init__(self, r: Ranked, qrels: Qrels, rel: int, alpha: float, beta: float):
        if r.line is None:
            raise ValueError("diversity measures read the qrels line of each ranked row (build_ranked gives it)")
        self.r, self.alpha, self.beta = r, alpha, beta
        self._memo: dict = {}
        self._entry = (np.zeros(0, np.int64),) * 4
        line, sub, label = entries(qrels)
        n_lines = int(line.max(initial=-1)) + 1  # the collapsed qrels' lines
        keep = label >= rel
        line, sub = line[keep], sub[keep]
        by_line = np.lexsort((sub, line))  # each document's relevant subtopics, in subtopic order
        self.e_line, self.e_sub = line[by_line], sub[by_line]
        self.e_start = np.searchsorted(self.e_line, np.arange(n_lines + 1))
        self.n_sub = int(sub.max(initial=-1)) + 1
        # S: subtopics with a relevant document, per query
        f = qrels.frame
        _, first = _pairs(qrels)
        qids = pa.array(r.qids.tolist(), type=pa.large_string())
        self.q_of_line = pc.index_in(take(arrow_of(f[QUERY_ID]), first), value_set=qids).to_numpy(zero_copy_only=False)
        self.doc_of_line = take(arrow_of(f[DOC_ID]), first)
        pairs = np.unique(self.q_of_line[self.e_line] * max(self.n_sub, 1) + self.e_sub)
        self.S = np.bincount(pairs // max(self.n_sub, 1), minlength=r.nq).astype(np.int64)
        self.pw = powers(1.0 - alpha, max(2, len(line) + 1))
        self._run = self._scores(r.q, r.rank, r.line)
        self._ideal = self._greedy()

    def _row_entries(self, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the index of the row each relevant (row, subtopic) entry of ``lines`` belongs to, its subtopic)."""
        counts = self.e_start[lines + 1] - self.e_start[lines]
        row = np.repeat(np.arange(len(lines)), counts)
        at = np.repeat(self.e_start[lines], counts) + (
            np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return row, self.e_sub[at]

    def _scores(self, q: np.ndarray, rank: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, 0-based position, score) of each row with a relevant subtopic, rows given in rank order."""
        row, sub = self._row_entries(lines)
        if not len(row):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        key = q[row] * max(self.n_sub, 1) + sub
        seen = _cumcount(key)  # documents above relevant to the subtopic
        gain = self.pw[seen]
        self._entry = (q[row], rank[row], sub, seen)
        has = np.unique(row)
        score = np.bincount(row, weights=gain, minlength=len(lines))[has]
        return q[has], rank[has] - 1, score

    def _greedy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ndeval's ``idealResult``: (query, 0-based position, score) of the ideal ranking's documents with a
        score > 0, every query at once (one step per position)."""
        lines = np.unique(self.e_line)
        q = self.q_of_line[lines]
        docs = take(self.doc_of_line, lines)
        by_doc = pc.array_sort_indices(docs, order="descending")
        doc_rank = np.empty(len(lines), dtype=np.int64)
        doc_rank[by_doc.to_numpy()] = np.arange(len(lines))
        order = np.lexsort((doc_rank, q))  # by query, then document id descending (byte order, as strcmp)
        lines, q = lines[order], q[order]
        row, sub = self._row_entries(lines)
        gain = np.ones((self.r.nq, max(self.n_sub, 1)))
        placed = np.zeros(len(lines), dtype=bool)
        starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1]))) if len(q) else np.zeros(0, np.int64)
        sizes = np.diff(np.append(starts, len(q)))
        index = np.arange(len(lines))
        out_q, out_pos, out_score = [], [], []
        for step in range(int(sizes.max(initial=0))):
            score = np.bincount(row, weights=gain[q[row], sub], minlength=len(lines))
            score[placed] = -1.0
            best = np.repeat(np.maximum.reduceat(score, starts), sizes)
            match = (score == best) & (score > 0)
            first = np.minimum.reduceat(np.where(match, index, len(lines)), starts)  # the largest document id
            pick = first[first < len(lines)]
            if not len(pick):
                break
            placed[pick] = True
            out_q.append(q[pick])
            out_pos.append(np.full(len(pick), step))
            out_score.append(score[pick])
            hit = np.isin(row, pick)
            gain[q[row[hit]], sub[hit]] *= 1.0 - self.alpha
        if not out_q:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        qq, pp, ss = np.concatenate(out_q), np.concatenate(out_pos), np.concatenate(out_score)
        order = np.lexsort((pp, qq))
        return qq[order], pp[order], ss[order]

    # ---------------------------------------------------------- ndeval's arrays
    def _depth_matrix(self, which) -> np.ndarray:
        """(queries, DEPTH) scores by position."""
        q, pos, score = which
        mat = np.zeros((self.r.nq, DEPTH))
        inside = pos < DEPTH
        mat[q[inside], pos[inside]] = score[inside]
        return mat

    def _normalised(self, which, err: bool) -> np.ndarray:
        """ndeval's computeDCG (score * log(2) / log(i + 2)) or computeERR (score / (i + 1)): the cumulative sum
        by position, positions 1..DEPTH-1 divided by the 'ideal ideal' (S, times 1 - alpha at each position)."""

        def at(values: np.ndarray) -> np.ndarray:
            return values / _POSITION[None, :] if err else values * _DISCOUNT[None, :]

        mat = np.cumsum(at(self._depth_matrix(which)), axis=1)
        steps = np.concatenate(
            [self.S[:, None].astype(np.float64), np.full((self.r.nq, DEPTH - 1), 1.0 - self.alpha)], 1
        )
        ideal = np.cumsum(at(np.cumprod(steps, axis=1)), axis=1)  # idealIdealGain *= (1 - alpha), position by position
        mat[:, 1:] = divide(mat[:, 1:], ideal[:, 1:])
        return np.where(self.S[:, None] > 0, mat, 0.0)

    def dcg(self, ideal: bool = False) -> np.ndarray:
        key = ("dcg", ideal)
        if key not in self._memo:
            self._memo[key] = self._normalised(self._ideal if ideal else self._run, err=False)
        return self._memo[key]

    def err(self, ideal: bool = False) -> np.ndarray:
        key = ("err", ideal)
        if key not in self._memo:
            self._memo[key] = self._normalised(self._ideal if ideal else self._run, err=True)
        return self._memo[key]

    def nrbp(self, ideal: bool = False) -> np.ndarray:
        q, pos, score = self._ideal if ideal else self._run
        decay = powers(self.beta, int(pos.max(initial=0)) + 1)
        total = np.bincount(q, weights=score * decay[pos], minlength=self.r.nq)
        value = total * ((1 - (1 - self.alpha) * self.beta) / np.maximum(self.S, 1))
        return np.where(self.S > 0, value, 0.0)

    def map_ia(self) -> np.ndarray:
        q, rank, sub, seen = self._entry
        n_sub = max(self.n_sub, 1)
        key = q * n_sub + sub
        nrel = np.bincount(self.q_of_line[self.e_line] * n_sub + self.e_sub, minlength=self.r.nq * n_sub)
        ap = np.bincount(key, weights=(seen + 1.0) / rank, minlength=self.r.nq * n_sub)
        per = np.where(nrel > 0, divide(ap, nrel), 0.0).reshape(self.r.nq, n_sub)
        total = np.zeros(self.r.nq)
        for j in range(n_sub):  # subtopic by subtopic, as ndeval adds them
            total = total + per[:, j]
        return np.where(self.S > 0, divide(total, self.S), 0.0)

    def precision(self, k: int) -> np.ndarray:
        q, rank, _sub, _seen = self._entry
        hits = np.bincount(q[rank <= k], minlength=self.r.nq).astype(np.float64)
        return np.where(self.S > 0, divide(hits, float(k) * self.S), 0.0)

    def strec(self, k: int) -> np.ndarray:
        q, rank, _sub, seen = self._entry
        first = (seen == 0) & (rank <= k)
        hits = np.bincount(q[first], minlength=self.r.nq).astype(np.float64)
        return np.where(self.S > 0, divide(hits, self.S.astype(np.float64)), 0.0)


#: ndeval's ``discount(i)`` of the 0-based position i: 1 at 0, log(2) / log(i + 2) after (C library logs).
_DISCOUNT = np.array([1.0] + [math.log(2.0) / math.log(i + 2.0) for i in range(1, DEPTH)])
_POSITION = np.arange(1, DEPTH + 1, dtype=np.float64)


def _cumcount(key: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same key."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if len(key) else order
    within = np.arange(len(key)) - np.repeat(starts, np.diff(np.append(starts, len(key))))
    out = np.empty(len(key), dtype=np.int64)
    out[order] = within
    return out


def _evaluations(r: Ranked, ms, ctx) -> dict:
    """The evaluation of each (rel, alpha, beta) the measures ask for, once per ranking (kept on ``r``: every
    diversity family of a call reads the same ranked rows)."""
    out = {}
    for m in ms:
        key = _key(m)
        out[key] = r._memo(("diversity", *key), lambda key=key: _Div(r, ctx.qrels, *key))
    return out


def _param(m: Measure, name: str, default: float) -> float:
    return float(m.value(name)) if any(p.name == name for p in m.spec.named) else default


def _key(m: Measure) -> tuple:
    return (m.value("rel"), _param(m, "alpha", ALPHA), _param(m, "beta", BETA))


def _at(mat: np.ndarray, m: Measure) -> np.ndarray:
    return mat[:, m.cutoff - 1]


_DIV = MappingProxyType(
    {"binary": False, "since": 0, "source": SOURCE, "rel_format": "qrels_div", "ties": "docid_asc", "check": _check}
)


@family("ERR_IA", params=Params.NAMED, named=(_CUT, _REL), cutoff="required", score_precision="float64", **_DIV)
def err_ia(r: Ranked, ms, ctx) -> dict:
    """Intent-aware ERR@k (Chapelle et al., CIKM 2009) as ndeval's ERR-IA: sum over positions i <= k of
    s_i / i, divided (for k >= 2) by the same sum for S subtopics each relevant at every position (ndeval's
    'ideal ideal' normalisation, collection independent). alpha = 0.5."""
    ev = _evaluations(r, ms, ctx)
    return {m: _at(ev[_key(m)].err(), m) for m in ms}


@family("nERR_IA", params=Params.NAMED, named=(_CUT, _REL), cutoff="required", score_precision="float64", **_DIV)
def nerr_ia(r: Ranked, ms, ctx) -> dict:
    """Intent-aware ERR@k normalised by the ideal ranking's (ndeval's nERR-IA, collection dependent): ERR_IA@k
    of the run / ERR_IA@k of ndeval's greedy ideal ranking; 0 where the run's alpha-DCG@k is 0. alpha = 0.5."""
    ev = _evaluations(r, ms, ctx)
    out = {}
    for m in ms:
        e = ev[_key(m)]
        run, best, dcg = _at(e.err(), m), _at(e.err(ideal=True), m), _at(e.dcg(), m)
        out[m] = np.where(dcg != 0, divide(run, best), 0.0)
    return out


@family(
    "alpha_DCG",
    params=Params.NAMED,
    named=(_CUT, _REL, _ALPHA),
    cutoff="required",
    score_precision="float64",
    **_DIV,
)
def alpha_dcg(r: Ranked, ms, ctx) -> dict:
    """alpha-DCG@k (Clarke et al., SIGIR 2008) as ndeval's alpha-DCG: sum over positions i <= k of
    s_i * log(2) / log(i + 1), divided (for k >= 2) by the same sum for S subtopics each relevant at every
    position (collection independent)."""
    ev = _evaluations(r, ms, ctx)
    return {m: _at(ev[_key(m)].dcg(), m) for m in ms}


@family(
    "alpha_nDCG",
    params=Params.NAMED,
    named=(_CUT, _REL, _ALPHA),
    cutoff="required",
    score_precision="float64",
    **_DIV,
)
def alpha_ndcg(r: Ranked, ms, ctx) -> dict:
    """alpha-nDCG@k (Clarke et al., SIGIR 2008) as ndeval's alpha-nDCG: alpha-DCG@k of the run / alpha-DCG@k of
    ndeval's greedy ideal ranking (collection dependent); 0 where the run's alpha-DCG@k is 0."""
    ev = _evaluations(r, ms, ctx)
    out = {}
    for m in ms:
        e = ev[_key(m)]
        run, best = _at(e.dcg(), m), _at(e.dcg(ideal=True), m)
        out[m] = np.where(run != 0, divide(run, best), 0.0)
    return out


@family("NRBP", params=Params.NAMED, named=(_REL, _ALPHA, _BETA), score_precision="float64", **_DIV)
def nrbp(r: Ranked, ms, ctx) -> dict:
    """Novelty- and rank-biased precision (Clarke, Kolla & Vechtomova, ICTIR 2009) as ndeval's NRBP:
    (1 - (1 - alpha) * beta) / S * sum over every retrieved position i of s_i * beta^(i-1)."""
    ev = _evaluations(r, ms, ctx)
    return {m: ev[_key(m)].nrbp() for m in ms}


@family("nNRBP", params=Params.NAMED, named=(_REL, _ALPHA, _BETA), score_precision="float64", **_DIV)
def nnrbp(r: Ranked, ms, ctx) -> dict:
    """NRBP normalised by the ideal ranking's (ndeval's nNRBP): NRBP of the run / NRBP of ndeval's greedy ideal
    ranking; 0 for a query no document is relevant to (ndeval: 0/0)."""
    ev = _evaluations(r, ms, ctx)
    out = {}
    for m in ms:
        e = ev[_key(m)]
        best = e.nrbp(ideal=True)
        out[m] = np.where(best > 0, divide(e.nrbp(), best), 0.0)
    return out


@family("AP_IA", params=Params.NAMED, named=(_REL,), score_precision="float64", **_DIV)
def ap_ia(r: Ranked, ms, ctx) -> dict:
    """Intent-aware AP as ndeval's MAP-IA: the mean over the S subtopics of AP against that subtopic's
    judgments (sum over retrieved documents relevant to it of its relevant count so far / rank, divided by
    the documents relevant to it), over every retrieved position."""
    ev = _evaluations(r, ms, ctx)
    return {m: ev[_key(m)].map_ia() for m in ms}


@family("P_IA", params=Params.NAMED, named=(_CUT, _REL), cutoff="required", score_precision="float64", **_DIV)
def p_ia(r: Ranked, ms, ctx) -> dict:
    """Intent-aware P@k as ndeval's P-IA: the (document, subtopic) relevant pairs among the first k documents,
    divided by k * S."""
    ev = _evaluations(r, ms, ctx)
    return {m: ev[_key(m)].precision(m.cutoff) for m in ms}


@family("StRecall", params=Params.NAMED, named=(_CUT, _REL), cutoff="required", score_precision="float64", **_DIV)
def strecall(r: Ranked, ms, ctx) -> dict:
    """Subtopic recall@k as ndeval's strec: the subtopics some document among the first k is relevant to,
    divided by S."""
    ev = _evaluations(r, ms, ctx)
    return {m: ev[_key(m)].strec(m.cutoff) for m in ms}
