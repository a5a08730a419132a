"""``twostage diagnose``: where two-stage quality is lost (candidates or reranking), how deep to rerank, and
how rerankers compare."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from toolkit.cli.eval import load_qrels
from toolkit.cli.options import evaluation_options, settings_from

log = logging.getLogger(__name__)

#: Evaluation options diagnose declares itself (its -c is on by default, its -l is the binary level).
_OWN = ("complete", "level")
_LISTWISE_ALL = "\0all"


def _settings(values: dict):
    """The shared evaluation settings; diagnose's own -c is on by default and its -l is the binary level."""
    values = dict(values)
    values.setdefault("complete", True)
    values.setdefault("level", 1)
    return settings_from(values)


def _named_paths(values: tuple[str, ...], option: str, taken: dict[str, str] | None = None) -> dict[str, str]:
    """NAME=PATH (or PATH, named by its file name) -> {name: path}; a name given twice is a usage error. A file
    name already in ``taken`` (the same file as first stage and reranked run) gets ' (reranked)'."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or Path(v).exists() or "/" in name or not name:
            name, path = Path(v).name, v
            for suffix in (".gz", ".trec", ".txt", ".run"):
                name = name.removesuffix(suffix)
            if taken and name in taken:
                name += " (reranked)"
        if name in out or (taken and name in taken):
            raise click.BadParameter(f"two runs named {name!r}; name them: {option} NAME=RUN", param_hint=option)
        out[name] = path
    return out


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        rr, sep, first = v.partition("=")
        if not sep or not rr or not first:
            raise click.BadParameter(f"expected RERANKED=FIRST_STAGE (run names), got {v!r}", param_hint="'--pair'")
        out[rr] = first
    return out


@click.command("diagnose")
@click.option("--qrels", required=True, help="Qrels file or collection name (dl19-passage, dl20-passage, cacm).")
@click.option(
    "--first-stage",
    "first_paths",
    required=True,
    multiple=True,
    metavar="[NAME=]RUN",
    help="First-stage TREC run (the candidates); repeatable, each with a name (default: its file name).",
)
@click.option(
    "--reranked",
    "reranked_paths",
    required=True,
    multiple=True,
    metavar="[NAME=]RUN",
    help="Reranked TREC run, from twostage or any other tool (e.g. an LLM listwise reranker); repeatable, "
    "each with a name. Its RUN.meta.json sidecar, when present, gives its depth, first stage and texts. "
    "The first one is the primary run of the headline and the worst queries.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    help="Report folder: index.html, report.md, per_query.csv, pairs.csv, summary.json.",
)
@click.option(
    "-m",
    "--measure",
    default="ndcg_cut.10",
    show_default=True,
    metavar="MEASURE",
    help="Headline measure the loss is decomposed on: any ranking measure (ndcg_cut.K, P.K, recall.K, map, "
    "recip_rank, ...); binary ones at --recall-level.",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=None,
    help="Rerank depth N: the reranked runs reorder the first stage's top N [default: the sidecar's depth, "
    "else the reranked run's longest list].",
)
@click.option(
    "--curve-depths",
    default="10,20,30,50,100",
    show_default=True,
    metavar="K,K,...",
    help="Depths of the rerank-depth curve (those up to N, plus N itself).",
)
@click.option(
    "--listwise",
    "listwise",
    multiple=True,
    is_flag=False,
    flag_value=_LISTWISE_ALL,
    metavar="[NAME]",
    help="The reranked run NAME (or, without a name, every reranked run) is listwise: its depth curve is "
    "stated as an approximation. A sidecar saying listwise counts too.",
)
@click.option(
    "--pair",
    "pair_values",
    multiple=True,
    metavar="RERANKED=FIRST",
    help="Which first stage a reranked run reorders, by name (with several first stages; default: the "
    "sidecar's first stage, else the first stage holding most of its documents).",
)
@click.option(
    "--topics",
    default=None,
    help="Query texts: a file or a collection name (default: from the reranked run's sidecar).",
)
@click.option(
    "--candidates",
    "candidates_paths",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Candidates JSON for query and passage texts (repeatable; default: from the sidecar).",
)
@click.option("--corpus", type=click.Path(dir_okay=False), default=None, help="JSONL corpus for document snippets.")
@click.option(
    "--index",
    "index_path",
    type=click.Path(file_okay=False),
    default=None,
    help="Lucene index with stored texts for snippets.",
)
@click.option(
    "--query-types",
    "types_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="qid<TAB>type per line; overrides the rules.",
)
@click.option(
    "--query-rules",
    "rules_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Replace the default query-type rules: type<TAB>regex per line, or YAML [{type, pattern}].",
)
@click.option(
    "-l",
    "--recall-level",
    type=int,
    default=None,
    help="Relevance level for recall, relevant-document counts and binary headline measures [default: 2 when the qrels are graded above 1 (TREC DL convention), else 1].",
)
@click.option(
    "-c",
    "--complete/--no-complete",
    "complete",
    default=True,
    help="-c (the default): every qrels query counts (missing ones score 0); --no-complete: the qrels queries every run holds.",
)
@click.option(
    "--ok",
    "--ok-ndcg",
    "ok",
    type=click.FloatRange(0, 1),
    default=0.6,
    show_default=True,
    help="ok when reranked >= OK x ideal; candidates-missed when even the ceiling is below it.",
)
@click.option(
    "--max-unjudged",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="unjudged-top when more than this share of the reranked top 10 is unjudged (and not ok).",
)
@click.option(
    "--hurt",
    type=click.FloatRange(0, 1),
    default=0.05,
    show_default=True,
    help="reranker-hurt when reranked < first stage - HURT x ideal (decided before the other labels).",
)
@click.option(
    "--worst",
    "worst_n",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="How many worst queries to list.",
)
@click.option(
    "--most-changed",
    "most_changed_n",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="How many most changed queries (lowest RBO) to list per reranked run.",
)
@click.option(
    "--disagreements",
    "disagree_n",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many queries to list per pair of reranked runs where they differ most.",
)
@click.option(
    "--missed-shown",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Best missed judged documents listed per query.",
)
@click.option(
    "--explore-depth",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Top k of every system shown side by side for a chosen query.",
)
@click.option(
    "--permutations",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Random sign flips of the randomization test (all 2^n when that is not more).",
)
@click.option(
    "--seed", type=int, default=42, show_default=True, help="Seed of numpy's default_rng for the randomization test."
)
@click.option(
    "--correction",
    type=click.Choice(["holm", "bonferroni", "none"]),
    default="holm",
    show_default=True,
    help="Multiple-comparison correction within each family of comparisons.",
)
@click.option("--name", default=None, help="Report title (default: the --out folder's name).")
@evaluation_options(exclude=_OWN)
def diagnose_command(
    qrels,
    first_paths,
    reranked_paths,
    out,
    measure,
    depth,
    curve_depths,
    listwise,
    pair_values,
    topics,
    candidates_paths,
    corpus,
    index_path,
    types_path,
    rules_path,
    recall_level,
    complete,
    ok,
    max_unjudged,
    hurt,
    worst_n,
    most_changed_n,
    disagree_n,
    missed_shown,
    explore_depth,
    permutations,
    seed,
    correction,
    name,
    **evaluation,
):
    """How much quality is lost in the candidates and how much in the reranking; how deep to rerank; which
    reranker is better. Writes a report folder (open index.html: it needs no network).

    \b
    Examples:
      twostage diagnose --qrels dl19-passage --first-stage run.dl19.bm25.top100.txt \\
          --reranked reports/runs/dl19.bm25.minilm.trec --out reports/dl19-minilm
      twostage diagnose --qrels dl19-passage --first-stage bm25=run.dl19.bm25.top100.txt \\
          --reranked minilm=minilm.trec --reranked llm=rank_zephyr.trec --listwise llm --out reports/dl19
    """
    from toolkit.catalog import resolve_topics
    from toolkit.diagnosis.diagnose import Reranked, Thresholds, diagnose, longest_list, texts_from_sources
    from toolkit.diagnosis.query_types import load_type_rules, read_query_types
    from toolkit.errors import ConfigError
    from toolkit.report.diagnosis import write_diagnosis_report
    from toolkit.sidecar import read_meta
    from toolkit.trec_io import read_run

    try:
        depths = [int(k) for k in curve_depths.replace(" ", "").split(",") if k]
    except ValueError:
        raise click.BadParameter(
            f"expected depths like 10,20,50, got {curve_depths!r}", param_hint="'--curve-depths'"
        ) from None
    if any(k < 1 for k in depths):
        raise click.BadParameter("depths must be >= 1", param_hint="'--curve-depths'")
    thresholds = Thresholds(ok=ok, max_unjudged=max_unjudged, hurt=hurt)
    settings = _settings({**evaluation, "complete": complete})
    q = load_qrels(qrels, evaluation.get("rel_map"), evaluation.get("dedupe", "error"), evaluation.get("data_dir"))
    if recall_level is None:
        recall_level = 2 if q.frame["relevance"].max() >= 2 else 1
    dedupe = evaluation.get("dedupe", "error")
    first_named = _named_paths(first_paths, "'--first-stage'")
    reranked_named = _named_paths(reranked_paths, "'--reranked'", first_named)
    pairs = _pairs(pair_values)
    unknown = sorted(set(pairs) - set(reranked_named)) + sorted(set(pairs.values()) - set(first_named))
    if unknown:
        raise click.BadParameter(f"no run named {', '.join(map(repr, unknown))}", param_hint="'--pair'")
    bad = sorted(set(listwise) - {_LISTWISE_ALL} - set(reranked_named))
    if bad:
        raise click.BadParameter(f"no reranked run named {', '.join(map(repr, bad))}", param_hint="'--listwise'")
    firsts = {n: read_run(p, dedupe=dedupe) for n, p in first_named.items()}
    by_sha = {r.sha256: n for n, r in firsts.items()}
    inputs, metas = [], {}
    for n, path in reranked_named.items():
        run = read_run(path, dedupe=dedupe)
        meta = metas[n] = read_meta(path) or {}
        from_sidecar = meta.get("depth") if meta.get("reranker") else None  # a `twostage rerank` sidecar
        d, d_from = (
            (depth, "--depth")
            if depth
            else (
                (int(from_sidecar), "the run's sidecar")
                if from_sidecar
                else (longest_list(run), "the reranked run's longest list")
            )
        )
        first = pairs.get(n) or by_sha.get((meta.get("first_stage") or {}).get("sha256"), "")
        if not first and len(firsts) == 1:
            first = next(iter(firsts))
        is_listwise = (
            _LISTWISE_ALL in listwise
            or n in listwise
            or bool(meta.get("listwise"))
            or (meta.get("reranker") or {}).get("kind") == "listwise"
        )
        inputs.append(Reranked(n, run, first, d, is_listwise, d_from))
    from_meta = {} if (candidates_paths or corpus or index_path) else _sources_from_meta(metas)
    cands = list(candidates_paths) or from_meta.get("candidates", [])
    queries, lookup, described = texts_from_sources(
        cands, corpus or from_meta.get("corpus"), index_path or from_meta.get("index")
    )
    topics = topics or (from_meta.get("topics") if not queries else None)
    if topics:
        queries.update(resolve_topics(topics, evaluation.get("data_dir")).as_dict())
    if not queries:
        log.warning("no query texts (give --topics or --candidates): query types are 'unknown'")
    sources = {
        "qrels": str(q.path),
        "first_stage": ", ".join(first_named.values()),
        "reranked": ", ".join(reranked_named.values()),
        "topics": topics,
        "texts": ", ".join(d["path"] for d in described) or None,
        "texts_from": "the reranked runs' sidecars" if from_meta and described else None,
        "reranker": ", ".join(
            f"{n}: {m['reranker']['model']}" for n, m in metas.items() if (m.get("reranker") or {}).get("model")
        )
        or None,
    }
    try:
        diag = diagnose(
            q,
            firsts,
            inputs,
            name=name or Path(out).name,
            measure=measure,
            settings=settings,
            curve_depths=depths,
            recall_level=recall_level,
            complete=complete,
            queries=queries,
            texts=lookup,
            query_types=read_query_types(types_path) if types_path else None,
            type_rules=load_type_rules(rules_path) if rules_path else None,
            thresholds=thresholds,
            worst_n=worst_n,
            most_changed_n=most_changed_n,
            disagree_n=disagree_n,
            missed_shown=missed_shown,
            explore_depth=explore_depth,
            permutations=permutations,
            seed=seed,
            correction=correction,
            sources={k: v for k, v in sources.items() if v},
        )
    except ConfigError as exc:
        if "measure" in str(exc) or "ceiling" in str(exc):
            raise click.BadParameter(str(exc), param_hint="'-m'") from None
        raise
    paths = write_diagnosis_report(diag, out)
    _print_summary(diag)
    click.echo(paths["index.html"])


def _sources_from_meta(metas: dict[str, dict]) -> dict:
    """Texts named by the reranked runs' sidecars: every candidates file, the first corpus, index and topics."""
    from toolkit.diagnosis.diagnose import sources_from_meta

    out: dict = {"candidates": []}
    for meta in metas.values():
        found = sources_from_meta(meta)
        if "candidates" in found and found["candidates"] not in out["candidates"]:
            out["candidates"].append(found["candidates"])
        for key in ("corpus", "index", "topics"):
            if key in found:
                out.setdefault(key, found[key])
    if not out["candidates"]:
        del out["candidates"]
    return out


def _print_summary(diag) -> None:
    """The headline, the decomposition, the depth curve and the labels on stderr."""
    for r in diag.headline:

        def show(v, count=r["key"] == "num_q"):
            return "-" if v is None else (str(int(v)) if count else f"{v:.4f}")

        click.echo(f"{r['measure']:<26} first {show(r['first_stage']):>8}  reranked {show(r['reranked']):>8}", err=True)
    for p in diag.pipelines:
        m = p.decomposition.means()
        click.echo(
            f"{p.name}: {diag.measure_label} first stage {m['first_stage']:.4f}, ceiling (top {p.depth}) "
            f"{m['ceiling']:.4f}, reranked {m['reranked']:.4f}; lost in candidates "
            f"{m['lost_in_candidates']:.4f}, lost in reranking {m['lost_in_reranking']:.4f}",
            err=True,
        )
        curve = ", ".join(
            f"{int(r.depth)}: {r.reranked:.4f}/{r.ceiling:.4f}" for r in p.decomposition.curve.itertuples(index=False)
        )
        click.echo(f"  depth curve (reranked/ceiling): {curve}", err=True)
    click.echo("labels: " + ", ".join(f"{k} {v}" for k, v in diag.label_counts.items() if v), err=True)
    for note in diag.notes:
        click.echo(f"note: {note}", err=True)


COMMANDS = [diagnose_command]
