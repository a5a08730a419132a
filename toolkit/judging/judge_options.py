"""The options of ``judge`` (``twostage judge``): one frozen object that the library's keywords and the command's
flags build alike (``toolkit.options``; the flags in ``toolkit.cli.judge``), its HTTP settings the shared
``RequestPolicy`` of ``toolkit.guard.client``.

The rules between options live in ``JudgeOptions.validate`` and those between options and the inputs in
``JudgeOptions.check_inputs``, worded with ``toolkit.errors.phrase`` for both front ends: the library says
``holes_only and calibration exclude each other``, the command line ``--holes-only and --calibrate exclude
each other``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from toolkit.errors import ConfigError, OptionConflictError, OptionError, phrase
from toolkit.guard.client import RequestPolicy
from toolkit.judging.calibration import CalibrationOptions
from toolkit.models import DEFAULT_DEVICE
from toolkit.options import Options, nested, opt

__all__ = ["BACKEND_NAMES", "JudgeOptions"]

#: the judge backends (``toolkit.llm.chat.BACKENDS``' names)
BACKEND_NAMES = ("openai", "transformers")

#: the documentation of ``CalibrationOptions``' fields as ``judge``'s keywords (a calibration sample, or
#: ``calibrate_judge``)
_CALIBRATION_DOCS = MappingProxyType(
    {
        "seed": "the sample's seed (and the randomization test's, with ``runs``).",
        "measure": "the measure that ranks ``runs``.",
        "alpha": "the level of a significant difference between ``runs``.",
        "permutations": "random sign flips of the randomization test over ``runs``.",
        "correction": "``holm``, ``bonferroni`` or ``none`` over all pairs of ``runs``.",
        "kappa_threshold": "a calibration whose Cohen's kappa is below it is near chance: a warning now and at every "
        "use of the labels (``merge_qrels``, eval, compare, diagnose, the diagnosis page); default 0.4.",
    }
)


@dataclass(frozen=True)
class JudgeOptions(Options):
    """The options of ``judge`` (``twostage judge``): every keyword but the inputs (the run, its texts, the human
    qrels, the systems to rank, where to write). ``model`` has no default: it is always given."""

    verb = "judge"

    model: str = opt(doc="the endpoint's model name (``openai``) or a local model folder (``transformers``).")
    endpoint: str | None = opt(
        None, doc="an OpenAI-compatible base URL (``http://localhost:8000/v1``); picks the ``openai`` backend."
    )
    backend: str | None = opt(
        None, doc="``openai`` or ``transformers`` (default: ``openai`` with an endpoint, else ``transformers``)."
    )
    depth: int = opt(10, doc="judge each query's top ``depth`` documents (trec_eval's order).")
    holes_only: bool = opt(False, doc="judge only the documents ``qrels`` does not judge.")
    calibration: bool = opt(False, doc="judge only the documents ``qrels`` judges (to measure the judge against them).")
    query_ids: Iterable[str] | None = opt(None, doc="judge only these queries.")
    prompt: str | os.PathLike | None = opt(
        None, doc="a template file (default: the shipped UMBRELA-style 0-3 template)."
    )
    cache: str | os.PathLike | bool = opt(
        True,
        doc="True (``$TWOSTAGE_CACHE/judgments``), a folder, or False (ask everything, store nothing). A folder the "
        "file system refuses is ``CacheUnusableError``, never a cache silently not kept.",
    )
    trust_cache: bool = opt(
        False,
        doc="read the cache even when another user owns its folder or file, or may write to them (without it such "
        "a cache is not read nor written: one warning; ``toolkit.guard.store``).",
    )
    requests: RequestPolicy = RequestPolicy.piece(
        doc="the HTTP settings of the ``openai`` backend (``toolkit.guard.client.RequestPolicy``)"
    )
    device: str = opt(DEFAULT_DEVICE, doc="``transformers``: auto, cpu, cuda, cuda:N, mps.")
    batch_size: int = opt(8, doc="``transformers``: prompts per generation batch.")
    progress: bool = opt(False, doc="a progress bar on stderr.")
    ray: str | None = opt(
        None,
        doc="spread the judge's calls over Ray workers (``auto``, ``local`` or an address), in shards recorded in "
        "``out.shards/manifest.json`` (needs ``out``); a killed job resumes at its unfinished shards.",
    )
    workers: int | None = opt(None, doc="Ray actors (default 2).")
    gpus_per_worker: float | None = opt(None, doc="GPUs per actor (transformers judges).")
    cpus_per_worker: float | None = opt(None, doc="CPUs per actor (default 1).")
    shard_size: int | None = opt(None, doc="pairs per shard (default 256).")
    max_retries: int | None = opt(None, doc="retries of a failed shard on another actor (default 3).")
    force: bool = opt(False, doc="discard the shards of a different earlier job at ``out.shards``.")
    retry_unparsed: bool = opt(
        False,
        doc="ask again the pairs whose cached answer the template cannot parse (a fixed endpoint or a model that "
        "answered badly once); the new answers replace the old in the cache.",
    )
    max_failures: int = opt(
        0,
        doc="the failed requests (after their retries) a job may have; with more, or when every request failed, "
        "``RequestsFailedError`` is raised after ``out`` is written (its ``result`` holds the judgments).",
    )
    calibrate_sample: int = opt(
        0,
        doc="with ``holes_only``: judge also a sample of this many documents of the run's top ``depth`` that "
        "``qrels`` judges (drawn with ``numpy.random.default_rng(seed)``), and record the judge's agreement with "
        "the humans on them under ``calibration`` in ``out.meta.json`` (the sample's labels stay in the records, "
        "marked ``calibration_sample``; ``out`` holds the holes' labels only).",
    )
    calibrating: CalibrationOptions = nested(
        [(k.name, k.default, k.annotation, _CALIBRATION_DOCS[k.name]) for k in CalibrationOptions.keywords().values()],
        lambda given: CalibrationOptions.from_keywords(**given),
        lambda o: o.describe(),
        doc="how a calibration compares the judge with the humans (``toolkit.judging.calibration.CalibrationOptions``)",
    )

    @property
    def backend_used(self) -> str:
        """The backend: ``backend``, else ``openai`` with an endpoint and ``transformers`` without."""
        return self.backend or ("openai" if self.endpoint else "transformers")

    def validate(self) -> None:
        if self.backend is not None and self.backend not in BACKEND_NAMES:
            raise ConfigError(f"backend must be one of {', '.join(BACKEND_NAMES)}, not {self.backend!r}")
        if self.holes_only and self.calibration:
            raise OptionConflictError(
                phrase(
                    "holes_only and calibration exclude each other (holes have no human label to compare)",
                    "--holes-only and --calibrate exclude each other",
                ),
                keyword="holes_only",
                flag="--holes-only",
            )
        if self.calibrate_sample < 0:
            raise OptionError(
                f"calibrate_sample must be >= 0, not {self.calibrate_sample}",
                keyword="calibrate_sample",
                flag="--calibrate-sample",
            )
        if self.calibrate_sample and not self.holes_only:
            raise OptionConflictError(
                phrase(
                    "calibrate_sample= samples human-judged documents beside the holes: it needs holes_only=True "
                    "(calibrate_judge judges every human-judged document of the top depth)",
                    "--calibrate-sample samples human-judged documents beside the holes: add --holes-only",
                ),
                keyword="calibrate_sample",
                flag="--calibrate-sample",
            )
        if self.backend_used == "openai" and not self.endpoint:
            raise OptionConflictError(
                phrase(
                    "the openai backend needs endpoint= (e.g. http://localhost:8000/v1)",
                    "--backend openai needs --endpoint URL",
                ),
                keyword="backend",
                flag="--backend",
            )

    def check_inputs(self, *, qrels: Any = None, runs: Any = None, out: Any = None) -> None:
        """The rules between the options and the inputs: ``holes_only`` and ``calibration`` need human ``qrels``,
        ``runs`` are ranked in a calibration sample, ``ray`` keeps its shards beside ``out``."""
        if (self.holes_only or self.calibration) and qrels is None:
            raise OptionConflictError(
                phrase("holes_only and calibration need qrels=", "--holes-only and --calibrate need --qrels")
                + " (the human judgments)",
                keyword="qrels",
                flag="--qrels",
            )
        if runs and not self.calibrate_sample:
            raise OptionConflictError(
                phrase(
                    "runs= are ranked in a calibration: give calibrate_sample= (or use calibrate_judge)",
                    "--rank ranks systems in a calibration: --calibrate or --calibrate-sample",
                ),
                keyword="runs",
                flag="--rank",
            )
        if self.ray is not None and out is None:
            raise OptionConflictError(
                phrase("ray= needs out=", "--ray needs --out") + " (the job's shards are kept in OUT.shards)",
                keyword="ray",
                flag="--ray",
            )
