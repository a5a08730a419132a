"""The holes in the judgments, quantified: the lowest and highest value a measure can take over every labelling of
a run's unjudged documents: those in the top k (``over="top-k"``), or every one it retrieved (``"retrieved"``).

trec_eval counts an unjudged document (absent from the qrels, or with a negative label) as non-relevant, so a
low score may be a judging gap rather than a ranking failure. For each query, the unjudged documents among the
run's top k (trec_eval's order) are given every labelling with labels from the qrels' own scale (its
non-negative labels, plus 0: a hole may always be non-relevant), the ideal ranking is recomputed for each
labelling (the labelled documents join the qrels), and the extremes are kept:

- ``P.k`` = relevant in the top k / k: the lowest is every hole non-relevant (trec_eval's value), the highest
  every hole relevant (when the scale has a label >= the relevance level). Closed form, exact.
- ``recall.k`` = relevant in the top k / relevant judged: a relevant hole adds one to both, and
  (r + x) / (R + x) grows with x (r <= R), so the extremes are again all non-relevant / all relevant. Exact.
- ``ndcg_cut.k``: a relevant hole raises DCG but may raise the ideal DCG more (it joins the ideal ranking), so
  the lowest nDCG is not always "every hole 0" nor the highest "every hole at the top label". For a fixed
  multiset of hole labels the ideal DCG is fixed, and DCG is largest when the highest labels take the holes
  ranked highest and smallest in the reverse assignment (rearrangement inequality: discounts decrease with rank).
  So the exact extremes come from enumerating the multisets of labels (C(h + L - 1, L - 1) of them for h holes
  and L labels: 286 for 10 holes and 4 labels), each with its two sorted assignments: exact for every h.
  Beyond ``MAX_MULTISETS`` multisets (e.g. 100 holes on a 4-level scale) the bounds are the looser
  min DCG / max ideal DCG and max DCG / min ideal DCG (still bounds, not attained), and ``exact`` says so.
  Gains are the settings' (``--gain``), the discount trec_eval's log2.

What the bounds range over (``over``, ``HOLES_OVER``):

- ``top-k`` (the default, ``--holes``): the unjudged documents in the top k; the ideal ranking is computed from
  the judged documents plus those holes. Unjudged documents the run ranks below k are left out of both, so the
  bounds are those of "the top-k holes labelled", not of every labelling of the run's unjudged documents.
- ``retrieved`` (``--holes-over retrieved``): every unjudged document the run retrieved (all its lines, or the top
  ``-M``), the ideal recomputed. A hole below k cannot enter the top k, so it only joins the ideal ranking
  (nDCG) or the relevant count (recall): the lowest value labels every such hole at the scale's top label
  (largest ideal / relevant count), the highest labels them non-relevant (the top-k highest). P.k is the same
  under both. Exact wherever the top-k bounds are.

A query with no hole in what the bounds range over has min = max = trec_eval's value and gap exactly 0.

Beside them: trec_eval's value (holes as non-relevant), always within the bounds, and the judged-only value
(``-J``: holes removed before ranking, "condensed lists", Sakai 2007). Means over queries of the per-query
extremes are the extremes of the mean (each query's holes are labelled independently). Two runs share
documents, so the bounds of a difference are at most as wide as the two intervals say: overlapping intervals
mean *some* labelling could erase or reverse the difference, a conservative warning.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.errors import ConfigError

SUPPORTED = ("ndcg_cut", "P", "recall")
#: What the bounds range over: the holes in the top k, or every unjudged document the run retrieved.
HOLES_OVER = ("top-k", "retrieved")
#: The words every output uses for each (``--holes``, ``--holes-over retrieved``).
OVER_WORDS = {
    "top-k": "every labelling of the unjudged documents in the top k (the ideal ranking from the judged documents "
    "plus those)",
    "retrieved": "every labelling of every unjudged document the run retrieved (the ideal ranking recomputed)",
}
#: Short form, for verdicts and table notes.
OVER_SHORT = {"top-k": "the top-k holes", "retrieved": "the retrieved holes"}
MAX_MULTISETS = 200_000
COLUMNS = ("value", "min", "max", "condensed", "gap", "unjudged", "exact")


@dataclass(frozen=True)
class HoleBounds:
    """One measure's bounds: ``per_query`` (index query_id; columns value = trec_eval's, min, max, condensed =
    judged-only, gap = max - min, unjudged = the holes the bounds range over (``over``), exact = whether min/max are attained)."""

    measure: str
    per_query: pd.DataFrame
    over: str = "top-k"

    def mean(self) -> dict[str, float]:
        """Means over the evaluated queries of value, min, max, condensed and gap."""
        t = self.per_query
        n = len(t)
        return {c: float(t[c].sum() / n) if n else 0.0 for c in ("value", "min", "max", "condensed", "gap")}

    @property
    def exact(self) -> bool:
        return bool(self.per_query["exact"].all())


def _scale(qrels: Qrels) -> list[int]:
    labels = sorted({int(v) for v in qrels.frame[RELEVANCE].unique() if v >= 0} | {0})
    return labels


def _ideal(gains: np.ndarray, k: int, disc: np.ndarray) -> float:
    top = np.sort(gains[gains > 0])[::-1][:k]
    return float((top * disc[: len(top)]).sum())


def _ideals(judged_gains: np.ndarray, sets: np.ndarray, k: int, disc: np.ndarray) -> np.ndarray:
    """The ideal DCG@k of the judged gains joined by each row of ``sets`` (in row chunks)."""
    top = np.sort(judged_gains[judged_gains > 0])[::-1][:k]
    out = np.empty(len(sets))
    step = max(1, 2_000_000 // max(sets.shape[1] + len(top), 1))
    for i in range(0, len(sets), step):
        block = sets[i : i + step]
        both = np.concatenate([np.broadcast_to(top, (len(block), len(top))), np.where(block > 0, block, 0.0)], axis=1)
        best = -np.sort(-both, axis=1)[:, :k]
        out[i : i + step] = best @ disc[: best.shape[1]]
    return out


@functools.lru_cache(maxsize=256)
def _multisets(gains: tuple[float, ...], h: int) -> np.ndarray:
    """Every multiset of ``h`` gains from ``gains`` (descending), one per row, each row descending (read-only)."""
    sets = np.array(list(itertools.combinations_with_replacement(gains, h)), dtype=np.float64)
    sets.flags.writeable = False
    return sets


@functools.lru_cache(maxsize=8192)
def _ideals_of(top: tuple[float, ...], gains: tuple[float, ...], h: int, k: int) -> np.ndarray:
    """``_ideals`` for a query whose judged positive gains, descending, cut at k, are ``top``: many queries
    (and every run of one query) share it."""
    disc = 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))
    out = _ideals(np.array(top, dtype=np.float64), _multisets(gains, h), k, disc)
    out.flags.writeable = False
    return out


def ndcg_bounds(
    judged_gains: np.ndarray,
    top_gains: np.ndarray,
    hole_ranks: np.ndarray,
    scale_gains: list[float],
    k: int,
) -> tuple[float, float, bool]:
    """(lowest, highest, exact) nDCG@k of one query over every labelling of its holes.

    ``judged_gains``: the gains of every judged document of the query (the ideal ranking's pool);
    ``top_gains``: the gains of the run's top k in order with 0 at the holes; ``hole_ranks``: the 1-based ranks
    of the holes; ``scale_gains``: the gains a hole may take.
    """
    disc = 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))
    base = float((top_gains * disc[: len(top_gains)]).sum())
    h = len(hole_ranks)
    g = sorted({float(x) for x in scale_gains})
    if h == 0:
        ideal = _ideal(judged_gains, k, disc)
        v = base / ideal if ideal > 0 else 0.0
        return v, v, True
    w = disc[np.asarray(hole_ranks) - 1]  # decreasing with rank
    n_sets = math.comb(h + len(g) - 1, len(g) - 1)
    if n_sets > MAX_MULTISETS:
        ideal_lo = _ideal(judged_gains, k, disc)
        ideal_hi = _ideal(np.concatenate([judged_gains, np.full(h, max(g))]), k, disc)
        hi_dcg = base + float((w * max(g)).sum())
        lo = base / ideal_hi if ideal_hi > 0 else 0.0
        hi = hi_dcg / ideal_lo if ideal_lo > 0 else (1.0 if hi_dcg > 0 else 0.0)
        return lo, min(hi, 1.0), False
    sets = _multisets(tuple(g[::-1]), h)  # rows descending
    best = base + sets @ w  # highest gains on the highest-ranked holes
    worst = base + sets[:, ::-1] @ w
    top = np.sort(judged_gains[judged_gains > 0])[::-1][:k]  # all _ideals reads of the judged gains
    ideals = _ideals_of(tuple(top.tolist()), tuple(g[::-1]), h, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = np.where(ideals > 0, best / ideals, 0.0)
        lo = np.where(ideals > 0, worst / ideals, 0.0)
    return float(lo.min()), float(hi.max()), True


def _query_tables(qrels: Qrels, run: Run, k: int, score_precision: str, query_ids=None):
    """Per query: the top k (doc ids in trec_eval order) and the judged labels {doc: label >= 0}. With
    ``query_ids``, the top k of those queries, each made when read (``agreement.RankedLists``)."""
    from toolkit.data.ranking import shared, top_k

    if query_ids is not None:
        from toolkit.evaluation.agreement import RankedLists

        tops = RankedLists(run, list(query_ids), score_precision, depth=k)
    else:
        top = top_k(run.frame, k, score_precision)  # type: ignore[arg-type]
        tops = {q: g[DOC_ID].tolist() for q, g in top.groupby(QUERY_ID, sort=False)}
    return tops, shared("hole_labels", (qrels.frame,), (), lambda: _labels(qrels))


def _labels(qrels: Qrels) -> dict[str, dict[str, int]]:
    judged = qrels.frame[qrels.frame[RELEVANCE] >= 0]
    return {q: dict(zip(g[DOC_ID], g[RELEVANCE].astype(int))) for q, g in judged.groupby(QUERY_ID, sort=False)}


def check_over(over: str) -> str:
    """``over`` when it is one of ``HOLES_OVER``, else a ConfigError naming the choices."""
    if over not in HOLES_OVER:
        raise ConfigError(f"hole bounds range over one of {', '.join(HOLES_OVER)}, not {over!r}")
    return over


def hole_bounds(qrels: Qrels, run: Run, measures, settings=None, over: str = "top-k") -> dict[str, HoleBounds]:
    """Bounds of every ``ndcg_cut``, ``P`` and ``recall`` measure in ``measures`` (parsed ``Measure``s) for
    ``run``, on the queries trec_eval evaluates under ``settings``, over the labellings of the holes ``over``
    names (``top-k`` or ``retrieved``; see the module docstring)."""
    check_over(over)
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import Discount, EvalSettings

    settings = settings or EvalSettings()
    chosen = [m for m in measures if m.family in SUPPORTED and m.cutoff]
    if not chosen:
        raise ConfigError(
            "hole bounds are computed for ndcg_cut.k, P.k and recall.k; none of the measures asked is one of them"
        )
    if settings.discount != Discount():
        raise ConfigError("hole bounds use trec_eval's log2 discount; drop --discount")
    if settings.judged_only:
        raise ConfigError("with -J there are no holes to bound (the condensed value is reported beside the bounds)")
    from dataclasses import replace

    full = evaluate(qrels, run, chosen, settings, warn=False)
    condensed = evaluate(qrels, run, chosen, replace(settings, judged_only=True), warn=False)
    wide, cwide = full.wide(), condensed.wide()
    scale = _scale(qrels)
    level = settings.relevance_level
    out: dict[str, HoleBounds] = {}
    all_tops: dict = {}
    if over == "retrieved":  # every document of the run (its top -M), in trec_eval order
        all_tops, _ = _query_tables(qrels, run, settings.max_docs or _everything(run), settings.score_precision)
    for m in chosen:
        k = int(m.cutoff)
        k_eff = min(k, settings.max_docs) if settings.max_docs is not None else k
        tops, labels = _query_tables(qrels, run, k_eff, settings.score_precision, wide.index)
        values, cvalues = wide[m.name].to_dict(), cwide[m.name].to_dict()
        rows = []
        for qid in wide.index:
            lab = labels.get(qid, {})
            docs = tops.get(qid, [])
            holes = [i + 1 for i, d in enumerate(docs) if d not in lab]
            # holes ranked below k (``retrieved`` only): they join the ideal ranking / the relevant count
            d_deep = sum(1 for d in all_tops.get(qid, [])[len(docs) :] if d not in lab) if over == "retrieved" else 0
            value = float(values[qid])
            if m.family == "P":
                rel = sum(1 for d in docs if lab.get(d, -1) >= level)
                hi_rel = rel + (len(holes) if scale[-1] >= level else 0)
                lo, hi, exact = rel / k, hi_rel / k, True
            elif m.family == "recall":
                big_r = sum(1 for v in lab.values() if v >= level)
                rel = sum(1 for d in docs if lab.get(d, -1) >= level)
                x = len(holes) if scale[-1] >= level else 0
                y = d_deep if scale[-1] >= level else 0
                lo = rel / (big_r + y) if big_r + y else 0.0
                hi = (rel + x) / (big_r + x) if big_r + x else 0.0
                exact = True
            else:
                gain = settings.gain.value
                judged_gains = np.array([gain(v) for v in lab.values()], dtype=np.float64)
                top_gains = np.array([gain(lab[d]) if d in lab else 0.0 for d in docs], dtype=np.float64)
                gains = [gain(v) for v in scale]
                lo, hi, exact = ndcg_bounds(judged_gains, top_gains, np.array(holes), gains, k)
                if d_deep:  # the lowest: every deep hole at the top label, the largest ideal
                    pool = np.concatenate([judged_gains, np.full(d_deep, max(gains))])
                    lo, _, exact_lo = ndcg_bounds(pool, top_gains, np.array(holes), gains, k)
                    exact = exact and exact_lo
            # the all-non-relevant labelling is trec_eval's own: keep its exact bits inside the bounds, and a
            # bound no hole can move is that value itself (a gap of exactly 0, not a rounding residue)
            if not holes:
                hi = value
            if not holes and not d_deep:
                lo = value
            lo, hi = min(lo, value), max(hi, value)
            cval = float(cvalues[qid]) if qid in cvalues else 0.0
            rows.append((qid, value, lo, hi, cval, hi - lo, len(holes) + d_deep, exact))
        table = pd.DataFrame(rows, columns=[QUERY_ID, *COLUMNS]).set_index(QUERY_ID)
        out[m.name] = HoleBounds(m.name, table, over)
    return out


def _everything(run: Run) -> int:
    """A depth that keeps every line of the run (its longest ranking)."""
    sizes = run.frame.groupby(QUERY_ID, sort=False).size()
    return int(sizes.max()) if len(sizes) else 1


SUFFIXES = ("min", "max", "condensed")


def with_hole_lines(text: str, bounds: dict[str, HoleBounds]) -> str:
    """trec_eval's text with ``NAME_min``, ``NAME_max`` and ``NAME_condensed`` lines after each bounded measure's
    line (per query and ``all``), in trec_eval's layout (name padded to 22, ``%6.4f``)."""
    from toolkit.evaluation.trec_format import c_float

    means = {name: b.mean() for name, b in bounds.items()}
    out = []
    for line in text.splitlines():
        out.append(line)
        parts = line.split("\t")
        if line.startswith("#") or len(parts) != 3 or parts[0].strip() not in bounds:
            continue
        name, qid = parts[0].strip(), parts[1]
        table = bounds[name].per_query
        if qid == "all":
            values = means[name]
        elif qid in table.index:
            values = table.loc[qid]
        else:
            continue
        out.extend(f"{name + '_' + s:<22}\t{qid}\t{c_float(float(values[s]))}" for s in SUFFIXES)
    return "\n".join(out) + "\n" if out else ""


def holes_header(bounds: dict[str, HoleBounds]) -> str:
    """The text output's header line: what ``NAME_min`` / ``NAME_max`` range over, and ``NAME_condensed``."""
    overs = dict.fromkeys(b.over for b in bounds.values())
    what = "; ".join(f"{OVER_WORDS[o]} (--holes-over {o})" for o in overs)
    return f"holes: NAME_min, NAME_max = the lowest and highest value over {what}; NAME_condensed = judged only (-J)"


def holes_json(bounds: dict[str, HoleBounds], per_query: bool, labels: dict[str, str] | None = None) -> dict:
    """``{measure: {"over", "what", "all": {value, min, max, condensed, gap}, "exact": bool[, "per_query": {qid:
    {...}}]}}``; ``labels`` ({printed name: label}) keys the measures as the user asked for them."""
    doc: dict = {}
    names = labels or {}
    for name, b in bounds.items():
        entry: dict = {"over": b.over, "what": OVER_WORDS[b.over], "all": b.mean(), "exact": b.exact}
        if per_query:
            entry["per_query"] = {
                str(q): {
                    **{c: float(row[c]) for c in ("value", "min", "max", "condensed", "gap")},
                    "unjudged": int(row["unjudged"]),
                    "exact": bool(row["exact"]),
                }
                for q, row in b.per_query.iterrows()
            }
        doc[names.get(name, name)] = entry
    return doc


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals of possible values [low, high] share a value."""
    return a[0] <= b[1] and b[0] <= a[1]


__all__ = [
    "HOLES_OVER",
    "MAX_MULTISETS",
    "OVER_SHORT",
    "OVER_WORDS",
    "SUFFIXES",
    "SUPPORTED",
    "HoleBounds",
    "check_over",
    "hole_bounds",
    "holes_header",
    "holes_json",
    "ndcg_bounds",
    "overlap",
    "with_hole_lines",
]
