"""``twostage risk``: URisk and TRisk of runs against a baseline (risk-sensitive evaluation)."""

from __future__ import annotations

from types import MappingProxyType

import click

from toolkit.api.options import RiskOptions
from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import RUNS_MEASURES_OPTION, RUNS_QRELS_OPTION, evaluation_flags, named_runs
from toolkit.cli.terminal import echo, kind_of
from toolkit.stats.urisk import DEFAULT_ALPHA

RISK_FORMATS = ("text", "json", "csv")


#: ``twostage risk``'s options, in --help's order: the flags of ``RiskOptions`` and the command's own.
RISK: tuple[Row, ...] = (
    RUNS_QRELS_OPTION,
    RUNS_MEASURES_OPTION,
    click.option(
        "--baseline", default=None, metavar="NAME", help="The baseline run (its NAME) [default: the first RUN]."
    ),
    flag(
        "alpha",
        "--alpha",
        "alphas",
        type=float,
        multiple=True,
        metavar="ALPHA",
        help="Extra weight of a loss against the baseline (>= 0; 0: URisk is the mean difference, 1: a loss counts "
        "twice); repeatable, e.g. --alpha 1 --alpha 5 --alpha 10 [default: 1].",
        # none given: the library's default; each weight is checked by RiskOptions (stats.urisk.check_alpha)
        convert=lambda values: tuple(values) or DEFAULT_ALPHA,
    ),
    flag(
        "force", "--force", is_flag=True, help="Compare even when provenance differs (pairs only the shared queries)."
    ),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(RISK_FORMATS),
        default="text",
        show_default=True,
        help="text: definitions, then one line per measure, alpha and run; json: the document (results: one object "
        "per line); csv: one row per line.",
    ),
    *evaluation_flags(),
)

#: The keywords of ``RiskOptions`` that have no flag, and why.
API_ONLY = MappingProxyType(
    {
        "labels": "display names of measures: the command prints the names as typed",
        "name": "each run is named by its key (NAME=RUN): not a keyword of risk() either",
        "rel_format": "the command reads qrels only",
        "zscores": "the command compares raw values",
        "holes": "hole bounds are not part of the risk table",
        "ci": "intervals of each run's means are not part of the risk table",
        "bootstrap": "intervals of each run's means are not part of the risk table",
        "ci_method": "intervals of each run's means are not part of the risk table",
        "seed": "intervals of each run's means are not part of the risk table",
        "allow_no_common": "a run sharing no query with the qrels cannot be compared: the command refuses it",
    }
)


@click.command("risk")
@options_of(RiskOptions, RISK)
@click.argument("runs", nargs=-1, required=True)
def risk_command(options: RiskOptions, qrels, measure_texts, baseline, fmt, runs):
    """Risk-sensitive evaluation: URisk and TRisk of each RUN against the baseline.

    Each RUN is [NAME=]RUN (or a saved `twostage eval -q --format json` result);
    the first is the baseline unless --baseline names another. Per measure,
    alpha and run, over the queries both were evaluated on, with d the
    per-query difference run - baseline: URisk = (1/|Q|) [sum of the wins' d
    - (1 + alpha) sum of the losses' |d|] (Wang et al. 2012), TRisk = URisk /
    its standard error (the sd of the risk-adjusted differences / sqrt|Q|),
    a t statistic with its two-sided p-value (Dinçer et al. 2014): TRisk < -2
    says the run is significantly riskier than the baseline.

    \b
    Examples:
      twostage risk --qrels dl19-passage -c -l 2 bm25=bm25.txt tasb=tasb.txt -m ndcg_cut.10
      twostage risk --qrels q.txt A B C --alpha 1 --alpha 5 --alpha 10 --format csv
    """
    from toolkit.api.risk import risk

    if len(runs) < 2:
        raise click.UsageError("give at least two runs: the baseline first, then the runs to compare with it")
    named = named_runs(runs, bare_name=str)
    if baseline is not None and baseline not in named:
        raise click.BadParameter(f"{baseline!r} is not one of the RUNS", param_hint="'--baseline'")
    if not qrels and any(not p.endswith(".json") for p in named.values()):
        first = next(p for p in named.values() if not p.endswith(".json"))
        raise click.UsageError(f"--qrels is needed to evaluate the run {first} (only saved .json results need none)")
    result = risk(qrels, named, baseline=baseline, measures=list(measure_texts) or None, options=options)
    rendered = {"json": result.to_json, "csv": result.to_csv}
    echo(rendered.get(fmt, result.to_text)(), nl=False, kind=kind_of(fmt))


COMMANDS = (risk_command,)
