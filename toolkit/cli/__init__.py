"""The ``twostage`` command: a thin click layer over the library.

Exit status: 0 success, 1 bad input or data (``Error: ...`` on stderr), 2
usage errors (click's). Results go to stdout, logs and progress to stderr.
Each command group lives in a module of this package; none imports heavy dependencies
at module level, so ``twostage --help`` stays fast.
"""

from __future__ import annotations

import logging
import sys

import click

from toolkit.errors import TwostageError
from toolkit.version import __version__


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TwostageError as exc:
            raise click.ClickException(exc.for_cli()) from exc
        except BrokenPipeError:  # e.g. `twostage eval ... | head`
            sys.stderr.close()
            sys.exit(0)
        except OSError as exc:  # disk full, read-only, permission: one line naming the file and the fix
            from toolkit.guard.preflight import os_error_message

            message = os_error_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="twostage")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages to stderr.")
def main(verbose: bool) -> None:
    """Two-stage retrieval evaluation with trec_eval-exact measures.

    First stage (BM25, RM3, QL, dense) through Pyserini, a reranker on top, and
    an evaluator that prints what NIST trec_eval prints, plus judged coverage
    and a diagnosis of where quality is lost.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s", stream=sys.stderr)
    _show_warnings_once()
    _arrow_memory_returned()


def _arrow_memory_returned() -> None:
    """Arrow allocates through the C library's allocator in a command's process (unless
    ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise): its default, mimalloc, keeps the pages of freed columns, so a
    diagnosis's short-lived arrays add up to a higher peak (docs/benchmarks.md). Arrays allocated from here on
    use it."""
    import os

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def _show_warnings_once() -> None:
    """Library warnings (``TwostageWarning``) as ``twostage: warning: ...`` on stderr, phrased with flags, each
    once per library call (``toolkit.notices``); other warnings as Python shows them."""
    import warnings

    from toolkit.errors import TwostageWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(message, TwostageWarning):
            click.echo(f"twostage: warning: {message.for_cli()}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    if getattr(shown, "__name__", "") != "show":
        warnings.showwarning = show


def _register() -> None:
    import importlib

    for module in (
        "eval",
        "retrieval",
        "rerank",
        "diagnose",
        "reproduce",
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
            main.add_command(command)


_register()
