"""A judge's calibration against human labels: its options, the agreement on the documents both labelled, and the
systems' ranking under the human qrels and under the same qrels with the judge's labels.

``CalibrationOptions`` are the settings of the comparison (the measure that ranks the systems, the paired test,
the kappa below which a judge is near chance), checked once where they are built; ``JudgeOptions`` holds them as
a nested piece, so ``judge`` (``calibrate_sample``) and ``calibrate_judge`` take them as keywords.
``calibration_summary`` compares, on ``toolkit.quality.agreement``; the runs are evaluated by the ``Evaluator``
its caller hands in (``toolkit.api.judging``: ``evaluate_many``'s).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.errors import OptionError, phrase
from toolkit.options import Options, opt

if TYPE_CHECKING:  # JudgeOptions holds CalibrationOptions: building them loads neither pandas nor the statistics
    import pandas as pd

    from toolkit.quality.agreement import Agreement, Evaluator

__all__ = [
    "CALIBRATION_KEYS",
    "Calibration",
    "CalibrationInputs",
    "CalibrationOptions",
    "calibrated",
    "calibration_summary",
    "same_model_warnings",
]

#: what a calibrated judge's sidecar (``OUT.qrels.meta.json``, key ``calibration``) keeps of the agreement
CALIBRATION_KEYS = (
    "documents_both",
    "labels",
    "confusion",
    "kappa",
    "kappa_linear",
    "mean_abs_difference",
    "kendall_tau",
    "tau_ap",
    "flipped_pairs",
)


@dataclass(frozen=True)
class CalibrationOptions(Options):
    """How a judge is compared with the humans: the measure that ranks the systems, the paired randomization
    test of their differences, and the kappa below which the judge is near chance."""

    verb = "calibrate_judge"

    seed: int = opt(42, doc="the randomization test's seed (and a calibration sample's).")
    measure: str = opt("ndcg_cut.10", doc="the measure that ranks the systems.")
    alpha: float = opt(0.05, doc="the level of a significant difference between two systems.")
    permutations: int = opt(10_000, doc="random sign flips of the randomization test.")
    correction: str = opt("holm", doc="``holm``, ``bonferroni`` or ``none`` over all pairs of systems.")
    kappa_threshold: float | None = opt(None, doc="below this kappa the judge is near chance (default 0.4).")

    def validate(self) -> None:
        from toolkit.errors import ConfigError
        from toolkit.stats.significance import check_correction, check_level, check_permutations

        # the rules of the test that uses them (stats.significance), checked here before anything is judged
        for check, keyword, flag in (
            (check_level, "alpha", "--alpha"),
            (check_permutations, "permutations", "--permutations"),
            (check_correction, "correction", "--correction"),
        ):
            try:
                check(getattr(self, keyword), phrase(keyword, flag))
            except ConfigError as exc:
                raise OptionError(phrase(str(exc), exc.for_cli()), keyword=keyword, flag=flag) from None
        if self.kappa_threshold is not None and not -1 <= self.kappa_threshold <= 1:
            raise OptionError(
                f"{phrase('kappa_threshold', '--kappa-threshold')} must be in [-1, 1], not {self.kappa_threshold}",
                keyword="kappa_threshold",
                flag="--kappa-threshold",
            )


@dataclass(frozen=True)
class CalibrationInputs:
    """What a calibration compares: ``human`` (a ``Qrels``), ``judged`` (the judge's labels on documents the
    humans judged), ``labels`` (every label the judge wrote: replacing human labels or filling holes,
    ``qrels_origin.overlay_labels``), ``scale`` (the template's labels); with ``runs`` (``{name: run}`` or a list),
    the systems ranked under both, each evaluated by ``evaluate``."""

    human: Any
    judged: pd.DataFrame
    labels: pd.DataFrame
    scale: Sequence[int]
    runs: Mapping[str, Any] | Sequence[Any] | None = None
    evaluate: Evaluator | None = None


@dataclass(frozen=True)
class Calibration:
    """A judge measured against human labels: ``judgments`` (what the judge said on documents humans judged too,
    a ``Judgments``) and ``agreement`` (``ts.agreement`` of the human labels, A, against the judge's, B)."""

    judgments: Any
    agreement: Any

    def to_dict(self) -> dict:
        """What ``twostage judge --calibrate --format json`` prints: ``twostage agreement``'s keys, the judge's
        counts and settings."""
        doc = self.agreement.to_dict()
        calibration = self.judgments.meta.get("calibration") or {}
        for key in ("ranking_qrels", "kappa_threshold", "near_chance"):
            if key in calibration:
                doc[key] = calibration[key]
        doc["judge"] = {
            "settings": self.judgments.meta["judge"],
            "prompt": self.judgments.meta["prompt"],
            "counts": self.judgments.counts,
        }
        return doc


def _model_name(model: str) -> str:
    return Path(str(model).rstrip("/")).name.lower()


def same_model_warnings(judge_model: str, runs: Mapping[str, Any]) -> list[str]:
    """A warning for each run whose ``RUN.meta.json`` names a reranker with the judge's model (a system judged
    by itself); also issued as Python warnings."""
    from toolkit.data.sidecar import read_meta

    out = []
    for name, run in runs.items():
        if not isinstance(run, (str, os.PathLike)):
            continue
        meta = read_meta(run) or {}
        reranker = (meta.get("reranker") or {}).get("model")
        if reranker and _model_name(str(reranker)) == _model_name(judge_model):
            msg = (
                f"the judge's model {judge_model!r} is the reranker of {name} ({reranker!r} in its sidecar): "
                "that run is judged by its own model"
            )
            warnings.warn(msg, UserWarning, stacklevel=3)
            out.append(msg)
    return out


def calibration_summary(inputs: CalibrationInputs, options: CalibrationOptions) -> tuple[Agreement, dict]:
    """The judge against the humans: the label agreement (``ts.agreement``, A the humans) on ``inputs.judged``,
    and with ``inputs.runs`` the systems' ranking under the human qrels (every label) against the human qrels with
    ``inputs.labels``; returns the ``Agreement`` and what the sidecar keeps under ``calibration``
    (``CALIBRATION_KEYS``, ``ranking_qrels`` saying which documents each side uses, ``kappa_threshold``,
    ``near_chance``), warning when the kappa is below the threshold."""
    from toolkit import notices
    from toolkit.errors import ConfigError
    from toolkit.quality.agreement import agreement_of, judgment_set
    from toolkit.quality.qrels_origin import DEFAULT_KAPPA_THRESHOLD, near_chance, overlay_labels

    o, human, judged = options, inputs.human, inputs.judged
    threshold = DEFAULT_KAPPA_THRESHOLD if o.kappa_threshold is None else float(o.kappa_threshold)
    if judged.empty:
        raise ConfigError("the judge gave no label on a document the humans judged: nothing to calibrate")
    human_part = human.frame.merge(judged[["query_id", "doc_id"]], on=["query_id", "doc_id"])
    test = {"alpha": o.alpha, "permutations": o.permutations, "seed": o.seed, "correction": o.correction}

    def compared(a: Any, b: Any, runs: Any = None, labels: Any = None) -> Agreement:
        (fa, sa), (fb, sb) = judgment_set(a), judgment_set(b)
        sets, sources = {"human": fa, "judge": fb}, {"human": sa, "judge": sb}
        return agreement_of(
            sets, sources, labels=labels, runs=runs, measure=o.measure, evaluate=inputs.evaluate, **test
        )

    a = compared(human_part, judged, labels=sorted(set(inputs.scale) | set(human_part["relevance"].astype(int))))
    ranking_qrels = None
    if inputs.runs:
        filled, used = overlay_labels(human.frame, inputs.labels)
        ranked = compared(human.frame, filled, runs=inputs.runs)
        a = dataclasses.replace(a, rankings=ranked.rankings)
        ranking_qrels = {
            "human": {
                "qrels": human.path,
                "human_labels": int((human.frame["relevance"] >= 0).sum()),
                "documents": "every label of the human qrels",
            },
            "judge": {
                **used,
                "documents": "the human qrels, with the judge's label on each document of a human-judged query "
                "it labelled (replacing the human label, or filling a hole)",
            },
        }
    doc = a.to_dict()
    summary = {k: doc.get(k) for k in CALIBRATION_KEYS if k in doc}
    if ranking_qrels is not None:
        summary["ranking_qrels"] = ranking_qrels
        summary["ranking"] = {
            k: doc["ranking"].get(k) for k in ("measure", "means_a", "means_b") if k in doc["ranking"]
        }
    summary["human_qrels"] = {"path": human.path, "sha256": human.sha256}
    summary["kappa_threshold"] = threshold
    warning = near_chance(summary)
    summary["near_chance"] = warning is not None
    if warning:
        notices.warn(warning)
    return a, summary


def calibrated(
    judgments: Any,
    inputs: CalibrationInputs,
    options: CalibrationOptions,
    *,
    model: str,
    out: str | os.PathLike | None = None,
) -> Calibration:
    """The comparison step of ``calibrate_judge``: ``judgments`` (a ``Judgments`` of the documents the humans
    judged, ``inputs.judged`` its labels) compared with the humans, the summary recorded under ``calibration`` in
    its meta and, with ``out``, written there (the sidecar then says how the judge agreed with the humans).

    Raises:
        ConfigError: the judge gave no label on a document the humans judged.
    """
    from toolkit.data.adapters import name_runs
    from toolkit.errors import ConfigError

    if judgments.qrels.empty:
        c = judgments.counts
        raise ConfigError(
            "the judge gave no label on a document the humans judged "
            f"({c['pairs']} pairs, {c['parse_failures']} parse failures, {c['http_failures']} failed requests)"
        )
    if inputs.runs:
        same_model_warnings(model, name_runs(inputs.runs))
    a, summary = calibration_summary(inputs, options)
    j = dataclasses.replace(judgments, meta=judgments.meta | {"calibration": summary})
    if out is not None:
        j.write(out)
    return Calibration(judgments=j, agreement=a)
