"""``twostage rerank`` (second stage) and ``twostage diagnose`` (where quality is lost)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from .cli_ray import echo_job, ray_options, sharding_from_options, worker_device

log = logging.getLogger(__name__)


def _query_ids(values: tuple[str, ...], qrels_path: str | None) -> list[str] | None:
    ids: list[str] = []
    for v in values:
        ids += [x for x in v.replace(",", " ").split() if x]
    if qrels_path:
        from .catalog import resolve_qrels

        judged = set(resolve_qrels(qrels_path).read().query_ids)
        ids = [q for q in ids if q in judged] if ids else sorted(judged)
    return ids or None


@click.command("rerank")
@click.option("--candidates", type=click.Path(dir_okay=False), default=None,
              help="Candidates JSON ([{query, hits: [{qid, docid, rank, score, content}]}]): first-stage run, query and passage texts in one file.")
@click.option("--run", "run_path", type=click.Path(dir_okay=False), default=None,
              help="First-stage TREC run (instead of --candidates); needs --topics and --corpus or --index.")
@click.option("--topics", default=None,
              help="Query texts: a file (TSV qid<TAB>text, JSONL, TREC or Anserini topics) or a collection name (cacm); overrides those of --candidates.")
@click.option("--corpus", type=click.Path(dir_okay=False), default=None,
              help="Document texts from a JSONL corpus ({id, contents[, title]} per line).")
@click.option("--index", "index_path", type=click.Path(file_okay=False), default=None,
              help="Document texts stored in a Lucene index (raw or contents), read through Pyserini.")
@click.option("--model", required=True, metavar="PATH_OR_NAME",
              help="Local model folder or Hugging Face name (all-MiniLM-L6-v2 resolves to the offline packaged copy).")
@click.option("--kind", type=click.Choice(["auto", "bi-encoder", "cross-encoder"]), default="auto", show_default=True,
              help="bi-encoder: cosine of normalised embeddings; cross-encoder: CrossEncoder logit; auto: from the model's config.")
@click.option("--depth", type=click.IntRange(min=1), default=100, show_default=True,
              help="Rerank (and write) the top N first-stage candidates of each query.")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--max-length", type=click.IntRange(min=8), default=None, help="Truncate inputs to this many tokens (default: the model's).")
@click.option("--device", default="auto", show_default=True, help="auto (cuda when available), cpu, cuda, cuda:N, mps.")
@click.option("--query-id", "query_id_values", multiple=True, metavar="QID[,QID...]", help="Rerank only these queries (repeatable).")
@click.option("--judged-only", "judged_qrels", default=None, metavar="QRELS",
              help="Rerank only queries judged in these qrels (file or name; e.g. the 54 judged DL20 topics of 200).")
@click.option("--missing-text", type=click.Choice(["error", "bottom"]), default="error", show_default=True,
              help="A candidate without text: stop, or keep it below every scored candidate.")
@click.option("--tag", default=None, help="Run tag (6th column); default: the output file's stem.")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option("--backend", type=click.Choice(["torch", "onnx", "onnx-int8"]), default="torch", show_default=True,
              help="Bi-encoders: torch (exact), ONNX Runtime (same scores to ~1e-6, faster on CPU) or ONNX Runtime "
                   "with int8 weights (fastest; changes scores, see the README).")
@click.option("--precision", type=click.Choice(["auto", "fp32", "fp16"]), default="auto", show_default=True,
              help="auto: fp16 on CUDA, fp32 elsewhere (stated in the sidecar).")
@click.option("--embedding-cache", "cache_dir", type=click.Path(file_okay=False), default=None,
              help="Bi-encoders: reuse embeddings by (model, text hash) from this folder [$TWOSTAGE_CACHE/embeddings].")
@click.option("--no-embedding-cache", is_flag=True, help="Embed every passage, store nothing.")
@ray_options
@click.option("--force", is_flag=True, help="With --ray: discard the shards of a different earlier job at OUT.shards.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Reranked TREC run; settings go to OUT.meta.json.")
def rerank(candidates, run_path, topics, corpus, index_path, model, kind, depth, batch_size, max_length, device,
           query_id_values, judged_qrels, missing_text, tag, no_progress, backend, precision, cache_dir,
           no_embedding_cache, ray_address, workers, gpus_per_worker, cpus_per_worker, shard_size, max_retries, force,
           out):
    """Rerank a first-stage run's top-N candidates with a bi- or cross-encoder.

    \b
    Examples:
      twostage rerank --candidates dl19.bm25.top100.json --model all-MiniLM-L6-v2 --out runs/dl19.minilm.trec
      twostage rerank --run bm25.trec --topics topics.tsv --index indexes/cacm --model MODEL --out runs/cacm.trec
      twostage rerank --candidates c.json --model cross-encoder/ms-marco-MiniLM-L-6-v2 --kind cross-encoder --out r.trec
      twostage rerank --candidates c.json --model all-MiniLM-L6-v2 --ray auto --workers 8 --gpus-per-worker 1 --out r.trec

    With --ray the model work is split into shards recorded in OUT.shards/manifest.json;
    running the same command again after an interruption does only the unfinished shards.
    """
    from .catalog import resolve_topics
    from .rerank import (RerankerSpec, embedding_namespace, lucene_text_source, meta_path, read_candidates,
                         read_jsonl_corpus, rerank_run)
    from .trec_io import read_run, write_json, write_run

    if bool(candidates) == bool(run_path):
        raise click.UsageError("give exactly one of --candidates or --run")
    if corpus and index_path:
        raise click.UsageError("give at most one of --corpus or --index")
    sharding = sharding_from_options(ray_address, workers, gpus_per_worker, cpus_per_worker, shard_size, max_retries,
                                     out, force)
    cand = read_candidates(candidates) if candidates else None
    first = cand.run if cand else read_run(run_path)
    queries = dict(cand.topics.as_dict()) if cand else {}
    if topics:
        queries.update(resolve_topics(topics).as_dict())
    if not queries:
        raise click.UsageError("--run needs --topics (query texts)")
    if corpus:
        texts = read_jsonl_corpus(corpus, wanted=set(first.frame["doc_id"].unique().tolist()))
    elif index_path:
        texts = lucene_text_source(index_path)
    elif cand is not None:
        texts = cand.text_source()
    else:
        raise click.UsageError("--run needs a text source: --corpus JSONL or --index LUCENE_INDEX")
    if sharding is not None and backend == "torch":
        device, precision = worker_device(device, precision, gpus_per_worker)
    spec = RerankerSpec(model, kind, device, batch_size, max_length, backend, precision).resolved()
    reranker = spec if sharding is not None else spec.build()  # on Ray each worker builds its own
    cache = None
    if spec.kind == "bi-encoder" and not no_embedding_cache:
        from .embed_cache import EmbeddingCache, default_folder

        desc = reranker.describe() if sharding is None else spec.describe()
        cache = EmbeddingCache(cache_dir or default_folder(), embedding_namespace(desc))
    tag = tag or Path(out).stem.replace(" ", "_") or "twostage-rerank"
    try:
        result = rerank_run(first, queries, texts, reranker, depth=depth, missing_text=missing_text,
                            query_ids=_query_ids(query_id_values, judged_qrels), progress=not no_progress, tag=tag,
                            sharding=sharding, cache=cache)
    finally:
        if sharding is not None:
            from .distributed import shutdown

            shutdown()
    echo_job(sharding, result.settings["model_work"])
    if cache is not None:
        c = result.settings["embedding_cache"]
        click.echo(f"twostage: embedding cache {c['folder']}: {c['hits']} texts found, {c['added']} added", err=True)
    write_run(result.run, out, tag=tag)
    settings = dict(result.settings)
    settings["out"] = str(out)
    settings["topics"] = str(topics) if topics else (cand.path if cand else None)
    settings["topics_resolved"] = (str(Path(settings["topics"]).resolve())
                                   if settings["topics"] and Path(settings["topics"]).exists() else None)
    write_json(meta_path(out), settings)
    rate = result.pairs / result.seconds if result.seconds > 0 else float("inf")
    click.echo(
        f"reranked {result.queries} queries, {result.pairs} candidates in {result.seconds:.1f}s "
        f"({rate:.0f}/s) with {spec.kind} {model} on {settings['reranker']['device']}"
        + (f"; {result.missing_texts} without text kept at the bottom" if result.missing_texts else ""),
        err=True,
    )
    click.echo(str(out))



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
    from .report import write_diagnosis_report
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


COMMANDS = [rerank, diagnose_command]
