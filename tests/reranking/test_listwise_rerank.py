"""The listwise LLM reranker (``twostage rerank --backend listwise``) against a local OpenAI-compatible server
(tests/support/listwise_server.py): the run equals an independent sliding-window computation, repairs are
counted, answers are cached (a rerun asks nothing, a stopped job resumes), the order probe, and bad input."""

from __future__ import annotations

import json
import random
import re
import socket
from pathlib import Path

import pytest
from listwise_server import ListwiseServer, ideal, mode_of

from toolkit.reranking.listwise import parse_answer, window_spans
from toolkit.reranking.listwise_prompt import load_listwise_template

QUERIES = 5
PER_QUERY = 30


def _relevance(seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    return {f"q{q}d{i}": rng.random() for q in range(QUERIES) for i in range(PER_QUERY)}


def _candidates(path, queries: int = QUERIES, per_query: int = PER_QUERY) -> str:
    data = [
        {
            "query": f"what is topic {q}",
            "hits": [
                {
                    "qid": f"q{q}",
                    "docid": f"q{q}d{i}",
                    "rank": i + 1,
                    "score": float(100 - i),
                    "content": f"A passage [{i % 3 + 1}] about doc=q{q}d{i} and more words.",
                }
                for i in range(per_query)
            ],
        }
        for q in range(queries)
    ]
    path.write_text(json.dumps(data))
    return str(path)


# ------------------------------------------------------------------ the oracle
def _expected_window(docs: list[str], relevance: dict[str, float], breaking: bool) -> tuple[list[str], str]:
    """The window's order after the server's answer and rank_llm's repair, computed here by hand, and the
    repair it needs."""
    best = ideal(docs, relevance)
    mode = mode_of(docs) if breaking else "ok"
    if mode == "missing":  # the last two left out: appended in input order
        kept = best[:-2]
        order = kept + sorted(set(range(len(docs))) - set(kept))
        return [docs[i] for i in order], "missing"
    if mode == "none_parsed":
        return list(docs), "none_parsed"
    return [docs[i] for i in best], {"ok": "", "think": ""}.get(mode, mode)


def _oracle(docs: list[str], relevance, window: int, stride: int, breaking: bool):
    """rank_llm 0.26's sliding window, written out: the final order and the repairs asked for."""
    docs = list(docs)
    repairs = []
    end, start = len(docs), max(len(docs) - window, 0)
    while end > start:
        docs[start:end], repair = _expected_window(docs[start:end], relevance, breaking)
        repairs.append(repair)
        if start == 0:
            break
        end -= stride
        start = max(start - stride, 0)
    return docs, repairs


def _read_run(path) -> dict[str, list[str]]:
    rows: dict[str, list[tuple[float, str]]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _rank, score, _tag = line.split()
        rows.setdefault(q, []).append((-float(score), d))
    return {q: [d for _, d in sorted(v)] for q, v in rows.items()}


@pytest.fixture
def server():
    s = ListwiseServer(_relevance(), breaking=True)
    yield s
    s.close()


def _rerank(cli, cands, server, out, *extra):
    return cli(
        "rerank",
        "--candidates",
        cands,
        "--backend",
        "listwise",
        "--endpoint",
        server.url,
        "--model",
        "test-ranker",
        "--depth",
        "25",
        "--window",
        "10",
        "--stride",
        "4",
        "--no-progress",
        "--out",
        out,
        *extra,
    )


# ------------------------------------------------------------------ tests
def test_run_equals_sliding_window_oracle_and_repairs_are_counted(cli, tmp_path, server):
    cands = _candidates(tmp_path / "c.json")
    out = tmp_path / "lw.trec"
    res = _rerank(cli, cands, server, out, "--answer-cache", tmp_path / "cache")
    assert res.exit_code == 0, res.output
    run = _read_run(out)
    rel = _relevance()
    expected_repairs: dict[str, int] = {}
    windows = 0
    for q in range(QUERIES):
        first = [f"q{q}d{i}" for i in range(PER_QUERY)]
        top, repairs = _oracle(first[:25], rel, 10, 4, breaking=True)
        assert run[f"q{q}"] == top + first[25:]  # below the depth: the first stage's order
        windows += len(repairs)
        for r in repairs:
            if r:
                expected_repairs[r] = expected_repairs.get(r, 0) + 1
    meta = json.loads((tmp_path / "lw.trec.meta.json").read_text())
    assert meta["listwise"] is True and meta["window"] == 10 and meta["stride"] == 4 and meta["depth"] == 25
    assert meta["windows"] == windows == server.requests == 5 * 5  # (15,25) (11,21) (7,17) (3,13) (0,9)
    assert {k: v for k, v in meta["repairs"].items() if v} == expected_repairs
    assert len(expected_repairs) == 4  # every kind of repair occurred
    assert meta["repaired"] == sum(expected_repairs.values())
    assert meta["first_stage"]["sha256"] and meta["reranker"]["kind"] == "listwise"
    rec = meta["records"][0]
    assert set(rec) >= {"rendered_prompt_sha256", "response", "identifiers", "permutation", "repairs"}
    assert rec["ranks"] == [16, 25] and rec["window"] == 0


def test_rerun_sends_nothing_and_a_stopped_job_resumes(cli, tmp_path, server):
    cands = _candidates(tmp_path / "c.json")
    cache = tmp_path / "cache"
    server.fail_after = 7  # the job stops after 7 answers: nothing written, those 7 cached
    res = _rerank(cli, cands, server, tmp_path / "a.trec", "--answer-cache", cache)
    assert res.exit_code == 1
    assert res.stderr.startswith("Error: ") and "failed" in res.stderr and res.stderr.count("\n") == 1
    assert not (tmp_path / "a.trec").exists() and not (tmp_path / "a.trec.meta.json").exists()
    server.fail_after = None
    before = server.requests
    res = _rerank(cli, cands, server, tmp_path / "a.trec", "--answer-cache", cache)
    assert res.exit_code == 0, res.output
    assert server.requests - before == 25 - 7  # resumed: only the windows not answered before
    before = server.requests
    res = _rerank(cli, cands, server, tmp_path / "b.trec", "--answer-cache", cache)
    assert res.exit_code == 0, res.output
    assert server.requests == before  # the same command again: nothing sent
    assert _read_run(tmp_path / "a.trec") == _read_run(tmp_path / "b.trec")
    meta = json.loads((tmp_path / "b.trec.meta.json").read_text())
    assert meta["requests"]["asked"] == 0 and meta["requests"]["from_cache"] == 25
    assert all(r["from_cache"] for r in meta["records"])


def test_order_probe_input_order_near_chance_and_invariant_is_one(cli, tmp_path):
    from toolkit.stats.rank_similarity import rbo

    cands = _candidates(tmp_path / "c.json")
    invariant = ListwiseServer(_relevance())
    try:
        res = _rerank(
            cli, cands, invariant, tmp_path / "i.trec", "--no-answer-cache", "--shuffles", "3", "--window", "25",
            "--stride", "5",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
    finally:
        invariant.close()
    # one window of the whole depth, ranked by relevance whatever its order: the same top 10 from every shuffle
    probe = json.loads((tmp_path / "i.trec.meta.json").read_text())["shuffles"]
    assert probe["n"] == 3 and probe["seed"] == 42 and len(probe["per_query"]) == QUERIES
    assert probe["mean_rbo"] == pytest.approx(1.0)
    parrot = ListwiseServer(_relevance(), order="input")
    try:
        res = _rerank(cli, cands, parrot, tmp_path / "p.trec", "--no-answer-cache", "--shuffles", "8")
        assert res.exit_code == 0, res.output
    finally:
        parrot.close()
    probe = json.loads((tmp_path / "p.trec.meta.json").read_text())["shuffles"]
    # chance: two independent random orders of the 25 candidates, their top 10s compared
    rng = random.Random(1)
    items = list(range(25))
    chance = sum(rbo(rng.sample(items, 25)[:10], items[:10], 0.9) for _ in range(1000)) / 1000
    assert abs(probe["mean_rbo"] - chance) < 0.1 and probe["mean_rbo"] < 0.6


def test_shuffled_input_reaches_the_server_shuffled(tmp_path):
    from toolkit.reranking.listwise import probe_order

    order = probe_order("q1", 25, 42, 1)
    assert sorted(order) == list(range(25)) and order != list(range(25))
    assert order == probe_order("q1", 25, 42, 1) and order != probe_order("q1", 25, 42, 2)


@pytest.mark.parametrize(
    "window, stride, message",
    [
        ("30", "4", "--window 30 is larger than --depth 25"),
        ("10", "0", "--stride must be between 1 and the window (10), not 0"),
        ("10", "11", "--stride must be between 1 and the window (10), not 11"),
    ],
)
def test_bad_window_is_one_error_before_any_request(cli, tmp_path, server, window, stride, message):
    cands = _candidates(tmp_path / "c.json")
    out = tmp_path / "x.trec"
    res = cli(
        "rerank", "--candidates", cands, "--backend", "listwise", "--endpoint", server.url, "--model", "m",
        "--depth", "25", "--window", window, "--stride", stride, "--out", out,
    )  # fmt: skip
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and message in res.stderr, res.output
    assert server.requests == 0 and not out.exists()


@pytest.mark.parametrize(
    "front, body, message",
    [
        ("", "Rank these for {query}.\n", "no {passages} placeholder"),
        ("", "Rank these:\n{passages}\n", "no {query} placeholder"),
        ("passage: '{passage}'\n", "{query}\n{passages}\n", "must hold {id}"),
    ],
)
def test_template_without_identifiers_is_refused(cli, tmp_path, server, front, body, message):
    cands = _candidates(tmp_path / "c.json")
    prompt = tmp_path / "p.md"
    prompt.write_text(f"---\nname: t\n{front}---\n{body}")
    res = _rerank(cli, cands, server, tmp_path / "x.trec", "--prompt", prompt)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and message in res.stderr, res.output
    assert server.requests == 0 and not (tmp_path / "x.trec").exists()


def test_endpoint_down_fails_fast_and_writes_nothing(cli, tmp_path):
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cands = _candidates(tmp_path / "c.json")
    started = time.monotonic()
    res = cli(
        "rerank", "--candidates", cands, "--backend", "listwise", "--endpoint", f"http://127.0.0.1:{port}/v1",
        "--model", "m", "--depth", "25", "--window", "10", "--stride", "4", "--out", tmp_path / "x.trec",
    )  # fmt: skip
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith(f"Error: listwise reranker endpoint http://127.0.0.1:{port}/v1 is unreachable")
    assert time.monotonic() - started < 10
    assert not list(tmp_path.glob("x.trec*"))


# ------------------------------------------------------------------ the pieces, by hand
@pytest.mark.parametrize(
    "answer, k, perm, repairs",
    [
        ("[2] > [3] > [1]", 3, [2, 3, 1], []),
        ("[2] > [2] > [3] > [1]", 3, [2, 3, 1], ["duplicates"]),
        ("[2] > [9] > [0] > [3] > [1]", 3, [2, 3, 1], ["unknown"]),
        ("[3]", 3, [3, 1, 2], ["missing"]),
        ("[3] > [3] > [7]", 4, [3, 1, 2, 4], ["duplicates", "unknown", "missing"]),
        ("no ranking here", 3, [1, 2, 3], ["none_parsed"]),
        ("<think>[1] > [2] > [3]</think>[3] > [1] > [2]", 3, [3, 1, 2], []),
        ("2, 3 and then 1", 3, [2, 3, 1], []),
        # decimal digits of another script are read as int() (and rank_llm) reads them
        ("[\u0663] > [\u0661] > [\u0662]", 3, [3, 1, 2], []),
        # a number of 4,300 digits is out of the window; one of 4,301 makes rank_llm's int() fail: input order
        (f"[{'9' * 4300}] > [2] > [1]", 3, [2, 1, 3], ["unknown", "missing"]),
        (f"[{'9' * 4301}] > [2] > [1]", 3, [1, 2, 3], ["none_parsed"]),
        (f"[{'0' * 4300}2] > [3]", 3, [1, 2, 3], ["none_parsed"]),
    ],
)
def test_parse_answer_repairs_as_rank_llm(answer, k, perm, repairs):
    _found, permutation, kinds = parse_answer(answer, k)
    assert [i + 1 for i in permutation] == perm and kinds == repairs


def test_a_huge_answer_parses_in_linear_time():
    import time

    answer = " > ".join(f"[{i}]" for i in range(200_000))
    started = time.monotonic()
    _found, perm, kinds = parse_answer(answer, 20)
    assert time.monotonic() - started < 5 and perm == list(range(20)) and kinds == ["unknown"]


@pytest.mark.parametrize(
    "length, window, stride, spans",
    [
        (100, 20, 10, [(80 - 10 * i, 100 - 10 * i) for i in range(9)]),
        (25, 20, 10, [(5, 25), (0, 15)]),
        (25, 10, 4, [(15, 25), (11, 21), (7, 17), (3, 13), (0, 9)]),
        (10, 20, 10, [(0, 10)]),  # a list shorter than the window: one window of it
        (5, 20, 10, [(0, 5)]),
        (21, 20, 10, [(1, 21), (0, 11)]),  # once rank 1 is in a window, rank_llm 0.26 stops
        (100, 20, 20, [(80 - 20 * i, 100 - 20 * i) for i in range(5)]),  # stride == window: no overlap
        (1, 20, 10, [(0, 1)]),
        (0, 20, 10, []),
    ],
)
def test_window_spans(length, window, stride, spans):
    assert window_spans(length, window, stride) == spans


def test_default_template_is_rank_llm_s_rankzephyr_template_and_escapes_brackets():
    t = load_listwise_template()
    assert t.name == "rank_zephyr_template.rank_llm-0.26.0.yaml" and t.method == "singleturn_listwise"
    system, user = t.messages("what [2] is x", [(" first [1]\n passage ", 1.0), ("second", 0.5)], 300)
    assert system == {
        "role": "system",
        "content": "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the "
        "query",
    }
    assert user["content"] == (
        "I will provide you with 2 passages, each indicated by a numerical identifier []. Rank the passages based "
        "on their relevance to the search query: what (2) is x.\n[1] first (1) passage\n[2] second\nSearch Query: "
        "what (2) is x.\nRank the 2 passages above based on their relevance to the search query. All the passages "
        "should be included and listed using identifiers, in descending order of relevance. The output format "
        "should be [] > [], e.g., [2] > [1], Answer concisely and directly and only respond with the ranking "
        "results, do not say any word or explain."
    )


def test_twostage_s_front_matter_template_still_reads_and_renders(tmp_path):
    prompt = tmp_path / "p.md"
    prompt.write_text(
        "---\nname: mine\nsystem: Be brief.\npassage: '<{id}> {passage}'\nmax_words: 2\nmax_tokens: 50\n---\n"
        "Q: {query} ({num})\n{passages}\nAnswer.\n"
    )
    t = load_listwise_template(prompt)
    assert (t.kind, t.name, t.max_tokens) == ("front_matter", "mine", 50)
    messages = t.messages("x [3]", [("one two three", 1.0), ("Â°F four", 2.0)], t.max_words)
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Q: x (3) (2)\n<1> one two\n<2> °F four\nAnswer.\n"},
    ]


def test_library_call(tmp_path, server):
    import toolkit as ts

    cands = _candidates(tmp_path / "c.json", queries=2)
    run = ts.rerank(
        candidates=cands,
        model="test-ranker",
        backend="listwise",
        endpoint=server.url,
        depth=25,
        window=10,
        stride=4,
        answer_cache=False,
    )
    assert run.meta["listwise"] is True and run.meta["windows"] == 10
    with pytest.raises(Exception, match="backend='listwise' only"):
        ts.rerank(candidates=cands, model="m", window=10)


def test_diagnose_reads_the_sidecar_window_stride_and_probe(cli, tmp_path, server):
    """No --listwise, no --window: the diagnosis takes them, and the order probe, from OUT.trec.meta.json."""
    import toolkit as ts

    cands = _candidates(tmp_path / "c.json")
    out = tmp_path / "lw.trec"
    qrels = tmp_path / "q.qrels"
    qrels.write_text("".join(f"{d[: d.index('d')]} 0 {d} {int(v > 0.7)}\n" for d, v in _relevance().items()))
    res = _rerank(cli, cands, server, out, "--no-answer-cache", "--shuffles", "2", "--qrels", qrels)
    assert res.exit_code == 0, res.output
    first = tmp_path / "bm25.trec"
    first.write_text(
        "".join(f"q{q} Q0 q{q}d{i} {i + 1} {100 - i} bm25\n" for q in range(QUERIES) for i in range(PER_QUERY))
    )
    d = ts.diagnose(str(qrels), str(first), {"llm": str(out)}, worst_n=0, permutations=100)
    meta = json.loads((tmp_path / "lw.trec.meta.json").read_text())
    run = d.summary["reranked_runs"][0]
    assert run["listwise"] is True
    behaviour = run["behaviour"]
    assert (behaviour["windows"]["window"], behaviour["windows"]["stride"]) == (10, 4)
    assert behaviour["windows"]["windows"] == 25
    assert behaviour["order_probe"]["n"] == 2
    assert behaviour["order_probe"]["mean_rbo"] == meta["shuffles"]["mean_rbo"]
    spread = meta["shuffles"]["ndcg_cut_10"]
    shown = behaviour["order_probe"]["ndcg_cut_10"]
    assert shown == {k: spread[k] for k in ("queries", "run", "min", "max", "std", "mean_range")}
    assert shown["queries"] == QUERIES and shown["mean_range"] > 0
    # the page: the spread beside the mean RBO
    d.write(tmp_path / "page")
    lines = (tmp_path / "page" / "report.md").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("| reranked run | depth |"))
    assert "order probe: mean RBO | order probe: nDCG@10 mean range | order probe |" in lines[at]
    row = lines[at + 2]
    assert row.startswith("| llm |") and f"| {shown['mean_range']:.4f} |" in row
    assert f"2 shuffles, seed 42; nDCG@10 {spread['run']:.4f}, shuffled {spread['min']:.4f} to " in row
    assert f"(sd {spread['std']:.4f}), 5 judged queries" in row
    # the listwise record: repairs per kind and the queries they touched, the windows left in input order
    own = [r for r in meta["records"] if r["shuffle"] == 0]
    record = behaviour["listwise_record"]
    assert record["windows"] == meta["windows"] == 25 and record["repaired"] == meta["repaired"]
    for kind, n in meta["repairs"].items():
        touched = sorted({r["query_id"] for r in own if kind in r["repairs"]})
        assert record["repairs"][kind] == {"answers": n, "queries": touched}
    kept = [r for r in own if r["permutation"] == list(range(1, len(r["docs"]) + 1))]
    assert record["left_in_input_order"]["count"] == len(kept) > 0
    assert record["left_in_input_order"]["none_parsed"] == meta["repairs"]["none_parsed"] > 0
    text = (tmp_path / "page" / "report.md").read_text()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("| reranked run | windows | repaired answers |"))
    assert lines[at + 2].startswith(f"| llm | 25 | {meta['repaired']} |")
    assert "none_parsed: no identifier read (or one int() refuses): the window keeps its input order" in text
    assert "duplicates: an identifier named again: its first place kept, the repeats dropped" in text
    assert "missing: passages not named: placed below the named ones, in their input order" in text
    assert "failed or repaired listwise call returns its input" not in text


# ------------------------------------------------------------------ the probe's nDCG@10 spread
def _graded_qrels(path, judged=range(QUERIES - 1)) -> str:
    """Graded labels 0-3 from the server's relevance, for every query but the last, and one query no candidate
    list holds."""
    rel = _relevance()
    lines = [f"{d[: d.index('d')]} 0 {d} {int(v * 4)}\n" for d, v in rel.items() if int(d[1 : d.index("d")]) in judged]
    path.write_text("".join(lines) + "q99 0 q99d0 3\n")
    return str(path)


def test_probe_ndcg_spread_equals_pytrec_eval_on_the_reconstructed_shuffled_runs(cli, tmp_path, server):
    import numpy as np
    import pytrec_eval

    from toolkit.reranking.listwise import probe_order

    cands = _candidates(tmp_path / "c.json")
    qrels = _graded_qrels(tmp_path / "g.qrels")
    out = tmp_path / "lw.trec"
    shuffles, seed = 3, 5
    res = _rerank(
        cli, cands, server, out, "--no-answer-cache", "--shuffles", str(shuffles), "--seed", str(seed),
        "--qrels", qrels,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "nDCG@10" in res.stderr
    rel = _relevance()
    qrels_dict: dict[str, dict[str, int]] = {}
    for line in Path(qrels).read_text().splitlines():
        q, _, d, label = line.split()
        qrels_dict.setdefault(q, {})[d] = int(label)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels_dict, {"ndcg_cut.10"})
    expected: dict[int, dict[str, float]] = {}
    for k in range(shuffles + 1):  # the runs rebuilt here: each input order through the sliding-window oracle
        run: dict[str, dict[str, float]] = {}
        for q in range(QUERIES):
            first = [f"q{q}d{i}" for i in range(PER_QUERY)]
            top = first[:25] if k == 0 else [first[i] for i in probe_order(f"q{q}", 25, seed, k)]
            docs = _oracle(top, rel, 10, 4, breaking=True)[0] + first[25:]
            run[f"q{q}"] = {d: float(len(docs) - i) for i, d in enumerate(docs)}
        expected[k] = {q: v["ndcg_cut_10"] for q, v in evaluator.evaluate(run).items()}
    judged = [f"q{q}" for q in range(QUERIES - 1)]
    assert sorted(expected[0]) == judged  # q4 unjudged, q99 not reranked: neither counts
    spread = json.loads((tmp_path / "lw.trec.meta.json").read_text())["shuffles"]["ndcg_cut_10"]
    assert spread["measure"] == "ndcg_cut_10" and spread["queries"] == len(judged)
    assert spread["qrels"]["path"] == qrels
    assert sorted(spread["per_query"]) == judged
    for q in judged:
        got = spread["per_query"][q]
        assert got["run"] == pytest.approx(expected[0][q], abs=1e-12)
        assert got["shuffles"] == pytest.approx([expected[k][q] for k in range(1, shuffles + 1)], abs=1e-12)
        assert got["range"] == pytest.approx(max(got["shuffles"]) - min(got["shuffles"]), abs=1e-12)
    means = [np.mean([expected[k][q] for q in judged]) for k in range(shuffles + 1)]
    assert spread["run"] == pytest.approx(means[0], abs=1e-12)
    assert spread["shuffles"] == pytest.approx(means[1:], abs=1e-12)
    assert spread["std"] == pytest.approx(np.std(means[1:], ddof=1), abs=1e-12)
    assert (spread["min"], spread["max"]) == pytest.approx((min(means[1:]), max(means[1:])), abs=1e-12)
    ranges = [max(expected[k][q] for k in range(1, 4)) - min(expected[k][q] for k in range(1, 4)) for q in judged]
    assert spread["mean_range"] == pytest.approx(np.mean(ranges), abs=1e-12)
    assert spread["mean_range"] > 0.01  # this reranker's windows do depend on its input order


def test_probe_qrels_without_shuffles_or_with_no_common_query_is_one_error(cli, tmp_path, server):
    cands = _candidates(tmp_path / "c.json")
    res = _rerank(cli, cands, server, tmp_path / "x.trec", "--qrels", _graded_qrels(tmp_path / "g.qrels"))
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and "give --shuffles K" in res.stderr, res.output
    other = _graded_qrels(tmp_path / "o.qrels", judged=())
    res = _rerank(cli, cands, server, tmp_path / "x.trec", "--shuffles", "2", "--qrels", other)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and "judges none of the 5 queries" in res.stderr
    assert server.requests == 0 and not list(tmp_path.glob("x.trec*"))


# ------------------------------------------------------------------ a killed job
def test_a_killed_job_resumes_asking_only_the_missing_windows_and_ends_byte_identical(cli, tmp_path, server):
    """`twostage rerank --backend listwise` in its own process, SIGKILLed once answers have arrived; the same
    command again asks only the windows whose answers were not committed, and its run is byte for byte the run
    of a job never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import toolkit

    cands = _candidates(tmp_path / "c.json")
    (tmp_path / "ref").mkdir()
    (tmp_path / "job").mkdir()
    res = _rerank(cli, cands, server, tmp_path / "ref" / "lw.trec", "--no-answer-cache")
    assert res.exit_code == 0, res.output
    reference = (tmp_path / "ref" / "lw.trec").read_bytes()
    out, cache = tmp_path / "job" / "lw.trec", tmp_path / "cache"
    args = ["--answer-cache", str(cache), "--concurrency", "1"]
    server.delay = 0.3  # one answer at a time, slowly: the job is still running when it is killed
    sent0, w0 = server.sent, len(server.windows)
    env = dict(os.environ, PYTHONPATH=str(Path(toolkit.__file__).resolve().parents[1]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit.cli", "rerank", "--candidates", cands, "--backend", "listwise",
         "--endpoint", server.url, "--model", "test-ranker", "--depth", "25", "--window", "10", "--stride", "4",
         "--no-progress", "--out", str(out), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while server.sent - sent0 < 6 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    sent = server.sent - sent0
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
    assert 6 <= sent < 25, "the job was not killed half way"
    assert not out.exists() and not Path(str(out) + ".meta.json").exists()
    first_job = [tuple(w) for w in server.windows[w0:]]
    server.delay = 0.0
    w1 = len(server.windows)
    res = _rerank(cli, cands, server, out, *args)
    assert res.exit_code == 0, res.output
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    resumed = [tuple(r["docs"]) for r in meta["records"] if r["from_cache"]]
    asked = [tuple(r["docs"]) for r in meta["records"] if not r["from_cache"]]
    rerun = [tuple(w) for w in server.windows[w1:]]
    assert len(resumed) + len(asked) == 25 and meta["requests"]["from_cache"] == len(resumed)
    assert len(resumed) >= sent - 2  # each answer committed as it arrived (at most those in transit lost)
    assert set(resumed) <= set(first_job)  # answered by the killed job
    assert sorted(rerun) == sorted(asked) and meta["requests"]["asked"] == len(asked) == 25 - len(resumed)
    assert out.read_bytes() == reference


def test_probe_qrels_by_collection_name(cli, tmp_path, server, shared_data, monkeypatch):
    """--qrels takes a collection name as other commands do (here DL19's, which judges none of these queries)."""
    monkeypatch.setenv("TWOSTAGE_DATA", str(shared_data))
    cands = _candidates(tmp_path / "c.json")
    res = _rerank(cli, cands, server, tmp_path / "x.trec", "--shuffles", "2", "--qrels", "dl19-passage")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.output
    assert "qrels.dl19-passage.txt judges none of the 5 queries" in res.stderr
    assert server.requests == 0 and not list(tmp_path.glob("x.trec*"))


# ------------------------------------------------------------------ rank_llm's settings
def test_first_token_reranking_reads_the_endpoint_s_top_logprobs(cli, tmp_path):
    """FIRST through an endpoint: one token after the messages and an assistant "[", with logprobs and
    top_logprobs; the window ordered by the identifiers' logprobs (a word and a superscript digit among them are
    no identifiers), as the sliding-window oracle orders it by relevance."""
    server = ListwiseServer(_relevance())
    try:
        cands = _candidates(tmp_path / "c.json")
        res = _rerank(cli, cands, server, tmp_path / "f.trec", "--no-answer-cache", "--first-token")
        assert res.exit_code == 0, res.output
        body = server.bodies[0][1]
    finally:
        server.close()
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["messages"][-1] == {"role": "assistant", "content": "["} and body["continue_final_message"] is True
    run = _read_run(tmp_path / "f.trec")
    rel = _relevance()
    for q in range(QUERIES):
        first = [f"q{q}d{i}" for i in range(PER_QUERY)]
        assert run[f"q{q}"] == _oracle(first[:25], rel, 10, 4, breaking=False)[0] + first[25:]
    meta = json.loads((tmp_path / "f.trec.meta.json").read_text())
    rec = meta["records"][0]
    assert rec["response"].startswith("[") and rec["first_token_logprobs"][1] == ["The", -0.5]
    assert meta["rank_llm"]["first_token"] is True and meta["repaired"] == 0


def test_first_token_reranking_with_a_local_causal_lm_orders_by_its_logits(tmp_path):
    """FIRST with a local causal LM (a tiny random GPT-2 with a character tokenizer): the window's passages
    ordered by the log-softmax of the token after the chat-templated prompt and "[", computed here by hand."""
    import torch
    from ftfy import fix_text
    from tiny_models import save_tiny_causal_lm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import toolkit as ts

    model = save_tiny_causal_lm(tmp_path / "lm", seed=3)
    cands = _candidates(tmp_path / "c.json", queries=2, per_query=6)
    run = ts.rerank(
        candidates=cands, model=str(model), backend="listwise", depth=6, window=6, stride=6, first_token=True,
        answer_cache=False, device="cpu",
    )  # fmt: skip
    tok = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model).eval()
    records = run.meta["records"]
    assert len(records) == 2 and run.meta["reranker"]["token_count"] == f"tokenizer:{model}"
    for rec in records:
        q = int(rec["query_id"][1:])
        docs = [f"q{q}d{i}" for i in range(6)]
        passages = [f"A passage ({i % 3 + 1}) about doc=q{q}d{i} and more words." for i in range(6)]
        user = (
            f"I will provide you with 6 passages, each indicated by a numerical identifier []. Rank the passages "
            f"based on their relevance to the search query: what is topic {q}.\n"
            + "".join(f"[{i + 1}] {p}\n" for i, p in enumerate(passages))
            + f"Search Query: what is topic {q}.\nRank the 6 passages above based on their relevance to the search "
            "query. All the passages should be included and listed using identifiers, in descending order of "
            "relevance. The output format should be [] > [], e.g., [2] > [1], Answer concisely and directly and "
            "only respond with the ranking results, do not say any word or explain."
        )
        system = (
            "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query"
        )
        text = fix_text(f"<system>{system}\n<user>{user}\n<assistant>") + "["
        with torch.no_grad():
            logits = lm(**tok(text, return_tensors="pt")).logits[0, -1]
        lp = torch.log_softmax(logits.float(), -1)
        by_hand = sorted(range(1, 7), key=lambda i: -float(lp[tok.convert_tokens_to_ids(str(i))]))
        assert rec["permutation"] == by_hand, rec["response"]
        assert _orders_of(run)[rec["query_id"]] == [docs[i - 1] for i in by_hand]


def _orders_of(run) -> dict[str, list[str]]:
    return {q: g.sort_values("score", ascending=False)["doc_id"].tolist() for q, g in run.frame.groupby("query_id")}


def test_a_local_causal_lm_writes_rank_llm_s_output_estimate_of_new_tokens(tmp_path):
    """A local causal LM answers in exactly rank_llm's output estimate of new tokens (its in-process vLLM path:
    the tokens of "[1] > [2] > ... > [k]" in the model's tokenizer); the prompt's count is of the chat-templated
    text."""
    from tiny_models import save_tiny_causal_lm
    from transformers import AutoTokenizer

    import toolkit as ts

    model = save_tiny_causal_lm(tmp_path / "lm", seed=5)
    cands = _candidates(tmp_path / "c.json", queries=1, per_query=7)
    run = ts.rerank(
        candidates=cands, model=str(model), backend="listwise", depth=7, window=4, stride=3, answer_cache=False,
        device="cpu",
    )  # fmt: skip
    tok = AutoTokenizer.from_pretrained(model)
    for rec in run.meta["records"]:
        k = rec["ranks"][1] - rec["ranks"][0] + 1
        out = " > ".join(f"[{i}]" for i in range(1, k + 1))
        assert rec["max_tokens"] == len(tok.encode(out, add_special_tokens=False)) == 6 * k - 3
    assert [r["ranks"] for r in run.meta["records"]] == [[4, 7], [1, 4]]


def test_alphabetic_identifiers_and_their_answers(cli, tmp_path):
    """--alpha: rank_llm's alphabetic RankZephyr template, passages [A], [B], ...; answers in letters repaired
    as rank_llm repairs them; the run as the oracle orders it."""
    server = ListwiseServer(_relevance(), digits="letters")
    try:
        cands = _candidates(tmp_path / "c.json")
        res = _rerank(cli, cands, server, tmp_path / "a.trec", "--no-answer-cache", "--alpha")
        assert res.exit_code == 0, res.output
        user = server.bodies[0][1]["messages"][-1]["content"]
    finally:
        server.close()
    assert "each indicated by an alphabetical identifier []" in user and "\n[A] A passage" in user
    assert "e.g., [B] > [A]," in user
    run = _read_run(tmp_path / "a.trec")
    for q in range(QUERIES):
        first = [f"q{q}d{i}" for i in range(PER_QUERY)]
        assert run[f"q{q}"] == _oracle(first[:25], _relevance(), 10, 4, breaking=False)[0] + first[25:]


def test_system_message_variable_passages_and_passes(cli, tmp_path):
    """--system-message replaces the template's; --fixed-passages writes rank_llm's fixed-window example
    ordering ([4] > [2]); --passes 2 slides the windows twice, the second pass over the first one's order."""
    server = ListwiseServer(_relevance())
    try:
        cands = _candidates(tmp_path / "c.json", queries=1)
        res = _rerank(
            cli, cands, server, tmp_path / "s.trec", "--no-answer-cache", "--system-message", "Rank well.",
            "--fixed-passages", "--passes", "2",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        bodies = [b for _, b in server.bodies]
    finally:
        server.close()
    assert len(bodies) == 2 * 5
    assert all(b["messages"][0] == {"role": "system", "content": "Rank well."} for b in bodies)
    assert all("e.g., [4] > [2], Answer" in b["messages"][-1]["content"] for b in bodies)
    first = [f"q0d{i}" for i in range(PER_QUERY)]
    once = _oracle(first[:25], _relevance(), 10, 4, breaking=False)[0]
    assert _read_run(tmp_path / "s.trec")["q0"] == _oracle(once, _relevance(), 10, 4, breaking=False)[0] + first[25:]
    meta = json.loads((tmp_path / "s.trec.meta.json").read_text())
    assert meta["passes"] == 2 and [r["pass"] for r in meta["records"]] == [1] * 5 + [2] * 5


def test_a_template_without_rank_llm_s_example_ordering_refuses_variable_passages(tmp_path):
    from toolkit.errors import ConfigError
    from toolkit.reranking.listwise_options import ListwiseOptions

    prompt = tmp_path / "p.md"
    prompt.write_text("---\nname: t\n---\n{query}\n{passages}\n")
    with pytest.raises(ConfigError, match=r"variable_passages: the template .* holds none of rank_llm's example"):
        ListwiseOptions(prompt=str(prompt), variable_passages=True).template()


def test_the_tokenizer_option_counts_and_sends_max_tokens_as_rank_llm_s_vllm_path(cli, tmp_path):
    """--tokenizer: rank_llm's vLLM path (RankListwiseOSLLM against a base URL): max_tokens the tokens of
    "[1] > ... > [k]", prompt tokens those of "role: content\\n" joined, no thinking asked."""
    from tiny_models import save_tiny_causal_lm
    from transformers import AutoTokenizer

    folder = save_tiny_causal_lm(tmp_path / "lm", seed=1)
    server = ListwiseServer(_relevance())
    try:
        cands = _candidates(tmp_path / "c.json", queries=1)
        res = _rerank(cli, cands, server, tmp_path / "t.trec", "--no-answer-cache", "--tokenizer", folder)
        assert res.exit_code == 0, res.output
        bodies = [b for _, b in server.bodies]
    finally:
        server.close()
    tok = AutoTokenizer.from_pretrained(folder)
    meta = json.loads((tmp_path / "t.trec.meta.json").read_text())
    for body, rec in zip(bodies, meta["records"]):
        k = rec["ranks"][1] - rec["ranks"][0] + 1
        assert body["max_tokens"] == len(tok.encode(" > ".join(f"[{i}]" for i in range(1, k + 1)))) == rec["max_tokens"]
        assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["temperature"] == 0
        joined = "".join(f"{m['role']}: {m['content']}\n" for m in body["messages"])
        assert rec["prompt_tokens"] == len(tok.encode(joined))


def test_the_same_model_name_at_another_endpoint_is_asked_again(cli, tmp_path):
    """The answer cache keys the endpoint and the request body: another server serving the same model name is
    asked every window again; the first server, asked again with the same command, is sent nothing; another
    system message (other messages) asks again."""
    cache = tmp_path / "cache"
    cands = _candidates(tmp_path / "c.json", queries=2)
    one, two = ListwiseServer(_relevance()), ListwiseServer(_relevance(), order="input")
    try:
        assert _rerank(cli, cands, one, tmp_path / "a.trec", "--answer-cache", cache).exit_code == 0
        assert _rerank(cli, cands, two, tmp_path / "b.trec", "--answer-cache", cache).exit_code == 0
        assert one.requests == two.requests == 10
        assert _read_run(tmp_path / "b.trec")["q0"] == [f"q0d{i}" for i in range(PER_QUERY)]  # two's own answers
        assert _rerank(cli, cands, one, tmp_path / "c.trec", "--answer-cache", cache).exit_code == 0
        assert one.requests == 10
        res = _rerank(cli, cands, one, tmp_path / "d.trec", "--answer-cache", cache, "--system-message", "Hi.")
        assert res.exit_code == 0 and one.requests == 20
    finally:
        one.close()
        two.close()


def test_http_request_lines_only_with_verbose(tmp_path):
    """stderr holds one progress bar and the summary; httpx's per-request INFO lines only with -v."""
    import os
    import subprocess
    import sys

    import toolkit

    server = ListwiseServer(_relevance())
    cands = _candidates(tmp_path / "c.json", queries=2)
    env = dict(os.environ, PYTHONPATH=str(Path(toolkit.__file__).resolve().parents[1]))
    try:
        outs = {}
        for flags in ((), ("-v",)):
            res = subprocess.run(
                [sys.executable, "-m", "toolkit.cli", *flags, "rerank", "--candidates", cands, "--backend",
                 "listwise", "--endpoint", server.url, "--model", "m", "--depth", "25", "--window", "10",
                 "--stride", "4", "--no-answer-cache", "--out", str(tmp_path / f"r{len(flags)}.trec")],
                capture_output=True, text=True, env=env, timeout=300,
            )  # fmt: skip
            assert res.returncode == 0, res.stderr
            outs[flags] = res.stderr
    finally:
        server.close()
    assert "HTTP Request" not in outs[()] and "reranked 2 queries" in outs[()]
    assert outs[("-v",)].count("HTTP Request: POST") == 10


def test_rank_llm_s_request_format_is_read_with_its_doc_fields(tmp_path):
    """rank_llm 0.26's {query: {text, qid}, candidates: [{docid, score, doc}]}, a JSON list or JSONL: the text of
    each doc as rank_llm takes it (its first text field; "Title: ... Content: ..." with a title)."""
    from toolkit.data.texts import read_candidates

    entry = {
        "query": {"text": "q text", "qid": 7},
        "candidates": [
            {"docid": "a", "score": 2.5, "doc": {"segment": "seg", "contents": "not this"}},
            {"docid": 3, "score": 1, "doc": {"title": "T", "text": "body"}},
            {"docid": "c", "score": 0.5, "doc": {"title": "", "passage": "p"}},
        ],
    }
    (tmp_path / "r.json").write_text(json.dumps([entry]))
    (tmp_path / "r.jsonl").write_text("\n" + json.dumps(entry) + "\n\n")
    for name in ("r.json", "r.jsonl"):
        c = read_candidates(tmp_path / name)
        assert c.texts == {"a": "seg", "3": "Title: T Content: body", "c": "p"}
        assert c.topics.as_dict() == {"7": "q text"}
        assert c.run.frame[["query_id", "doc_id", "score"]].values.tolist() == [
            ["7", "a", 2.5],
            ["7", "3", 1.0],
            ["7", "c", 0.5],
        ]
    (tmp_path / "bad.json").write_text(
        json.dumps([{"query": {"text": "x", "qid": 1}, "candidates": [{"docid": "a", "score": 1, "doc": {"x": 1}}]}])
    )
    with pytest.raises(Exception, match="doc holds none of text, segment, contents, content, body, passage"):
        read_candidates(tmp_path / "bad.json")


def test_listwise_options_are_checked_once_in_the_caller_s_words(cli, tmp_path, server):
    """ListwiseOptions refuses a value that cannot be, naming the option as the caller wrote it: ``passes=`` in
    the library, ``--passes`` in the CLI; ``ts.rerank`` takes exactly its keywords."""
    import inspect

    import toolkit as ts
    from toolkit.errors import ConfigError
    from toolkit.reranking.listwise_options import ListwiseOptions

    assert set(ListwiseOptions.keywords()) <= set(inspect.signature(ts.rerank).parameters)
    cands = _candidates(tmp_path / "c.json", queries=1)
    for bad, said in [
        ({"passes": 0}, "passes must be a whole number >= 1, not 0"),
        ({"context_size": -5}, "context_size must be a whole number >= 1, not -5"),
        ({"few_shot_examples": 2}, "few_shot_examples needs few_shot FILE"),
        ({"api": "responses", "first_token": True}, "first_token reads the first token's logprobs"),
    ]:
        with pytest.raises(ConfigError) as caught:
            ts.rerank(candidates=cands, model="m", backend="listwise", endpoint=server.url, **bad)
        assert said in str(caught.value)
    res = _rerank(cli, cands, server, tmp_path / "x.trec", "--passes", "0")
    assert res.exit_code == 1 and "Error: --passes must be a whole number >= 1, not 0" in res.stderr
    res = cli("rerank", "--candidates", cands, "--model", "m", "--passes", "2", "--out", tmp_path / "y.trec")
    assert res.exit_code == 2 and "are for --backend listwise" in res.output
    assert server.requests == 0


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ('method: "pairwise"\nbody: "x"\n', "method: 'pairwise'"),
        ('method: "singleturn_listwise"\nbody: "[{rank}] {candidate}"\n', "missing required template keys"),
        (
            'method: "singleturn_listwise"\nbody: "[{rank}]"\nprefix: "{query}"\noutput_validation_regex: x\n'
            "output_extraction_regex: y\n",
            "missing placeholders in body section: ['candidate']",
        ),
        (
            'method: "singleturn_listwise"\nbody: "[{rank}] {candidate} {rank.__class__}"\nprefix: "{query}"\n'
            "output_validation_regex: x\noutput_extraction_regex: y\n",
            "unsupported placeholders in body section",
        ),
        (
            'method: "singleturn_listwise"\nbody: "[{rank}] {candidate:>99999999}"\nprefix: "{query}"\n'
            "output_validation_regex: x\noutput_extraction_regex: y\n",
            "has a format spec or conversion",
        ),
        (
            'method: "singleturn_listwise"\nbody: "[{rank}] {candidate}"\nprefix: "no query"\n'
            "output_validation_regex: x\noutput_extraction_regex: y\n",
            "query placeholder must be present",
        ),
    ],
)
def test_a_rank_llm_template_is_validated_as_rank_llm_validates_it(tmp_path, yaml_text, message):
    from toolkit.errors import InputFormatError

    path = tmp_path / "t.yaml"
    path.write_text(yaml_text)
    with pytest.raises(InputFormatError, match=re.escape(message)):
        load_listwise_template(path)
