"""The ir_measures providers' measures on real runs, on ties, at the edges, and as the provenance names them.

Oracles: ir_measures 0.4.3's providers themselves (gdeval.pl through perl, cwl_eval 1.0.12, the compat and
judged providers, MS MARCO's msmarco_eval, pyndeval 0.0.8), on the ten DL19/DL20 top-100 runs, on hand-built
runs with score ties, and hand-computed values.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from needs import required

ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
required("cwl", "cwl-eval is the oracle of ir_measures' cwl measures (pip install .[test])")
required("pyndeval", "pyndeval is the oracle of ir_measures' diversity measures (pip install .[test])")

import irm_oracle  # noqa: E402

import toolkit as ts  # noqa: E402
from toolkit.errors import UnknownMeasureError  # noqa: E402

RUNS = ["bm25", "bm25-rm3", "tasb", "openai-ada2", "splade-pp-ed"]
#: One measure of each family a provider other than pytrec_eval defines, and pytrec_eval's new parameters.
PEER = [
    "ERR@20",
    "nDCG(dcg='exp-log2')@10",
    "RBP(rel=1)",
    "RBP(p=0.9,rel=2)",
    "SDCG(max_rel=3)@10",
    "INST(max_rel=3)",
    "INSQ(max_rel=3)",
    "NERR8(max_rel=3)@10",
    "NERR9(max_rel=3)@10",
    "NERR10(max_rel=3)",
    "NERR11(T=2.0,max_rel=3)",
    "BPM(max_rel=3)@10",
    "Compat(p=0.8)",
    "Judged@10",
    "RR@10",
    "RR(rel=2)@10",
    "Accuracy(rel=2)",
    "P(rel=2,judged_only=True)@10",
    "nDCG(judged_only=True)@10",
    "nDCG(gains={0:0,1:1,2:4,3:10})@10",
    "NumRet(rel=1)",
    "SetRelP",
]
DIVERSITY = [
    "alpha_nDCG@10",
    "alpha_DCG@20",
    "ERR_IA@20",
    "nERR_IA@20",
    "AP_IA",
    "P_IA@10",
    "NRBP",
    "nNRBP",
    "StRecall@10",
]


@pytest.mark.parametrize("track", ["dl19", "dl20"])
@pytest.mark.parametrize("system", RUNS)
def test_peer_measures_equal_their_providers_on_every_run(msmarco, track, system):
    qrels = msmarco / f"qrels.{track}-passage.txt"
    irm_oracle.compare(
        [ir_measures.parse_measure(n) for n in PEER], qrels, msmarco / "runs" / f"run.{track}.{system}.top100.txt"
    )


def _diversity_qrels(src, out):
    """Diversity qrels from graded qrels: each query 2 to 5 subtopics (by a hash of its id), each judged document
    listed once per subtopic, relevant to some of them (by a hash of document and subtopic), as the Web track's
    qrels list a document."""
    lines = []
    for line in src.read_text().splitlines():
        q, _, d, r = line.split()
        for s in range(1, 2 + zlib.crc32(q.encode()) % 4 + 1):
            h = zlib.crc32(f"{d}/{s}".encode()) % 3
            label = int(r) if (int(r) > 0 and h == 0) or (int(r) >= 2 and h == 1) else 0
            lines.append(f"{q} {s} {d} {label}\n")
    out.write_text("".join(lines))
    return out


@pytest.mark.parametrize("track", ["dl19", "dl20"])
def test_diversity_measures_equal_pyndeval_on_dl_runs(msmarco, tmp_path, track):
    qrels = _diversity_qrels(msmarco / f"qrels.{track}-passage.txt", tmp_path / "div.qrels")
    ms = [ir_measures.parse_measure(n) for n in DIVERSITY]
    for system in ("bm25", "splade-pp-ed"):
        irm_oracle.compare(ms, qrels, msmarco / "runs" / f"run.{track}.{system}.top100.txt")


# ----------------------------------------------------------------------------------- ties
# 1: b and a tie at 3.0 (b first in the file), c and d tie at 1.0 (d first); 2 ties three documents.
TIES_QRELS = "1 0 a 2\n1 0 b 0\n1 0 c 1\n1 0 e 3\n2 0 x 1\n2 0 z 2\n"
TIES_RUN = (
    "1 Q0 b 1 3.0 t\n1 Q0 a 2 3.0 t\n1 Q0 d 3 1.0 t\n1 Q0 c 4 1.0 t\n1 Q0 f 5 0.5 t\n"
    "2 Q0 z 1 2.0 t\n2 Q0 y 2 2.0 t\n2 Q0 x 3 2.0 t\n"
)


@pytest.fixture()
def ties(tmp_path):
    (tmp_path / "qrels").write_text(TIES_QRELS)
    (tmp_path / "run").write_text(TIES_RUN)
    return tmp_path / "qrels", tmp_path / "run"


@pytest.mark.parametrize(
    "name",
    [
        "RR@2",  # msmarco: ties by document id ascending
        "Judged@1",  # judged: ties by document id ascending
        "Compat",  # compat: ties by document id ascending
        "RBP(rel=1)",  # cwl_eval: ties in the file's order
        "INST(max_rel=3)",
        "ERR@3",  # gdeval: ties by document id descending
        "nDCG(dcg='exp-log2')@2",
        "Accuracy@2",  # accuracy: ties in the file's order
    ],
)
def test_each_provider_breaks_ties_its_own_way(ties, name):
    irm_oracle.compare([ir_measures.parse_measure(name)], *ties)


def test_tie_orders_by_hand(ties):
    q, r = ties
    ev = ts.evaluate(q, r, ["RR@2", "RR", "RBP(p=0.5,rel=2)", "ERR@1"], complete=True)
    pq = ev.per_query
    # msmarco (a before b): a at 1 -> 1; trec_eval's recip_rank (b before a): a at 2 -> 1/2
    assert pq.loc["1", "RR@2"] == 1.0 and pq.loc["1", "RR"] == 0.5
    # 2: msmarco x y z -> x (label 1) at 1; trec_eval z y x -> z at 1
    assert pq.loc["2", "RR@2"] == 1.0 and pq.loc["2", "RR"] == 1.0
    # cwl_eval, file order b a d c f: label >= 2 is a at 2 -> W_2 = 0.5^1 * 0.5 / (1 - 0.5^1000)
    assert pq.loc["1", "RBP(p=0.5,rel=2)"] == pytest.approx(0.25, abs=1e-15)
    # gdeval, b before a: b's label 0 at rank 1 -> ERR@1 = 0; q2: z (label 2) first -> (2^2 - 1) / 16
    assert pq.loc["1", "ERR@1"] == 0.0 and pq.loc["2", "ERR@1"] == 3 / 16


def test_provider_measures_compare_scores_as_doubles(tmp_path):
    """Scores apart beyond float32 precision: trec_eval 9 (float32) ties them, the providers (Python, Perl
    doubles) do not."""
    (tmp_path / "q").write_text("1 0 a 1\n1 0 b 0\n")
    (tmp_path / "r").write_text("1 Q0 a 1 1.00000002 t\n1 Q0 b 2 1.00000001 t\n")
    ev = ts.evaluate(tmp_path / "q", tmp_path / "r", ["RR@1", "RR", "ERR@1"])
    assert ev.summary["RR@1"] == 1.0  # a first, as msmarco sorts doubles
    assert ev.summary["RR"] == 0.5  # trec_eval 9: a float32 tie, broken by document id descending (b first)
    assert ev.summary["ERR@1"] == 1 / 16


# ----------------------------------------------------------------------------------- edges
EDGE_QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 0\n3 0 d 1\n"
EDGE_RUN = "1 Q0 a 1 2 t\n1 Q0 b 2 1 t\n2 Q0 c 1 1 t\n2 Q0 x 2 0.5 t\n"


def test_no_relevant_document_and_missing_queries(tmp_path):
    """2 has no relevant document, q3 is not in the run: 0 each (ir_measures' default), -c counting 3."""
    (tmp_path / "q").write_text(EDGE_QRELS)
    (tmp_path / "r").write_text(EDGE_RUN)
    names = ["ERR@10", "RBP(rel=1)", "SDCG(max_rel=1)@5", "INST(max_rel=1)", "BPM(max_rel=1)@5", "Compat", "RR@5"]
    ev = ts.evaluate(tmp_path / "q", tmp_path / "r", names, complete=True)
    for n in names:
        assert ev.per_query.loc["2", n] == 0.0 and ev.per_query.loc["3", n] == 0.0, n
    irm_oracle.compare([ir_measures.parse_measure(n) for n in names], tmp_path / "q", tmp_path / "r")
    # by hand, query 1 (a relevant at 1, b not): ERR@10 = (2^1 - 1) / 16; RR@5 = 1; Compat: ideal [a] = run's first
    assert ev.per_query.loc["1", "ERR@10"] == 1 / 16
    assert ev.per_query.loc["1", "RR@5"] == 1.0 and ev.per_query.loc["1", "Compat"] == 1.0


def test_accuracy_is_undefined_where_ir_measures_has_no_value(tmp_path):
    """Accuracy: query 1 relevant then non-relevant -> 1; query 2 nothing relevant -> no value; every retrieved document
    relevant -> no value (ir_measures divides by zero there). The mean is over the queries with a value."""
    (tmp_path / "q").write_text("1 0 a 1\n1 0 b 0\n2 0 c 0\n4 0 e 1\n")
    (tmp_path / "r").write_text("1 Q0 b 1 1 t\n1 Q0 a 2 2 t\n1 Q0 z 3 0 t\n2 Q0 c 1 1 t\n4 Q0 e 1 1 t\n")
    ev = ts.evaluate(tmp_path / "q", tmp_path / "r", ["Accuracy"])
    pq = ev.per_query["Accuracy"]
    assert pq["1"] == 1.0 and math.isnan(pq["2"]) and math.isnan(pq["4"]) and ev.summary["Accuracy"] == 1.0
    with pytest.raises(ZeroDivisionError):
        list(ir_measures.iter_calc([ir_measures.Accuracy], ir_measures.read_trec_qrels(str(tmp_path / "q")),
                                   ir_measures.read_trec_run(str(tmp_path / "r"))))  # fmt: skip
    with pytest.raises(UnknownMeasureError, match="defined on every query"):
        ts.compare(tmp_path / "q", {"a": tmp_path / "r", "b": tmp_path / "r"}, measures=["Accuracy"])


@pytest.mark.parametrize(
    ("qrels", "name", "why"),
    [
        ("1 0 a 5\n", "ERR@10", "label above 4"),  # gdeval.pl's $MAX_JUDGMENT
        ("1 0 a 1\n", "SDCG(min_rel=3,max_rel=3)@10", "min_rel must be less than max_rel"),
        ("1 0 a 1\n", "alpha_nDCG@30", "cutoffs 1 to 20"),  # ndeval's DEPTH
        ("1 0 a 1\n", "RBP(p=1.5,rel=1)", "persistence"),
    ],
)
def test_what_the_providers_refuse_is_refused(tmp_path, qrels, name, why):
    (tmp_path / "q").write_text(qrels)
    (tmp_path / "r").write_text("1 Q0 a 1 1 t\n")
    with pytest.raises(UnknownMeasureError, match=why):
        ts.evaluate(tmp_path / "q", tmp_path / "r", [name])


# ----------------------------------------------------------------------------------- provenance
def test_provenance_names_each_definition(msmarco, cli):
    qrels, run = msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.bm25.top100.txt"
    res = cli("eval", "-m", "ERR@20", "-m", "RBP(p=0.8,rel=1)", "-m", "nDCG@10", "-m", "Compat", qrels, run)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("# definitions: "))
    assert '"ERR@20": "ERR@20 as gdeval: gains 2^label - 1 over 16, labels 0..4; ties by document id descending' in line
    assert '"RBP(rel=1)": "RBP(rel=1) as cwl_eval: binary gains (label >= 1), p=0.8, 1000 positions; ties in' in line
    assert '"Compat": "Compat as compat: ties by document id ascending, scores as float64"' in line
    assert "ndcg_cut_10" not in line  # trec_eval's own measures: the semantics line says so
    plain = cli("eval", "-m", "nDCG@10", qrels, run)
    assert "# definitions" not in plain.stdout


def test_each_group_names_its_own_definitions(diversity, cli):
    """The same diversity measure plain and with judged_only=True (a -J group): each keeps its definition, and
    the -J one states its settings."""
    import json

    q, r = diversity
    res = cli("eval", "--format", "json", "-m", "alpha_nDCG(judged_only=True)@2", "-m", "alpha_nDCG@2", q, r)
    prov = json.loads(res.stdout)["provenance"]
    assert prov["definitions"] == {
        "alpha_nDCG@2": "alpha_nDCG@2 as pyndeval: ties by document id ascending, scores as float64",
        "alpha_nDCG(judged_only=True)@2": "alpha_nDCG(judged_only=True)@2 as pyndeval: ties by document id "
        "ascending, scores as float64",
    }
    assert prov["measure_settings"]["alpha_nDCG(judged_only=True)@2"]["judged_only"] is True


def test_measures_command_lists_sources_and_ir_measures_names(cli):
    res = cli("measures")
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    row = {line.split()[0]: line for line in lines if line and not line.startswith(" ")}
    assert row["ndcg_cut"].endswith("trec_eval 9/10") and row["rbp"].endswith("trec_eval 10")
    assert row["judged"].endswith("twostage") and row["ERR"].endswith("ir_measures: gdeval")
    assert row["RBP"].endswith("ir_measures: cwl_eval") and row["alpha_nDCG"].endswith("ir_measures: pyndeval")
    names = [line.strip() for line in lines if line.startswith("  ")]
    assert len(names) == len(ir_measures.measures.registry) - 12  # synonyms and presets on their measure's line
    assert "ERR(cutoff): gdeval[cutoff given]: ERR" in names
    defined = cli("measures", "RBP(rel=1)")
    assert "source: ir_measures: cwl_eval" in defined.stdout and "1 - p^1000" in defined.stdout


# ----------------------------------------------------------------------------------- diversity qrels
@pytest.fixture()
def diversity(tmp_path):
    (tmp_path / "q").write_text("q1 1 a 1\nq1 2 a 0\nq1 1 b 0\nq1 2 b 1\nq2 1 c 1\nq2 2 c 1\n")
    (tmp_path / "r").write_text("q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\nq2 Q0 c 1 1 t\n")
    return tmp_path / "q", tmp_path / "r"


def test_diversity_qrels_by_hand(diversity):
    """q1: a covers subtopic 1, b subtopic 2: both new, each gains 1; S = 2. alpha-DCG@2 = (1 + 1 / log2(3))
    over the 'ideal ideal' 2 + 2 * 0.5 / log2(3); the greedy ideal is the run's order, so alpha-nDCG@2 = 1.
    q2: c covers both subtopics: gain 2 at rank 1, ERR-IA@1 = 2 (ndeval does not normalise position 1)."""
    q, r = diversity
    ev = ts.evaluate(q, r, ["alpha_DCG@2", "alpha_nDCG@2", "ERR_IA@1", "StRecall@1", "P_IA@2"])
    pq = ev.per_query
    log2_3 = math.log(3.0) / math.log(2.0)
    assert pq.loc["q1", "alpha_DCG@2"] == pytest.approx((1 + 1 / log2_3) / (2 + 1 / log2_3), abs=1e-15)
    assert pq.loc["q1", "alpha_nDCG@2"] == pytest.approx(1.0, abs=1e-15)
    assert pq.loc["q2", "ERR_IA@1"] == 2.0 and pq.loc["q1", "StRecall@1"] == 0.5
    assert pq.loc["q1", "P_IA@2"] == 2 / (2 * 2) and pq.loc["q2", "P_IA@2"] == 2 / (2 * 2)
    irm_oracle.compare([ir_measures.parse_measure(n) for n in ["alpha_DCG@2", "alpha_nDCG@2", "ERR_IA@1"]], q, r)


def test_diversity_and_ordinary_qrels_are_not_mixed(diversity, cli, msmarco):
    q, r = diversity
    with pytest.raises(UnknownMeasureError, match="needs diversity qrels"):
        ts.evaluate(q, r, ["alpha_nDCG@10", "P@10"])  # one call reads one kind of judgments
    with pytest.raises(UnknownMeasureError, match=r"needs (-R qrels|rel_format='qrels')"):
        ts.evaluate(q, r, ["P@10"], rel_format="qrels_div")
    res = cli("eval", "-m", "P@10", q, r)  # ordinary qrels read: a document twice, the error names -R qrels_div
    assert res.exit_code == 1 and "-R qrels_div" in res.stderr and "twice for query 'q1'" in res.stderr
    res = cli("eval", "-m", "alpha_nDCG@10", "-m", "P@10", q, r)
    assert res.exit_code == 1 and res.stderr.startswith("Error: alpha_nDCG@10 needs diversity qrels")
    res = cli("eval", "--no-provenance", "-R", "qrels_div", "-m", "alpha_nDCG@2", q, r)
    assert res.exit_code == 0 and res.stdout == "alpha_nDCG@2          \tall\t1.0000\n"
    dl19 = msmarco / "qrels.dl19-passage.txt"
    with pytest.warns(UserWarning, match="single subtopic"):  # ordinary qrels read as diversity qrels
        ts.evaluate(dl19, msmarco / "runs" / "run.dl19.bm25.top100.txt", ["alpha_nDCG@10"])


def test_diversity_qrels_from_memory(diversity):
    """The same judgments as a DataFrame with a subtopic column and as ir_measures Qrels (iteration = subtopic)."""
    import pandas as pd

    q, r = diversity
    rows = [line.split() for line in q.read_text().splitlines()]
    frame = pd.DataFrame({"query_id": [x[0] for x in rows], "subtopic": [x[1] for x in rows],
                          "doc_id": [x[2] for x in rows], "relevance": [int(x[3]) for x in rows]})  # fmt: skip
    want = ts.evaluate(q, r, ["alpha_nDCG@2", "NRBP"]).summary
    assert ts.evaluate(frame, r, ["alpha_nDCG@2", "NRBP"]).summary.equals(want)
    assert ts.evaluate(list(ir_measures.read_trec_qrels(str(q))), r, ["alpha_nDCG@2", "NRBP"]).summary.equals(want)


def test_fixture_values_are_the_oracles(tmp_path):
    """The fixture (tests/fixtures/diversity: five Web-track-like queries, 2 to 6 subtopics, a query nothing is
    relevant to, a subtopic nothing is relevant to, a junk label -2, ties, a judged query not retrieved) gives
    pyndeval's values through ``twostage eval`` too."""
    from pathlib import Path

    fx = Path(__file__).resolve().parents[1] / "fixtures" / "diversity"
    ev = ts.evaluate(fx / "qrels.diversity.txt", fx / "run.diversity.txt", ["alpha_nDCG@20", "nNRBP"], complete=True)
    assert set(ev.per_query.index) == {"151", "152", "153", "154", "155"}
    assert ev.per_query.loc["153", "alpha_nDCG@20"] == 0.0  # judged, not retrieved
    assert ev.per_query.loc["155", "nNRBP"] == 0.0  # nothing relevant: ndeval's 0/0, twostage's 0
    assert np.isfinite(ev.summary.to_numpy()).all()
