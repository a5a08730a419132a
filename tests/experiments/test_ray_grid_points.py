"""The grid's two passes (``toolkit.experiments.ray_grid.RayGrid``) without a cluster: Ray's part played in this
process by ``tests/support/fake_ray.py``, which pickles every point to actors holding their own ``Warm``.

Oracle: the same experiment run in one process, in a fresh cache: the run files and results.csv must be equal byte
for byte; the counts, the log and ``experiment.json``'s execution record must say which points went where (fusion
in the driver). A second run finds everything cached and starts no worker; ``--force`` sends the stage again.
The real cluster, with models and killed workers, is ``test_ray_grid.py``.
"""

from __future__ import annotations

import json

import pytest
from fake_ray import FakeRay
from needs import required

from tests.experiments.test_experiment import GRID, experiment, run
from toolkit.experiments.ray_grid import RayGrid
from toolkit.experiments.stage_cache import StageCache
from toolkit.jobs import distributed
from toolkit.jobs.distributed import RayExecutor, RayOptions

required("ray", "the pool reads Ray's exception types (the [ray] extra)")

STAGES = GRID + (
    "  tune: {metric: map, folds: 2, seed: 1}\n"
    "rm3: {type: rm3, input: bm25, fb_docs: 2, fb_terms: [3, 5]}\n"
    "qld: {type: qld, mu: [50, 500]}\n"
    "fused: {type: fuse, inputs: [bm25, qld]}\n"
)


@pytest.fixture
def fake_ray(monkeypatch):
    started: list[FakeRay] = []

    def connect(options):
        started.append(FakeRay(seed=len(started)))
        return started[-1]

    monkeypatch.setattr(distributed, "connect", connect)
    return started


def grid() -> RayGrid:
    return RayGrid(RayExecutor(RayOptions("local", workers=2)))


def test_points_through_the_pool_equal_one_process_and_say_where_they_ran(tiny_index, tmp_path, fake_ray):
    path = experiment(tmp_path, tiny_index, STAGES)
    want, _ = run(path, tmp_path / "want", StageCache(tmp_path / "one-process"))
    cache = StageCache(tmp_path / "cache")
    got, lines = run(path, tmp_path / "got", cache, grid=grid())
    assert got.counts == want.counts == {"computed": 9, "reused": 4}  # tuned folds share points: reused
    for f in sorted((tmp_path / "want" / "runs").glob("*.trec")):
        assert (tmp_path / "got" / "runs" / f.name).read_bytes() == f.read_bytes(), f.name
    assert (tmp_path / "got" / "results.csv").read_text() == (tmp_path / "want" / "results.csv").read_text()

    assert "stage bm25: 4 point(s) to compute on Ray (2 workers)" in lines
    assert "stage qld: 2 point(s) to compute on Ray (2 workers)" in lines
    assert not any(line.startswith("stage fused: ") and "on Ray" in line for line in lines)  # fusion stays here
    rm3 = next(line for line in lines if line.startswith("stage rm3: ") and "on Ray" in line)
    assert "stage rm3: 2 configuration(s), 0 reused from the cache, 2 computed" in lines
    execution = json.loads((tmp_path / "got" / "experiment.json").read_text())["execution"]
    by_type = execution["points_by_type"]
    assert by_type["bm25"] == 4 and by_type["qld"] == 2 and "fuse" not in by_type
    assert by_type["rm3"] == int(rm3.split(": ")[1].split()[0])  # each fold's choice expanded once
    assert all(p["worker"]["pid"] and p["seconds"] is not None for p in execution["points"])
    on_ray = {p["key"] for p in execution["points"]}
    fused = next(c for c in got.configs if c.name == "fused")
    assert fused.key not in on_ray and "worker" not in json.loads((cache.path(fused.key) / "entry.json").read_text())
    assert len(fake_ray) == 1 and fake_ray[0].killed == [0, 1]  # one pool for every stage, stopped at the end

    again, lines = run(path, tmp_path / "again", cache, grid=grid())
    assert again.counts == run(path, tmp_path / "want2", StageCache(tmp_path / "one-process"))[0].counts
    assert again.counts["computed"] == 0
    assert len(fake_ray) == 1 and not any("on Ray" in line for line in lines)  # nothing to send: no workers

    forced, lines = run(path, tmp_path / "forced", cache, force=("qld",), grid=grid())
    one = run(path, tmp_path / "want3", StageCache(tmp_path / "one-process"), force=("qld",))[0]
    assert forced.counts == one.counts and forced.counts["computed"] == 2
    assert "stage qld: 2 point(s) to compute on Ray (2 workers)" in lines
    assert "stage qld: 2 configuration(s), 0 reused from the cache, 2 computed" in lines
