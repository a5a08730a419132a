"""Running experiments: the stage cache (by content, reuse, --force, partial entries), tuning, the output files.

Oracles: retrievers built for one setting alone (the cache must give back what a fresh search gives), plain-Python
average precision and a plain-Python replay of the recorded folds (CACM, slow), hand-checked file contents.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from toolkit.experiment.cache import ENTRY_FILE, StageCache
from toolkit.experiment.results import run_experiment
from toolkit.records import Topic, Topics
from toolkit.retrieval.lucene import LuceneRetriever

TOPICS = "1\ttime sharing system\n2\tmatrix algorithms\n3\tcomputer time\n4\tsorting algorithms\n"
QRELS = "1 0 d1 1\n1 0 d2 1\n2 0 d3 1\n2 0 d6 1\n3 0 d5 1\n4 0 d4 1\n"


def experiment(tmp_path: Path, index: Path, stages: str, extra: str = "", topics: str = "topics.tsv") -> Path:
    (tmp_path / "topics.tsv").write_text(TOPICS)
    (tmp_path / "qrels.txt").write_text(QRELS)
    text = textwrap.dedent(
        f"""\
        name: tiny
        topics: {tmp_path / topics}
        qrels: {tmp_path / "qrels.txt"}
        index: {{path: {index}}}
        hits: 10
        evaluation:
          measures: [map, P.2]
          permutations: 200
        EXTRA
        stages:
        """
    ).replace("EXTRA\n", extra)
    p = tmp_path / "exp.yaml"
    p.write_text(text + textwrap.indent(textwrap.dedent(stages), "  "))
    return p


GRID = """\
bm25:
  type: bm25
  k1: [0.6, 1.2]
  b: [0.4, 0.75]
"""


def run(path, out, cache, **kw):
    lines: list[str] = []
    res = run_experiment(path, out, cache=cache, say=lines.append, **kw)
    return res, lines


def test_grid_runs_equal_fresh_searches_and_the_second_run_reuses_all(tiny_index, tmp_path):
    cache = StageCache(tmp_path / "cache")
    path = experiment(tmp_path, tiny_index, GRID)
    first, lines = run(path, tmp_path / "out", cache)
    assert first.counts == {"computed": 4, "reused": 0}
    topics = Topics(tuple(Topic(*line.split("\t")) for line in TOPICS.splitlines()))
    for c in first.configs:
        alone = LuceneRetriever(tiny_index, "bm25", c.point["k1"], c.point["b"]).search(topics, hits=10).run.frame
        got = c.run.frame
        rows = list(zip(got["query_id"], got["doc_id"], got["score"]))
        assert rows == list(zip(alone["query_id"], alone["doc_id"], alone["score"]))  # scores exact after the cache
    second, lines = run(path, tmp_path / "out2", cache)
    assert second.counts == {"computed": 0, "reused": 4}
    assert "stage bm25: 4 configuration(s), 4 reused from the cache, 0 computed" in lines
    cols = ["config", "map", "P_2"]
    assert second.table[cols].equals(first.table[cols])
    assert (
        (tmp_path / "out2" / "results.csv")
        .read_text()
        .splitlines()[0]
        .startswith("config,stage,type,input,k1,b,map,P_2")
    )


def test_cache_is_keyed_by_content_not_by_name(tiny_index, tmp_path):
    cache = StageCache(tmp_path / "cache")
    run(experiment(tmp_path, tiny_index, GRID), tmp_path / "o1", cache)
    (tmp_path / "renamed.tsv").write_text(TOPICS)  # same queries, another file: reused
    assert (
        run(experiment(tmp_path, tiny_index, GRID, topics="renamed.tsv"), tmp_path / "o2", cache)[0].counts["reused"]
        == 4
    )
    (tmp_path / "edited.tsv").write_text(TOPICS.replace("matrix algorithms", "matrix methods"))
    edited = run(experiment(tmp_path, tiny_index, GRID, topics="edited.tsv"), tmp_path / "o3", cache)[0]
    assert edited.counts == {"computed": 4, "reused": 0}


def test_a_new_grid_point_computes_only_that_point_and_force_recomputes(tiny_index, tmp_path):
    cache = StageCache(tmp_path / "cache")
    run(experiment(tmp_path, tiny_index, GRID), tmp_path / "o1", cache)
    wider = experiment(tmp_path, tiny_index, GRID.replace("k1: [0.6, 1.2]", "k1: [0.6, 0.9, 1.2]"))
    assert run(wider, tmp_path / "o2", cache)[0].counts == {"computed": 2, "reused": 4}
    forced = run(wider, tmp_path / "o3", cache, force=("bm25",))[0]
    assert forced.counts == {"computed": 6, "reused": 0}
    with pytest.raises(Exception, match="--force bm26: not a stage"):
        run(wider, tmp_path / "o4", cache, force=("bm26",))


def test_an_interrupted_entry_is_recomputed(tiny_index, tmp_path):
    """What a kill can leave: a temporary folder (never renamed) or, from an older writer, a folder without its
    record. Neither is served; both are recomputed and the result equals the uninterrupted one."""
    cache = StageCache(tmp_path / "cache")
    path = experiment(tmp_path, tiny_index, GRID)
    whole = run(path, tmp_path / "o1", cache)[0]
    keys = [c.key for c in whole.configs]
    (cache.path(keys[0]) / ENTRY_FILE).unlink()
    (cache.path(keys[1]).parent / f".{keys[1][:12]}-leftover").mkdir()
    run_file = cache.path(keys[2]) / "run.trec"
    run_file.write_text(run_file.read_text()[:40])  # a damaged run: its checksum no longer matches
    again = run(path, tmp_path / "o2", cache)[0]
    assert again.counts == {"computed": 2, "reused": 2}
    assert again.table[["config", "map"]].equals(whole.table[["config", "map"]])


def test_tuning_set_rm3_and_fusion_files(tiny_index, tmp_path):
    stages = GRID + textwrap.dedent(
        """\
          tune: {metric: map, queries: ["1", "2"]}
        rm3:
          type: rm3
          input: bm25
          fb_docs: 2
          fb_terms: [3, 5]
        qld:
          type: qld
          mu: 50
        fused:
          type: fuse
          inputs: [bm25, qld]
        """
    )
    out = tmp_path / "out"
    res, _ = run(experiment(tmp_path, tiny_index, stages, extra="  baseline: bm25\n"), out, StageCache(tmp_path / "c"))
    t = res.table.set_index("config")
    assert list(t.index) == [
        "bm25(k1=0.6,b=0.4)", "bm25(k1=0.6,b=0.75)", "bm25(k1=1.2,b=0.4)", "bm25(k1=1.2,b=0.75)", "bm25[tuned]",
        "rm3(fb_terms=3)", "rm3(fb_terms=5)", "qld", "fused",
    ]  # fmt: skip
    tuned = t.loc["bm25[tuned]"]
    # the tuning set is queries 1 and 2: chosen on them, scored on 3 and 4 (by hand from the per-query table)
    doc = json.loads((out / "experiment.json").read_text())
    tuning = next(c for c in doc["configurations"] if c["config"] == "bm25[tuned]")["tuning"]
    assert tuning["folds"] == [["3", "4"]] and tuning["protocol"].startswith("tuning set (2 queries")
    assert tuned["heldout_map"] == pytest.approx(tuning["heldout"]) and tuned["input"] == ""
    assert t.loc["rm3(fb_terms=3)", "input"] == "bm25[tuned]" and t.loc["fused", "input"] == "bm25[tuned]+qld"
    assert (out / "index.html").read_text().count("<tr") == 1 + len(t)
    for name in ("bm25_tuned", "rm3_fb_terms-3", "fused"):
        assert (out / "runs" / f"{name}.trec").is_file() and (out / "runs" / f"{name}.trec.meta.json").is_file()
    assert doc["experiment"]["text"] == (tmp_path / "exp.yaml").read_text() and doc["versions"]["twostage"]
