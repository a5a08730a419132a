"""Hole bounds: the exact nDCG extremes against a brute force over every labelling, scored by the evaluator
itself (the labelled holes joined to the qrels, the ideal recomputed)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.errors import ConfigError
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.quality.holes import hole_bounds

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


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def test_evaluate_holes_hand_computed(tmp_path):
    """One relevant judged document at rank 2 below one hole, scale {0, 1}: hand-computed bounds."""
    import math

    import toolkit as ts

    qrels = _write(tmp_path, "q.txt", [("1", 0, "a", 1), ("1", 0, "b", 0)])
    run = _write(tmp_path, "r.txt", [("1", "Q0", "u", 1, 2.0, "t"), ("1", "Q0", "a", 2, 1.0, "t")])
    ev = ts.evaluate(qrels, run, ["ndcg_cut.2", "P.2", "recall.2"], holes=True)
    assert ev.holes is not None
    third = 1 / math.log2(3)  # nDCG@2 with the relevant document at rank 2 and nothing above it
    want = {
        "ndcg_cut_2": (third, third, 1.0, 1.0),  # hole relevant: DCG = ideal DCG = 1 + 1/log2(3)
        "P_2": (0.5, 0.5, 1.0, 0.5),  # condensed: [a], 1 relevant of 2
        "recall_2": (1.0, 1.0, 1.0, 1.0),  # a relevant hole: (1 + 1) / (1 + 1)
    }
    for name, (value, lo, hi, cond) in want.items():
        row = ev.holes[name].per_query.loc["1"]
        assert (row["value"], row["min"], row["max"], row["condensed"]) == pytest.approx((value, lo, hi, cond))
        assert row["unjudged"] == 1


def test_evaluate_holes_equal_library_and_cli_lines(tmp_path):
    import json

    from click.testing import CliRunner

    import toolkit as ts
    from toolkit.cli import main

    qrels = _write(tmp_path, "q.txt", [(q, 0, d, lab) for q, d, lab in QRELS])
    run = _write(tmp_path, "r.txt", [(q, "Q0", d, i + 1, s, "t") for i, (q, d, s) in enumerate(RUN)])
    measures = ["P.5", "map", "ndcg_cut.5", "recall.5"]
    ev = ts.evaluate(qrels, run, measures, relevance_level=2, holes=True)
    direct = hole_bounds(
        qrels_from_rows(QRELS),
        run_from_rows(RUN),
        parse_measures(["P.5", "ndcg_cut.5", "recall.5"], 9),
        EvalSettings(relevance_level=2),
    )
    assert ev.holes is not None and set(ev.holes) == set(direct)
    for name, b in direct.items():
        assert ev.holes[name].per_query.equals(b.per_query)

    res = CliRunner().invoke(
        main,
        ["eval", "-q", "-l", "2", "--holes", "--no-provenance", *[a for m in measures for a in ("-m", m)], qrels, run],
    )
    assert res.exit_code == 0, res.output
    lines = [ln.split("\t") for ln in res.output.splitlines()]
    names = [n.strip() for n, q, _ in lines if q == "all"]
    assert names == [
        "map",
        "P_5",
        "P_5_min",
        "P_5_max",
        "P_5_condensed",
        "recall_5",
        "recall_5_min",
        "recall_5_max",
        "recall_5_condensed",
        "ndcg_cut_5",
        "ndcg_cut_5_min",
        "ndcg_cut_5_max",
        "ndcg_cut_5_condensed",
    ]
    for n, q, v in lines:
        name = n.strip()
        base, _, suffix = name.rpartition("_")
        if suffix in ("min", "max", "condensed") and base in direct:
            t = direct[base]
            want = t.mean()[suffix] if q == "all" else t.per_query.at[q, suffix]
            assert v == f"{want:6.4f}", (name, q)
    per_query_1 = [n.strip() for n, q, _ in lines if q == "1"]
    assert per_query_1[per_query_1.index("ndcg_cut_5") + 1 : per_query_1.index("ndcg_cut_5") + 4] == [
        "ndcg_cut_5_min",
        "ndcg_cut_5_max",
        "ndcg_cut_5_condensed",
    ]

    res = CliRunner().invoke(
        main, ["eval", "-q", "-l", "2", "--holes", "--format", "json", "-m", "ndcg_cut.5", qrels, run]
    )
    doc = json.loads(res.output)
    assert doc["holes"]["ndcg_cut_5"]["all"]["max"] == pytest.approx(direct["ndcg_cut_5"].mean()["max"])
    assert doc["holes"]["ndcg_cut_5"]["per_query"]["2"]["min"] == pytest.approx(
        direct["ndcg_cut_5"].per_query.at["2", "min"]
    )

    res = CliRunner().invoke(main, ["eval", "-m", "map", "--holes", qrels, run])
    assert res.exit_code != 0 and "ndcg_cut.k, P.k and recall.k" in res.output
    res = CliRunner().invoke(main, ["eval", "-m", "P.5", "--holes", "--format", "csv", qrels, run])
    assert res.exit_code != 0 and "--holes" in res.output


DL19 = Path("/work/shared/data/msmarco-passage")


@pytest.mark.skipif(not (DL19 / "runs").is_dir(), reason="DL19 runs absent from /work/shared/data/msmarco-passage")
def test_full_judgment_score_within_bounds_on_dl19_with_judgments_removed():
    """For each DL19 run: 30 % (seeded) of the judgments of its own top 10 removed; the score under the full
    judgments is one labelling of the holes, so it lies within the bounds computed on the reduced qrels."""
    import numpy as np

    from toolkit.data.ranking import top_k
    from toolkit.data.records import DOC_ID, QUERY_ID, Qrels
    from toolkit.data.trec_io import read_qrels, read_run

    full = read_qrels(DL19 / "qrels.dl19-passage.txt")
    measures = parse_measures(["ndcg_cut.10", "P.10", "recall.10"], 9)
    settings = EvalSettings(relevance_level=2)
    runs = sorted((DL19 / "runs").glob("run.dl19.*.txt"))
    assert len(runs) == 5
    rng = np.random.default_rng(25)
    for path in runs:
        run = read_run(path)
        top = top_k(run.frame, 10, settings.score_precision)
        keys = full.frame.set_index([QUERY_ID, DOC_ID]).index
        judged_top = top.set_index([QUERY_ID, DOC_ID]).index.intersection(keys)
        drop = judged_top[rng.random(len(judged_top)) < 0.3]
        assert len(drop) > 20, path.name
        reduced = Qrels(full.frame[~keys.isin(drop)].reset_index(drop=True))
        bounds = hole_bounds(reduced, run, measures, settings)
        truth = evaluate(full, run, measures, settings, warn=False).wide()
        for m in measures:
            t = bounds[m.name].per_query
            assert list(t.index) == list(truth.index), (path.name, m.name)
            v = truth[m.name]
            assert ((t["min"] <= v + 1e-9) & (v <= t["max"] + 1e-9)).all(), (path.name, m.name)
            assert t["exact"].all()
        # the bounds are not vacuous: some query's trec_eval value on the reduced qrels differs from the truth
        assert (bounds["P_10"].per_query["value"] < truth["P_10"] - 1e-9).any(), path.name


def test_eval_holes_several_runs_text_blocks(tmp_path):
    from click.testing import CliRunner

    from toolkit.cli import main

    qrels = _write(tmp_path, "q.txt", [(q, 0, d, lab) for q, d, lab in QRELS])
    run = _write(tmp_path, "r.txt", [(q, "Q0", d, i + 1, s, "t") for i, (q, d, s) in enumerate(RUN)])
    other = _write(tmp_path, "o.txt", [(q, "Q0", d, i + 1, -s, "t") for i, (q, d, s) in enumerate(RUN)])
    res = CliRunner().invoke(main, ["eval", "-m", "P.5", "--holes", "--no-provenance", qrels, run, other])
    assert res.exit_code == 0, res.output
    names = [ln.split("\t")[0].strip() for ln in res.output.splitlines()]
    block = ["P_5", "P_5_min", "P_5_max", "P_5_condensed"]
    assert names == ["# run: r.txt", *block, "# run: o.txt", *block]
    # several runs in JSON: each run's "holes" is what the run alone prints (once refused: one run only)
    import json

    res = CliRunner().invoke(main, ["eval", "-m", "P.5", "--holes", "--format", "json", qrels, run, other])
    assert res.exit_code == 0, res.output
    many = json.loads(res.output)["runs"]
    for path, doc in zip((run, other), many):
        one = json.loads(
            CliRunner().invoke(main, ["eval", "-m", "P.5", "--holes", "--format", "json", qrels, path]).output
        )
        assert doc["holes"] == one["holes"] and doc["holes"]["P_5"]["over"] == "top-k"
