"""The Ray actor pool's lanes (``toolkit.jobs.distributed.ActorPool``), against an in-process stand-in for Ray.

Promise: the items of one lane run one at a time, in the order given, on one actor (the one ``worker_of``
names); items without a lane use every actor. Oracle: the stand-in's log of submissions and completions,
with actors finishing in an order drawn by a seeded generator (``tests/support/fake_ray.py``), 20 seeds.
"""

from __future__ import annotations

import pytest
from fake_ray import FakeRay
from needs import required

from toolkit.jobs.distributed import ActorPool, RayOptions

required("ray", "the pool reads Ray's exception types (the [ray] extra)")


class Echo:
    """A worker spec: the worker returns its payload."""

    def build(self):
        return lambda payload: ({"payload": payload}, {})

    def describe(self) -> dict:
        return {"worker": "echo"}


# lanes a and b interleaved with items free to go anywhere
PAYLOADS = [("a", 0), (None, 1), ("b", 2), ("a", 3), (None, 4), ("a", 5), ("b", 6), (None, 7), (None, 8), ("a", 9)]


@pytest.mark.parametrize("seed", range(20))
def test_lane_items_run_one_at_a_time_in_order_on_one_actor(seed):
    ray = FakeRay(seed)
    pool = ActorPool(ray, Echo(), RayOptions("local", workers=3), in_flight=2)
    homes = {lane: pool.worker_of(lane) for lane in ("a", "b")}
    assert len({h["pid"] for h in homes.values()}) == 1  # one process here: the actors differ by index, below

    results = list(pool.map(enumerate(PAYLOADS), lane=lambda p: p[0]))
    assert sorted(shard for shard, _, _ in results) == list(range(len(PAYLOADS)))
    assert all(arrays["payload"] == PAYLOADS[shard] for shard, arrays, _ in results)

    actor_of = {shard: actor for kind, actor, shard in ray.events if kind == "submit"}
    assert pool.lanes["a"] != pool.lanes["b"]  # two lanes, two actors (the fewest lanes first)
    for lane in ("a", "b"):
        mine = [i for i, p in enumerate(PAYLOADS) if p[0] == lane]
        assert {actor_of[i] for i in mine} == {pool.lanes[lane]}
        done = [shard for kind, _, shard in ray.events if kind == "done" and shard in mine]
        assert done == mine  # in the order given
        in_flight = 0
        for kind, _, shard in ray.events:
            if shard in mine:
                in_flight += 1 if kind == "submit" else -1
                assert in_flight <= 1  # one at a time
    pool.close()
    assert sorted(ray.killed) == [0, 1, 2]


def test_items_without_a_lane_use_every_actor():
    ray = FakeRay(0)
    pool = ActorPool(ray, Echo(), RayOptions("local", workers=3), in_flight=2)
    results = list(pool.map(enumerate([(None, i) for i in range(12)]), lane=lambda p: p[0]))
    assert len(results) == 12
    assert {actor for kind, actor, _ in ray.events if kind == "submit"} == {0, 1, 2}
    peak, in_flight = 0, 0
    for kind, _, _ in ray.events:
        in_flight += 1 if kind == "submit" else -1
        peak = max(peak, in_flight)
    assert peak == 6  # two per actor at a time


def test_a_lane_keeps_its_actor_across_maps():
    """An experiment's stages are separate maps on one pool: a model's lane stays on the actor that holds it."""
    ray = FakeRay(3)
    pool = ActorPool(ray, Echo(), RayOptions("local", workers=2), in_flight=2)
    list(pool.map(enumerate([("m", 0), ("n", 1)]), lane=lambda p: p[0]))
    first = dict(pool.lanes)
    ray.events.clear()
    list(pool.map(enumerate([("n", 0), ("m", 1), ("m", 2)]), lane=lambda p: p[0]))
    submitted = {shard: actor for kind, actor, shard in ray.events if kind == "submit"}
    assert submitted == {0: first["n"], 1: first["m"], 2: first["m"]}
