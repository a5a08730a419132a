"""The patterns door's input language is RE2's syntax (``toolkit.guard.patterns``): property tests.

Any text given as a pattern is either refused, as one ``InputFormatError`` naming the file and the line, or
compiled on RE2; a compiled pattern searches a passage of up to 10,000 characters within a generous deadline
(RE2 is linear in the text; Python's ``re`` took exponential time on some of these patterns). Patterns built from
the syntax RE2 and Python's ``re`` share are all accepted, and find the very matches Python's ``re`` finds (the
oracle) on short passages, so templates written for ``re`` keep their meaning (what a group repeated by ``*``
keeps differs: ``((?:.)*)*`` over ``1`` keeps ``1`` on RE2, the empty last iteration on ``re``).
"""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import InputFormatError
from toolkit.guard.patterns import Pattern, compile_pattern

ATOMS = st.sampled_from(["a", "b", "ab", ".", "[ab]", "[^a]", "#", "\\#", "1", "[0-9]", "x"])
QUANTIFIERS = st.sampled_from(["*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,2}?", "{2,}"])


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map("|".join),
        inner.map(lambda x: f"({x})"),
        inner.map(lambda x: f"(?:{x})"),
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"({t[0]}){t[1]}"),
    )


#: patterns in the syntax RE2 and Python's re share (nested repetitions and alternatives included)
SHARED = st.tuples(st.sampled_from(["", "^"]), st.recursive(ATOMS, _extend, max_leaves=10), st.sampled_from(["", "$"]))
SHARED_PATTERNS = SHARED.map("".join)
#: anything: RE2 syntax, Python-only syntax (backreferences, lookaround, \Z, (?x)), broken syntax
TOKENS = [
    "a", "b", "(", ")", "|", "*", "+", "?", "{2}", "{,3}", "{1001}", "[", "]", "^", "$", ".", "\\", "\\1", "\\d",
    "\\s", "\\w", "\\b", "\\Z", "\\z", "(?=", "(?!", "(?<=", "(?<!", "(?P<x>", "(?P=x)", "(?i)", "(?x)", "(?>",
    "*+", "\\p{L}", "\\x{41}", "#", "é", "\ud800",
]  # fmt: skip
ANY_PATTERNS = st.one_of(SHARED_PATTERNS, st.lists(st.sampled_from(TOKENS), max_size=12).map("".join))


#: passages up to 10,000 characters, drawn as (a unit, a length, an end, some random text) and built in the test
#: (hypothesis would print each one whole): long runs of what nested repetitions backtrack over, then text
UNITS = st.sampled_from(["a", "ab", "aab", "1", "a1", "#a"])
LENGTHS = st.integers(0, 10_000)
ENDS = st.sampled_from(["", "b", "#", "!", "\n"])
TAILS = st.text(st.sampled_from("ab1# x\n"), max_size=200)


@settings(max_examples=300, deadline=timedelta(seconds=10))
@given(ANY_PATTERNS, UNITS, LENGTHS, ENDS, TAILS)
def test_every_pattern_is_refused_or_compiled_on_re2_and_runs_in_linear_time(text, unit, n, end, tail):
    passage = ((unit * (n // len(unit) + 1))[:n] + end + tail)[:10_000]
    try:
        pattern = compile_pattern(text, "rules.tsv", 7)
    except InputFormatError as exc:
        assert (exc.path, exc.line) == ("rules.tsv", 7)
        assert str(exc).startswith("rules.tsv:7: bad regular expression "), str(exc)
        assert "\n" not in str(exc)
        return
    assert isinstance(pattern, Pattern) and pattern.text == text
    found = pattern.search(passage)  # the deadline bounds it: RE2 is linear in the passage
    matches = list(pattern.finditer(passage))
    assert (found is None) == (not matches)


@settings(max_examples=400, deadline=None)
@given(SHARED_PATTERNS, st.text(st.sampled_from("ab1#x"), max_size=8))
def test_shared_syntax_is_accepted_and_matches_as_python_re_does(text, passage):
    pattern = compile_pattern(text, "prompt.md", 4)  # never refused
    ours, theirs = pattern.search(passage), re.search(text, passage)
    assert (ours is None) == (theirs is None), (text, passage)
    if ours is not None:
        assert ours.span() == theirs.span(), (text, passage)
        if not re.search(r"\)[*+?{]", text):  # a group under a repetition may keep another iteration's text
            assert ours.groups() == theirs.groups(), (text, passage)
    if re.fullmatch(text, "") is None:  # no empty match anywhere: every match found as re finds it
        assert [m.span() for m in pattern.finditer(passage)] == [m.span() for m in re.finditer(text, passage)]
    # an empty match is found once (google-re2's own finditer gives one found ahead of where it searched twice)
    spans = [m.span() for m in pattern.finditer(passage)]
    assert spans == sorted(set(spans)) and all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans


@pytest.mark.parametrize(
    "text",
    [r"(\d)\1", r"(?=a)a", r"(?!a)b", r"(?<=a)b", r"(?<!a)b", r"a\Z", r"(?x) a", r"(?P<x>a)(?P=x)", r"a*+", r"(?>a)"],
)
def test_python_only_syntax_is_refused_naming_file_and_line(text):
    with pytest.raises(InputFormatError) as err:
        compile_pattern(text, "prompt.md", 4, what="answer:")
    assert str(err.value).startswith(f"prompt.md:4: answer: bad regular expression {text!r}: "), str(err.value)
    assert "RE2" in str(err.value)


def test_groups_and_case_are_what_the_judge_reads():
    """The label is the first group of the last match; ``(?i)`` and ``ignore_case`` fold case; ``\\d`` is ASCII."""
    pattern = compile_pattern(r"(?i)##\s*final score:\s*(-?\d+)", "prompt.md", 4, min_groups=1)
    answer = "##final score: 1 ... ## FINAL SCORE:\t-2 and ##final score: ٣"
    assert [m.group(1) for m in pattern.finditer(answer)] == ["1", "-2"]
    assert compile_pattern("final", "x", ignore_case=True).search("FiNaL") is not None
    assert compile_pattern("final", "x").search("FiNaL") is None
    assert [m.span() for m in compile_pattern("(?:a)*$", "x").finditer("1")] == [(1, 1)]
    assert [m.span() for m in compile_pattern("a*", "x").finditer("aab")] == [(0, 2), (2, 2), (3, 3)]
    # a lone surrogate in an answer (a JSON \ud800) is searched as U+FFFD, positions kept
    assert compile_pattern("(b)", "x").search("a\ud800b").span() == (2, 3)
