"""The one declaration of every option that more than one command takes.

Evaluation settings: ``eval``, ``compare``, ``gain-sensitivity`` and ``diagnose`` take these
options (trec_eval's flags plus twostage's nDCG choices) through ``evaluation_options``, and
turn them into an ``EvalSettings`` with ``settings_from``; each option's parameter is the
setting's one name (``toolkit.measures.settings``), which reproduction specs use as YAML keys
and build with the same ``measures.build_settings``. Measure names are parsed by
``measures.parse_measures`` everywhere.

The others: ``DATA_DIR`` (every command that reads a collection by name), ``DEVICE`` and
``PRECISION`` (every command that runs a model), ``TRUST_CACHE`` (every command that reads a cache:
``experiment run``, ``rerank``, ``judge``), ``significance_options`` (``compare`` and
``diagnose``) and ``trec_eval_option``. Choices come from the library's constants, so a new
choice is added in one place.

Runs: every command that takes runs reads each as ``[NAME=]RUN`` with ``split_named`` (``named_runs`` for a list
of them, ``expand_named_runs`` for ``eval``'s folders and globs), so ``NAME=RUN`` means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import get_args

import click

from toolkit.data.ranking import SCORE_PRECISIONS
from toolkit.data.trec_io import DedupePolicy
from toolkit.errors import TwostageError
from toolkit.evaluation.significance import CORRECTIONS
from toolkit.guard.client import (
    DEFAULT_BACKOFF,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
)
from toolkit.measures.names import DEFAULT_TREC_EVAL, TREC_EVAL_VERSIONS, EvalSettings, build_settings
from toolkit.measures.settings import JUDGED_COMPAT, SETTING_NAMES
from toolkit.models import DEFAULT_DEVICE, PRECISIONS

DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    envvar="TWOSTAGE_DATA",
    help="Data folder for collections and qrels given by name, and for a spec's relative paths "
    "(default: $TWOSTAGE_DATA or ../shared/data).",
)

DEVICE = click.option(
    "--device",
    default=DEFAULT_DEVICE,
    show_default=True,
    help="Where the model runs: auto (cuda when available, else cpu), cpu, cuda, cuda:N, mps. The same default "
    "for index, dense and rerank: a GPU is used where there is one (with --ray: when workers hold one); "
    "pass cpu for the same scores on every machine.",
)

#: ``--trust-cache``: read caches that another user owns or may write to (``toolkit.guard.store``), as
#: ``trust_cache=True`` in the library.
TRUST_CACHE = click.option(
    "--trust-cache",
    "trust_cache",
    is_flag=True,
    help="Read the caches (stage, embedding, ONNX, judgments) even when their folder or entries are owned by another "
    "user or writable by group or others; without it such a cache is not read (a warning says which). Entries are "
    "still checked against their key and checksum.",
)

PRECISION = click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="auto",
    show_default=True,
    help="auto: fp32 everywhere (the CPU's ranking, also on CUDA); tf32, fp16, bf16: faster on CUDA only, and "
    "they change some rankings (the run's sidecar states the measured change; see docs/gpu.md).",
)


def trec_eval_option(default: str | None = str(DEFAULT_TREC_EVAL), meaning: str = ""):
    """``--trec-eval 9|10``: the semantics of a generation (eval), or a filter (``measures``, default None)."""
    return click.option(
        "--trec-eval",
        "trec_eval",
        type=click.Choice([str(v) for v in TREC_EVAL_VERSIONS]),
        default=default,
        show_default=default is not None,
        help=meaning
        or "Semantics of trec_eval 9 (Pyserini's bundled 9.0.4: float scores, iprec cutoffs floor(x*R+0.9)) "
        "or 10 (double scores, round(x*R), rbp/unj, -c lists missing queries).",
    )


#: ``--seed``: one seed for every random step of a command (randomization test, bootstrap intervals).
SEED = click.option(
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Seed of numpy's default_rng for every random step: the randomization test, the bootstrap intervals, "
    "rerank's order probe (--shuffles).",
)

_SIGNIFICANCE = [
    click.option(
        "--permutations",
        type=click.IntRange(min=1),
        default=10_000,
        show_default=True,
        help="Random sign flips of the randomization test (all 2^n when that is not more).",
    ),
    SEED,
    click.option(
        "--correction",
        type=click.Choice(CORRECTIONS),
        default=CORRECTIONS[0],
        show_default=True,
        help="Multiple-comparison correction of the randomization test's p-values, within each family of "
        "comparisons (compare: the runs compared with the baseline, per measure). holm, bonferroni, holm-sidak "
        "and sidak bound the family-wise error, bh (Benjamini-Hochberg; statsmodels' fdr_bh) and fdr_by "
        "(Benjamini-Yekutieli) the false discovery rate; each as statsmodels' multipletests computes it.",
    ),
]


def significance_options(f):
    """``--permutations --seed --correction`` of the paired randomization test."""
    for opt in reversed(_SIGNIFICANCE):
        f = opt(f)
    return f


#: Option name -> (click decorator factory). Order is the order in --help.
_OPTIONS = {
    "complete": lambda: click.option(
        "-c",
        "complete",
        is_flag=True,
        help="Average over every judged query; queries missing from the run count as 0 (trec_eval -c).",
    ),
    "relevance_level": lambda: click.option(
        "-l",
        "relevance_level",
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
    "trec_eval": trec_eval_option,
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
        type=click.Choice(JUDGED_COMPAT),
        default=JUDGED_COMPAT[0],
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
        type=click.Choice(get_args(DedupePolicy)),
        default="error",
        show_default=True,
        help="Duplicate (query, doc) lines: error (as trec_eval), or keep the first and report how many were dropped.",
    ),
    "data_dir": lambda: DATA_DIR,
}


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
    values = {k: options.get(k) for k in SETTING_NAMES if k in options}
    values.update(fixed)
    try:
        return build_settings(values)
    except TwostageError as exc:
        raise click.BadParameter(str(exc)) from None


def pop_settings(options: dict) -> dict:
    """Remove the evaluation options from a command's keyword arguments; returns them."""
    return {k: options.pop(k) for k in list(_OPTIONS) if k in options}


def api_options(s: dict) -> dict:
    """The shared evaluation options (``pop_settings``) as the library's keywords (``toolkit.evaluate``'s)."""
    names = {"level": "relevance_level", "rel_map": "relevance_map"}
    out = {names.get(k, k): v for k, v in s.items() if v is not None}
    if "trec_eval" in out:
        out["trec_eval"] = int(out["trec_eval"])
    return out


#: How a run argument is written wherever runs are taken.
RUN_SPEC = "[NAME=]RUN"


def split_named(value: str) -> tuple[str | None, str]:
    """``NAME=RUN`` -> (NAME, RUN); a bare RUN -> (None, RUN). A value that exists as a file as written, or whose
    part before ``=`` is empty or holds a ``/``, is a bare path (``a=b.txt`` that exists stays a file name)."""
    name, sep, path = value.partition("=")
    if not sep or not name or not path or "/" in name or Path(value).exists():
        return None, value
    return name, path


def named_runs(
    values: Iterable[str], bare_name: Callable[[str], str] = lambda p: Path(p).name, option: str = "RUN"
) -> dict[str, str]:
    """``[NAME=]RUN`` values -> {name: path}, in order; a bare RUN is named by ``bare_name`` (its file name, or
    the path as given where file names repeat). A name given twice is a usage error naming ``NAME=RUN``."""
    split = [split_named(v) for v in values]
    bare = [p for n, p in split if n is None]
    if len({bare_name(p) for p in bare}) < len(bare):  # file names repeat: the paths as given tell them apart
        bare_name = str
    out: dict[str, str] = {}
    for name, path in split:
        key = name if name is not None else bare_name(path)
        if key in out:
            raise click.UsageError(f"two runs named {key!r} (the same run given twice?); name them {option} NAME=RUN")
        out[key] = path
    return out


def expand_named_runs(values: Iterable[str]) -> list[tuple[str, str]]:
    """``eval``'s runs: each ``NAME=RUN`` (one file, or '-') or a bare RUN, folder or glob (``multi.expand_runs``,
    which names them); (name, path) in order, a name or a file given twice is an error."""
    from toolkit.evaluation.multi import expand_runs, run_names

    slots: list[tuple[str | None, list[str]]] = []
    for v in values:
        name, path = split_named(v)
        if name is not None and path != "-" and not Path(path).is_file():
            raise click.BadParameter(f"{v}: NAME=RUN names one run file, and {path} is not one", param_hint="RUN")
        slots.append((name, [path] if name is not None else [p for _, p in expand_runs([path])]))
    expand_runs([p for _, paths in slots for p in paths])  # a file (or '-') given twice is an error
    bare = iter(run_names([p for n, paths in slots if n is None for p in paths]))
    out = [(n, p) if n is not None else (next(bare), p) for n, paths in slots for p in paths]
    names = [n for n, _ in out]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise click.UsageError(f"two runs named {twice!r}; name them NAME=RUN")
    return out


PROFILE = click.option(
    "--profile",
    is_flag=True,
    help="Print where the time goes to stderr (imports, model load, CUDA context, reading, scoring, writing).",
)


def writable_file(ctx: click.Context, param: click.Parameter, value):
    """``--out FILE`` callback: the file's folder can be written (``toolkit.guard.preflight``), checked as the option
    is parsed, before any input is read; an error is one ``Error:`` line."""
    from toolkit.guard.preflight import check_writable

    if value is not None and value != "-":
        check_writable(value, f"--{param.name}".replace("_", "-") if param.name else "--out")
    return value


def writable_folder(ctx: click.Context, param: click.Parameter, value):
    """``--out FOLDER`` callback: as ``writable_file``, for an output folder."""
    from toolkit.guard.preflight import check_writable

    if value is not None:
        check_writable(value, f"--{param.name}".replace("_", "-") if param.name else "--out", folder=True)
    return value


def _level(ctx, param, value):
    """--ci: a level strictly between 0 and 1 (a usage error otherwise)."""
    if value is not None and not 0.0 < value < 1.0:
        raise click.BadParameter(f"the interval level must lie strictly between 0 and 1 (e.g. 0.95), got {value}")
    return value


def interval_options(default_level: float | None = 0.95):
    """``--ci LEVEL --bootstrap N --ci-method`` of the paired bootstrap interval (``evaluation.intervals``);
    ``default_level`` None: no interval unless --ci is given (``eval``)."""
    from toolkit.evaluation.intervals import CI_METHODS, DEFAULT_RESAMPLES

    opts = [
        click.option(
            "--ci",
            "ci_level",
            type=float,
            default=default_level,
            show_default=default_level is not None,
            callback=_level,
            metavar="LEVEL",
            help="Confidence level of the bootstrap intervals (of each mean, and of each paired difference), "
            "in (0, 1).",
        ),
        click.option(
            "--bootstrap",
            "bootstrap",
            type=click.IntRange(min=1),
            default=DEFAULT_RESAMPLES,
            show_default=True,
            help="Bootstrap resamples of the queries (seeded by --seed).",
        ),
        click.option(
            "--ci-method",
            type=click.Choice(CI_METHODS),
            default=CI_METHODS[0],
            show_default=True,
            help="percentile, or bca (bias-corrected and accelerated): as scipy.stats.bootstrap computes them.",
        ),
    ]

    def decorate(f):
        for opt in reversed(opts):
            f = opt(f)
        return f

    return decorate


def _holes_over_choices() -> tuple[str, ...]:
    from toolkit.evaluation.holes import HOLES_OVER

    return HOLES_OVER


#: ``--holes-over``: what ``--holes``'s bounds range over (given alone, it turns --holes on).
HOLES_OVER = click.option(
    "--holes-over",
    type=click.Choice(_holes_over_choices()),
    default=None,
    help="What --holes's bounds range over: top-k (the default: every labelling of the unjudged documents in the "
    "top k, the ideal ranking from the judged documents plus those) or retrieved (every unjudged document the run "
    "retrieved, the ideal recomputed: exact, and wider). Implies --holes.",
)


def holes_request(holes: bool, holes_over: str | None) -> bool | str:
    """The library's ``holes=`` from ``--holes`` and ``--holes-over``."""
    return holes_over or holes


FAMILY = click.option(
    "--family",
    type=click.Choice(("baseline", "all-pairs")),
    default="baseline",
    show_default=True,
    help="The family a correction covers: every run against the baseline(s), or every pair of runs (which "
    "also gets a randomised Tukey HSD, --test tukey). Runs identical to another are left out and named.",
)


def qrels_policy_options(f):
    """``--judge-qrels FILE --qrels-policy human|fill|judge``: qrels merged from human and judge labels
    (``evaluation.qrels_origin``); ``eval``, ``compare`` and ``diagnose`` take them."""
    from toolkit.evaluation.qrels_origin import QRELS_POLICIES

    f = click.option(
        "--qrels-policy",
        type=click.Choice(QRELS_POLICIES),
        default="fill",
        show_default=True,
        help="With --judge-qrels: human (human labels only), fill (human labels, the judge's where humans "
        "gave none), judge (the judge's only). The provenance states the policy and the labels of each origin.",
    )(f)
    return click.option(
        "--judge-qrels",
        type=click.Path(dir_okay=False),
        default=None,
        help="Qrels written by `twostage judge` (an LLM's labels), merged with the human qrels by --qrels-policy.",
    )(f)


# ------------------------------------------------------------------ LLM endpoints (judge, rerank --backend listwise)
ENDPOINT = click.option(
    "--endpoint", default=None, metavar="URL", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1."
)

_CLIENT = [
    click.option(
        "--concurrency",
        type=click.IntRange(min=1),
        default=DEFAULT_CONCURRENCY,
        show_default=True,
        help="--endpoint: requests in flight.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        help="--endpoint: seconds, a deadline for each whole request (connecting, sending, the whole answer).",
    ),
    click.option(
        "--max-response-bytes",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_RESPONSE_BYTES,
        show_default=True,
        help="--endpoint: the longest answer read; a longer one is a failed request.",
    ),
    click.option(
        "--retries",
        type=click.IntRange(min=0),
        default=DEFAULT_RETRIES,
        show_default=True,
        help="--endpoint: retries of a timeout, refused connection, HTTP 429 or 5xx.",
    ),
    click.option(
        "--backoff",
        type=click.FloatRange(min=0),
        default=DEFAULT_BACKOFF,
        show_default=True,
        help="--endpoint: seconds before the first retry, doubling each time.",
    ),
    click.option(
        "--rate",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="--endpoint: at most this many requests per second.",
    ),
]


def client_options(f):
    """The HTTP client's settings (``toolkit.guard.client.Endpoint``) of every command that calls an endpoint."""
    for option in reversed(_CLIENT):
        f = option(f)
    return f


def prompt_option(default: str):
    """``--prompt FILE``: a prompt template (YAML front matter, then the text); ``default`` says what is used
    without it."""
    return click.option(
        "--prompt",
        "prompt_path",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"Prompt template file: YAML front matter, then the text [default: {default}].",
    )
