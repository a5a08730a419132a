"""``twostage reproduce`` (published tables from specs) and ``twostage compare`` (significance tests)."""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.cli.options import (
    DATA_DIR,
    FAMILY,
    HOLES_OVER,
    evaluation_options,
    holes_request,
    interval_options,
    named_runs,
    qrels_policy_options,
    significance_options,
    writable_folder,
)
from toolkit.evaluation.significance import TESTS


# ---------------------------------------------------------------- reproduce
@click.command("reproduce")
@click.argument("spec", required=False)
@click.option("--list", "list_specs", is_flag=True, help="List the built-in specs and whether their inputs are here.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    callback=writable_folder,
    help="Folder for NAME.md, NAME.html, NAME.json and the runs commands write, which appear together or not at "
    "all [default: reports/reproduce/NAME].",
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
@click.option(
    "--allow-commands",
    is_flag=True,
    help="Also run the spec's programs that are not twostage's own verbs (sh, python, scripts). Without it such "
    "a spec is refused before anything runs: read it first, they run with your permissions.",
)
def reproduce(spec, list_specs, out, data_dir, indexes, rows, reuse_runs, strict, allow_commands):
    """Reproduce a published table: run what SPEC needs, evaluate, compare with the published figures.

    SPEC is a built-in name (see --list) or a YAML file. Prints the table
    (Markdown) with published, measured, delta and status per cell -- match
    (same printed digits), within tolerance, off, or skipped with the reason --
    and, for every off cell, the published and measured provenance side by
    side. Writes the same as Markdown, HTML and JSON to --out, with every
    program that ran.

    A spec runs only twostage's own verbs (`twostage bm25 ...`); any other
    program it lists is refused unless you pass --allow-commands.

    Exit status: 1 when a cell is off or a command failed (so it can gate CI);
    skipped rows are reported as INCOMPLETE, never as passing, and fail only
    with --strict.

    \b
    Examples:
      twostage reproduce --list
      twostage reproduce msmarco-dl-first-stage
      twostage reproduce anserini-cacm --out reports/cacm
    """
    from toolkit.data.catalog import data_dir as find_data
    from toolkit.report.reproduction import render_markdown, write_outputs
    from toolkit.reproduction.output import run_into
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
        allow_commands=allow_commands,
    )
    rep, paths = run_into(runner, out_dir, write_outputs)  # the folder appears whole, or stays as it was
    click.echo(render_markdown(rep), nl=False)
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
def _named_runs(values: tuple[str, ...]) -> dict[str, str]:
    """[NAME=]RUN -> {name: path}; a bare RUN is named by the path as given."""
    return named_runs(values, bare_name=str)


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
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    metavar="NAME",
    help="Baseline run (its NAME, or its path when unnamed); repeatable: every run is tested against every "
    "baseline, one correction per measure over all those tests [default: the first RUN].",
)
@click.option(
    "--test",
    type=click.Choice(list(TESTS)),
    default="randomization",
    show_default=True,
    help="The test whose p-values are corrected and marked (all are reported): randomization (sign flips), "
    "t (paired t-test), wilcoxon (signed-rank, scipy's defaults), sign (exact binomial over the non-tied "
    "queries); tukey (randomised Tukey HSD, family-wise already) needs --family all-pairs.",
)
@significance_options
@FAMILY
@interval_options()
@click.option(
    "--holes",
    is_flag=True,
    help="Bound each run's ndcg_cut.k, P.k and recall.k over every labelling of the unjudged documents in its top k "
    "(the ideal ranking from the judged documents plus those; --holes-over retrieved: over every unjudged document "
    "it retrieved); each test says 'bounds over the top-k holes overlap' (or 'the retrieved holes') where the two "
    "runs' intervals of possible values overlap (see docs/statistics.md).",
)
@HOLES_OVER
@click.option("--force", is_flag=True, help="Compare even when provenance differs (pairs only the shared queries).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "latex", "markdown"]),
    default="text",
    show_default=True,
    help="text/json: every test; latex/markdown: the systems x measures table papers print (significance "
    "marks stated under it, best value in bold).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    callback=writable_folder,
    help="Also write compare.json and compare.html (with per-query difference plots) to this folder.",
)
@evaluation_options
@qrels_policy_options
@click.argument("runs", nargs=-1, required=True)
def compare(
    qrels,
    measure_texts,
    baselines,
    test,
    permutations,
    seed,
    correction,
    family,
    ci_level,
    bootstrap,
    ci_method,
    holes,
    holes_over,
    force,
    fmt,
    out,
    runs,
    **options,
):
    """Compare RUNS (each [NAME=]RUN; the first is the baseline) with paired significance tests.

    Per measure: each run's mean, its difference to the baseline, the paired
    t-test p-value, the paired randomization test p-value (sign flips of the
    per-query differences; --permutations, --seed), the --test's p-value
    corrected for multiple comparisons (--correction, over the family:
    --family baseline, the runs compared with the baselines, or all-pairs),
    the paired bootstrap interval of the difference (--ci, --bootstrap,
    --ci-method), the effect size d_z, and per-query wins / ties / losses.
    Runs identical to another are left out of the family and named. Refuses
    runs whose evaluated query sets or settings differ, naming the difference,
    unless --force.

    A RUN ending in .json is a saved evaluation (`twostage eval -q --format
    json --out FILE`): its per-query values and provenance are used as they
    are, so results computed with other gains, cutoffs or query sets are
    caught by the provenance check.

    \b
    Examples:
      twostage compare --qrels dl19-passage -c bm25.txt rerank.txt -m ndcg_cut.10
      twostage compare --qrels dl19-passage -c -l 2 bm25=bm25.txt splade=splade.txt rr=rr.txt \\
          --baseline bm25 --baseline splade -m nDCG@10 -m R@100 --format latex
      twostage compare --qrels q.txt A B C -m ndcg_cut.10 -m recall.100 --format json --out reports/abc
      twostage compare --qrels q.txt A B C --family all-pairs --test tukey --ci-method bca
      twostage compare --qrels q.txt A B -m ndcg_cut.10 --holes
    """
    from toolkit.api.comparison import compare as compare_systems
    from toolkit.cli.options import api_options, pop_settings, settings_from

    if len(runs) < 2:
        raise click.UsageError("give at least two runs: the baseline first, then the systems to compare with it")
    named = _named_runs(runs)
    unknown = [b for b in baselines if b not in named]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not one of the RUNS", param_hint="'--baseline'")
    s = pop_settings(options)
    settings_from(s)  # a bad --gain or --discount is a usage error, before anything is read
    if not qrels and any(not p.endswith(".json") for p in named.values()):
        first = next(p for p in named.values() if not p.endswith(".json"))
        raise click.UsageError(f"--qrels is needed to evaluate the run {first} (only saved .json results need none)")
    if test == "tukey" and family != "all-pairs":
        raise click.UsageError("--test tukey compares all pairs: add --family all-pairs")
    judge_qrels, policy = options.pop("judge_qrels", None), options.pop("qrels_policy", "fill")
    if judge_qrels:
        from toolkit.cli.judge import qrels_source

        qrels = qrels_source(
            qrels, judge_qrels, policy, s.get("data_dir"), s.get("dedupe") or "error", s.get("rel_map")
        )
    result = compare_systems(
        qrels,
        named,
        baseline=list(baselines) or None,
        measures=list(measure_texts) or None,
        test=test,
        correction=correction,
        permutations=permutations,
        seed=seed,
        force=force,
        family=family,
        ci=ci_level,
        bootstrap=bootstrap,
        ci_method=ci_method,
        holes=holes_request(holes, holes_over),
        **api_options(s),
    )
    if out:
        result.write(out)
    rendered = {"json": result.to_json, "latex": result.to_latex, "markdown": result.to_markdown}
    click.echo(rendered.get(fmt, result.to_text)(), nl=False)


COMMANDS = [reproduce, compare]
