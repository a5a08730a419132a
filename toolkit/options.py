"""One frozen, validated options object per verb, built alike by the library and the command line.

A verb's options are a frozen dataclass that derives from ``Options``; each field is declared with ``opt``
(its default and its one line of documentation) or ``nested`` (a shared piece, such as the evaluation
settings, whose own keywords become the verb's keywords). Building one checks it once: ``__post_init__``
calls ``validate()``, the one place a rule between options lives, and an options object that exists is a
valid one. Messages name options with ``toolkit.errors.phrase``, so that the library says ``holes=True`` and
the command line ``--holes``.

The library's verbs are written as ``@verb(SomeOptions, inputs=("qrels", "run"))`` over a function of
``(inputs..., options)``: the verb takes the inputs, ``options=`` and every keyword of the options (its
signature lists them, so that pdoc, notebooks and ``inspect.signature`` show them), builds the options once
with ``from_call`` and calls the function. The command line builds the same object from its flags
(``toolkit.cli.declare``). Adding an option to a verb is two edits: its field here, its flag there.

Keywords and ``options=`` together: the options given are the start, and every keyword passed replaces its
value (a keyword not passed leaves the value of ``options`` as it is, even where that is not the default). A
field declared without a default (``judge``'s ``model``) is a required keyword: missing, it is Python's own
``TypeError`` (``judge() missing 1 required keyword-only argument: 'model'``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

R = TypeVar("R")
OptionsT = TypeVar("OptionsT", bound="Options")


@dataclass(frozen=True)
class Keyword:
    """One keyword a verb takes: its name, default, type (as written) and documentation; ``field`` is the options
    field it sets (the nested piece's field for a nested keyword)."""

    name: str
    default: Any
    annotation: Any
    doc: str
    field: str


@dataclass(frozen=True)
class Nested:
    """A shared piece built from keywords of its own: ``build`` turns ``{keyword: value}`` (those not given
    missing) into the piece, ``values`` turns a piece back into the keywords that build it again."""

    keywords: tuple[Keyword, ...]
    build: Callable[[dict], Any]
    values: Callable[[Any], dict]


def opt(default: Any = dataclasses.MISSING, *, doc: str) -> Any:
    """A field of an options class: its default and its documentation (the verb's ``Args:`` line)."""
    return dataclasses.field(default=default, metadata={"doc": doc})


def nested(
    keywords: Iterable[tuple[str, Any, Any, str]],
    build: Callable[[dict], Any],
    values: Callable[[Any], dict],
    *,
    doc: str,
) -> Any:
    """A field holding a shared piece built by ``build`` from its own keywords, ``(name, default, annotation,
    doc)`` each; ``values`` is the inverse of ``build`` (the keywords of a piece)."""
    spec = Nested(tuple(Keyword(n, d, a, text, "") for n, d, a, text in keywords), build, values)
    return dataclasses.field(default_factory=lambda: build({}), metadata={"doc": doc, "nested": spec})


def unknown_keyword(function: str, keyword: str, allowed: Iterable[str]) -> TypeError:
    """The ``TypeError`` Python raises for an unexpected keyword, naming the public function and its keywords."""
    return TypeError(
        f"{function}() got an unexpected keyword argument {keyword!r} "
        f"(its other keywords: {', '.join(sorted(allowed))})"
    )


@dataclass(frozen=True)
class Options:
    """Base of the options classes (frozen dataclasses): checked once, where they are built."""

    #: The verb these options belong to (for messages).
    verb: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Rules between options; raise ``toolkit.errors.OptionError``/``OptionConflictError`` (or the error a
        shared check has always raised). Called once, when the object is built."""

    @classmethod
    def keywords(cls) -> dict[str, Keyword]:
        """Every keyword of the verb, in the fields' order: a field's own name, or a nested piece's keywords."""
        out: dict[str, Keyword] = {}
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("nested")
            if spec is not None:
                for k in spec.keywords:
                    out[k.name] = dataclasses.replace(k, field=f.name)
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = inspect.Parameter.empty
            out[f.name] = Keyword(f.name, default, f.type, f.metadata.get("doc", ""), f.name)
        return out

    @classmethod
    def from_keywords(cls: type[OptionsT], **given: Any) -> OptionsT:
        """The options from keywords (those missing take their defaults)."""
        return cls.from_call(cls.verb or cls.__name__, None, given)

    @classmethod
    def from_call(
        cls: type[OptionsT],
        verb: str,
        options: OptionsT | None,
        given: Mapping[str, Any],
        allowed: Iterable[str] | None = None,
    ) -> OptionsT:
        """What a verb was called with: ``options`` (or the defaults) with each keyword of ``given`` replacing its
        value; built, and so checked, once. A keyword that is not one of ``allowed`` (default: every keyword) is
        Python's ``TypeError`` naming ``verb``."""
        known = cls.keywords()
        names = list(known) if allowed is None else list(allowed)
        for k in given:
            if k not in names:
                raise unknown_keyword(verb, k, names)
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"{verb}() options= takes a {cls.__name__}, not {type(options).__name__}")
        if options is None:  # a keyword without a default (``judge``'s ``model``) is required, as Python says it
            missing = [k for k, spec in known.items() if spec.default is inspect.Parameter.empty and k not in given]
            if missing:
                raise TypeError(
                    f"{verb}() missing {len(missing)} required keyword-only argument{'s' if len(missing) > 1 else ''}: "
                    + " and ".join(repr(k) for k in missing)
                )
        if not given:
            return options if options is not None else cls()
        values: dict[str, Any] = {}
        pieces: dict[str, dict[str, Any]] = {}
        for k, v in given.items():
            f = known[k].field
            if f == k:
                values[k] = v
            else:
                pieces.setdefault(f, {})[k] = v
        for f, kw in pieces.items():
            spec = cls.__dataclass_fields__[f].metadata["nested"]
            start = spec.values(getattr(options, f)) if options is not None else {}
            values[f] = spec.build({**start, **kw})
        if options is not None:
            return dataclasses.replace(options, **values)
        return cls(**values)

    @classmethod
    def piece(cls, *, doc: str, **defaults: Any) -> Any:
        """A field of another verb's options holding these options as a nested piece (their keywords become that
        verb's), with ``defaults`` where that verb's differ."""
        keywords = [(k.name, defaults.get(k.name, k.default), k.annotation, k.doc) for k in cls.keywords().values()]
        return nested(
            keywords, lambda given: cls.from_keywords(**{**defaults, **given}), lambda o: o.describe(), doc=doc
        )

    def describe(self) -> dict[str, Any]:
        """The options by keyword (nested pieces by theirs): what a provenance record states."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            spec = f.metadata.get("nested")
            value = getattr(self, f.name)
            out.update(spec.values(value) if spec is not None else {f.name: value})
        return out


def verb(
    options_class: type[Options], *, inputs: Iterable[str], exclude: Iterable[str] = ()
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A public verb over ``function(inputs..., options)``: it takes the ``inputs`` (positional or by name),
    ``options=`` and every keyword of ``options_class`` less ``exclude``, builds the options once
    (``Options.from_call``) and calls ``function`` with them. Its signature and its docstring's ``Args:`` list
    every keyword (name, default, type, the field's documentation)."""
    inputs = tuple(inputs)
    excluded = set(exclude)

    def decorate(function: Callable[..., R]) -> Callable[..., R]:
        name = function.__name__
        own = inspect.signature(function)
        taken = inspect.Signature([own.parameters[n] for n in inputs])
        keywords = {k: v for k, v in options_class.keywords().items() if k not in excluded}
        required = [
            p.name
            for p in taken.parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
        ]

        @functools.wraps(function)
        def call(*args: Any, options: Options | None = None, **given: Any) -> R:
            named = {k: given.pop(k) for k in list(given) if k in taken.parameters}
            missing = [k for k in required if k not in named]
            if missing:  # a required keyword-only input (``calibrate_judge``'s ``qrels``), as Python says it
                raise TypeError(
                    f"{name}() missing {len(missing)} required keyword-only argument{'s' if len(missing) > 1 else ''}: "
                    + " and ".join(repr(k) for k in missing)
                )
            try:
                bound = taken.bind(*args, **named)
            except TypeError as exc:
                raise TypeError(f"{name}() {exc}") from None
            bound.apply_defaults()
            built = options_class.from_call(name, options, given, allowed=keywords)  # type: ignore[arg-type]
            return function(*bound.args, **bound.kwargs, options=built)  # an input may be keyword-only

        parameters = [
            *taken.parameters.values(),
            *(
                inspect.Parameter(k.name, inspect.Parameter.KEYWORD_ONLY, default=k.default, annotation=k.annotation)
                for k in keywords.values()
            ),
            inspect.Parameter(
                "options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=f"{options_class.__name__} | None"
            ),
        ]
        call.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        call.__doc__ = _with_keyword_docs(function.__doc__ or "", keywords.values(), options_class)
        call.options_class = options_class  # type: ignore[attr-defined]
        # tools that unwrap (pdoc) would show ``function``'s (inputs, options): the verb's own signature and docs
        # are the wrapper's
        del call.__wrapped__  # type: ignore[attr-defined]
        return call

    return decorate


def _with_keyword_docs(doc: str, keywords: Iterable[Keyword], options_class: type) -> str:
    """``doc`` with an ``Args:`` line for each keyword it does not document yet, and one for ``options``, after
    its last ``Args:`` entry (or in a new ``Args:`` section)."""
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        lines += ["", "    Args:"]
        start = len(lines) - 1
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    end = start + 1
    while end < len(lines) and (lines[end].startswith(indent + " ") and lines[end].strip()):
        end += 1
    said = {line.strip().split(":", 1)[0] for line in lines[start + 1 : end] if not line.startswith(indent + "     ")}
    entries = [(k.name, k.doc) for k in keywords if k.name not in said and k.doc]
    entries.append(
        (
            "options",
            f"a ``{options_class.__name__}`` holding these keywords; a keyword passed as well replaces its value.",
        )
    )
    added = [
        textwrap.fill(f"{name}: {text}", 116, initial_indent=indent + " " * 4, subsequent_indent=indent + " " * 8)
        for name, text in entries
    ]
    return "\n".join(lines[:end] + added + lines[end:]) + ("\n" if doc.endswith("\n") else "")


__all__ = ["Keyword", "Nested", "Options", "nested", "opt", "unknown_keyword", "verb"]
