"""``twostage diagnose``: where two-stage quality is lost (candidates or reranking)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

log = logging.getLogger(__name__)


@click.command("diagnose")
@click.option("--qrels", required=True, help="Qrels file or collection name (dl19-passage, dl20-passage, cacm).")
@click.option("--first-stage", "first_path", required=True, type=click.Path(dir_okay=False), help="First-stage TREC run (the candidates).")
@click.option("--reranked", "reranked_path", required=True, type=click.Path(dir_okay=False), help="Reranked TREC run (its RUN.meta.json sidecar, when present, names the texts).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Report folder: index.html, report.md, per_query.csv, summary.json.")
@click.option("--topics", default=None, help="Query texts: a file or a collection name (default: from the reranked run's sidecar).")
@click.option("--candidates", "candidates_paths", multiple=True, type=click.Path(dir_okay=False), help="Candidates JSON for query and passage texts (repeatable; default: from the sidecar).")
@click.option("--corpus", type=click.Path(dir_okay=False), default=None, help="JSONL corpus for document snippets.")
@click.option("--index", "index_path", type=click.Path(file_okay=False), default=None, help="Lucene index with stored texts for snippets.")
@click.option("--query-types", "types_path", type=click.Path(dir_okay=False), default=None, help="qid<TAB>type per line; overrides the rules.")
@click.option("--query-rules", "rules_path", type=click.Path(dir_okay=False), default=None, help="Replace the default query-type rules: type<TAB>regex per line, or YAML [{type, pattern}].")
@click.option("--depth", type=click.IntRange(min=1), default=100, show_default=True, help="Candidate depth: first-stage R@DEPTH and the reorder check use the top DEPTH.")
@click.option("--recall-level", type=int, default=None, help="Relevance level for recall and relevant-document counts [default: 2 when the qrels are graded above 1 (TREC DL convention), else 1].")
@click.option("--complete/--no-complete", default=True, show_default=True, help="-c: every qrels query counts (missing ones score 0).")
@click.option("--ok-ndcg", type=click.FloatRange(0, 1), default=0.6, show_default=True, help="ok when reranked nDCG@10 >= this.")
@click.option("--max-unjudged", type=click.FloatRange(0, 1), default=0.3, show_default=True, help="unjudged-top when more than this share of the reranked top 10 is unjudged (and not ok).")
@click.option("--min-recall", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="candidates-missed when first-stage recall < this (and not ok, judged enough).")
@click.option("--worst", "worst_n", type=click.IntRange(min=0), default=10, show_default=True, help="How many worst queries to list.")
@click.option("--missed-shown", type=click.IntRange(min=0), default=5, show_default=True, help="Best missed judged documents listed per worst query.")
@click.option("--name", default=None, help="Report title (default: the --out folder's name).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, envvar="TWOSTAGE_DATA", help="Data folder for qrels given by name.")
def diagnose_command(qrels, first_path, reranked_path, out, topics, candidates_paths, corpus, index_path, types_path,
                     rules_path, depth, recall_level, complete, ok_ndcg, max_unjudged, min_recall, worst_n, missed_shown,
                     name, data_dir):
    """Where is quality lost: in the candidates or in the reranking? Writes a report folder.

    \b
    Example:
      twostage diagnose --qrels qrels.dl19-passage.txt --first-stage run.dl19.bm25.top100.txt \\
          --reranked reports/runs/dl19.bm25.minilm.trec --out reports/dl19-minilm
    """
    from .catalog import resolve_qrels
    from .diagnose import (Thresholds, diagnose, load_type_rules, read_query_types, sources_from_meta,
                           texts_from_sources)
    from .report.diagnosis import write_diagnosis_report
    from .rerank import read_meta
    from .catalog import resolve_topics
    from .trec_io import read_run

    thresholds = Thresholds(ok_ndcg=ok_ndcg, max_unjudged=max_unjudged, min_recall=min_recall)
    q = resolve_qrels(qrels, data_dir).read()
    if recall_level is None:
        recall_level = 2 if q.frame["relevance"].max() >= 2 else 1
    first = read_run(first_path)
    reranked = read_run(reranked_path)
    meta = read_meta(reranked_path)
    from_meta = sources_from_meta(meta) if not (candidates_paths or corpus or index_path) else {}
    cands = list(candidates_paths) or ([from_meta["candidates"]] if "candidates" in from_meta else [])
    queries, lookup, described = texts_from_sources(
        cands, corpus or from_meta.get("corpus"), index_path or from_meta.get("index"))
    topics = topics or (from_meta.get("topics") if not queries else None)
    if topics:
        queries.update(resolve_topics(topics, data_dir).as_dict())
    if not queries:
        log.warning("no query texts (give --topics or --candidates): query types are 'unknown'")
    sources = {
        "qrels": str(q.path), "first_stage": str(first_path), "reranked": str(reranked_path),
        "topics": topics, "texts": ", ".join(d["path"] for d in described) or None,
        "texts_from": "reranked run's sidecar" if from_meta and described else None,
        "reranker": (meta or {}).get("reranker", {}).get("model"),
    }
    diag = diagnose(
        q, first, reranked, name=name or Path(out).name, queries=queries, texts=lookup,
        query_types=read_query_types(types_path) if types_path else None,
        type_rules=load_type_rules(rules_path) if rules_path else None,
        thresholds=thresholds, depth=depth, recall_level=recall_level, complete=complete, worst_n=worst_n,
        missed_shown=missed_shown, sources={k: v for k, v in sources.items() if v},
    )
    paths = write_diagnosis_report(diag, out)
    for r in diag.headline:
        first_v = r["first_stage"]
        re_v = r["reranked"]
        fmt = (lambda v: "-" if v is None else (str(int(v)) if r["key"] == "num_q" else f"{v:.4f}"))
        click.echo(f"{r['measure']:<16} first {fmt(first_v):>8}  reranked {fmt(re_v):>8}", err=True)
    click.echo("labels: " + ", ".join(f"{k} {v}" for k, v in diag.label_counts.items() if v), err=True)
    for note in diag.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(paths["index.html"])


COMMANDS = [diagnose_command]
