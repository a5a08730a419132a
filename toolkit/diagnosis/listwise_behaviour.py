"""How a reranker treats the candidates it was given, read from the runs alone (no model is run).

- **Promotion profile.** The first stage's top ``depth`` candidates fall into rank buckets 1-10, 11-20, ...
  (the last one ends at the depth). For each bucket: the relevant candidates in it (label >= ``level``, pooled
  over queries), the share of them the reranked run puts in its top 10, and the same share for the best order
  of the candidates (the ceiling's order: by label, descending, equal labels in first-stage order). A reranker
  that never promotes from the deep buckets while the ceiling does shows it at once. With repeats, the
  reranked share is the mean over repeats.
- **Unchanged queries.** The share of queries (of those the reranked run holds) whose reranked top ``depth``
  is the first stage's top ``depth`` in the first stage's order (equal first-stage scores count as one
  position): a failed or "repaired" listwise call returns its input order.
- **Windows in input order** (with the sliding window the reranker used, ``window`` W and ``stride`` S, as
  rank_llm slides it: the first window is ranks depth-W+1..depth, each next one S ranks higher, the last at
  rank 1). For each window's ranks in the final list, whether the documents there stand in the first stage's
  order. Read from the final list alone: exact while every window before it returned its input unchanged (its
  input is then the first stage's order), an approximation after a window that changed its input.
- **The listwise record** (``listwise_record``, from the sidecar of ``twostage rerank --backend listwise``: every
  window's answer and its repairs): the answers per repair kind and the queries each touched, and the windows
  whose answer left them in their input order (exact: read from each window's own permutation), split into
  those no identifier was read from and those the LLM ranked as given. What each repair does is
  ``REPAIR_EFFECTS``: only an answer without an identifier leaves its window as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import cast

import numpy as np
import pandas as pd

from toolkit.data.columns import among, arrow_of, coded_isin, coded_merge
from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, top_k
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.diagnosis.depths import aligned, rerank_shapes
from toolkit.evaluation.evaluate import PreparedJudgments

BUCKET = 10
TOP = 10
#: what each of rank_llm's repairs does to a window's order (the kinds of ``twostage rerank --backend listwise``)
REPAIR_EFFECTS = MappingProxyType(
    {
        "none_parsed": "no identifier read (or one int() refuses): the window keeps its input order",
        "duplicates": "an identifier named again: its first place kept, the repeats dropped",
        "unknown": "an identifier outside the window: dropped",
        "missing": "passages not named: placed below the named ones, in their input order",
    }
)


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def listwise_record(meta) -> dict | None:
    """The listwise record of a reranked run's sidecar (its ``records``: one per window, the run's own, not the
    order probe's): ``windows`` answers, ``passes``, ``repaired`` answers that needed a repair, ``repairs``
    {kind: {answers, queries}} for each of ``REPAIR_EFFECTS`` (queries sorted), ``left_in_input_order``
    {count, none_parsed, answered, queries {query: windows}}; None for a sidecar without records. A record that
    is not as twostage writes it is skipped (and counted in ``unreadable``)."""
    records = meta.get("records") if isinstance(meta, dict) else None
    if not isinstance(records, list):
        return None
    repairs: dict[str, dict] = {k: {"answers": 0, "queries": set()} for k in REPAIR_EFFECTS}
    left: dict[str, int] = {}
    left_none = windows = repaired = unreadable = 0
    passes = 1
    for r in records:
        if not isinstance(r, dict) or r.get("shuffle", 0) != 0 or "http_error" in r:
            continue
        q, kinds, perm, docs = r.get("query_id"), r.get("repairs"), r.get("permutation"), r.get("docs")
        if not (
            isinstance(q, str)
            and isinstance(kinds, list)
            and all(k in REPAIR_EFFECTS for k in kinds)
            and isinstance(perm, list)
            and all(_whole(i) for i in perm)
            and isinstance(docs, list)
        ):
            unreadable += 1
            continue
        windows += 1
        passes = max(passes, r["pass"]) if _whole(r.get("pass")) else passes
        repaired += bool(kinds)
        for k in kinds:
            repairs[k]["answers"] += 1
            repairs[k]["queries"].add(q)
        if perm == list(range(1, len(docs) + 1)):
            left[q] = left.get(q, 0) + 1
            left_none += "none_parsed" in kinds
    count = sum(left.values())
    return {
        "windows": windows,
        "passes": passes,
        "repaired": repaired,
        "repairs": {k: {"answers": v["answers"], "queries": sorted(v["queries"])} for k, v in repairs.items()},
        "left_in_input_order": {
            "count": count,
            "none_parsed": left_none,
            "answered": count - left_none,
            "queries": dict(sorted(left.items())),
        },
        "unreadable": unreadable,
    }


def buckets(depth: int, size: int = BUCKET) -> list[tuple[int, int]]:
    """(first rank, last rank) of each bucket up to ``depth``: (1, 10), (11, 20), ..., (.., depth)."""
    return [(lo, min(lo + size - 1, depth)) for lo in range(1, depth + 1, size)]


def promotion_profile(
    qrels: Qrels,
    first: Run,
    runs: Sequence[Run],
    depth: int,
    query_ids: Sequence[str],
    level: int = 1,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    prepared: PreparedJudgments | None = None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> list[dict]:
    """Per first-stage rank bucket: ``relevant`` candidates (label >= ``level``) over ``query_ids``, how many
    the reranked run puts in its top 10 (``reranked_top_10``: the mean over ``runs``, the repeats) and the best
    order does (``ceiling_top_10``), and both as shares of ``relevant``. ``prepared``: ``qrels`` prepared
    (``prepare_judgments``), whose index gives the labels without joining the qrels' strings again."""

    read = _aligned_profile(qrels, first, runs, depth, query_ids, level, score_precision, prepared, work=work)
    if read is not None:
        rank, label, in_top, key = read
    else:
        (rank, label, in_top), key = (
            _joined_profile(qrels, first, runs, depth, query_ids, score_precision, work=work),
            None,
        )

    def best_top() -> np.ndarray:
        # the best order: label descending, equal labels in first-stage order; its top 10 (the candidates: each
        # query's rows together, in first-stage order, beginning at rank 1)
        query = np.cumsum(rank == 1)
        best = np.lexsort((rank, -label, query))
        starts = np.flatnonzero(np.r_[True, query[best][1:] != query[best][:-1]]) if len(best) else best
        place = np.arange(len(best)) - np.repeat(starts, np.diff(np.append(starts, len(best))))
        top = np.zeros(len(rank), bool)
        top[best[place < TOP]] = True
        return top

    # the candidates are the first stage's alone: its best order is the same for every run reranked from it
    in_best_top = best_top() if key is None else work.once("profile best top", (prepared, first), key, best_top)
    is_rel = label >= level
    in_best = in_best_top[is_rel]
    in_runs = [x(is_rel) for x in in_top]
    ranks = rank[is_rel]
    out = []
    for lo, hi in buckets(depth):
        sel = (ranks >= lo) & (ranks <= hi)
        n = int(sel.sum())
        reranked = float(np.mean([x[sel].sum() for x in in_runs])) if in_runs else 0.0
        ceiling = int(in_best[sel].sum())
        out.append(
            {
                "bucket": f"{lo}-{hi}",
                "from": lo,
                "to": hi,
                "relevant": n,
                "reranked_top_10": reranked,
                "reranked_share": reranked / n if n else None,
                "ceiling_top_10": ceiling,
                "ceiling_share": ceiling / n if n else None,
            }
        )
    return out


_InTop = Callable[[np.ndarray], np.ndarray]


def _joined_profile(
    qrels: Qrels,
    first: Run,
    runs: Sequence[Run],
    depth: int,
    query_ids: Sequence[str],
    score_precision: str,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[np.ndarray, np.ndarray, list[_InTop]]:
    """The first stage's top ``depth`` of ``query_ids``: each candidate's rank and label (-1: none), and per run
    which of the chosen candidates it puts in its top 10; ids joined as strings."""

    cands = top_k(first.frame, depth, score_precision, work=work)[[QUERY_ID, DOC_ID, "rank"]]  # type: ignore[arg-type]
    cands = cands.loc[among(arrow_of(cands[QUERY_ID]), query_ids)].reset_index(drop=True)
    labels = coded_merge(cands, qrels.frame[[QUERY_ID, DOC_ID, RELEVANCE]], [QUERY_ID, DOC_ID])[RELEVANCE]
    label = labels.fillna(-1).to_numpy(dtype=np.float64)

    def in_top(run: Run) -> _InTop:
        top = top_k(run.frame, TOP, score_precision, work=work)[[QUERY_ID, DOC_ID]]  # type: ignore[arg-type]
        return lambda chosen: coded_isin(cands.loc[chosen], top, [QUERY_ID, DOC_ID])

    return cands["rank"].to_numpy(), label, [in_top(run) for run in runs]


def _aligned_profile(
    qrels: Qrels,
    first: Run,
    runs: Sequence[Run],
    depth: int,
    query_ids: Sequence[str],
    level: int,
    score_precision: str,
    prepared: PreparedJudgments | None,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[np.ndarray, np.ndarray, list[_InTop], tuple] | None:
    """``_joined_profile`` read from each run's alignment with the first stage (``depths.alignment``, computed
    once per diagnosis) and the labels from the prepared judgments' index: no string joined. None where the
    join could differ or the index does not serve (no workspace; a pair judged twice; a level
    below 0, where a negative label and a missing one would differ). With them the key under which the
    candidates' ranks and labels (the first stage's top rows alone) are shared by the runs reranked from it."""

    from toolkit.data.ranking import order_run
    from toolkit.diagnosis.depths import alignment, top_rows

    index = prepared.index if prepared is not None and prepared.judgments is qrels else None
    if not work.keeps or index is None or level < 0 or (index.qkeys[1:] == index.qkeys[:-1]).any():
        return None
    from toolkit.measures.ranked import code_rows

    aligns = [alignment(first, run, score_precision, work=work) for run in runs]
    if not aligns:
        return None
    fb = aligns[0].first  # the first stage's blocks: the same in every alignment with it
    key = (depth, score_precision, tuple(str(q) for q in query_ids))

    def candidates() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        asked = np.flatnonzero(among(fb.qids, key[2]))
        rows, _ = top_rows(fb, asked, depth)
        ordered = order_run(first.frame, score_precision, work=work)  # type: ignore[arg-type]
        chosen = np.zeros(len(ordered), bool)  # ``rows`` ascend: a mask filters the arrow strings chunk by chunk
        chosen[rows] = True
        found, _, code = code_rows(index, ordered[QUERY_ID][chosen], ordered[DOC_ID][chosen])
        label = np.full(len(rows), -1.0)
        label[found] = np.where(code >= 0, code, -1)  # unjudged, a negative label: below every level >= 0
        return rows, ordered["rank"].to_numpy()[rows], label

    rows, rank, label = work.once("profile candidates", (prepared, first), key, candidates)

    def in_top(al) -> _InTop:
        top = np.zeros(len(al.first_rank), bool)
        top[al.row_in_first[(al.ordered["rank"].to_numpy() <= TOP) & (al.row_in_first >= 0)]] = True
        return lambda chosen: top[rows[chosen]]

    return rank, label, [in_top(al) for al in aligns], key


def unchanged_share(
    first: Run,
    run: Run,
    depth: int,
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[int, int]:
    """(queries whose reranked top ``depth`` is the first stage's in its order, queries the run holds)."""
    import pyarrow as pa

    shapes = rerank_shapes(first, run, score_precision, work=work)
    # the query test in arrow (an arrow-string index's ``isin`` makes an arrow scalar of every query id asked)
    asked = among(pa.array(shapes.index.array), query_ids)
    fc = shapes["first_change"].to_numpy()[asked]
    return int(((fc == 0) | (fc > depth)).sum()), int(asked.sum())


def window_spans(length: int, window: int, stride: int) -> list[tuple[int, int]]:
    """0-based [start, end) of each sliding window over the top ``length``, in the order rank_llm processes
    them: from the bottom up, each ``stride`` ranks higher, the last one at rank 1."""
    spans = []
    end = length
    while end > 0:
        start = max(0, end - window)
        spans.append((start, end))
        if start == 0:
            break
        end -= stride
    return spans


def windows_in_order(
    first: Run,
    run: Run,
    depth: int,
    window: int,
    stride: int,
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[int, int]:
    """(windows whose ranks in the final list hold their documents in the first stage's order, windows)."""

    a = aligned(first, run, score_precision, work=work)
    asked = among(arrow_of(a[QUERY_ID]), query_ids)
    groups = a["group"].to_numpy(dtype=np.float64)[asked]
    starts = np.flatnonzero(a["rank"].to_numpy()[asked] == 1)  # each query's rows, beginning at rank 1
    lengths = np.minimum(np.diff(np.append(starts, len(groups))), depth)
    # per prefix: rows whose group is NaN, and steps down (a group below the one before it)
    nans = np.concatenate([[0], np.cumsum(np.isnan(groups))])
    down = np.concatenate([[0, 0], np.cumsum(groups[1:] < groups[:-1])])
    same = total = 0
    for length in np.unique(lengths):
        first_rows = starts[lengths == length]
        for start, end in window_spans(int(length), window, stride):
            lo, hi = first_rows + start, first_rows + end
            ordered = (nans[hi] == nans[lo]) & (down[hi] == down[lo + 1])
            total += len(first_rows)
            same += int(ordered.sum())
    return same, total


@dataclass(frozen=True)
class ListwiseSidecar:
    """What a listwise reranker's run says of how it was made, beyond its ranks (its sidecar; the window and
    stride may be given instead): the sliding ``window`` and ``stride`` it used, the order ``probe`` its sidecar
    records (``shuffles``: n, seed, mean_rbo, and with qrels the nDCG@10 spread ``ndcg_cut_10``) and its listwise
    ``record`` (``listwise_record``)."""

    window: int | None = None
    stride: int | None = None
    probe: dict | None = None
    record: dict | None = None


def listwise_behaviour(
    qrels: Qrels | PreparedJudgments,
    first: Run,
    runs: Sequence[Run],
    depth: int,
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    level: int = 1,
    sidecar: ListwiseSidecar = ListwiseSidecar(),
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict:
    """The promotion profile, the unchanged queries and (with the sidecar's ``window`` and ``stride``) the
    windows in input order of a reranked system (its repeats pooled: counts summed over them); the sidecar's
    ``probe`` is passed on as ``order_probe``, and its ``record`` as ``listwise_record``. ``qrels`` prepared
    (``prepare_judgments``): the promotion profile reads the labels from its index."""
    prepared = qrels if isinstance(qrels, PreparedJudgments) else None
    if prepared is not None:
        qrels = cast(Qrels, prepared.judgments)  # graded qrels: diagnose reads no preferences
    window, stride, probe, record = sidecar.window, sidecar.stride, sidecar.probe, sidecar.record
    unchanged = [unchanged_share(first, run, depth, query_ids, score_precision, work=work) for run in runs]
    same, held = sum(u for u, _ in unchanged), sum(n for _, n in unchanged)
    out: dict = {
        "relevance_level": level,
        "promotion_profile": promotion_profile(
            qrels, first, runs, depth, query_ids, level, score_precision, prepared, work=work
        ),
        "unchanged_queries": same / held if held else 0.0,
        "unchanged_query_count": same,
        "queries_compared": held,
    }
    if window:
        w = [
            windows_in_order(first, run, depth, window, stride or window, query_ids, score_precision, work=work)
            for run in runs
        ]
        in_order, total = sum(x for x, _ in w), sum(n for _, n in w)
        out["windows"] = {
            "window": window,
            "stride": stride or window,
            "windows": total,
            "in_input_order": in_order,
            "share": in_order / total if total else 0.0,
        }
    if probe and probe.get("mean_rbo") is not None:
        out["order_probe"] = {k: probe.get(k) for k in ("n", "seed", "top", "p", "mean_rbo")}
        spread = probe.get("ndcg_cut_10")
        if isinstance(spread, dict) and isinstance(spread.get("mean_range"), (int, float)):
            keys = ("queries", "run", "min", "max", "std", "mean_range")
            out["order_probe"]["ndcg_cut_10"] = {k: spread.get(k) for k in keys}
    if record is not None:
        out["listwise_record"] = record
    return out


def profile_frame(profile: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(profile))
