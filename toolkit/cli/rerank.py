"""``twostage rerank``: the second stage."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from toolkit.cli.options import (
    DEVICE,
    ENDPOINT,
    PRECISION,
    PROFILE,
    SEED,
    TRUST_CACHE,
    client_options,
    prompt_option,
    writable_file,
)
from toolkit.cli.ray_options import echo_job, ray_options, sharding_from_options, worker_device
from toolkit.extras import require, require_command
from toolkit.reranking.backends import DEFAULT_BACKEND, LISTWISE, RERANK_BACKENDS, RERANKER_KINDS
from toolkit.reranking.listwise import DEFAULT_STRIDE, DEFAULT_WINDOW
from toolkit.reranking.rerankers_backend import BACKEND as RERANKERS
from toolkit.reranking.rerankers_backend import MODEL_TYPES

log = logging.getLogger(__name__)


def _query_ids(values: tuple[str, ...]) -> list[str]:
    """--query-id values: ids separated by commas or spaces, repeatable."""
    return [x for v in values for x in v.replace(",", " ").split() if x]


@click.command("rerank")
@click.option(
    "--candidates",
    type=click.Path(dir_okay=False),
    default=None,
    help="Candidates JSON ([{query, hits: [{qid, docid, rank, score, content}]}]): first-stage run, query and passage texts in one file.",
)
@click.option(
    "--run",
    "run_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="First-stage TREC run (instead of --candidates); needs --topics and --corpus or --index.",
)
@click.option(
    "--topics",
    default=None,
    help="Query texts: a file (TSV qid<TAB>text, JSONL, TREC or Anserini topics) or a collection name (cacm); overrides those of --candidates.",
)
@click.option(
    "--corpus",
    type=click.Path(dir_okay=False),
    default=None,
    help="Document texts from a JSONL corpus ({id, contents[, title]} per line).",
)
@click.option(
    "--index",
    "index_path",
    type=click.Path(file_okay=False),
    default=None,
    help="Document texts stored in a Lucene index (raw or contents), read through Pyserini.",
)
@click.option(
    "--model",
    required=True,
    metavar="PATH_OR_NAME",
    help="Local model folder or Hugging Face name (all-MiniLM-L6-v2 resolves to the offline packaged copy).",
)
@click.option(
    "--kind",
    type=click.Choice(RERANKER_KINDS),
    default="auto",
    show_default=True,
    help="bi-encoder: cosine of normalised embeddings; cross-encoder: CrossEncoder logit; auto: from the model's config.",
)
@click.option(
    "--model-type",
    type=click.Choice(MODEL_TYPES),
    default=None,
    help=f"With --backend {RERANKERS}: the rerankers library's model family (t5: monoT5-style P(true); "
    "cross-encoder: the logit); see docs/reranking.md.",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Rerank (and write) the top N first-stage candidates of each query.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True)
@click.option(
    "--max-length",
    type=click.IntRange(min=8),
    default=None,
    help="Truncate inputs to this many tokens (default: the model's).",
)
@DEVICE
@click.option(
    "--query-id",
    "query_id_values",
    multiple=True,
    metavar="QID[,QID...]",
    help="Rerank only these queries (repeatable).",
)
@click.option(
    "--judged-only",
    "judged_qrels",
    default=None,
    metavar="QRELS",
    help="Rerank only queries judged in these qrels (file or name; e.g. the 54 judged DL20 topics of 200).",
)
@click.option(
    "--missing-text",
    type=click.Choice(["error", "bottom"]),
    default="error",
    show_default=True,
    help="A candidate without text: stop, or keep it below every scored candidate.",
)
@click.option("--tag", default=None, help="Run tag (6th column); default: the output file's stem.")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option(
    "--backend",
    type=click.Choice(list(RERANK_BACKENDS)),
    default=DEFAULT_BACKEND,
    show_default=True,
    help="Bi-encoders: torch (exact), ONNX Runtime (same scores to ~1e-6, faster on CPU) or ONNX Runtime "
    "with int8 weights (fastest; changes scores, see docs/benchmarks.md); rerankers: other model families "
    "through the rerankers library (--model-type; the [rerankers] extra). listwise: an LLM reorders sliding "
    "windows of passages (rank_llm's algorithm) through --endpoint, or a local causal LM --model folder.",
)
@ENDPOINT
@click.option(
    "--window",
    type=click.IntRange(min=2),
    default=DEFAULT_WINDOW,
    show_default=True,
    help="listwise: passages per LLM call (at most --depth).",
)
@click.option(
    "--stride",
    type=int,
    default=DEFAULT_STRIDE,
    show_default=True,
    help="listwise: ranks between windows, from the bottom of the top --depth up (1 to --window minus 1).",
)
@prompt_option("RankGPT's listwise prompt as rank_llm sends it; a text with {query}, {num}, {passages}")
@click.option(
    "--shuffles",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="listwise: the order probe: rerank each query K more times from seeded shuffles of its candidates and "
    "record the rank-biased overlap of their top 10 with the run's in OUT.meta.json.",
)
@SEED
@click.option(
    "--qrels",
    "probe_qrels",
    default=None,
    metavar="QRELS",
    help="listwise, with --shuffles: qrels (file or collection name) to record the nDCG@10 of the run and of each "
    "shuffled run, and its spread over the shuffles, in OUT.meta.json.",
)
@click.option(
    "--answer-cache",
    "answer_cache_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="listwise: the LLM answers' cache folder [$TWOSTAGE_CACHE/listwise]; a rerun asks only what it lacks.",
)
@click.option("--no-answer-cache", is_flag=True, help="listwise: ask everything, store nothing.")
@client_options
@PRECISION
@click.option(
    "--embedding-cache",
    "cache_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Bi-encoders: reuse embeddings by (model, text hash) from this folder [$TWOSTAGE_CACHE/embeddings].",
)
@click.option("--no-embedding-cache", is_flag=True, help="Embed every passage, store nothing.")
@TRUST_CACHE
@ray_options
@click.option("--force", is_flag=True, help="With --ray: discard the shards of a different earlier job at OUT.shards.")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    callback=writable_file,
    help="Reranked TREC run; settings go to OUT.meta.json.",
)
@PROFILE
def rerank(
    candidates,
    run_path,
    topics,
    corpus,
    index_path,
    model,
    kind,
    model_type,
    depth,
    batch_size,
    max_length,
    device,
    query_id_values,
    judged_qrels,
    missing_text,
    tag,
    no_progress,
    backend,
    endpoint,
    window,
    stride,
    prompt_path,
    shuffles,
    seed,
    probe_qrels,
    answer_cache_dir,
    no_answer_cache,
    concurrency,
    timeout,
    max_response_bytes,
    retries,
    backoff,
    rate,
    precision,
    cache_dir,
    no_embedding_cache,
    trust_cache,
    force,
    out,
    profile,
    **ray,
):
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
    from toolkit.api.pipeline import rerank_job
    from toolkit.jobs.shards import shards_dir
    from toolkit.models import profiling

    if profile:
        profiling.start()
        _profile_imports(device if ray["ray_address"] is None and backend == "torch" else "cpu")

    _check_sources(candidates, run_path, topics, corpus, index_path)
    tag = tag or Path(out).stem.replace(" ", "_") or "twostage-rerank"
    inputs = {  # what every backend takes: the candidates and their texts, the queries, the depth, the caches
        "model": model,
        "topics": topics,
        "candidates": candidates,
        "corpus": corpus,
        "index": index_path,
        "depth": depth,
        "batch_size": batch_size,
        "missing_text": missing_text,
        "query_ids": _query_ids(query_id_values),
        "judged_only": judged_qrels,
        "tag": tag,
        "progress": not no_progress,
        "trust_cache": trust_cache,
    }
    if backend == LISTWISE:
        _check_listwise(ray["ray_address"], kind, endpoint)
        if not endpoint:
            require("rerank", "twostage rerank --backend listwise with a local --model (transformers)")
        if index_path:
            require("pyserini", "twostage rerank --index (texts stored in a Lucene index)")
        listwise = {
            "endpoint": endpoint,
            "window": window,
            "stride": stride,
            "prompt": prompt_path,
            "shuffles": shuffles,
            "seed": seed,
            "qrels": probe_qrels,
            "answer_cache": False if no_answer_cache else (answer_cache_dir or True),
            "concurrency": concurrency,
            "timeout": timeout,
            "max_response_bytes": max_response_bytes,
            "retries": retries,
            "backoff": backoff,
            "rate": rate,
        }
        result, source = rerank_job(run_path, **inputs, device=device, backend=LISTWISE, listwise=listwise)
        _report_listwise(result, source, out, tag, model)
        return
    if endpoint:
        raise click.UsageError("--endpoint is for --backend listwise")
    if probe_qrels:
        raise click.UsageError("--qrels is for --backend listwise --shuffles K (the order probe)")
    _require_extras(backend, index_path)
    if ray["ray_address"] is None:  # --workers and friends without --ray are a usage error
        sharding_from_options(**ray, out=out, force=force)
    elif backend == "torch":
        device, precision = worker_device(device, precision, ray["gpus_per_worker"])
    result, source = rerank_job(
        run_path,
        **inputs,
        device=device,  # with --ray, the workers' device
        kind=kind,
        max_length=max_length,
        backend=backend,
        precision=precision,
        model_type=model_type,
        embedding_cache=False if no_embedding_cache else (cache_dir or True),
        ray=ray["ray_address"],
        **{k: v for k, v in ray.items() if k != "ray_address"},
        shards=shards_dir(out),
        force=force,
    )
    with profiling.phase("writing"):
        settings = _write_outputs(result, out, tag, source)
    _report(result, settings, ray["ray_address"], f"{settings['reranker']['kind']} {model}")
    click.echo(str(out))
    profiling.report()


def _check_listwise(ray_address, kind: str, endpoint) -> None:
    """Usage errors of --backend listwise."""
    if ray_address is not None:
        raise click.UsageError("--backend listwise runs its requests concurrently in this process; drop --ray")
    if kind != "auto":
        raise click.UsageError("--kind is for the scoring backends; --backend listwise reorders windows")
    if endpoint is not None and not endpoint.strip():
        raise click.UsageError("--endpoint is empty")


def _report_listwise(result, source: dict, out, tag: str, model: str) -> None:
    """--backend listwise: OUT and OUT.meta.json, and what was asked, cached and repaired (the windows were asked
    by ``rerank_job``, answers cached as they arrived)."""
    settings = _write_outputs(result, out, tag, source)
    s, c = settings, settings["requests"]
    probe = settings.get("shuffles")
    spread = (probe or {}).get("ndcg_cut_10")
    click.echo(
        f"reranked {result.queries} queries, top {s['depth']} by {s['windows']} windows of {s['window']} (stride "
        f"{s['stride']}) with {model}: {c['asked']} requests, {c['from_cache']} answers from the cache, "
        f"{s['repaired']} answers repaired"
        + (f"; order probe: mean RBO {probe['mean_rbo']:.3f} over {probe['n']} shuffles" if probe else "")
        + (
            f", nDCG@10 {spread['run']:.4f} (shuffled {spread['min']:.4f} to {spread['max']:.4f}, mean range per "
            f"query {spread['mean_range']:.4f})"
            if spread
            else ""
        )
        + (f"; {result.missing_texts} without text kept at the bottom" if result.missing_texts else ""),
        err=True,
    )
    click.echo(str(out))


def _profile_imports(device: str) -> None:
    """--profile: importing torch and creating the CUDA context, each timed alone before the work (the model's
    own libraries, where a model needs them, are timed as part of its load)."""
    from toolkit.models import profiling

    with profiling.phase("import torch"):
        import torch
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        with profiling.phase("CUDA context"):
            torch.zeros(1, device="cuda" if device == "auto" else device)
            torch.cuda.synchronize()


def _report(result, settings: dict, ray_address, what: str) -> None:
    """stderr: the sharded job's shards, the embedding cache's hits and the speed."""
    echo_job(ray_address, result.settings["model_work"])
    c = result.settings.get("embedding_cache")
    if c is not None:
        click.echo(f"twostage: embedding cache {c['folder']}: {c['hits']} texts found, {c['added']} added", err=True)
    rate = result.pairs / result.seconds if result.seconds > 0 else float("inf")
    click.echo(
        f"reranked {result.queries} queries, {result.pairs} candidates in {result.seconds:.1f}s "
        f"({rate:.0f}/s) with {what} on {settings['reranker']['device']}"
        + (f"; {result.missing_texts} without text kept at the bottom" if result.missing_texts else ""),
        err=True,
    )


def _require_extras(backend: str, index_path) -> None:
    """Before reading anything: the extras this rerank needs (the model's, Lucene's for --index)."""
    if backend == RERANKERS:
        require("rerankers", f"twostage rerank --backend {backend}")
    else:
        require_command("rerank")
    if backend.startswith("onnx"):
        require("onnx", f"twostage rerank --backend {backend}")
    if index_path:
        require("pyserini", "twostage rerank --index (texts stored in a Lucene index)")


def _check_sources(candidates, run_path, topics, corpus, index_path) -> None:
    """Usage errors of the text sources, before anything is read."""
    if bool(candidates) == bool(run_path):
        raise click.UsageError("give exactly one of --candidates or --run")
    if corpus and index_path:
        raise click.UsageError("give at most one of --corpus or --index")
    if run_path and not topics:
        raise click.UsageError("--run needs --topics (query texts)")
    if run_path and not (corpus or index_path):
        raise click.UsageError("--run needs a text source: --corpus JSONL or --index LUCENE_INDEX")


def _write_outputs(result, out: str, tag: str, source: dict) -> dict:
    """OUT (the reranked run) and OUT.meta.json, which records OUT's sha256 (a reader checks it: a sidecar left
    beside another run is not that run's); returns the sidecar's settings."""
    from toolkit.data.sidecar import meta_path
    from toolkit.data.trec_io import sha256_file, write_json, write_run

    write_run(result.run, out, tag=tag)
    run = {"run": {"path": str(out), "sha256": sha256_file(out)}}
    settings = dict(result.settings) | {"out": str(out)} | run | source
    write_json(meta_path(out), settings)
    return settings


COMMANDS = [rerank]
