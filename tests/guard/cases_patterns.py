"""The door "patterns" (``toolkit.guard.patterns``): every regular expression from outside (a judge template's
``answer:``, a query-type file's rules) is compiled on RE2, which matches in time linear in the text, or refused
with one error naming the file and the line.

Before: a template's ``answer: '((?:a|aa)+)#'`` over a passage of 42 ``a`` kept a core at 100 % until killed
(Python's ``re`` backtracks: the time doubles with every two more ``a``), and a query-type rule could do the same.
"""

from __future__ import annotations

from pathlib import Path

from doors import Bounded, Case, assert_one_error, cli
from hostile_server import HostileServer
from judge_server import write_candidates

from toolkit.errors import InputFormatError

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 2\n2 0 d4 1\n2 0 d5 1\n"
RUN = "1 Q0 d3 1 3.0 t\n1 Q0 d2 2 2.0 t\n1 Q0 d1 3 1.0 t\n2 Q0 d5 1 2.0 t\n2 Q0 d4 2 1.0 t\n"
#: the issue's pattern: nested alternatives under a repetition, then a character the passage lacks
CATASTROPHIC = "((?:a|aa)+)#"


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _template(tmp: Path, answer: str, name: str = "prompt.md") -> Path:
    # the answer is on the file's line 4 (the front matter starts on line 2)
    return _write(tmp, name, f"---\nname: t\nlabels: [0, 1]\nanswer: '{answer}'\n---\nQ: {{query}}\nP: {{passage}}\n")


def catastrophic_answer_regex_bounded(tmp: Path) -> None:
    """The issue's template, accepted (RE2 runs it), over the issue's passage and 100,000 ``a``: it finishes at
    once, as a library call and as ``twostage judge`` against a server on 127.0.0.1."""
    from toolkit.judging.prompt import load_template

    template = load_template(_template(tmp, CATASTROPHIC))
    with Bounded(seconds=2):
        for n in (42, 100_000):
            assert template.suspect("a" * n) is False
            assert template.parse("a" * n) == (None, "no answer pattern in the response")
        # a match still parses: the label is the group of the last match
        assert template.parse("aa# then a#") == (None, "answer 'a' is not an integer written in the digits 0-9")
    labelled = load_template(_template(tmp, "((?:1|11)+)#", "labelled.md"))
    with Bounded(seconds=2):
        assert labelled.parse("1" * 50_000 + "x 1#") == (1, "")
        assert labelled.suspect("1" * 50_000) is False

    server = HostileServer("ok")  # answers "Relevant.\n##final score: 1": no match, a parse failure
    try:
        cands = write_candidates(tmp / "cand.json", {"q1": [("d0", "a" * 42), ("d1", "a" * 20_000)]})
        with Bounded(seconds=60):
            res = cli(
                "judge", "--candidates", cands, "--depth", "2", "--endpoint", server.url, "--model", "m",
                "--prompt", str(tmp / "prompt.md"), "--out", str(tmp / "j.qrels"), "--no-progress", "--no-cache",
                "--retries", "0", "--backoff", "0",
            )  # fmt: skip
        assert "Traceback" not in res.output, res.output
        assert len(server.posts) == 2, res.output  # both passages were asked: none hung the process before
    finally:
        server.close()


def answer_regex_refused_at_its_line(tmp: Path) -> None:
    """A pattern RE2 cannot run (backreference, lookahead, lookbehind, Python's \\Z, a repetition over 1,000) is one
    ``Error: FILE:4: answer: ...`` line before anything is asked or written."""
    cands = write_candidates(tmp / "cand.json", {"q1": [("d0", "a passage")]})
    for answer, reason in (
        (r"(\d)\1", "invalid escape sequence: \\1"),
        (r"(?=##)##(\d)", "invalid perl operator: (?="),
        (r"(?<!x)(\d)", "invalid perl operator: (?<"),
        (r"score: (\d)\Z", "invalid escape sequence: \\Z"),
        (r"(\d){1001}", "invalid repetition size"),
    ):
        prompt = _template(tmp, answer)
        res = cli(
            "judge", "--candidates", cands, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
            "--prompt", str(prompt), "--out", str(tmp / "j.qrels"), "--no-cache",
        )  # fmt: skip
        line = assert_one_error(res, f"{prompt}:4: answer: bad regular expression", reason, code=1)
        assert "RE2" in line, line
        assert not (tmp / "j.qrels").exists()
    # no group for the label: refused at the same line
    assert_one_error(
        cli("judge", "--candidates", cands, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
            "--prompt", str(_template(tmp, r"score: \d")), "--out", str(tmp / "j.qrels")),
        f"{tmp / 'prompt.md'}:4: answer: 'score: \\\\d' has 0 group(s), it needs 1",
    )  # fmt: skip


def query_rules_refused_at_their_line(tmp: Path) -> None:
    """A query-type rule RE2 cannot run is refused at its line, in a TSV and a YAML rules file, and by
    ``twostage diagnose --query-rules`` as one ``Error:`` line."""
    from toolkit.diagnosis.query_types import load_type_rules

    tsv = _write(tmp, "rules.tsv", "# types\nplace\t\\b(city|town)\\b\nrepeat\t(\\w+) \\1\n")
    yml = _write(
        tmp, "rules.yaml", "rules:\n  - {type: place, pattern: 'city'}\n  - type: ahead\n    pattern: 'a(?=b)'\n"
    )
    for path, line, reason in ((tsv, 3, "invalid escape sequence: \\1"), (yml, 4, "invalid perl operator: (?=")):
        try:
            load_type_rules(path)
        except InputFormatError as exc:
            assert (exc.path, exc.line) == (str(path), line), (exc.path, exc.line)
            assert "bad regular expression" in str(exc) and reason in str(exc), str(exc)
        else:
            raise AssertionError(f"{path.name}: a pattern RE2 cannot run was read")
    _write(tmp, "qrels.txt", QRELS)
    _write(tmp, "run.txt", RUN)
    _write(tmp, "rr.txt", RUN)
    topics = _write(tmp, "topics.tsv", "1\tcity of light\n2\twhat is a town\n")
    res = cli(
        "diagnose", "--qrels", str(tmp / "qrels.txt"), "--first-stage", str(tmp / "run.txt"),
        "--reranked", str(tmp / "rr.txt"), "--depth", "rr=3", "--topics", str(topics),
        "--query-rules", str(tsv), "--out", str(tmp / "out"),
    )  # fmt: skip
    assert_one_error(res, f"{tsv}:3: bad regular expression", "RE2", code=1)
    assert not (tmp / "out").exists()


def catastrophic_query_rule_bounded(tmp: Path) -> None:
    """A rules file's catastrophic pattern is read (RE2 runs it) and classifies a long query at once."""
    from toolkit.diagnosis.query_types import assign_types, load_type_rules

    rules = load_type_rules(_write(tmp, "rules.tsv", "slow\t^(a|aa)+$\nalso\t((?:a|aa)+)#\n"))
    queries = {"long": "a" * 20_000 + "b", "short": "a" * 42 + "b", "hit": "aaaa"}
    with Bounded(seconds=2):
        types = assign_types(list(queries), queries, None, rules)
    assert types == ["other", "other", "slow"]


CASES = [
    Case("patterns", "catastrophic-answer-regex-bounded", catastrophic_answer_regex_bounded),
    Case("patterns", "answer-regex-refused-at-its-line", answer_regex_refused_at_its_line),
    Case("patterns", "query-rules-refused-at-their-line", query_rules_refused_at_their_line),
    Case("patterns", "catastrophic-query-rule-bounded", catastrophic_query_rule_bounded),
]
