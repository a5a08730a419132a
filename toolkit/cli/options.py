"""The one declaration of every option that more than one command takes.

Shared groups are tuples of ``toolkit.cli.declare.Flag`` (``EVALUATION``, ``SIGNIFICANCE``, ``interval_flags``,
``SEED_FLAG``, ``HOLES_OVER_FLAG``, ``FAMILY_FLAG``, ``DATA_DIR_FLAG``, ``CLIENT``: the HTTP settings of
``toolkit.guard.client.RequestPolicy``, ``ENDPOINT_FLAG``, ``DEVICE_FLAG``, ``PRECISION_FLAG``, ``TRUST_CACHE_FLAG``, ``prompt_flag``):
each the CLI spelling of a keyword of the verbs' options objects, which the commands built on ``options_of``
(``eval``, ``compare``, ``diagnose``, ``judge``, ``risk``, ``power``, ``pool-test``, ``agreement``, ``index``, ``bm25``,
``dense``, ``fuse``) put in their tables; the other commands add the same options with the decorators below
(``evaluation_options``, ``client_options``, ...).

Evaluation settings: ``eval``, ``compare``, ``diagnose``, ``risk``, ``power``, ``pool-test``, ``agreement`` and
``gain-sensitivity`` take these options (trec_eval's flags plus twostage's nDCG choices); all but the last receive
them built into their options object, ``gain-sensitivity`` turns them into an ``EvalSettings`` with
``settings_from``; each option's parameter is the setting's one name (``toolkit.measures.settings``), which reproduction specs use as YAML keys
and build with the same ``measures.build_settings``. Measure names are parsed by
``measures.parse_measures`` everywhere.

The others: ``DATA_DIR`` (every command that reads a collection by name), ``DEVICE`` and
``PRECISION`` (every command that runs a model), ``TRUST_CACHE`` (every command that reads a cache:
``experiment run``, ``rerank``, ``judge``), ``significance_options`` (``SIGNIFICANCE``, for the commands not
built on ``options_of``) and ``trec_eval_option``. Choices come from the library's constants, so a new
choice is added in one place.

Runs: every command that takes runs reads each as ``[NAME=]RUN`` with ``split_named`` (``named_runs`` for a list
of them, ``expand_named_runs`` for ``eval``'s folders and globs), so ``NAME=RUN`` means the same everywhere, and
reads it in the format ``--run-format`` names (``run_format_option``: TREC's, MS MARCO's, or detected).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from types import MappingProxyType
from typing import get_args

import click

from toolkit.cli.declare import Flag, Row, apply, flag
from toolkit.data.ranking import SCORE_PRECISIONS
from toolkit.data.trec_io import DedupePolicy
from toolkit.errors import TwostageError
from toolkit.guard.client import RequestPolicy
from toolkit.measures.names import DEFAULT_TREC_EVAL, TREC_EVAL_VERSIONS, EvalSettings, build_settings
from toolkit.measures.settings import JUDGED_COMPAT, SETTING_NAMES
from toolkit.models import DEFAULT_DEVICE, PRECISIONS
from toolkit.stats.significance import CORRECTIONS

DATA_DIR_FLAG = flag(
    "data_dir",
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    envvar="TWOSTAGE_DATA",
    help="Data folder for collections and qrels given by name, and for a spec's relative paths "
    "(default: $TWOSTAGE_DATA or ../shared/data).",
)
DATA_DIR = DATA_DIR_FLAG.option()

DEVICE_FLAG = flag(
    "device",
    "--device",
    default=DEFAULT_DEVICE,
    show_default=True,
    help="Where the model runs: auto (cuda when available, else cpu), cpu, cuda, cuda:N, mps. The same default "
    "for index, dense and rerank: a GPU is used where there is one (with --ray: when workers hold one); "
    "pass cpu for the same scores on every machine.",
)
DEVICE = DEVICE_FLAG.option()

#: ``--trust-cache``: read caches that another user owns or may write to (``toolkit.guard.store``), as
#: ``trust_cache=True`` in the library.
TRUST_CACHE_FLAG = flag(
    "trust_cache",
    "--trust-cache",
    "trust_cache",
    is_flag=True,
    help="Read the caches (stage, embedding, ONNX, judgments) even when their folder or entries are owned by another "
    "user or writable by group or others; without it such a cache is not read (a warning says which). Entries are "
    "still checked against their key and checksum.",
)
TRUST_CACHE = TRUST_CACHE_FLAG.option()

PRECISION_FLAG = flag(
    "precision",
    "--precision",
    type=click.Choice(PRECISIONS),
    default="auto",
    show_default=True,
    help="auto: fp32 everywhere (the CPU's ranking, also on CUDA); tf32, fp16, bf16: faster on CUDA only, and "
    "they change some rankings (the run's sidecar states the measured change; see docs/gpu.md).",
)
PRECISION = PRECISION_FLAG.option()


def trec_eval_flag(default: str | None = str(DEFAULT_TREC_EVAL), meaning: str = "") -> Flag:
    """``--trec-eval 9|10``: the semantics of a generation (eval), or a filter (``measures``, default None)."""
    return flag(
        "trec_eval",
        "--trec-eval",
        "trec_eval",
        type=click.Choice([str(v) for v in TREC_EVAL_VERSIONS]),
        default=default,
        show_default=default is not None,
        help=meaning
        or "Semantics of trec_eval 9 (Pyserini's bundled 9.0.4: float scores, iprec cutoffs floor(x*R+0.9)) "
        "or 10 (double scores, round(x*R), rbp/unj, -c lists missing queries).",
        convert=int,
    )


def trec_eval_option(default: str | None = str(DEFAULT_TREC_EVAL), meaning: str = ""):
    """``trec_eval_flag``'s click option."""
    return trec_eval_flag(default, meaning).option()


#: ``--seed``: one seed for every random step of a command (randomization test, bootstrap intervals).
SEED_FLAG = flag(
    "seed",
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Seed of numpy's default_rng for every random step: the randomization test, the bootstrap intervals, "
    "rerank's order probe (--shuffles).",
)
SEED = SEED_FLAG.option()

#: ``--permutations --seed --correction`` of the paired randomization test.
SIGNIFICANCE: tuple[Flag, ...] = (
    flag(
        "permutations",
        "--permutations",
        type=click.IntRange(min=1),
        default=10_000,
        show_default=True,
        help="Random sign flips of the randomization test (all 2^n when that is not more).",
    ),
    SEED_FLAG,
    flag(
        "correction",
        "--correction",
        type=click.Choice(CORRECTIONS),
        default=CORRECTIONS[0],
        show_default=True,
        help="Multiple-comparison correction of the randomization test's p-values, within each family of "
        "comparisons (compare: the runs compared with the baseline, per measure). holm, bonferroni, holm-sidak "
        "and sidak bound the family-wise error, bh (Benjamini-Hochberg; statsmodels' fdr_bh) and fdr_by "
        "(Benjamini-Yekutieli) the false discovery rate; each as statsmodels' multipletests computes it.",
    ),
)


def significance_options(f):
    """``--permutations --seed --correction`` of the paired randomization test."""
    return apply(SIGNIFICANCE, f)


#: The evaluation settings' flags (and the qrels' reading), each the CLI spelling of an options keyword (its
#: click parameter keeps the setting's one name); the order is the order in --help.
EVALUATION: tuple[Flag, ...] = (
    flag(
        "complete",
        "-c",
        "complete",
        is_flag=True,
        help="Average over every judged query; queries missing from the run count as 0 (trec_eval -c).",
    ),
    flag(
        "relevance_level",
        "-l",
        "relevance_level",
        type=click.IntRange(min=0),
        default=1,
        show_default=True,
        help="Relevance level: labels >= LEVEL are relevant (binary measures; not nDCG).",
    ),
    flag(
        "max_docs",
        "-M",
        "max_docs",
        type=click.IntRange(min=1),
        default=None,
        help="Evaluate only the top N documents of each query.",
    ),
    flag(
        "judged_only",
        "-J",
        "judged_only",
        is_flag=True,
        help="Judged documents only: drop unjudged documents before ranking (condensed list).",
    ),
    flag(
        "num_docs",
        "-N",
        "num_docs",
        type=click.IntRange(min=0),
        default=0,
        help="Number of documents in the collection (utility's fourth coefficient).",
    ),
    trec_eval_flag(),
    flag(
        "score_precision",
        "--score-precision",
        type=click.Choice(SCORE_PRECISIONS),
        default=None,
        help="Compare scores as 32-bit floats or doubles [default: the --trec-eval generation's: 9 float32, "
        "10 float64].",
    ),
    flag(
        "gain",
        "--gain",
        default="linear",
        show_default=True,
        help="nDCG gain: linear (trec_eval), exp (2^rel-1), or a map like 0:0,1:1,2:4,3:10.",
    ),
    flag(
        "discount",
        "--discount",
        default="log2",
        show_default=True,
        help="nDCG discount: log2 = log2(rank+1) (trec_eval), or jk[:B] = Järvelin-Kekäläinen "
        "(none below rank B, log_B(rank) after).",
    ),
    flag(
        "judged_compat",
        "--judged-compat",
        type=click.Choice(JUDGED_COMPAT),
        default=JUDGED_COMPAT[0],
        show_default=True,
        help="judged.k definition: twostage (top k in trec_eval order, per-query mean) or pyserini "
        "(first k file lines, pooled).",
    ),
    flag(
        "relevance_map",
        "--relevance-map",
        "rel_map",
        default=None,
        help="Map qrels labels at load time, e.g. 1:4,2:3,3:2,4:1,-1:0 or a preset (cranfield).",
    ),
    flag(
        "dedupe",
        "--dedupe",
        type=click.Choice(get_args(DedupePolicy)),
        default="error",
        show_default=True,
        help="Duplicate (query, doc) lines: error (as trec_eval), or keep the first and report how many were dropped.",
    ),
    DATA_DIR_FLAG,
)

#: Click parameter name -> its flag, for the commands that read the settings from their parameters.
_OPTIONS = MappingProxyType({f.param: f for f in EVALUATION})


def run_format_option(f):
    """``--run-format trec|msmarco|auto``: the format of every run the command reads (its files, ``-``, a spec's
    runs), as ``toolkit.data.trec_io.runs_read_as`` sets it around the command's body; the runs twostage writes
    and reads back itself are read as TREC runs whatever it says. Every command that reads a run takes it (those
    with ``evaluation_options`` through them)."""
    import functools

    from toolkit.data.trec_io import RunFormat, runs_read_as

    @functools.wraps(f)
    def within(*args, run_format: RunFormat, **kwargs):
        with runs_read_as(run_format):
            return f(*args, **kwargs)

    return click.option(
        "--run-format",
        "run_format",
        type=click.Choice(get_args(RunFormat)),
        default="auto",
        show_default=True,
        help="Format of the runs read: trec (qid Q0 docid rank score tag), msmarco (qid<TAB>pid<TAB>rank, MS MARCO's; "
        "each rank becomes the score 1/rank and the tag is anserini, as Pyserini's convert_msmarco_run_to_trec_run "
        "writes them), or auto (each run's first line decides: three columns with a whole-number rank third are "
        "MS MARCO's).",
    )(within)


def evaluation_flags(exclude: tuple[str, ...] = ()) -> tuple[Row, ...]:
    """The rows of every evaluation option (``exclude`` names those a command fixes itself) and ``--run-format``
    (every command with evaluation options reads runs), for a command's table (``toolkit.cli.declare``)."""
    return (*(f for f in EVALUATION if f.param not in exclude), run_format_option)


def evaluation_options(f=None, *, exclude: tuple[str, ...] = ()):
    """Decorator adding ``evaluation_flags(exclude)``."""

    def decorate(fn):
        return apply(evaluation_flags(exclude), fn)

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
    """``eval``'s runs: each ``NAME=RUN`` (one file, or '-') or a bare RUN, folder or glob (``run_files.expand_runs``,
    which names them); (name, path) in order, a name or a file given twice is an error."""
    from toolkit.data.run_files import expand_runs, run_names

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


def interval_flags(default_level: float | None = 0.95) -> tuple[Flag, ...]:
    """``--ci LEVEL --bootstrap N --ci-method`` of the bootstrap intervals (``stats.intervals``);
    ``default_level`` None: no interval unless --ci is given (``eval``)."""
    from toolkit.stats.intervals import CI_METHODS, DEFAULT_RESAMPLES

    return (
        flag(
            "ci",
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
        flag(
            "bootstrap",
            "--bootstrap",
            "bootstrap",
            type=click.IntRange(min=1),
            default=DEFAULT_RESAMPLES,
            show_default=True,
            help="Bootstrap resamples of the queries (seeded by --seed).",
        ),
        flag(
            "ci_method",
            "--ci-method",
            type=click.Choice(CI_METHODS),
            default=CI_METHODS[0],
            show_default=True,
            help="percentile, or bca (bias-corrected and accelerated): as scipy.stats.bootstrap computes them.",
        ),
    )


def _holes_over_choices() -> tuple[str, ...]:
    from toolkit.quality.holes import HOLES_OVER

    return HOLES_OVER


#: ``--holes-over``: what ``--holes``'s bounds range over (given alone, it turns --holes on: a later flag of
#: the ``holes`` keyword, given, wins over ``--holes``).
#: The qrels and the measures of the commands that compare runs (``compare``, ``risk``): RUNS may be saved
#: evaluations, so the qrels are optional.
RUNS_QRELS_OPTION = click.option(
    "--qrels", default=None, help="Qrels file or collection name (cacm, dl19-passage, ...); needed for run files."
)
RUNS_MEASURES_OPTION = click.option(
    "-m",
    "measure_texts",
    multiple=True,
    metavar="MEASURE[.CUTOFFS]",
    help="Measure, repeatable [default: ndcg_cut.10].",
)

HOLES_OVER_FLAG = flag(
    "holes",
    "--holes-over",
    type=click.Choice(_holes_over_choices()),
    default=None,
    help="What --holes's bounds range over: top-k (the default: every labelling of the unjudged documents in the "
    "top k, the ideal ranking from the judged documents plus those) or retrieved (every unjudged document the run "
    "retrieved, the ideal recomputed: exact, and wider). Implies --holes.",
)


FAMILY_FLAG = flag(
    "family",
    "--family",
    type=click.Choice(("baseline", "all-pairs")),
    default="baseline",
    show_default=True,
    help="The family a correction covers: every run against the baseline(s), or every pair of runs (which "
    "also gets a randomised Tukey HSD, --test tukey). Runs identical to another are left out and named.",
)


def qrels_policy_options(f):
    """``--judge-qrels FILE --qrels-policy human|fill|judge``: qrels merged from human and judge labels
    (``quality.qrels_origin``); ``eval``, ``compare`` and ``diagnose`` take them."""
    from toolkit.quality.qrels_origin import QRELS_POLICIES

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
class HostOption(click.Option):
    """An option whose value names a remote host (a URL, ``HOST:PORT``): ``twostage reproduce`` refuses a spec's
    step giving one unless the command line allows the host (``toolkit.reproduction.runner.HOST_OPTIONS`` lists
    every such option; tests/reproduction/test_spec_endpoints.py checks the two agree)."""


#: ``--endpoint URL``: the OpenAI-compatible endpoint of ``judge`` and ``rerank --backend listwise``.
ENDPOINT_FLAG = flag(
    "endpoint",
    "--endpoint",
    cls=HostOption,
    default=None,
    metavar="URL",
    help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1.",
)
ENDPOINT = ENDPOINT_FLAG.option()


def _client_flags() -> tuple[Flag, ...]:
    """The flags of ``RequestPolicy``'s keywords, their defaults the policy's own."""
    policy = RequestPolicy.keywords()
    return (
        flag(
            "concurrency",
            "--concurrency",
            type=click.IntRange(min=1),
            default=policy["concurrency"].default,
            show_default=True,
            help="--endpoint: requests in flight.",
        ),
        flag(
            "timeout",
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=policy["timeout"].default,
            show_default=True,
            help="--endpoint: seconds, a deadline for each whole request (connecting, sending, the whole answer).",
        ),
        flag(
            "max_response_bytes",
            "--max-response-bytes",
            type=click.IntRange(min=1),
            default=policy["max_response_bytes"].default,
            show_default=True,
            help="--endpoint: the longest answer read; a longer one is a failed request.",
        ),
        flag(
            "retries",
            "--retries",
            type=click.IntRange(min=0),
            default=policy["retries"].default,
            show_default=True,
            help="--endpoint: retries of a timeout, refused connection, HTTP 429 or 5xx.",
        ),
        flag(
            "backoff",
            "--backoff",
            type=click.FloatRange(min=0),
            default=policy["backoff"].default,
            show_default=True,
            help="--endpoint: seconds before the first retry, doubling each time.",
        ),
        flag(
            "rate",
            "--rate",
            type=click.FloatRange(min=0, min_open=True),
            default=policy["rate"].default,
            help="--endpoint: at most this many requests per second.",
        ),
    )


#: The HTTP client's settings (``toolkit.guard.client.RequestPolicy``, one flag per keyword) of every command
#: that calls an endpoint: ``judge`` and ``rerank --backend listwise``.
CLIENT: tuple[Flag, ...] = _client_flags()


def client_options(f):
    """``CLIENT``'s options, for a command that reads their values itself (``rerank``)."""
    return apply(CLIENT, f)


def prompt_flag(default: str) -> Flag:
    """``--prompt FILE``: a prompt template (YAML front matter, then the text); ``default`` says what is used
    without it."""
    return flag(
        "prompt",
        "--prompt",
        "prompt_path",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"Prompt template file: YAML front matter, then the text [default: {default}].",
    )


def prompt_option(default: str):
    """``prompt_flag``'s click option."""
    return prompt_flag(default).option()
