"""Where a two-stage ranking loses quality: the candidate ceiling, the loss decomposition, the rerank-depth curve.

For one query, a measure M (any ranking measure ``evaluate.evaluate`` computes, with the given settings), a
first-stage run F and a reranked run R that reorders F's top N candidates (N = the rerank depth; F's top N in
trec_eval order at the settings' score precision, ``ranking.top_k``):

- ``ideal``: M of the best ranking of every judged document of the query (sorted by gain). For nDCG it is 1
  when the query has a relevant document and 0 otherwise; for P@k it is min(R, k) / k.
- ``ceiling``: M of the best reordering of F's top N: the candidates sorted by ``order_keys``: for nDCG the
  gain nDCG itself gives their judged grade (``GainTable``, so a non-monotone ``--gain`` map is honoured), for
  binary measures the grade; an unjudged candidate gains 0. No reranker of these candidates can score more.
- ``first_stage`` = M(F) and ``reranked`` = M(R).
- ``lost_in_candidates = ideal - ceiling``: quality the first stage's candidates lack, out of any reranker's
  reach; ``lost_in_reranking = ceiling - reranked``: quality a better order of the same candidates would have
  had. The two add up to ``ideal - reranked`` per query and in the mean. ``lost_in_reranking`` is negative
  only when R holds documents that are not among the candidates (it is then not a reranking of them).

Sorting by these keys is the best order for every measure that only rewards documents with more gain (or
relevant ones) at higher ranks: nDCG with linear or exponential gains, P, recall, MAP, reciprocal rank. Counts
(``num_*``) and judged coverage have no ceiling and are refused.

Rerank-depth curve: reranking only F's top k (k <= N) gives F's top k in R's order (a top-k candidate that R
does not hold follows them in F's order), then F's ranks k+1..N in F's order; ``reranked@k`` is M of that list.
``ceiling@k`` is the same list with the top k sorted by gain, and ``recall@k`` is F's recall at k (at the
binary relevance level). At k = N the curve's point is R itself (for a pure reordering) and the full ceiling.
Computed from the two runs alone, no model is run again: exact for a pointwise reranker (a bi- or
cross-encoder scores each candidate on its own, so its scores of the top k are the scores it gives them
among N); an approximation for a listwise reranker, whose order of a document depends on the others it sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from toolkit.data.columns import coded_map, coded_merge
from toolkit.data.ranking import order_run, top_k, within_group_rank
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import ConfigError, OptionError
from toolkit.evaluation.evaluate import PreparedJudgments, evaluate, prepare_judgments, run_query_ids
from toolkit.measures.gains import GainTable
from toolkit.measures.names import EvalSettings, Measure, parse_measures

#: Rerank depths of the curve by default; the run's own depth is always added.
DEFAULT_CURVE_DEPTHS = (10, 20, 30, 50, 100)
#: Measure families without a ceiling: counts and judged coverage.
LOSS_COLUMNS = ("first_stage", "ceiling", "reranked", "ideal", "lost_in_candidates", "lost_in_reranking")


def parse_headline_measure(text: str) -> str:
    """The trec_eval name of one measure (``ndcg_cut.10`` -> ``ndcg_cut_10``) that has a ceiling."""
    measures = parse_measures([text], 10)  # names only: evaluate() checks the generation against the settings
    if len(measures) != 1:
        raise OptionError(
            f"{text!r} names {len(measures)} measures; give one, e.g. ndcg_cut.10", keyword="measure", flag="-m"
        )
    name = measures[0].name
    if not measures[0].spec.ceiling:  # the family declares it (counts, judged coverage, residuals)
        raise OptionError(
            f"{name} has no ceiling (it counts documents or judgments); give a ranking measure such "
            "as ndcg_cut.10, P.10, recall.100 or map",
            keyword="measure",
            flag="-m",
        )
    return name


def headline_measure(measure: str, recall_level: int | None, version: int) -> tuple[str, int | None]:
    """``measure`` as the diagnosis takes it, every name ``evaluate`` takes: an ir_measures name with its own
    relevance level (``AP(rel=2)@100``) is its trec_eval measure at that ``recall_level`` (the level binary
    measures use in a diagnosis); a per-measure depth (``RR@10``) has no place in a depth curve: refused."""
    from toolkit.errors import phrase
    from toolkit.measures.names import parse_measure_groups

    named = phrase(f"measure={measure!r}", f"--measure {measure}")
    groups = parse_measure_groups([str(measure)], version)
    if len(groups) != 1 or not groups[0].overrides:
        return measure, recall_level
    o, (m, *rest) = groups[0].overrides, groups[0].measures
    if rest or o.max_docs is not None:
        raise OptionError(
            f"{named}: the diagnosis decomposes one measure over the whole ranking; a depth of its own (RR@10) "
            "does not fit its depth curve: give a measure with a cutoff (e.g. ndcg_cut.10, AP(rel=2)@100)",
            keyword="measure",
            flag="-m",
        )
    if recall_level is not None and recall_level != o.relevance_level:
        raise OptionError(
            f"{named} sets relevance level {o.relevance_level}, "
            f"{phrase(f'recall_level={recall_level}', f'--recall-level {recall_level}')} another",
            keyword="measure",
            flag="-m",
        )
    return m.arg, o.relevance_level


def measure_values(
    qrels: Qrels | PreparedJudgments,
    run: Run,
    measure: str,
    settings: EvalSettings,
    query_ids: Iterable[str],
    warn: bool = True,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.Series:
    """Per-query values of ``measure`` (a trec_eval name) over ``query_ids``; a query the run lacks scores 0.
    ``warn=False``: ``run`` is one the diagnosis built (no input warnings about it)."""
    result = evaluate(qrels, run, parse_measures([measure], settings.trec_eval), settings, warn=warn, work=work)
    pq = result.per_query
    values = pq.loc[pq["measure"] == measure].set_index(QUERY_ID)["value"].astype(float)
    values.index = values.index.astype(str)
    return values.reindex(list(query_ids), fill_value=0.0)


def _gain_table(m: Measure, settings: EvalSettings) -> GainTable:
    """The gain table the measure itself is computed with: ``--gain`` for nDCG when it is not linear, else the
    measure's own ``L=G`` pairs (trec_eval's ``ndcg.1=3``) over linear gains, as ``measures/trec.py`` builds it."""
    if m.spec.gain and settings.gain.kind != "linear":
        return GainTable(gain=settings.gain, trec_sort=False)
    return GainTable(pairs=tuple((int(k), float(v)) for k, v in m.params if isinstance(k, int)))


def order_keys(labels: np.ndarray, measure: str, settings: EvalSettings) -> np.ndarray:
    """What the best order of a query's documents sorts by, descending (``labels``: NaN when unjudged).

    A measure with gains (nDCG, or a family given ``L=G`` pairs) rewards gain, so the keys are the gains the
    measure is computed with, from ``GainTable.of_labels`` (the lookup behind nDCG's DCG and its ideal
    ranking): a map 0:0,1:5,2:1 puts label 1 first. Every other measure rewards the documents at or above a
    relevance level, so a higher label never belongs lower: the key is the label, an unjudged document below
    every judged one. Negative labels (pooled, unjudged) count as unjudged.
    """
    m = parse_measures([measure], settings.trec_eval)[0]
    judged = ~np.isnan(labels) & (np.nan_to_num(labels, nan=-1.0) >= 0)
    codes = np.where(judged, np.nan_to_num(labels, nan=-1.0), -1).astype(np.int64)
    if m.spec.gain or any(isinstance(k, int) for k, _ in m.params):
        return _gain_table(m, settings).of_labels(codes)
    return codes.astype(np.float64)


def candidate_table(
    qrels: Qrels,
    first: Run,
    reranked: Run,
    depth: int,
    settings: EvalSettings,
    measure: str = "ndcg_cut_10",
    prepared: PreparedJudgments | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.DataFrame:
    """F's top ``depth`` per query: query_id, doc_id, first_rank, reranked_rank (NaN when R lacks it), gain
    (the best order's key for ``measure``, ``order_keys``), and ``reranked_query`` (R has the query at all).

    Where R holds more than ``depth`` documents of a query (a reranker that writes the first stage's ranks
    below the depth after its reranked top, as rank_llm does), F's ranks below ``depth`` follow, up to as many
    as R holds: the tail every reordering keeps in F's order, so a run that reorders the top ``depth`` and
    repeats F's tail is bounded by the ceiling on deep measures too (recall, MAP). ``prepared``: ``qrels``
    prepared (``prepare_judgments``), whose index gives the labels without joining the qrels' strings again."""
    return _candidates(qrels, first, reranked, depth, settings, measure, prepared, work=work)[0]


def _candidates(
    qrels: Qrels,
    first: Run,
    reranked: Run,
    depth: int,
    settings: EvalSettings,
    measure: str,
    prepared: PreparedJudgments | None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[pd.DataFrame, tuple | None]:
    """``candidate_table`` and, where its rows are the first stage's top ``depth`` alone (read from the alignment,
    the reranked run holding no query deeper than ``depth``), the key under which what those rows alone decide
    (their codes; with the measure, its settings and the depth k, the best order's values) is shared by every run
    reranked from that first stage (None elsewhere)."""
    aligned = _aligned_candidates(first, reranked, depth, settings.score_precision, work=work) if work.keeps else None
    table, key = aligned if aligned is not None else (None, None)
    if table is None:
        table = _joined_candidates(first, reranked, depth, settings.score_precision, work=work)
    index = prepared.index if prepared is not None and prepared.judgments is qrels else None
    if index is None:
        key = None
    if index is not None and not (index.qkeys[1:] == index.qkeys[:-1]).any():
        # each (query, document) judged once: its label is the evaluator's code (a negative label, unjudged,
        # and an absent one both NaN: order_keys reads them alike)
        rows, _, code = _candidate_codes(cast(PreparedJudgments, prepared), first, table, key, work=work)
        labels = np.full(len(table), np.nan)
        labels[rows] = np.where(code >= 0, code, np.nan)
    else:  # a qrels that judges a pair twice: the join of its strings, as without ``prepared``
        labels = coded_merge(table, qrels.frame[[QUERY_ID, DOC_ID, RELEVANCE]], [QUERY_ID, DOC_ID])[RELEVANCE].to_numpy(
            dtype=np.float64
        )
    table["gain"] = order_keys(labels, measure, settings)
    return table, key


def _candidate_codes(
    prepared: PreparedJudgments, first: Run, table: pd.DataFrame, key: tuple | None, *, work: Workspace = NO_WORKSPACE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``code_rows`` of the candidates against the prepared qrels; once per first stage and ``key`` (the
    candidates are its top rows alone) when there is one."""
    from toolkit.measures.ranked import code_rows

    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return code_rows(prepared.index, table[QUERY_ID], table[DOC_ID])

    return compute() if key is None else work.once("candidate codes", (prepared, first), key, compute)


def _joined_candidates(
    first: Run, reranked: Run, depth: int, precision: str, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """``candidate_table``'s candidates with the reranked run's ranks, joined on the ids' strings."""
    sizes = reranked.frame.groupby(QUERY_ID).size()
    deepest = max(depth, int(sizes.max()) if len(sizes) else 0)
    cands = top_k(first.frame, deepest, precision, work=work)[[QUERY_ID, DOC_ID, "rank"]]  # type: ignore[arg-type]
    if deepest > depth:
        ranks = cands["rank"].to_numpy()
        held = coded_map(cands[QUERY_ID], sizes).fillna(0).to_numpy()
        cands = cands.loc[(ranks <= depth) | (ranks <= held)].reset_index(drop=True)
    cands = cands.rename(columns={"rank": "first_rank"})
    rr = order_run(reranked.frame, precision, work=work)[[QUERY_ID, DOC_ID, "rank"]]  # type: ignore[arg-type]
    table = coded_merge(cands, rr.rename(columns={"rank": "reranked_rank"}), [QUERY_ID, DOC_ID])
    table["reranked_query"] = table[QUERY_ID].isin(set(rr[QUERY_ID].unique().tolist()))
    return table


def _aligned_candidates(
    first: Run, reranked: Run, depth: int, precision: str, *, work: Workspace = NO_WORKSPACE
) -> tuple[pd.DataFrame, tuple | None] | None:
    """``_joined_candidates`` read from the alignment of the two runs (``depths.alignment``: per reranked row
    its first-stage row, from the query blocks; computed once per diagnosis), no string compared: the same
    rows, columns and values. None where the join could differ: a reranked run that holds a document twice.
    With the table: (depth, precision) where its rows are the first stage's top ``depth`` alone, else None."""
    from toolkit.diagnosis.depths import alignment

    al = alignment(first, reranked, precision, work=work)
    fb, rb = al.first, al.blocks
    found = np.flatnonzero(al.row_in_first >= 0)
    matched = al.row_in_first[found]
    ordered = order_run(first.frame, precision, work=work)  # type: ignore[arg-type]
    rank = ordered["rank"].to_numpy()
    by_row = np.full(len(rank), -1, np.int64)
    by_row[matched] = al.ordered["rank"].to_numpy()[found]
    if np.count_nonzero(by_row >= 0) != len(matched):  # a first-stage row twice: the document twice
        return None
    # per first-stage block: the length of the reranked run's list of its query (0: the run lacks the query)
    held = np.zeros(len(fb.starts), np.int64)
    inner = al.block_in_first >= 0
    held[al.block_in_first[inner]] = rb.lengths[inner]
    deepest = max(depth, int(rb.lengths.max()) if len(rb.lengths) else 0)
    limit = np.full(len(fb.starts), deepest, np.int64)
    key = (depth, precision) if deepest == depth else None
    if deepest > depth:
        limit = np.maximum(np.minimum(held, deepest), depth)
    n = np.minimum(fb.lengths, limit)
    block = np.repeat(np.arange(len(fb.starts), dtype=np.int64), n)
    rows = fb.starts[block] + np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    rr_rank = by_row[rows]
    missing = rr_rank < 0

    def ids() -> tuple:
        chosen = np.zeros(len(rank), bool)  # ``rows`` ascend: a mask filters the arrow strings chunk by chunk
        chosen[rows] = True
        return ordered[QUERY_ID].array[chosen], ordered[DOC_ID].array[chosen]

    # the first stage's top ``depth`` rows alone (``key``): the same ids for every run reranked from it
    qid, doc = ids() if key is None else work.once("candidate ids", (first,), key, ids)
    table = pd.DataFrame(
        {
            QUERY_ID: qid,
            DOC_ID: doc,
            "first_rank": rank[rows],
            "reranked_rank": np.where(missing, np.nan, rr_rank) if missing.any() else rr_rank.astype(rank.dtype),
        }
    )
    table["reranked_query"] = held[block] > 0
    return table, key


def reordered_run(cands: pd.DataFrame, k: int, order: str) -> Run:
    """The candidate lists with only each query's top ``k`` (first-stage ranks) reordered.

    ``order`` is ``"reranked"`` (the reranked run's order; top-k candidates it lacks follow in first-stage
    order; a query it lacks altogether is left out, so it scores what the reranked run scores there) or
    ``"best"`` (gain descending). Ranks k+1.. keep first-stage order. Scores are -position, so the run's
    trec_eval order is exactly this order whatever the score precision.
    """
    if order == "reranked":
        cands = cands[cands["reranked_query"].to_numpy()]
    first = cands["first_rank"].to_numpy(dtype=np.int64)
    top = first <= k
    if order == "reranked":
        rr = cands["reranked_rank"].to_numpy(dtype=np.float64)
        within = np.where(np.isnan(rr), np.float64(2**40) + first, rr)
    elif order == "best":
        within = -cands["gain"].to_numpy(dtype=np.float64)
    else:
        raise ValueError(f"order must be 'reranked' or 'best', not {order!r}")
    secondary = np.where(top, within, first.astype(np.float64))
    codes = pd.factorize(cands[QUERY_ID], sort=True)[0]
    rows = np.lexsort((first, secondary, ~top, codes))
    position = within_group_rank(codes[rows])
    frame = pd.DataFrame(
        {
            QUERY_ID: cands[QUERY_ID].to_numpy()[rows],
            DOC_ID: cands[DOC_ID].to_numpy()[rows],
            SCORE: -position.astype(np.float64),
        }
    )
    return Run(frame=frame, path=f"<top {k} reordered: {order}>")


class _CodedCandidates:
    """The candidate table coded once for the depth curve (``code_rows``: query index, relevance code), its rows
    in (query, first-stage rank) order: every reordering of ``reordered_run`` is then a permutation of these
    rows, evaluated (``coded_values``) without building a run of strings or sorting it again."""

    def __init__(
        self,
        prepared: PreparedJudgments,
        cands: pd.DataFrame,
        first: Run | None = None,
        key: tuple | None = None,
        *,
        work: Workspace = NO_WORKSPACE,
    ) -> None:
        if prepared.index is None:
            raise ValueError("the candidates are coded against qrels (prepare_judgments of a Qrels)")
        #: with ``first``: the key under which the candidates are its top rows alone (``_candidates``), so their
        #: codes and the best order's values are shared by every run reranked from it
        self.first_run, self.key = first, key if first is not None else None
        rows, qidx, code = _candidate_codes(prepared, first, cands, self.key, work=work)  # type: ignore[arg-type]
        first = cands["first_rank"].to_numpy(dtype=np.int64)[rows]
        base = _stable_sort(qidx, first)  # np.lexsort((first, qidx)), as one key where it fits
        self.prepared = prepared
        self.qidx, self.code, self.first = qidx[base], code[base], first[base]
        rows = rows[base]
        self.reranked_rank = cands["reranked_rank"].to_numpy(dtype=np.float64)[rows]
        self.gain = cands["gain"].to_numpy(dtype=np.float64)[rows]
        self.reranked_query = cands["reranked_query"].to_numpy(dtype=bool)[rows]
        self._sorted: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._heads: dict[tuple[str, int], np.ndarray] = {}
        self._positions: tuple[list[str], np.ndarray] | None = None

    def values(self, k: int, order: str, measure: Measure, settings: EvalSettings) -> np.ndarray | None:
        """``measure`` per query (indexed like the prepared qids) of ``reordered_run(cands, k, order)``; None
        where ``evaluate`` would refuse that run (no judged query)."""
        from toolkit.evaluation.evaluate import coded_values

        qidx, code, first, sorted_rows = self._ordered(order)
        # rows are in (query, first rank) order, so each query's top k is the start of its rows and ranks k+1..
        # already follow in first-stage order: only the top k are sorted, by (query, within), ties by first rank.
        # The stable sort of every row by (query, within) keeps that order among any subset of the rows, so its
        # top-k rows are the sort of the top k (the same permutation), for every k from one sort.
        top = first <= k
        order_rows = np.arange(len(qidx))
        order_rows[top] = sorted_rows[top[sorted_rows]]
        head = self._head(order, qidx, measure, settings)
        if head is not None:  # only each query's first ``cutoff`` rows count: the others are not evaluated
            return coded_values(
                self.prepared, qidx[head], code[order_rows[head]], np.arange(len(head)), measure, settings
            )
        return coded_values(self.prepared, qidx, code, order_rows, measure, settings)

    def positions(self, qids: list[str]) -> np.ndarray:
        """Where each of ``qids`` is among the prepared qids (-1: not there); the same list for every point of
        the curve, so looked up once."""
        if self._positions is None or self._positions[0] is not qids:
            self._positions = (qids, pd.Index(self.prepared.qids.tolist()).get_indexer(qids))
        return self._positions[1]

    def _head(self, order: str, qidx: np.ndarray, measure: Measure, settings: EvalSettings) -> np.ndarray | None:
        """The positions (in each query's reordered list) up to ``measure``'s cutoff, where its value reads those
        rows alone: nDCG@k and P@k sum over the rows ranked <= k (a row's rank is its position in the list, the
        same in the cut list) with the qrels' ideal; the rows below are read only for counts neither uses (-J
        ranks the judged rows alone: there the whole list is evaluated). None where the whole list counts."""
        if measure.family not in ("ndcg_cut", "P") or not measure.cutoff or settings.judged_only:
            return None
        key = (order, int(measure.cutoff))
        if key not in self._heads:
            pos = within_group_rank(qidx)  # rows grouped by query: 1, 2, ... within each query
            self._heads[key] = np.flatnonzero(pos <= int(measure.cutoff))
        return self._heads[key]

    def _ordered(self, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows ``order`` reorders (query index, code, first rank) and their stable sort by (query, within),
        computed once per order for every depth of the curve."""
        if order in self._sorted:
            return self._sorted[order]
        qidx, code, first = self.qidx, self.code, self.first
        if order == "reranked":
            keep = self.reranked_query
            qidx, code, first = qidx[keep], code[keep], first[keep]
            rr = self.reranked_rank[keep]
            within = np.where(np.isnan(rr), np.float64(2**40) + first, rr)
        elif order == "best":
            within = -self.gain
        else:
            raise ValueError(f"order must be 'reranked' or 'best', not {order!r}")
        self._sorted[order] = (qidx, code, first, _stable_sort(qidx, within))
        return self._sorted[order]


def _stable_sort(qidx: np.ndarray, within: np.ndarray) -> np.ndarray:
    """``np.lexsort((within, qidx))``: the rows by (query, within), ties in row order. Where ``within`` holds
    whole numbers (ranks, or gains such as 2^l - 1, negated) spanning less than 2^42, one stable sort of the int64
    key query * 2^42 + (within - its least): the same order (exact integers, so the key orders as the pair does
    and ties exactly where both tie), about twice as fast."""
    if len(within) and int(qidx.max()) < 2**21 and np.isfinite(within).all():
        least, most = float(within.min()), float(within.max())
        if (
            least > -(2.0**52)
            and most < 2.0**52
            and most - least < 2.0**42
            and np.array_equal(within, np.trunc(within))
        ):
            return np.argsort((qidx.astype(np.int64) << 42) | (within - least).astype(np.int64), kind="stable")
    return np.lexsort((within, qidx))


def _curve_values(
    coded: _CodedCandidates | None,
    cands: pd.DataFrame,
    k: int,
    order: str,
    prepared: PreparedJudgments,
    measure: str,
    settings: EvalSettings,
    qids: list[str],
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.Series:
    """``measure_values`` of ``reordered_run(cands, k, order)`` over ``qids``, from the coded candidates where
    they serve (the same figures), else by building and evaluating the run."""
    ms = parse_measures([measure], settings.trec_eval)
    if coded is not None and len(ms) == 1 and ms[0].name == measure:
        if order == "best" and coded.key is not None:  # the first stage's top rows alone: once for every run
            values = work.once(
                "best order values",
                (coded.prepared, coded.first_run),
                (*coded.key, k, ms[0].name, settings),
                lambda: coded.values(k, order, ms[0], settings),
            )
        else:
            values = coded.values(k, order, ms[0], settings)
        if values is not None:
            pos = coded.positions(qids)
            return pd.Series(np.where(pos >= 0, values[pos], 0.0), index=pd.Index(qids, dtype=object), dtype=float)
    # the diagnosis's own reorderings of the user's runs, whose warnings were given on their evaluation
    return measure_values(prepared, reordered_run(cands, k, order), measure, settings, qids, warn=False, work=work)


def ideal_run(qrels: Qrels, settings: EvalSettings, measure: str = "ndcg_cut_10") -> Run:
    """Every judged document of every qrels query, scored by its ``order_keys`` for ``measure``: the best
    possible ranking."""
    judged = qrels.frame.loc[qrels.frame[RELEVANCE] >= 0]
    gains = order_keys(judged[RELEVANCE].to_numpy(dtype=np.float64), measure, settings)
    frame = pd.DataFrame({QUERY_ID: judged[QUERY_ID].to_numpy(), DOC_ID: judged[DOC_ID].to_numpy(), SCORE: gains})
    return Run(frame=frame, path="<ideal ranking of the qrels>")


def curve_depths(depth: int, requested: Iterable[int] = DEFAULT_CURVE_DEPTHS) -> list[int]:
    """The requested depths up to ``depth``, plus ``depth`` itself, ascending."""
    wanted = {int(k) for k in requested if 1 <= int(k) <= depth} | {depth}
    return sorted(wanted)


@dataclass(frozen=True)
class DecompositionSettings:
    """What every reranked run of one diagnosis is decomposed on: the ``measure`` (a trec_eval name) and the
    ``settings`` that evaluate it, the ``recall_settings`` of the curve's recall (the binary relevance level), the
    ``query_ids`` every mean is over and the curve's ``depths`` (those up to the rerank depth, plus it)."""

    measure: str
    settings: EvalSettings
    recall_settings: EvalSettings
    query_ids: Sequence[str]
    depths: Iterable[int] = DEFAULT_CURVE_DEPTHS

    def __post_init__(self) -> None:
        # held as tuples: read once per reranked run (a generator given is read here)
        object.__setattr__(self, "query_ids", tuple(self.query_ids))
        object.__setattr__(self, "depths", tuple(self.depths))


@dataclass(frozen=True)
class Decomposition:
    """The loss decomposition of one reranked run over its first stage, per query and as a depth curve.

        ``per_query``: query_id plus ``LOSS_COLUMNS``; ``curve``: depth, reranked, ceiling, recall (means over the
        queries of the split). ``missing``: the evaluated queries the reranked run lacks though the first stage
        holds them; their losses are NaN and every mean (``means``, the curve) is over the other queries, so a
        query the reranker never returned is not counted as lost in reranking. ``uncovered`` counts candidates
        of the evaluated queries the reranked run does not hold (in queries it has), ``introduced`` the reranked documents that are neither candidates nor F's tail in F's order
    (``depths.classify_documents``).
    """

    measure: str
    depth: int
    per_query: pd.DataFrame
    curve: pd.DataFrame
    listwise: bool
    uncovered: int
    introduced: int
    missing: tuple[str, ...] = ()

    def means(self) -> dict[str, float | int | str]:
        """The mean of every loss column over the queries of the split (the evaluated queries but the missing
        ones), how many those are and how many are missing."""
        split = self.per_query.loc[~self.per_query[QUERY_ID].isin(set(self.missing)).to_numpy()]
        m = {c: float(split[c].mean()) if len(split) else 0.0 for c in LOSS_COLUMNS}
        return {
            "measure": self.measure,
            "depth": self.depth,
            **m,
            "queries": len(split),
            "missing_queries": len(self.missing),
        }

    def curve_records(self) -> list[dict]:
        return [
            {
                "depth": int(r.depth),
                "reranked": float(r.reranked),
                "ceiling": float(r.ceiling),
                "recall": float(r.recall),
            }
            for r in self.curve.itertuples(index=False)
        ]

    @property
    def curve_exact(self) -> bool:
        return not self.listwise and self.uncovered == 0 and self.introduced == 0


def decompose(
    qrels: Qrels | PreparedJudgments,
    first: Run,
    reranked: Run,
    depth: int,
    on: DecompositionSettings,
    *,
    listwise: bool = False,
    first_values: pd.Series | None = None,
    reranked_values: pd.Series | None = None,
    work: Workspace = NO_WORKSPACE,
) -> Decomposition:
    """Decompose ``reranked``'s loss on ``on.measure`` over ``first``'s top ``depth``, over ``on.query_ids``.

    ``on.settings`` evaluate the measure; ``on.recall_settings`` (the binary relevance level) the curve's recall.
    Per-query values of the two runs may be passed in when the caller has them already, and the qrels
    prepared (``prepare_judgments``) so the ceiling and curve evaluations do not factorise them again. Pure.
    """
    if depth < 1:
        raise ConfigError("rerank depth must be >= 1")
    measure, settings, recall_settings = on.measure, on.settings, on.recall_settings
    prepared = prepare_judgments(qrels, work=work)
    raw = cast(Qrels, prepared.judgments)  # graded qrels: diagnose reads no preferences
    qids = list(on.query_ids)
    cands, key = _candidates(raw, first, reranked, depth, settings, measure, prepared, work=work)
    if first_values is None:
        first_values = measure_values(prepared, first, measure, settings, qids, work=work)
    if reranked_values is None:
        reranked_values = measure_values(prepared, reranked, measure, settings, qids, work=work)
    held, in_first = run_query_ids(reranked, work=work), run_query_ids(first, work=work)
    missing = tuple(q for q in qids if q not in held and q in in_first)
    split = ~pd.Index(qids).isin(set(missing))  # the queries of the split: every mean is over these

    def mean(values: pd.Series) -> float:
        v = values.to_numpy(dtype=np.float64)[split]
        return float(v.mean()) if len(v) else 0.0

    ks = curve_depths(depth, on.depths)
    # the same for every reranked run of the diagnosis (its qrels, measure, first stage): computed once
    ideal = work.once(
        "ideal",
        (prepared,),
        (measure, settings, tuple(qids)),
        lambda: measure_values(
            prepared, ideal_run(raw, settings, measure), measure, settings, qids, warn=False, work=work
        ),
    )
    recall_wide = work.once(
        "first-stage recall",
        (prepared, first),
        (tuple(ks), recall_settings, tuple(qids)),
        lambda: (
            evaluate(prepared, first, parse_measures([f"recall.{','.join(map(str, ks))}"]), recall_settings, work=work)
            .wide()
            .reindex(index=qids, fill_value=0.0)
        ),
    )
    coded = _CodedCandidates(prepared, cands, first, key, work=work) if prepared.index is not None else None
    curve = []
    for k in ks:
        at_k = _curve_values(coded, cands, k, "reranked", prepared, measure, settings, qids, work=work)
        best = _curve_values(coded, cands, k, "best", prepared, measure, settings, qids, work=work)
        curve.append(
            {
                "depth": k,
                "reranked": mean(at_k.reindex(qids, fill_value=0.0)),
                "ceiling": mean(best.reindex(qids, fill_value=0.0)),
                "recall": mean(recall_wide[f"recall_{k}"]),
            }
        )
    ceiling = best  # the last depth is the rerank depth itself: the full ceiling
    per_query = pd.DataFrame(
        {
            QUERY_ID: qids,
            "first_stage": first_values.reindex(qids).to_numpy(),
            "ceiling": ceiling.to_numpy(),
            "reranked": reranked_values.reindex(qids).to_numpy(),
            "ideal": ideal.to_numpy(),
        }
    )
    per_query["lost_in_candidates"] = per_query["ideal"] - per_query["ceiling"]
    per_query["lost_in_reranking"] = per_query["ceiling"] - per_query["reranked"]
    # a missing query's loss is neither the candidates' nor the reranker's: out of the split
    per_query.loc[~split, ["lost_in_candidates", "lost_in_reranking"]] = np.nan
    from toolkit.diagnosis.depths import classify_documents

    kinds = classify_documents(first, reranked, depth, settings.score_precision, work=work)
    wanted = set(qids)  # the query test last, on the few rows the other conditions keep (none: no test at all)

    def among_wanted(ids: pd.Series) -> int:
        return int(ids.isin(wanted).sum()) if len(ids) else 0

    introduced = among_wanted(kinds[QUERY_ID][(kinds["kind"] == "introduced").to_numpy()])
    lacking = cands["reranked_rank"].isna() & cands["reranked_query"] & (cands["first_rank"] <= depth)
    return Decomposition(
        measure=measure,
        depth=depth,
        per_query=per_query,
        curve=pd.DataFrame(curve),
        listwise=listwise,
        uncovered=among_wanted(cands[QUERY_ID][lacking.to_numpy()]),
        introduced=introduced,
        missing=missing,
    )
