"""``agreement``: how far two assessors (two qrels files, or the judgment groups of one ``-R qrels_jg`` file)
agree on the labels, and whether the ranking of systems and its significant differences survive the change.

The agreement is computed by ``toolkit.quality.agreement`` (its statistics those of
``toolkit.quality.assessor_agreement``, definitions and citations there); this module reads the judgments and
evaluates the runs under each set (``per_query``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence  # noqa: F401  (Iterable: the keyword ``labels``'s annotation)
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.api.options import AgreementOptions, EvaluationOptions
from toolkit.options import verb
from toolkit.quality.agreement import Agreement

__all__ = ["Agreement", "agreement", "judgment_sets", "per_query"]


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
    from toolkit.quality.agreement import judgment_set

    fa, sa = judgment_set(qrels_a, dedupe, data_dir)
    fb, sb = judgment_set(qrels_b, dedupe, data_dir)
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
    from toolkit.quality.agreement import agreement_of

    o = options
    sets, sources = judgment_sets(
        qrels_a, qrels_b, rel_format=o.rel_format, names=o.names, dedupe=o.dedupe, data_dir=o.data_dir
    )

    def evaluate(judgments: pd.DataFrame, queries: set[str], named: Mapping[str, Any], measure: str) -> pd.DataFrame:
        return per_query(judgments, queries, named, measure, options=o.evaluation())  # built where runs are ranked

    return agreement_of(
        sets,
        sources,
        labels=o.labels,
        runs=runs,
        measure=measure,
        evaluate=evaluate,
        alpha=o.alpha,
        permutations=o.permutations,
        seed=o.seed,
        correction=o.correction,
    )


def per_query(
    judgments: pd.DataFrame, queries: set[str], runs: Mapping[str, Any], measure: str, *, options: EvaluationOptions
) -> pd.DataFrame:
    """run, query_id, value of every run under ``judgments`` restricted to ``queries``, for one measure (with
    ``options`` bound, the ``quality.agreement.Evaluator`` of ``agreement`` and of a judge's calibration)."""
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
