"""An experiment end to end: inputs resolved, stages run, every configuration evaluated, files written.

``DIR/results.csv``: one row per configuration (``config``, ``stage``, ``type``, ``input``, one column
per parameter, one per measure, ``heldout_<metric>`` and ``best_in_sample_<metric>`` on tuned rows,
and per measure the difference to the baseline with its corrected p-value);
``DIR/index.html`` ranks the configurations and links each diagnosis (``DIR/diagnosis/<config>/``);
``DIR/runs/<config>.trec`` (+ ``.meta.json``); ``DIR/experiment.json``: the experiment file's text,
the resolved configuration of every point, cache keys, checksums, versions, folds and choices.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from toolkit.data.records import QUERY_ID
from toolkit.errors import ConfigError
from toolkit.experiments.spec import Experiment, parse_experiment, safe_name
from toolkit.experiments.stage_cache import StageCache
from toolkit.experiments.stages import Config, Context, run_stages, topics_checksum


@dataclass
class ExperimentResult:
    table: pd.DataFrame
    configs: list[Config]
    out: Path
    counts: dict
    seconds: float


def _index(exp: Experiment, data_dir: str | None, say) -> str:
    from toolkit.retrieval.lucene import check_lucene_index

    if "path" in exp.index:
        p = Path(exp.index["path"])
        p = p if p.is_absolute() else Path(exp.path).parent / p
        return str(check_lucene_index(p))
    from toolkit.data.corpus import resolve_corpus
    from toolkit.experiments.stage_cache import building_index
    from toolkit.retrieval.indexing import build_lucene_index

    name = str(exp.index["collection"])
    corpus = resolve_corpus(name, data=data_dir)
    with building_index(safe_name(name)) as out:
        info = build_lucene_index(corpus, out, progress=False)
    say(f"{'reused' if info.reused else 'built'} index {info.path} ({info.documents} documents)")
    return str(info.path)


def _context(exp: Experiment, cache: StageCache, data_dir, force, say) -> Context:
    from toolkit.data import catalog
    from toolkit.measures.names import EvalSettings
    from toolkit.retrieval.indexing import index_checksum

    topics = catalog.resolve_topics(exp.topics, data_dir)
    qrels = catalog.resolve_qrels(exp.qrels, data_dir).read("error")
    ev = exp.evaluation
    settings = EvalSettings(
        relevance_level=int(ev["level"]), complete=bool(ev["complete"]), trec_eval=int(ev["trec_eval"])
    )
    index = _index(exp, data_dir, say)
    unknown = set(force) - set(exp.stages)
    if unknown:
        raise ConfigError(f"--force {', '.join(sorted(unknown))}: not a stage of {exp.path} ({', '.join(exp.stages)})")
    ctx = Context(
        exp, cache, topics, topics_checksum(topics), qrels, settings, index, index_checksum(index), set(force), say
    )
    ctx.data_dir = data_dir  # dense stages build their index from a collection looked up there
    return ctx


def _evaluate(ctx: Context, configs: list[Config]):
    from toolkit.evaluation.groups import evaluate_groups
    from toolkit.measures.names import in_request_order, parse_measure_groups

    # every measure evaluate takes, per-measure settings included (AP(rel=2)@100 is its own group)
    texts = [str(m) for m in ctx.exp.evaluation["measures"]]
    groups = parse_measure_groups(texts, ctx.settings.trec_eval)
    measures = in_request_order(texts, ctx.settings.trec_eval)  # the experiment file's order: the first ranks
    means, tidy = {}, []
    for c in configs:
        res = evaluate_groups(ctx.qrels, c.run, groups, ctx.settings)
        means[c.name] = {m.name: res.aggregate[m.name] for m in measures if m.name in res.aggregate}
        pq = res.per_query[["query_id", "measure", "value"]].copy()
        pq.insert(0, "run", c.name)
        tidy.append(pq)
    return measures, means, pd.concat(tidy, ignore_index=True)


def _baseline(exp: Experiment, configs: list[Config]) -> str | None:
    b = exp.evaluation.get("baseline")
    if b is None:
        return None
    names = [c.name for c in configs]
    if b in names:
        return b
    own = [c for c in configs if c.stage.name == b]
    tuned = [c for c in own if c.tuned is not None]
    if tuned:
        return tuned[0].name
    if len(own) == 1:
        return own[0].name
    raise ConfigError(
        f"baseline {b!r} is a stage with {len(own)} configurations; name one ({', '.join(c.name for c in own)})"
    )


def _significance(exp: Experiment, tidy: pd.DataFrame, baseline: str | None) -> dict:
    from toolkit.stats.paired import identical_runs
    from toolkit.stats.significance import compare_table

    if baseline is None or tidy["run"].nunique() < 2:
        return {}
    ev = exp.evaluation
    # a configuration identical to the baseline or to another row (a tuned copy) is left out of the family:
    # its test adds nothing and would only make the correction harsher
    copies = identical_runs(tidy, [baseline])
    tested = tidy[~tidy["run"].isin(list(copies))]
    if tested["run"].nunique() < 2:
        return {}
    from toolkit.experiments.trust_columns import interval_options

    rows = compare_table(
        tested, baseline, int(ev["permutations"]), int(ev["seed"]), str(ev["correction"]), **interval_options(ev)
    )
    out: dict = {(r.run, r.measure): r for r in rows}
    out |= {(run, "identical_to"): same for run, same in copies.items()}
    return out


def _table(exp, configs, measures, means, sig, baseline) -> pd.DataFrame:
    params = list(dict.fromkeys(k for c in configs for k in c.stage.grid))
    rows = []
    for c in configs:
        row = {"config": c.name, "stage": c.stage.name, "type": c.stage.type, "input": c.input}
        row |= {p: c.point.get(p) for p in params}
        row |= means[c.name]
        if c.tuned is not None:
            m = c.tuned.metric
            row[f"heldout_{m}"] = c.tuned.heldout
            row[f"best_in_sample_{m}"] = c.tuned.best_in_sample
            row["tuning"] = c.tuned.protocol
        if baseline:
            for m in measures:
                r = sig.get((c.name, m.name))
                row[f"delta_{m.name}"] = r.delta if r else (0.0 if c.name == baseline else None)
                row[f"p_{m.name}"] = r.p_adjusted if r else None
                row[f"ci_low_{m.name}"] = r.ci_low if r else None
                row[f"ci_high_{m.name}"] = r.ci_high if r else None
                row[f"d_z_{m.name}"] = r.d_z if r else None
            row["identical_to"] = sig.get((c.name, "identical_to"))
        rows.append(row)
    table = pd.DataFrame(rows)
    for p in params:  # integer grids (depth, fb_terms) stay integers where other rows have no value
        values = table[p].dropna()
        if len(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            table[p] = table[p].astype("Int64")
    for c in ("tuning", "best_in_sample_", "heldout_"):  # beside the measures (inserted last first)
        for col in [k for k in table.columns if k.startswith(c)]:
            table.insert(4 + len(params) + len(measures), col, table.pop(col))
    table["cache"] = ["reused" if c.reused else "computed" for c in configs]
    return table


def _with_trust(ctx: Context, configs, measures, sig, baseline, table: pd.DataFrame) -> pd.DataFrame:
    """The table with every measure's hole bounds (where it has them), direction, overlap and verdict columns
    (``experiments.trust_columns``): the first measure's first, then the others' in the table's measure order."""
    from toolkit.experiments.trust_columns import group_bounds, trust_columns
    from toolkit.measures.names import parse_measure_groups

    groups = parse_measure_groups([str(m) for m in ctx.exp.evaluation["measures"]], ctx.settings.trec_eval)
    bounds = group_bounds(ctx.qrels, configs, groups, ctx.settings)
    for m in measures:
        cols = trust_columns(configs, bounds.get(m.name, {}), sig, baseline, m.name)
        for k in dict.fromkeys(k for row in cols.values() for k in row):
            table[k] = [cols.get(c.name, {}).get(k) for c in configs]
    table["cache"] = table.pop("cache")  # stays last
    return table


def _diagnose(ctx: Context, c: Config, by_name: dict[str, Config], out: Path) -> str:
    from toolkit.data.workspace import Workspace
    from toolkit.diagnosis.compute import DiagnosisInputs, diagnose_with_uncertainty
    from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
    from toolkit.report.diagnosis_page import write_diagnosis_report

    first = by_name[c.input]
    # a grid depth beyond the first stage's lists reranked every candidate: the diagnosis reads it as the
    # longest list (an explicit larger depth is an error in `diagnose`, which names the fix)
    longest = int(first.run.frame.groupby("query_id", observed=True).size().max()) if len(first.run.frame) else 0
    depth = min(c.depth, longest) if c.depth and longest else c.depth
    from toolkit.experiments.trust_columns import interval_options

    intervals = interval_options(ctx.exp.evaluation)
    options = DiagnosisOptions(
        name=f"{ctx.exp.name}: {c.name}",
        settings=ctx.settings,
        depth=depth,
        recall_level=2,  # the experiment's diagnoses have always read recall and binary measures at level 2
        permutations=int(ctx.exp.evaluation["permutations"]),
        seed=int(ctx.exp.evaluation["seed"]),
        correction=str(ctx.exp.evaluation["correction"]),
        ci=intervals["level"],
        bootstrap=intervals["resamples"],
        ci_method=intervals["ci_method"],
    )
    inputs = DiagnosisInputs(
        ctx.qrels,
        {first.name: first.run},
        {c.name: c.run},
        queries=dict(ctx.topics.as_dict()),
        work=Workspace(),  # this diagnosis's: every run sorted once; it goes when the diagnosis is done
    )
    diag = diagnose_with_uncertainty(inputs, options)
    folder = out / "diagnosis" / safe_name(c.name)
    write_diagnosis_report(diag, folder)
    return str(folder.relative_to(out) / "index.html")


def _write_runs(ctx: Context, configs: list[Config], out: Path) -> None:
    from toolkit.data.trec_io import sha256_file, write_json, write_run

    for c in configs:
        path = out / "runs" / f"{safe_name(c.name)}.trec"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_run(c.run, path, tag=safe_name(c.name), depth=ctx.exp.hits)
        write_json(
            str(path) + ".meta.json", {"run": {"path": path.name, "sha256": sha256_file(path)}} | _resolved(ctx, c)
        )


def _resolved(ctx: Context, c: Config) -> dict:
    d = {
        "config": c.name,
        "stage": c.stage.name,
        "type": c.stage.type,
        "parameters": c.point,
        "input": c.input or None,
        "cache_key": c.key or None,
        "reused": c.reused,
        "index": {"path": ctx.index, "sha256": ctx.index_sha},
        "topics": {"spec": ctx.exp.topics, "sha256": ctx.topics_sha, "count": len(ctx.topics)},
        "hits": ctx.exp.hits,
    }
    if c.tuned is not None:
        d["tuning"] = c.tuned.as_dict()
    return d


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from toolkit.version import __version__

    out = {"twostage": __version__}
    for pkg in ("pyserini", "torch", "transformers", "sentence-transformers", "numpy", "pandas"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def run_experiment(
    path: str | Path,
    out: str | Path,
    force: tuple[str, ...] = (),
    data_dir: str | None = None,
    cache: StageCache | None = None,
    say: Callable[[str], None] = print,
    grid=None,
) -> ExperimentResult:
    """Run the experiment file ``path`` into ``out``; returns the results table (also in results.csv).

    ``grid``: a ``toolkit.experiments.ray_grid.RayGrid`` (``--ray``) computes the missing search, dense and
    rerank points on Ray; it is closed (workers stopped) once the stages are done.
    """
    from toolkit.guard.writer import check_target, result_folder

    started = time.perf_counter()
    exp = parse_experiment(path)  # every check before anything runs
    check_target(out, "experiment", OUTPUT_NAMES)  # a folder holding what twostage did not write is refused now
    cache = cache or StageCache()
    cache.probe()  # a stage cache that cannot be written: one error now, not after the first stage
    ctx = _context(exp, cache, data_dir, force, say)
    ctx.grid = grid
    try:
        configs = run_stages(ctx)
    finally:
        if grid is not None:  # the workers' JVMs and models are not needed for the evaluation and reports
            grid.close()
    measures, means, tidy = _evaluate(ctx, configs)
    baseline = _baseline(exp, configs)
    sig = _significance(exp, tidy, baseline)
    table = _with_trust(ctx, configs, measures, sig, baseline, _table(exp, configs, measures, means, sig, baseline))
    out = Path(out)
    # the whole folder is written beside OUT and renamed into place: it holds this experiment's runs only
    with result_folder(out, "experiment", OUTPUT_NAMES) as tmp:
        _write_outputs(ctx, exp, path, configs, table, measures, baseline, grid, tmp)
    seconds = time.perf_counter() - started
    say(
        f"experiment {exp.name}: {len(configs)} configurations; stage runs {ctx.counts['computed']} computed, "
        f"{ctx.counts['reused']} reused; {seconds:.1f}s; wrote {out / 'results.csv'} and {out / 'index.html'}"
    )
    return ExperimentResult(table, configs, out, dict(ctx.counts), seconds)


#: What an experiment's output folder holds.
OUTPUT_NAMES = ("results.csv", "experiment.json", "index.html", "runs", "diagnosis")


def _write_outputs(ctx: Context, exp: Experiment, path, configs, table, measures, baseline, grid, out: Path) -> None:
    from toolkit.data.trec_io import atomic_write, write_json
    from toolkit.experiments.report import write_index_html
    from toolkit.guard.escape import csv_table

    _write_runs(ctx, configs, out)
    by_name = {c.name: c for c in configs}
    links = {c.name: _diagnose(ctx, c, by_name, out) for c in configs if c.stage.type == "rerank"}
    with atomic_write(out / "results.csv") as fh:
        # floats: the shortest text that reads back as the same double; a name holding a line break is quoted
        fh.write(csv_table(table))
    write_json(
        out / "experiment.json",
        {
            "experiment": {"path": str(Path(path).resolve()), "text": Path(path).read_text(encoding="utf-8")},
            "baseline": baseline,
            "settings": ctx.settings.describe(),
            "measures": [m.name for m in measures],
            "configurations": [_resolved(ctx, c) for c in configs],
            "cache": {"folder": str(ctx.cache.folder), **ctx.counts},
            "execution": {"engine": "local"} if grid is None else grid.describe() | {"points": grid.computed},
            "versions": _versions(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    params = list(dict.fromkeys(k for c in configs for k in c.stage.grid))
    write_index_html(
        out / "index.html", exp, table, measures[0].name, baseline, links, params, [m.name for m in measures]
    )


def judged_queries(qrels) -> list[str]:
    return sorted(qrels.frame[QUERY_ID].unique().tolist())


def table_text(table: pd.DataFrame, measures: list[str] | None = None) -> str:
    """The results table for a terminal: config, parameters, measures to 4 decimals."""
    drop = [
        c
        for c in table.columns
        if c.startswith(("delta_", "p_", "verdict_", "direction_", "bounds_overlap_"))
        or c in ("stage", "type", "tuning")
    ]
    shown = table.drop(columns=drop).dropna(axis=1, how="all")
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="")


__all__ = ["ExperimentResult", "json", "run_experiment", "safe_name", "table_text"]
