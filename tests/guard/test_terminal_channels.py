"""No path to the terminal goes around its escape: every module of ``toolkit/cli`` prints through
``toolkit.cli.terminal`` (``echo``), and every progress bar of the toolkit is made by
``toolkit.guard.escape.progress_bar``. Read from the source (the syntax tree), so a new ``click.echo``, ``print``,
``sys.stdout.write`` or ``tqdm`` fails here; each rule is also shown to catch a planted call.
"""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import click
import pytest

from toolkit.cli.terminal import TerminalFormatter, escaped_excepthook, shown_escaped

TOOLKIT = Path(__file__).resolve().parents[2] / "toolkit"
#: the one module of the CLI that writes to the terminal itself
TERMINAL = TOOLKIT / "cli" / "terminal.py"
#: the one module that makes progress bars
BARS = TOOLKIT / "guard" / "escape.py"
#: click's ways to print
CLICK_PRINTS = {"echo", "secho", "echo_via_pager", "get_text_stream", "get_binary_stream", "open_file"}


def printing_calls(source: str) -> list[str]:
    """The calls of ``source`` that print around the escape: ``print``, click's printing functions (as
    ``click.echo`` or imported), and anything reached through ``sys.stdout``/``sys.stderr`` (``.write``,
    ``.buffer``), each as ``LINE: what``."""
    tree = ast.parse(source)
    found = []
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "click":
            imported |= {a.asname or a.name for a in node.names if a.name in CLICK_PRINTS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and (f.id == "print" or f.id in imported):
                found.append(f"{node.lineno}: {f.id}()")
            elif isinstance(f, ast.Attribute) and f.attr in CLICK_PRINTS and _name(f.value) == "click":
                found.append(f"{node.lineno}: click.{f.attr}()")
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("write", "buffer", "writelines")
            and isinstance(node.value, ast.Attribute)
            and _name(node.value.value) == "sys"
            and node.value.attr in ("stdout", "stderr", "__stdout__", "__stderr__")
        ):
            found.append(f"{node.lineno}: sys.{node.value.attr}.{node.attr}")
    return sorted(found)


def tqdm_uses(source: str) -> list[str]:
    """Imports of tqdm in ``source``, each as ``LINE: module``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names if a.name.split(".")[0] == "tqdm"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tqdm":
            found.append(f"{node.lineno}: {node.module}")
    return found


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def test_every_cli_module_prints_through_the_escape():
    modules = sorted(p for p in (TOOLKIT / "cli").glob("*.py") if p != TERMINAL)
    assert len(modules) > 10
    around = {p.name: printing_calls(p.read_text(encoding="utf-8")) for p in modules}
    assert {k: v for k, v in around.items() if v} == {}


def test_every_progress_bar_is_made_by_the_escape():
    uses = {
        str(p.relative_to(TOOLKIT)): tqdm_uses(p.read_text(encoding="utf-8"))
        for p in TOOLKIT.rglob("*.py")
        if p != BARS
    }
    assert {k: v for k, v in uses.items() if v} == {}


@pytest.mark.parametrize(
    ("planted", "caught"),
    [
        ("import click\nclick.echo('x')\n", ["2: click.echo()"]),
        ("from click import echo as say\nsay('x', err=True)\n", ["2: say()"]),
        ("print('x')\n", ["1: print()"]),
        ("import sys\nsys.stdout.write('x')\n", ["2: sys.stdout.write"]),
        ("import sys\nw = sys.stderr.buffer\n", ["2: sys.stderr.buffer"]),
        ("import click\nclick.secho('x', fg='red')\n", ["2: click.secho()"]),
        ("from toolkit.cli.terminal import echo\necho('x')\nfh.write('y')\n", []),
    ],
)
def test_the_rules_catch_a_planted_call(planted, caught):
    assert printing_calls(planted) == caught


def test_the_progress_rule_catches_a_planted_bar():
    assert tqdm_uses("from tqdm.auto import tqdm\n") == ["1: tqdm.auto"]
    assert tqdm_uses("import tqdm\n") == ["1: tqdm"]


# ------------------------------------------------------------------ the channels' own escapes
def test_error_messages_are_escaped_once():
    exc = shown_escaped(shown_escaped(click.ClickException("file \x1b]0;x\x07 [U+0041]")))
    assert exc.format_message() == "file [U+001B]]0;x[U+0007] [U+005B]U+0041]"
    usage = shown_escaped(click.BadParameter("'\x1bc' is bad", param_hint="'--x'"))
    assert usage.format_message() == "Invalid value for '--x': '[U+001B]c' is bad"


def test_log_lines_and_tracebacks_are_escaped(capsys):
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "running %s", ("\x1bc\u202e",), None)
    assert TerminalFormatter("%(message)s").format(record) == "running [U+001B]c[U+202E]"
    try:
        raise ValueError("bad \x1b]0;x\x07 value")
    except ValueError:
        escaped_excepthook(*sys.exc_info())
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ValueError: bad [U+001B]]0;x[U+0007] value" in err, err
    assert "\x1b" not in err and "\x07" not in err


def test_warnings_are_escaped(capsys):
    """``twostage: warning:`` lines, and another library's warning whose text holds a control, are shown."""
    import warnings

    from toolkit.cli.process import shown_warnings
    from toolkit.errors import TwostageWarning

    with warnings.catch_warnings(), shown_warnings():  # the command's warning display, undone afterwards
        warnings.simplefilter("always")
        warnings.warn(TwostageWarning("ignoring the sidecar r\x1b]0;x\x07.meta.json"), stacklevel=1)
        warnings.warn("a library's word on c\x1bc\u202e", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert "twostage: warning: ignoring the sidecar r[U+001B]]0;x[U+0007].meta.json\n" in err, err
    assert "UserWarning: a library's word on c[U+001B]c[U+202E]\n" in err, err
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err
