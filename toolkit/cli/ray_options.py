"""The options every distributable command shares: ``--ray [ADDRESS] --workers --gpus-per-worker ...``.

Without ``--ray`` the command runs as before, in this process, and Ray is never imported;
giving ``--workers`` and friends without ``--ray`` is a usage error rather than silently
ignored.
"""

from __future__ import annotations

import click

from toolkit.cli.declare import Flag, flag
from toolkit.cli.options import HostOption
from toolkit.cli.terminal import echo
from toolkit.extras import require

#: The Ray options as flags of the options keywords ``ray``, ``workers``, ... (``JudgeOptions``, ``IndexOptions``, ``DenseOptions``).
RAY_FLAGS: tuple[Flag, ...] = (
    flag(
        "ray",
        "--ray",
        "ray_address",
        cls=HostOption,
        is_flag=False,
        flag_value="local",
        default=None,
        metavar="[ADDRESS]",
        help="Run the model work as a sharded, resumable Ray job: --ray alone starts a private local Ray; "
        "--ray auto joins $RAY_ADDRESS or the `ray start` cluster here; --ray HOST:PORT or "
        "ray://HOST:PORT joins that cluster.",
    ),
    flag("workers", "--workers", type=click.IntRange(min=1), default=None, help="Ray workers (one model each) [2]."),
    flag(
        "gpus_per_worker",
        "--gpus-per-worker",
        type=click.FloatRange(min=0),
        default=None,
        help="GPUs per Ray worker (1: one GPU each, --device auto then picks cuda) [0].",
    ),
    flag(
        "cpus_per_worker",
        "--cpus-per-worker",
        type=click.FloatRange(min=0),
        default=None,
        help="CPUs per Ray worker [1].",
    ),
    flag(
        "shard_size",
        "--shard-size",
        type=click.IntRange(min=1),
        default=None,
        help="Items per shard (documents, passages or queries; rounded up to a multiple of the batch size "
        "where batches matter). Part of the job's identity: keep it when resuming.",
    ),
    flag(
        "max_retries",
        "--max-retries",
        type=click.IntRange(min=0),
        default=None,
        help="Times Ray restarts a dead worker and re-runs its shard [3].",
    ),
)


RAY_OPTIONS = tuple(f.option() for f in RAY_FLAGS)


def ray_options(f):
    for opt in reversed(RAY_OPTIONS):
        f = opt(f)
    return f


def sharding_from_options(
    ray_address, workers, gpus_per_worker, cpus_per_worker, shard_size, max_retries, out, force: bool
):
    """A ``Sharding`` on Ray for ``--ray``; None (in-process, as before) without it."""
    if ray_address is None:
        given = [
            name
            for name, v in (
                ("--workers", workers),
                ("--gpus-per-worker", gpus_per_worker),
                ("--cpus-per-worker", cpus_per_worker),
                ("--shard-size", shard_size),
                ("--max-retries", max_retries),
            )
            if v is not None
        ]
        if given:
            raise click.UsageError(f"{', '.join(given)} only apply with --ray")
        return None
    from toolkit.jobs.distributed import RayExecutor, RayOptions
    from toolkit.jobs.shards import Sharding, shards_dir

    require("ray", "--ray")
    options = RayOptions(
        ray_address,
        workers or 2,
        gpus_per_worker or 0.0,
        1.0 if cpus_per_worker is None else cpus_per_worker,
        3 if max_retries is None else max_retries,
    )
    return Sharding(RayExecutor(options), shards_dir(out), shard_size, force)


def shutdown_ray(sharding) -> None:
    """Stop what a --ray job started (a private local Ray, the driver's connection); nothing without --ray."""
    if sharding is not None:
        from toolkit.jobs.distributed import shutdown

        shutdown()


def worker_device(device: str, precision: str, gpus_per_worker: float | None) -> tuple[str, str]:
    """(device, precision) on Ray workers: cuda when they hold a GPU (``auto``), fp32 (``auto``).

    Resolved on the driver, so the sidecar and the manifest state what the workers run."""
    from toolkit.models import resolve_precision

    gpu = bool(gpus_per_worker)
    dev = ("cuda" if gpu else "cpu") if device == "auto" else device
    if dev.startswith("cuda") and not gpu:
        raise click.UsageError("--device cuda with --ray needs --gpus-per-worker (Ray hides GPUs from workers without)")
    return dev, resolve_precision(precision, dev)


def echo_job(sharding, stats: dict) -> None:
    """One line on stderr: shards resumed and computed, and where the manifest is."""
    if sharding is None or "shards" not in stats:
        return
    echo(
        f"twostage: {stats['shards']} shards: {stats['shards_resumed']} resumed from the manifest, "
        f"{stats['shards_computed']} computed now ({stats['manifest']})",
        err=True,
    )
