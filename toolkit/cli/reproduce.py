"""``twostage reproduce`` (published tables from specs) and ``twostage compare`` (significance tests)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from toolkit.cli.options import DATA_DIR, evaluation_options, significance_options
from toolkit.errors import ProvenanceMismatchError


# ---------------------------------------------------------------- reproduce
@click.command("reproduce")
@click.argument("spec", required=False)
@click.option("--list", "list_specs", is_flag=True, help="List the built-in specs and whether their inputs are here.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for NAME.md, NAME.html, NAME.json and the runs commands write [default: reports/reproduce/NAME].",
)
@DATA_DIR
@click.option(
    "--indexes",
    type=click.Path(file_okay=False),
    default="indexes",
    show_default=True,
    help="Folder for indexes built by a spec's setup commands (reused when present).",
)
@click.option("--row", "rows", multiple=True, metavar="ROW_ID", help="Only these rows (repeatable).")
@click.option("--reuse-runs", is_flag=True, help="Do not re-run a row's commands when its run file already exists.")
@click.option("--strict", is_flag=True, help="Exit 1 also when rows were skipped (missing data, commands, packages).")
def reproduce(spec, list_specs, out, data_dir, indexes, rows, reuse_runs, strict):
    """Reproduce a published table: run what SPEC needs, evaluate, compare with the published figures.

    SPEC is a built-in name (see --list) or a YAML file. Prints the table
    (Markdown) with published, measured, delta and status per cell -- match
    (same printed digits), within tolerance, off, or skipped with the reason --
    and, for every off cell, the published and measured provenance side by
    side. Writes the same as Markdown, HTML and JSON to --out.

    Exit status: 1 when a cell is off or a command failed (so it can gate CI);
    skipped rows are reported as INCOMPLETE, never as passing, and fail only
    with --strict.

    \b
    Examples:
      twostage reproduce --list
      twostage reproduce msmarco-dl-first-stage
      twostage reproduce anserini-cacm --out reports/cacm
    """
    from toolkit.catalog import data_dir as find_data
    from toolkit.report.reproduction import render_markdown, write_outputs
    from toolkit.reproduction.runner import Runner, spec_readiness
    from toolkit.reproduction.specs import builtin_specs, load_spec

    data = find_data(data_dir)
    if list_specs:
        for name, path in builtin_specs().items():
            s = load_spec(path)
            click.echo(f"{name:<24} {s.title}")
            click.echo(
                f"{'':<24} {len(s.rows)} rows x {len(s.columns)} columns "
                f"({', '.join(c.id for c in s.columns)}); {spec_readiness(s, data, _commands())}"
            )
        return
    if not spec:
        raise click.UsageError("give a SPEC (a built-in name or a YAML file), or --list")
    s = load_spec(spec)
    out_dir = Path(out) if out else Path("reports") / "reproduce" / s.name
    runner = Runner(
        spec=s,
        data=data,
        work=out_dir.resolve(),
        indexes=Path(indexes).resolve(),
        reuse_runs=reuse_runs,
        rows_only=tuple(rows),
        commands=_commands(),
    )
    rep = runner.run()
    click.echo(render_markdown(rep), nl=False)
    paths = write_outputs(rep, out_dir)
    click.echo(f"twostage: wrote {', '.join(map(str, paths))}", err=True)
    if rep.failed:
        n = rep.counts()
        raise click.ClickException(f"{s.name}: {n['off']} cell(s) off, {n['error']} error(s); see the table above")
    if strict and rep.skipped:
        raise click.ClickException(f"{s.name}: {rep.counts()['skipped']} cell(s) skipped (--strict)")


def _commands() -> set[str]:
    """The subcommands of this installation, which the reproduction runner checks a spec's steps against."""
    from toolkit.cli import main

    return set(main.commands)


# ------------------------------------------------------------------ compare
def _json_number(x: float):
    return x if isinstance(x, float) and math.isfinite(x) else (None if x != x else str(x))


@click.command("compare")
@click.option(
    "--qrels", default=None, help="Qrels file or collection name (cacm, dl19-passage, ...); needed for run files."
)
@click.option(
    "-m",
    "measure_texts",
    multiple=True,
    metavar="MEASURE[.CUTOFFS]",
    help="Measure, repeatable [default: ndcg_cut.10].",
)
@click.option("--baseline", default=None, metavar="RUN", help="Baseline run [default: the first RUN].")
@significance_options
@click.option("--force", is_flag=True, help="Compare even when provenance differs (pairs only the shared queries).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write compare.json and compare.html (with per-query difference plots) to this folder.",
)
@evaluation_options
@click.argument("runs", nargs=-1, required=True)
def compare(qrels, measure_texts, baseline, permutations, seed, correction, force, fmt, out, runs, **options):
    """Compare RUNS (the first is the baseline) with paired significance tests.

    Per measure: each run's mean, its difference to the baseline, the paired
    t-test p-value, the paired randomization test p-value (sign flips of the
    per-query differences; --permutations, --seed), that p-value corrected
    for multiple comparisons (--correction, over the runs compared with the
    baseline), and per-query wins / ties / losses. Refuses runs whose
    evaluated query sets or settings differ, naming the difference, unless
    --force.

    A RUN ending in .json is a saved evaluation (`twostage eval -q --format
    json --out FILE`): its per-query values and provenance are used as they
    are, so results computed with other gains, cutoffs or query sets are
    caught by the provenance check.

    \b
    Examples:
      twostage compare --qrels dl19-passage -c bm25.txt rerank.txt -m ndcg_cut.10
      twostage compare --qrels q.txt A B C -m ndcg_cut.10 -m recall.100 --format json --out reports/abc
    """
    from toolkit.cli.eval import load_qrels, measures_from
    from toolkit.cli.options import pop_settings, settings_from
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.evaluation.significance import comparability, compare_table
    from toolkit.trec_io import read_run

    if len(runs) < 2:
        raise click.UsageError("give at least two runs: the baseline first, then the systems to compare with it")
    if len(set(runs)) != len(runs):
        raise click.UsageError("the same run file is given twice")
    baseline = baseline or runs[0]
    if baseline not in runs:
        raise click.BadParameter(f"{baseline!r} is not one of the RUNS", param_hint="'--baseline'")
    s = pop_settings(options)
    settings = settings_from(s)
    measures = [
        m
        for m in measures_from(measure_texts, settings.trec_eval, default=("ndcg_cut.10",))
        if m.spec.value_type != "string"
    ]
    names = [m.name for m in measures]
    q = None
    per_query: dict[str, object] = {}
    provenance: dict[str, dict] = {}
    for r in runs:
        if r.endswith(".json"):
            per_query[r], provenance[r] = load_result_json(r, names)
            continue
        if q is None:
            if not qrels:
                raise click.UsageError(
                    f"--qrels is needed to evaluate the run {r} (only saved .json results need none)"
                )
            q = load_qrels(qrels, s.get("rel_map"), s.get("dedupe", "error"), s.get("data_dir"))
        res = evaluate(q, read_run(r, dedupe=s.get("dedupe", "error")), measures, settings)
        for note in res.notes:
            click.echo(f"twostage: {r}: {note}", err=True)
        per_query[r], provenance[r] = res.per_query[["query_id", "measure", "value"]], res.provenance
    query_sets = {r: set(f["query_id"].unique().tolist()) for r, f in per_query.items()}
    diff = comparability(provenance, query_sets, baseline)
    if diff and not force:
        raise ProvenanceMismatchError(diff)
    import pandas as pd

    frames = []
    shared = set.intersection(*query_sets.values())
    for r, f in per_query.items():
        f = f[f["measure"].isin(names)].copy()
        if diff:  # forced: pair on the queries every run has
            f = f[f["query_id"].isin(shared)]
        f.insert(0, "run", r)
        frames.append(f)
    table = pd.concat(frames, ignore_index=True)
    comps = compare_table(table, baseline, permutations=permutations, seed=seed, correction=correction)
    doc = _compare_doc(comps, provenance, baseline, measures, permutations, seed, correction, diff, len(shared))
    from toolkit.report.comparison import compare_text, write_compare_report

    if out:
        write_compare_report(Path(out), doc, table, baseline, [m.name for m in measures])
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        click.echo(compare_text(doc), nl=False)


def load_result_json(path: str, measures: list[str]):
    """Per-query values and provenance saved by `twostage eval -q --format json --out FILE`."""
    import pandas as pd

    from toolkit.errors import InputFormatError

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFormatError(path, None, "no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputFormatError(path, None, f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("per_query"), dict) or "provenance" not in doc:
        raise InputFormatError(
            path,
            None,
            "not a saved evaluation with per-query values; "
            "write one with `twostage eval -q --format json --out FILE QRELS RUN`",
        )
    rows = [(str(qid), m, v) for qid, vals in doc["per_query"].items() for m, v in vals.items()]
    frame = pd.DataFrame(rows, columns=["query_id", "measure", "value"]).astype({"value": "float64"})
    have = set(frame["measure"])
    missing = [m for m in measures if m not in have]
    if missing:
        raise InputFormatError(
            path, None, f"has no per-query values for {', '.join(missing)} (it has: {', '.join(sorted(have))})"
        )
    return frame, doc["provenance"]


def _compare_doc(comps, provenance, baseline, measures, permutations, seed, correction, diff, n_shared) -> dict:
    doc: dict = {
        "baseline": baseline,
        "runs": list(provenance),
        "measures": [m.name for m in measures],
        "tests": {
            "t_test": "paired Student t-test, two-sided (scipy.stats.t)",
            "permutation": f"paired randomization test, two-sided, statistic mean difference, {permutations} "
            "random sign flips (exact enumeration when 2^n <= that), p = (1 + hits) / (1 + N)",
            "permutations": permutations,
            "seed": seed,
            "rng": "numpy.random.default_rng(seed), consumed measure by measure, run by run",
            "correction": correction,
            "correction_applies_to": "p_permutation, per measure, over the runs compared with the baseline",
        },
        "baseline_mean": {},
        "results": {},
        "forced": bool(diff),
        "provenance_differences": {k: list(v) for k, v in diff.items()},
        "queries_compared": n_shared if diff else None,
        "provenance": provenance,
    }
    for c in comps:
        doc["baseline_mean"][c.measure] = c.baseline_mean
        d = c.as_dict()
        d.pop("measure")
        doc["results"].setdefault(c.measure, {})[c.run] = {
            k: _json_number(v) if isinstance(v, float) else v for k, v in d.items()
        }
    return doc


COMMANDS = [reproduce, compare]
