"""``agreement``: how far two assessors (two qrels files, or the judgment groups of one ``-R qrels_jg`` file)
agree on the labels, and whether the ranking of systems and its significant differences survive the change.

The statistics are those of ``toolkit.quality.assessor_agreement`` (definitions and citations there); this module
reads the judgments, evaluates the runs under each set and assembles the result.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Mapping, Sequence  # noqa: F401  (Iterable: the keyword ``labels``'s annotation)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.api.options import AgreementOptions, EvaluationOptions
from toolkit.options import verb
from toolkit.quality.assessor_agreement import LabelAgreement, RankingAgreement


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


def _as_frame(obj: Any, dedupe: str, data_dir: Any) -> tuple[pd.DataFrame, dict]:
    from toolkit.data.adapters import as_qrels

    q = as_qrels(obj, dedupe=dedupe, data_dir=data_dir)
    return q.frame, {"path": q.path, "sha256": q.sha256}


def _named_runs(runs: Mapping[str, Any] | Sequence[Any] | None) -> dict[str, Any]:
    if not runs:
        return {}
    from toolkit.data.adapters import name_runs

    return name_runs(runs)


def judgment_sets(
    qrels_a: Any,
    qrels_b: Any = None,
    *,
    rel_format: str = "qrels",
    names: Sequence[str] | None = None,
    dedupe: str = "error",
    data_dir: str | os.PathLike | None = None,
) -> tuple[dict[str, pd.DataFrame], dict[str, dict]]:
    """{name: judgments (query_id, doc_id, relevance)} from two qrels, or from the groups of a ``qrels_jg`` file
    (named ``jg=NAME``, sorted), and where each came from."""
    from toolkit.data.records import QUERY_ID
    from toolkit.errors import ConfigError

    if rel_format == "qrels_jg":
        from toolkit.data.trec_io import read_qrels_jg

        if qrels_b is not None:
            raise ConfigError("rel_format='qrels_jg' reads the groups of one file: give qrels_a only")
        if not isinstance(qrels_a, (str, os.PathLike)):
            raise ConfigError("rel_format='qrels_jg' reads a file; give its path")
        jg = read_qrels_jg(qrels_a)
        groups = sorted(jg.frame["jg"].unique().tolist())
        if len(groups) < 2:
            raise ConfigError(f"{qrels_a}: one judgment group ({groups[0]!r}); agreement needs two or more")
        sets = {
            f"jg={g}": jg.frame.loc[jg.frame["jg"] == g, [QUERY_ID, "doc_id", "relevance"]].reset_index(drop=True)
            for g in groups
        }
        return sets, {name: {"path": jg.path, "sha256": jg.sha256, "group": name[3:]} for name in sets}
    if rel_format != "qrels":
        raise ConfigError(f"rel_format must be qrels or qrels_jg, not {rel_format!r}")
    if qrels_b is None:
        raise ConfigError("give two qrels (qrels_a and qrels_b), or one qrels_jg file with rel_format='qrels_jg'")
    fa, sa = _as_frame(qrels_a, dedupe, data_dir)
    fb, sb = _as_frame(qrels_b, dedupe, data_dir)
    if names is None:
        na = Path(str(qrels_a)).name if isinstance(qrels_a, (str, os.PathLike)) else "A"
        nb = Path(str(qrels_b)).name if isinstance(qrels_b, (str, os.PathLike)) else "B"
        names = (na, nb) if na != nb else (f"A:{na}", f"B:{nb}")
    if len(names) != 2 or names[0] == names[1]:
        raise ConfigError(f"names must be two different names, not {list(names)}")
    return {names[0]: fa, names[1]: fb}, {names[0]: sa, names[1]: sb}


@verb(AgreementOptions, inputs=("qrels_a", "qrels_b", "runs", "measure"))
def agreement(
    qrels_a: Any,
    qrels_b: Any = None,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    measure: str = "ndcg_cut.10",
    *,
    options: AgreementOptions,
) -> Agreement:
    """Agreement of two sets of judgments over the same queries (or of the groups of one ``qrels_jg`` file).

    On the documents both judged (label >= 0, same query): the confusion matrix, Cohen's kappa unweighted,
    linearly and quadratically weighted, Krippendorff's alpha (ordinal), the mean absolute label difference; with
    more than two groups, also Fleiss' kappa over the documents every group judged and Krippendorff's alpha over
    the documents at least two groups judged (``krippendorff_alpha_all``). With ``runs``, each run is evaluated with ``measure`` under each set,
    restricted to the queries every set judged; the systems' ranking under B (and each further set) is
    compared with A's: Kendall's tau, tau_ap (A the reference), and the pairs of systems whose significant
    difference (paired randomization test, ``correction`` over all pairs, at ``alpha``) flips.

    Every keyword is a field of ``AgreementOptions`` (``toolkit.api.options``); ``options=`` takes one whole.

    Args:
        qrels_a: the reference judgments (a path, a collection name, a DataFrame, a dict, ``Qrels``), or the
            ``qrels_jg`` file with ``rel_format='qrels_jg'``.
        qrels_b: the other judgments (None with ``qrels_jg``).
        runs: ``{name: run}`` or a list of runs (named by file name or tag), as ``compare`` takes them.
        measure: one measure (trec_eval or ir_measures syntax) that ranks the systems.

    Raises:
        NoCommonQueriesError: two sets of judgments that share no query.
    """
    from toolkit.errors import ConfigError, NoCommonQueriesError
    from toolkit.quality.assessor_agreement import (
        fleiss_kappa,
        group_counts,
        krippendorff_alpha,
        label_agreement,
        pairable_counts,
        ranking_agreement,
    )

    o = options
    sets, sources = judgment_sets(
        qrels_a, qrels_b, rel_format=o.rel_format, names=o.names, dedupe=o.dedupe, data_dir=o.data_dir
    )
    order = list(sets)
    scale = None if o.labels is None else sorted(int(v) for v in o.labels)
    pairs = tuple(label_agreement(sets[x], sets[y], x, y, scale) for x, y in itertools.combinations(order, 2))
    fleiss = documents_all = alpha_all = pairable = None
    if len(order) > 2:
        counts, _, documents_all = group_counts(sets)
        fleiss = fleiss_kappa(counts)
        table, scale_all, pairable = pairable_counts(sets)
        alpha_all = krippendorff_alpha(table, scale_all)
    named = _named_runs(runs)
    rankings: tuple[RankingAgreement, ...] = ()
    if named:
        if len(named) < 2:
            raise ConfigError("ranking systems needs at least two runs")
        common = set.intersection(*(set(f["query_id"]) for f in sets.values()))
        if not common:
            raise NoCommonQueriesError(f"the judgment sets {', '.join(order)} share no query")
        each = o.evaluation()
        tables = {name: _per_query(sets[name], common, named, measure, each) for name in order}
        rankings = tuple(
            ranking_agreement(
                tables[order[0]],
                tables[name],
                tables[order[0]].attrs["measure"],
                alpha=o.alpha,
                permutations=o.permutations,
                seed=o.seed,
                correction=o.correction,
            )
            for name in order[1:]
        )
    return Agreement(
        names=tuple(order),
        pairs=pairs,
        rankings=rankings,
        fleiss_kappa=fleiss,
        documents_all=documents_all,
        sources=sources,
        krippendorff_alpha_all=alpha_all,
        documents_pairable=pairable,
    )


def _per_query(
    judgments: pd.DataFrame, queries: set[str], runs: dict[str, Any], measure: str, options: EvaluationOptions
) -> pd.DataFrame:
    """run, query_id, value of every run under ``judgments`` restricted to ``queries``, for one measure."""
    from toolkit.api.evaluation import evaluate_many
    from toolkit.data.records import Qrels
    from toolkit.errors import ConfigError

    qrels = Qrels(frame=judgments[judgments["query_id"].isin(queries)].reset_index(drop=True), path="<agreement>")
    evaluations = evaluate_many(qrels, runs, [measure], options=options)
    frames = []
    for name, ev in evaluations.items():
        f = ev.to_ir_measures()
        measures = list(dict.fromkeys(f["measure"].tolist()))
        if len(measures) != 1:
            raise ConfigError(
                f"measure {measure!r} gives {len(measures)} values per query ({', '.join(measures)}); name one"
            )
        f = f[["query_id", "value"]].copy()
        f.insert(0, "run", name)
        f.attrs["measure"] = measures[0]
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    out.attrs["measure"] = frames[0].attrs["measure"]
    return out
