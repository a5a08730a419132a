"""Inputs that parse but cannot mean what the user thinks: refused, or warned about and stated.

trec_eval prints a number for each of these without a word (or crashes); twostage either
refuses the input with a typed error naming the files, or issues a ``TwostageWarning``
(``toolkit.notices``; the CLI prints it on stderr) and records it in the provenance
(``input_warnings``), so a number never hides a mistake:

- no query in common between run and judgments: an error naming both files and their query
  counts (trec_eval 9 exits 7, 10 exits 4 or, with ``-c``, prints zeros), unless the settings
  allow it (``--allow-no-common``), which the provenance then states;
- id columns of an in-memory ``Run``/``Qrels`` that are not strings (integer query ids never
  equal the qrels' text ids, so every query would score 0): an error, never a silent cast;
- every score of the run equal, or of some queries: their order is then the documents' ids;
- a cutoff beyond every query's depth (``recall.1000`` on a top-100 run);
- ranx's bpref over qrels where some query has no judged non-relevant document (ranx's value is
  0/0 there, NaN, and twostage gives ranx's value).

Control characters and NULs inside ids are refused by the readers (``toolkit.data.trec_io``).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit import notices
from toolkit.data.columns import among, arrow_of, block_starts
from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import DOC_ID, ORIGIN, QUERY_ID, SCORE, QrelsOrigin, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import InputFormatError, NoCommonQueriesError, phrase
from toolkit.measures.names import EvalSettings, Measure
from toolkit.measures.ranx import warnings_for as ranx_warnings
from toolkit.measures.registry import Params

log = logging.getLogger(__name__)

#: How many example query ids a warning names.
EXAMPLES = 3


def check_id_types(judgments, run: Run) -> None:
    """Refuse id columns that hold anything but strings: ids are compared as text, as trec_eval reads them."""
    for what, obj in (("run", run), ("judgments", judgments)):
        for column in (QUERY_ID, DOC_ID):
            kind = _string_kind(obj.frame[column])
            if kind != "string":
                raise InputFormatError(
                    obj.path,
                    None,
                    f"the {what}'s {column} column holds {kind} values, not strings; ids are compared as text "
                    f"(an integer 1 never equals the id '1'); convert it with "
                    f"frame.astype({{{column!r}: str}}) or build it with run_from_rows / qrels_from_rows",
                )


def _string_kind(series: pd.Series) -> str:
    """'string' when every value is a str (checked in C by pandas' inference), else what the values are."""
    if isinstance(series.dtype, pd.StringDtype):
        return "string"
    if series.dtype != object:
        return str(series.dtype)
    return pd.api.types.infer_dtype(series, skipna=False)


def require_common_queries(
    judgments, run: Run, n_common: int, n_judged: int, n_run: int, settings=None, *, remedy: str | None = None
) -> None:
    """No query in both run and judgments is an error (trec_eval 9 exits 7), unless ``settings`` allow it.
    ``remedy`` replaces the closing advice (``--allow-no-common``) where the caller offers no such option
    (``judge``)."""
    if n_common or (settings is not None and settings.allow_no_common):
        return
    advice = remedy or (
        f"Pass {phrase('allow_no_common=True', '--allow-no-common')} to print the zeros anyway "
        "(trec_eval 9 exits 7 here)"
    )
    raise NoCommonQueriesError(
        f"{run.path} and {judgments.path} have no query in common (run: {n_run} queries, "
        f"e.g. {_examples(run.frame[QUERY_ID])}; judgments: {n_judged} queries, "
        f"e.g. {_examples(judgments.frame[QUERY_ID])}): wrong qrels for this run? {advice}"
    )


def _examples(ids: pd.Series) -> str:
    first = pd.unique(ids.head(10_000))[:EXAMPLES]
    return ", ".join(repr(str(q)) for q in first) or "none"


def input_warnings(
    judgments, run: Run, measures, settings: EvalSettings, *, work: Workspace = NO_WORKSPACE
) -> list[str]:
    """Warnings about a run whose numbers may not mean what the user thinks; each is issued as a
    ``TwostageWarning`` (once per ``notices.once`` block)."""
    stats = work.once(  # once per run in a workspace, however many settings it is evaluated under
        "query stats",
        (run.frame, judgments.frame),
        (settings.score_precision,),
        lambda: _query_stats(run, judgments, settings.score_precision),
    )
    warnings = _tie_warnings(stats, run) + _depth_warnings(stats, measures, settings)
    warnings += ranx_warnings(judgments.frame, measures, settings.relevance_level)
    for w in warnings:
        notices.warn(w)
    return warnings


def _query_stats(run: Run, judgments, precision: str) -> pd.DataFrame:
    """Per judged run query: documents retrieved, lowest and highest score (in the evaluator's precision).

    Runs list each query's lines together, so the stats are taken per block of equal adjacent query
    ids (one string comparison per line, then numpy's reduceat), and only the blocks, far fewer than
    the lines, are grouped by id: a 7-million-line run takes about 0.1 s where a groupby of the
    lines takes 0.6 s. A file in any other order gives the same result, more slowly.
    """
    queries = pa.array(run.frame[QUERY_ID].array)
    if isinstance(queries, pa.ChunkedArray):
        queries = queries.combine_chunks()
    scores = run.frame[SCORE].to_numpy()
    if precision == "float32":  # trec_eval 9 compares scores as floats: equal there is a tie
        scores = scores.astype(np.float32)
    if not len(scores):
        return pd.DataFrame({"n": [], "lo": [], "hi": []})
    starts = block_starts(queries)
    ids = queries.take(pa.array(starts))
    # only the judged queries' blocks (a set lookup in arrow, not pandas' value-by-value isin of the stats)
    kept = np.flatnonzero(among(ids, pc.unique(arrow_of(judgments.frame[QUERY_ID]))))
    blocks = pd.DataFrame(
        {
            "q": ids.take(pa.array(kept)).to_pylist(),
            "n": np.diff(np.append(starts, len(scores)))[kept],
            "lo": np.minimum.reduceat(scores, starts)[kept],
            "hi": np.maximum.reduceat(scores, starts)[kept],
        }
    )
    return blocks.groupby("q", sort=True).agg(n=("n", "sum"), lo=("lo", "min"), hi=("hi", "max"))


def _tie_warnings(stats: pd.DataFrame, run: Run) -> list[str]:
    tied = stats[(stats["n"] > 1) & (stats["lo"] == stats["hi"])]
    if not len(tied):
        return []
    why = "their order is then the documents' ids (descending), not a ranking"
    if len(tied) == len(stats) and stats["lo"].min() == stats["hi"].max():
        return [f"every score in {run.path} is {float(stats['lo'].iloc[0])!r}: {why}"]
    names = ", ".join(repr(str(q)) for q in tied.index[:EXAMPLES])
    return [f"{len(tied)} of {len(stats)} queries in {run.path} have all scores equal (e.g. {names}): {why}"]


def _depth_warnings(stats: pd.DataFrame, measures, settings: EvalSettings) -> list[str]:
    if not len(stats):
        return []
    depth = int(stats["n"].max())
    if settings.max_docs is not None:
        depth = min(depth, settings.max_docs)
    beyond = [m for m in measures if (_rank_cutoff(m) or 0) > depth]
    if not beyond:
        return []
    listed = ", ".join(m.name for m in beyond)
    return [
        f"{listed}: cutoff beyond every query's depth (the deepest query has {depth} documents"
        f"{' after -M' if settings.max_docs is not None else ''}); the value is that of the full ranking "
        "(P and similar divide by the cutoff)"
    ]


def _rank_cutoff(m: Measure) -> int | None:
    ranks = m.spec.params in (Params.LONG_CUTOFFS, Params.RANX)  # P.10, ranx's precision@10
    return int(m.cutoff) if ranks and m.cutoff is not None else None


def input_provenance(warnings: list[str], settings: EvalSettings) -> dict:
    """Provenance fields for the checks above: only present when they have something to say."""
    out: dict = {}
    if warnings:
        out["input_warnings"] = warnings
    if settings.allow_no_common:
        out["no_common_queries"] = "allowed (--allow-no-common): zeros are printed when run and qrels share no query"
    return out


def judged_by_origin(run: Run, origin: QrelsOrigin, depths: tuple[int, ...] = (10,)) -> dict:
    """{"judged_K": {"human": x, "judge": y}}: the share of each query's top K documents (trec_eval's order; of
    min(K, retrieved) when fewer were retrieved) that carry a human / a judge label (>= 0) in the merged qrels,
    averaged over the run's queries that the merged qrels hold: twostage's judged@k, each origin apart (the two
    add up to judged@k when every qrels query is in the run)."""
    labels = origin.labels
    queries = set(labels[QUERY_ID])
    ordered = order_run(run.frame[run.frame[QUERY_ID].isin(queries)], DEFAULT_SCORE_PRECISION)
    if ordered.empty:
        return {f"judged_{k}": {"human": 0.0, "judge": 0.0} for k in depths}
    tagged = ordered.merge(labels, on=[QUERY_ID, DOC_ID], how="left")
    retrieved = tagged.groupby(QUERY_ID, sort=True).size()
    out = {}
    for k in depths:
        top = tagged[tagged["rank"] <= k]
        denominator = np.minimum(retrieved.to_numpy(), k)
        out[f"judged_{k}"] = {
            who: float(
                np.mean(
                    (top[ORIGIN] == who).groupby(top[QUERY_ID], sort=True).sum().reindex(retrieved.index).to_numpy()
                    / denominator
                )
            )
            for who in ("human", "judge")
        }
    return out


__all__ = ["check_id_types", "input_provenance", "input_warnings", "judged_by_origin", "require_common_queries"]
