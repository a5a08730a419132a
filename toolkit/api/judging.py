"""``judge``: relevance labels from an LLM for a run's top documents, recorded and cached; and its calibration
against human labels (``calibrate_judge``; the comparison in ``toolkit.judging.calibration``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence  # noqa: F401 (Iterable: in the annotation of judge's query_ids)
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.judging.calibration import (
    CALIBRATION_KEYS,
    Calibration,
    CalibrationInputs,
    CalibrationOptions,
    calibration_summary,
    same_model_warnings,
)
from toolkit.judging.judge_options import JudgeOptions
from toolkit.options import verb
from toolkit.quality.agreement import Evaluator

log = logging.getLogger(__name__)


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


@verb(JudgeOptions, inputs=("run", "candidates", "topics", "corpus", "index", "qrels", "out", "runs"))
def judge(
    run: Any = None,
    *,
    candidates: str | os.PathLike | None = None,
    topics: Any = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    qrels: Any = None,
    out: str | os.PathLike | None = None,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    options: JudgeOptions,
) -> Judgments:
    """Ask an LLM for a graded relevance label of each of a run's top ``depth`` documents.

    Args:
        run: a first-stage or reranked run (a path, a ``Run``, a DataFrame, ...); or None with ``candidates``.
            With ``candidates`` too, the documents judged are the run's, their texts the candidates'.
        candidates: a candidates JSON (run, query and passage texts in one file), as ``rerank`` reads it: the
            run judged when ``run`` is None, else only the query and passage texts.
        topics: query texts (a file, a collection name, or ``{qid: text}``).
        corpus: passage texts from a JSONL corpus.
        index: passage texts stored in a Lucene index.
        qrels: human judgments (for ``holes_only`` and ``calibration``). Qrels sharing no query with the run
            are refused (``NoCommonQueriesError``, as ``evaluate`` refuses them), before anything is asked; with
            ``holes_only``, run queries without a human label are warned about (each of their documents is a
            hole, and the ``fill`` policy uses none of them).
        out: write the qrels there and the records to ``out.meta.json``.
        runs: with ``calibrate_sample``: systems ranked under the human qrels and under the human qrels filled
            with the judge's hole labels (as ``calibrate_judge`` ranks them).

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
    from toolkit.judging.judge_job import depth_used, items_with_texts, judge_items
    from toolkit.judging.prompt import load_template

    o = options
    o.check_inputs(qrels=qrels, runs=runs, out=out)
    template = load_template(o.prompt)
    j = build_judge(o)
    cand, first, queries, texts = _judge_inputs(run, candidates, topics, corpus, index)
    wanted = {str(q) for q in o.query_ids} if o.query_ids else None
    human = None
    if qrels is not None:
        from toolkit.data.adapters import as_qrels

        human = as_qrels(qrels)
        _require_matching_queries(human, first, wanted, o.holes_only)
    pairs, sample = _pairs_to_judge(first, human, wanted, o)
    items = items_with_texts(pairs, queries, texts.lookup)
    if isinstance(run, (str, os.PathLike)):
        same_model_warnings(o.model, {Path(str(run)).name: run})
    j.check()  # fail fast, before anything is asked or written
    sharding = spec = identity = None
    if o.ray is not None:
        from toolkit.jobs.distributed import ray_sharding
        from toolkit.jobs.shards import shards_dir
        from toolkit.judging.judge_job import JudgeSpec, items_digest

        assert out is not None  # check_inputs: ray= needs out=
        sharding = ray_sharding(
            o.ray,
            shards_dir(out),
            o.workers,
            o.gpus_per_worker,
            o.force,
            o.cpus_per_worker,
            o.shard_size,
            o.max_retries,
        )
        spec = JudgeSpec(o.backend_used, o.model, tuple(sorted(_backend_settings(o).items())))
        identity = {"judge": j.identity(), "prompt_sha256": template.sha256, "pairs": items_digest(items)}
    store = _judgment_cache(o.cache, o.trust_cache)
    bar = None
    if o.progress:
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
            retry_unparsed=o.retry_unparsed,
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
        "depth": depth_used(first, o.depth),  # the shorter of the option and the run's lists
        "depth_option": o.depth,
        "selection": "calibration" if o.calibration else "holes-only" if o.holes_only else "top-depth",
        **({"calibration_sample": sample} if sample is not None else {}),
        "human_qrels": {"path": human.path, "sha256": human.sha256} if human is not None else None,
        "cache": str(store.path) if store is not None and store.usable else None,
        "seconds": round(outcome.seconds, 3),
        "sharding": {"ray": o.ray, "shards": str(sharding.folder)} if sharding is not None else None,
        "max_failures": o.max_failures,
        "counts": counts,
        "records": outcome.records,
    }
    labels = outcome.qrels_frame()
    result = Judgments(qrels=labels, records=tuple(outcome.records), counts=counts, meta=meta)
    if sample is not None and human is not None:
        result = _calibrated_on_sample(result, human, template.labels, sample, runs, o)
    if out is not None:
        result.write(out)
    _check_failures(result, o.max_failures, out)
    return result


def build_judge(options: JudgeOptions) -> Any:
    """The judge backend of ``options`` (``llm.chat.BACKENDS``: ``openai`` with its endpoint and HTTP settings,
    ``transformers`` with its device and batch size)."""
    from toolkit.errors import ConfigError
    from toolkit.llm.chat import BACKENDS

    if options.backend_used == "transformers" and options.endpoint:
        raise ConfigError("endpoint= is for the openai backend; the transformers backend runs model= locally")
    return BACKENDS[options.backend_used](model=options.model, **_backend_settings(options))


def _backend_settings(options: JudgeOptions) -> dict[str, Any]:
    """The keywords the backend of ``options`` is built with (besides the model): what a Ray worker rebuilds it
    from (``judge_job.JudgeSpec``)."""
    if options.backend_used == "openai":
        return {"endpoint": options.endpoint, **options.requests.endpoint_settings()}
    return {"device": options.device, "batch_size": options.batch_size}


def _pairs_to_judge(first: Any, human: Any, wanted: set[str] | None, o: JudgeOptions) -> tuple[pd.DataFrame, Any]:
    """The (query, document) pairs to judge: the run's top ``depth``, its holes or its human-judged documents,
    with the calibration sample (and the sample's record, None without one)."""
    from toolkit.judging.judge_job import select_pairs

    pairs = select_pairs(
        first,
        o.depth,
        holes=human.frame if o.holes_only and human is not None else None,
        judged=human.frame if o.calibration and human is not None else None,
        query_ids=wanted,
    )
    if o.calibrate_sample and human is not None:
        return _with_calibration_sample(pairs, first, o.depth, human, wanted, o.calibrate_sample, o.calibrating.seed)
    return pairs, None


def _judgment_cache(cache: Any, trust: bool) -> Any:
    """The judgments' answer cache (None with ``cache=False``)."""
    if cache is False:
        return None
    from toolkit.errors import phrase
    from toolkit.guard.store import Setting
    from toolkit.llm.answer_cache import JudgmentCache, default_folder

    folder = default_folder() if cache is True else cache
    setting = Setting(
        folder, cache is not True, phrase("cache=FOLDER", "--cache DIR"), phrase("cache=False", "--no-cache")
    )
    return JudgmentCache(folder, trust=trust, setting=setting)


def _calibrated_on_sample(
    result: Judgments, human: Any, scale: Sequence[int], sample: dict, runs: Any, o: JudgeOptions
) -> Judgments:
    """``result`` with the calibration on the sample of human-judged documents: ``qrels`` the holes' labels only
    (the sample's stay in the records), the agreement under ``calibration`` in the meta."""
    labels = result.qrels
    sampled = pd.DataFrame(
        [(r["query_id"], r["doc_id"]) for r in result.records if r["calibration_sample"]],
        columns=["query_id", "doc_id"],
    )
    flag = labels.merge(sampled.assign(_s=True), on=["query_id", "doc_id"], how="left")["_s"].notna()
    judged_sample, labels = labels[flag.to_numpy()], labels[~flag.to_numpy()].reset_index(drop=True)
    if runs:
        from toolkit.data.adapters import name_runs

        same_model_warnings(o.model, name_runs(runs))
    inputs = CalibrationInputs(human, judged_sample.reset_index(drop=True), labels, scale, runs, _evaluator())
    _, summary = calibration_summary(inputs, o.calibrating)
    summary["sample"] = sample
    meta = result.meta | {"calibration": summary}
    return Judgments(qrels=labels, records=result.records, counts=result.counts, meta=meta)


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


@verb(
    JudgeOptions,
    inputs=("run", "qrels", "candidates", "topics", "corpus", "index", "out", "runs"),
    exclude=("calibration",),
)
def calibrate_judge(
    run: Any = None,
    *,
    qrels: Any,
    candidates: str | os.PathLike | None = None,
    topics: Any = None,
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    runs: Mapping[str, Any] | Sequence[Any] | None = None,
    options: JudgeOptions,
) -> Calibration:
    """Judge the documents of ``run``'s top ``depth`` that ``qrels`` judges too, and compare the judge with the
    humans: confusion matrix (rows human, columns judge, over the template's scale), kappa, linearly weighted
    kappa, mean absolute label difference on those documents; with ``runs``, the systems' ranking under the
    human qrels (every label) against their ranking under the same qrels with the judge's label on each document
    it labelled (``ranking_qrels`` in the record says which documents each uses): Kendall's tau, tau_ap and the
    significant pairs that flip. A kappa below ``kappa_threshold`` (default 0.4) is a warning, recorded as
    ``near_chance``, and repeated wherever the labels are used.

    Every keyword of ``judge`` but ``calibration`` (which this is) is a keyword here: the fields of
    ``JudgeOptions``, the comparison's among them (``CalibrationOptions``, ``toolkit.judging.calibration``);
    ``options=`` takes a whole ``JudgeOptions``.

    Args:
        run: the run whose top documents are judged (or None with ``candidates``).
        qrels: the human judgments.
        candidates: as for ``judge``.
        topics: as for ``judge``.
        corpus: as for ``judge``.
        index: as for ``judge``.
        out: as for ``judge``; the sidecar then records the calibration too.
        runs: systems to rank under both sets of labels (``{name: run}`` or a list).
        model: the judge's model (as for ``judge``).
        measure: the measure that ranks them.
        alpha: the level of a significant difference.
        permutations: random sign flips of the randomization test.
        seed: its seed.
        correction: ``holm``, ``bonferroni`` or ``none`` over all pairs of systems.
        kappa_threshold: below this kappa the judge is near chance (default 0.4).
    """
    import dataclasses

    from toolkit.data.adapters import as_qrels
    from toolkit.judging.calibration import calibrated
    from toolkit.judging.prompt import load_template

    o = dataclasses.replace(options, calibration=True)
    human = as_qrels(qrels)
    j = judge(run, qrels=human, candidates=candidates, topics=topics, corpus=corpus, index=index, out=out, options=o)
    inputs = CalibrationInputs(human, j.qrels, j.qrels, load_template(o.prompt).labels, runs, _evaluator())
    return calibrated(j, inputs, o.calibrating, model=o.model, out=out)


def _evaluator() -> Evaluator:
    """How a calibration evaluates the runs it ranks: ``agreement``'s (``evaluate_many`` with the default
    settings)."""
    from toolkit.api.assessors import per_query
    from toolkit.api.options import AgreementOptions

    def evaluate(judgments: pd.DataFrame, queries: set[str], runs: Mapping[str, Any], measure: str) -> pd.DataFrame:
        return per_query(judgments, queries, runs, measure, options=AgreementOptions().evaluation())

    return evaluate


__all__ = [
    "CALIBRATION_KEYS",
    "Calibration",
    "CalibrationOptions",
    "JudgeOptions",
    "Judgments",
    "build_judge",
    "calibrate_judge",
    "calibration_summary",
    "judge",
    "merge_qrels",
    "same_model_warnings",
]
