"""An experiment's grid on Ray (``--ray [ADDRESS]``): each stage's missing points as tasks on warm workers.

Each stage runs in two passes. The first (``collect``) walks the stage's points as the one-process
runner does, but a point missing from the stage cache is only noted (its key, its record and the
point itself: ``toolkit.experiments.points``); the points go to a pool of Ray actors, each holding a
``Warm`` (the class the driver uses without Ray, running the same point code), and the driver
writes each returned run into the same content-keyed stage cache (``cache.StageCache``: one atomic
rename per entry) the moment it arrives. The second pass is the ordinary runner, which now finds
every point in the cache; the points computed on Ray count as computed, the others as reused. So
the runs are the one-process runs byte for byte (the same point code, through the same cache
file), a killed driver leaves whole entries only and a rerun submits just the points still
missing, and a killed worker is restarted by Ray and its point re-run (the actor pool of
``toolkit.jobs.distributed``: ``max_restarts`` / ``max_task_retries``).

Which points go to Ray: every search point (BM25, QL, RM3), every dense point and every rerank
point. Stages still run in the experiment's order, so a stage's points go out only once the runs
they read exist (a rerank point carries its input run's frame). The pool is started at the first
stage with a missing point and kept until the stages are done, so each actor keeps its JVM and
Lucene searchers, its dense encoders and FAISS indexes and its rerank models warm across stages.
Workers open indexes and the embedding cache by the driver's paths: on a cluster of several
machines these must be on a file system every node sees.

Bi-encoder rerank points of one model run in one *lane*: one at a time, in the one-process order,
on one actor (``RerankPoint.lane``), because each reads the vectors the previous ones put in the
embedding cache and a vector embedded with other batch companions may differ in its last bit; the
other points run on any actor, two at a time per actor.

Fusion points stay in the driver (``FusePoint`` through the driver's ``Warm``): reciprocal rank fusion
of two CACM runs of 1,000 hits takes milliseconds in the driver, while sending it to an actor
means pickling both input frames out and the fused frame back, which costs more than the fusion
itself; and its inputs are already in the driver's memory. docs/benchmarks.md has the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolkit.data.records import Run
from toolkit.experiments.experiment_options import ExperimentOptions
from toolkit.jobs.distributed import ActorPool, RayExecutor, RayOptions, shutdown

#: Stage types whose missing points run on Ray; ``fuse`` stays in the driver (see the module docstring).
DISTRIBUTED = ("bm25", "qld", "rm3", "dense", "rerank")


@dataclass
class RayGrid:
    """Computes each stage's missing grid points on Ray through ``executor``, the jobs package's actor pool.

    Built before anything runs: ``RayExecutor`` checks the address at once (``check_address``), so a
    closed port fails in seconds with the address named, before the experiment reads any input.
    """

    executor: RayExecutor
    #: one dict per point computed on Ray this run: cache key, stage, type, worker (host, pid), seconds
    computed: list[dict] = field(default_factory=list)
    pool: ActorPool | None = None

    @classmethod
    def of(cls, options: ExperimentOptions) -> RayGrid:
        """A grid on the Ray cluster at ``options.ray`` (``local``, ``auto``, ``host:port``, ``ray://host:port``),
        with the options' workers (default 2), GPUs (0) and CPUs (1) per worker and retries (3)."""
        ray = RayOptions(
            options.ray,
            options.workers or 2,
            options.gpus_per_worker or 0.0,
            1.0 if options.cpus_per_worker is None else options.cpus_per_worker,
            3 if options.max_retries is None else options.max_retries,
        )
        return cls(RayExecutor(ray))

    @property
    def workers(self) -> int:
        return self.executor.options.workers

    def describe(self) -> dict:
        shipped: dict[str, int] = {}
        for p in self.computed:
            shipped[p["type"]] = shipped.get(p["type"], 0) + 1
        return self.executor.description | {"point_types_on_ray": list(DISTRIBUTED), "points_by_type": shipped}

    def prefetch(self, ctx: Any, stage: Any, collect: Callable[[], object]) -> None:
        """Run the stage's first pass (``collect``), then its missing points on Ray, into ``ctx.cache``."""
        if stage.type not in DISTRIBUTED:
            return
        counts = dict(ctx.counts)  # the first pass's cache hits are counted by the second pass, once
        ctx.pending = []
        try:
            collect()
            todo = list({key: (key, record, p) for key, record, p in ctx.pending}.values())  # folds share points
        finally:
            ctx.pending = None
            ctx.counts.update(counts)
        if not todo:
            return
        if self.pool is None:  # started once, at the first stage with work, and kept warm for the next stages
            from toolkit.experiments.points import WarmSpec

            self.pool = self.executor.pool(WarmSpec())
        lanes = list(dict.fromkeys(p.lane for _, _, p in todo if p.lane is not None))
        where = ""
        for lane in lanes:
            w = self.pool.worker_of(lane)
            n = sum(p.lane == lane for _, _, p in todo)
            where += f"; {n} bi-encoder point(s) in order on worker pid {w['pid']} ({w['host']})"
        ctx.say(f"stage {stage.name}: {len(todo)} point(s) to compute on Ray ({self.workers} workers){where}")

        def name(i: int) -> str:
            return f"stage {stage.name}: point {i + 1} of {len(todo)} (cache key {todo[i][0][:12]})"

        items = enumerate(p for _, _, p in todo)
        for i, arrays, stats in self.pool.map(items, lane=lambda p: p.lane, name=name):
            key, record, _ = todo[i]
            worker = stats.get("worker") or {}
            # the driver writes each run as it arrives (one atomic rename): a killed driver keeps these
            ctx.cache.put(
                key,
                Run(frame=arrays["frame"], tag=arrays["tag"]),
                record | {"seconds": stats.get("seconds"), "worker": worker},
            )
            ctx.fresh[key] = False
            self.computed.append(
                {"key": key, "stage": stage.name, "type": stage.type, "worker": worker, "seconds": stats.get("seconds")}
            )

    def close(self) -> None:
        """Stop the workers (their JVMs and models are not needed past the stages), then what ``--ray`` started
        (a private local Ray, the driver's connection). Safe to call twice."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        shutdown()
