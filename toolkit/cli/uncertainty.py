"""``twostage power`` (how many queries), ``twostage pool-test`` (leave-one-run-out pooling)."""

from __future__ import annotations

import json
from types import MappingProxyType

import click

from toolkit.api.options import PoolTestOptions, PowerOptions
from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import evaluation_flags, named_runs
from toolkit.cli.terminal import echo

#: ``twostage power``'s options, in --help's order: the flags of ``PowerOptions`` and the command's own.
POWER: tuple[Row, ...] = (
    click.option("--qrels", default=None, help="Qrels file or collection name, to estimate sd from runs A and B."),
    click.option("-m", "measure", default="ndcg_cut.10", show_default=True, help="The measure compared."),
    flag(
        "sd",
        "--sd",
        type=float,
        default=None,
        help="Standard deviation of the per-query differences (instead of two runs), e.g. 0.2.",
    ),
    flag(
        "delta",
        "--delta",
        type=float,
        default=None,
        help="The smallest difference worth detecting [default with runs: their observed mean difference].",
    ),
    flag("alpha", "--alpha", type=float, default=0.05, show_default=True, help="Test level."),
    flag("power", "--power", "target", type=float, default=0.8, show_default=True, help="Target power."),
    flag(
        "queries",
        "--queries",
        type=click.IntRange(min=2),
        default=None,
        help="With --sd: the queries at hand (their power and smallest detectable difference are printed).",
    ),
    click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
    *evaluation_flags(),
)

#: The keywords of ``PowerOptions`` that have no flag, and why.
POWER_API_ONLY = MappingProxyType(
    {
        "labels": "display names of measures: the command reads one measure's values",
        "name": "the runs' names do not reach the result",
        "rel_format": "the command reads qrels only",
        "zscores": "the command compares raw values",
        "holes": "hole bounds are not part of the design",
        "ci": "intervals of each run's means are not part of the design",
        "bootstrap": "intervals of each run's means are not part of the design",
        "ci_method": "intervals of each run's means are not part of the design",
        "seed": "intervals of each run's means are not part of the design",
        "allow_no_common": "a run sharing no query with the qrels cannot be paired: the command refuses it",
    }
)


@click.command("power")
@options_of(PowerOptions, POWER)
@click.argument("runs", nargs=-1, metavar="[[NAME=]A [NAME=]B]")
def power_command(options: PowerOptions, qrels, measure, fmt, runs):
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

    sd, delta = options.sd, options.delta  # each checked where the options were built (PowerOptions.validate)
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
    paths = list(named_runs(runs).values()) if runs else [None, None]
    result = power(qrels, *paths, measure=measure, options=options)
    if fmt == "json":
        echo(json.dumps(result.as_dict(), indent=2), kind="json")
    else:
        echo(result.to_text(), nl=False)


#: ``twostage pool-test``'s options, in --help's order: the flags of ``PoolTestOptions`` and the command's own.
POOL_TEST: tuple[Row, ...] = (
    click.option("--qrels", required=True, help="Qrels file or collection name (the full judgments)."),
    click.option("-m", "measure", default="ndcg_cut.10", show_default=True, help="The one measure compared."),
    flag(
        "pool_depth",
        "--pool-depth",
        type=int,
        default=10,
        show_default=True,
        help="K: each run contributes its top K documents per query to the pool.",
    ),
    click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
    *evaluation_flags(),
)

#: The keywords of ``PoolTestOptions`` that have no flag, and why.
POOL_TEST_API_ONLY = MappingProxyType(
    {"allow_no_common": "a run sharing no query with the qrels cannot be pooled: the command refuses it"}
)


@click.command("pool-test")
@options_of(PoolTestOptions, POOL_TEST)
@click.argument("runs", nargs=-1, required=True, metavar="[NAME=]RUN [NAME=]RUN [RUN ...]")
def pool_test_command(options: PoolTestOptions, qrels, measure, fmt, runs):
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

    if len(runs) < 2:
        raise click.UsageError("give at least two runs: a run's unique documents are those no other run pooled")
    result = pool_test(qrels, named_runs(runs), measure, options=options)
    if fmt == "json":
        echo(json.dumps(result.as_dict(), indent=2), kind="json")
    else:
        echo(result.to_text(), nl=False)


COMMANDS = (power_command, pool_test_command)
