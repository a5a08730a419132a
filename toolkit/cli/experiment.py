"""``twostage experiment run EXP.yaml --out DIR``: stages, grids and tuning from one file, in one process."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

import click

from toolkit.cli.declare import Row, apply, build, flag, values_of
from toolkit.cli.options import TRUST_CACHE_FLAG, writable_folder
from toolkit.cli.ray_options import RAY_FLAGS, shutdown_ray
from toolkit.cli.terminal import echo
from toolkit.extras import require

#: Configurations an experiment may have without --yes.
GRID_LIMIT = 1000
#: Bytes per line of a run file, for the estimate (``Q0``, rank, score, tag: a DL19 BM25 line is 40-50 bytes).
RUN_LINE_BYTES = 48


@click.group("experiment")
def experiment_group():
    """End-to-end experiments declared in a YAML file (docs/experiments/cacm.yaml)."""


#: ``twostage experiment run``'s options, in --help's order: the flags of ``ExperimentOptions`` and the command's own
#: (``--out``, ``--yes``, and ``--shard-size``, which the command refuses: each grid point is one Ray task).
RUN: tuple[Row, ...] = (
    click.option(
        "--out",
        required=True,
        type=click.Path(file_okay=False),
        callback=writable_folder,
        help="Folder for results.csv, index.html, runs.",
    ),
    flag(
        "force", "--force", multiple=True, metavar="STAGE", help="Recompute STAGE's runs even when cached (repeatable)."
    ),
    flag(
        "cache_dir",
        "--cache-dir",
        default=None,
        type=click.Path(file_okay=False),
        help="Stage cache (default $TWOSTAGE_CACHE/stages).",
    ),
    flag(
        "data_dir",
        "--data-dir",
        default=None,
        help="Folder of the named collections (default $TWOSTAGE_DATA or ../shared/data).",
    ),
    click.option(
        "--yes",
        is_flag=True,
        help=f"Run a grid of more than {GRID_LIMIT:,} configurations (without it such a grid is refused, with its "
        "size and the disk it needs).",
    ),
    TRUST_CACHE_FLAG,
    *(f if f.keyword != "shard_size" else f.option() for f in RAY_FLAGS),
)
#: The keywords of ``ExperimentOptions`` that have no flag, and why (none: every one has its flag).
API_ONLY: Mapping[str, str] = MappingProxyType({})


@experiment_group.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False))
@functools.partial(apply, RUN)
def run_command(experiment_file, out, yes, shard_size, **flags):
    """Run EXPERIMENT_FILE; stages whose inputs and parameters are unchanged are reused from the cache.

    With --ray, the grid points missing from the cache (BM25, QL, RM3, dense and rerank; fusion stays here) run
    as Ray tasks on warm workers (each keeps its JVM, searchers, encoders and models across the points it
    gets); the results are the one-process results, byte for byte.

    \b
    Example:
      twostage experiment run docs/experiments/cacm.yaml --out reports/cacm-experiment
      twostage experiment run docs/experiments/cacm.yaml --out reports/cacm-experiment --ray auto --workers 4
    """
    from toolkit.experiments.experiment_options import ExperimentOptions
    from toolkit.experiments.results import run_experiment, table_text
    from toolkit.experiments.stage_cache import StageCache
    from toolkit.guard.store import trusting

    if shard_size is not None:
        raise click.UsageError("--shard-size does not apply to experiment run: each grid point is one Ray task")
    # --workers and friends only with --ray (the options' rule), Ray installed, the address answering: before any
    # input is read
    options = build(ExperimentOptions, values_of(RUN, flags))
    grid = None
    if options.ray is not None:
        from toolkit.experiments.ray_grid import RayGrid

        require("ray", "--ray")
        grid = RayGrid.of(options)
    with trusting(options.trust_cache):
        cache = StageCache(options.cache_dir)
    # the grid's size, the caches, free space: before any work
    _check_size(experiment_file, out, cache, options.data_dir, yes)
    try:
        with trusting(options.trust_cache):  # the stage cache, and the embedding and ONNX caches the stages open
            result = run_experiment(
                experiment_file,
                out,
                force=tuple(options.force),
                data_dir=options.data_dir,
                cache=cache,
                say=lambda text: echo(f"twostage: {text}", err=True),
                grid=grid,
            )
    finally:
        if grid is not None:
            grid.close()
        shutdown_ray(grid)
    echo(table_text(result.table))


def _check_size(experiment_file, out, cache, data_dir, yes: bool) -> None:
    """Before anything runs: a grid over GRID_LIMIT configurations needs --yes (its size and the disk it needs are
    said first), the stage cache ``cache`` must take writes (``CacheUnusableError`` otherwise), and the runs must
    fit in the free space of --out and of the stage cache."""
    from toolkit.data import catalog
    from toolkit.experiments.spec import grid_size, parse_experiment
    from toolkit.guard.preflight import check_free_space, human_bytes

    exp = parse_experiment(experiment_file)
    per_stage = grid_size(exp.stages, exp.order)
    total = sum(per_stage.values())
    queries = len(catalog.resolve_topics(exp.topics, data_dir))
    need = total * queries * exp.hits * RUN_LINE_BYTES
    size = (
        f"{exp.name}: {total:,} configurations ({', '.join(f'{k}: {v:,}' for k, v in per_stage.items())}); "
        f"about {human_bytes(need)} of runs ({total:,} runs of {queries} queries x {exp.hits} hits) in --out and "
        "as much in the stage cache"
    )
    echo(f"twostage: experiment {size}", err=True)
    if total > GRID_LIMIT and not yes:
        raise click.ClickException(
            f"{experiment_file}: {total:,} configurations, more than {GRID_LIMIT:,}; pass --yes to run them all, or "
            "make the grid smaller"
        )
    check_free_space(out, need, "the experiment's runs")
    if not cache.store.usable:  # not trusted: not written (one warning said so), its runs kept in a temporary folder
        return
    cache.probe()  # a folder the file system refuses: one error naming it and its setting, before any stage runs
    check_free_space(cache.folder, need, "the stage cache", "--cache-dir")


@experiment_group.command("diff")
@click.argument("a", type=click.Path(file_okay=False, exists=True))
@click.argument("b", type=click.Path(file_okay=False, exists=True))
@click.option("--tolerance", type=float, default=0.0, show_default=True, help="Numbers closer than this agree.")
def diff_command(a, b, tolerance):
    """Name what differs between two result folders (file, settings, versions, configurations, numbers).

    Exit status 0 when nothing differs, 1 otherwise (as diff(1)).
    """
    from toolkit.experiments.diff import experiment_diff

    lines = experiment_diff(a, b, tolerance)
    for line in lines:
        echo(line)
    if not lines:
        echo(f"{a} and {b} agree")
    raise SystemExit(1 if lines else 0)


COMMANDS = (experiment_group,)
