"""trec_eval's preference measures (``-R prefs`` / ``-R qrels_prefs``) and judgment-group measures (``-R qrels_jg``).

Preferences (``get_prefs.c``): lines ``qid jg jsg docno rel_level``. Within a
judgment sub-group (JSG) every document is preferred to every document with
a lower rel_level; a judgment group (JG, one user's information need) is the
transitive closure of its JSGs' preferences, and must be consistent; JGs may
contradict each other. rel_level 0 means non-relevant. ``-R qrels_prefs``
reads a qrels file as preferences: the iteration column is the JG, one JSG,
the label is the rel_level.

Per query the judged documents get *docid ranks*: those retrieved, in the
order of the ranking, then the others by document id (``form_prefs_counts.c``;
note that this ranking breaks score ties by document id **ascending**, unlike
every other trec_eval measure, and twostage reproduces that). A preference
A > B is *fulfilled* when A's docid rank is lower; it is *retrieved* when both
are retrieved, *implied* when exactly one is, *not occurring* when neither is.
Per JG trec_eval counts fulfilled and possible preferences in each category,
and per query a matrix counts, for every document pair, how many JGs prefer
one to the other. The measures are ratios of those counts; their docstrings
give which.

The preference files are small (judged pairs, not the run), so this module
works query by query in Python; only the ranking of the run is vectorised.

Judgment groups (``-R qrels_jg``, ``form_res_rels_jg.c``): qrels whose
iteration column names the judge; map, P and Rprec_mult are computed against
each JG's judgments as usual and averaged over the query's JGs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.errors import InputFormatError
from toolkit.measures.registry import Params, family
from toolkit.measures.trec import LONG_DEFAULTS, average_precision, precision, rprec_mult


def _div(a: float, b: float) -> float:
    """C's double division: x/0 is +-inf, 0/0 is nan."""
    if b == 0:
        return float("nan") if a == 0 else float("inf") if a > 0 else float("-inf")
    return a / b


@dataclass
class JG:
    """One judgment group's preferences and counts (trec_eval's ``JG``)."""

    ecs: list | None = None  # [(rel_level, docid ranks ascending)], by decreasing rel_level
    pa: np.ndarray | None = None  # preference array (nj x nj bool) when the JG has several JSGs
    rel_array: np.ndarray | None = None
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    notoccur: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0
    num_rel: int = 0
    num_rel_ret: int = 0


@dataclass
class QueryPrefs:
    jgs: list[JG] = field(default_factory=list)
    nj: int = 0  # judged documents
    njr: int = 0  # judged documents retrieved
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))


def query_prefs(qid: str, rows: pd.DataFrame, retrieved: list[str], path: str) -> QueryPrefs:
    """Build one query's JGs from its preference lines and its ranked retrieved documents."""
    judged = sorted(set(rows["doc_id"].tolist()))
    judged_set = set(judged)
    ret_judged = [d for d in retrieved if d in judged_set]
    docid_rank = {d: i for i, d in enumerate(ret_judged)}
    njr = len(ret_judged)
    for d in judged:
        if d not in docid_rank:
            docid_rank[d] = len(docid_rank)
    nj = len(judged)
    lines = sorted(
        (
            (jg, jsg, float(rel), docid_rank[doc], doc)
            for jg, jsg, doc, rel in zip(
                rows["jg"].tolist(), rows["jsg"].tolist(), rows["doc_id"].tolist(), rows["rel_level"].tolist()
            )
        ),
        key=lambda t: (t[0], t[1], -t[2], t[3]),
    )
    qp = QueryPrefs(nj=nj, njr=njr, counts=np.zeros((nj, nj), dtype=np.int64))
    start = 0
    while start < len(lines):
        end = start
        while end < len(lines) and lines[end][0] == lines[start][0]:
            end += 1
        group = lines[start:end]
        jg = JG()
        if len({t[1] for t in group}) > 1:
            _form_pa(jg, group, qp, qid, path)
        else:
            _form_ec(jg, group, qp, qid, path)
        qp.jgs.append(jg)
        start = end
    return qp


def _form_ec(jg: JG, group: list, qp: QueryPrefs, qid: str, path: str) -> None:
    ecs: list = []
    for _, _, rel, rank, _ in group:
        if ecs and ecs[-1][0] == rel:
            ecs[-1][1].append(rank)
        else:
            ecs.append((rel, [rank]))
    jg.ecs = [(rel, np.array(ranks, dtype=np.int64)) for rel, ranks in ecs]
    njr = qp.njr
    for i, (rel, r1) in enumerate(jg.ecs):
        ret = int(np.argmax(r1 >= njr)) if (r1 >= njr).any() else len(r1)  # ranks are ascending
        if rel > 0.0:
            jg.num_rel_ret += ret
            jg.num_rel += len(r1)
        else:
            jg.num_nonrel_ret += ret
            jg.num_nonrel += len(r1)
        for _, r2 in jg.ecs[i + 1 :]:
            a, b = r1[:, None], r2[None, :]
            if (a == b).any():
                raise InputFormatError(
                    path,
                    None,
                    f"query {qid!r}: a document has two rel_levels in one "
                    "judgment sub-group (trec_eval: 'different rel_level in same jsg')",
                )
            np.add.at(qp.counts, (np.broadcast_to(a, (len(r1), len(r2))), np.broadcast_to(b, (len(r1), len(r2)))), 1)
            ful = a < b
            jg.ful_ret += int((ful & (b < njr)).sum())
            jg.ful_imp += int((ful & (b >= njr) & (a < njr)).sum())
            jg.notoccur += int((ful & (b >= njr) & (a >= njr)).sum())
            jg.poss_ret += int((~ful & (a < njr)).sum())
            jg.poss_imp += int((~ful & (a >= njr) & (b < njr)).sum())
            jg.notoccur += int((~ful & (a >= njr) & (b >= njr)).sum())
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp


def _form_pa(jg: JG, group: list, qp: QueryPrefs, qid: str, path: str) -> None:
    nj, njr = qp.nj, qp.njr
    pa = np.zeros((nj, nj), dtype=bool)
    rel_array = np.full(nj, -1.0)
    for i, (_, jsg, rel, rank, doc) in enumerate(group):
        if (rel_array[rank] > 0.0 and rel == 0.0) or (rel_array[rank] == 0.0 and rel > 0.0):
            raise InputFormatError(
                path, None, f"query {qid!r}: document {doc!r} has both 0 and non-0 rel_level in one judgment group"
            )
        rel_array[rank] = rel
        j = i + 1
        while j < len(group) and group[j][1] == jsg and group[j][2] == rel:
            j += 1
        while j < len(group) and group[j][1] == jsg:
            pa[rank, group[j][3]] = True
            j += 1
    # transitive closure: multiply by the array (diagonal set) until nothing changes
    closure = pa | np.eye(nj, dtype=bool)
    base = closure.astype(np.int64)
    while True:
        nxt = (base @ closure.astype(np.int64)) > 0
        if (nxt == closure).all():
            break
        closure = nxt
    np.fill_diagonal(closure, False)
    both = closure & closure.T
    if both.any():
        i, j = map(int, np.argwhere(both)[0])
        raise InputFormatError(
            path,
            None,
            f"query {qid!r}: inconsistent preferences in one judgment group "
            f"(documents at internal ranks {i} and {j} are each preferred to the other)",
        )
    jg.pa, jg.rel_array = closure, rel_array
    ret = np.arange(nj) < njr
    jg.num_rel_ret = int(((rel_array > 0.0) & ret).sum())
    jg.num_nonrel_ret = int(((rel_array == 0.0) & ret).sum())
    jg.num_rel = int((rel_array > 0.0).sum())
    jg.num_nonrel = int((rel_array == 0.0).sum())
    qp.counts += closure
    ii, jj = np.nonzero(closure)
    ri, rj = ii < njr, jj < njr
    jg.poss_ret = int((ri & rj & (jj < ii)).sum())
    jg.ful_ret = int((ri & rj & (jj > ii)).sum())
    jg.ful_imp = int((ri & ~rj).sum())
    jg.poss_imp = int((~ri & rj).sum())
    jg.notoccur = int((~ri & ~rj).sum())
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp


# ------------------------------------------------------------------ inputs
@dataclass
class PrefsInput:
    """Every evaluated query's preferences (``qids`` order), built once for all preference measures."""

    qids: np.ndarray
    queries: list[QueryPrefs]

    @property
    def nq(self) -> int:
        return len(self.qids)


def _per_query(pi: PrefsInput, fn) -> np.ndarray:
    return np.array([fn(qp) for qp in pi.queries], dtype=np.float64)


def _prefs_family(name: str, **kw):
    return family(name, rel_format="prefs", binary=False, **kw)


@_prefs_family("prefs_num_prefs_poss", aggregate="sum", value_type="long")
def prefs_num_prefs_poss(pi: PrefsInput, ms, ctx) -> dict:
    """Possible preferences whether or not the documents were retrieved: sum over JGs of retrieved +
    implied + not-occurring possible preferences. Summed over queries (``m_prefs_num_prefs_poss.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: sum(j.poss_ret + j.poss_imp + j.notoccur for j in qp.jgs))}


@_prefs_family("prefs_num_prefs_ful", aggregate="sum", value_type="long")
def prefs_num_prefs_ful(pi: PrefsInput, ms, ctx) -> dict:
    """Fulfilled preferences, retrieved and implied (a preferred retrieved document over an unretrieved one).
    Summed over queries (``m_prefs_num_prefs_ful.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: sum(j.ful_ret + j.ful_imp for j in qp.jgs))}


@_prefs_family("prefs_num_prefs_ful_ret", aggregate="sum", value_type="long")
def prefs_num_prefs_ful_ret(pi: PrefsInput, ms, ctx) -> dict:
    """Fulfilled preferences with both documents retrieved. Summed over queries (``m_prefs_num_prefs_ful_ret.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: sum(j.ful_ret for j in qp.jgs))}


def _simp(qp: QueryPrefs, ful_of, poss_of) -> float:
    ful = sum(ful_of(j) for j in qp.jgs)
    poss = sum(poss_of(j) for j in qp.jgs)
    return ful / poss if poss else 0.0


@_prefs_family("prefs_simp")
def prefs_simp(pi, ms, ctx) -> dict:
    """Fulfilled / possible preferences over all JGs, counting implied ones and counting a preference between
    two unretrieved documents as failed; a pair preferred by two JGs counts twice (``m_prefs_simp.c``)."""
    return {
        ms[0]: _per_query(
            pi, lambda qp: _simp(qp, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp + j.notoccur)
        )
    }


@_prefs_family("prefs_simp_ret")
def prefs_simp_ret(pi, ms, ctx) -> dict:
    """prefs_simp over preferences whose two documents are both retrieved (``m_prefs_simp_ret.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _simp(qp, lambda j: j.ful_ret, lambda j: j.poss_ret))}


@_prefs_family("prefs_simp_imp")
def prefs_simp_imp(pi, ms, ctx) -> dict:
    """prefs_simp counting implied preferences but ignoring pairs where neither document is retrieved
    (``m_prefs_simp_imp.c``)."""
    return {
        ms[0]: _per_query(pi, lambda qp: _simp(qp, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp))
    }


def _pair(qp: QueryPrefs, implied: bool, unretrieved: bool) -> float:
    c, njr, nj = qp.counts, qp.njr, qp.nj
    s, pairs = 0.0, 0

    def visit(i: int, j: int, add: bool) -> None:
        nonlocal s, pairs
        if c[i, j] or c[j, i]:
            pairs += 1
            if add:
                s += float(c[i, j]) / float(c[i, j] + c[j, i])

    for i in range(njr):
        for j in range(i + 1, njr):
            visit(i, j, True)
    if implied:
        for i in range(njr):
            for j in range(njr, nj):
                visit(i, j, True)
    if unretrieved:
        for i in range(njr, nj):
            for j in range(i + 1, nj):
                visit(i, j, False)
    return s / pairs if pairs else 0.0


@_prefs_family("prefs_pair")
def prefs_pair(pi, ms, ctx) -> dict:
    """Mean over document pairs with a preference of (JGs preferring the higher-ranked one / JGs preferring
    either); implied pairs included, pairs of two unretrieved documents score 0 (``m_prefs_pair.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _pair(qp, True, True))}


@_prefs_family("prefs_pair_ret")
def prefs_pair_ret(pi, ms, ctx) -> dict:
    """prefs_pair over pairs of retrieved documents only (``m_prefs_pair_ret.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _pair(qp, False, False))}


@_prefs_family("prefs_pair_imp")
def prefs_pair_imp(pi, ms, ctx) -> dict:
    """prefs_pair with implied pairs, ignoring pairs of two unretrieved documents (``m_prefs_pair_imp.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _pair(qp, True, False))}


def _avgjg(qp: QueryPrefs, ful_of, poss_of) -> float:
    s = 0.0
    for j in qp.jgs:
        poss = poss_of(j)
        if poss:
            s += ful_of(j) / poss
    return s / len(qp.jgs) if s > 0.0 else 0.0


@_prefs_family("prefs_avgjg")
def prefs_avgjg(pi, ms, ctx) -> dict:
    """Mean over JGs of the JG's fulfilled / possible preferences (as prefs_simp): every judge counts the same
    (``m_prefs_avgjg.c``)."""
    return {
        ms[0]: _per_query(
            pi, lambda qp: _avgjg(qp, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp + j.notoccur)
        )
    }


@_prefs_family("prefs_avgjg_ret")
def prefs_avgjg_ret(pi, ms, ctx) -> dict:
    """prefs_avgjg over preferences between retrieved documents (``m_prefs_avgjg_ret.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _avgjg(qp, lambda j: j.ful_ret, lambda j: j.poss_ret))}


@_prefs_family("prefs_avgjg_imp")
def prefs_avgjg_imp(pi, ms, ctx) -> dict:
    """prefs_avgjg with implied preferences, ignoring pairs of two unretrieved documents (``m_prefs_avgjg_imp.c``)."""
    return {
        ms[0]: _per_query(pi, lambda qp: _avgjg(qp, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp))
    }


def _rnonrel(qp: QueryPrefs, ret_only: bool) -> float:
    s = 0.0
    for j in qp.jgs:
        R, N = (j.num_rel_ret, j.num_nonrel_ret) if ret_only else (j.num_rel, j.num_nonrel)
        if R >= N:
            if ret_only:
                ful = j.ful_ret + j.num_rel_ret * (R - N)
                poss = j.poss_ret + j.num_rel * (R - N)
            else:
                ful = j.ful_ret + j.ful_imp + j.num_rel_ret * (R - N)
                poss = j.poss_ret + j.poss_imp + j.notoccur + j.num_rel * (R - N)
        else:
            ful, poss = _recalculate(j, qp.njr, ret_only)
        s += _div(ful, poss)
    return s / len(qp.jgs) if s > 0.0 else 0.0


def _recalculate(j: JG, njr: int, ret_only: bool) -> tuple[int, int]:
    """trec_eval's ``recalculate``: counts with only the first R judged non-relevant documents kept.

    Reproduced as written, including its pairing of the last EC with its own first R members.
    """
    ful = poss = 0
    if j.ecs is not None:
        keep = j.num_rel_ret if ret_only else j.num_rel
        new_nonrel = j.ecs[-1][1][:keep]

        def ranks(x: np.ndarray) -> np.ndarray:
            return x[: int(np.argmax(x >= njr)) if (x >= njr).any() else len(x)] if ret_only else x

        def count(r1: np.ndarray, r2: np.ndarray) -> None:
            nonlocal ful, poss
            a, b = ranks(r1)[:, None], ranks(r2)[None, :]
            hit = (a < b) if ret_only else ((a < b) & (a < njr))
            ful += int(hit.sum())
            poss += int(hit.size - hit.sum())

        n = len(j.ecs)
        for e1 in range(n):
            for e2 in range(e1 + 1, n - 1):
                count(j.ecs[e1][1], j.ecs[e2][1])
        for e1 in range(n):
            count(j.ecs[e1][1], new_nonrel)
        return ful, poss + ful
    a, rel = j.pa, j.rel_array
    nj = len(rel)
    limit = njr if ret_only else nj
    seen, first = 0, limit
    for i in range(limit):
        if rel[i] == 0.0:
            seen += 1
            if seen == j.num_rel + 1:
                first = i
                break
    dropped = (np.arange(nj) >= first) & (rel == 0.0)
    live = ~dropped
    ii, jj = np.nonzero(a & live[:, None] & live[None, :])
    ri, rj = ii < njr, jj < njr
    poss += int((ri & rj & (jj < ii)).sum())
    ful += int((ri & rj & (jj > ii)).sum())
    if not ret_only:
        ful += int((ri & ~rj).sum())
        poss += int((~ri & rj).sum()) + int((~ri & ~rj).sum())
    return ful, poss + ful


@_prefs_family("prefs_avgjg_Rnonrel")
def prefs_avgjg_Rnonrel(pi, ms, ctx) -> dict:
    """prefs_avgjg with each JG's judged non-relevant documents set to R, its relevant ones: when there are
    N < R, R * (R - N) fulfilled preferences are added; when N > R only the first R non-relevant documents
    (by docid rank) count and the preferences are recounted. Akin to bpref (``m_prefs_avgjg_Rnonrel.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _rnonrel(qp, False))}


@_prefs_family("prefs_avgjg_Rnonrel_ret")
def prefs_avgjg_Rnonrel_ret(pi, ms, ctx) -> dict:
    """prefs_avgjg_Rnonrel with R and N counted among retrieved documents and preferences between retrieved
    documents only (``m_prefs_avgjg_Rnonrel_ret.c``)."""
    return {ms[0]: _per_query(pi, lambda qp: _rnonrel(qp, True))}


# --------------------------------------------------------- judgment groups
@dataclass
class JgInput:
    """Per judgment group: the ranking against that JG's judgments, and which queries the JG judged."""

    qids: np.ndarray
    groups: list  # [(jg id, Ranked, bool mask of queries judged by this JG)], JGs in id order

    @property
    def nq(self) -> int:
        return len(self.qids)

    def average(self, values_of) -> np.ndarray:
        """Sum of a JG's per-query values over the query's JGs (in JG order), divided by their number when > 1."""
        total = np.zeros(self.nq)
        n = np.zeros(self.nq, dtype=np.int64)
        for _, ranked, has in self.groups:
            v = values_of(ranked)
            total = np.where(has, total + v, total)
            n += has
        return np.where(n > 1, total / np.maximum(n, 1), total)


@family("map_avgjg", rel_format="qrels_jg")
def map_avgjg(ji: JgInput, ms, ctx) -> dict:
    """AP against each judgment group's judgments, averaged over the query's JGs (``m_map_avgjg.c``)."""
    return {ms[0]: ji.average(average_precision)}


@family("P_avgjg", params=Params.LONG_CUTOFFS, defaults=LONG_DEFAULTS, rel_format="qrels_jg")
def P_avgjg(ji: JgInput, ms, ctx) -> dict:
    """P@k against each judgment group's judgments, averaged over the query's JGs (``m_P_avgjg.c``)."""
    return {m: ji.average(lambda r, m=m: precision(r, [m], ctx)[m]) for m in ms}


@family(
    "Rprec_mult_avgjg",
    params=Params.DOUBLE_CUTOFFS,
    defaults=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0),
    rel_format="qrels_jg",
)
def Rprec_mult_avgjg(ji: JgInput, ms, ctx) -> dict:
    """Rprec_mult against each judgment group's judgments, averaged over the query's JGs (``m_Rprec_mult_avgjg.c``)."""
    out = {}
    for m in ms:
        out[m] = ji.average(lambda r, m=m: rprec_mult(r, [m], ctx)[m])
    return out


def build_prefs_input(
    prefs_frame: pd.DataFrame, qids: np.ndarray, retrieved: dict[str, list[str]], path: str
) -> PrefsInput:
    by_q = {q: g for q, g in prefs_frame.groupby("query_id", sort=False)}  # noqa: C416 (dict(groupby) calls .keys, a str)
    return PrefsInput(qids=qids, queries=[query_prefs(q, by_q[q], retrieved.get(q, []), path) for q in qids.tolist()])
