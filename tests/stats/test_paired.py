"""`twostage compare`: JSON fields, p-values against scipy, provenance refusal, HTML with plots."""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracles import pytrec_inputs
from scipy import stats

from toolkit.data.trec_io import read_qrels, read_run

QRELS = "".join(f"{q} 0 d{q}{i} {int(i < 2)}\n" for q in range(1, 7) for i in range(4))


def _run(path, ranks: dict[int, list[int]]) -> str:
    lines = [f"{q} Q0 d{q}{i} {r} {10 - r} t\n" for q, order in ranks.items() for r, i in enumerate(order, 1)]
    path.write_text("".join(lines))
    return str(path)


@pytest.fixture()
def tiny(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    base = _run(tmp_path / "base.txt", {q: [2, 3, 0, 1] for q in range(1, 7)})  # relevant at 3, 4
    better = _run(tmp_path / "better.txt", {q: [0, 1, 2, 3] if q <= 4 else [2, 3, 0, 1] for q in range(1, 7)})
    worse = _run(tmp_path / "worse.txt", {q: [2, 3, 1] if q <= 2 else [2, 3, 0, 1] for q in range(1, 7)})
    partial = _run(tmp_path / "partial.txt", {q: [0, 1, 2, 3] for q in range(1, 5)})
    return tmp_path, base, better, worse, partial


def test_compare_json_fields_and_hand_values(tiny, cli):
    folder, base, better, worse, _ = tiny
    result = cli(
        "compare",
        "--qrels",
        folder / "qrels.txt",
        base,
        better,
        worse,
        "-m",
        "P.2",
        "-m",
        "ndcg_cut.10",
        "--format",
        "json",
        "--seed",
        "5",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["baseline"] == base and doc["measures"] == ["P_2", "ndcg_cut_10"]
    assert doc["tests"]["seed"] == 5 and doc["tests"]["correction"] == "holm"
    p2 = doc["results"]["P_2"]
    assert set(p2) == {better, worse}
    for key in ("mean", "delta", "p_ttest", "p_permutation", "p_adjusted", "wins", "ties", "losses"):
        assert key in p2[better]
    # By hand: baseline P@2 = 0 everywhere; `better` has P@2 = 1 on 4 of 6 queries; `worse` = baseline on P@2.
    assert doc["baseline_mean"]["P_2"] == 0.0
    assert p2[better]["mean"] == pytest.approx(4 / 6) and p2[better]["delta"] == pytest.approx(4 / 6)
    assert (p2[better]["wins"], p2[better]["ties"], p2[better]["losses"]) == (4, 2, 0)
    # 6 queries: 64 sign vectors, enumerated; |mean| >= 4/6 only when all four non-zero signs agree: 2 x 4 of 64.
    assert p2[better]["permutation_exact"] is True
    assert p2[better]["p_permutation"] == pytest.approx(8 / 64)
    assert p2[better]["p_ttest"] == pytest.approx(stats.ttest_rel([1, 1, 1, 1, 0, 0], [0] * 6).pvalue)
    assert p2[worse]["delta"] == 0 and p2[worse]["p_ttest"] == 1.0 and p2[worse]["p_permutation"] == 1.0
    # Holm over the two comparisons: sorted 0.125 (x2) = 0.25, then max(0.25, 1.0) = 1.0.
    assert p2[better]["p_adjusted"] == pytest.approx(0.25) and p2[worse]["p_adjusted"] == 1.0
    nd = doc["results"]["ndcg_cut_10"][worse]
    assert (nd["wins"], nd["ties"], nd["losses"]) == (0, 4, 2) and nd["delta"] < 0


def test_compare_bonferroni_and_text(tiny, cli):
    folder, base, better, worse, _ = tiny
    doc = json.loads(
        cli(
            "compare",
            "--qrels",
            folder / "qrels.txt",
            base,
            better,
            worse,
            "-m",
            "P.2",
            "-m",
            "ndcg_cut.10",  # `worse` equals the baseline on P.2 only: it stays in the family
            "--correction",
            "bonferroni",
            "--format",
            "json",
        ).stdout
    )
    assert doc["results"]["P_2"][better]["p_adjusted"] == pytest.approx(2 * 8 / 64)
    text = cli("compare", "--qrels", folder / "qrels.txt", base, better, "-m", "P.2").output
    assert "correction: holm" in text and "permutations, seed 42" in text
    assert "+0.6667" in text and "4/2/0" in text


def test_compare_refuses_different_query_sets(tiny, cli):
    folder, base, _, _, partial = tiny
    result = cli("compare", "--qrels", folder / "qrels.txt", base, partial, "-m", "P.2")
    assert result.exit_code == 1
    assert "Error: refusing to compare results computed under different settings" in result.output
    assert (
        f"evaluated queries ({base} vs {partial}): '6 queries, 2 not in {partial}: 5, 6' vs '4 queries'"
        in result.output
    )
    assert "pass --force" in result.output
    # -c evaluates every qrels query for both runs: comparable.
    ok = cli("compare", "--qrels", folder / "qrels.txt", base, partial, "-m", "P.2", "-c", "--format", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["results"]["P_2"][partial]["n_queries"] == 6
    # --force: paired on the shared queries, and says so.
    forced = json.loads(
        cli(
            "compare", "--qrels", folder / "qrels.txt", base, partial, "-m", "P.2", "--force", "--format", "json"
        ).stdout
    )
    assert forced["forced"] is True and forced["queries_compared"] == 4
    assert forced["results"]["P_2"][partial]["n_queries"] == 4
    assert any(k.startswith("evaluated queries") for k in forced["provenance_differences"])


def test_compare_usage_errors(tiny, cli):
    folder, base, better, *_ = tiny
    assert cli("compare", "--qrels", folder / "qrels.txt", base).exit_code == 2
    assert cli("compare", "--qrels", folder / "qrels.txt", base, base).exit_code == 2
    bad = cli("compare", "--qrels", folder / "qrels.txt", base, better, "-m", "ndcg_cutt.10")
    assert bad.exit_code == 1 and "did you mean 'ndcg_cut.10'" in bad.output
    assert cli("compare", "--qrels", folder / "qrels.txt", base, better, "--permutations", "0").exit_code == 2


def test_compare_html_with_difference_plot(tiny, cli):
    folder, base, better, worse, _ = tiny
    out = folder / "report"
    result = cli("compare", "--qrels", folder / "qrels.txt", base, better, worse, "-m", "ndcg_cut.10", "--out", out)
    assert result.exit_code == 0, result.output
    html = (out / "compare.html").read_text()
    assert html.count('<img class="plot"') == 1 and "data:image/png;base64," in html
    assert "holm correction" in html and "Provenance" in html
    assert json.loads((out / "compare.json").read_text())["baseline"] == base


def test_compare_dl19_against_scipy(msmarco, cli):
    """The command as users write it, on real runs: p-values equal scipy's on the same per-query values."""
    qrels = msmarco / "qrels.dl19-passage.txt"
    a, b, c = (str(msmarco / "runs" / f"run.dl19.{n}.top100.txt") for n in ("bm25", "bm25-rm3", "tasb"))
    result = cli("compare", "--qrels", qrels, a, b, c, "-m", "ndcg_cut.10", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    res = doc["results"]["ndcg_cut_10"]
    # per-query values from an independent evaluator (pytrec_eval: trec_eval's C code)
    import pandas as pd
    import pytrec_eval

    q = read_qrels(qrels)
    per = {}
    for r in (a, b, c):
        qq, rr = pytrec_inputs(q.frame, read_run(r).frame)
        res_r = pytrec_eval.RelevanceEvaluator(qq, {"ndcg_cut.10"}).evaluate(rr)
        per[r] = pd.Series({k: v["ndcg_cut_10"] for k, v in res_r.items()}).sort_index()
    assert doc["baseline_mean"]["ndcg_cut_10"] == pytest.approx(0.5058, abs=5e-5)
    assert res[c]["mean"] == pytest.approx(0.7210, abs=5e-5)
    p_perm = []
    for run in (b, c):
        x, y = per[a].to_numpy(), per[run].loc[per[a].index].to_numpy()
        assert res[run]["delta"] == pytest.approx(float(np.mean(y - x)))
        assert res[run]["p_ttest"] == pytest.approx(stats.ttest_rel(y, x).pvalue, rel=1e-9)
        p = res[run]["p_permutation"]
        ref = stats.permutation_test(
            (y, x),
            lambda u, v, axis=0: np.mean(u - v, axis=axis),
            vectorized=True,
            permutation_type="samples",
            n_resamples=10_000,
            rng=np.random.default_rng(0),
        )
        assert abs(p - ref.pvalue) < 0.01 + 0.1 * ref.pvalue
        p_perm.append(p)
    from statsmodels.stats.multitest import multipletests

    assert [res[b]["p_adjusted"], res[c]["p_adjusted"]] == pytest.approx(multipletests(p_perm, method="holm")[1])
    assert res[c]["p_adjusted"] < 0.001  # TAS-B's gain over BM25 on DL19 is no accident


def test_compare_saved_results_refuses_other_gain(tiny, cli):
    """Saved evaluations (eval JSON) keep their provenance: a different gain or query set is named."""
    folder, base, better, *_ = tiny
    qrels = folder / "qrels.txt"
    exp = str(folder / "better.exp.json")
    lin = str(folder / "better.lin.json")
    assert (
        cli(
            "eval", "-q", "--format", "json", "-m", "ndcg_cut.10", "--gain", "exp", "--out", exp, qrels, better
        ).exit_code
        == 0
    )
    assert cli("eval", "-q", "--format", "json", "-m", "ndcg_cut.10", "--out", lin, qrels, better).exit_code == 0
    refused = cli("compare", "--qrels", qrels, base, exp, "-m", "ndcg_cut.10")
    assert refused.exit_code == 1
    assert f"gain ({base} vs {exp}): 'linear: gain(l) = l (trec_eval)' vs 'exp: gain(l) = 2^l - 1'" in refused.output
    same = json.loads(cli("compare", "--qrels", qrels, base, lin, "-m", "ndcg_cut.10", "--format", "json").stdout)
    direct = json.loads(cli("compare", "--qrels", qrels, base, better, "-m", "ndcg_cut.10", "--format", "json").stdout)
    for key in ("mean", "delta", "p_ttest", "p_permutation", "p_adjusted"):
        assert same["results"]["ndcg_cut_10"][lin][key] == direct["results"]["ndcg_cut_10"][better][key]
    missing = cli("compare", "--qrels", qrels, base, lin, "-m", "P.5")
    assert missing.exit_code == 1 and "has no per-query values for P_5 (it has: ndcg_cut_10)" in missing.output
    # no qrels needed for saved results; with binary labels exp and linear gains agree: the copy is named
    twins = cli("compare", lin, exp, "-m", "ndcg_cut.10", "--force")
    assert twins.exit_code == 1 and f"{exp} is identical to {lin}" in twins.output
    no_qrels = cli("compare", base, lin)
    assert no_qrels.exit_code == 2 and "--qrels is needed" in no_qrels.output
