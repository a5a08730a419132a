"""Prompt templates of a relevance judge: the text, the label scale and the parser of the answer, in one file.

A template file is YAML front matter between two ``---`` lines, then the prompt text::

    ---
    name: my-prompt
    labels: [0, 1, 2, 3]            # the declared scale (within ±10^6); any other label is a parse failure
    answer: '##final score:\\s*(\\d+)' # a regular expression (RE2); its first group of the LAST match is the label
    system: "You are a careful assessor."   # optional system message
    max_tokens: 256                # optional: the longest answer asked for
    ---
    Query: {query}
    Passage: {passage}
    ...

The label is read from that group by the numbers door (``toolkit.guard.numbers.integer``): ``[+-]?[0-9]+``,
ASCII digits only (``٣`` or ``³`` is no label), at most 7 digits; anything else is a parse failure whose reason
shows the group escaped, never converted.

``{query}`` and ``{passage}`` are required; ``{title}`` may be used (the passage's title, empty when it has
none). They are replaced literally (no other braces are interpreted, so a passage with ``{`` in it is safe).
The file's sha256 identifies the prompt in the cache and in every record (``prompt_sha256``); each record also
keeps the sha256 of the exact user message sent (``rendered_prompt_sha256``).

A passage holding the template's answer marker could dictate its own label (a model that repeats it is parsed
as having said it): ``Template.marker`` is the literal text of ``answer`` before its first group (for the
default template ``##final score:``, matched case-insensitively with any spacing), and ``suspect(passage)`` is
true when the passage holds the marker or anything ``answer`` matches. UMBRELA's own prompt drops in as
such a file: its text with ``{query}`` and ``{passage}``, ``labels: [0, 1, 2, 3]`` and its answer pattern.

The answer pattern, and the marker made from it, run on RE2 (``toolkit.guard.patterns``): in time linear in the
answer or passage whatever the template says; a pattern RE2 cannot run (a backreference, lookaround) is refused
as the template is read, naming the file and the line of ``answer:``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from toolkit.errors import InputFormatError
from toolkit.guard.numbers import NumberRefused, integer
from toolkit.guard.patterns import Pattern, compile_pattern
from toolkit.guard.readers import MAX_LABEL
from toolkit.llm.templates import read_front_matter_located

REQUIRED = ("{query}", "{passage}")
OPTIONAL = ("{title}",)
DEFAULT_TEMPLATE = "graded-0-3.md"
DEFAULT_MAX_TOKENS = 256
#: The digits of the longest label an answer may give: labels are within ±MAX_LABEL (qrels hold no other).
LABEL_DIGITS = len(str(MAX_LABEL))


@dataclass(frozen=True)
class Template:
    """A parsed template file (see the module docstring)."""

    name: str
    text: str
    labels: tuple[int, ...]
    answer: str
    system: str
    max_tokens: int
    path: str
    sha256: str
    #: ``answer`` compiled on RE2 (``toolkit.guard.patterns``): what ``parse`` and ``suspect`` match with
    pattern: Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", answer_pattern(self.answer, self.path, None))

    def render(self, query: str, passage: str, title: str = "") -> str:
        """The user message for one (query, passage): placeholders replaced literally, in one pass."""
        values = {"{query}": query, "{passage}": passage, "{title}": title}
        return re.sub(r"\{query\}|\{passage\}|\{title\}", lambda m: values[m.group(0)], self.text)

    @property
    def marker(self) -> Pattern | None:
        """The answer marker: ``answer``'s literal text before its first group, as a lenient pattern (any spacing,
        any case); None when that prefix is not plain text (then only ``answer`` itself is looked for)."""
        return answer_marker(self.answer)

    def suspect(self, passage: str) -> bool:
        """True when the passage holds the answer marker or a match of ``answer`` (a possible prompt injection)."""
        marker = self.marker
        return bool((marker is not None and marker.search(passage)) or self.pattern.search(passage))

    def parse(self, response: str | None) -> tuple[int | None, str]:
        """(label, "") or (None, why parsing failed) for one raw answer."""
        if response is None:
            return None, "no answer"
        matches = list(self.pattern.finditer(response))
        if not matches:
            return None, "no answer pattern in the response"
        token = matches[-1].group(1)
        if token is None:
            return None, "the answer pattern's group matched nothing"
        try:  # the numbers door: [+-]?[0-9]+, ASCII digits only, bounded; never int() on the answer
            label = integer(token, what="answer", max_digits=LABEL_DIGITS)
        except NumberRefused as exc:
            return None, str(exc)
        if label not in self.labels:
            return None, f"label {label} is outside the declared scale {list(self.labels)}"
        return label, ""

    def describe(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "sha256": self.sha256,
            "labels": list(self.labels),
            "answer": self.answer,
        }


_TOKEN = re.compile(r"\\s[*+?]?|\\.|\s+|.", re.S)
#: Any run of spacing in the marker: what Python's ``\s`` matches in a text (``str.isspace``: ASCII spacing,
#: U+001C..U+001F, U+0085 and the Unicode separators), written for RE2, whose ``\s`` is ASCII only.
_SPACING = r"[\t-\r\x1c-\x20\x{85}\p{Z}]*"


def answer_pattern(answer: object, path: str, line: int | None) -> Pattern:
    """A template's ``answer:`` compiled on RE2, with at least one group (the label); else an
    ``InputFormatError`` naming ``path`` and ``line``."""
    if not isinstance(answer, str):
        raise InputFormatError(path, line, "answer: must be a regular expression with one group, the label")
    return compile_pattern(answer, path, line, what="answer:", min_groups=1)


def answer_marker(answer: str) -> Pattern | None:
    """The literal prefix of ``answer`` before its first group, as a case-insensitive pattern (RE2) where each
    run of spacing (``\\s*``, ``\\s+``, a blank) matches any spacing; None when the prefix holds other regex
    syntax or no text."""
    parts: list[str] = []
    for m in _TOKEN.finditer(answer):
        tok = m.group(0)
        if tok == "(":
            break
        if tok.startswith("\\s") or tok.isspace():
            if parts and parts[-1] != _SPACING:
                parts.append(_SPACING)
        elif tok.startswith("\\") and len(tok) == 2 and not tok[1].isalnum():
            parts.append(re.escape(tok[1]))
        elif len(tok) == 1 and tok not in "\\.^$*+?{}[]|)":
            parts.append(re.escape(tok))
        else:
            return None
    while parts and parts[-1] == _SPACING:
        parts.pop()
    if not any(p != _SPACING for p in parts):
        return None
    return compile_pattern("".join(parts), "<answer marker>", ignore_case=True)


def default_template_path() -> Path:
    """The template twostage ships (package data)."""
    return Path(str(resources.files("toolkit.judging") / "templates" / DEFAULT_TEMPLATE))


def load_template(path: str | os.PathLike | None = None) -> Template:
    """Read and check a template file (default: the shipped one)."""
    p = Path(path) if path is not None else default_template_path()
    head, body, sha256, located = read_front_matter_located(
        p, ("name", "labels", "answer", "system", "max_tokens"), "labels:, answer:"
    )
    labels = head.get("labels")
    if (
        not isinstance(labels, list)
        or len(labels) < 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in labels)
    ):
        raise InputFormatError(str(p), None, "labels: must be a list of two or more integers, e.g. [0, 1, 2, 3]")
    if any(abs(v) > MAX_LABEL for v in labels):
        raise InputFormatError(
            str(p), None, f"labels: a label must be within ±{MAX_LABEL:,}, as in any qrels file twostage reads"
        )
    if len(set(labels)) != len(labels):
        raise InputFormatError(str(p), None, f"labels: {labels} repeats a label")
    answer = head.get("answer")
    pattern = answer_pattern(answer, str(p), located.line("answer"))  # the door: RE2, or refused at its line
    missing = [ph for ph in REQUIRED if ph not in body]
    if missing:
        raise InputFormatError(
            str(p),
            None,
            f"the prompt has no {' or '.join(missing)} placeholder; a judge needs both {', '.join(REQUIRED)}",
        )
    max_tokens = head.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise InputFormatError(str(p), None, f"max_tokens: {max_tokens!r} is not a positive integer")
    assert isinstance(answer, str)  # answer_pattern refused anything else
    return Template(
        name=str(head.get("name") or p.stem),
        text=body,
        labels=tuple(sorted(labels)),
        answer=pattern.text,
        system=str(head.get("system") or ""),
        max_tokens=max_tokens,
        path=str(p),
        sha256=sha256,
    )
