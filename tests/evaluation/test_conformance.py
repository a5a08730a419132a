"""NIST trec_eval's own test suite (``make quicktest``), byte for byte.

trec_eval 10 semantics: each of the 15 expected outputs in
``../shared/data/trec_eval-test`` is reproduced by ``twostage eval --trec-eval
10 --no-provenance`` with the same arguments, run from a folder where
``test/`` is that directory (the commands are the ones its README lists).

trec_eval 9 semantics: the same inputs (and a few more option mixes) against
the trec_eval 9.0.4 binary Pyserini bundles, byte for byte; the comment-file
commands are left out there, since 9.x rejects comment lines.
"""

from __future__ import annotations

import pytest
from needs import lacking
from oracles import native_trec_eval, native_trec_eval_output

QUICKTEST = [
    ("out.test", "test/qrels.test test/results.test"),
    ("out.test", "test/qrels.test.with-comments test/results.test"),
    ("out.comment.test", "test/qrels.comment.test test/results.comment.test"),
    ("out.test.a", "-m all_trec test/qrels.test test/results.test"),
    ("out.test.aq", "-m all_trec -q test/qrels.test test/results.test"),
    ("out.test.aqc", "-m all_trec -q -c test/qrels.test test/results.trunc"),
    ("out.test.aqcM", "-m all_trec -q -c -M100 test/qrels.test test/results.trunc"),
    ("out.test.aql", "-m all_trec -mrelstring.20 -q -l2 test/qrels.rel_level test/results.test"),
    ("out.test.prefs", "-m all_prefs -q -R prefs test/prefs.test test/prefs.results.test"),
    ("out.test.prefs", "-m all_prefs -q -R prefs test/prefs.comment.test test/prefs.results.test"),
    ("out.test.qrels_prefs", "-m all_prefs -q -R qrels_prefs test/qrels.test test/results.test"),
    ("out.test.qrels_jg", "-m qrels_jg -q -R qrels_jg test/qrels.123 test/results.test"),
    ("out.test.qrels_jg", "-m qrels_jg -q -R qrels_jg test/qrels.comments.123 test/results.test"),
    (
        "out.test.meas_params",
        "-q -miprec_at_recall..10,.20,.25,.75,.50 -m P.5,7,3 -m recall.20,2000 "
        "-m Rprec_mult.5.0,0.2,0.35 -mutility.2,-1,0,0 -m 11pt_avg..25,.5,.75 "
        "-mndcg.1=3,2=9,4=4.5 -mndcg_cut.10,20,23.4 -msuccess.2,5,20 "
        "test/qrels.test test/results.test",
    ),
    ("out.test.aqZ", "-q -m all_trec -Z test/zscores_file test/qrels.test test/results.test"),
]

NINE = [args for _, args in QUICKTEST if "comment" not in args] + [
    "-m all_trec -q -c -l2 test/qrels.rel_level test/results.trunc",
    "-m all_trec -q -J test/qrels.rel_level test/results.test",
    "-m all_trec -q test/qrels-302.test test/results-302.test",
    "-m all_trec -q -c test/qrels.test test/results-302.test",
    "-m all_trec -q -M 7 -J -l 3 test/qrels.rel_level test/results.test",
    "-q -m ndcg.0=0.5 -m ndcg_rel.2=5,1=0.25 -m Rndcg.3=1 -m G.1=2 -m 11pt_avg..9,.1 test/qrels.rel_level test/results.test",
    "-q -n -m set -N 100000 -m utility.1,-0.5,-2,0.001 test/qrels.test test/results.test",
]


@pytest.fixture()
def suite(shared_data, tmp_path, monkeypatch):
    src = shared_data / "trec_eval-test"
    if not (src / "README.md").exists():
        lacking(f"trec_eval's test suite not found at {src}")
    (tmp_path / "test").symlink_to(src)
    monkeypatch.chdir(tmp_path)
    return src


@pytest.mark.data
@pytest.mark.parametrize("expected,args", QUICKTEST, ids=[f"{e}:{a[:60]}" for e, a in QUICKTEST])
def test_quicktest_byte_for_byte(suite, cli, expected, args):
    res = cli("eval", "--trec-eval", "10", "--no-provenance", *args.split())
    assert res.exit_code == 0, res.output
    want = (suite / expected).read_text()
    assert res.stdout == want


@pytest.mark.data
@pytest.mark.parametrize("args", NINE, ids=[a[:70] for a in NINE])
def test_same_inputs_equal_trec_eval_904(suite, cli, args):
    if native_trec_eval() is None:
        lacking("Pyserini's jar has no trec_eval binary for this machine")
    status, want = native_trec_eval_output(args.split())
    assert status == 0
    res = cli("eval", "--trec-eval", "9", "--no-provenance", *args.split())
    assert res.exit_code == 0, res.output
    assert res.stdout == want


@pytest.mark.data
def test_generations_differ_where_trec_eval_does(suite, cli):
    """9 and 10 disagree on iprec_at_recall's rank cutoffs and on listing -c's missing queries; both say so."""
    a9 = cli("eval", "--trec-eval", "9", "-m", "iprec_at_recall", "-q", "test/qrels.test", "test/results.test")
    a10 = cli("eval", "--trec-eval", "10", "-m", "iprec_at_recall", "-q", "test/qrels.test", "test/results.test")
    assert "iprec_at_recall_0.60  \t302\t0.1420" in a9.stdout  # floor(0.6 * 77 + 0.9) = 47 relevant
    assert "iprec_at_recall_0.60  \t302\t0.1528" in a10.stdout  # lround(0.6 * 77) = 46
    assert "# semantics: trec_eval 9" in a9.stdout and "# semantics: trec_eval 10" in a10.stdout
    assert "# score_precision: float32" in a9.stdout and "# score_precision: float64" in a10.stdout
    c9 = cli(
        "eval", "--trec-eval", "9", "--no-provenance", "-q", "-c", "-m", "map", "test/qrels.test", "test/results.trunc"
    )
    c10 = cli(
        "eval", "--trec-eval", "10", "--no-provenance", "-q", "-c", "-m", "map", "test/qrels.test", "test/results.trunc"
    )
    assert "\t302\t" not in c9.stdout and "map                   \t302\t0.0000" in c10.stdout
    assert c9.stdout.splitlines()[-1] == c10.stdout.splitlines()[-1]  # the mean is the same


@pytest.mark.data
def test_nine_has_no_rbp_or_unj(suite, cli):
    res = cli("eval", "--trec-eval", "9", "-m", "unj.5", "test/qrels.test", "test/results.test")
    assert res.exit_code == 1 and "unj is a trec_eval 10 measure" in res.stderr
    res = cli("eval", "--trec-eval", "9", "--no-provenance", "-m", "all_trec", "test/qrels.test", "test/results.test")
    assert "rbp" not in res.stdout and "unj" not in res.stdout
