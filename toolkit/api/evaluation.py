"""``evaluate``: trec_eval's numbers for a run, as pandas objects, with the provenance ``twostage eval`` writes."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from toolkit.api.labels import MeasureFrame, MeasureSeries, Requested
from toolkit.errors import TwostageWarning  # ts.TwostageWarning: the category of the library's warnings
from toolkit.evaluation.evaluate import EvalResult
from toolkit.measures.names import DEFAULT_MEASURES

log = logging.getLogger(__name__)

__all__ = ["Evaluation", "TwostageWarning", "evaluate", "evaluate_many", "settings"]


@dataclass(frozen=True)
class Evaluation:
    """One run evaluated: ``summary``, ``per_query``, ``provenance`` and trec_eval's text.

    Measures are named and ordered as they were asked for (``toolkit.api.labels``): an ir_measures name as
    typed (``nDCG@10``), trec_eval's syntax by trec_eval's printed name (``ndcg_cut.10`` is ``ndcg_cut_10``),
    display ``labels`` as given; every name of a measure finds it (``summary["ndcg_cut_10"]`` is
    ``summary["nDCG@10"]``). ``to_trec_eval`` keeps trec_eval's own names and order. ``name`` is the system's
    name: the one the caller gave, else the run file's name, else ``run`` (never the run's tag).
    """

    result: EvalResult
    name: str = ""
    requested: Requested = field(default_factory=Requested)
    holes: dict[str, Any] | None = None
    """With ``evaluate(..., holes=True)``: ``{measure name: HoleBounds}`` for every ``ndcg_cut.k``, ``P.k`` and
    ``recall.k`` asked (``toolkit.evaluation.holes``): per query trec_eval's value, the lowest and highest over
    every labelling of the unjudged documents in the top k, the judged-only value and the gap."""
    ci: Any = None
    """With ``evaluate(..., ci=0.95)``: the bootstrap interval of each measure's mean over the queries
    (``toolkit.evaluation.mean_intervals.MeanIntervals``); ``intervals`` is it as a table."""

    @property
    def intervals(self) -> pd.DataFrame:
        """With ``ci=LEVEL``: one row per mean-aggregated measure (labels as asked), columns ``mean``, ``ci_low``
        and ``ci_high`` (``twostage eval --ci``'s ``NAME_ci_low``/``NAME_ci_high`` lines). Empty without ``ci``."""
        if self.ci is None:
            return pd.DataFrame(columns=["mean", "ci_low", "ci_high"])
        return self.ci.frame({n: self.requested.label(n) for n in self.ci.intervals})

    @property
    def _order(self) -> list[str]:
        return self.requested.ordered(m.name for m in self.result.measures if m.name in self.result.aggregate)

    @property
    def summary(self) -> pd.Series:
        """The ``all`` line: measure -> value, in the order asked (counts as floats; relstring and runid are text
        measures and live in ``strings``/``runid``). The Series is named after the system."""
        values = {self.requested.label(n): self.result.aggregate[n] for n in self._order}
        out = MeasureSeries(values, name=self.name or "run", dtype="float64")
        out.aliases = dict(self.requested.aliases)
        return out

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per evaluated query (index ``query_id``, in trec_eval's query order), one column per measure
        in the order asked."""
        wide = self.result.wide()
        wide = wide[self.requested.ordered(wide.columns)]
        out = MeasureFrame(wide.rename(columns=self.requested.label))
        out.columns.name = "measure"
        out.aliases = dict(self.requested.aliases)
        return out

    @property
    def warnings(self) -> tuple[str, ...]:
        """What changes what a number means (queries missing from the run or the qrels, ties, duplicates dropped,
        cutoffs beyond the ranking): each was also issued as a ``TwostageWarning``."""
        from toolkit.errors import for_api

        return tuple(for_api(w) for w in self.result.warnings + tuple(self.provenance.get("input_warnings", ())))

    @property
    def provenance(self) -> dict:
        """How the numbers were computed: the dict ``twostage eval --out`` writes to ``FILE.provenance.json``."""
        return self.result.provenance

    @property
    def notes(self) -> tuple[str, ...]:
        """Everything said about the inputs: the ``warnings`` and what changes no number (comment lines
        skipped, ...); what the CLI prints on stderr."""
        from toolkit.errors import for_api

        return tuple(dict.fromkeys([for_api(n) for n in self.result.notes] + list(self.warnings)))

    @property
    def runid(self) -> str:
        """The run's tag as trec_eval prints it (the last line's)."""
        return self.result.runid

    @property
    def strings(self) -> dict[str, dict[str, str]]:
        """Text measures per query (``relstring``): {measure: {query_id: text}}."""
        return self.result.strings

    def to_ir_measures(self) -> pd.DataFrame:
        """Per-query values in the long form ``ir_measures.iter_calc`` yields: query_id, measure, value (measures
        by label, in the order asked)."""
        pq = self.result.per_query
        rank = {n: i for i, n in enumerate(self.requested.ordered(pd.unique(pq["measure"])))}
        pq = pq.iloc[pq["measure"].map(rank).argsort(kind="stable")]
        out = pq[["query_id", "measure", "value"]].reset_index(drop=True)
        out["measure"] = out["measure"].map(self.requested.label)
        return out

    def to_pyterrier(self, name: str | None = None) -> pd.DataFrame:
        """Per-query values in the shape of ``pt.Experiment(..., perquery=True)``: name (the system's), qid,
        measure, value."""
        f = self.to_ir_measures().rename(columns={"query_id": "qid"})
        f.insert(0, "name", name or self.name or "run")
        return f

    def to_trec_eval(self, per_query: bool = False, *, summary: bool = True, provenance: bool = True) -> str:
        """The text ``twostage eval`` prints for the same inputs: ``per_query`` is ``-q``, ``summary=False`` is
        ``-n``, ``provenance=False`` is ``--no-provenance`` (then the bytes are trec_eval's own)."""
        from toolkit.evaluation.trec_format import render_text

        text = render_text(self.result, per_query, provenance=provenance, summary=summary)
        head: list[str] = []
        if self.ci is not None:
            from toolkit.evaluation.mean_intervals import ci_header, with_ci_lines

            text = with_ci_lines(text, self.ci)
            head.append(ci_header(self.ci))
        if self.holes:
            from toolkit.evaluation.holes import holes_header, with_hole_lines

            text = with_hole_lines(text, self.holes)
            head.append(holes_header(self.holes))
        return _with_header(text, head) if provenance else text

    def to_json(self, per_query: bool = False) -> str:
        """What ``twostage eval --format json`` prints (full precision; ``per_query`` is ``-q``)."""
        from toolkit.evaluation.trec_format import render_json

        text = render_json(self.result, per_query, self._display())
        if self.holes or self.ci is not None:
            import json

            doc = json.loads(text)
            if self.ci is not None:
                from toolkit.evaluation.mean_intervals import ci_json

                doc["ci"] = ci_json(self.ci, self._display())
            if self.holes:
                from toolkit.evaluation.holes import holes_json

                doc["holes"] = holes_json(self.holes, per_query, self._display())
            text = json.dumps(doc, indent=2) + "\n"
        return text

    def to_csv(self, per_query: bool = False, *, provenance: bool = True) -> str:
        """What ``twostage eval --format csv`` prints (full precision; ``provenance=False`` drops the ``#`` header,
        as ``--no-provenance`` and ``--out`` do)."""
        from toolkit.evaluation.trec_format import render_csv

        return render_csv(self.result, per_query, provenance=provenance, labels=self._display(), ci=self.ci)

    def _display(self) -> dict[str, str]:
        """Result name -> label, in the order asked (what JSON and CSV are keyed by)."""
        return {n: self.requested.label(n) for n in self.requested.ordered(m.name for m in self.result.measures)}

    def write(self, path: str | os.PathLike, per_query: bool = False) -> None:
        """What ``twostage eval --out PATH`` writes: trec_eval's text and ``PATH.provenance.json``, atomically."""
        from toolkit.data.trec_io import atomic_write, write_json

        with atomic_write(path) as fh:
            fh.write(self.to_trec_eval(per_query))
        write_json(str(path) + ".provenance.json", self.provenance)

    def __repr__(self) -> str:
        summary = self.summary
        values = ", ".join(f"{k}={v:.4f}" for k, v in list(summary.items())[:6])
        more = ", ..." if len(summary) > 6 else ""
        p = self.provenance
        return (
            f"Evaluation({self.name or 'run'}: {values}{more}; {p['queries_evaluated']} queries, {p['semantics']}, "
            f"query set: {p['query_set']})"
        )

    def _repr_html_(self) -> str:
        from toolkit.guard.escape import html_frame
        from toolkit.guard.escape import html_text as escape

        table = html_frame(self.summary.to_frame(), float_format=lambda v: f"{v:.4f}")
        notes = "".join(f"<li>{escape(n)}</li>" for n in self.notes)
        prov = "".join(
            f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in self.provenance.items()
        )
        return (
            f"<div><b>Evaluation</b> of {escape(self.name or 'run')} "
            f"({self.provenance['queries_evaluated']} queries)</div>{table}"
            + (f"<ul>{notes}</ul>" if notes else "")
            + f"<details><summary>provenance</summary><table>{prov}</table></details>"
        )


def _with_header(text: str, lines: list[str]) -> str:
    """``text`` with ``# lines`` after its leading ``#`` provenance lines (what the extra lines are)."""
    if not lines:
        return text
    rows = text.splitlines(keepends=True)
    at = next((i for i, row in enumerate(rows) if not row.startswith("#")), len(rows))
    return "".join(rows[:at] + [f"# {line}\n" for line in lines] + rows[at:])


def settings(
    *,
    complete: bool = False,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    num_docs: int = 0,
    trec_eval: int = 9,
    score_precision: str | None = None,
    gain: str = "linear",
    discount: str = "log2",
    judged_compat: str = "twostage",
    allow_no_common: bool = False,
) -> Any:
    """``EvalSettings`` from the keyword options (the same names ``twostage eval``'s flags stand for)."""
    from toolkit.measures.names import build_settings

    return build_settings(
        {
            "complete": complete,
            "relevance_level": relevance_level,
            "max_docs": max_docs,
            "judged_only": judged_only,
            "num_docs": num_docs,
            "trec_eval": trec_eval,
            "score_precision": score_precision,
            "gain": gain,
            "discount": discount,
            "judged_compat": judged_compat,
            "allow_no_common": allow_no_common,
        }
    )


def _judgments(
    qrels: Any, rel_format: str, relevance_map: str | None, dedupe: str, data_dir: str | os.PathLike | None
) -> Any:
    from toolkit.api.inputs import as_qrels
    from toolkit.data.trec_io import read_prefs, read_qrels_jg
    from toolkit.errors import ConfigError

    if rel_format == "qrels":
        return as_qrels(qrels, dedupe=dedupe, relevance_map=relevance_map, data_dir=data_dir)
    if relevance_map:
        raise ConfigError("relevance_map applies to rel_format='qrels' only")
    if not isinstance(qrels, (str, os.PathLike)):
        raise ConfigError(f"rel_format={rel_format!r} reads a file; give its path")
    if rel_format == "qrels_jg":
        return read_qrels_jg(qrels)
    if rel_format in ("prefs", "qrels_prefs"):
        return read_prefs(qrels, rel_format)
    raise ConfigError(f"rel_format must be qrels, prefs, qrels_prefs or qrels_jg, not {rel_format!r}")


def _groups(measures: Any, version: int) -> list:
    """Measure groups as ``twostage eval -m`` makes them (per-measure settings such as ``RR@10`` or
    ``P(rel=2)@10`` get their own group); the toolkit's own ``Measure`` values form one plain group."""
    from toolkit.api.inputs import parse_measure_args
    from toolkit.measures.names import Measure, MeasureGroup, Overrides, parse_measure_groups

    items = measures if isinstance(measures, (list, tuple)) else [measures]
    if any(isinstance(m, Measure) for m in items):
        return [MeasureGroup(Overrides(), tuple(parse_measure_args(measures, version)))]
    texts = [str(m) for m in items if m is not None]
    return parse_measure_groups(texts or list(DEFAULT_MEASURES), version)


def evaluate(
    qrels: Any,
    run: Any,
    measures: str | Iterable[Any] | None = None,
    *,
    complete: bool = False,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    num_docs: int = 0,
    trec_eval: int = 9,
    score_precision: str | None = None,
    gain: str = "linear",
    discount: str = "log2",
    judged_compat: str = "twostage",
    allow_no_common: bool = False,
    relevance_map: str | None = None,
    dedupe: str = "error",
    rel_format: str = "qrels",
    zscores: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    labels: Mapping[str, str] | None = None,
    name: str | None = None,
    holes: bool | str = False,
    ci: float | None = None,
    bootstrap: int = 10_000,
    ci_method: str = "percentile",
    seed: int = 42,
) -> Evaluation:
    """Evaluate ``run`` against ``qrels`` exactly as trec_eval (and ``twostage eval``) does.

    Args:
        qrels: a qrels file, a collection name (``dl19-passage``), a DataFrame (``qid, docno, label`` or
            ``query_id, doc_id, relevance``), a ``{qid: {docid: label}}`` dict or ir_measures ``Qrel``s.
        run: a run file, a ``Run``, a DataFrame (``qid, docno, score`` or ``query_id, doc_id, score``), a
            ``{qid: {docid: score}}`` dict or ir_measures ``ScoredDoc``s.
        measures: trec_eval names (``ndcg_cut.10``, ``P.5,10``, ``official``), ir_measures names (``nDCG@10``)
            or ir_measures measure objects; one or a list. Default: ``official``, as trec_eval.
        complete: ``-c``: average over every judged query, those missing from the run count as 0.
        relevance_level: ``-l``: labels at or above it are relevant for binary measures.
        max_docs: ``-M``: only the top N documents of each query.
        judged_only: ``-J``: drop unjudged documents before ranking (condensed list).
        num_docs: ``-N``: documents in the collection (utility).
        trec_eval: 9 (Pyserini's 9.0.4) or 10: which generation's semantics where they differ.
        score_precision: ``float32`` or ``float64``; default the generation's (9: float32, 10: float64).
        gain: nDCG gain: ``linear``, ``exp`` or a map like ``0:0,1:1,2:4,3:10``.
        discount: nDCG discount: ``log2`` or ``jk[:B]``.
        judged_compat: ``twostage`` or ``pyserini`` (which judged@k).
        allow_no_common: zeros instead of ``NoCommonQueriesError`` when run and qrels share no query.
        relevance_map: relabel the qrels at load time (``1:0,2:1,3:1`` or a preset such as ``cranfield``).
        dedupe: ``error`` (a repeated (query, doc) is an error) or ``first`` (keep the first, count the rest).
        rel_format: ``-R``: ``qrels``, ``prefs``, ``qrels_prefs`` or ``qrels_jg`` (the last three read files).
        zscores: ``-Z``: a file of ``qid measure mean stddev``; values become z-scores.
        data_dir: where collection names are looked up (default ``$TWOSTAGE_DATA`` or ``../shared/data``).
        labels: display names for measures, ``{name: label}`` (``{"ndcg_cut_10": "nDCG@10"}``); a name is
            any name of a measure asked for. Tables, ``summary``, ``per_query``, JSON and CSV use the labels.
        name: the system's name (``summary``'s name, ``to_pyterrier``'s ``name``); default the run file's name,
            else ``run``.
        holes: also bound every ``ndcg_cut.k``, ``P.k`` and ``recall.k`` asked (``Evaluation.holes``):
            ``True`` or ``"top-k"`` over every labelling of the unjudged documents in the top k, the ideal ranking
            from the judged documents plus those (``twostage eval --holes``); ``"retrieved"`` over every
            labelling of every unjudged document the run retrieved, the ideal recomputed (``--holes-over
            retrieved``).
        ci: a level in (0, 1) (``0.95``): the bootstrap confidence interval of each measure's mean over
            the queries, in ``Evaluation.intervals`` (``twostage eval --ci``); None (default): none.
        bootstrap: its resamples of the queries.
        ci_method: ``percentile`` or ``bca`` (as ``scipy.stats.bootstrap``).
        seed: seed of ``numpy.random.default_rng``, fresh per measure.

    Results name and order the measures as asked (see ``Evaluation``). Input that changes what a number
    means (queries missing from the run or the qrels, tied scores, dropped duplicates) is issued as a
    ``TwostageWarning`` and listed in ``notes``.

    Raises:
        InputFormatError: malformed or empty input, naming the file or row.
        UnknownMeasureError: a measure that does not exist or that these options cannot give.
        ConfigError: a ``labels`` key that is not a measure asked for.
    """
    interval = _interval_request(ci, bootstrap, ci_method, seed)
    over = holes_over(holes)
    s = settings(
        complete=complete,
        relevance_level=relevance_level,
        max_docs=max_docs,
        judged_only=judged_only,
        num_docs=num_docs,
        trec_eval=trec_eval,
        score_precision=score_precision,
        gain=gain,
        discount=discount,
        judged_compat=judged_compat,
        allow_no_common=allow_no_common,
    )
    from toolkit import notices

    with notices.once():
        prepared = _prepare(qrels, measures, s, rel_format, relevance_map, dedupe, data_dir, zscores, many=False)
        want = _requested(measures, s.trec_eval, labels)
        return _evaluate_one(prepared, run, dedupe, want, name, over, interval)


def _interval_request(ci: Any, bootstrap: int, ci_method: str, seed: int) -> dict | None:
    """The keywords of ``mean_intervals`` (checked before anything is read: a level outside (0, 1) names
    ``ci=``), or None without ``ci``."""
    if ci is None:
        return None
    from toolkit.evaluation.mean_intervals import check_interval_request

    level = check_interval_request(ci, bootstrap, ci_method)
    return {"level": level, "resamples": int(bootstrap), "method": ci_method, "seed": int(seed)}


def evaluate_many(
    qrels: Any, runs: Mapping[str, Any], measures: str | Iterable[Any] | None = None, **options: Any
) -> dict[str, Evaluation]:
    """Evaluate several runs against qrels read (and prepared) once: ``{name: Evaluation}``, each exactly what
    ``evaluate(qrels, run, measures, **options)`` gives; what ``twostage eval QRELS RUN RUN ...`` prints.

    Args:
        qrels: as for ``evaluate``.
        runs: ``{name: run}``, each run as for ``evaluate``.
        measures: as for ``evaluate``.
        **options: the keywords of ``evaluate`` (``labels`` included; each run is named by its key).
    """
    from toolkit import notices
    from toolkit.api.keywords import check_keywords

    check_keywords("evaluate_many", options, evaluation_keywords("name"))
    io = {k: options.pop(k) for k in ("rel_format", "relevance_map", "dedupe", "data_dir", "zscores") if k in options}
    labels = options.pop("labels", None)
    holes = holes_over(options.pop("holes", False))
    interval = _interval_request(
        options.pop("ci", None),
        options.pop("bootstrap", 10_000),
        options.pop("ci_method", "percentile"),
        options.pop("seed", 42),
    )
    dedupe = io.get("dedupe", "error")
    s = settings(**options)
    with notices.once():
        prepared = _prepare(
            qrels,
            measures,
            s,
            io.get("rel_format", "qrels"),
            io.get("relevance_map"),
            dedupe,
            io.get("data_dir"),
            io.get("zscores"),
            many=len(runs) > 1,
        )
        want = _requested(measures, s.trec_eval, labels)
    out = {}
    for name, run in runs.items():
        with notices.once():  # each run's warnings once, and every run's
            out[str(name)] = _evaluate_one(prepared, run, dedupe, want, str(name), holes, interval)
    return out


def evaluation_keywords(*drop: str) -> set[str]:
    """The keywords ``evaluate`` takes besides its positional inputs (what ``**options`` of ``compare``,
    ``power``, ``agreement``, ``evaluate_many`` pass on), less ``drop`` (those the caller sets itself)."""
    from toolkit.api.keywords import keywords_of

    return keywords_of(evaluate, drop=("qrels", "run", "measures", *drop))


def _requested(measures: Any, version: int, labels: Mapping[str, str] | None) -> Requested:
    from toolkit.api.labels import requested

    items = measures if isinstance(measures, (list, tuple)) else [measures]
    items = [m for m in items if m is not None]
    return requested(items or None, version).relabelled(labels)


def _prepare(
    qrels: Any,
    measures: Any,
    s: Any,
    rel_format: str,
    relevance_map: str | None,
    dedupe: str,
    data_dir: Any,
    zscores: Any,
    many: bool,
) -> tuple:
    """(judgments, measure groups, settings, z-scores): measures checked before anything is read; judgments
    factorised once when several runs share them."""
    from toolkit.data.trec_io import read_zscores
    from toolkit.evaluation.evaluate import check_measures, prepare_judgments

    groups = _groups(measures, s.trec_eval)
    for group in groups:  # before reading anything
        check_measures(group.measures, group.overrides.apply(s), rel_format)
    judgments = _judgments(qrels, rel_format, relevance_map, dedupe, data_dir)
    if many:
        judgments = prepare_judgments(judgments)
    z = read_zscores(zscores) if zscores else None
    return judgments, groups, s, z


def holes_over(holes: Any) -> str | None:
    """What ``holes=`` asks for: None (no bounds), ``top-k`` (``True``) or ``retrieved``."""
    if holes is None or holes is False:
        return None
    from toolkit.evaluation.holes import check_over

    return "top-k" if holes is True else check_over(str(holes))


def _hole_bounds(judgments: Any, run: Any, groups: list, s: Any, zscored: bool, over: str = "top-k") -> dict[str, Any]:
    """``Evaluation.holes``: the bounds of each group's ndcg_cut.k, P.k and recall.k under its settings."""
    from toolkit.data.records import Qrels
    from toolkit.errors import ConfigError
    from toolkit.evaluation.evaluate import PreparedJudgments
    from toolkit.evaluation.holes import SUPPORTED, hole_bounds

    qrels = judgments.judgments if isinstance(judgments, PreparedJudgments) else judgments
    if not isinstance(qrels, Qrels):
        raise ConfigError("hole bounds need plain qrels (rel_format='qrels')")
    if zscored:
        raise ConfigError("hole bounds are raw values; drop zscores")
    out: dict[str, Any] = {}
    for group in groups:
        chosen = [m for m in group.measures if m.family in SUPPORTED and m.cutoff]
        if chosen:
            out.update(hole_bounds(qrels, run, chosen, group.overrides.apply(s), over))
    if not out:
        raise ConfigError(
            "hole bounds are computed for ndcg_cut.k, P.k and recall.k; none of the measures asked is one of them"
        )
    return out


def _evaluate_one(
    prepared: tuple,
    run: Any,
    dedupe: str,
    want: Requested,
    name: str | None,
    holes: str | None = None,
    interval: dict | None = None,
) -> Evaluation:
    from toolkit import notices
    from toolkit.api.inputs import as_run, system_name
    from toolkit.errors import phrase
    from toolkit.evaluation.groups import evaluate_groups

    judgments, groups, s, z = prepared
    r = as_run(run, dedupe=dedupe)
    result = evaluate_groups(judgments, r, groups, s, zscores=z)
    dropped = result.provenance.get("duplicates_dropped", {})
    said = []
    for what in ("qrels", "run"):
        if dropped.get(what):
            said.append(
                f"{phrase('dedupe=' + repr('first'), '--dedupe first')} dropped {dropped[what]} duplicate line(s) "
                f"from the {what}" + (f" ({r.path})" if what == "run" else "")
            )
    for text in said + list(result.warnings):
        notices.warn(text)
    if said:
        result = replace(result, warnings=tuple(said) + result.warnings, notes=tuple(said) + result.notes)
    bounds = _hole_bounds(judgments, r, groups, s, z is not None, holes) if holes else None
    ci = None
    if interval is not None:
        from toolkit.evaluation.mean_intervals import mean_intervals

        ci = mean_intervals(result, **interval)
    return Evaluation(result, name or system_name(run, r), want, bounds, ci)
