"""The assessor agreement of judgment sets already read: ``Agreement`` (the labels' agreement of every pair, Fleiss'
kappa and Krippendorff's alpha over more than two sets, the systems' ranking under each set) and ``agreement_of``.

The statistics are those of ``toolkit.quality.assessor_agreement`` (definitions and citations there);
``toolkit.api.assessors.agreement`` reads the judgments and hands the evaluation of the runs under a set of
judgments in as a function (``Evaluator``), as ``toolkit.judging.calibration`` does.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from toolkit.quality.assessor_agreement import LabelAgreement, RankingAgreement

#: ``evaluate(judgments, queries, runs, measure)``: the tidy table (run, query_id, value; ``attrs["measure"]`` the
#: measure's name) of every run of ``runs`` evaluated with ``measure`` under ``judgments`` restricted to ``queries``
Evaluator = Callable[[pd.DataFrame, set[str], Mapping[str, Any], str], pd.DataFrame]

__all__ = ["Agreement", "Evaluator", "agreement_of", "judgment_set"]


@dataclass(frozen=True)
class Agreement:
    """Assessor agreement: one ``LabelAgreement`` per pair of judgment sets (the first pair is A against B),
    Fleiss' kappa over every set when there are more than two, and, with runs, the ranking of the systems under
    each set compared with the first set's (A's) ranking.

    ``to_dict()`` is what ``twostage agreement --format json`` prints: the first pair's ``documents_both``,
    ``confusion``, ``kappa``, ``kappa_linear``, ``kappa_quadratic``, ``krippendorff_alpha`` (and, with runs, ``kendall_tau``, ``tau_ap``, ``flipped_pairs``)
    at the top level, every pair under ``pairs``.
    """

    names: tuple[str, ...]
    pairs: tuple[LabelAgreement, ...]
    rankings: tuple[RankingAgreement, ...] = ()
    fleiss_kappa: float | None = None
    documents_all: int | None = None
    sources: dict[str, dict] = field(default_factory=dict)
    krippendorff_alpha_all: float | None = None  # ordinal, over every set (more than two)
    documents_pairable: int | None = None  # the documents at least two sets judged

    @property
    def first(self) -> LabelAgreement:
        """A against B."""
        return self.pairs[0]

    @property
    def kappa(self) -> float:
        """Cohen's kappa of A against B."""
        return self.first.kappa

    @property
    def kappa_linear(self) -> float:
        """Linearly weighted kappa of A against B."""
        return self.first.kappa_linear

    @property
    def kappa_quadratic(self) -> float:
        """Quadratically weighted kappa of A against B."""
        return self.first.kappa_quadratic

    @property
    def krippendorff_alpha(self) -> float:
        """Krippendorff's alpha (ordinal) of A against B."""
        return self.first.krippendorff_alpha

    @property
    def confusion(self) -> pd.DataFrame:
        """A's labels (rows) against B's (columns) on the documents both judged."""
        labels = list(self.first.labels)
        return pd.DataFrame(
            self.first.confusion,
            index=pd.Index(labels, name=self.first.name_a),
            columns=pd.Index(labels, name=self.first.name_b),
        )

    def to_dict(self) -> dict:
        """The JSON document (NaN as null)."""
        from toolkit.quality.assessor_agreement import json_number

        out: dict[str, Any] = {"sets": list(self.names), "sources": self.sources}
        out.update(self.first.as_dict())
        if self.fleiss_kappa is not None:
            out["fleiss_kappa"] = json_number(self.fleiss_kappa)
            out["documents_all"] = self.documents_all
        if self.krippendorff_alpha_all is not None:
            out["krippendorff_alpha_all"] = json_number(self.krippendorff_alpha_all)
            out["documents_pairable"] = self.documents_pairable
        if self.rankings:
            first = self.rankings[0].as_dict()
            out.update({k: first[k] for k in ("kendall_tau", "tau_ap", "flipped_pairs")})
            out["ranking"] = first
        out["pairs"] = [p.as_dict() for p in self.pairs]
        if len(self.rankings) > 1:
            out["rankings"] = [
                {"a": self.names[0], "b": name} | r.as_dict() for name, r in zip(self.names[1:], self.rankings)
            ]
        return out

    def to_json(self) -> str:
        """What ``twostage agreement --format json`` prints."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_text(self) -> str:
        """The text ``twostage agreement`` prints."""
        lines = []
        for p in self.pairs:
            lines.append(f"# {p.name_a} vs {p.name_b}")
            lines.append(
                f"queries_common {p.queries_common} (only {p.name_a}: {p.queries_only_a}, only {p.name_b}: "
                f"{p.queries_only_b})"
            )
            lines.append(
                f"documents_both {p.documents_both} (only {p.name_a}: {p.documents_only_a}, only {p.name_b}: "
                f"{p.documents_only_b})"
            )
            width = max(6, *(len(str(v)) for v in p.labels))
            lines.append(f"confusion (rows {p.name_a}, columns {p.name_b})")
            lines.append(" " * width + "".join(f"{v:>{width + 2}}" for v in p.labels))
            for label, row in zip(p.labels, p.confusion):
                lines.append(f"{label:>{width}}" + "".join(f"{int(c):>{width + 2}}" for c in row))
            lines.append(f"kappa {_fmt(p.kappa)}")
            lines.append(f"kappa_linear {_fmt(p.kappa_linear)}")
            lines.append(f"mean_abs_difference {_fmt(p.mean_abs_difference)}")
            lines.append(f"kappa_quadratic {_fmt(p.kappa_quadratic)}")
            lines.append(f"krippendorff_alpha {_fmt(p.krippendorff_alpha)} (ordinal)")
        if self.fleiss_kappa is not None:
            lines.append(f"# all {len(self.names)} sets: {', '.join(self.names)}")
            lines.append(f"documents_all {self.documents_all}")
            lines.append(f"fleiss_kappa {_fmt(self.fleiss_kappa)}")
        if self.krippendorff_alpha_all is not None:
            lines.append(f"documents_pairable {self.documents_pairable} (judged by at least two sets)")
            lines.append(f"krippendorff_alpha_all {_fmt(self.krippendorff_alpha_all)} (ordinal)")
        for name, r in zip(self.names[1:], self.rankings):
            lines.append(f"# systems by {r.measure}: {self.names[0]} vs {name}")
            order_a = sorted(r.means_a, key=lambda s: (-r.means_a[s], s))
            order_b = sorted(r.means_b, key=lambda s: (-r.means_b[s], s))
            for s in order_a:
                lines.append(
                    f"{s}\t{r.means_a[s]:.4f} (rank {order_a.index(s) + 1})\t{r.means_b[s]:.4f} "
                    f"(rank {order_b.index(s) + 1})"
                )
            lines.append(f"kendall_tau {_fmt(r.kendall_tau)}")
            lines.append(f"tau_ap {_fmt(r.tau_ap)}")
            from toolkit.stats.significance import MC_FLIP_SE

            t = r.test
            lines.append(
                f"significant pairs at {t['alpha']} ({t['correction']} over {r.pairs_tested} pairs, randomization "
                f"test, {t['permutations']} permutations, seed {t['seed']}): {r.significant_a} under "
                f"{self.names[0]}, {r.significant_b} under {name}; flipped {len(r.flipped_pairs)}"
            )
            unsure = sum(bool(f.get("monte_carlo_could_flip")) for f in r.flipped_pairs)
            if unsure:
                lines.append(
                    f"of the flipped, {unsure} have a p_adj within {MC_FLIP_SE:g} Monte-Carlo standard errors "
                    f"(sqrt(p (1 - p) / {t['permutations']})) of {t['alpha']}: another seed could undo them; "
                    "use more permutations"
                )
            for f in r.flipped_pairs:
                lines.append(
                    f"flipped {f['run_2']} vs {f['run_1']}: {f['kind']} ({f['under_a']} {f['delta_a']:+.4f} "
                    f"p_adj {f['p_adjusted_a']:.4g} -> {f['under_b']} {f['delta_b']:+.4f} p_adj {f['p_adjusted_b']:.4g})"
                    + (" (within Monte-Carlo error of alpha)" if f.get("monte_carlo_could_flip") else "")
                )
        return "\n".join(lines) + "\n"


def _fmt(x: float) -> str:
    return "nan" if x != x else f"{x:.4f}"


def _fmt(x: float) -> str:
    return "nan" if x != x else f"{x:.4f}"


def judgment_set(obj: Any, dedupe: str = "error", data_dir: Any = None) -> tuple[pd.DataFrame, dict]:
    """One set of judgments (a path, a collection name, a DataFrame, a dict, ``Qrels``: ``data.adapters.as_qrels``)
    as ``agreement_of`` takes it (query_id, doc_id, relevance), and where it came from (``path``, ``sha256``)."""
    from toolkit.data.adapters import as_qrels

    q = as_qrels(obj, dedupe=dedupe, data_dir=data_dir)
    return q.frame, {"path": q.path, "sha256": q.sha256}


def agreement_of(
    sets: Mapping[str, pd.DataFrame],
    sources: Mapping[str, dict] | None = None,
    *,
    labels: Iterable[int] | None = None,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    measure: str = "ndcg_cut.10",
    evaluate: Evaluator | None = None,
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 42,
    correction: str = "holm",
) -> Agreement:
    """The agreement of ``sets`` ({name: judgments (query_id, doc_id, relevance)}, the first the reference A).

    Every pair's label agreement over the scale ``labels`` (default: every label used); with more than two sets,
    Fleiss' kappa over the documents every set judged and Krippendorff's alpha over those at least two judged.
    With ``runs`` (``{name: run}`` or a list, named by ``data.adapters.name_runs``; two or more), each run is
    evaluated with ``evaluate`` under each set restricted to the queries every set judged, and the systems' ranking under each further set is compared with A's
    (``assessor_agreement.ranking_agreement``: Kendall's tau, tau_ap, the significant pairs that flip at ``alpha``,
    ``correction`` over all pairs, ``permutations`` sign flips seeded by ``seed``).

    Raises:
        ConfigError: fewer than two runs, or runs without ``evaluate``.
        NoCommonQueriesError: runs to rank, and judgment sets that share no query.
    """
    from toolkit.data.adapters import name_runs
    from toolkit.errors import ConfigError, NoCommonQueriesError
    from toolkit.quality.assessor_agreement import (
        fleiss_kappa,
        group_counts,
        krippendorff_alpha,
        label_agreement,
        pairable_counts,
        ranking_agreement,
    )

    order = list(sets)
    scale = None if labels is None else sorted(int(v) for v in labels)
    pairs = tuple(label_agreement(sets[x], sets[y], x, y, scale) for x, y in itertools.combinations(order, 2))
    fleiss = documents_all = alpha_all = pairable = None
    if len(order) > 2:
        counts, _, documents_all = group_counts(sets)
        fleiss = fleiss_kappa(counts)
        table, scale_all, pairable = pairable_counts(sets)
        alpha_all = krippendorff_alpha(table, scale_all)
    named = name_runs(runs) if runs else {}
    rankings: tuple[RankingAgreement, ...] = ()
    if named:
        if len(named) < 2:
            raise ConfigError("ranking systems needs at least two runs")
        if evaluate is None:
            raise ConfigError("ranking systems needs a function that evaluates them (evaluate=)")
        common = set.intersection(*(set(f["query_id"]) for f in sets.values()))
        if not common:
            raise NoCommonQueriesError(f"the judgment sets {', '.join(order)} share no query")
        tables = {name: evaluate(sets[name], common, named, measure) for name in order}
        rankings = tuple(
            ranking_agreement(
                tables[order[0]],
                tables[name],
                tables[order[0]].attrs["measure"],
                alpha=alpha,
                permutations=permutations,
                seed=seed,
                correction=correction,
            )
            for name in order[1:]
        )
    return Agreement(
        names=tuple(order),
        pairs=pairs,
        rankings=rankings,
        fleiss_kappa=fleiss,
        documents_all=documents_all,
        sources=dict(sources or {}),
        krippendorff_alpha_all=alpha_all,
        documents_pairable=pairable,
    )
