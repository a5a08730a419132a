"""The one declaration of evaluation settings, shared by every command that evaluates.

``eval``, ``compare``, ``gain-sensitivity`` and ``diagnose`` take these
options (trec_eval's flags plus twostage's nDCG choices) through
``evaluation_options``, and turn them into an ``EvalSettings`` with
``settings_from``; reproduction specs name the same settings as YAML keys and
build them with the same ``measures.build_settings``. Measure names are
parsed by ``measures.parse_measures`` everywhere.
"""

from __future__ import annotations

import click

from toolkit.errors import TwostageError
from toolkit.measures.names import DEFAULT_TREC_EVAL, TREC_EVAL_VERSIONS, EvalSettings, build_settings
from toolkit.ranking import SCORE_PRECISIONS

#: Option name -> (click decorator factory). Order is the order in --help.
_OPTIONS = {
    "complete": lambda: click.option(
        "-c",
        "complete",
        is_flag=True,
        help="Average over every judged query; queries missing from the run count as 0 (trec_eval -c).",
    ),
    "level": lambda: click.option(
        "-l",
        "level",
        type=click.IntRange(min=0),
        default=1,
        show_default=True,
        help="Relevance level: labels >= LEVEL are relevant (binary measures; not nDCG).",
    ),
    "max_docs": lambda: click.option(
        "-M",
        "max_docs",
        type=click.IntRange(min=1),
        default=None,
        help="Evaluate only the top N documents of each query.",
    ),
    "judged_only": lambda: click.option(
        "-J",
        "judged_only",
        is_flag=True,
        help="Judged documents only: drop unjudged documents before ranking (condensed list).",
    ),
    "num_docs": lambda: click.option(
        "-N",
        "num_docs",
        type=click.IntRange(min=0),
        default=0,
        help="Number of documents in the collection (utility's fourth coefficient).",
    ),
    "trec_eval": lambda: click.option(
        "--trec-eval",
        "trec_eval",
        type=click.Choice([str(v) for v in TREC_EVAL_VERSIONS]),
        default=str(DEFAULT_TREC_EVAL),
        show_default=True,
        help="Semantics of trec_eval 9 (Pyserini's bundled 9.0.4: float scores, iprec cutoffs floor(x*R+0.9)) "
        "or 10 (double scores, round(x*R), rbp/unj, -c lists missing queries).",
    ),
    "score_precision": lambda: click.option(
        "--score-precision",
        type=click.Choice(SCORE_PRECISIONS),
        default=None,
        help="Compare scores as 32-bit floats or doubles [default: the --trec-eval generation's: 9 float32, "
        "10 float64].",
    ),
    "gain": lambda: click.option(
        "--gain",
        default="linear",
        show_default=True,
        help="nDCG gain: linear (trec_eval), exp (2^rel-1), or a map like 0:0,1:1,2:4,3:10.",
    ),
    "discount": lambda: click.option(
        "--discount",
        default="log2",
        show_default=True,
        help="nDCG discount: log2 = log2(rank+1) (trec_eval), or jk[:B] = Järvelin-Kekäläinen "
        "(none below rank B, log_B(rank) after).",
    ),
    "judged_compat": lambda: click.option(
        "--judged-compat",
        type=click.Choice(["twostage", "pyserini"]),
        default="twostage",
        show_default=True,
        help="judged.k definition: twostage (top k in trec_eval order, per-query mean) or pyserini "
        "(first k file lines, pooled).",
    ),
    "rel_map": lambda: click.option(
        "--relevance-map",
        "rel_map",
        default=None,
        help="Map qrels labels at load time, e.g. 1:4,2:3,3:2,4:1,-1:0 or a preset (cranfield).",
    ),
    "dedupe": lambda: click.option(
        "--dedupe",
        type=click.Choice(["error", "first"]),
        default="error",
        show_default=True,
        help="Duplicate (query, doc) lines: error (as trec_eval), or keep the first and report how many were dropped.",
    ),
    "data_dir": lambda: click.option(
        "--data-dir",
        type=click.Path(file_okay=False),
        default=None,
        envvar="TWOSTAGE_DATA",
        help="Data folder for qrels given by name (default: $TWOSTAGE_DATA or ../shared/data).",
    ),
}

SETTINGS_KEYS = (
    "complete",
    "level",
    "max_docs",
    "judged_only",
    "num_docs",
    "trec_eval",
    "score_precision",
    "gain",
    "discount",
    "judged_compat",
)


def evaluation_options(f=None, *, exclude: tuple[str, ...] = ()):
    """Decorator adding every evaluation option (``exclude`` names those a command fixes itself)."""

    def decorate(fn):
        for name in reversed(list(_OPTIONS)):
            if name not in exclude:
                fn = _OPTIONS[name]()(fn)
        return fn

    return decorate(f) if f is not None else decorate


def settings_from(options: dict, **fixed) -> EvalSettings:
    """EvalSettings from a command's option values (the keys of ``evaluation_options``); ``fixed`` overrides."""
    values = {k: options.get(k) for k in SETTINGS_KEYS if k in options}
    values.update(fixed)
    try:
        return build_settings(values)
    except TwostageError as exc:
        raise click.BadParameter(str(exc)) from None


def pop_settings(options: dict) -> dict:
    """Remove the evaluation options from a command's keyword arguments; returns them."""
    return {k: options.pop(k) for k in list(_OPTIONS) if k in options}
