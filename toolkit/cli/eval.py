"""``twostage eval`` (trec_eval's command line), ``twostage measures`` and ``twostage gain-sensitivity``."""

from __future__ import annotations

import json
from types import MappingProxyType

import click

from toolkit.api.options import EvaluationOptions
from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import (
    HOLES_OVER_FLAG,
    SEED_FLAG,
    evaluation_flags,
    evaluation_options,
    interval_flags,
    named_runs,
    pop_settings,
    qrels_policy_options,
    settings_from,
    trec_eval_option,
    writable_file,
)
from toolkit.cli.terminal import echo
from toolkit.data.catalog import relevance_map, resolve_qrels
from toolkit.data.records import Qrels
from toolkit.data.trec_io import atomic_write, read_run, write_json, written_together
from toolkit.evaluation.evaluate import EvalResult
from toolkit.evaluation.trec_format import format_value, provenance_lines, render_csv, render_json, render_text
from toolkit.measures.names import parse_measure_groups

REL_FORMATS = ("qrels", "qrels_div", "prefs", "qrels_prefs", "qrels_jg")


def echo_qrels_notes(spec: str, data_dir: str | None) -> None:
    """How a named collection's qrels were converted (Cranfield's), on stderr; nothing for files."""
    from toolkit.data.catalog import is_collection_name

    if is_collection_name(spec):
        for note in resolve_qrels(spec, data_dir).notes:
            echo(f"twostage: {note}", err=True)


def load_qrels(spec: str, rel_map: str | None, dedupe: str, data_dir: str | None) -> Qrels:
    """Qrels from a path or a collection name, with the collection's or the user's relevance map."""
    source = resolve_qrels(spec, data_dir)
    for note in source.notes:  # e.g. how a named collection's qrels were converted
        echo(f"twostage: {note}", err=True)
    mapping, name = relevance_map(rel_map) if rel_map else ({}, "")
    return source.read(dedupe, mapping, name)


#: ``twostage eval``'s options, in --help's order: the flags of ``EvaluationOptions`` and the command's own.
EVAL: tuple[Row, ...] = (
    click.option(
        "-m",
        "measure_texts",
        multiple=True,
        metavar="MEASURE[.PARAMS]",
        help="Measure, nickname or alias, repeatable, trec_eval syntax: P.5,10  ndcg_cut.10  "
        "iprec_at_recall..1,.2  ndcg.1=3,2=9  utility.2,-1,0,0  all_trec  official  nDCG@10  ERR@20; ranx's names "
        "(ndcg_burges@10  mrr-l2  rbp.8) with ranx's definitions. "
        "Default: official. `twostage measures` lists them.",
    ),
    click.option("-q", "per_query", is_flag=True, help="Print per-query lines before the 'all' lines."),
    click.option("-n", "no_summary", is_flag=True, help="No 'all' lines (trec_eval -n)."),
    flag(
        "rel_format",
        "-R",
        "rel_format",
        type=click.Choice(REL_FORMATS),
        default="qrels",
        show_default=True,
        help="Format of QRELS: qrels, qrels_div (diversity qrels: qid subtopic docid rel; taken when every measure "
        "is a diversity measure), prefs (qid jg jsg docno rel_level), qrels_prefs (qrels read as preferences), "
        "qrels_jg (iteration column = judgment group).",
    ),
    click.option("-T", "results_format", type=click.Choice(["trec_results"]), default="trec_results", hidden=True),
    flag(
        "zscores",
        "-Z",
        "zscore_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Print z-scores from FILE's per-query means and standard deviations (qid measure mean stddev).",
    ),
    *evaluation_flags(),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json", "csv"]),
        default="text",
        show_default=True,
        help="text = trec_eval's layout (4 decimals); json/csv = full precision.",
    ),
    flag(
        "holes",
        "--holes",
        is_flag=True,
        help="After each ndcg_cut.k, P.k and recall.k line, print NAME_min, NAME_max (the lowest and highest value "
        "over every labelling of the unjudged documents in the top k, the ideal ranking from the judged documents plus "
        "those; --holes-over retrieved: over every unjudged document the run retrieved) and NAME_condensed (the -J "
        "value); per query with -q; in --format json under 'holes'. See docs/statistics.md.",
    ),
    HOLES_OVER_FLAG,
    *interval_flags(default_level=None),
    SEED_FLAG,
    click.option("--no-provenance", is_flag=True, help="Text/CSV: omit the '#' provenance header (trec_eval's bytes)."),
    flag(
        "allow_no_common",
        "--allow-no-common",
        is_flag=True,
        help="Print zeros when RUN and QRELS share no query (default: an error naming both files; trec_eval 9 exits "
        "7).",
    ),
    click.option(
        "--out",
        type=click.Path(dir_okay=False),
        default=None,
        callback=writable_file,
        help="Write the result to this file (atomically) and its provenance to OUT.provenance.json.",
    ),
    qrels_policy_options,
)


#: The keywords of ``EvaluationOptions`` that have no flag, and why.
API_ONLY = MappingProxyType(
    {
        "labels": "display names of measures: the command prints trec_eval's names",
        "name": "the system's name: the command names each run by NAME=RUN or its file",
    }
)


@click.command("eval")
@options_of(EvaluationOptions, EVAL)
@click.argument("qrels")
@click.argument("runs", nargs=-1, required=True, metavar="[NAME=]RUN|-|FOLDER|GLOB [RUN ...]")
def eval_command(
    options: EvaluationOptions,
    measure_texts,
    per_query,
    no_summary,
    results_format,
    fmt,
    no_provenance,
    out,
    qrels,
    runs,
    judge_qrels=None,
    qrels_policy="fill",
):
    """Evaluate RUN against QRELS exactly as trec_eval does ('-' reads RUN from stdin).

    Several RUNs (files, folders of run files, quoted globs) are evaluated against
    QRELS parsed once: in text, one block per run, each headed by '# run: NAME'
    and otherwise what a single-run call prints; --format csv|json give one wide
    table (a row per run, a column per measure).

    QRELS is a file or a collection name (cacm, dl19-passage, ...). Every
    trec_eval measure, option and output line; lines come in trec_eval's
    measure order. Ranking is score descending, ties by document id
    descending; the rank column is ignored. --trec-eval 9 (default, what
    Pyserini bundles) or 10 picks the semantics where the two differ.

    \b
    Examples:
      twostage eval -m ndcg_cut.10 -m recall.100 -l 2 -c qrels.txt run.txt
      twostage eval -m all_trec -q --trec-eval 10 --no-provenance qrels.txt run.txt
      twostage eval -m nDCG@10 -m AP@100 -m R@100 -c -l 2 qrels.txt run.txt
      twostage eval -m ndcg_cut.10 --gain exp --format json qrels.txt run.txt
      twostage eval -m map -m P.30 cacm runs/ other.trec 'sweep/*.trec'
      twostage eval -m ndcg_cut.10 -m P.10 -l 2 --holes qrels.txt run.txt
      twostage eval -m ndcg_cut.10 -l 2 --ci 0.95 --bootstrap 10000 --ci-method bca qrels.txt run.txt

    With --ci LEVEL, each mean-aggregated measure's 'all' line is followed by
    NAME_ci_low and NAME_ci_high: the bootstrap interval of the mean over the
    queries (--bootstrap resamples, --ci-method, seeded by --seed).
    """
    from toolkit.api.evaluation import evaluate_many
    from toolkit.cli.options import expand_named_runs

    paths = expand_named_runs(runs)
    if options.holes and fmt == "csv":
        raise click.UsageError("--holes prints in text and in --format json")
    if options.rel_format == "qrels":
        echo_qrels_notes(qrels, options.data_dir)
    if judge_qrels:
        from toolkit.cli.judge import qrels_source

        if options.rel_format != "qrels":
            raise click.UsageError("--judge-qrels applies to -R qrels only")
        qrels = qrels_source(qrels, judge_qrels, qrels_policy, options.data_dir, options.dedupe, options.relevance_map)
    evaluations = evaluate_many(qrels, dict(paths), list(measure_texts) or None, options=options)
    _echo_notes(evaluations)
    if len(paths) > 1:
        return _eval_many(evaluations, per_query, no_summary, fmt, out, no_provenance)
    ev = next(iter(evaluations.values()))
    if fmt == "json":
        text = ev.to_json(per_query)
    elif fmt == "csv":
        text = ev.to_csv(per_query, provenance=not no_provenance and out is None)
    else:
        text = ev.to_trec_eval(per_query, provenance=not no_provenance, summary=not no_summary)
    _emit(text, out, ev.provenance, "", fmt)


def _echo_notes(evaluations: dict) -> None:
    """stderr: each evaluation's notes that change no number (comment lines skipped, ...); what changes a number
    (duplicates dropped, queries left out, ties) was said as a warning while evaluating (``toolkit.notices``)."""
    from toolkit.errors import for_cli

    for ev in evaluations.values():
        for note in ev.result.notes:
            if note not in ev.result.warnings:
                echo(f"twostage: {for_cli(note)}", err=True)


def _emit(text: str, out: str | None, provenance: dict, what: str, fmt: str) -> None:
    """The result on stdout, or in OUT (atomically) with OUT.provenance.json. On stdout it is machine-read data
    (trec_eval's layout, CSV, JSON): printed byte for byte, only what a terminal would act on shown."""
    if out:
        with written_together():  # both in place, or (a write refused) neither, the previous pair kept
            with atomic_write(out) as fh:
                fh.write(text)
            write_json(out + ".provenance.json", provenance)
        echo(f"twostage: wrote {out}{what} and {out}.provenance.json", err=True)
    else:
        echo(text, nl=False, kind="json" if fmt == "json" else "data")


def _eval_many(evaluations: dict, per_query, no_summary, fmt, out, no_provenance) -> None:
    """Several runs against judgments read once: text blocks, or one wide CSV/JSON table."""
    from toolkit.report import eval_many

    results = [(name, ev.result) for name, ev in evaluations.items()]
    intervals = {name: ev.ci for name, ev in evaluations.items() if ev.ci is not None}
    labels = next(iter(evaluations.values()))._display()  # the measures as asked, as one run's output keys them
    if fmt == "json":
        holes = {name: ev.holes for name, ev in evaluations.items() if ev.holes}
        text = eval_many.render_json_many(results, per_query, intervals, labels, holes)
    elif fmt == "csv":
        text = eval_many.render_csv_many(
            results, per_query, provenance=not no_provenance and out is None, intervals=intervals, labels=labels
        )
    else:
        blocks = [
            ev.to_trec_eval(per_query, provenance=not no_provenance, summary=not no_summary)
            for ev in evaluations.values()
        ]
        text = "".join(f"# run: {name}\n{block}" for name, block in zip(evaluations, blocks))
    provenance = {name: ev.provenance for name, ev in evaluations.items()}
    _emit(text, out, provenance, f" ({len(results)} runs)", fmt)


@click.command("measures")
@trec_eval_option(default=None, meaning="Only the measures this trec_eval generation has.")
@click.argument("names", nargs=-1)
def measures_command(trec_eval, names):
    """List every measure family (parameters, defaults, how 'all' combines, whose definition it is) and every
    ir_measures name (which provider ir_measures picks, and the family that follows it), or define NAMES.

    NAMES may be families, nicknames or aliases (ndcg_cut, all_trec, nDCG@10, ERR@20, 'RBP(rel=1)', ndcg_burges@10).
    """
    from toolkit.measures.irm_names import listing
    from toolkit.measures.names import NICKNAMES
    from toolkit.measures.ranx import syntax as ranx_syntax
    from toolkit.measures.registry import families_in_order

    version = int(trec_eval) if trec_eval else 10
    if not names:
        echo(f"{'family':<24} {'parameters':<17} {'defaults':<34} {'all':<12} -l -R        source")
        for f in families_in_order():
            if trec_eval and f.since > version:
                continue
            defaults = ",".join(f"{d:g}" if isinstance(d, float) else str(d) for d in f.defaults)
            if f.named:
                defaults = ",".join(
                    p.name + ("!" if p.required else f"={p.default!r}" if p.default is not None else "")
                    for p in f.named
                )
            name = ranx_syntax(f.name) if f.source == "ranx" else f.name  # typed as ranx types it
            echo(
                f"{name:<24} {f.params.value:<17} {defaults or '-':<34} {f.aggregate:<12} "
                f"{'-l' if f.binary else '  '} -R {f.rel_format:<9} {f.source}"
            )
        echo("nicknames: " + "; ".join(f"{k} = {' '.join(v)}" for k, v in NICKNAMES.items()))
        echo("ir_measures 0.4.3 names (NAME(parameters, ! = required): provider[what it takes]: the family):")
        for line in listing():
            echo("  " + line)
        return
    seen = set()
    for text in names:
        for m in (m for g in parse_measure_groups([text], version) for m in g.measures):
            if m.family in seen:
                continue
            seen.add(m.family)
            spec = m.spec
            shown = f"{ranx_syntax(spec.name)}, ranx's" if spec.source == "ranx" else spec.name
            echo(
                f"{shown}  ({spec.params.value}; all = {spec.aggregate}; relevance level "
                f"{'applies' if spec.binary else 'does not apply'}; -R {spec.rel_format}; source: {spec.source})"
            )
            echo("    " + spec.doc.replace("\n", "\n    ") + "\n")


@click.command("gain-sensitivity")
@click.option("-k", "cutoff", type=click.IntRange(min=1), default=10, show_default=True, help="nDCG cutoff.")
@evaluation_options(exclude=("gain", "discount", "judged_compat"))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.argument("qrels")
@click.argument("runs", nargs=-1, required=True, metavar="[NAME=]RUN [RUN ...]")
def gain_sensitivity_command(cutoff, fmt, qrels, runs, **options):
    """nDCG@k of each RUN under linear, exponential and Järvelin-Kekäläinen gains/discount.

    Flags every variant under which the systems' order differs from trec_eval's
    linear gain with log2 discount, so a reader knows whether "system A beats
    B" depends on which nDCG was used.
    """
    from toolkit.evaluation.sensitivity import gain_sensitivity

    s = pop_settings(options)
    q = load_qrels(qrels, s.get("rel_map"), s.get("dedupe", "error"), s.get("data_dir"))
    named = named_runs(runs)
    names = list(named)
    loaded = {name: read_run(path) for name, path in named.items()}
    result = gain_sensitivity(q, loaded, cutoff, settings_from(s))
    if fmt == "json":
        echo(
            json.dumps(
                {
                    "cutoff": cutoff,
                    "ndcg": result.table.to_dict(orient="index"),
                    "skipped": result.skipped,
                    "order_changes": result.swaps,
                },
                indent=2,
            ),
            kind="json",
        )
        return
    echo(f"# nDCG@{cutoff} under each gain/discount (mean over queries; -c: {bool(s.get('complete'))})")
    echo(result.table.to_string(float_format=lambda v: f"{v:.4f}"))
    for label, why in result.skipped.items():
        echo(f"# skipped {label}: {why}")
    if len(names) > 1:
        echo("# system order: " + ("; ".join(result.swaps) if result.swaps else "the same under every variant"))


COMMANDS = (eval_command, measures_command, gain_sensitivity_command)

__all__ = [
    "EvalResult",
    "eval_command",
    "format_value",
    "load_qrels",
    "provenance_lines",
    "render_csv",
    "render_json",
    "render_text",
]
