"""The listwise LLM reranker: castorini/rank_llm 0.26.0's sliding windows over an OpenAI-compatible endpoint or a
local causal LM, every window recorded, every answer cached by what decides it, and the order probe.

**Settings** (``ListwiseOptions`` in ``toolkit.reranking.listwise_options``, one frozen object, validated once):
rank_llm's window (20), stride (10; ``0 < stride <= window``), passes (1), context size (4096),
``max_passage_words`` (300), template (``--prompt``, default rank_llm's RankZephyr template), few-shot examples,
system message, variable passages, alphabetic identifiers (``alpha``), first-token reranking (``first_token``, FIRST), the API (``chat``:
``{endpoint}/chat/completions``; ``responses``: ``{endpoint}/responses``, rank_llm's OpenAI client's), the
tokenizer rank_llm's vLLM path counts with, the order probe, the answer cache and the HTTP policy.

**Sliding windows** (rank_llm 0.26's ``sliding_windows``). Over a query's top ``depth`` candidates (``length``
of them, fewer when the first stage has fewer), with ``w = min(window, length)``: ``end = length``,
``start = max(length - w, 0)``; while ``end > start``: the ranks ``[start, end)`` are reordered by one LLM call;
once ``start`` is 0 the list is done; else ``end -= stride``, ``start = max(start - stride, 0)``. Each window
sees the order the windows before it left, so the calls of one query are made one after the other; the queries'
calls are made concurrently. ``passes`` N runs the whole slide N times, each pass over the order the one before
it left (rank_llm's ``--num-passes``). Below the depth, the first stage's order is kept.

**The prompt** of each window is rank_llm's (``toolkit.reranking.listwise_prompt``: the template's messages, the
passages cleaned as rank_llm cleans them, shortened to fit ``context_size`` by rank_llm's token count); the
record keeps the sha256 of its messages (``rendered_prompt_sha256``, of ``messages_json``), the cache the
messages themselves, the sidecar the template's text and sha256.

**Repair** (rank_llm's ``clean_ranking_response`` and ``receive_permutation``): after the last ``</think>`` if
any (stripped), the digits rank_llm maps to ASCII (superscript, subscript, circled, negative circled, fullwidth
and digit-comma digits) are mapped; with numeric identifiers every character that is no digit
(``str.isdigit``) becomes a space, with ``alpha`` every letter ``c`` becomes ``ord(c) - 64`` and every other
character a space; each run read as ``int()`` reads it, minus 1, in order of appearance; a repeated one
dropped (``duplicates``), one outside the window dropped (``unknown``), the window's positions not named
appended in input order (``missing``). An answer with no number (``none_parsed``) keeps the window in input
order, and so does one ``int()`` refuses (a run of more than 4,300 digits, ``RANK_LLM_MAX_DIGITS``, or holding a
digit that is no decimal digit, such as ``⓪``), as rank_llm 0.26 does. Numbers are read by the numbers door
(``toolkit.guard.numbers``), never by ``int()`` on the answer. Each window's record lists its repair kinds;
``repairs`` counts answers per kind, ``repaired`` the answers that needed any.

**Cache.** Answers are kept in a judgments-style cache (``toolkit.llm.answer_cache.JudgmentCache``, its own folder,
default ``$TWOSTAGE_CACHE/listwise``), keyed by what decides an answer: the backend's request key (the
endpoint's URL and API path and the whole request body: the model, the messages, the sampling settings and
``max_tokens``; for a local model its fingerprint and the same), beside the template's sha256, the query and the
messages. It is committed as each answer arrives, once it parsed: the same command again sends nothing, a killed
job resumes (its finished windows are answered from the cache, so the next prompts are the same again), and the
same model name at another endpoint asks again. A cached answer is parsed again when read; one the parser
refuses is set aside as a damaged entry and asked again.

**Order probe.** With ``shuffles`` K, each query's candidates (those with a text) are reranked K more times,
the input order of shuffle k a permutation drawn by ``numpy.random.default_rng([seed, k, crc32(query id)])``;
the rank-biased overlap (p 0.9, ``toolkit.stats.rank_similarity.rbo``) of each shuffled final top 10 with the
unshuffled one's, per query the mean over its shuffles, ``mean_rbo`` the mean over queries. A reranker whose
order does not depend on its input order scores 1.0; one that returns its input order scores about what two
random top 10s of the depth share. With ``qrels``, the probe also records how much the effectiveness moves with
the input order: the nDCG@10 (``ndcg_cut.10``, computed by ``toolkit.evaluation.evaluate`` exactly as trec_eval
computes it) of the run and of each shuffled run (each written out as the run is: reranked top, candidates
without text, then the first stage's order below the depth), per query and as the mean over the judged queries;
the spread is ``mean_range`` (per query the max minus the min over the K shuffled runs, the mean over queries)
and ``std`` (the standard deviation, ddof 1, of the K shuffled runs' mean nDCG@10; None for K = 1).
"""

from __future__ import annotations

import logging
import time
import unicodedata
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from toolkit.errors import ConfigError, phrase
from toolkit.guard.numbers import NumberRefused, natural
from toolkit.reranking.listwise_options import ListwiseOptions
from toolkit.reranking.listwise_prompt import (
    ALPH_START_IDX,
    RANK_LLM_VERSION,
    ListwiseTemplate,
    fit_window,
    messages_json,
)

if TYPE_CHECKING:
    from toolkit.reranking.rerank_options import RerankOptions

log = logging.getLogger(__name__)

#: the repair kinds, in the order they are counted
REPAIR_KINDS = ("none_parsed", "duplicates", "unknown", "missing")
#: the top ranks the order probe compares, and its RBO persistence
PROBE_TOP = 10
PROBE_P = 0.9


# ------------------------------------------------------------ the algorithm
def window_spans(length: int, window: int, stride: int) -> list[tuple[int, int]]:
    """0-based [start, end) of each window over a list of ``length``, in the order they are asked (rank_llm
    0.26's ``sliding_windows``; module docstring)."""
    spans: list[tuple[int, int]] = []
    w = min(window, length)
    end, start = length, max(length - w, 0)
    while end > start:
        spans.append((start, end))
        if start == 0:
            break
        end -= stride
        start = max(start - stride, 0)
    return spans


#: The longest identifier rank_llm reads: it reads each with Python's ``int()``, which (Python 3.11 on; rank_llm
#: 0.26 needs 3.12) refuses more than 4,300 digits, and then keeps the window's input order.
RANK_LLM_MAX_DIGITS = 4300
#: rank_llm 0.26's ``fake_numbers_map`` (``response_utils.clean_ranking_response``): digits it reads as ASCII
FAKE_DIGITS = str.maketrans(
    "⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉①②③④⑤⑥⑦⑧⑨❶❷❸❹❺❻❼❽❾０１２３４５６７８９🄀🄁🄂🄃🄄🄅🄆🄇🄈🄉",
    "0123456789012345678912345678912345678901234567890123456789",
)


def clean_ranking_response(response: str, alpha: bool = False) -> str:
    """rank_llm 0.26's ``clean_ranking_response``: the answer as whitespace-separated runs of digits."""
    if "</think>" in response:
        response = response.split("</think>")[-1].strip()
    response = response.translate(FAKE_DIGITS)
    if alpha:
        return "".join(str(ord(c) - ALPH_START_IDX) if c.isalpha() else " " for c in response).strip()
    return "".join(c if c.isdigit() else " " for c in response).strip()


def answer_identifiers(response: str, alpha: bool = False) -> list[int] | None:
    """The identifiers of an answer in order of appearance (1-based), read from ``clean_ranking_response``'s
    runs as ``int()`` reads them (decimal digits of any script) through the numbers door
    (``toolkit.guard.numbers.natural``); None where rank_llm's ``int()`` fails and the whole answer is set
    aside: a run of more than ``RANK_LLM_MAX_DIGITS`` digits, or one holding a digit that is no decimal digit
    (``str.isdigit`` is true for ``⓪``, ``int()`` refuses it)."""
    found = []
    for run in clean_ranking_response(response, alpha).split():
        if not run.isascii():
            decimals = [unicodedata.decimal(c, None) for c in run]
            if None in decimals:
                return None
            run = "".join(str(d) for d in decimals)
        try:
            found.append(natural(run, what="identifier", max_digits=RANK_LLM_MAX_DIGITS))
        except NumberRefused:
            return None
    return found


def parse_answer(response: str, k: int, alpha: bool = False) -> tuple[list[int], list[int], list[str]]:
    """(the identifiers found, 1-based in order of appearance; the permutation, 0-based window positions in
    their new order; the repair kinds) for a window of ``k`` passages (module docstring). Every text parses:
    one with no number rank_llm reads keeps the window's input order (``none_parsed``)."""
    found = answer_identifiers(response, alpha)
    if not found:
        return [], list(range(k)), ["none_parsed"]
    repairs: list[str] = []
    seen = list(dict.fromkeys(x - 1 for x in found))  # the first occurrence of each
    if len(seen) < len(found):
        repairs.append("duplicates")
    kept = [x for x in seen if 0 <= x < k]
    if len(kept) < len(seen):
        repairs.append("unknown")
    named = set(kept)
    rest = [x for x in range(k) if x not in named]
    if rest:
        repairs.append("missing")
    return found, kept + rest, repairs


def probe_order(qid: str, n: int, seed: int, shuffle: int) -> list[int]:
    """The input order of shuffle ``shuffle`` (1-based) of a query's ``n`` candidates."""
    import numpy as np

    rng = np.random.default_rng([seed, shuffle, zlib.crc32(qid.encode("utf-8"))])
    return [int(i) for i in rng.permutation(n)]


# ------------------------------------------------------------------ the job
@dataclass
class ListwiseCounts:
    """``windows`` answers used (all lists, probe included), ``asked`` requests sent, ``from_cache`` answers read
    from the cache, ``repaired`` answers that needed a repair, ``repairs`` per kind, ``http_retries`` repeated
    requests, ``http_failures`` windows without an answer after every retry."""

    windows: int = 0
    asked: int = 0
    from_cache: int = 0
    repaired: int = 0
    repairs: dict = field(default_factory=lambda: dict.fromkeys(REPAIR_KINDS, 0))
    http_retries: int = 0
    http_failures: int = 0

    def as_dict(self) -> dict:
        return {**self.__dict__, "repairs": dict(self.repairs)}


@dataclass
class _List:
    """One list being reranked: a query's candidates (``docs``, in this list's input order), the first stage's
    score of each position (``scores``, what a template's ``{score}`` shows), its windows and passes."""

    key: tuple[str, int]  # (query id, shuffle: 0 the run itself)
    query: str
    docs: list[str]
    scores: list[float | None]
    spans: list[tuple[int, int]]
    passes: int
    step: int = 0
    failed: str = ""

    @property
    def done(self) -> bool:
        return self.step >= len(self.spans) * self.passes or bool(self.failed)

    @property
    def span(self) -> tuple[int, int]:
        return self.spans[self.step % len(self.spans)]


@dataclass
class ListwiseOutcome:
    """Per list (query id, shuffle) its final order; the records of every window; the counts."""

    orders: dict[tuple[str, int], list[str]]
    records: list[dict]
    counts: ListwiseCounts
    seconds: float


@dataclass(frozen=True)
class _Asked:
    """A window's request: the fitted prompt, the backend's prompt, its request key and how to read an answer."""

    fitted: Any
    prompt: Any
    request: str
    rendered: str
    ids: list[str]


def rerank_lists(
    lists: Mapping[tuple[str, int], tuple[str, Sequence[str], Sequence[float | None]]],
    texts: Mapping[str, str],
    template: ListwiseTemplate,
    llm,
    cache,
    options: ListwiseOptions,
    counter,
    few_shot: Sequence[dict[str, str]] = (),
    progress=None,
) -> ListwiseOutcome:
    """Rerank every list ``{(query id, shuffle): (query text, doc ids in input order, their first-stage scores)}``
    by sliding windows, ``options.passes`` times.

    ``llm`` is a judge backend (``toolkit.llm.chat``: ``listwise_prompt`` builds a window's request,
    ``request_key`` says what decides its answer, ``answer(prompts)`` yields ``(index, Answer)`` as each
    finishes); ``counter`` rank_llm's token count (``toolkit.reranking.listwise_prompt``); ``cache`` a
    ``JudgmentCache`` or None. A window whose request failed after every retry stops its list (counted in
    ``http_failures``, the error in its record); the caller decides what to do."""
    import json

    from toolkit.reranking.listwise_prompt import first_token_ranking

    started = time.perf_counter()
    llm_id = llm.identity()
    counts = ListwiseCounts()
    records: list[dict] = []
    alpha = options.alpha
    state = [
        _List(key, q, list(docs), list(scores), window_spans(len(docs), options.window, options.stride), options.passes)
        for key, (q, docs, scores) in lists.items()
    ]

    def ranking(raw: str, k: int) -> tuple[str, list | None]:
        """The answer rank_llm repairs: the text, or (first-token reranking) the ranking of the logprobs."""
        if not options.first_token:
            return raw, None
        pairs = json.loads(raw)
        if not isinstance(pairs, list):
            raise ValueError("cached first-token logprobs are not a list")
        return first_token_ranking([(str(t), float(lp)) for t, lp in pairs], k, alpha), pairs

    def readable(raw: str, k: int) -> object:
        return parse_answer(ranking(raw, k)[0], k, alpha)

    def ask(lst: _List) -> _Asked:
        start, end = lst.span
        ids = lst.docs[start:end]
        passages = [(texts[d], lst.scores[start + i]) for i, d in enumerate(ids)]
        fitted = fit_window(
            template,
            lst.query,
            passages,
            counter,
            context_size=options.context_size,
            window=options.window,
            max_passage_words=options.max_passage_words,
            alpha=alpha,
            few_shot=few_shot,
        )
        prompt = llm.listwise_prompt(fitted.messages, fitted.max_tokens, options.first_token)
        return _Asked(fitted, prompt, llm.request_key(prompt), messages_json(fitted.messages), ids)

    def apply(lst: _List, asked: _Asked, raw: str, from_cache: bool, attempts: int) -> None:
        start, end = lst.span
        text, logprobs = ranking(raw, len(asked.ids))
        found, perm, repairs = parse_answer(text, len(asked.ids), alpha)
        lst.docs[start:end] = [asked.ids[i] for i in perm]
        counts.windows += 1
        counts.repaired += bool(repairs)
        for kind in repairs:
            counts.repairs[kind] += 1
        record = {
            "query_id": lst.key[0],
            "shuffle": lst.key[1],
            "pass": lst.step // len(lst.spans) + 1,
            "window": lst.step,
            "ranks": [start + 1, end],
            "docs": asked.ids,
            "rendered_prompt_sha256": _sha(asked.rendered),
            "prompt_tokens": asked.fitted.tokens,
            "passage_words": asked.fitted.max_length,
            "max_tokens": asked.fitted.max_tokens,
            "response": text,
            "identifiers": found,
            "permutation": [i + 1 for i in perm],
            "repairs": repairs,
            "from_cache": from_cache,
            "attempts": attempts,
        }
        if logprobs is not None:
            record["first_token_logprobs"] = logprobs
        records.append(record)
        lst.step += 1

    while True:
        pending: list[tuple[_List, _Asked]] = []
        for lst in state:
            while not lst.done:
                asked = ask(lst)
                # a cached answer is parsed as a fresh one is; one that does not parse is set aside, asked again
                hit = (
                    cache.get(
                        llm_id,
                        template.sha256,
                        lst.query,
                        asked.rendered,
                        parse=partial(readable, k=len(asked.ids)),
                        request=asked.request,
                    )
                    if cache is not None
                    else None
                )
                if hit is None:
                    pending.append((lst, asked))
                    break
                counts.from_cache += 1
                apply(lst, asked, hit, True, 0)
                if progress:
                    progress(1)
        if not pending:
            break
        if cache is not None:
            cache.put_prompts([a.rendered for _, a in pending])
        counts.asked += len(pending)
        from toolkit.llm.chat import closed_after

        with closed_after(llm.answer([a.prompt for _, a in pending])) as answers:
            for j, answer in answers:
                lst, asked = pending[j]
                counts.http_retries += answer.retries
                raw = answer.text
                if raw is not None and options.first_token:
                    raw = json.dumps(answer.logprobs) if answer.logprobs is not None else None
                if raw is None:
                    counts.http_failures += 1
                    lst.failed = answer.error or "no answer"
                    records.append(
                        {"query_id": lst.key[0], "shuffle": lst.key[1], "window": lst.step, "http_error": lst.failed}
                    )
                    continue
                apply(lst, asked, raw, False, answer.attempts)
                if cache is not None:  # only once it parsed: a cached answer must read back as it did now
                    cache.put(llm_id, template.sha256, lst.query, asked.rendered, raw, request=asked.request)
                if progress:
                    progress(1)
    records.sort(key=lambda r: (r["query_id"], r["shuffle"], r["window"]))
    orders = {lst.key: lst.docs for lst in state}
    return ListwiseOutcome(orders, records, counts, time.perf_counter() - started)


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def total_windows(lengths: Sequence[int], window: int, stride: int) -> int:
    """How many windows lists of these lengths take."""
    return sum(len(window_spans(n, window, stride)) for n in lengths)


def probe_summary(
    orders: Mapping[tuple[str, int], Sequence[str]], shuffles: int, seed: int, ndcg: dict | None = None
) -> dict:
    """The sidecar's ``shuffles``: ``n``, ``seed``, ``mean_rbo`` (over queries of each query's mean over its
    shuffles), ``per_query`` {query id: mean RBO}; with ``ndcg`` (``probe_ndcg``'s) under ``ndcg_cut_10``."""
    import numpy as np

    from toolkit.stats.rank_similarity import rbo

    per_query: dict[str, float] = {}
    for qid in sorted({q for q, _ in orders}):
        base = list(orders[(qid, 0)])[:PROBE_TOP]
        values = [rbo(list(orders[(qid, k)])[:PROBE_TOP], base, PROBE_P) for k in range(1, shuffles + 1)]
        per_query[qid] = float(np.mean(values))
    out: dict = {
        "n": shuffles,
        "seed": seed,
        "top": PROBE_TOP,
        "p": PROBE_P,
        "mean_rbo": float(np.mean(list(per_query.values()))) if per_query else None,
        "per_query": per_query,
    }
    if ndcg is not None:
        out["ndcg_cut_10"] = ndcg
    return out


def probe_ndcg(qrels, runs: Sequence, shuffles: int) -> dict:
    """nDCG@10 of ``runs`` (0 the run itself, then shuffle 1 to K, each a ``Run``) against ``qrels``, by the
    toolkit's evaluation (trec_eval's ``ndcg_cut.10``): ``measure``, ``qrels`` (path, sha256), ``queries``
    (judged queries of the run), ``run`` and ``shuffles`` (mean over those queries), ``min``/``max``/``std``
    (ddof 1; None for one shuffle) of the shuffled means, ``mean_range`` (per query the max minus the min over
    the shuffles, the mean over queries) and ``per_query`` {query id: {run, shuffles, range}}."""
    import numpy as np

    from toolkit.evaluation.evaluate import evaluate, prepare_judgments
    from toolkit.measures.names import Measure

    measure = Measure("ndcg_cut", PROBE_TOP)
    prepared = prepare_judgments(qrels)
    per_run = []
    for run in runs:
        result = evaluate(prepared, run, [measure], warn=False)
        per_run.append(dict(zip(result.evaluated, (float(v) for v in result.columns[measure]))))
    qids = sorted(per_run[0])
    per_query = {}
    for q in qids:
        values = [per_run[k][q] for k in range(1, shuffles + 1)]
        per_query[q] = {"run": per_run[0][q], "shuffles": values, "range": max(values) - min(values)}
    means = [float(np.mean([per_run[k][q] for q in qids])) for k in range(1, shuffles + 1)]
    return {
        "measure": measure.name,
        "qrels": {"path": qrels.path, "sha256": qrels.sha256},
        "queries": len(qids),
        "run": float(np.mean([per_run[0][q] for q in qids])),
        "shuffles": means,
        "min": min(means),
        "max": max(means),
        "std": float(np.std(means, ddof=1)) if shuffles > 1 else None,
        "mean_range": float(np.mean([v["range"] for v in per_query.values()])),
        "per_query": per_query,
    }


def repair_counts(records: Sequence[dict]) -> Counter:
    """Answers per repair kind over ``records`` (for a subset of the lists, e.g. the run without the probe)."""
    c: Counter = Counter()
    for r in records:
        for kind in r.get("repairs", ()):
            c[kind] += 1
    return c


def token_counter(llm, options: ListwiseOptions):
    """rank_llm's token count for this backend: the local model's own tokenizer (rank_llm's in-process vLLM
    path); over an endpoint ``options.tokenizer`` (its vLLM path) or tiktoken's cl100k_base (its OpenAI client)."""
    from toolkit.reranking.listwise_prompt import TiktokenCount, TokenizerCount, load_tokenizer

    if llm.backend == "transformers":
        return TokenizerCount(llm.tokenizer(), llm.model, templated=True)
    if options.tokenizer is not None:
        return TokenizerCount(load_tokenizer(options.tokenizer), options.tokenizer)
    return TiktokenCount(llm.model)


def listwise_rerank_run(
    first_stage,
    queries: Mapping[str, str],
    texts,
    llm,
    job: RerankOptions,
    *,
    cache=None,
    qrels=None,
    input_order: str = "score",
):
    """Rerank a first-stage run's top ``job.depth`` by sliding windows (module docstring) with ``llm``, the model of
    ``job.reranker``; ``job`` (a ``RerankOptions``) gives the windows' settings (``job.listwise``, default rank_llm's),
    the missing-text policy, the queries (``query_ids``, ``judged_only``), the run's tag and the progress bar.
    ``qrels``: ``job.listwise.qrels`` as read. ``input_order``: ``score``, each query's candidates in trec_eval's order (score
    descending, equal scores by document id descending), or ``file``, in the order the run lists them (a
    candidates file's, as rank_llm takes them: its first ``depth`` of each query); returns a ``RerankResult`` whose settings are the sidecar's (``listwise: true``,
    ``window``, ``stride``, ``passes``, ``windows``, ``repaired``, ``repairs``, ``records``, ``shuffles`` with
    the probe; with ``qrels``, a ``Qrels``, the probe's nDCG@10 spread, see ``probe_ndcg``). The LLM is checked
    first (an endpoint that does not answer fails before any input is read further); a window whose request
    failed after every retry is a ``RequestsFailedError`` (the answers received are in the cache: the same
    command resumes)."""
    import sys

    from toolkit.data.ranking import CANDIDATE_PRECISION, candidate_selection, top_k
    from toolkit.data.records import DOC_ID, QUERY_ID, SCORE, run_from_rows
    from toolkit.data.texts import rerank_query_ids
    from toolkit.errors import RequestsFailedError
    from toolkit.guard.escape import progress_bar
    from toolkit.reranking.rerank_job import MISSING_TEXT_POLICIES, RerankResult, candidates_of
    from toolkit.version import __version__

    options, depth, missing_text = job.listwise, job.depth, job.missing_text
    query_ids = rerank_query_ids(job.query_ids, job.judged_only)
    if depth < 1:
        raise ConfigError(f"{phrase('depth', '--depth')} must be >= 1")
    options.check(depth)
    if missing_text not in MISSING_TEXT_POLICIES:
        raise ConfigError(f"missing-text policy must be one of {MISSING_TEXT_POLICIES}")
    if qrels is not None and not options.shuffles:
        raise ConfigError(
            f"{phrase('qrels', '--qrels')} is the order probe's nDCG@10 spread: give {phrase('shuffles', '--shuffles')} "
            "K (K >= 1) with it"
        )
    template = options.template()
    few_shot = options.few_shot_messages()
    llm.check()
    counter = token_counter(llm, options)
    score_of = dict(zip(zip(first_stage.frame[QUERY_ID], first_stage.frame[DOC_ID]), first_stage.frame[SCORE]))
    if input_order == "file":
        first_stage = _in_listed_order(first_stage)
    elif input_order != "score":
        raise ConfigError(f"input_order must be score or file, not {input_order!r}")
    work = candidates_of(first_stage, queries, texts, depth, missing_text, query_ids)
    if qrels is not None and not set(work.qids) & set(qrels.query_ids):
        raise ConfigError(
            f"{qrels.path} judges none of the {len(work.qids)} queries reranked (e.g. "
            f"{', '.join(repr(q) for q in work.qids[:3])}): wrong qrels for these candidates?"
        )
    lists: dict[tuple[str, int], tuple[str, list[str], list[float | None]]] = {}
    for q in work.qids:
        docs = work.have_by_query[q]
        scores = [float(score_of[(q, d)]) for d in docs]  # by position: rank_llm keeps each position's score
        lists[(q, 0)] = (queries[q], list(docs), scores)
        for k in range(1, options.shuffles + 1):
            lists[(q, k)] = (queries[q], [docs[i] for i in probe_order(q, len(docs), options.seed, k)], scores)
    total = options.passes * total_windows([len(d) for _, d, _ in lists.values()], options.window, options.stride)
    with progress_bar(
        total=total,
        desc="rerank (listwise)",
        unit="window",
        file=sys.stderr,
        disable=not job.progress,
        dynamic_ncols=True,
    ) as bar:
        outcome = rerank_lists(lists, work.found, template, llm, cache, options, counter, few_shot, bar.update)
    c = outcome.counts
    if c.http_failures:
        errors = Counter(r["http_error"] for r in outcome.records if r.get("http_error"))
        why = "; ".join(f"{n} x {e}" for e, n in errors.most_common(3))
        raise RequestsFailedError(
            f"{c.http_failures} of {c.asked} LLM requests failed after every retry ({why}); nothing was written. "
            + (
                "The answers received are cached: the same command again asks only what is missing"
                if cache is not None
                else "Without a cache, the same command asks everything again"
            ),
            failures=c.http_failures,
            requests=c.asked,
        )
    # the run: the reranked top depth, the candidates without text below them, then below the depth the first
    # stage's order
    ordered = top_k(first_stage.frame, 10**9, CANDIDATE_PRECISION)
    ordered = ordered[ordered[QUERY_ID].isin(set(work.qids)) & (ordered["rank"] > depth)]
    tails = {q: g[DOC_ID].tolist() for q, g in ordered.groupby(QUERY_ID, sort=False)}

    def written(shuffle: int):
        """The run of one input order (0 the run itself) as it is written out."""
        rows: list[tuple[str, str, float]] = []
        for q in work.qids:
            lacking = [d for d in work.docs_by_query[q] if d not in work.found]
            docs = outcome.orders[(q, shuffle)] + lacking + tails.get(q, [])
            rows += [(q, d, float(len(docs) - i)) for i, d in enumerate(docs)]
        return run_from_rows(rows, tag=job.tag)

    run = written(0)
    shuffles, seed = options.shuffles, options.seed
    ndcg = probe_ndcg(qrels, [run] + [written(k) for k in range(1, shuffles + 1)], shuffles) if qrels else None
    own = [r for r in outcome.records if r["shuffle"] == 0]
    repairs = repair_counts(own)
    settings = {
        "twostage": __version__,
        "reranker": {
            "kind": "listwise",
            "backend": "listwise",
            "model": llm.model,
            "device": llm.describe().get("device", "endpoint"),
            "llm": llm.describe(),
            "llm_identity": llm.identity(),
            "prompt": template.describe(),
            "token_count": counter.name,
        },
        "listwise": True,
        "rank_llm": {"version": RANK_LLM_VERSION} | options.describe(),
        "depth": depth,
        "window": options.window,
        "stride": options.stride,
        "passes": options.passes,
        "windows": len(own),
        "repaired": sum(bool(r["repairs"]) for r in own),
        "repairs": {k: repairs.get(k, 0) for k in REPAIR_KINDS},
        "repaired_queries": repaired_queries(own),
        "windows_in_input_order": windows_left_in_order(own),
        "requests": c.as_dict(),
        "candidate_selection": candidate_selection(),
        "missing_text": missing_text,
        "queries": len(work.qids),
        "pairs_scored": len(work.cands) - work.missing,
        "missing_texts": work.missing,
        "answer_cache": {"folder": str(cache.folder)} if cache is not None else None,
        "execution": {"engine": "in-process"},
        "first_stage": first_stage.identity(),
        "texts": texts.describe(),
        "shuffles": probe_summary(outcome.orders, shuffles, seed, ndcg) if shuffles else None,
        "records": outcome.records,
        "seconds": round(outcome.seconds, 3),
    }
    return RerankResult(run, settings, outcome.seconds, len(work.qids), len(work.cands), work.missing)


def _in_listed_order(run):
    """The run with each query's scores replaced by its rows' order (the first listed highest): the order a
    candidates file lists, which rank_llm reranks, as every ranking of the job reads it."""
    from toolkit.data.records import QUERY_ID, SCORE, Run

    frame = run.frame.copy()
    frame[SCORE] = -frame.groupby(QUERY_ID, sort=False).cumcount().astype("float64")
    return Run(frame=frame, path=run.path, tag=run.tag, sha256=run.sha256)


def repaired_queries(records: Sequence[dict]) -> dict[str, list[str]]:
    """Per repair kind, the queries (sorted) with an answer that needed it."""
    out: dict[str, set[str]] = {k: set() for k in REPAIR_KINDS}
    for r in records:
        for kind in r.get("repairs", ()):
            out.setdefault(kind, set()).add(r["query_id"])
    return {k: sorted(v) for k, v in out.items()}


def windows_left_in_order(records: Sequence[dict]) -> dict:
    """The windows whose order the answer left as it was (the permutation 1..k): ``count``, ``none_parsed``
    (of them, because no identifier was read), ``answered`` (the LLM ranked them in their input order) and
    ``queries`` (each with how many)."""
    left = [r for r in records if r.get("permutation") == list(range(1, len(r.get("docs", ())) + 1))]
    return {
        "count": len(left),
        "of": len(records),
        "none_parsed": sum("none_parsed" in r["repairs"] for r in left),
        "answered": sum("none_parsed" not in r["repairs"] for r in left),
        "queries": dict(sorted(Counter(r["query_id"] for r in left).items())),
    }
