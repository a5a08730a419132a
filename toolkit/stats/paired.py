"""Comparing systems: per-query values of several runs paired, tested against one or more baselines.

The input is, per system, its tidy per-query values (query_id, measure, value) and its provenance (what
``evaluate`` gives, or a saved ``twostage eval -q --format json`` result). ``compare_runs`` refuses systems
whose provenance or evaluated queries differ from a baseline's (``ProvenanceMismatchError``) unless forced,
then tests every system against every baseline with ``significance.compare_table`` and applies one
multiple-comparison correction per measure over the whole family of (baseline, system) tests.

With several baselines, each pair of baselines is tested once (the later against the earlier), and the
randomization test of each baseline uses a generator seeded with ``seed``, so each baseline's p-values are
the ones a comparison with that baseline alone gives.

The family (``family``) is either every system against the baselines (``baseline``, the default) or every
pair of systems (``all-pairs``: each pair tested with its own ``default_rng(seed)``, the later system against
the earlier, plus a randomised Tukey HSD over all systems, ``significance.tukey_hsd``). A system whose
per-query values equal another's on every measure compared (a configuration identical to the baseline, a
copy of another row) is left out of the family and named in the document (``identical``): a copy adds a
test that cannot be independent evidence and only makes the correction harsher.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from toolkit.errors import ConfigError, InputFormatError, OptionConflictError, ProvenanceMismatchError, phrase
from toolkit.options import Options, opt, verb
from toolkit.stats.intervals import check_ci_options
from toolkit.stats.significance import (
    CORRECTIONS,
    MC_FLIP_SE,
    TESTS,
    Comparison,
    adjust,
    comparability,
    compare_table,
    mc_se,
    scaled_se,
    tukey_hsd,
)

FAMILIES = ("baseline", "all-pairs")


@dataclass(frozen=True)
class ComparisonResult:
    """What a comparison computed: the tidy per-query table (run, query_id, measure, value) the tests read, the
    tests (one per measure, baseline and system, ``p_adjusted`` over the family), and the JSON document."""

    table: pd.DataFrame
    tests: tuple[Comparison, ...]
    doc: dict
    baselines: tuple[str, ...]
    measures: tuple[str, ...]


def load_result_json(path: str, measures: Sequence[str]) -> tuple[pd.DataFrame, dict]:
    """Per-query values and provenance saved by `twostage eval -q --format json --out FILE`."""
    from toolkit.guard.readers import read_json

    doc = read_json(path)  # bounded in size and nesting (the inputs door)
    if not isinstance(doc, dict) or not isinstance(doc.get("per_query"), dict) or "provenance" not in doc:
        raise InputFormatError(
            path,
            None,
            "not a saved evaluation with per-query values; "
            "write one with `twostage eval -q --format json --out FILE QRELS RUN`",
        )
    names = {label: name for name, label in doc.get("labels", {}).items()}  # saved under the user's labels
    rows = [(str(qid), names.get(m, m), v) for qid, vals in doc["per_query"].items() for m, v in vals.items()]
    frame = pd.DataFrame(rows, columns=["query_id", "measure", "value"]).astype({"value": "float64"})
    have = set(frame["measure"])
    missing = [m for m in measures if m not in have]
    if missing:
        raise InputFormatError(
            path, None, f"has no per-query values for {', '.join(missing)} (it has: {', '.join(sorted(have))})"
        )
    return frame, doc["provenance"]


@dataclass(frozen=True)
class TestOptions(Options):
    """How systems are tested against each other (``compare_runs``; ``ts.compare``'s and ``twostage compare``'s
    test options): checked once, where they are built."""

    __test__ = False  # not a pytest class

    verb = "compare_runs"

    test: str = opt(
        "randomization",
        doc="``randomization`` (paired sign-flip test, the default), ``t`` (paired t-test), ``wilcoxon`` "
        "(signed-rank, ``scipy.stats.wilcoxon``'s defaults), ``sign`` (exact binomial over the queries with a "
        'non-zero difference) or ``tukey`` (randomised Tukey HSD, ``family="all-pairs"`` only, family-wise '
        "already): the p-value that is corrected and marked. Every test's p-value is in ``tests`` (``p_ttest``, "
        "``p_permutation``, ``p_wilcoxon``, ``p_sign``).",
    )
    correction: str = opt(
        "holm",
        doc="``holm``, ``bonferroni``, ``bh`` (Benjamini-Hochberg; also spelled ``fdr_bh``), ``holm-sidak``, "
        "``sidak``, ``fdr_by`` (Benjamini-Yekutieli) or ``none``, each as statsmodels' ``multipletests`` "
        "computes it.",
    )
    permutations: int = opt(10_000, doc="random sign flips (all 2^n when that is not more).")
    seed: int = opt(42, doc="seed of ``numpy.random.default_rng`` for the randomization test.")
    force: bool = opt(False, doc="compare even when provenance or query sets differ (pairs only the shared queries).")
    family: str = opt(
        "baseline",
        doc="``baseline`` (every system against the baselines) or ``all-pairs``. Systems identical to another on "
        'every measure are left out and named in ``doc["identical"]``.',
    )
    ci: float = opt(0.95, doc="level of the paired bootstrap interval of each difference (in (0, 1)).")
    bootstrap: int = opt(10_000, doc="bootstrap resamples (seeded by ``seed``).")
    ci_method: str = opt("percentile", doc="``percentile`` or ``bca``.")

    def validate(self) -> None:
        if self.test not in TESTS:
            raise ConfigError(f"test must be one of {', '.join(TESTS)}, not {self.test!r}")
        if self.correction not in CORRECTIONS:
            raise ConfigError(f"correction must be one of {', '.join(CORRECTIONS)}, not {self.correction!r}")
        if self.family not in FAMILIES:
            raise ConfigError(f"family must be one of {', '.join(FAMILIES)}, not {self.family!r}")
        if self.test == "tukey" and self.family != "all-pairs":
            raise OptionConflictError(
                phrase(
                    "the Tukey HSD test compares all pairs: use it with family='all-pairs'",
                    "--test tukey compares all pairs: add --family all-pairs",
                ),
                keyword="test",
                flag="--test",
            )
        check_ci_options(self.ci, self.bootstrap, self.ci_method)


def _check(per_query: Mapping, baselines: Sequence[str]) -> None:
    if len(per_query) < 2:
        raise ConfigError("give at least two systems: a baseline and a system to compare with it")
    unknown = [b for b in baselines if b not in per_query]
    if unknown or not baselines:
        raise ConfigError(f"baseline(s) {unknown or '(none)'} not among the systems ({', '.join(per_query)})")
    if len(set(baselines)) != len(baselines):
        raise ConfigError("a baseline is named twice")


def paired_table(
    per_query: Mapping[str, pd.DataFrame],
    provenance: Mapping[str, dict],
    baselines: Sequence[str],
    measures: Sequence[str],
    force: bool = False,
) -> tuple[pd.DataFrame, dict, int]:
    """The tidy table of every system (run, query_id, measure, value), the provenance differences found, and the
    number of queries every system shares. Differences raise unless ``force`` (then only shared queries pair)."""
    query_sets = {r: set(f["query_id"].unique().tolist()) for r, f in per_query.items()}
    diff: dict = {}
    for b in baselines:
        diff.update(comparability(dict(provenance), query_sets, b))
    if diff and not force:
        raise ProvenanceMismatchError(diff)
    shared = set.intersection(*query_sets.values())
    frames = []
    for r, f in per_query.items():
        f = f[f["measure"].isin(list(measures))][["query_id", "measure", "value"]].copy()
        if diff:  # forced: pair on the queries every run has
            f = f[f["query_id"].isin(shared)]
        f.insert(0, "run", r)
        frames.append(f)
    return pd.concat(frames, ignore_index=True), diff, len(shared)


def identical_runs(table: pd.DataFrame, keep: Sequence[str] = ()) -> dict[str, str]:
    """{run: the run it copies} for every run whose per-query values equal an earlier run's (or a ``keep``
    run's) on every measure and query of the tidy table. Runs in ``keep`` (the baselines) are never left out."""
    runs = list(dict.fromkeys(table["run"].tolist()))
    wide = table.pivot_table(index="run", columns=["measure", "query_id"], values="value", aggfunc="first")
    order = [r for r in keep if r in runs] + [r for r in runs if r not in keep]
    kept: list[str] = []
    out: dict[str, str] = {}
    for r in order:
        row = wide.loc[r]
        same = next((k for k in kept if row.equals(wide.loc[k])), None)
        if same is not None and r not in keep:
            out[r] = same
        else:
            kept.append(r)
    return out


def run_tests(table: pd.DataFrame, baselines: Sequence[str], options: TestOptions) -> list[Comparison]:
    """The family's tests per measure (every system against every baseline, or every pair); ``p_adjusted``
    corrects the chosen test's p-values over all tests of the measure (the Tukey HSD's p-values are already
    family-wise and are taken as they are)."""
    # test, correction and family were checked where the options were built (TestOptions.validate)
    test, permutations, seed, family = options.test, options.permutations, options.seed, options.family
    runs = list(dict.fromkeys(table["run"].tolist()))
    if len(runs) < 2:
        raise ConfigError(f"a family needs at least two distinct runs, got {len(runs)} ({', '.join(runs)})")
    ci = {"level": options.ci, "resamples": options.bootstrap, "ci_method": options.ci_method}
    tests: list[Comparison] = []
    if family == "baseline":
        for i, b in enumerate(baselines):
            earlier = set(baselines[:i])  # a pair of baselines is tested once
            part = table[~table["run"].isin(earlier)]
            if len([r for r in runs if r not in earlier]) < 2:
                continue
            tests += compare_table(part, b, permutations=permutations, seed=seed, correction="none", **ci)
    else:
        ordered = [b for b in baselines if b in runs] + [r for r in runs if r not in baselines]
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                part = table[table["run"].isin([a, b])]
                tests += compare_table(part, a, permutations=permutations, seed=seed, correction="none", **ci)
        tukey = {}
        for measure in dict.fromkeys(table["measure"].tolist()):
            wide = table[table["measure"] == measure].pivot(index="query_id", columns="run", values="value")
            wide = wide[ordered].dropna()
            p = tukey_hsd(wide.to_numpy(), permutations=permutations, seed=seed)
            for i, a in enumerate(ordered):
                for j, b in enumerate(ordered):
                    tukey[(measure, a, b)] = float(p[i, j])
        tests = [replace(c, p_tukey=tukey[(c.measure, c.baseline, c.run)]) for c in tests]
    key = TESTS[test]
    out: list[Comparison] = []
    for measure in dict.fromkeys(c.measure for c in tests):
        fam = [c for c in tests if c.measure == measure]
        raw = [getattr(c, key) for c in fam]
        adjusted = raw if test == "tukey" else adjust(raw, options.correction)
        for c, p_raw, p in zip(fam, raw, adjusted):
            se = 0.0  # the t-test's p-value has no Monte-Carlo error
            if test == "randomization":
                se = scaled_se(p_raw, float(p), c.p_permutation_se)
            elif test == "tukey":
                se = mc_se(float(p_raw), permutations)
            out.append(replace(c, p_adjusted=float(p), p_adjusted_se=se))
    return out


def _json_number(x: float):
    return x if isinstance(x, float) and math.isfinite(x) else (None if x != x else str(x))


def _results(tests: Sequence[Comparison], baseline: str) -> dict:
    out: dict = {}
    for c in tests:
        if c.baseline != baseline:
            continue
        d = c.as_dict()
        d.pop("measure")
        out.setdefault(c.measure, {})[c.run] = {k: _json_number(v) if isinstance(v, float) else v for k, v in d.items()}
    return out


def compare_doc(
    tests: Sequence[Comparison],
    provenance: Mapping[str, dict],
    baselines: Sequence[str],
    measures: Sequence[str],
    options: TestOptions,
    *,
    diff: dict,
    n_shared: int,
    identical: Mapping[str, str] | None = None,
) -> dict:
    """The JSON document of ``twostage compare --format json`` (``results`` against the first baseline,
    ``results_by_baseline`` against each), the tests' ``options`` stated under ``tests``; ``diff`` holds the
    provenance differences a forced comparison passed over, on ``n_shared`` shared queries."""
    test, permutations, seed, family = options.test, options.permutations, options.seed, options.family
    n_family = len({(c.baseline, c.run) for c in tests})
    by_baseline = {b: _results(tests, b) for b in dict.fromkeys([*baselines, *(c.baseline for c in tests)])}
    return {
        "baseline": baselines[0],
        "baselines": list(baselines),
        "runs": list(provenance),
        "measures": list(measures),
        "tests": {
            "t_test": "paired Student t-test, two-sided (scipy.stats.t)",
            "wilcoxon": "Wilcoxon signed-rank test of the per-query differences, two-sided, scipy.stats.wilcoxon "
            "with its defaults (zero differences dropped, exact when n <= 50 without ties, else normal)",
            "sign": "sign test, two-sided, exact binomial (p = 1/2) over the queries whose difference is not 0",
            "permutation": f"paired randomization test, two-sided, statistic mean difference, {permutations} "
            "random sign flips (exact enumeration when 2^n <= that), p = (1 + hits) / (1 + N)",
            "permutations": permutations,
            "seed": seed,
            "monte_carlo_se": "p_permutation_se = sqrt(p (1 - p) / permutations) (0 when exact); p_adjusted_se: that "
            "error scaled as the correction scales p (Tukey: its own sqrt(p (1 - p) / permutations)); a verdict "
            f"within {MC_FLIP_SE:g} errors of alpha says another seed could flip it",
            "rng": "numpy.random.default_rng(seed) per baseline, consumed measure by measure, run by run",
            "test": test,
            "family": family,
            "correction": "none (Tukey HSD p-values are family-wise already)"
            if test == "tukey"
            else options.correction,
            "correction_applies_to": f"{TESTS[test]}, per measure, over the {n_family} (baseline, run) "
            f"comparison(s) of the family"
            + (" (all pairs of runs)" if family == "all-pairs" else " (every run against the baselines)"),
            "tukey": "randomised Tukey HSD (Carterette 2012): each query's values shuffled among all runs, "
            f"statistic max - min of the run means, {permutations} permutations"
            if family == "all-pairs"
            else None,
            "ci": {
                "level": options.ci,
                "method": options.ci_method,
                "resamples": options.bootstrap,
                "seed": seed,
                "what": "paired bootstrap interval of delta (queries resampled with replacement, "
                "numpy.random.default_rng(seed) per comparison, as scipy.stats.bootstrap draws)",
            },
            "effect_size": "d_z = mean of the per-query differences / their sample sd (ddof 1)",
        },
        "identical": dict(identical or {}),
        "baseline_mean": {c.measure: c.baseline_mean for c in tests if c.baseline == baselines[0]},
        "results": by_baseline[baselines[0]],
        "results_by_baseline": by_baseline,
        "forced": bool(diff),
        "provenance_differences": {k: list(v) for k, v in diff.items()},
        "queries_compared": n_shared if diff else None,
        "provenance": dict(provenance),
    }


@verb(TestOptions, inputs=("per_query", "provenance", "baselines", "measures"))
def compare_runs(
    per_query: Mapping[str, pd.DataFrame],
    provenance: Mapping[str, dict],
    baselines: Sequence[str],
    measures: Sequence[str],
    *,
    options: TestOptions,
) -> ComparisonResult:
    """Pair, check and test systems given as {name: per-query values} and {name: provenance}.

    Runs identical to another (the same per-query values on every measure) are left out of the family and
    named in ``doc["identical"]``; fewer than two distinct runs left is an error.
    """
    o = options
    _check(per_query, baselines)
    table, diff, n_shared = paired_table(per_query, provenance, baselines, measures, o.force)
    identical = identical_runs(table, baselines)
    tested = table[~table["run"].isin(list(identical))]
    if tested["run"].nunique() < 2:
        raise ConfigError(
            "a family needs at least two distinct runs; "
            + ", ".join(f"{r} is identical to {s}" for r, s in identical.items())
        )
    tests = run_tests(tested, baselines, o)
    doc = compare_doc(tests, provenance, baselines, measures, o, diff=diff, n_shared=n_shared, identical=identical)
    return ComparisonResult(table, tuple(tests), doc, tuple(baselines), tuple(measures))


__all__ = [
    "FAMILIES",
    "TESTS",
    "ComparisonResult",
    "TestOptions",
    "compare_doc",
    "compare_runs",
    "identical_runs",
    "load_result_json",
    "paired_table",
    "run_tests",
]
