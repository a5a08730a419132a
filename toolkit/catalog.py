"""Named collections, resolved from a data folder; qrels/topics by name.

The data folder is, in order: an explicit ``--data-dir``, ``$TWOSTAGE_DATA``,
or ``../shared/data`` beside the checkout (or beside the current directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError

_REPO = Path(__file__).resolve().parents[1]


def data_dir(explicit: str | os.PathLike | None = None, required: bool = False) -> Path | None:
    """The data folder in use, or None when there is none (and it is not required)."""
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    elif os.environ.get("TWOSTAGE_DATA"):
        candidates.append(Path(os.environ["TWOSTAGE_DATA"]))
    else:
        candidates += [_REPO.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    if required:
        where = ", ".join(str(c) for c in candidates)
        raise ConfigError(f"no data folder found (looked at {where}); pass --data-dir or set TWOSTAGE_DATA")
    return None


@dataclass(frozen=True)
class QrelsSource:
    """Where named qrels come from, and the relevance map to apply at load time."""

    path: Path
    relevance_map: dict[int, int] = field(default_factory=dict)
    relevance_map_name: str = ""


#: name -> path of the qrels inside the data folder
_NAMED_QRELS = {
    "cacm": "cacm/qrels.cacm.txt",
    "dl19-passage": "msmarco-passage/qrels.dl19-passage.txt",
    "dl20-passage": "msmarco-passage/qrels.dl20-passage.txt",
}
_ALIASES = {"dl19": "dl19-passage", "dl20": "dl20-passage", "msmarco-passage-dl19": "dl19-passage"}


def qrels_names() -> list[str]:
    return sorted(_NAMED_QRELS)


def resolve_qrels(spec: str, data: str | os.PathLike | None = None) -> QrelsSource:
    """A qrels file path as given, or a collection name looked up in the data folder."""
    if Path(spec).exists():
        return QrelsSource(Path(spec))
    name = _ALIASES.get(spec, spec)
    if name in _NAMED_QRELS:
        folder = data_dir(data, required=True)
        path = folder / _NAMED_QRELS[name]
        if not path.exists():
            raise ConfigError(f"qrels {name!r}: {path} is missing from the data folder {folder}")
        return QrelsSource(path)
    raise ConfigError(
        f"{spec!r} is neither a file nor a known qrels name (known: {', '.join(qrels_names())})"
    )


#: Relevance maps applied at load time, by name: (map, source).
RELEVANCE_MAP_PRESETS: dict[str, tuple[dict[int, int], str]] = {
    "cranfield": (
        {1: 4, 2: 3, 3: 2, 4: 1, -1: 0},
        "Cleverdon's Cranfield codes (cranqrel.readme): 1 = complete answer, 2 = high relevance, "
        "3 = useful background, 4 = minimum interest; inverted so that larger means more relevant; -1 -> 0",
    ),
}


def relevance_map(spec: str) -> tuple[dict[int, int], str]:
    """A preset name (``cranfield``) or an explicit ``LABEL:LABEL,...`` map -> (map, name)."""
    from .trec_io import parse_label_map

    if spec in RELEVANCE_MAP_PRESETS:
        return dict(RELEVANCE_MAP_PRESETS[spec][0]), spec
    try:
        mapping = parse_label_map(spec)
    except ValueError as exc:
        presets = ", ".join(RELEVANCE_MAP_PRESETS)
        raise ConfigError(f"--relevance-map {spec!r}: {exc}; give LABEL:LABEL,... or a preset ({presets})") from None
    if any(not float(v).is_integer() for v in mapping.values()):
        raise ConfigError(f"--relevance-map {spec!r}: mapped labels must be integers")
    return {k: int(v) for k, v in mapping.items()}, "custom"
