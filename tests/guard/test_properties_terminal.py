"""The terminal escape's input language is every text (every code point, lone surrogates included): property tests.

For any text, ``terminal_text`` prints no character a terminal acts on or hides (the oracle: Unicode categories
Cc, Cf, Cs, Zl, Zp, line feed and tab aside), changes nothing else, and is injective: a decoder written here from
its documented form (``[U+XXXX]``) gives the text back. ``terminal_data`` and ``terminal_json`` show the same
characters and keep valid data byte for byte. Driven through the CLI, generated file names and spec titles holding
controls reach stdout and stderr with no raw control.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from cases_escape import QRELS, RUN, raw_controls
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolkit.guard.escape import terminal_data, terminal_json, terminal_line, terminal_text

SHOWN_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
#: characters a terminal acts on or hides, of every kind the escape shows, and the pieces of its own output
SPECIAL_CHARS = (
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + list("\u00ad\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2060\u2066")
    + list("\u2067\u2068\u2069\ufeff\ufff9\U000e0001\U000e0041\ud800\udfff\udc80")
    + list("[]U+01BF")
)
#: look-alikes of the escape's own output, whole or in part
PIECES = ["[U+", "[U+001B]", "[U+0041]", "[U+005B]", "[U+10FFFF]", "[U+1B]", "[U+001b]"]
TEXTS = st.lists(
    st.one_of(
        st.text(st.characters(codec=None, exclude_categories=()), max_size=8),
        st.sampled_from(SPECIAL_CHARS + PIECES),
        st.text(st.sampled_from(SPECIAL_CHARS), max_size=4),
    ),
    max_size=12,
).map("".join)

_SHOWN = re.compile(r"\[U\+([0-9A-F]{4,6})\]")


def decoded(shown: str) -> str:
    """The text ``terminal_text`` was given, read back from what it printed (its documented form)."""
    return _SHOWN.sub(lambda m: chr(int(m.group(1), 16)), shown)


def needs_showing(c: str) -> bool:
    return c not in "\n\t" and unicodedata.category(c) in SHOWN_CATEGORIES


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_terminal_text_shows_every_control_and_reads_back(text):
    shown = terminal_text(text)
    assert raw_controls(shown) == []
    assert decoded(shown) == text  # injective: two different texts never print alike
    if not any(needs_showing(c) for c in text) and "[U+" not in text:
        assert shown == text  # nothing to show: printed as it is


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_terminal_line_is_one_line_that_reads_back(text):
    shown = terminal_line(text)
    assert raw_controls(shown) == [] and "\n" not in shown
    assert decoded(shown) == text


@settings(max_examples=200, deadline=None)
@given(TEXTS, TEXTS)
def test_two_different_texts_never_print_alike(a, b):
    if a != b:
        assert terminal_text(a) != terminal_text(b)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_terminal_data_shows_controls_and_keeps_every_other_character(text):
    shown = terminal_data(text)
    assert raw_controls(shown) == []
    expected = "".join(f"[U+{ord(c):04X}]" if needs_showing(c) else c for c in text)
    assert shown == expected


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | TEXTS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(TEXTS, inner, max_size=3), max_leaves=8))  # fmt: skip
def test_terminal_json_reads_back_as_the_same_document(document):
    # JSON cannot tell two lone surrogates that form a pair from the character they encode (json.dumps neither)
    assume(not re.search("[\ud800-\udbff][\udc00-\udfff]", json.dumps(document, ensure_ascii=False)))
    for text in (json.dumps(document, ensure_ascii=False), json.dumps(document, ensure_ascii=False, indent=2)):
        shown = terminal_json(text)
        assert raw_controls(shown) == []
        assert json.loads(shown) == document


# ------------------------------------------------------------------ through the CLI
#: file-name characters: anything a file name may hold but "/" and NUL, controls and bidi often
NAME_PARTS = st.one_of(
    st.sampled_from([c for c in SPECIAL_CHARS if c not in "\x00/" and not 0xD800 <= ord(c) <= 0xDFFF] + PIECES),
    st.characters(codec="utf-8", exclude_characters="/\x00="),  # NAME=RUN names a run
)
NAMES = st.lists(NAME_PARTS, min_size=1, max_size=10).map("".join).filter(lambda n: n not in (".", ".."))


def _invoke(*args: str):
    from toolkit.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _streams(res) -> str:
    out = res.stdout_bytes.decode("utf-8", "surrogateescape")
    return out + (res.stderr_bytes.decode("utf-8", "surrogateescape") if res.stderr_bytes is not None else "")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_file_names_in_error_lines_hold_no_raw_control(tmp_path: Path, name: str):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS)
    res = _invoke("eval", str(qrels), str(tmp_path / "missing" / name))
    both = _streams(res)
    assert res.exit_code == 1 and raw_controls(both) == [], both
    errors = [ln for ln in both.splitlines() if ln.startswith("Error:")]
    # one line, naming the file as it is (a name with "[" or "*" is read as a pattern that matches nothing)
    assert (
        len(errors) == 1
        and len(both.splitlines()) == 1
        and decoded(errors[0]).startswith(f"Error: {tmp_path / 'missing' / name}: ")
    ), both


TITLES = st.lists(NAME_PARTS, min_size=1, max_size=12).map("".join).filter(lambda t: t.strip() != "")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=TITLES, label=TITLES)
def test_spec_titles_and_labels_reach_the_terminal_with_no_raw_control(tmp_path: Path, title: str, label: str):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: tiny\ntitle: {_yaml(title)}\npaths: spec\ncolumns:\n  - {{id: MAP, measure: map}}\n"
        f"rows:\n  - id: sys\n    label: {_yaml(label)}\n    qrels: qrels.txt\n    run: run.txt\n"
        "    cells: {MAP: 0.5417}\n"
    )
    res = _invoke("reproduce", str(spec), "--out", str(tmp_path / "out"))
    both = _streams(res)
    assert res.exit_code == 0 and raw_controls(both) == [], both
    heading = res.stdout_bytes.decode("utf-8", "surrogateescape").splitlines()[0]
    assert heading.startswith("# ") and raw_controls(heading) == [], heading


def _yaml(text: str) -> str:
    """``text`` as a YAML double-quoted string, every character but letters, digits and spaces as an escape."""
    return '"' + "".join(c if c.isascii() and (c.isalnum() or c == " ") else f"\\U{ord(c):08x}" for c in text) + '"'
