"""The evaluator's edge cases, each from a two-line reproducer, against both trec_eval generations.

Every case runs ``twostage eval --no-provenance --trec-eval G ARGS`` and compares its stdout byte for byte
with the native binary of that generation (9.0.4 from Pyserini's jar, 10.0-rc3 built from source), and
with the value worked out by hand from trec_eval's C source (written beside each case), so the test
still says what is right where a binary is missing.
"""

from __future__ import annotations

import pytest
from oracles import native_trec_eval, run_binary, trec_eval_10


@pytest.fixture(scope="module")
def binaries() -> dict[int, str | None]:
    ten, _why = trec_eval_10()
    return {9: native_trec_eval(), 10: ten}


@pytest.fixture()
def files(tmp_path):
    def write(**texts: str) -> dict[str, str]:
        out = {}
        for name, text in texts.items():
            p = tmp_path / name
            p.write_text(text)
            out[name] = str(p)
        return out

    return write


def check(cli, binaries, generation: int, args: list[str], expected: str) -> None:
    res = cli("eval", "--no-provenance", "--trec-eval", str(generation), *args)
    assert res.exit_code == 0, res.output
    assert res.stdout == expected
    binary = binaries[generation]
    if binary:
        status, out = run_binary(binary, args)
        assert (status, out) == (0, expected)


TWO_LABELS = {"qrels": "1 0 a 1\n1 0 b 2\n", "run": "1 Q0 a 1 1 r\n"}


@pytest.mark.parametrize("generation", [9, 10])
@pytest.mark.parametrize("level", ["-l2", "-l0", "-l1", "-l3"])
def test_num_rel_all_line_under_c_counts_every_positive_label(cli, binaries, files, generation, level):
    # m_num_rel.c, te_calc_avg_num_rel: with -c the summary is the number of qrels lines with rel > 0 (a: 1,
    # b: 2 -> 2), whatever -l; the per-query value follows -l (R = 1 at -l2, 0 at -l3)
    f = files(**TWO_LABELS)
    per_query = {"-l2": 1, "-l0": 2, "-l1": 2, "-l3": 0}[level]
    expected = f"num_rel               \t1\t{per_query}\nnum_rel               \tall\t2\n"
    check(cli, binaries, generation, ["-q", "-c", level, "-m", "num_rel", f["qrels"], f["run"]], expected)


@pytest.mark.parametrize("generation", [9, 10])
def test_zscored_num_rel_all_line_under_c_is_the_qrels_count(cli, binaries, files, generation):
    # query 1's num_rel is 2 (a and b, -l 1), its z-score (2 - 0) / 2 = 1; the all line is still te_calc_avg_num_rel's count, 2,
    # printed as a z-score (%6.4f with the Z prefix)
    f = files(**TWO_LABELS, z="1 num_rel 0 2\n")
    expected = "Znum_rel               \t1\t1.0000\nZnum_rel               \tall\t2.0000\n"
    check(cli, binaries, generation, ["-q", "-Z", f["z"], "-c", "-m", "num_rel", f["qrels"], f["run"]], expected)


@pytest.mark.parametrize("generation", [9, 10])
@pytest.mark.parametrize(
    ("measure", "name", "values"),
    [
        # R = 2, a retrieved (rank 1, label 1): cutoffs round(0.999 * 2) = 2 and 2 under 10 (floor(x R + 0.9)
        # = 2, 2 under 9): the second relevant document is never retrieved, so both are 0
        ("iprec_at_recall.0.999,1", "iprec_at_recall_1.00", ("0.0000", "0.0000")),
        # c = floor(0.2 * 2 + 0.9) = 1 and floor(0.201 * 2 + 0.9) = 1: P@1 = 1 for both
        ("Rprec_mult.0.2,0.201", "Rprec_mult_0.20", ("1.0000", "1.0000")),
    ],
)
def test_two_parameters_printing_one_name_print_both_lines(cli, binaries, files, generation, measure, name, values):
    f = files(**TWO_LABELS)
    pad = f"{name:<22}"
    expected = "".join(f"{pad}\t1\t{v}\n" for v in values) + "".join(f"{pad}\tall\t{v}\n" for v in values)
    check(cli, binaries, generation, ["-q", "-m", measure, f["qrels"], f["run"]], expected)


def test_two_parameters_printing_one_name_keep_their_own_values(files):
    # iprec_at_recall.0.2,0.201 with R = 5 under 10: round(1.0) = 1 and round(1.005) = 1 print one name, but
    # Rprec_mult 1.0 vs 1.004 with R = 250 differ: c = 250 and 251; the summary keeps each measure's value
    from toolkit.data.trec_io import read_qrels, read_run
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import EvalSettings, parse_measures

    qrels = "".join(f"1 0 d{i:03d} 1\n" for i in range(250))
    run = "".join(f"1 Q0 d{i:03d} 1 {1000 - i} r\n" for i in range(250)) + "1 Q0 z 1 -5 r\n"
    f = files(qrels=qrels, run=run)
    ms = parse_measures(["Rprec_mult.1.0,1.004"], 10)
    res = evaluate(read_qrels(f["qrels"]), read_run(f["run"]), ms, EvalSettings(trec_eval=10))
    assert [m.name for m in res.measures] == ["Rprec_mult_1.00", "Rprec_mult_1.00"]
    assert [res.summary[m] for m in res.measures] == [1.0, 250 / 251]
    assert res.aggregate == {"Rprec_mult_1.00": 1.0}  # the name-keyed view holds the first


@pytest.mark.parametrize(
    ("qrels", "measure", "value"),
    [
        # one level (0) with gain 3: the range [min(0, 3), max(0, 3)] = [0, 3] makes it 1; (1 - 0.5) * 1 * 1
        ("1 0 a 0\n", "rbp.p=0.5,0=3", "0.5000"),
        # gains 3 (level 0) and 1 (level 1, a): range [0, 3]: a's gain 1/3; (1 - 0.5) / 3
        ("1 0 a 1\n", "rbp.p=0.5,0=3", "0.1667"),
        # gains -2, -1: range [-2, 0]: a (level 1) gets (-1 + 2) / 2 = 0.5; (1 - 0.5) * 0.5
        ("1 0 a 1\n", "rbp.p=0.5,0=-2,1=-1", "0.2500"),
        # a single gain -1: range [-1, 0]: a's gain 0
        ("1 0 a 0\n", "rbp.p=0.5,0=-1", "0.0000"),
        # a single gain 0.5 lies inside [0, 1]: kept as it is
        ("1 0 a 0\n", "rbp.p=0.5,0=0.5", "0.2500"),
    ],
)
def test_rbp_normalises_over_a_range_that_spans_zero(cli, binaries, files, qrels, measure, value):
    f = files(qrels=qrels, run="1 Q0 a 1 1 r\n1 Q0 b 1 0.5 r\n")
    name = f"{measure.replace('.', '_', 1):<22}"
    check(cli, binaries, 10, ["-q", "-m", measure, f["qrels"], f["run"]], f"{name}\t1\t{value}\n{name}\tall\t{value}\n")


def test_rbp_all_equal_gains_print_no_nan_and_no_warning(cli, files, recwarn):
    f = files(qrels="1 0 a 0\n", run="1 Q0 a 1 1 r\n")
    res = cli("eval", "--no-provenance", "--trec-eval", "10", "-m", "rbp.p=0.5,0=3", f["qrels"], f["run"])
    assert "nan" not in res.output
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
