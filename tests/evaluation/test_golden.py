"""The worked example of the evaluator issue under every nDCG variant.

Oracles: trec_eval 9.0.4 (Pyserini's bundled binary) where trec_eval can
express the variant (linear gain; exp and weight maps as ``ndcg.L=G``
parameters, equal to ndcg_cut.10 here since all 6 retrieved and 5 judged
documents lie within 10), and the formula written out in the test where it
cannot (Järvelin-Kekäläinen's discount).
"""

from __future__ import annotations

import json
import math

import pytest
from needs import lacking
from oracles import native_trec_eval, native_trec_eval_output

from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import Discount, EvalSettings, Gain, parse_measures

QRELS = [("q1", "D1", 3), ("q1", "D2", 2), ("q1", "D3", 1), ("q1", "D4", 1), ("q1", "D5", 1)]
RUN = [("q1", "D2", 10.0), ("q1", "X", 9.0), ("q1", "D1", 8.0), ("q1", "D3", 7.0), ("q1", "Y", 6.0), ("q1", "D4", 5.0)]
log2 = math.log2


@pytest.fixture()
def files(tmp_path):
    q, r = tmp_path / "qrels", tmp_path / "run"
    q.write_text("".join(f"{a} 0 {b} {c}\n" for a, b, c in QRELS))
    r.write_text("".join(f"{a} Q0 {b} {i} {s} tag\n" for i, (a, b, s) in enumerate(RUN, 1)))
    return q, r


def ndcg10(gain="linear", discount="log2"):
    res = evaluate(
        qrels_from_rows(QRELS),
        run_from_rows(RUN),
        parse_measures(["ndcg_cut.10"]),
        EvalSettings(gain=Gain.parse(gain), discount=Discount.parse(discount)),
    )
    return res.aggregate["ndcg_cut_10"]


def test_cli_prints_trec_eval_lines(cli, files):
    q, r = files
    res = cli("eval", "-m", "ndcg_cut.10", "-m", "recall.3,100", "--no-provenance", q, r)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "recall_3              \tall\t0.4000",
        "recall_100            \tall\t0.8000",
        "ndcg_cut_10           \tall\t0.7683",
    ]


def trec_eval_value(files, measure: str) -> str:
    if native_trec_eval() is None:
        lacking("Pyserini's jar has no trec_eval binary for this machine")
    status, out = native_trec_eval_output(["-m", measure, *files])
    assert status == 0
    return out.split("\t")[-1].strip()


def test_linear_log2_is_trec_eval(files):
    # D2(2) r1, X r2, D1(3) r3, D3(1) r4, Y r5, D4(1) r6
    dcg = 2 + 3 / log2(4) + 1 / log2(5) + 1 / log2(7)
    idcg = 3 + 2 / log2(3) + 1 / log2(4) + 1 / log2(5) + 1 / log2(6)
    assert ndcg10() == pytest.approx(dcg / idcg, abs=1e-12)
    assert f"{ndcg10():.4f}" == trec_eval_value(files, "ndcg_cut.10") == "0.7683"


def test_exponential_gain(files):
    dcg = 3 + 7 / log2(4) + 1 / log2(5) + 1 / log2(7)
    idcg = 7 + 3 / log2(3) + 1 / log2(4) + 1 / log2(5) + 1 / log2(6)
    assert ndcg10("exp") == pytest.approx(dcg / idcg, abs=1e-12)
    assert f"{ndcg10('exp'):.4f}" == trec_eval_value(files, "ndcg.1=1,2=3,3=7") == "0.7137"


def test_jk_discount_base2():
    # Järvelin-Kekäläinen, b=2: ranks 1 and 2 undiscounted, log2(rank) from rank 2 on (no trec_eval equivalent).
    dcg = 2 + 3 / log2(3) + 1 / log2(4) + 1 / log2(6)
    idcg = 3 + 2 + 1 / log2(3) + 1 / log2(4) + 1 / log2(5)
    assert ndcg10(discount="jk") == pytest.approx(dcg / idcg, abs=1e-12)
    assert round(ndcg10(discount="jk"), 4) == 0.7284
    assert ndcg10(discount="jk:2") == ndcg10(discount="jk")


def test_jk_discount_base10():
    # b=10: ranks 1..9 undiscounted, so every retrieved gain counts fully.
    dcg = 2 + 3 + 1 + 1
    idcg = 3 + 2 + 1 + 1 + 1
    assert ndcg10(discount="jk:10") == pytest.approx(dcg / idcg, abs=1e-12)


def test_weight_map_0_1_4_10(files):
    dcg = 4 + 10 / log2(4) + 1 / log2(5) + 1 / log2(7)
    idcg = 10 + 4 / log2(3) + 1 / log2(4) + 1 / log2(5) + 1 / log2(6)
    assert ndcg10("0:0,1:1,2:4,3:10") == pytest.approx(dcg / idcg, abs=1e-12)
    assert f"{ndcg10('0:0,1:1,2:4,3:10'):.4f}" == trec_eval_value(files, "ndcg.2=4,3=10") == "0.7071"
    assert ndcg10("0:0,1:1,2:2,3:3") == pytest.approx(ndcg10("linear"), abs=1e-15)


def test_gain_map_must_cover_every_label():
    with pytest.raises(Exception, match=r"does not cover label\(s\) \[3\]"):
        ndcg10("0:0,1:1,2:4")


@pytest.mark.parametrize("rank,expected", [(1, 1.0), (10, 1 / log2(11))])
def test_single_relevant_ndcg_vs_recall(rank, expected):
    run = [("q", f"N{i}", 100.0 - i) for i in range(1, 11) if i != rank] + [("q", "R", 100.0 - rank)]
    res = evaluate(qrels_from_rows([("q", "R", 1)]), run_from_rows(run), parse_measures(["ndcg_cut.10", "recall.100"]))
    assert res.aggregate["ndcg_cut_10"] == pytest.approx(expected, abs=1e-12)
    assert res.aggregate["recall_100"] == 1.0


def test_judged_at_k():
    res = evaluate(qrels_from_rows(QRELS), run_from_rows(RUN), parse_measures(["judged.3,10"]))
    assert res.aggregate["judged_3"] == pytest.approx(2 / 3)  # D2, X, D1
    assert res.aggregate["judged_10"] == pytest.approx(4 / 6)  # six retrieved, four judged


def test_json_has_provenance(cli, files):
    q, r = files
    res = cli("eval", "-m", "ndcg_cut.10", "--gain", "exp", "--format", "json", q, r)
    doc = json.loads(res.stdout)
    assert doc["all"]["ndcg_cut_10"] == pytest.approx(7.286884 / 10.210319, abs=1e-6)
    prov = doc["provenance"]
    assert prov["gain"].startswith("exp")
    assert prov["discount"].startswith("log2")
    assert prov["relevance_labels"] == {"1": 3, "2": 1, "3": 1}
    assert prov["queries_evaluated"] == 1 and prov["score_precision"] == "float32"
    assert len(prov["run"]["sha256"]) == 64 and len(prov["qrels"]["sha256"]) == 64


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "ndcg_cut.10", "--gain", "exp"],
        ["-m", "ndcg_cut.10", "--discount", "jk"],
        ["-m", "ndcg_cut.10", "--gain", "0:0,1:1,2:4,3:10"],
        ["-m", "judged.10"],
        ["-m", "judged.10", "--judged-compat", "pyserini"],
    ],
)
def test_worked_example_command_forms(cli, files, args):
    q, r = files
    res = cli("eval", *args, q, r)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("# implementation: twostage")
