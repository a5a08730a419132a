"""Every fusion method against its peer's own code on real runs: ranx 0.3.21 (``fuse``, its ``*_train`` functions and
``optimize_fusion``), Pyserini 1.6 (``pyserini.fusion``) and trectools 0.0.50 (``trectools.fusion``).

The inputs are the five DL19 top-100 runs of ../shared/data less the documents whose float32 score equals another's
in the same query (a few dozen of 21,500 lines; ranks renumbered), so no input ties. A fused score equals the peer's
to 1e-9 (relative above 1), the same documents are fused, and along twostage's order the peer's scores never rise
(compared as float32, the precision at which twostage orders; equal fused scores are ordered by document id
descending here, by the peer's sort there).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.data.records import Run
from toolkit.data.trec_io import read_qrels, read_run
from toolkit.retrieval.fusion import METHODS, NORMALIZATIONS, FuseOptions, build_pool, fuse

pytestmark = pytest.mark.data

NAMES = ("bm25", "bm25-rm3", "openai-ada2", "splade-pp-ed", "tasb")
RANX_NORMS = {"none": None, "minmax": "min-max", "max": "max", "sum": "sum", "zmuv": "zmuv", "rank": "rank"}
RANX_NORMS["borda"] = "borda"
WEIGHTS = (0.1, 0.2, 0.3, 0.25, 0.15)
#: the ranx methods that learn nothing, with the parameters they need.
PLAIN = {
    "sum": {},
    "max": {},
    "min": {},
    "med": {},
    "anz": {},
    "mnz": {},
    "gmnz": {"gamma": 0.3},
    "wsum": {"weights": WEIGHTS},
    "wmnz": {"weights": WEIGHTS},
    "mixed": {"weights": WEIGHTS},
    "rrf": {"k": 20},
    "isr": {},
    "log_isr": {},
    "logn_isr": {"sigma": 0.2},
    "bordafuse": {},
    "w_bordafuse": {"weights": WEIGHTS},
    "rbc": {"phi": 0.8},
}


def _write(frame: pd.DataFrame, path: Path) -> Path:
    frame = frame.copy()
    frame["r"] = frame.groupby("q").cumcount() + 1
    frame[["q", "q0", "d", "r", "s", "t"]].to_csv(path, sep=" ", header=False, index=False)
    return path


def _frame(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep=" ", header=None, names=["q", "q0", "d", "r", "s", "t"], dtype={"q": str, "d": str})


@pytest.fixture(scope="module")
def untied(msmarco, tmp_path_factory) -> list[Path]:
    """The five DL19 runs without documents whose float32 score ties another's in their query."""
    folder = tmp_path_factory.mktemp("untied")
    out = []
    for name in NAMES:
        frame = _frame(msmarco / "runs" / f"run.dl19.{name}.top100.txt")
        tied = frame.assign(s32=frame["s"].astype(np.float32)).duplicated(["q", "s32"], keep=False)
        assert 0 <= tied.sum() < 40
        out.append(_write(frame[~tied], folder / f"{name}.txt"))
    return out


@pytest.fixture(scope="module")
def ours(untied) -> list[Run]:
    return [read_run(p) for p in untied]


@pytest.fixture(scope="module")
def theirs(untied) -> list:
    from ranx import Run as RanxRun

    return [RanxRun.from_file(str(p), kind="trec") for p in untied]


@pytest.fixture(scope="module")
def qrels(msmarco):
    return read_qrels(msmarco / "qrels.dl19-passage.txt")


@pytest.fixture(scope="module")
def ranx_qrels(msmarco):
    from ranx import Qrels

    return Qrels.from_file(str(msmarco / "qrels.dl19-passage.txt"), kind="trec")


def assert_same(mine: Run, peer: dict[str, dict[str, float]], queries=None) -> None:
    """The peer's fused run ({query: {doc: score}}) and ours: the same documents, scores to 1e-9, the same order."""
    frame = mine.frame if queries is None else mine.frame[mine.frame["query_id"].isin(queries)]
    got = {(q, d): s for q, d, s in frame.itertuples(index=False)}
    want = {(q, d): float(s) for q, docs in peer.items() if queries is None or q in queries for d, s in docs.items()}
    assert got.keys() == want.keys()
    worst = max(abs(got[k] - want[k]) / max(1.0, abs(want[k])) for k in want)
    assert worst <= 1e-9, worst
    for q, group in frame.groupby("query_id", sort=False):
        peer32 = np.array([want[(q, d)] for d in group["doc_id"]], dtype=np.float32)
        assert (np.diff(peer32) <= 0).all(), q


def _ranx_norm(runs, norm):
    from ranx.normalization import norm_switch

    if norm is None:
        return runs
    return norm_switch(norm)(runs) if norm == "borda" else [norm_switch(norm)(r) for r in runs]


# ---------------------------------------------------------------- ranx
@pytest.mark.parametrize("norm", ["none", "minmax"])
@pytest.mark.parametrize("name", list(PLAIN))
def test_ranx_methods_equal_ranx_fuse(ours, theirs, name, norm):
    from ranx import fuse as ranx_fuse

    params = dict(PLAIN[name])
    weights = params.pop("weights", None)
    mine = fuse(ours, FuseOptions(name, norm, weights=weights, params=params, hits=10**6))
    peer = ranx_fuse(theirs, norm=RANX_NORMS[norm], method=name, params=PLAIN[name] or None)
    assert_same(mine.run, peer.to_dict())


@pytest.mark.parametrize(
    "name, norm",
    [
        (name, norm)
        for norm in NORMALIZATIONS
        if norm not in ("none", "minmax")
        for name in ("sum", "mnz", "wsum", "rrf")
        if not (norm == "borda" and name == "rrf")  # refused: rrf reads ranks (tested by hand)
    ],
)
def test_every_normalisation_equals_ranx(ours, theirs, name, norm):
    from ranx import fuse as ranx_fuse

    weights = WEIGHTS if name == "wsum" else None
    mine = fuse(ours, FuseOptions(name, norm, weights=weights, hits=10**6))
    peer = ranx_fuse(theirs, norm=RANX_NORMS[norm], method=name, params={"weights": WEIGHTS} if weights else None)
    assert_same(mine.run, peer.to_dict())


#: the learning methods: our parameters, and ranx's ``*_train`` function with its extra arguments, as
#: ``optimize_fusion`` calls it, then the parameters ``fuse`` takes.
LEARNED = {
    "posfuse": ({}, "posfuse_train", (), "probs", {}),
    "probfuse": ({"n_segments": 7}, "probfuse_train", (7,), "probs", {}),
    "segfuse": ({}, "segfuse_train", (), "probs", {}),
    "slidefuse": ({"w": 3}, "slidefuse_train", (), "probs", {"w": 3}),
    "mapfuse": ({}, "mapfuse_train", (), "map_scores", {}),
    "bayesfuse": ({}, "bayesfuse_train", (), "log_odds", {}),
}


@pytest.mark.parametrize("norm", ["none", "minmax"])
@pytest.mark.parametrize("name", list(LEARNED))
def test_learning_methods_equal_ranx_with_what_ranx_learns(ours, theirs, qrels, ranx_qrels, name, norm):
    """ranx learns on the normalised runs (as its ``optimize_fusion`` does) and fuses with what it learned."""
    import ranx.fusion
    from ranx import fuse as ranx_fuse

    params, train, extra, key, more = LEARNED[name]
    mine = fuse(ours, FuseOptions(name, norm, params=params, hits=10**6), qrels)
    learned = getattr(ranx.fusion, train)(ranx_qrels, _ranx_norm(theirs, RANX_NORMS[norm]), *extra)
    peer = ranx_fuse(theirs, norm=RANX_NORMS[norm], method=name, params={key: learned} | more)
    assert_same(mine.run, peer.to_dict())
    assert mine.record["training_queries"] == 43


#: the searches whose trials fuse without ties, with knobs keeping them short, on three runs.
SEARCHES = {
    "wsum": {},
    "mixed": {},
    "rbc": {"step": 0.05, "min_phi": 0.05},
    "gmnz": {"step": 0.05, "min_gamma": 0.05},
    "logn_isr": {"step": 0.1, "min_sigma": 0.1},
    "slidefuse": {"max_w": 12},
    "rrf": {},
}


@pytest.mark.parametrize("name", list(SEARCHES))
def test_searches_keep_what_ranx_optimize_fusion_keeps(ours, theirs, qrels, ranx_qrels, name):
    from ranx import optimize_fusion

    runs, peer_runs = [ours[i] for i in (0, 2, 4)], [theirs[i] for i in (0, 2, 4)]
    mine = fuse(runs, FuseOptions(name, "minmax", params=SEARCHES[name], hits=10**6), qrels)
    best = optimize_fusion(ranx_qrels, peer_runs, norm="min-max", method=name, show_progress=False, **SEARCHES[name])
    target = METHODS[name].search.target
    assert mine.record[target] == pytest.approx(list(best[target]) if target == "weights" else best[target])
    assert mine.record["searched"]["metric"] == "ndcg" and mine.record["searched"]["trials"] > 5


def _intersected(untied: list[Path], folder: Path) -> list[Path]:
    frames = [_frame(p) for p in untied]
    common = frames[0][["q", "d"]]
    for f in frames[1:]:
        common = common.merge(f[["q", "d"]])
    return [_write(f.merge(common), folder / f"common-{i}.txt") for i, f in enumerate(frames)]


def _transitive(pool, weights) -> list[str]:
    """The queries whose pairwise majorities order the candidates strictly (no cycle, no tie)."""
    out, bounds = [], pool.starts()
    for q in range(len(pool.queries)):
        lo, hi = bounds[q], bounds[q + 1]
        pos = np.where(pool.present[:, lo:hi], pool.rank[:, lo:hi], 10**9)
        votes = sum(w * (pos[r][:, None] < pos[r][None, :]) for r, w in enumerate(weights))
        off = ~np.eye(hi - lo, dtype=bool)
        wins = (votes > votes.T).sum(axis=1)
        if len(set(wins)) == hi - lo and not (votes == votes.T)[off].any():
            out.append(str(pool.queries[q]))
    return out


def test_condorcet_equals_ranx_where_majorities_are_transitive(untied, tmp_path):
    """Runs over the same documents (each run's documents that all five hold), where every pair has a majority;
    ranx's order is then the one order a pairwise sort can give, whatever its input order."""
    from ranx import Run as RanxRun
    from ranx import fuse as ranx_fuse

    paths = _intersected(untied, tmp_path)
    for chosen in ((1, 2, 3), (2, 3, 4)):
        runs = [read_run(paths[i]) for i in chosen]
        queries = _transitive(build_pool(runs, 1000, True), (1, 1, 1))
        assert len(queries) >= 10
        peer = ranx_fuse([RanxRun.from_file(str(paths[i]), kind="trec") for i in chosen], norm=None, method="condorcet")
        assert_same(fuse(runs, FuseOptions("condorcet", hits=10**6)).run, peer.to_dict(), set(queries))
    # weights 0.6, 0.3, 0.1: the first run outvotes the others on every pair: a transitive majority everywhere
    runs = [read_run(p) for p in paths[:3]]
    peer_runs = [RanxRun.from_file(str(p), kind="trec") for p in paths[:3]]
    weights = (0.6, 0.3, 0.1)
    mine = fuse(runs, FuseOptions("w_condorcet", weights=weights, hits=10**6)).run
    assert_same(mine, ranx_fuse(peer_runs, norm=None, method="w_condorcet", params={"weights": weights}).to_dict())


def test_borda_count_is_bordafuse(ours, theirs):
    from ranx import fuse as ranx_fuse

    assert_same(
        fuse(ours, FuseOptions("borda_count", hits=10**6)).run,
        ranx_fuse(theirs, norm=None, method="bordafuse").to_dict(),
    )


# ---------------------------------------------------------------- Pyserini
def _pyserini(run) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, s in run.run_data[["topic", "docid", "score"]].itertuples(index=False):
        out.setdefault(str(q), {})[str(d)] = float(s)
    return out


@pytest.fixture(scope="module")
def shuffled(untied, tmp_path_factory) -> list[Path]:
    """The runs with each query's lines in a random order, the rank column numbering the lines as they stand."""
    folder = tmp_path_factory.mktemp("shuffled")
    rng = np.random.default_rng(41)
    out = []
    for p in untied:
        frame = _frame(p)
        frame = frame.iloc[rng.permutation(len(frame))].sort_values("q", kind="stable")
        out.append(_write(frame, folder / p.name))
    return out


@pytest.mark.parametrize("resort", [True, False])
@pytest.mark.parametrize("depth", [1000, 20])
@pytest.mark.parametrize("name", ["rrf", "average", "normalize", "interpolation"])
def test_pyserini_methods_equal_pyserini_fusion(shuffled, name, depth, resort):
    """Pyserini reads the lines in file order, with ``--resort`` in score order (``TrecRun(resort=...)``)."""
    from pyserini import fusion
    from pyserini.trectools import TrecRun

    paths = shuffled[:2] if name == "interpolation" else shuffled
    peer_runs = [TrecRun(str(p), resort=resort) for p in paths]
    runs = [read_run(p) for p in paths]
    settings = {"params": {"alpha": 0.3}} if name == "interpolation" else {}
    mine = fuse(runs, FuseOptions(name, depth=depth, hits=10**6, resort=resort, **settings))
    if name == "rrf":
        peer = fusion.reciprocal_rank_fusion(peer_runs, rrf_k=60, depth=depth, k=10**6)
    elif name == "interpolation":
        peer = fusion.interpolation(peer_runs, alpha=0.3, depth=depth, k=10**6)
    else:
        peer = getattr(fusion, name)(peer_runs, depth=depth, k=10**6)
    assert_same(mine.run, _pyserini(peer))


# ---------------------------------------------------------------- trectools
def _trectools(run) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, s in run.run_data[["query", "docid", "score"]].itertuples(index=False):
        out.setdefault(str(q), {})[str(d)] = float(s)
    return out


@pytest.fixture(scope="module")
def trectools_runs(untied):
    from trectools import TrecRun

    return [TrecRun(str(p)) for p in untied]


@pytest.mark.parametrize("strategy", ["sum", "max", "min", "anz", "mnz", "med"])
def test_trectools_combos_equal_the_same_names(ours, trectools_runs, strategy):
    """trectools' combos merge two runs (a third breaks its merge): each strategy is twostage's method of its name."""
    from trectools import fusion

    peer = fusion.combos(trectools_runs[:2], strategy=strategy, max_docs=10**6)
    assert_same(fuse(ours[:2], FuseOptions(strategy, hits=10**6)).run, _trectools(peer))


def test_trectools_rank_fusions_equal_trectools(ours, trectools_runs):
    from trectools import fusion

    peer = fusion.reciprocal_rank_fusion(trectools_runs, k=60, max_docs=10**6)
    assert_same(fuse(ours, FuseOptions("rrf", hits=10**6)).run, _trectools(peer))
    peer = fusion.rank_biased_precision_fusion(trectools_runs, p=0.9, max_docs=10**6)
    mine = fuse(ours, FuseOptions("rank_biased_precision_fusion", params={"p": 0.9}, hits=10**6))
    assert_same(mine.run, _trectools(peer))


@pytest.mark.parametrize("pair", [(0, 2), (1, 3), (2, 4)])
def test_vector_space_fusion_equals_trectools(ours, trectools_runs, pair):
    from trectools import fusion

    peer = fusion.vector_space_fusion([trectools_runs[i] for i in pair], max_docs=10**6)
    assert_same(fuse([ours[i] for i in pair], FuseOptions("vector_space_fusion", hits=10**6)).run, _trectools(peer))
