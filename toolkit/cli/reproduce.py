"""``twostage reproduce``: published tables from specs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import click

from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import DATA_DIR_FLAG, run_format_option, writable_folder
from toolkit.cli.terminal import echo
from toolkit.reproduction.reproduce_options import ReproduceOptions

#: ``twostage reproduce``'s options, in --help's order: the flags of ``ReproduceOptions`` and the command's own
#: (``--list``, ``--out``, ``--strict``, ``--run-format``).
REPRODUCE: tuple[Row, ...] = (
    click.option(
        "--list", "list_specs", is_flag=True, help="List the built-in specs and whether their inputs are here."
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        callback=writable_folder,
        help="Folder for NAME.md, NAME.html, NAME.json and the runs commands write, which appear together or not at "
        "all [default: reports/reproduce/NAME].",
    ),
    DATA_DIR_FLAG,
    flag(
        "indexes",
        "--indexes",
        type=click.Path(file_okay=False),
        default="indexes",
        show_default=True,
        help="Folder for indexes built by a spec's setup commands (reused when present).",
    ),
    flag("rows", "--row", "rows", multiple=True, metavar="ROW_ID", help="Only these rows (repeatable)."),
    flag(
        "reuse_runs",
        "--reuse-runs",
        is_flag=True,
        help="Do not re-run a row's commands when its run file already exists.",
    ),
    click.option(
        "--strict", is_flag=True, help="Exit 1 also when rows were skipped (missing data, commands, packages)."
    ),
    flag(
        "allow_commands",
        "--allow-commands",
        is_flag=True,
        help="Also run the spec's programs that are not twostage's own verbs (sh, python, scripts). Without it such "
        "a spec is refused before anything runs: read it first, they run with your permissions.",
    ),
    flag(
        "allow_endpoints",
        "--allow-endpoint",
        "allow_endpoints",
        multiple=True,
        metavar="HOST[:PORT]",
        help="Let the spec's steps send requests to this host (any port, or only PORT; a URL names its host and "
        "port), repeatable. Without it a step naming a host (--endpoint URL, --ray HOST:PORT) is refused before "
        "anything runs; the API keys of your environment go only to steps calling an endpoint allowed here.",
    ),
    run_format_option,
)
#: The keywords of ``ReproduceOptions`` that have no flag, and why (none: every one has its flag).
API_ONLY: Mapping[str, str] = MappingProxyType({})


@click.command("reproduce")
@click.argument("spec", required=False)
@options_of(ReproduceOptions, REPRODUCE)
def reproduce(spec, list_specs, out, strict, options):
    """Reproduce a published table: run what SPEC needs, evaluate, compare with the published figures.

    SPEC is a built-in name (see --list) or a YAML file. Prints the table
    (Markdown) with published, measured, delta and status per cell -- match
    (same printed digits), within tolerance, off, or skipped with the reason --
    and, for every off cell, the published and measured provenance side by
    side. Writes the same as Markdown, HTML and JSON to --out, with every
    program that ran.

    A spec runs only twostage's own verbs (`twostage bm25 ...`); any other
    program it lists is refused unless you pass --allow-commands. A step
    sending requests to a host (`twostage judge --endpoint URL`) is refused
    unless you allow that host with --allow-endpoint HOST[:PORT].

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
    from toolkit.reproduction.schema import builtin_specs, load_spec

    if list_specs:
        data = find_data(options.data_dir)
        for name, path in builtin_specs().items():
            s = load_spec(path)
            echo(f"{name:<24} {s.title}")
            echo(
                f"{'':<24} {len(s.rows)} rows x {len(s.columns)} columns "
                f"({', '.join(c.id for c in s.columns)}); {spec_readiness(s, data, _commands())}"
            )
        return
    if not spec:
        raise click.UsageError("give a SPEC (a built-in name or a YAML file), or --list")
    s = load_spec(spec)
    out_dir = Path(out) if out else Path("reports") / "reproduce" / s.name
    runner = Runner.of(s, options, work=out_dir.resolve(), commands=_commands())
    rep, paths = run_into(runner, out_dir, write_outputs)  # the folder appears whole, or stays as it was
    echo(render_markdown(rep), nl=False, kind="data")  # the Markdown of NAME.md
    echo(f"twostage: wrote {', '.join(map(str, paths))}", err=True)
    if rep.failed:
        n = rep.counts()
        raise click.ClickException(f"{s.name}: {n['off']} cell(s) off, {n['error']} error(s); see the table above")
    if strict and rep.skipped:
        raise click.ClickException(f"{s.name}: {rep.counts()['skipped']} cell(s) skipped (--strict)")


def _commands() -> set[str]:
    """The subcommands of this installation, which the reproduction runner checks a spec's steps against."""
    from toolkit.cli import main

    return set(main.commands)


COMMANDS = (reproduce,)
