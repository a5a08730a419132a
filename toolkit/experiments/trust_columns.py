"""How far to trust each configuration's difference to the baseline, on every measure of an experiment.

Columns added to ``results.csv`` (and shown on ``index.html``) for each measure M: when M is ``ndcg_cut.k``,
``P.k`` or ``recall.k``, ``min_M`` and ``max_M``, the lowest and highest mean over every labelling of the
configuration's unjudged documents in the top k (``quality.holes``); for every configuration tested against
the baseline: ``direction_M`` (better / worse / equal), ``bounds_overlap_M`` (its interval of possible values
and the baseline's overlap: the holes could explain the difference; empty without bounds) and ``verdict_M``, the
one line of ``stats.verdict`` (``+0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.0123: better; bounds over the
top-k holes overlap: judge more before claiming it``). Without bounds (another measure) the verdict has no bounds clause. The first
measure's columns come first, then the others' in the table's measure order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolkit.stats.trust import trust_fields


def group_bounds(qrels, configs: Sequence, groups: Sequence, settings) -> dict[str, dict[str, tuple[float, float]]]:
    """``{measure name in the results table: {config name: (lowest mean, highest mean)}}`` for every
    ``ndcg_cut.k``, ``P.k`` and ``recall.k`` of the measure ``groups`` (``MeasureGroup``s; each under its own
    settings from ``settings``): one ``hole_bounds`` call per group and configuration. A group whose settings the
    bounds do not cover (``-J``, another discount) gets none."""
    from toolkit.errors import ConfigError
    from toolkit.quality.holes import SUPPORTED, hole_bounds
    from toolkit.stats.trust import mean_bounds

    out: dict[str, dict[str, tuple[float, float]]] = {}
    for g in groups:
        chosen = [(m, lab.name) for m, lab in zip(g.measures, g.labelled()) if m.family in SUPPORTED and m.cutoff]
        if not chosen:
            continue
        try:
            per_config = {
                c.name: mean_bounds(hole_bounds(qrels, c.run, [m for m, _ in chosen], g.overrides.apply(settings)))
                for c in configs
            }
        except ConfigError:  # -J or a discount the bounds do not cover
            continue
        for m, name in chosen:
            out[name] = {c: b[m.name] for c, b in per_config.items()}
    return out


def trust_columns(
    configs: Sequence, bounds: Mapping[str, tuple[float, float]], sig: Mapping, baseline: str | None, name: str
) -> dict[str, dict]:
    """``{config name: {column: value}}`` of the module docstring's columns for the measure ``name`` (its name in
    the results table), with ``bounds`` its ``{config name: (lowest mean, highest mean)}`` (``group_bounds``;
    empty without bounds)."""
    out: dict[str, dict] = {}
    for c in configs:
        row: dict = {}
        if c.name in bounds:
            row[f"min_{name}"], row[f"max_{name}"] = bounds[c.name]
        r = sig.get((c.name, name)) if baseline else None
        if r is not None:
            f = trust_fields(r.as_dict(), bounds.get(baseline or ""), bounds.get(c.name))
            row[f"direction_{name}"] = f["direction"]
            row[f"bounds_overlap_{name}"] = f["bounds_overlap"]
            row[f"verdict_{name}"] = f["verdict"]
        out[c.name] = row
    return out


def interval_options(evaluation: Mapping) -> dict:
    """The experiment's ``evaluation`` keys ``ci``, ``bootstrap``, ``ci_method`` as ``compare_table``'s keywords."""
    return {
        "level": float(evaluation["ci"]),
        "resamples": int(evaluation["bootstrap"]),
        "ci_method": str(evaluation["ci_method"]),
    }


__all__ = ["group_bounds", "interval_options", "trust_columns"]
