"""``experiment``: an experiment file (stages, grids, tuning, evaluation) run in one warm process."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from toolkit.experiments.results import ExperimentResult, run_experiment
from toolkit.experiments.spec import Experiment as ExperimentSpec
from toolkit.experiments.spec import parse_experiment
from toolkit.experiments.stage_cache import StageCache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Experiment:
    """An experiment file, parsed and checked: every mistake is reported with its YAML line before anything runs.

    ``Experiment.from_yaml(path).run(out)`` is ``twostage experiment run PATH --out OUT``.
    """

    path: Path
    spec: ExperimentSpec

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> Experiment:
        """Read and check the experiment file at ``path``.

        Args:
            path: the YAML experiment file (see ``docs/experiments/cacm.yaml``).
        """
        return cls(Path(path), parse_experiment(Path(path)))

    def run(
        self,
        out: str | os.PathLike,
        *,
        force: Sequence[str] = (),
        data_dir: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        ray: str | None = None,
        workers: int | None = None,
        trust_cache: bool = False,
    ) -> ExperimentResult:
        """Run every configuration into ``out``, reusing cached stages; the result's ``table`` is results.csv.

        Args:
            out: the results folder (results.csv, index.html, experiment.json, runs/, one diagnosis per rerank).
            force: stage names to recompute even when their cached run is valid.
            data_dir: where named collections are found (default: ``$TWOSTAGE_DATA`` or ``../shared/data``).
            cache_dir: the stage cache folder (default ``$TWOSTAGE_CACHE/stages``), shared by experiments.
            ray: a Ray address (``"local"``, ``"auto"``, ``host:port``, ``ray://host:port``): the missing
                search, dense and rerank grid points run as Ray tasks on warm workers (same runs as without).
            workers: with ``ray``: how many workers (default 2).
            trust_cache: read the stage, embedding and ONNX caches even when another user owns them or may write
                to them (``toolkit.guard.store``; Ray workers open theirs untrusted).

        Raises:
            CacheUnusableError: a cache folder the file system refuses (the stage cache is made and written to
                before any stage runs; ``cache_dir`` or ``$TWOSTAGE_CACHE`` choose another); ``out`` is not
                written.
        """
        from toolkit.guard.store import trusting

        grid = None
        if ray is not None:
            from toolkit.experiments.ray_grid import RayGrid

            grid = RayGrid.at(ray, workers)  # checks the address before anything is read
        elif workers is not None:
            from toolkit.errors import ConfigError

            raise ConfigError("workers= only applies with ray=")
        try:
            with trusting(trust_cache):
                return run_experiment(
                    self.path, Path(out), tuple(force), data_dir, StageCache(cache_dir), say=log.info, grid=grid
                )
        finally:
            if grid is not None:
                grid.close()


def experiment(
    path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    force: Sequence[str] = (),
    data_dir: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    ray: str | None = None,
    workers: int | None = None,
    trust_cache: bool = False,
) -> pd.DataFrame:
    """Run the experiment file ``path`` into ``out`` and return its results table (one row per configuration).

    Args:
        path: the YAML experiment file.
        out: the results folder.
        force: stage names to recompute even when their cached run is valid.
        data_dir: where named collections are found.
        cache_dir: the stage cache folder (default ``$TWOSTAGE_CACHE/stages``).
        ray: a Ray address: the missing search, dense and rerank grid points run as Ray tasks (see
            ``Experiment.run``).
        workers: with ``ray``: how many workers (default 2).
        trust_cache: read caches another user owns or may write to (see ``Experiment.run``).
    """
    exp = Experiment.from_yaml(path)
    run = exp.run(
        out, force=force, data_dir=data_dir, cache_dir=cache_dir, ray=ray, workers=workers, trust_cache=trust_cache
    )
    return run.table
