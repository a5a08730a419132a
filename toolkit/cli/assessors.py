"""``twostage agreement``: how far two assessors agree, on the labels and on the ranking of systems."""

from __future__ import annotations

import click

from toolkit.cli.options import (
    api_options,
    evaluation_options,
    named_runs,
    pop_settings,
    settings_from,
    significance_options,
)
from toolkit.cli.terminal import echo, kind_of

AGREEMENT_FORMATS = ("qrels", "qrels_jg")


@click.command("agreement")
@click.option(
    "-R",
    "rel_format",
    type=click.Choice(AGREEMENT_FORMATS),
    default="qrels",
    show_default=True,
    help="qrels: the first two arguments are two qrels files (A, the reference, and B); qrels_jg: the first "
    "argument is one file whose iteration column names judgment groups (trec_eval -R qrels_jg), every group "
    "compared with every other.",
)
@click.option(
    "-m",
    "measure",
    default="ndcg_cut.10",
    show_default=True,
    metavar="MEASURE",
    help="With runs: the measure that ranks the systems (one value per query, e.g. ndcg_cut.10, map, P.10).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="With runs: the level at which a pair of systems counts as significantly different.",
)
@significance_options
@evaluation_options(exclude=("rel_map",))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json keys: documents_both, confusion, kappa, kappa_linear, kappa_quadratic, krippendorff_alpha (A vs "
    "B), and with runs kendall_tau, tau_ap, flipped_pairs; every pair under 'pairs'.",
)
@click.argument("files", nargs=-1, required=True, metavar="QRELS_A QRELS_B [RUN ...] | -R qrels_jg QRELS [RUN ...]")
def agreement_command(rel_format, measure, alpha, permutations, seed, correction, fmt, files, **options):
    """Agreement of two sets of relevance judgments over the same queries.

    On the documents both judged (label >= 0, same query): the confusion
    matrix (rows A, columns B), Cohen's kappa, its linearly weighted form,
    the mean absolute label difference, the quadratically weighted kappa and
    Krippendorff's alpha (ordinal); for more than two judgment groups also
    Fleiss' kappa and Krippendorff's alpha over every group. With RUNs: each run evaluated with -m under each set
    (on the queries all sets judged), the systems' ranking under each, Kendall's
    tau and tau_ap (A's ranking the reference, Yilmaz et al. 2008), and the
    pairs of systems whose significant difference flips (randomization test,
    --correction over all pairs, at --alpha).

    \b
    Examples:
      twostage agreement qrels.nist.txt qrels.umbrela.txt
      twostage agreement -m ndcg_cut.10 --format json qrels.nist.txt qrels.llm.txt runs/*.trec
      twostage agreement -R qrels_jg -m map qrels.123 results.test results.trunc
    """
    from toolkit.api.assessors import agreement
    from toolkit.data.adapters import run_label

    s = pop_settings(options)
    settings_from(s)  # a bad --gain or -l is a usage error, before any reading
    n_qrels = 1 if rel_format == "qrels_jg" else 2
    if len(files) < n_qrels:
        raise click.UsageError("give two qrels files (QRELS_A QRELS_B), or -R qrels_jg and one file")
    runs = list(files[n_qrels:])
    if len(runs) == 1:
        raise click.UsageError("ranking systems needs at least two runs (or none, for the labels only)")
    kwargs = api_options(s)
    data_dir = kwargs.pop("data_dir", None)
    dedupe = kwargs.pop("dedupe", "error")
    result = agreement(
        files[0],
        files[1] if n_qrels == 2 else None,
        named_runs(runs, bare_name=lambda p: run_label(p, 0)) if runs else None,
        measure,
        rel_format=rel_format,
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        correction=correction,
        dedupe=dedupe,
        data_dir=data_dir,
        **kwargs,
    )
    echo(
        result.to_json() if fmt == "json" else result.to_text(),
        nl=fmt == "json",
        kind=kind_of(fmt),
    )


COMMANDS = (agreement_command,)
