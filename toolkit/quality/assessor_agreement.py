"""How far two (or more) sets of relevance judgments agree: on the labels, and on the ranking of systems.

Pure functions of judgment tables and per-query values; ``toolkit.quality.agreement`` assembles them into an
``Agreement`` (``toolkit.api.assessors.agreement`` reads the files and evaluates the runs). Labels below 0 mean
"in the pool, not judged" (trec_eval's convention) and are left out: a document counts as judged by both when both
give it a label >= 0, for the same query.

Definitions (n documents judged by both, K labels, O the K x K confusion matrix of counts, rows A's label,
columns B's, r_i and c_j its row and column sums):

- **Cohen's kappa** (Cohen 1960): p_o = trace(O)/n, p_e = sum_k r_k c_k / n^2, kappa = (p_o - p_e) / (1 - p_e).
- **Linearly weighted kappa** (Cohen 1968): disagreement weight w_ij = |l_i - l_j| (the labels' values; the
  scale of the weights cancels), E_ij = r_i c_j / n, kappa_w = 1 - sum w O / sum w E. On labels that are
  consecutive integers (0..3) this is scikit-learn's ``cohen_kappa_score(weights="linear")``, which weights by
  the position in the label list instead of the value.
- **Quadratically weighted kappa** (Cohen 1968; Fleiss & Cohen 1973): the same with w_ij = (l_i - l_j)^2; on
  consecutive integer labels scikit-learn's ``cohen_kappa_score(weights="quadratic")``.
  All three are NaN when chance agreement is already perfect (every document has the same label on both sides).
- **Krippendorff's alpha** (Krippendorff, "Content Analysis", 2004/2013; "Computing Krippendorff's
  alpha-reliability", 2011), ordinal by default: over the units (documents) with at least two labels, n_uc the
  labels c unit u received and m_u their number, the coincidence matrix o_ck = sum_u n_uc (n_uk - [c = k]) /
  (m_u - 1), n_c = sum_k o_ck, n = sum_c n_c; alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck, with
  the squared ordinal distance d_ck = (sum_{g between c and k} n_g - (n_c + n_k)/2)^2 (``interval``: (c - k)^2;
  ``nominal``: [c != k]). It allows missing labels (a document judged by some groups only counts among those)
  and any number of groups; NaN when only one label value occurs.
- **Fleiss' kappa** (Fleiss 1971), for m >= 2 groups over the N documents every group judged, n_ik the number
  of groups giving document i label k: P_i = (sum_k n_ik^2 - m) / (m (m - 1)), P = mean P_i,
  p_k = sum_i n_ik / (N m), P_e = sum_k p_k^2, kappa = (P - P_e) / (1 - P_e).
- **Kendall's tau** of two system rankings: tau-b (ties allowed) of the systems' mean scores,
  ``scipy.stats.kendalltau``.
- **tau_ap** (Yilmaz, Aslam & Robertson, "A new rank correlation coefficient for information retrieval",
  SIGIR 2008): with the reference ranking (A's) as the truth and the other ranking (B's) ordered by score
  descending (ties by system name ascending), tau_ap = 2/(N-1) * sum_{i=2..N} C(i)/(i-1) - 1, where C(i)
  counts the systems above position i in B's ranking that A also ranks above the system at position i
  (a tie in A counts one half). Swaps near the top weigh more than swaps at the bottom; 1 for the same order,
  -1 for the reverse.
- **Flipped significant pairs**: every pair of systems is tested under each set of judgments with the paired
  randomization test of ``significance.permutation_test`` (the same generator seed for both), p-values
  corrected over the family of all pairs (Holm by default). A pair flips when the conclusion at ``alpha``
  differs: ``reversed`` (significant both ways, opposite directions), ``lost`` (significant under A only),
  ``gained`` (significant under B only).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE
from toolkit.errors import ConfigError, NoCommonQueriesError
from toolkit.stats.significance import (
    DEFAULT_PERMUTATIONS,
    DEFAULT_SEED,
    MC_FLIP_SE,
    adjust,
    check_level,
    mc_se,
    permutation_test,
    scaled_se,
)

ALPHA = 0.05


# ------------------------------------------------------------------ labels
def common_labels(a: pd.DataFrame, b: pd.DataFrame, name_a: str = "A", name_b: str = "B") -> pd.DataFrame:
    """The documents both tables judged (label >= 0) for the same query: query_id, doc_id, label_a, label_b.

    Raises ``NoCommonQueriesError`` when the two tables share no query.
    """
    qa, qb = set(a[QUERY_ID]), set(b[QUERY_ID])
    if not qa & qb:
        raise NoCommonQueriesError(
            f"{name_a} and {name_b} share no query ({len(qa)} and {len(qb)} queries): "
            "they are not judgments of the same topics"
        )
    left = a.loc[a[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]]
    right = b.loc[b[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]]
    both = left.merge(right, on=[QUERY_ID, DOC_ID], suffixes=("_a", "_b"))
    both = both.rename(columns={f"{RELEVANCE}_a": "label_a", f"{RELEVANCE}_b": "label_b"})
    return both.sort_values([QUERY_ID, DOC_ID], kind="stable").reset_index(drop=True)


def confusion_matrix(x: Sequence[int], y: Sequence[int], labels: Sequence[int]) -> np.ndarray:
    """Counts of (x's label, y's label) pairs: rows follow ``labels`` for x, columns for y."""
    index = {int(label): i for i, label in enumerate(labels)}
    out = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for u, v in zip(x, y):
        if int(u) not in index or int(v) not in index:
            raise ConfigError(f"label pair ({u}, {v}) outside the labels {list(labels)}")
        out[index[int(u)], index[int(v)]] += 1
    return out


def kappa_from_confusion(confusion: np.ndarray, labels: Sequence[int], weights: str | None = None) -> float:
    """Cohen's kappa (``weights=None``), or the linearly (``"linear"``) or quadratically (``"quadratic"``) weighted
    kappa of a confusion matrix."""
    o = np.asarray(confusion, dtype=np.float64)
    n = o.sum()
    if n == 0:
        return math.nan
    expected = np.outer(o.sum(axis=1), o.sum(axis=0)) / n
    values = np.asarray(labels, dtype=np.float64)
    if weights is None:
        w = 1.0 - np.eye(len(values))
    elif weights == "linear":
        w = np.abs(values[:, None] - values[None, :])
    elif weights == "quadratic":
        w = (values[:, None] - values[None, :]) ** 2
    else:
        raise ConfigError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    denominator = float((w * expected).sum())
    if denominator == 0.0:
        return math.nan
    return 1.0 - float((w * o).sum()) / denominator


def cohen_kappa(
    x: Sequence[int], y: Sequence[int], weights: str | None = None, labels: Sequence[int] | None = None
) -> float:
    """Cohen's kappa of two label sequences over ``labels`` (default: every label either uses)."""
    labels = sorted({int(v) for v in (*x, *y)}) if labels is None else list(labels)
    return kappa_from_confusion(confusion_matrix(x, y, labels), labels, weights)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of an items x labels table of counts, every row summing to the same m >= 2 raters."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        return math.nan
    raters = table.sum(axis=1)
    m = float(raters[0])
    if m < 2 or not np.all(raters == m):
        raise ConfigError("Fleiss' kappa needs the same number (>= 2) of ratings for every item")
    p_item = ((table**2).sum(axis=1) - m) / (m * (m - 1))
    p_bar = float(p_item.mean())
    p_label = table.sum(axis=0) / (table.shape[0] * m)
    p_e = float((p_label**2).sum())
    if p_e == 1.0:
        return math.nan
    return (p_bar - p_e) / (1.0 - p_e)


KRIPPENDORFF_LEVELS = ("ordinal", "interval", "nominal")


def coincidence_matrix(counts: np.ndarray) -> np.ndarray:
    """Krippendorff's coincidence matrix of a units x labels table of counts (units with fewer than two labels
    are unpairable and left out): o_ck = sum_u n_uc (n_uk - [c = k]) / (m_u - 1)."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ConfigError(f"counts must be a units x labels table, got shape {table.shape}")
    m = table.sum(axis=1)
    table, m = table[m >= 2], m[m >= 2]
    if not len(table):
        return np.zeros((table.shape[1], table.shape[1]))
    weighted = table / (m - 1)[:, None]
    return weighted.T @ table - np.diag(weighted.sum(axis=0))


def krippendorff_alpha(counts: np.ndarray, labels: Sequence[float], level: str = "ordinal") -> float:
    """Krippendorff's alpha of a units x labels table of counts, columns in the order of ``labels`` (ascending
    values for ``ordinal`` and ``interval``); see the module docstring."""
    if level not in KRIPPENDORFF_LEVELS:
        raise ConfigError(f"level must be one of {', '.join(KRIPPENDORFF_LEVELS)}, not {level!r}")
    o = coincidence_matrix(counts)
    values = np.asarray(labels, dtype=np.float64)
    if o.shape != (len(values), len(values)):
        raise ConfigError(f"counts have {o.shape[0]} label columns, labels {len(values)}")
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    if level == "nominal":
        d = 1.0 - np.eye(len(values))
    elif level == "interval":
        d = (values[:, None] - values[None, :]) ** 2
    else:
        cum = np.concatenate([[0.0], np.cumsum(n_c)])  # cum[k + 1] - cum[c] = sum of n_g for g in c..k
        lo = np.minimum.outer(np.arange(len(values)), np.arange(len(values)))
        hi = np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
        d = (cum[hi + 1] - cum[lo] - (n_c[:, None] + n_c[None, :]) / 2) ** 2
    expected = float((np.outer(n_c, n_c) * d).sum())
    if n < 2 or expected == 0.0:
        return math.nan
    return 1.0 - (n - 1) * float((o * d).sum()) / expected


def pair_counts(x: Sequence[int], y: Sequence[int], labels: Sequence[int]) -> np.ndarray:
    """Units x labels counts of two label sequences (one unit per position, two labels each)."""
    index = {int(label): i for i, label in enumerate(labels)}
    out = np.zeros((len(x), len(labels)), dtype=np.int64)
    for i, (u, v) in enumerate(zip(x, y)):
        out[i, index[int(u)]] += 1
        out[i, index[int(v)]] += 1
    return out


@dataclass(frozen=True)
class LabelAgreement:
    """Two sets of judgments on the documents both judged."""

    name_a: str
    name_b: str
    queries_common: int
    queries_only_a: int
    queries_only_b: int
    documents_both: int
    documents_only_a: int
    documents_only_b: int
    labels: tuple[int, ...]
    confusion: np.ndarray
    kappa: float
    kappa_linear: float
    mean_abs_difference: float
    kappa_quadratic: float = math.nan
    krippendorff_alpha: float = math.nan  # ordinal

    def as_dict(self) -> dict:
        return {
            "a": self.name_a,
            "b": self.name_b,
            "queries_common": self.queries_common,
            "queries_only_a": self.queries_only_a,
            "queries_only_b": self.queries_only_b,
            "documents_both": self.documents_both,
            "documents_only_a": self.documents_only_a,
            "documents_only_b": self.documents_only_b,
            "labels": list(self.labels),
            "confusion": self.confusion.tolist(),
            "kappa": json_number(self.kappa),
            "kappa_linear": json_number(self.kappa_linear),
            "mean_abs_difference": json_number(self.mean_abs_difference),
            "kappa_quadratic": json_number(self.kappa_quadratic),
            "krippendorff_alpha": json_number(self.krippendorff_alpha),
        }


def json_number(x: float) -> float | None:
    """NaN as JSON null."""
    return None if x != x else float(x)


def label_agreement(
    a: pd.DataFrame, b: pd.DataFrame, name_a: str = "A", name_b: str = "B", labels: Sequence[int] | None = None
) -> LabelAgreement:
    """Confusion matrix, kappa (unweighted, linear, quadratic), Krippendorff's ordinal alpha and mean |label
    difference| of two judgment tables
    (columns query_id, doc_id, relevance) on the documents both judged, within the queries both judged.

    ``labels`` fixes the rows and columns (e.g. a judge's declared scale); default every label either side uses.
    """
    both = common_labels(a, b, name_a, name_b)
    qa, qb = set(a[QUERY_ID]), set(b[QUERY_ID])
    common_q = qa & qb
    x = both["label_a"].astype(int).tolist()
    y = both["label_b"].astype(int).tolist()
    if labels is None:
        labels = sorted({*x, *y})
    else:
        labels = sorted(int(v) for v in labels)
        outside = sorted({*x, *y} - set(labels))
        if outside:
            raise ConfigError(f"labels {outside} are outside the declared scale {labels}")
    conf = confusion_matrix(x, y, labels)
    judged_a = a[(a[RELEVANCE] >= 0) & a[QUERY_ID].isin(common_q)]
    judged_b = b[(b[RELEVANCE] >= 0) & b[QUERY_ID].isin(common_q)]
    return LabelAgreement(
        name_a=name_a,
        name_b=name_b,
        queries_common=len(common_q),
        queries_only_a=len(qa - qb),
        queries_only_b=len(qb - qa),
        documents_both=len(both),
        documents_only_a=len(judged_a) - len(both),
        documents_only_b=len(judged_b) - len(both),
        labels=tuple(int(v) for v in labels),
        confusion=conf,
        kappa=kappa_from_confusion(conf, labels),
        kappa_linear=kappa_from_confusion(conf, labels, "linear"),
        mean_abs_difference=float(np.mean(np.abs(np.subtract(x, y)))) if x else math.nan,
        kappa_quadratic=kappa_from_confusion(conf, labels, "quadratic"),
        krippendorff_alpha=krippendorff_alpha(pair_counts(x, y, labels), labels) if x else math.nan,
    )


def group_counts(groups: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, tuple[int, ...], int]:
    """Items x labels counts over the documents every group judged (label >= 0), the labels, and N."""
    names = list(groups)
    merged = None
    for i, name in enumerate(names):
        f = groups[name]
        f = f.loc[f[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]].rename(columns={RELEVANCE: f"g{i}"})
        merged = f if merged is None else merged.merge(f, on=[QUERY_ID, DOC_ID])
    assert merged is not None
    values = merged[[f"g{i}" for i in range(len(names))]].to_numpy(dtype=np.int64)
    labels = tuple(sorted({int(v) for v in values.ravel()}))
    index = {v: j for j, v in enumerate(labels)}
    counts = np.zeros((len(values), len(labels)), dtype=np.int64)
    for i, row in enumerate(values):
        for v in row:
            counts[i, index[int(v)]] += 1
    return counts, labels, len(values)


def pairable_counts(groups: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, tuple[int, ...], int]:
    """Items x labels counts over the documents at least two groups judged (label >= 0; the others may lack
    them: Krippendorff's alpha allows missing labels), the labels, and the number of such documents."""
    frames = [f.loc[f[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]] for f in groups.values()]
    both = pd.concat(frames, ignore_index=True)
    labels = tuple(sorted(int(v) for v in both[RELEVANCE].unique()))
    counts = pd.crosstab([both[QUERY_ID], both[DOC_ID]], both[RELEVANCE].astype(int)).reindex(
        columns=list(labels), fill_value=0
    )
    table = counts.to_numpy(dtype=np.int64)
    table = table[table.sum(axis=1) >= 2]
    return table, labels, len(table)


# ---------------------------------------------------------- system rankings
def ranking(means: Mapping[str, float]) -> list[str]:
    """Systems by mean descending, ties by name ascending."""
    return sorted(means, key=lambda r: (-means[r], r))


def kendall_tau(reference: Mapping[str, float], other: Mapping[str, float]) -> float:
    """Kendall's tau-b of two systems -> score maps over the same systems (scipy)."""
    from scipy.stats import kendalltau

    systems = sorted(reference)
    if len(systems) < 2:
        return math.nan
    res = kendalltau([reference[s] for s in systems], [other[s] for s in systems], variant="b")
    return float(res.statistic)


def tau_ap(reference: Mapping[str, float], other: Mapping[str, float]) -> float:
    """Yilmaz et al.'s AP rank correlation of ``other``'s ranking against ``reference``'s (module docstring)."""
    order = ranking(other)
    n = len(order)
    if n < 2:
        return math.nan
    total = 0.0
    for i in range(1, n):
        here = reference[order[i]]
        correct = sum(1.0 if reference[s] > here else 0.5 if reference[s] == here else 0.0 for s in order[:i])
        total += correct / i
    return 2.0 / (n - 1) * total - 1.0


@dataclass(frozen=True)
class PairTest:
    """One pair of systems under one set of judgments: mean difference (second minus first) and p-values."""

    delta: float
    p: float
    p_adjusted: float
    p_adjusted_se: float = 0.0  # Monte-Carlo standard error of p_adjusted (significance.mc_se, scaled)

    def could_flip(self, alpha: float) -> bool:
        """Whether p_adjusted lies within ``significance.MC_FLIP_SE`` Monte-Carlo errors of ``alpha``."""
        from toolkit.stats.significance import could_flip

        return could_flip(self.p_adjusted, self.p_adjusted_se, alpha)

    def verdict(self, alpha: float) -> str:
        if self.p_adjusted >= alpha or self.delta == 0:
            return "n.s."
        return "better" if self.delta > 0 else "worse"


def pair_tests(
    per_query: pd.DataFrame,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    correction: str = "holm",
    runs: Sequence[str] | None = None,
) -> dict[tuple[str, str], PairTest]:
    """Every pair (r1, r2), r1 before r2 in ``runs`` (default: the order the runs first appear), of a table with
    columns run, query_id, value: the randomization test of r2 - r1 on their shared queries, corrected over all
    pairs."""
    runs = list(dict.fromkeys(per_query["run"].tolist())) if runs is None else list(runs)
    wide = per_query.pivot(index="query_id", columns="run", values="value")
    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations(runs, 2))
    raw = []
    for r1, r2 in pairs:
        pair = wide[[r1, r2]].dropna()
        a, b = pair[r1].to_numpy(), pair[r2].to_numpy()
        p, exact = permutation_test(a, b, permutations=permutations, rng=rng)
        raw.append((float((b - a).mean()) if len(a) else 0.0, p, mc_se(p, permutations, exact)))
    adjusted = adjust([p for _, p, _ in raw], correction)
    return {
        pair: PairTest(d, p, float(pa), scaled_se(p, float(pa), se))
        for pair, (d, p, se), pa in zip(pairs, raw, adjusted)
    }


@dataclass(frozen=True)
class RankingAgreement:
    """The ranking of the same systems under two sets of judgments."""

    measure: str
    means_a: dict[str, float]
    means_b: dict[str, float]
    kendall_tau: float
    tau_ap: float
    flipped_pairs: tuple[dict, ...]
    pairs_tested: int
    significant_a: int
    significant_b: int
    alpha: float
    test: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "measure": self.measure,
            "ranking_a": ranking(self.means_a),
            "ranking_b": ranking(self.means_b),
            "means_a": self.means_a,
            "means_b": self.means_b,
            "kendall_tau": json_number(self.kendall_tau),
            "tau_ap": json_number(self.tau_ap),
            "pairs_tested": self.pairs_tested,
            "significant_a": self.significant_a,
            "significant_b": self.significant_b,
            "flipped_pairs": list(self.flipped_pairs),
            "test": self.test,
        }


def ranking_agreement(
    per_query_a: pd.DataFrame,
    per_query_b: pd.DataFrame,
    measure: str,
    *,
    alpha: float = ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    correction: str = "holm",
) -> RankingAgreement:
    """Rankings of the systems of two tidy tables (run, query_id, value; the same runs, each table under one set
    of judgments), their Kendall tau and tau_ap (A the reference), and the significant pairs that flip."""
    check_level(alpha)
    runs = list(dict.fromkeys(per_query_a["run"].tolist()))
    if set(runs) != set(per_query_b["run"]):
        raise ConfigError("the two tables must hold the same runs")
    if len(runs) < 2:
        raise ConfigError("ranking systems needs at least two runs")
    means_a = {r: float(v) for r, v in per_query_a.groupby("run", sort=False)["value"].mean().items()}
    means_b = {r: float(v) for r, v in per_query_b.groupby("run", sort=False)["value"].mean().items()}
    tests_a = pair_tests(per_query_a, permutations, seed, correction, runs)
    tests_b = pair_tests(per_query_b, permutations, seed, correction, runs)
    flipped = []
    for (r1, r2), ta in tests_a.items():
        tb = tests_b[(r1, r2)]
        va, vb = ta.verdict(alpha), tb.verdict(alpha)
        if va == vb:
            continue
        kind = "reversed" if "n.s." not in (va, vb) else ("lost" if vb == "n.s." else "gained")
        flipped.append(
            {
                "run_1": r1,
                "run_2": r2,
                "kind": kind,
                "under_a": va,
                "under_b": vb,
                "delta_a": ta.delta,
                "delta_b": tb.delta,
                "p_adjusted_a": ta.p_adjusted,
                "p_adjusted_b": tb.p_adjusted,
                "p_adjusted_se_a": ta.p_adjusted_se,
                "p_adjusted_se_b": tb.p_adjusted_se,
                # either side within MC_FLIP_SE Monte-Carlo errors of alpha: another seed could undo the flip
                "monte_carlo_could_flip": ta.could_flip(alpha) or tb.could_flip(alpha),
            }
        )
    return RankingAgreement(
        measure=measure,
        means_a=means_a,
        means_b=means_b,
        kendall_tau=kendall_tau(means_a, means_b),
        tau_ap=tau_ap(means_a, means_b),
        flipped_pairs=tuple(flipped),
        pairs_tested=len(tests_a),
        significant_a=sum(t.verdict(alpha) != "n.s." for t in tests_a.values()),
        significant_b=sum(t.verdict(alpha) != "n.s." for t in tests_b.values()),
        alpha=alpha,
        test={
            "test": "paired randomization (sign flip) of run_2 - run_1",
            "family": "all pairs of runs",
            "correction": correction,
            "permutations": permutations,
            "seed": seed,
            "alpha": alpha,
            "monte_carlo_se": "p_adjusted_se = sqrt(p (1 - p) / permutations) (0 when exact), scaled as the "
            f"correction scales p; a flip with either p_adjusted within {MC_FLIP_SE:g} errors of alpha may not "
            "survive another seed (monte_carlo_could_flip)",
        },
    )
