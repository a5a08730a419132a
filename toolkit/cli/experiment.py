"""``twostage experiment run EXP.yaml --out DIR``: stages, grids and tuning from one file, in one process."""

from __future__ import annotations

import click

from toolkit.cli.options import TRUST_CACHE, writable_folder
from toolkit.cli.ray_options import ray_options, sharding_from_options, shutdown_ray
from toolkit.cli.terminal import echo

#: Configurations an experiment may have without --yes.
GRID_LIMIT = 1000
#: Bytes per line of a run file, for the estimate (``Q0``, rank, score, tag: a DL19 BM25 line is 40-50 bytes).
RUN_LINE_BYTES = 48


@click.group("experiment")
def experiment_group():
    """End-to-end experiments declared in a YAML file (docs/experiments/cacm.yaml)."""


@experiment_group.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    callback=writable_folder,
    help="Folder for results.csv, index.html, runs.",
)
@click.option("--force", multiple=True, metavar="STAGE", help="Recompute STAGE's runs even when cached (repeatable).")
@click.option(
    "--cache-dir", default=None, type=click.Path(file_okay=False), help="Stage cache (default $TWOSTAGE_CACHE/stages)."
)
@click.option(
    "--data-dir", default=None, help="Folder of the named collections (default $TWOSTAGE_DATA or ../shared/data)."
)
@click.option(
    "--yes",
    is_flag=True,
    help=f"Run a grid of more than {GRID_LIMIT:,} configurations (without it such a grid is refused, with its size "
    "and the disk it needs).",
)
@TRUST_CACHE
@ray_options
def run_command(
    experiment_file,
    out,
    force,
    cache_dir,
    data_dir,
    yes,
    trust_cache,
    ray_address,
    workers,
    gpus_per_worker,
    cpus_per_worker,
    shard_size,
    max_retries,
):
    """Run EXPERIMENT_FILE; stages whose inputs and parameters are unchanged are reused from the cache.

    With --ray, the grid points missing from the cache (BM25, QL, RM3, dense and rerank; fusion stays here) run
    as Ray tasks on warm workers (each keeps its JVM, searchers, encoders and models across the points it
    gets); the results are the one-process results, byte for byte.

    \b
    Example:
      twostage experiment run docs/experiments/cacm.yaml --out reports/cacm-experiment
      twostage experiment run docs/experiments/cacm.yaml --out reports/cacm-experiment --ray auto --workers 4
    """
    from toolkit.experiments.results import run_experiment, table_text
    from toolkit.experiments.stage_cache import StageCache
    from toolkit.guard.store import trusting

    if shard_size is not None:
        raise click.UsageError("--shard-size does not apply to experiment run: each grid point is one Ray task")
    # the shared check: Ray installed, address answering, --workers only with --ray; before any input is read
    sharding = sharding_from_options(
        ray_address, workers, gpus_per_worker, cpus_per_worker, None, max_retries, out, False
    )
    with trusting(trust_cache):
        cache = StageCache(cache_dir)
    _check_size(experiment_file, out, cache, data_dir, yes)  # the grid's size, the caches, free space: before any work
    try:
        grid = None
        if sharding is not None:
            from toolkit.experiments.ray_grid import RayGrid

            grid = RayGrid(sharding.executor)
        with trusting(trust_cache):  # the stage cache, and the embedding and ONNX caches the stages open
            result = run_experiment(
                experiment_file,
                out,
                force=tuple(force),
                data_dir=data_dir,
                cache=cache,
                say=lambda text: echo(f"twostage: {text}", err=True),
                grid=grid,
            )
    finally:
        if grid is not None:
            grid.close()
        shutdown_ray(sharding)
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
