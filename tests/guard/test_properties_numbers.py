"""The numbers door's input language, generated: texts over every Unicode digit (categories Nd, No, Nl), signs,
blanks, ``_``, exponents and runs of thousands of digits, through each parser and each consumer that uses one.
Each answer is held to an independent reference: ``int`` of the text when it is ``[0-9]{1,N}`` in ASCII (else a
``NumberRefused`` whose message is written out here, the text escaped and never converted); pyarrow's own CSV
reader for scores (the function that reads every run file); rank_llm 0.26's repair, written out, for an LLM's
ranking.
"""

from __future__ import annotations

import io
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.errors import ConfigError, InputFormatError
from toolkit.guard import numbers
from toolkit.guard.numbers import NumberRefused

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BLANKS = [" ", "\t", "\n", "\u00a0", "\u2003", "\u3000"]
UNICODE_DIGITS = st.characters(categories=["Nd", "No", "Nl"])
PIECES = st.one_of(
    st.sampled_from("0123456789"),
    UNICODE_DIGITS,
    st.sampled_from(["+", "-", "_", ".", "e", "E", *BLANKS]),
)
LONG_RUNS = st.builds(
    lambda n, d, sign: sign + d * n,
    st.sampled_from([17, 18, 19, 4299, 4300, 4301, 6000]),
    st.sampled_from(["9", "0", "1", "\u0669", "\u00b2"]),
    st.sampled_from(["", "+", "-"]),
)
TEXTS = st.one_of(
    st.lists(PIECES, max_size=14).map("".join),
    st.integers(-(10**25), 10**25).map(str),
    st.tuples(
        st.sampled_from(["", " ", "\t", "+", "-"]), st.integers(0, 10**6).map(str), st.sampled_from(BLANKS + [""])
    ).map("".join),
    LONG_RUNS,
)


def shown(text: str) -> str:
    """How a refusal shows a text, by hand: ``ascii()`` of it, cut at 40 characters with its length said."""
    if len(text) <= 40:
        return ascii(text)
    return ascii(text[:40])[:-1] + f"...' ({len(text):,} characters)"


def refused(call, what: str, text: str) -> str:
    """``call()`` raises ``NumberRefused`` (nothing else) naming ``what`` and showing ``text``; its problem."""
    with pytest.raises(NumberRefused) as err:
        call()
    message = str(err.value)
    assert message.startswith(f"{what} {shown(text)} "), (message, text)
    assert isinstance(err.value, ValueError)  # a caller refusing ValueError refuses it
    return message[len(f"{what} {shown(text)} ") :]


# -------------------------------------------------------------- integers
@FAST
@given(st.lists(TEXTS, max_size=6), st.sampled_from([1, 5, 18]))
def test_natural_column_reads_what_natural_reads_and_finds_the_first_it_refuses(texts, n):
    """A column read at once (an MS MARCO run's ranks) is read as ``natural`` reads each text: the same values, or
    the position of the first text it refuses."""
    import pyarrow as pa

    values, bad = numbers.natural_column(pa.array(texts, type=pa.large_string()), max_digits=n)
    expected: list[int] = []
    for i, text in enumerate(texts):
        try:
            expected.append(numbers.natural(text, max_digits=n))
        except NumberRefused:
            assert values is None and bad == i
            return
    assert bad is None and values.tolist() == expected


@FAST
@given(TEXTS, st.sampled_from([1, 5, 18, 4300]))
def test_natural_reads_ascii_digits_within_the_bound_and_nothing_else(text, n):
    if re.fullmatch(r"[0-9]+", text) and text.isascii():
        if len(text) <= n:
            assert numbers.natural(text, what="x", max_digits=n) == int(text)
        else:
            problem = refused(lambda: numbers.natural(text, what="x", max_digits=n), "x", text)
            assert problem == f"has {len(text):,} digits, more than the {n} read"
    else:
        problem = refused(lambda: numbers.natural(text, what="x", max_digits=n), "x", text)
        assert problem == "is not a whole number written in the digits 0-9"


@FAST
@given(TEXTS, st.sampled_from([1, 7, 18]))
def test_integer_reads_a_sign_and_ascii_digits_and_nothing_else(text, n):
    m = re.fullmatch(r"[+-]?([0-9]+)", text) if text.isascii() else None
    if m and len(m.group(1)) <= n:
        assert numbers.integer(text, what="label", max_digits=n) == int(text)
    else:
        problem = refused(lambda: numbers.integer(text, what="label", max_digits=n), "label", text)
        want = f"has {len(m.group(1)):,} digits, more than the {n} read" if m else None
        assert problem == (want or "is not an integer written in the digits 0-9")


@FAST
@given(TEXTS)
def test_http_headers_are_read_as_digits_or_not_used(text):
    """``Retry-After`` and ``Content-Length`` as the client reads them: a number only when the field value is
    ASCII digits (at most 18) between optional spaces and tabs; anything else is not used (never an exception)."""
    from toolkit.guard.client import _header_integer, _retry_after

    core = text.strip(" \t")
    want = int(core) if re.fullmatch(r"[0-9]{1,18}", core) and core.isascii() else None
    assert _header_integer(text, "Content-Length") == want
    assert _retry_after(text) == (float(want) if want is not None and want < 60 else None)


@FAST
@given(TEXTS)
def test_labels_read_from_text_are_ascii_integers_within_the_range(text):
    from toolkit.guard.readers import MAX_LABEL, parse_label

    m = re.fullmatch(r"[+-]?[0-9]+", text) if text.isascii() else None
    if m and len(text.lstrip("+-")) <= 7 and abs(int(text)) <= MAX_LABEL:
        assert parse_label(text, "f", 3) == int(text)
        return
    with pytest.raises(InputFormatError) as err:
        parse_label(text, "f", 3)
    message = str(err.value)
    if not m:
        assert message == f"f:3: relevance {shown(text)} is not an integer"
    else:
        as_written = text if len(text) <= 40 else shown(text)
        assert (
            message == f"f:3: relevance label {as_written} is out of range: labels must be integers within ±1,000,000"
        )


LABEL_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**7), 10**7),
    st.sampled_from([math.inf, -math.inf, "inf", "-inf", "1e400", 1e300, 2.5, 10**6, -(10**6), 10**6 + 1]),
)


@FAST
@given(LABEL_VALUES)
def test_a_dataframe_label_is_read_or_refused_showing_it_never_converted(value):
    import pandas as pd

    from toolkit.data.adapters import as_qrels

    frame = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": pd.Series([1, value], dtype=object)})
    number = float(value)
    if math.isfinite(number) and number.is_integer() and abs(number) <= 10**6:
        assert as_qrels(frame).frame["relevance"].tolist() == [1, int(number)]
        return
    with pytest.raises(InputFormatError) as err:
        as_qrels(frame)
    message = str(err.value)
    assert message.startswith("<DataFrame>: row 1: relevance"), message
    if math.isnan(number):
        assert "is NaN" in message
    elif not math.isfinite(number) or abs(number) > 10**6:
        assert f"relevance label {numbers.show(number)} is out of range" in message
    else:
        assert "is not an integer" in message


@FAST
@given(TEXTS.filter(lambda t: "\x00" not in t))
def test_an_environment_bound_is_a_positive_ascii_integer(text):
    import os
    from unittest import mock

    core = text.strip()
    with mock.patch.dict(os.environ, {"TWOSTAGE_NUMBERS_PROBE": text}):
        if not core:
            assert numbers.env_bound("TWOSTAGE_NUMBERS_PROBE", 7) == 7
        elif re.fullmatch(r"[0-9]{1,12}", core) and core.isascii() and int(core) > 0:
            assert numbers.env_bound("TWOSTAGE_NUMBERS_PROBE", 7) == int(core)
        else:
            with pytest.raises(ConfigError) as err:
                numbers.env_bound("TWOSTAGE_NUMBERS_PROBE", 7)
            assert str(err.value).startswith(f"TWOSTAGE_NUMBERS_PROBE={shown(core)}: expected a positive integer")


# ---------------------------------------------------------------- scores
SCORE_PIECES = st.one_of(
    st.sampled_from("0123456789"),
    UNICODE_DIGITS,
    st.sampled_from(["+", "-", ".", "e", "E", "_", "x", "inf", "Infinity", "nan", "NaN", "1e400", "d", "f"]),
)
SCORES = st.one_of(
    st.lists(SCORE_PIECES, min_size=1, max_size=8).map("".join),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(width=32).map(lambda x: f"{x:.60e}"),
    st.integers(0, 10**400).map(str),
)


def _arrow_reads(token: str) -> float | None:
    """The score pyarrow's CSV reader (the run reader's) gives for a token, None when it refuses it."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            io.BytesIO(f"q {token}\n".encode()),
            read_options=pacsv.ReadOptions(column_names=["q", "s"]),
            parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False),
            convert_options=pacsv.ConvertOptions(column_types={"s": pa.float64()}, null_values=[]),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return table.column("s")[0].as_py()


@settings(max_examples=300, deadline=None)
@given(SCORES, st.booleans())
def test_a_score_is_what_the_run_reader_reads_it_as(token, finite):
    """The door's score for a token is pyarrow's, bit for bit (the sign of zero included); a token pyarrow refuses
    or reads as NaN is refused, and with ``finite`` so is one it reads as an infinity."""
    arrow = _arrow_reads(token)
    if arrow is None or math.isnan(arrow) or (finite and math.isinf(arrow)):
        with pytest.raises(NumberRefused):
            numbers.score(token, finite=finite)
        return
    value = numbers.score(token, finite=finite)
    assert value == arrow and math.copysign(1, value) == math.copysign(1, arrow), (token, value, arrow)


@FAST
@given(st.one_of(SCORES, st.floats(allow_nan=True), st.integers(-(10**400), 10**400), st.booleans(), st.none()))
def test_a_json_score_is_a_number_or_a_score_text(value):
    if isinstance(value, str):
        arrow = _arrow_reads(value)
        ok = arrow is not None and not math.isnan(arrow)
    elif isinstance(value, bool) or value is None:
        ok = False
    elif isinstance(value, int):
        ok = abs(value) < 2**1024
    else:
        ok = not math.isnan(value)
    if ok:
        got = numbers.json_score(value)
        assert got == (_arrow_reads(value) if isinstance(value, str) else float(value))
    else:
        with pytest.raises(NumberRefused):
            numbers.json_score(value)


# ---------------------------------------------------- an LLM's ranking
#: rank_llm 0.26's ``fake_numbers_map`` (``rank_llm/rerank/listwise/response_utils.py``), copied as it is
RANK_LLM_FAKE_DIGITS = str.maketrans(
    "⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉①②③④⑤⑥⑦⑧⑨❶❷❸❹❺❻❼❽❾０１２３４５６７８９🄀🄁🄂🄃🄄🄅🄆🄇🄈🄉",
    "0123456789012345678912345678912345678901234567890123456789",
)


def rank_llm_order(response: str, k: int) -> list[int]:
    """rank_llm 0.26's repair (``clean_ranking_response`` then ``receive_permutation``), written out: the digits
    of its map read as ASCII, every character ``isdigit`` is false for becomes a space, ``int`` of each run minus
    1, repeats and ids outside the window dropped, the rest appended; any exception keeps the window's order.
    (tests/reranking/test_rank_llm_parity.py compares with rank_llm itself.)"""
    if "</think>" in response:
        response = response.split("</think>")[-1].strip()
    response = response.translate(RANK_LLM_FAKE_DIGITS)
    cleaned = "".join(c if c.isdigit() else " " for c in response).strip()
    original = list(range(k))
    try:
        ids = [int(x) - 1 for x in cleaned.split()]
    except ValueError:
        return original
    seen: list[int] = []
    for i in ids:
        if i not in seen:
            seen.append(i)
    kept = [i for i in seen if i in original]
    return kept + [i for i in original if i not in kept]


# decimal digits (Nd) of every script, and the other numeric characters (No, Nl): the superscript, subscript,
# circled and fullwidth digits rank_llm maps to ASCII, those ``isdigit`` is true for that it does not map
# (``⓪``: ``int()`` refuses it, the window is kept) and those that are no digit at all (``½``: a separator)
DECIMALS = st.characters(categories=["Nd"])
OTHER_NUMERIC = st.one_of(st.characters(categories=["No", "Nl"]), st.sampled_from(list("⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉①②⑨❶❾🄀🄉⓪")))
ANSWER_PIECES = st.one_of(
    st.sampled_from(["[", "]", " > ", ", ", "passage ", "</think>", "<think>", "\n"]),
    st.integers(0, 30).map(str),
    st.lists(DECIMALS, min_size=1, max_size=3).map("".join),
    st.lists(OTHER_NUMERIC, min_size=1, max_size=2).map("".join),
    st.sampled_from(["9" * 4300, "9" * 4301, "0" * 4300 + "1", "\u0669" * 4301, "1" * 20]),
)


RANKINGS = st.builds(
    lambda ids, head, tail: head + " > ".join(f"[{i}]" for i in ids) + tail,
    st.lists(st.integers(0, 25), max_size=25),
    st.lists(ANSWER_PIECES, max_size=3).map("".join),
    st.lists(ANSWER_PIECES, max_size=3).map("".join),
)
ANSWERS = st.one_of(st.lists(ANSWER_PIECES, max_size=12).map("".join), RANKINGS)


@FAST
@given(ANSWERS, st.integers(1, 20))
def test_a_listwise_answer_gives_rank_llm_order(answer, k):
    from toolkit.reranking.listwise import parse_answer

    _found, permutation, repairs = parse_answer(answer, k)
    assert permutation == rank_llm_order(answer, k)
    assert sorted(permutation) == list(range(k)) and set(repairs) <= {"none_parsed", "duplicates", "unknown", "missing"}


@FAST
@given(st.lists(st.one_of(ANSWER_PIECES, RANKINGS), max_size=8).map("".join))
def test_a_numeric_character_no_digit_separates_identifiers(answer):
    """A numeric character that is no digit (``½``, ``Ⅻ``: ``isdigit`` false) is a separator, as a space is."""
    from toolkit.reranking.listwise import parse_answer

    plain = "".join(" " if c.isnumeric() and not c.isdigit() else c for c in answer)
    assert parse_answer(answer, 10) == parse_answer(plain, 10)


# ------------------------------------------------------- parsers' integers
@FAST
@given(st.integers(-(10**1400), 10**1400), st.sampled_from(["{}", "0x{:x}", "0b{:b}", "{:_}"]))
def test_a_yaml_integer_is_read_within_64_bits_or_refused_with_its_line(value, form):
    from pathlib import Path

    from toolkit.guard.specs import parse_yaml

    text = ("-" if value < 0 else "") + form.format(abs(value))
    try:
        data = parse_yaml(f"name: x\nhits: {text}\n", Path("x.yaml"), what="a file").data
    except InputFormatError as exc:
        assert str(exc).startswith("x.yaml:2: ") and abs(value) >= 2**63, str(exc)[:200]
        return
    assert data["hits"] == value and abs(value) < 2**63


@FAST
@given(st.integers(4290, 4310), st.sampled_from(["[{}]", '{{"a": "x",\n"b": -{}}}', "{}"]))
def test_a_json_integer_too_long_to_read_is_refused_with_its_line(digits, form):
    from toolkit.guard.readers import parse_json

    raw = form.format("7" * digits).encode()
    if digits <= 4300:
        assert parse_json(raw, "j") is not None
        return
    with pytest.raises(InputFormatError) as err:
        parse_json(raw, "j")
    line = raw.count(b"\n") + 1
    assert (
        str(err.value) == f"j:{line}: JSON integer of {digits:,} digits: an integer is read with at most 4,300 digits"
    )
