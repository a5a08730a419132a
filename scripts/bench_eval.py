#!/usr/bin/env python3
"""Benchmark: twostage eval vs pytrec_eval vs Pyserini's trec_eval on an MS MARCO-dev-sized run.

Makes the input with ../shared/bench/make_big_run.py (6,980 queries x 1,000 documents,
~270 MB), then runs each evaluator end to end in its own process (parsing included) for
ndcg_cut.10 and recall.100, and prints wall time, peak memory (max RSS of the process
and its children) and the values each printed. Not a test: figures, not assertions.

    .venv/bin/python scripts/bench_eval.py [--queries 6980] [--depth 1000] [--work DIR] [--shuffled]

--shuffled also times twostage and pytrec_eval on a copy of the run with its lines in
random order (the worst case for twostage's sort, which exploits score-ordered queries).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAKER = REPO.parent / "shared" / "bench" / "make_big_run.py"

PYTREC = r"""
import sys, pytrec_eval
with open(sys.argv[1]) as f: qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f: run = pytrec_eval.parse_run(f)
res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
for m in ("recall_100", "ndcg_cut_10"):
    print(f"{m:<22}\tall\t{sum(v[m] for v in res.values()) / len(res):.4f}")
"""

SHUFFLE = r"""
import random, sys
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
random.Random(0).shuffle(lines)
open(sys.argv[2], "wb").write(b"".join(lines))
"""


def run_measured(cmd: list[str], env=None) -> tuple[float, float, str]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed with status {status}")
    return wall, usage.ru_maxrss / 1024, out


def values(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1] == "all" and not line.startswith("#"):
            out[parts[0].strip()] = parts[2]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=6980)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--work", default=None, help="folder for the generated files (default: a temp dir)")
    ap.add_argument("--shuffled", action="store_true", help="also time a line-shuffled copy of the run")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="twostage-bench-"))
    run, qrels = work / "run.txt", work / "qrels.txt"
    if not run.exists():
        subprocess.run([sys.executable, str(MAKER), "--queries", str(args.queries), "--depth", str(args.depth),
                        "--out-dir", str(work)], check=True)
    size_mib = run.stat().st_size / 2**20
    sys.path.insert(0, str(REPO / "tests"))
    from oracles import java_env

    py = sys.executable
    twostage = str(Path(py).with_name("twostage"))
    tools = {
        "twostage eval": ([twostage, "eval", "--no-provenance", "-m", "ndcg_cut.10", "-m", "recall.100",
                           str(qrels), str(run)], None),
        "pytrec_eval (parse_run + C trec_eval)": ([py, "-c", PYTREC, str(qrels), str(run)], None),
        "pyserini.eval.trec_eval (9.0.4 binary)": ([py, "-m", "pyserini.eval.trec_eval", "-m", "ndcg_cut.10", "-m",
                                                    "recall.100", str(qrels), str(run)], java_env()),
    }
    print(f"input: {run} ({size_mib:.0f} MiB, {args.queries} queries x {args.depth}); cores: {os.cpu_count()}")
    compare(tools, size_mib)
    if args.shuffled:
        shuffled = work / "run.shuffled.txt"
        if not shuffled.exists():  # in a child: a forked evaluator would inherit this process's peak RSS
            subprocess.run([sys.executable, "-c", SHUFFLE, str(run), str(shuffled)], check=True)
        print(f"input: {shuffled} (the same lines in random order)")
        compare({name: ([str(shuffled) if a == str(run) else a for a in cmd], env)
                 for name, (cmd, env) in list(tools.items())[:2]}, size_mib)


def compare(tools: dict, size_mib: float) -> None:
    results = {}
    for name, (cmd, env) in tools.items():
        wall, rss, out = run_measured(cmd, env)
        results[name] = (wall, rss, values(out))
        print(f"{name:<42} wall {wall:7.2f} s   peak RSS {rss:7.0f} MiB ({rss / size_mib:.2f}x run)   "
              + "  ".join(f"{k}={v}" for k, v in sorted(values(out).items())), flush=True)
    ours = results["twostage eval"]
    for name, (wall, _, vals) in results.items():
        if name != "twostage eval":
            same = "identical values" if vals == ours[2] else f"VALUES DIFFER: {vals} vs {ours[2]}"
            print(f"speed-up vs {name}: {wall / ours[0]:.2f}x; {same}")


if __name__ == "__main__":
    main()
