"""``twostage judge``: relevance labels from an LLM, recorded, cached and calibrated against human labels."""

from __future__ import annotations

import json
from types import MappingProxyType

import click

from toolkit.cli.declare import Row, flag, options_of
from toolkit.cli.options import (
    CLIENT,
    DEVICE_FLAG,
    ENDPOINT_FLAG,
    SIGNIFICANCE,
    TRUST_CACHE_FLAG,
    prompt_flag,
    run_format_option,
)
from toolkit.cli.ray_options import RAY_FLAGS, sharding_from_options
from toolkit.cli.terminal import echo
from toolkit.judging.judge_options import JudgeOptions
from toolkit.quality.qrels_origin import DEFAULT_KAPPA_THRESHOLD

BACKEND_CHOICES = ("auto", "openai", "transformers")

#: ``twostage judge``'s options, in --help's order: the flags of ``JudgeOptions`` and the command's own (the
#: inputs: the run, its texts, the human qrels, the systems to rank, where to write; and how to print).
JUDGE: tuple[Row, ...] = (
    click.option(
        "--run",
        "run_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="The TREC run to judge (its documents; with --candidates, their texts from the candidates).",
    ),
    click.option(
        "--candidates",
        type=click.Path(dir_okay=False),
        default=None,
        help="Candidates JSON (run, query and passage texts in one file), as `twostage rerank` reads it; with "
        "--run, only its query and passage texts.",
    ),
    click.option("--topics", default=None, help="Query texts: a file or a collection name (as `twostage rerank`)."),
    click.option("--corpus", type=click.Path(dir_okay=False), default=None, help="Passage texts: a JSONL corpus."),
    click.option(
        "--index", "index_path", type=click.Path(file_okay=False), default=None, help="Passage texts: a Lucene index."
    ),
    flag(
        "depth",
        "--depth",
        type=click.IntRange(min=1),
        default=10,
        show_default=True,
        help="Judge each query's top N documents (trec_eval's order).",
    ),
    ENDPOINT_FLAG,
    flag(
        "model",
        "--model",
        required=True,
        metavar="NAME_OR_PATH",
        help="The endpoint's model name, or a local Hugging Face causal LM folder (transformers backend).",
    ),
    flag(
        "backend",
        "--backend",
        type=click.Choice(BACKEND_CHOICES),
        default="auto",
        show_default=True,
        help="auto: openai with --endpoint, else transformers (a local --model PATH).",
        convert=lambda v: None if v == "auto" else v,
    ),
    prompt_flag(
        "twostage's UMBRELA-style 0-3 template; front matter labels:, answer:, a text with {query} and {passage}"
    ),
    flag("holes_only", "--holes-only", is_flag=True, help="Judge only the documents --qrels does not judge."),
    click.option(
        "--qrels", default=None, help="Human qrels (file or collection name): for --holes-only and --calibrate."
    ),
    flag(
        "calibration",
        "--calibrate",
        "calibrate",
        is_flag=True,
        help="Judge the documents --qrels judges too and report agreement with the humans (confusion, kappa, "
        "weighted kappa, mean |difference|; with --rank, the systems' ranking under both).",
    ),
    flag(
        "calibrate_sample",
        "--calibrate-sample",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="--holes-only: judge also N documents of the top --depth that --qrels judges (sampled with --seed) "
        "and record the judge's agreement with the humans on them in OUT.meta.json (calibration).",
    ),
    flag(
        "kappa_threshold",
        "--kappa-threshold",
        type=click.FloatRange(-1, 1),
        default=DEFAULT_KAPPA_THRESHOLD,
        show_default=True,
        help="--calibrate, --calibrate-sample: a judge whose kappa is below it is near chance (a warning here and "
        "wherever its labels are used).",
    ),
    click.option(
        "--rank",
        "rank_runs",
        multiple=True,
        metavar="RUN",
        help="--calibrate, --calibrate-sample: a system to rank under the human qrels and under the same qrels "
        "with the judge's labels (repeatable; two or more).",
    ),
    flag("measure", "-m", "measure", default="ndcg_cut.10", show_default=True, help="--calibrate --rank: the measure."),
    flag(
        "alpha",
        "--alpha",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.05,
        show_default=True,
        help="--calibrate --rank: level of a significant difference.",
    ),
    *SIGNIFICANCE,
    click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
    flag(
        "query_ids",
        "--query-id",
        "query_ids",
        multiple=True,
        metavar="QID",
        help="Judge only these queries (repeatable).",
        convert=lambda v: list(v) or None,
    ),
    flag(
        "cache",
        "--cache",
        "cache_dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Answer cache folder [default: $TWOSTAGE_CACHE/judgments]; a rerun asks only what it lacks.",
    ),
    flag(
        "cache",
        "--no-cache",
        is_flag=True,
        help="Ask everything; store nothing (an interrupted job then restarts).",
        convert=lambda v: False if v else None,  # not given: --cache's folder, or the default
    ),
    TRUST_CACHE_FLAG,
    flag(
        "retry_unparsed",
        "--retry-unparsed",
        is_flag=True,
        help="Ask again the pairs whose cached answer does not parse (else they stay counted parse failures).",
    ),
    *CLIENT,
    flag(
        "max_failures",
        "--max-failures",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Failed requests (after retries) allowed; with more, or when all fail, exit 1 after writing OUT.",
    ),
    DEVICE_FLAG,
    flag(
        "batch_size",
        "--batch-size",
        type=click.IntRange(min=1),
        default=8,
        show_default=True,
        help="transformers: batch.",
    ),
    flag(
        "progress",
        "--no-progress",
        "no_progress",
        is_flag=True,
        help="No progress bar on stderr.",
        convert=lambda v: not v,
    ),
    *RAY_FLAGS,
    flag(
        "force",
        "--force",
        is_flag=True,
        help="With --ray: discard the shards of a different earlier job at OUT.shards.",
    ),
    click.option(
        "--out",
        type=click.Path(dir_okay=False),
        default=None,
        help="The judge's qrels (trec_eval format); records and counts go to OUT.meta.json. Required unless "
        "--calibrate.",
    ),
    run_format_option,
)

#: The keywords of ``JudgeOptions`` that have no flag, and why.
API_ONLY: MappingProxyType[str, str] = MappingProxyType({})

#: The keywords whose value the command line sets where its flag is not given, unlike the library's default.
CLI_DEFAULTS = MappingProxyType(
    {
        "progress": "the command shows a progress bar on stderr unless --no-progress",
        "kappa_threshold": "--help shows the threshold the library's None stands for (0.4)",
    }
)


@click.command("judge")
@options_of(JudgeOptions, JUDGE)
def judge_command(options: JudgeOptions, run_path, candidates, topics, corpus, index_path, qrels, rank_runs, fmt, out):
    """Label a run's top documents with an LLM judge; write trec_eval qrels and OUT.meta.json.

    Each label keeps its record: the judge (backend, model, prompt sha256),
    the raw response, the parsed label, and whether parsing or the request
    failed (a failure is counted and reported, never written as 0). Answers
    are cached by (model, prompt, query text, passage text, the endpoint and the
    request sent), so a rerun, or an interrupted job run again, asks only what
    it has not been told; the same model at another endpoint is asked again.

    \b
    Examples:
      twostage judge --candidates dl19.bm25.top100.json --depth 10 --endpoint http://localhost:8000/v1 \\
          --model Qwen/Qwen2.5-7B-Instruct --out dl19.judge.qrels
      twostage judge --run run.trec --topics topics.tsv --corpus corpus.jsonl --qrels dl19-passage \\
          --holes-only --endpoint http://localhost:8000/v1 --model M --out holes.qrels
      twostage judge --run run.trec --candidates dl19.bm25.top100.json --qrels dl19-passage --holes-only \\
          --calibrate-sample 100 --seed 1 --endpoint http://localhost:8000/v1 --model M --out holes.qrels
      twostage judge --calibrate --qrels dl19-passage --candidates dl19.bm25.top100.json --depth 20 \\
          --endpoint http://localhost:8000/v1 --model M --rank a.trec --rank b.trec --format json
    """
    from toolkit.api.judging import calibrate_judge as calibrate_fn
    from toolkit.api.judging import judge
    from toolkit.cli.declare import usage_error
    from toolkit.errors import OptionError, RequestsFailedError

    if not (candidates or run_path):
        raise click.UsageError("give --candidates, --run, or both (the run's documents, the candidates' texts)")
    if run_path and not candidates and not topics:
        raise click.UsageError("--run needs --topics (query texts), or --candidates holding them")
    if run_path and not candidates and not (corpus or index_path):
        raise click.UsageError("--run needs a text source: --corpus JSONL, --index LUCENE_INDEX or --candidates")
    if corpus and index_path:
        raise click.UsageError("give at most one of --corpus or --index")
    calibrate = options.calibration
    runs = list(rank_runs) or None
    try:  # the rules between the options and the inputs, as the library words them for the command line
        options.check_inputs(qrels=qrels or None, runs=None if calibrate else runs, out=out or None)
    except OptionError as exc:
        raise usage_error(exc) from None
    if not calibrate and not out:
        raise click.UsageError("--out is required (the qrels to write), unless --calibrate")
    if len(rank_runs) == 1:
        raise click.UsageError("--rank needs two or more runs")
    if options.ray is None:  # --workers and friends without --ray are a usage error
        sharding_from_options(
            None,
            options.workers,
            options.gpus_per_worker,
            options.cpus_per_worker,
            options.shard_size,
            options.max_retries,
            out=out or "judge",
            force=options.force,
        )
    else:
        from toolkit.extras import require

        require("ray", "--ray")
    if index_path:
        from toolkit.extras import require

        require("pyserini", "twostage judge --index (texts stored in a Lucene index)")
    inputs = {"candidates": candidates, "topics": topics, "corpus": corpus, "index": index_path, "out": out}
    if calibrate:
        try:
            result = calibrate_fn(run_path, qrels=qrels, runs=runs, **inputs, options=options)
        except RequestsFailedError as exc:
            _report(exc.result, out)
            raise
        _report(result.judgments, out)
        if fmt == "json":
            echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), kind="json")
        else:
            echo(result.agreement.to_text(), nl=False)
            echo(_ranking_qrels_text(result.judgments.meta.get("calibration") or {}), nl=False)
        return
    try:
        j = judge(run_path, qrels=qrels, runs=runs, **inputs, options=options)
    except RequestsFailedError as exc:
        _report(exc.result, out)
        raise
    _report(j, out)
    calibration = j.meta.get("calibration")
    if calibration:
        echo(_calibration_line(calibration), err=True)
    if fmt == "json":
        echo(
            json.dumps(
                {"out": out, "counts": j.counts, **({"calibration": calibration} if calibration else {})}, indent=2
            ),
            kind="json",
        )
    else:
        echo(str(out))


def _ranking_qrels_text(cal: dict) -> str:
    """Which documents each side of the calibration's system ranking uses."""
    used = cal.get("ranking_qrels")
    if not used:
        return ""
    j = used["judge"]
    return (
        f"# ranking qrels: human = {used['human']['human_labels']} human labels (every label of "
        f"{used['human']['qrels']}); judge = {j['human_labels']} human labels, {j['judge_labels_replacing_human']} "
        f"judge labels replacing human ones, {j['judge_labels_filling_holes']} judge labels filling holes\n"
    )


def _calibration_line(cal: dict) -> str:
    kappa = cal.get("kappa")
    sample = cal.get("sample") or {}
    line = (
        f"twostage: calibration on {cal.get('documents_both')} human-judged documents"
        + (f" (a sample of {sample['drawn']} of {sample['population']}, seed {sample['seed']})" if sample else "")
        + f": kappa {'n/a' if kappa is None else f'{kappa:.3f}'}"
    )
    if "kendall_tau" in cal:
        line += f", ranking tau {cal['kendall_tau']}"
    return line


def _report(j, out) -> None:
    c = j.counts
    echo(
        f"twostage: judged {c['pairs']} pairs: {c['from_cache']} from the cache, {c['asked']} asked, "
        f"{c['labels']} labels written; {c['parse_failures']} parse failures, {c['http_failures']} requests failed "
        f"after retries ({c['http_retries']} retries)"
        + (
            f"; {c['injection_suspected']} passages hold the prompt's answer marker (injection_suspected)"
            if c.get("injection_suspected")
            else ""
        )
        + (f"; records in {out}.meta.json" if out else ""),
        err=True,
    )


def qrels_source(qrels, judge_qrels, policy: str, data_dir=None, dedupe: str = "error", relevance_map=None):
    """The qrels a command evaluates with: ``qrels`` as given, or merged with ``judge_qrels`` under ``policy``
    (a ``Qrels`` carrying its origin), with a line on stderr saying how many labels of each origin it holds."""
    if not judge_qrels:
        return qrels
    if relevance_map:
        raise click.UsageError("--relevance-map cannot be combined with --judge-qrels (map the labels first)")
    if not qrels:
        raise click.UsageError("--judge-qrels needs the human qrels too (--qrels or QRELS)")
    from toolkit.api.judging import merge_qrels

    merged = merge_qrels(qrels, judge_qrels, policy, data_dir=data_dir, dedupe=dedupe)
    c = merged.origin.counts
    echo(
        f"twostage: qrels policy {policy}: {c['human_labels_used']} human labels, {c['judge_labels_used']} judge "
        f"labels used (of {c['human_labels_read']} and {c['judge_labels_read']} read)",
        err=True,
    )
    return merged


COMMANDS = (judge_command,)
