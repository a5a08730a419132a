"""One line per comparison that says how far to trust it: the difference, its interval, its effect size, the
test's verdict and, where the hole bounds are known, whether the unjudged documents could explain it.

    +0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.0123: better; bounds overlap: judge more before claiming it

The rules, in order: an adjusted p-value below alpha is "better" or "worse" (by the sign of the difference),
else "no significant difference"; an interval that excludes 0 while the adjusted p-value does not pass says so
(the interval is not corrected for the family). When the intervals of possible values of the two systems
(``holes.HoleBounds``: the lowest and highest mean over every labelling of their unjudged documents) overlap,
"bounds overlap: judge more before claiming it" is added: some labelling of the holes reverses or erases the
difference. Disjoint intervals add "bounds disjoint: the holes cannot explain it".
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def verdict(
    result: Mapping,
    alpha: float = 0.05,
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
) -> str:
    """The verdict of one comparison (``significance.Comparison.as_dict``'s keys); ``bounds`` = ((baseline's
    lowest, highest mean), (system's lowest, highest mean)) over the labellings of their unjudged documents."""
    delta = _num(result["delta"])
    lo, hi, dz = _num(result.get("ci_low")), _num(result.get("ci_high")), _num(result.get("d_z"))
    p = _num(result.get("p_adjusted"))
    parts = [f"{delta:+.4f}"]
    if not math.isnan(lo):
        parts[0] += f" [{lo:.4f}, {hi:.4f}]"
    text = ", ".join(parts + ([f"d_z {dz:.2f}"] if not math.isnan(dz) else []) + [f"p_adj {p:.4g}"])
    if p < alpha and delta != 0:
        text += ": " + ("better" if delta > 0 else "worse")
    else:
        text += ": no significant difference"
        if not math.isnan(lo) and (lo > 0 or hi < 0):
            text += " (the uncorrected interval excludes 0)"
    if bounds is not None:
        (a_lo, a_hi), (b_lo, b_hi) = bounds
        if a_lo <= b_hi and b_lo <= a_hi:
            text += "; bounds overlap: judge more before claiming it"
        else:
            text += "; bounds disjoint: the holes cannot explain it"
    return text


__all__ = ["verdict"]
