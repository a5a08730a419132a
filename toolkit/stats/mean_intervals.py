"""``twostage eval --ci``: a bootstrap confidence interval of each measure's mean over the queries.

For every numeric measure whose ``all`` line is the mean of its per-query values (not the counts that trec_eval
sums, such as ``num_rel``, nor ``gm_map``'s geometric mean), ``intervals.bootstrap_ci`` of the per-query values
the mean is taken over (with ``-c``: every judged query, missing ones as 0): queries resampled with
replacement, ``resamples`` times, drawn from a fresh ``numpy.random.default_rng(seed)`` per measure, so each
interval equals ``scipy.stats.bootstrap((values,), np.mean, confidence_level=level, n_resamples=resamples,
method=method, rng=np.random.default_rng(seed))``'s and does not depend on which other measures are asked.

Printed in trec_eval's layout as two extra ``all`` lines after each measure's (``ndcg_cut_10_ci_low all
0.4612``, ``ndcg_cut_10_ci_high all 0.5521``: the ``NAME_SUFFIX`` convention of ``--holes``'s ``_min``/``_max``),
in ``--format json`` under ``ci``, in ``--format csv`` as ``all`` rows named the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.errors import ConfigError, phrase
from toolkit.evaluation.trec_format import CI_SUFFIXES
from toolkit.stats.intervals import CI_METHODS, DEFAULT_RESAMPLES, Interval, bootstrap_ci

SUFFIXES = CI_SUFFIXES  # NAME_ci_low, NAME_ci_high


@dataclass(frozen=True)
class MeanIntervals:
    """The interval of each measure's mean (keyed by trec_eval's printed name), with how it was computed."""

    level: float
    method: str
    resamples: int
    seed: int
    means: dict[str, float]
    intervals: dict[str, Interval]
    queries: int

    def frame(self, labels: dict[str, str] | None = None) -> pd.DataFrame:
        """One row per measure (by ``labels``, default the printed name): mean, ci_low, ci_high."""
        names = labels or {}
        rows = [
            (names.get(n, n), self.means[n], iv.low, iv.high)
            for n, iv in self.intervals.items()  # in the order evaluated
        ]
        out = pd.DataFrame(rows, columns=["measure", "mean", "ci_low", "ci_high"]).set_index("measure")
        return out

    def describe(self) -> dict:
        return {
            "level": self.level,
            "method": self.method,
            "resamples": self.resamples,
            "seed": self.seed,
            "queries": self.queries,
            "what": "bootstrap interval of the mean over queries (queries resampled with replacement, "
            "numpy.random.default_rng(seed) per measure, as scipy.stats.bootstrap draws)",
        }


def check_interval_request(level, resamples, method) -> float:
    """``level`` as a float in (0, 1), else a ConfigError naming ``ci=`` / ``--ci``; the other two checked too."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        lv = float("nan")
    if not 0.0 < lv < 1.0:
        raise ConfigError(
            f"{phrase(f'ci={level!r}', f'--ci {level}')}: the interval level must lie strictly between 0 and 1 "
            "(e.g. 0.95)"
        )
    if int(resamples) < 1:
        raise ConfigError(f"{phrase(f'bootstrap={resamples}', f'--bootstrap {resamples}')}: give at least 1 resample")
    if method not in CI_METHODS:
        raise ConfigError(
            f"{phrase(f'ci_method={method!r}', f'--ci-method {method}')}: choose one of {', '.join(CI_METHODS)}"
        )
    return lv


def mean_intervals(
    result,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    method: str = "percentile",
    seed: int = 42,
) -> MeanIntervals:
    """The interval of the mean of every mean-aggregated numeric measure of an ``EvalResult``."""
    lv = check_interval_request(level, resamples, method)
    wide = result.wide()
    means: dict[str, float] = {}
    out: dict[str, Interval] = {}
    for m in result.measures:
        if m.name in out or m.name not in wide.columns or m.spec.aggregate != "mean" or m.spec.value_type == "string":
            continue
        if m.name not in result.aggregate:
            continue
        values = wide[m.name].dropna().to_numpy(dtype=np.float64)
        if len(values) == 0:
            continue
        out[m.name] = bootstrap_ci(values, lv, int(resamples), method, seed)
        means[m.name] = float(result.aggregate[m.name])
    return MeanIntervals(lv, method, int(resamples), int(seed), means, out, len(wide))


def with_ci_lines(text: str, ci: MeanIntervals) -> str:
    """trec_eval's text with ``NAME_ci_low`` and ``NAME_ci_high`` ``all`` lines after each measure's ``all`` line
    (name padded to 22, ``%6.4f``: trec_eval's layout)."""
    from toolkit.evaluation.trec_format import c_float

    out = []
    for line in text.splitlines():
        out.append(line)
        parts = line.split("\t")
        if line.startswith("#") or len(parts) != 3 or parts[1] != "all" or parts[0].strip() not in ci.intervals:
            continue
        name = parts[0].strip()
        iv = ci.intervals[name]
        out.extend(f"{name + '_' + s:<22}\tall\t{c_float(v)}" for s, v in zip(SUFFIXES, (iv.low, iv.high)))
    return "\n".join(out) + "\n" if out else ""


def ci_header(ci: MeanIntervals) -> str:
    """The text output's header line: what ``NAME_ci_low`` / ``NAME_ci_high`` are, how computed."""
    return (
        f"ci: NAME_ci_low, NAME_ci_high = {ci.level:g} bootstrap interval of the mean over {ci.queries} queries; "
        f"method {ci.method}, {ci.resamples} resamples, seed {ci.seed}"
    )


def ci_json(ci: MeanIntervals, labels: dict[str, str] | None = None) -> dict:
    """``{level, method, resamples, seed, queries, what, measures: {label: {mean, ci_low, ci_high}}}``."""
    names = labels or {}
    return {
        **ci.describe(),
        "measures": {
            names.get(n, n): {"mean": ci.means[n], "ci_low": iv.low, "ci_high": iv.high}
            for n, iv in ci.intervals.items()
        },
    }


def with_ci_columns(table: pd.DataFrame, intervals: dict) -> pd.DataFrame:
    """``report.eval_many.wide_table`` with ``NAME_ci_low`` and ``NAME_ci_high`` after each measure column that has an
    interval, filled on each run's 'all' row (``intervals``: {run: ``MeanIntervals``})."""
    out = table.copy()
    summary = out["query_id"] == "all" if "query_id" in out.columns else pd.Series(True, index=out.index)
    for name in [c for c in table.columns if any(ci is not None and c in ci.intervals for ci in intervals.values())]:
        at = list(out.columns).index(name) + 1
        for i, s in enumerate(SUFFIXES):
            values = [
                (getattr(intervals[run].intervals[name], s.removeprefix("ci_")) if is_all else None)
                if intervals.get(run) is not None and name in intervals[run].intervals
                else None
                for run, is_all in zip(out["run"], summary)
            ]
            out.insert(at + i, f"{name}_{s}", pd.Series(values, index=out.index, dtype="object"))
    return out


__all__ = [
    "SUFFIXES",
    "MeanIntervals",
    "check_interval_request",
    "ci_header",
    "ci_json",
    "mean_intervals",
    "with_ci_columns",
    "with_ci_lines",
]
