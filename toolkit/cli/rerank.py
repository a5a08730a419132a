"""``twostage rerank``: the second stage."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import click

from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import (
    CLIENT,
    DEVICE_FLAG,
    ENDPOINT_FLAG,
    PRECISION_FLAG,
    PROFILE,
    SEED_FLAG,
    TRUST_CACHE_FLAG,
    prompt_flag,
    run_format_option,
    writable_file,
)
from toolkit.cli.ray_options import RAY_FLAGS, echo_job, sharding_from_options, worker_device
from toolkit.cli.terminal import echo
from toolkit.errors import ConfigError
from toolkit.extras import require, require_command
from toolkit.reranking.backends import DEFAULT_BACKEND, LISTWISE, RERANK_BACKENDS, RERANKER_KINDS
from toolkit.reranking.listwise_options import DEFAULT_STRIDE, DEFAULT_WINDOW
from toolkit.reranking.listwise_prompt import DEFAULT_CONTEXT_SIZE, DEFAULT_MAX_PASSAGE_WORDS
from toolkit.reranking.rerank_options import RerankOptions
from toolkit.reranking.rerankers_backend import BACKEND as RERANKERS
from toolkit.reranking.rerankers_backend import MODEL_TYPES

log = logging.getLogger(__name__)


def _query_ids(values: tuple[str, ...]) -> list[str]:
    """--query-id values: ids separated by commas or spaces, repeatable."""
    return [x for v in values for x in v.replace(",", " ").split() if x]


#: ``twostage rerank``'s options, in --help's order: the flags of ``RerankOptions`` and the command's own (the
#: inputs: the first-stage run or candidates and their texts; the tag, where to write, and how to profile).
RERANK: tuple[Row, ...] = (
    click.option(
        "--candidates",
        type=click.Path(dir_okay=False),
        default=None,
        help="Candidates JSON ([{query, hits: [{qid, docid, rank, score, content}]}]): first-stage run, query and passage texts in one file.",
    ),
    click.option(
        "--run",
        "run_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="First-stage TREC run (instead of --candidates); needs --topics and --corpus or --index.",
    ),
    click.option(
        "--topics",
        default=None,
        help="Query texts: a file (TSV qid<TAB>text, JSONL, TREC or Anserini topics) or a collection name (cacm); overrides those of --candidates.",
    ),
    click.option(
        "--corpus",
        type=click.Path(dir_okay=False),
        default=None,
        help="Document texts from a JSONL corpus ({id, contents[, title]} per line).",
    ),
    click.option(
        "--index",
        "index_path",
        type=click.Path(file_okay=False),
        default=None,
        help="Document texts stored in a Lucene index (raw or contents), read through Pyserini.",
    ),
    flag(
        "model",
        "--model",
        required=True,
        metavar="PATH_OR_NAME",
        help="Local model folder or Hugging Face name (all-MiniLM-L6-v2 resolves to the offline packaged copy).",
    ),
    flag(
        "kind",
        "--kind",
        type=click.Choice(RERANKER_KINDS),
        default="auto",
        show_default=True,
        help="bi-encoder: cosine of normalised embeddings; cross-encoder: CrossEncoder logit; auto: from the model's config.",
    ),
    flag(
        "model_type",
        "--model-type",
        type=click.Choice(MODEL_TYPES),
        default=None,
        help=f"With --backend {RERANKERS}: the rerankers library's model family (t5: monoT5-style P(true); "
        "cross-encoder: the logit); see docs/reranking.md.",
    ),
    flag(
        "depth",
        "--depth",
        type=click.IntRange(min=1),
        default=100,
        show_default=True,
        help="Rerank (and write) the top N first-stage candidates of each query.",
    ),
    flag("batch_size", "--batch-size", type=click.IntRange(min=1), default=64, show_default=True),
    flag(
        "max_length",
        "--max-length",
        type=click.IntRange(min=8),
        default=None,
        help="Truncate inputs to this many tokens (default: the model's).",
    ),
    DEVICE_FLAG,
    flag(
        "query_ids",
        "--query-id",
        "query_id_values",
        multiple=True,
        metavar="QID[,QID...]",
        help="Rerank only these queries (repeatable).",
        convert=lambda v: _query_ids(v) or None,
    ),
    flag(
        "judged_only",
        "--judged-only",
        "judged_qrels",
        default=None,
        metavar="QRELS",
        help="Rerank only queries judged in these qrels (file or name; e.g. the 54 judged DL20 topics of 200).",
    ),
    flag(
        "missing_text",
        "--missing-text",
        type=click.Choice(["error", "bottom"]),
        default="error",
        show_default=True,
        help="A candidate without text: stop, or keep it below every scored candidate.",
    ),
    click.option("--tag", default=None, help="Run tag (6th column); default: the output file's stem."),
    flag("progress", "--no-progress", is_flag=True, help="No progress bar on stderr.", convert=lambda v: not v),
    flag(
        "backend",
        "--backend",
        type=click.Choice(list(RERANK_BACKENDS)),
        default=DEFAULT_BACKEND,
        show_default=True,
        help="Bi-encoders: torch (exact), ONNX Runtime (same scores to ~1e-6, faster on CPU) or ONNX Runtime "
        "with int8 weights (fastest; changes scores, see docs/benchmarks.md); rerankers: other model families "
        "through the rerankers library (--model-type; the [rerankers] extra). listwise: an LLM reorders sliding "
        "windows of passages (rank_llm's algorithm) through --endpoint, or a local causal LM --model folder.",
    ),
    ENDPOINT_FLAG,
    flag(
        "window",
        "--window",
        type=click.IntRange(min=2),
        default=DEFAULT_WINDOW,
        show_default=True,
        help="listwise: passages per LLM call (at most --depth).",
    ),
    flag(
        "stride",
        "--stride",
        type=int,
        default=DEFAULT_STRIDE,
        show_default=True,
        help="listwise: ranks between windows, from the bottom of the top --depth up (1 to --window).",
    ),
    prompt_flag(
        "rank_llm 0.26.0's RankZephyr template; a rank_llm template YAML as it is, or twostage's front matter with "
        "{query}, {num}, {passages}"
    ),
    flag(
        "passes",
        "--passes",
        type=int,
        default=1,
        show_default=True,
        help="listwise: slide the windows N times, each pass over the order the last one left (rank_llm's --num-passes).",
    ),
    flag(
        "context_size",
        "--context-size",
        type=int,
        default=DEFAULT_CONTEXT_SIZE,
        show_default=True,
        help="listwise: passages are shortened until each prompt fits these tokens (rank_llm's count: tiktoken "
        "cl100k_base, or --tokenizer's).",
    ),
    flag(
        "max_passage_words",
        "--max-passage-words",
        type=int,
        default=DEFAULT_MAX_PASSAGE_WORDS,
        show_default=True,
        help="listwise: words of each passage before any shortening (rank_llm's --max-passage-words).",
    ),
    flag(
        "variable_passages",
        "--variable-passages/--fixed-passages",
        default=None,
        help="listwise: the template's example ordering as rank_llm wrote it with variable passages ([2] > [1]) or "
        "without ([4] > [2]) [default: the template's own].",
    ),
    flag(
        "few_shot",
        "--few-shot",
        "few_shot",
        type=click.Path(dir_okay=False),
        default=None,
        help='listwise: rank_llm\'s few-shot examples file (a JSON list of {"conversations": [{"role", "value"}]}), '
        "their turns sent before each window.",
    ),
    flag(
        "few_shot_examples",
        "--few-shot-examples",
        type=int,
        default=None,
        help="listwise: the first N examples of --few-shot [all].",
    ),
    flag(
        "system_message",
        "--system-message",
        default=None,
        help="listwise: this system message in place of the template's.",
    ),
    flag("alpha", "--alpha", is_flag=True, help="listwise: identifiers A, B, ... (rank_llm's --use-alpha)."),
    flag(
        "first_token",
        "--first-token",
        is_flag=True,
        help="listwise: rank by the first answer token's logprobs (FIRST; rank_llm's --use-logits): from the "
        "endpoint's top_logprobs, or the local --model's logits.",
    ),
    flag(
        "api",
        "--api",
        type=click.Choice(["chat", "responses"]),
        default="chat",
        show_default=True,
        help="listwise: the endpoint's API: chat/completions, or the Responses API as rank_llm's OpenAI client uses it.",
    ),
    flag(
        "tokenizer",
        "--tokenizer",
        default=None,
        metavar="PATH_OR_NAME",
        help="listwise: the served model's Hugging Face tokenizer: count tokens and send max_tokens as rank_llm's "
        "vLLM path does [default: tiktoken cl100k_base, as its OpenAI client; no max_tokens sent].",
    ),
    flag(
        "shuffles",
        "--shuffles",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="listwise: the order probe: rerank each query K more times from seeded shuffles of its candidates and "
        "record the rank-biased overlap of their top 10 with the run's in OUT.meta.json.",
    ),
    SEED_FLAG,
    flag(
        "qrels",
        "--qrels",
        "probe_qrels",
        default=None,
        metavar="QRELS",
        help="listwise, with --shuffles: qrels (file or collection name) to record the nDCG@10 of the run and of each "
        "shuffled run, and its spread over the shuffles, in OUT.meta.json.",
    ),
    flag(
        "answer_cache",
        "--answer-cache",
        "answer_cache_dir",
        type=click.Path(file_okay=False),
        default=None,
        help="listwise: the LLM answers' cache folder [$TWOSTAGE_CACHE/listwise]; a rerun asks only what it lacks.",
    ),
    flag(
        "answer_cache",
        "--no-answer-cache",
        is_flag=True,
        help="listwise: ask everything, store nothing.",
        convert=lambda v: False if v else None,  # not given: --answer-cache's folder, or the default
    ),
    *CLIENT,
    PRECISION_FLAG,
    flag(
        "embedding_cache",
        "--embedding-cache",
        "cache_dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Bi-encoders: reuse embeddings by (model, text hash) from this folder [$TWOSTAGE_CACHE/embeddings].",
    ),
    flag(
        "embedding_cache",
        "--no-embedding-cache",
        is_flag=True,
        help="Embed every passage, store nothing.",
        convert=lambda v: not v,  # not given: --embedding-cache's folder, or the default folder (True)
    ),
    TRUST_CACHE_FLAG,
    *RAY_FLAGS,
    flag(
        "force",
        "--force",
        is_flag=True,
        help="With --ray: discard the shards of a different earlier job at OUT.shards.",
    ),
    click.option(
        "--out",
        required=True,
        type=click.Path(dir_okay=False),
        callback=writable_file,
        help="Reranked TREC run; settings go to OUT.meta.json.",
    ),
    PROFILE,
    run_format_option,
)

#: The keywords of ``RerankOptions`` that have no flag, and why.
API_ONLY: MappingProxyType[str, str] = MappingProxyType({})

#: The keywords the command sets itself from its own options, and how.
SET_BY_COMMAND = MappingProxyType(
    {
        "tag": "the command's --tag (its default OUT's stem, not the library's twostage-rerank) sets it",
        "shards": "the command keeps a --ray job's shards at OUT.shards",
    }
)

#: The keywords whose value the command line sets where its flag is not given, unlike the library's default.
CLI_DEFAULTS = MappingProxyType(
    {
        "progress": "the command shows a progress bar on stderr unless --no-progress",
        "batch_size": "the command's batches are RerankerSpec's 64 texts, the library's 32",
        "embedding_cache": "the command reuses the default embedding cache unless --no-embedding-cache",
    }
)


@click.command("rerank")
# a value ListwiseOptions refuses (--passes 0) is the command's error (exit status 1), as it has always been
@options_of(RerankOptions, RERANK, passing=(ConfigError,))
def rerank(options: RerankOptions, candidates, run_path, topics, corpus, index_path, tag, out, profile):
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

    spec = options.reranker
    if profile:
        profiling.start()
        click.get_current_context().call_on_close(profiling.stop)  # ended however the command ends
        _profile_imports(spec.device if options.ray is None and spec.backend == "torch" else "cpu")

    _check_sources(candidates, run_path, topics, corpus, index_path)
    tag = tag or Path(out).stem.replace(" ", "_") or "twostage-rerank"
    options = replace(options, tag=tag)
    if spec.backend == LISTWISE:
        if not options.listwise.endpoint:
            require("rerank", "twostage rerank --backend listwise with a local --model (transformers)")
        if index_path:
            require("pyserini", "twostage rerank --index (texts stored in a Lucene index)")
        result, source = rerank_job(run_path, topics, candidates, corpus, index_path, options)
        _report_listwise(result, source, out, tag, spec.model)
        return
    _require_extras(spec.backend, index_path)
    o = options
    if o.ray is None:  # --workers and friends without --ray are a usage error
        sharding_from_options(
            None, o.workers, o.gpus_per_worker, o.cpus_per_worker, o.shard_size, o.max_retries, out=out, force=o.force
        )
    elif spec.backend == "torch":  # the workers' device
        device, precision = worker_device(spec.device, spec.precision, o.gpus_per_worker)
        options = replace(options, reranker=replace(spec, device=device, precision=precision))
    options = replace(options, shards=shards_dir(out))
    result, source = rerank_job(run_path, topics, candidates, corpus, index_path, options)
    with profiling.phase("writing"):
        settings = _write_outputs(result, out, tag, source)
    _report(result, settings, options.ray, f"{settings['reranker']['kind']} {spec.model}")
    echo(str(out))
    profiling.report()


def _report_listwise(result, source: dict, out, tag: str, model: str) -> None:
    """--backend listwise: OUT and OUT.meta.json, and what was asked, cached and repaired (the windows were asked
    by ``rerank_job``, answers cached as they arrived)."""
    settings = _write_outputs(result, out, tag, source)
    s, c = settings, settings["requests"]
    probe = settings.get("shuffles")
    spread = (probe or {}).get("ndcg_cut_10")
    echo(
        f"reranked {result.queries} queries, top {s['depth']} by {s['windows']} windows of {s['window']} (stride "
        f"{s['stride']}{', ' + str(s['passes']) + ' passes' if s.get('passes', 1) > 1 else ''}) with {model}: "
        f"{c['asked']} requests, {c['from_cache']} answers from the cache, {s['repaired']} answers repaired"
        + (
            " (" + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in s["repairs"].items() if n) + ")"
            if s["repaired"]
            else ""
        )
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
    echo(str(out))


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
        added = f"{c['added']} added" if c.get("writable", True) else f"{c['added']} embedded, not stored"
        echo(f"twostage: embedding cache {c['folder']}: {c['hits']} texts found, {added}", err=True)
    rate = result.pairs / result.seconds if result.seconds > 0 else float("inf")
    echo(
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
    from toolkit.data.trec_io import sha256_file, write_json, write_run, written, written_together

    with written_together():  # both in place, or (a write refused) neither, the previous pair kept
        write_run(result.run, out, tag=tag)
        run = {"run": {"path": str(out), "sha256": sha256_file(written(out))}}
        settings = dict(result.settings) | {"out": str(out)} | run | source
        write_json(meta_path(out), settings)
    return settings


COMMANDS = (rerank,)
