"""Per-query views of a diagnosis: query terms, query-biased snippets, the worst queries with what they missed,
the most changed queries, where two systems disagree most, and every system's top k side by side.

Inputs are the diagnosis' long per-query table (one row per reranked run and query), ranked lists
(``agreement.ranked_lists``: system -> query -> documents in trec_eval order) and the qrels grades. Nothing
here evaluates; every value shown comes from those tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace

_R = TypeVar("_R")

#: Words that carry no topic: not highlighted, not used to place a snippet.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "did",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "than",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
TextLookup = Callable[[Iterable[str]], dict[str, str]]
Lists = Mapping[str, Mapping[str, Sequence[str]]]  # system -> query -> documents in trec_eval order


def query_terms(text: str | None) -> list[str]:
    """The lower-cased words of a query, stopwords and one-letter words left out, in order, each once."""
    words = re.findall(r"\w+", str(text or "").lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in STOPWORDS))


def snippet(text: str | None, chars: int, terms: Sequence[str] = ()) -> str | None:
    """At most ``chars`` characters of the whitespace-normalised text, starting a little before the first
    query term when the text is longer (so that the highlighted words are in view); '…' marks a cut."""
    if not text:
        return None
    t = " ".join(str(text).split())
    if len(t) <= chars:
        return t
    start = 0
    hits = [m.start() for term in terms for m in [re.search(rf"\b{re.escape(term)}", t, flags=re.I)] if m]
    if hits and min(hits) > chars // 2:
        start = t.rfind(" ", 0, min(hits) - chars // 5) + 1
    body = t[start : start + chars - 2 * bool(start)].rstrip()
    return ("…" if start else "") + body + ("…" if start + len(body) < len(t) else "")


Grades = Mapping[str, Mapping[str, int]]  # query -> document -> label


def grades(qrels: Qrels, query_ids: Iterable[str]) -> dict[str, dict[str, int]]:
    """query -> document -> label for the given queries (labels < 0 included: 'in the pool, unjudged')."""
    from toolkit.data.columns import among, arrow_of, take

    qf = qrels.frame
    rows = np.flatnonzero(among(arrow_of(qf[QUERY_ID]), query_ids))
    out: dict[str, dict[str, int]] = {}
    labels = qf[RELEVANCE].to_numpy()[rows].astype(np.int64).tolist()
    for q, d, r in zip(
        take(arrow_of(qf[QUERY_ID]), rows).to_pylist(), take(arrow_of(qf[DOC_ID]), rows).to_pylist(), labels
    ):
        out.setdefault(q, {})[d] = r
    return out


def judged_grade(g: int | None) -> int | None:
    """A grade to show: None (unjudged) for documents without a label >= 0."""
    return g if g is not None and g >= 0 else None


def best_missed(q: str, qrels_grades: Grades, shown: set[str], first: Sequence[str], depth: int, n: int) -> list[dict]:
    """The ``n`` best judged relevant documents of query ``q`` not in ``shown``: grade desc, first-stage rank."""
    first_rank = {d: i + 1 for i, d in enumerate(first)}
    rel = [(d, g) for d, g in qrels_grades.get(q, {}).items() if g > 0 and d not in shown]
    rel.sort(key=lambda x: (-x[1], first_rank.get(x[0], 10**9), x[0]))
    out = []
    for d, g in rel[:n]:
        r = first_rank.get(d)
        out.append({"doc_id": d, "grade": g, "first_stage_rank": r if r is not None and r <= depth else None})
    return out


def worst_queries(
    rows: pd.DataFrame,
    lists: Lists,
    first_name: str,
    reranked_name: str,
    qrels_grades: Grades,
    *,
    depth: int,
    n: int,
    missed_shown: int = 5,
) -> list[dict]:
    """The ``n`` lowest reranked queries of one reranked run (ties by query id; queries labelled no-relevant,
    with nothing to find, left out): its top 10 beside the best judged documents it missed, each said to be a
    candidate (with both ranks) or not in the candidates.

    ``rows`` are that run's rows of the diagnosis table (columns query_id, query, query_type, diagnosis,
    first_stage, reranked, ceiling, lost_in_candidates, lost_in_reranking, first_recall, reranked_judged_10).
    Snippets are added by ``add_snippets``.
    """
    if n == 0 or rows.empty:
        return []
    worst = worst_rows(rows, n)
    entries = []
    for row in worst.to_dict(orient="records"):
        q = row[QUERY_ID]
        first, rr = lists[first_name].get(q, []), lists[reranked_name].get(q, [])
        rr_rank = {d: i + 1 for i, d in enumerate(rr)}
        g = qrels_grades.get(q, {})
        top = [{"rank": i + 1, "doc_id": d, "grade": judged_grade(g.get(d))} for i, d in enumerate(rr[:10])]
        missed = best_missed(q, qrels_grades, {x["doc_id"] for x in top}, first, depth, missed_shown)
        for m in missed:
            f = m["first_stage_rank"]
            m["reranked_rank"] = rr_rank.get(m["doc_id"])
            m["where"] = (
                f"candidate (first stage #{f}, reranked #{m['reranked_rank'] or '-'})"
                if f is not None
                else "not in the candidates"
            )
        entries.append(
            {
                **{k: row[k] for k in ("query_id", "query", "query_type", "diagnosis")},
                **{
                    k: float(row[k])
                    for k in (
                        "first_stage",
                        "reranked",
                        "ceiling",
                        "lost_in_candidates",
                        "lost_in_reranking",
                        "first_recall",
                        "reranked_judged_10",
                    )
                },
                "top_10": top,
                "best_missed": missed,
            }
        )
    return entries


def worst_rows(rows: pd.DataFrame, n: int) -> pd.DataFrame:
    """The rows of ``worst_queries``: the ``n`` lowest reranked (ties by query id), no-relevant ones left out."""
    return rows[rows["diagnosis"] != "no-relevant"].sort_values(["reranked", QUERY_ID], kind="stable").head(n)


def most_changed(rows: pd.DataFrame, n: int) -> list[dict]:
    """The ``n`` queries whose ranking changed most (lowest RBO with the first stage; then largest |delta|)."""
    if n == 0 or rows.empty:
        return []
    ranked = rows.assign(_abs=(rows["reranked"] - rows["first_stage"]).abs())
    ranked = ranked.sort_values(["rbo", "_abs", QUERY_ID], ascending=[True, False, True], kind="stable").head(n)
    keep = ["query_id", "query", "diagnosis", "first_stage", "reranked", "rbo", "kendall_tau_10"]
    return [_plain(r) for r in ranked[keep].to_dict(orient="records")]


def by_delta(rows: pd.DataFrame, n: int, direction: str) -> list[dict]:
    """The ``n`` queries the reranker hurt most (``direction="hurt"``: reranked - first stage most negative
    first, only queries below the first stage) or helped most (``"helped"``: most positive first, only queries
    above it); ties by query id. Sorted by what the reranker did, not by the reranked value."""
    if direction not in ("hurt", "helped"):
        raise ValueError(f"direction must be 'hurt' or 'helped', not {direction!r}")
    if n == 0 or rows.empty:
        return []
    delta = rows["reranked"] - rows["first_stage"]
    sign = -1.0 if direction == "hurt" else 1.0
    picked = rows.assign(delta=delta, _key=-sign * delta)[sign * delta > 0]
    picked = picked.sort_values(["_key", QUERY_ID], kind="stable").head(n)
    keep = ["query_id", "query", "query_type", "diagnosis", "first_stage", "reranked", "delta", "ceiling", "rbo"]
    return [_plain(r) for r in picked[keep].to_dict(orient="records")]


def disagreements(pair: pd.DataFrame, n: int) -> list[dict]:
    """The ``n`` queries where two systems differ most on the measure (largest |delta|; then lowest RBO)."""
    if n == 0 or pair.empty:
        return []
    ranked = pair.assign(_abs=pair["delta"].abs())
    ranked = ranked.sort_values(["_abs", "rbo", QUERY_ID], ascending=[False, True, True], kind="stable").head(n)
    return [_plain(r) for r in ranked.drop(columns="_abs").to_dict(orient="records")]


def _plain(record: dict) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in record.items()}


def side_by_side(
    query_ids: Sequence[str], lists: Lists, systems: Sequence[str], qrels_grades: Grades, k: int
) -> dict[str, dict]:
    """Per query, every system's top ``k`` as [document, grade or None], and each shown document's rank in
    every system's full list (for rank movement)."""
    out = {}
    for q in query_ids:
        g = qrels_grades.get(q, {})
        tops = {s: [[d, judged_grade(g.get(d))] for d in lists[s].get(q, [])[:k]] for s in systems}
        shown = {d for top in tops.values() for d, _ in top}
        ranks = {}
        for s in systems:
            pos = {d: i + 1 for i, d in enumerate(lists[s].get(q, []))}
            ranks[s] = {d: pos[d] for d in sorted(shown) if d in pos}  # sorted: the page is the same every run
        out[q] = {"top": tops, "ranks": ranks}
    return out


def add_snippets(
    views: dict[str, dict],
    worst: list[dict],
    missed: dict[str, list[dict]],
    queries: Mapping[str, str],
    texts: TextLookup | None,
    chars: int,
) -> None:
    """Fill query-biased snippets in place: ``views[q]['snippets'][doc]``, and ``snippet`` in the worst
    queries' and missed documents' entries. One lookup for every document shown."""
    if texts is None:  # no texts: every snippet is None (no lookup, nothing to place)
        for v in views.values():
            v["snippets"] = {}
        for w in worst:
            for item in w["top_10"] + w["best_missed"]:
                item["snippet"] = None
        return
    wanted = {d for v in views.values() for top in v["top"].values() for d, _ in top}
    wanted |= {i["doc_id"] for w in worst for i in w["top_10"] + w["best_missed"]}
    wanted |= {m["doc_id"] for ms in missed.values() for m in ms}
    found = texts(sorted(wanted)) if texts is not None and wanted else {}
    for q, v in views.items():
        terms = query_terms(queries.get(q))
        docs = {d for top in v["top"].values() for d, _ in top} | {m["doc_id"] for m in missed.get(q, [])}
        v["snippets"] = {d: s for d in sorted(docs) if (s := snippet(found.get(d), chars, terms))}
    for w in worst:
        terms = query_terms(w["query"])
        for item in w["top_10"] + w["best_missed"]:
            item["snippet"] = snippet(found.get(item["doc_id"]), chars, terms)


def _keyed(q: np.ndarray, codes: np.ndarray, width: int) -> np.ndarray:
    return q.astype(np.int64) * width + codes


def _lookup(keys: np.ndarray, table_keys: np.ndarray, table_values: np.ndarray, missing: int) -> np.ndarray:
    """``table_values`` at each of ``keys`` in ``table_keys`` (the last row of a repeated key), else ``missing``."""
    if not len(table_keys):
        return np.full(len(keys), missing, np.int64)
    order = np.argsort(table_keys, kind="stable")
    sk = table_keys[order]
    last = np.ones(len(sk), bool)
    last[:-1] = sk[1:] != sk[:-1]  # a repeated key: its last row, as a dict built in order keeps
    sk, sv = sk[last], table_values[order][last]
    at = np.minimum(np.searchsorted(sk, keys), len(sk) - 1)
    return np.where(sk[at] == keys, sv[at], missing).astype(np.int64)


def without_gc(fn: Callable[..., _R]) -> Callable[..., _R]:
    """``fn`` with the cyclic garbage collector paused while it runs (and resumed if it ran)."""
    import functools
    import gc

    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> _R:
        running = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if running:
                gc.enable()

    return paused


@without_gc
def views_of_runs(
    query_ids: Sequence[str],
    runs: Mapping[str, Run],
    qrels: Qrels,
    k: int,
    score_precision: str,
    first: str,
    depth: int,
    n_missed: int,
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """``side_by_side(query_ids, lists, list(runs), grades(qrels, query_ids), k)`` and, per query, ``best_missed``
    of it (``first``'s list, ``depth``, ``n_missed``) for the ranked lists of ``runs`` (trec_eval order under
    ``score_precision``): the same values, computed over every query at once from the runs' columns (each list
    read only where it holds a document shown).

    The cyclic garbage collector is paused meanwhile (and resumed if it ran): the views are some hundred thousand
    lists and dicts without cycles, and each collection their making set off walked every object the process
    held (~0.4 s of a diagnosis at 6,980 queries)."""
    from toolkit.data.columns import arrow_of, joint_codes, take
    from toolkit.data.ranking import order_run
    from toolkit.quality.holes import query_index

    qids = list(query_ids)
    systems = list(runs)

    # per system: the rows of the queries of ``query_ids`` in their order (each list in order, as a stable sort of
    # them by query index keeps it; no sort where the run lists them in that order already), their query index, rank
    # and documents; and where each query's rows start (so no array of a first stage's every row is held beyond
    # these)
    full = {}
    for s in systems:
        o = order_run(runs[s].frame, score_precision, work=work)  # type: ignore[arg-type]
        # int32 query indexes and the ranks as they are (no int64 copies of a first stage's every row): each batch's
        # rows are widened when taken
        where, rank, docs = query_index(o, qids).astype(np.int32), o["rank"].to_numpy(), arrow_of(o[DOC_ID])
        if (where < 0).any() or (where[1:] < where[:-1]).any():  # else every row is wanted, in order already
            rows = np.flatnonzero(where >= 0)
            rows = rows[np.argsort(where[rows], kind="stable")]
            where, rank, docs = where[rows], rank[rows], take(docs, rows)
        full[s] = (where, rank, docs, np.searchsorted(where, np.arange(len(qids) + 1)))
    qf = qrels.frame
    qc, wanted = joint_codes(qf[QUERY_ID], pd.Series(qids, dtype=object))
    slot = np.full(int(max(qc.max(initial=-1), wanted.max(initial=-1))) + 1, -1, np.int64)
    slot[wanted] = np.arange(len(qids))
    qq = slot[qc]
    judged = np.flatnonzero(qq >= 0)
    judged = judged[np.argsort(qq[judged], kind="stable")]  # by query, each query's rows in the qrels' order
    judged_q = qq[judged]
    qrel = (
        judged_q,
        qf[RELEVANCE].to_numpy()[judged].astype(np.int64),
        take(arrow_of(qf[DOC_ID]), judged),
        np.searchsorted(judged_q, np.arange(len(qids) + 1)),
    )

    # the queries a batch at a time: every value is one query's, and a batch's sets of documents stay small enough
    # for the lookups in them to cost the same per row however many queries there are
    views: dict[str, dict] = {}
    missed: dict[str, list[dict]] = {}
    for lo in range(0, len(qids), _BATCH):
        hi = min(lo + _BATCH, len(qids))
        part = {s: _rows_of_queries(full[s], lo, hi) for s in systems}
        v, m = _views_of_batch(qids[lo:hi], part, _rows_of_queries(qrel, lo, hi), k, first, depth, n_missed)
        views.update(v)
        missed.update(m)
    return views, missed


#: Queries per batch of ``views_of_runs``: 512 measured 5-11% less CPU than 2,048 at 6,980 and 20,000 queries (smaller
#: value sets for ``pc.is_in`` over the first stage's lists, likely better held in cache); 128 and 256 cost more again.
_BATCH = 512


def _rows_of_queries(
    columns: tuple[np.ndarray, np.ndarray, Any, np.ndarray], lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, Any]:
    """The rows of queries ``lo`` to ``hi`` (exclusive) of (query index, values, documents, each query's first
    row), the query index counted from ``lo``."""
    q, values, docs, at = columns
    a, b = int(at[lo]), int(at[hi])
    return q[a:b].astype(np.int64) - lo, values[a:b].astype(np.int64), docs.slice(a, b - a)


def _views_of_batch(
    qids: Sequence[str],
    full: Mapping[str, tuple[np.ndarray, np.ndarray, Any]],
    qrel: tuple[np.ndarray, np.ndarray, Any],
    k: int,
    first: str,
    depth: int,
    n_missed: int,
) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """``views_of_runs`` of the queries ``qids``: ``full`` holds each system's rows of them (query index, rank,
    documents, in query order), ``qrel`` their judgments (query index, label, document, in query order)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from toolkit.data.columns import among, take

    systems = list(full)

    def chosen(s: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        where, rank, _ = full[s]
        rows = np.flatnonzero(mask)
        return where[rows], rank[rows], rows

    tops = {}
    for s in systems:
        q, r, rows = chosen(s, full[s][1] <= k)
        tops[s] = (q, r, take(full[s][2], rows))
    shown_docs = pc.unique(pa.chunked_array([t[2].cast(pa.large_string()) for t in tops.values()], pa.large_string()))
    near = {}  # each system's rows whose document is shown for some query
    for s in systems:
        if s == first:
            continue  # below, with the relevant documents
        q, r, rows = chosen(s, among(full[s][2], shown_docs))
        near[s] = (q, r, take(full[s][2], rows))
    qrel_q, labels, qrel_d = qrel
    relevant = np.flatnonzero(labels > 0)
    rel_docs = pc.unique(take(qrel_d, relevant).cast(pa.large_string()))
    # the first stage's rows whose document is shown or relevant somewhere: one pass over its (longest) lists
    fd = full[first][2]
    fq, fr, either = chosen(first, among(fd, pc.unique(pa.concat_arrays([shown_docs, rel_docs]))))
    fdocs = take(fd, either)
    rows = np.flatnonzero(among(fdocs, shown_docs))
    near[first] = (fq[rows], fr[rows], take(fdocs, rows))
    near = {s: near[s] for s in systems}
    rows = np.flatnonzero(among(fdocs, rel_docs))
    first_rel = (fq[rows], fr[rows], take(fdocs, rows))

    columns = [t[2] for t in tops.values()] + [t[2] for t in near.values()] + [qrel_d, first_rel[2]]
    encoded = pc.dictionary_encode(pa.chunked_array([c.cast(pa.large_string()) for c in columns], pa.large_string()))
    flat = np.concatenate(
        [np.zeros(0, np.int64)] + [c.indices.to_numpy(zero_copy_only=False).astype(np.int64) for c in encoded.chunks]
    )
    codes = np.split(flat, np.cumsum([len(c) for c in columns])[:-1])
    width = int(flat.max(initial=-1)) + 1
    m = len(systems)
    top_keys = {s: _keyed(tops[s][0], codes[i], width) for i, s in enumerate(systems)}
    near_keys = {s: _keyed(near[s][0], codes[m + i], width) for i, s in enumerate(systems)}
    qrel_keys = _keyed(qrel_q, codes[2 * m], width)
    _, last = np.unique(qrel_keys[::-1], return_index=True)
    if len(last) < len(qrel_keys):  # a pair judged twice: its last label, as ``grades`` keeps
        once = np.sort(len(qrel_keys) - 1 - last)
        qrel_q, qrel_keys, labels, qrel_d = qrel_q[once], qrel_keys[once], labels[once], take(qrel_d, once)
        relevant = np.flatnonzero(labels > 0)
    first_keys = _keyed(first_rel[0], codes[2 * m + 1], width)

    # the documents shown per query, each once, in query order then the documents' order (``sorted``: code points,
    # the order of the UTF-8 bytes that arrow sorts by), each (query, document) once, so no tie to keep in order
    dictionary = encoded.chunks[-1].dictionary if encoded.num_chunks else pa.array([], pa.large_string())
    text_rank = np.empty(len(dictionary), np.int64)
    text_rank[pc.array_sort_indices(dictionary).to_numpy()] = np.arange(len(dictionary))
    top_q = np.concatenate([tops[s][0] for s in systems])
    top_k = np.concatenate([top_keys[s] for s in systems])
    top_c = np.concatenate(codes[:m])
    once = np.unique(top_k, return_index=True)[1]
    shown_rows = once[np.lexsort((text_rank[top_c[once]], top_q[once]))]
    shown_q, shown_keys = top_q[shown_rows], top_k[shown_rows]
    shown_d = dictionary.take(pa.array(top_c[shown_rows])).to_pylist()
    shown_at = np.searchsorted(shown_q, np.arange(len(qids) + 1))
    # per system, the shown documents it ranks (near it) and their ranks, with each query's stretch of them
    ranked = {}
    for s in systems:
        rank = _lookup(shown_keys, near_keys[s], near[s][1], -1)
        held = np.flatnonzero(rank >= 0)
        ranked[s] = (np.searchsorted(held, shown_at).tolist(), [shown_d[j] for j in held.tolist()], rank[held].tolist())
    top_lists = {}
    for s in systems:
        grade = _lookup(top_keys[s], qrel_keys, labels, -1)
        g = [int(x) if x >= 0 else None for x in grade.tolist()]
        docs = tops[s][2].to_pylist()
        top_lists[s] = (np.searchsorted(tops[s][0], np.arange(len(qids) + 1)).tolist(), list(map(list, zip(docs, g))))

    # the best relevant documents no system shows: grade desc, first-stage rank, document
    rel_keys = qrel_keys[relevant]
    unseen = ~np.isin(rel_keys, shown_keys)
    rel = relevant[unseen]
    missed_frame = pd.DataFrame(
        {
            "q": qrel_q[rel],
            "g": -labels[rel],
            "r": _lookup(rel_keys[unseen], first_keys, first_rel[1], 10**9),
            "d": np.asarray(take(qrel_d, rel).to_pylist(), dtype=object),
        }
    )
    missed_frame = missed_frame.sort_values(["q", "g", "r", "d"], kind="stable").groupby("q", sort=False).head(n_missed)
    miss_q = missed_frame["q"].to_numpy()
    miss_at = np.searchsorted(miss_q, np.arange(len(qids) + 1))
    miss_g, miss_r, miss_d = (-missed_frame["g"]).tolist(), missed_frame["r"].tolist(), missed_frame["d"].tolist()
    miss_rows = [
        {"doc_id": d, "grade": g, "first_stage_rank": r if r <= depth else None}
        for d, g, r in zip(miss_d, miss_g, miss_r)
    ]
    miss_at = miss_at.tolist()

    # each query's stretch of the lists above (no per-query work beyond slicing them), a system at a time
    tops_of = [[pairs[a:b] for a, b in pairwise(at)] for at, pairs in top_lists.values()]
    ranks_of = [[dict(zip(docs[a:b], rs[a:b])) for a, b in pairwise(at)] for at, docs, rs in ranked.values()]
    views = {
        q: {"top": dict(zip(systems, t)), "ranks": dict(zip(systems, r))}
        for q, t, r in zip(qids, zip(*tops_of), zip(*ranks_of))
    }
    missed = {q: miss_rows[a:b] for q, (a, b) in zip(qids, pairwise(miss_at))}
    return views, missed
