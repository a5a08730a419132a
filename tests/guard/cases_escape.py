"""The door "escape" (``toolkit.guard.escape``), for terminals: every string twostage prints passes one escape that
shows what a terminal would act on (``[U+XXXX]``), on every channel: reports on stdout, ``Error:`` lines, warnings,
log lines, progress bars.

Before: a reproduction spec's title and labels put ESC c (a terminal reset), ESC ( 0 (the line-drawing character
set) and BEL on the terminal, and an error line printed a file name holding an OSC sequence raw, into a pipe too.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

from doors import Case, assert_one_error, cli

REPO = Path(__file__).resolve().parents[2]

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 2\n2 0 d4 1\n2 0 d5 1\n"
RUN = "1 Q0 d3 1 3.0 t\n1 Q0 d2 2 2.0 t\n1 Q0 d1 3 1.0 t\n2 Q0 d9 1 2.0 t\n2 Q0 d4 2 1.0 t\n"
#: OSC 0 (set the window title) and OSC 8 (a hyperlink), each ended by BEL or ST (ESC \)
OSC = "\x1b]0;pwned\x07\x1b]8;;evil.example\x1b\\link\x1b]8;;\x1b\\"
#: what the escape prints for OSC
OSC_SHOWN = "[U+001B]]0;pwned[U+0007][U+001B]]8;;evil.example[U+001B]\\link[U+001B]]8;;[U+001B]\\"


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on or hide (the oracle: Unicode categories Cc, Cf, Cs, Zl,
    Zp), line feed and tab aside, as ``U+XXXX``."""
    return sorted(
        {
            f"U+{ord(c):04X}"
            for c in text
            if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        }
    )


def _streams(res) -> tuple[str, str]:
    """(stdout, stderr) of a click runner result, decoded as a terminal would get them."""
    err = res.stderr_bytes.decode("utf-8", "surrogateescape") if res.stderr_bytes is not None else ""
    return res.stdout_bytes.decode("utf-8", "surrogateescape"), err


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _spec(tmp: Path, title: str, label: str, run: str = "run: run.txt") -> Path:
    _write(tmp, "qrels.txt", QRELS)
    _write(tmp, "run.txt", RUN)
    # JSON strings are YAML double-quoted strings: the controls go into the spec as escapes (\u001b)
    text = (
        f"name: tiny\ntitle: {json.dumps(title)}\npaths: spec\ncolumns:\n  - {{id: MAP, measure: map}}\n"
        f"rows:\n  - id: sys\n    label: {json.dumps(label)}\n    qrels: qrels.txt\n    {run}\n"
        "    cells: {MAP: 0.5417}\n"
    )
    return _write(tmp, "spec.yaml", text)


def _twostage(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m toolkit.cli ARGS`` as a process whose stdout and stderr are pipes (not a terminal)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli", *args], cwd=cwd, env=env, capture_output=True, timeout=300
    )


# ------------------------------------------------------------------ stdout reports
def reproduce_title_and_labels(tmp: Path) -> None:
    """The issue's spec: ESC c, ESC ( 0 and BEL in the title and a row's label, and OSC in the title."""
    spec = _spec(tmp, f"Reset\x1bc charset\x1b(0 bell\x07 {OSC} bidi\u202eok", "row\x1b(0\x07\x9b31m")
    res = cli("reproduce", str(spec), "--out", str(tmp / "out"))
    out, err = _streams(res)
    assert res.exit_code == 0, res.output
    assert raw_controls(out) == [] and raw_controls(err) == [], (raw_controls(out), raw_controls(err))
    title = re.sub(r"\\([\\`*\[\]<>|])", r"\1", out.splitlines()[0])  # as Markdown reads it
    assert title == f"# Reset[U+001B]c charset[U+001B](0 bell[U+0007] {OSC_SHOWN} bidi[U+202E]ok", title
    assert "| row[U+001B](0[U+0007][U+009B]31m | MAP |" in out, out


def json_on_stdout_reads_back(tmp: Path) -> None:
    """JSON on stdout shows the same characters as JSON escapes: it reads back as the very names given."""
    _write(tmp, "qrels.txt", QRELS)
    a, b = _write(tmp, "a.txt", RUN), _write(tmp, "b.txt", RUN.replace("3.0", "0.5"))
    names = [f"x\x1bc{OSC}", "y\u202e[U+0041]\u2066"]
    res = cli("eval", "-m", "map", "--format", "json", str(tmp / "qrels.txt"), f"{names[0]}={a}", f"{names[1]}={b}")
    out, err = _streams(res)
    assert res.exit_code == 0, res.output
    assert raw_controls(out) == [] and raw_controls(err) == []
    assert [r["run"] for r in json.loads(out)["runs"]] == names
    # trec_eval's layout is data too: each control shown, every other character as it was given
    res = cli("eval", "-m", "map", str(tmp / "qrels.txt"), f"{names[0]}={a}", f"{names[1]}={b}")
    out, _ = _streams(res)
    runs = [ln for ln in out.splitlines() if ln.startswith("# run: ") and "sha256:" not in ln]
    assert runs == ["# run: x[U+001B]c" + OSC_SHOWN, "# run: y[U+202E][U+0041][U+2066]"], runs


# ------------------------------------------------------------------ Error: lines
def osc_file_name_in_error_line_into_a_pipe(tmp: Path) -> None:
    """A file name holding OSC and C1 controls, named by an ``Error:`` line written into a pipe (click strips only
    CSI sequences, and only when it knows the stream is no terminal)."""
    _write(tmp, "qrels.txt", QRELS)
    missing = f"run{OSC}\x9d0;x\x9c.txt"
    r = _twostage("eval", "qrels.txt", missing, cwd=tmp)
    err = r.stderr.decode("utf-8", "surrogateescape")
    assert r.returncode == 1 and raw_controls(err) == [] and b"\x1b" not in r.stderr, err
    assert err.splitlines() == [f"Error: run{OSC_SHOWN}[U+009D]0;x[U+009C].txt: no such file"], err
    # a file that exists, with a bad line: the error names it and its line, shown alike
    bad = _write(tmp, f"bad{OSC}.txt", "1 Q0 d1 1\n")
    r = _twostage("eval", "qrels.txt", bad.name, cwd=tmp)
    err = r.stderr.decode("utf-8", "surrogateescape")
    assert r.returncode == 1 and raw_controls(err) == [], err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: bad{OSC_SHOWN}.txt:1: "), err
    # the same through click's runner: one Error: line, nothing raw
    res = cli("eval", str(tmp / "qrels.txt"), str(tmp / missing))
    line = assert_one_error(res, OSC_SHOWN, "no such file", code=1)
    assert raw_controls(line) == [], line


def line_feed_in_a_name_forges_no_line(tmp: Path) -> None:
    """A file name holding line feeds, named by an ``Error:`` line or a warning, stays on that one line: it cannot
    print a forged ``Error:`` or ``twostage: wrote`` line of its own."""
    _write(tmp, "qrels.txt", QRELS)
    forged = "run\nError: forged\ntwostage: wrote /etc/passwd"
    res = cli("eval", str(tmp / "qrels.txt"), str(tmp / forged))
    line = assert_one_error(res, "run[U+000A]Error: forged[U+000A]twostage: wrote /etc/passwd: no such file", code=1)
    out, err = _streams(res)
    assert err.splitlines() == [line] and out == "", (out, err)
    first = _write(tmp, "first.txt", RUN)
    name = "rr\ntwostage: warning: forged.txt"
    reranked = _write(tmp, name, RUN)
    _write(tmp, name + ".meta.json", "{bad")
    res = cli(
        "diagnose", "--qrels", str(tmp / "qrels.txt"), "--first-stage", str(first), "--reranked", f"rr={reranked}",
        "--depth", "rr=3", "--out", str(tmp / "out"),
    )  # fmt: skip
    _, err = _streams(res)
    warned = [ln for ln in err.splitlines() if ln.startswith("twostage: warning: ignoring the unreadable sidecar")]
    assert len(warned) == 1 and "rr[U+000A]twostage: warning: forged.txt.meta.json" in warned[0], err
    assert not any(ln.startswith("twostage: warning: forged") for ln in err.splitlines()), err


def usage_errors_escaped(tmp: Path) -> None:
    """A value typed on the command line echoed by a usage error (click's, or one of twostage's own) is shown."""
    _write(tmp, "qrels.txt", QRELS)
    _write(tmp, "run.txt", RUN)
    res = cli("eval", "-m", "ndcg_cut.\x1bc\x07", str(tmp / "qrels.txt"), str(tmp / "run.txt"))
    line = assert_one_error(res, "ndcg_cut.[U+001B]c[U+0007]")
    for args in (["--x\x1bc"], ["ev\x1b]0;x\x07"], ["eval", "--format", "\x1b(0", "q", "r"]):
        res = cli(*args)
        out, err = _streams(res)
        assert res.exit_code == 2 and raw_controls(out + err) == [], (args, out + err)
    assert raw_controls(line) == []


# ------------------------------------------------------------------ warnings and log lines
def warning_lines_escaped(tmp: Path) -> None:
    """``twostage: warning:`` lines name a file as it is, shown: a run whose sidecar cannot be read."""
    _write(tmp, "qrels.txt", QRELS)
    first = _write(tmp, "first.txt", RUN)
    name = f"r{OSC}.txt"
    reranked = _write(tmp, name, RUN)
    _write(tmp, name + ".meta.json", "{bad")
    res = cli(
        "diagnose", "--qrels", str(tmp / "qrels.txt"), "--first-stage", str(first), "--reranked", str(reranked),
        "--depth", f"r{OSC}=3", "--out", str(tmp / "out"),
    )  # fmt: skip
    out, err = _streams(res)
    assert raw_controls(out) == [] and raw_controls(err) == [], (raw_controls(out), raw_controls(err))
    warnings = [ln for ln in err.splitlines() if ln.startswith("twostage: warning: ignoring the unreadable sidecar")]
    assert len(warnings) == 1 and f"r{OSC_SHOWN}.txt.meta.json" in warnings[0], err


def log_lines_escaped(tmp: Path) -> None:
    """The log (stderr): a spec's command is logged with its arguments, and the output of the programs a spec
    runs is logged line by line: both shown, in a real process (the command's own log handler)."""
    spec = _spec(
        tmp, "t", "sys", run=f"commands: [[twostage, eval, qrels.txt, {json.dumps('r' + OSC)}, --out, '{{run}}']]"
    )
    r = _twostage("reproduce", str(spec), "--out", str(tmp / "out"), cwd=tmp)
    err = r.stderr.decode("utf-8", "surrogateescape")
    assert raw_controls(err) == [] and raw_controls(r.stdout.decode("utf-8", "surrogateescape")) == [], err
    assert f"sys: running twostage eval qrels.txt r{OSC_SHOWN} --out " in err, err
    # the verb's own Error: line, logged line by line by the runner: the verb showed the controls, and the log
    # shows what the verb printed (each "[" of its "[U+XXXX]" as "[U+005B]": the escape is injective)
    assert f"    Error: r{OSC_SHOWN.replace('[U+', '[U+005B]U+')}: no such file" in err, err


# ------------------------------------------------------------------ progress bars
def progress_bars_escaped(tmp: Path) -> None:
    """Every progress bar is made by ``progress_bar``: its description, postfix and the lines written above it."""
    from toolkit.guard.escape import progress_bar

    for auto in (True, False):
        stream = io.StringIO()
        with progress_bar(auto=auto, total=2, desc=f"run {OSC}", file=stream, mininterval=0) as bar:
            bar.set_postfix_str("file \x1bc\u202e")
            bar.update(1)
            bar.write(f"shard done on host{OSC}", file=stream)
            bar.set_description(f"again\x07{OSC}")
            bar.update(1)
        shown = stream.getvalue()
        # tqdm's own controls: the carriage return it redraws the line with, and ESC [A to move up (not used here)
        assert raw_controls(shown.replace("\r", "")) == [], raw_controls(shown.replace("\r", ""))
        assert f"run {OSC_SHOWN}" in shown and "file [U+001B]c[U+202E]" in shown, shown
        assert f"shard done on host{OSC_SHOWN}" in shown and f"again[U+0007]{OSC_SHOWN}" in shown, shown


CASES = [
    Case("escape", "reproduce-title-and-labels", reproduce_title_and_labels),
    Case("escape", "json-on-stdout-reads-back", json_on_stdout_reads_back),
    Case("escape", "osc-file-name-in-error-line-into-a-pipe", osc_file_name_in_error_line_into_a_pipe),
    Case("escape", "line-feed-in-a-name-forges-no-line", line_feed_in_a_name_forges_no_line),
    Case("escape", "usage-errors-escaped", usage_errors_escaped),
    Case("escape", "warning-lines-escaped", warning_lines_escaped),
    Case("escape", "log-lines-escaped", log_lines_escaped),
    Case("escape", "progress-bars-escaped", progress_bars_escaped),
]
