"""``experiment``: an experiment file (stages, grids, tuning, evaluation) run in one warm process."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence  # noqa: F401  (the verbs' signatures name it)
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from toolkit.experiments.experiment_options import ExperimentOptions
from toolkit.experiments.results import ExperimentResult, run_experiment
from toolkit.experiments.spec import Experiment as ExperimentSpec
from toolkit.experiments.spec import parse_experiment
from toolkit.experiments.stage_cache import StageCache
from toolkit.options import verb

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

    @verb(ExperimentOptions, inputs=("self", "out"))
    def run(self, out: str | os.PathLike, *, options: ExperimentOptions) -> ExperimentResult:
        """Run every configuration into ``out``, reusing cached stages; the result's ``table`` is results.csv.

        Args:
            out: the results folder (results.csv, index.html, experiment.json, runs/, one diagnosis per rerank).

        Raises:
            CacheUnusableError: a cache folder the file system refuses (the stage cache is made and written to
                before any stage runs; ``cache_dir`` or ``$TWOSTAGE_CACHE`` choose another); ``out`` is not
                written.
        """
        from toolkit.guard.store import trusting

        grid = None
        if options.ray is not None:
            from toolkit.experiments.ray_grid import RayGrid

            grid = RayGrid.of(options)  # checks the address before anything is read
        try:
            with trusting(options.trust_cache):
                return run_experiment(
                    self.path,
                    Path(out),
                    tuple(options.force),
                    options.data_dir,
                    StageCache(options.cache_dir),
                    say=log.info,
                    grid=grid,
                )
        finally:
            if grid is not None:
                grid.close()


@verb(ExperimentOptions, inputs=("path", "out"))
def experiment(path: str | os.PathLike, out: str | os.PathLike, *, options: ExperimentOptions) -> pd.DataFrame:
    """Run the experiment file ``path`` into ``out`` and return its results table (one row per configuration).

    Args:
        path: the YAML experiment file.
        out: the results folder.
    """
    return Experiment.from_yaml(path).run(out, options=options).table
