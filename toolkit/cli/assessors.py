"""``twostage agreement``: how far two assessors agree, on the labels and on the ranking of systems."""

from __future__ import annotations

from types import MappingProxyType

import click

from toolkit.api.options import AgreementOptions
from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import SIGNIFICANCE, evaluation_flags, named_runs
from toolkit.cli.terminal import echo, kind_of

AGREEMENT_FORMATS = ("qrels", "qrels_jg")


#: ``twostage agreement``'s options, in --help's order: the flags of ``AgreementOptions`` and the command's own.
AGREEMENT: tuple[Row, ...] = (
    flag(
        "rel_format",
        "-R",
        "rel_format",
        type=click.Choice(AGREEMENT_FORMATS),
        default="qrels",
        show_default=True,
        help="qrels: the first two arguments are two qrels files (A, the reference, and B); qrels_jg: the first "
        "argument is one file whose iteration column names judgment groups (trec_eval -R qrels_jg), every group "
        "compared with every other.",
    ),
    click.option(
        "-m",
        "measure",
        default="ndcg_cut.10",
        show_default=True,
        metavar="MEASURE",
        help="With runs: the measure that ranks the systems (one value per query, e.g. ndcg_cut.10, map, P.10).",
    ),
    flag(
        "alpha",
        "--alpha",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.05,
        show_default=True,
        help="With runs: the level at which a pair of systems counts as significantly different.",
    ),
    *SIGNIFICANCE,
    *evaluation_flags(exclude=("rel_map",)),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json keys: documents_both, confusion, kappa, kappa_linear, kappa_quadratic, krippendorff_alpha (A vs "
        "B), and with runs kendall_tau, tau_ap, flipped_pairs; every pair under 'pairs'.",
    ),
)

#: The keywords of ``AgreementOptions`` that have no flag, and why.
API_ONLY = MappingProxyType(
    {
        "names": "the sets are named by their files (or jg=NAME)",
        "labels": "the confusion matrix shows every label used",
        "relevance_map": "the judgments are compared as they are labelled",
        "zscores": "the command ranks the systems by raw values",
        "holes": "hole bounds are not part of the agreement",
        "ci": "intervals of each run's means are not part of the agreement",
        "bootstrap": "intervals of each run's means are not part of the agreement",
        "ci_method": "intervals of each run's means are not part of the agreement",
        "allow_no_common": "a run sharing no query with the judgments cannot be ranked: the command refuses it",
    }
)


@click.command("agreement")
@options_of(AgreementOptions, AGREEMENT)
@click.argument("files", nargs=-1, required=True, metavar="QRELS_A QRELS_B [RUN ...] | -R qrels_jg QRELS [RUN ...]")
def agreement_command(options: AgreementOptions, measure, fmt, files):
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

    n_qrels = 1 if options.rel_format == "qrels_jg" else 2
    if len(files) < n_qrels:
        raise click.UsageError("give two qrels files (QRELS_A QRELS_B), or -R qrels_jg and one file")
    runs = list(files[n_qrels:])
    if len(runs) == 1:
        raise click.UsageError("ranking systems needs at least two runs (or none, for the labels only)")
    result = agreement(
        files[0],
        files[1] if n_qrels == 2 else None,
        named_runs(runs, bare_name=lambda p: run_label(p, 0)) if runs else None,
        measure,
        options=options,
    )
    echo(
        result.to_json() if fmt == "json" else result.to_text(),
        nl=fmt == "json",
        kind=kind_of(fmt),
    )


COMMANDS = (agreement_command,)
