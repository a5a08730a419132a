"""``twostage judge`` / ``ts.judge`` against a local OpenAI-compatible server (no network, no GPU): labels and
records, the cache and resuming, retries and counted failures, calibration recovering a known confusion matrix,
and bad input."""

from __future__ import annotations

import json
import socket
import time
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from judge_server import write_candidates, write_qrels
from needs import required

import toolkit as ts
from toolkit.cli import main
from toolkit.data.trec_io import read_qrels
from toolkit.errors import ConfigError, InputFormatError, RequestsFailedError

#: the known confusion matrix of the calibration test: rows human label 0..3, columns the judge's label
MATRIX = np.array([[20, 4, 1, 0], [3, 12, 4, 1], [1, 3, 10, 2], [0, 1, 2, 8]])


def _collection(tmp_path, server, n_queries=3, n_docs=6, extra=None):
    """Candidates with n_docs passages per query, judge labels (doc index mod 4) set on the server."""
    queries = {}
    for q in range(1, n_queries + 1):
        docs = []
        for i in range(n_docs):
            d = f"D{q}x{i}"
            server.labels[d] = (q + i) % 4
            docs.append((d, f"[doc {d}] passage {i} for topic {q}. " + (extra or {}).get(d, "")))
        queries[f"q{q}"] = docs
    return write_candidates(tmp_path / "cand.json", queries)


def test_judge_writes_qrels_and_records(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server)
    out = tmp_path / "judge.qrels"
    res = CliRunner().invoke(
        main,
        [
            "judge",
            "--candidates",
            cand,
            "--depth",
            "4",
            "--endpoint",
            judge_server.url,
            "--model",
            "test-judge",
            "--cache",
            str(tmp_path / "cache"),
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    q = read_qrels(out)
    got = {(r.query_id, r.doc_id): r.relevance for r in q.frame.itertuples()}
    expected = {(f"q{qq}", f"D{qq}x{i}"): (qq + i) % 4 for qq in range(1, 4) for i in range(4)}
    assert got == expected  # the top 4 of each query, labels as the server gave them
    meta = json.loads((tmp_path / "judge.qrels.meta.json").read_text())
    assert meta["counts"] == {
        "pairs": 12,
        "asked": 12,
        "from_cache": 0,
        "answered": 12,
        "http_retries": 0,
        "http_failures": 0,
        "parse_failures": 0,
        "labels": 12,
        "unparsed_asked_again": 0,
        "injection_suspected": 0,
    }
    rec = meta["records"][0]
    assert rec["backend"] == "openai" and rec["model"] == "test-judge"
    assert rec["prompt_sha256"] == meta["prompt"]["sha256"] and len(rec["prompt_sha256"]) == 64
    assert rec["response"].endswith(f"##final score: {rec['label']}")
    assert rec["parse_failed"] is False
    assert meta["judge"]["endpoint"] == judge_server.url
    import hashlib

    assert meta["qrels"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert "twostage: judged 12 pairs" in res.stderr


def test_rerun_asks_nothing_and_other_runs_share_the_cache(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server)
    common = {"model": "test-judge", "endpoint": judge_server.url, "cache": tmp_path / "cache"}
    first = ts.judge(candidates=cand, depth=3, **common)
    assert judge_server.total == 9
    again = ts.judge(candidates=cand, depth=3, **common)
    assert judge_server.total == 9  # nothing asked again
    assert again.counts["from_cache"] == 9 and again.counts["asked"] == 0
    assert again.qrels.equals(first.qrels)
    assert all(r["from_cache"] for r in again.records)
    deeper = ts.judge(candidates=cand, depth=5, **common)  # shares the top 3 of each query
    assert deeper.counts["from_cache"] == 9 and deeper.counts["asked"] == 6
    assert judge_server.total == 15


def test_the_same_model_name_at_another_endpoint_is_judged_again(tmp_path, judge_server):
    """The cache keys what decides an answer (the endpoint's URL and the body sent): a second server serving the
    same model name is asked every pair and its labels are the ones written; the first, asked again, nothing."""
    from judge_server import JudgeServer

    cand = _collection(tmp_path, judge_server)
    other = JudgeServer()
    try:
        other.labels = {d: (label + 1) % 4 for d, label in judge_server.labels.items()}
        common = {"model": "test-judge", "depth": 3, "cache": tmp_path / "cache"}
        ts.judge(candidates=cand, endpoint=judge_server.url, **common)
        second = ts.judge(candidates=cand, endpoint=other.url, **common)
        assert judge_server.total == other.total == 9 and second.counts["from_cache"] == 0
        labels = {(q, d): r for q, d, r in second.qrels[["query_id", "doc_id", "relevance"]].itertuples(False)}
        assert all(label == other.labels[d] for (_, d), label in labels.items())
        again = ts.judge(candidates=cand, endpoint=judge_server.url, **common)
        assert judge_server.total == 9 and again.counts["from_cache"] == 9
    finally:
        other.close()


def test_interrupted_job_resumes(tmp_path, judge_server):
    from toolkit.data.texts import read_candidates
    from toolkit.judging.judge_job import items_with_texts, judge_items, select_pairs
    from toolkit.judging.prompt import load_template
    from toolkit.llm.answer_cache import JudgmentCache
    from toolkit.llm.chat import OpenAIChatJudge

    c = read_candidates(_collection(tmp_path, judge_server))
    items = items_with_texts(select_pairs(c.run, 6), c.topics.as_dict(), c.text_source().lookup)
    template = load_template()
    judge = OpenAIChatJudge(judge_server.url, "test-judge", concurrency=1)
    seen = []

    def killed_after_five(n):
        seen.append(n)
        if sum(seen) >= 5:
            raise KeyboardInterrupt

    cache = JudgmentCache(tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        judge_items(items, template, judge, cache, killed_after_five)
    cache.close()
    cache = JudgmentCache(tmp_path / "cache")
    assert len(cache) == 5  # every answer before the interruption was committed
    resumed = judge_items(items, template, judge, cache)
    assert resumed.counts.from_cache == 5 and resumed.counts.asked == len(items) - 5
    assert resumed.counts.labels == len(items) == 18


def test_a_cache_over_the_file_size_limit_ends_the_job_in_one_error_and_keeps_its_answers(tmp_path, judge_server):
    """``ulimit -f`` reached while the cache is written: SQLite says "disk I/O error" (EFBIG, which it does not
    name). The job ends with one ``CacheUnusableError`` naming the folder as given and the fix, the previous qrels
    stay, and the answers an earlier job committed are served to the rerun, which asks only the others."""
    import resource

    from toolkit.errors import CacheUnusableError

    cand = _collection(tmp_path, judge_server)
    common = {"candidates": cand, "model": "test-judge", "endpoint": judge_server.url, "cache": tmp_path / "cache"}
    ts.judge(**common, depth=3)  # 9 answers committed
    out = tmp_path / "judged.qrels"
    out.write_text("q1 0 D1x0 3\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, hard))  # Python ignores SIGXFSZ: a write gets EFBIG
    try:
        with pytest.raises(CacheUnusableError) as raised:
            ts.judge(**common, depth=6, out=out)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(raised.value) == (
        f"the judgments cache {tmp_path / 'cache'} (from cache=FOLDER) cannot be used: SQLite says 'disk I/O error'; "
        "run without it (cache=False), or choose a folder you can write: cache=FOLDER"
    )
    assert raised.value.for_cli().endswith("run without it (--no-cache), or choose a folder you can write: --cache DIR")
    assert out.read_text() == "q1 0 D1x0 3\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "cand.json", "judged.qrels"]
    again = ts.judge(**common, depth=6, out=out)
    assert again.counts["from_cache"] >= 9 and again.counts["from_cache"] + again.counts["asked"] == 18


def test_retries_and_counted_failures(tmp_path, judge_server):
    extra = {"D1x0": "FAIL500:2", "D1x1": "FAIL500:99", "D1x2": "MALFORMED", "D1x3": "OUTSIDE"}
    cand = _collection(tmp_path, judge_server, n_queries=1, extra=extra)
    out = tmp_path / "j.qrels"
    j = ts.judge(
        candidates=cand,
        depth=6,
        model="test-judge",
        endpoint=judge_server.url,
        retries=3,
        backoff=0.0,
        cache=tmp_path / "cache",
        out=out,
        max_failures=1,
    )
    by_doc = {r["doc_id"]: r for r in j.records}
    assert by_doc["D1x0"]["label"] == 1 and by_doc["D1x0"]["attempts"] == 3  # two 500s, then an answer
    assert by_doc["D1x1"]["label"] is None and by_doc["D1x1"]["http_error"] == "HTTP 500"
    assert by_doc["D1x1"]["attempts"] == 4 and by_doc["D1x1"]["response"] is None
    assert by_doc["D1x2"]["parse_failed"] and by_doc["D1x2"]["label"] is None
    assert by_doc["D1x2"]["response"] == "I think it is quite relevant."
    assert by_doc["D1x3"]["parse_failed"] and "outside the declared scale" in by_doc["D1x3"]["parse_error"]
    assert j.counts["http_retries"] == 2 + 3
    assert j.counts["http_failures"] == 1
    assert j.counts["parse_failures"] == 2
    assert j.counts["labels"] == 3
    # failures are absent from the qrels, never written as 0
    docs = set(read_qrels(out).frame["doc_id"])
    assert docs == {"D1x0", "D1x4", "D1x5"}
    # the failed request is not cached: a rerun asks it (and only it) again
    before = judge_server.total
    with pytest.raises(RequestsFailedError) as err:  # its one request fails again: every request failed
        ts.judge(
            candidates=cand,
            depth=6,
            model="test-judge",
            endpoint=judge_server.url,
            retries=0,
            cache=tmp_path / "cache",
            max_failures=1,
        )
    again = err.value.result
    assert again.counts["asked"] == 1 and judge_server.total == before + 1
    assert again.counts["parse_failures"] == 2 and again.counts["unparsed_asked_again"] == 0
    # unparsable cached answers are kept (counted failures) unless asked again with retry_unparsed
    before = judge_server.total
    third = ts.judge(
        candidates=cand,
        depth=6,
        model="test-judge",
        endpoint=judge_server.url,
        retries=0,
        cache=tmp_path / "cache",
        retry_unparsed=True,
        max_failures=1,
    )
    assert third.counts["unparsed_asked_again"] == 2 and third.counts["asked"] == 3
    assert judge_server.total == before + 3 and third.counts["from_cache"] == 3
    assert {r["doc_id"] for r in third.records if r["parse_failed"] and not r["from_cache"]} == {"D1x2", "D1x3"}


def test_timeout_is_a_counted_failure(tmp_path, judge_server):
    judge_server.slow = 1.5
    cand = _collection(tmp_path, judge_server, n_queries=1, n_docs=2, extra={"D1x0": "SLOW"})
    j = ts.judge(
        candidates=cand,
        depth=2,
        model="test-judge",
        endpoint=judge_server.url,
        timeout=0.3,
        retries=1,
        backoff=0.0,
        cache=False,
        max_failures=1,
    )
    rec = {r["doc_id"]: r for r in j.records}
    assert rec["D1x0"]["label"] is None and rec["D1x0"]["http_error"].startswith("timed out")
    assert rec["D1x1"]["label"] == 2
    assert j.counts["http_failures"] == 1 and j.counts["http_retries"] == 1


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_endpoint_fails_with_one_line_and_writes_nothing(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server, n_queries=1)
    out = tmp_path / "j.qrels"
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    res = CliRunner().invoke(
        main, ["judge", "--candidates", cand, "--endpoint", url, "--model", "m", "--out", str(out), "--no-cache"]
    )
    assert res.exit_code == 1
    assert res.stderr.startswith("Error: judge endpoint") and "unreachable" in res.stderr
    assert res.stderr.count("\n") == 1
    assert not out.exists() and not (tmp_path / "j.qrels.meta.json").exists()


def test_missing_passage_text_is_an_error(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server, n_queries=1, n_docs=3)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "D1x0", "contents": "[doc D1x0] text"}\n')
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 D1x0 1 3.0 r\nq1 Q0 D1x1 2 2.0 r\n")
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\twhat is topic 1\n")
    with pytest.raises(ConfigError, match=r"no passage text for 1 document\(s\) to judge \(D1x1\)"):
        ts.judge(run, topics=str(topics), corpus=str(corpus), model="m", endpoint=judge_server.url, cache=False)
    assert judge_server.total == 0
    assert cand


def test_template_without_placeholders_is_an_error(tmp_path, judge_server):
    bad = tmp_path / "bad.md"
    bad.write_text("---\nlabels: [0, 1]\nanswer: 'score: (\\d)'\n---\nJudge this: {query}\n")
    cand = _collection(tmp_path, judge_server, n_queries=1)
    with pytest.raises(InputFormatError, match=r"no \{passage\} placeholder"):
        ts.judge(candidates=cand, model="m", endpoint=judge_server.url, prompt=bad, cache=False)
    no_front = tmp_path / "plain.txt"
    no_front.write_text("Query {query} passage {passage}\n")
    res = CliRunner().invoke(
        main,
        [
            "judge",
            "--candidates",
            cand,
            "--endpoint",
            judge_server.url,
            "--model",
            "m",
            "--prompt",
            str(no_front),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1 and "front matter" in res.stderr
    assert judge_server.total == 0


def test_custom_template_scale_and_parser(tmp_path, judge_server):
    # a binary scale: the server's labels 2 and 3 are outside it -> parse failures, not labels
    t = tmp_path / "binary.md"
    t.write_text("---\nname: binary\nlabels: [0, 1]\nanswer: 'final score: (\\d+)'\n---\nQ: {query}\nP: {passage}\n")
    cand = _collection(tmp_path, judge_server, n_queries=1, n_docs=4)
    j = ts.judge(candidates=cand, depth=4, model="m", endpoint=judge_server.url, prompt=t, cache=False)
    labels = {r["doc_id"]: r["label"] for r in j.records}
    assert labels == {"D1x0": 1, "D1x1": None, "D1x2": None, "D1x3": 0}
    assert j.counts["parse_failures"] == 2
    assert j.meta["prompt"]["name"] == "binary" and j.meta["prompt"]["labels"] == [0, 1]


def test_holes_only_judges_unjudged_documents(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server, n_queries=2, n_docs=5)
    qrels = write_qrels(tmp_path / "h.qrels", [("q1", "D1x0", 1), ("q1", "D1x2", 0), ("q2", "D2x1", -1)])
    j = ts.judge(
        candidates=cand, depth=3, holes_only=True, qrels=qrels, model="m", endpoint=judge_server.url, cache=False
    )
    asked = sorted((r["query_id"], r["doc_id"]) for r in j.records)
    # q1's D1x0 and D1x2 are judged; -1 means unjudged (trec_eval), so q2's D2x1 is a hole
    assert asked == [("q1", "D1x1"), ("q2", "D2x0"), ("q2", "D2x1"), ("q2", "D2x2")]
    assert j.meta["selection"] == "holes-only"


def test_calibration_recovers_the_confusion_matrix_and_kappa(tmp_path, judge_server):
    metrics = required("sklearn.metrics", "scikit-learn is the oracle for Cohen's kappa (pip install .[test])")
    rng = np.random.default_rng(0)
    pairs = [(h, jl) for h in range(4) for jl in range(4) for _ in range(MATRIX[h, jl])]
    order = rng.permutation(len(pairs))
    pairs = [pairs[i] for i in order]
    per_query = 10
    queries, human_rows = {}, []
    for k, (h, jl) in enumerate(pairs):
        q, d = f"q{k // per_query}", f"doc{k}"
        judge_server.labels[d] = int(jl)
        queries.setdefault(q, []).append((d, f"[doc {d}] text"))
        human_rows.append((q, d, int(h)))
    cand = write_candidates(tmp_path / "cand.json", queries)
    qrels = write_qrels(tmp_path / "human.qrels", human_rows)
    res = CliRunner().invoke(
        main,
        [
            "judge",
            "--calibrate",
            "--qrels",
            qrels,
            "--candidates",
            cand,
            "--depth",
            "100",
            "--endpoint",
            judge_server.url,
            "--model",
            "test-judge",
            "--no-cache",
            "--format",
            "json",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["documents_both"] == MATRIX.sum()
    assert doc["confusion"] == MATRIX.tolist()
    h = [p[0] for p in pairs]
    jl = [p[1] for p in pairs]
    assert doc["kappa"] == pytest.approx(metrics.cohen_kappa_score(h, jl))
    assert doc["kappa_linear"] == pytest.approx(metrics.cohen_kappa_score(h, jl, weights="linear"))
    assert doc["mean_abs_difference"] == pytest.approx(np.mean(np.abs(np.subtract(h, jl))))
    assert doc["a"] == "human" and doc["b"] == "judge"
    assert doc["judge"]["counts"]["labels"] == MATRIX.sum()


def test_calibration_ranks_systems_under_both_labels(tmp_path, judge_server):
    # the judge agrees with the humans on every document: the rankings are identical, nothing flips
    queries, human_rows = {}, []
    rng = np.random.default_rng(1)
    for q in range(12):
        for i in range(8):
            d = f"q{q}d{i}"
            lab = int(rng.integers(0, 4))
            judge_server.labels[d] = lab
            human_rows.append((f"q{q}", d, lab))
            queries.setdefault(f"q{q}", []).append((d, f"[doc {d}] text"))
    cand = write_candidates(tmp_path / "cand.json", queries)
    qrels = write_qrels(tmp_path / "human.qrels", human_rows)
    runs = []
    for r in range(3):
        lines = [
            f"q{q} Q0 q{q}d{i} 0 {rng.random() + 0.3 * r * (human_rows[q * 8 + i][2]):.6f} sys{r}\n"
            for q in range(12)
            for i in range(8)
        ]
        p = tmp_path / f"sys{r}.trec"
        p.write_text("".join(lines))
        runs.append(str(p))
    cal = ts.calibrate_judge(
        candidates=cand,
        qrels=qrels,
        model="test-judge",
        endpoint=judge_server.url,
        depth=100,
        runs=runs,
        cache=False,
        permutations=500,
    )
    d = cal.to_dict()
    assert d["kappa"] == 1.0 and d["kendall_tau"] == 1.0 and d["tau_ap"] == 1.0 and d["flipped_pairs"] == []
    assert d["ranking"]["means_a"] == d["ranking"]["means_b"]


def test_same_model_as_a_reranker_warns(tmp_path, judge_server):
    cand = _collection(tmp_path, judge_server, n_queries=1, n_docs=2)
    run = tmp_path / "rr.trec"
    run.write_text("q1 Q0 D1x0 1 3.0 r\nq1 Q0 D1x1 2 2.0 r\n")
    (tmp_path / "rr.trec.meta.json").write_text(json.dumps({"reranker": {"model": "org/Judge-7B"}}))
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\twhat is topic 1\n")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": f"[doc {d}] x"}) + "\n" for d in ("D1x0", "D1x1")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ts.judge(
            str(run), topics=str(topics), corpus=str(corpus), model="Judge-7B", endpoint=judge_server.url, cache=False
        )
    assert any("judged by its own model" in str(w.message) for w in caught)
    assert cand


def test_usage_errors():
    runner = CliRunner()
    res = runner.invoke(main, ["judge", "--model", "m", "--out", "o"])
    assert res.exit_code == 2 and "give --candidates, --run, or both" in res.stderr
    res = runner.invoke(
        main, ["judge", "--candidates", "c.json", "--model", "m", "--out", "o", "--calibrate-sample", "5"]
    )
    assert res.exit_code == 2 and "add --holes-only" in res.stderr
    res = runner.invoke(main, ["judge", "--candidates", "c.json", "--model", "m", "--out", "o", "--holes-only"])
    assert res.exit_code == 2 and "--qrels" in res.stderr
    res = runner.invoke(main, ["judge", "--candidates", "c.json", "--model", "m"])
    assert res.exit_code == 2 and "--out is required" in res.stderr


def _fake_clock(monkeypatch):
    from types import SimpleNamespace

    from toolkit.guard import client

    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(
        client, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=lambda s: slept.append(round(s, 9)))
    )
    return slept


def test_rate_limit_spaces_request_starts(monkeypatch):
    from toolkit.guard.client import _RateLimit

    slept = _fake_clock(monkeypatch)
    limit = _RateLimit(4.0)  # a start every 0.25 s; the clock stands still, so each waits its turn
    for _ in range(3):
        limit.wait()
    assert slept == [0.25, 0.5]
    _RateLimit(None).wait()
    assert slept == [0.25, 0.5]


def test_backoff_doubles_between_retries(monkeypatch, tmp_path, judge_server):
    slept = _fake_clock(monkeypatch)
    cand = _collection(tmp_path, judge_server, n_queries=1, n_docs=1, extra={"D1x0": "FAIL500:99"})
    with pytest.raises(RequestsFailedError, match=r"every one of the 1 request\(s\) to the judge failed") as err:
        ts.judge(candidates=cand, depth=1, model="m", endpoint=judge_server.url, retries=3, backoff=0.5, cache=False)
    assert slept == [0.5, 1.0, 2.0]
    assert judge_server.requests["D1x0"] == 4 and err.value.result.counts["http_failures"] == 1


def test_ray_shards_the_calls_and_a_killed_job_resumes(tmp_path, judge_server, monkeypatch):
    required("ray", "the pool reads Ray's exception types (the [ray] extra)")
    from fake_ray import FakeRay

    from toolkit.jobs import distributed
    from toolkit.jobs.distributed import LOCAL

    monkeypatch.setattr(distributed, "connect", lambda options: FakeRay(seed=0))
    cand = _collection(tmp_path, judge_server, n_queries=3, n_docs=6)
    plain = ts.judge(candidates=cand, depth=6, model="m", endpoint=judge_server.url, cache=False)
    assert judge_server.total == 18
    out = tmp_path / "r.qrels"
    common = {"candidates": cand, "depth": 6, "model": "m", "endpoint": judge_server.url, "cache": False, "out": out}
    sharded = ts.judge(**common, ray=LOCAL, workers=2, shard_size=5)
    assert judge_server.total == 36  # every pair asked once more, through the shards
    assert sharded.qrels.equals(plain.qrels)
    manifest = json.loads((tmp_path / "r.qrels.shards" / "manifest.json").read_text())
    assert len(manifest["shards"]) == 4  # 18 pairs in shards of 5
    assert sum(r["model_calls"] for r in manifest["shards"].values()) == 18
    assert sharded.meta["sharding"]["ray"] == LOCAL
    # a job killed after three shards: the fourth is missing from the manifest; running again asks only its pairs
    del manifest["shards"]["3"]
    (tmp_path / "r.qrels.shards" / "manifest.json").write_text(json.dumps(manifest))
    resumed = ts.judge(**common, ray=LOCAL, workers=2, shard_size=5)
    assert judge_server.total == 36 + 3
    assert resumed.qrels.equals(plain.qrels)


def test_calibrated_judge_is_named_on_the_diagnosis_page(tmp_path, judge_server):
    # humans judged the even documents; the judge agrees on 3 of 4 of them and fills the odd ones
    queries, human_rows = {}, []
    for q in range(4):
        for i in range(8):
            d = f"q{q}d{i}"
            judge_server.labels[d] = (q + i) % 4
            if i % 2 == 0:
                human_rows.append((f"q{q}", d, (q + i) % 4 if i != 6 else (q + i + 1) % 4))
            queries.setdefault(f"q{q}", []).append((d, f"[doc {d}] text"))
    cand = write_candidates(tmp_path / "cand.json", queries)
    human = write_qrels(tmp_path / "human.qrels", human_rows)
    cal_out = tmp_path / "cal.qrels"
    cal = ts.calibrate_judge(
        candidates=cand, qrels=human, model="test-judge", endpoint=judge_server.url, depth=8, cache=False, out=cal_out
    )
    meta = json.loads((tmp_path / "cal.qrels.meta.json").read_text())
    assert meta["calibration"]["kappa"] == pytest.approx(cal.agreement.kappa)
    assert meta["calibration"]["documents_both"] == 16
    holes = tmp_path / "holes.qrels"
    ts.judge(
        candidates=cand,
        qrels=human,
        holes_only=True,
        model="test-judge",
        endpoint=judge_server.url,
        depth=8,
        cache=False,
        out=holes,
    )
    (tmp_path / "holes.qrels.meta.json").write_text(
        json.dumps(json.loads((tmp_path / "holes.qrels.meta.json").read_text()) | {"calibration": meta["calibration"]})
    )
    merged = ts.merge_qrels(human, str(holes), "fill")
    assert (merged.origin.counts["human_labels_used"], merged.origin.counts["judge_labels_used"]) == (16, 16)
    assert merged.origin.sources["judge"]["calibration"]["kappa"] == pytest.approx(cal.agreement.kappa)
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{q} Q0 q{q}d{i} 0 {8 - i} r\n" for q in range(4) for i in range(8)))
    rr = tmp_path / "rr.trec"
    rr.write_text("".join(f"q{q} Q0 q{q}d{i} 0 {i} rr\n" for q in range(4) for i in range(8)))
    out = tmp_path / "diag"
    res = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--qrels",
            human,
            "--judge-qrels",
            str(holes),
            "--first-stage",
            str(run),
            "--reranked",
            str(rr),
            "--out",
            str(out),
            "--permutations",
            "50",
        ],
    )
    assert res.exit_code == 0, res.output
    page = (out / "report.md").read_text()
    assert (
        "policy fill: 16 human labels, 16 judge labels (test-judge); judge calibrated on 16 human-judged documents"
        in page
    )
    assert f"kappa {cal.agreement.kappa:.3f}" in page


def test_a_job_stopped_by_an_error_sends_no_more_requests(tmp_path, judge_server, monkeypatch):
    """An error while the answers are read (here the cache refusing the first answer) ends the job at once: the
    requests still to send are never sent, whatever holds on to the error afterwards (pytest.raises keeps its
    traceback, and with it the reading frames), only those already under way finish."""
    from toolkit.llm.answer_cache import JudgmentCache

    judge_server.slow = 0.2
    cand = _collection(
        tmp_path, judge_server, n_queries=3, n_docs=6, extra={f"D{q}x{i}": "SLOW" for q in (1, 2, 3) for i in range(6)}
    )

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JudgmentCache, "put", refuse)
    with pytest.raises(Exception) as raised:
        ts.judge(
            candidates=cand, depth=6, model="m", endpoint=judge_server.url, concurrency=2, cache=tmp_path / "cache"
        )
    assert "No space left on device" in str(raised.value) or isinstance(raised.value, OSError), raised.value
    time.sleep(1.5)  # seven request times: a request still handed out would have arrived
    assert judge_server.total <= 3, judge_server.total  # the two under way and at most one more, never the 18
