"""The options of a reproduction (``twostage reproduce``): one frozen object that the command's flags build
(``toolkit.options``; the flags in ``toolkit.cli.reproduce``), checked once where it is built, and from which
``Runner.of`` makes the runner.

The spec, the output folder, ``--list`` and ``--strict`` (the exit status) are the command's own, no options.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.errors import OptionError
from toolkit.guard.client import host_port
from toolkit.options import Options, opt

__all__ = ["ReproduceOptions"]


@dataclass(frozen=True)
class ReproduceOptions(Options):
    """The options of ``reproduce``: where a spec's inputs and indexes are, which rows run, and what its steps may
    do (run other programs, send requests to hosts)."""

    verb = "reproduce"

    data_dir: str | os.PathLike | None = opt(
        None,
        doc="the data folder for collections and qrels given by name, and for a spec's relative paths (default: "
        "``$TWOSTAGE_DATA`` or ``../shared/data``).",
    )
    indexes: str | os.PathLike = opt(
        "indexes", doc="the folder for indexes built by a spec's setup commands (reused when present)."
    )
    rows: Sequence[str] = opt((), doc="only these rows (their ids) [default: every row].")
    reuse_runs: bool = opt(False, doc="do not re-run a row's commands when its run file already exists.")
    allow_commands: bool = opt(
        False,
        doc="also run the spec's programs that are not twostage's own verbs (sh, python, scripts); without it such "
        "a spec is refused before anything runs.",
    )
    allow_endpoints: Sequence[str] = opt(
        (),
        doc="hosts the spec's steps may send requests to, each HOST (any port), HOST:PORT or a URL; a step naming "
        "another host is refused before anything runs.",
    )

    def __post_init__(self) -> None:
        # held as tuples: a generator given is read here
        object.__setattr__(self, "rows", tuple(self.rows))
        object.__setattr__(self, "allow_endpoints", tuple(self.allow_endpoints))
        super().__post_init__()

    def validate(self) -> None:
        for value in self.allow_endpoints:
            try:
                host_port(value)
            except ValueError as exc:
                raise OptionError(str(exc), keyword="allow_endpoints", flag="--allow-endpoint") from None
