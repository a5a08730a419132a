"""What a command changes in its process while it runs, and restores when it ends.

``command_process(verbose)`` is entered by ``main`` (``ctx.with_resource``): the log handler on stderr, the
HTTP client's quiet loggers, the display of warnings and arrow's memory pool hold for the command and are put
back as they were when it ends, so a command run in-process (click's ``CliRunner``, a notebook calling
``main``) leaves the caller's logging, warnings and allocator as it found them. ``sys.excepthook`` is not
restored: it matters only after the command, for the traceback of an exception nothing caught.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

from toolkit.cli.terminal import echo, log_handler

#: the HTTP client's loggers: one INFO line per request ("HTTP Request: POST ..."), shown only with -v
HTTP_LOGGERS = ("httpx", "httpcore")


@contextlib.contextmanager
def command_process(verbose: bool) -> Iterator[None]:
    """The command's logging, warnings and arrow pool, restored when the block ends."""
    with (
        command_logging(verbose),
        quiet_http_clients(verbose),
        shown_warnings(),
        arrow_memory_returned(),
    ):
        yield


@contextlib.contextmanager
def command_logging(verbose: bool) -> Iterator[None]:
    """Log lines reach stderr through the terminal escape (``logging.basicConfig``: only where the root logger
    has no handler yet, as Python's own); the root's handlers and level are restored when the block ends."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[log_handler()])
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


@contextlib.contextmanager
def quiet_http_clients(verbose: bool) -> Iterator[None]:
    """Without ``-v``, the HTTP client's per-request lines are not logged (a listwise job sends one request per
    window: stderr keeps its one progress bar); their levels are restored when the block ends."""
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in HTTP_LOGGERS]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, before, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def arrow_memory_returned() -> Iterator[None]:
    """Arrow allocates through the C library's allocator in a command's process (unless
    ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise): its default, mimalloc, keeps the pages of freed columns, so a
    diagnosis's short-lived arrays add up to a higher peak (docs/benchmarks.md). Arrays allocated in the block
    use it (each keeps the pool it came from); the caller's default pool is back when the block ends."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        yield
        return
    import pyarrow as pa

    saved = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(saved)


@contextlib.contextmanager
def shown_warnings() -> Iterator[None]:
    """Library warnings (``TwostageWarning``) as ``twostage: warning: ...`` on stderr, phrased with flags, each
    once per library call (``toolkit.notices``); other warnings as Python shows them, through the terminal
    escape when their text holds a character it shows. ``warnings.showwarning`` is restored when the block
    ends."""
    from toolkit.errors import TwostageWarning
    from toolkit.guard.escape import terminal_text

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(message, TwostageWarning):
            echo(f"twostage: warning: {message.for_cli()}", err=True)
            return
        text = warnings.formatwarning(message, category, filename, lineno, line)
        if terminal_text(text) == text:
            shown(message, category, filename, lineno, file, line)
        else:  # e.g. a library's warning quoting a file name or a value from the input
            echo(text, err=True, nl=False, kind="text")  # Python's two lines: the warning and its source

    if getattr(shown, "__name__", "") == "show":  # a command run inside a command: the outer display holds
        yield
        return
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


__all__ = [
    "HTTP_LOGGERS",
    "arrow_memory_returned",
    "command_logging",
    "command_process",
    "quiet_http_clients",
    "shown_warnings",
]
