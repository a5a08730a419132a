"""Which files are runs: the RUN arguments of ``twostage eval`` (files, '-', folders, globs) as named paths.

A run is named by its file name, or by its path where file names repeat.
"""

from __future__ import annotations

import glob
from pathlib import Path

from toolkit.errors import ConfigError, InputFormatError

#: Files in a folder of runs that are not runs: the sidecars twostage writes beside them.
SIDECAR_SUFFIXES = (".meta.json", ".provenance.json")
_GLOB_CHARS = frozenset("*?[")


def _folder_runs(folder: Path) -> list[str]:
    files = sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(SIDECAR_SUFFIXES)
    )
    if not files:
        raise ConfigError(f"{folder}: folder holds no run files")
    return [str(p) for p in files]


def _expand_one(arg: str) -> list[str]:
    if arg == "-":
        return ["-"]
    p = Path(arg)
    if p.is_dir():
        return _folder_runs(p)
    if p.exists():
        return [arg]
    if _GLOB_CHARS & set(arg):
        found = sorted(f for f in glob.glob(arg) if Path(f).is_file() and not f.endswith(SIDECAR_SUFFIXES))
        if not found:
            raise ConfigError(f"{arg}: no run file matches this pattern")
        return found
    raise InputFormatError(arg, None, "no such file")


def run_names(paths: list[str]) -> list[str]:
    """File names when they are unique, else the paths as given (so every block is told apart)."""
    names = [Path(p).name if p != "-" else "-" for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def expand_runs(args: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """(name, path) of every run the arguments name: files, '-' (stdin, once), folders, globs.

    A file named twice is an error rather than evaluated twice; so is '-' more than once.
    """
    paths: list[str] = []
    for arg in args:
        paths.extend(_expand_one(arg))
    if paths.count("-") > 1:
        raise ConfigError("'-' (the run on stdin) can be given once")
    seen: dict[str, str] = {}
    for p in paths:
        key = str(Path(p).resolve()) if p != "-" else "-"
        if key in seen:
            raise ConfigError(f"{p}: run given twice (also as {seen[key]})")
        seen[key] = p
    return list(zip(run_names(paths), paths))
