"""``evaluate``: trec_eval's numbers for a run, as pandas objects, with the provenance ``twostage eval`` writes."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from toolkit.api.labels import MeasureFrame, MeasureSeries, Requested
from toolkit.api.options import EvaluationOptions, holes_over
from toolkit.errors import TwostageWarning  # ts.TwostageWarning: the category of the library's warnings
from toolkit.evaluation.evaluate import EvalResult
from toolkit.measures.names import measure_groups
from toolkit.measures.settings import SETTING_NAMES, SETTINGS
from toolkit.options import unknown_keyword, verb

log = logging.getLogger(__name__)

__all__ = ["Evaluation", "EvaluationOptions", "TwostageWarning", "evaluate", "evaluate_many", "holes_over", "settings"]


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
    ``recall.k`` asked (``toolkit.quality.holes``): per query trec_eval's value, the lowest and highest over
    every labelling of the unjudged documents in the top k, the judged-only value and the gap."""
    ci: Any = None
    """With ``evaluate(..., ci=0.95)``: the bootstrap interval of each measure's mean over the queries
    (``toolkit.stats.mean_intervals.MeanIntervals``); ``intervals`` is it as a table."""

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
            from toolkit.stats.mean_intervals import ci_header, with_ci_lines

            text = with_ci_lines(text, self.ci)
            head.append(ci_header(self.ci))
        if self.holes:
            from toolkit.quality.holes import holes_header, with_hole_lines

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
                from toolkit.stats.mean_intervals import ci_json

                doc["ci"] = ci_json(self.ci, self._display())
            if self.holes:
                from toolkit.quality.holes import holes_json

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
        from toolkit.data.trec_io import atomic_write, write_json, written_together

        with written_together():  # both in place, or (a write refused) neither, the previous pair kept
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
        from toolkit.report.notebook import evaluation_html

        return evaluation_html(self.name or "run", self.summary, self.notes, self.provenance)


def _with_header(text: str, lines: list[str]) -> str:
    """``text`` with ``# lines`` after its leading ``#`` provenance lines (what the extra lines are)."""
    if not lines:
        return text
    rows = text.splitlines(keepends=True)
    at = next((i for i, row in enumerate(rows) if not row.startswith("#")), len(rows))
    return "".join(rows[:at] + [f"# {line}\n" for line in lines] + rows[at:])


def settings(**keywords: Any) -> Any:
    """``EvalSettings`` from the keyword options (the same names ``twostage eval``'s flags stand for): those of
    ``toolkit.measures.settings.SETTINGS``, each defaulting to its default there (the signature lists them)."""
    from toolkit.measures.names import build_settings

    for k in keywords:
        if k not in SETTING_NAMES:
            raise unknown_keyword("settings", k, SETTING_NAMES)
    return build_settings({s.name: keywords.get(s.name, s.default) for s in SETTINGS})


settings.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default, annotation=s.annotation)
        for s in SETTINGS
    ],
    return_annotation="Any",
)


def _judgments(
    qrels: Any, rel_format: str, relevance_map: str | None, dedupe: str, data_dir: str | os.PathLike | None
) -> Any:
    from toolkit.data.adapters import as_qrels
    from toolkit.data.trec_io import read_prefs, read_qrels_jg
    from toolkit.errors import ConfigError

    if rel_format in ("qrels", "qrels_div"):
        subtopics = rel_format == "qrels_div"
        return as_qrels(qrels, dedupe=dedupe, relevance_map=relevance_map, data_dir=data_dir, subtopics=subtopics)
    # relevance_map with another format: refused where the options were built (EvaluationOptions.validate)
    if not isinstance(qrels, (str, os.PathLike)):
        raise ConfigError(f"rel_format={rel_format!r} reads a file; give its path")
    if rel_format == "qrels_jg":
        return read_qrels_jg(qrels)
    if rel_format in ("prefs", "qrels_prefs"):
        return read_prefs(qrels, rel_format)
    raise ConfigError(f"rel_format must be qrels, qrels_div, prefs, qrels_prefs or qrels_jg, not {rel_format!r}")


@verb(EvaluationOptions, inputs=("qrels", "run", "measures"))
def evaluate(
    qrels: Any, run: Any, measures: str | Iterable[Any] | None = None, *, options: EvaluationOptions
) -> Evaluation:
    """Evaluate ``run`` against ``qrels`` exactly as trec_eval (and ``twostage eval``) does.

    Every keyword is a field of ``EvaluationOptions`` (``toolkit.api.options``); ``options=`` takes one whole.

    Args:
        qrels: a qrels file, a collection name (``dl19-passage``), a DataFrame (``qid, docno, label`` or
            ``query_id, doc_id, relevance``), a ``{qid: {docid: label}}`` dict or ir_measures ``Qrel``s.
        run: a run file, a ``Run``, a DataFrame (``qid, docno, score`` or ``query_id, doc_id, score``), a
            ``{qid: {docid: score}}`` dict or ir_measures ``ScoredDoc``s.
        measures: trec_eval names (``ndcg_cut.10``, ``P.5,10``, ``official``), ir_measures names (``nDCG@10``)
            or ir_measures measure objects; one or a list. Default: ``official``, as trec_eval.

    Results name and order the measures as asked (see ``Evaluation``). Input that changes what a number
    means (queries missing from the run or the qrels, tied scores, dropped duplicates) is issued as a
    ``TwostageWarning`` and listed in ``notes``.

    Raises:
        InputFormatError: malformed or empty input, naming the file or row.
        UnknownMeasureError: a measure that does not exist or that these options cannot give.
        ConfigError: a ``labels`` key that is not a measure asked for; options that cannot be combined.
    """
    from toolkit import notices

    o = options
    with notices.once():
        prepared = _prepare(qrels, measures, o, many=False)
        want = _requested(measures, o.settings.trec_eval, o.labels)
        return _evaluate_one(prepared, run, o.dedupe, want, o.name, holes_over(o.holes), _interval_request(o))


def _interval_request(o: EvaluationOptions) -> dict | None:
    """The keywords of ``mean_intervals`` (the options checked them), or None without ``ci``."""
    if o.ci is None:
        return None
    return {"level": float(o.ci), "resamples": int(o.bootstrap), "method": o.ci_method, "seed": int(o.seed)}


@verb(EvaluationOptions, inputs=("qrels", "runs", "measures"), exclude=("name",))
def evaluate_many(
    qrels: Any, runs: Mapping[str, Any], measures: str | Iterable[Any] | None = None, *, options: EvaluationOptions
) -> dict[str, Evaluation]:
    """Evaluate several runs against qrels read (and prepared) once: ``{name: Evaluation}``, each exactly what
    ``evaluate(qrels, run, measures, **keywords)`` gives; what ``twostage eval QRELS RUN RUN ...`` prints.

    The keywords are those of ``evaluate`` but ``name`` (each run is named by its key, whatever ``options.name``).

    Args:
        qrels: as for ``evaluate``.
        runs: ``{name: run}``, each run as for ``evaluate``.
        measures: as for ``evaluate``.
    """
    from toolkit import notices

    o = options
    holes = holes_over(o.holes)
    interval = _interval_request(o)
    with notices.once():
        prepared = _prepare(qrels, measures, o, many=len(runs) > 1)
        want = _requested(measures, o.settings.trec_eval, o.labels)
    out = {}
    for name, run in runs.items():
        with notices.once():  # each run's warnings once, and every run's
            out[str(name)] = _evaluate_one(prepared, run, o.dedupe, want, str(name), holes, interval)
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


def _prepare(qrels: Any, measures: Any, o: EvaluationOptions, many: bool) -> tuple:
    """(judgments, measure groups, settings, z-scores): measures checked before anything is read; judgments
    factorised once when several runs share them."""
    from toolkit.data.trec_io import read_zscores
    from toolkit.evaluation.evaluate import check_measures, prepare_judgments, reads_format

    s = o.settings
    groups = measure_groups(measures, s.trec_eval)
    rel_format = reads_format([m for g in groups for m in g.measures], o.rel_format)
    for group in groups:  # before reading anything
        check_measures(group.measures, group.overrides.apply(s), rel_format)
    judgments = _judgments(qrels, rel_format, o.relevance_map, o.dedupe, o.data_dir)
    if many:
        judgments = prepare_judgments(judgments)
    z = read_zscores(o.zscores) if o.zscores else None
    return judgments, groups, s, z


def _hole_bounds(judgments: Any, run: Any, groups: list, s: Any, over: str = "top-k") -> dict[str, Any]:
    """``Evaluation.holes``: the bounds of each group's ndcg_cut.k, P.k and recall.k under its settings."""
    from toolkit.data.records import Qrels
    from toolkit.errors import ConfigError
    from toolkit.evaluation.evaluate import PreparedJudgments
    from toolkit.quality.holes import SUPPORTED, hole_bounds

    qrels = judgments.judgments if isinstance(judgments, PreparedJudgments) else judgments
    if not isinstance(qrels, Qrels):
        raise ConfigError("hole bounds need plain qrels (rel_format='qrels')")
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
    from toolkit.data.adapters import as_run, system_name
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
    bounds = _hole_bounds(judgments, r, groups, s, holes) if holes else None
    ci = None
    if interval is not None:
        from toolkit.stats.mean_intervals import mean_intervals

        ci = mean_intervals(result, **interval)
    return Evaluation(result, name or system_name(run, r), want, bounds, ci)
