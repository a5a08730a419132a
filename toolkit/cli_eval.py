"""``twostage eval`` (trec_eval's command line) and ``twostage gain-sensitivity``."""

from __future__ import annotations

import csv
import io
import json

import click

from .catalog import relevance_map, resolve_qrels
from .evaluate import EvalResult, evaluate
from .measures import DEFAULT_MEASURES, Discount, EvalSettings, Gain, Measure, parse_measures
from .ranking import DEFAULT_SCORE_PRECISION, SCORE_PRECISIONS
from .records import Qrels
from .trec_io import atomic_write, read_run, write_json


def load_qrels(spec: str, rel_map: str | None, dedupe: str, data_dir: str | None) -> Qrels:
    """Qrels from a path or a collection name, with the collection's or the user's relevance map."""
    source = resolve_qrels(spec, data_dir)
    for note in source.notes:  # e.g. how a named collection's qrels were converted
        click.echo(f"twostage: {note}", err=True)
    mapping, name = relevance_map(rel_map) if rel_map else ({}, "")
    return source.read(dedupe, mapping, name)


def settings_options(f):
    """Options shared by every command that evaluates (trec_eval's flags plus nDCG choices)."""
    opts = [
        click.option("-c", "complete", is_flag=True, help="Average over every query in the qrels; queries missing from the run count as 0."),
        click.option("-l", "level", type=int, default=1, show_default=True, help="Relevance level: labels >= LEVEL are relevant (binary measures; not nDCG)."),
        click.option("-M", "max_docs", type=click.IntRange(min=1), default=None, help="Evaluate only the top N documents of each query."),
        click.option("-J", "judged_only", is_flag=True, help="Judged documents only: drop unjudged documents before ranking (condensed list)."),
        click.option("--gain", default="linear", show_default=True, help="nDCG gain: linear (trec_eval), exp (2^rel-1), or a map like 0:0,1:1,2:4,3:10."),
        click.option("--discount", default="log2", show_default=True, help="nDCG discount: log2 = log2(rank+1) (trec_eval), or jk[:B] = Järvelin-Kekäläinen (none below rank B, log_B(rank) after)."),
        click.option("--score-precision", type=click.Choice(SCORE_PRECISIONS), default=DEFAULT_SCORE_PRECISION, show_default=True, help="Compare scores as 32-bit floats (trec_eval 9.x, Pyserini's bundled binary) or doubles (trec_eval 10)."),
        click.option("--judged-compat", type=click.Choice(["twostage", "pyserini"]), default="twostage", show_default=True, help="judged.k definition: twostage (top k in trec_eval order, per-query mean) or pyserini (first k file lines, pooled)."),
        click.option("--relevance-map", "rel_map", default=None, help="Map qrels labels at load time, e.g. 1:4,2:3,3:2,4:1,-1:0 or a preset (cranfield)."),
        click.option("--dedupe", type=click.Choice(["error", "first"]), default="error", show_default=True, help="Duplicate (query, doc) lines: error (as trec_eval), or keep the first and report how many were dropped."),
        click.option("--data-dir", type=click.Path(file_okay=False), default=None, envvar="TWOSTAGE_DATA", help="Data folder for qrels given by name (default: $TWOSTAGE_DATA or ../shared/data)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def make_settings(complete, level, max_docs, judged_only, gain, discount, score_precision, judged_compat) -> EvalSettings:
    try:
        g, d = Gain.parse(gain), Discount.parse(discount)
    except Exception as exc:
        raise click.BadParameter(str(exc)) from None
    return EvalSettings(
        relevance_level=level,
        gain=g,
        discount=d,
        judged_only=judged_only,
        max_docs=max_docs,
        complete=complete,
        score_precision=score_precision,
        judged_compat=judged_compat,
    )


def _measures(texts: tuple[str, ...]) -> list[Measure]:
    try:
        return parse_measures(list(texts) or list(DEFAULT_MEASURES))
    except Exception as exc:
        raise click.BadParameter(str(exc), param_hint="'-m'") from None


def format_value(measure: Measure, value: float) -> str:
    """trec_eval's printing: counts as integers, everything else with 4 decimals."""
    return str(int(round(value))) if measure.summed else f"{value:.4f}"


def provenance_lines(prov: dict) -> list[str]:
    """The provenance block as '# key: value' comment lines (trec_eval parsers skip '#' lines)."""
    keys = [
        "implementation", "semantics", "gain", "discount", "relevance_level", "relevance_labels", "relevance_map",
        "unjudged", "judged_definition", "max_docs_per_query", "query_set", "queries_in_run", "queries_in_qrels",
        "queries_evaluated", "score_precision", "duplicates_dropped",
    ]
    lines = [f"# {k}: {json.dumps(prov[k]) if isinstance(prov[k], (dict, list)) else prov[k]}" for k in keys if k in prov]
    lines.append(f"# run: {prov['run']['path']} sha256:{prov['run']['sha256'][:16]}")
    lines.append(f"# qrels: {prov['qrels']['path']} sha256:{prov['qrels']['sha256'][:16]}")
    return lines


def render_text(result: EvalResult, per_query: bool, provenance: bool) -> str:
    out = provenance_lines(result.provenance) if provenance else []
    if per_query:
        pq = result.per_query[result.per_query["in_run"]]
        by_query = {q: g for q, g in pq.groupby("query_id", sort=True)}
        for qid in sorted(by_query):
            vals = dict(zip(by_query[qid]["measure"], by_query[qid]["value"]))
            for m in result.measures:
                if m.family != "num_q":  # trec_eval prints num_q only in the summary
                    out.append(f"{m.name:<22}\t{qid}\t{format_value(m, vals[m.name])}")
    for m in result.measures:
        out.append(f"{m.name:<22}\tall\t{format_value(m, result.aggregate[m.name])}")
    return "\n".join(out) + "\n"


def render_json(result: EvalResult, per_query: bool) -> str:
    doc: dict = {"provenance": result.provenance, "measures": [m.name for m in result.measures],
                 "all": result.aggregate}
    if per_query:
        doc["per_query"] = {str(q): dict(zip(g["measure"], g["value"])) for q, g in result.per_query.groupby("query_id")}
    return json.dumps(doc, indent=2) + "\n"


def render_csv(result: EvalResult, per_query: bool, provenance: bool) -> str:
    buf = io.StringIO()
    if provenance:
        buf.write("# provenance: " + json.dumps(result.provenance) + "\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["query_id", "measure", "value"])
    if per_query:
        for row in result.per_query.sort_values(["query_id"], kind="stable").itertuples(index=False):
            w.writerow([row.query_id, row.measure, repr(float(row.value))])
    for m in result.measures:
        w.writerow(["all", m.name, repr(float(result.aggregate[m.name]))])
    return buf.getvalue()


@click.command("eval")
@click.option("-m", "measure_texts", multiple=True, metavar="MEASURE[.CUTOFFS]", help="Measure, repeatable: ndcg_cut.10, ndcg, recall.100, P.10, map, recip_rank, judged.10, num_q, num_ret, num_rel, num_rel_ret.")
@click.option("-q", "per_query", is_flag=True, help="Print per-query lines before the 'all' lines.")
@settings_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True, help="text = trec_eval's layout (4 decimals); json/csv = full precision.")
@click.option("--no-provenance", is_flag=True, help="Text/CSV: omit the '#' provenance header (byte-for-byte trec_eval output).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the result to this file (atomically) and its provenance to OUT.provenance.json.")
@click.argument("qrels")
@click.argument("run", type=click.Path(dir_okay=False))
def eval_command(measure_texts, per_query, complete, level, max_docs, judged_only, gain, discount, score_precision,
                 judged_compat, rel_map, dedupe, data_dir, fmt, no_provenance, out, qrels, run):
    """Evaluate RUN against QRELS exactly as trec_eval does.

    QRELS is a file or a collection name (cacm, dl19-passage, ...). Ranking is
    score descending, ties by document id descending; the rank column is
    ignored. Without -m: num_q num_ret num_rel num_rel_ret map recip_rank P.10
    recall.100,1000 ndcg_cut.10.

    \b
    Examples:
      twostage eval -m ndcg_cut.10 -m recall.100 -l 2 -c qrels.txt run.txt
      twostage eval -m ndcg_cut.10 --gain exp --format json qrels.txt run.txt
      twostage eval -m judged.10 --judged-compat pyserini qrels.txt run.txt
    """
    measures = _measures(measure_texts)
    settings = make_settings(complete, level, max_docs, judged_only, gain, discount, score_precision, judged_compat)
    q = load_qrels(qrels, rel_map, dedupe, data_dir)
    r = read_run(run, dedupe=dedupe)
    for what, n in (("run", r.duplicates_dropped), ("qrels", q.duplicates_dropped)):
        if n:
            click.echo(f"twostage: --dedupe first dropped {n} duplicate line(s) from the {what}", err=True)
    result = evaluate(q, r, measures, settings)
    for note in result.notes:
        click.echo(f"twostage: {note}", err=True)
    if fmt == "json":
        text = render_json(result, per_query)
    elif fmt == "csv":
        text = render_csv(result, per_query, provenance=not no_provenance and out is None)
    else:
        text = render_text(result, per_query, provenance=not no_provenance)
    if out:
        with atomic_write(out) as fh:
            fh.write(text)
        write_json(out + ".provenance.json", result.provenance)
        click.echo(f"twostage: wrote {out} and {out}.provenance.json", err=True)
    else:
        click.echo(text, nl=False)


COMMANDS = [eval_command]


@click.command("gain-sensitivity")
@click.option("-k", "cutoff", type=click.IntRange(min=1), default=10, show_default=True, help="nDCG cutoff.")
@click.option("-c", "complete", is_flag=True, help="Average over every qrels query (missing ones count 0).")
@click.option("--score-precision", type=click.Choice(SCORE_PRECISIONS), default=DEFAULT_SCORE_PRECISION, show_default=True)
@click.option("--relevance-map", "rel_map", default=None, help="Map qrels labels at load time (e.g. cranfield).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, envvar="TWOSTAGE_DATA")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.argument("qrels")
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def gain_sensitivity_command(cutoff, complete, score_precision, rel_map, data_dir, fmt, qrels, runs):
    """nDCG@k of each RUN under linear, exponential and Järvelin-Kekäläinen gains/discount.

    Flags every variant under which the systems' order differs from trec_eval's
    linear gain with log2 discount, so a reader knows whether "system A beats
    B" depends on which nDCG was used.
    """
    from .sensitivity import gain_sensitivity

    q = load_qrels(qrels, rel_map, "error", data_dir)
    from pathlib import Path

    names = [Path(r).name for r in runs] if len({Path(r).name for r in runs}) == len(runs) else [str(r) for r in runs]
    loaded = {name: read_run(path) for name, path in zip(names, runs)}
    result = gain_sensitivity(q, loaded, cutoff, EvalSettings(complete=complete, score_precision=score_precision))
    if fmt == "json":
        click.echo(json.dumps({"cutoff": cutoff, "ndcg": result.table.to_dict(orient="index"),
                               "skipped": result.skipped, "order_changes": result.swaps}, indent=2))
        return
    click.echo(f"# nDCG@{cutoff} under each gain/discount (mean over queries; -c: {complete})")
    click.echo(result.table.to_string(float_format=lambda v: f"{v:.4f}"))
    for label, why in result.skipped.items():
        click.echo(f"# skipped {label}: {why}")
    if len(names) > 1:
        click.echo("# system order: " + ("; ".join(result.swaps) if result.swaps else "the same under every variant"))


COMMANDS.append(gain_sensitivity_command)
