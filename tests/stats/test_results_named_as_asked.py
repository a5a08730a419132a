"""Statistics that say what they are: the measures keyed as typed whatever the number of runs;
every interval and test states method, resamples/permutations and seed; gaps exactly 0 without holes; hole bounds
that say what they range over, with ``--holes-over retrieved`` checked against brute force; Monte-Carlo errors of
randomization p-values; all-pairs output headed and tabled as all pairs; ``NAME=RUN`` everywhere."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import toolkit as ts
from toolkit.cli import main
from toolkit.data.records import qrels_from_rows, run_from_rows
from toolkit.evaluation.evaluate import evaluate
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.quality.holes import hole_bounds

DL19 = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "msmarco-passage"
needs_dl19 = pytest.mark.skipif(not (DL19 / "runs").is_dir(), reason="DL19 runs absent from ../shared/data")


def _cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    return str(path)


QRELS = [("1", 0, "a", 2), ("1", 0, "b", 0), ("1", 0, "c", 1), ("2", 0, "a", 1), ("2", 0, "y", 0), ("3", 0, "q", 1)]
RUN_A = [("1", "Q0", d, i + 1, 10.0 - i, "A") for i, d in enumerate(["u1", "a", "b", "c", "u2"])] + [
    ("2", "Q0", d, i + 1, 5.0 - i, "A") for i, d in enumerate(["a", "y", "v1"])
]
RUN_B = [("1", "Q0", d, i + 1, 10.0 - i, "B") for i, d in enumerate(["a", "c", "b", "u1"])] + [
    ("2", "Q0", d, i + 1, 5.0 - i, "B") for i, d in enumerate(["v1", "a", "y"])
]


# ---------------------------------------------------------------- keys as typed, whatever the number of runs
def test_json_keys_are_the_measures_as_typed_for_one_and_two_runs(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    measures = ["-m", "nDCG@3", "-m", "P@2"]
    one = json.loads(
        _cli("eval", *measures, "-q", "--ci", "0.9", "--bootstrap", "50", "--format", "json", qrels, a).stdout
    )
    two = json.loads(
        _cli("eval", *measures, "-q", "--ci", "0.9", "--bootstrap", "50", "--format", "json", qrels, a, b).stdout
    )
    assert one["measures"] == two["measures"] == ["nDCG@3", "P@2"]
    first = two["runs"][0]
    assert set(first["all"]) == set(one["all"]) == {"nDCG@3", "P@2"}
    assert first["all"] == one["all"] and first["per_query"] == one["per_query"]
    assert set(first["ci"]["measures"]) == set(one["ci"]["measures"]) == {"nDCG@3", "P@2"}
    assert first["ci"] == one["ci"]
    # the values themselves: query 1 of run A, P@2 = 1 relevant (a) of 2
    assert one["per_query"]["1"]["P@2"] == 0.5
    csv = _cli("eval", *measures, "--format", "csv", "--no-provenance", qrels, a, b).stdout
    assert csv.splitlines()[0] == "run,nDCG@3,P@2"
    # the library object's dicts say the same
    ev = ts.evaluate_many(qrels, {"A": a, "B": b}, ["nDCG@3", "P@2"])
    assert list(ev["A"].summary.index) == ["nDCG@3", "P@2"]


# ---------------------------------------------------------------- method, resamples and seed stated
def test_eval_ci_states_method_resamples_and_seed_and_equals_scipy(tmp_path):
    from scipy.stats import bootstrap

    qrels = _write(tmp_path, "q.txt", QRELS)
    a = _write(tmp_path, "a.txt", RUN_A)
    args = ["eval", "-m", "P.2", "-c", "--ci", "0.9", "--bootstrap", "500", "--ci-method", "bca", "--seed", "7"]
    text = _cli(*args, qrels, a).stdout
    head = [ln for ln in text.splitlines() if ln.startswith("# ci:")]
    assert head == [
        "# ci: NAME_ci_low, NAME_ci_high = 0.9 bootstrap interval of the mean over 3 queries; method bca, "
        "500 resamples, seed 7"
    ]
    doc = json.loads(_cli(*args, "--format", "json", qrels, a).stdout)["ci"]
    assert (doc["method"], doc["resamples"], doc["seed"], doc["level"]) == ("bca", 500, 7, 0.9)
    values = np.array([0.5, 0.5, 0.0])  # P@2 of queries 1, 2 and 3 (-c: absent from the run, 0)
    ref = bootstrap(
        (values,), np.mean, confidence_level=0.9, n_resamples=500, method="BCa", rng=np.random.default_rng(7)
    )
    got = doc["measures"]["P_2"]
    assert got["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert got["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=1e-12)


def test_compare_states_every_tests_settings(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    args = ["compare", "--qrels", qrels, "-m", "P.2", "--permutations", "300", "--seed", "3", "--bootstrap", "40"]
    text = _cli(*args, a, b).stdout
    assert "randomization test, 300 permutations, seed 3" in text
    assert "# interval: paired bootstrap percentile, 0.95, 40 resamples, seed 3" in text
    assert "sqrt(p (1 - p) / permutations)" in text
    tests = json.loads(_cli(*args, "--format", "json", a, b).stdout)["tests"]
    assert (tests["permutations"], tests["seed"]) == (300, 3)
    assert tests["ci"] | {"what": ""} == {"level": 0.95, "method": "percentile", "resamples": 40, "seed": 3, "what": ""}
    assert "sqrt(p (1 - p) / permutations)" in tests["monte_carlo_se"]


# ---------------------------------------------------------------- gaps exactly 0 without holes
def test_gap_is_exactly_zero_without_holes():
    # query 2 is fully judged in the top 3 (a, y) and its third document is a hole only at depth 3
    qrels = qrels_from_rows([(q, d, lab) for q, _, d, lab in QRELS])
    run = run_from_rows([(q, d, s) for q, _, d, _, s, _ in RUN_A])
    b = hole_bounds(qrels, run, parse_measures(["ndcg_cut.2", "P.2", "recall.2"], 9), EvalSettings())
    for name in ("ndcg_cut_2", "P_2", "recall_2"):
        row = b[name].per_query.loc["2"]
        assert row["unjudged"] == 0 and row["gap"] == 0.0 and row["min"] == row["max"] == row["value"]


@needs_dl19
def test_gap_is_exactly_zero_on_every_fully_judged_bm25_query():
    from toolkit.data.trec_io import read_qrels, read_run

    q = read_qrels(DL19 / "qrels.dl19-passage.txt")
    run = read_run(DL19 / "runs" / "run.dl19.bm25.top100.txt")
    t = hole_bounds(q, run, parse_measures(["ndcg_cut.10"], 9), EvalSettings(relevance_level=2))["ndcg_cut_10"]
    t = t.per_query
    none = t[t["unjudged"] == 0]
    assert len(none) == 43  # BM25's top 10 is judged on every DL19 query
    assert (none["gap"] == 0.0).all() and (none["min"] == none["value"]).all() and (none["max"] == none["value"]).all()


# ---------------------------------------------------------------- --holes-over retrieved: exact, by brute force
def _brute(qrels_rows, run, qid, holes, measures, settings, scale):
    values: dict[str, list[float]] = {m.name: [] for m in measures}
    for labels in itertools.product(scale, repeat=len(holes)):
        extra = [(qid, d, lab) for d, lab in zip(holes, labels)]
        res = evaluate(qrels_from_rows(qrels_rows + extra), run, measures, settings, warn=False).wide()
        for m in measures:
            values[m.name].append(float(res.at[qid, m.name]))
    return values


@pytest.mark.parametrize("seed", range(6))
def test_retrieved_bounds_equal_brute_force_over_every_labelling(seed):
    """Random small queries: a run of 7 documents, some judged on a 0-2 (or 0-3) scale; every labelling of every
    unjudged document the run retrieved is scored by the evaluator (the ideal recomputed) and the extremes compared
    with ``over="retrieved"``; the top-k bounds are those over the holes in the top k alone."""
    rng = np.random.default_rng(seed)
    top = int(rng.integers(2, 4))
    scale = list(range(top + 1))
    docs = [f"d{i}" for i in range(7)]
    judged = [d for d in docs if rng.random() < 0.5] or [docs[0]]
    rows = [("q", d, int(rng.integers(0, top + 1))) for d in judged] + [("q", "elsewhere", top)]
    run = run_from_rows([("q", d, float(10 - i)) for i, d in enumerate(docs)])
    holes = [d for d in docs if d not in judged]
    level = int(rng.integers(1, top + 1))
    settings = EvalSettings(relevance_level=level)
    measures = parse_measures(["ndcg_cut.3", "P.3", "recall.3"], 9)
    qrels = qrels_from_rows(rows)
    got = hole_bounds(qrels, run, measures, settings, over="retrieved")
    values = _brute(rows, run, "q", holes, measures, settings, scale)
    top_k = hole_bounds(qrels, run, measures, settings)
    top_values = _brute(rows, run, "q", [d for d in holes if docs.index(d) < 3], measures, settings, scale)
    for m in measures:
        row = got[m.name].per_query.loc["q"]
        assert row["min"] == pytest.approx(min(values[m.name]), abs=1e-12), (seed, m.name)
        assert row["max"] == pytest.approx(max(values[m.name]), abs=1e-12), (seed, m.name)
        assert row["unjudged"] == len(holes) and bool(row["exact"]) and got[m.name].over == "retrieved"
        t = top_k[m.name].per_query.loc["q"]
        assert t["min"] == pytest.approx(min(top_values[m.name]), abs=1e-12), (seed, m.name)
        assert t["max"] == pytest.approx(max(top_values[m.name]), abs=1e-12), (seed, m.name)


@needs_dl19
def test_tasb_dl19_bounds_over_every_retrieved_hole():
    qrels, run = DL19 / "qrels.dl19-passage.txt", DL19 / "runs" / "run.dl19.tasb.top100.txt"
    base = ["eval", "-m", "nDCG@10", "-c", "-l", "2", "--format", "json"]
    top = json.loads(_cli(*base, "--holes", qrels, run).stdout)["holes"]["nDCG@10"]
    every = json.loads(_cli(*base, "--holes-over", "retrieved", qrels, run).stdout)["holes"]["nDCG@10"]
    assert round(top["all"]["min"], 4) == 0.7169 and round(top["all"]["max"], 4) == 0.7850
    assert round(every["all"]["min"], 4) == 0.6117 and round(every["all"]["max"], 4) == 0.7850
    assert (
        top["over"] == "top-k"
        and "in the top k (the ideal ranking from the judged documents plus those)" in top["what"]
    )
    assert every["over"] == "retrieved" and "every unjudged document the run retrieved" in every["what"]
    text = _cli(*base[:-2], "--holes-over", "retrieved", qrels, run).stdout
    assert "# holes: NAME_min, NAME_max = the lowest and highest value over every labelling of every unjudged " in text
    assert "ndcg_cut_10_min       \tall\t0.6117" in text


def test_compare_holes_wording_says_what_the_bounds_range_over(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    args = ["compare", "--qrels", qrels, "-m", "P.2", "--permutations", "100", "--bootstrap", "40", a, b]
    text = _cli(*args, "--holes").stdout
    assert "every labelling of the unjudged documents in the top k (the ideal ranking from the judged documents" in text
    assert "every labelling of its unjudged documents" not in text and "the holes cannot explain it" not in text
    assert "bounds over the top-k holes " in text
    text = _cli(*args, "--holes-over", "retrieved").stdout
    assert "every unjudged document the run retrieved" in text and "bounds over the retrieved holes " in text
    doc = ts.compare(qrels, {"a": a, "b": b}, measures="P.2", holes="retrieved", permutations=100, bootstrap=40).doc
    assert doc["tests"]["holes_over"] == "retrieved"


# ---------------------------------------------------------------- Monte-Carlo error of randomization p-values
def test_permutation_p_carries_its_monte_carlo_error_and_holm_scales_it():
    from toolkit.stats.significance import adjust, compare_table, permutation_test

    rng = np.random.default_rng(1)
    rows = []
    base = rng.random(30)
    for name, shift in (("base", 0.0), ("x", 0.05), ("y", 0.02)):
        vals = base if name == "base" else np.clip(base + shift + rng.normal(0, 0.1, 30), 0, 1)
        rows += [(name, str(i), "m", float(v)) for i, v in enumerate(vals)]
    import pandas as pd

    table = pd.DataFrame(rows, columns=["run", "query_id", "measure", "value"])
    tests = compare_table(table, "base", permutations=2000, seed=5, correction="holm", resamples=50)
    raw = [c.p_permutation for c in tests]
    adjusted = adjust(raw, "holm")
    for c, p_adj in zip(tests, adjusted):
        assert not c.permutation_exact and c.permutations == 2000
        assert c.p_permutation_se == pytest.approx(math.sqrt(c.p_permutation * (1 - c.p_permutation) / 2000), rel=1e-12)
        assert c.p_adjusted == pytest.approx(p_adj)
        assert c.p_adjusted_se == pytest.approx(c.p_permutation_se * p_adj / c.p_permutation, rel=1e-12)
    # exact enumeration (2^n <= permutations): no Monte-Carlo error
    a, b = base[:8], base[:8] + 0.1
    p, exact = permutation_test(a, b, permutations=1000)
    small = pd.DataFrame(
        [("base", str(i), "m", float(v)) for i, v in enumerate(a)]
        + [("s", str(i), "m", float(v)) for i, v in enumerate(b)],
        columns=["run", "query_id", "measure", "value"],
    )
    (c,) = compare_table(small, "base", permutations=1000, resamples=20)
    assert exact and c.permutation_exact and c.p_permutation == p and c.p_permutation_se == 0.0 == c.p_adjusted_se


def test_verdict_says_when_the_monte_carlo_error_could_flip_it():
    from toolkit.stats.verdict import verdict

    near = {"delta": 0.02, "p_adjusted": 0.049, "p_adjusted_se": math.sqrt(0.049 * 0.951 / 10_000)}  # 0.0022
    assert "another seed could flip this" in verdict(near)
    assert "better" in verdict(near)
    far = {**near, "p_adjusted": 0.01, "p_adjusted_se": math.sqrt(0.01 * 0.99 / 10_000)}  # 0.001: 40 errors away
    assert "another seed" not in verdict(far)
    exact = {**near, "p_adjusted_se": 0.0}
    assert "another seed" not in verdict(exact)
    # 3 standard errors is the line: 0.05 - 0.049 = 0.001 <= 3 * 0.0004, but not <= 3 * 0.0003
    assert "another seed" in verdict({**near, "p_adjusted_se": 0.0004})
    assert "another seed" not in verdict({**near, "p_adjusted_se": 0.0003})


def test_agreement_flipped_pairs_carry_monte_carlo_error():
    import pandas as pd

    from toolkit.quality.assessor_agreement import pair_tests, ranking_agreement

    rng = np.random.default_rng(2)
    base = rng.random(25)
    frames = []
    for shift_b in (0.0, 0.06):
        rows = [("r1", str(i), float(v)) for i, v in enumerate(base)]
        rows += [("r2", str(i), float(v + 0.05 + n)) for i, (v, n) in enumerate(zip(base, rng.normal(0, 0.1, 25)))]
        rows += [("r3", str(i), float(v + shift_b + n)) for i, (v, n) in enumerate(zip(base, rng.normal(0, 0.1, 25)))]
        frames.append(pd.DataFrame(rows, columns=["run", "query_id", "value"]))
    tests = pair_tests(frames[0], permutations=500, seed=4)
    for t in tests.values():
        se = math.sqrt(t.p * (1 - t.p) / 500)
        assert t.p_adjusted_se == pytest.approx(se * t.p_adjusted / t.p, rel=1e-12)
        assert t.could_flip(0.05) == (abs(t.p_adjusted - 0.05) <= 3 * t.p_adjusted_se)
    r = ranking_agreement(frames[0], frames[1], "m", permutations=500, seed=4)
    for f in r.flipped_pairs:
        ta = tests[(f["run_1"], f["run_2"])]
        assert f["p_adjusted_se_a"] == ta.p_adjusted_se
        assert f["monte_carlo_could_flip"] == (
            ta.could_flip(0.05) or abs(f["p_adjusted_b"] - 0.05) <= 3 * f["p_adjusted_se_b"]
        )
    assert "monte_carlo_se" in r.test


# ---------------------------------------------------------------- all pairs, headed and tabled
def test_all_pairs_and_tukey_are_headed_and_tabled_as_all_pairs(tmp_path):
    rng = np.random.default_rng(3)
    qrels_rows = [(str(q), 0, f"d{d}", int(rng.integers(0, 3))) for q in range(8) for d in range(6)]
    qrels = _write(tmp_path, "q.txt", qrels_rows)
    runs = {}
    for s in range(5):
        rows = []
        for q in range(8):
            order = rng.permutation(6)
            rows += [(str(q), "Q0", f"d{d}", i + 1, float(6 - i), f"s{s}") for i, d in enumerate(order)]
        runs[f"s{s}"] = _write(tmp_path, f"s{s}.txt", rows)
    cmp = ts.compare(qrels, runs, measures="P.3", family="all-pairs", test="tukey", permutations=200, bootstrap=20)
    pairs = {(r["baseline"], r["name"]) for _, r in cmp.table.iterrows()}
    assert pairs == set(itertools.combinations(list(runs), 2)) and len(cmp.table) == 10
    text = cmp.to_text()
    assert text.splitlines()[0] == "# all pairs of: s0, s1, s2, s3, s4" and "# baseline:" not in text
    assert "randomised Tukey HSD, 200 permutations, seed 42" in text
    cli = _cli(
        "compare",
        "--qrels",
        qrels,
        *[f"{n}={p}" for n, p in runs.items()],
        "-m",
        "P.3",
        "--family",
        "all-pairs",
        "--permutations",
        "200",
        "--bootstrap",
        "20",
    ).stdout
    assert cli.splitlines()[0] == "# all pairs of: s0, s1, s2, s3, s4"
    baseline_family = ts.compare(qrels, runs, measures="P.3", permutations=200, bootstrap=20)
    assert len(baseline_family.table) == 5  # the baseline's own row and its four tests, as before


# ---------------------------------------------------------------- NAME=RUN in every command that takes runs
def test_name_equals_run_in_every_command(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    out = _cli("eval", "-m", "P.2", "--no-provenance", qrels, f"alpha={a}", b).stdout
    assert out.splitlines()[0] == "# run: alpha" and "# run: b.txt" in out
    doc = json.loads(_cli("eval", "-m", "P.2", "--format", "json", qrels, f"alpha={a}", f"beta={b}").stdout)
    assert [r["run"] for r in doc["runs"]] == ["alpha", "beta"]
    out = _cli("gain-sensitivity", "-k", "2", qrels, f"alpha={a}", f"beta={b}").stdout
    assert "alpha" in out and "beta" in out
    out = _cli("pool-test", "--qrels", qrels, "-m", "P.2", "--pool-depth", "2", f"alpha={a}", f"beta={b}").stdout
    assert "alpha" in out and "beta" in out
    out = _cli("power", "--qrels", qrels, "-m", "P.2", f"alpha={a}", f"beta={b}", "--delta", "0.1").stdout
    assert out.splitlines()[-1].startswith("queries ")
    out = _cli("agreement", "-m", "P.2", "--permutations", "50", qrels, qrels, f"alpha={a}", f"beta={b}").stdout
    assert "alpha\t" in out and "beta\t" in out
    res = _cli("fuse", f"alpha={a}", f"beta={b}", "--out", str(tmp_path / "f.trec"))
    assert res.exit_code == 0 and (tmp_path / "f.trec").read_text().startswith("1 Q0 ")
    res = _cli("eval", "-m", "P.2", qrels, f"same={a}", f"same={b}")
    assert res.exit_code == 2 and "two runs named 'same'" in res.output


# ---------------------------------------------------------------- unknown keywords, documented names
def _public_functions():
    import inspect

    return [(n, getattr(ts, n)) for n in ts.__all__ if inspect.isfunction(getattr(ts, n))]


@pytest.mark.parametrize("name", [n for n, _ in _public_functions()])
def test_every_public_function_refuses_an_unknown_keyword_naming_itself(name):
    import inspect

    f = getattr(ts, name)
    required = {
        p.name: None
        for p in inspect.signature(f).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'bogus'"):
        f(**required, bogus=1)


def test_power_and_agreement_refuse_bogus_even_with_valid_inputs(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    with pytest.raises(TypeError, match=r"^power\(\) got an unexpected keyword argument 'bogus'"):
        ts.power(qrels, a, b, "P.2", bogus=1)
    with pytest.raises(TypeError, match=r"^agreement\(\) got an unexpected keyword argument 'bogus'"):
        ts.agreement(qrels, qrels, [a, b], "P.2", bogus=1)
    assert ts.power(qrels, a, b, "P.2", complete=True).queries > 0  # a real keyword still passes on


def test_every_name_the_docs_give_exists():
    import re

    root = Path(__file__).resolve().parents[2]
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*.md"))]
    texts.append((root / "README.md").read_text(encoding="utf-8"))
    names = {m for t in texts for m in re.findall(r"\bts\.([A-Za-z_][A-Za-z0-9_]*)", t)}
    assert {"evaluate", "evaluate_many", "compare"} <= names  # the check reads the docs at all
    missing = sorted(n for n in names if not hasattr(ts, n))
    assert missing == []
    assert "evaluate_many" in ts.__all__


@needs_dl19
def test_cli_notes_name_the_cli_flag_not_the_keyword(tmp_path):
    """A run missing half its queries, diagnosed with --no-complete: the note names diagnose's -c, not
    complete=True (the library keeps its own words: ``Diagnosis.notes``)."""
    lines = (DL19 / "runs" / "run.dl19.bm25.top100.txt").read_text().splitlines()
    half = tmp_path / "half.txt"
    half.write_text("\n".join(lines[:2000]) + "\n")
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--qrels",
            str(DL19 / "qrels.dl19-passage.txt"),
            "--first-stage",
            str(DL19 / "runs" / "run.dl19.bm25.top100.txt"),
            "--reranked",
            f"half={half}",
            "--depth",  # BM25's own order on the queries it has: no depth to detect
            "half=100",
            "--no-complete",
            "--permutations",
            "200",
            "--bootstrap",
            "100",
            "--out",
            str(tmp_path / "d"),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.stderr.splitlines() if ln.startswith("note: half:") and "count them as 0" in ln]
    assert len(notes) == 1 and "pass -c to count them as 0" in notes[0]
    assert "complete=True" not in res.stderr
    diag = ts.diagnose(
        DL19 / "qrels.dl19-passage.txt",
        DL19 / "runs" / "run.dl19.bm25.top100.txt",
        {"half": half},
        depth={"half": 100},
        complete=False,
        permutations=200,
        bootstrap=100,
    )
    said = [n for n in diag.notes if n.startswith("half:") and "count them as 0" in n]
    assert len(said) == 1 and "pass complete=True to count them as 0" in said[0]  # the library's words


def test_compare_json_keys_are_the_measures_as_typed(tmp_path):
    qrels = _write(tmp_path, "q.txt", QRELS)
    a, b = _write(tmp_path, "a.txt", RUN_A), _write(tmp_path, "b.txt", RUN_B)
    c = _write(tmp_path, "c.txt", [(q, z, d, r, -s, t) for q, z, d, r, s, t in RUN_A])
    for runs in ([a, b], [a, b, c]):
        args = ["compare", "--qrels", qrels, "-m", "nDCG@3", "-m", "P.2", "--permutations", "50", "--bootstrap", "20"]
        doc = json.loads(_cli(*args, "--format", "json", *runs).stdout)
        assert doc["measures"] == ["nDCG@3", "P_2"] and list(doc["results"]) == ["nDCG@3", "P_2"]
        assert list(doc["baseline_mean"]) == ["nDCG@3", "P_2"]
    cmp = ts.compare(qrels, {"a": a, "b": b}, measures=["nDCG@3"], permutations=50, bootstrap=20)
    assert list(cmp.means.columns) == ["nDCG@3"] and "nDCG@3 delta" in cmp.table.columns
