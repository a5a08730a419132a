"""``twostage power`` (how many queries), ``twostage pool-test`` (leave-one-run-out pooling)."""

from __future__ import annotations

import json

import click

from toolkit.cli.options import api_options, evaluation_options, named_runs, pop_settings, settings_from
from toolkit.cli.terminal import echo


def _unit(name: str):
    def check(ctx, param, value):
        if value is not None and not 0.0 < value < 1.0:
            raise click.BadParameter(f"{name} must lie strictly between 0 and 1, got {value}")
        return value

    return check


@click.command("power")
@click.option("--qrels", default=None, help="Qrels file or collection name, to estimate sd from runs A and B.")
@click.option("-m", "measure", default="ndcg_cut.10", show_default=True, help="The measure compared.")
@click.option(
    "--sd",
    type=float,
    default=None,
    help="Standard deviation of the per-query differences (instead of two runs), e.g. 0.2.",
)
@click.option(
    "--delta",
    type=float,
    default=None,
    help="The smallest difference worth detecting [default with runs: their observed mean difference].",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, callback=_unit("--alpha"), help="Test level.")
@click.option(
    "--power", "target", type=float, default=0.8, show_default=True, callback=_unit("--power"), help="Target power."
)
@click.option(
    "--queries",
    type=click.IntRange(min=2),
    default=None,
    help="With --sd: the queries at hand (their power and smallest detectable difference are printed).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@evaluation_options
@click.argument("runs", nargs=-1, metavar="[[NAME=]A [NAME=]B]")
def power_command(qrels, measure, sd, delta, alpha, target, queries, fmt, runs, **options):
    """How many queries a two-sided paired t-test needs to detect a difference (noncentral t, Sakai's topic
    set size design), and the smallest difference the queries at hand detect.

    From two runs (sd of their per-query differences on -m) or a given --sd.
    The last line of the text output is `queries N`.

    \b
    Examples:
      twostage power --qrels dl19-passage -c -l 2 bm25.txt tasb.txt -m ndcg_cut.10 --delta 0.05
      twostage power --sd 0.2 --delta 0.05 --alpha 0.05 --power 0.8
    """
    from toolkit.api.uncertainty import power

    s = pop_settings(options)
    settings_from(s)
    if runs and len(runs) != 2:
        raise click.UsageError("give two runs (A B), or --sd without runs")
    if runs and sd is not None:
        raise click.UsageError("give two runs or --sd, not both")
    if not runs and sd is None:
        raise click.UsageError("give two runs (with --qrels) or --sd")
    if runs and not qrels:
        raise click.UsageError("--qrels is needed to evaluate the two runs")
    if not runs and delta is None:
        raise click.UsageError("--delta is needed with --sd")
    if sd is not None and sd <= 0:
        raise click.BadParameter("must be > 0", param_hint="'--sd'")
    if delta is not None and delta == 0:
        raise click.BadParameter("must be non-zero", param_hint="'--delta'")
    paths = list(named_runs(runs).values()) if runs else [None, None]
    result = power(
        qrels,
        *paths,
        measure=measure,
        sd=sd,
        delta=delta,
        alpha=alpha,
        power=target,
        queries=queries,
        **api_options(s),
    )
    if fmt == "json":
        echo(json.dumps(result.as_dict(), indent=2), kind="json")
    else:
        echo(result.to_text(), nl=False)


@click.command("pool-test")
@click.option("--qrels", required=True, help="Qrels file or collection name (the full judgments).")
@click.option("-m", "measure", default="ndcg_cut.10", show_default=True, help="The one measure compared.")
@click.option(
    "--pool-depth",
    type=int,
    default=10,
    show_default=True,
    help="K: each run contributes its top K documents per query to the pool.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@evaluation_options
@click.argument("runs", nargs=-1, required=True, metavar="[NAME=]RUN [NAME=]RUN [RUN ...]")
def pool_test_command(qrels, measure, pool_depth, fmt, runs, **options):
    """Leave-one-run-out pool test (Zobel 1998): would each run score as well without the documents only it
    brought to the pool?

    For each RUN: the judgments of the documents in its top K that no other RUN
    has in its top K are removed, RUN is evaluated again on -m, and its score
    change and rank change among the RUNs (the others keep their full-judgment
    scores; rank 1 = best) are printed. A large drop says a system unlike the
    pooled ones would be penalised by a pool it did not contribute to.

    \b
    Examples:
      twostage pool-test --qrels dl19-passage -l 2 -m ndcg_cut.10 --pool-depth 10 bm25.txt tasb.txt splade.txt
    """
    from toolkit.api.uncertainty import pool_test

    s = pop_settings(options)
    settings_from(s)
    if pool_depth < 1:
        raise click.BadParameter(f"must be >= 1, got {pool_depth}", param_hint="'--pool-depth'")
    if len(runs) < 2:
        raise click.UsageError("give at least two runs: a run's unique documents are those no other run pooled")
    result = pool_test(qrels, named_runs(runs), measure, pool_depth=pool_depth, **api_options(s))
    if fmt == "json":
        echo(json.dumps(result.as_dict(), indent=2), kind="json")
    else:
        echo(result.to_text(), nl=False)


COMMANDS = (power_command, pool_test_command)
