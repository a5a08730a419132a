"""Prompt-template files: YAML front matter between two ``---`` lines, then the text.

The one reader of every template twostage takes (the judge's, ``toolkit.judging.prompt``; the listwise
reranker's, ``toolkit.reranking.listwise_prompt``), through the specs door (bounded in size, UTF-8 checked, one YAML
loader).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.errors import InputFormatError

if TYPE_CHECKING:
    from toolkit.guard.specs import Located

#: The largest template file read (front matter and text): a prompt is a few KB.
TEMPLATE_MAX_BYTES = 1 << 20


def read_front_matter(path: str | os.PathLike, keys: tuple[str, ...], hint: str) -> tuple[dict, str, str]:
    """(front matter, text, the file's sha256) of a template file: YAML front matter between two ``---`` lines,
    then the text; a key not in ``keys`` is an error. ``hint`` names the keys expected, for the error message.
    Shared by every template twostage reads (the judge's, ``toolkit.judging.prompt``; the listwise reranker's)."""
    head, body, sha256, _ = read_front_matter_located(path, keys, hint)
    return head, body, sha256


def read_front_matter_located(
    path: str | os.PathLike, keys: tuple[str, ...], hint: str
) -> tuple[dict, str, str, Located]:
    """``read_front_matter``, and the front matter as the YAML loader located it (the file's line of each key)."""
    import hashlib

    from toolkit.guard.specs import read_text

    p = Path(path)
    if not p.exists():
        raise InputFormatError(str(p), None, "no such prompt template")
    # through the specs door: bounded in size (TEMPLATE_MAX_BYTES), UTF-8 checked with the line named
    text = read_text(p, max_bytes=TEMPLATE_MAX_BYTES)
    from toolkit.guard.readers import open_regular

    with open_regular(p) as fh:  # the sha256 is of the file's bytes as they are (a BOM included)
        raw = fh.read(TEMPLATE_MAX_BYTES + 1)
    text = text.replace("\r\n", "\n")
    m = re.match(r"---\n(.*?)\n---\n(.*)\Z", text, re.S)
    if not m:
        raise InputFormatError(
            str(p), 1, f"a prompt template starts with YAML front matter between '---' lines ({hint})"
        )
    from toolkit.guard.specs import parse_yaml

    # the one YAML loader (safe, bounded); the front matter starts on the file's line 2
    located = parse_yaml(m.group(1), p, first_line=2, what="a prompt template's front matter")
    head = located.data or {}
    if not isinstance(head, dict):
        raise InputFormatError(str(p), 2, f"front matter must be a mapping ({hint}, ...)")
    unknown = sorted(set(head) - set(keys))
    if unknown:
        raise InputFormatError(str(p), None, f"unknown front matter key(s) {unknown}")
    return head, m.group(2), hashlib.sha256(raw).hexdigest(), located
