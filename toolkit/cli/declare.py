"""A command's options declared once, each tied to a keyword of its verb's options object (``toolkit.options``).

A command holds one table, in the order ``--help`` lists its options: a ``Flag`` row is one CLI spelling of one
options keyword; any other row is a click decorator of the command line alone (``--format``, ``--out``), whose
value reaches the command as it is. ``options_of(SomeOptions, TABLE)`` adds every row's option, builds the
options object once from the flags' values (the library's own ``from_keywords``, so the rules are those of
``ts.evaluate``) and calls the command with ``options=``:

    EVAL = (MEASURES, Flag("rel_format", ("-R", "rel_format"), help=...), *EVALUATION, FORMAT, ...)

    @click.command("eval")
    @options_of(EvaluationOptions, EVAL)
    @click.argument("qrels")
    def eval_command(qrels, options, fmt, ...): ...

An option that is not given (its value None) keeps the options' default; two flags may set one keyword
(``--holes`` and ``--holes-over``: the later one given wins). A rule the options refuse is a usage error
inside the command (exit status 2, with the ``Usage:`` line), in the command line's words: an
``OptionConflictError`` as ``Error: MESSAGE``, an ``OptionError`` naming a flag as ``Invalid value for
'FLAG': MESSAGE``, any other refusal (a setting that does not parse: ``--gain bogus``) as ``Invalid value:
MESSAGE``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from toolkit.errors import OptionConflictError, OptionError, TwostageError
from toolkit.options import Options


@dataclass(frozen=True)
class Flag:
    """One CLI spelling of one options keyword: ``decls`` and ``settings`` are what ``click.option`` takes (the
    parameter name among the decls where it is not the flag's), ``convert`` turns the CLI's value into the field's
    (``--trec-eval``'s text into the number)."""

    keyword: str
    decls: tuple[str, ...]
    help: str | None = None
    convert: Callable[[Any], Any] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def option(self) -> Callable[[Callable], Callable]:
        """The click decorator of this flag."""
        return click.option(*self.decls, help=self.help, **self.settings)

    @functools.cached_property
    def param(self) -> str:
        """The click parameter's name (what the callback receives)."""
        name = click.Option(list(self.decls), **{k: v for k, v in self.settings.items() if k != "cls"}).name
        assert name is not None
        return name


def flag(keyword: str, *decls: str, help: str | None = None, convert: Callable | None = None, **settings: Any) -> Flag:
    """``Flag(keyword, decls, help, convert, settings)`` written as ``click.option`` is."""
    return Flag(keyword, decls, help, convert, settings)


Row = Flag | Callable[[Callable], Callable]


def apply(rows: Sequence[Row], f: Callable) -> Callable:
    """``f`` with every row's option, listed in the rows' order."""
    for row in reversed(rows):
        f = row.option()(f) if isinstance(row, Flag) else row(f)
    return f


def values_of(rows: Sequence[Row], params: dict[str, Any]) -> dict[str, Any]:
    """The options keywords the flags among ``rows`` were given (popped from ``params``); a value None (or one
    its ``convert`` turns into None: ``--no-cache`` not given) is not given, and where two flags set one keyword
    the later one that was given wins."""
    out: dict[str, Any] = {}
    for row in rows:
        if not isinstance(row, Flag) or row.param not in params:
            continue
        value = params.pop(row.param)
        if value is None or (value is False and row.keyword in out):
            continue
        value = row.convert(value) if row.convert is not None else value
        if value is not None:
            out[row.keyword] = value
    return out


def build(options_class: type[Options], given: Mapping[str, Any], passing: tuple[type[Exception], ...] = ()) -> Options:
    """``options_class.from_keywords(**given)``, a refusal turned into the command line's usage error; one of
    ``passing`` (that is no ``OptionError``) is raised as it is: the command's own error (exit status 1)."""
    try:
        return options_class.from_keywords(**given)
    except OptionError as exc:
        raise usage_error(exc) from None
    except passing:
        raise
    except TwostageError as exc:
        raise click.BadParameter(str(exc)) from None


def usage_error(exc: OptionError, ctx: click.Context | None = None) -> click.UsageError:
    """The command line's usage error (exit status 2) for an option the library refuses, chosen by its type:
    ``OptionConflictError`` as ``Error: MESSAGE``, an ``OptionError`` naming a flag as click's bad value of that
    flag (``Invalid value for '-m': MESSAGE``), one naming none as ``Invalid value: MESSAGE``."""
    if isinstance(exc, OptionConflictError):
        return click.UsageError(exc.for_cli(), ctx=ctx)
    return click.BadParameter(exc.for_cli(), ctx=ctx, param_hint=f"'{exc.flag}'" if exc.flag else None)


def options_of(
    options_class: type[Options],
    rows: Sequence[Row],
    *,
    fixed: Mapping[str, Any] | None = None,
    passing: tuple[type[Exception], ...] = (),
) -> Callable[[Callable], Callable]:
    """Decorator of a command: every row's option (in order), and ``options=`` built from the flags' values and
    ``fixed`` (keywords the command sets itself) in place of the flags' parameters; a refusal of one of
    ``passing`` is the command's own error, as ``build`` says."""

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def command(**params: Any) -> Any:
            given = values_of(rows, params)
            given.update(fixed or {})
            return f(options=build(options_class, given, passing), **params)

        return apply(rows, command)

    return decorate


__all__ = ["Flag", "Row", "apply", "build", "flag", "options_of", "values_of"]
