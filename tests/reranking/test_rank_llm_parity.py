"""`twostage rerank --backend listwise` against castorini/rank_llm 0.26.0 itself (its OpenAI client, run in its own
Python by tests/support/rank_llm_oracle.py), both asked by one deterministic local server
(tests/support/listwise_server.py, ``order="hash"``: a window ranked by the sha256 of each passage's text, some
answers broken or written in superscript, subscript, circled or fullwidth digits). The requests each sends are
recorded by the server: their bodies must be equal window for window, and the final orders equal."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from listwise_server import ListwiseServer
from rank_llm_oracle import rank_llm_python, run_rank_llm

DL19 = "msmarco-passage/candidates/dl19.bm25.top100.json"


def _orders(run) -> dict[str, list[str]]:
    return {
        str(q): g.sort_values("score", ascending=False, kind="stable")["doc_id"].tolist()
        for q, g in run.frame.groupby("query_id")
    }


def _by_query(bodies, pattern: str = r"zqx\d+", queries: dict[str, str] | None = None) -> dict:
    """The request bodies per (model, query), in the order they arrived (a query's windows are asked one after
    the other by both clients): the query found by ``pattern`` in the messages, or by its text in ``queries``."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for _path, body in bodies:
        messages = body.get("input") or body.get("messages")
        text = "\n".join(m["content"] for m in messages)
        if queries is not None:
            found = [q for q, t in queries.items() if f"search query: {t}." in text]
            assert len(found) == 1, text[:300]
            q = found[0]
        else:
            q = re.findall(pattern, text)[-1]
        out[(body["model"], q)].append(body)
    return dict(out)


def _templates() -> Path:
    python = rank_llm_python()
    found = subprocess.run(
        [python, "-c", "import os, rank_llm; print(os.path.dirname(rank_llm.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip()) / "rerank" / "prompt_templates"


# ------------------------------------------------------------------ DL19, all 43 queries
@pytest.mark.slow
def test_every_dl19_window_sends_rank_llm_s_request_and_every_query_ends_in_its_order(tmp_path, shared_data):
    """rank_llm's RankZephyr template, window 20, stride 10, top 100, DL19 BM25's 43 queries: the 387 requests
    are rank_llm's byte for byte (through the Responses API, as its OpenAI client sends them) and 43/43 queries
    end in rank_llm's order."""
    import toolkit as ts

    cands = shared_data / DL19
    queries = {str(e["hits"][0]["qid"]): e["query"] for e in json.loads(cands.read_text())}
    server = ListwiseServer(order="hash", breaking=True, digits="fancy")
    try:
        template = _templates() / "rank_zephyr_template.yaml"
        theirs = run_rank_llm(
            tmp_path,
            server.url,
            [{"name": "zephyr", "candidates": str(cands), "old_format": True, "template": str(template),
              "model": "rank_zephyr", "window": 20, "stride": 10, "context_size": 4096, "top_k": 100}],
        )  # fmt: skip
        asked_by_rank_llm = list(server.bodies)
        server.bodies.clear()
        run = ts.rerank(
            candidates=str(cands), model="rank_zephyr", backend="listwise", endpoint=server.url, api="responses",
            answer_cache=False, depth=100,
        )  # fmt: skip
        asked_by_us = list(server.bodies)
    finally:
        server.close()
    assert len(asked_by_rank_llm) == len(asked_by_us) == 387 == run.meta["windows"]
    assert all(path == "/v1/responses" for path, _ in asked_by_rank_llm + asked_by_us)
    mine, its = _by_query(asked_by_us, queries=queries), _by_query(asked_by_rank_llm, queries=queries)
    assert len(mine) == 43 and mine == its  # every body, window for window: the model and the messages
    ours = _orders(run)
    same = [q for q in theirs["orders"]["zephyr"] if ours[q] == theirs["orders"]["zephyr"][q]]
    assert len(same) == 43
    assert run.meta["repaired"] > 0 and all(n > 0 for n in run.meta["repairs"].values())
    assert max(r["prompt_tokens"] for r in run.meta["records"]) <= 4096 - 78  # rank_llm's estimate of [1] > .. > [20]


# ------------------------------------------------------------------ hard inputs, every prompt format
PASSAGES = [
    "  70Â°F is the temperature; the speciï¬\x81c heat of water it&#39;s said &amp; more  ",
    "A passage\n\nwith kept   newlines\tand tabs [3] and a citation [12].",
    "Plain words " * 120,  # 360 words: cut to rank_llm's 300, then shorter to fit the context size
    "Â¿QuÃ© es? café crème brûlée — “quoted” — [1] first",
    "short",
    "Numbers [7] [x] [ 8 ] (9) and an identifier look-alike [20] > [1]",
    "&lt;b&gt;bold&lt;/b&gt; &quot;html&quot; entities &#8211; dash",
    "Ã©tÃ© mojibake twice: donâ€™t stop",
    "line one\r\nline two\rline three",
    "zero\u200bwidth and non\u00a0breaking spaces",
    "tail passage " * 40,
    "the last one",
]


def _hard_requests(path: Path) -> Path:
    """rank_llm 0.26's request format (JSONL), three queries with [N] in them: one of 12 candidates with titles
    and every doc field rank_llm reads, one of 9, one of 3 (fewer than a window); equal scores listed in another
    order than trec_eval's."""
    fields = ["text", "segment", "contents", "content", "body", "passage"]
    lines = []
    for qi, (n, query) in enumerate([(12, "what is [1] zqx1 café?"), (9, "zqx2 how\ndo [22] tides work"), (3, "zqx3")]):
        candidates = []
        for i in range(n):
            doc = {fields[(i + qi) % len(fields)]: PASSAGES[(i * 5 + qi) % len(PASSAGES)]}
            if i % 3 == 0:
                doc["title"] = f"Title {i} [{i}]"
            # equal scores in pairs, listed by document id ascending: rank_llm takes the file's order
            candidates.append({"docid": f"d{qi}-{i}", "score": round(30.0 - (i // 2) * 1.25, 4), "doc": doc})
        lines.append(json.dumps({"query": {"text": query, "qid": f"q{qi}"}, "candidates": candidates}))
    path.write_text("\n".join(lines) + "\n")
    return path


FEW_SHOT = [
    {
        "conversations": [
            {"role": "user", "value": "Example: rank two passages about cats."},
            {"role": "assistant", "value": "[2] > [1]"},
        ]
    },
    {
        "conversations": [
            {"role": "user", "value": "Another example."},
            {"role": "assistant", "value": "[1] > [3] > [2]"},
        ]
    },
    {
        "conversations": [
            {"role": "user", "value": "Not used: only two are asked for."},
            {"role": "assistant", "value": "[1]"},
        ]
    },
]

#: answers repaired by both, for a window of 20 (rank_llm's digit maps, ⓪ that int() refuses, </think>, repeats)
ANSWERS = [
    "[²] > [¹] > [³]", "[₄] > [₂] > [₁₀]", "[③] > [①] > [⑨]", "[❸] > [❶]", "[１２] > [３]", "[🄃] > [🄁]",
    "[⓪] > [1]", "[٣] > [١]", "<think>[1] > [2]</think>\n[5] > [4]", "[3] > [3] > [25] > [0] > [4]", "nothing",
    "9" * 4301 + " 1", "[1²] > [2]", "[⑩] > [2]", "[³⁴] > [1]", "[２０] > [19] > [⁰]", "1,2,3", "",
]  # fmt: skip
ALPHA_ANSWERS = ["[B] > [A] > [C]", "[b] > [A]", "Answer: [C] > [A]", "[É] > [A]", "[T] > [A] > [U]", "[2] > [1]"]

CONFIGS = [  # (name, template, twostage's options, rank_llm's)
    ("zephyr-fit", "rank_zephyr_template.yaml", {"window": 6, "stride": 3, "context_size": 350, "passes": 2},
     {"window": 6, "stride": 3, "context_size": 350, "passes": 2}),
    ("gpt-multiturn", "rank_gpt_template.yaml", {"window": 5, "stride": 5, "few_shot_examples": 2},
     {"window": 5, "stride": 5, "few_shot_examples": 2}),
    ("apeer", "rank_gpt_apeer_template.yaml", {"window": 4, "stride": 2, "max_passage_words": 40},
     {"window": 4, "stride": 2, "max_passage_words": 40}),
    ("qwen", "qwen_non_thinking_template.yaml", {"window": 12, "stride": 6, "context_size": 1200},
     {"window": 12, "stride": 6, "context_size": 1200}),
]  # fmt: skip


def test_hard_inputs_send_rank_llm_s_requests_for_every_template_and_setting(tmp_path):
    """Mojibake, HTML entities, newlines, [N] in passages and queries, titles, every doc field, a list shorter
    than the window, prompts shortened to fit the context size, two passes, stride == window, few-shot examples,
    the multi-turn and APEER templates: every request body equal to rank_llm's, window for window, and every
    final order; rank_llm's repairs of answers in its mapped digits; its output estimate for every window."""
    import toolkit as ts
    from toolkit.reranking.listwise import parse_answer
    from toolkit.reranking.listwise_prompt import TiktokenCount

    requests = _hard_requests(tmp_path / "requests.jsonl")
    few = tmp_path / "few.json"
    few.write_text(json.dumps(FEW_SHOT))
    templates = _templates()
    server = ListwiseServer(order="hash", breaking=True, digits="fancy")
    runs = []
    for name, template, _ours, theirs in CONFIGS:
        run = {"name": name, "candidates": str(requests), "template": str(templates / template), "model": name}
        runs.append(
            run | {"top_k": 15} | theirs | ({"few_shot_file": str(few)} if "few_shot_examples" in theirs else {})
        )
    try:
        rank_llm = run_rank_llm(tmp_path, server.url, runs, answers=ANSWERS, alpha_answers=ALPHA_ANSWERS)
        asked_by_rank_llm = list(server.bodies)
        server.bodies.clear()
        ours = {}
        for name, template, options, _theirs in CONFIGS:
            extra = {"few_shot": str(few)} if "few_shot_examples" in options else {}
            run = ts.rerank(
                candidates=str(requests), model=name, backend="listwise", endpoint=server.url, api="responses",
                answer_cache=False, depth=15, prompt=str(templates / template), **options, **extra,
            )  # fmt: skip
            ours[name] = (_orders(run), run.meta)
        asked_by_us = list(server.bodies)
    finally:
        server.close()
    mine, its = _by_query(asked_by_us), _by_query(asked_by_rank_llm)
    assert sorted(mine) == sorted(its) and len(mine) == 4 * 3
    for key in its:
        assert mine[key] == its[key], key
    for name, _t, _o, _r in CONFIGS:
        assert ours[name][0] == rank_llm["orders"][name], name
    # the shapes exercised: shortened passages, two passes, a window of 3, few-shot turns, the multi-turn format
    fit = ours["zephyr-fit"][1]
    assert min(r["passage_words"] for r in fit["records"]) < 40 and {r["pass"] for r in fit["records"]} == {1, 2}
    assert any(r["ranks"] == [1, 3] for r in fit["records"])
    gpt = its[("gpt-multiturn", "zqx1")][0]["input"]
    assert [m["role"] for m in gpt[:5]] == ["system", "user", "assistant", "user", "assistant"]
    assert gpt[1]["content"] == FEW_SHOT[0]["conversations"][0]["value"]
    assert sum(fit["repairs"].values()) > 0
    # the repairs, answer for answer
    for answer, positions in rank_llm["repaired"].items():
        assert parse_answer(answer, 20)[1] == positions, answer
    for answer, positions in rank_llm["alpha_repaired"].items():
        assert parse_answer(answer, 20, alpha=True)[1] == positions, answer
    # rank_llm's output estimate (tiktoken's cl100k_base) for every window size
    count = TiktokenCount("any")
    assert {int(w): n for w, n in rank_llm["num_output_tokens"].items()} == {
        w: count.output_tokens(w, False) for w in range(1, 51)
    }


def test_chat_requests_carry_rank_llm_s_messages_and_the_answers_are_read_as_it_reads_them(tmp_path):
    """Through chat/completions (twostage's default API) the messages are rank_llm's too, temperature 0, no
    max_tokens (rank_llm's OpenAI client sends none), and the final orders equal rank_llm's."""
    import toolkit as ts

    requests = _hard_requests(tmp_path / "requests.jsonl")
    template = _templates() / "rank_zephyr_template.yaml"
    server = ListwiseServer(order="hash", breaking=True, digits="fancy")
    try:
        theirs = run_rank_llm(
            tmp_path,
            server.url,
            [{"name": "z", "candidates": str(requests), "template": str(template), "model": "z", "window": 5,
              "stride": 2, "top_k": 12, "context_size": 900}],
        )  # fmt: skip
        asked_by_rank_llm = list(server.bodies)
        server.bodies.clear()
        run = ts.rerank(
            candidates=str(requests), model="z", backend="listwise", endpoint=server.url, answer_cache=False,
            depth=12, window=5, stride=2, context_size=900,
        )  # fmt: skip
        asked_by_us = list(server.bodies)
    finally:
        server.close()
    assert all(path == "/v1/chat/completions" for path, _ in asked_by_us)
    mine, its = _by_query(asked_by_us), _by_query(asked_by_rank_llm)
    assert sorted(mine) == sorted(its)
    for key, bodies in its.items():
        assert [b["messages"] for b in mine[key]] == [b["input"] for b in bodies]
        assert all(b["temperature"] == 0 and "max_tokens" not in b for b in mine[key])
        assert all(set(b) == {"model", "input"} for b in bodies)
    assert _orders(run) == theirs["orders"]["z"]
