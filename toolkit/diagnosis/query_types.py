"""Query types: from a ``qid<TAB>type`` file, or from ordered regular-expression rules over the query text.

Rules are tried in order on the lower-cased, whitespace-normalised text; the first whose pattern is found
wins, and a query matching none is ``other``. The defaults are ``DEFAULT_TYPE_RULES``; a rules file
(``type<TAB>regex`` lines, or YAML ``[{type, pattern}]``) replaces them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.errors import InputFormatError
from toolkit.trec_io import read_bytes


@dataclass(frozen=True)
class TypeRule:
    """A query type and the regular expression that recognises it (searched in the lower-cased text)."""

    type: str
    pattern: str

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern)


#: The default rules, tried in order; the first match wins, no match is "other".
DEFAULT_TYPE_RULES: tuple[TypeRule, ...] = (
    # "how to ...", "how do i ...", "steps to ...": a procedure is asked for
    TypeRule("procedure", r"^(how (to|do (i|you|we)|can (i|you|we)|should (i|you))\b|steps? (to|for)\b|ways? to\b)"),
    # symptoms, causes, effects: "what causes ...", "symptoms of ...", "why does ..."
    TypeRule(
        "symptoms/causes",
        r"\b(symptoms?|causes?|caused|causing|signs? of|side effects?|effects? of|"
        r"why (do|does|did|is|are|was|were)|reasons? (for|why))\b",
    ),
    # identifier-like: a code, number or model name carries the query (401k, i-95, ww1, 1099, cacm-0012)
    TypeRule("identifier-like", r"(\b[a-z]+[-_.]?\d+[a-z\d]*\b|\b\d+[-_.]?[a-z]+\w*\b|\b\d{3,}\b)"),
    # long-form question: starts with a question word, or eight words or more
    TypeRule(
        "long-form question",
        r"(^(what|who|whom|whose|when|where|which|why|how|is|are|was|were|does|do|did|can|"
        r"could|should|will|would|define|definition|meaning)\b|^(\S+\s+){7}\S)",
    ),
)
OTHER_TYPE = "other"


def load_type_rules(path: str | os.PathLike) -> tuple[TypeRule, ...]:
    """Rules from a file: ``type<TAB>regex`` per line (``#`` comments), or YAML ``[{type, pattern}]``.

    The rules replace the defaults; they are tried in file order and a query
    matching none is ``other``. Every pattern is compiled here, so a bad one
    fails with its line number.
    """
    path = str(path)
    text = read_bytes(path).decode("utf-8-sig")
    rules: list[TypeRule] = []
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputFormatError(path, None, f"invalid YAML: {exc}") from None
        if isinstance(doc, dict):
            doc = doc.get("rules")
        if not isinstance(doc, list):
            raise InputFormatError(path, None, "expected a list of {type: NAME, pattern: REGEX} (or {rules: [...]})")
        for i, item in enumerate(doc):
            if not isinstance(item, dict) or not {"type", "pattern"} <= set(item):
                raise InputFormatError(path, None, f"rule {i + 1}: needs 'type' and 'pattern'")
            rules.append(_rule(path, None, str(item["type"]), str(item["pattern"])))
    else:
        for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if "\t" not in line:
                raise InputFormatError(path, number, "expected 'type<TAB>regular expression'")
            name, pattern = line.split("\t", 1)
            rules.append(_rule(path, number, name.strip(), pattern.strip()))
    if not rules:
        raise InputFormatError(path, None, "no rules in the file")
    return tuple(rules)


def _rule(path: str, line: int | None, name: str, pattern: str) -> TypeRule:
    if not name or not pattern:
        raise InputFormatError(path, line, "a rule needs a type name and a pattern")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InputFormatError(path, line, f"bad regular expression {pattern!r}: {exc}") from None
    return TypeRule(name, pattern)


def classify_query(text: str, rules: Iterable[TypeRule] = DEFAULT_TYPE_RULES) -> str:
    """The first rule whose pattern is found in the lower-cased, whitespace-normalised text; else ``other``."""
    t = " ".join(str(text).lower().split())
    for rule in rules:
        if rule.compiled().search(t):
            return rule.type
    return OTHER_TYPE


def read_query_types(path: str | os.PathLike) -> dict[str, str]:
    """``qid<TAB>type`` per line (``#`` comments and blank lines skipped)."""
    path = str(path)
    text = read_bytes(path).decode("utf-8-sig").replace("\r\n", "\n")
    out: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise InputFormatError(path, number, "expected 'query_id<TAB>type'")
        qid = parts[0].strip()
        if qid in out:
            raise InputFormatError(path, number, f"query {qid!r} is typed twice")
        out[qid] = parts[1].strip()
    if not out:
        raise InputFormatError(path, None, "no query types in the file")
    return out


def assign_types(
    query_ids: Iterable[str],
    queries: dict[str, str],
    file_types: dict[str, str] | None,
    rules: Iterable[TypeRule] = DEFAULT_TYPE_RULES,
) -> list[str]:
    """The type of each query: from ``file_types`` ('unlisted' when the file lacks it), else by the rules
    over its text ('unknown' without a text)."""
    rules = tuple(rules)
    if file_types:
        return [file_types.get(q, "unlisted") for q in query_ids]
    return [classify_query(queries[q], rules) if q in queries else "unknown" for q in query_ids]
