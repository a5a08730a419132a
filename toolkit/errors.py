"""The error hierarchy. Every user-facing failure is one of these.

The CLI maps ``TwostageError`` to exit status 1 with ``Error: <message>`` on
stderr; click's own usage errors keep exit status 2.
"""

from __future__ import annotations


class TwostageError(Exception):
    """Base of every error the toolkit raises on purpose."""


class InputFormatError(TwostageError):
    """A malformed input file: names the file, the 1-based line and the problem."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


class NoCommonQueriesError(TwostageError):
    """A run and judgments with no query in common (wrong qrels for the run): nothing can be evaluated."""


class UnknownMeasureError(TwostageError):
    """A measure name or parameter that does not exist."""


class ConfigError(TwostageError):
    """Options that cannot be combined, or a missing resource (Java, data folder, model)."""


class MissingExtraError(ConfigError):
    """A command or function needs an optional part of the install (a pip extra) that is not installed."""

    def __init__(self, extra: str, module: str, what: str):
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the [{extra}] extra ({module} is not installed): pip install 'twostage[{extra}]' "
            f"(from a checkout: pip install -e '.[{extra}]')"
        )


class ChecksumError(TwostageError):
    """A file whose checksum differs from the one declared in the catalogue."""


class ProvenanceMismatchError(TwostageError):
    """Two results computed under different settings were about to be compared."""

    def __init__(self, fields: dict[str, tuple[object, object]]):
        self.fields = fields
        parts = "; ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in sorted(fields.items()))
        super().__init__(
            f"refusing to compare results computed under different settings ({parts}); pass --force to compare anyway"
        )
