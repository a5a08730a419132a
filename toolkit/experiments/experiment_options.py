"""The options of an experiment run (``ts.experiment``, ``Experiment.run``, ``twostage experiment run``): one frozen
object that the library's keywords and the command's flags build alike (``toolkit.options``; the flags in
``toolkit.cli.experiment``), checked once where it is built.

The experiment file and the results folder are the run's inputs, no options; ``--yes`` (a grid over the command's
size limit) is the command line's own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.errors import OptionConflictError, phrase
from toolkit.options import Options, opt

__all__ = ["ExperimentOptions"]

#: The Ray settings that need ``ray``: (field, its flag).
_RAY_SETTINGS = (
    ("workers", "--workers"),
    ("gpus_per_worker", "--gpus-per-worker"),
    ("cpus_per_worker", "--cpus-per-worker"),
    ("max_retries", "--max-retries"),
)


@dataclass(frozen=True)
class ExperimentOptions(Options):
    """The options of ``experiment`` (``twostage experiment run``): how an experiment file is run, not what it is."""

    verb = "experiment"

    force: Sequence[str] = opt((), doc="stage names to recompute even when their cached run is valid.")
    data_dir: str | None = opt(
        None, doc="where named collections are found (default: ``$TWOSTAGE_DATA`` or ``../shared/data``)."
    )
    cache_dir: str | os.PathLike | None = opt(
        None, doc="the stage cache folder (default ``$TWOSTAGE_CACHE/stages``), shared by experiments."
    )
    ray: str | None = opt(
        None,
        doc='a Ray address (``"local"``, ``"auto"``, ``host:port``, ``ray://host:port``): the missing search, '
        "dense and rerank grid points run as Ray tasks on warm workers (same runs as without).",
    )
    workers: int | None = opt(None, doc="with ``ray``: how many workers (default 2).")
    gpus_per_worker: float | None = opt(None, doc="with ``ray``: GPUs per worker (default 0).")
    cpus_per_worker: float | None = opt(None, doc="with ``ray``: CPUs per worker (default 1).")
    max_retries: int | None = opt(
        None, doc="with ``ray``: times Ray restarts a dead worker and re-runs its point (default 3)."
    )
    trust_cache: bool = opt(
        False,
        doc="read the stage, embedding and ONNX caches even when another user owns them or may write to them "
        "(``toolkit.guard.store``; Ray workers open theirs untrusted).",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "force", tuple(self.force))  # held as a tuple: a generator given is read here
        super().__post_init__()

    def validate(self) -> None:
        if self.ray is not None:
            return
        given = [(k, flag) for k, flag in _RAY_SETTINGS if getattr(self, k) is not None]
        if not given:
            return
        api = ", ".join(f"{k}=" for k, _ in given) + (" only applies" if len(given) == 1 else " only apply")
        raise OptionConflictError(
            phrase(f"{api} with ray=", f"{', '.join(flag for _, flag in given)} only apply with --ray"),
            keyword=given[0][0],
            flag=given[0][1],
        )
