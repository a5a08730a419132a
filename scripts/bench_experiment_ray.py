#!/usr/bin/env python
"""One experiment in one process against the same experiment with ``--ray`` (a private local Ray), and fusion in
the driver against a ``FusePoint`` sent to a Ray actor.

1. The experiment: CACM, BM25 k1 0.6/0.9/1.2 x b 0.4/0.75 tuned 5-fold on MAP, all-MiniLM-L6-v2 (CPU) reranking
   the tuned run at depths 10 and 20, a dense stage over an existing MiniLM index of CACM, and the RRF of BM25
   and dense. Each run is ``python -m toolkit.cli experiment run`` in a fresh process with an empty stage cache
   and an empty embedding cache ($TWOSTAGE_CACHE); rounds alternate one process / --ray, so machine load hits
   both alike; then one --ray rerun with every stage cached. Also checks that the --ray runs' run files equal
   the one-process ones byte for byte.
2. Fusion: reciprocal rank fusion of CACM's BM25 and dense runs (1,000 hits) in this process, against the
   same point sent to one warm Ray actor and its run brought back (median of 7, after a warm-up).

    .venv/bin/python scripts/bench_experiment_ray.py --index indexes/cacm --dense indexes/cacm.dense [--rounds 2]

(build them with `twostage index --collection cacm --out indexes/cacm` and `twostage index --dense
--collection cacm --out indexes/cacm.dense --device cpu`). The load average is printed with every figure: on a
shared machine it says how much the wall times mean.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

EXPERIMENT = """\
name: cacm-models
topics: cacm
qrels: cacm
index: {{path: {index}}}
hits: 1000
evaluation: {{measures: [map, P.30, ndcg_cut.10], baseline: bm25, permutations: 1000}}
stages:
  bm25: {{type: bm25, k1: [0.6, 0.9, 1.2], b: [0.4, 0.75], tune: {{metric: map, folds: 5, seed: 0}}}}
  minilm: {{type: rerank, input: bm25, model: all-MiniLM-L6-v2, depth: [10, 20], device: cpu}}
  dense: {{type: dense, index: {dense}, device: cpu}}
  both: {{type: fuse, inputs: [bm25, dense]}}
"""


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def experiment_run(exp: Path, folder: Path, ray: bool, data: str, cache: Path | None = None) -> float:
    env = os.environ | {
        "PYTHONPATH": str(REPO),
        "TWOSTAGE_CACHE": str(folder / "home"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",  # a private local Ray: no token written into ~/.ray
    }
    cmd = [sys.executable, "-m", "toolkit.cli", "experiment", "run", str(exp), "--out", str(folder / "out")]
    cmd += ["--cache-dir", str(cache or folder / "cache"), "--data-dir", data, *(["--ray"] if ray else [])]
    started = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return seconds


def same_runs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in (a / "out" / "runs").glob("*.trec"))
    return bool(names) and all(
        (a / "out" / "runs" / n).read_bytes() == (b / "out" / "runs" / n).read_bytes() for n in names
    )


def bench_experiment(index: str, dense: str, data: str, rounds: int, work: Path) -> None:
    exp = work / "cacm-models.yaml"
    exp.write_text(EXPERIMENT.format(index=Path(index).resolve(), dense=Path(dense).resolve()))
    print(textwrap.indent(exp.read_text(), "    "))
    first = None
    for i in range(rounds):
        for ray in (False, True):
            folder = work / f"{'ray' if ray else 'one'}-{i}"
            before = load()
            s = experiment_run(exp, folder, ray, data)
            print(
                f"round {i + 1} {'--ray' if ray else 'one process'}: {s:.1f} s wall (load average {before} -> {load()})"
            )
            if first is None:
                first = folder
            elif not same_runs(first, folder):
                sys.exit(f"run files of {folder} differ from {first}")
    last = work / f"ray-{rounds - 1}"
    before = load()
    s = experiment_run(exp, work / "rerun", True, data, cache=last / "cache")
    print(f"--ray rerun, every stage cached: {s:.1f} s wall (load average {before} -> {load()})")
    print("every run's files equal the first one-process run's, byte for byte")


def bench_fusion(index: str, dense: str, data: str) -> None:
    import pickle

    from toolkit.data import catalog
    from toolkit.experiments.points import DensePoint, FusePoint, SearchPoint, Warm, WarmSpec
    from toolkit.jobs.distributed import RayExecutor, RayOptions, shutdown

    topics = catalog.resolve_topics("cacm", data)
    warm = Warm()
    bm25 = warm.run(SearchPoint(index, {"model": "bm25", "k1": 0.9, "b": 0.4, "rm3": None, "hits": 1000}, topics, 1))
    dense_run = warm.run(DensePoint(dense, 32, "cpu", "fp32", 256, 1000, topics, 1))
    point = FusePoint((bm25, dense_run), 60.0, 1000, 1000)
    here = []
    for _ in range(7):
        t = time.perf_counter()
        warm.run(point)
        here.append(time.perf_counter() - t)
    pool = RayExecutor(RayOptions("local", workers=1)).pool(WarmSpec())
    try:
        list(pool.map([(0, point)]))  # the actor's first point pays its imports
        there = []
        for i in range(7):
            t = time.perf_counter()
            list(pool.map([(i, point)]))
            there.append(time.perf_counter() - t)
    finally:
        pool.close()
        shutdown()
    print(
        f"fusion of {len(bm25.frame)} + {len(dense_run.frame)} rows ({len(pickle.dumps(point)) // 1024} KiB pickled): "
        f"{1000 * statistics.median(here):.1f} ms in the driver, {1000 * statistics.median(there):.1f} ms "
        f"sent to a warm Ray actor and back (medians of 7; load average {load()})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="CACM's Lucene index")
    ap.add_argument("--dense", required=True, help="a dense index of CACM (all-MiniLM-L6-v2)")
    ap.add_argument("--data-dir", default=os.environ.get("TWOSTAGE_DATA", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-experiment", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    print(f"{os.cpu_count()} CPUs; load average {load()}")
    bench_fusion(a.index, a.dense, a.data_dir)
    if not a.skip_experiment:
        work = Path(tempfile.mkdtemp(prefix="bench-exp-ray-"))
        try:
            bench_experiment(a.index, a.dense, a.data_dir, a.rounds, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
