"""An experiment's grid on Ray (``--ray [ADDRESS]``): a stage's missing points as tasks on warm workers.

Each stage runs in two passes. The first (``collect``) walks the stage's points as the one-process
runner does, but a point missing from the stage cache is only noted as a task (its key, its
record and what a worker needs to compute it); the tasks go to a pool of Ray actors, and the
driver writes each returned run into the same content-keyed stage cache (``cache.StageCache``:
one atomic rename per entry) the moment it arrives. The second pass is the ordinary runner, which
now finds every point in the cache; the points computed on Ray count as computed, the others as
reused. So the runs are the one-process runs byte for byte (the same search, through the same
cache file), a killed driver leaves whole entries only and a rerun submits just the points still
missing, and a killed worker is restarted by Ray and its point re-run (the actor pool of
``toolkit.jobs.distributed``: ``max_restarts`` / ``max_task_retries``).

Each actor keeps its JVM and one Lucene searcher per index open across the points it gets
(``LuceneRetriever.configure`` switches k1/b/mu/RM3 without reopening). Workers read the index by
its path: on a cluster of several machines it must be on a file system every node sees.

Which points go to Ray: BM25, QL and RM3 points (the searches). Reranking, fusion and tuning run
in the driver as before (its model is built once there; see the README).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolkit.jobs.distributed import RayExecutor, RayOptions, shutdown
from toolkit.records import Run

#: Stage types whose points run on Ray: the searches. Reranking, fusion and tuning stay in the driver.
DISTRIBUTED = ("bm25", "qld", "rm3")


class GridWorker:
    """What one Ray actor holds: a Lucene searcher per index, opened on its first point and kept."""

    def __init__(self) -> None:
        self.retrievers: dict = {}

    def __call__(self, task: dict) -> tuple[dict, dict]:
        """One search: ``task`` is the runner's (index path, params as in the cache key, topics, threads)."""
        from toolkit.retrieval.lucene import RM3, LuceneRetriever

        p, rm3, index = task["params"], task["params"].get("rm3"), task["index"]
        r = self.retrievers.get(index)
        if r is None:
            r = self.retrievers[index] = LuceneRetriever(index)
        rm3_value = RM3(int(rm3["fb_terms"]), int(rm3["fb_docs"]), float(rm3["original_query_weight"])) if rm3 else None
        r.configure(p["model"], p.get("k1", 0.9), p.get("b", 0.4), p.get("mu", 1000.0), rm3_value)
        run = r.search(task["topics"], int(p["hits"]), int(task["threads"])).run
        return {"frame": run.frame, "tag": run.tag}, {"warm_indexes": len(self.retrievers)}


@dataclass(frozen=True)
class GridWorkerSpec:
    """The picklable recipe Ray sends to each actor (``toolkit.jobs.shards.WorkerSpec``)."""

    def build(self) -> GridWorker:
        return GridWorker()

    def describe(self) -> dict:
        return {"worker": "experiment grid (Lucene)"}


@dataclass
class RayGrid:
    """Computes each stage's missing grid points on Ray through ``executor``, the jobs package's actor pool.

    Built before anything runs: ``RayExecutor`` checks the address at once (``check_address``), so a
    closed port fails in seconds with the address named, before the experiment reads any input.
    """

    executor: RayExecutor
    #: one dict per point computed on Ray this run: cache key, worker (host, pid), seconds
    computed: list[dict] = field(default_factory=list)

    @classmethod
    def at(cls, address: str, workers: int | None = None, max_retries: int | None = None) -> RayGrid:
        """A grid on the Ray cluster at ``address`` (``local``, ``auto``, ``host:port``, ``ray://host:port``)."""
        options = RayOptions(address, workers or 2, 0.0, 1.0, 3 if max_retries is None else max_retries)
        return cls(RayExecutor(options))

    @property
    def workers(self) -> int:
        return self.executor.options.workers

    def describe(self) -> dict:
        return self.executor.description

    def prefetch(self, ctx: Any, stage: Any, collect: Callable[[], object]) -> None:
        """Run the stage's first pass (``collect``), then its missing points on Ray, into ``ctx.cache``."""
        if stage.type not in DISTRIBUTED:
            return
        counts = dict(ctx.counts)  # the first pass's cache hits are counted by the second pass, once
        ctx.pending = []
        try:
            collect()
            todo = list({key: (key, record, task) for key, record, task in ctx.pending}.values())  # folds share points
        finally:
            ctx.pending = None
            ctx.counts.update(counts)
        if not todo:
            return
        ctx.say(f"stage {stage.name}: {len(todo)} point(s) to compute on Ray ({self.workers} workers)")
        for i, arrays, stats in self.executor.map(GridWorkerSpec(), enumerate(t[2] for t in todo)):
            key, record, _ = todo[i]
            worker = stats.get("worker") or {}
            # the driver writes each run as it arrives (one atomic rename): a killed driver keeps these
            ctx.cache.put(
                key,
                Run(frame=arrays["frame"], tag=arrays["tag"]),
                record | {"seconds": stats.get("seconds"), "worker": worker},
            )
            ctx.fresh[key] = False
            self.computed.append({"key": key, "worker": worker, "seconds": stats.get("seconds")})

    def close(self) -> None:
        """Stop what ``--ray`` started (a private local Ray, the driver's connection)."""
        shutdown()
