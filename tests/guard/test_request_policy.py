"""The HTTP settings of every job that calls an endpoint are declared once, ``toolkit.guard.client.RequestPolicy``:
its defaults are those ``Endpoint``, the judge (``JudgeOptions``, ``twostage judge``), the listwise reranker
(``ListwiseOptions``, ``twostage rerank``) and their flags use, and its ranges are checked where it is built."""

from __future__ import annotations

import inspect

import pytest

from toolkit.cli.options import CLIENT
from toolkit.errors import ConfigError
from toolkit.guard.client import (
    DEFAULT_BACKOFF,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Endpoint,
    RequestPolicy,
)
from toolkit.judging.judge_options import JudgeOptions
from toolkit.llm.chat import OpenAIChatJudge
from toolkit.reranking.listwise_options import ListwiseOptions

DEFAULTS = {
    "concurrency": DEFAULT_CONCURRENCY,
    "timeout": DEFAULT_TIMEOUT,
    "retries": DEFAULT_RETRIES,
    "backoff": DEFAULT_BACKOFF,
    "rate": None,
    "max_response_bytes": DEFAULT_MAX_RESPONSE_BYTES,
}


def test_the_policys_defaults():
    assert RequestPolicy().describe() == DEFAULTS
    assert {k: spec.default for k, spec in RequestPolicy.keywords().items()} == DEFAULTS


def test_endpoint_judge_and_listwise_take_the_policys_defaults():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    assert endpoint.policy == RequestPolicy()
    said = {k: getattr(endpoint, k) for k in DEFAULTS}
    assert said == DEFAULTS
    for function in (Endpoint.__init__, OpenAIChatJudge.__init__):  # their keywords' defaults
        params = inspect.signature(function).parameters
        assert {k: params[k].default for k in DEFAULTS} == DEFAULTS, function
    judge = JudgeOptions(model="m")
    assert judge.requests == RequestPolicy()
    assert {k: JudgeOptions.keywords()[k].default for k in DEFAULTS} == DEFAULTS
    assert ListwiseOptions().requests == RequestPolicy() == ListwiseOptions.from_keywords().requests
    assert set(DEFAULTS) <= set(ListwiseOptions.keywords())


def test_the_flags_are_the_policys_keywords_with_its_defaults():
    assert [f.keyword for f in CLIENT] == [
        "concurrency",
        "timeout",
        "max_response_bytes",
        "retries",
        "backoff",
        "rate",
    ]
    assert {f.keyword: f.settings.get("default") for f in CLIENT} == DEFAULTS


def test_an_endpoint_is_built_from_a_policy_or_from_its_keywords():
    policy = RequestPolicy(concurrency=3, timeout=5.0, retries=0, backoff=0.5, rate=2.0, max_response_bytes=100)
    given = Endpoint("http://127.0.0.1:9/v1", policy=policy)
    assert given.policy is policy
    assert (given.concurrency, given.timeout, given.retries, given.backoff, given.rate) == (3, 5.0, 0, 0.5, 2.0)
    assert given.max_response_bytes == 100
    by_keywords = Endpoint(
        "http://127.0.0.1:9/v1", concurrency=3, timeout=5.0, retries=0, backoff=0.5, rate=2.0, max_response_bytes=100
    )
    assert by_keywords.policy == policy


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"concurrency": 0}, "concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed"),
        ({"retries": -1}, "concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed"),
        ({"timeout": 0}, "concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed"),
        ({"backoff": -0.1}, "concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed"),
        ({"rate": 0}, "concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0 and rate > 0 are needed"),
        ({"max_response_bytes": 0}, "max_response_bytes must be >= 1, not 0"),
    ],
)
def test_a_policy_out_of_range_is_refused_where_it_is_built(given, message):
    for build in (
        lambda: RequestPolicy(**given),
        lambda: Endpoint("http://127.0.0.1:9/v1", **given),
        lambda: JudgeOptions.from_keywords(model="m", **given),
        lambda: ListwiseOptions.from_keywords(**given),
    ):
        with pytest.raises(ConfigError) as caught:
            build()
        assert str(caught.value) == message


def test_max_response_bytes_none_is_the_default_bound():
    assert RequestPolicy(max_response_bytes=None).max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES  # type: ignore[arg-type]
    assert JudgeOptions.from_keywords(model="m", max_response_bytes=None).requests == RequestPolicy()
