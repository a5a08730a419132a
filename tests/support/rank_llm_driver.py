"""Runs castorini/rank_llm 0.26.0 itself (its OpenAI client, ``SafeOpenai``) on candidates files against an
OpenAI-compatible base URL, in rank_llm's own Python (``.venv-rankllm``; see tests/support/rank_llm_oracle.py).
Not imported by the tests: ``python rank_llm_driver.py SETTINGS.json`` with

    {"base_url": url, "runs": [{"name": str, "candidates": path, "old_format": bool, "template": path,
     "model": str, "window": int, "stride": int, "context_size": int, "top_k": int, "passes": int,
     "few_shot_file": path | null, "few_shot_examples": int, "max_passage_words": int}, ...],
     "answers": [str, ...], "alpha_answers": [str, ...], "out": path}

writes to ``out`` {"orders": {name: {qid: [docid, ...]}}, "num_output_tokens": {window: n}, "repaired":
{answer: [0-based positions]}, "alpha_repaired": {...}}: the final order of each query of each run after its
``passes`` passes (as rank_llm's ``retrieve_and_rerank`` runs them), rank_llm's output estimate for each window
size, and rank_llm's repair (``receive_permutation``) of each answer for a window of 20 (with ``use_alpha`` for
``alpha_answers``).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile


def rerank(base_url: str, s: dict):
    from rank_llm.data import Request, read_requests_from_file
    from rank_llm.rerank.listwise import SafeOpenai

    path = s["candidates"]
    if s.get("old_format"):  # rank_llm's own converter of the older {query, hits} format
        from rank_llm.scripts.convert_json_to_jsonl import convert_json_to_jsonl

        converted = os.path.join(tempfile.mkdtemp(), "requests.jsonl")
        convert_json_to_jsonl(path, converted)
        path = converted
    requests = read_requests_from_file(path)
    few = s.get("few_shot_file")
    model = SafeOpenai(
        model=s["model"],
        context_size=s.get("context_size", 4096),
        prompt_template_path=s["template"],
        num_few_shot_examples=s.get("few_shot_examples", 0) if few else 0,
        few_shot_file=few,
        window_size=s.get("window", 20),
        stride=s.get("stride", 10),
        batch_size=s.get("batch_size", 8),
        keys="not-a-key",
        base_url=base_url.rstrip("/") + "/",
        max_passage_words=s.get("max_passage_words", 300),
    )
    top_k = s.get("top_k", 100)
    for request in requests:
        request.candidates = request.candidates[:top_k]
    for _ in range(s.get("passes", 1)):  # rank_llm's retrieve_and_rerank: each pass reranks the last one's result
        results = model.rerank_batch(requests, rank_start=0, rank_end=top_k, top_k_retrieve=top_k)
        requests = [Request(copy.deepcopy(r.query), copy.deepcopy(r.candidates)) for r in results]
    return model, {str(r.query.qid): [str(c.docid) for c in r.candidates] for r in requests}


def repaired(model, answers, alpha: bool) -> dict:
    from rank_llm.data import Candidate, Query, Result

    model._use_alpha = alpha
    out = {}
    for answer in answers:
        window = [Candidate(docid=str(i), score=float(20 - i), doc={"contents": str(i)}) for i in range(20)]
        done = model.receive_permutation(Result(query=Query(text="q", qid="q"), candidates=window), answer, 0, 20)
        out[answer] = [int(c.docid) for c in done.candidates]
    model._use_alpha = False
    return out


def main(settings_path: str) -> None:
    with open(settings_path) as fh:
        s = json.load(fh)
    orders, model = {}, None
    for run in s["runs"]:
        model, orders[run["name"]] = rerank(s["base_url"], run)
    assert model is not None
    estimates = {w: model.num_output_tokens(w) for w in range(1, 51)}
    result = {
        "orders": orders,
        "num_output_tokens": estimates,
        "repaired": repaired(model, s.get("answers", []), False),
        "alpha_repaired": repaired(model, s.get("alpha_answers", []), True),
    }
    with open(s["out"], "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(sys.argv[1])
