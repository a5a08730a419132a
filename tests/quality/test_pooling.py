"""Leave-one-run-out pool test (Zobel 1998): against a plain-Python recomputation and hand-computed numbers on a
tiny case, and on the DL19 runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import toolkit as ts
from toolkit.cli import main
from toolkit.errors import ConfigError

QRELS = {"1": {"a": 1, "b": 1, "c": 0, "d": 1}, "2": {"x": 1, "y": 0, "z": 1}}
RUNS = {
    "A": {"1": ["a", "b", "c"], "2": ["x", "y"]},
    "B": {"1": ["a", "c", "d"], "2": ["z", "x"]},
    "C": {"1": ["d", "e"], "2": ["y", "w"]},
}


def _files(tmp_path):
    q = tmp_path / "qrels.txt"
    q.write_text("".join(f"{qid} 0 {d} {lab}\n" for qid, docs in QRELS.items() for d, lab in docs.items()))
    paths = {}
    for name, run in RUNS.items():
        p = tmp_path / f"{name}.txt"
        p.write_text(
            "".join(f"{qid} Q0 {d} {i + 1} {10 - i} {name}\n" for qid, docs in run.items() for i, d in enumerate(docs))
        )
        paths[name] = str(p)
    return str(q), paths


def _plain(qrels, runs, k, depth, level=1):
    """Plain Python: P.k (relevant in the top k / k, mean over the queries) with and without each run's unique
    pooled documents' judgments, and the ranks (1 + runs scoring strictly higher)."""

    def p_at(qr, run):
        vals = [sum(1 for d in run[q][:k] if qr.get(q, {}).get(d, -1) >= level) / k for q in run if q in qr]
        return sum(vals) / len(vals)

    pools = {n: {(q, d) for q, docs in r.items() for d in docs[:depth]} for n, r in runs.items()}
    full = {n: p_at(qrels, r) for n, r in runs.items()}
    out = {}
    for n, r in runs.items():
        unique = pools[n] - set().union(*(pools[o] for o in runs if o != n))
        reduced = {q: {d: lab for d, lab in docs.items() if (q, d) not in unique} for q, docs in qrels.items()}
        without = p_at(reduced, r)
        rest = [full[o] for o in runs if o != n]
        out[n] = (full[n], without, 1 + sum(s > full[n] for s in rest), 1 + sum(s > without for s in rest), len(unique))
    return out


def test_pool_test_tiny_case_hand_computed_and_plain_python(tmp_path):
    qrels, paths = _files(tmp_path)
    got = ts.pool_test(qrels, paths, "P.2", pool_depth=2).table
    # by hand: unique A = {1:b}; B = {1:c, 2:z}; C = {1:d, 1:e, 2:w}
    hand = {"A": (0.75, 0.5, 1, 2, 1, 1, 1), "B": (0.75, 0.5, 1, 2, 2, 2, 1), "C": (0.25, 0.0, 3, 3, 3, 1, 1)}
    for n, (score, without, rank, rank_w, unique, judged, relevant) in hand.items():
        row = got.loc[n]
        assert (row["score"], row["score_without"], row["change"]) == pytest.approx((score, without, without - score))
        assert (row["rank"], row["rank_without"], row["rank_change"]) == (rank, rank_w, rank_w - rank)
        assert (row["unique"], row["unique_judged"], row["unique_relevant"]) == (unique, judged, relevant)
    for depth in (1, 2, 3):
        for k in (1, 2, 3):
            t = ts.pool_test(qrels, paths, f"P.{k}", pool_depth=depth).table
            for n, (score, without, rank, rank_w, unique) in _plain(QRELS, RUNS, k, depth).items():
                row = t.loc[n]
                assert (row["score"], row["score_without"]) == pytest.approx((score, without)), (n, k, depth)
                assert (row["rank"], row["rank_without"], row["unique"]) == (rank, rank_w, unique), (n, k, depth)


def test_pool_test_bad_input(tmp_path):
    qrels, paths = _files(tmp_path)
    with pytest.raises(ConfigError, match="pool_depth must be an integer >= 1"):
        ts.pool_test(qrels, paths, "P.2", pool_depth=0)
    with pytest.raises(ConfigError, match="at least two runs"):
        ts.pool_test(qrels, {"A": paths["A"]}, "P.2")
    with pytest.raises(ConfigError, match="one measure"):
        ts.pool_test(qrels, paths, "P.2,5")
    res = CliRunner().invoke(main, ["pool-test", "--qrels", qrels, "--pool-depth", "0", paths["A"], paths["B"]])
    assert res.exit_code == 2 and "--pool-depth" in res.output and ">= 1" in res.output
    res = CliRunner().invoke(main, ["pool-test", "--qrels", qrels, paths["A"]])
    assert res.exit_code == 2 and "at least two runs" in res.output


def test_pool_test_cli_text_and_json(tmp_path):
    qrels, paths = _files(tmp_path)
    args = ["pool-test", "--qrels", qrels, "-m", "P.2", "--pool-depth", "2", *paths.values()]
    doc = json.loads(CliRunner().invoke(main, [*args, "--format", "json"]).output)
    assert doc["pool_depth"] == 2 and doc["measure"] == "P_2"
    assert doc["runs"]["C.txt"]["score_without"] == 0.0 and doc["runs"]["A.txt"]["rank_change"] == 1
    text = CliRunner().invoke(main, args).output.splitlines()
    assert text[0].startswith("# leave-one-run-out pool test (Zobel 1998): P_2, pool depth 2, 3 runs")
    assert text[2].split() == ["A.txt", "0.7500", "0.5000", "-0.2500", "1", "2", "1", "1", "1"]


DL19 = Path("/work/shared/data/msmarco-passage")


@pytest.mark.skipif(not (DL19 / "runs").is_dir(), reason="DL19 runs absent from /work/shared/data/msmarco-passage")
def test_pool_test_on_dl19_against_an_independent_pool():
    """The five DL19 runs, depth 10: each run's unique documents computed here from the files (trec_eval's order:
    float32 score descending, document id descending), the reduced qrels evaluated, ranks recounted."""
    from toolkit.data.trec_io import read_qrels

    runs = sorted((DL19 / "runs").glob("run.dl19.*.txt"))
    assert len(runs) == 5
    got = ts.pool_test("dl19-passage", runs, "P.10", pool_depth=10, relevance_level=2).table
    ndcg = ts.pool_test("dl19-passage", runs, "ndcg_cut.10", pool_depth=10, relevance_level=2).table

    tops: dict[str, set] = {}
    for path in runs:
        per: dict[str, list] = {}
        for line in path.read_text().splitlines():
            q, _, d, _, s, _ = line.split()
            per.setdefault(q, []).append((np.float32(float(s)), d))
        tops[path.stem] = {
            (q, d) for q, docs in per.items() for _, d in sorted(docs, key=lambda t: (t[0], t[1]), reverse=True)[:10]
        }
    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt").frame
    labels = {(q, d): int(r) for q, d, r in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"])}
    full = {p.stem: ts.evaluate("dl19-passage", p, "ndcg_cut.10").summary.iloc[0] for p in runs}
    for path in runs:
        n = path.stem
        unique = tops[n] - set().union(*(tops[o] for o in tops if o != n))
        removed_relevant = sum(1 for key in unique if labels.get(key, -1) >= 2)
        row = got.loc[n]
        assert row["unique"] == len(unique) and row["unique_relevant"] == removed_relevant
        assert row["unique_judged"] == sum(1 for key in unique if labels.get(key, -1) >= 0)
        # P@10 with a pool of depth 10: each removed relevant judgment was in the run's own top 10
        assert row["change"] == pytest.approx(-removed_relevant / 10 / 43)
        reduced = qrels[[(q, d) not in unique for q, d in zip(qrels["query_id"], qrels["doc_id"])]]
        without = ts.evaluate(reduced, path, "ndcg_cut.10").summary.iloc[0]
        assert ndcg.loc[n, "score"] == pytest.approx(full[n]) and ndcg.loc[n, "score_without"] == pytest.approx(without)
        rest = [full[o] for o in full if o != n]
        assert ndcg.loc[n, "rank_without"] == 1 + sum(s > without for s in rest)
    assert (ndcg["change"] < 0).all()
