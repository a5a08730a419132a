"""``ReproduceOptions``: the settings of ``twostage reproduce``, checked once where they are built, and the runner
``Runner.of`` makes from them (the fields the command used to set one by one)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from toolkit.errors import ConfigError, OptionError
from toolkit.reproduction.reproduce_options import ReproduceOptions
from toolkit.reproduction.runner import Runner


def test_the_runner_holds_the_options_settings(tmp_path):
    (tmp_path / "data").mkdir()
    options = ReproduceOptions(
        data_dir=tmp_path / "data",
        indexes=tmp_path / "idx",
        rows=iter(["a", "b"]),
        reuse_runs=True,
        allow_commands=True,
        allow_endpoints=["localhost", "judge.example:8000"],
    )
    runner = Runner.of(None, options, work=tmp_path / "w", commands={"bm25"})  # type: ignore[arg-type]
    assert (runner.data, runner.work, runner.indexes) == (tmp_path / "data", tmp_path / "w", tmp_path / "idx")
    assert (runner.rows_only, runner.reuse_runs, runner.allow_commands) == (("a", "b"), True, True)
    assert runner.allow_endpoints == ("localhost", "judge.example:8000") and runner.commands == {"bm25"}
    plain = Runner.of(None, ReproduceOptions(data_dir=tmp_path / "absent"), work=tmp_path)  # type: ignore[arg-type]
    assert plain.data is None and plain.indexes == Path("indexes").resolve()
    assert (plain.rows_only, plain.reuse_runs, plain.allow_commands, plain.allow_endpoints) == ((), False, False, ())


def test_an_endpoint_that_names_no_host_is_refused_when_built(tmp_path):
    with pytest.raises(OptionError, match=r"^'http://' names no host$") as caught:
        ReproduceOptions(allow_endpoints=("localhost", "http://"))
    assert isinstance(caught.value, ConfigError) and caught.value.flag == "--allow-endpoint"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReproduceOptions().rows = ("x",)  # type: ignore[misc]
    assert ReproduceOptions.from_keywords(**ReproduceOptions(rows=["x"]).describe()) == ReproduceOptions(rows=("x",))
