"""The judging job: which (query, document) pairs to label, asking the judge for those the cache does not hold,
and the records and counts that go into ``OUT.qrels`` and ``OUT.qrels.meta.json``.

The pairs are each query's top ``depth`` documents in trec_eval's order (score descending, document id
descending), each (query, document) once; with ``holes`` only those the given qrels do not judge (label >= 0),
with ``judged`` only those it does (calibration). A pair whose query or passage text is missing is an error
naming it, before anything is asked. A parse failure or a request that failed after its retries gives no label:
it is counted and recorded, never written as 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from toolkit.errors import ConfigError
from toolkit.judging.backends import Judge, Prompt
from toolkit.judging.cache import JudgmentCache
from toolkit.judging.prompt import Template
from toolkit.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.records import DOC_ID, QUERY_ID, RELEVANCE, Run

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
    ``parse_failures`` answers without a label on the scale, ``labels`` labels written."""

    pairs: int = 0
    asked: int = 0
    from_cache: int = 0
    answered: int = 0
    http_retries: int = 0
    http_failures: int = 0
    parse_failures: int = 0
    labels: int = 0

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


def judge_items(
    items: list[Item],
    template: Template,
    judge: Judge,
    cache: JudgmentCache | None,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Label every item: from the cache where it holds the answer, else from the judge (answers are cached as
    they arrive, so an interrupted job loses nothing it was told)."""
    started = time.perf_counter()
    identity = judge.identity()
    judge_info = {"backend": judge.backend, "model": judge.model, "prompt_sha256": template.sha256}
    out = Outcome()
    out.counts.pairs = len(items)
    raw: list[str | None] = [None] * len(items)
    errors = [""] * len(items)
    cached = [False] * len(items)
    attempts = [0] * len(items)
    todo: list[int] = []
    for i, it in enumerate(items):
        hit = cache.get(identity, template.sha256, it.query, it.passage) if cache is not None else None
        if hit is not None:
            raw[i], cached[i] = hit, True
        else:
            todo.append(i)
    out.counts.from_cache = len(items) - len(todo)
    if progress:
        progress(out.counts.from_cache)
    prompts = [
        Prompt(template.system, template.render(items[i].query, items[i].passage), template.max_tokens) for i in todo
    ]
    out.counts.asked = len(prompts)
    for j, answer in judge.answer(prompts):
        i = todo[j]
        attempts[i] = answer.attempts
        out.counts.http_retries += answer.retries
        if answer.text is None:
            errors[i] = answer.error
            out.counts.http_failures += 1
        else:
            raw[i] = answer.text
            out.counts.answered += 1
            if cache is not None:
                cache.put(identity, template.sha256, items[i].query, items[i].passage, answer.text)
        if progress:
            progress(1)
    for i, it in enumerate(items):
        label, why = template.parse(raw[i]) if raw[i] is not None else (None, "")
        failed_parse = raw[i] is not None and label is None
        out.counts.parse_failures += failed_parse
        out.counts.labels += label is not None
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
            }
        )
    out.seconds = time.perf_counter() - started
    return out
