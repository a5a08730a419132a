"""How far to trust one comparison, in the fields every report shows beside it (compare, diagnose, experiments).

For a comparison (``significance.Comparison.as_dict``'s keys: ``delta``, ``ci_low``, ``ci_high``, ``d_z``,
``p_adjusted``) and, where known, the hole bounds of its two systems (``holes.HoleBounds.mean()``'s ``min`` and
``max``: the lowest and highest mean over every labelling of their holes: those in the top k, or with
``over="retrieved"`` every unjudged document each retrieved; the verdict's words say which):

- ``direction``: ``better`` / ``worse`` / ``equal``, the sign of the difference (system - baseline);
- ``baseline_bounds`` and ``bounds``: [lowest, highest] mean of the baseline and of the system (None when the
  measure is not ``ndcg_cut.k``, ``P.k`` or ``recall.k``, or the runs were not at hand);
- ``bounds_overlap``: whether the two intervals of possible values share a value (some labelling of the holes
  could erase or reverse the difference); None without bounds;
- ``verdict``: the one line of ``verdict.verdict`` (``+0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.0123: better;
  bounds over the top-k holes overlap: judge more before claiming it``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from toolkit.stats.verdict import overlap, verdict

Bounds = tuple[float, float]

FIELDS = ("direction", "baseline_bounds", "bounds", "bounds_overlap", "verdict")


def direction(delta) -> str:
    """``better`` (delta > 0), ``worse`` (delta < 0) or ``equal``."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        return "equal"
    if math.isnan(d) or d == 0:
        return "equal"
    return "better" if d > 0 else "worse"


def mean_bounds(holes: Mapping | None) -> dict[str, Bounds]:
    """``{measure: (lowest mean, highest mean)}`` of ``{measure: HoleBounds}`` (empty for None)."""
    out: dict[str, Bounds] = {}
    for name, b in (holes or {}).items():
        m = b.mean()
        out[name] = (float(m["min"]), float(m["max"]))
    return out


def trust_fields(
    result: Mapping,
    baseline_bounds: Bounds | None = None,
    bounds: Bounds | None = None,
    alpha: float = 0.05,
    over: str = "top-k",
) -> dict:
    """The fields of the module docstring for one comparison."""
    both = baseline_bounds is not None and bounds is not None
    pair = (baseline_bounds, bounds) if both else None
    return {
        "direction": direction(result.get("delta")),
        "baseline_bounds": list(baseline_bounds) if baseline_bounds is not None else None,
        "bounds": list(bounds) if bounds is not None else None,
        "bounds_overlap": overlap(baseline_bounds, bounds) if both else None,  # type: ignore[arg-type]
        "verdict": verdict(result, alpha, pair, over),  # type: ignore[arg-type]
    }


def bounds_text(b) -> str:
    """``[0.4012, 0.5230]``, or an empty string without bounds."""
    if not b:
        return ""
    return f"[{float(b[0]):.4f}, {float(b[1]):.4f}]"


def interval_text(r: Mapping) -> str:
    """``[0.0080, 0.0340]`` of a comparison's ``ci_low``/``ci_high``; empty when it has none."""
    lo, hi = r.get("ci_low"), r.get("ci_high")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return ""
    return f"[{float(lo):.4f}, {float(hi):.4f}]"


def dz_text(r: Mapping) -> str:
    v = r.get("d_z")
    if v is None:
        return ""
    try:
        return f"{float(v):.2f}"
    except (TypeError, ValueError):
        return str(v)


def attach_to_doc(
    doc: dict, bounds_by_run: Mapping[str, Mapping[str, Bounds]] | None, alpha: float = 0.05, over: str = "top-k"
) -> dict:
    """``compare``'s JSON document with the fields of the module docstring in every result (in place; returned),
    and, with bounds, ``holes``: ``{measure: {run: [lowest, highest]}}``, and what they range over
    (``tests.holes_over``, ``tests.holes``)."""
    from toolkit.stats.verdict import OVER_SHORT, OVER_WORDS

    by_run = bounds_by_run or {}
    by_baseline = doc.get("results_by_baseline") or {doc["baseline"]: doc["results"]}
    for base, per_measure in by_baseline.items():
        for measure, per_run in per_measure.items():
            for run, r in per_run.items():
                b_base, b_run = by_run.get(base, {}).get(measure), by_run.get(run, {}).get(measure)
                r.update(trust_fields(r, b_base, b_run, alpha, over))
    if by_run:
        doc["holes"] = {
            m: {run: list(b[m]) for run, b in by_run.items() if m in b}
            for m in doc.get("measures", [])
            if any(m in b for b in by_run.values())
        }
        doc["tests"]["holes_over"] = over
        doc["tests"]["holes"] = (
            f"per run, the lowest and highest mean over {OVER_WORDS[over]} (toolkit.quality.holes); "
            f"bounds_overlap: the two runs' intervals of possible values overlap, so some labelling of "
            f"{OVER_SHORT[over]} could erase or reverse the difference"
        )
    return doc


__all__ = [
    "FIELDS",
    "attach_to_doc",
    "bounds_text",
    "direction",
    "dz_text",
    "interval_text",
    "mean_bounds",
    "trust_fields",
]
