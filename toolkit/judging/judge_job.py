"""The judging job: which (query, document) pairs to label, asking the judge for those the cache does not hold,
and the records and counts that go into ``OUT.qrels`` and ``OUT.qrels.meta.json``.

The pairs are each query's top ``depth`` documents in trec_eval's order (score descending, document id
descending), each (query, document) once; with ``holes`` only those the given qrels do not judge (label >= 0),
with ``judged`` only those it does (calibration). A pair whose query or passage text is missing is an error
naming it, before anything is asked. A parse failure or a request that failed after its retries gives no label:
it is counted and recorded, never written as 0.

Every record keeps ``rendered_prompt_sha256``, the sha256 of the exact user message sent for it (the template
rendered with the query and the passage; the system message is the template's, named by ``prompt_sha256``); the
cache keeps each rendered prompt once, by that sha256. A passage that holds the template's answer marker
(``Template.suspect``) is flagged ``injection_suspected`` in its record and counted: its label may be the
passage's own words repeated, not the judge's.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Run
from toolkit.errors import ConfigError
from toolkit.judging.prompt import Template
from toolkit.llm.answer_cache import JudgmentCache
from toolkit.llm.chat import Judge, Prompt, closed_after

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Item:
    """One (query, document) to judge, with its texts and its rank in the run."""

    query_id: str
    doc_id: str
    rank: int
    query: str
    passage: str


def select_pairs(
    run: Run,
    depth: int,
    *,
    holes: pd.DataFrame | None = None,
    judged: pd.DataFrame | None = None,
    query_ids: set[str] | None = None,
) -> pd.DataFrame:
    """query_id, doc_id, rank of the pairs to judge (module docstring); ``holes``/``judged`` are qrels frames."""
    if depth < 1:
        raise ConfigError(f"depth must be >= 1, not {depth}")
    ordered = order_run(run.frame, DEFAULT_SCORE_PRECISION)
    top = ordered[ordered["rank"] <= depth][[QUERY_ID, DOC_ID, "rank"]]
    if query_ids is not None:
        top = top[top[QUERY_ID].isin(query_ids)]
    for frame, keep in ((holes, False), (judged, True)):
        if frame is None:
            continue
        labelled = frame.loc[frame[RELEVANCE] >= 0, [QUERY_ID, DOC_ID]].assign(_in=True)
        merged = top.merge(labelled, on=[QUERY_ID, DOC_ID], how="left")
        top = merged[merged["_in"].notna() == keep].drop(columns="_in")
    return top.reset_index(drop=True)


def depth_used(run: Run, depth: int) -> int:
    """The depth a job over ``run``'s top ``depth`` used: ``depth``, or the run's longest list when that is
    shorter (``judge --depth 200`` on 100-deep lists judged the top 100)."""
    sizes = run.frame.groupby(QUERY_ID).size()
    return min(depth, int(sizes.max())) if len(sizes) else depth


def items_with_texts(
    pairs: pd.DataFrame, queries: Mapping[str, str], lookup: Callable[[list[str]], dict[str, str]]
) -> list[Item]:
    """Attach the query and passage texts; a missing one is a ``ConfigError`` naming the pairs."""
    missing_q = sorted(set(pairs[QUERY_ID]) - set(queries))
    if missing_q:
        raise ConfigError(
            f"no query text for {len(missing_q)} quer{'y' if len(missing_q) == 1 else 'ies'} of the run "
            f"({', '.join(missing_q[:5])}{', ...' if len(missing_q) > 5 else ''}); give --topics"
        )
    docs = list(dict.fromkeys(pairs[DOC_ID].tolist()))
    texts = lookup(docs)
    missing = [d for d in docs if not texts.get(d)]
    if missing:
        raise ConfigError(
            f"no passage text for {len(missing)} document(s) to judge ({', '.join(missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}); give --corpus or --index holding them"
        )
    return [Item(q, d, int(r), queries[q], texts[d]) for q, d, r in zip(pairs[QUERY_ID], pairs[DOC_ID], pairs["rank"])]


@dataclass
class Counts:
    """What a job did: ``asked`` requests sent (once per pair, retries apart), ``from_cache`` answers read from
    the cache, ``http_retries`` repeated requests, ``http_failures`` pairs without an answer after every retry,
    ``parse_failures`` answers without a label on the scale, ``labels`` labels written, ``unparsed_asked_again``
    cached answers without a label asked again (``retry_unparsed``), ``injection_suspected`` passages holding the
    template's answer marker."""

    pairs: int = 0
    asked: int = 0
    from_cache: int = 0
    answered: int = 0
    http_retries: int = 0
    http_failures: int = 0
    parse_failures: int = 0
    labels: int = 0
    unparsed_asked_again: int = 0
    injection_suspected: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Outcome:
    """Records (one per pair, in the order of the pairs) and counts."""

    records: list[dict] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    seconds: float = 0.0

    def qrels_frame(self) -> pd.DataFrame:
        """query_id, doc_id, relevance of the pairs with a label."""
        rows = [(r["query_id"], r["doc_id"], r["label"]) for r in self.records if r["label"] is not None]
        return pd.DataFrame(rows, columns=[QUERY_ID, DOC_ID, RELEVANCE]).astype({RELEVANCE: "int64"})


#: pairs per shard of a sharded (``--ray``) job
SHARD_PAIRS = 256


@dataclass(frozen=True)
class JudgeSpec:
    """A picklable recipe for a judge on a Ray worker: the backend's name, the model and its keyword options."""

    backend: str
    model: str
    options: tuple[tuple[str, object], ...] = ()

    def build(self) -> _ShardWorker:
        from toolkit.llm.chat import BACKENDS

        return _ShardWorker(BACKENDS[self.backend](model=self.model, **dict(self.options)))

    def describe(self) -> dict:
        return {"backend": self.backend, "model": self.model, **dict(self.options)}


class _ShardWorker:
    """Answers one shard's prompts (None: the driver's cache had it): arrays response, error, attempts, asked."""

    def __init__(self, judge: Judge):
        self.judge = judge

    def __call__(self, payload: list) -> tuple[dict, dict]:
        import numpy as np

        n = len(payload)
        wanted = [(k, Prompt(*p)) for k, p in enumerate(payload) if p is not None]
        response, error = [""] * n, [""] * n
        attempts = np.zeros(n, dtype=np.int64)
        answered = np.zeros(n, dtype=bool)
        with closed_after(self.judge.answer([p for _, p in wanted])) as answers:
            for j, answer in answers:
                k = wanted[j][0]
                attempts[k] = answer.attempts
                if answer.text is None:
                    error[k] = answer.error
                else:
                    response[k], answered[k] = answer.text, True
        arrays = {
            "response": np.array(response, dtype=str),
            "error": np.array(error, dtype=str),
            "attempts": attempts,
            "answered": answered,
        }
        return arrays, {"model_calls": len(wanted)}


def _sharded_answers(
    items: list[Item], todo: list[int], prompts: list[Prompt], spec: JudgeSpec, sharding, identity: dict, progress: bool
):
    """(index in ``todo``, Answer) for every prompt, computed in shards over all items (so the shard plan does not
    depend on what the cache holds) and recorded in the job's manifest: a killed job resumes at its first
    unfinished shard."""
    from toolkit.jobs.shards import open_manifest, plan, run_job
    from toolkit.llm.chat import Answer

    ranges = plan(len(items), sharding.size(SHARD_PAIRS))
    manifest = open_manifest(sharding.folder, "judge", {**identity, "ranges": ranges}, sharding.force)
    position = {i: j for j, i in enumerate(todo)}

    def payload(shard: int, lo: int, hi: int) -> list:
        return [
            (prompts[position[i]].system, prompts[position[i]].user, prompts[position[i]].max_tokens)
            if i in position
            else None
            for i in range(lo, hi)
        ]

    run_job(manifest, spec, sharding.executor, payload, unit="pair", progress=progress, label="judge")
    for shard, (lo, _hi) in enumerate(manifest.ranges):
        arrays = manifest.load(shard)
        for k in range(len(arrays["response"])):
            i = lo + k
            if i not in position or not arrays["attempts"][k]:
                continue
            text = str(arrays["response"][k]) if arrays["answered"][k] else None
            yield position[i], Answer(text, str(arrays["error"][k]), int(arrays["attempts"][k]))


def judge_items(
    items: list[Item],
    template: Template,
    judge: Judge,
    cache: JudgmentCache | None,
    progress: Callable[[int], None] | None = None,
    *,
    sharding=None,
    spec: JudgeSpec | None = None,
    identity: dict | None = None,
    retry_unparsed: bool = False,
) -> Outcome:
    """Label every item: from the cache where it holds the answer, else from the judge (answers are parsed and
    then cached as they arrive, so an interrupted job loses nothing it was told). With ``retry_unparsed``, a cached answer the
    template cannot parse is asked again (and the new answer replaces it in the cache); without, it stays a
    counted parse failure. With ``sharding`` (a ``jobs.shards.Sharding``) and ``spec``, the judge's calls run in
    shards on its executor (Ray workers), recorded in a manifest."""
    started = time.perf_counter()
    judge_id = judge.identity()
    judge_info = {"backend": judge.backend, "model": judge.model, "prompt_sha256": template.sha256}
    out = Outcome()
    out.counts.pairs = len(items)
    raw: list[str | None] = [None] * len(items)
    parsed: list[tuple[int | None, str]] = [(None, "")] * len(items)
    errors = [""] * len(items)
    cached = [False] * len(items)
    attempts = [0] * len(items)
    todo: list[int] = []
    rendered = [template.render(it.query, it.passage) for it in items]
    rendered_sha = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in rendered]
    every = [Prompt(template.system, text, template.max_tokens) for text in rendered]
    # what decides each answer (the endpoint, the body sent): another endpoint or setting asks again
    requests = [judge.request_key(p) for p in every] if cache is not None else []
    for i, it in enumerate(items):
        hit = (
            cache.get(judge_id, template.sha256, it.query, it.passage, template.parse, request=requests[i])
            if cache is not None
            else None
        )
        verdict = template.parse(hit) if hit is not None else (None, "")
        if hit is not None and retry_unparsed and verdict[0] is None:
            out.counts.unparsed_asked_again += 1
            hit = None
        if hit is not None:
            raw[i], parsed[i], cached[i] = hit, verdict, True
        else:
            todo.append(i)
    out.counts.from_cache = len(items) - len(todo)
    if progress:
        progress(out.counts.from_cache)
    if cache is not None:
        cache.put_prompts(rendered)
    prompts = [every[i] for i in todo]
    out.counts.asked = len(prompts)
    if sharding is not None:
        if spec is None:
            raise ConfigError("a sharded judging job needs the judge's spec")
        answers = _sharded_answers(items, todo, prompts, spec, sharding, identity or {}, progress is not None)
    else:
        answers = judge.answer(prompts)
    with closed_after(answers) as answers:
        for j, answer in answers:
            i = todo[j]
            attempts[i] = answer.attempts
            out.counts.http_retries += answer.retries
            if answer.text is None:
                errors[i] = answer.error
                out.counts.http_failures += 1
            else:
                raw[i], parsed[i] = answer.text, template.parse(answer.text)
                out.counts.answered += 1
                if cache is not None:  # only once it parsed: a cached answer must read back as it did now
                    cache.put(
                        judge_id, template.sha256, items[i].query, items[i].passage, answer.text, request=requests[i]
                    )
            if progress:
                progress(1)
    for i, it in enumerate(items):
        label, why = parsed[i]
        failed_parse = raw[i] is not None and label is None
        out.counts.parse_failures += failed_parse
        out.counts.labels += label is not None
        suspected = template.suspect(it.passage)
        out.counts.injection_suspected += suspected
        out.records.append(
            {
                "query_id": it.query_id,
                "doc_id": it.doc_id,
                "rank": it.rank,
                **judge_info,
                "label": label,
                "parse_failed": failed_parse,
                "parse_error": why,
                "response": raw[i],
                "from_cache": cached[i],
                "http_error": errors[i],
                "attempts": attempts[i],
                "rendered_prompt_sha256": rendered_sha[i],
                "injection_suspected": suspected,
            }
        )
    out.seconds = time.perf_counter() - started
    return out


def items_digest(items: list[Item]) -> str:
    """sha256 over the pairs' ids and the sha256 of their texts, in order: what a sharded job's shards hold."""
    h = hashlib.sha256()
    for it in items:
        q = hashlib.sha256(it.query.encode()).hexdigest()
        p = hashlib.sha256(it.passage.encode()).hexdigest()
        h.update(f"{it.query_id}\t{it.doc_id}\t{q}\t{p}\n".encode())
    return h.hexdigest()
