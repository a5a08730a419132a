"""``judging.calibration``: a judge compared with the humans (``calibration_summary``, ``calibrated``) under one
frozen, validated ``CalibrationOptions`` that ``JudgeOptions`` nests; ``ts.calibrate_judge`` is its verb."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pandas as pd
import pytest

from toolkit.api.judging import Judgments
from toolkit.data.adapters import as_qrels
from toolkit.errors import ConfigError, OptionError, TwostageWarning
from toolkit.judging.calibration import (
    CALIBRATION_KEYS,
    Calibration,
    CalibrationInputs,
    CalibrationOptions,
    calibrated,
    calibration_summary,
)
from toolkit.judging.judge_options import JudgeOptions

#: human labels, and the judge's on the same documents: 6 of 8 agree
HUMAN = pd.DataFrame(
    [(f"q{q}", f"d{d}", (q + d) % 4) for q in (1, 2) for d in range(4)], columns=["query_id", "doc_id", "relevance"]
)
JUDGE = HUMAN.assign(relevance=[r if i not in (2, 5) else (r + 1) % 4 for i, r in enumerate(HUMAN["relevance"])])


def _inputs(judged=JUDGE, **kw) -> CalibrationInputs:
    return CalibrationInputs(as_qrels(HUMAN), judged, judged, (0, 1, 2, 3), **kw)


@pytest.mark.parametrize(
    ("given", "api", "cli", "flag"),
    [
        ({"alpha": 1.0}, "alpha must be in (0, 1), not 1.0", "--alpha must be in (0, 1), not 1.0", "--alpha"),
        (
            {"permutations": 0},
            "permutations must be >= 1, got 0",
            "--permutations must be >= 1, got 0",
            "--permutations",
        ),
        (
            {"correction": "fdr"},
            "unknown correction 'fdr'; choose one of holm, bonferroni, bh, none, holm-sidak, sidak, fdr_bh, fdr_by",
            "unknown --correction 'fdr'; choose one of holm, bonferroni, bh, none, holm-sidak, sidak, fdr_bh, fdr_by",
            "--correction",
        ),
        (
            {"kappa_threshold": 1.5},
            "kappa_threshold must be in [-1, 1], not 1.5",
            "--kappa-threshold must be in [-1, 1], not 1.5",
            "--kappa-threshold",
        ),
    ],
)
def test_a_calibration_value_refused_is_worded_for_each_front_end(given, api, cli, flag):
    with pytest.raises(OptionError) as caught:
        CalibrationOptions.from_keywords(**given)
    assert str(caught.value) == api and caught.value.for_cli() == cli and caught.value.flag == flag
    with pytest.raises(OptionError, match="^" + api.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        JudgeOptions.from_keywords(model="m", **given)  # the judge's options hold them, checked alike


def test_judge_options_nest_the_calibration_options_under_their_keywords():
    o = JudgeOptions.from_keywords(model="m", alpha=0.1, seed=7, measure="P.5", kappa_threshold=0.2)
    assert o.calibrating == CalibrationOptions(seed=7, measure="P.5", alpha=0.1, kappa_threshold=0.2)
    described = o.describe()
    assert {k: described[k] for k in CalibrationOptions.keywords()} == o.calibrating.describe()
    assert list(CalibrationOptions.keywords()) == [
        k for k in JudgeOptions.keywords() if k in CalibrationOptions.keywords()
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.calibrating.alpha = 0.5  # type: ignore[misc]


def test_the_summary_keeps_the_agreement_and_says_near_chance_below_the_threshold():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, summary = calibration_summary(_inputs(), CalibrationOptions(kappa_threshold=-0.5))
    assert (a.names, a.first.documents_both) == (("human", "judge"), 8)
    assert set(summary) == {*CALIBRATION_KEYS[:6], "human_qrels", "kappa_threshold", "near_chance"}
    assert summary["kappa"] == a.kappa and summary["labels"] == [0, 1, 2, 3]
    assert summary["kappa_threshold"] == -0.5 and summary["near_chance"] is False
    with pytest.warns(TwostageWarning, match="near chance"):
        _, strict = calibration_summary(_inputs(), CalibrationOptions(kappa_threshold=0.99))
    assert strict["near_chance"] is True and strict["kappa"] == summary["kappa"]
    _, default = calibration_summary(_inputs(), CalibrationOptions())
    assert default["kappa_threshold"] == 0.4


def test_the_summary_ranks_the_runs_with_the_evaluator_handed_in():
    seen = []

    def evaluate(judgments, queries, runs, measure):
        seen.append((sorted(queries), sorted(runs), measure))
        rows = [(r, q, float(i)) for i, r in enumerate(runs) for q in sorted(queries)]
        table = pd.DataFrame(rows, columns=["run", "query_id", "value"])
        table.attrs["measure"] = measure
        return table

    options = CalibrationOptions(measure="P.2", permutations=20, kappa_threshold=-1)
    a, summary = calibration_summary(_inputs(runs={"s1": "x", "s2": "y"}, evaluate=evaluate), options)
    assert seen == [(["q1", "q2"], ["s1", "s2"], "P.2")] * 2  # under the human qrels, then with the judge's labels
    assert a.rankings[0].measure == "P.2" and summary["kendall_tau"] == 1.0 and summary["flipped_pairs"] == []
    assert summary["ranking"]["measure"] == "P.2"
    assert summary["ranking_qrels"]["human"]["human_labels"] == 8


def test_no_judged_document_is_nothing_to_calibrate():
    with pytest.raises(ConfigError, match="nothing to calibrate"):
        calibration_summary(_inputs(judged=JUDGE.iloc[:0]), CalibrationOptions())


def _judgments(qrels: pd.DataFrame) -> Judgments:
    counts = {"pairs": 8, "parse_failures": 1, "http_failures": 2, "labels": len(qrels)}
    return Judgments(qrels=qrels, records=(), counts=counts, meta={"judge": {"model": "m"}, "prompt": {"sha256": "x"}})


def test_calibrated_records_the_summary_and_writes_it_beside_the_labels(tmp_path):
    out = tmp_path / "cal.qrels"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrated(_judgments(JUDGE), _inputs(), CalibrationOptions(), model="m", out=out)
    assert isinstance(cal, Calibration)
    meta = json.loads((tmp_path / "cal.qrels.meta.json").read_text())
    assert meta["calibration"]["kappa"] == pytest.approx(cal.agreement.kappa)
    assert cal.judgments.meta["calibration"]["documents_both"] == 8
    doc = cal.to_dict()
    assert doc["judge"] == {"settings": {"model": "m"}, "prompt": {"sha256": "x"}, "counts": cal.judgments.counts}
    assert doc["kappa_threshold"] == 0.4 and "near_chance" in doc and doc["a"] == "human"
    assert out.read_text().splitlines()[0] == "q1 0 d0 1"


def test_calibrated_refuses_a_judge_that_labelled_nothing_the_humans_judged(tmp_path):
    with pytest.raises(ConfigError) as caught:
        calibrated(_judgments(JUDGE.iloc[:0]), _inputs(), CalibrationOptions(), model="m", out=tmp_path / "o")
    assert str(caught.value) == (
        "the judge gave no label on a document the humans judged (8 pairs, 1 parse failures, 2 failed requests)"
    )
    assert not (tmp_path / "o").exists()


def test_judge_calibrate_on_the_command_line_is_calibrate_judge(tmp_path, judge_server, cli):
    from judge_server import write_candidates, write_qrels

    import toolkit as ts

    queries, human = {}, []
    for q in (1, 2, 3):
        for i in range(4):
            d = f"D{q}x{i}"
            judge_server.labels[d] = (q + i) % 4
            queries.setdefault(f"q{q}", []).append((d, f"[doc {d}] passage {i} of topic {q}."))
            human.append((f"q{q}", d, (q + i) % 4 if i != q else (q + i + 1) % 4))
    cand = write_candidates(tmp_path / "cand.json", queries)
    qrels = write_qrels(tmp_path / "human.qrels", human)
    runs = []
    for r, sign in (("up", 1), ("down", -1)):
        (tmp_path / f"{r}.trec").write_text(
            "".join(f"q{q} Q0 D{q}x{i} 0 {sign * (i + 1)} {r}\n" for q in (1, 2, 3) for i in range(4))
        )
        runs.append(str(tmp_path / f"{r}.trec"))
    flags = ["--alpha", "0.2", "--permutations", "64", "--seed", "3", "--correction", "bonferroni", "-m", "P.2"]
    res = cli(
        "judge", "--calibrate", "--qrels", qrels, "--candidates", cand, "--depth", "4", "--endpoint", judge_server.url,
        "--model", "test-judge", "--no-cache", "--no-progress", "--kappa-threshold", "-0.5", "--format", "json",
        "--rank", runs[0], "--rank", runs[1], *flags,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = ts.calibrate_judge(
            candidates=cand, qrels=qrels, runs=runs, model="test-judge", endpoint=judge_server.url, depth=4,
            cache=False, kappa_threshold=-0.5, alpha=0.2, permutations=64, seed=3, correction="bonferroni",
            measure="P.2",
        )  # fmt: skip
    doc = json.loads(res.stdout)
    assert doc == json.loads(json.dumps(cal.to_dict()))
    assert doc["documents_both"] == 12 and doc["ranking"]["test"]["permutations"] == 64
