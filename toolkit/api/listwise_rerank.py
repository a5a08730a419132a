"""The listwise LLM reranker as a call: ``rerank(..., backend="listwise")``, ``twostage rerank --backend listwise``.

rank_llm's sliding windows over a first-stage run, each window one request to an LLM.
"""

from __future__ import annotations

from typing import Any

from toolkit.data.texts import rerank_inputs, rerank_query_ids, topics_source


def listwise_job(run: Any, topics: Any, candidates: Any, corpus: Any, index: Any, options: Any) -> tuple[Any, dict]:
    """The listwise LLM reranker (``toolkit.reranking.listwise``) with ``options`` (a ``RerankOptions`` whose
    backend is ``listwise``; its ``listwise`` default rank_llm's settings): rank_llm's sliding windows over the top
    ``depth``, each window one request to the OpenAI-compatible ``listwise.endpoint`` serving ``model`` (through
    ``toolkit.guard.client`` with ``listwise.requests``: requests in flight across queries, retries, backoff,
    rate, a deadline per request, answers bounded in size), or, without an endpoint, a local causal LM folder
    ``model`` run by transformers (``device``, ``batch_size``). The options, the template and the endpoint are
    checked before the inputs are read."""
    from toolkit.llm.chat import OpenAIChatJudge, TransformersJudge
    from toolkit.models.profiling import phase
    from toolkit.reranking.listwise import listwise_rerank_run

    job, spec = options, options.reranker
    model, depth = spec.model, job.depth
    options = job.listwise  # the window against the depth was checked with the options
    options.template()  # a template that does not read is an error before anything is asked
    options.few_shot_messages()
    llm: Any
    if options.endpoint:
        llm = OpenAIChatJudge(
            options.endpoint,
            model,
            **options.requests.endpoint_settings(),
            role="listwise reranker",
            api=options.api,
            # rank_llm's vLLM path (the model's tokenizer given) asks for no thinking, as vLLM reads it
            extra={"chat_template_kwargs": {"enable_thinking": False}} if options.tokenizer else None,
        )
    else:
        llm = TransformersJudge(model, device=spec.device, batch_size=spec.batch_size)
    try:
        llm.check()
        with phase("reading"):
            cand, first, queries, texts = rerank_inputs(run, candidates, topics, corpus, index)
            judged = None
            if options.qrels is not None:
                from toolkit.data.adapters import as_qrels

                judged = as_qrels(options.qrels)
        cache = _answer_cache(options.answer_cache)
        try:
            with phase("scoring"):
                result = listwise_rerank_run(
                    first,
                    queries,
                    texts,
                    llm,
                    depth=depth,
                    options=options,
                    cache=cache,
                    qrels=judged,
                    missing_text=job.missing_text,
                    query_ids=rerank_query_ids(job.query_ids, job.judged_only),
                    tag=job.tag,
                    progress=job.progress,
                    # a candidates file's own order, as rank_llm reads it; a TREC run's, trec_eval's
                    input_order="file" if cand is not None else "score",
                )
        finally:
            if cache is not None:
                cache.close()
    finally:
        close = getattr(llm, "close", None)
        if close is not None:
            close()
    return result, topics_source(topics, cand)


def _answer_cache(answer_cache: Any) -> Any:
    """The listwise answers' cache: a ``JudgmentCache`` in its own folder (``True``: ``$TWOSTAGE_CACHE/listwise``)."""
    if answer_cache is False or answer_cache is None:
        return None
    from toolkit.data.catalog import cache_dir
    from toolkit.errors import phrase
    from toolkit.guard.store import Setting
    from toolkit.llm.answer_cache import JudgmentCache

    folder = cache_dir() / "listwise" if answer_cache is True else answer_cache
    setting = Setting(
        folder,
        answer_cache is not True,
        phrase("answer_cache=FOLDER", "--answer-cache DIR"),
        phrase("answer_cache=False", "--no-answer-cache"),
    )
    return JudgmentCache(folder, setting=setting, what="listwise answer cache")
