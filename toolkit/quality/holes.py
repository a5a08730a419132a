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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import ConfigError
from toolkit.measures.ranked import log2_table
from toolkit.stats.verdict import OVER_WORDS

SUPPORTED = ("ndcg_cut", "P", "recall")
#: What the bounds range over: the holes in the top k, or every unjudged document the run retrieved.
HOLES_OVER = ("top-k", "retrieved")
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
    disc = 1.0 / log2_table(k + 1)[2 : k + 2]
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
    disc = 1.0 / log2_table(k + 1)[2 : k + 2]
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


def check_over(over: str) -> str:
    """``over`` when it is one of ``HOLES_OVER``, else a ConfigError naming the choices."""
    if over not in HOLES_OVER:
        raise ConfigError(f"hole bounds range over one of {', '.join(HOLES_OVER)}, not {over!r}")
    return over


def hole_bounds(
    qrels: Qrels,
    run: Run,
    measures,
    settings=None,
    over: str = "top-k",
    condensed: bool = True,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict[str, HoleBounds]:
    """Bounds of every ``ndcg_cut``, ``P`` and ``recall`` measure in ``measures`` (parsed ``Measure``s) for
    ``run``, on the queries trec_eval evaluates under ``settings``, over the labellings of the holes ``over``
    names (``top-k`` or ``retrieved``; see the module docstring). ``condensed=False``: the judged-only column is
    NaN (not evaluated), for a caller that reads only the bounds.

    Every query at once (numpy over the run's rows); the values are those of ``ndcg_bounds`` and the closed forms
    query by query, to the last bit (the same operations on the same numbers)."""
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

    wide = evaluate(qrels, run, chosen, settings, warn=False, work=work).wide()
    if condensed:
        cwide = evaluate(qrels, run, chosen, replace(settings, judged_only=True), warn=False, work=work).wide()
    qids = list(wide.index)
    scale = _scale(qrels)
    level = settings.relevance_level
    cuts = [min(int(m.cutoff), settings.max_docs) if settings.max_docs is not None else int(m.cutoff) for m in chosen]
    limit = (settings.max_docs or _everything(run)) if over == "retrieved" else max(cuts)
    rows = _rows(qrels, run, qids, limit, settings.score_precision, work=work)
    jq, jlabels = rows["judged_q"], rows["judged_labels"]
    n = len(qids)
    big_r = np.bincount(jq[jlabels >= level], minlength=n)
    out: dict[str, HoleBounds] = {}
    for m, k_eff in zip(chosen, cuts):
        k = int(m.cutoff)
        q, rank, lab = rows["q"], rows["rank"], rows["label"]
        top = rank <= k_eff
        n_docs = np.bincount(q[top], minlength=n)
        holes = np.bincount(q[top & (lab < 0)], minlength=n)
        rel = np.bincount(q[top & (lab >= level)], minlength=n)
        deep = np.bincount(q[~top & (lab < 0)], minlength=n) if over == "retrieved" else np.zeros(n, np.int64)
        value = wide[m.name].to_numpy(dtype=np.float64)
        exact = np.ones(n, bool)
        can_relevant = scale[-1] >= level
        if m.family == "P":
            lo = rel / k
            hi = (rel + (holes if can_relevant else 0)) / k
        elif m.family == "recall":
            x = holes if can_relevant else np.zeros(n, np.int64)
            y = deep if can_relevant else np.zeros(n, np.int64)
            with np.errstate(divide="ignore", invalid="ignore"):
                lo = np.where(big_r + y > 0, rel / (big_r + y), 0.0)
                hi = np.where(big_r + x > 0, (rel + x) / (big_r + x), 0.0)
        else:
            lo, hi, exact = _ndcg_columns(rows, settings.gain.value, scale, k, k_eff, n_docs, holes, deep)
        # the all-non-relevant labelling is trec_eval's own: keep its exact bits inside the bounds, and a
        # bound no hole can move is that value itself (a gap of exactly 0, not a rounding residue)
        hi = np.where(holes == 0, value, hi)
        lo = np.where((holes == 0) & (deep == 0), value, lo)
        lo, hi = np.minimum(lo, value), np.maximum(hi, value)
        cval = np.full(n, np.nan)
        if condensed:  # a query the judged-only evaluation lacks: 0
            c = cwide[m.name]
            cval = c.reindex(qids).to_numpy(dtype=np.float64, copy=True)
            cval[~pd.Index(qids).isin(c.index)] = 0.0
        table = pd.DataFrame(
            {
                QUERY_ID: qids,
                "value": value,
                "min": lo,
                "max": hi,
                "condensed": cval,
                "gap": hi - lo,
                "unjudged": (holes + deep).astype(np.int64),
                "exact": exact,
            }
        ).set_index(QUERY_ID)
        out[m.name] = HoleBounds(m.name, table, over)
    return out


def _lookup(keys: np.ndarray, table_keys: np.ndarray, table_values: np.ndarray, missing: int) -> np.ndarray:
    """``table_values`` at each of ``keys`` in ``table_keys`` (unique), else ``missing``."""
    if not len(table_keys) or not len(keys):
        return np.full(len(keys), missing, np.int64)
    order = np.argsort(table_keys, kind="stable")
    sk, sv = table_keys[order], table_values[order]
    at = np.minimum(np.searchsorted(sk, keys), len(sk) - 1)
    return np.where(sk[at] == keys, sv[at], missing).astype(np.int64)


def query_index(ordered: pd.DataFrame, query_ids: Sequence[str]) -> np.ndarray:
    """Per row of a run in trec_eval order (``ranking.order_run``: each query's rows together, ranks from 1):
    the index of its query in ``query_ids``, -1 for a query not among them; one string per query compared."""
    from toolkit.data.columns import arrow_of, joint_codes, take

    qids = list(query_ids)
    rank = ordered["rank"].to_numpy()
    starts = np.flatnonzero(rank == 1)
    names = pd.Series(take(arrow_of(ordered[QUERY_ID]), starts).to_pylist(), dtype=object)
    nc, wanted = joint_codes(names, pd.Series(qids, dtype=object))
    slot = np.full(int(max(nc.max(initial=-1), wanted.max(initial=-1))) + 1, -1, np.int64)
    slot[wanted] = np.arange(len(qids))
    return np.repeat(slot[nc], np.diff(np.append(starts, len(rank))))


def _rows(
    qrels: Qrels, run: Run, qids: list[str], limit: int, score_precision: str, *, work: Workspace = NO_WORKSPACE
) -> dict[str, np.ndarray]:
    """The run's first ``limit`` documents of each query of ``qids`` in trec_eval order, query after query as in
    ``qids``: ``q`` (index in qids), ``rank``, ``label`` (its label >= 0 in the qrels, -1 for a hole); and the
    judged documents of those queries (``judged_q``, ``judged_labels``: a pair judged twice, its last label)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from toolkit.data.columns import arrow_of, joint_codes, take
    from toolkit.data.ranking import order_run

    qset = pd.Series(qids, dtype=object)

    def slots(column) -> np.ndarray:
        qc, wanted = joint_codes(column, qset)
        slot = np.full(int(max(qc.max(initial=-1), wanted.max(initial=-1))) + 1, -1, np.int64)
        slot[wanted] = np.arange(len(qids))
        return slot[qc]

    o = order_run(run.frame, score_precision, work=work)  # type: ignore[arg-type]
    where = query_index(o, qids)
    keep = np.flatnonzero((where >= 0) & (o["rank"].to_numpy() <= limit))
    keep = keep[np.argsort(where[keep], kind="stable")]
    q, rank, docs = where[keep], o["rank"].to_numpy()[keep].astype(np.int64), take(arrow_of(o[DOC_ID]), keep)
    qf = qrels.frame
    jw = slots(qf[QUERY_ID])
    judged = np.flatnonzero((jw >= 0) & (qf[RELEVANCE].to_numpy() >= 0))
    jq, jlab = jw[judged], qf[RELEVANCE].to_numpy()[judged].astype(np.int64)
    jdocs = take(arrow_of(qf[DOC_ID]), judged).cast(pa.large_string())
    near = np.flatnonzero(pc.is_in(docs, value_set=pc.unique(jdocs)).to_numpy(zero_copy_only=False))
    columns = [jdocs, take(docs, near).cast(pa.large_string())]
    encoded = pc.dictionary_encode(pa.chunked_array(columns, pa.large_string()))
    flat = np.concatenate(
        [np.zeros(0, np.int64)] + [c.indices.to_numpy(zero_copy_only=False).astype(np.int64) for c in encoded.chunks]
    )
    width = int(flat.max(initial=-1)) + 1
    jkeys = jq * width + flat[: len(jq)]
    _, last = np.unique(jkeys[::-1], return_index=True)  # a pair judged twice: its last label (as a dict keeps)
    once = np.sort(len(jkeys) - 1 - last)
    jq, jlab, jkeys = jq[once], jlab[once], jkeys[once]
    label = np.full(len(q), -1, np.int64)
    label[near] = _lookup(q[near] * width + flat[len(columns[0]) :], jkeys, jlab, -1)
    jorder = np.argsort(jq, kind="stable")
    return {"q": q, "rank": rank, "label": label, "judged_q": jq[jorder], "judged_labels": jlab[jorder]}


def _ndcg_columns(rows, gain, scale, k, k_eff, n_docs, holes, deep):
    """(lowest, highest, exact) nDCG@k of every query: ``ndcg_bounds``'s values, query by query, to the last bit
    (the same sums, the same matrix products per query, grouped by the number of holes)."""
    n = len(n_docs)
    disc = 1.0 / log2_table(k + 1)[2 : k + 2]
    gains = [gain(v) for v in scale]
    g = sorted({float(x) for x in gains})
    gdesc = tuple(g[::-1])
    gain_of = {int(v): float(gain(int(v))) for v in np.unique(np.concatenate([rows["label"], rows["judged_labels"]]))}
    table = np.array([gain_of.get(v, 0.0) for v in range(-1, max(gain_of, default=0) + 1)] if gain_of else [0.0])

    def gains_of(labels: np.ndarray) -> np.ndarray:
        out = table[np.maximum(labels, -1) + 1]
        return np.where(labels < 0, 0.0, out)

    q, rank, lab = rows["q"], rows["rank"], rows["label"]
    top = rank <= k_eff
    tq, trank, tgain = q[top], rank[top], gains_of(lab[top])
    t_at = np.searchsorted(tq, np.arange(n + 1))
    jq, jgain = rows["judged_q"], gains_of(rows["judged_labels"])
    j_at = np.searchsorted(jq, np.arange(n + 1))
    lo, hi, exact = np.zeros(n), np.zeros(n), np.ones(n, bool)
    # base DCG: each query's products summed as one array (numpy sums each row of a matrix the same way)
    base = np.zeros(n)
    pos = trank - 1
    for length in np.unique(n_docs[holes > 0]):
        qs = np.flatnonzero((n_docs == length) & (holes > 0))
        if not length:
            continue
        mat = np.zeros((len(qs), int(length)))
        pick = (t_at[qs][:, None] + np.arange(int(length))).reshape(-1)  # each query's ``length`` top rows
        mat[np.repeat(np.arange(len(qs)), length), pos[pick]] = tgain[pick] * disc[pos[pick]]
        base[qs] = mat.sum(axis=1)
    hole_rows = top.copy()
    hole_rows[top] = lab[top] < 0
    hole_ranks = rank[hole_rows]
    h_at = np.searchsorted(q[hole_rows], np.arange(n + 1))

    # each query's judged positive gains, descending, cut at k (what _ideals reads), one row per query, -1 after
    positive = np.flatnonzero(jgain > 0)
    by_gain = positive[np.lexsort((-jgain[positive], jq[positive]))]
    place = np.arange(len(by_gain)) - np.searchsorted(jq[by_gain], jq[by_gain])
    inside = place < k
    judged_tops = np.full((n, k), -1.0)
    judged_tops[jq[by_gain][inside], place[inside]] = jgain[by_gain][inside]

    loose = []
    for h in np.unique(holes[holes > 0]):
        h = int(h)
        qs = np.flatnonzero(holes == h)
        if math.comb(h + len(g) - 1, len(g) - 1) > MAX_MULTISETS:
            loose += qs.tolist()
            continue
        sets = _multisets(gdesc, h)  # rows descending
        w = disc[hole_ranks[h_at[qs][:, None] + np.arange(h)] - 1]  # each query's ``h`` hole ranks, one row each
        stacked = np.broadcast_to(sets, (len(qs), *sets.shape))
        best = base[qs, None] + np.matmul(stacked, w[:, :, None])[:, :, 0]  # highest gains on the highest holes
        worst = base[qs, None] + np.matmul(np.broadcast_to(sets[:, ::-1], stacked.shape), w[:, :, None])[:, :, 0]
        tops, which = np.unique(judged_tops[qs], axis=0, return_inverse=True)
        ideals = np.stack([_ideals_of(tuple(t[t > 0].tolist()), gdesc, h, k) for t in tops])[which.reshape(-1)]
        with np.errstate(divide="ignore", invalid="ignore"):
            hi[qs] = np.where(ideals > 0, best / ideals, 0.0).max(axis=1)
            lo[qs] = np.where(ideals > 0, worst / ideals, 0.0).min(axis=1)
    for i in sorted(set(loose) | set(np.flatnonzero(deep > 0).tolist())):  # query by query: ndcg_bounds itself
        judged_gains = jgain[j_at[i] : j_at[i + 1]]
        top_gains = np.zeros(int(n_docs[i]))
        top_gains[pos[t_at[i] : t_at[i + 1]]] = tgain[t_at[i] : t_at[i + 1]]
        hr = hole_ranks[h_at[i] : h_at[i + 1]]
        lo[i], hi[i], exact[i] = ndcg_bounds(judged_gains, top_gains, hr, gains, k)
        if deep[i]:  # the lowest: every deep hole at the top label, the largest ideal
            pool = np.concatenate([judged_gains, np.full(int(deep[i]), max(gains))])
            lo[i], _, exact_lo = ndcg_bounds(pool, top_gains, hr, gains, k)
            exact[i] = exact[i] and exact_lo
    return lo, hi, exact


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


def system_bounds(
    qrels,
    runs: Mapping[str, Sequence],
    measure: str,
    settings,
    queries: Sequence[str],
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict[str, tuple[float, float]]:
    """``{system: (lowest mean, highest mean)}`` of ``measure`` over ``queries``; empty when the measure has no
    hole bounds (not ndcg_cut.k / P.k / recall.k) or the settings exclude them (-J, another discount)."""
    from toolkit.measures.names import parse_measure_groups

    ms = [m for g in parse_measure_groups([measure], settings.trec_eval) for m in g.measures]
    chosen = [m for m in ms if m.family in SUPPORTED and m.cutoff]
    if len(chosen) != 1:
        return {}
    m = chosen[0]
    out: dict[str, tuple[float, float]] = {}
    for name, given in runs.items():
        lows, highs = [], []
        for run in given:
            try:
                table = hole_bounds(qrels, run, [m], settings, condensed=False, work=work)[m.name].per_query
            except ConfigError:  # -J (no holes) or a discount the bounds do not cover
                return {}
            t = table.reindex(list(queries)).fillna({"min": 0.0, "max": 0.0})
            lows.append(float(t["min"].sum() / len(t)) if len(t) else 0.0)
            highs.append(float(t["max"].sum() / len(t)) if len(t) else 0.0)
        out[name] = (float(np.mean(lows)), float(np.mean(highs)))
    return out


__all__ = [
    "HOLES_OVER",
    "MAX_MULTISETS",
    "SUFFIXES",
    "SUPPORTED",
    "HoleBounds",
    "check_over",
    "hole_bounds",
    "holes_header",
    "holes_json",
    "ndcg_bounds",
    "query_index",
    "system_bounds",
    "with_hole_lines",
]
