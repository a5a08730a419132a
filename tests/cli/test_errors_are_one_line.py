"""Fail fast and in words: every expected failure is one ``Error:`` line naming the file and
the fix, found before the work where it can be.

- a "billion laughs" experiment file (nested YAML aliases): refused as it is read (before: 44 s and 5 GB);
  bounded by a subprocess timeout and an address-space limit, not by a timing assertion;
- a grid over the stated limit: its size and disk estimate first, then a refusal unless ``--yes``;
- read-only output (a read-only tmpfs mount; root ignores permission bits, not a read-only mount; a path
  under a file where mounting is not allowed), disk full (a 64 KiB tmpfs), too little free space for the
  estimated runs;
- a concurrent index build on one folder: locked, the second refused naming the holder.

Mounts need root (CAP_SYS_ADMIN); those tests skip with the reason elsewhere.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import optional, required

REPO = Path(__file__).resolve().parents[2]

LAUGHS = """\
name: lol
topics: topics.tsv
qrels: qrels.txt
index: {path: index}
a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
stages: {bm25: {type: bm25, k1: *i}}
"""


def _limit_memory() -> None:  # in the child: a regression fails there instead of eating the machine
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_nested_yaml_aliases_are_refused_as_the_file_is_read(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert len(LAUGHS.encode()) < 600
    code = (
        "import sys\n"
        "from toolkit.errors import InputFormatError\n"
        "from toolkit.experiments.spec import parse_experiment\n"
        "try:\n"
        f"    parse_experiment({str(path)!r})\n"
        "except InputFormatError as exc:\n"
        "    print(exc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,  # reading and refusing takes ~0.1 s; before, 44 s and 5 GB
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # by hand, each mapping, list, key and scalar one value: a = 1 + 9 = 10, b = 1 + 9a = 91, ..., i = 1 + 9h =
    # 435,848,050; a..i together 490,329,054; stages 1 + 1 + (1 + 2 + 1 + i) = 435,848,056; the top mapping 1,
    # its 14 keys, 3 scalars and index (3): 926,177,131. The line is where the count passes 10,000: lines 1-4 hold
    # 1 + 8 + 3 = 12 values, a..d 10 + 91 + 820 + 7,381 (8,314 in all), and e's second *d (7,381 more) on line 9
    assert r.stdout.strip() == (
        f"{path}:9: the file expands to 926,177,131 values, more than the 10,000 an experiment file may hold "
        "(YAML aliases, *name, repeat what their anchor names); write it with fewer or no aliases"
    )


def test_a_few_aliases_still_work(tmp_path):
    from toolkit.experiments.spec import parse_experiment

    path = tmp_path / "shared.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            topics: topics.tsv
            qrels: qrels.txt
            index: {path: index}
            stages:
              bm25: {type: bm25, k1: &k1 [0.6, 0.9], b: 0.4}
              ql: {type: bm25, k1: *k1, b: 0.75}
            """
        )
    )
    exp = parse_experiment(path)
    assert exp.stages["bm25"].grid == {"k1": [0.6, 0.9]} == exp.stages["ql"].grid


# ------------------------------------------------------------------ the grid limit and free space
@pytest.fixture
def small_experiment(tmp_path):
    """A 3-query experiment; its index is not there, so a run that gets past the checks stops at it."""
    (tmp_path / "topics.tsv").write_text("1\tone\n2\ttwo\n3\tthree\n")
    (tmp_path / "qrels.txt").write_text("1 0 d1 1\n")

    def write(k1_points: int, b_points: int) -> Path:
        k1 = [round(0.1 * (i + 1), 1) for i in range(k1_points)]
        b = [round(0.01 * (i + 1), 2) for i in range(b_points)]
        path = tmp_path / "grid.yaml"
        path.write_text(
            textwrap.dedent(
                f"""\
                name: grid
                topics: {tmp_path / "topics.tsv"}
                qrels: {tmp_path / "qrels.txt"}
                index: {{path: {tmp_path / "no-index"}}}
                hits: 100
                stages:
                  bm25: {{type: bm25, k1: {k1}, b: {b}}}
                """
            )
        )
        return path

    return write


def test_a_grid_over_the_limit_says_its_size_and_needs_yes(cli, small_experiment, tmp_path):
    spec = small_experiment(41, 25)  # 1,025 configurations
    out = tmp_path / "out"
    res = cli("experiment", "run", spec, "--out", out, "--cache-dir", tmp_path / "cache")
    assert res.exit_code == 1, res.output
    # 1,025 runs x 3 queries x 100 hits x 48 bytes = 14,760,000 bytes = 14.1 MB
    assert res.stderr.strip().splitlines() == [
        "twostage: experiment grid: 1,025 configurations (bm25: 1,025); about 14.1 MB of runs (1,025 runs of 3 "
        "queries x 100 hits) in --out and as much in the stage cache",
        f"Error: {spec}: 1,025 configurations, more than 1,000; pass --yes to run them all, or make the grid smaller",
    ]
    assert not out.exists()
    res = cli("experiment", "run", spec, "--out", out, "--cache-dir", tmp_path / "cache", "--yes")
    assert res.exit_code == 1 and "no-index" in res.stderr.splitlines()[-1], res.output  # past the limit


def test_a_grid_under_the_limit_needs_no_yes(cli, small_experiment, tmp_path):
    res = cli("experiment", "run", small_experiment(2, 3), "--out", tmp_path / "out", "--cache-dir", tmp_path / "c")
    assert res.stderr.startswith("twostage: experiment grid: 6 configurations (bm25: 6); about 84.4 KB of runs")
    assert "--yes" not in res.stderr and "no-index" in res.stderr.splitlines()[-1], res.output


# ------------------------------------------------------------------ file systems that refuse
def _mount(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode:
        optional(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs root")


@pytest.fixture
def mounted(tmp_path):
    made: list[Path] = []

    def mount(name: str, options: str) -> Path:
        path = tmp_path / name
        _mount(path, options)
        made.append(path)
        return path

    yield mount
    for path in made:
        subprocess.run(["umount", str(path)], check=False)


RUN_LINES = 3000  # 3,000 lines of ~25 bytes in each run: their fusion (~130 KB) cannot fit in 64 KiB


@pytest.fixture
def two_runs(tmp_path):
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.trec"
        p.write_text("".join(f"1 Q0 d{i} {i + 1} {RUN_LINES - i} {name}\n" for i in range(RUN_LINES)))
        paths.append(p)
    return paths


def test_disk_full_is_one_line_naming_the_file_and_leaves_nothing(cli, mounted, two_runs):
    tiny = mounted("tiny", "size=64k")
    out = tiny / "fused.trec"
    res = cli("fuse", *two_runs, "--depth", RUN_LINES, "--hits", RUN_LINES, "--out", out)
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: {out}: no space left on the device; free space there or write the output elsewhere"
    ]
    assert list(tiny.iterdir()) == []  # no partial file, no temporary


def test_read_only_output_is_refused_before_any_input_is_read(cli, mounted, two_runs, tmp_path):
    ro = mounted("ro", "ro,size=64k")
    res = cli("fuse", tmp_path / "missing.trec", *two_runs, "--out", ro / "sub" / "fused.trec")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: --out {ro / 'sub' / 'fused.trec'}: cannot write in {ro} (read-only file system); write the "
        "output to a folder on a writable file system"
    ]


def test_an_output_under_a_file_is_refused_before_the_work(cli, small_experiment, tmp_path):
    spec = small_experiment(2, 2)
    res = cli("experiment", "run", spec, "--out", spec / "out")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: --out {spec / 'out'}: {spec} is a file, not a folder; give a path whose folders are folders"
    ]


def test_too_little_space_for_the_estimated_runs_is_refused_first(cli, mounted, small_experiment, tmp_path):
    tiny = mounted("small", "size=64k")
    spec = small_experiment(2, 3)  # 6 runs x 3 x 100 x 48 bytes = 86,400 bytes > 64 KiB
    res = cli("experiment", "run", spec, "--out", tiny / "out", "--cache-dir", tmp_path / "cache")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: --out {tiny / 'out'}: the experiment's runs needs about 84.4 KB, but {tiny} has 64.0 KB free; "
        "free space there or choose another folder"
    )
    assert list(tiny.iterdir()) == []


# ------------------------------------------------------------------ one index build per folder
def test_a_concurrent_index_build_is_refused_naming_the_holder(cli, tmp_path):
    required("pyserini", "the [pyserini] extra is not installed")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": "d1", "contents": "one"}\n{"id": "d2", "contents": "two"}\n')
    out = tmp_path / "index"
    lock = tmp_path / ".index.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        res = cli("index", "--collection", corpus, "--out", out, "--no-progress")
    finally:
        holder.kill()
        holder.wait()
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: {out}: another process (pid {holder.pid}) is building this Lucene index now (lock {lock}); wait "
        "for it to finish and run again (its result will be reused), or give another --out"
    )
    assert not out.exists()
