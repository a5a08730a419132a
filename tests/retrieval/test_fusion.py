"""Fusion by hand: every method and normalisation on three documents whose fused scores are worked out below, the
settings refused with one clear message each (the library's words and the command's), the command's spellings of
Pyserini (``--k``, ``--rrf.k``, ``--resort``) and the documentation's table against the registry.

The two runs of query 1 (ranks in brackets):

    a: x 3.0 [1], y 2.0 [2], z 1.0 [3]
    b: z 4.0 [1], x 2.0 [2]                 (b lacks y; the query has N = 3 candidates)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import toolkit as ts
from toolkit.data.records import run_from_rows
from toolkit.errors import ConfigError
from toolkit.retrieval.fusion import METHODS, NORMALIZATIONS, TIES, FuseOptions, fuse

A = run_from_rows([("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 1.0)])
B = run_from_rows([("1", "z", 4.0), ("1", "x", 2.0)])
RT2 = math.sqrt(2)
LN2 = math.log(2)

#: method, options, {doc: fused score} worked out by hand from the runs above.
BY_HAND = [
    ("sum", {}, {"x": 5, "y": 2, "z": 5}),
    ("max", {}, {"x": 3, "y": 2, "z": 4}),
    ("min", {}, {"x": 2, "y": 2, "z": 1}),
    ("med", {}, {"x": 2.5, "y": 2, "z": 2.5}),
    ("anz", {}, {"x": 2.5, "y": 2, "z": 2.5}),
    ("mnz", {}, {"x": 10, "y": 2, "z": 10}),
    ("gmnz", {"params": {"gamma": 0.5}}, {"x": 5 * RT2, "y": 2, "z": 5 * RT2}),
    ("wsum", {"weights": "0.25,0.75"}, {"x": 0.75 + 1.5, "y": 0.5, "z": 0.25 + 3}),
    ("wmnz", {"weights": (0.25, 0.75)}, {"x": 5 * 1.0, "y": 2 * 0.25, "z": 5 * 1.0}),
    ("mixed", {"weights": [0.25, 0.75]}, {"x": 2.25 * RT2, "y": 0.5, "z": 3.25 * RT2}),
    ("average", {}, {"x": 2.5, "y": 1, "z": 2.5}),
    ("interpolation", {"params": {"alpha": 0.25}}, {"x": 2.25, "y": 0.5, "z": 3.25}),
    # Pyserini's min-max of each run: a x 1, y .5, z 0; b z 1, x 0
    ("normalize", {}, {"x": 1, "y": 0.5, "z": 1}),
    # vectors x (3, 2), y (2, 0), z (1, 4); the pivot is x, the highest first-run score
    ("vector_space_fusion", {}, {"x": 10, "y": 1 / (math.sqrt(5) + 0.1), "z": 1 / (math.sqrt(8) + 0.1)}),
    ("rrf", {}, {"x": 1 / 61 + 1 / 62, "y": 1 / 62, "z": 1 / 63 + 1 / 61}),
    ("rrf", {"k": 1}, {"x": 1 / 2 + 1 / 3, "y": 1 / 3, "z": 1 / 4 + 1 / 2}),
    ("isr", {}, {"x": (1 + 1 / 4) * 2, "y": 1 / 4, "z": (1 / 9 + 1) * 2}),
    ("log_isr", {}, {"x": 1.25 * LN2, "y": 0.0, "z": 10 / 9 * LN2}),
    ("logn_isr", {}, {"x": 1.25 * math.log(2.01), "y": 0.25 * math.log(1.01), "z": 10 / 9 * math.log(2.01)}),
    # Borda points: a x 3, y 2, z 1; b z 3, x 2, y (3 - 2 + 1) / 2
    ("bordafuse", {}, {"x": 5, "y": 3, "z": 4}),
    ("borda_count", {}, {"x": 5, "y": 3, "z": 4}),
    ("w_bordafuse", {"weights": (0.25, 0.75)}, {"x": 0.75 + 1.5, "y": 0.5 + 0.75, "z": 0.25 + 2.25}),
    # x beats y (both runs: b holds x, not y); x-z and y-z split 1-1: x 1 win, y and z none (z before y: id desc)
    ("condorcet", {}, {"x": 3, "y": 1, "z": 2}),
    # weights .25/.75: z beats x and y (b's .75), x beats y: z, x, y
    ("w_condorcet", {"weights": (0.25, 0.75)}, {"x": 2, "y": 1, "z": 3}),
    ("rbc", {"params": {"phi": 0.5}}, {"x": 0.5 + 0.25, "y": 0.25, "z": 0.125 + 0.5}),
    ("rank_biased_precision_fusion", {"params": {"p": 0.5}}, {"x": 0.75, "y": 0.25, "z": 0.625}),
]


def want_of(name: str) -> dict[str, float]:
    """The scores worked by hand for ``name`` with its first settings above."""
    return next(want for m, _, want in BY_HAND if m == name)


#: normalisation, each run's scores after it: (a x, y, z), (b z, x), then fused by sum.
NORMALIZED = [
    ("minmax", {"x": 1 + 0, "y": 0.5, "z": 0 + 1}),
    ("max", {"x": 1 + 0.5, "y": 2 / 3, "z": 1 / 3 + 1}),
    ("sum", {"x": 2 / 3 + 0, "y": 1 / 3, "z": 0 + 1}),  # a: (s - 1) / (6 - 3 * 1); b: (s - 2) / (6 - 2 * 2)
    ("zmuv", {"x": 1 / math.sqrt(2 / 3) - 1, "y": 0.0, "z": -1 / math.sqrt(2 / 3) + 1}),
    ("rank", {"x": 1 + 0.5, "y": 2 / 3, "z": 1 / 3 + 1}),
    ("borda", {"x": 1 + 2 / 3, "y": 2 / 3 + (0.5 - 1 / 6), "z": 1 / 3 + 1}),  # b lacks y: 0.5 - (2 - 1) / (2 * 3)
]


def fused(run) -> dict[str, float]:
    return dict(zip(run.frame["doc_id"], run.frame["score"]))


@pytest.mark.parametrize("name, settings, want", BY_HAND, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(BY_HAND)])
def test_each_method_gives_the_scores_worked_by_hand(name, settings, want):
    out = fuse([A, B], FuseOptions(name, **settings))
    assert fused(out.run) == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert out.record["ties"] == TIES and out.record["definition"] == METHODS[name].definition


def test_every_method_is_worked_by_hand_or_learns():
    by_hand = {m for m, _, _ in BY_HAND}
    assert set(METHODS) - by_hand == {m for m, x in METHODS.items() if x.needs_judgments}


@pytest.mark.parametrize("norm, want", NORMALIZED)
def test_each_normalisation_gives_the_scores_worked_by_hand(norm, want):
    assert fused(fuse([A, B], FuseOptions("sum", norm)).run) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_every_normalisation_is_worked_by_hand():
    assert set(NORMALIZATIONS) - {n for n, _ in NORMALIZED} == {"none"}


def test_minmax_gives_zero_to_a_query_whose_scores_are_all_equal_and_ranx_spellings_name_it():
    flat = run_from_rows([("1", "x", 2.0), ("1", "y", 2.0)])
    out = fuse([flat, B], FuseOptions("sum", "min-max"))
    assert fused(out.run) == pytest.approx({"x": 0.0, "y": 0.0, "z": 1.0})
    assert out.record["normalize"] == "minmax"
    # Pyserini's normalize gives such a query 1 for each document instead
    assert fused(fuse([flat, B], FuseOptions("normalize")).run) == pytest.approx({"x": 1.0, "y": 1.0, "z": 1.0})


def test_ties_are_broken_by_document_id_descending():
    """sum gives x and z 5 each: z (the greater id) comes first, as trec_eval orders them."""
    assert list(fuse([A, B], FuseOptions("sum")).run.frame["doc_id"]) == ["z", "x", "y"]


def test_depth_and_hits_cut_each_run_and_the_result():
    """depth 1: a holds x, b holds z; hits 1 keeps the best of the two (equal RRF scores: z, the greater id)."""
    assert fused(fuse([A, B], FuseOptions("rrf", depth=1)).run) == pytest.approx({"x": 1 / 61, "z": 1 / 61})
    assert list(fuse([A, B], FuseOptions("rrf", depth=1, hits=1)).run.frame["doc_id"]) == ["z"]


def test_resort_false_ranks_each_run_in_the_order_of_its_lines():
    """a's lines in the order y, z, x (scores 2, 1, 3): without resort x is rank 3, as Pyserini without --resort."""
    shuffled = run_from_rows([("1", "y", 2.0), ("1", "z", 1.0), ("1", "x", 3.0)])
    by_lines = fused(fuse([shuffled, B], FuseOptions("rrf", resort=False)).run)
    assert by_lines == pytest.approx({"x": 1 / 63 + 1 / 62, "y": 1 / 61, "z": 1 / 62 + 1 / 61})
    assert fused(fuse([shuffled, B], FuseOptions("rrf")).run) == pytest.approx(want_of("rrf"))


# ---------------------------------------------------------------- the methods that learn
#: judgments of query 1: x relevant, z judged not relevant.
TRAIN = run_from_rows([("1", "x", 1.0), ("1", "z", 0.0)])


def _qrels():
    from toolkit.data.records import Qrels

    frame = TRAIN.frame.rename(columns={"score": "relevance"}).astype({"relevance": "int64"})
    return Qrels(frame=frame)


def test_learning_methods_by_hand():
    """Hit lists: a [1, 0, 0], b [0, 1]. posfuse: a's probabilities 1, 0, 0, b's 0, 1 by position. mapfuse: a's AP
    1, b's 1/2, each over the rank. probfuse with 1 segment: a 1/3, b 1/2, each over segment 1."""
    qrels = _qrels()
    assert fused(fuse([A, B], FuseOptions("posfuse"), qrels).run) == pytest.approx({"x": 2.0, "y": 0.0, "z": 0.0})
    assert fused(fuse([A, B], FuseOptions("mapfuse"), qrels).run) == pytest.approx(
        {"x": 1 + 0.5 / 2, "y": 1 / 2, "z": 1 / 3 + 0.5}
    )
    out = fuse([A, B], FuseOptions("probfuse", params={"n_segments": 1}), qrels)
    assert fused(out.run) == pytest.approx({"x": 1 / 3 + 1 / 2, "y": 1 / 3, "z": 1 / 3 + 1 / 2})
    assert out.record["probs"] == [[1 / 3], [1 / 2]] and out.record["training_queries"] == 1


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "settings, message",
    [
        ({"method": "combsum"}, "method='combsum': not a fusion method; the methods: sum, max"),
        ({"normalize": "l2"}, "normalize='l2': not a normalisation; the normalisations: none, minmax"),
        ({"method": "rrf", "normalize": "borda"}, "rrf, which reads ranks, would rank them in no defined order"),
        ({"method": "normalize", "normalize": "zmuv"}, "the method normalize is Pyserini's min-max"),
        ({"method": "sum", "weights": (1, 2)}, "weights=: sum takes no weights (the weighted methods: wsum, wmnz"),
        ({"method": "wsum", "weights": "0.5,abc"}, "weights=: weight 'abc' is not a number"),
        ({"method": "wsum", "weights": "1,inf"}, "weights=: weight 'inf' is not finite"),
        ({"method": "rbc", "params": {"phi": "\u0663"}}, "params['phi']: phi '\\u0663' is not a number"),
        ({"method": "rbc", "params": {"phi": 1.5}}, "rbc's phi must be in [0, 1], not 1.5"),
        ({"method": "rbc", "params": {"psi": 1}}, "rbc has no parameter 'psi' (its parameters: phi, min_phi"),
        ({"method": "sum", "k": 60}, "k=60: k is RRF's constant; sum does not use it"),
        ({"method": "rrf", "k": 60, "params": {"k": 20}}, "k is given twice"),
        ({"method": "rrf", "k": 0}, "rrf's k must be > 0, not 0.0"),
        ({"method": "probfuse", "params": {"n_segments": 2.5}}, "n_segments 2.5 is not a whole number"),
        ({"method": "rbc", "params": {"metric": "nope"}}, "params['metric']: unknown measure 'nope'"),
        ({"method": "rrf", "depth": 0}, "depth=0: give a whole number >= 1"),
    ],
)
def test_settings_are_refused_once_with_a_clear_message(settings, message):
    with pytest.raises(ConfigError) as err:
        FuseOptions(**settings)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "settings, runs, message",
    [
        ({"method": "interpolation"}, 3, "interpolation fuses exactly two runs, not 3"),
        ({"method": "rrf"}, 1, "rrf fuses at least two runs, not 1"),
        ({"method": "wsum", "weights": (1, 2, 3)}, 2, "weights=: 3 weights for 2 runs; give one per run"),
        ({"method": "wsum"}, 2, "wsum needs weights=, or train_qrels= to search it as ranx's optimize_fusion does"),
        ({"method": "rbc"}, 2, "rbc needs params={'phi': ...}, or train_qrels= to search it"),
        ({"method": "rrf", "params": {"step": 5}}, 2, "rrf: step shape the search with train_qrels=, which is not"),
        ({"method": "posfuse"}, 2, "posfuse learns from judgments: give train_qrels="),
    ],
)
def test_what_the_runs_or_judgments_make_impossible_is_refused(settings, runs, message):
    with pytest.raises(ConfigError) as err:
        fuse([A, B, A][:runs], FuseOptions(**settings))
    assert message in str(err.value)


def test_judgments_given_to_a_method_with_nothing_to_learn_are_refused():
    with pytest.raises(ConfigError, match="train_qrels=: sum has nothing to learn from judgments"):
        fuse([A, B], FuseOptions("sum"), _qrels())
    with pytest.raises(ConfigError, match=r"rrf has nothing to learn from judgments \(its parameters are given\)"):
        fuse([A, B], FuseOptions("rrf", k=20), _qrels())


def test_api_builds_the_options_from_keywords_and_from_an_options_object():
    a, b = A.frame.rename(columns={"query_id": "qid"}), B.frame.rename(columns={"query_id": "qid"})
    by_keywords = ts.fuse([a, b], method="interpolation", alpha=0.25)
    by_options = ts.fuse([a, b], options=FuseOptions("interpolation", params={"alpha": 0.25}))
    assert fused(by_keywords.inner) == fused(by_options.inner) == pytest.approx(want_of("interpolation"))
    assert by_keywords.meta["parameters"]["alpha"] == 0.25 and by_keywords.meta["parameters"]["ties"] == TIES
    base = FuseOptions("rrf", k=1)
    assert fused(ts.fuse([a, b], options=base, k=60).inner) == pytest.approx(want_of("rrf"))  # keywords override
    assert fused(ts.fuse([a, b], options=base).inner) == pytest.approx(
        {"x": 1 / 2 + 1 / 3, "y": 1 / 3, "z": 1 / 4 + 1 / 2}
    )
    with pytest.raises(TypeError, match="unexpected keyword argument 'gamma'"):
        ts.fuse([a, b], gamma=1)
    with pytest.raises(ConfigError, match="posfuse learns from judgments: give train_qrels="):
        ts.fuse([a, b], method="posfuse")


# ---------------------------------------------------------------- the command
def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    a.write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 2.0 a\n1 Q0 z 3 1.0 a\n")
    b.write_text("1 Q0 z 1 4.0 b\n1 Q0 x 2 2.0 b\n")
    return a, b


def _lines(path: Path) -> dict[str, float]:
    return {ln.split()[2]: float(ln.split()[4]) for ln in path.read_text().splitlines()}


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--method", "posfuse"], "Error: posfuse learns from judgments: give --train-qrels"),
        (["--method", "wsum"], "Error: wsum needs --weights, or --train-qrels to search it"),
        (["--method", "wsum", "--weights", "1,2,3"], "Error: --weights: 3 weights for 2 runs"),
        (["--method", "rbc"], "Error: rbc needs --param phi=..., or --train-qrels"),
        (["--method", "rbc", "--param", "phi=x"], "Error: --param phi: phi 'x' is not a number"),
        (["--method", "sum", "--rrf.k", "20"], "Error: --rrf.k 20: k is RRF's constant; sum does not use it"),
        (["--method", "rrf", "--normalize", "borda"], "Error: --normalize borda: borda gives every run"),
        (["--method", "sum", "--weights", "1,1"], "Error: --weights: sum takes no weights"),
    ],
)
def test_command_refusals_are_one_error_line_in_the_commands_words(cli, tmp_path, flags, message):
    a, b = _runs(tmp_path)
    res = cli("fuse", *flags, a, b, "--out", tmp_path / "f.trec")
    assert res.exit_code == 1 and "Traceback" not in res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(message), res.output
    assert not (tmp_path / "f.trec").exists()


def test_command_takes_pyserinis_k_depth_rrf_k_and_resort(cli, tmp_path):
    a, b = _runs(tmp_path)
    out = tmp_path / "f.trec"
    res = cli("fuse", "--method", "rrf", "--rrf.k", "1", "--k", "2", a, b, "--out", out)
    assert res.exit_code == 0, res.output
    assert _lines(out) == pytest.approx({"x": 1 / 2 + 1 / 3, "z": 1 / 4 + 1 / 2})  # y (1/3) is past --k 2
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["parameters"]["k"] == 1.0 and meta["parameters"]["hits"] == 2 and meta["parameters"]["ties"] == TIES
    assert "--k 2 is the number of documents per query, as Pyserini's --k; RRF's constant is --rrf.k" not in res.output
    res = cli("fuse", "--k", "2", a, b, "--out", out)
    assert "--k 2 is the number of documents per query, as Pyserini's --k; RRF's constant is --rrf.k" in res.output
    res = cli("fuse", "--k", "2", "--hits", "3", a, b, "--out", out)
    assert res.exit_code == 2 and "--k 2 and --hits 3 both say how many documents per query" in res.output
    assert cli("fuse", "--param", "k=1", "--no-resort", a, b, "--out", out).exit_code == 0
    assert _lines(out) == pytest.approx({"x": 1 / 2 + 1 / 3, "y": 1 / 3, "z": 1 / 4 + 1 / 2})


def test_command_learns_from_train_qrels(cli, tmp_path):
    a, b = _runs(tmp_path)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 x 1\n1 0 z 0\n")
    out = tmp_path / "f.trec"
    res = cli("fuse", "--method", "posfuse", "--train-qrels", qrels, a, b, "--out", out)
    assert res.exit_code == 0, res.output
    assert _lines(out) == pytest.approx({"x": 2.0, "y": 0.0, "z": 0.0})
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["parameters"]["probs"] == [[1.0, 0.0, 0.0], [0.0, 1.0]] and meta["train_qrels"]["path"] == str(qrels)


# ---------------------------------------------------------------- the documentation
DOC = Path(__file__).resolve().parents[2] / "docs" / "retrieval.md"


def _rows(heading: str) -> dict[str, list[str]]:
    text = DOC.read_text()
    section = text[text.index(heading) :]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.fullmatch(r"`([a-z_]+)`", cells[0])
        if m:
            rows[m.group(1)] = cells
    return rows


def test_the_documentation_lists_every_method_with_its_definition_peer_and_parameters():
    rows = _rows("| method | reads |")
    assert list(rows) == list(METHODS)
    for name, m in METHODS.items():
        _, reads, definition, parameters, peer = rows[name]
        assert reads == m.reads and definition == m.definition and peer == m.peer, name
        for p in m.params:
            assert f"`{p.name}`" in parameters, (name, p.name)
        assert ("`--weights`" in parameters) == m.weights and ("`--train-qrels`" in parameters) == (
            m.needs_judgments or m.search is not None
        ), name


def test_the_documentation_lists_every_normalisation_with_its_definition():
    rows = _rows("| normalisation | definition |")
    assert list(rows) == list(NORMALIZATIONS)
    for name, n in NORMALIZATIONS.items():
        assert rows[name][1] == n.definition and rows[name][2] == n.peer, name


def test_a_fused_score_that_overflows_a_double_is_refused():
    """1.7e308 + 1.7e308 is beyond the largest double: refused naming the query and document; min-max fuses it."""
    huge = run_from_rows([("1", "x", 1.7e308), ("1", "y", 1.0)])
    with pytest.raises(ConfigError, match=r"the fused score of query '1', document 'x' overflows a double \(inf\)"):
        fuse([huge, huge], FuseOptions("sum"))
    assert fused(fuse([huge, huge], FuseOptions("sum", "minmax")).run) == {"x": 2.0, "y": 0.0}
