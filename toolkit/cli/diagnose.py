"""``twostage diagnose``: where two-stage quality is lost (candidates or reranking), how deep to rerank, and
how rerankers compare."""

from __future__ import annotations

import logging
from pathlib import Path
from types import MappingProxyType

import click

from toolkit.cli.declare import Flag, Row, flag, options_of
from toolkit.cli.eval import echo_qrels_notes
from toolkit.cli.options import (
    SIGNIFICANCE,
    evaluation_flags,
    interval_flags,
    qrels_policy_options,
    split_named,
    writable_folder,
)
from toolkit.cli.terminal import echo
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.guard.numbers import NumberRefused, natural

log = logging.getLogger(__name__)

#: Evaluation options diagnose declares itself (its -c is on by default, its -l is the binary level).
_OWN = ("complete", "relevance_level")
_LISTWISE_ALL = "\0all"


def _named_paths(values: tuple[str, ...], option: str, taken: dict[str, str] | None = None) -> dict[str, str]:
    """NAME=PATH (or PATH, named by its file name) -> {name: path}; a name given twice is a usage error. A file
    name already in ``taken`` (the same file as first stage and reranked run) gets ' (reranked)'."""
    out: dict[str, str] = {}
    for v in values:
        given, path = split_named(v)  # the one reading of NAME=RUN (toolkit.cli.options)
        if given is not None:
            name = given
        else:
            name = Path(v).name
            for suffix in (".gz", ".trec", ".txt", ".run"):
                name = name.removesuffix(suffix)
            if taken and name in taken:
                name += " (reranked)"
        if name in out or (taken and name in taken):
            raise click.BadParameter(f"two runs named {name!r}; name them: {option} NAME=RUN", param_hint=option)
        out[name] = path
    return out


def _repeats(named: dict[str, str]) -> dict[str, str | list[str]]:
    """NAME=RUN1,RUN2,... -> {name: [RUN1, RUN2, ...]}: repeats of one system (a path that exists as written,
    commas and all, is one run)."""
    return {n: p if Path(p).exists() or "," not in p else [x for x in p.split(",") if x] for n, p in named.items()}


def _depths(values: tuple[str, ...], names: list[str]) -> int | dict[str, int] | None:
    """--depth K (every run) or --depth NAME=K (repeatable) -> what ``diagnose`` takes; a name that is no
    reranked run, or a depth below 1, is a usage error."""
    if not values:
        return None
    every: int | None = None
    per: dict[str, int] = {}
    for v in values:
        name, sep, k = v.rpartition("=")
        try:  # the numbers door: the digits 0-9 (a leading '-' reads as a depth below 1)
            depth = -natural(k[1:], what="depth") if k.startswith("-") else natural(k, what="depth")
        except NumberRefused:
            raise click.BadParameter(f"expected K or NAME=K, got {v!r}", param_hint="'--depth'") from None
        if depth < 1:
            raise click.BadParameter(f"a rerank depth must be >= 1, got {v!r}", param_hint="'--depth'")
        if not sep:
            every = depth
        elif name not in names:
            raise click.BadParameter(
                f"{name!r} names no reranked run (reranked runs: {', '.join(names)})", param_hint="'--depth'"
            )
        else:
            per[name] = depth
    if every is not None and not per:
        return every
    return {n: per.get(n, every) for n in names if n in per or every is not None}  # type: ignore[misc]


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        rr, sep, first = v.partition("=")
        if not sep or not rr or not first:
            raise click.BadParameter(f"expected RERANKED=FIRST_STAGE (run names), got {v!r}", param_hint="'--pair'")
        out[rr] = first
    return out


def _curve_depth_values(text: str) -> tuple[int, ...]:
    """--curve-depths K,K,...: the depths (each >= 1: ``DiagnosisOptions``' rule)."""
    try:  # the numbers door: the digits 0-9, at most 18 each
        return tuple(natural(k, what="depth") for k in text.replace(" ", "").split(",") if k)
    except NumberRefused:
        raise click.BadParameter(
            f"expected depths like 10,20,50, got {text!r}", param_hint="'--curve-depths'"
        ) from None


def _listwise(values: tuple[str, ...]) -> bool | tuple[str, ...]:
    """--listwise [NAME] (repeatable): the names, or True where one was given without a name."""
    return True if _LISTWISE_ALL in values else values


def _count(decl: str, keyword: str, default: int, help: str, least: int = 0, param: str | None = None) -> Flag:
    """A flag of how many things to list (an integer >= ``least``)."""
    decls = (decl, param) if param else (decl,)
    return flag(keyword, *decls, type=click.IntRange(min=least), default=default, show_default=True, help=help)


#: ``twostage diagnose``'s options, in --help's order: the flags of ``DiagnosisOptions`` and the command's own
#: (the runs, the texts, the query types, the report folder and --depth).
DIAGNOSE: tuple[Row, ...] = (
    click.option("--qrels", required=True, help="Qrels file or collection name (dl19-passage, dl20-passage, cacm)."),
    click.option(
        "--first-stage",
        "first_paths",
        required=True,
        multiple=True,
        metavar="[NAME=]RUN",
        help="First-stage TREC run (the candidates); repeatable, each with a name (default: its file name).",
    ),
    click.option(
        "--reranked",
        "reranked_paths",
        required=True,
        multiple=True,
        metavar="[NAME=]RUN[,RUN...]",
        help="Reranked TREC run, from twostage or any other tool (e.g. an LLM listwise reranker); repeatable, "
        "each with a name. Its RUN.meta.json sidecar, when present, gives its depth, first stage and texts. "
        "NAME=RUN1,RUN2,... are repeated runs of one system (an LLM reranker run again): it is diagnosed on the "
        "per-query mean over them and its spread is reported. "
        "The first one is the primary run of the headline and the worst queries.",
    ),
    click.option(
        "--out",
        required=True,
        type=click.Path(file_okay=False),
        callback=writable_folder,
        help="Report folder: index.html, report.md, per_query.csv, pairs.csv, summary.json.",
    ),
    flag(
        "measure",
        "-m",
        "--measure",
        default="ndcg_cut.10",
        show_default=True,
        metavar="MEASURE",
        help="Headline measure the loss is decomposed on: any ranking measure (ndcg_cut.K, P.K, recall.K, map, "
        "recip_rank, ...); binary ones at --recall-level.",
    ),
    click.option(
        "--depth",
        "depth_values",
        multiple=True,
        metavar="[NAME=]N",
        help="Rerank depth N: the reranked run NAME (without a name: every reranked run) reorders the first "
        "stage's top N; repeatable [default: the sidecar's depth, else detected: the smallest N at which the run's "
        "top N are the first stage's top N reordered and its ranks below N repeat the first stage's, as rank_llm "
        "writes a run that reranked only the top N, on the queries both runs hold; else an error naming the run].",
    ),
    flag(
        "window",
        "--window",
        type=click.IntRange(min=1),
        default=None,
        help="The sliding window W a listwise reranker used (rank_llm: 20): report the share of windows it "
        "returned in their input order.",
    ),
    flag(
        "stride",
        "--stride",
        type=click.IntRange(min=1),
        default=None,
        help="The sliding window's stride S (rank_llm: 10) [default: the window].",
    ),
    flag(
        "curve_depths",
        "--curve-depths",
        default="10,20,30,50,100",
        show_default=True,
        metavar="K,K,...",
        help="Depths of the rerank-depth curve (those up to N, plus N itself).",
        convert=_curve_depth_values,
    ),
    flag(
        "listwise",
        "--listwise",
        "listwise",
        multiple=True,
        is_flag=False,
        flag_value=_LISTWISE_ALL,
        metavar="[NAME]",
        help="The reranked run NAME (or, without a name, every reranked run) is listwise: its depth curve is "
        "stated as an approximation. A sidecar saying listwise counts too.",
        convert=_listwise,
    ),
    flag(
        "pairs",
        "--pair",
        "pair_values",
        multiple=True,
        metavar="RERANKED=FIRST",
        help="Which first stage a reranked run reorders, by name (with several first stages; default: the "
        "sidecar's first stage, else the first stage holding most of its documents).",
        convert=lambda values: _pairs(values) or None,
    ),
    click.option(
        "--topics",
        default=None,
        help="Query texts: a file or a collection name (default: from the reranked run's sidecar).",
    ),
    click.option(
        "--candidates",
        "candidates_paths",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="Candidates JSON for query and passage texts (repeatable; default: from the sidecar).",
    ),
    click.option("--corpus", type=click.Path(dir_okay=False), default=None, help="JSONL corpus for document snippets."),
    click.option(
        "--index",
        "index_path",
        type=click.Path(file_okay=False),
        default=None,
        help="Lucene index with stored texts for snippets.",
    ),
    click.option(
        "--query-types",
        "types_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="qid<TAB>type per line; overrides the rules.",
    ),
    click.option(
        "--query-rules",
        "rules_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Replace the default query-type rules: type<TAB>regex per line, or YAML [{type, pattern}].",
    ),
    flag(
        "recall_level",
        "-l",
        "--recall-level",
        type=int,
        default=None,
        help="Relevance level for recall, relevant-document counts and binary headline measures [default: 2 when the qrels are graded above 1 (TREC DL convention), else 1].",
    ),
    flag(
        "complete",
        "-c",
        "--complete/--no-complete",
        "complete",
        default=True,
        help="-c (the default): every qrels query counts (missing ones score 0); --no-complete: the qrels queries every run holds.",
    ),
    flag(
        "ok",
        "--ok",
        "--ok-ndcg",
        "ok",
        type=click.FloatRange(0, 1),
        default=0.6,
        show_default=True,
        help="ok when reranked >= OK x ideal; candidates-missed when even the ceiling is below it.",
    ),
    flag(
        "max_unjudged",
        "--max-unjudged",
        type=click.FloatRange(0, 1),
        default=0.3,
        show_default=True,
        help="unjudged-top when more than this share of the reranked top 10 is unjudged (and not ok).",
    ),
    flag(
        "hurt",
        "--hurt",
        type=click.FloatRange(0, 1),
        default=0.05,
        show_default=True,
        help="reranker-hurt when reranked < first stage - HURT x ideal (decided before the other labels).",
    ),
    _count("--worst", "worst_n", 10, "How many worst queries to list.", param="worst_n"),
    _count(
        "--most-changed",
        "most_changed_n",
        10,
        "How many most changed queries (lowest RBO) to list per reranked run.",
        param="most_changed_n",
    ),
    _count(
        "--disagreements",
        "disagree_n",
        5,
        "How many queries to list per pair of reranked runs where they differ most.",
        param="disagree_n",
    ),
    _count("--missed-shown", "missed_shown", 5, "Best missed judged documents listed per query."),
    _count("--explore-depth", "explore_depth", 10, "Top k of every system shown side by side for a chosen query.", 1),
    *SIGNIFICANCE,
    *interval_flags(),
    flag("name", "--name", default=None, help="Report title [default: the runs, e.g. 'rv20, rv100 over bm25']."),
    *evaluation_flags(exclude=_OWN),
    qrels_policy_options,
)

#: The keywords of ``DiagnosisOptions`` that have no flag, and why.
API_ONLY = MappingProxyType(
    {
        "relevance_level": "the diagnosis sets its relevance levels itself (-l is its --recall-level)",
        "allow_no_common": "a run sharing no query with the qrels has nothing to diagnose: the command refuses it",
        "snippet_chars": "the report's snippets have the one length the page lays out",
    }
)

#: The keywords of ``DiagnosisOptions`` the command sets itself, and how.
SET_BY_COMMAND = MappingProxyType(
    {
        "depth": "--depth [NAME=]N names reranked runs: read once the command has named them",
        "depth_as": "the report says a depth given with --depth came from the option",
    }
)


@click.command("diagnose")
@options_of(DiagnosisOptions, DIAGNOSE, fixed={"depth_as": "option"})
def diagnose_command(options: DiagnosisOptions, qrels, depth_values, judge_qrels, qrels_policy, out, **inputs):
    """How much quality is lost in the candidates and how much in the reranking; how deep to rerank; which
    reranker is better. Writes a report folder (open index.html: it needs no network).

    \b
    Examples:
      twostage diagnose --qrels dl19-passage --first-stage run.dl19.bm25.top100.txt \\
          --reranked reports/runs/dl19.bm25.minilm.trec --out reports/dl19-minilm
      twostage diagnose --qrels dl19-passage --first-stage bm25=run.dl19.bm25.top100.txt \\
          --reranked minilm=minilm.trec --reranked llm=rank_zephyr.trec --listwise llm --out reports/dl19
      twostage diagnose --qrels dl19-passage --first-stage bm25=run.dl19.bm25.top100.txt \\
          --reranked rv20=rv20.a.trec,rv20.b.trec,rv20.c.trec --depth rv20=20 --window 20 --stride 10 \\
          --out reports/rv20
    """
    first_named, reranked_named = _run_names(inputs["first_paths"], inputs["reranked_paths"], options)
    echo_qrels_notes(qrels, options.data_dir)
    if judge_qrels:
        from toolkit.cli.judge import qrels_source

        qrels = qrels_source(qrels, judge_qrels, qrels_policy, options.data_dir, options.dedupe, options.relevance_map)
    diag = _diagnose(qrels, first_named, reranked_named, depth_values, inputs, options)
    paths = diag.write(out)
    _print_summary(diag.result)
    echo(paths["index.html"])


def _run_names(first_paths, reranked_paths, options: DiagnosisOptions) -> tuple[dict[str, str], dict]:
    """Step 1: name -> path of the first stages and reranked runs; --pair and --listwise must name them."""
    first_named = _named_paths(first_paths, "'--first-stage'")
    reranked_named = _repeats(_named_paths(reranked_paths, "'--reranked'", first_named))
    pairs = dict(options.pairs or {})
    unknown = sorted(set(pairs) - set(reranked_named)) + sorted(set(pairs.values()) - set(first_named))
    if unknown:
        raise click.BadParameter(f"no run named {', '.join(map(repr, unknown))}", param_hint="'--pair'")
    named = () if options.listwise is True else options.listwise
    bad = sorted(set(named) - set(reranked_named))  # type: ignore[arg-type]
    if bad:
        raise click.BadParameter(f"no reranked run named {', '.join(map(repr, bad))}", param_hint="'--listwise'")
    return first_named, reranked_named


def _diagnose(qrels, first_named: dict, reranked_named: dict, depth_values, inputs: dict, options: DiagnosisOptions):
    """The library's diagnosis of the named runs; a measure it cannot use (no ceiling) is the library's
    ``OptionError``, which the CLI reports as a usage error of -m."""
    import dataclasses

    from toolkit.api.diagnosis import diagnose

    depth = _depths(depth_values, list(reranked_named))
    return diagnose(
        qrels,
        first_named,
        reranked_named,
        topics=inputs["topics"],
        candidates=list(inputs["candidates_paths"]),
        corpus=inputs["corpus"],
        index=inputs["index_path"],
        query_types=inputs["types_path"],
        type_rules=inputs["rules_path"],
        options=dataclasses.replace(options, depth=depth) if depth is not None else options,
    )


def _print_summary(diag) -> None:
    """The headline, the decomposition, the depth curve and the labels on stderr."""
    for r in diag.headline:

        def show(v, count=r["key"] == "num_q"):  # bound now: the loop moves r on
            return "-" if v is None else (str(int(v)) if count else f"{v:.4f}")

        echo(f"{r['measure']:<26} first {show(r['first_stage']):>8}  reranked {show(r['reranked']):>8}", err=True)
    for p in diag.pipelines:
        m = p.decomposition.means()
        echo(
            f"{p.name}: depth {p.depth_source}; {diag.measure_label} first stage {m['first_stage']:.4f}, "
            f"ceiling {m['ceiling']:.4f}, reranked {m['reranked']:.4f}; lost in candidates "
            f"{m['lost_in_candidates']:.4f}, lost in reranking {m['lost_in_reranking']:.4f}",
            err=True,
        )
        if p.repeats:
            r = p.repeats
            echo(
                f"  {r['n']} repeats: mean {r['mean']:.4f}, min {r['min']:.4f}, max {r['max']:.4f}, sd "
                f"{r['sd']:.4f}, mean per-query sd {r['per_query_sd']:.4f}",
                err=True,
            )
        if p.behaviour:
            b = p.behaviour
            windows = b.get("windows")
            echo(
                f"  unchanged queries (top {p.depth} in first-stage order): {b['unchanged_queries']:.1%}"
                + (f"; windows in input order: {windows['share']:.1%}" if windows else ""),
                err=True,
            )
        curve = ", ".join(
            f"{int(r.depth)}: {r.reranked:.4f}/{r.ceiling:.4f}" for r in p.decomposition.curve.itertuples(index=False)
        )
        echo(f"  depth curve (reranked/ceiling): {curve}", err=True)
    echo("labels: " + ", ".join(f"{k} {v}" for k, v in diag.label_counts.items() if v), err=True)
    from toolkit.errors import for_cli

    for note in diag.notes:  # phrased: in the CLI's words (-c, where the library says complete=True)
        echo(f"note: {for_cli(note)}", err=True)


COMMANDS = (diagnose_command,)
