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
        from toolkit.data.trec_io import atomic_write, sha256_bytes, write_json

        text = self.to_trec()
        with atomic_write(path) as fh:
            fh.write(text)
        meta = dict(self.meta) | {"qrels": {"path": str(path), "sha256": sha256_bytes(text.encode("utf-8"))}}
        write_json(str(path) + ".meta.json", meta)


def build_judge(
    backend: str,
    model: str,
    *,
    endpoint: str | None = None,
    concurrency: int = 8,
    timeout: float = 60.0,
    retries: int = 4,
    backoff: float = 1.0,
    rate: float | None = None,
    device: str = "auto",
    batch_size: int = 8,
) -> Any:
    """A judge backend from ``judging.backends.BACKENDS`` (``openai`` needs ``endpoint``)."""
    from toolkit.errors import ConfigError
    from toolkit.judging.backends import BACKENDS

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
    concurrency: int = 8,
    timeout: float = 60.0,
    retries: int = 4,
    backoff: float = 1.0,
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
) -> Judgments:
    """Ask an LLM for a graded relevance label of each of a run's top ``depth`` documents.

    Args:
        run: a first-stage or reranked run (a path, a ``Run``, a DataFrame, ...); or None with ``candidates``.
        model: the endpoint's model name (``openai``) or a local model folder (``transformers``).
        endpoint: an OpenAI-compatible base URL (``http://localhost:8000/v1``); picks the ``openai`` backend.
        backend: ``openai`` or ``transformers`` (default: ``openai`` with an endpoint, else ``transformers``).
        candidates: a candidates JSON (run, query and passage texts in one file), as ``rerank`` reads it.
        topics: query texts (a file, a collection name, or ``{qid: text}``).
        corpus: passage texts from a JSONL corpus.
        index: passage texts stored in a Lucene index.
        depth: judge each query's top ``depth`` documents (trec_eval's order).
        holes_only: judge only the documents ``qrels`` does not judge.
        qrels: human judgments (for ``holes_only`` and ``calibration``).
        calibration: judge only the documents ``qrels`` judges (to measure the judge against them).
        query_ids: judge only these queries.
        prompt: a template file (default: the shipped UMBRELA-style 0-3 template).
        cache: True (``$TWOSTAGE_CACHE/judgments``), a folder, or False (ask everything, store nothing).
        concurrency: ``openai``: requests in flight.
        timeout: ``openai``: seconds per request.
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
        retry_unparsed: ask again the pairs whose cached answer the template cannot parse (a fixed endpoint or
            a model that answered badly once); the new answers replace the old in the cache.

    Raises:
        ConfigError: an unreachable endpoint (before anything is asked or written), a missing query or
            passage text, inconsistent options.
        InputFormatError: a prompt template without ``{query}`` and ``{passage}``, or with a bad scale.
    """
    from toolkit.api.pipeline import _rerank_inputs, _topics_source
    from toolkit.errors import ConfigError
    from toolkit.judging.cache import JudgmentCache, default_folder
    from toolkit.judging.job import depth_used, items_with_texts, judge_items, select_pairs
    from toolkit.judging.prompt import load_template

    if holes_only and calibration:
        raise ConfigError("holes_only and calibration exclude each other (holes have no human label to compare)")
    if (holes_only or calibration) and qrels is None:
        raise ConfigError("holes_only and calibration need qrels= (the human judgments)")
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
    )
    cand, first, queries, texts = _rerank_inputs(run, candidates, topics, corpus, index)
    human = None
    if qrels is not None:
        from toolkit.api.inputs import as_qrels

        human = as_qrels(qrels)
    pairs = select_pairs(
        first,
        depth,
        holes=human.frame if holes_only and human is not None else None,
        judged=human.frame if calibration and human is not None else None,
        query_ids={str(q) for q in query_ids} if query_ids else None,
    )
    items = items_with_texts(pairs, queries, texts.lookup)
    if isinstance(run, (str, os.PathLike)):
        same_model_warnings(model, {Path(str(run)).name: run})
    j.check()  # fail fast, before anything is asked or written
    sharding = spec = identity = None
    if ray is not None:
        from toolkit.api.pipeline import _sharding
        from toolkit.jobs.shards import shards_dir
        from toolkit.judging.job import JudgeSpec, items_digest

        if out is None:
            raise ConfigError("ray= needs out= (the job's shards are kept in OUT.shards)")
        sharding = _sharding(
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
            }
            if backend == "openai"
            else {"device": device, "batch_size": batch_size}
        )
        spec = JudgeSpec(backend, model, tuple(sorted(settings.items())))
        identity = {"judge": j.identity(), "prompt_sha256": template.sha256, "pairs": items_digest(items)}
    store = None
    if cache is not False:
        store = JudgmentCache(default_folder() if cache is True else cache)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc="judging", unit="pair", file=None, disable=None)
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
            from toolkit.api.pipeline import _shutdown

            _shutdown(sharding)
        if bar is not None:
            bar.close()
        if store is not None:
            store.close()
    counts = outcome.counts.as_dict()
    meta = {
        "kind": "twostage judge",
        "judge": j.describe(),
        "prompt": template.describe(),
        "run": {"path": first.path, "sha256": first.sha256},
        "texts": texts.describe(),
        **_topics_source(topics, cand),
        "depth": depth_used(first, depth),  # the shorter of the option and the run's lists
        "depth_option": depth,
        "selection": "calibration" if calibration else "holes-only" if holes_only else "top-depth",
        "human_qrels": {"path": human.path, "sha256": human.sha256} if human is not None else None,
        "cache": str(store.path) if store is not None else None,
        "seconds": round(outcome.seconds, 3),
        "sharding": {"ray": ray, "shards": str(sharding.folder)} if sharding is not None else None,
        "counts": counts,
        "records": outcome.records,
    }
    result = Judgments(qrels=outcome.qrels_frame(), records=tuple(outcome.records), counts=counts, meta=meta)
    if out is not None:
        result.write(out)
    return result


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
    """
    from toolkit.api.inputs import as_qrels
    from toolkit.evaluation.qrels_origin import merge_qrels as merge

    about = None
    if isinstance(judge, (str, os.PathLike)):  # the sidecar `twostage judge` wrote: which judge, calibrated?
        import json

        from toolkit.data.sidecar import meta_path

        # the judge's own record: its "run" is the run that was judged, not this qrels file, so it is read as
        # it is (a run sidecar's checksum check does not apply)
        try:
            meta = json.loads(meta_path(judge).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        if isinstance(meta, dict) and meta.get("kind") == "twostage judge":
            about = {
                "judge": {k: meta.get("judge", {}).get(k) for k in ("backend", "model")},
                "prompt_sha256": meta.get("prompt", {}).get("sha256"),
                "calibration": meta.get("calibration"),
            }
    return merge(
        as_qrels(human, dedupe=dedupe, data_dir=data_dir),
        as_qrels(judge, dedupe=dedupe, data_dir=data_dir),
        policy,
        judge_meta=about,
    )


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
    **options: Any,
) -> Calibration:
    """Judge the documents of ``run``'s top ``depth`` that ``qrels`` judges too, and compare the judge with the
    humans: confusion matrix (rows human, columns judge, over the template's scale), kappa, linearly weighted
    kappa, mean absolute label difference; with ``runs``, the systems' ranking under the human labels against
    their ranking under the judge's, both restricted to the documents the judge labelled (the same pool, only
    the labels differ): Kendall's tau, tau_ap and the significant pairs that flip.

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
        **options: every other keyword of ``judge`` (``endpoint``, ``candidates``, ``depth``, ``prompt``, ...).
    """
    from toolkit.api.assessors import agreement
    from toolkit.api.inputs import as_qrels
    from toolkit.errors import ConfigError
    from toolkit.judging.prompt import load_template

    human = as_qrels(qrels)
    j = judge(run, qrels=human, model=model, calibration=True, **options)
    if j.qrels.empty:
        raise ConfigError(
            "the judge gave no label on a document the humans judged "
            f"({j.counts['pairs']} pairs, {j.counts['parse_failures']} parse failures, "
            f"{j.counts['http_failures']} failed requests)"
        )
    labelled = j.qrels[["query_id", "doc_id"]]
    human_part = human.frame.merge(labelled, on=["query_id", "doc_id"])
    if runs:
        from toolkit.api.comparison import _named

        named = _named(runs)
        same_model_warnings(model, named)
    else:
        named = None
    scale = load_template(options.get("prompt")).labels
    a = agreement(
        human_part,
        j.qrels,
        named,
        measure,
        names=("human", "judge"),
        labels=sorted(set(scale) | set(human_part["relevance"].astype(int))),
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        correction=correction,
    )
    summary = {k: a.to_dict().get(k) for k in CALIBRATION_KEYS if k in a.to_dict()}
    summary["human_qrels"] = {"path": human.path, "sha256": human.sha256}
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
