"""The diagnosis page's "Labels from a judge" section: the policy, the labels of each origin
and the judge's calibration as its sidecar records it, in index.html and report.md, every value escaped.

Oracle: a hand-written judge sidecar whose calibration is hand-computed on a 3 x 3 confusion matrix (rows human,
columns judge) [[3, 1, 0], [0, 2, 1], [1, 0, 2]] (10 documents): p_o 0.7, p_e (16 + 9 + 9) / 100 = 0.34, kappa
0.36 / 0.66 = 0.5455; linear weights 1 - |i - j| / 2: p_o 0.8, p_e 0.55, kappa 0.25 / 0.45 = 0.5556; mean
|difference| (2 x 1 + 1 x 2) / 10 = 0.4. The label counts by hand from the two qrels files."""

from __future__ import annotations

import json
import re

import pytest

import toolkit as ts

CONFUSION = [[3, 1, 0], [0, 2, 1], [1, 0, 2]]
MODEL = "<script>alert(1)</script>|m*"
CALIBRATION = {
    "documents_both": 10,
    "labels": [0, 1, 2],
    "confusion": CONFUSION,
    "kappa": 0.36 / 0.66,
    "kappa_linear": 0.25 / 0.45,
    "mean_abs_difference": 0.4,
    "kendall_tau": 0.6,
    "tau_ap": 0.5,
    "flipped_pairs": [{"run_1": "a", "run_2": "b"}],
    "human_qrels": {"path": "h<i>.qrels", "sha256": "0"},
}


def test_hand_computed_calibration_is_right():
    import numpy as np

    from toolkit.quality.assessor_agreement import kappa_from_confusion

    conf = np.array(CONFUSION)
    assert kappa_from_confusion(conf, [0, 1, 2]) == pytest.approx(CALIBRATION["kappa"], abs=1e-12)
    assert kappa_from_confusion(conf, [0, 1, 2], "linear") == pytest.approx(CALIBRATION["kappa_linear"], abs=1e-12)


@pytest.fixture
def inputs(tmp_path):
    """Human: 4 queries x the even documents (16 labels); judge: the same queries, every document (32), so the
    fill policy takes 16 human and the judge's 16 labels of the odd documents."""
    human = tmp_path / "human.qrels"
    human.write_text("".join(f"q{q} 0 q{q}d{i} {(q + i) % 3}\n" for q in range(4) for i in range(0, 8, 2)))
    judge = tmp_path / "judge.qrels"
    judge.write_text("".join(f"q{q} 0 q{q}d{i} {(q * i) % 3}\n" for q in range(4) for i in range(8)))
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{q} Q0 q{q}d{i} 0 {8 - i} r\n" for q in range(4) for i in range(8)))
    rr = tmp_path / "rr.trec"
    rr.write_text("".join(f"q{q} Q0 q{q}d{i} 0 {i} rr\n" for q in range(4) for i in range(8)))
    return human, judge, run, rr


def _sidecar(judge, calibration):
    import hashlib

    meta = {
        "kind": "twostage judge",
        "judge": {"backend": "openai", "model": MODEL},
        "prompt": {"sha256": "abc123"},
        # the sidecar describes the file beside it only when it records that file's checksum
        "qrels": {"path": judge.name, "sha256": hashlib.sha256(judge.read_bytes()).hexdigest()},
    }
    if calibration is not None:
        meta["calibration"] = calibration
    (judge.parent / (judge.name + ".meta.json")).write_text(json.dumps(meta))


def _diagnose(human, judge, run, rr, out, policy="fill"):
    merged = ts.merge_qrels(str(human), str(judge), policy)
    with pytest.warns(ts.TwostageWarning):
        d = ts.diagnose(merged, {"bm25": str(run)}, {"rr": str(rr)}, permutations=50, bootstrap=200)
    d.write(out)
    return d, (out / "index.html").read_text(), (out / "report.md").read_text()


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_calibrated_judge_section(inputs, tmp_path):
    human, judge, run, rr = inputs
    _sidecar(judge, CALIBRATION)
    d, html, md = _diagnose(human, judge, run, rr, tmp_path / "diag")
    assert d.result.settings["qrels_origin"]["sources"]["judge"]["calibration"] == CALIBRATION
    sec = _section(html, "<h2>Labels from a judge</h2>", "<h2>")
    # labels of each origin: human 16 read, 16 used; judge 32 read, 16 used (the 16 on human-judged documents kept
    # the human label)
    rows = re.findall(r"<tr><td>(human|judge)</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td></tr>", sec)
    assert rows == [("human", "16", "16"), ("judge", "32", "16")]
    assert "Qrels policy fill" in sec and "16 judge labels on documents humans judged (the human label kept)" in sec
    # the confusion matrix, human rows x judge columns
    conf = _section(sec, 'id="judge-confusion"', "</table>")
    assert re.findall(r"<th>([^<]*)</th>", conf) == ["human \\ judge", "judge 0", "judge 1", "judge 2"]
    cells = re.findall(r"<tr><td>human (\d)</td>((?:<td[^>]*>\d+</td>)+)</tr>", conf)
    assert [(lab, re.findall(r">(\d+)<", r)) for lab, r in cells] == [
        ("0", ["3", "1", "0"]),
        ("1", ["0", "2", "1"]),
        ("2", ["1", "0", "2"]),
    ]
    stats = dict(
        re.findall(
            r"<tr><td>([^<]+)</td><td[^>]*>([^<]+)</td></tr>", _section(sec, 'id="judge-calibration"', "</table>")
        )
    )
    assert stats["documents both judged"] == "10"
    assert stats["Cohen&#x27;s kappa"] == "0.5455" and stats["kappa, linearly weighted"] == "0.5556"
    assert stats["mean |human − judge| label"] == "0.4000"
    assert stats["system ranking: Kendall&#x27;s tau (human vs judge)"] == "0.6000"
    assert stats["system ranking: tau_ap (human ranking as reference)"] == "0.5000"
    assert stats["significant pairs that flip"] == "1"
    # escaped: the model name and the human qrels path are text, never markup
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;|m*" in sec
    assert "h&lt;i&gt;.qrels" in sec and "No calibration" not in sec
    # report.md: the same values
    msec = _section(md, "## Labels from a judge", "\n## ")
    assert "| human 0 | 3 | 1 | 0 |" in msec and "| human 2 | 1 | 0 | 2 |" in msec
    assert "| Cohen's kappa | 0.5455 |" in msec and "| kappa, linearly weighted | 0.5556 |" in msec
    assert "| mean \\|human − judge\\| label | 0.4000 |" in msec and "| human | 16 | 16 |" in msec
    assert "\\<script\\>alert(1)\\</script\\>\\|m\\*" in msec and "<script>" not in msec  # elsewhere: code spans


def test_uncalibrated_judge_says_so_and_human_policy_hides_the_section(inputs, tmp_path):
    human, judge, run, rr = inputs
    _sidecar(judge, None)
    _, html, md = _diagnose(human, judge, run, rr, tmp_path / "diag")
    sec = _section(html, "<h2>Labels from a judge</h2>", "<h2>")
    assert "No calibration was recorded for the judge" in sec and 'id="judge-confusion"' not in sec
    assert (
        f"twostage judge --holes-only --calibrate-sample 100 --qrels {human} " in sec
        and "--model &lt;script&gt;" in sec
    )
    assert "No calibration was recorded for the judge" in md
    _, html, md = _diagnose(human, judge, run, rr, tmp_path / "human", policy="human")
    assert "Labels from a judge" not in html and "Labels from a judge" not in md
