"""A command allocates arrow memory through the C library's allocator (it hands freed pages back, where
mimalloc, pyarrow's default, kept a diagnosis's short-lived columns: docs/benchmarks.md), unless
``ARROW_DEFAULT_MEMORY_POOL`` chooses; when the command ends, the process's default pool is back (a command run
in-process leaves its caller's allocator as it was)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
import pyarrow as pa
from toolkit.cli import main

before = pa.default_memory_pool().backend_name
command = main.commands["eval"]
run = command.callback

def callback(*args, **kwargs):  # the pool while the command runs
    print("pool:", pa.default_memory_pool().backend_name)
    return run(*args, **kwargs)

command.callback = callback
try:
    main(["eval", sys.argv[1], sys.argv[2], "-m", "P.1"])
except SystemExit:
    pass
print("restored:", pa.default_memory_pool().backend_name == before)
"""


@pytest.mark.parametrize(("env", "want"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_command_allocates_through_the_chosen_pool(tmp_path, env, want):
    (tmp_path / "q").write_text("q1 0 d1 1\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 r\n")
    environ = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    environ["PYTHONPATH"] = str(REPO)
    if env:
        environ["ARROW_DEFAULT_MEMORY_POOL"] = env
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "q"), str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=environ,
        check=True,
    ).stdout
    lines = out.splitlines()
    assert lines[0] == f"pool: {want}" and lines[-1] == "restored: True", out
    assert "P_1" in out
