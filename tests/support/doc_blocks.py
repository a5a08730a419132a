"""The examples of README.md and docs/*.md as blocks, and GitHub's heading anchors: what
tests/project/test_doc_examples.py runs and link-checks.

A block is a fenced block (```` ``` ````, ```` ```python ````, ```` ```text ````; a fence may be indented, inside a
list) or an indented (4-space) block after a blank line. A shell block is an example when it holds a
``twostage`` command; a Python block always is. ``<!-- not run: REASON -->`` on the nearest non-blank line above
a block marks it as not run. A ```` ```text ```` block right after a Python block (blank lines between at most) is
that block's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MARKER = re.compile(r"^\s*<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
SHELL_INFO = {"", "bash", "sh", "shell", "console"}
ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence, or of the first indented line
    kind: str  # "python", "shell" or "text"
    lines: list[str]
    not_run: str | None = None  # the marker's reason
    output: list[str] | None = field(default=None)  # a Python block's ```text block

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def is_example(self) -> bool:
        if self.kind == "python":
            return True
        return self.kind == "shell" and any(_command_start(ln) for ln in self.lines)

    @property
    def prompted(self) -> bool:
        """Commands are the ``$ `` lines and the lines after each are its output."""
        return any(ln.startswith("$ ") for ln in self.lines)


def _command_start(line: str) -> bool:
    return line.startswith(("twostage ", "$ twostage "))


def blocks(page: Path) -> list[Block]:
    raw = page.read_text(encoding="utf-8").splitlines()

    def marker_above(i: int) -> str | None:
        j = i - 1
        while j >= 0 and not raw[j].strip():
            j -= 1
        m = MARKER.match(raw[j]) if j >= 0 else None
        return m.group(1) if m else None

    out: list[Block] = []
    i = 0
    while i < len(raw):
        line = raw[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            indent = len(line) - len(stripped)
            info = stripped[3:].strip().lower()
            j, body = i + 1, []
            while j < len(raw) and not raw[j].lstrip().startswith("```"):
                body.append(raw[j][indent:] if not raw[j][:indent].strip() else raw[j].lstrip())
                j += 1
            kind = "python" if info in ("python", "py") else "shell" if info in SHELL_INFO else "text"
            block = Block(page, i + 1, kind, body, marker_above(i))
            if kind == "text" and out and out[-1].kind == "python" and out[-1].output is None:
                between = raw[out[-1].line : i]  # from the Python block's opening fence to this fence
                closing = max(k for k, ln in enumerate(between) if ln.lstrip().startswith("```"))
                if not any(ln.strip() for ln in between[closing + 1 :]):
                    out[-1].output = body
            out.append(block)
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or not raw[i - 1].strip() or MARKER.match(raw[i - 1])):
            j, body = i, []
            while j < len(raw) and (
                raw[j].startswith("    ") or (not raw[j].strip() and j + 1 < len(raw) and raw[j + 1].startswith("    "))
            ):
                body.append(raw[j][4:])
                j += 1
            out.append(Block(page, i + 1, "shell", body, marker_above(i)))
            i = j
            continue
        i += 1
    return out


@dataclass
class Step:
    kind: str  # "set" (NAME=value), "run" (a twostage command) or "other" (anything else: cannot be run here)
    text: str
    output: list[str] = field(default_factory=list)  # shown after a ``$`` command


def steps(block: Block) -> list[Step]:
    """The shell block's steps: assignments, ``twostage`` commands (continuations joined), other commands."""
    out: list[Step] = []
    lines = list(block.lines)
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if block.prompted and not line.startswith("$ "):
            if out and out[-1].kind == "run":
                out[-1].output.append(line)
            i += 1
            continue
        text = line[2:] if line.startswith("$ ") else line
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        if ASSIGNMENT.match(text):
            out.append(Step("set", text))
        elif text.startswith("twostage "):
            out.append(Step("run", text))
        else:
            out.append(Step("other", text))
    return out


_ANNOTATION = re.compile(r"\s{2,}#\s.*$")


def _norm(line: str) -> str:
    return " ".join(line.split())


def _pattern(shown: str) -> str:
    """``...`` is any text; ``.../`` any folder or none (``.../run.txt`` matches ``run.txt`` and ``/a/b/run.txt``)."""
    parts = [".*".join(re.escape(p) for p in piece.split("...")) for piece in shown.split(".../")]
    return "(?:.*/)?".join(parts) + r"\Z"


def output_mismatch(shown: list[str], actual: str) -> str | None:
    """Why ``actual`` is not the output ``shown`` (None when it is). A line ``...`` stands for any lines, ``...``
    inside a line for any text; runs of blank space count as one; ``  # note`` after a shown line is a note;
    blank lines are ignored."""
    want = [_norm(_ANNOTATION.sub("", ln) if not ln.lstrip().startswith("#") else ln) for ln in shown]
    want = [w for w in want if w]
    got = [_norm(ln) for ln in actual.splitlines() if ln.strip()]
    if not want:
        return None
    chunks: list[list[str]] = [[]]
    for w in want:
        if w == "...":
            chunks.append([])
        else:
            chunks[-1].append(w)
    anchored_start, anchored_end = want[0] != "...", want[-1] != "..."
    patterns = [[re.compile(_pattern(w)) for w in c] for c in chunks if c]
    pos = 0
    for n, chunk in enumerate(patterns):
        last = n == len(patterns) - 1
        starts = [pos] if (n == 0 and anchored_start) else range(pos, len(got) - len(chunk) + 1)
        found = None
        for s in starts:
            if all(p.match(got[s + k]) for k, p in enumerate(chunk)) and (
                not (last and anchored_end) or s + len(chunk) == len(got)
            ):
                found = s
                break
        if found is None:
            return f"shown lines {[p.pattern for p in chunk][:3]} not found in the output:\n" + "\n".join(got[:40])
        pos = found + len(chunk)
    return None


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of the page (repeated headings get -1, -2, ...), and explicit ``<a id/name>``."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
        out.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
    return out
