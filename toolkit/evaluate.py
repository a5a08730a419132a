"""(qrels, run, measures, settings) -> per-query table, exactly as trec_eval computes it.

One pass, vectorised: the run is restricted to queries that have judgments,
joined to the qrels labels, put in trec_eval's order (``ranking.py``), cut at
``-M``, optionally condensed to judged documents (``-J``); only the rows that
can count (judged, or relevant at ``-l``) keep their rank, and every measure is
then a ``bincount`` over their contributions plus per-query retrieved counts.
Measure definitions are in ``measures.py``; nothing here decides what a
measure means.

Query set (trec_eval 9.x): queries in the run but absent from the qrels are
ignored; without ``-c`` the mean is over queries in both, with ``-c`` over
every qrels query (those missing from the run score 0 and are not printed
per query, as trec_eval does).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__
from .columns import arrow_of
from .measures import BINARY_FAMILIES, GAIN_FAMILIES, EvalSettings, Measure
from .ranking import group_starts, trec_order, within_group_rank
from .records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run

log = logging.getLogger(__name__)

#: Relevance code of a retrieved document that is not in the qrels (trec_eval's RELVALUE_NONPOOL).
NOT_IN_POOL = -1


@dataclass(frozen=True)
class EvalResult:
    """Per-query values (tidy), the ``all`` line, and how they were computed.

    ``per_query`` columns: query_id, measure, value, in_run. Rows exist for
    every evaluated query; with ``-c`` a qrels query missing from the run has
    ``in_run=False`` and zeros.
    """

    per_query: pd.DataFrame
    aggregate: dict[str, float]
    measures: tuple[Measure, ...]
    settings: EvalSettings
    provenance: dict
    notes: tuple[str, ...] = field(default_factory=tuple)

    def wide(self) -> pd.DataFrame:
        """One row per query, one column per measure name."""
        table = self.per_query.pivot(index="query_id", columns="measure", values="value")
        return table.reindex(columns=[m.name for m in self.measures])


@dataclass(frozen=True)
class _Joined:
    """The run rows that can count toward a measure, in trec_eval order, and per-query counts.

    Only judged rows (label >= 0) and rows relevant at the ``-l`` level are kept:
    every measure is a sum over those rows, given each one's rank and the number
    of documents retrieved per query.
    """

    qidx: np.ndarray  # int32 index into the sorted qrels query ids
    rank: np.ndarray  # 1-based rank after -M / -J
    label: np.ndarray  # int32 qrels label, NOT_IN_POOL when absent
    num_ret: np.ndarray  # float64 per qrels query: documents ranked after -M / -J
    in_run: np.ndarray  # bool per qrels query: the run has a line for it
    extra_queries: int  # distinct run queries without judgments (ignored)


def _join(qrels: Qrels, q_qidx: np.ndarray, run: Run, qids: np.ndarray, settings: EvalSettings) -> _Joined:
    frame = run.frame
    nq = len(qids)
    queries = arrow_of(frame[QUERY_ID])
    qidx_all = pc.index_in(queries, value_set=pa.array(qids, type=pa.string()))
    doc = arrow_of(frame[DOC_ID])
    score = frame[SCORE].to_numpy()
    extra = 0
    if qidx_all.null_count:  # drop run queries without judgments (trec_eval ignores them)
        keep = pc.is_valid(qidx_all)
        extra = pc.count_distinct(queries.filter(pc.invert(keep))).as_py()
        doc, qidx_all = doc.filter(keep), qidx_all.filter(keep)
        score = score[keep.to_numpy(zero_copy_only=False)]
    qidx = qidx_all.to_numpy(zero_copy_only=False).astype(np.int32)
    del qidx_all
    label = _labels(qrels, q_qidx, qidx, doc)  # in file order; permuted below
    pa.default_memory_pool().release_unused()  # the lookups' scratch, before the sort needs room
    # qids are sorted, so ordering by their index orders queries by id, as trec_eval does
    order = trec_order(qidx, score, doc, settings.score_precision)
    del doc, score
    counts = np.bincount(qidx, minlength=nq)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.flatnonzero(label[order] >= min(0, settings.relevance_level))
    rows = order[pos]
    del order
    qidx, label = qidx[rows], label[rows]
    rank = (pos - starts[qidx] + 1).astype(np.int32)
    num_ret = counts.astype(np.float64)
    if settings.max_docs is not None:
        cut = rank <= settings.max_docs
        qidx, rank, label = qidx[cut], rank[cut], label[cut]
        num_ret = np.minimum(num_ret, settings.max_docs)
    if settings.judged_only:
        judged = label >= 0
        qidx, label = qidx[judged], label[judged]
        rank = within_group_rank(qidx)
        num_ret = np.bincount(qidx, minlength=nq).astype(np.float64)
    return _Joined(qidx=qidx, rank=rank, label=label, num_ret=num_ret, in_run=counts > 0, extra_queries=extra)


def _labels(qrels: Qrels, q_qidx: np.ndarray, qidx: np.ndarray, doc_id) -> np.ndarray:
    """Label of each run row (``qidx``, ``doc_id``); ``q_qidx`` is each qrels row's query index."""
    qf = qrels.frame
    docs = pc.unique(arrow_of(qf[DOC_ID]))
    n_docs = np.int64(max(len(docs), 1))
    q_d = pc.index_in(arrow_of(qf[DOC_ID]), value_set=docs)
    qkeys = q_qidx * n_docs + q_d.to_numpy(zero_copy_only=False)
    order = np.argsort(qkeys, kind="stable")
    qkeys, qlabels = qkeys[order], qf[RELEVANCE].to_numpy()[order].astype(np.int32)
    r_d = pc.index_in(doc_id, value_set=docs)
    label = np.full(len(qidx), NOT_IN_POOL, dtype=np.int32)
    if not len(qkeys) or r_d.null_count == len(r_d):
        return label
    hit = pc.is_valid(r_d).to_numpy(zero_copy_only=False)
    rkeys = qidx[hit].astype(np.int64) * n_docs + r_d.drop_null().to_numpy(zero_copy_only=False)
    pos = np.clip(np.searchsorted(qkeys, rkeys), 0, len(qkeys) - 1)
    found = qkeys[pos] == rkeys
    sub = np.full(len(rkeys), NOT_IN_POOL, dtype=np.int32)
    sub[found] = qlabels[pos[found]]
    label[hit] = sub
    return label


def _ideal_dcg(qrels: Qrels, q_qidx: np.ndarray, nq: int, settings: EvalSettings, cutoffs: list[int | None]) -> dict:
    """IDCG per query (indexed like ``q_qidx``) for each cutoff (None = no cutoff)."""
    gains = settings.gain.apply(qrels.frame[RELEVANCE].to_numpy())
    qidx = q_qidx
    order = np.lexsort((-gains, qidx))
    qidx, gains = qidx[order], gains[order]
    ranks = within_group_rank(qidx)
    contrib = np.where(gains > 0, gains / settings.discount.divisors(ranks), 0.0)
    out = {}
    for k in cutoffs:
        w = contrib if k is None else np.where(ranks <= k, contrib, 0.0)
        out[k] = np.bincount(qidx, weights=w, minlength=nq)
    return out


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: list[Measure] | tuple[Measure, ...],
    settings: EvalSettings | None = None,
) -> EvalResult:
    """Evaluate ``run`` against ``qrels``; see ``measures.py`` for each definition."""
    settings = settings or EvalSettings()
    measures = tuple(sorted(set(measures), key=lambda m: m.sort_key))
    # each qrels row's index into the sorted qrels query ids, computed once for every use below
    q_qidx, uniques = pd.factorize(qrels.frame[QUERY_ID], sort=True)
    q_qidx = q_qidx.astype(np.int64)
    qids = np.array(uniques.tolist(), dtype=object)
    nq = len(qids)
    j = _join(qrels, q_qidx, run, qids, settings)

    in_run = j.in_run
    evaluated = np.ones(nq, dtype=bool) if settings.complete else in_run

    level = settings.relevance_level
    q_labels = qrels.frame[RELEVANCE].to_numpy()
    num_rel = np.bincount(q_qidx, weights=(q_labels >= level), minlength=nq)
    rel = j.label >= level
    num_ret = j.num_ret

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(j.qidx, weights=mask, minlength=nq)

    def safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.divide(a, b, out=np.zeros(nq), where=b > 0)

    values: dict[str, np.ndarray] = {}
    gain_measures = [m for m in measures if m.family in GAIN_FAMILIES]
    if gain_measures:
        row_gain = settings.gain.apply(j.label, where="run's judged documents")
        dcg_terms = np.where(row_gain > 0, row_gain / settings.discount.divisors(j.rank), 0.0)
        ideal = _ideal_dcg(qrels, q_qidx, nq, settings, [m.cutoff for m in gain_measures])
    for m in measures:
        f, k = m.family, m.cutoff
        if f == "num_q":
            v = np.ones(nq)
        elif f == "num_ret":
            v = num_ret
        elif f == "num_rel":
            v = num_rel
        elif f == "num_rel_ret":
            v = count(rel)
        elif f == "P":
            v = count(rel & (j.rank <= k)) / k
        elif f == "recall":
            v = safe_div(count(rel & (j.rank <= k)), num_rel)
        elif f == "judged":
            v = safe_div(count((j.label >= 0) & (j.rank <= k)), np.minimum(num_ret, k))
        elif f == "map":
            cum = np.cumsum(rel)
            starts = np.flatnonzero(group_starts(j.qidx))
            before = np.repeat(cum[starts] - rel[starts], np.diff(np.append(starts, len(cum))))
            prec = np.where(rel, (cum - before) / j.rank, 0.0)
            v = safe_div(np.bincount(j.qidx, weights=prec, minlength=nq), num_rel)
        elif f == "recip_rank":
            v = np.zeros(nq)
            first_q, first_i = np.unique(j.qidx[rel], return_index=True)
            v[first_q] = 1.0 / j.rank[rel][first_i]
        elif f in GAIN_FAMILIES:
            terms = dcg_terms if k is None else np.where(j.rank <= k, dcg_terms, 0.0)
            v = safe_div(np.bincount(j.qidx, weights=terms, minlength=nq), ideal[k])
        else:  # pragma: no cover - Measure validates families
            raise AssertionError(f)
        values[m.name] = np.where(evaluated, v, 0.0) if f != "num_q" else evaluated.astype(float)

    if settings.judged_compat == "pyserini":
        values.update(_pyserini_judged(qrels, run, [m for m in measures if m.family == "judged"], qids, nq))

    ev_q = qids[evaluated]
    n_eval = int(evaluated.sum())
    aggregate: dict[str, float] = {}
    for m in measures:
        v = values[m.name][evaluated]
        if m.family == "num_rel" and settings.complete:
            # trec_eval 9.x quirk, kept for byte-identical output: with -c the num_rel summary counts
            # every qrels label > 0, whatever -l says (per-query values do follow -l).
            aggregate[m.name] = float((q_labels > 0).sum())
        elif m.summed:
            aggregate[m.name] = float(v.sum())
        elif m.family == "judged" and settings.judged_compat == "pyserini":
            aggregate[m.name] = float(values["__pyserini__" + m.name])
        else:
            aggregate[m.name] = float(v.sum() / n_eval) if n_eval else 0.0
    per_query = pd.DataFrame(
        {
            "query_id": np.tile(ev_q, len(measures)).astype(str),
            "measure": np.repeat([m.name for m in measures], n_eval),
            "value": np.concatenate([values[m.name][evaluated] for m in measures]) if measures else [],
            "in_run": np.tile(in_run[evaluated], len(measures)),
        }
    )

    notes = []
    missing = int((~in_run).sum())
    if missing and not settings.complete:
        notes.append(
            f"{missing} of {nq} qrels queries have no line in the run and were left out of the mean "
            "(as trec_eval 9.x does); pass -c to count them as 0"
        )
    extra = j.extra_queries
    if extra:
        notes.append(f"{extra} run queries have no judgments in the qrels and were ignored")
    if n_eval == 0:
        notes.append("no query is both in the run and in the qrels: nothing was evaluated")
    provenance = build_provenance(qrels, run, measures, settings, nq=nq, n_run=int(in_run.sum()) + extra, n_eval=n_eval)
    return EvalResult(
        per_query=per_query,
        aggregate=aggregate,
        measures=measures,
        settings=settings,
        provenance=provenance,
        notes=tuple(notes),
    )


def _pyserini_judged(qrels: Qrels, run: Run, measures: list[Measure], qids: np.ndarray, nq: int) -> dict:
    """Pyserini's judged.k: first k *file lines* per query, all run queries, pairs pooled."""
    out: dict = {}
    if not measures:
        return out
    frame = run.frame
    q = frame[QUERY_ID].to_numpy(dtype=object)
    codes, uniq = pd.factorize(q)
    order = np.argsort(codes, kind="stable")
    file_rank = np.empty(len(q), dtype=np.int64)
    file_rank[order] = within_group_rank(codes[order])
    pairs = pd.MultiIndex.from_frame(qrels.frame[[QUERY_ID, DOC_ID]])
    judged = pd.MultiIndex.from_frame(frame[[QUERY_ID, DOC_ID]]).isin(pairs)
    qpos = {qid: i for i, qid in enumerate(qids.tolist())}
    for m in measures:
        top = file_rank <= m.cutoff
        out["__pyserini__" + m.name] = judged[top].sum() / max(top.sum(), 1)
        per = np.zeros(nq)
        num = np.bincount(codes[top], weights=judged[top], minlength=len(uniq))
        den = np.bincount(codes[top], minlength=len(uniq))
        for i, qid in enumerate(uniq):
            if qid in qpos and den[i]:
                per[qpos[qid]] = num[i] / den[i]
        out[m.name] = per
    return out


def settings_provenance(settings: EvalSettings) -> dict:
    """The provenance fields that follow from the settings alone (also what a reproduction declares)."""
    return {
        "gain": settings.gain.describe(),
        "discount": settings.discount.describe(),
        "relevance_level": settings.relevance_level,
        "unjudged": (
            "removed before ranking (-J, condensed list)"
            if settings.judged_only
            else "kept in the ranking, counted as non-relevant"
        ),
        "judged_definition": (
            "pyserini: first k file lines per query, pairs pooled over all run queries"
            if settings.judged_compat == "pyserini"
            else "twostage: top k in trec_eval order, label >= 0, / min(k, retrieved), mean over queries"
        ),
        "max_docs_per_query": settings.max_docs,
        "query_set": "all qrels queries (-c)" if settings.complete else "queries in both run and qrels",
        "score_precision": settings.score_precision,
    }


def build_provenance(
    qrels: Qrels, run: Run, measures, settings: EvalSettings, *, nq: int, n_run: int, n_eval: int
) -> dict:
    """Everything needed to say how a number was computed, and to refuse unlike comparisons."""
    s = settings_provenance(settings)
    return {
        "implementation": f"twostage {__version__}",
        "semantics": "trec_eval 9.x (ties: score desc, docid desc)",
        "measures": [m.name for m in measures],
        "cutoffs": sorted({m.cutoff for m in measures if m.cutoff is not None}),
        "gain": s["gain"],
        "discount": s["discount"],
        "relevance_level": s["relevance_level"],
        "relevance_level_applies_to": [m.name for m in measures if m.family in BINARY_FAMILIES],
        "relevance_labels": qrels.label_counts(),
        "relevance_map": (
            {"name": qrels.relevance_map_name or "custom", "map": {str(k): v for k, v in qrels.relevance_map.items()}}
            if qrels.relevance_map
            else None
        ),
        "unjudged": s["unjudged"],
        "judged_definition": s["judged_definition"],
        "max_docs_per_query": s["max_docs_per_query"],
        "query_set": s["query_set"],
        "queries_in_run": n_run,
        "queries_in_qrels": nq,
        "queries_evaluated": n_eval,
        "score_precision": s["score_precision"],
        "duplicates_dropped": {"run": run.duplicates_dropped, "qrels": qrels.duplicates_dropped},
        "run": {"path": run.path, "sha256": run.sha256, "tag": run.tag},
        "qrels": {"path": qrels.path, "sha256": qrels.sha256},
    }


#: Provenance fields that must agree for two results to be comparable.
COMPARABLE_FIELDS = (
    "semantics",
    "gain",
    "discount",
    "relevance_level",
    "relevance_map",
    "unjudged",
    "judged_definition",
    "max_docs_per_query",
    "query_set",
    "score_precision",
)


def provenance_differences(a: dict, b: dict, fields=COMPARABLE_FIELDS) -> dict[str, tuple]:
    """Fields (and the qrels file) on which two provenance blocks disagree."""
    diff = {f: (a.get(f), b.get(f)) for f in fields if a.get(f) != b.get(f)}
    qa, qb = a.get("qrels", {}).get("sha256"), b.get("qrels", {}).get("sha256")
    if qa != qb:
        diff["qrels.sha256"] = (qa, qb)
    return diff
