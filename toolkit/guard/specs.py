"""The one YAML loader: experiment files, reproduction specs, prompt templates' front matter, query-type files.

Safe by construction: the file is read as a stream of YAML events (``yaml.parse``, an iterative parser on
PyYAML's ``SafeLoader``) and built into plain values here, one event at a time, so that nothing recurses with
the file's nesting and nothing is built before it is checked. Refused, each as one
``InputFormatError(path, line, reason)`` (``Error: FILE:LINE: ...`` in the CLI):

- a file larger than ``MAX_BYTES`` (checked before it is parsed), or not UTF-8;
- YAML syntax errors, and more than one document in a file;
- nesting deeper than ``MAX_DEPTH`` (mappings and lists, aliases counted where they are used);
- more than ``MAX_ALIASES`` aliases (``*name``), an alias used inside what its anchor names (a recursive
  alias), an alias to an anchor not defined before it;
- more values than ``max_values`` once aliases are expanded (each alias repeats what its anchor names: nine lines
  of nine aliases expand to 9**9 values, the "billion laughs"); counted as the file is read, never expanded;
- a mapping key that is not a string (a mapping, a list, an alias, or a plain ``10``, ``true``, ``null``, ``1.5``:
  quote it), a key given twice, and YAML merge keys (``<<``);
- any tag but the plain YAML ones (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``, ``!!seq``,
  ``!!map``): ``!!python/object``, ``!!binary``, ``!custom``, ...

What comes back (``Located``) is the data with the line of every mapping key and list item, so that callers
report a wrong value at its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from toolkit.errors import InputFormatError
from toolkit.guard.numbers import NumberRefused, bounded_int, show

#: The largest YAML file read (bytes). Real experiment files and specs are a few KB.
MAX_BYTES = 256 << 10
#: The deepest nesting of mappings and lists (aliases expanded). Real files nest 5 or 6 deep.
MAX_DEPTH = 64
#: The most aliases (``*name``) in one file.
MAX_ALIASES = 1_000
#: The most values (mappings, lists, scalars; aliases expanded) a file may hold, unless a caller sets its own.
MAX_VALUES = 100_000

_YAML = "tag:yaml.org,2002:"
#: The tags a file may give explicitly (``!!str 10``); the non-specific ``!`` means a string.
KNOWN_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null", "seq", "map"))
_TYPE_NAMES = MappingProxyType(
    {"int": "an integer", "float": "a number", "bool": "a boolean", "null": "null", "timestamp": "a date"}
)


@dataclass
class Located:
    """A parsed YAML document with the line (1-based) of every mapping key and sequence item."""

    data: object
    path: str
    lines: dict[tuple, int]

    def line(self, *keys) -> int | None:
        while keys and keys not in self.lines:
            keys = keys[:-1]
        return self.lines.get(keys)

    def error(self, keys: tuple, reason: str) -> InputFormatError:
        return InputFormatError(self.path, self.line(*keys), reason)


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES) -> str:
    """The file as text, refused (with the line where it passes the bound) when larger than ``max_bytes``.

    Opened through the inputs door (``toolkit.guard.readers.open_input``): a regular file only (a FIFO, a device
    or a folder is one error naming what it is), refused at its first NUL byte."""
    from toolkit.guard.readers import open_input

    path = str(path)
    try:
        with open_input(path) as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputFormatError(path, None, f"cannot read the file ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise InputFormatError(
            path,
            raw.count(b"\n", 0, max_bytes) + 1,
            f"the file is larger than {max_bytes:,} bytes, the most a YAML file twostage reads may hold",
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFormatError(path, raw.count(b"\n", 0, exc.start) + 1, "not valid UTF-8") from None


def load_yaml(
    path: str | Path, *, max_values: int = MAX_VALUES, what: str = "a YAML file", max_bytes: int = MAX_BYTES
) -> Located:
    """Read and parse ``path`` (see the module docstring for what is refused)."""
    return parse_yaml(read_text(path, max_bytes=max_bytes), path, max_values=max_values, what=what)


def parse_yaml(
    text: str, path: str | Path, *, first_line: int = 1, max_values: int = MAX_VALUES, what: str = "a YAML file"
) -> Located:
    """Parse ``text`` read from ``path`` (its first line is line ``first_line`` of the file: front matter)."""
    import yaml

    path = str(path)
    if len(text) > MAX_BYTES:  # text given directly (front matter): the same bound
        raise InputFormatError(
            path, first_line, f"the YAML is larger than {MAX_BYTES:,} bytes, the most twostage reads"
        )
    builder = _Builder(path, first_line - 1, max_values, what)
    try:
        for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            builder.feed(event)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        reason = f"{context}: {problem}" if context else problem
        raise InputFormatError(
            path, mark.line + first_line if mark is not None else None, f"not valid YAML: {reason}"
        ) from None
    return builder.result()


class _Frame:
    """An open mapping or list: its value, its path, and what the bounds need."""

    __slots__ = ("anchor", "deepest", "is_map", "key", "keys", "level", "start", "value")

    def __init__(self, value, keys: tuple, anchor: str | None, start: int, level: int) -> None:
        self.value, self.keys, self.anchor, self.start, self.level = value, keys, anchor, start, level
        self.deepest = level
        self.key: str | None = None  # a mapping's key waiting for its value
        self.is_map = isinstance(value, dict)


class _Builder:
    """Builds plain values from YAML events, checking every bound as it goes."""

    def __init__(self, path: str, offset: int, max_values: int, what: str) -> None:
        import yaml
        from yaml.constructor import SafeConstructor
        from yaml.resolver import Resolver

        self.yaml = yaml
        self.path, self.offset, self.max_values, self.what = path, offset, max_values, what
        self.resolver, self.constructor = Resolver(), SafeConstructor()
        self.stack: list[_Frame] = []
        self.lines: dict[tuple, int] = {}
        self.anchors: dict[str, tuple[object, tuple, int, int]] = {}  # name -> (value, keys, values, depth)
        self.total = 0  # values so far, aliases expanded
        self.over_at: int | None = None  # the line where the total passed max_values
        self.aliases = 0
        self.documents = 0
        self.root: object = None

    # -------------------------------------------------------------- helpers
    def fail(self, mark, reason: str) -> InputFormatError:
        return InputFormatError(self.path, mark.line + 1 + self.offset if mark is not None else None, reason)

    def line(self, mark) -> int:
        return mark.line + 1 + self.offset

    def count(self, n: int, mark) -> None:
        self.total += n
        if self.total > self.max_values and self.over_at is None:
            self.over_at = self.line(mark)

    @property
    def building(self) -> bool:
        return self.over_at is None  # past the bound only counting goes on (to say how far the file expands)

    def check_tag(self, event) -> None:
        tag = event.tag
        if tag is None or tag == "!" or tag in KNOWN_TAGS:
            return
        shown = "!!" + tag[len(_YAML) :] if tag.startswith(_YAML) else tag
        raise self.fail(
            event.start_mark,
            f"unknown YAML tag {shown}: {self.what} holds only plain mappings, lists, strings, numbers, booleans "
            "and nulls (no tags that build objects)",
        )

    def position(self) -> tuple[tuple, bool]:
        """(the path of the next node, whether it is a mapping key)."""
        if not self.stack:
            return (), False
        top = self.stack[-1]
        if top.is_map:
            if top.key is None:
                return top.keys, True
            return (*top.keys, top.key), False
        return (*top.keys, len(top.value)), False

    def check_depth(self, depth: int, mark) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(
                mark,
                f"nested more than {MAX_DEPTH} levels deep (mappings and lists, aliases expanded), more than "
                f"{self.what} may be",
            )

    def key_error(self, mark, what: str) -> InputFormatError:
        return self.fail(mark, f"a mapping key must be a string, not {what}")

    def place(self, value, keys: tuple, line: int, is_key: bool) -> None:
        """Put a finished value where it belongs: the root, a list item, a mapping's key or value."""
        if is_key:
            top = self.stack[-1]
            if value in top.value:
                raise InputFormatError(self.path, line, f"key {value!r} given twice")
            top.key = value
            self.lines[(*top.keys, value)] = line
            return
        if not self.stack:
            self.root = value
            self.lines.setdefault((), line)
            return
        top = self.stack[-1]
        if top.is_map:
            if self.building:
                top.value[top.key] = value
            top.key = None
        else:
            if self.building:
                self.lines.setdefault(keys, line)
            top.value.append(value)  # appended even past the bound: the length gives the item's index

    # -------------------------------------------------------------- events
    def feed(self, event) -> None:
        y = self.yaml
        if isinstance(event, y.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.fail(event.start_mark, f"more than one YAML document ('---'); {self.what} is one")
            return
        if isinstance(event, (y.StreamStartEvent, y.StreamEndEvent, y.DocumentEndEvent)):
            return
        if isinstance(event, (y.MappingEndEvent, y.SequenceEndEvent)):
            frame = self.stack.pop()
            if frame.anchor is not None:
                self.anchors[frame.anchor] = (
                    frame.value,
                    frame.keys,
                    self.total - frame.start,
                    frame.deepest - frame.level + 1,
                )
            if self.stack:
                self.stack[-1].deepest = max(self.stack[-1].deepest, frame.deepest)
            keys, is_key = self.position()
            self.place(frame.value, keys, self.lines.get(keys, self.line(event.start_mark)), is_key)
            return
        keys, is_key = self.position()
        level = len(self.stack) + 1
        if isinstance(event, y.AliasEvent):
            self.on_alias(event, keys, is_key, level)
            return
        self.check_tag(event)
        anchor = event.anchor
        if isinstance(event, y.ScalarEvent):
            value = self.scalar(event, is_key)
            self.count(1, event.start_mark)
            if anchor is not None:
                self.anchors[anchor] = (value, keys, 1, 1)
            self.place(value, keys, self.line(event.start_mark), is_key)
            return
        # a mapping or a list opens
        kind = "a mapping" if isinstance(event, y.MappingStartEvent) else "a list"
        if is_key:
            raise self.key_error(event.start_mark, kind)
        self.check_depth(level, event.start_mark)
        start = self.total
        self.count(1, event.start_mark)
        line = self.line(event.start_mark)
        if self.stack and not self.stack[-1].is_map and self.building:
            self.lines.setdefault(keys, line)
        elif not self.stack:
            self.lines.setdefault((), line)
        value: object = {} if isinstance(event, y.MappingStartEvent) else []
        self.stack.append(_Frame(value, keys, anchor, start, level))

    def scalar(self, event, is_key: bool):
        y = self.yaml
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(y.ScalarNode, event.value, event.implicit) if tag is None else _YAML + "str"
        if tag == _YAML + "merge":
            raise self.fail(event.start_mark, "YAML merge keys (<<) are not read; write the keys out")
        if is_key and tag != _YAML + "str":
            kind = _TYPE_NAMES.get(tag[len(_YAML) :], tag)
            raise self.key_error(event.start_mark, f"{kind} ({event.value!r}); quote it: '{event.value}'")
        if tag == _YAML + "str":
            return event.value
        node = y.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self.constructor.construct_object(node)
            # the numbers door: an integer (0x.., 0b.., 1_000, 1:30) wider than 64 bits means nothing here, and
            # one of more than 4,300 digits cannot even be printed
            return bounded_int(value, what="integer") if type(value) is int else value
        except NumberRefused as exc:
            raise self.fail(
                event.start_mark, f"{show(event.value)} is not an integer twostage reads ({exc.problem})"
            ) from None
        except (y.YAMLError, ValueError, OverflowError) as exc:
            raise self.fail(
                event.start_mark, f"{event.value[:80]!r} is not a valid {tag[len(_YAML) :]} ({str(exc)[:120]})"
            ) from None

    def on_alias(self, event, keys: tuple, is_key: bool, level: int) -> None:
        name = event.anchor
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise self.fail(event.start_mark, f"more than {MAX_ALIASES:,} aliases (*name); write it with fewer")
        if any(f.anchor == name for f in self.stack):
            raise self.fail(
                event.start_mark, f"the alias *{name} is used inside &{name}, which it names: a recursive alias"
            )
        if name not in self.anchors:
            raise self.fail(event.start_mark, f"the alias *{name} names no anchor (&{name}) before it")
        value, _, size, depth = self.anchors[name]
        if is_key:
            raise self.key_error(event.start_mark, f"an alias (*{name})")
        if depth > 1:
            self.check_depth(level + depth - 1, event.start_mark)
            if self.stack:
                self.stack[-1].deepest = max(self.stack[-1].deepest, level + depth - 1)
        self.count(size, event.start_mark)
        line = self.line(event.start_mark)
        if self.building and isinstance(value, (dict, list)):
            import copy

            value = copy.deepcopy(value)  # each use its own copy (bounded by max_values); its lines: the alias's
        self.lines.setdefault(keys, line)
        self.place(value, keys, line, False)

    def result(self) -> Located:
        if self.over_at is not None:
            raise InputFormatError(
                self.path,
                self.over_at,
                f"the file expands to {self.total:,} values, more than the {self.max_values:,} {self.what} may hold "
                "(YAML aliases, *name, repeat what their anchor names); write it with fewer or no aliases",
            )
        return Located(self.root, self.path, self.lines)
