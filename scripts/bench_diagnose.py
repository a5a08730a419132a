#!/usr/bin/env python3
"""Benchmark: ``twostage diagnose`` against ``twostage compare`` of the same four runs, per number of queries.

For each size, makes the input with ``scripts/make_diagnose_bench.py`` (a first stage 1,000 deep and three
reranked runs of its top 100; kept in --work and reused), then runs, each in its own process with both
commands' defaults (parsing and writing included):

  twostage diagnose --qrels Q --first-stage first=F --reranked rr1=R1 --reranked rr2=R2 --reranked rr3=R3 --out D
  twostage compare --qrels Q first=F rr1=R1 rr2=R2 rr3=R3

and prints a Markdown table: queries, diagnose wall and peak RSS (the process's max RSS, ``os.wait4``), compare
wall and peak RSS (with ``--repeat N``, each command runs N times, diagnose and compare taking turns, and the
table holds each one's median wall and CPU and its largest peak; the ratio is of the two medians), the CPU seconds (user + system) beside each wall, the ratio of the two walls (and CPU
times), the diagnosis's CPU seconds and peak MiB per 1,000 queries (constant when it grows linearly), and the
1-minute load average before each size. Not a test: figures, not assertions.

    PYTHONPATH=. .venv/bin/python scripts/bench_diagnose.py [--queries 1000,6980,20000] [--repeat N] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_measured(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system) of ``cmd``; exits when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed ({status}):\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def _summary(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Median wall, largest peak RSS, median CPU of repeated runs of one command."""
    return (
        statistics.median(r[0] for r in runs),
        max(r[1] for r in runs),
        statistics.median(r[2] for r in runs),
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", default="1000,6980,20000", help="comma-separated sizes")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command per size (medians reported)")
    ap.add_argument("--work", default="/tmp/twostage-bench-diagnose", help="inputs and report folders")
    ap.add_argument("--twostage", default=None, help="the twostage command [default: python -m toolkit.cli]")
    a = ap.parse_args(argv)
    cli = a.twostage.split() if a.twostage else [sys.executable, "-m", "toolkit.cli"]
    work = Path(a.work)
    print(
        "| queries | run lines | diagnose wall (CPU) | diagnose peak RSS | compare wall (CPU) | compare peak RSS "
        "| ratio wall (CPU) | diagnose per 1,000 queries: CPU, peak | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.queries.split(",") if x]:
        folder = work / f"q{n}"
        if not (folder / "rr3.txt").exists():
            subprocess.run(
                [sys.executable, str(HERE / "make_diagnose_bench.py"), "--queries", str(n), "--out-dir", str(folder)],
                check=True,
            )
        p = {k: str(folder / f"{k}.txt") for k in ("qrels", "first", "rr1", "rr2", "rr3")}
        load = os.getloadavg()[0]
        out = folder / "report"
        diagnose_cmd = (
            [*cli, "diagnose", "--qrels", p["qrels"], "--first-stage", f"first={p['first']}"]
            + [x for r in ("rr1", "rr2", "rr3") for x in ("--reranked", f"{r}={p[r]}")]
            + ["--out", str(out)]
        )
        compare_cmd = [*cli, "compare", "--qrels", p["qrels"], f"first={p['first']}"] + [
            f"{r}={p[r]}" for r in ("rr1", "rr2", "rr3")
        ]
        d_runs, c_runs = [], []
        for _ in range(max(1, a.repeat)):
            shutil.rmtree(out, ignore_errors=True)
            d_runs.append(run_measured(diagnose_cmd))
            c_runs.append(run_measured(compare_cmd))
        dwall, drss, dcpu = _summary(d_runs)
        cwall, crss, ccpu = _summary(c_runs)
        lines = n * 1300
        print(
            f"| {n:,} | {lines / 1e6:.1f} M | {dwall:.1f} s ({dcpu:.1f} s) | {drss:,.0f} MiB | {cwall:.1f} s "
            f"({ccpu:.1f} s) | {crss:,.0f} MiB | {dwall / cwall:.2f}x ({dcpu / ccpu:.2f}x) | {dcpu / n * 1000:.2f} s, "
            f"{drss / n * 1000:.0f} MiB | {load:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
