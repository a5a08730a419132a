"""Running experiments: the stage cache (by content, reuse, --force, partial entries), tuning, the output files.

Oracles: retrievers built for one setting alone (the cache must give back what a fresh search gives), plain-Python
average precision and a plain-Python replay of the recorded folds (CACM, slow), hand-checked file contents.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from toolkit.data.records import Topic, Topics
from toolkit.experiments.results import run_experiment, safe_name
from toolkit.experiments.stage_cache import ENTRY_FILE, StageCache
from toolkit.retrieval.lucene import LuceneRetriever

TOPICS = "1\ttime sharing system\n2\tmatrix algorithms\n3\tcomputer time\n4\tsorting algorithms\n5\tcomputer matrix\n"
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
    page = (out / "index.html").read_text()
    assert page.count("<tr") == 1 + len(t)
    # the grid plotted: the first measure against each parameter that takes more than one value
    assert '<h2>The grid</h2><img class="plot" alt="map against k1, b, fb_terms" src="data:image/png;base64,' in page
    for name in ("bm25_tuned", "rm3_fb_terms-3", "fused"):
        assert (out / "runs" / f"{name}.trec").is_file() and (out / "runs" / f"{name}.trec.meta.json").is_file()
    assert doc["experiment"]["text"] == (tmp_path / "exp.yaml").read_text() and doc["versions"]["twostage"]


@pytest.mark.slow  # about 45 s on the shared 2-core machine (model load, diagnosis plots)
def test_rerank_stage_reuses_its_input_and_writes_a_diagnosis(tiny_index, tmp_path, tiny_cross_encoder):
    """Changing the reranker's depth computes only the reranking; the first stage comes from the cache."""
    stages = (
        GRID + f"rerank:\n  type: rerank\n  input: bm25\n  model: {tiny_cross_encoder}\n  depth: 2\n  device: cpu\n"
    )
    stages = stages.replace("k1: [0.6, 1.2]", "k1: 0.9").replace("b: [0.4, 0.75]", "b: 0.4")
    cache = StageCache(tmp_path / "cache")
    out = tmp_path / "out"
    res, _ = run(experiment(tmp_path, tiny_index, stages, extra="  baseline: bm25\n"), out, cache)
    assert res.counts == {"computed": 2, "reused": 0}
    reranked = next(c for c in res.configs if c.stage.name == "rerank")
    first = next(c for c in res.configs if c.stage.name == "bm25")
    # the top 2 of each query, reordered: the same documents as the first stage's top 2
    for q, g in reranked.run.frame.groupby("query_id"):
        top2 = first.run.frame[first.run.frame["query_id"] == q].nlargest(2, "score")["doc_id"]
        assert set(g["doc_id"]) == set(top2)
    summary = json.loads((out / "diagnosis" / "rerank" / "summary.json").read_text())
    assert summary["decomposition"]["depth"] == 2
    assert 'href="diagnosis/rerank/index.html"' in (out / "index.html").read_text()
    deeper = run(experiment(tmp_path, tiny_index, stages.replace("depth: 2", "depth: 3")), tmp_path / "o2", cache)[0]
    assert deeper.counts == {"computed": 1, "reused": 1}


def average_precision(ranked: list[str], relevant: set[str]) -> float:
    hits, total = 0, 0.0
    for i, d in enumerate(ranked, 1):
        if d in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant) if relevant else 0.0


def plain_ap(run_file: Path, qrels_file: Path) -> dict[str, float]:
    """AP per judged query, from the files alone: trec_eval's order (score desc, doc id desc), -c (absent = 0)."""
    relevant: dict[str, set[str]] = {}
    for line in qrels_file.read_text().splitlines():
        q, _, d, rel = line.split()
        if int(rel) >= 1:
            relevant.setdefault(q, set()).add(d)
    lists: dict[str, list[tuple[float, str]]] = {}
    for line in run_file.read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        lists.setdefault(q, []).append((float(score), d))
    out = {}
    for q, rel in relevant.items():
        ranked = sorted(lists.get(q, []), key=lambda x: (x[0], x[1]), reverse=True)
        out[q] = average_precision([d for _, d in ranked], rel)
    return out


@pytest.mark.data
@pytest.mark.slow
def test_cacm_five_fold_heldout_map_equals_a_plain_python_replay(cacm_index, shared_data, tmp_path):
    """CACM, BM25 k1 0.6/0.9/1.2 x b 0.4/0.75, 5-fold CV on MAP: the held-out MAP is each fold's own choice (made
    on the other four folds) scored on that fold, recomputed here from the written runs and the recorded folds."""
    path = tmp_path / "cacm.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            topics: cacm
            qrels: cacm
            index: {{path: {cacm_index}}}
            evaluation: {{measures: [map, P.30]}}
            stages:
              bm25:
                type: bm25
                k1: [0.6, 0.9, 1.2]
                b: [0.4, 0.75]
                tune: {{metric: map, folds: 5, seed: 0}}
            """
        )
    )
    out = tmp_path / "out"
    run(path, out, StageCache(tmp_path / "cache"), data_dir=str(shared_data))
    table = pd.read_csv(out / "results.csv").set_index("config")
    assert round(table.loc["bm25(k1=0.9,b=0.4)", "map"], 4) == 0.3123  # Anserini's regression figure
    assert round(table.loc["bm25(k1=0.9,b=0.4)", "P_30"], 4) == 0.1942
    qrels = shared_data / "cacm" / "qrels.cacm.txt"
    points = [c for c in table.index if c.startswith("bm25(")]
    ap = {p: plain_ap(out / "runs" / f"{safe_name(p)}.trec", qrels) for p in points}
    queries = sorted(next(iter(ap.values())))
    tuning = json.loads((out / "experiment.json").read_text())["configurations"]
    folds = next(c for c in tuning if c["config"] == "bm25[tuned]")["tuning"]["folds"]
    assert sorted(q for f in folds for q in f) == queries and len(folds) == 5 and len(queries) == 52
    held = {}
    for fold in folds:
        train = [q for q in queries if q not in fold]
        means = [sum(ap[p][q] for q in train) / len(train) for p in points]
        choice = points[means.index(max(means))]  # the first of equal means, in grid order
        held |= {q: ap[choice][q] for q in fold}
    heldout = sum(held.values()) / len(held)
    best = max(sum(v.values()) / len(v) for v in ap.values())
    tuned = table.loc["bm25[tuned]"]
    assert tuned["heldout_map"] == pytest.approx(heldout, abs=1e-12)
    assert tuned["map"] == pytest.approx(heldout, abs=1e-12)  # the composed run, evaluated, is the same number
    assert tuned["best_in_sample_map"] == pytest.approx(best, abs=1e-12)
    for p in points:  # and every grid point's MAP equals the plain-Python one
        assert table.loc[p, "map"] == pytest.approx(sum(ap[p].values()) / 52, abs=1e-12)


def test_experiment_diff_names_what_differs(tiny_index, tmp_path, cli):
    cache = StageCache(tmp_path / "cache")
    run(experiment(tmp_path, tiny_index, GRID), tmp_path / "a", cache)
    run(experiment(tmp_path, tiny_index, GRID), tmp_path / "same", cache)
    run(experiment(tmp_path, tiny_index, GRID.replace("k1: [0.6, 1.2]", "k1: [0.6, 0.9]")), tmp_path / "b", cache)
    same = cli("experiment", "diff", tmp_path / "a", tmp_path / "same")
    assert same.exit_code == 0 and "agree" in same.stdout
    res = cli("experiment", "diff", tmp_path / "a", tmp_path / "b")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert "experiment file: the texts differ" in lines
    assert "configuration bm25(k1=1.2,b=0.4): only in " + str(tmp_path / "a") in lines
    assert "configuration bm25(k1=0.9,b=0.75): only in " + str(tmp_path / "b") in lines
    assert not any(line.startswith("result bm25(k1=0.6") for line in lines)  # shared points: the same numbers


def test_cross_validated_run_takes_each_folds_choice_and_serves_unjudged_queries(tiny_index, tmp_path):
    """Topic 5 has no judgments: it is in no fold, and the tuned run serves it with the best point on all queries."""
    stages = GRID + "  tune: {metric: map, folds: 2, seed: 1}\n"
    res, _ = run(experiment(tmp_path, tiny_index, stages), tmp_path / "out", StageCache(tmp_path / "c"))
    by_name = {c.name: c for c in res.configs}
    tuned = by_name["bm25[tuned]"]
    folds, chosen = tuned.tuned.folds, tuned.tuned.chosen
    assert sorted(q for f in folds for q in f) == ["1", "2", "3", "4"] and len(folds) == 2
    frame = tuned.run.frame
    for point, fold in [*zip(chosen, folds), (tuned.tuned.best_in_sample_point, ("5",))]:
        source = by_name[point].run.frame
        want = source[source["query_id"].isin(fold)]
        got = frame[frame["query_id"].isin(fold)]
        assert list(zip(got["query_id"], got["doc_id"], got["score"])) == list(
            zip(want["query_id"], want["doc_id"], want["score"])
        )
    assert set(frame["query_id"]) == {"1", "2", "3", "4", "5"}


def test_python_api_runs_the_experiment_as_the_cli_does(tiny_index, tmp_path, cli):
    import toolkit as ts

    path = experiment(tmp_path, tiny_index, GRID)
    res = cli("experiment", "run", path, "--out", tmp_path / "cli", "--cache-dir", tmp_path / "cache")
    assert res.exit_code == 0, res.output
    table = ts.experiment(path, tmp_path / "api", cache_dir=tmp_path / "cache")
    from_cli = pd.read_csv(tmp_path / "cli" / "results.csv")
    assert set(table["cache"]) == {"reused"} and set(from_cli["cache"]) == {"computed"}
    same = ["config", "k1", "b", "map", "P_2"]
    assert table[same].to_csv(index=False) == from_cli[same].to_csv(index=False)
    exp = ts.Experiment.from_yaml(path)
    again = exp.run(tmp_path / "api2", cache_dir=tmp_path / "cache")
    assert again.counts == {"computed": 0, "reused": 4}  # the CLI's run filled the shared cache
    assert again.table.to_csv(index=False) == table.to_csv(index=False)
