"""The error hierarchy. Every user-facing failure is one of these.

The CLI maps ``TwostageError`` to exit status 1 with ``Error: <message>`` on
stderr; click's own usage errors keep exit status 2.
"""

from __future__ import annotations

import re


def phrase(keyword: str, flag: str) -> str:
    """An option named in a message, in the caller's words: ``keyword`` (``allow_no_common=True``) where the
    library is called, ``flag`` (``--allow-no-common``) where the CLI is; one message source, two phrasings."""
    return f"\x00{keyword}\x1f{flag}\x00"


_PHRASE = re.compile("\x00([^\x00\x1f]*)\x1f([^\x00]*)\x00")


def for_api(text: str) -> str:
    """``text`` with each ``phrase`` in the library's words (keyword arguments)."""
    return _PHRASE.sub(r"\1", text)


def for_cli(text: str) -> str:
    """``text`` with each ``phrase`` in the CLI's words (flags)."""
    return _PHRASE.sub(r"\2", text)


class _Phrased:
    """A message with ``phrase`` references: ``str()`` is the library's wording, ``cli_message`` the CLI's."""

    def _phrased(self, args: tuple) -> tuple:
        text = args[0] if args and isinstance(args[0], str) else None
        self.cli_message = for_cli(text) if text is not None else None
        return (for_api(text), *args[1:]) if text is not None else args

    def for_cli(self) -> str:
        """The message as the CLI says it (flags for options)."""
        return getattr(self, "cli_message", None) or str(self)


class TwostageError(_Phrased, Exception):
    """Base of every error the toolkit raises on purpose."""

    def __init__(self, *args: object) -> None:
        super().__init__(*self._phrased(args))


class InputFormatError(TwostageError):
    """A malformed input file: names the file, the 1-based line and the problem."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = for_api(reason)
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


class NoCommonQueriesError(TwostageError):
    """A run and judgments with no query in common (wrong qrels for the run): nothing can be evaluated."""


class UnknownMeasureError(TwostageError):
    """A measure name or parameter that does not exist."""


class ConfigError(TwostageError):
    """Options that cannot be combined, or a missing resource (Java, data folder, model)."""


class OptionError(ConfigError):
    """A value of one option that cannot be used (``toolkit.options``; a measure without a ceiling where the
    diagnosis needs one): ``keyword`` names the option as the library takes it (``measure``), ``flag`` as the CLI
    does (``-m``; None where the message names no single option). The CLI reports it as a usage error (exit status
    2): with a flag, as click reports a bad value of that flag (``Invalid value for '-m': ...``); the library
    raises it as a ``ConfigError``."""

    def __init__(self, message: str, *, keyword: str | None = None, flag: str | None = None):
        self.keyword = keyword
        self.flag = flag
        super().__init__(message)


class OptionConflictError(OptionError):
    """Options that exclude each other, or one that needs another."""


class DepthNotDetectedError(ConfigError):
    """A reranked run whose rerank depth was neither given nor detectable (no depth fits the rule for enough of
    the queries it shares with its first stage): ``run`` names it, ``detection`` is the detection's record
    (``diagnosis.depths.DepthDetection.as_dict()``)."""

    def __init__(self, message: str, *, run: str, detection: dict | None = None):
        self.run = run
        self.detection = detection
        super().__init__(message)


class MissingExtraError(ConfigError):
    """A command or function needs an optional part of the install (a pip extra) that is not installed."""

    def __init__(self, extra: str, module: str, what: str):
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the [{extra}] extra ({module} is not installed): pip install 'twostage[{extra}]' "
            f"(from a checkout: pip install -e '.[{extra}]')"
        )


class RequestsFailedError(TwostageError):
    """A job whose remote requests all failed, or more of them than it allows (``max_failures``); raised after what
    it has was written. ``result`` is what it produced (e.g. the ``Judgments``), ``failures`` and ``requests`` the
    counts."""

    def __init__(self, message: str, *, result: object = None, failures: int = 0, requests: int = 0):
        self.result = result
        self.failures = failures
        self.requests = requests
        super().__init__(message)


class ChecksumError(TwostageError):
    """A file whose checksum differs from the one declared in the catalogue."""


class CacheUnusableError(TwostageError):
    """A cache whose folder the file system refuses while it is opened, read or written (disk full, quota,
    file-size limit, read-only, no permission, a missing folder that cannot be made, a file or a loop of links on
    its path, a name too long: ``toolkit.guard.preflight.FS_ERRNOS``, or a native library's words for the same).
    The work stops there, before any output is written, so the previous outputs stay; the message names the folder
    as it was set (an option, ``$TWOSTAGE_CACHE`` or the default under ``$HOME``), the reason and the way to run
    without the cache or with another folder.

    ``folder``: the cache folder as the user set it; ``errno``: the system's code (None when unknown);
    ``filename``: the file the system named, when it named one."""

    def __init__(self, message: str, *, folder: str, errno: int | None = None, filename: str | None = None):
        self.folder = folder
        self.errno = errno
        self.filename = filename
        super().__init__(message)


class ProvenanceMismatchError(TwostageError):
    """Two results computed under different settings were about to be compared."""

    def __init__(self, fields: dict[str, tuple[object, object]]):
        self.fields = fields
        parts = "; ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in sorted(fields.items()))
        super().__init__(
            f"refusing to compare results computed under different settings ({parts}); pass "
            + phrase("force=True", "--force")
            + " to compare anyway"
        )


class TwostageWarning(_Phrased, UserWarning):
    """Input that changes what a number means (queries missing from the run or the qrels, tied scores, dropped
    duplicates, a cutoff beyond every ranking): issued once per call, also listed in ``Evaluation.notes``.
    Filter it as any warning: ``warnings.filterwarnings("ignore", category=TwostageWarning)``."""

    def __init__(self, *args: object) -> None:
        super().__init__(*self._phrased(args))
