"""Prompt templates of a relevance judge: the text, the label scale and the parser of the answer, in one file.

A template file is YAML front matter between two ``---`` lines, then the prompt text::

    ---
    name: my-prompt
    labels: [0, 1, 2, 3]            # the declared scale; any other label is a parse failure
    answer: '##final score:\\s*(\\d+)' # a regular expression; its first group of the LAST match is the label
    system: "You are a careful assessor."   # optional system message
    max_tokens: 256                # optional: the longest answer asked for
    ---
    Query: {query}
    Passage: {passage}
    ...

``{query}`` and ``{passage}`` are required; ``{title}`` may be used (the passage's title, empty when it has
none). They are replaced literally (no other braces are interpreted, so a passage with ``{`` in it is safe).
The file's sha256 identifies the prompt in the cache and in every record. UMBRELA's own prompt drops in as
such a file: its text with ``{query}`` and ``{passage}``, ``labels: [0, 1, 2, 3]`` and its answer pattern.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from toolkit.errors import InputFormatError

REQUIRED = ("{query}", "{passage}")
OPTIONAL = ("{title}",)
DEFAULT_TEMPLATE = "graded-0-3.md"
DEFAULT_MAX_TOKENS = 256


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

    def render(self, query: str, passage: str, title: str = "") -> str:
        """The user message for one (query, passage): placeholders replaced literally, in one pass."""
        values = {"{query}": query, "{passage}": passage, "{title}": title}
        return re.sub(r"\{query\}|\{passage\}|\{title\}", lambda m: values[m.group(0)], self.text)

    def parse(self, response: str | None) -> tuple[int | None, str]:
        """(label, "") or (None, why parsing failed) for one raw answer."""
        if response is None:
            return None, "no answer"
        matches = list(re.finditer(self.answer, response))
        if not matches:
            return None, "no answer pattern in the response"
        token = matches[-1].group(1)
        try:
            label = int(token)
        except (TypeError, ValueError):
            return None, f"answer {token!r} is not an integer"
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


def default_template_path() -> Path:
    """The template twostage ships (package data)."""
    return Path(str(resources.files("toolkit.judging") / "templates" / DEFAULT_TEMPLATE))


def load_template(path: str | os.PathLike | None = None) -> Template:
    """Read and check a template file (default: the shipped one)."""
    import hashlib

    p = Path(path) if path is not None else default_template_path()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputFormatError(str(p), None, "no such prompt template") from None
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise InputFormatError(str(p), None, "not valid UTF-8") from None
    m = re.match(r"---\n(.*?)\n---\n(.*)\Z", text, re.S)
    if not m:
        raise InputFormatError(
            str(p), 1, "a prompt template starts with YAML front matter between '---' lines (labels:, answer:)"
        )
    from toolkit.guard.specs import parse_yaml

    # the one YAML loader (safe, bounded); the front matter starts on the file's line 2
    head = parse_yaml(m.group(1), p, first_line=2, what="a prompt template's front matter").data or {}
    if not isinstance(head, dict):
        raise InputFormatError(str(p), 2, "front matter must be a mapping (labels:, answer:, ...)")
    unknown = sorted(set(head) - {"name", "labels", "answer", "system", "max_tokens"})
    if unknown:
        raise InputFormatError(str(p), None, f"unknown front matter key(s) {unknown}")
    labels = head.get("labels")
    if (
        not isinstance(labels, list)
        or len(labels) < 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in labels)
    ):
        raise InputFormatError(str(p), None, "labels: must be a list of two or more integers, e.g. [0, 1, 2, 3]")
    if len(set(labels)) != len(labels):
        raise InputFormatError(str(p), None, f"labels: {labels} repeats a label")
    answer = head.get("answer")
    if not isinstance(answer, str):
        raise InputFormatError(str(p), None, "answer: must be a regular expression with one group, the label")
    try:
        groups = re.compile(answer).groups
    except re.error as exc:
        raise InputFormatError(str(p), None, f"answer: {answer!r} is not a regular expression ({exc})") from None
    if groups < 1:
        raise InputFormatError(str(p), None, f"answer: {answer!r} has no group; put the label in (...)")
    body = m.group(2)
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
    return Template(
        name=str(head.get("name") or p.stem),
        text=body,
        labels=tuple(sorted(labels)),
        answer=answer,
        system=str(head.get("system") or ""),
        max_tokens=max_tokens,
        path=str(p),
        sha256=hashlib.sha256(raw).hexdigest(),
    )
