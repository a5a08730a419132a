"""What ``twostage doctor`` reports: versions, the extras installed, Java and Lucene, Ray, the data folders.

A core install (no extras) is a working install: where an extra is missing, its lines say which one and how
to install it, and Java is not checked (only the ``[pyserini]`` commands need it), so nothing there is a
problem. A problem is what stops an installed part from working: Java not found with ``[pyserini]`` installed.
"""

from __future__ import annotations

import sys

from toolkit.retrieval.run_meta import versions

SHOWN = ("pyserini", "pyjnius", "torch", "transformers", "sentence-transformers", "faiss-cpu", "openai")


def doctor(data_dir: str | None = None, jvm: bool = True) -> tuple[list[str], list[str]]:
    """(the report's lines, the problems found); ``jvm=False`` skips starting the JVM (the Lucene version)."""
    v = versions()
    lines = [f"twostage     {v['twostage']}", f"python       {v['python']} ({sys.executable})"]
    lines += [_package_line(pkg, v[pkg]) for pkg in SHOWN]
    lines.append(_extras_line())
    java, problems = _java_lines(v, jvm)
    return lines + java + _ray_lines() + _data_lines(data_dir), problems


def _package_line(pkg: str, version: str) -> str:
    from toolkit.extras import PACKAGE_EXTRAS

    line = f"{pkg:<12} {version}" if len(pkg) <= 12 else f"{pkg} {version}"
    if version == "not installed" and pkg in PACKAGE_EXTRAS:
        line += f" (the [{PACKAGE_EXTRAS[pkg]}] extra)"
    return line


def _extras_line() -> str:
    from toolkit.extras import EXTRAS, missing

    parts = []
    for extra in EXTRAS:
        module = missing(extra)
        parts.append(f"[{extra}] ok" if module is None else f"[{extra}] missing ({module} is not installed)")
    return "extras       " + ", ".join(parts)


def _java_lines(v: dict, jvm: bool) -> tuple[list[str], list[str]]:
    """Java, Anserini and Lucene; with ``[pyserini]`` missing, a line naming it instead (not a problem)."""
    from toolkit.errors import ConfigError
    from toolkit.extras import COMMAND_EXTRAS, install_hint, missing

    module = missing("pyserini")
    if module is not None:
        commands = ", ".join(c for c, e in COMMAND_EXTRAS.items() if e == "pyserini")
        return [f"java         not checked: {commands} need the [pyserini] extra: {install_hint('pyserini')}"], []
    from toolkit.jvm import find_java, lucene_version, pyserini_jar

    try:
        java = find_java()
        vector = "yes" if java.has_vector_module else "absent (not requested)"
        lines = [f"java         {java.describe()}; jdk.incubator.vector: {vector}"]
        lines.append(f"anserini     {v.get('anserini')} ({pyserini_jar()})")
        if jvm:
            lines.append(f"lucene       {lucene_version()}")
        return lines, []
    except ConfigError as exc:
        return [f"java         NOT FOUND: {exc}"], [str(exc)]


def _ray_lines() -> list[str]:
    """Ray's version and the cluster ``--ray auto`` would join (read from the environment: Ray is not imported)."""
    from toolkit.extras import install_hint
    from toolkit.jobs.distributed import current_cluster, ray_version, reachable

    version = ray_version()
    if version is None:
        return [f"ray          not installed (the [ray] extra, for --ray: {install_hint('ray')})"]
    from toolkit.errors import ConfigError

    try:
        address, source = current_cluster()
    except ConfigError as exc:  # an address file --ray auto refuses: say so, the rest of the report still comes
        return [f"ray          {version}", f"ray cluster  {exc}"]
    if address is None:
        cluster = f"--ray auto: {source}; --ray alone starts a private local Ray"
    else:
        state = "reachable" if reachable(address) else "NOT reachable"
        cluster = f"--ray auto joins {address} ({state}; from {source})"
    return [f"ray          {version}", f"ray cluster  {cluster}"]


def _data_lines(data_dir: str | None) -> list[str]:
    """The data folder, the cache, and per collection whether each of its files is here (and checks out)."""
    from toolkit.data import catalog
    from toolkit.errors import ConfigError

    folder = catalog.data_dir(data_dir)
    lines = [
        f"data folder  {folder or 'none (set TWOSTAGE_DATA or --data-dir)'}",
        f"cache        {catalog.cache_dir()}",
    ]
    for name in catalog.collection_names():
        status = []
        for role in catalog.CATALOG[name].files:
            try:
                catalog.collection_file(name, role, data_dir)
                status.append(f"{role} ok")
            except ConfigError:
                status.append(f"{role} missing")
            except Exception as exc:  # ChecksumError
                status.append(f"{role} BAD ({exc.__class__.__name__})")
        lines.append(f"  {name:<13} {', '.join(status)}")
    return lines
