"""How far to trust each configuration's difference to the baseline, on every measure of an experiment.

Columns added to ``results.csv`` (and shown on ``index.html``) for each measure M: when M is ``ndcg_cut.k``,
``P.k`` or ``recall.k``, ``min_M`` and ``max_M``, the lowest and highest mean over every labelling of the
configuration's unjudged documents in the top k (``evaluation.holes``); for every configuration tested against
the baseline: ``direction_M`` (better / worse / equal), ``bounds_overlap_M`` (its interval of possible values
and the baseline's overlap: the holes could explain the difference; empty without bounds) and ``verdict_M``, the
one line of ``evaluation.verdict`` (``+0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.0123: better; bounds overlap:
judge more before claiming it``). Without bounds (another measure) the verdict has no bounds clause. The first
measure's columns come first, then the others' in the table's measure order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolkit.evaluation.trust import trust_fields


def config_bounds(qrels, configs: Sequence, measure, settings) -> dict[str, tuple[float, float]]:
    """``{config name: (lowest mean, highest mean)}`` of ``measure`` (a parsed ``Measure``) under ``settings``
    (its group's); empty when it has no hole bounds."""
    from toolkit.errors import ConfigError
    from toolkit.evaluation.holes import SUPPORTED, hole_bounds

    if measure.family not in SUPPORTED or not measure.cutoff:
        return {}
    out: dict[str, tuple[float, float]] = {}
    for c in configs:
        try:
            mean = hole_bounds(qrels, c.run, [measure], settings)[measure.name].mean()
        except ConfigError:  # -J or a discount the bounds do not cover
            return {}
        out[c.name] = (mean["min"], mean["max"])
    return out


def trust_columns(
    qrels, configs: Sequence, measure, settings, sig: Mapping, baseline: str | None, name: str | None = None
) -> dict[str, dict]:
    """``{config name: {column: value}}`` of the module docstring's columns for ``measure`` (a parsed
    ``Measure``, evaluated under ``settings``; ``name``: its name in the results table, default its own)."""
    measure_name = name or measure.name
    bounds = config_bounds(qrels, configs, measure, settings)
    out: dict[str, dict] = {}
    for c in configs:
        row: dict = {}
        if c.name in bounds:
            row[f"min_{measure_name}"], row[f"max_{measure_name}"] = bounds[c.name]
        r = sig.get((c.name, measure_name)) if baseline else None
        if r is not None:
            f = trust_fields(r.as_dict(), bounds.get(baseline or ""), bounds.get(c.name))
            row[f"direction_{measure_name}"] = f["direction"]
            row[f"bounds_overlap_{measure_name}"] = f["bounds_overlap"]
            row[f"verdict_{measure_name}"] = f["verdict"]
        out[c.name] = row
    return out


def interval_options(evaluation: Mapping) -> dict:
    """The experiment's ``evaluation`` keys ``ci``, ``bootstrap``, ``ci_method`` as ``compare_table``'s keywords."""
    return {
        "level": float(evaluation.get("ci", 0.95)),
        "resamples": int(evaluation.get("bootstrap", 10_000)),
        "ci_method": str(evaluation.get("ci_method", "percentile")),
    }


def with_uncertainty(diag, qrels, runs: Mapping[str, object], settings, evaluation: Mapping, recall_level: int = 2):
    """A configuration's diagnosis (``diagnosis.diagnose``, run with its default recall level) with every
    comparison's interval, bounds and verdict (``diagnosis.uncertainty.annotate``)."""
    import dataclasses

    from toolkit.diagnosis.uncertainty import annotate

    o = interval_options(evaluation)
    evaluated = dataclasses.replace(settings, relevance_level=recall_level)
    return annotate(
        diag,
        qrels,
        {name: [run] for name, run in runs.items()},
        evaluated,
        level=o["level"],
        resamples=o["resamples"],
        method=o["ci_method"],
        seed=int(evaluation.get("seed", 42)),
    )


__all__ = ["config_bounds", "interval_options", "trust_columns", "with_uncertainty"]
