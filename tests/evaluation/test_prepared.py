"""Prepared judgments: factorised once, identical results to evaluating the raw judgments each time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import toolkit.measures.ranked as ranked
from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.evaluation.evaluate import evaluate, prepare_judgments
from toolkit.measures.names import EvalSettings, parse_measures

QRELS = [("q1", "a", 2), ("q1", "b", 0), ("q1", "c", 1), ("q1", "x", -1), ("q2", "a", 1), ("q3", "z", 3)]
RUNS = {
    "one": [("q1", "a", 1.0), ("q1", "b", 1.0), ("q1", "x", 0.5), ("q2", "b", 2.0), ("q2", "a", 1.0)],
    "two": [("q1", "c", 3.0), ("q1", "d", 1.0), ("q2", "a", 0.1), ("q9", "a", 1.0)],
}
SETTINGS = [
    EvalSettings(),
    EvalSettings(complete=True, relevance_level=2),
    EvalSettings(judged_only=True, max_docs=1, trec_eval=10),
    EvalSettings(complete=True, trec_eval=10),
]


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.per_query, b.per_query)
    assert a.aggregate.keys() == b.aggregate.keys()
    assert np.array_equal(list(a.aggregate.values()), list(b.aggregate.values()), equal_nan=True)  # -J: 0/0 = nan
    assert a.strings == b.strings and a.printed == b.printed and a.provenance == b.provenance


@pytest.mark.parametrize("settings", SETTINGS, ids=range(len(SETTINGS)))
def test_prepared_gives_identical_results(settings):
    qrels = qrels_from_rows(QRELS)
    prepared = prepare_judgments(qrels)
    measures = (
        parse_measures(["all_trec", "dcg", "yaap"], 10) if settings.trec_eval == 10 else parse_measures(["all_trec"])
    )
    for rows in RUNS.values():
        run = run_from_rows(rows, tag="t")
        _same(evaluate(prepared, run, measures, settings), evaluate(qrels, run, measures, settings))


def test_qrels_factorised_once_for_many_evaluations(monkeypatch):
    qrels = qrels_from_rows(QRELS)
    prepared = prepare_judgments(qrels)
    calls = []
    real = ranked.index_qrels
    monkeypatch.setattr(ranked, "index_qrels", lambda *a, **k: calls.append(1) or real(*a, **k))
    for settings in SETTINGS:
        for rows in RUNS.values():
            evaluate(prepared, run_from_rows(rows), parse_measures(["map", "P.5"]), settings)
    assert calls == []
    assert prepare_judgments(prepared) is prepared
    # the index holds what every evaluation used to rebuild: sorted query ids and label counts
    assert prepared.qids.tolist() == ["q1", "q2", "q3"]
    assert prepared.index.rel_levels.tolist() == [[1, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.qids = np.array([])  # type: ignore[misc]
