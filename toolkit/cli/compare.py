"""``twostage compare``: paired significance tests between runs."""

from __future__ import annotations

from types import MappingProxyType

import click

from toolkit.api.options import CompareOptions
from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import (
    FAMILY_FLAG,
    HOLES_OVER_FLAG,
    RUNS_MEASURES_OPTION,
    RUNS_QRELS_OPTION,
    SIGNIFICANCE,
    evaluation_flags,
    interval_flags,
    named_runs,
    qrels_policy_options,
    writable_folder,
)
from toolkit.cli.terminal import echo, kind_of
from toolkit.stats.significance import TESTS

#: ``twostage compare``'s options, in --help's order: the flags of ``CompareOptions`` and the command's own.
COMPARE: tuple[Row, ...] = (
    RUNS_QRELS_OPTION,
    RUNS_MEASURES_OPTION,
    click.option(
        "--baseline",
        "baselines",
        multiple=True,
        metavar="NAME",
        help="Baseline run (its NAME, or its path when unnamed); repeatable: every run is tested against every "
        "baseline, one correction per measure over all those tests [default: the first RUN].",
    ),
    flag(
        "test",
        "--test",
        type=click.Choice(list(TESTS)),
        default="randomization",
        show_default=True,
        help="The test whose p-values are corrected and marked (all are reported): randomization (sign flips), "
        "t (paired t-test), wilcoxon (signed-rank, scipy's defaults), sign (exact binomial over the non-tied "
        "queries); tukey (randomised Tukey HSD, family-wise already) needs --family all-pairs.",
    ),
    *SIGNIFICANCE,
    FAMILY_FLAG,
    *interval_flags(),
    flag(
        "holes",
        "--holes",
        is_flag=True,
        help="Bound each run's ndcg_cut.k, P.k and recall.k over every labelling of the unjudged documents in its top "
        "k (the ideal ranking from the judged documents plus those; --holes-over retrieved: over every unjudged "
        "document it retrieved); each test says 'bounds over the top-k holes overlap' (or 'the retrieved holes') "
        "where the two runs' intervals of possible values overlap (see docs/statistics.md).",
    ),
    HOLES_OVER_FLAG,
    flag(
        "force", "--force", is_flag=True, help="Compare even when provenance differs (pairs only the shared queries)."
    ),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json", "latex", "markdown"]),
        default="text",
        show_default=True,
        help="text/json: every test; latex/markdown: the systems x measures table papers print (significance "
        "marks stated under it, best value in bold).",
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        callback=writable_folder,
        help="Also write compare.json and compare.html (with per-query difference plots) to this folder.",
    ),
    *evaluation_flags(),
    qrels_policy_options,
)


#: The keywords of ``CompareOptions`` that have no flag, and why.
API_ONLY = MappingProxyType(
    {
        "labels": "display names of measures: the command prints the names as typed",
        "allow_no_common": "a run sharing no query with the qrels cannot be compared: the command refuses it",
        "rel_format": "the command reads qrels (or, for diversity measures, diversity qrels) only",
        "zscores": "the command compares raw values",
    }
)


@click.command("compare")
@options_of(CompareOptions, COMPARE)
@click.argument("runs", nargs=-1, required=True)
def compare(options: CompareOptions, qrels, measure_texts, baselines, fmt, out, runs, judge_qrels, qrels_policy):
    """Compare RUNS (each [NAME=]RUN; the first is the baseline) with paired significance tests.

    Per measure: each run's mean, its difference to the baseline, the paired
    t-test p-value, the paired randomization test p-value (sign flips of the
    per-query differences; --permutations, --seed), the --test's p-value
    corrected for multiple comparisons (--correction, over the family:
    --family baseline, the runs compared with the baselines, or all-pairs),
    the paired bootstrap interval of the difference (--ci, --bootstrap,
    --ci-method), the effect size d_z, and per-query wins / ties / losses.
    Runs identical to another are left out of the family and named. Refuses
    runs whose evaluated query sets or settings differ, naming the difference,
    unless --force.

    A RUN ending in .json is a saved evaluation (`twostage eval -q --format
    json --out FILE`): its per-query values and provenance are used as they
    are, so results computed with other gains, cutoffs or query sets are
    caught by the provenance check.

    \b
    Examples:
      twostage compare --qrels dl19-passage -c bm25.txt rerank.txt -m ndcg_cut.10
      twostage compare --qrels dl19-passage -c -l 2 bm25=bm25.txt splade=splade.txt rr=rr.txt \\
          --baseline bm25 --baseline splade -m nDCG@10 -m R@100 --format latex
      twostage compare --qrels q.txt A B C -m ndcg_cut.10 -m recall.100 --format json --out reports/abc
      twostage compare --qrels q.txt A B C --family all-pairs --test tukey --ci-method bca
      twostage compare --qrels q.txt A B -m ndcg_cut.10 --holes
    """
    from toolkit.api.comparison import compare as compare_systems

    if len(runs) < 2:
        raise click.UsageError("give at least two runs: the baseline first, then the systems to compare with it")
    named = named_runs(runs, bare_name=str)  # a bare RUN is named by the path as given
    unknown = [b for b in baselines if b not in named]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not one of the RUNS", param_hint="'--baseline'")
    if not qrels and any(not p.endswith(".json") for p in named.values()):
        first = next(p for p in named.values() if not p.endswith(".json"))
        raise click.UsageError(f"--qrels is needed to evaluate the run {first} (only saved .json results need none)")
    if judge_qrels:
        from toolkit.cli.judge import qrels_source

        qrels = qrels_source(qrels, judge_qrels, qrels_policy, options.data_dir, options.dedupe, options.relevance_map)
    result = compare_systems(
        qrels, named, baseline=list(baselines) or None, measures=list(measure_texts) or None, options=options
    )
    if out:
        result.write(out)
    rendered = {"json": result.to_json, "latex": result.to_latex, "markdown": result.to_markdown}
    echo(rendered.get(fmt, result.to_text)(), nl=False, kind=kind_of(fmt))


COMMANDS = (compare,)
