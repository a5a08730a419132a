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
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.data.columns import arrow_codes, arrow_of, string_hashes, take
from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, SCORE_PRECISIONS, order_run
from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace

#: The share of queries the rule must hold for at the detected depth ("nearly every query": 2 of DL19's 43
#: queries may differ, e.g. a failed model call that dropped a document).
DETECT_SHARE = 0.95
DEPTH_RULE = (
    "the smallest k at which the run's top k are the first stage's top k reordered and its ranks below k repeat "
    "the first stage's ranks below k in the first stage's order (equal first-stage scores count as one position)"
)
#: Where a reranked run's depth came from, in the order they are tried.
DEPTH_SOURCES = ("option", "given", "sidecar", "detected")


def ranked_with_groups(
    frame: pd.DataFrame, score_precision: str = DEFAULT_SCORE_PRECISION, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """``frame`` in trec_eval order with ``rank`` and ``group``: an id shared by the documents of one query with
    equal scores at ``score_precision`` (unique across queries)."""
    return work.once(
        "ranked_with_groups",
        (frame,),
        (score_precision,),
        lambda: _ranked_with_groups(frame, score_precision, work=work),
    )


def _ranked_with_groups(frame: pd.DataFrame, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> pd.DataFrame:
    ordered = order_run(frame, score_precision, work=work)  # type: ignore[arg-type]
    scores = ordered[SCORE].to_numpy(dtype=np.float64)
    if score_precision == "float32":
        scores = scores.astype(np.float32).astype(np.float64)
    new = ordered["rank"].to_numpy() == 1  # a query's list begins at rank 1 (its rows are contiguous)
    if len(ordered):
        new[0] = True
        new[1:] |= scores[1:] != scores[:-1]
    ordered["group"] = np.cumsum(new)
    return ordered


@dataclass(frozen=True)
class _Blocks:
    """A run in trec_eval order as one block of rows per query: each block's first row, its length and its
    query id (in the order of the rows)."""

    starts: np.ndarray
    lengths: np.ndarray
    qids: pa.Array

    def block_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.starts), dtype=np.int64), self.lengths)


def _blocks(ordered: pd.DataFrame) -> _Blocks:
    """The query blocks of a frame in trec_eval order with its ``rank``: a block begins where the rank is 1 (no
    string is compared)."""
    starts = np.flatnonzero(ordered["rank"].to_numpy() == 1).astype(np.int64)
    lengths = np.diff(np.append(starts, len(ordered))).astype(np.int64)
    qids = take(arrow_of(ordered[QUERY_ID]), starts).cast(pa.large_string())
    return _Blocks(starts, lengths, qids)


def top_rows(blocks: _Blocks, which: np.ndarray, k: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the first ``k`` rows (at most the block's length) of the blocks ``which``, block after
    block, and the index into ``which`` of each."""
    n = np.minimum(blocks.lengths[which], k)
    owner = np.repeat(np.arange(len(which), dtype=np.int64), n)
    offsets = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return blocks.starts[which][owner] + offsets, owner


def _index_in(values: pa.Array | pa.ChunkedArray, value_set: pa.Array) -> np.ndarray:
    """Position of each value in ``value_set`` (-1 where absent)."""
    found = pc.index_in(values, value_set=value_set)
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _run_blocks(frame: pd.DataFrame, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> _Blocks:
    """``_blocks`` of a run frame in trec_eval order (once per frame)."""
    return work.once(
        "query_blocks",
        (frame,),
        (score_precision,),
        lambda: _blocks(order_run(frame, score_precision, work=work)),  # type: ignore[arg-type]
    )


def known_blocks(frame: pd.DataFrame, *, work: Workspace = NO_WORKSPACE) -> _Blocks | None:
    """``_run_blocks`` of ``frame`` at any score precision when ``work`` has them (else None)."""
    for precision in SCORE_PRECISIONS:
        if work.has("query_blocks", (frame,), (precision,)):
            return _run_blocks(frame, precision, work=work)
    return None


def in_first_top(
    first: Run,
    frame: pd.DataFrame,
    k: int,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> np.ndarray:
    """Per row of ``frame`` (query_id, doc_id): is the document among the first stage's top ``k`` of its query
    (trec_eval order at ``score_precision``); strings are looked up once per distinct query, and the (query,
    document) pairs in the hashed top ``k`` the alignments of reranked runs with ``first`` share
    (``_first_top``; every hit checked string for string), else in the first stage's vocabulary of ids, the top
    ``k`` compared as integers."""
    fb = _run_blocks(first.frame, score_precision, work=work)
    block = _index_in(arrow_of(frame[QUERY_ID]).cast(pa.large_string()), fb.qids)
    f_docs = arrow_of(order_run(first.frame, score_precision, work=work)[DOC_ID])  # type: ignore[arg-type]
    docs = arrow_of(frame[DOC_ID]).cast(pa.large_string())
    held = np.flatnonzero(block >= 0)
    found = _hashed_lookup(_first_top(first.frame, k, score_precision, work=work), f_docs, block[held], docs, held)
    if found is not None:
        out = np.zeros(len(frame), bool)
        out[held] = found >= 0
        return out
    rows, owner = top_rows(fb, np.arange(len(fb.starts), dtype=np.int64), k)
    top_codes, codes = arrow_codes(take(f_docs, rows), docs)
    width = int(max(top_codes.max(initial=-1), codes.max(initial=-1))) + 1
    keys = np.sort(owner * width + top_codes)
    wanted = np.where(block >= 0, block * width + codes, -1)
    if not len(keys):
        return np.zeros(len(frame), bool)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return (wanted >= 0) & (keys[at] == wanted)


@dataclass(frozen=True)
class _Alignment:
    """A reranked run (``ordered``, in trec_eval order; ``blocks``) against its first stage (``first``: its
    blocks; ``first_rank``, ``first_group``: each first-stage row's rank and tie group): per reranked block the
    first stage's block of the same query (``block_in_first``, -1 when the first stage lacks the query), per
    reranked row the first-stage row of the same document (``row_in_first``, -1 when none) and ``match``."""

    ordered: pd.DataFrame
    blocks: _Blocks
    first: _Blocks
    first_rank: np.ndarray
    first_group: np.ndarray
    block_in_first: np.ndarray
    row_in_first: np.ndarray
    match: np.ndarray


def alignment(first: Run, reranked: Run, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> _Alignment:
    """The ``_Alignment`` of a reranked run with its first stage, computed once per pair within a shared scope:
    the depth curve, the decomposition and the listwise behaviour all read it."""
    return work.once(
        "alignment", (first, reranked), (score_precision,), lambda: _align(first, reranked, score_precision, work=work)
    )


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]``, 0 where a row is -1 (none)."""
    if not len(values):
        return np.zeros(len(rows), values.dtype)
    return np.where(rows >= 0, values[np.maximum(rows, 0)], 0)


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Position in ``keys`` (unique) of each of ``wanted`` (-1 where absent)."""
    if not len(keys):
        return np.full(len(wanted), -1, np.int64)
    order = np.argsort(keys, kind="stable")
    at = np.minimum(np.searchsorted(keys, wanted, sorter=order), len(keys) - 1)
    hit = keys[order[at]] == wanted
    return np.where(hit, order[at], -1)


def _pair_hashes(blocks: np.ndarray, docs: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each (block, document id) pair."""
    parts = docs.chunks if isinstance(docs, pa.ChunkedArray) else [docs]
    h = np.concatenate([string_hashes(c) for c in parts if len(c)] or [np.zeros(0, np.uint64)])
    h ^= blocks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(31)  # splitmix64's finaliser: the block's bits reach every bit of the hash
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h


@dataclass(frozen=True)
class _FirstTop:
    """The sorted hashes of the (block, document) pairs of the first stage's top rows of every query block
    (``keys``; None when two pairs share a hash), and the first-stage row (``rows``) and block (``block``) of
    each key."""

    keys: np.ndarray | None
    rows: np.ndarray
    block: np.ndarray


def _first_top(first: pd.DataFrame, depth: int, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> _FirstTop:
    """``_FirstTop`` of the first stage's top ``depth`` rows: once per first stage and depth however many
    reranked runs are aligned with it."""
    return work.once(
        "first top", (first,), (depth, score_precision), lambda: _top_of(first, depth, score_precision, work=work)
    )


def _top_of(first: pd.DataFrame, depth: int, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> _FirstTop:
    fb = _run_blocks(first, score_precision, work=work)
    rows, block = top_rows(fb, np.arange(len(fb.starts), dtype=np.int64), depth)
    fh = _pair_hashes(block, take(arrow_of(order_run(first, score_precision, work=work)[DOC_ID]), rows))  # type: ignore[arg-type]
    order = np.argsort(fh)
    keys = fh[order]
    if bool((keys[1:] == keys[:-1]).any()):
        return _FirstTop(None, np.zeros(0, np.int64), np.zeros(0, np.int32))
    narrow = np.int32 if len(fb.starts) < 2**31 else np.int64  # held for the whole diagnosis: kept small
    top = _FirstTop(keys, rows[order], block[order].astype(narrow))
    for v in (top.keys, top.rows, top.block):
        v.flags.writeable = False
    return top


def _hashed_lookup(
    top: _FirstTop, f_docs: pa.Array | pa.ChunkedArray, r_block: np.ndarray, r_docs, r_rows: np.ndarray
) -> np.ndarray | None:
    """The first-stage row (among the top rows ``top``; documents ``f_docs``) of each reranked pair (``r_block``
    with the documents ``r_docs`` at ``r_rows``), -1 where absent: the pairs are hashed (no dictionary of
    strings) and every hit is checked string for string. None when two first-stage pairs share a hash or a hit
    is not the same pair (then the caller encodes the strings)."""
    if top.keys is None:
        return None
    keys = top.keys
    if not len(keys) or not len(r_rows):
        return np.full(len(r_rows), -1, np.int64)
    some = r_docs if len(r_rows) == len(r_docs) else take(r_docs, r_rows)
    rh = _pair_hashes(r_block, some)
    probes = np.argsort(rh)  # sorted probes: the binary searches walk the keys in order (random ones miss cache)
    at = np.empty(len(rh), np.int64)
    at[probes] = np.minimum(np.searchsorted(keys, rh[probes]), len(keys) - 1)
    hit = keys[at] == rh
    found = np.where(hit, top.rows[at], -1)
    rows = np.flatnonzero(hit)
    hits = some if len(rows) == len(some) else take(some, rows)  # nearly every pair is a hit
    same = pc.equal(take(f_docs, found[rows]), hits).to_numpy(zero_copy_only=False)
    if not (bool(same.all()) and np.array_equal(top.block[at[rows]], r_block[rows])):
        return None
    return found


def _align(first: Run, reranked: Run, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> _Alignment:
    f = ranked_with_groups(first.frame, score_precision, work=work)
    r = order_run(reranked.frame, score_precision, work=work)[[QUERY_ID, DOC_ID, "rank"]]  # type: ignore[arg-type]
    fb, rb = (
        _run_blocks(first.frame, score_precision, work=work),
        _run_blocks(reranked.frame, score_precision, work=work),
    )
    f_rank, f_group = f["rank"].to_numpy(), f["group"].to_numpy()
    f_docs, r_docs = arrow_of(f[DOC_ID]), arrow_of(r[DOC_ID])
    in_first = _index_in(rb.qids, fb.qids)
    r_rank = r["rank"].to_numpy()
    r_fblock = in_first[rb.block_of_row()]
    row = np.full(len(r), -1, np.int64)
    # first the first stage's rows down to the reranked run's longest list (where nearly every match is) ...
    deepest = int(r_rank.max()) if len(r) else 0
    wanted = np.flatnonzero(r_fblock >= 0)
    # every query's top (block, document) hashes: made once for the runs reranking the same first stage
    found = _hashed_lookup(
        _first_top(first.frame, deepest, score_precision, work=work), f_docs, r_fblock[wanted], r_docs, wanted
    )
    if found is None:  # a hash shared by two of the first stage's pairs, or a hit that is not the same pair
        top, block = top_rows(fb, np.arange(len(fb.starts), dtype=np.int64), deepest)
        top_codes, r_codes = arrow_codes(take(f_docs, top), r_docs)
        width = int(max(top_codes.max(initial=-1), r_codes.max(initial=-1))) + 1
        pos = _lookup(block * width + top_codes, r_fblock[wanted] * width + r_codes[wanted])
        found = np.where(pos >= 0, top[np.maximum(pos, 0)] if len(top) else -1, -1)
    row[wanted] = found
    # ... then, for the documents still unmatched, the first stage's deeper rows holding one of them
    rest = wanted[found < 0]
    if len(rest):
        rest_docs = take(r_docs, rest)
        holds = pc.is_in(f_docs, value_set=pc.unique(rest_docs).cast(f_docs.type)).to_numpy(zero_copy_only=False)
        deep = np.flatnonzero(holds & (f_rank > deepest))
        deep_codes, rest_codes = arrow_codes(take(f_docs, deep), rest_docs)
        width = int(max(deep_codes.max(initial=-1), rest_codes.max(initial=-1))) + 1
        block = np.searchsorted(fb.starts, deep, side="right") - 1
        pos = _lookup(block * width + deep_codes, r_fblock[rest] * width + rest_codes)
        row[rest[pos >= 0]] = deep[pos[pos >= 0]]
    # the first stage's row at the same rank: the document there in the same tie group is a match
    at_ok = (r_fblock >= 0) & (r_rank <= _at(fb.lengths, r_fblock))
    at = np.where(at_ok, _at(fb.starts, r_fblock) + r_rank - 1, -1)
    match = (row >= 0) & at_ok & (_at(f_group, row) == _at(f_group, at))
    return _Alignment(r, rb, fb, f_rank, f_group, in_first, row, match)


def aligned(
    first: Run, reranked: Run, score_precision: str = DEFAULT_SCORE_PRECISION, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """The reranked run in trec_eval order, one row per document: query_id, doc_id, ``rank``, ``first_rank``
    and ``group`` (the document's rank and tie group in the first stage; NaN when the first stage lacks it),
    and ``match``: whether the first stage's document at the same rank is in the same tie group."""
    return work.once(
        "aligned", (first, reranked), (score_precision,), lambda: _aligned(first, reranked, score_precision, work=work)
    )


def _aligned(first: Run, reranked: Run, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> pd.DataFrame:
    al = alignment(first, reranked, score_precision, work=work)
    out = al.ordered.copy(deep=False)
    row = al.row_in_first
    found = row >= 0
    first_rank, group = _at(al.first_rank, row), _at(al.first_group, row)
    if not found.all():  # as a left join gives them: float with NaN where the first stage lacks the document
        first_rank = np.where(found, first_rank, np.nan)
        group = np.where(found, group, np.nan)
    out["first_rank"] = first_rank
    out["group"] = group
    out["match"] = al.match
    return out


def reorder_counts(
    first: Run,
    reranked: Run,
    depth: int | None,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict:
    """What ``check_reordering`` counts beside the documents' kinds: the queries only one of the runs holds
    (sorted), and of the first stage's top ``depth`` (its whole lists when ``depth`` is None or 0) in the queries
    the reranked run holds, how many the reranked run holds (``candidates_kept``) and how many there are
    (``candidates_total``)."""
    al = alignment(first, reranked, score_precision, work=work)
    fb = al.first
    inner = al.block_in_first[al.block_in_first >= 0]
    in_reranked = np.zeros(len(fb.starts), bool)
    in_reranked[inner] = True
    limit = depth if depth else np.iinfo(np.int64).max
    rows = al.row_in_first[al.row_in_first >= 0]
    kept = np.zeros(len(al.first_rank), bool)  # each first-stage row once, however often the reranked run holds it
    kept[rows[al.first_rank[rows] <= limit]] = True
    return {
        "queries_only_in_reranked": sorted(al.blocks.qids.filter(pa.array(al.block_in_first < 0)).to_pylist()),
        "queries_only_in_first_stage": sorted(fb.qids.filter(pa.array(~in_reranked)).to_pylist()),
        "candidates_kept": int(np.count_nonzero(kept)),
        "candidates_total": int(np.minimum(fb.lengths[inner], limit).sum()),
    }


def rerank_shapes(
    first: Run, reranked: Run, score_precision: str = DEFAULT_SCORE_PRECISION, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    """Per query both runs hold (index query_id): ``length`` (its list), ``first_length``,
    ``first_change`` and ``last_change`` (the first and last rank where it departs from the first stage's order;
    0 when it never does) and ``reorders``: its ranks above ``last_change`` are the first stage's documents
    above it (so the depth rule holds at every k >= last_change)."""
    return work.once(
        "shapes", (first, reranked), (score_precision,), lambda: _shapes(first, reranked, score_precision, work=work)
    )


def _shapes(first: Run, reranked: Run, score_precision: str, *, work: Workspace = NO_WORKSPACE) -> pd.DataFrame:
    al = alignment(first, reranked, score_precision, work=work)
    rb, fb = al.blocks, al.first
    # a query only the reranked run holds has no first-stage order to compare with
    held = np.flatnonzero(al.block_in_first >= 0)
    fblock = al.block_in_first[held]
    rank = al.ordered["rank"].to_numpy().astype(np.int64)
    starts = rb.starts[held]
    changed = ~al.match
    if len(held):
        first_change = np.minimum.reduceat(np.where(changed, rank, np.iinfo(np.int64).max), rb.starts)[held]
        first_change[first_change == np.iinfo(np.int64).max] = 0
        last_change = np.maximum.reduceat(np.where(changed, rank, 0), rb.starts)[held]
    else:
        first_change = last_change = np.zeros(0, np.int64)
    # above last_change: the same multiset of first-stage tie groups as the first stage's own ranks there
    ok = np.minimum(last_change, fb.lengths[fblock]) == last_change
    top_r, owner_r = top_rows(rb, held, last_change)
    lacks = np.bincount(owner_r[al.row_in_first[top_r] < 0], minlength=len(held)) > 0
    ok &= ~lacks
    same = np.flatnonzero(ok)
    sel = ok[owner_r]
    top_r, owner_r = top_r[sel], owner_r[sel]
    groups_r = al.first_group[al.row_in_first[top_r]]
    if bool((fblock[1:] > fblock[:-1]).all()):
        # the first stage's tie groups are numbered block after block, and the blocks of ascending owners
        # ascend: sorting the values sorts each query's groups (no sort of (owner, group) pairs)
        groups_r = np.sort(groups_r)
    else:
        groups_r = groups_r[np.lexsort((groups_r, owner_r))]  # each query's groups sorted (owner_r is ascending)
    top_f, _ = top_rows(fb, fblock[same], last_change[same])
    differs = groups_r != al.first_group[top_f]
    ok[same] = np.bincount(owner_r[differs], minlength=len(held))[same] == 0
    out = pd.DataFrame(
        {
            "length": rb.lengths[held],
            "first_length": fb.lengths[fblock],
            "first_change": first_change,
            "last_change": last_change,
            "reorders": ok,
        },
        index=pd.Index(al.ordered[QUERY_ID].iloc[starts].to_numpy(), name=QUERY_ID),
    ).sort_index()
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
    first: Run,
    reranked: Run,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    share: float = DETECT_SHARE,
    *,
    work: Workspace = NO_WORKSPACE,
) -> DepthDetection:
    """The smallest k >= 1 at which the depth rule (module docstring) holds for at least ``share`` of the
    queries both runs hold (the reranked run's other queries are counted as ``foreign``)."""
    shapes = rerank_shapes(first, reranked, score_precision, work=work)
    foreign = int((alignment(first, reranked, score_precision, work=work).block_in_first < 0).sum())
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
    first: Run,
    reranked: Run,
    depth: int | None,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.DataFrame:
    """The reranked run's documents (``aligned``) with ``kind``: ``candidate`` (in the first stage's top
    ``depth``; its whole list when ``depth`` is None), ``tail`` (below the depth in the first stage and placed
    below the depth where the first stage has it: the first stage's own order) or ``introduced`` (anything
    else: not in the first stage at all, or a document from below the depth moved out of its first-stage
    place); and ``in_first_stage``."""
    args = (depth, score_precision)
    return work.once(
        "classify", (first, reranked), args, lambda: _classify(first, reranked, depth, score_precision, work=work)
    )


def _classify(
    first: Run, reranked: Run, depth: int | None, score_precision: str, *, work: Workspace = NO_WORKSPACE
) -> pd.DataFrame:
    a = aligned(first, reranked, score_precision, work=work)
    fr = a["first_rank"].to_numpy(dtype=np.float64)
    inside = ~np.isnan(fr)
    cand = inside if depth is None else inside & (fr <= depth)
    tail = inside & ~cand & (a["rank"].to_numpy() > (depth or 0)) & a["match"].to_numpy(dtype=bool)
    # one of three labels per row: a categorical column (codes), not an array of Python strings
    kind = np.where(cand, 0, np.where(tail, 1, 2)).astype(np.int8)
    a["kind"] = pd.Categorical.from_codes(kind, categories=["candidate", "tail", "introduced"])
    a["in_first_stage"] = inside
    return a
