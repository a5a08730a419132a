"""Ranking agreement: rank-biased overlap and Kendall's tau on the top k, against plain-Python definitions.

The oracles here are written from the papers' definitions, literally (prefix sets at every depth, every pair
counted), not from the toolkit's vectorised code.
"""

from __future__ import annotations

import math
import random

import pytest

from toolkit.data.records import run_from_rows
from toolkit.stats.rank_similarity import agreement, kendall_tau_top, ranked_lists, rbo


def rbo_ext_definition(a, b, p):
    """Webber, Moffat & Zobel (2010), eq. 32, term by term: X_d = |S[:d] ∩ L[:d]| over prefix sets."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    S, L = (a, b) if len(a) <= len(b) else (b, a)
    s, l = len(S), len(L)  # noqa: E741 (S, L, s, l as in Webber et al.'s RBO_ext formula)

    def X(d):
        return len(set(S[: min(d, s)]) & set(L[:d]))

    first = sum(X(d) / d * p**d for d in range(1, l + 1))
    second = sum(X(s) * (d - s) / (s * d) * p**d for d in range(s + 1, l + 1))
    return (1 - p) / p * (first + second) + ((X(l) - X(s)) / l + X(s) / s) * p**l


def tau_b_definition(a, b, k):
    """Kendall's tau-b over the union of the two top-k lists; outside a list's top k = tied at its bottom."""
    union = list(dict.fromkeys(a[:k] + b[:k]))
    ra = {d: (a[:k].index(d) if d in a[:k] else k) for d in union}
    rb = {d: (b[:k].index(d) if d in b[:k] else k) for d in union}
    c = dis = ta = tb = 0
    for i in range(len(union)):
        for j in range(i + 1, len(union)):
            x = ra[union[i]] - ra[union[j]]
            y = rb[union[i]] - rb[union[j]]
            if x == 0 and y == 0:
                continue
            if x == 0:
                ta += 1
            elif y == 0:
                tb += 1
            elif (x > 0) == (y > 0):
                c += 1
            else:
                dis += 1
    denom = math.sqrt((c + dis + ta) * (c + dis + tb))
    return (c - dis) / denom if denom else math.nan


def test_rbo_by_hand():
    # identical lists agree fully, disjoint lists not at all, the empty cases as stated
    assert rbo(list("abcde"), list("abcde")) == pytest.approx(1.0, abs=1e-15)
    assert rbo(list("abc"), list("xyz")) == 0.0
    assert (rbo([], []), rbo(["a"], [])) == (1.0, 0.0)
    # two lists of length 2 swapped: X_1 = 0, X_2 = 2 -> (1-p)/p * (0 + 2/2 p^2) + 2/2 p^2 = p(1-p) + p^2 = p
    assert rbo(["a", "b"], ["b", "a"], p=0.9) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="persistence"):
        rbo(["a"], ["a"], p=1.0)


def random_pairs(seed: int, n: int, shortest: int):
    """``n`` pairs of rankings drawn from a shared pool of documents, of any lengths from ``shortest`` up."""
    rng = random.Random(seed)
    for _ in range(n):
        pool = [f"d{i}" for i in range(rng.randint(max(shortest, 1), 40))]
        yield (
            rng,
            rng.sample(pool, rng.randint(shortest, len(pool))),
            rng.sample(pool, rng.randint(shortest, len(pool))),
        )


def test_rbo_matches_the_definition_on_random_lists():
    for rng, a, b in random_pairs(7, 400, shortest=0):
        p = rng.choice([0.5, 0.8, 0.9, 0.98])
        assert rbo(a, b, p) == pytest.approx(rbo_ext_definition(a, b, p), abs=1e-12)
        assert rbo(a, b, p) == pytest.approx(rbo(b, a, p), abs=1e-12)  # symmetric


def test_kendall_tau_by_hand():
    # a: 1 2 3, b: 1 3 2 -> (1,2) and (1,3) concordant, (2,3) discordant: (2 - 1) / 3
    assert kendall_tau_top(["1", "2", "3"], ["1", "3", "2"], k=3) == pytest.approx(1 / 3)
    assert kendall_tau_top(list("abcdefghij"), list("jihgfedcba")) == pytest.approx(-1)
    # disjoint top 10s: 100 discordant pairs, 45 tied in each ranking -> -100 / 145
    assert kendall_tau_top(list("abcdefghij"), list("klmnopqrst")) == pytest.approx(-100 / 145)
    # only the top k matters: what follows rank 3 changes nothing
    assert kendall_tau_top(list("abcxyz"), list("abczyx"), k=3) == pytest.approx(1)
    assert math.isnan(kendall_tau_top(["a"], ["a"]))


def test_kendall_tau_matches_the_definition_on_random_lists():
    for rng, a, b in random_pairs(11, 300, shortest=1):
        k = rng.choice([3, 5, 10])
        got, want = kendall_tau_top(a, b, k), tau_b_definition(a, b, k)
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12)


def test_agreement_reads_runs_in_trec_eval_order():
    # equal scores: document id descending (trec_eval), so run A ranks y above x
    a = run_from_rows([("q", "x", 1.0), ("q", "y", 1.0), ("q", "z", 0.5)])
    b = run_from_rows([("q", "y", 3.0), ("q", "x", 2.0), ("q", "z", 1.0), ("r", "w", 1.0)])
    lists_a, lists_b = ranked_lists(a, ["q", "r"]), ranked_lists(b, ["q", "r"])
    assert lists_a == {"q": ["y", "x", "z"], "r": []}
    table = agreement(lists_a, lists_b, ["q", "r"]).set_index("query_id")
    assert table.loc["q", "rbo"] == pytest.approx(1.0) and table.loc["q", "kendall_tau_10"] == pytest.approx(1.0)
    assert table.loc["r", "rbo"] == 0.0  # one list empty


def test_agreement_of_every_query_at_once_equals_the_per_query_functions_to_the_bit():
    """``agreement`` computes every query in numpy; ``rbo`` and ``kendall_tau_top`` (checked above against the
    paper's formula and scipy) are the oracle, compared with ==: lists of every length from 0 to 60 (so
    shorter/longer groups of one and of many queries), overlaps from none to all, and CodedLists passed in."""
    import numpy as np

    from toolkit.stats.rank_similarity import agreement, code_lists, kendall_tau_top, rbo

    rng = np.random.default_rng(5)
    a, b = {}, {}
    for i in range(600):
        pool = [f"d{j}" for j in range(int(rng.integers(1, 90)))]
        la, lb = (int(rng.integers(0, 61)) if rng.random() < 0.7 else 10 for _ in range(2))
        a[f"q{i}"] = list(rng.permutation(pool)[: min(la, len(pool))])
        b[f"q{i}"] = list(rng.permutation(pool)[: min(lb, len(pool))])
    a["same"], b["same"] = ["x", "y", "z"], ["x", "y", "z"]
    a["gone"] = ["x"]  # b lacks the query: an empty list
    qids = [*a, "neither"]
    got = agreement(a, b, qids)
    want_rbo = [rbo(a.get(q, []), b.get(q, [])) for q in qids]
    want_tau = [kendall_tau_top(a.get(q, []), b.get(q, [])) for q in qids]
    assert got["query_id"].tolist() == qids
    assert got["rbo"].tolist() == want_rbo
    np.testing.assert_array_equal(got["kendall_tau_10"].to_numpy(), np.array(want_tau))  # NaN where undefined
    assert np.isnan(want_tau).any() and got.loc[got["query_id"] == "neither", "rbo"].item() == 1.0
    coded = code_lists({"a": a, "b": b}, qids)
    again = agreement(coded["a"], coded["b"], qids)
    assert again["rbo"].tolist() == want_rbo


def test_code_runs_equals_code_lists_of_the_ranked_lists():
    """The runs encoded from their trec_eval order give the same per-query lists (decoded) as ``ranked_lists``,
    queries absent from a run empty, queries outside the set left out, ties broken by document id."""
    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.stats.rank_similarity import code_runs, ranked_lists

    a = Run(frame=pd.DataFrame({"query_id": ["2", "1", "1", "1", "9"], "doc_id": ["x", "b", "a", "c", "z"],
                                "score": [1.0, 2.0, 2.0, 3.0, 1.0]}), path="a")  # fmt: skip
    b = Run(frame=pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["c", "q"], "score": [0.5, 0.7]}), path="b")
    qids = ["1", "2", "3"]
    coded = code_runs({"a": a, "b": b}, qids)
    vocab: dict[int, str] = {}
    for run, c in zip((a, b), coded.values()):
        lists = ranked_lists(run, qids)
        flat = [d for q in qids for d in lists[q]]
        assert c.lengths.tolist() == [len(lists[q]) for q in qids]
        for code, doc in zip(c.codes.tolist(), flat):
            assert vocab.setdefault(code, doc) == doc  # one vocabulary: a code is one document in every run
    assert ranked_lists(a, qids)["1"] == ["c", "b", "a"] and len(set(vocab.values())) == len(vocab)


def test_ranked_lists_on_demand_equal_ranked_lists():
    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.stats.rank_similarity import RankedLists, ranked_lists

    run = Run(frame=pd.DataFrame({"query_id": ["2", "1", "1", "1", "9", "2"], "doc_id": ["x", "b", "a", "c", "z", "y"],
                                  "score": [1.0, 2.0, 2.0, 3.0, 1.0, 4.0]}), path="a")  # fmt: skip
    qids = ["3", "2", "1"]
    lazy = RankedLists(run, qids)
    assert dict(lazy) == ranked_lists(run, qids) == {"3": [], "2": ["y", "x"], "1": ["c", "b", "a"]}
    assert lazy.get("9", []) == [] and list(lazy) == qids


def test_code_aligned_gives_the_agreement_of_code_runs():
    """Codes from the alignment of reranked runs with their first stage (first-stage rows; ids for documents the
    first stage's query lacks, shared by the reranked runs) give every pair the agreement ``code_runs`` gives:
    a document only the reranked runs hold, one the first stage holds in another query only, a query only the
    reranked runs hold, a query only the first stage holds."""
    import dataclasses

    import pandas as pd

    from toolkit.data.records import Run
    from toolkit.diagnosis.depths import alignment
    from toolkit.stats.rank_similarity import _shared, agreement, code_aligned, code_runs

    def run(rows, path):
        q, d, s = zip(*rows)
        return Run(frame=pd.DataFrame({"query_id": q, "doc_id": d, "score": s}), path=path)

    first = run([("1", "a", 5.0), ("1", "b", 4.0), ("1", "c", 3.0), ("1", "d", 2.0), ("2", "x", 3.0),
                 ("2", "a", 2.0), ("2", "e", 1.0), ("4", "a", 1.0)], "f")  # fmt: skip
    r1 = run([("1", "c", 9.0), ("1", "new", 8.0), ("1", "a", 7.0), ("1", "x", 6.0), ("2", "e", 5.0),
              ("2", "x", 4.0), ("3", "new", 1.0), ("3", "a", 0.5)], "r1")  # fmt: skip
    r2 = run([("1", "x", 9.0), ("1", "a", 8.0), ("1", "new", 7.0), ("2", "a", 5.0), ("3", "a", 2.0),
              ("3", "new", 1.0)], "r2")  # fmt: skip
    qids = ["1", "2", "3", "4", "5"]
    runs = {"f": first, "r1": r1, "r2": r2}
    want = code_runs(runs, qids)
    got = code_aligned("f", first, {n: (r, alignment(first, r, "float64").row_in_first) for n, r in
                                    runs.items() if n != "f"}, qids, "float64")  # fmt: skip
    assert list(got) == list(want)
    for a in runs:
        assert got[a].lengths.tolist() == want[a].lengths.tolist()
        for b in runs:
            pd.testing.assert_frame_equal(agreement(got[a], got[b], qids), agreement(want[a], want[b], qids))
    # r1's "new" and r2's "new" in query 1 share a code; r1's "x" in query 1 (first stage: only in query 2) has one
    q1 = {n: got[n].codes[: got[n].lengths[0]].tolist() for n in ("r1", "r2")}
    assert q1["r1"][1] == q1["r2"][2] and q1["r1"][3] == q1["r2"][0] and q1["r1"][3] >= len(first.frame)
    # the first stage's codes are distinct (rows): its shared documents are found by lookup, as by the sort
    assert got["f"].distinct and not got["r1"].distinct
    plain = dataclasses.replace(got["f"], distinct=False)
    for other in ("r1", "r2"):
        for x, y, z in ((got["f"], got[other], plain), (got[other], got["f"], plain)):
            fast = sorted(zip(*(v.tolist() for v in _shared(x, y))))
            slow = sorted(zip(*(v.tolist() for v in _shared(z if x.distinct else x, z if y.distinct else y))))
            assert fast == slow and fast
