"""Unknown keywords name the public function: a public function that passes ``**options`` on (to ``evaluate``,
``judge``, ...) checks them on entry, so ``ts.power(bogus=1)`` is Python's own ``TypeError`` naming ``power``,
not a silent success nor an error from a helper the user never called."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def keywords_of(*functions: Callable, drop: Iterable[str] = ()) -> set[str]:
    """The names each of ``functions`` takes by keyword, less ``drop``."""
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    out = {p.name for f in functions for p in inspect.signature(f).parameters.values() if p.kind in kinds}
    return out - set(drop)


def check_keywords(function: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """``TypeError`` naming ``function`` (as Python words it) for the first keyword of ``options`` not in
    ``allowed``."""
    from toolkit.options import unknown_keyword  # the verbs built on toolkit.options say it alike

    allowed = set(allowed)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise unknown_keyword(function, unknown[0], allowed)


__all__ = ["check_keywords", "keywords_of"]
