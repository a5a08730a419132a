"""Each shared option is declared once (toolkit/cli/options.py), with the library's choices and one default."""

from __future__ import annotations

import dataclasses

import click
import pytest

from toolkit.cli import main
from toolkit.measures.names import EvalSettings, build_settings
from toolkit.measures.settings import SETTING_NAMES
from toolkit.models import PRECISIONS
from toolkit.stats.significance import CORRECTIONS


def _param(command: str, name: str) -> click.Parameter:
    return next(p for p in main.commands[command].params if p.name == name)


def test_setting_names_are_the_fields_of_eval_settings():
    assert set(SETTING_NAMES) == {f.name for f in dataclasses.fields(EvalSettings)}


@pytest.mark.parametrize("command", ["eval", "compare", "gain-sensitivity", "diagnose"])
def test_evaluating_commands_take_the_settings_by_their_one_name(command):
    names = {p.name for p in main.commands[command].params}
    # gain-sensitivity varies the nDCG settings itself; diagnose has its own -l (--recall-level)
    fixed = {"gain-sensitivity": {"gain", "discount", "judged_compat"}, "diagnose": {"relevance_level"}}
    # --allow-no-common (zeros for a run sharing no query with the qrels) is eval's alone: the others refuse it
    eval_only = {"allow_no_common"} if command != "eval" else set()
    assert set(SETTING_NAMES) - fixed.get(command, set()) - eval_only <= names
    assert "level" not in names


def test_unknown_setting_name_is_refused():
    from toolkit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown evaluation setting.*level"):
        build_settings({"level": 2})
    assert build_settings({"relevance_level": 2}).relevance_level == 2


@pytest.mark.parametrize("command", ["index", "dense", "rerank"])
def test_one_device_default_and_the_library_precisions(command):
    assert _param(command, "device").default == "auto"
    precision = _param(command, "precision")
    assert list(precision.type.choices) == list(PRECISIONS) and precision.default == "auto"


@pytest.mark.parametrize("command", ["compare", "diagnose"])
def test_significance_options_from_the_library(command):
    correction = _param(command, "correction")
    assert list(correction.type.choices) == list(CORRECTIONS) and correction.default == "holm"
    assert _param(command, "seed").default == 42 and _param(command, "permutations").default == 10_000


@pytest.mark.parametrize("command", ["eval", "compare", "gain-sensitivity", "diagnose", "doctor", "index", "bm25"])
def test_data_dir_is_one_option(command):
    p = _param(command, "data_dir")
    assert p.envvar == "TWOSTAGE_DATA" and p.default is None


def test_trec_eval_choices(cli):
    assert list(_param("eval", "trec_eval").type.choices) == ["9", "10"]
    assert _param("eval", "trec_eval").default == "9" and _param("measures", "trec_eval").default is None
    res = cli("eval", "--trec-eval", "11", "q", "r")
    assert res.exit_code == 2 and "'11' is not one of '9', '10'" in res.output
