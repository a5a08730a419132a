"""Hole bounds: the exact nDCG extremes against a brute force over every labelling, scored by the evaluator
itself (the labelled holes joined to the qrels, the ideal recomputed)."""

from __future__ import annotations

import itertools

import pytest

from toolkit.errors import ConfigError
from toolkit.evaluation.evaluate import evaluate
from toolkit.evaluation.holes import hole_bounds
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.records import qrels_from_rows, run_from_rows

QRELS = [("1", "a", 2), ("1", "b", 0), ("1", "c", 1), ("1", "z", 3), ("2", "a", 1), ("2", "y", 0)]
RUN = [("1", d, 10.0 - i) for i, d in enumerate(["u1", "a", "u2", "b", "u3", "c"])] + [
    ("2", d, 5.0 - i) for i, d in enumerate(["v1", "a", "v2", "y"])
]


def test_bounds_equal_brute_force_over_labellings():
    qrels, run = qrels_from_rows(QRELS), run_from_rows(RUN)
    measures = parse_measures(["ndcg_cut.5", "P.5", "recall.5"], 9)
    got = hole_bounds(qrels, run, measures, EvalSettings())
    holes = {"1": ["u1", "u2", "u3"], "2": ["v1", "v2"]}
    for qid, docs in holes.items():
        values: dict[str, list[float]] = {m.name: [] for m in measures}
        for labels in itertools.product([0, 1, 2, 3], repeat=len(docs)):
            extra = [(qid, d, lab) for d, lab in zip(docs, labels)]
            res = evaluate(qrels_from_rows(QRELS + extra), run, measures, EvalSettings(), warn=False).wide()
            for m in measures:
                values[m.name].append(float(res.at[qid, m.name]))
        for m in measures:
            row = got[m.name].per_query.loc[qid]
            assert row["min"] == pytest.approx(min(values[m.name]), abs=1e-12), (qid, m.name)
            assert row["max"] == pytest.approx(max(values[m.name]), abs=1e-12), (qid, m.name)
            assert row["min"] <= row["value"] <= row["max"] and row["exact"]


def test_no_supported_measure_is_an_error():
    with pytest.raises(ConfigError, match=r"ndcg_cut\.k, P\.k and recall\.k"):
        hole_bounds(qrels_from_rows(QRELS), run_from_rows(RUN), parse_measures(["map"], 9))
