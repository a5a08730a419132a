"""The ``twostage`` command: a thin click layer over the library.

Exit status: 0 success, 1 bad input or data (``Error: ...`` on stderr), 2
usage errors (click's). Results go to stdout, logs and progress to stderr.
Each command group lives in a module of this package; none imports heavy dependencies
at module level, so ``twostage --help`` stays fast.
"""

from __future__ import annotations

import sys

import click

from toolkit.cli.process import command_process
from toolkit.cli.terminal import escaped_excepthook, shown_escaped
from toolkit.errors import OptionError, TwostageError
from toolkit.version import __version__


class _Group(click.Group):
    """The command group: every error click prints (``Error: ...``, usage errors included) passes the terminal
    escape (``toolkit.cli.terminal``), whether raised while the command line is parsed or while a command runs."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:  # a bad option or value of the group itself echoes what was typed
            shown_escaped(exc)
            raise

    def invoke(self, ctx: click.Context):
        try:
            return self._invoke(ctx)
        except click.ClickException as exc:
            shown_escaped(exc)
            raise

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TwostageError as exc:
            raise click.ClickException(exc.for_cli()) from exc
        except BrokenPipeError:  # e.g. `twostage eval ... | head`
            sys.stderr.close()
            sys.exit(0)
        except OSError as exc:  # the file system refused a file (FS_ERRNOS, or any error naming one): one line
            from toolkit.guard.preflight import os_error_message

            message = os_error_message(exc)
            if message is None:  # an error naming no file (a socket's, a bug): its traceback says more
                raise
            raise click.ClickException(message) from exc


class _CommandContext(click.Context):
    """The context of every command: a library ``OptionError`` (a value of one option the library cannot use)
    becomes click's bad-value error of that option's flag, as a bad value click itself finds (``Invalid value
    for '-m': ...``, the command's usage above it, exit status 2). Chosen by the error's type, never its text."""

    def invoke(self, callback, /, *args, **kwargs):
        try:
            return super().invoke(callback, *args, **kwargs)
        except OptionError as exc:
            from toolkit.cli.declare import usage_error

            raise usage_error(exc, self) from None


def _with_command_context(command: click.Command) -> None:
    """``command`` (and each command of a group) runs in a ``_CommandContext``."""
    command.context_class = _CommandContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_command_context(sub)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="twostage")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages to stderr.")
def main(verbose: bool) -> None:
    """Two-stage retrieval evaluation with trec_eval-exact measures.

    First stage (BM25, RM3, QL, dense) through Pyserini, a reranker on top, and
    an evaluator that prints what NIST trec_eval prints, plus judged coverage
    and a diagnosis of where quality is lost.
    """
    # log lines and an uncaught exception's traceback reach the terminal through its escape, as all else does;
    # the log handler, the warnings' display and arrow's pool hold for the command and are restored after it
    click.get_current_context().with_resource(command_process(verbose))
    sys.excepthook = escaped_excepthook


def _register() -> None:
    import importlib

    for module in (
        "eval",
        "retrieval",
        "rerank",
        "diagnose",
        "reproduce",
        "compare",
        "experiment",
        "uncertainty",
        "risk",
        "assessors",
        "judge",
    ):
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module}":
                continue
            raise
        for command in getattr(mod, "COMMANDS", ()):
            _with_command_context(command)
            main.add_command(command)


_register()
