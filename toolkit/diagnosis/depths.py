"""The rerank depth of a reranked run, and which of its documents are candidates, the first stage's tail, or
introduced.

Rerankers write their runs in two shapes. A pointwise reranker usually writes the candidates it scored and
nothing else. An LLM listwise reranker (castorini/rank_llm) that reranked only the first stage's top k writes
those k in its order *followed by the first stage's ranks below k in the first stage's own order*: a run of
100 documents per query whose rerank depth is 20. Taking that run's longest list as its depth diagnoses it as
a rerank of 100 and blames the reranker for what the candidates lacked.

Both shapes obey one rule, which gives the depth from the two runs alone:

    **the run's top k are the first stage's top k reordered, and its ranks below k repeat the first stage's
    ranks below k, in the first stage's order.**

For one query the rule holds at every k from the query's *last change* on: the last position (1-based) where
the reranked list departs from the first stage's list (0 when it never does), provided its documents above that
position are the first stage's documents above it. Positions compare by the first stage's tie groups (equal
scores at the score precision), so a tail written in another order among equal scores still repeats it. Both
runs are read in trec_eval order (``ranking.order_run``).

The detected depth is the smallest k >= 1 at which the rule holds for at least ``DETECT_SHARE`` of the queries
both runs hold (the *shared* queries: a query only the reranked run holds says nothing about the depth and is
left out, counted as ``foreign``); the share it held for is reported beside it ("detected on 43 of 43 shared
queries"). When the rule holds at no depth for that share of queries, nothing is detected, and ``diagnose``
stops with an error naming the run and the option that gives its depth (never a fallback to its longest list).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from toolkit.data.columns import arrow_of, coded_map, coded_merge
from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run, shared
from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, Run

#: The share of queries the rule must hold for at the detected depth ("nearly every query": 2 of DL19's 43
#: queries may differ, e.g. a failed model call that dropped a document).
DETECT_SHARE = 0.95
DEPTH_RULE = (
    "the smallest k at which the run's top k are the first stage's top k reordered and its ranks below k repeat "
    "the first stage's ranks below k in the first stage's order (equal first-stage scores count as one position)"
)
#: Where a reranked run's depth came from, in the order they are tried.
DEPTH_SOURCES = ("option", "given", "sidecar", "detected")


def ranked_with_groups(frame: pd.DataFrame, score_precision: str = DEFAULT_SCORE_PRECISION) -> pd.DataFrame:
    """``frame`` in trec_eval order with ``rank`` and ``group``: an id shared by the documents of one query with
    equal scores at ``score_precision`` (unique across queries)."""
    return shared(
        "ranked_with_groups", (frame,), (score_precision,), lambda: _ranked_with_groups(frame, score_precision)
    )


def _ranked_with_groups(frame: pd.DataFrame, score_precision: str) -> pd.DataFrame:
    ordered = order_run(frame, score_precision)  # type: ignore[arg-type]
    scores = ordered[SCORE].to_numpy(dtype=np.float64)
    if score_precision == "float32":
        scores = scores.astype(np.float32).astype(np.float64)
    qids = ordered[QUERY_ID].to_numpy()
    new = np.ones(len(ordered), dtype=bool)
    if len(ordered) > 1:
        new[1:] = (qids[1:] != qids[:-1]) | (scores[1:] != scores[:-1])
    ordered["group"] = np.cumsum(new)
    return ordered


def aligned(first: Run, reranked: Run, score_precision: str = DEFAULT_SCORE_PRECISION) -> pd.DataFrame:
    """The reranked run in trec_eval order, one row per document: query_id, doc_id, ``rank``, ``first_rank``
    and ``group`` (the document's rank and tie group in the first stage; NaN when the first stage lacks it),
    and ``match``: whether the first stage's document at the same rank is in the same tie group."""
    return shared("aligned", (first, reranked), (score_precision,), lambda: _aligned(first, reranked, score_precision))


def _aligned(first: Run, reranked: Run, score_precision: str) -> pd.DataFrame:
    f = ranked_with_groups(first.frame, score_precision)[[QUERY_ID, DOC_ID, "rank", "group"]]
    r = order_run(reranked.frame, score_precision)[[QUERY_ID, DOC_ID, "rank"]]  # type: ignore[arg-type]
    # only first-stage rows that can match: a document the reranked run holds, a rank it has (the same join)
    first_docs = arrow_of(f[DOC_ID])
    held = pc.is_in(first_docs, value_set=pc.unique(arrow_of(r[DOC_ID])).cast(first_docs.type))
    fd = f.loc[held.to_numpy(zero_copy_only=False)]
    r = coded_merge(r, fd.rename(columns={"rank": "first_rank"}), [QUERY_ID, DOC_ID])
    f = f.loc[f["rank"].to_numpy() <= (int(r["rank"].max()) if len(r) else 0)]
    at = f[[QUERY_ID, "rank", "group"]].rename(columns={"group": "group_at_rank"})
    r = coded_merge(r, at, [QUERY_ID, "rank"])
    r["match"] = (r["group"] == r["group_at_rank"]).to_numpy()  # NaN never matches
    return r.drop(columns="group_at_rank")


def rerank_shapes(first: Run, reranked: Run, score_precision: str = DEFAULT_SCORE_PRECISION) -> pd.DataFrame:
    """Per query both runs hold (index query_id): ``length`` (its list), ``first_length``,
    ``first_change`` and ``last_change`` (the first and last rank where it departs from the first stage's order;
    0 when it never does) and ``reorders``: its ranks above ``last_change`` are the first stage's documents
    above it (so the depth rule holds at every k >= last_change)."""
    return shared("shapes", (first, reranked), (score_precision,), lambda: _shapes(first, reranked, score_precision))


def _shapes(first: Run, reranked: Run, score_precision: str) -> pd.DataFrame:
    in_first = reranked.frame[QUERY_ID].isin(set(first.frame[QUERY_ID].unique().tolist()))
    if not bool(in_first.all()):  # a query only the reranked run holds has no first-stage order to compare with
        reranked = Run(frame=reranked.frame.loc[in_first.to_numpy()], path=reranked.path)
    a = aligned(first, reranked, score_precision)
    first_len = shared("sizes", (first.frame,), (), lambda: first.frame.groupby(QUERY_ID).size())
    changed = a.loc[~a["match"].to_numpy()]
    by_q = a.groupby(QUERY_ID, sort=True)
    out = pd.DataFrame({"length": by_q.size()})
    out["first_length"] = first_len.reindex(out.index).fillna(0).astype(int)
    g = changed.groupby(QUERY_ID)["rank"]
    out["first_change"] = g.min().reindex(out.index).fillna(0).astype(int)
    out["last_change"] = g.max().reindex(out.index).fillna(0).astype(int)
    # above last_change: the same multiset of first-stage tie groups as the first stage's own ranks there
    lc = coded_map(a[QUERY_ID], out["last_change"]).to_numpy()
    top_r = a.loc[a["rank"].to_numpy() <= lc, [QUERY_ID, "group"]]
    f = ranked_with_groups(first.frame, score_precision)
    f = f.loc[f["rank"].to_numpy() <= (int(out["last_change"].max()) if len(out) else 0)]  # the rows read below
    f = f.loc[f[QUERY_ID].isin(out.index)]
    top_f = f.loc[f["rank"].to_numpy() <= coded_map(f[QUERY_ID], out["last_change"]).to_numpy(), [QUERY_ID, "group"]]
    ok = pd.Series(True, index=out.index)
    ok &= (top_r.groupby(QUERY_ID).size().reindex(out.index, fill_value=0)) == (
        top_f.groupby(QUERY_ID).size().reindex(out.index, fill_value=0)
    )
    ok &= ~top_r["group"].isna().groupby(top_r[QUERY_ID]).any().reindex(out.index, fill_value=False)
    same = ok[ok].index
    rs = top_r.loc[top_r[QUERY_ID].isin(same)].sort_values([QUERY_ID, "group"])
    fs = top_f.loc[top_f[QUERY_ID].isin(same)].sort_values([QUERY_ID, "group"])
    equal = pd.Series(rs["group"].to_numpy(dtype=np.float64) == fs["group"].to_numpy(dtype=np.float64))
    ok.loc[same] = equal.groupby(rs[QUERY_ID].to_numpy()).all().reindex(same, fill_value=True).to_numpy()
    out["reorders"] = ok.to_numpy()
    out.index = out.index.astype(str)
    return out


@dataclass(frozen=True)
class DepthDetection:
    """The detected rerank depth (None when the rule held for too few queries at every depth), the queries
    compared (those both runs hold), how many of them the rule held for at that depth (at best, when none), and
    ``foreign``: the reranked run's queries the first stage lacks, left out of the detection."""

    depth: int | None
    queries: int
    held: int
    unchanged: int
    rule: str = DEPTH_RULE
    required_share: float = DETECT_SHARE
    foreign: int = 0

    @property
    def share(self) -> float:
        return self.held / self.queries if self.queries else 0.0

    def describe(self) -> str:
        """One sentence: the rule and the share of queries it held for."""
        left_out = f"; {self.foreign} queries only in the reranked run left out" if self.foreign else ""
        if self.depth is None:
            return (
                f"no depth detected: {DEPTH_RULE} holds at no depth for {self.required_share:.0%} of the shared "
                f"queries (at most {self.held} of {self.queries}{left_out})"
            )
        return (
            f"detected on {self.held} of {self.queries} shared queries: the rule holds at k = {self.depth} "
            f"({self.share:.1%}{left_out})"
        )

    def as_dict(self) -> dict:
        return {
            "depth": self.depth,
            "rule": self.rule,
            "required_share": self.required_share,
            "queries": self.queries,
            "shared_queries": self.queries,
            "queries_only_in_reranked": self.foreign,
            "held": self.held,
            "share": self.share,
            "unchanged_queries": self.unchanged,
        }


def detect_depth(
    first: Run, reranked: Run, score_precision: str = DEFAULT_SCORE_PRECISION, share: float = DETECT_SHARE
) -> DepthDetection:
    """The smallest k >= 1 at which the depth rule (module docstring) holds for at least ``share`` of the
    queries both runs hold (the reranked run's other queries are counted as ``foreign``)."""
    shapes = rerank_shapes(first, reranked, score_precision)
    foreign = len(set(reranked.frame[QUERY_ID].unique().tolist()) - set(first.frame[QUERY_ID].unique().tolist()))
    return detection_of(shapes, share, foreign)


def detection_of(shapes: pd.DataFrame, share: float = DETECT_SHARE, foreign: int = 0) -> DepthDetection:
    """``detect_depth`` from ``rerank_shapes`` (over the shared queries) and the count of foreign queries."""
    n = len(shapes)
    valid = shapes["reorders"].to_numpy()
    last = shapes["last_change"].to_numpy()
    unchanged = int((valid & (last == 0)).sum())
    best = 0
    for k in sorted({int(x) for x in last[valid] if x > 0}):
        held = int((valid & (last <= k)).sum())
        best = max(best, held)
        if n and held / n >= share - 1e-12:
            return DepthDetection(k, n, held, unchanged, required_share=share, foreign=foreign)
    return DepthDetection(None, n, max(best, unchanged), unchanged, required_share=share, foreign=foreign)


def classify_documents(
    first: Run, reranked: Run, depth: int | None, score_precision: str = DEFAULT_SCORE_PRECISION
) -> pd.DataFrame:
    """The reranked run's documents (``aligned``) with ``kind``: ``candidate`` (in the first stage's top
    ``depth``; its whole list when ``depth`` is None), ``tail`` (below the depth in the first stage and placed
    below the depth where the first stage has it: the first stage's own order) or ``introduced`` (anything
    else: not in the first stage at all, or a document from below the depth moved out of its first-stage
    place); and ``in_first_stage``."""
    args = (depth, score_precision)
    return shared("classify", (first, reranked), args, lambda: _classify(first, reranked, depth, score_precision))


def _classify(first: Run, reranked: Run, depth: int | None, score_precision: str) -> pd.DataFrame:
    a = aligned(first, reranked, score_precision)
    fr = a["first_rank"].to_numpy(dtype=np.float64)
    inside = ~np.isnan(fr)
    cand = inside if depth is None else inside & (fr <= depth)
    tail = inside & ~cand & (a["rank"].to_numpy() > (depth or 0)) & a["match"].to_numpy(dtype=bool)
    a["kind"] = np.where(cand, "candidate", np.where(tail, "tail", "introduced"))
    a["in_first_stage"] = inside
    return a
