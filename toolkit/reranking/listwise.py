"""The listwise LLM reranker: rank_llm's sliding windows over an OpenAI-compatible endpoint or a local causal LM,
every window recorded, every answer cached by content, and the order probe.

**Sliding windows** (rank_llm's ``sliding_windows``). Over a query's top ``depth`` candidates (``length`` of them,
fewer when the first stage has fewer), from the bottom up: ``end = length; start = length - window``; while
``end > 0 and start + stride != 0``: ``start = max(start, 0)``, the ranks ``[start, end)`` are reordered by one
LLM call, then ``end -= stride; start -= stride``. Each window sees the order the windows before it left, so the
calls of one query are made one after the other; the queries' calls are made concurrently. Where that loop makes
no window at all (``length - window + stride == 0``, e.g. 10 candidates with window 20 and stride 10, which
rank_llm leaves unranked), the whole list is one window. Below the depth, the first stage's order is kept.

**The prompt** is a template file read like the judge's (YAML front matter, then the text; see
``toolkit.judging.prompt.read_front_matter``): the text holds ``{query}``, ``{num}`` (the passages in the
window) and ``{passages}``; the front matter's ``passage`` is how each passage is written there and must hold
``{id}`` (its identifier, 1 to k) and ``{passage}``; ``system``, ``max_tokens`` and ``max_words`` (each passage
cut to that many words, rank_llm's 300) are optional. A passage's own ``[N]`` is written ``(N)`` (as rank_llm
does), so its text cannot pose as an identifier. The default is RankGPT's style as rank_llm sends it
(``templates/rank-zephyr.md``).

**Repair** (rank_llm's ``_clean_response`` and ``_receive_permutation``): after the last ``</think>`` if any,
every non-digit becomes a space; the numbers minus 1 in order of appearance; a repeated one dropped
(``duplicates``), one outside the window dropped (``unknown``), the window's positions not named appended in
input order (``missing``). An answer with no number at all (``none_parsed``) keeps the window in input order.
Each window's record lists its repair kinds; ``repairs`` counts answers per kind, ``repaired`` the answers that
needed any.

**Cache.** Answers are kept in a judgments-style cache (``toolkit.judging.cache.JudgmentCache``, its own folder,
default ``$TWOSTAGE_CACHE/listwise``), keyed by (the LLM's identity, the template file's sha256, the query, the
rendered prompt) and committed as each arrives: the same command again sends nothing, and a killed job resumes
(its finished windows are answered from the cache, so the next prompts are the same again).

**Order probe.** With ``shuffles`` K, each query's candidates (those with a text) are reranked K more times,
the input order of shuffle k a permutation drawn by ``numpy.random.default_rng([seed, k, crc32(query id)])``;
the rank-biased overlap (p 0.9, ``toolkit.evaluation.agreement.rbo``) of each shuffled final top 10 with the
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

import hashlib
import logging
import os
import re
import time
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from toolkit.errors import ConfigError, InputFormatError

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = "rank-zephyr.md"
DEFAULT_WINDOW = 20
DEFAULT_STRIDE = 10
DEFAULT_MAX_TOKENS = 200
#: the repair kinds, in the order they are counted
REPAIR_KINDS = ("none_parsed", "duplicates", "unknown", "missing")
#: the top ranks the order probe compares, and its RBO persistence
PROBE_TOP = 10
PROBE_P = 0.9
TEMPLATE_KEYS = ("name", "system", "passage", "max_tokens", "max_words")


# ------------------------------------------------------------------ template
@dataclass(frozen=True)
class ListwiseTemplate:
    """A parsed listwise template file (see the module docstring)."""

    name: str
    text: str
    passage: str
    system: str
    max_tokens: int
    max_words: int | None
    path: str
    sha256: str

    def passage_text(self, text: str) -> str:
        """A passage as it goes into the prompt: its ``[N]`` written ``(N)``, cut to ``max_words`` words."""
        text = re.sub(r"\[(\d+)\]", r"(\1)", text.strip())
        if self.max_words is not None:
            words = text.split()
            if len(words) > self.max_words:
                text = " ".join(words[: self.max_words])
        return text

    def render(self, query: str, passages: Sequence[str]) -> str:
        """The user message for one window: placeholders replaced literally, in one pass."""
        block = "\n".join(
            re.sub(
                r"\{id\}|\{passage\}",
                lambda m, i=i, p=p: str(i) if m.group(0) == "{id}" else self.passage_text(p),
                self.passage,
            )
            for i, p in enumerate(passages, start=1)
        )
        values = {"{query}": query, "{num}": str(len(passages)), "{passages}": block}
        return re.sub(r"\{query\}|\{num\}|\{passages\}", lambda m: values[m.group(0)], self.text)

    def describe(self) -> dict:
        return {"name": self.name, "path": self.path, "sha256": self.sha256, "max_words": self.max_words}


def default_template_path() -> Path:
    """The listwise template twostage ships (package data)."""
    return Path(str(resources.files("toolkit.reranking") / "templates" / DEFAULT_TEMPLATE))


def load_listwise_template(path: str | os.PathLike | None = None) -> ListwiseTemplate:
    """Read and check a listwise template (default: the shipped one); one without the placeholders it needs is
    an ``InputFormatError`` naming them."""
    from toolkit.judging.prompt import read_front_matter

    p = Path(path) if path is not None else default_template_path()
    head, body, sha256 = read_front_matter(p, TEMPLATE_KEYS, "passage:, system:, max_tokens:")
    missing = [ph for ph in ("{query}", "{passages}") if ph not in body]
    if missing:
        raise InputFormatError(
            str(p),
            None,
            f"the prompt has no {' or '.join(missing)} placeholder; a listwise prompt needs {{query}} and "
            "{passages} (the window's passages, each written as passage: says)",
        )
    passage = head.get("passage", "[{id}] {passage}")
    if not isinstance(passage, str) or "{id}" not in passage or "{passage}" not in passage:
        raise InputFormatError(
            str(p),
            None,
            f"passage: {passage!r} must hold {{id}} (the identifier the answer ranks, 1 to k) and {{passage}}",
        )
    max_tokens = head.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InputFormatError(str(p), None, f"max_tokens: {max_tokens!r} is not a positive integer")
    max_words = head.get("max_words")
    if max_words is not None and (not isinstance(max_words, int) or isinstance(max_words, bool) or max_words < 1):
        raise InputFormatError(str(p), None, f"max_words: {max_words!r} is not a positive integer")
    return ListwiseTemplate(
        name=str(head.get("name") or p.stem),
        text=body,
        passage=passage,
        system=str(head.get("system") or ""),
        max_tokens=max_tokens,
        max_words=max_words,
        path=str(p),
        sha256=sha256,
    )


# ------------------------------------------------------------ the algorithm
def check_window(depth: int, window: int, stride: int) -> None:
    """A window of 1..depth passages, a stride of 1..window-1; else a ``ConfigError`` saying which."""
    if window < 2:
        raise ConfigError(f"--window must be >= 2 (passages per LLM call), not {window}")
    if window > depth:
        raise ConfigError(f"--window {window} is larger than --depth {depth}: give a window of at most the depth")
    if not 0 < stride < window:
        raise ConfigError(
            f"--stride must be between 1 and the window minus 1 ({window - 1}), not {stride}: windows {stride} "
            "ranks apart must overlap for a passage to rise past one window"
        )


def window_spans(length: int, window: int, stride: int) -> list[tuple[int, int]]:
    """0-based [start, end) of each window over a list of ``length``, in the order they are asked (module
    docstring)."""
    spans: list[tuple[int, int]] = []
    end, start = length, length - window
    while end > 0 and start + stride != 0:
        start = max(start, 0)
        spans.append((start, end))
        end -= stride
        start -= stride
    if not spans and length > 0:
        spans.append((0, length))
    return spans


def parse_answer(response: str, k: int) -> tuple[list[int], list[int], list[str]]:
    """(the identifiers found, 1-based in order of appearance; the permutation, 0-based window positions in
    their new order; the repair kinds) for a window of ``k`` passages (module docstring)."""
    if "</think>" in response:
        response = response.rsplit("</think>", 1)[-1]
    digits = re.sub(r"\D", " ", response).split()
    found = [int(x) for x in digits]
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
    """One list being reranked: a query's candidates (``docs``, in this list's input order), its windows."""

    key: tuple[str, int]  # (query id, shuffle: 0 the run itself)
    query: str
    docs: list[str]
    spans: list[tuple[int, int]]
    step: int = 0
    failed: str = ""

    @property
    def done(self) -> bool:
        return self.step >= len(self.spans) or bool(self.failed)


@dataclass
class ListwiseOutcome:
    """Per list (query id, shuffle) its final order; the records of every window; the counts."""

    orders: dict[tuple[str, int], list[str]]
    records: list[dict]
    counts: ListwiseCounts
    seconds: float


def rerank_lists(
    lists: Mapping[tuple[str, int], tuple[str, Sequence[str]]],
    texts: Mapping[str, str],
    template: ListwiseTemplate,
    llm,
    cache,
    window: int,
    stride: int,
    progress=None,
) -> ListwiseOutcome:
    """Rerank every list ``{(query id, shuffle): (query text, doc ids in input order)}`` by sliding windows.

    ``llm`` is a judge backend (``toolkit.judging.backends``: ``answer(prompts)`` yields ``(index, Answer)`` as
    each finishes); ``cache`` a ``JudgmentCache`` or None. A window whose request failed after every retry
    stops its list (counted in ``http_failures``, the error in its record); the caller decides what to do."""
    from toolkit.judging.backends import Prompt

    started = time.perf_counter()
    llm_id = llm.identity()
    counts = ListwiseCounts()
    records: list[dict] = []
    state = [_List(key, q, list(docs), window_spans(len(docs), window, stride)) for key, (q, docs) in lists.items()]

    def window_prompt(lst: _List) -> tuple[str, list[str]]:
        start, end = lst.spans[lst.step]
        ids = lst.docs[start:end]
        return template.render(lst.query, [texts[d] for d in ids]), ids

    def apply(lst: _List, rendered: str, ids: list[str], response: str, from_cache: bool, attempts: int) -> None:
        start, end = lst.spans[lst.step]
        found, perm, repairs = parse_answer(response, len(ids))
        lst.docs[start:end] = [ids[i] for i in perm]
        counts.windows += 1
        counts.repaired += bool(repairs)
        for kind in repairs:
            counts.repairs[kind] += 1
        records.append(
            {
                "query_id": lst.key[0],
                "shuffle": lst.key[1],
                "window": lst.step,
                "ranks": [start + 1, end],
                "docs": ids,
                "rendered_prompt_sha256": hashlib.sha256(rendered.encode("utf-8")).hexdigest(),
                "response": response,
                "identifiers": found,
                "permutation": [i + 1 for i in perm],
                "repairs": repairs,
                "from_cache": from_cache,
                "attempts": attempts,
            }
        )
        lst.step += 1

    while True:
        pending: list[tuple[_List, str, list[str]]] = []
        for lst in state:
            while not lst.done:
                rendered, ids = window_prompt(lst)
                hit = cache.get(llm_id, template.sha256, lst.query, rendered) if cache is not None else None
                if hit is None:
                    pending.append((lst, rendered, ids))
                    break
                counts.from_cache += 1
                apply(lst, rendered, ids, hit, True, 0)
                if progress:
                    progress(1)
        if not pending:
            break
        if cache is not None:
            cache.put_prompts([r for _, r, _ in pending])
        prompts = [Prompt(template.system, rendered, template.max_tokens) for _, rendered, _ in pending]
        counts.asked += len(prompts)
        for j, answer in llm.answer(prompts):
            lst, rendered, ids = pending[j]
            counts.http_retries += answer.retries
            if answer.text is None:
                counts.http_failures += 1
                lst.failed = answer.error or "no answer"
                records.append(
                    {"query_id": lst.key[0], "shuffle": lst.key[1], "window": lst.step, "http_error": lst.failed}
                )
                continue
            if cache is not None:
                cache.put(llm_id, template.sha256, lst.query, rendered, answer.text)
            apply(lst, rendered, ids, answer.text, False, answer.attempts)
            if progress:
                progress(1)
    records.sort(key=lambda r: (r["query_id"], r["shuffle"], r["window"]))
    orders = {lst.key: lst.docs for lst in state}
    return ListwiseOutcome(orders, records, counts, time.perf_counter() - started)


def total_windows(lengths: Sequence[int], window: int, stride: int) -> int:
    """How many windows lists of these lengths take."""
    return sum(len(window_spans(n, window, stride)) for n in lengths)


def probe_summary(
    orders: Mapping[tuple[str, int], Sequence[str]], shuffles: int, seed: int, ndcg: dict | None = None
) -> dict:
    """The sidecar's ``shuffles``: ``n``, ``seed``, ``mean_rbo`` (over queries of each query's mean over its
    shuffles), ``per_query`` {query id: mean RBO}; with ``ndcg`` (``probe_ndcg``'s) under ``ndcg_cut_10``."""
    import numpy as np

    from toolkit.evaluation.agreement import rbo

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


def listwise_rerank_run(
    first_stage,
    queries: Mapping[str, str],
    texts,
    llm,
    *,
    depth: int = 100,
    window: int = DEFAULT_WINDOW,
    stride: int = DEFAULT_STRIDE,
    template: ListwiseTemplate | None = None,
    cache=None,
    missing_text: str = "error",
    query_ids=None,
    shuffles: int = 0,
    seed: int = 42,
    qrels=None,
    tag: str = "twostage-rerank",
    progress: bool = True,
):
    """Rerank a first-stage run's top ``depth`` by sliding windows (module docstring); returns a
    ``RerankResult`` whose settings are the sidecar's (``listwise: true``, ``window``, ``stride``, ``windows``,
    ``repaired``, ``repairs``, ``records``, ``shuffles`` with the probe; with ``qrels``, a ``Qrels``, the probe's
    nDCG@10 spread, see ``probe_ndcg``). The LLM is checked first (an endpoint
    that does not answer fails before any input is read further); a window whose request failed after every
    retry is a ``RequestsFailedError`` (the answers received are in the cache: the same command resumes)."""
    import sys

    from tqdm.auto import tqdm

    from toolkit.data.ranking import CANDIDATE_PRECISION, candidate_selection, top_k
    from toolkit.data.records import DOC_ID, QUERY_ID, run_from_rows
    from toolkit.errors import RequestsFailedError
    from toolkit.reranking.job import MISSING_TEXT_POLICIES, RerankResult, _candidates
    from toolkit.version import __version__

    if depth < 1:
        raise ConfigError("--depth must be >= 1")
    check_window(depth, window, stride)
    if shuffles < 0:
        raise ConfigError(f"--shuffles must be >= 0, not {shuffles}")
    if missing_text not in MISSING_TEXT_POLICIES:
        raise ConfigError(f"missing-text policy must be one of {MISSING_TEXT_POLICIES}")
    if qrels is not None and not shuffles:
        raise ConfigError("--qrels is the order probe's nDCG@10 spread: give --shuffles K (K >= 1) with it")
    template = template or load_listwise_template()
    llm.check()
    work = _candidates(first_stage, queries, texts, depth, missing_text, query_ids)
    if qrels is not None and not set(work.qids) & set(qrels.query_ids):
        raise ConfigError(
            f"{qrels.path} judges none of the {len(work.qids)} queries reranked (e.g. "
            f"{', '.join(repr(q) for q in work.qids[:3])}): wrong qrels for these candidates?"
        )
    lists: dict[tuple[str, int], tuple[str, list[str]]] = {}
    for q in work.qids:
        docs = work.have_by_query[q]
        lists[(q, 0)] = (queries[q], list(docs))
        for k in range(1, shuffles + 1):
            lists[(q, k)] = (queries[q], [docs[i] for i in probe_order(q, len(docs), seed, k)])
    total = total_windows([len(d) for _, d in lists.values()], window, stride)
    with tqdm(
        total=total, desc="rerank (listwise)", unit="window", file=sys.stderr, disable=not progress, dynamic_ncols=True
    ) as bar:
        outcome = rerank_lists(lists, work.found, template, llm, cache, window, stride, bar.update)
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
        return run_from_rows(rows, tag=tag)

    run = written(0)
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
        },
        "listwise": True,
        "depth": depth,
        "window": window,
        "stride": stride,
        "windows": len(own),
        "repaired": sum(bool(r["repairs"]) for r in own),
        "repairs": {k: repairs.get(k, 0) for k in REPAIR_KINDS},
        "requests": c.as_dict(),
        "candidate_selection": candidate_selection(),
        "missing_text": missing_text,
        "queries": len(work.qids),
        "pairs_scored": len(work.cands) - work.missing,
        "missing_texts": work.missing,
        "answer_cache": {"folder": str(cache.folder)} if cache is not None else None,
        "execution": {"engine": "in-process"},
        "first_stage": {"path": first_stage.path, "sha256": first_stage.sha256, "tag": first_stage.tag},
        "texts": texts.describe(),
        "shuffles": probe_summary(outcome.orders, shuffles, seed, ndcg) if shuffles else None,
        "records": outcome.records,
        "seconds": round(outcome.seconds, 3),
    }
    return RerankResult(run, settings, outcome.seconds, len(work.qids), len(work.cands), work.missing)
