"""(judgments, run, measures, settings) -> per-query table and summary, exactly as trec_eval computes them.

This module only orchestrates: it ranks the run against the judgments once
(``ranked.py`` for qrels; per query for preferences; per judgment group for
``qrels_jg``), calls each requested family's compute function (declared in
``registry.py``, defined in ``trec.py`` / ``prefs.py``),
applies ``-Z`` and averages as trec_eval does. Nothing here decides what a
measure means.

Query set. Queries in the run but not in the judgments are ignored. Without
``-c`` the mean is over queries in both. With ``-c`` it is over every judged
query: trec_eval 9 counts a missing query as 0 without printing it (and as
log(0.00001) for gm_map/gm_bpref); trec_eval 10 evaluates it against a
one-document placeholder ranking, prints it with ``-q``, and then zeroes
num_ret, utility, relstring, unj* and rbp_resid, as its ``trec_eval.c``
does. A judged query absent from the run without ``-c`` is left out of the
mean with a note on stderr (trec_eval 10 stops with an error naming the
wrong file there; 9.x skips it silently).
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from toolkit.data.ranking import group_starts, trec_order, within_group_rank
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, SCORE, JudgmentGroups, Prefs, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.errors import UnknownMeasureError, phrase
from toolkit.evaluation.checks import check_id_types, input_provenance, input_warnings, require_common_queries
from toolkit.measures.names import EvalSettings, Measure
from toolkit.measures.prefs import JgInput, build_prefs_input
from toolkit.measures.ranked import QrelsIndex, build_ranked, index_qrels
from toolkit.measures.ranx import describe as describe_ranx
from toolkit.measures.ranx import own_level
from toolkit.measures.trec import MIN_GEO_MEAN, Context
from toolkit.version import __version__

log = logging.getLogger(__name__)

#: The document trec_eval 10 "retrieves" for a judged query missing from the run under -c.
PLACEHOLDER_DOC = "ceci_nest_pas_un_docno"
#: What -Z prints when the z-score file has no mean for a query and measure (trec_eval's MISSING_ZSCORE_VALUE).
MISSING_ZSCORE = -1000000.0


@dataclass(frozen=True)
class EvalResult:
    """Per-query values (tidy), the ``all`` line, and how they were computed.

    ``per_query`` columns: query_id, measure, value, in_run; one row per
    evaluated query and numeric measure. gm_map and gm_bpref hold
    log(max(v, 0.00001)) per query, the term trec_eval averages. ``strings``
    holds relstring values ({measure name: {query: text}}); ``printed`` the
    queries a ``-q`` listing shows, in order; ``runid`` the run's tag as
    trec_eval prints it.

    Two parameter sets can print the same name (``iprec_at_recall.0.999,1``
    both print ``iprec_at_recall_1.00``; trec_eval prints both lines). The
    name-keyed views (``aggregate``, ``wide()``) then hold the first;
    ``summary`` and ``columns`` are keyed by the measure itself and hold
    each: ``columns[m]`` is m's per-query values in ``evaluated`` order.
    """

    per_query: pd.DataFrame
    aggregate: dict[str, float]
    measures: tuple[Measure, ...]
    settings: EvalSettings
    provenance: dict
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)  # the notes that change what a number means
    strings: dict[str, dict[str, str]] = field(default_factory=dict)
    printed: tuple[str, ...] = ()
    runid: str = ""
    zscores: bool = False
    summary: dict[Measure, float] = field(default_factory=dict)
    columns: dict[Measure, np.ndarray] = field(default_factory=dict)
    evaluated: tuple[str, ...] = ()

    def wide(self) -> pd.DataFrame:
        """One row per query, one column per numeric measure name (the first measure of a repeated name)."""
        pq = self.per_query.drop_duplicates(["query_id", "measure"], keep="first")
        table = pq.pivot(index="query_id", columns="measure", values="value")
        return table.reindex(columns=[m.name for m in self.measures if m.name in table.columns])


@dataclass(frozen=True)
class PreparedJudgments:
    """Judgments parsed and factorised once (query ids, document keys, label counts), for many evaluations.

    ``evaluate`` takes it wherever it takes judgments, with identical results; a diagnosis or a
    comparison that evaluates one qrels against several runs and settings prepares it once
    (``prepare_judgments``). ``index`` is None for preferences and judgment groups, which are
    read per query.
    """

    judgments: Qrels | Prefs | JudgmentGroups
    qids: np.ndarray
    q_qidx: np.ndarray
    index: QrelsIndex | None = None


def prepare_judgments(judgments, *, work: Workspace = NO_WORKSPACE) -> PreparedJudgments:
    """Factorise ``judgments`` (Qrels, Prefs or JudgmentGroups) once; a prepared value is returned as it is.
    Diversity qrels are factorised as their judged (query, document) pairs (``diversity.collapse``); their
    measures read the subtopics from the judgments themselves."""
    if isinstance(judgments, PreparedJudgments):
        return judgments
    if judgment_format(judgments) in ("qrels", "qrels_div"):
        # in a workspace one Qrels is factorised once, however many steps evaluate it
        return work.once("prepared judgments", (judgments, judgments.frame), (), lambda: _prepare_qrels(judgments))
    q_qidx, uniques = pd.factorize(judgments.frame[QUERY_ID], sort=True)
    return PreparedJudgments(judgments, np.array(uniques.tolist(), dtype=object), q_qidx)


def _prepare_qrels(qrels: Qrels) -> PreparedJudgments:
    from toolkit.measures.diversity import collapse

    index = index_qrels(collapse(qrels) if qrels.diversity else qrels)
    qids, q_qidx = index.qids, index.q_qidx
    if qrels.diversity:  # every diversity line's query, for the callers that read the judgments' lines
        import pyarrow as pa
        import pyarrow.compute as pc

        from toolkit.data.columns import arrow_of

        wanted = pa.array(qids.tolist(), type=pa.large_string())
        q_qidx = pc.index_in(arrow_of(qrels.frame[QUERY_ID]), value_set=wanted).to_numpy(zero_copy_only=False)
    return PreparedJudgments(qrels, qids, q_qidx, index)


def run_query_ids(run: Run, *, work: Workspace = NO_WORKSPACE) -> frozenset[str]:
    """The query ids ``run`` holds (once per run in ``work``)."""
    return work.once("query ids", (run.frame,), (), lambda: frozenset(pd.unique(run.frame[QUERY_ID]).tolist()))


def judgment_format(judgments) -> str:
    if isinstance(judgments, Prefs):
        return judgments.kind
    if isinstance(judgments, JudgmentGroups):
        return "qrels_jg"
    if isinstance(judgments, PreparedJudgments):
        return judgment_format(judgments.judgments)
    return "qrels_div" if getattr(judgments, "diversity", False) else "qrels"


def reads_format(measures, rel_format: str = "qrels") -> str:
    """The judgments format to read for ``measures`` when ``rel_format`` was asked for: the diversity
    measures (``alpha_nDCG@10``, ...) read diversity qrels, so qrels asked for by default (``qrels``) are read
    as such when every measure is one of them; otherwise ``rel_format`` itself (``check_measures`` then
    refuses a measure that reads another format, naming it)."""
    kinds = {m.spec.rel_format for m in measures}
    return "qrels_div" if rel_format == "qrels" and kinds == {"qrels_div"} else rel_format


def check_measures(measures, settings: EvalSettings, rel_format: str) -> None:
    """Refuse measures this input or these settings cannot give, naming the fix."""
    reads = "prefs" if rel_format in ("prefs", "qrels_prefs") else rel_format
    for m in measures:
        spec = m.spec
        if spec.rel_format not in ("any", reads):
            need = {
                "qrels": phrase("rel_format='qrels'", "-R qrels") + " (the default)",
                "prefs": phrase("rel_format='prefs'", "-R prefs") + " or " + phrase("'qrels_prefs'", "-R qrels_prefs"),
                "qrels_jg": phrase("rel_format='qrels_jg'", "-R qrels_jg"),
                "qrels_div": "diversity qrels (`qid subtopic docid rel`, "
                + phrase("rel_format='qrels_div'", "-R qrels_div")
                + "; read so when every measure asked is a diversity measure)",
            }[spec.rel_format]
            was = phrase(f"rel_format={rel_format!r}", f"-R {rel_format}")
            raise UnknownMeasureError(f"{m.name} needs {need}; the judgments were read as {was}")
        if spec.since > settings.trec_eval:
            raise UnknownMeasureError(
                f"{m.name} is a trec_eval {spec.since} measure "
                f"(pass {phrase(f'trec_eval={spec.since}', f'--trec-eval {spec.since}')})"
            )
        if spec.gain and m.params and settings.gain.kind != "linear":
            raise UnknownMeasureError(
                f"{m.name}: give the gains either as {m.family}.L=G parameters or with "
                f"{phrase('gain=', '--gain')}, not both"
            )


def evaluate(
    judgments,
    run: Run,
    measures,
    settings: EvalSettings | None = None,
    *,
    zscores: dict | None = None,
    warn: bool = True,
    work: Workspace = NO_WORKSPACE,
) -> EvalResult:
    """Evaluate ``run`` against ``judgments`` (Qrels, Prefs, JudgmentGroups, or those prepared by
    ``prepare_judgments``); see each family's definition. ``warn=False`` skips the input warnings, for runs the
    toolkit builds itself (an ideal ranking ties equal gains on purpose: nothing the user gave is wrong)."""
    settings = settings or EvalSettings()
    measures = tuple(sorted(set(measures), key=lambda m: m.sort_key))
    prepared = prepare_judgments(judgments, work=work)
    judgments = prepared.judgments
    rel_format = judgment_format(judgments)
    check_measures(measures, settings, rel_format)
    check_id_types(judgments, run)
    qids = prepared.qids
    nq = len(qids)
    version = settings.trec_eval
    run_queries = run_query_ids(run, work=work)
    in_run = np.array([q in run_queries for q in qids.tolist()], dtype=bool)
    extra = len(run_queries - set(qids.tolist()))
    require_common_queries(judgments, run, int(in_run.sum()), nq, len(run_queries), settings)
    warnings = input_warnings(judgments, run, measures, settings, work=work) if warn else []
    if warn and rel_format == "qrels_div":
        warnings += _one_subtopic(judgments)
    placeholder = settings.complete and version == 10 and not in_run.all()
    scored = _with_placeholders(run, qids[~in_run]) if placeholder else run
    evaluated = np.ones(nq, dtype=bool) if settings.complete else in_run
    ctx = _context(settings, version, judgments, run=run)
    values = _compute(prepared, rel_format, scored, measures, settings, ctx, work)
    pooled = {k[1]: v for k, v in list(values.items()) if isinstance(k, tuple)}
    values = {k: v for k, v in values.items() if not isinstance(k, tuple)}
    if placeholder:
        _clean_placeholders(values, ~in_run)
    strings = {
        m.name: dict(zip(qids[evaluated].tolist(), values[m][evaluated].tolist()))
        for m in measures
        if m.spec.value_type == "string" and m in values
    }
    numeric = [m for m in measures if m.spec.value_type != "string"]
    if zscores is not None:
        for m in numeric:
            values[m] = _zscore(values[m], qids, m.name, zscores)
    if settings.complete and version == 9:  # trec_eval 9 does not evaluate a missing query: it adds 0 to the sums
        for m in numeric:
            values[m] = np.where(in_run, values[m], 0.0)
    summary = {m: _aggregate(m, values[m], evaluated, in_run, settings, judgments) for m in numeric}
    for m, v in pooled.items():
        if zscores is None:
            summary[m] = v
    aggregate: dict[str, float] = {}
    for m, v in summary.items():
        aggregate.setdefault(m.name, v)
    ev_q = qids[evaluated]
    n_eval = int(evaluated.sum())
    per_query = pd.DataFrame(
        {
            "query_id": np.tile(ev_q, len(numeric)).astype(str),
            "measure": np.repeat([m.name for m in numeric], n_eval),
            "value": np.concatenate([values[m][evaluated] for m in numeric]) if numeric else np.zeros(0),
            "in_run": np.tile(in_run[evaluated], len(numeric)),
        }
    )
    printed = tuple(qids[evaluated if version == 10 else evaluated & in_run].tolist())
    query_warnings = _query_warnings(nq, in_run, extra, n_eval, settings, measures)
    notes = query_warnings + _notes(run, judgments)
    provenance = build_provenance(
        judgments, run, measures, settings, nq=nq, n_run=int(in_run.sum()) + extra, n_eval=n_eval, zscores=zscores
    )
    provenance.update(input_provenance(warnings, settings))
    return EvalResult(
        per_query=per_query,
        aggregate=aggregate,
        measures=measures,
        settings=settings,
        provenance=provenance,
        notes=tuple(notes),
        warnings=tuple(query_warnings),
        strings=strings,
        printed=printed,
        runid=run.runid,
        zscores=zscores is not None,
        summary=summary,
        columns={m: values[m][evaluated] for m in numeric},
        evaluated=tuple(ev_q.tolist()),
    )


def _one_subtopic(qrels: Qrels) -> list[str]:
    """A warning when no query of diversity qrels has two subtopics (ordinary qrels read with -R qrels_div)."""
    from toolkit import notices
    from toolkit.data.records import SUBTOPIC

    per_query = qrels.frame.groupby(QUERY_ID, sort=False)[SUBTOPIC].nunique()
    if len(per_query) and int(per_query.max()) > 1:
        return []
    text = (
        "every query of the diversity qrels has a single subtopic (their second column): the intent-aware "
        "measures then reduce to their plain forms; TREC diversity qrels list a document once per subtopic"
    )
    notices.warn(text)
    return [text]


def _context(settings: EvalSettings, version: int, judgments: Any, **more: Any) -> Context:
    """The measures' context for ``settings`` (gain, discount, -N, judged compatibility) and ``version``."""
    return Context(
        version=version,
        gain=settings.gain,
        discount=settings.discount,
        num_docs=settings.num_docs,
        judged_compat=settings.judged_compat,
        qrels=judgments,
        **more,
    )


def coded_values(
    prepared: PreparedJudgments,
    qidx: np.ndarray,
    code: np.ndarray,
    order: np.ndarray,
    measure: Measure,
    settings: EvalSettings,
) -> np.ndarray | None:
    """Per-query values of ``measure`` (indexed like ``prepared.qids``; 0 for a query ``evaluate`` leaves out)
    of a run given coded: its rows' query indices, relevance codes and trec_eval order, as ``ranked_codes``
    reads them (``code_rows`` codes a run's rows once). ``evaluate(...).columns`` of the same run, with the same
    queries evaluated, placeholders (``-c``, trec_eval 10) and zeros (``-c``, trec_eval 9), for the runs the
    toolkit builds as permutations of rows it has coded (no input checks or warnings: nothing the user gave).
    None where the run holds no judged query (``evaluate`` refuses it: the caller evaluates it to say why)."""
    import pyarrow as pa

    from toolkit.measures.ranked import doc_codes, ranked_codes

    if prepared.index is None:
        raise ValueError("coded_values reads qrels (prepare_judgments of a Qrels)")
    settings = settings or EvalSettings()
    check_measures((measure,), settings, "qrels")
    nq = len(prepared.qids)
    in_run = np.bincount(qidx, minlength=nq) > 0
    if not in_run.any() and not settings.allow_no_common:
        return None
    version = settings.trec_eval
    placeholder = settings.complete and version == 10 and not in_run.all()
    if placeholder:  # the placeholder document as the one row of each query the run lacks (_with_placeholders)
        missing = np.flatnonzero(~in_run).astype(qidx.dtype)
        extra = doc_codes(prepared.index, missing, pa.array([PLACEHOLDER_DOC] * len(missing), type=pa.string()))
        qidx = np.concatenate([qidx[order], missing])
        code = np.concatenate([code[order], extra.astype(code.dtype)])
        order = np.argsort(qidx, kind="stable")
    ranked = ranked_codes(
        prepared.index,
        qidx,
        code,
        order,
        level=settings.relevance_level,
        max_docs=settings.max_docs,
        judged_only=settings.judged_only,
    )
    ctx = _context(settings, version, prepared.judgments)
    try:
        computed = measure.spec.compute(ranked, [measure], ctx)
    except ValueError as exc:  # a family that reads the rows' qrels lines or scores, which coded rows lack
        raise UnknownMeasureError(f"{measure.name} ({measure.spec.source}) cannot be computed here: {exc}") from None
    values = {k: v for k, v in computed.items() if not isinstance(k, tuple)}
    if placeholder:
        _clean_placeholders(values, ~in_run)
    value = np.asarray(values[measure], dtype=np.float64)
    if settings.complete and version == 9:
        value = np.where(in_run, value, 0.0)
    evaluated = np.ones(nq, dtype=bool) if settings.complete else in_run
    return np.where(evaluated, value, 0.0)


def _with_placeholders(run: Run, missing: np.ndarray) -> Run:
    f = run.frame
    extra = pd.DataFrame(
        {
            QUERY_ID: pd.array(missing.astype(str).tolist(), dtype=f[QUERY_ID].dtype),
            DOC_ID: pd.array([PLACEHOLDER_DOC] * len(missing), dtype=f[DOC_ID].dtype),
            SCORE: np.ones(len(missing)),
        }
    )
    frame = pd.concat([f[[QUERY_ID, DOC_ID, SCORE]], extra], ignore_index=True)
    return Run(frame=frame, path=run.path, tag=run.tag, sha256=run.sha256, last_tag=run.last_tag)


def _clean_placeholders(values: dict, missing: np.ndarray) -> None:
    """What trec_eval 10 does to a placeholder query's values: each family's ``placeholder`` attribute."""
    for m, v in values.items():
        rule = m.spec.placeholder
        bare = m.name == m.family
        if rule == "zero" or (rule == "zero_if_bare" and bare):
            values[m] = np.where(missing, 0.0, v)
        elif rule == "clear_if_bare" and bare:
            values[m] = np.where(missing, "", v)


def _compute(prepared: PreparedJudgments, rel_format, run, measures, settings, ctx, work: Workspace) -> dict:
    judgments, qids = prepared.judgments, prepared.qids
    by_family: dict[str, list[Measure]] = {}
    for m in measures:
        by_family.setdefault(m.family, []).append(m)
    values: dict = {}
    if rel_format in ("qrels", "qrels_div"):
        # one ranking per tie order and score precision the families ask for (trec_eval's for its own)
        ranked: dict[tuple, Any] = {}
        for ms in by_family.values():
            spec = ms[0].spec
            key = (spec.ties, spec.score_precision or settings.score_precision)
            if key not in ranked:
                ranked[key] = build_ranked(
                    judgments,
                    run,
                    level=settings.relevance_level,
                    score_precision=key[1],
                    max_docs=settings.max_docs,
                    judged_only=settings.judged_only,
                    index=prepared.index,
                    ties=key[0],
                    work=work,
                )
            values.update(spec.compute(ranked[key], ms, ctx))
        return values
    if rel_format == "qrels_jg":
        data = _jg_input(judgments, run, settings, qids, work)
    else:
        data = build_prefs_input(judgments.frame, qids, _retrieved_lists(run, qids, settings), judgments.path)
    for ms in by_family.values():
        values.update(ms[0].spec.compute(data, ms, ctx))
    return values


def _jg_input(jg: JudgmentGroups, run: Run, settings: EvalSettings, qids: np.ndarray, work: Workspace) -> JgInput:
    frame = jg.frame
    pos = {q: i for i, q in enumerate(qids.tolist())}
    groups = []
    for name in sorted(frame["jg"].unique().tolist()):
        part = frame[frame["jg"] == name]
        qrels = Qrels(frame=part[[QUERY_ID, DOC_ID, RELEVANCE]].reset_index(drop=True), path=jg.path)
        q_qidx = np.array([pos[q] for q in qrels.frame[QUERY_ID].tolist()], dtype=np.int64)
        ranked = build_ranked(
            qrels,
            run,
            level=settings.relevance_level,
            score_precision=settings.score_precision,
            max_docs=settings.max_docs,
            judged_only=settings.judged_only,
            qids=qids,
            q_qidx=q_qidx,
            work=work,
        )
        has = np.zeros(len(qids), dtype=bool)
        has[np.unique(q_qidx)] = True
        groups.append((name, ranked, has))
    return JgInput(qids=qids, groups=groups)


def _retrieved_lists(run: Run, qids: np.ndarray, settings: EvalSettings) -> dict[str, list[str]]:
    """Each judged query's documents ranked as ``form_prefs_counts.c`` does: ties by document id *ascending*."""
    frame = run.frame
    mask = frame[QUERY_ID].isin(set(qids.tolist())).to_numpy()
    sub = frame[mask]
    codes, uniq = pd.factorize(sub[QUERY_ID], sort=True)
    order = trec_order(
        codes.astype(np.int64),
        sub[SCORE].to_numpy(),
        sub[DOC_ID].to_numpy().astype(str),
        settings.score_precision,
        ties="docid_asc",
    )
    q_sorted = codes[order]
    rank = within_group_rank(q_sorted)
    docs = sub[DOC_ID].to_numpy()[order]
    if settings.max_docs is not None:
        keep = rank <= settings.max_docs
        q_sorted, docs = q_sorted[keep], docs[keep]
    bounds = np.append(np.flatnonzero(group_starts(q_sorted)), len(q_sorted)) if len(q_sorted) else []
    return {uniq[q_sorted[a]]: docs[a:b].tolist() for a, b in itertools.pairwise(bounds)}


def _zscore(v: np.ndarray, qids: np.ndarray, name: str, table: dict) -> np.ndarray:
    """trec_eval's te_convert_to_zscore: (v - mean) / stddev from the -Z file; missing means print -1000000."""
    out = np.empty(len(v))
    for i, (qid, x) in enumerate(zip(qids.tolist(), v.tolist())):
        ms = table.get((qid, name))
        if ms is None:
            out[i] = MISSING_ZSCORE
        elif ms[1]:
            out[i] = (x - ms[0]) / ms[1]
        else:
            out[i] = 0.0 if x == ms[0] else MISSING_ZSCORE
    return out


def _seq_sum(x: np.ndarray) -> float:
    """The sum in query order, one addition at a time (trec_eval's accumulation)."""
    return float(np.cumsum(x)[-1]) if len(x) else 0.0


def _aggregate(
    m: Measure,
    v: np.ndarray,
    evaluated: np.ndarray,
    in_run: np.ndarray,
    settings: EvalSettings,
    judgments,
) -> float:
    agg = m.spec.aggregate
    n = int(evaluated.sum())
    if agg == "count":
        return float(n)
    if m.spec.complete_total and settings.complete:
        # both generations' calc_avg go back to the qrels here, after -l, -M, -J and -Z were applied per query
        return float((judgments.frame[RELEVANCE].to_numpy() > 0).sum())
    nine_c = settings.complete and settings.trec_eval == 9
    if agg == "sum":
        return _seq_sum(v[evaluated])
    if agg == "gm":
        if not n:
            return 0.0
        present = evaluated & in_run if nine_c else evaluated
        s = _seq_sum(v[present])
        if nine_c:
            s += (n - int(present.sum())) * math.log(MIN_GEO_MEAN)
        return math.exp(s / n)
    if agg == "mean_defined":  # the mean over the queries with a value (NaN: undefined there)
        defined = v[evaluated][~np.isnan(v[evaluated])]
        return _seq_sum(defined) / len(defined) if len(defined) else math.nan
    if agg == "msmarco":  # MS MARCO's: / the qrels queries with a relevant document, in the run or not
        relevant = judgments.frame[RELEVANCE].to_numpy() >= max(settings.relevance_level, 0)
        n_relevant = judgments.frame[QUERY_ID][relevant].nunique()
        return _seq_sum(v[evaluated]) / n_relevant if n_relevant else 0.0
    return _seq_sum(v[evaluated]) / n if n else 0.0


def _query_warnings(nq, in_run, extra, n_eval, settings, measures=()) -> list[str]:
    """What changes what the mean means: queries of one input missing from the other."""
    notes = []
    missing = int((~in_run).sum())
    if missing and not settings.complete:
        counted = [m.name for m in measures if m.spec.aggregate == "msmarco"]
        notes.append(
            f"{missing} of {nq} qrels queries have no line in the run and were left out of the mean "
            "(as trec_eval 9.x does; trec_eval 10 stops with an error); pass "
            f"{phrase('complete=True', '-c')} to count them as 0"
            + (f" ({', '.join(counted)} counts them as 0 already, as MS MARCO's script does)" if counted else "")
        )
    if extra:
        notes.append(f"{extra} run queries have no judgments and were ignored")
    if n_eval == 0:
        notes.append("no query is both in the run and in the judgments: nothing was evaluated")
    return notes


def _notes(run, judgments) -> list[str]:
    """What changes no number: lines skipped that trec_eval skips too."""
    notes = []
    for what, obj in (("run", run), ("judgments", judgments)):
        if getattr(obj, "comment_lines", 0):
            notes.append(f"skipped {obj.comment_lines} comment line(s) ('#') in the {what}")
    if run.trailing_text_lines:
        notes.append(
            f"{run.trailing_text_lines} run line(s) have text after the tag (sixth) column; "
            "ignored, as trec_eval ignores it"
        )
    return notes


# --------------------------------------------------------------- provenance
def settings_provenance(settings: EvalSettings) -> dict:
    """The provenance fields that follow from the settings alone (also what a reproduction declares)."""
    return {
        "trec_eval": settings.trec_eval,
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
    judgments,
    run: Run,
    measures,
    settings: EvalSettings,
    *,
    nq: int,
    n_run: int,
    n_eval: int,
    zscores: dict | None = None,
) -> dict:
    """Everything needed to say how a number was computed, and to refuse unlike comparisons."""
    s = settings_provenance(settings)
    labels = judgments.label_counts() if hasattr(judgments, "label_counts") else None
    rmap = getattr(judgments, "relevance_map", None)
    return {
        "implementation": f"twostage {__version__}",
        "semantics": f"trec_eval {'9.x' if settings.trec_eval == 9 else '10'} (ties: score desc, docid desc)",
        "trec_eval": s["trec_eval"],
        "measures": [m.name for m in measures],
        "cutoffs": sorted({m.cutoff for m in measures if m.cutoff is not None}),
        "rel_format": judgment_format(judgments),
        "gain": s["gain"],
        "gain_applies_to": [m.name for m in measures if m.spec.gain],
        "discount": s["discount"],
        "relevance_level": s["relevance_level"],
        "relevance_level_applies_to": [m.name for m in measures if m.spec.binary and own_level(m) is None],
        "relevance_labels": labels,
        "relevance_map": (
            {"name": judgments.relevance_map_name or "custom", "map": {str(k): v for k, v in rmap.items()}}
            if rmap
            else None
        ),
        "unjudged": s["unjudged"],
        "judged_definition": s["judged_definition"],
        "max_docs_per_query": s["max_docs_per_query"],
        "num_docs_in_collection": settings.num_docs or None,
        "query_set": s["query_set"],
        "queries_in_run": n_run,
        "queries_in_qrels": nq,
        "queries_evaluated": n_eval,
        "score_precision": s["score_precision"],
        "zscores": bool(zscores),
        "duplicates_dropped": {"run": run.duplicates_dropped, "qrels": getattr(judgments, "duplicates_dropped", 0)},
        "comment_lines": {"run": run.comment_lines, "qrels": getattr(judgments, "comment_lines", 0)},
        "run_lines_with_text_after_tag": run.trailing_text_lines,
        "run": run.identity(),
        "qrels": {"path": judgments.path, "sha256": judgments.sha256} | _origin(judgments, run, measures),
    } | _definitions(measures, settings)


#: The sources whose definitions the ``semantics`` line states already (trec_eval's, and twostage's judged.k).
_TREC_SOURCES = ("trec_eval 9/10", "trec_eval 10", "twostage")


def _definitions(measures, settings: EvalSettings) -> dict:
    """``definitions``: for each measure defined by another tool than trec_eval, the definition its number
    follows (``ERR@20 as gdeval``, ``RBP(rel=1) as cwl_eval: binary gains``, ``ndcg_burges@10 as ranx 0.3.21:
    gain 2^label - 1, ...``); nothing when there is none."""
    out = {m.name: definition(m, settings.relevance_level) for m in measures if m.spec.source not in _TREC_SOURCES}
    return {"definitions": out} if out else {}


def definition(m: Measure, level: int) -> str:
    """``NAME as PROVIDER: ties ...``: whose definition ``m``'s number is and how that ranks a run (``level``:
    the settings' relevance level, which a ranx measure without its own ``-lN`` follows)."""
    spec = m.spec
    if spec.source == "ranx":
        return describe_ranx(m, level)
    ties = {
        "docid_desc": "ties by document id descending",
        "docid_asc": "ties by document id ascending",
        "input": "ties in the run's line order",
    }[spec.ties]
    how = [ties + (", scores as float64" if spec.score_precision == "float64" else "")]
    note = _NOTES.get(spec.name)
    if note:
        how.insert(0, note(m))
    if spec.aggregate == "msmarco":
        how.insert(0, _msmarco_queries(level))
    return f"{m.name} as {spec.source.split(': ')[-1]}: " + "; ".join(how)


def _graded(m: Measure) -> str:
    return f"graded gains (labels clipped to {m.value('min_rel')}..{m.value('max_rel')}, scaled to 0..1)"


def _msmarco_queries(level: int) -> str:
    """How MS MARCO's MRR@k counts queries, at relevance level ``level``."""
    return (
        f"relevant: label >= {level}; the mean is the sum over the queries divided by the number of qrels queries "
        "with a relevant passage, as MS MARCO's script divides by the queries of its reference (which lists relevant "
        "passages only): a qrels query missing from the run counts 0 (with or without -c), a query without a "
        "relevant passage is left out; ranked by score (a run read in MS MARCO's format: by rank, its scores being "
        "1/rank)"
    )


#: What each provider family adds to its definition line.
_NOTES = MappingProxyType(
    {
        "RBP": lambda m: f"binary gains (label >= {m.value('rel')}), p={m.value('p')}, 1000 positions",
        "SDCG": _graded,
        "INST": _graded,
        "INSQ": _graded,
        "NERR8": _graded,
        "NERR9": _graded,
        "NERR10": _graded,
        "NERR11": _graded,
        "BPM": _graded,
        "ERR": lambda m: "gains 2^label - 1 over 16, labels 0..4",
        "gdeval_nDCG": lambda m: "gains 2^label - 1, natural log discount",
        "msmarco_RR": lambda m: f"relevant: label >= {m.value('rel')}",
        "Judged": lambda m: "judged: any qrels line",
        "Accuracy": lambda m: "mean over the queries where it is defined",
    }
)


def _origin(judgments, run: Run, measures) -> dict:
    """Merged human and judge qrels: the policy, the counts, and judged@k of each origin (at 10 and at the
    cutoffs of the judged measures asked for)."""
    origin = getattr(judgments, "origin", None)
    if origin is None:
        return {}
    from toolkit.evaluation.checks import judged_by_origin

    depths = tuple(sorted({10} | {m.cutoff for m in measures if m.family == "judged" and m.cutoff}))
    return {"origin": origin.describe() | {"judged_by_origin": judged_by_origin(run, origin, depths)}}


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


__all__ = [
    "COMPARABLE_FIELDS",
    "EvalResult",
    "PreparedJudgments",
    "build_provenance",
    "check_measures",
    "coded_values",
    "evaluate",
    "judgment_format",
    "prepare_judgments",
    "provenance_differences",
    "run_query_ids",
    "settings_provenance",
]
