"""Measures with their own settings in one call: ``-m 'AP(rel=2)@1000' -m 'RR(rel=2)@10' -m nDCG@10``.

ir_measures writes a relevance level and a depth into a measure's name; trec_eval has one ``-l``
and one ``-M`` per call. Each distinct set of per-measure settings (``Overrides``) is an
evaluation group, evaluated by ``evaluate`` exactly as a separate trec_eval call with those
flags would be (``AP(rel=2)@1000`` is ``trec_eval -l 2 -m map_cut.1000``, ``RR@10`` is
``trec_eval -M 10 -m recip_rank``); the results are merged, each overridden measure named as the
user wrote it, and the provenance states every such measure's settings (``measure_settings``).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from toolkit import notices
from toolkit.evaluation.evaluate import EvalResult, evaluate
from toolkit.measures.names import EvalSettings, LabelledMeasure, MeasureGroup


def evaluate_groups(
    judgments, run, groups: list[MeasureGroup], settings: EvalSettings, *, zscores: dict | None = None
) -> EvalResult:
    """One result for every group; a single group without overrides is plain ``evaluate``."""
    if len(groups) == 1 and not groups[0].overrides:
        return evaluate(judgments, run, groups[0].measures, settings, zscores=zscores)
    with each_warning_once():  # every group checks the same run: say each thing once
        results = [
            (g, evaluate(judgments, run, g.measures, g.overrides.apply(settings), zscores=zscores)) for g in groups
        ]
    base = next((r for g, r in results if not g.overrides), results[0][1])
    renamed = [_renamed(g, r) for g, r in results]
    measures = tuple(sorted((m for r in renamed for m in r.measures), key=_print_order))
    provenance = dict(base.provenance)
    provenance["measures"] = [m.name for m in measures]
    warnings = list(dict.fromkeys(w for _, r in results for w in r.provenance.get("input_warnings", [])))
    if warnings:
        provenance["input_warnings"] = warnings
    definitions = {}
    for g, r in results:  # each group's under its own labels (two groups may hold measures of one name)
        names = {m.name: lm.name for m, lm in zip(g.measures, g.labelled())}
        for k, v in r.provenance.get("definitions", {}).items():
            definitions[names.get(k, k)] = v.replace(k, names.get(k, k), 1)
    if definitions:
        provenance["definitions"] = definitions
    else:
        provenance.pop("definitions", None)
    provenance["measure_settings"] = {
        m.name: _stated(m, g.overrides.apply(settings)) for g, r in results if g.overrides for m in g.labelled()
    }
    return replace(
        base,
        per_query=pd.concat([r.per_query for r in renamed], ignore_index=True),
        aggregate={k: v for r in renamed for k, v in r.aggregate.items()},
        measures=measures,
        provenance=provenance,
        strings={k: v for r in renamed for k, v in r.strings.items()},
        notes=tuple(dict.fromkeys(n for r in renamed for n in r.notes)),
        warnings=tuple(dict.fromkeys(w for r in renamed for w in r.warnings)),
        summary={k: v for r in renamed for k, v in r.summary.items()},
        columns=_columns_in(base.evaluated, renamed),
    )


def each_warning_once():
    """Within the block, each input warning (``checks``) is issued once, however often the input is evaluated."""
    return notices.once()


def _print_order(m) -> tuple:
    """trec_eval's order; a family's plain measure before those with their own settings, then by name."""
    return m.sort_key, isinstance(m, LabelledMeasure), m.name


def _renamed(group: MeasureGroup, result: EvalResult) -> EvalResult:
    """The group's result with each measure under its label (an overridden group only)."""
    if not group.overrides:
        return result
    labelled = dict(zip(group.measures, group.labelled(), strict=True))
    names = {m.name: lm.name for m, lm in labelled.items()}
    per_query = result.per_query.assign(measure=result.per_query["measure"].map(names))
    return replace(
        result,
        per_query=per_query,
        aggregate={names[k]: v for k, v in result.aggregate.items()},
        measures=tuple(labelled.values()),
        strings={names[k]: v for k, v in result.strings.items()},
        summary={labelled[m]: v for m, v in result.summary.items()},
        columns={labelled[m]: v for m, v in result.columns.items()},
    )


def _columns_in(order: tuple[str, ...], results: list[EvalResult]) -> dict:
    """Every result's per-query columns, rows in ``order`` (the groups evaluate the same queries)."""
    out = {}
    for r in results:
        if r.evaluated != order:
            raise AssertionError(f"measure groups evaluated different queries ({len(r.evaluated)} vs {len(order)})")
        out.update(r.columns)
    return out


def _stated(measure, settings: EvalSettings) -> dict:
    """What an overridden measure is, as trec_eval would be asked for it (another tool's measure: its settings
    and whose definition it is)."""
    if not measure.spec.source.startswith(("trec_eval", "twostage")):
        from toolkit.evaluation.evaluate import definition

        return {
            "measure": measure.arg,
            "judged_only": settings.judged_only,
            "max_docs_per_query": settings.max_docs,
            "definition": definition(measure, settings.relevance_level),
        }
    flags = ["-c"] if settings.complete else []
    flags += ["-J"] if settings.judged_only else []
    flags += [f"-l {settings.relevance_level}"] + ([f"-M {settings.max_docs}"] if settings.max_docs else [])
    stated = {
        "measure": measure.arg,
        "relevance_level": settings.relevance_level,
        "max_docs_per_query": settings.max_docs,
        "trec_eval": f"trec_eval {' '.join(flags)} -m {measure.arg}",
    }
    if settings.judged_only:
        stated["judged_only"] = True
    if settings.gain.kind == "relabel":  # ir_measures' gains=: pytrec_eval reads the qrels relabelled
        stated["trec_eval"] += " on the qrels relabelled " + ",".join(f"{k}->{v:g}" for k, v in settings.gain.table)
    return stated


__all__ = ["evaluate_groups"]
