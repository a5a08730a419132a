"""The numbers door (``toolkit.guard.numbers``): numbers from outside, each class through the command that meets it:
an HTTP header (``Retry-After: ²``), an LLM's answer (a 5,000-digit identifier, a judge's label in another script),
a label in a DataFrame (``inf``), run scores (``±inf`` under ``fuse --normalize minmax``), JSON and YAML integers
too long to read, an environment bound, a measure's cutoff, a port. Each is read as the door says or refused with
one ``Error:`` line (or a typed exception), never a traceback; expected values are written by hand.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from doors import Bounded, Case, assert_one_error, cli
from hostile_server import HostileServer
from judge_server import write_candidates
from listwise_server import ListwiseServer

from toolkit.errors import InputFormatError, TwostageWarning

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"
RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq2 Q0 d3 1 1.0 r\n"
HUGE = "9" * 5000


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _stderr(res) -> str:
    return res.stderr if res.stderr_bytes is not None else ""


@contextlib.contextmanager
def _client_sleeps() -> Iterator[list[float]]:
    """The seconds ``toolkit.guard.client`` asks to sleep, in order; that call returns at once. A sleep anywhere else
    (another test's server thread, a library's own thread: ``time.sleep`` is one function for the process) sleeps
    for real and is not counted, so the count is the client's own whatever ran before."""
    from unittest import mock

    real = time.sleep
    seen: list[float] = []

    def sleep(seconds: float) -> None:
        if sys._getframe(1).f_globals.get("__name__") == "toolkit.guard.client":
            seen.append(seconds)
        else:
            real(seconds)

    with mock.patch("toolkit.guard.client.time.sleep", sleep):
        yield seen


def _no_traceback(res) -> None:
    out = res.output + _stderr(res)
    assert res.exception is None or isinstance(res.exception, SystemExit), f"{res.exception!r}\n{out}"
    assert "Traceback" not in out, out


# ------------------------------------------------------------- HTTP headers
def retry_after_superscript_in_judge(tmp: Path) -> None:
    """``Retry-After: ²`` on the probe's answer and on every first request: the header is not a number the door
    reads, so it is not used (the backoff applies); ``judge`` retries, writes its qrels and records, exit 0."""
    server = HostileServer("retry-after")
    try:
        cands = write_candidates(tmp / "c.json", {"q1": [("d1", "first passage"), ("d2", "second passage")]})
        with Bounded(seconds=20):
            res = cli(
                "judge", "--candidates", cands, "--depth", "2", "--endpoint", server.url, "--model", "m",
                "--out", str(tmp / "j.qrels"), "--no-progress", "--no-cache", "--retries", "2", "--backoff", "0",
            )  # fmt: skip
        _no_traceback(res)
        assert res.exit_code == 0, res.output + _stderr(res)
        assert (tmp / "j.qrels").read_text() == "q1 0 d1 1\nq1 0 d2 1\n"
        meta = json.loads((tmp / "j.qrels.meta.json").read_text())
        assert [(r["label"], r["attempts"]) for r in meta["records"]] == [(1, 2), (1, 2)]
        # the probe's GET was answered 503 (with the header) once, and each POST twice (503, then 200)
        assert [r[0] for r in server.requests].count("GET") == 1 and len(server.posts) == 4
    finally:
        server.close()


def retry_after_in_listwise_probe(tmp: Path) -> None:
    """The listwise reranker's endpoint probe and its windows meet the same header, read by the same door:
    ``²`` (which crashed the probe) and ``٣`` (which ``int()`` read as 3 seconds, so each retry slept 3 s) are no
    number of seconds: no traceback, and every retry waits the backoff alone (0 s here)."""
    for value in ("\u00b2", "\u0663"):
        server = HostileServer("retry-after")
        server.retry_after = value
        server.answer = "[2] > [1]"
        try:
            cands = write_candidates(tmp / "c.json", {"q1": [("d1", "first passage"), ("d2", "second passage")]})
            with _client_sleeps() as sleeps:
                res = cli(
                    "rerank", "--candidates", cands, "--backend", "listwise", "--endpoint", server.url, "--model",
                    "m", "--depth", "2", "--window", "2", "--stride", "1", "--no-progress", "--no-answer-cache",
                    "--retries", "2", "--backoff", "0", "--out", str(tmp / "lw.trec"),
                )  # fmt: skip
            _no_traceback(res)
            assert res.exit_code == 0, res.output + _stderr(res)
            assert [line.split()[2] for line in (tmp / "lw.trec").read_text().splitlines()] == ["d2", "d1"]
            assert sleeps == [0], sleeps  # one retry, waiting the backoff alone
        finally:
            server.close()


# ------------------------------------------------------------- LLM answers
def _listwise_candidates(tmp: Path) -> str:
    docs = [(f"d{i}", f"passage number {i} doc=d{i}") for i in range(1, 7)]
    return write_candidates(tmp / "c.json", {"q1": docs})


def _listwise(tmp: Path, server: ListwiseServer, out: str):
    return cli(
        "rerank", "--candidates", str(tmp / "c.json"), "--backend", "listwise", "--endpoint", server.url,
        "--model", "test-ranker", "--depth", "6", "--window", "4", "--stride", "2", "--no-progress",
        "--answer-cache", str(tmp / "cache"), "--out", str(tmp / out),
    )  # fmt: skip


def _order(path: Path) -> list[str]:
    return [line.split()[2] for line in path.read_text().splitlines()]


def listwise_identifier_of_5000_digits(tmp: Path) -> None:
    """``[999...9 (5,000 digits)] > [1]``: rank_llm 0.26's ``int()`` refuses the number and it keeps each window's
    order, so the run is the first stage's order, every answer counted ``none_parsed``; no traceback. The answers
    parsed, so they are cached: the same command against the same endpoint, honest now, sends nothing and gives
    that run; an honest server at another endpoint is asked (the cache keys the endpoint) and its ranking used."""
    _listwise_candidates(tmp)
    server = ListwiseServer({f"d{i}": float(i) for i in range(1, 7)})  # relevance: d6 best
    server.answer = f"[{HUGE}] > [1]"
    honest = ListwiseServer({f"d{i}": float(i) for i in range(1, 7)})
    try:
        with Bounded(seconds=20):
            res = _listwise(tmp, server, "a.trec")
        _no_traceback(res)
        assert res.exit_code == 0, res.output + _stderr(res)
        assert _order(tmp / "a.trec") == ["d1", "d2", "d3", "d4", "d5", "d6"]
        meta = json.loads((tmp / "a.trec.meta.json").read_text())
        assert meta["windows"] == 2 and meta["repairs"]["none_parsed"] == 2  # windows (2, 6) and (0, 4)
        assert all(r["identifiers"] == [] and r["repairs"] == ["none_parsed"] for r in meta["records"])
        server.answer = None
        res = _listwise(tmp, server, "b.trec")
        _no_traceback(res)
        assert res.exit_code == 0 and server.requests == 2, res.output + _stderr(res)
        assert _order(tmp / "b.trec") == _order(tmp / "a.trec")
        res = _listwise(tmp, honest, "c.trec")
        assert res.exit_code == 0 and honest.requests == 2, res.output + _stderr(res)
        # by hand: window ranks 3-6 [d3 d4 d5 d6] -> d6 d5 d4 d3; then ranks 1-4 [d1 d2 d6 d5] -> d6 d5 d2 d1
        assert _order(tmp / "c.trec") == ["d6", "d5", "d2", "d1", "d4", "d3"]
    finally:
        server.close()
        honest.close()


def listwise_answer_cached_by_an_older_version(tmp: Path) -> None:
    """The issue's case: an older twostage cached ``[999...9] > [1]`` before parsing it (and then crashed on every
    run, even against an honest server). This one reads that cached answer as it reads a fresh one: no crash, the
    window kept in input order, the honest server asked for the rest."""
    from toolkit.llm.answer_cache import JudgmentCache, entry_sha

    _listwise_candidates(tmp)
    honest = ListwiseServer({f"d{i}": float(i) for i in range(1, 7)})
    try:
        res = _listwise(tmp, honest, "a.trec")  # fills the cache with the honest answers (the prompts' keys)
        assert res.exit_code == 0 and honest.requests == 2, res.output + _stderr(res)
        cache = JudgmentCache(tmp / "cache")
        db = cache._db
        assert db is not None
        rows = db.execute("SELECT key, model_sha, prompt_sha, query_sha, passage_sha, request_sha FROM answers")
        rows = rows.fetchall()
        assert len(rows) == 2
        for key, *parts in rows:  # the older version's answers, planted under the same keys with their checksums
            planted = f"[{HUGE}] > [1]"
            db.execute(
                "UPDATE answers SET response = ?, entry_sha = ? WHERE key = ?",
                (planted, entry_sha(key, parts, planted), key),
            )
        db.commit()
        cache.close()
        res = _listwise(tmp, honest, "b.trec")
        _no_traceback(res)
        # by hand: window ranks 3-6 from the cache, kept in input order; its result makes window ranks 1-4 a new
        # prompt [d1 d2 d3 d4], asked of the honest server (one request): d4 d3 d2 d1
        assert res.exit_code == 0 and honest.requests == 3, res.output + _stderr(res)
        assert _order(tmp / "b.trec") == ["d4", "d3", "d2", "d1", "d5", "d6"]
    finally:
        honest.close()


def cached_answer_that_no_longer_parses_is_set_aside(tmp: Path) -> None:
    """An answer in the cache that the caller's parser refuses (the door's ``NumberRefused``) is set aside like a
    damaged entry: written under ``damaged/``, deleted, one warning, and the caller asks again."""
    from toolkit.guard.numbers import natural
    from toolkit.llm.answer_cache import JudgmentCache

    cache = JudgmentCache(tmp / "cache")
    cache.put("m", "p" * 64, "query", "passage", "\u00b2")
    cache.put("m", "p" * 64, "query", "other passage", "7")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get("m", "p" * 64, "query", "passage", parse=natural) is None
    warned = [str(w.message) for w in caught if issubclass(w.category, TwostageWarning)]
    assert len(warned) == 1 and "does not parse" in warned[0] and "'\\xb2'" in warned[0], warned
    assert len(cache) == 1 and cache.get("m", "p" * 64, "query", "other passage", parse=natural) == "7"
    aside = list((tmp / "cache" / "damaged").iterdir())
    assert len(aside) == 1 and json.loads(aside[0].read_text())["response"] == "\u00b2"
    cache.close()


def judge_label_in_another_script(tmp: Path) -> None:
    """A judge's label written ``٣`` (``int()`` reads 3) or with 5,000 digits is no label: counted as a parse
    failure whose reason shows the text escaped and cut, never written as a label. The default template's ``\\d``
    is ASCII (its pattern runs on RE2), so it finds no answer in ``##final score: ٣``; a template whose group takes
    any text hands ``٣`` to the numbers door."""
    anything = tmp / "any.md"
    anything.write_text("---\nlabels: [0, 1, 2, 3]\nanswer: '##final score:\\s*(\\S+)'\n---\n{query} {passage}\n")
    for answer, shown, prompt in (
        ("##final score: \u0663", "no answer pattern in the response", []),
        ("##final score: \u0663", "'\\u0663'", ["--prompt", str(anything)]),
        (f"##final score: {HUGE}", "(5,000 characters)", []),
    ):
        server = HostileServer("ok")
        server.answer = answer
        try:
            cands = write_candidates(tmp / "c.json", {"q1": [("d1", "a passage")]})
            res = cli(
                "judge", "--candidates", cands, "--depth", "1", "--endpoint", server.url, "--model", "m",
                "--out", str(tmp / "j.qrels"), "--no-progress", "--no-cache", "--retries", "0", *prompt,
            )  # fmt: skip
            _no_traceback(res)
            record = json.loads((tmp / "j.qrels.meta.json").read_text())["records"][0]
            assert record["label"] is None and record["parse_failed"], record
            assert shown in record["parse_error"] and len(record["parse_error"]) < 200, record["parse_error"]
            assert (tmp / "j.qrels").read_text() == ""
        finally:
            server.close()


# ------------------------------------------------------------------ labels
def dataframe_label_infinite(tmp: Path) -> None:
    """A DataFrame label ``inf`` (a float, or the text ``"inf"``) is refused naming the row and showing ``inf``;
    before, the message itself crashed on ``int(inf)`` (OverflowError)."""
    import pandas as pd

    from toolkit.data.adapters import as_qrels

    for label, shown in ((math.inf, "inf"), (-math.inf, "-inf"), ("inf", "inf"), (1e300, "1e+300")):
        frame = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": [1, label]})
        with pytest.raises(InputFormatError) as err:
            as_qrels(frame)
        assert str(err.value) == (
            f"<DataFrame>: row 1: relevance label {shown} is out of range: labels must be integers within ±1,000,000"
        )


def qrels_label_in_another_script(tmp: Path) -> None:
    """A qrels label ``٣``: ``int()`` reads 3, trec_eval reads none: one ``Error:`` line with the line, escaped."""
    qrels = _write(tmp / "qrels.txt", QRELS.replace("q2 0 d3 2", "q2 0 d3 \u0663"))
    run = _write(tmp / "run.trec", RUN)
    assert_one_error(cli("eval", str(qrels), str(run)), f"{qrels}:3: relevance '\\u0663' is not an integer")


def msmarco_rank_in_another_script(tmp: Path) -> None:
    """An MS MARCO run's rank (``qid<TAB>pid<TAB>rank``) is read by the door's ``natural``: ``٣`` (``int()`` reads 3),
    ``0x10`` and ``-1`` (pyarrow's integer parser reads 16 and -1), ``+3`` and 5,000 digits are one ``Error:`` line
    each, naming the file and the line, with the text escaped and cut; so is rank 0, and a rank given twice."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    for rank, shown in (
        ("\u0663", "'\\u0663' is not a whole number"),
        ("0x10", "'0x10' is not a whole number"),
        ("-1", "'-1' is not a whole number"),
        ("+3", "'+3' is not a whole number"),
        (HUGE, "'" + "9" * 40 + "...' (5,000 characters) has 5,000 digits, more than the 18 read"),
        ("0", "0 is out of range: ranks start at 1"),
        ("1", "query 'q1' has rank 1 twice (also on line 1)"),
    ):
        run = _write(tmp / "run.tsv", f"q1\td1\t1\nq1\td2\t{rank}\nq2\td3\t1\n")
        for args in (("eval",), ("eval", "--run-format", "msmarco")):
            assert_one_error(cli(*args, str(qrels), str(run)), f"{run}:2: ", shown, code=1)


# ------------------------------------------------------------------ scores
def fuse_minmax_infinite_scores(tmp: Path) -> None:
    """``fuse --normalize minmax`` over a run holding ``inf`` (then ``-inf``): one ``Error:`` line naming the file
    and line, nothing written; before, every other score of the query became 0 (a RuntimeWarning only). ``eval``
    still reads ``inf`` as trec_eval does, and RRF (ranks only) fuses it."""
    other = _write(tmp / "b.trec", RUN)
    for value in ("inf", "-Infinity"):
        bad = _write(tmp / "a.trec", RUN.replace("q1 Q0 d2 2 2.0 r", f"q1 Q0 d2 2 {value} r"))
        out = tmp / "f.trec"
        for normalize in ("minmax", "none"):
            res = cli(
                "fuse", "--method", "interpolation", "--normalize", normalize, str(bad), str(other), "--out", str(out)
            )
            shown = "inf" if value == "inf" else "-inf"
            assert_one_error(res, f"{bad}:2: score {shown} is not finite", code=1)
            assert not out.exists()
    qrels = _write(tmp / "qrels.txt", QRELS)
    assert cli("eval", "-m", "P.2", str(qrels), str(bad)).exit_code == 0
    res = cli("fuse", "--method", "rrf", str(bad), str(other), "--out", str(tmp / "r.trec"))
    assert res.exit_code == 0, res.output + _stderr(res)


def fuse_minmax_equal_scores(tmp: Path) -> None:
    """A query whose scores in a run are all equal has no range: under min-max each becomes 0 (as ranx makes
    them), said, not a division by zero. By hand, alpha 0.5: q1 run a [d1 2, d2 2] -> 0, 0; run b [d1 3, d2 1]
    -> 1, 0; fused d1 0.5, d2 0."""
    a = _write(tmp / "a.trec", "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 2.0 r\n")
    b = _write(tmp / "b.trec", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 1.0 r\n")
    out = tmp / "f.trec"
    res = cli("fuse", "--method", "interpolation", "--normalize", "minmax", str(a), str(b), "--out", str(out))
    assert res.exit_code == 0 and "RuntimeWarning" not in res.output + _stderr(res), res.output
    assert [(ln.split()[2], float(ln.split()[4])) for ln in out.read_text().splitlines()] == [("d1", 0.5), ("d2", 0.0)]


def dataframe_infinite_score_under_interpolation(tmp: Path) -> None:
    """A DataFrame run with an infinite score given to ``ts.fuse(method="interpolation")``: refused naming the row;
    the same frame evaluates (trec_eval reads ``inf``)."""
    import pandas as pd

    import toolkit as ts

    frame = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d2"], "score": [1.0, -math.inf]})
    with pytest.raises(InputFormatError, match=r"^<DataFrame>: row 1: score -inf is not finite"):
        ts.fuse([frame, frame.assign(score=[2.0, 1.0])], method="interpolation", normalize="minmax")
    assert ts.fuse([frame, frame], method="rrf") is not None


def _fuse_flags(method: str, tmp: Path) -> list[str]:
    """What ``fuse --method`` needs beyond the runs: its weights, its parameters without a default, judgments."""
    from toolkit.retrieval.fusion import METHODS

    m = METHODS[method]
    flags = ["--weights", "1,1"] if m.weights else []
    for p in m.params:
        if p.default is None:
            flags += ["--param", f"{p.name}={1 if p.kind is int else 0.5}"]
    if m.needs_judgments:
        flags += ["--train-qrels", str(_write(tmp / "train.qrels", QRELS))]
    return flags


def fuse_score_methods_refuse_infinite_scores(tmp: Path) -> None:
    """Every fusion method that reads scores, and under a method that reads ranks every normalisation that rescales
    them, refuses a run holding ``inf`` at the reader: one ``Error:`` line naming the file and line, nothing
    written; a method that reads ranks alone (and the ``rank`` normalisation) fuses such a run."""
    from toolkit.retrieval.fusion import METHODS, NORMALIZATIONS

    bad = _write(tmp / "a.trec", RUN.replace("q1 Q0 d2 2 2.0 r", "q1 Q0 d2 2 inf r"))
    other = _write(tmp / "b.trec", RUN)
    out = tmp / "f.trec"
    for name, m in METHODS.items():
        res = cli("fuse", "--method", name, *_fuse_flags(name, tmp), str(bad), str(other), "--out", str(out))
        if m.reads_scores:
            assert_one_error(res, f"{bad}:2: score inf is not finite", code=1)
            assert not out.exists(), name
        else:
            assert res.exit_code == 0, (name, res.output + _stderr(res))
            out.unlink()
    for norm, n in NORMALIZATIONS.items():
        if norm == "borda":
            continue  # refused with a method that reads ranks, whatever the scores
        res = cli("fuse", "--method", "rrf", "--normalize", norm, str(bad), str(other), "--out", str(out))
        if n.rescales:
            assert_one_error(res, f"{bad}:2: score inf is not finite", code=1)
        else:
            assert res.exit_code == 0, (norm, res.output + _stderr(res))
            out.unlink()


def fuse_weights_and_parameters_through_the_numbers_door(tmp: Path) -> None:
    """``fuse``'s weights and parameters are numbers from the command line, read by the door: a weight ``٣`` or
    ``inf``, a persistence ``1e999`` (beyond a double), a segment count of 5,000 digits or ``²``, RRF's ``--rrf.k
    NaN``: one ``Error:`` line each, the text escaped and cut, nothing written."""
    a, b = _write(tmp / "a.trec", RUN), _write(tmp / "b.trec", RUN)
    qrels = _write(tmp / "train.qrels", QRELS)
    out = tmp / "f.trec"
    for flags, needle in (
        (["--method", "wsum", "--weights", "1,\u0663"], "--weights: weight '\\u0663' is not a number"),
        (["--method", "wsum", "--weights", "inf,1"], "--weights: weight 'inf' is not finite"),
        (["--method", "rbc", "--param", "phi=1e999"], "--param phi: phi '1e999' is not finite"),
        (["--method", "probfuse", "--param", f"n_segments={HUGE}", "--train-qrels", str(qrels)], "digits, more than"),
        (["--method", "probfuse", "--param", "n_segments=\u00b2", "--train-qrels", str(qrels)], "'\\xb2' is not"),
        (["--method", "rrf", "--rrf.k", "NaN"], "--rrf.k: k 'NaN' is NaN"),
    ):
        with Bounded(seconds=5):
            res = cli("fuse", *flags, str(a), str(b), "--out", str(out))
        assert_one_error(res, needle, code=1)
        assert not out.exists()


# -------------------------------------------------------------- JSON, YAML
def candidates_numbers_out_of_reach(tmp: Path) -> None:
    """Candidates JSON: an integer of 5,000 digits (Python's ``int`` refuses it: before, a ValueError traceback),
    a score ``10**400`` (before, an OverflowError traceback), a score ``"٣"`` (``float()`` reads 3), a score
    ``NaN``: each one ``Error:`` line."""
    from toolkit.data.texts import read_candidates

    def cands(score: str) -> Path:
        text = '[{"query": "q", "hits": [\n{"qid": "q1", "docid": "d1", "rank": 1, "score": ' + score + "}]}]"
        return _write(tmp / "c.json", text)

    for score, needle in (
        (HUGE, ":2: JSON integer of 5,000 digits"),
        ("1" + "0" * 400, "entry 0, hit 0: needs a numeric score: score <an integer of 1,329 bits> is not finite"),
        ('"\u0663"', "entry 0, hit 0: needs a numeric score: score '\\u0663' is not a number"),
        ("NaN", "entry 0, hit 0: needs a numeric score: score nan is NaN"),
        ("true", "entry 0, hit 0: needs a numeric score: score True is not a number"),
    ):
        path = cands(score)
        with pytest.raises(InputFormatError) as err:
            read_candidates(path)
        assert needle in str(err.value), (needle, str(err.value))
    res = cli("rerank", "--candidates", str(cands(HUGE)), "--model", "m", "--out", str(tmp / "o.trec"))
    assert_one_error(res, f"{tmp / 'c.json'}:2: JSON integer of 5,000 digits")


def yaml_integer_wider_than_64_bits(tmp: Path) -> None:
    """An experiment file's ``hits: 0xfff...`` (5,000 hex digits): one ``Error:`` line with its line; before, a
    ValueError traceback (Python cannot print such an integer)."""
    exp = _write(tmp / "exp.yaml", "name: x\nhits: 0x" + "f" * 5000 + "\n")
    res = cli("experiment", "run", str(exp), "--out", str(tmp / "out"))
    assert_one_error(res, f"{exp}:2:", "is not an integer twostage reads (is wider than 64 bits)")


# --------------------------------------------------------- environment, CLI
def environment_bound_in_another_script(tmp: Path) -> None:
    """``TWOSTAGE_MAX_DECOMPRESSED_MB=٣``: ``int()`` read 3 (a 3 MiB bound the user never wrote); the door refuses
    it with one ``Error:`` line naming the variable, escaped."""
    import gzip

    qrels = _write(tmp / "qrels.txt", QRELS)
    run = tmp / "run.trec.gz"
    run.write_bytes(gzip.compress(RUN.encode()))
    for value, shown in (("\u0663", "'\\u0663'"), ("1_0", "'1_0'"), (HUGE, "(5,000 characters)")):
        res = cli("eval", str(qrels), str(run), env={"TWOSTAGE_MAX_DECOMPRESSED_MB": value})
        assert_one_error(res, "TWOSTAGE_MAX_DECOMPRESSED_MB=", shown, "expected a positive integer", code=1)
    res = cli("eval", str(qrels), str(run), env={"TWOSTAGE_MAX_DECOMPRESSED_MB": " 64 "})
    assert res.exit_code == 0, res.output


def measure_cutoff_of_5000_digits(tmp: Path) -> None:
    """``-m ndcg_cut.999...9`` (5,000 digits): one ``Error:`` line; before, an OverflowError traceback. ranx's
    names too: ``hits@999...9`` was a ValueError traceback (``int()`` of 5,000 digits), ``hits@\u0665`` read
    as hits@5 and ``rbp.\u0668`` as persistence 0.8 (``\\d`` and ``float()`` read every script's digits)."""
    qrels = _write(tmp / "qrels.txt", QRELS)
    run = _write(tmp / "run.trec", RUN)
    ranx = (f"hits@{HUGE}", f"mrr-l{HUGE}", f"rbp.{HUGE}", f"rbp.8-l{HUGE}", "hits@\u0665", "rbp.\u0668", "hit\u017f@5")
    for name in (f"ndcg_cut.{HUGE}", f"P@{HUGE}", f"AP(rel={HUGE})", "P@\u0665", *ranx):
        with Bounded(seconds=5):
            res = cli("eval", "-m", name, str(qrels), str(run))
        assert_one_error(res, code=1)


def ray_port_superscript(tmp: Path) -> None:
    """``--ray 127.0.0.1:²``: ``isdigit()`` passed it and ``int()`` crashed; the door refuses it as no address."""
    (tmp / "c.json").write_text("[]")
    for port in ("\u00b2", "\u0663\u0663", HUGE):
        res = cli("rerank", "--candidates", str(tmp / "c.json"), "--model", "m", "--out", str(tmp / "o.trec"),
                  "--ray", f"127.0.0.1:{port}")  # fmt: skip
        assert_one_error(res, "not an address", code=1)


CASES = [
    Case("numbers", "retry-after-superscript-in-judge", retry_after_superscript_in_judge),
    Case("numbers", "retry-after-in-listwise-probe", retry_after_in_listwise_probe),
    Case("numbers", "listwise-identifier-of-5000-digits", listwise_identifier_of_5000_digits),
    Case("numbers", "listwise-answer-cached-by-an-older-version", listwise_answer_cached_by_an_older_version),
    Case("numbers", "cached-answer-that-no-longer-parses-set-aside", cached_answer_that_no_longer_parses_is_set_aside),
    Case("numbers", "judge-label-in-another-script", judge_label_in_another_script),
    Case("numbers", "dataframe-label-infinite", dataframe_label_infinite),
    Case("numbers", "qrels-label-in-another-script", qrels_label_in_another_script),
    Case("numbers", "msmarco-rank-in-another-script", msmarco_rank_in_another_script),
    Case("numbers", "fuse-minmax-infinite-scores", fuse_minmax_infinite_scores),
    Case("numbers", "fuse-minmax-equal-scores", fuse_minmax_equal_scores),
    Case("numbers", "dataframe-infinite-score-under-interpolation", dataframe_infinite_score_under_interpolation),
    Case("numbers", "fuse-score-methods-refuse-infinite-scores", fuse_score_methods_refuse_infinite_scores),
    Case(
        "numbers",
        "fuse-weights-and-parameters-through-the-numbers-door",
        fuse_weights_and_parameters_through_the_numbers_door,
    ),
    Case("numbers", "candidates-numbers-out-of-reach", candidates_numbers_out_of_reach),
    Case("numbers", "yaml-integer-wider-than-64-bits", yaml_integer_wider_than_64_bits),
    Case("numbers", "environment-bound-in-another-script", environment_bound_in_another_script),
    Case("numbers", "measure-cutoff-of-5000-digits", measure_cutoff_of_5000_digits),
    Case("numbers", "ray-port-superscript", ray_port_superscript),
]
