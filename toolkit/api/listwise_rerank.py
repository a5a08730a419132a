"""The listwise LLM reranker as a call: ``rerank(..., backend="listwise")``, ``twostage rerank --backend listwise``.

rank_llm's sliding windows over a first-stage run, each window one request to an LLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkit.data.texts import rerank_inputs, topics_source

if TYPE_CHECKING:
    from toolkit.reranking.rerank_options import RerankOptions


def listwise_job(
    run: Any, topics: Any, candidates: Any, corpus: Any, index: Any, options: RerankOptions
) -> tuple[Any, dict]:
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

    spec = options.reranker
    model = spec.model
    listwise = options.listwise  # the window against the depth was checked with the options
    listwise.template()  # a template that does not read is an error before anything is asked
    listwise.few_shot_messages()
    llm: Any
    if listwise.endpoint:
        llm = OpenAIChatJudge(
            listwise.endpoint,
            model,
            **listwise.requests.endpoint_settings(),
            role="listwise reranker",
            api=listwise.api,
            # rank_llm's vLLM path (the model's tokenizer given) asks for no thinking, as vLLM reads it
            extra={"chat_template_kwargs": {"enable_thinking": False}} if listwise.tokenizer else None,
        )
    else:
        llm = TransformersJudge(model, device=spec.device, batch_size=spec.batch_size)
    try:
        llm.check()
        with phase("reading"):
            cand, first, queries, texts = rerank_inputs(run, candidates, topics, corpus, index)
            judged = None
            if listwise.qrels is not None:
                from toolkit.data.adapters import as_qrels

                judged = as_qrels(listwise.qrels)
        cache = _answer_cache(listwise.answer_cache)
        try:
            with phase("scoring"):
                result = listwise_rerank_run(
                    first,
                    queries,
                    texts,
                    llm,
                    options,
                    cache=cache,
                    qrels=judged,
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
