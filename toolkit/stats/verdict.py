"""One line per comparison that says how far to trust it: the difference, its interval, its effect size, the
test's verdict and, where the hole bounds are known, whether the unjudged documents could explain it.

    +0.0210 [0.0080, 0.0340], d_z 0.41, p_adj 0.0123: better; bounds over the top-k holes overlap: judge more
    before claiming it

The rules, in order: an adjusted p-value below alpha is "better" or "worse" (by the sign of the difference),
else "no significant difference"; an interval that excludes 0 while the adjusted p-value does not pass says so
(the interval is not corrected for the family). When the intervals of possible values of the two systems
(``holes.HoleBounds``: the lowest and highest mean over every labelling of their holes, ``over`` the top-k holes
or every retrieved one: the words say which) overlap, "bounds over the top-k holes overlap: judge more before
claiming it" is added: some labelling of those holes reverses or erases the difference. Disjoint intervals add
"bounds over the top-k holes disjoint: no labelling of the top-k holes explains it" (with ``--holes-over
retrieved``: "the retrieved holes"), which says nothing of documents the bounds did not range over.
A sampled p-value (randomization test, Tukey HSD) within ``significance.MC_FLIP_SE`` Monte-Carlo standard errors
(``p_adjusted_se``) of alpha says that another seed could flip the decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from toolkit.stats.significance import MC_FLIP_SE, could_flip

#: What hole bounds range over (``toolkit.quality.holes.HOLES_OVER``), in the words every output uses for each
#: (``--holes``, ``--holes-over retrieved``).
OVER_WORDS = MappingProxyType(
    {
        "top-k": "every labelling of the unjudged documents in the top k (the ideal ranking from the judged documents "
        "plus those)",
        "retrieved": "every labelling of every unjudged document the run retrieved (the ideal ranking recomputed)",
    }
)
#: Short form, for verdicts and table notes.
OVER_SHORT = MappingProxyType({"top-k": "the top-k holes", "retrieved": "the retrieved holes"})


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals of possible values [low, high] share a value."""
    return a[0] <= b[1] and b[0] <= a[1]


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def verdict(
    result: Mapping,
    alpha: float = 0.05,
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
    over: str = "top-k",
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
    se = _num(result.get("p_adjusted_se"))
    if not math.isnan(se) and could_flip(p, se, alpha):
        text += (
            f" (Monte-Carlo error: p_adj {p:.4g} +- {se:.2g} lies within {MC_FLIP_SE:g} standard errors of "
            f"alpha {alpha:g}, so another seed could flip this; use more permutations)"
        )
    if bounds is not None:
        (a_lo, a_hi), (b_lo, b_hi) = bounds
        holes = OVER_SHORT[over]
        if a_lo <= b_hi and b_lo <= a_hi:
            text += f"; bounds over {holes} overlap: judge more before claiming it"
        else:
            text += f"; bounds over {holes} disjoint: no labelling of {holes} explains it"
    return text


__all__ = ["OVER_SHORT", "OVER_WORDS", "overlap", "verdict"]
