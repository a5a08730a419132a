"""The CLI's exit status and message follow the type of the error, never its text: a value of one option the
library cannot use (``OptionError``) is click's bad-value error of that flag, exit 2, with the command's usage
above it; every other ``TwostageError`` (``ConfigError``, ``DepthNotDetectedError``, ``UnknownMeasureError``,
``InputFormatError``) and a file the system refuses are one ``Error:`` line, exit 1; click's usage errors exit 2.
One command each, every byte of its output checked."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from toolkit.cli import main

NO_TEXTS = "twostage: warning: no query texts (give --topics or --candidates): query types are 'unknown'\n"
USAGE = "Usage: twostage diagnose [OPTIONS]\nTry 'twostage diagnose --help' for help.\n\n"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Five queries of ten documents: a first stage, a rerank of its top 5, and one whose top 5 holds a document
    the first stage never retrieved (no rerank depth fits it)."""
    qrels, first, reranked, intruder = [], [], [], []
    for q in range(1, 6):
        docs = [f"d{j}" for j in range(10)]
        qrels += [f"q{q} 0 {d} {(q + j) % 3}\n" for j, d in enumerate(docs)]
        first += [f"q{q} Q0 {d} {j + 1} {10 - j} bm25\n" for j, d in enumerate(docs)]
        top = docs[:5][::-1]
        reranked += [f"q{q} Q0 {d} {j + 1} {10 - j} rr\n" for j, d in enumerate(top + docs[5:])]
        top[0] = "intruder" if q == 1 else top[0]
        intruder += [f"q{q} Q0 {d} {j + 1} {10 - j} intr\n" for j, d in enumerate(top + docs[5:])]
    for name, lines in (("qrels.txt", qrels), ("bm25.trec", first), ("rr.trec", reranked), ("intr.trec", intruder)):
        (tmp_path / name).write_text("".join(lines))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    res = CliRunner().invoke(main, list(args), prog_name="twostage")
    return res.exit_code, res.output


def diagnose(reranked: str, *args: str):
    return run("diagnose", "--qrels", "qrels.txt", "--first-stage", "bm25=bm25.trec", "--reranked", reranked,
               "--out", "out", *args)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "P.5,10"], "'P.5,10' names 2 measures; give one, e.g. ndcg_cut.10"),
        (
            ["-m", "num_rel"],
            "num_rel has no ceiling (it counts documents or judgments); give a ranking measure such as "
            "ndcg_cut.10, P.10, recall.100 or map",
        ),
    ],
)
def test_a_measure_the_diagnosis_cannot_use_is_a_bad_value_of_its_flag(runs, args, message):
    """``OptionError`` (raised where the options are built, before anything is read) -> click's ``Invalid value
    for '-m'``, exit 2."""
    code, output = diagnose("rr=rr.trec", "--depth", "5", *args)
    assert (code, output) == (2, f"{USAGE}Error: Invalid value for '-m': {message}\n")


def test_a_measure_at_another_relevance_level_than_asked_is_a_bad_value_of_its_flag(runs):
    code, output = diagnose("rr=rr.trec", "--depth", "5", "-m", "AP(rel=2)@100", "--recall-level", "1")
    want = "Error: Invalid value for '-m': --measure AP(rel=2)@100 sets relevance level 2, --recall-level 1 another\n"
    assert (code, output) == (2, USAGE + want)


def test_the_words_of_a_message_choose_nothing(runs):
    """A ``ConfigError`` whose text says "ceiling" (here the name of a run) is still a ``ConfigError``: exit 1,
    one line, not a bad value of -m."""
    for name in ("rr", "ceiling", "measure"):
        code, output = diagnose(f"{name}=rr.trec", "--depth", "50", "-m", "P.5")
        assert (code, output) == (
            1,
            f"{NO_TEXTS}Error: --depth 50 for {name} is larger than the lists of its first stage bm25 (at most 10 "
            "documents per query): give a depth of at most 10\n",
        )


def test_a_depth_not_detected_is_one_error_line(runs):
    """``DepthNotDetectedError`` is a ``ConfigError`` about the runs, not the measure, though its text names one."""
    code, output = diagnose("intr=intr.trec", "-m", "P.5")
    assert (code, output) == (
        1,
        f"{NO_TEXTS}Error: the rerank depth of intr (intr.trec) is not given and cannot be detected: no depth "
        "detected: the smallest k at which the run's top k are the first stage's top k reordered and its ranks "
        "below k repeat the first stage's ranks below k in the first stage's order (equal first-stage scores "
        "count as one position) holds at no depth for 95% of the shared queries (at most 4 of 5). Give it: "
        "--depth intr=K (K: how many of bm25's top documents it reranked)\n",
    )


def test_an_unknown_measure_is_one_error_line(runs):
    code, output = diagnose("rr=rr.trec", "--depth", "5", "-m", "nope")
    assert (code, output) == (1, "Error: unknown measure 'nope' (`twostage measures` lists every measure)\n")


def test_a_malformed_input_is_one_error_line(runs):
    code, output = run("eval", "qrels.txt", "qrels.txt")
    want = "Error: qrels.txt:1: expected 6 columns (query_id Q0 doc_id rank score tag), found 4\n"
    assert (code, output) == (1, want)


def test_a_missing_file_is_one_error_line(runs):
    assert run("eval", "qrels.txt", "missing.trec") == (1, "Error: missing.trec: no such file\n")


def test_a_usage_error_is_clicks(runs):
    code, output = run("eval", "--nope")
    assert (code, output) == (
        2,
        "Usage: twostage eval [OPTIONS] QRELS [NAME=]RUN|-|FOLDER|GLOB [RUN ...]\n"
        "Try 'twostage eval --help' for help.\n\nError: No such option '--nope'. Did you mean '--holes'?\n",
    )
