"""Rerank and fuse pick their top-N in the order the evaluator and the diagnosis use (float32 scores).

The inputs build a float32 tie on the depth cut: two candidates whose scores differ only
beyond float32 precision. In float32 they tie and trec_eval breaks the tie by document id,
descending; in float64 the other one would win. Selection must agree with
``ranking.order_run`` at ``DEFAULT_SCORE_PRECISION`` (what ``diagnose`` ranks with).
"""

from __future__ import annotations

import numpy as np

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import run_from_rows
from toolkit.data.texts import TextSource
from toolkit.reranking.rerank_job import rerank_run
from toolkit.reranking.rerank_options import RerankOptions
from toolkit.retrieval.fusion import FuseOptions, fuse


def rrf(runs, k=60.0, depth=1000, hits=1000):
    return fuse(runs, FuseOptions("rrf", k=k, depth=depth, hits=hits)).run


def interpolate(runs, alpha=0.5, depth=1000, hits=1000, normalize="none"):
    options = FuseOptions("interpolation", normalize, params={"alpha": alpha}, depth=depth, hits=hits)
    return fuse(runs, options).run


HIGH = 2.0
TIED = 1.0
NUDGED = 1.0 + 1e-12  # > TIED in float64, == TIED in float32


def tie_run():
    # depth 2: "top" is in; "a" (float64-higher) and "b" (doc id higher) tie in float32 for place 2
    return run_from_rows([("q", "top", HIGH), ("q", "a", NUDGED), ("q", "b", TIED), ("q", "z", 0.5)])


def test_the_fixture_is_a_float32_tie():
    assert np.float32(NUDGED) == np.float32(TIED) and NUDGED > TIED
    ordered = order_run(tie_run().frame, DEFAULT_SCORE_PRECISION)
    assert ordered["doc_id"].tolist()[:2] == ["top", "b"]  # doc id descending breaks the tie
    assert order_run(tie_run().frame, "float64")["doc_id"].tolist()[:2] == ["top", "a"]


class Constant:
    kind = "constant"
    model_name = "constant"

    def score(self, query, texts):
        return np.zeros(len(texts))

    def describe(self):
        return {"kind": self.kind}


def test_rerank_selects_the_diagnosis_top_n():
    texts = TextSource("mem", "mem", lambda ids: {d: d for d in ids})
    res = rerank_run(
        tie_run(), {"q": "query"}, texts, Constant(), RerankOptions.from_keywords(model="constant", depth=2)
    )
    diagnosed = set(order_run(tie_run().frame, DEFAULT_SCORE_PRECISION)["doc_id"][:2])
    assert set(res.run.frame["doc_id"]) == diagnosed == {"top", "b"}
    assert res.settings["candidate_selection"]["score_precision"] == DEFAULT_SCORE_PRECISION == "float32"


def test_fusion_cuts_at_the_same_order():
    other = run_from_rows([("q", "y", 1.0)])
    fused = rrf([tie_run(), other], k=60, depth=2)
    assert set(fused.frame["doc_id"]) == {"top", "b", "y"}  # "a" is beyond the depth-2 cut
    mixed = interpolate([tie_run(), other], alpha=1.0, depth=2, hits=2)
    assert set(mixed.frame["doc_id"]) == {"top", "b"}


def test_fuse_records_the_precision(cli, tmp_path):
    (tmp_path / "a.trec").write_text("1 Q0 x 1 3 a\n")
    (tmp_path / "b.trec").write_text("1 Q0 y 1 9 b\n")
    out = tmp_path / "f.trec"
    assert cli("fuse", tmp_path / "a.trec", tmp_path / "b.trec", "--out", out).exit_code == 0
    import json

    meta = json.loads((tmp_path / "f.trec.meta.json").read_text())
    assert meta["parameters"]["candidate_selection"]["score_precision"] == "float32"
