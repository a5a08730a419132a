"""twostage: Pyserini-integrated two-stage retrieval evaluation, as a library.

    import toolkit as ts
    ev = ts.evaluate("dl19-passage", "run.txt", ["nDCG@10", "AP@100"], complete=True, relevance_level=2)
    ev.summary, ev.per_query, ev.provenance, ev.to_trec_eval()

The public names are those in ``__all__``; they are loaded on first use (PEP 562), so ``import toolkit``
loads neither pandas nor any heavy dependency (pyserini, jnius, torch, faiss, ray, matplotlib): those are
imported inside the functions that use them. Errors are ``toolkit.errors.TwostageError`` subclasses; the
library logs through ``logging`` and never prints or exits.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from toolkit.version import __version__

#: public name -> the module of ``toolkit.api`` that defines it
_PUBLIC = MappingProxyType(
    {
        "evaluate": "evaluation",
        "evaluate_many": "evaluation",
        "Evaluation": "evaluation",
        "EvaluationOptions": "options",
        "compare": "comparison",
        "Comparison": "comparison",
        "CompareOptions": "options",
        "Bm25Options": "options",
        "DenseOptions": "options",
        "IndexOptions": "options",
        "FuseOptions": "pipeline",
        "diagnose": "diagnosis",
        "Diagnosis": "diagnosis",
        "DiagnosisOptions": "options",
        "Run": "run",
        "index": "pipeline",
        "bm25": "pipeline",
        "dense": "pipeline",
        "fuse": "pipeline",
        "rerank": "pipeline",
        "RerankOptions": "pipeline",
        "read_run": "pipeline",
        "experiment": "experiment",
        "Experiment": "experiment",
        "ExperimentOptions": "experiment",
        "power": "uncertainty",
        "PowerOptions": "options",
        "pool_test": "uncertainty",
        "PoolTestOptions": "options",
        "risk": "risk",
        "Risk": "risk",
        "RiskOptions": "options",
        "agreement": "assessors",
        "Agreement": "assessors",
        "AgreementOptions": "options",
        "judge": "judging",
        "JudgeOptions": "judging",
        "RequestPolicy": "options",
        "Judgments": "judging",
        "calibrate_judge": "judging",
        "Calibration": "judging",
        "merge_qrels": "judging",
        "TwostageWarning": "evaluation",
    }
)

__all__ = [
    "Agreement",
    "AgreementOptions",
    "Bm25Options",
    "Calibration",
    "CompareOptions",
    "Comparison",
    "DenseOptions",
    "Diagnosis",
    "DiagnosisOptions",
    "Evaluation",
    "EvaluationOptions",
    "Experiment",
    "ExperimentOptions",
    "FuseOptions",
    "IndexOptions",
    "JudgeOptions",
    "Judgments",
    "PoolTestOptions",
    "PowerOptions",
    "RequestPolicy",
    "RerankOptions",
    "Risk",
    "RiskOptions",
    "Run",
    "TwostageWarning",
    "__version__",
    "agreement",
    "bm25",
    "calibrate_judge",
    "compare",
    "dense",
    "diagnose",
    "evaluate",
    "evaluate_many",
    "experiment",
    "fuse",
    "index",
    "judge",
    "merge_qrels",
    "pool_test",
    "power",
    "read_run",
    "rerank",
    "risk",
]

if TYPE_CHECKING:  # for type checkers and pdoc; at run time the names come from __getattr__
    from toolkit.api.assessors import Agreement, agreement
    from toolkit.api.comparison import Comparison, compare
    from toolkit.api.diagnosis import Diagnosis, diagnose
    from toolkit.api.evaluation import Evaluation, evaluate, evaluate_many
    from toolkit.api.experiment import Experiment, experiment
    from toolkit.api.judging import Calibration, JudgeOptions, Judgments, calibrate_judge, judge, merge_qrels
    from toolkit.api.options import (
        AgreementOptions,
        Bm25Options,
        CompareOptions,
        DenseOptions,
        DiagnosisOptions,
        EvaluationOptions,
        IndexOptions,
        PoolTestOptions,
        PowerOptions,
        RequestPolicy,
        RiskOptions,
    )
    from toolkit.api.pipeline import FuseOptions, bm25, dense, fuse, index, read_run, rerank
    from toolkit.api.risk import Risk, risk
    from toolkit.api.run import Run
    from toolkit.api.uncertainty import pool_test, power
    from toolkit.errors import TwostageWarning
    from toolkit.experiments.experiment_options import ExperimentOptions
    from toolkit.reranking.rerank_options import RerankOptions


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"toolkit.api.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
