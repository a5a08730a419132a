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

    .venv/bin/python scripts/bench_eval.py --peers

--peers: the measures of ir_measures' other providers (gdeval, cwl_eval, compat, judged, msmarco, accuracy,
pyndeval) and pytrec_eval's per-measure settings, one family at a time, against nDCG@10 on the same run: one
child process parses the run once, then times ``toolkit.evaluate`` of nDCG@10 and of each measure in turn on
the parsed Run (each call ranks the run itself: nDCG@10 in trec_eval's order, each family in its provider's),
twice, best of each (the load of a shared machine drifts between calls, as for --ranx), and prints each time,
nDCG@10's beside it and their ratio (the issue's goal: <= 1.5x). The diversity measures read diversity qrels
made from the generated qrels (each judged document under 2 to 5 subtopics).

Default: ndcg_cut.10 and recall.100 with twostage, pytrec_eval and
``python -m pyserini.eval.trec_eval``. --shuffled also times twostage and pytrec_eval
on a copy of the run with its lines in random order.

    .venv/bin/python scripts/bench_eval.py --ranx
    .venv/bin/python scripts/bench_eval.py --peers --ranx      # both, one after the other, on one generated run

--ranx: every ranx family (``toolkit/measures/ranx.py``: hits@10, ..., ndcg_burges@10, bpref-l1, rbp.8) against
``ndcg_cut.10``: ``toolkit.evaluate`` of the parsed run (the ranking included) in one child process, the two in
turn three times, best of each; prints each measure's seconds, nDCG@10's beside it and their ratio (the issue's
bound: 1.5x), all fourteen in one call, and each family's own computation on the run ranked once.

    .venv/bin/python scripts/bench_eval.py --msmarco

--msmarco: the run written in MS MARCO's format (``qid<TAB>pid<TAB>rank``, its rank column) and read by
``read_run`` (scores 1/rank), against the TREC file read so, best of 2 each; then ``toolkit.evaluate`` of MS
MARCO's official ``MRR@10`` against nDCG@10 on the parsed MS MARCO run, in turn three times, best of each (the
issue's bound: 1.5x); one child process, this checkout's toolkit.

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

#: One measure per family of ir_measures' providers, and pytrec_eval's per-measure settings (``--peers``).
PEERS = [
    "ERR@20",
    "nDCG(dcg='exp-log2')@10",
    "RBP(rel=1)",
    "SDCG(max_rel=3)@10",
    "INST(max_rel=3)",
    "INSQ(max_rel=3)",
    "NERR8(max_rel=3)@10",
    "NERR9(max_rel=3)@10",
    "NERR10(max_rel=3)",
    "NERR11(max_rel=3)",
    "BPM(max_rel=3)@10",
    "Compat",
    "Judged@10",
    "RR@10",
    "Accuracy",
    "P(rel=2,judged_only=True)@10",
    "nDCG(gains={0:0,1:1,2:4,3:10})@10",
]
DIVERSITY = [
    "alpha_nDCG@10",
    "alpha_DCG@10",
    "ERR_IA@20",
    "nERR_IA@20",
    "AP_IA",
    "P_IA@10",
    "NRBP",
    "nNRBP",
    "StRecall@10",
]

PEERS_CHILD = r"""
import json, sys, time, warnings, zlib
warnings.simplefilter("ignore")  # the generated run's tie warnings, once per call
import toolkit as ts
from toolkit.data.trec_io import read_qrels, read_run
qrels_path, div_path, run_path = sys.argv[1:4]
peers, diversity = json.loads(sys.argv[4]), json.loads(sys.argv[5])
lines = []
for line in open(qrels_path):
    q, _, d, r = line.split()
    for s in range(1, 2 + zlib.crc32(q.encode()) % 4 + 1):
        h = zlib.crc32(f"{d}/{s}".encode()) % 3
        lines.append(f"{q} {s} {d} {r if (int(r) > 0 and h == 0) or (int(r) >= 2 and h == 1) else 0}\n")
open(div_path, "w").writelines(lines)
run, qrels, div = read_run(run_path), read_qrels(qrels_path), read_qrels(div_path, subtopics=True)


def timed(qr, name):
    t = time.perf_counter(); ev = ts.evaluate(qr, run, [name]); return time.perf_counter() - t, ev


def best(qr, name):
    # nDCG@10 and the measure in turn, twice, best of each: the load of a shared machine drifts between calls
    base, own = [], []
    for _ in range(2):
        base.append(timed(qrels, "nDCG@10")[0])
        t, ev = timed(qr, name)
        own.append(t)
    return min(own), min(base), float(ev.summary.iloc[0])


out = {}
for name in peers:
    out[name] = best(qrels, name)
for name in diversity:
    out[name] = best(div, name)
print(json.dumps(out))
"""
RANX = r"""
import json, sys, time
import toolkit as ts
from toolkit.data.trec_io import read_qrels, read_run
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.measures.ranked import build_ranked
from toolkit.measures.trec import Context
qrels, path, names = sys.argv[1], sys.argv[2], sys.argv[3:]
run = read_run(path)
def seconds(measures):
    t = time.perf_counter(); ev = ts.evaluate(qrels, run, measures); return time.perf_counter() - t, ev
out = {}
for name in [*names, "all"]:  # nDCG@10 and the measure in turn, three times: the machine's load drifts
    asked = names if name == "all" else [name]
    base, own, value = [], [], None
    for _ in range(3):
        base.append(seconds(["ndcg_cut.10"])[0])
        t, ev = seconds(asked)
        own.append(t)
        value = float(ev.summary.iloc[0])
    out[name] = {"ndcg": min(base), "seconds": min(own), "value": value}
# the measures' own computation, on the run ranked once (what each adds to the shared ranking), best of five
q = read_qrels(qrels)
ranked = build_ranked(q, run, level=1, score_precision="float32", max_docs=None, judged_only=False)
ctx = Context(qrels=q, run=run)
compute = {}
for name in ["ndcg_cut.10", *names]:
    (m,) = parse_measures([name])
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter(); m.spec.compute(ranked, [m], ctx); best = min(best, time.perf_counter() - t)
    compute[name] = best
out["compute"] = compute
print(json.dumps(out))
"""
#: One name per ranx family; a spelling twostage reads as trec_eval's gets ranx's level suffix (ranx's own -l1).
RANX_NAMES = [
    "hits@10",
    "hit_rate@10",
    "precision@10-l1",
    "recall@100-l1",
    "f1@10",
    "r-precision",
    "mrr@10-l1",
    "map@100-l1",
    "dcg@10",
    "dcg_burges@10",
    "ndcg@10-l1",
    "ndcg_burges@10",
    "bpref-l1",
    "rbp.8",
]

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
    ap.add_argument("--peers", action="store_true", help="ir_measures' other providers' measures vs nDCG@10")
    ap.add_argument("--ranx", action="store_true", help="every ranx family against ndcg_cut.10 on the same run")
    ap.add_argument("--msmarco", action="store_true", help="MS MARCO-format runs read, and MRR@10 vs nDCG@10")
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
    if args.msmarco:
        msmarco(work, run, qrels, size_mib)
        return
    if args.peers or args.ranx:  # both in one call: one machine load for both sets of figures
        if args.peers:
            peers(work, run, qrels, size_mib)
        if args.ranx:
            ranx(run, qrels, size_mib, args)
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


def peers(work: Path, run: Path, qrels: Path, size_mib: float) -> None:
    """``--peers``: each family's ``toolkit.evaluate`` on the parsed run, against nDCG@10's (see the docstring)."""
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-c", PEERS_CHILD, str(qrels), str(work / "qrels.div.txt"), str(run)]
    load = os.getloadavg()[0]
    _, rss, out = run_measured([*cmd, json.dumps(PEERS), json.dumps(DIVERSITY)], env)
    got = json.loads(out.strip().splitlines()[-1])
    print(f"input: {run} ({size_mib:.0f} MiB); toolkit.evaluate on the parsed Run, best of 2; child peak {rss:.0f} MiB")
    print(f"load average (1 min): {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    for name, (seconds, base, value) in got.items():
        print(f"{name:<36} {seconds:6.2f} s  nDCG@10 {base:6.2f} s  {seconds / base:5.2f}x   value {value:.4f}")
    worst = max(seconds / base for seconds, base, _ in got.values())
    print(f"slowest: {worst:.2f}x nDCG@10 (goal: <= 1.5x)")


MSMARCO = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")  # the generated run's tie warnings
import toolkit as ts
from toolkit.data.trec_io import read_run
qrels, trec, msmarco = sys.argv[1:4]
def read(path):
    t = time.perf_counter(); run = read_run(path); return time.perf_counter() - t, run
out = {"read trec": min(read(trec)[0] for _ in range(2))}
times = [read(msmarco) for _ in range(2)]
out["read msmarco"], run = min(t for t, _ in times), times[0][1]
def seconds(name):
    t = time.perf_counter(); ev = ts.evaluate(qrels, run, [name]); return time.perf_counter() - t, ev
base, own = [], []
for _ in range(3):  # in turn: the load of a shared machine drifts between calls
    base.append(seconds("nDCG@10")[0])
    t, ev = seconds("MRR@10")
    own.append(t)
out["nDCG@10"], out["MRR@10"], out["value"] = min(base), min(own), float(ev.summary.iloc[0])
print(json.dumps(out))
"""


def msmarco(work: Path, run: Path, qrels: Path, size_mib: float) -> None:
    """``--msmarco``: MS MARCO-format reading and MRR@10 (see the docstring)."""
    import json

    ms = work / "run.msmarco.tsv"
    if not ms.exists():  # qid<TAB>docid<TAB>rank of every line, as a reranker writes it
        with open(run) as src, open(ms, "w") as dst:
            for line in src:
                q, _, d, r, _, _ = line.split()
                dst.write(f"{q}\t{d}\t{r}\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    load = os.getloadavg()[0]
    _, rss, out = run_measured([sys.executable, "-c", MSMARCO, str(qrels), str(run), str(ms)], env)
    got = json.loads(out.strip().splitlines()[-1])
    print(f"input: {run} ({size_mib:.0f} MiB) and {ms} ({ms.stat().st_size / 2**20:.0f} MiB); child peak {rss:.0f} MiB")
    print(f"load average (1 min): {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"read_run, TREC file        {got['read trec']:6.2f} s")
    print(f"read_run, MS MARCO file    {got['read msmarco']:6.2f} s  {got['read msmarco'] / got['read trec']:5.2f}x")
    print(
        f"MRR@10 (MS MARCO's)        {got['MRR@10']:6.2f} s  nDCG@10 {got['nDCG@10']:6.2f} s  "
        f"{got['MRR@10'] / got['nDCG@10']:5.2f}x   value {got['value']:.4f} (goal: <= 1.5x)"
    )


def ranx(run: Path, qrels: Path, size_mib: float, args) -> None:
    """Each ranx family alone, and all at once, against ndcg_cut.10: ``toolkit.evaluate`` of the run parsed once,
    in one child process with this checkout's toolkit; nDCG@10 and the measure timed in turn, three times (best of
    each: the load of a shared machine drifts between calls), then each measure's own computation on the run
    ranked once."""
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO))
    load = os.getloadavg()[0]
    _, rss, out = run_measured([sys.executable, "-c", RANX, str(qrels), str(run), *RANX_NAMES], env)
    got = json.loads(out.strip().splitlines()[-1])
    print(
        f"input: {run} ({size_mib:.0f} MiB, {args.queries} queries x {args.depth}); cores: {os.cpu_count()}; "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; child peak RSS {rss:.0f} MiB"
    )
    compute = got.pop("compute")
    print(
        f"{'measure':<28} {'evaluate':>8}  {'nDCG@10':>8}  ratio  {'compute':>9} (nDCG@10's {compute['ndcg_cut.10'] * 1e3:.1f} ms)"
    )
    worst = 0.0
    for name, row in got.items():
        ratio = row["seconds"] / row["ndcg"]
        worst = max(worst, ratio)
        label = f"all {len(RANX_NAMES)} in one call" if name == "all" else name
        own = f"{compute[name] * 1e3:6.1f} ms" if name in compute else " " * 9
        print(f"{label:<28} {row['seconds']:6.2f} s  {row['ndcg']:6.2f} s  {ratio:4.2f}x  {own}  {row['value']:.4f}")
    print(f"slowest: {worst:.2f}x nDCG@10 (bound 1.5x)")


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
