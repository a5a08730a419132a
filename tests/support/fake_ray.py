"""A stand-in for the parts of ``ray`` that ``toolkit.jobs.distributed.ActorPool`` uses, in this process.

Actors are built from a pickled copy of their spec and get pickled copies of their arguments, as
Ray's are. Each actor runs its tasks in submission order; ``wait`` finishes the oldest unfinished
task of an actor chosen by a seeded generator, so actors finish in an order no test can count on,
as on a cluster. ``events`` records every submission and completion, which the tests check against
the pool's promises (lanes one at a time, in order, on one actor).
"""

from __future__ import annotations

import pickle
import random


class Ref:
    def __init__(self, actor: FakeActor, method: str, args: bytes):
        self.actor, self.method, self.args = actor, method, args
        self.done = False
        self.result = None

    def run(self):
        if not self.done:
            self.result = getattr(self.actor.instance, self.method)(*pickle.loads(self.args))
            self.done = True
        return self.result


class _Method:
    def __init__(self, actor: FakeActor, name: str):
        self.actor, self.name = actor, name

    def remote(self, *args):
        ref = Ref(self.actor, self.name, pickle.dumps(args))
        if self.name == "run":
            self.actor.queue.append(ref)
            self.actor.ray.events.append(("submit", self.actor.index, args[0]))
        return ref


class FakeActor:
    def __init__(self, ray: FakeRay, index: int, instance):
        self.ray, self.index, self.instance = ray, index, instance
        self.queue: list[Ref] = []  # "run" tasks not yet finished, in submission order
        self.run = _Method(self, "run")
        self.identity = _Method(self, "identity")


class FakeRay:
    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.actors: list[FakeActor] = []
        self.events: list[tuple[str, int, int]] = []  # (submit | done, actor, shard)
        self.killed: list[int] = []

    def remote(self, **_options):
        def decorate(cls):
            ray = self

            class ActorClass:
                @staticmethod
                def remote(spec):
                    actor = FakeActor(ray, len(ray.actors), cls(pickle.loads(pickle.dumps(spec))))
                    ray.actors.append(actor)
                    return actor

            return ActorClass

        return decorate

    def wait(self, refs, num_returns=1):
        heads = [a.queue[0] for a in self.actors if a.queue and a.queue[0] in refs]
        ref = self.rng.choice(heads)
        ref.actor.queue.pop(0)
        ref.run()
        self.events.append(("done", ref.actor.index, pickle.loads(ref.args)[0]))
        return [ref], [r for r in refs if r is not ref]

    def get(self, ref):
        return ref.run()

    def kill(self, actor):
        self.killed.append(actor.index)
