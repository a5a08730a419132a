#!/usr/bin/env python3
"""Benchmark: twostage eval vs native trec_eval vs pytrec_eval on an MS MARCO-dev-sized run.

Makes the input with ../shared/bench/make_big_run.py (6,980 queries x 1,000 documents,
~270 MB), then runs each evaluator end to end in its own process (parsing included) and
prints wall time, peak memory (max RSS of the process and its children) and whether the
values agree. Not a test: figures, not assertions.

    .venv/bin/python scripts/bench_eval.py [--queries 6980] [--depth 1000] [--work DIR] [--shuffled]
    .venv/bin/python scripts/bench_eval.py --all-trec [--trec-eval-10 PATH]
    .venv/bin/python scripts/bench_eval.py --many 100

--many N: N DL19-sized runs (the five DL19 runs of ../shared/data, scores perturbed with
seeded noise, cycled to N files) evaluated by one ``twostage eval QRELS FOLDER`` call and
by N single-run calls (ndcg_cut.10, map, recall.100, -c -l 2); prints both walls, the
speed-up (the issue's goal: >= 10x) and whether every run's values agree.

    .venv/bin/python scripts/bench_eval.py --api

--api: ndcg_cut.10 and recall.100 from memory, each step in its own process, best of two: parsing the
file (``read_run``), ``toolkit.evaluate`` on the parsed Run (what ``twostage eval`` does after parsing), on
the run as a PyTerrier DataFrame with arrow-backed and with object columns, and as a ``{qid: {doc: score}}``
dict, and pytrec_eval's ``RelevanceEvaluator(...).evaluate`` on the same dict (its conversion and
evaluation); prints seconds, the memory each step adds above its input, and whether the values agree.

Default: ndcg_cut.10 and recall.100 with twostage, pytrec_eval and
``python -m pyserini.eval.trec_eval``. --shuffled also times twostage and pytrec_eval
on a copy of the run with its lines in random order.

--all-trec: ``-m all_trec`` with twostage (--trec-eval 9 and 10), the native trec_eval
9.0.4 binary inside Pyserini's jar (run directly, no JVM), a native trec_eval 10 given
with --trec-eval-10 (its source is not reachable offline here, so none is built), and
pytrec_eval on the 31 measures it offers, each the best of two runs; twostage's 9 output is compared with 9.0.4's
byte for byte (every summary line), its 10 output with trec_eval 10's when given, and
pytrec_eval's means with twostage's to 4 decimals.
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

PYTREC_ALL = r"""
import math, sys, pytrec_eval
measures = {"11pt_avg", "G", "P", "Rndcg", "Rprec", "Rprec_mult", "binG", "bpref", "gm_bpref", "gm_map", "infAP",
            "iprec_at_recall", "map", "map_cut", "ndcg", "ndcg_cut", "ndcg_rel", "num_nonrel_judged_ret", "num_rel",
            "num_rel_ret", "num_ret", "recall", "recip_rank", "relative_P", "set_F", "set_P", "set_map",
            "set_recall", "set_relative_P", "success", "utility"}
with open(sys.argv[1]) as f: qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f: run = pytrec_eval.parse_run(f)
res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
names = sorted(next(iter(res.values())))
for m in names:
    vals = [v[m] for v in res.values()]
    if m.startswith("num_"):
        print(f"{m:<22}\tall\t{int(sum(vals))}")
    elif m.startswith("gm_"):
        print(f"{m:<22}\tall\t{math.exp(sum(vals) / len(vals)):.4f}")
    else:
        print(f"{m:<22}\tall\t{sum(vals) / len(vals):.4f}")
"""

API = r"""
import json, os, sys, threading, time
import pandas as pd
step, qrels, path = sys.argv[1], sys.argv[2], sys.argv[3]
import pytrec_eval
import toolkit as ts
from toolkit.data.trec_io import read_run
M = ["ndcg_cut.10", "recall.100"]
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def measured(call):
    # best of two calls; memory: the highest RSS seen while either ran, above the RSS before the first
    base, peak, done = rss(), [0], threading.Event()
    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()
    times, result = [], None
    for _ in range(2):
        result = None  # the previous result is freed before the next call, not held through it
        t = time.perf_counter(); result = call(); times.append(time.perf_counter() - t)
    done.set()
    return min(times), max(peak[0], rss()) - base, result


if step == "parse":
    seconds, extra, r = measured(lambda: read_run(path))
    values = {}
else:
    r = read_run(path)
    if step == "run":
        arg = r
    elif step in ("arrow", "object"):
        arg = pd.DataFrame({"qid": r.frame["query_id"], "docno": r.frame["doc_id"], "score": r.frame["score"]})
        if step == "object":
            arg = arg.astype({"qid": object, "docno": object})
    else:
        arg = {}
        for q, d, s in zip(r.frame["query_id"].tolist(), r.frame["doc_id"].tolist(), r.frame["score"].tolist()):
            arg.setdefault(q, {})[d] = s
    del r
    if step == "pytrec_eval":
        with open(qrels) as f:
            q = pytrec_eval.parse_qrel(f)
        def call():
            res = pytrec_eval.RelevanceEvaluator(q, set(M)).evaluate(arg)
            return {m: sum(v[m] for v in res.values()) / len(res) for m in ("ndcg_cut_10", "recall_100")}
        seconds, extra, values = measured(call)
    else:
        seconds, extra, ev = measured(lambda: ts.evaluate(qrels, arg, M))
        values = {k: float(v) for k, v in ev.summary.items()}
print(json.dumps({"seconds": seconds, "extra_mib": extra / 2**20, "values": values}))
"""

API_STEPS = {
    "parse": "parse the file (read_run)",
    "run": "ts.evaluate on the parsed Run",
    "arrow": "ts.evaluate on a DataFrame (arrow str columns)",
    "object": "ts.evaluate on a DataFrame (object columns)",
    "dict": "ts.evaluate on a {qid: {doc: score}} dict",
    "pytrec_eval": "pytrec_eval on the same dict (conversion + evaluate)",
}

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
    ap.add_argument("--all-trec", action="store_true", help="-m all_trec against native trec_eval and pytrec_eval")
    ap.add_argument("--trec-eval-10", default=None, help="a native trec_eval 10 binary to compare with")
    ap.add_argument("--many", type=int, default=0, help="N DL19-sized runs: one call vs N calls")
    ap.add_argument("--api", action="store_true", help="toolkit.evaluate on in-memory DataFrames and dicts")
    args = ap.parse_args()
    if args.many:
        many_runs(args)
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="twostage-bench-"))
    run, qrels = work / "run.txt", work / "qrels.txt"
    if not run.exists():
        subprocess.run(
            [
                sys.executable,
                str(MAKER),
                "--queries",
                str(args.queries),
                "--depth",
                str(args.depth),
                "--out-dir",
                str(work),
            ],
            check=True,
        )
    size_mib = run.stat().st_size / 2**20
    sys.path.insert(0, str(REPO / "tests" / "support"))  # oracles.py moved there with the layout
    from oracles import java_env

    py = sys.executable
    twostage = str(Path(py).with_name("twostage"))
    if args.all_trec:
        all_trec(work, run, qrels, size_mib, twostage, args)
        return
    if args.api:
        api(run, qrels, size_mib)
        return
    tools = {
        "twostage eval": (
            [twostage, "eval", "--no-provenance", "-m", "ndcg_cut.10", "-m", "recall.100", str(qrels), str(run)],
            None,
        ),
        "pytrec_eval (parse_run + C trec_eval)": ([py, "-c", PYTREC, str(qrels), str(run)], None),
        "pyserini.eval.trec_eval (9.0.4 binary)": (
            [py, "-m", "pyserini.eval.trec_eval", "-m", "ndcg_cut.10", "-m", "recall.100", str(qrels), str(run)],
            java_env(),
        ),
    }
    print(f"input: {run} ({size_mib:.0f} MiB, {args.queries} queries x {args.depth}); cores: {os.cpu_count()}")
    compare(tools, size_mib)
    if args.shuffled:
        shuffled = work / "run.shuffled.txt"
        if not shuffled.exists():  # in a child: a forked evaluator would inherit this process's peak RSS
            subprocess.run([sys.executable, "-c", SHUFFLE, str(run), str(shuffled)], check=True)
        print(f"input: {shuffled} (the same lines in random order)")
        compare(
            {
                name: ([str(shuffled) if a == str(run) else a for a in cmd], env)
                for name, (cmd, env) in list(tools.items())[:2]
            },
            size_mib,
        )


def api(run: Path, qrels: Path, size_mib: float) -> None:
    """Each in-memory form in its own child process (this checkout's toolkit), so one step's memory is its own.

    A child builds its input from the file untimed, then times the step twice (best printed) and reports the
    highest RSS it saw during the step above the RSS before it (the input itself not counted).
    """
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO))
    print(f"input: {run} ({size_mib:.0f} MiB); best of 2 per step, memory above the step's input")
    want, seconds = None, {}
    for step, label in API_STEPS.items():
        _, rss, out = run_measured([sys.executable, "-c", API, step, str(qrels), str(run)], env)
        doc = json.loads(out.strip().splitlines()[-1])
        seconds[step] = doc["seconds"]
        values = {k: round(v, 4) for k, v in doc["values"].items()}
        same = "" if not values else ("  values as the parsed Run's" if values == want else f"  values {values}")
        want = want or values or None
        print(f"{label:<56} {doc['seconds']:7.2f} s  +{doc['extra_mib']:6.0f} MiB (child peak {rss:5.0f} MiB){same}")
    # the yardstick for a DataFrame: the command on the file, end to end, less the parse it does
    cli = [
        str(Path(sys.executable).with_name("twostage")),
        "eval",
        "-m",
        "ndcg_cut.10",
        "-m",
        "recall.100",
        str(qrels),
        str(run),
    ]
    wall = min(run_measured(cli, env)[0] for _ in range(2))
    print(f"{'twostage eval on the file (process wall, best of 2)':<56} {wall:7.2f} s")
    print(f"{'  less the parse step above':<56} {wall - seconds['parse']:7.2f} s")


def compare(tools: dict, size_mib: float) -> None:
    results = {}
    for name, (cmd, env) in tools.items():
        wall, rss, out = run_measured(cmd, env)
        results[name] = (wall, rss, values(out))
        print(
            f"{name:<42} wall {wall:7.2f} s   peak RSS {rss:7.0f} MiB ({rss / size_mib:.2f}x run)   "
            + "  ".join(f"{k}={v}" for k, v in sorted(values(out).items())),
            flush=True,
        )
    ours = results["twostage eval"]
    for name, (wall, _, vals) in results.items():
        if name != "twostage eval":
            same = "identical values" if vals == ours[2] else f"VALUES DIFFER: {vals} vs {ours[2]}"
            print(f"speed-up vs {name}: {wall / ours[0]:.2f}x; {same}")


def all_trec(work: Path, run: Path, qrels: Path, size_mib: float, twostage: str, args) -> None:
    from oracles import native_trec_eval

    files = [str(qrels), str(run)]
    tools = {
        "twostage eval --trec-eval 9": [twostage, "eval", "--no-provenance", "-m", "all_trec", *files],
        "twostage eval --trec-eval 10": [
            twostage,
            "eval",
            "--no-provenance",
            "--trec-eval",
            "10",
            "-m",
            "all_trec",
            *files,
        ],
    }
    native9 = native_trec_eval()
    if native9:
        tools["trec_eval 9.0.4 (native, Pyserini's jar)"] = [native9, "-m", "all_trec", *files]
    if args.trec_eval_10:
        tools["trec_eval 10 (native)"] = [args.trec_eval_10, "-m", "all_trec", *files]
    tools["pytrec_eval (31 measures)"] = [sys.executable, "-c", PYTREC_ALL, *files]
    print(
        f"input: {run} ({size_mib:.0f} MiB, {args.queries} queries x {args.depth}); cores: {os.cpu_count()}; "
        "-m all_trec, end to end"
    )
    out = {}
    for name, cmd in tools.items():
        # best of two: the first call also pays for a cold page cache and cold imports
        (wall, rss, text), (wall2, _, _) = run_measured(cmd), run_measured(cmd)
        wall = min(wall, wall2)
        out[name] = (wall, text)
        print(
            f"{name:<42} wall {wall:7.2f} s   peak RSS {rss:7.0f} MiB ({rss / size_mib:.2f}x run)   "
            f"{len(values(text))} summary values",
            flush=True,
        )
    if not args.trec_eval_10:
        print("trec_eval 10 (native): not run (no binary; its source cannot be fetched offline; pass --trec-eval-10)")
    t9, t10 = out["twostage eval --trec-eval 9"], out["twostage eval --trec-eval 10"]
    for name, ours in (("trec_eval 9.0.4 (native, Pyserini's jar)", t9), ("trec_eval 10 (native)", t10)):
        if name in out:
            same = "byte-identical output" if out[name][1] == ours[1] else "OUTPUT DIFFERS"
            print(f"twostage vs {name}: {out[name][0] / ours[0]:.2f}x faster; {same}")
    py_vals, ours9 = values(out["pytrec_eval (31 measures)"][1]), values(t9[1])
    differ = {k: (v, ours9.get(k)) for k, v in py_vals.items() if ours9.get(k) != v}
    print(
        f"twostage vs pytrec_eval: {out['pytrec_eval (31 measures)'][0] / t9[0]:.2f}x faster; "
        + (
            "identical values on its " + str(len(py_vals)) + " summary values"
            if not differ
            else f"VALUES DIFFER: {differ}"
        )
    )


MAKE_MANY = r"""
import sys
from pathlib import Path
import numpy as np
import pandas as pd
src, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
bases = sorted(src.glob("run.dl19.*"))
rng = np.random.default_rng(0)
for i in range(n):
    run = pd.read_csv(bases[i % len(bases)], sep=" ", header=None, dtype={0: str, 2: str})
    run[4] = run[4] + rng.normal(0, 0.05 * run[4].std(), len(run))  # another system, same size
    run.to_csv(out / f"run{i:03d}.trec", sep=" ", header=False, index=False)
"""


def many_runs(args) -> None:
    """One `twostage eval QRELS FOLDER` against N single-run calls on the same N DL19-sized runs."""
    data = Path(os.environ.get("TWOSTAGE_DATA", REPO.parent / "shared" / "data")) / "msmarco-passage"
    work = Path(args.work or tempfile.mkdtemp(prefix="twostage-bench-many-"))
    folder = work / f"runs{args.many}"
    if not folder.is_dir():
        folder.mkdir(parents=True)
        subprocess.run([sys.executable, "-c", MAKE_MANY, str(data / "runs"), str(folder), str(args.many)], check=True)
    qrels = str(data / "qrels.dl19-passage.txt")
    env = os.environ | {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    base = [sys.executable, "-m", "toolkit.cli", "eval", "--no-provenance", "-c", "-l", "2"]
    base += ["-m", "ndcg_cut.10", "-m", "map", "-m", "recall.100", qrels]
    files = sorted(folder.glob("*.trec"))
    wall_one, rss, text = run_measured([*base, str(folder)], env)
    blocks = text.split("# run: ")[1:]
    wall_many, outs = 0.0, []
    for f in files:
        wall, _, out = run_measured([*base, str(f)], env)
        wall_many += wall
        outs.append(out)
    same = [b.split("\n", 1)[1] for b in blocks] == outs
    rows = len(files[0].read_text().splitlines())
    print(f"{len(files)} DL19-sized runs ({rows} lines each), 3 measures, -c -l 2; cores: {os.cpu_count()}")
    print(f"  one call, {len(files)} runs : {wall_one:7.2f} s  (peak RSS {rss:.0f} MiB)")
    print(f"  {len(files)} single calls   : {wall_many:7.2f} s  ({wall_many / len(files):.2f} s each)")
    print(f"  speed-up             : {wall_many / wall_one:7.1f}x  (goal >= 10x); per-run values identical: {same}")
    print(f"  load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
