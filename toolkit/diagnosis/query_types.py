"""Query types: from a ``qid<TAB>type`` file, or from ordered regular-expression rules over the query text.

Rules are tried in order on the lower-cased, whitespace-normalised text; the first whose pattern is found
wins, and a query matching none is ``other``. The defaults (``DEFAULT_TYPE_RULES``) are a taxonomy, each type
with its meaning: comparison, definition, symptoms/causes, procedure, long-form (an explanation, or a
question of eight words or more), identifier-like, entity/factoid (any other question), other (keyword
queries: 'cost of interior concrete flooring'). The order settles overlaps: a comparison or a definition is
that whatever its length; "how to" is a procedure before "how" makes it long-form; a why-question naming a
code ("... enter ww1") is long-form. A rules file (``type<TAB>regex`` lines, or YAML ``[{type, pattern,
meaning}]``) replaces them; its patterns are someone else's text, so they run on RE2, a linear-time engine
(``toolkit.guard.patterns``), and one RE2 cannot run is refused at its line. The defaults, and rules built in
code, run on Python's ``re``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.data.trec_io import read_bytes
from toolkit.errors import InputFormatError
from toolkit.guard.patterns import Pattern, compile_pattern


@dataclass(frozen=True)
class TypeRule:
    """A query type, the regular expression that recognises it (searched in the lower-cased text), and what
    the type means (shown in the report). A rule read from a file (``load_type_rules``) carries its pattern
    compiled on RE2 by the door; one built in code is compiled by Python's ``re``."""

    type: str
    pattern: str
    meaning: str = ""

    def compiled(self) -> re.Pattern | Pattern:
        # not a field: equality, ``asdict`` and the report see the rule as written
        return self.__dict__.get("_door") or re.compile(self.pattern)

    @classmethod
    def from_file(cls, path: str, line: int | None, type: str, pattern: str, meaning: str = "") -> TypeRule:
        """A rule read from ``path``: its pattern compiled on RE2 (``toolkit.guard.patterns``), or refused
        there with the line."""
        rule = cls(type, pattern, meaning)
        object.__setattr__(rule, "_door", compile_pattern(pattern, path, line))
        return rule


_QUESTION = r"(what|who|whom|whose|when|where|which|why|how|is|are|was|were|do|does|did|can|could|should|will|would)"

#: The default taxonomy, tried in order; the first match wins, no match is "other". Each rule is tested on
#: TREC DL19's 43 queries against a table written by hand (tests/diagnosis/test_query_types.py).
DEFAULT_TYPE_RULES: tuple[TypeRule, ...] = (
    TypeRule(
        "comparison",
        r"\b(vs\.?|versus|differences? between|compared? (to|with)|better than)\b",
        "two things set against each other: 'wifi vs bluetooth', 'difference between rn and bsn'",
    ),
    TypeRule(
        "definition",
        # a definition word anywhere, or "what is X" with X at most three words that say nothing more than
        # the term ("what is theraderm used for" asks a fact, not a definition)
        r"\b(definition|define[ds]?|meaning|meant by)\b"
        r"|^what (is|are|was|were) (an? |the )?(?!.*\b(used|for|of|in|from|made|called|like)\b)\S+( \S+){0,2}\??$"
        r"|^what does .+ (mean|stand for)\??$",
        "what a term means: 'definition declaratory judgment', 'lps laws definition', 'what is a active margin'",
    ),
    TypeRule(
        "symptoms/causes",
        r"\b(symptoms?|causes?|caused|causing|signs? of|side effects?|effects? of|reasons? (for|why)|"
        r"risk factors?)\b",
        "symptoms, causes or effects of something: 'right pelvic pain causes', 'causes of military suicide'",
    ),
    TypeRule(
        "procedure",
        r"^(how (to|do (i|you|we)|can (i|you|we)|should (i|you))\b|steps? (to|for)\b|ways? to\b)",
        "how to do something: 'how to find the midsegment of a trapezoid'",
    ),
    TypeRule(
        "long-form",
        r"^(why|how (is|are|was|were|do|does|did|can|could|would|should|has|have))\b"
        rf"|^{_QUESTION}\b(\s+\S+){{7,}}",
        "an explanation (why ..., how is/does ...) or a question of eight words or more: 'why did the us "
        "volunterilay enter ww1', 'how are some sharks warm blooded'",
    ),
    TypeRule(
        "identifier-like",
        r"(\b[a-z]+[-_.]?\d+[a-z\d]*\b|\b\d+[-_.]?[a-z]+\w*\b|\b\d{3,}\b)",
        "a code, number or model name carries the query: '401k limits', 'form 1099', 'i-95 traffic'",
    ),
    TypeRule(
        "entity/factoid",
        rf"^{_QUESTION}\b|\bwhat\b|_{{3,}}|\?$",
        "any other question: a fact about an entity, a date, an amount ('who is robert gray', 'when was the "
        "salvation army founded', 'how long is life cycle of flea', 'tracheids are part of _____.')",
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
    rules: list[TypeRule] = []
    if path.endswith((".yaml", ".yml")):
        from toolkit.guard.specs import load_yaml

        located = load_yaml(path, what="a query-type file")  # the one YAML loader: safe, bounded, lines kept
        doc, top = located.data, ()
        if isinstance(doc, dict):
            doc, top = doc.get("rules"), ("rules",)
        if not isinstance(doc, list):
            raise InputFormatError(path, 1, "expected a list of {type: NAME, pattern: REGEX} (or {rules: [...]})")
        for i, item in enumerate(doc):
            line = located.line(*top, i)
            if not isinstance(item, dict) or not {"type", "pattern"} <= set(item):
                raise InputFormatError(path, line, f"rule {i + 1}: needs 'type' and 'pattern'")
            rules.append(
                _rule(
                    path,
                    located.line(*top, i, "pattern"),
                    str(item["type"]),
                    str(item["pattern"]),
                    str(item.get("meaning", "")),
                )
            )
    else:
        text = read_bytes(path).decode("utf-8-sig")
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


def _rule(path: str, line: int | None, name: str, pattern: str, meaning: str = "") -> TypeRule:
    if not name or not pattern:
        raise InputFormatError(path, line, "a rule needs a type name and a pattern")
    return TypeRule.from_file(path, line, name, pattern, meaning)


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
