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
The file's sha256 identifies the prompt in the cache and in every record (``prompt_sha256``); each record also
keeps the sha256 of the exact user message sent (``rendered_prompt_sha256``).

A passage holding the template's answer marker could dictate its own label (a model that repeats it is parsed
as having said it): ``Template.marker`` is the literal text of ``answer`` before its first group (for the
default template ``##final score:``, matched case-insensitively with any spacing), and ``suspect(passage)`` is
true when the passage holds the marker or anything ``answer`` matches. UMBRELA's own prompt drops in as
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
#: The largest template file read (front matter and text): a prompt is a few KB.
TEMPLATE_MAX_BYTES = 1 << 20


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

    @property
    def marker(self) -> re.Pattern | None:
        """The answer marker: ``answer``'s literal text before its first group, as a lenient pattern (any spacing,
        any case); None when that prefix is not plain text (then only ``answer`` itself is looked for)."""
        return answer_marker(self.answer)

    def suspect(self, passage: str) -> bool:
        """True when the passage holds the answer marker or a match of ``answer`` (a possible prompt injection)."""
        marker = self.marker
        return bool((marker is not None and marker.search(passage)) or re.search(self.answer, passage))

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


_TOKEN = re.compile(r"\\s[*+?]?|\\.|\s+|.", re.S)


def answer_marker(answer: str) -> re.Pattern | None:
    """The literal prefix of ``answer`` before its first group, as a case-insensitive pattern where each run of
    spacing (``\\s*``, ``\\s+``, a blank) matches any spacing; None when the prefix holds other regex syntax
    or no text."""
    parts: list[str] = []
    for m in _TOKEN.finditer(answer):
        tok = m.group(0)
        if tok == "(":
            break
        if tok.startswith("\\s") or tok.isspace():
            if parts and parts[-1] != r"\s*":
                parts.append(r"\s*")
        elif tok.startswith("\\") and len(tok) == 2 and not tok[1].isalnum():
            parts.append(re.escape(tok[1]))
        elif len(tok) == 1 and tok not in "\\.^$*+?{}[]|)":
            parts.append(re.escape(tok))
        else:
            return None
    while parts and parts[-1] == r"\s*":
        parts.pop()
    if not any(p != r"\s*" for p in parts):
        return None
    return re.compile("".join(parts), re.I)


def default_template_path() -> Path:
    """The template twostage ships (package data)."""
    return Path(str(resources.files("toolkit.judging") / "templates" / DEFAULT_TEMPLATE))


def read_front_matter(path: str | os.PathLike, keys: tuple[str, ...], hint: str) -> tuple[dict, str, str]:
    """(front matter, text, the file's sha256) of a template file: YAML front matter between two ``---`` lines,
    then the text; a key not in ``keys`` is an error. ``hint`` names the keys expected, for the error message.
    Shared by every template twostage reads (the judge's here, the listwise reranker's)."""
    import hashlib

    from toolkit.guard.specs import read_text

    p = Path(path)
    if not p.exists():
        raise InputFormatError(str(p), None, "no such prompt template")
    # through the specs door: bounded in size (TEMPLATE_MAX_BYTES), UTF-8 checked with the line named
    text = read_text(p, max_bytes=TEMPLATE_MAX_BYTES)
    with open(p, "rb") as fh:  # the sha256 is of the file's bytes as they are (a BOM included)
        raw = fh.read(TEMPLATE_MAX_BYTES + 1)
    text = text.replace("\r\n", "\n")
    m = re.match(r"---\n(.*?)\n---\n(.*)\Z", text, re.S)
    if not m:
        raise InputFormatError(
            str(p), 1, f"a prompt template starts with YAML front matter between '---' lines ({hint})"
        )
    from toolkit.guard.specs import parse_yaml

    # the one YAML loader (safe, bounded); the front matter starts on the file's line 2
    head = parse_yaml(m.group(1), p, first_line=2, what="a prompt template's front matter").data or {}
    if not isinstance(head, dict):
        raise InputFormatError(str(p), 2, f"front matter must be a mapping ({hint}, ...)")
    unknown = sorted(set(head) - set(keys))
    if unknown:
        raise InputFormatError(str(p), None, f"unknown front matter key(s) {unknown}")
    return head, m.group(2), hashlib.sha256(raw).hexdigest()


def load_template(path: str | os.PathLike | None = None) -> Template:
    """Read and check a template file (default: the shipped one)."""
    p = Path(path) if path is not None else default_template_path()
    head, body, sha256 = read_front_matter(p, ("name", "labels", "answer", "system", "max_tokens"), "labels:, answer:")
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
        sha256=sha256,
    )
