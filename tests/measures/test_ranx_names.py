"""ranx's metric names: read with ranx's definitions, equal to ranx 0.3.21 itself per query and mean, hand-computed
edge cases, and docs/evaluate.md's side-by-side table recomputed with every command it shows.

Oracles: ranx 0.3.21 (``ranx.evaluate``) on the DL19/DL20 runs of ../shared/data and on hand-built inputs,
ir_measures 0.4.3 for the table's ir_measures figures, and values computed by hand.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from needs import required

import toolkit as ts
from toolkit.errors import TwostageWarning, UnknownMeasureError
from toolkit.measures.names import parse_measures
from toolkit.measures.registry import REGISTRY, Params

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluate.md"

#: Every ranx metric, with and without a cutoff and a level, as a ranx user types them.
RANX_NAMES = [
    "hits@10",
    "hits",
    "hit_rate@10",
    "hit_rate",
    "precision@10-l2",
    "precision",
    "recall@100-l2",
    "recall-l1",
    "f1@10",
    "f1@20-l2",
    "f1",
    "r-precision",
    "r-precision-l2",
    "mrr-l2",
    "mrr@10-l2",
    "mrr-l1",
    "map@100-l2",
    "map-l1",
    "ndcg@10-l2",
    "ndcg@10-l1",
    "ndcg_burges@10",
    "ndcg_burges",
    "ndcg_burges@5-l3",
    "dcg@10",
    "dcg@5-l3",
    "dcg-l1",
    "dcg_burges@10",
    "dcg_burges",
    "bpref-l1",
    "bpref-l2",
    "rbp.8",
    "rbp.95-l2",
    "rbp.5",
]
TIE_FREE = [
    "run.dl19.bm25.top100.txt",
    "run.dl19.bm25-rm3.top100.txt",
    "run.dl19.openai-ada2.top100.txt",
    "run.dl20.bm25-rm3.top100.txt",
    "run.dl20.openai-ada2.top100.txt",
]


def _qrels(run_name: str) -> str:
    return "qrels.dl19-passage.txt" if ".dl19." in run_name else "qrels.dl20-passage.txt"


def ranx_values(qrels, run, names) -> dict[str, np.ndarray]:
    """ranx's per-query values (in the run's sorted query order) of each name."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety notes
        got = ranx.evaluate(qrels, run, list(names), return_mean=False)
    if len(names) == 1:  # one metric: ranx returns its values alone
        got = {names[0]: got}
    return {n: np.asarray(v, dtype=np.float64) for n, v in got.items()}


# ------------------------------------------------------------------ names
@pytest.mark.parametrize(
    ("typed", "name", "family", "cutoff", "params"),
    [
        ("ndcg_burges@10", "ndcg_burges@10", "ranx_ndcg_burges", 10, ()),
        ("NDCG_Burges@010", "ndcg_burges@10", "ranx_ndcg_burges", 10, ()),
        ("hits@10", "hits@10", "ranx_hits", 10, ()),
        ("hit_rate", "hit_rate", "ranx_hit_rate", None, ()),
        ("f1", "f1", "ranx_f1", None, ()),
        ("r-precision", "r-precision", "ranx_r-precision", None, ()),
        ("precision", "precision", "ranx_precision", None, ()),
        ("dcg@10", "dcg@10", "ranx_dcg", 10, ()),
        ("mrr-l2", "mrr-l2", "ranx_mrr", None, (("l", 2),)),
        ("precision@10-l2", "precision@10-l2", "ranx_precision", 10, (("l", 2),)),
        ("recall@100-l2", "recall@100-l2", "ranx_recall", 100, (("l", 2),)),
        ("map@100-l2", "map@100-l2", "ranx_map", 100, (("l", 2),)),
        ("ndcg@10-l1", "ndcg@10-l1", "ranx_ndcg", 10, (("l", 1),)),
        ("bpref-l2", "bpref-l2", "ranx_bpref", None, (("l", 2),)),
        ("rbp.8", "rbp.8", "ranx_rbp", None, (("p", 0.8),)),
        ("rbp.80-l2", "rbp.8-l2", "ranx_rbp", None, (("l", 2), ("p", 0.8))),
        ("rbp.05", "rbp.05", "ranx_rbp", None, (("p", 0.05),)),
    ],
)
def test_ranx_names_are_read_with_ranx_definitions(typed, name, family, cutoff, params):
    (m,) = parse_measures([typed])
    assert (m.name, m.family, m.cutoff, m.params) == (name, family, cutoff, params)
    assert m.spec.source == "ranx" and m.spec.params is Params.RANX


@pytest.mark.parametrize(
    ("typed", "printed"),
    [
        ("ndcg@10", ["ndcg_cut_10"]),
        ("ndcg", ["ndcg"]),
        ("map@100", ["map_cut_100"]),
        ("map", ["map"]),
        ("recall@100", ["recall_100"]),
        ("precision@10", ["P_10"]),
        ("mrr", ["recip_rank"]),
        ("bpref", ["bpref"]),
        ("dcg", ["dcg"]),
        ("rbp", ["rbp"]),
    ],
)
def test_ranx_spellings_read_before_keep_their_meaning(typed, printed):
    assert [m.name for m in parse_measures([typed], 10)] == printed


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("rbp@8", "ambiguous: ranx reads it as RBP with persistence 0.8 (write rbp.8), ir_measures as RBP@8"),
        ("bpref@10", "ranx ignores a cutoff on bpref"),
        ("r-precision@5-l2", "write r-precision-l2"),
        ("hits@0", "ranx reads @0 as the whole ranking; write hits without a cutoff"),
        ("ndcg_burges@10-lx", "unknown measure"),
        ("ranx_rbp", "unknown measure 'ranx_rbp'"),  # a registry name, not ranx's: it names no persistence
        ("ranx_ndcg_burges", "unknown measure 'ranx_ndcg_burges'"),
    ],
)
def test_ranx_names_that_cannot_mean_one_thing_are_refused(typed, why):
    with pytest.raises(UnknownMeasureError, match=re.escape(why)):
        parse_measures([typed])


def test_dcg_under_trec_eval_9_names_ranx_spelling():
    with pytest.raises(UnknownMeasureError, match="ranx's dcg is dcg-l1"):
        parse_measures(["dcg"], 9)
    with pytest.raises(UnknownMeasureError, match=r"pass trec_eval=10\)$"):  # ranx's rbp.P is another number
        parse_measures(["rbp"], 9)


def test_a_typo_of_a_ranx_name_gets_the_ranx_name():
    with pytest.raises(UnknownMeasureError, match=re.escape("'ndcg_burges@10' (= ranx's ndcg_burges@10)")):
        parse_measures(["ndcg_burge@10"])


def ranx_metric_names() -> set[str]:
    """Every metric name ranx's evaluate accepts, read from ranx itself: the names ``ranx.metrics.metric_switch``
    compares ``metric`` with (ranx keeps no list of them; the switch is what decides)."""
    required("ranx", "ranx is the interop oracle (pip install .[test])")
    import ast
    import inspect
    import textwrap

    from ranx import metrics

    tree = ast.parse(textwrap.dedent(inspect.getsource(metrics.metric_switch)))
    names = {
        node.comparators[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Name)
        and node.left.id == "metric"
        and isinstance(node.comparators[0], ast.Constant)
    }
    for name in names:  # each is one ranx dispatches (the reading above found names, not something else)
        assert callable(metrics.metric_switch(name)), name
    assert len(names) >= 10, names
    return names


def test_every_ranx_metric_is_one_registry_family():
    ranx = {f: spec for f, spec in REGISTRY.items() if spec.source == "ranx"}
    assert {spec.label for spec in ranx.values()} == ranx_metric_names()
    assert all(spec.binary and not spec.gain and spec.since == 0 for spec in ranx.values())


def test_every_ranx_metric_is_among_the_names_checked_against_ranx():
    # the spellings compared with ranx below cover every metric ranx has: a metric added to ranx fails here
    bases = {re.sub(r"(@\d+)?(-l\d+)?$", "", name) for name in RANX_NAMES}
    bases = {"rbp" if b.startswith("rbp.") else b for b in bases}
    assert bases == ranx_metric_names()


# ------------------------------------------------------------------ against ranx on real runs
@pytest.fixture(scope="module")
def theirs_on_dl(msmarco):
    """ranx's per-query values of every name on each tie-free run (numba compiles ranx once per process)."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    out = {}
    for name in TIE_FREE:
        q = ranx.Qrels.from_file(str(msmarco / _qrels(name)), kind="trec")
        r = ranx.Run.from_file(str(msmarco / "runs" / name), kind="trec")
        out[name] = (list(r.get_query_ids()), ranx_values(q, r, RANX_NAMES))
    return out


@pytest.mark.slow  # ranx compiles its metrics with numba on first use
@pytest.mark.parametrize("run_name", TIE_FREE)
def test_values_equal_ranx_per_query_and_mean_on_runs_without_ties(msmarco, theirs_on_dl, run_name):
    qids, theirs = theirs_on_dl[run_name]
    ev = ts.evaluate(msmarco / _qrels(run_name), msmarco / "runs" / run_name, RANX_NAMES)
    for name in RANX_NAMES:
        ours = ev.per_query[name].reindex(qids).to_numpy()
        assert np.abs(ours - theirs[name]).max() < 1e-9, name
        assert ev.summary[name] == pytest.approx(theirs[name].mean(), abs=1e-9), name


@pytest.mark.slow
@pytest.mark.parametrize("run_name", ["run.dl19.splade-pp-ed.top100.txt", "run.dl20.tasb.top100.txt"])
def test_runs_with_ties_equal_ranx_once_their_scores_are_distinct_in_trec_order(msmarco, run_name):
    """ranx leaves tied documents in its unstable sort's order, twostage in trec_eval's: given distinct scores in
    trec_eval's order, ranx sees that order too and the values agree."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    frame = ts.Run.read(msmarco / "runs" / run_name).to_frame()
    frame = frame.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, False], kind="stable")
    frame["score"] = -np.arange(len(frame), dtype=float)  # distinct, trec_eval's order kept
    ev = ts.evaluate(msmarco / _qrels(run_name), frame, RANX_NAMES)
    q = ranx.Qrels.from_file(str(msmarco / _qrels(run_name)), kind="trec")
    r = ranx.Run(ts.Run.from_frame(frame).to_dict())
    theirs = ranx_values(q, r, RANX_NAMES)
    qids = list(r.get_query_ids())
    for name in RANX_NAMES:
        assert np.abs(ev.per_query[name].reindex(qids).to_numpy() - theirs[name]).max() < 1e-9, name


# ------------------------------------------------------------------ by hand
QRELS = (
    "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq1 0 d 3\n"  # d relevant, never retrieved
    "q2 0 x 1\nq2 0 y 0\nq2 0 z -1\n"  # z: a negative label (judged non-relevant for ranx, unjudged for trec_eval)
    "q3 0 u 0\n"  # nothing relevant
    "q4 0 v 1\nq4 0 w 2\n"  # nothing judged non-relevant
    "q5 0 t 1\n"  # judged, absent from the run
)
RUN = (
    "q1 Q0 a 1 3.0 r\nq1 Q0 e 2 2.5 r\nq1 Q0 c 3 2.0 r\nq1 Q0 b 4 1.0 r\n"
    "q2 Q0 z 1 3.0 r\nq2 Q0 x 2 2.0 r\nq2 Q0 y 3 1.0 r\n"
    "q3 Q0 u 1 1.0 r\nq3 Q0 s 2 0.5 r\n"
    "q4 Q0 w 1 2.0 r\nq4 Q0 v 2 1.0 r\n"
)
LOG2_3 = math.log2(3)


@pytest.fixture()
def tiny(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return tmp_path / "qrels", tmp_path / "run"


@pytest.mark.parametrize(
    ("name", "want"),
    [
        # q1 at level 1: a(2) e(unjudged) c(1) b(0); R = 3 (d never retrieved)
        ("hits@2", {"q1": 1, "q2": 1, "q3": 0, "q4": 2}),
        ("precision@2", {"q1": 0.5, "q2": 0.5, "q3": 0, "q4": 1}),
        ("recall@2", {"q1": 1 / 3, "q2": 1, "q3": 0, "q4": 1}),
        ("f1@2", {"q1": 0.4, "q2": 2 / 3, "q3": 0, "q4": 1}),
        ("precision", {"q1": 0.5, "q2": 1 / 3, "q3": 0, "q4": 1}),
        ("r-precision", {"q1": 2 / 3, "q2": 0, "q3": 0, "q4": 1}),
        ("mrr-l1", {"q1": 1, "q2": 0.5, "q3": 0, "q4": 1}),
        ("mrr-l2", {"q1": 1, "q2": 0, "q3": 0, "q4": 1}),
        ("map-l1", {"q1": (1 + 2 / 3) / 3, "q2": 0.5, "q3": 0, "q4": 1}),
        ("dcg@3", {"q1": 2 + 1 / 2, "q2": 1 / LOG2_3, "q3": 0, "q4": 2 + 1 / LOG2_3}),
        ("ndcg@3-l1", {"q1": 2.5 / (3 + 2 / LOG2_3 + 1 / 2), "q2": 1 / LOG2_3, "q3": 0, "q4": 1}),
        ("ndcg@3-l2", {"q1": 2 / (3 + 2 / LOG2_3), "q2": 0, "q3": 0, "q4": 1}),
        ("dcg_burges@3", {"q1": 3 + 1 / 2, "q2": 1 / LOG2_3, "q3": 0, "q4": 3 + 1 / LOG2_3}),
        ("rbp.5", {"q1": 0.5 * (2 + 1 * 0.25), "q2": 0.5 * 0.5, "q3": 0, "q4": 0.5 * (2 + 0.5)}),
        # bpref: q1's unjudged e is skipped; q2's z (label -1) is judged non-relevant above x; q4 has no
        # judged non-relevant document: ranx's 0/0
        ("bpref-l1", {"q1": 2 / 3, "q2": 0.0, "q3": 0, "q4": math.nan}),
    ],
)
def test_hand_computed_values(tiny, name, want):
    qrels, run = tiny
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TwostageWarning)
        got = ts.evaluate(qrels, run, name).per_query[name].to_dict()
    assert set(got) == set(want)  # q5, absent from the run, is left out as trec_eval does
    for q, v in want.items():
        assert got[q] == pytest.approx(v, abs=1e-12, nan_ok=True), (name, q)


@pytest.mark.slow
def test_hand_inputs_equal_ranx(tiny):
    """The same inputs through ranx (q5 empty, as make_comparable gives it); -c counts q5 as 0 as ranx does."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    qrels, run = tiny
    # not bpref: q3 has no relevant document, and ranx's bpref stops there (the test below)
    names = [n for n in RANX_NAMES if not n.startswith("bpref")] + ["hits@2", "ndcg@3-l2", "f1@2", "rbp.5-l2"]
    q = ranx.Qrels.from_file(str(qrels), kind="trec")
    r = ranx.Run.from_file(str(run), kind="trec").make_comparable(q)
    theirs = ranx_values(q, r, names)
    ev = ts.evaluate(qrels, run, names, complete=True)
    for name in names:
        ours = ev.per_query[name].reindex(list(r.get_query_ids())).to_numpy()
        assert np.abs(ours - theirs[name]).max() < 1e-12, name
        assert ev.summary[name] == pytest.approx(theirs[name].mean(), abs=1e-12), name


@pytest.mark.slow
def test_bpref_of_the_queries_after_one_without_relevant_documents_is_not_ranx_zero(tmp_path):
    """ranx 0.3.21 divides by R = 0 in its bpref loop (one thread under 10 queries), which stops the loop and leaves
    0 for every later query; twostage gives the query without relevant documents 0 and the others their value."""
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    qrels = {"a": {"x": 2, "y": 0}, "b": {"v": 1}, "c": {"v": 2, "w": 0}}
    run = {"a": {"x": 2.0, "y": 1.0}, "b": {"v": 1.0}, "c": {"v": 2.0, "w": 1.0}}
    theirs = ranx_values(ranx.Qrels(qrels), ranx.Run(run), ["bpref-l2"])["bpref-l2"]
    ours = ts.evaluate(qrels, run, "bpref-l2").per_query["bpref-l2"].to_dict()
    assert theirs.tolist() == [1.0, 0.0, 0.0]
    assert ours == {"a": 1.0, "b": 0.0, "c": 1.0}  # c: its relevant v first, nothing judged above it


def test_bpref_without_judged_non_relevant_is_nan_with_a_warning(tiny):
    qrels, run = tiny
    with pytest.warns(TwostageWarning, match=r"bpref-l1: 2 judged queries have no label below 1 \(e.g. 'q4', 'q5'\)"):
        ev = ts.evaluate(qrels, run, ["bpref-l1", "bpref"])
    assert math.isnan(ev.summary["bpref-l1"]) and ev.per_query.loc["q4", "bpref"] == 1.0  # trec_eval's: 1 each
    assert ev.per_query.loc["q2", "bpref"] == 1.0  # trec_eval skips z (label -1); ranx counts it: 0


def test_ties_follow_trec_eval_order(tmp_path):
    """Equal scores: document id descending (b before a), as trec_eval; the provenance says so."""
    (tmp_path / "q").write_text("t 0 a 1\nt 0 b 0\n")
    (tmp_path / "r").write_text("t Q0 a 1 1.0 x\nt Q0 b 2 1.0 x\n")
    ev = ts.evaluate(tmp_path / "q", tmp_path / "r", ["mrr-l1", "hits@1", "ndcg_burges@1"])
    assert ev.summary.to_dict() == {"mrr-l1": 0.5, "hits@1": 0.0, "ndcg_burges@1": 0.0}
    assert "score ties in trec_eval's order" in ev.provenance["definitions"]["hits@1"]


def test_a_level_suffix_overrides_the_command_level(tiny):
    qrels, run = tiny
    at2 = ts.evaluate(qrels, run, ["ndcg_burges@3", "mrr-l1", "rbp.5"], relevance_level=2)
    own = ts.evaluate(qrels, run, ["ndcg_burges@3-l2", "mrr-l1", "rbp.5-l2"])
    assert at2.summary["ndcg_burges@3"] == own.summary["ndcg_burges@3-l2"]
    assert at2.summary["rbp.5"] == own.summary["rbp.5-l2"]
    assert at2.summary["mrr-l1"] == own.summary["mrr-l1"] == 2.5 / 4
    assert at2.provenance["relevance_level_applies_to"] == ["ndcg_burges@3", "rbp.5"]  # not mrr-l1
    assert "labels >= 1 relevant;" in at2.provenance["definitions"]["mrr-l1"]
    assert "labels >= 2 relevant (-l)" in at2.provenance["definitions"]["rbp.5"]


def test_ir_measures_exp_ndcg_without_a_cutoff_is_ranx_ndcg_burges_at_level_1(tiny):
    """ir_measures hands nDCG(dcg='exp-log2') without a cutoff to its ranx provider, which asks ranx for ndcg_burges
    at ranx's default level 1: twostage's -l does not move it. q1 at level 1: a (2^2 - 1) at rank 1 and c (2^1 - 1)
    at rank 3, over the ideal d, a, c; at level 2 only a counts, over d, a."""
    qrels, run = tiny
    ev = ts.evaluate(qrels, run, ["nDCG(dcg='exp-log2')", "ndcg_burges"], relevance_level=2)
    q1 = ev.per_query.loc["q1"]
    assert q1["nDCG(dcg='exp-log2')"] == pytest.approx((3 + 1 / 2) / (7 + 3 / LOG2_3 + 1 / 2), abs=1e-12)
    assert q1["ndcg_burges"] == pytest.approx(3 / (7 + 3 / LOG2_3), abs=1e-12)
    said = ev.provenance["definitions"]["nDCG(dcg='exp-log2')"]
    assert said.startswith("nDCG(dcg='exp-log2') as ranx 0.3.21: gain 2^label - 1") and "labels >= 1 relevant;" in said
    assert ev.provenance["relevance_level_applies_to"] == ["ndcg_burges"]


def test_ranx_measures_compare_scores_as_doubles(tmp_path):
    """Scores apart beyond float32 precision: trec_eval 9 (float32, the default) ties them, ranx (doubles) does
    not."""
    (tmp_path / "q").write_text("1 0 a 1\n1 0 b 0\n")
    (tmp_path / "r").write_text("1 Q0 a 1 1.00000002 t\n1 Q0 b 2 1.00000001 t\n")
    ev = ts.evaluate(tmp_path / "q", tmp_path / "r", ["mrr-l1", "recip_rank"])
    assert ev.summary["mrr-l1"] == 1.0  # a first, as ranx sorts doubles
    assert ev.summary["recip_rank"] == 0.5  # trec_eval 9: a float32 tie, broken by document id descending (b first)
    assert ev.provenance["definitions"]["mrr-l1"].endswith("scores as float64, as ranx compares them")


# ------------------------------------------------------------------ every door that takes a measure
def test_cli_eval_and_compare_take_ranx_names(cli, msmarco):
    qrels = msmarco / "qrels.dl19-passage.txt"
    a, b = msmarco / "runs" / "run.dl19.bm25.top100.txt", msmarco / "runs" / "run.dl19.tasb.top100.txt"
    res = cli("eval", "-m", "ndcg_burges@10", "-m", "mrr-l2", "-m", "rbp.8", qrels, a)
    assert res.exit_code == 0, res.output
    assert "ndcg_burges@10        \tall\t0.4364" in res.stdout and "rbp.8                 \tall\t1.2591" in res.stdout
    assert '# definitions: {"mrr-l2": "mrr-l2 as ranx 0.3.21: ' in res.stdout
    res = cli("compare", "--qrels", qrels, "-m", "ndcg_burges@10", "-m", "map@100-l2", a, b)
    assert res.exit_code == 0, res.output
    assert "ndcg_burges@10" in res.stdout and "map@100-l2" in res.stdout
    res = cli("eval", "-m", "rbp@8", qrels, a)
    assert res.exit_code == 1 and res.stderr.startswith("Error: 'rbp@8' is ambiguous")


def test_api_names_ranx_measures_as_typed(msmarco):
    ev = ts.evaluate("dl19-passage", msmarco / "runs" / "run.dl19.bm25.top100.txt", ["rbp.80", "hits@10", "MRR-L2"])
    assert list(ev.summary.index) == ["rbp.8", "hits@10", "mrr-l2"]
    assert ev.summary["rbp.80"] == ev.summary["rbp.8"]  # every name of a measure finds it
    assert ev.summary.round(4).to_dict() == {"rbp.8": 1.2591, "hits@10": 6.186, "mrr-l2": 0.7036}


# ------------------------------------------------------------------ docs/evaluate.md's side-by-side table
def _table_rows() -> list[tuple[str, str, list[str]]]:
    """(name, shown figure, the commands said to produce it) of every row of the side-by-side table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## ranx's names, and names the peers define differently", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[4].startswith("`") and cells[0] != "name":
            rows.append((cells[0], cells[3], re.findall(r"`([^`]+)`", cells[4])))
    return rows


def test_the_side_by_side_table_has_every_peer():
    rows = _table_rows()
    commands = [c for _, _, cs in rows for c in cs]
    assert len(rows) >= 20
    assert {c.split(":")[0].split()[0] for c in commands} == {"ranx", "ir_measures", "twostage"}
    assert {"`rbp.8`", "`RBP(p=0.8,rel=1)`", "`rbp.p=0.8`", "`ndcg@10`", "`map@100`", "`mrr`"} <= {
        name for name, _, _ in rows
    }


@pytest.mark.slow  # ranx compiles its metrics with numba on first use
def test_the_side_by_side_figures_are_what_their_commands_give(cli, msmarco):
    ranx = required("ranx", "ranx is the interop oracle (pip install .[test])")
    ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
    qrels, run = msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.bm25.top100.txt"
    rows = _table_rows()
    commands = [c for _, _, cs in rows for c in cs]
    ranx_names = [c.removeprefix("ranx: ") for c in commands if c.startswith("ranx: ")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_ranx = ranx.evaluate(
            ranx.Qrels.from_file(str(qrels), kind="trec"), ranx.Run.from_file(str(run), kind="trec"), ranx_names
        )
    irm_q, irm_r = list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run)))
    for _, shown, produced_by in rows:
        for command in produced_by:
            if command.startswith("ranx: "):
                got: float | str = float(by_ranx[command.removeprefix("ranx: ")])
            elif command.startswith("ir_measures: "):
                measure = ir_measures.parse_measure(command.removeprefix("ir_measures: "))
                try:
                    got = float(next(iter(ir_measures.calc_aggregate([measure], irm_q, irm_r).values())))
                except ValueError:
                    got = "refused"
            else:
                args = command.split()[2:]
                res = cli("eval", "--no-provenance", *args, qrels, run)
                assert res.exit_code == 0, (command, res.output)
                (line,) = [ln for ln in res.stdout.splitlines() if "\tall\t" in ln]
                got = float(line.split("\t")[2])
            want = shown if shown == "refused" else float(shown)
            if isinstance(want, str) or isinstance(got, str) or shown.isdigit():  # "refused", or a count
                assert got == want, command
            else:
                assert round(got, 4) == pytest.approx(want, abs=1e-12), (command, got)


def test_values_on_graded_labels_match_trec_eval_where_the_table_says_so(msmarco):
    """The table's claim that ranx's ndcg@10 at level 1 is ndcg_cut.10 and ndcg_burges@10 is ndcg_cut.10 under
    --gain exp holds per query, not only in the mean."""
    qrels, run = msmarco / "qrels.dl20-passage.txt", msmarco / "runs" / "run.dl20.bm25-rm3.top100.txt"
    names = ["ndcg@10-l1", "ndcg_cut.10", "map@100-l1", "map_cut.100", "r-precision", "Rprec", "set_F", "f1"]
    pq = ts.evaluate(qrels, run, names).per_query
    exp = ts.evaluate(qrels, run, ["ndcg_burges@10", "ndcg_cut.10"], gain="exp").per_query
    for ranx_name, trec in (("ndcg@10-l1", "ndcg_cut_10"), ("map@100-l1", "map_cut_100"), ("r-precision", "Rprec")):
        assert np.abs(pq[ranx_name] - pq[trec]).max() < 1e-12, ranx_name
    assert np.abs(pq["f1"] - pq["set_F"]).max() < 1e-12
    assert np.abs(exp["ndcg_burges@10"] - exp["ndcg_cut_10"]).max() < 1e-12
