"""``judge``: relevance labels from an LLM for a run's top documents, recorded and cached; and its calibration
against human labels (``calibrate``), reusing the assessor agreement of ``toolkit.api.assessors``."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.guard.client import DEFAULT_BACKOFF, DEFAULT_CONCURRENCY, DEFAULT_RETRIES, DEFAULT_TIMEOUT

log = logging.getLogger(__name__)

BACKEND_NAMES = ("openai", "transformers")


@dataclass(frozen=True)
class Judgments:
    """What a judging job produced: ``qrels`` (query_id, doc_id, relevance of the pairs with a label),
    ``records`` (one per pair: the judge, the prompt's sha256, the raw response, the parsed label, failures),
    ``counts`` and ``meta`` (the document written to ``OUT.qrels.meta.json``)."""

    qrels: pd.DataFrame
    records: tuple[dict, ...]
    counts: dict
    meta: dict

    def to_trec(self) -> str:
        """The qrels in trec_eval's format (``qid 0 docno label``), in the order of the pairs."""
        return "".join(f"{q} 0 {d} {int(r)}\n" for q, d, r in self.qrels.itertuples(index=False))

    def write(self, path: str | os.PathLike) -> None:
        """``path`` (trec_eval qrels) and ``path.meta.json``, each written atomically."""
        from toolkit.data.trec_io import atomic_write, sha256_bytes, write_json, written_together

        text = self.to_trec()
        meta = dict(self.meta) | {"qrels": {"path": str(path), "sha256": sha256_bytes(text.encode("utf-8"))}}
        with written_together():  # both in place, or (a write refused) neither, the previous pair kept
            with atomic_write(path) as fh:
                fh.write(text)
            write_json(str(path) + ".meta.json", meta)


def build_judge(
    backend: str,
    model: str,
    *,
    endpoint: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    rate: float | None = None,
    device: str = "auto",
    batch_size: int = 8,
    max_response_bytes: int | None = None,
) -> Any:
    """A judge backend from ``llm.chat.BACKENDS`` (``openai`` needs ``endpoint``)."""
    from toolkit.errors import ConfigError
    from toolkit.llm.chat import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "openai":
        if not endpoint:
            raise ConfigError("the openai backend needs endpoint= (e.g. http://localhost:8000/v1)")
        return BACKENDS["openai"](
            endpoint,
            model,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            rate=rate,
            **({"max_response_bytes": max_response_bytes} if max_response_bytes is not None else {}),
        )
    if endpoint:
        raise ConfigError("endpoint= is for the openai backend; the transformers backend runs model= locally")
    return BACKENDS["transformers"](model, device=device, batch_size=batch_size)


def _model_name(model: str) -> str:
    return Path(str(model).rstrip("/")).name.lower()


def same_model_warnings(judge_model: str, runs: Mapping[str, Any]) -> list[str]:
    """A warning for each run whose ``RUN.meta.json`` names a reranker with the judge's model (a system judged
    by itself); also issued as Python warnings."""
    from toolkit.data.sidecar import read_meta

    out = []
    for name, run in runs.items():
        if not isinstance(run, (str, os.PathLike)):
            continue
        meta = read_meta(run) or {}
        reranker = (meta.get("reranker") or {}).get("model")
        if reranker and _model_name(str(reranker)) == _model_name(judge_model):
            msg = (
                f"the judge's model {judge_model!r} is the reranker of {name} ({reranker!r} in its sidecar): "
                "that run is judged by its own model"
            )
            warnings.warn(msg, UserWarning, stacklevel=3)
            out.append(msg)
    return out


def judge(
    run: Any = None,
    *,
    model: str,
    endpoint: str | None = None,
    backend: str | None = None,
    candidates: str | os.PathLike | None = None,
    topics: Any = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    depth: int = 10,
    holes_only: bool = False,
    qrels: Any = None,
    calibration: bool = False,
    query_ids: Iterable[str] | None = None,
    prompt: str | os.PathLike | None = None,
    cache: str | os.PathLike | bool = True,
    trust_cache: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    rate: float | None = None,
    device: str = "auto",
    batch_size: int = 8,
    out: str | os.PathLike | None = None,
    progress: bool = False,
    ray: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    cpus_per_worker: float | None = None,
    shard_size: int | None = None,
    max_retries: int | None = None,
    force: bool = False,
    retry_unparsed: bool = False,
    max_failures: int = 0,
    max_response_bytes: int | None = None,
    calibrate_sample: int = 0,
    seed: int = 42,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    measure: str = "ndcg_cut.10",
    alpha: float = 0.05,
    permutations: int = 10_000,
    correction: str = "holm",
    kappa_threshold: float | None = None,
) -> Judgments:
    """Ask an LLM for a graded relevance label of each of a run's top ``depth`` documents.

    Args:
        run: a first-stage or reranked run (a path, a ``Run``, a DataFrame, ...); or None with ``candidates``.
            With ``candidates`` too, the documents judged are the run's, their texts the candidates'.
        model: the endpoint's model name (``openai``) or a local model folder (``transformers``).
        endpoint: an OpenAI-compatible base URL (``http://localhost:8000/v1``); picks the ``openai`` backend.
        backend: ``openai`` or ``transformers`` (default: ``openai`` with an endpoint, else ``transformers``).
        candidates: a candidates JSON (run, query and passage texts in one file), as ``rerank`` reads it: the
            run judged when ``run`` is None, else only the query and passage texts.
        topics: query texts (a file, a collection name, or ``{qid: text}``).
        corpus: passage texts from a JSONL corpus.
        index: passage texts stored in a Lucene index.
        depth: judge each query's top ``depth`` documents (trec_eval's order).
        holes_only: judge only the documents ``qrels`` does not judge.
        qrels: human judgments (for ``holes_only`` and ``calibration``). Qrels sharing no query with the run
            are refused (``NoCommonQueriesError``, as ``evaluate`` refuses them), before anything is asked; with
            ``holes_only``, run queries without a human label are warned about (each of their documents is a
            hole, and the ``fill`` policy uses none of them).
        calibration: judge only the documents ``qrels`` judges (to measure the judge against them).
        query_ids: judge only these queries.
        prompt: a template file (default: the shipped UMBRELA-style 0-3 template).
        cache: True (``$TWOSTAGE_CACHE/judgments``), a folder, or False (ask everything, store nothing). A
            folder the file system refuses is ``CacheUnusableError``, never a cache silently not kept.
        trust_cache: read the cache even when another user owns its folder or file, or may write to them
            (without it such a cache is not read nor written: one warning; ``toolkit.guard.store``).
        concurrency: ``openai``: requests in flight.
        timeout: ``openai``: the deadline of each request in seconds (connecting, sending and the whole answer).
        retries: ``openai``: retries of a failed request (timeouts, refused connections, 429, 5xx).
        backoff: ``openai``: first retry after this many seconds, doubling.
        rate: ``openai``: at most this many requests per second.
        device: ``transformers``: auto, cpu, cuda, cuda:N, mps.
        batch_size: ``transformers``: prompts per generation batch.
        out: write the qrels there and the records to ``out.meta.json``.
        progress: a progress bar on stderr.
        ray: spread the judge's calls over Ray workers (``auto``, ``local`` or an address), in shards recorded
            in ``out.shards/manifest.json`` (needs ``out``); a killed job resumes at its unfinished shards.
        workers: Ray actors (default 2).
        gpus_per_worker: GPUs per actor (transformers judges).
        cpus_per_worker: CPUs per actor (default 1).
        shard_size: pairs per shard (default 256).
        max_retries: retries of a failed shard on another actor (default 3).
        force: discard the shards of a different earlier job at ``out.shards``.
        max_failures: the failed requests (after their retries) a job may have; with more, or when every request
            failed, ``RequestsFailedError`` is raised after ``out`` is written (its ``result`` holds the judgments).
        max_response_bytes: ``openai``: the longest answer read (default 4 MiB); a longer one is a failed request.
        retry_unparsed: ask again the pairs whose cached answer the template cannot parse (a fixed endpoint or
            a model that answered badly once); the new answers replace the old in the cache.
        calibrate_sample: with ``holes_only``: judge also a sample of this many documents of the run's top
            ``depth`` that ``qrels`` judges (drawn with ``numpy.random.default_rng(seed)``), and record the
            judge's agreement with the humans on them under ``calibration`` in ``out.meta.json`` (the sample's
            labels stay in the records, marked ``calibration_sample``; ``out`` holds the holes' labels only).
        seed: the sample's seed (and the randomization test's, with ``runs``).
        runs: with ``calibrate_sample``: systems ranked under the human qrels and under the human qrels filled
            with the judge's hole labels (as ``calibrate_judge`` ranks them).
        measure: the measure that ranks ``runs``.
        alpha: the level of a significant difference between ``runs``.
        permutations: random sign flips of the randomization test over ``runs``.
        correction: ``holm``, ``bonferroni`` or ``none`` over all pairs of ``runs``.
        kappa_threshold: a calibration whose Cohen's kappa is below it is near chance: a warning now and at every
            use of the labels (``merge_qrels``, eval, compare, diagnose, the diagnosis page); default 0.4.

    Raises:
        RequestsFailedError: more than ``max_failures`` requests failed, or all did (after writing ``out``).
        ConfigError: an unreachable endpoint (before anything is asked or written), a missing query or
            passage text, inconsistent options.
        InputFormatError: a prompt template without ``{query}`` and ``{passage}``, or with a bad scale.
        CacheUnusableError: the cache folder cannot be made, read or written (full, read-only, no permission, a
            missing folder that cannot be made, ...): the job stops, ``out`` is not written; ``cache=False`` runs
            without it.
    """
    from toolkit.data.texts import topics_source
    from toolkit.errors import ConfigError
    from toolkit.judging.judge_job import depth_used, items_with_texts, judge_items, select_pairs
    from toolkit.judging.prompt import load_template
    from toolkit.llm.answer_cache import JudgmentCache, default_folder

    if holes_only and calibration:
        raise ConfigError("holes_only and calibration exclude each other (holes have no human label to compare)")
    if (holes_only or calibration) and qrels is None:
        raise ConfigError("holes_only and calibration need qrels= (the human judgments)")
    if calibrate_sample < 0:
        raise ConfigError(f"calibrate_sample must be >= 0, not {calibrate_sample}")
    if calibrate_sample and not holes_only:
        raise ConfigError(
            "calibrate_sample= samples human-judged documents beside the holes: it needs holes_only=True "
            "(calibrate_judge judges every human-judged document of the top depth)"
        )
    if runs and not calibrate_sample:
        raise ConfigError("runs= are ranked in a calibration: give calibrate_sample= (or use calibrate_judge)")
    backend = backend or ("openai" if endpoint else "transformers")
    template = load_template(prompt)
    j = build_judge(
        backend,
        model,
        endpoint=endpoint,
        concurrency=concurrency,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        rate=rate,
        device=device,
        batch_size=batch_size,
        max_response_bytes=max_response_bytes,
    )
    cand, first, queries, texts = _judge_inputs(run, candidates, topics, corpus, index)
    wanted = {str(q) for q in query_ids} if query_ids else None
    human = None
    if qrels is not None:
        from toolkit.data.adapters import as_qrels

        human = as_qrels(qrels)
        _require_matching_queries(human, first, wanted, holes_only)
    pairs = select_pairs(
        first,
        depth,
        holes=human.frame if holes_only and human is not None else None,
        judged=human.frame if calibration and human is not None else None,
        query_ids=wanted,
    )
    sample = None
    if calibrate_sample and human is not None:
        pairs, sample = _with_calibration_sample(pairs, first, depth, human, wanted, calibrate_sample, seed)
    items = items_with_texts(pairs, queries, texts.lookup)
    if isinstance(run, (str, os.PathLike)):
        same_model_warnings(model, {Path(str(run)).name: run})
    j.check()  # fail fast, before anything is asked or written
    sharding = spec = identity = None
    if ray is not None:
        from toolkit.jobs.distributed import ray_sharding
        from toolkit.jobs.shards import shards_dir
        from toolkit.judging.judge_job import JudgeSpec, items_digest

        if out is None:
            raise ConfigError("ray= needs out= (the job's shards are kept in OUT.shards)")
        sharding = ray_sharding(
            ray, shards_dir(out), workers, gpus_per_worker, force, cpus_per_worker, shard_size, max_retries
        )
        settings: dict[str, Any] = (
            {
                "endpoint": endpoint,
                "concurrency": concurrency,
                "timeout": timeout,
                "retries": retries,
                "backoff": backoff,
                "rate": rate,
                **({"max_response_bytes": max_response_bytes} if max_response_bytes is not None else {}),
            }
            if backend == "openai"
            else {"device": device, "batch_size": batch_size}
        )
        spec = JudgeSpec(backend, model, tuple(sorted(settings.items())))
        identity = {"judge": j.identity(), "prompt_sha256": template.sha256, "pairs": items_digest(items)}
    store = None
    if cache is not False:
        from toolkit.errors import phrase
        from toolkit.guard.store import Setting

        folder = default_folder() if cache is True else cache
        setting = Setting(
            folder, cache is not True, phrase("cache=FOLDER", "--cache DIR"), phrase("cache=False", "--no-cache")
        )
        store = JudgmentCache(folder, trust=trust_cache, setting=setting)
    bar = None
    if progress:
        from toolkit.guard.escape import progress_bar

        bar = progress_bar(auto=False, total=len(items), desc="judging", unit="pair", file=None, disable=None)
    try:
        outcome = judge_items(
            items,
            template,
            j,
            store,
            bar.update if bar is not None else None,
            sharding=sharding,
            spec=spec,
            identity=identity,
            retry_unparsed=retry_unparsed,
        )
    finally:
        if sharding is not None:
            from toolkit.jobs.distributed import close_sharding

            close_sharding(sharding)
        if bar is not None:
            bar.close()
        if store is not None:
            store.close()
        if hasattr(j, "close"):
            j.close()
    counts = outcome.counts.as_dict()
    in_sample = pairs["calibration_sample"].tolist() if sample is not None else [False] * len(outcome.records)
    for record, sampled in zip(outcome.records, in_sample):
        record["calibration_sample"] = bool(sampled)
    meta = {
        "kind": "twostage judge",
        "judge": j.describe(),
        "prompt": template.describe(),
        "run": {"path": first.path, "sha256": first.sha256} | first.format_fields(),
        "texts": texts.describe(),
        **topics_source(topics, cand),
        "depth": depth_used(first, depth),  # the shorter of the option and the run's lists
        "depth_option": depth,
        "selection": "calibration" if calibration else "holes-only" if holes_only else "top-depth",
        **({"calibration_sample": sample} if sample is not None else {}),
        "human_qrels": {"path": human.path, "sha256": human.sha256} if human is not None else None,
        "cache": str(store.path) if store is not None and store.usable else None,
        "seconds": round(outcome.seconds, 3),
        "sharding": {"ray": ray, "shards": str(sharding.folder)} if sharding is not None else None,
        "max_failures": max_failures,
        "counts": counts,
        "records": outcome.records,
    }
    labels = outcome.qrels_frame()
    if sample is not None:  # OUT holds the holes' labels; the sample's are in the records and the calibration
        sampled = pd.DataFrame(
            [(r["query_id"], r["doc_id"]) for r in outcome.records if r["calibration_sample"]],
            columns=["query_id", "doc_id"],
        )
        flag = labels.merge(sampled.assign(_s=True), on=["query_id", "doc_id"], how="left")["_s"].notna()
        judged_sample, labels = labels[flag.to_numpy()], labels[~flag.to_numpy()].reset_index(drop=True)
    result = Judgments(qrels=labels, records=tuple(outcome.records), counts=counts, meta=meta)
    if sample is not None and human is not None:
        if runs:
            same_model_warnings(model, _named_runs(runs))
        _, summary = calibration_summary(
            human,
            judged_sample.reset_index(drop=True),
            labels,
            template.labels,
            runs=runs,
            measure=measure,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            correction=correction,
            kappa_threshold=kappa_threshold,
        )
        summary["sample"] = sample
        result = Judgments(qrels=labels, records=result.records, counts=counts, meta=meta | {"calibration": summary})
    if out is not None:
        result.write(out)
    _check_failures(result, max_failures, out)
    return result


def _judge_inputs(run: Any, candidates: Any, topics: Any, corpus: Any, index: Any) -> tuple[Any, Any, dict, Any]:
    """As ``rerank`` reads its inputs; with both ``run`` and ``candidates``, the run's documents with the
    candidates' query and passage texts (``topics``, ``corpus`` or ``index`` still add to or replace them)."""
    from toolkit.data.texts import rerank_inputs, text_source, topics_from

    if run is None or candidates is None:
        return rerank_inputs(run, candidates, topics, corpus, index)
    from toolkit.data.adapters import as_run
    from toolkit.data.texts import read_candidates

    cand = read_candidates(candidates)
    first = as_run(run)
    queries = dict(cand.topics.as_dict())
    if topics is not None:
        queries.update(topics_from(topics)[0].as_dict())
    return cand, first, queries, text_source(first, cand, corpus, index)


def _require_matching_queries(human: Any, run: Any, wanted: set[str] | None, holes_only: bool) -> None:
    """Qrels sharing no query with the (selected queries of the) run are refused, with ``evaluate``'s check and
    words; with ``holes_only``, run queries the qrels lack are a warning (every one of their documents is a
    hole)."""
    from toolkit import notices
    from toolkit.evaluation.checks import require_common_queries

    run_queries = set(run.frame["query_id"].unique().tolist())
    if wanted is not None:
        run_queries &= wanted
    judged = set(human.frame.loc[human.frame["relevance"] >= 0, "query_id"].unique().tolist())
    common = run_queries & judged
    require_common_queries(
        human,
        run,
        len(common),
        len(judged),
        len(run_queries),
        remedy="the judge asks nothing (give the qrels of this run's queries)",
    )
    lacking = sorted(run_queries - judged)
    if holes_only and lacking:
        notices.warn(
            f"{len(lacking)} of {len(run_queries)} queries of {run.path} have no human label in {human.path} "
            f"(e.g. {', '.join(repr(q) for q in lacking[:3])}): every one of their documents is a hole, and the "
            "fill policy uses none of the judge's labels on them"
        )


def _with_calibration_sample(
    pairs: pd.DataFrame, run: Any, depth: int, human: Any, wanted: set[str] | None, n: int, seed: int
) -> tuple[pd.DataFrame, dict]:
    """The holes and a seeded sample of ``n`` human-judged pairs of the run's top ``depth`` (column
    ``calibration_sample``), in the run's order; and the sample's record (requested, drawn, population, seed)."""
    import numpy as np

    from toolkit import notices
    from toolkit.judging.judge_job import select_pairs

    population = select_pairs(run, depth, judged=human.frame, query_ids=wanted)
    drawn = min(n, len(population))
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(population), size=drawn, replace=False)) if drawn else np.array([], dtype=int)
    picked = population.iloc[chosen].assign(calibration_sample=True)
    if drawn < n:
        notices.warn(
            f"calibrate_sample={n}: the run's top {depth} holds only {len(population)} human-judged documents; "
            "all of them are judged"
        )
    both = pd.concat([pairs.assign(calibration_sample=False), picked], ignore_index=True)
    both = both.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    record = {"requested": n, "drawn": drawn, "population": len(population), "seed": seed, "depth": depth}
    return both, record


def _named_runs(runs: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    from toolkit.data.adapters import name_runs

    return name_runs(runs)


def calibration_summary(
    human: Any,
    judged: pd.DataFrame,
    labels: pd.DataFrame,
    scale: Sequence[int],
    *,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    measure: str = "ndcg_cut.10",
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 42,
    correction: str = "holm",
    kappa_threshold: float | None = None,
) -> tuple[Any, dict]:
    """The judge against the humans: the label agreement (``ts.agreement``, A the humans) on ``judged`` (the
    judge's labels on documents the humans judged), and with ``runs`` the systems' ranking under the human
    qrels (every label) against the human qrels with ``labels`` (what the judge wrote: replacing human labels
    or filling holes, ``qrels_origin.overlay_labels``); returns the ``Agreement`` and what the sidecar keeps
    under ``calibration`` (``CALIBRATION_KEYS``, ``ranking_qrels`` saying which documents each side uses,
    ``kappa_threshold``, ``near_chance``), warning when the kappa is below the threshold."""
    from dataclasses import replace

    from toolkit import notices
    from toolkit.api.assessors import agreement
    from toolkit.errors import ConfigError
    from toolkit.quality.qrels_origin import DEFAULT_KAPPA_THRESHOLD, near_chance, overlay_labels

    threshold = DEFAULT_KAPPA_THRESHOLD if kappa_threshold is None else float(kappa_threshold)
    if judged.empty:
        raise ConfigError("the judge gave no label on a document the humans judged: nothing to calibrate")
    human_part = human.frame.merge(judged[["query_id", "doc_id"]], on=["query_id", "doc_id"])
    common: dict[str, Any] = {
        "names": ("human", "judge"),
        "alpha": alpha,
        "permutations": permutations,
        "seed": seed,
        "correction": correction,
    }
    a = agreement(
        human_part,
        judged,
        None,
        measure,
        labels=sorted(set(scale) | set(human_part["relevance"].astype(int))),
        **common,
    )
    ranking_qrels = None
    if runs:
        filled, used = overlay_labels(human.frame, labels)
        ranked = agreement(human.frame, filled, _named_runs(runs), measure, **common)
        a = replace(a, rankings=ranked.rankings)
        ranking_qrels = {
            "human": {
                "qrels": human.path,
                "human_labels": int((human.frame["relevance"] >= 0).sum()),
                "documents": "every label of the human qrels",
            },
            "judge": {
                **used,
                "documents": "the human qrels, with the judge's label on each document of a human-judged query "
                "it labelled (replacing the human label, or filling a hole)",
            },
        }
    doc = a.to_dict()
    summary = {k: doc.get(k) for k in CALIBRATION_KEYS if k in doc}
    if ranking_qrels is not None:
        summary["ranking_qrels"] = ranking_qrels
        summary["ranking"] = {
            k: doc["ranking"].get(k) for k in ("measure", "means_a", "means_b") if k in doc["ranking"]
        }
    summary["human_qrels"] = {"path": human.path, "sha256": human.sha256}
    summary["kappa_threshold"] = threshold
    warning = near_chance(summary)
    summary["near_chance"] = warning is not None
    if warning:
        notices.warn(warning)
    return a, summary


def _check_failures(result: Judgments, max_failures: int, out: str | os.PathLike | None) -> None:
    """``RequestsFailedError`` when every request failed or more than ``max_failures`` did."""
    from collections import Counter

    from toolkit.errors import RequestsFailedError, phrase

    c = result.counts
    failed, asked = int(c["http_failures"]), int(c["asked"])
    if not failed or (failed <= max_failures and failed < asked):
        return
    reasons = Counter(r["http_error"] for r in result.records if r["http_error"])
    why = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common(3))
    written = f"; what was judged is written to {out} (records in {out}.meta.json)" if out is not None else ""
    if failed == asked:
        head = f"every one of the {asked} request(s) to the judge failed after its retries"
    else:
        allows = phrase(f"max_failures={max_failures}", f"--max-failures {max_failures}")
        head = f"{failed} of {asked} requests to the judge failed after their retries, more than {allows} allows"
    raise RequestsFailedError(
        f"{head}: {why}{written}",
        result=result,
        failures=failed,
        requests=asked,
    )


def merge_qrels(
    human: Any,
    judge: Any,
    policy: str = "fill",
    *,
    data_dir: str | os.PathLike | None = None,
    dedupe: str = "error",
) -> Any:
    """Human and judge qrels merged under a policy, as a ``Qrels`` that carries its origin (``evaluate``,
    ``compare`` and ``diagnose`` take it as qrels; the provenance then states the policy, the counts of labels
    of each origin and each origin's judged@k).

    Args:
        human: the human judgments (a path, a collection name, a DataFrame, a dict, ``Qrels``).
        judge: the judge's labels (what ``judge`` wrote, or any qrels).
        policy: ``human`` (human labels only), ``fill`` (human labels, the judge's where humans gave none) or
            ``judge`` (the judge's only).
        data_dir: where collection names are looked up.
        dedupe: ``error`` or ``first``, as for ``evaluate``.

    A judge whose sidecar records a calibration below its kappa threshold (near chance) is a ``TwostageWarning``
    whenever some of its labels are used.
    """
    from toolkit.data.adapters import as_qrels
    from toolkit.quality.qrels_origin import merge_qrels as merge

    about = None
    if isinstance(judge, (str, os.PathLike)) and os.path.isfile(judge):
        from toolkit.data.sidecar import read_judge_meta

        # the sidecar `twostage judge` wrote (which judge, calibrated?), read only when the qrels checksum it
        # records is this file's (its "run" is the run that was judged, not this qrels file)
        meta = read_judge_meta(judge)
        if meta is not None:
            about = {
                "judge": {k: meta.get("judge", {}).get(k) for k in ("backend", "model")},
                "prompt_sha256": meta.get("prompt", {}).get("sha256"),
                "calibration": meta.get("calibration"),
                # pairs whose passage held the prompt's answer marker, with the label the judge gave
                "injection_suspected": [
                    {k: r.get(k) for k in ("query_id", "doc_id", "label")}
                    for r in meta.get("records") or []
                    if isinstance(r, dict) and r.get("injection_suspected")
                ],
            }
    merged = merge(
        as_qrels(human, dedupe=dedupe, data_dir=data_dir),
        as_qrels(judge, dedupe=dedupe, data_dir=data_dir),
        policy,
        judge_meta=about,
    )
    used = merged.origin.counts["judge_labels_used"] if merged.origin is not None else 0
    if used:
        from toolkit import notices
        from toolkit.quality.qrels_origin import near_chance

        warning = near_chance((about or {}).get("calibration"), str(judge))
        if warning:
            notices.warn(f"{warning}; {used} of its labels are used here")
    return merged


@dataclass(frozen=True)
class Calibration:
    """A judge measured against human labels: ``judgments`` (what the judge said on documents humans judged too)
    and ``agreement`` (``ts.agreement`` of the human labels, A, against the judge's, B)."""

    judgments: Judgments
    agreement: Any

    def to_dict(self) -> dict:
        """What ``twostage judge --calibrate --format json`` prints: ``twostage agreement``'s keys, the judge's
        counts and settings."""
        doc = self.agreement.to_dict()
        calibration = self.judgments.meta.get("calibration") or {}
        for key in ("ranking_qrels", "kappa_threshold", "near_chance"):
            if key in calibration:
                doc[key] = calibration[key]
        doc["judge"] = {
            "settings": self.judgments.meta["judge"],
            "prompt": self.judgments.meta["prompt"],
            "counts": self.judgments.counts,
        }
        return doc


def calibrate_judge(
    run: Any = None,
    *,
    qrels: Any,
    model: str,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    measure: str = "ndcg_cut.10",
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 42,
    correction: str = "holm",
    kappa_threshold: float | None = None,
    **options: Any,
) -> Calibration:
    """Judge the documents of ``run``'s top ``depth`` that ``qrels`` judges too, and compare the judge with the
    humans: confusion matrix (rows human, columns judge, over the template's scale), kappa, linearly weighted
    kappa, mean absolute label difference on those documents; with ``runs``, the systems' ranking under the
    human qrels (every label) against their ranking under the same qrels with the judge's label on each document
    it labelled (``ranking_qrels`` in the record says which documents each uses): Kendall's tau, tau_ap and the
    significant pairs that flip. A kappa below ``kappa_threshold`` (default 0.4) is a warning, recorded as
    ``near_chance``, and repeated wherever the labels are used.

    Args:
        run: the run whose top documents are judged (or None with ``candidates=`` in ``options``).
        qrels: the human judgments.
        model: the judge's model (as for ``judge``).
        runs: systems to rank under both sets of labels (``{name: run}`` or a list).
        measure: the measure that ranks them.
        alpha: the level of a significant difference.
        permutations: random sign flips of the randomization test.
        seed: its seed.
        correction: ``holm``, ``bonferroni`` or ``none`` over all pairs of systems.
        kappa_threshold: below this kappa the judge is near chance (default 0.4).
        **options: every other keyword of ``judge`` (``endpoint``, ``candidates``, ``depth``, ``prompt``, ...).
    """
    from toolkit.api.keywords import check_keywords, keywords_of
    from toolkit.data.adapters import as_qrels
    from toolkit.errors import ConfigError
    from toolkit.judging.prompt import load_template

    check_keywords("calibrate_judge", options, keywords_of(judge, drop=("run", "qrels", "model", "calibration")))
    human = as_qrels(qrels)
    j = judge(run, qrels=human, model=model, calibration=True, **options)
    if j.qrels.empty:
        raise ConfigError(
            "the judge gave no label on a document the humans judged "
            f"({j.counts['pairs']} pairs, {j.counts['parse_failures']} parse failures, "
            f"{j.counts['http_failures']} failed requests)"
        )
    if runs:
        same_model_warnings(model, _named_runs(runs))
    a, summary = calibration_summary(
        human,
        j.qrels,
        j.qrels,
        load_template(options.get("prompt")).labels,
        runs=runs,
        measure=measure,
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        correction=correction,
        kappa_threshold=kappa_threshold,
    )
    j = Judgments(qrels=j.qrels, records=j.records, counts=j.counts, meta=j.meta | {"calibration": summary})
    if options.get("out") is not None:
        j.write(options["out"])  # the sidecar now says how the judge agreed with the humans
    return Calibration(judgments=j, agreement=a)


#: what a calibrated judge's sidecar (``OUT.qrels.meta.json``, key ``calibration``) keeps of the agreement
CALIBRATION_KEYS = (
    "documents_both",
    "labels",
    "confusion",
    "kappa",
    "kappa_linear",
    "mean_abs_difference",
    "kendall_tau",
    "tau_ap",
    "flipped_pairs",
)
