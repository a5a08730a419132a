"""URisk and TRisk (Wang et al. 2012; Dinçer et al. 2014): a hand example written out, a tiny qrels through the
CLI, and DL19 against a numpy computation from pytrec_eval's per-query values."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from toolkit.errors import ConfigError
from toolkit.stats.urisk import risk_adjusted, risk_of, risk_table, trisk, urisk

# Five queries. Baseline a, run b; d = b - a = [+0.2, -0.1, 0, -0.1, +0.3]: wins 0.2 + 0.3 = 0.5, losses 0.1 + 0.1
# = 0.2, one tie.
A = [0.5, 0.2, 0.8, 0.4, 0.6]
B = [0.7, 0.1, 0.8, 0.3, 0.9]


def test_hand_example():
    # URisk = (1/5) [0.5 - (1 + alpha) 0.2]
    assert urisk(A, B, 0) == pytest.approx(0.3 / 5)  # the mean difference
    assert urisk(A, B, 1) == pytest.approx((0.5 - 2 * 0.2) / 5) == pytest.approx(0.02)
    assert urisk(A, B, 5) == pytest.approx((0.5 - 6 * 0.2) / 5) == pytest.approx(-0.14)
    # alpha 1: z = [0.2, -0.2, 0, -0.2, 0.3], mean 0.02; deviations 0.18, -0.22, -0.02, -0.22, 0.28
    assert risk_adjusted(A, B, 1) == pytest.approx([0.2, -0.2, 0.0, -0.2, 0.3])
    squares = 0.18**2 + 0.22**2 + 0.02**2 + 0.22**2 + 0.28**2
    assert squares == pytest.approx(0.208)
    se = math.sqrt(squares / 4) / math.sqrt(5)  # sd (ddof 1) / sqrt(n) = sqrt(0.052 / 5)
    t, p = trisk(A, B, 1)
    assert t == pytest.approx(0.02 / se) == pytest.approx(0.196116, abs=1e-6)
    assert p == pytest.approx(2 * stats.t.sf(0.02 / se, df=4))
    # alpha 5: z = [0.2, -0.6, 0, -0.6, 0.3], mean -0.14
    z = np.array([0.2, -0.6, 0.0, -0.6, 0.3])
    sd = math.sqrt(sum((x + 0.14) ** 2 for x in z) / 4)
    assert trisk(A, B, 5)[0] == pytest.approx(-0.14 / (sd / math.sqrt(5)))
    r = risk_of(A, B, 1, "m", "b", "a")
    assert (r.wins, r.ties, r.losses) == (2, 1, 2)
    assert (r.win_sum, r.loss_sum) == (pytest.approx(0.5), pytest.approx(0.2))
    assert r.delta == pytest.approx(0.06) and r.urisk == pytest.approx(0.02) and r.trisk == pytest.approx(t)


def test_edge_cases_and_errors():
    assert trisk(A, A, 1) == (0.0, 1.0)  # no difference at all
    t, p = trisk(A, [x + 0.1 for x in A], 3)  # every query up by the same amount: no variance
    assert t == math.inf and p == 0.0
    assert risk_of(A, [x - 0.1 for x in A], 1).as_dict()["trisk"] == "-inf"  # JSON has no infinity
    for bad in (-0.5, math.nan, math.inf, "1", True):
        with pytest.raises(ConfigError, match="alpha"):
            urisk(A, B, bad)
    table = pd.DataFrame(
        [(r, f"q{i}", "m", v) for r, vals in (("a", A), ("b", B)) for i, v in enumerate(vals)],
        columns=["run", "query_id", "measure", "value"],
    )
    with pytest.raises(ConfigError, match="baseline 'c'"):
        risk_table(table, "c")
    assert urisk(A, B, np.int64(1)) == urisk(A, B, np.float32(1.0)) == pytest.approx(0.02)  # numpy numbers too
    rows = risk_table(table, "a", [0, 1, 5])
    assert [r.alpha for r in rows] == [0, 1, 5]
    assert [r.urisk for r in rows] == pytest.approx([0.06, 0.02, -0.14])


# Four queries, P@2: baseline [0.5, 1, 0, 0.5], run [1, 0.5, 0.5, 0.5]; d = [+0.5, -0.5, +0.5, 0].
QRELS = "1 0 a 1\n1 0 b 1\n1 0 c 0\n2 0 a 1\n2 0 b 1\n2 0 c 0\n3 0 a 1\n3 0 c 0\n3 0 d 0\n4 0 a 1\n4 0 c 0\n"
BASE = {"1": "ac", "2": "ab", "3": "cd", "4": "ac"}
RUN = {"1": "ab", "2": "ac", "3": "ac", "4": "ca"}


def _write(path, ranking):
    path.write_text(
        "".join(f"{q} Q0 {d} {i + 1} {10 - i} t\n" for q, docs in ranking.items() for i, d in enumerate(docs))
    )
    return str(path)


def test_cli_tiny_by_hand(tmp_path, cli):
    (tmp_path / "qrels.txt").write_text(QRELS)
    base, run = _write(tmp_path / "base.txt", BASE), _write(tmp_path / "run.txt", RUN)
    args = ["risk", "--qrels", tmp_path / "qrels.txt", f"base={base}", f"sys={run}", "-m", "P.2"]
    result = cli(*args, "--alpha", "2", "--alpha", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["baseline"] == "base" and doc["alphas"] == [2.0, 0.0]
    two, zero = doc["results"]
    # alpha 2: z = [0.5, -1.5, 0.5, 0], URisk = -0.5 / 4; deviations 0.625, -1.375, 0.625, 0.125
    assert two["urisk"] == pytest.approx(-0.125)
    sd = math.sqrt((0.625**2 + 1.375**2 + 0.625**2 + 0.125**2) / 3)
    assert two["trisk"] == pytest.approx(-0.125 / (sd / 2))
    assert (two["wins"], two["ties"], two["losses"], two["n_queries"]) == (2, 1, 1, 4)
    assert zero["urisk"] == pytest.approx(0.125) == pytest.approx(zero["delta"])
    text = cli(*args, "--alpha", "2").output
    line = next(ln for ln in text.splitlines() if ln.startswith("P_2") or ln.split()[1:2] == ["sys"])
    assert line.split()[1:8] == ["sys", "2", "4", "2/1/1", "+0.1250", "-0.1250", f"{-0.125 / (sd / 2):.3f}"]
    assert "Wang" in text and "Dincer" in text  # the definitions are stated
    csv = pd.read_csv(io.StringIO(cli(*args, "--alpha", "2", "--format", "csv").output))
    assert csv.loc[0, "urisk"] == pytest.approx(-0.125) and list(csv["run"]) == ["sys"]


def test_cli_usage_errors(tmp_path, cli):
    (tmp_path / "qrels.txt").write_text(QRELS)
    base, run = _write(tmp_path / "base.txt", BASE), _write(tmp_path / "run.txt", RUN)
    q = tmp_path / "qrels.txt"
    assert cli("risk", "--qrels", q, base).exit_code == 2  # one run
    bad = cli("risk", "--qrels", q, base, run, "--alpha", "-1")
    assert bad.exit_code == 2 and "--alpha" in bad.output
    bad = cli("risk", "--qrels", q, base, run, "--baseline", "nope")
    assert bad.exit_code == 2 and "--baseline" in bad.output
    partial = _write(tmp_path / "partial.txt", {k: v for k, v in RUN.items() if k != "4"})
    refused = cli("risk", "--qrels", q, base, partial, "-m", "P.2")
    assert refused.exit_code == 1 and refused.output.count("Error:") == 1 and "queries" in refused.output


@pytest.fixture(scope="module")
def dl19(msmarco):
    """DL19 per-query nDCG@10 and P@10 (relevance level 2) of three runs, from pytrec_eval."""
    import pytrec_eval
    from oracles import pytrec_inputs

    from toolkit.data.trec_io import read_qrels, read_run

    qrels = msmarco / "qrels.dl19-passage.txt"
    q = read_qrels(qrels)
    runs = {n: str(msmarco / "runs" / f"run.dl19.{n}.top100.txt") for n in ("bm25", "tasb", "bm25-rm3")}
    per = {}
    for n, path in runs.items():
        qq, rr = pytrec_inputs(q.frame, read_run(path).frame)
        res = pytrec_eval.RelevanceEvaluator(qq, {"ndcg_cut.10", "P.10"}, relevance_level=2).evaluate(rr)
        per[n] = pd.DataFrame(res).T.sort_index()
    return qrels, runs, per


def test_dl19_against_numpy(dl19, cli):
    qrels, runs, per = dl19
    args = [f"{n}={p}" for n, p in runs.items()]
    result = cli("risk", "--qrels", qrels, "-l", "2", *args, "-m", "ndcg_cut.10", "-m", "P.10", "--alpha", "1",
                 "--alpha", "5", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["results"]) == 2 * 2 * 2  # measures x alphas x runs
    base = per["bm25"]
    for row in doc["results"]:
        column = {"ndcg_cut_10": "ndcg_cut_10", "P_10": "P_10"}[row["measure"]]
        d = (per[row["run"]][column] - base[column]).to_numpy()  # pytrec_eval's per-query values, same index
        alpha = row["alpha"]
        z = np.where(d < 0, (1 + alpha) * d, d)
        u = (d[d > 0].sum() - (1 + alpha) * -d[d < 0].sum()) / len(d)
        assert row["urisk"] == pytest.approx(u, abs=1e-12) == pytest.approx(z.mean(), abs=1e-12)
        ref = stats.ttest_1samp(z, 0.0)
        assert row["trisk"] == pytest.approx(ref.statistic, rel=1e-9)
        assert row["p"] == pytest.approx(ref.pvalue, rel=1e-8)
        assert row["n_queries"] == len(d) == 43
        assert (row["wins"], row["losses"]) == (int((d > 0).sum()), int((d < 0).sum()))
    tasb = next(r for r in doc["results"] if r["run"] == "tasb" and r["alpha"] == 1 and r["measure"] == "ndcg_cut_10")
    assert tasb["trisk"] > 2  # TAS-B's gain over BM25 on DL19 survives a doubled weight of its losses


def test_library_equals_cli(dl19, cli):
    import toolkit as ts

    qrels, runs, _ = dl19
    r = ts.risk(qrels, runs, baseline="tasb", measures="nDCG@10", alpha=[0, 1], relevance_level=2)
    assert isinstance(r, ts.Risk) and r.baseline == "tasb"
    t = r.table
    assert list(t["run"]) == ["bm25", "bm25-rm3"] * 2 and list(t["alpha"]) == [0, 0, 1, 1]
    cmp = ts.compare(qrels, runs, baseline="tasb", measures="nDCG@10", relevance_level=2, permutations=10,
                     bootstrap=10).tests.set_index("run")  # fmt: skip
    at0 = t[t["alpha"] == 0].set_index("run")
    assert at0["urisk"].to_numpy() == pytest.approx(cmp.loc[["bm25", "bm25-rm3"], "delta"].to_numpy(), abs=1e-12)
    assert (t["urisk"][t["alpha"] == 1].to_numpy() < at0["urisk"].to_numpy()).all()  # losses weigh more
    cli_doc = json.loads(
        cli(
            "risk",
            "--qrels",
            qrels,
            "-l",
            "2",
            *(f"{n}={p}" for n, p in runs.items()),
            "--baseline",
            "tasb",
            "-m",
            "nDCG@10",
            "--alpha",
            "0",
            "--alpha",
            "1",
            "--format",
            "json",
        ).stdout
    )
    assert [row["urisk"] for row in cli_doc["results"]] == pytest.approx(list(t["urisk"]), abs=1e-15)
    for bad in (-1, "1", [0.5, math.nan], []):
        with pytest.raises(ConfigError, match="alpha"):
            ts.risk(qrels, runs, alpha=bad)
    with pytest.raises(ConfigError, match="baseline 'x'"):
        ts.risk(qrels, runs, baseline="x")


def test_risk_takes_every_evaluation_setting():
    from toolkit.cli import main
    from toolkit.measures.settings import SETTING_NAMES

    names = {p.name for p in main.commands["risk"].params}
    assert set(SETTING_NAMES) - {"allow_no_common"} <= names and "level" not in names


def test_csv_neutralises_run_names():
    """A run named like a spreadsheet formula, or holding a carriage return, is written as text in its cell."""
    import csv

    from toolkit.api.risk import Risk

    class Named(Risk):
        @property
        def table(self) -> pd.DataFrame:
            return pd.DataFrame({"run": ["=HYPERLINK(1)", "a\rb"], "urisk": [0.5, -0.25]})

    rows = list(csv.reader(io.StringIO(Named((), {}).to_csv(), newline="")))
    assert rows == [["run", "urisk"], ["'=HYPERLINK(1)", "0.5"], ["a\rb", "-0.25"]], rows
