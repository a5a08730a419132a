"""``twostage doctor | index | bm25 | dense | fuse``: first-stage retrieval through Pyserini.

Every run command writes RUN (trec_eval order, atomically) and ``RUN.meta.json``
beside it: the full command, parameters, index path and checksum, versions,
query count, queries that retrieved nothing, and time taken.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click

from toolkit.api.options import Bm25Options, DenseOptions, IndexOptions
from toolkit.cli.declare import Row, apply, flag, options_of, values_of
from toolkit.cli.options import (
    DATA_DIR,
    DATA_DIR_FLAG,
    DEVICE_FLAG,
    PRECISION_FLAG,
    run_format_option,
    writable_file,
    writable_folder,
)
from toolkit.cli.ray_options import RAY_FLAGS, echo_job, sharding_from_options, worker_device
from toolkit.cli.terminal import echo
from toolkit.errors import ConfigError
from toolkit.extras import require_command
from toolkit.options import OptionsT
from toolkit.retrieval.fusion import METHODS, NORMALIZATION_NAMES


def _command_line(ctx: click.Context) -> str:
    """The command as typed (console script), else rebuilt from the parsed parameters."""
    if sys.argv and Path(sys.argv[0]).name == "twostage":
        return shlex.join(["twostage", *sys.argv[1:]])
    parts = ctx.command_path.split()
    parts[0] = "twostage"
    for name, value in ctx.params.items():
        opt = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parts += [opt] if value else []
        elif isinstance(value, tuple):
            parts += [str(v) for v in value] if name == "runs" else [x for v in value for x in (opt, str(v))]
        elif value is not None:
            parts += [opt, str(value)]
    return shlex.join(parts)


def write_run_with_meta(ctx: click.Context, run, out: str, hits: int, tag: str | None) -> None:
    """OUT and OUT.meta.json: the API's run and sidecar, with the command line that made them; then its notes."""
    from toolkit.api.run import Run

    meta = {"command": _command_line(ctx), "argv": sys.argv} | run.meta
    Run(run.inner, meta).write(out, tag=tag or run.tag or "twostage", depth=hits)
    for note in run.notes:
        echo(f"twostage: {note}", err=True)
    described = f"{run.meta['queries']} queries, {len(run)} hits, {run.meta['search_seconds']:.2f}s"
    echo(f"twostage: wrote {out} ({described}) and {out}.meta.json", err=True)


def _check_ray_flags(ray, workers, gpus_per_worker, cpus_per_worker, shard_size, max_retries) -> None:
    """--workers and friends without --ray are a usage error (``sharding_from_options`` says which)."""
    if ray is None:
        sharding_from_options(None, workers, gpus_per_worker, cpus_per_worker, shard_size, max_retries, "", False)


# ------------------------------------------------------------------ doctor
@click.command("doctor")
@DATA_DIR
@click.option("--no-jvm", is_flag=True, help="Do not start the JVM (skips the Lucene version check).")
def doctor(data_dir, no_jvm):
    """Print what the toolkit found: Python, Pyserini, Lucene/Anserini, Java, torch, faiss, the extras, data."""
    from toolkit.api.environment import doctor as report

    lines, problems = report(data_dir, jvm=not no_jvm)
    echo("\n".join(lines))
    if problems:
        raise ConfigError("; ".join(problems))


# ------------------------------------------------------------------- index
#: ``twostage index``'s options, in --help's order: the flags of ``IndexOptions`` and the command's own.
INDEX: tuple[Row, ...] = (
    click.option(
        "--collection",
        "collection",
        required=True,
        help="A collection name (cacm, cranfield), a JSONL file/folder (id, contents or title/text), "
        "a BEIR folder, or a folder for --collection-class.",
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        callback=writable_folder,
        help="Index folder [indexes/NAME or indexes/NAME.dense].",
    ),
    flag(
        "collection_class",
        "--collection-class",
        default=None,
        help="Anserini collection class for other formats (TrecCollection, HtmlCollection, ...).",
    ),
    flag("threads", "--threads", type=click.IntRange(min=1), default=2, show_default=True),
    flag(
        "positions",
        "--positions/--no-positions",
        default=True,
        show_default=True,
        help="Store term positions (phrase queries).",
    ),
    flag(
        "docvectors",
        "--docvectors/--no-docvectors",
        default=True,
        show_default=True,
        help="Store document vectors (needed by RM3).",
    ),
    flag("raw", "--raw/--no-raw", default=True, show_default=True, help="Store the raw document (for rerankers)."),
    flag(
        "dense",
        "--dense",
        is_flag=True,
        help="Build a dense FAISS index with a Hugging Face encoder instead of Lucene.",
    ),
    flag(
        "encoder", "--encoder", default="all-MiniLM-L6-v2", show_default=True, help="Encoder: HF name or local folder."
    ),
    flag("pooling", "--pooling", type=click.Choice(["mean", "cls"]), default="mean", show_default=True),
    flag(
        "normalize",
        "--normalize/--no-normalize",
        default=True,
        show_default=True,
        help="L2-normalise vectors (cosine).",
    ),
    flag("max_length", "--max-length", type=click.IntRange(min=1), default=256, show_default=True),
    flag("batch_size", "--batch-size", type=click.IntRange(min=1), default=32, show_default=True),
    flag("query_prefix", "--query-prefix", default="", help='Prepended to queries, e.g. "query: " (E5).'),
    flag("doc_prefix", "--doc-prefix", default="", help='Prepended to documents, e.g. "passage: " (E5).'),
    flag("hnsw", "--hnsw", is_flag=True, help="FAISS HNSW instead of a flat (exact) index."),
    flag("hnsw_m", "--hnsw-m", type=click.IntRange(min=2), default=32, show_default=True),
    flag(
        "limit",
        "--limit",
        type=click.IntRange(min=1),
        default=None,
        help="Dense: encode only the first N documents (smoke tests).",
    ),
    DEVICE_FLAG,
    PRECISION_FLAG,
    *RAY_FLAGS,
    flag(
        "force",
        "--force",
        is_flag=True,
        help="Rebuild even when the recorded inputs and settings match (with --ray: "
        "also discard the shards of a different earlier job).",
    ),
    flag(
        "download",
        "--download/--no-download",
        default=True,
        show_default=True,
        help="Fetch missing collection files from their declared source.",
    ),
    flag("progress", "--progress/--no-progress", default=True, show_default=True),
    DATA_DIR_FLAG,
)

#: The keywords of ``IndexOptions`` that have no flag, and why.
INDEX_API_ONLY: Mapping[str, str] = MappingProxyType({})
#: The keywords whose flag, not given, stands for another value than the library's default, and why.
INDEX_CLI_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {"progress": "the command shows progress bars unless --no-progress; the library none unless asked"}
)


@click.command("index")
@options_of(IndexOptions, INDEX)
def index(options: IndexOptions, collection, out):
    """Build a Lucene index (Anserini IndexCollection) or, with --dense, a FAISS index.

    \b
    Examples:
      twostage index --collection cacm --out indexes/cacm
      twostage index --collection cranfield --dense --out indexes/cranfield.minilm
      twostage index --collection corpus.jsonl --out indexes/mine --threads 4
      twostage index --collection corpus.jsonl --dense --ray auto --workers 8 --gpus-per-worker 1 --out indexes/mine.dense

    With --ray (dense only) the encoding is a sharded, resumable Ray job recorded in
    OUT.shards/manifest.json; the index is assembled from the shard embeddings.
    """
    from toolkit.api.pipeline import build_index

    require_command("index")
    o = options
    _check_ray_flags(o.ray, o.workers, o.gpus_per_worker, o.cpus_per_worker, o.shard_size, o.max_retries)
    if o.ray is not None:
        device, precision = worker_device(o.device, o.precision, o.gpus_per_worker)
        options = dataclasses.replace(options, device=device, precision=precision)
    info, notes = build_index(collection, out, options=options)
    for note in notes:
        echo(f"twostage: {note}", err=True)
    if not info.reused:
        echo_job(options.ray, info.meta.get("execution", {}))
    verb = "reused" if info.reused else "built"
    echo(f"twostage: {verb} {info.kind} index {info.path} ({info.documents} documents, {info.seconds:.1f}s)", err=True)
    echo(str(info.path))


# -------------------------------------------------------------------- bm25
#: The options ``bm25`` and ``dense`` share, in --help's order.
_RUN_OPTIONS: tuple[Row, ...] = (
    click.option("--index", "index_path", required=True, type=click.Path(), help="Index folder."),
    click.option(
        "--topics",
        required=True,
        help="Topics: a file (TSV, JSONL, TREC, Anserini), a collection name, or a Pyserini name.",
    ),
    flag("hits", "--hits", type=int, default=1000, show_default=True, help="Documents per query."),
    flag(
        "threads",
        "--threads",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Threads: Lucene searches this many queries at once; dense retrieval gives them to the encoder and FAISS.",
    ),
    click.option(
        "--out",
        required=True,
        type=click.Path(dir_okay=False),
        callback=writable_file,
        help="Run file; RUN.meta.json is written beside it.",
    ),
    click.option("--tag", default=None, help="Run tag (6th column) [the model name]."),
    flag(
        "max_queries",
        "--max-queries",
        type=click.IntRange(min=1),
        default=None,
        help="Only the first N topics (smoke runs).",
    ),
    DATA_DIR_FLAG,
)


#: ``twostage bm25``'s options, in --help's order: the flags of ``Bm25Options`` and the command's own.
BM25: tuple[Row, ...] = (
    *_RUN_OPTIONS,
    flag("k1", "--k1", type=float, default=0.9, show_default=True),
    flag("b", "--b", type=float, default=0.4, show_default=True),
    flag("qld", "--qld", is_flag=True, help="Query likelihood with Dirichlet smoothing instead of BM25."),
    flag("mu", "--mu", type=float, default=1000.0, show_default=True, help="Dirichlet mu (with --qld)."),
    flag("rm3", "--rm3", is_flag=True, help="RM3 pseudo-relevance feedback."),
    flag("fb_terms", "--fb-terms", type=int, default=10, show_default=True),
    flag("fb_docs", "--fb-docs", type=int, default=10, show_default=True),
    flag("original_query_weight", "--original-query-weight", type=float, default=0.5, show_default=True),
)

#: The keywords of ``Bm25Options`` that have no flag, and why.
BM25_API_ONLY: Mapping[str, str] = MappingProxyType({})


def _options(options_class: type[OptionsT], rows: tuple[Row, ...], flags: dict, **fixed: Any) -> OptionsT:
    """The options from the values of the flags among ``rows`` (popped from ``flags``) and ``fixed``, built once;
    a setting the library refuses is its error in the command line's words (exit status 1, as it always was)."""
    return options_class.from_keywords(**values_of(rows, flags), **fixed)


@click.command("bm25")
@functools.partial(apply, BM25)
@click.pass_context
def bm25(ctx, index_path, topics, out, tag, **flags):
    """Lucene retrieval: BM25 (k1, b), or --qld (mu); --rm3 adds RM3 feedback.

    \b
    Examples:
      twostage bm25 --index indexes/cacm --topics cacm --out reports/runs/cacm.bm25.trec
      twostage bm25 --index indexes/cacm --topics cacm --rm3 --out reports/runs/cacm.bm25-rm3.trec
      twostage bm25 --index indexes/cacm --topics cacm --qld --mu 1000 --out reports/runs/cacm.qld.trec
    """
    from toolkit.api.pipeline import bm25 as search_bm25

    require_command("bm25")
    options = _options(Bm25Options, BM25, flags)
    run = search_bm25(index_path, topics, options=options)
    write_run_with_meta(ctx, run, out, options.hits, tag)


#: ``twostage dense``'s options, in --help's order: the flags of ``DenseOptions`` and the command's own.
DENSE: tuple[Row, ...] = (
    *_RUN_OPTIONS,
    flag(
        "batch_size",
        "--batch-size",
        type=click.IntRange(min=1),
        default=32,
        show_default=True,
        help="Query encoding batch size.",
    ),
    flag(
        "ef_search",
        "--ef-search",
        type=click.IntRange(min=1),
        default=256,
        show_default=True,
        help="HNSW indexes: efSearch.",
    ),
    DEVICE_FLAG,
    PRECISION_FLAG,
    *RAY_FLAGS,
    flag(
        "force",
        "--force",
        is_flag=True,
        help="With --ray: discard the shards of a different earlier job at OUT.shards.",
    ),
    flag("progress", "--progress/--no-progress", default=True, show_default=True),
)

#: The keywords of ``DenseOptions`` that have no flag, and why.
DENSE_API_ONLY: Mapping[str, str] = MappingProxyType(
    {"shards": "the command keeps the Ray job's shards beside the run, in OUT.shards"}
)
#: The keywords whose flag, not given, stands for another value than the library's default, and why.
DENSE_CLI_DEFAULTS: Mapping[str, str] = INDEX_CLI_DEFAULTS


@click.command("dense")
@functools.partial(apply, DENSE)
@click.pass_context
def dense(ctx, index_path, topics, out, tag, **flags):
    """Dense retrieval over a FAISS index, queries encoded with the index's own encoder.

    \b
    Example:
      twostage dense --index indexes/cacm.dense --topics cacm --out reports/runs/cacm.minilm.trec
      twostage dense --index indexes/msmarco.dense --topics msmarco-passage-dev-subset --ray auto --workers 4 --out dev.trec

    With --ray the queries are encoded and searched in shards on the workers (each opens the
    index from its path); OUT.shards/manifest.json makes the job resumable.
    """
    from toolkit.api.pipeline import dense as search_dense
    from toolkit.jobs.shards import shards_dir

    require_command("dense")
    ray_address = flags["ray_address"]
    _check_ray_flags(
        *(
            flags[k]
            for k in ("ray_address", "workers", "gpus_per_worker", "cpus_per_worker", "shard_size", "max_retries")
        )
    )
    if ray_address is not None:
        flags["device"], flags["precision"] = worker_device(
            flags["device"], flags["precision"], flags["gpus_per_worker"]
        )
    options = _options(DenseOptions, DENSE, flags, shards=shards_dir(out))
    run = search_dense(index_path, topics, options=options)
    echo_job(ray_address, run.meta["parameters"].get("execution", {}))
    write_run_with_meta(ctx, run, out, options.hits, tag)


def _fuse_params(given: tuple[str, ...]) -> dict[str, str]:
    """``--param NAME=VALUE`` values, in order; the values stay text for ``FuseOptions`` to read."""
    out: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"--param {item!a}: write NAME=VALUE (for example --param phi=0.8)")
        if name.strip() in out:
            raise click.UsageError(f"--param {name.strip()!a} is given twice")
        out[name.strip()] = value.strip()
    return out


#: ``twostage fuse``'s options, in --help's order: the flags of ``FuseOptions`` and the command's own.
FUSE: tuple[Row, ...] = (
    flag(
        "method",
        "--method",
        type=click.Choice(list(METHODS)),
        default="rrf",
        show_default=True,
        help="The fusion method, by the name ranx, Pyserini or trectools gives it (definitions: docs/retrieval.md).",
    ),
    flag(
        "normalize",
        "--normalize",
        type=click.Choice(list(NORMALIZATION_NAMES)),
        default="none",
        show_default=True,
        help="Per-query score normalisation of each run before fusing, as ranx's (minmax: a query whose scores are "
        "all equal gets 0). A method that reads scores, or a normalisation that rescales them, reads only finite "
        "scores: a run holding inf or -inf is refused, naming its line.",
    ),
    flag(
        "weights", "--weights", default=None, metavar="W1,W2,...", help="One weight per run (wsum, wmnz, mixed, ...)."
    ),
    flag(
        "params",
        "--param",
        "params",
        multiple=True,
        metavar="NAME=VALUE",
        convert=_fuse_params,
        help="A parameter of the method by the peer's name (k, phi, gamma, sigma, n_segments, w, p, alpha; the "
        "search's metric, step, min_k, ...); repeatable.",
    ),
    click.option(
        "--train-qrels",
        default=None,
        metavar="QRELS",
        help="Judgments to learn from (probfuse, segfuse, slidefuse, mapfuse, bayesfuse, posfuse), and to search a "
        "parameter not given (weights, k, phi, ...) as ranx's optimize_fusion does.",
    ),
    flag("k", "--rrf.k", "rrf_k", default=None, metavar="K", help="RRF's constant (Pyserini's --rrf.k) [60]."),
    flag(
        "alpha",
        "--alpha",
        default=None,
        metavar="ALPHA",
        help="Interpolation: weight of the first run (Pyserini's --alpha) [0.5].",
    ),
    flag(
        "depth",
        "--depth",
        type=click.IntRange(min=1),
        default=1000,
        show_default=True,
        help="Documents taken from each run.",
    ),
    flag(
        "hits",
        "--k",
        "pyserini_k",
        type=click.IntRange(min=1),
        default=None,
        help="Documents per query (Pyserini's --k: --hits).",
    ),
    flag("hits", "--hits", type=int, default=None, help="Documents per query in the result.  [default: 1000]"),
    flag(
        "resort",
        "--resort/--no-resort",
        default=True,
        show_default=True,
        help="Rank each run by its scores in trec_eval's order (Pyserini's --resort); --no-resort: in the order of "
        "its lines.",
    ),
    click.option("--out", required=True, type=click.Path(dir_okay=False), callback=writable_file),
    click.option("--tag", default=None),
    run_format_option,
)

#: The keywords of ``FuseOptions`` that have no flag of their own, and why.
FUSE_API_ONLY: Mapping[str, str] = MappingProxyType({})


@click.command("fuse")
@click.argument("runs", nargs=-1, required=True, metavar="[NAME=]RUN [RUN ...]")
@functools.partial(apply, FUSE)
@click.pass_context
def fuse(ctx, runs, train_qrels, out, tag, **flags):
    """Fuse runs: every method of ranx, Pyserini and trectools, by their names.

    \b
    Examples:
      twostage fuse --method rrf bm25.trec dense.trec --out fused.trec
      twostage fuse --method interpolation --alpha 0.3 --normalize minmax bm25.trec dense.trec --out mix.trec
      twostage fuse --method wsum --normalize zmuv --weights 0.2,0.3,0.5 a.trec b.trec c.trec --out w.trec
      twostage fuse --method probfuse --train-qrels dl19-passage a.trec b.trec --out p.trec
    """
    from toolkit.api.pipeline import fuse as fuse_runs
    from toolkit.cli.options import named_runs
    from toolkit.retrieval.fusion import FuseOptions

    pyserini_k, hits = flags["pyserini_k"], flags["hits"]
    if pyserini_k is not None and hits is not None and pyserini_k != hits:
        raise click.UsageError(f"--k {pyserini_k} and --hits {hits} both say how many documents per query: give one")
    given = values_of(FUSE, flags)
    if pyserini_k is not None and given["method"] == "rrf" and "k" not in given and "k" not in given["params"]:
        echo(
            f"twostage: --k {pyserini_k} is the number of documents per query, as Pyserini's --k; RRF's constant is "
            "--rrf.k (60 here)",
            err=True,
        )
    # a setting the fusion refuses is its error (exit status 1), as the library words it for the command line
    options = FuseOptions.from_keywords(**given)
    run = fuse_runs(list(named_runs(runs).values()), options=options, train_qrels=train_qrels)
    write_run_with_meta(ctx, run, out, options.hits, tag)


COMMANDS = (doctor, index, bm25, dense, fuse)
