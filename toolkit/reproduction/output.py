"""A reproduction's folder whole or absent: ``twostage reproduce --out DIR`` runs the spec's commands in a
temporary folder beside ``DIR`` (the ``{work}`` of the spec) and writes ``NAME.md``, ``NAME.html`` and
``NAME.json`` there; the folder becomes ``DIR`` in one rename when all is written (``toolkit.guard.writer``).

A failure or a kill part-way leaves the previous ``DIR`` as it was and no partial folder. The report names
``DIR``, never the temporary folder: every path under it in the rows, cells and programs is rewritten.
With ``--reuse-runs`` the previous set's ``runs/`` is carried into the new one (hard links where the file
system allows, else copies), so its runs are found and reused; without it ``DIR`` holds only this
reproduction's runs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.reproduction.runner import Reproduction, Runner

#: What a reproduction's folder holds besides ``NAME.md``, ``NAME.html`` and ``NAME.json``.
RUNS = "runs"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _moved(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` (a folder's path) replaced by ``new`` in every text it holds."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, tuple):
        return tuple(_moved(v, old, new) for v in value)
    if isinstance(value, dict):
        return {_moved(k, old, new): _moved(v, old, new) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _moved(getattr(value, f.name), old, new) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def run_into(
    runner: Runner, out: str | os.PathLike, write: Callable[[Reproduction, Path], list[Path]]
) -> tuple[Reproduction, list[Path]]:
    """Run ``runner`` with a fresh folder as its ``{work}``, ``write`` the report there, and put the folder in
    place of ``out`` in one rename; returns the reproduction and the written files' final paths.

    Raises:
        ConfigError: ``out`` holds files a reproduction does not write, or the spec runs programs that are not
            allowed (nothing is run, ``out`` is untouched).
    """
    from toolkit.guard.writer import result_folder

    out = Path(out)
    final = str(out.resolve())
    name = runner.spec.name
    with result_folder(out, "reproduction", (f"{name}.md", f"{name}.html", f"{name}.json", RUNS)) as tmp:
        work = tmp.resolve()
        if runner.reuse_runs and (out / RUNS).is_dir():
            shutil.copytree(out / RUNS, work / RUNS, copy_function=_link_or_copy)
        rep = dataclasses.replace(runner, work=work).run()
        rep = dataclasses.replace(
            rep,
            rows=_moved(rep.rows, str(work), final),
            cells=_moved(rep.cells, str(work), final),
            notes=_moved(rep.notes, str(work), final),
            programs=_moved(rep.programs, str(work), final),
        )
        written = write(rep, work)
    return rep, [Path(final) / p.relative_to(work) for p in written]


__all__ = ["run_into"]
