"""An experiment's output folder and its cache against what is really on disk.

- ``--out`` reused by a smaller experiment holds only that experiment's runs (before: the earlier
  experiment's runs stayed, and ``twostage eval cacm runs/`` ranked a configuration that was not in it);
- an index replaced under the same folder, its old ``index.meta.json`` put back, is searched again: the stage
  cache keys on the index's files, not on what its metadata says.
"""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from tests.experiments.test_experiment import GRID, experiment, run
from toolkit.experiments.results import safe_name
from toolkit.experiments.stage_cache import StageCache


def test_a_reused_out_holds_only_the_current_experiments_runs(tiny_index, tmp_path):
    cache = StageCache(tmp_path / "cache")
    out = tmp_path / "out"
    run(experiment(tmp_path, tiny_index, GRID), out, cache)
    assert len(list((out / "runs").glob("*.trec"))) == 4
    narrower = experiment(tmp_path, tiny_index, GRID.replace("k1: [0.6, 1.2]", "k1: [0.6]"))
    second, _ = run(narrower, out, cache)
    names = {safe_name(c.name) for c in second.configs}
    assert len(names) == 2
    on_disk = {p.name.split(".trec")[0] for p in (out / "runs").iterdir()}
    assert on_disk == names  # the k1=1.2 runs of the first experiment are gone
    table = (out / "results.csv").read_text()
    assert "1.2" not in table.splitlines()[1] and len(table.strip().splitlines()) == 3


def test_a_replaced_index_is_searched_again(tiny_index, tmp_path):
    from toolkit.cli import main

    index = tmp_path / "index"
    shutil.copytree(tiny_index, index)
    cache = StageCache(tmp_path / "cache")
    first, _ = run(experiment(tmp_path, index, GRID), tmp_path / "o1", cache)
    assert first.counts == {"computed": 4, "reused": 0}
    # another collection indexed elsewhere, moved into the same folder, the old metadata file put back
    other = tmp_path / "other"
    other.mkdir()
    (other / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": f"x{i}", "contents": t}) + "\n"
            for i, t in enumerate(["time sharing", "matrix algorithms computer", "sorting computer time"])
        )
    )
    res = CliRunner().invoke(
        main, ["index", "--collection", str(other / "corpus.jsonl"), "--out", str(other / "index"), "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    meta = {p.name: p.read_bytes() for p in index.iterdir() if p.name.endswith(".json")}
    shutil.rmtree(index)
    shutil.copytree(other / "index", index)
    for name, data in meta.items():
        (index / name).write_bytes(data)
    second, _ = run(experiment(tmp_path, index, GRID), tmp_path / "o2", cache)
    assert second.counts == {"computed": 4, "reused": 0}
    assert set(second.configs[0].run.frame["doc_id"]) <= {"x0", "x1", "x2"}
