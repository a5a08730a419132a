"""A verb's keywords are the fields of its one frozen options object (``toolkit.options``): the ``@verb``
decorator shows them in the signature and the docstring, builds the options once, and the verb gives the same
result for ``options=X`` as for X's fields passed as keywords."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import re
import sys
import warnings

import pytest

import toolkit as ts
from toolkit.api.options import (
    AgreementOptions,
    Bm25Options,
    CompareOptions,
    DenseOptions,
    DiagnosisOptions,
    EvaluationOptions,
    IndexOptions,
    PoolTestOptions,
    PowerOptions,
    RiskOptions,
)
from toolkit.api.pipeline import build_index
from toolkit.api.uncertainty import paired_differences
from toolkit.errors import ConfigError, OptionConflictError, OptionError, for_api, for_cli
from toolkit.experiments.experiment_options import ExperimentOptions
from toolkit.guard.client import RequestPolicy
from toolkit.judging.judge_options import JudgeOptions
from toolkit.measures.names import build_settings, settings_values
from toolkit.options import Options, nested, opt, verb
from toolkit.reranking.backends import RerankerSpec
from toolkit.reranking.listwise_options import ListwiseOptions
from toolkit.reranking.rerank_options import RerankOptions
from toolkit.retrieval.fusion import FuseOptions
from toolkit.stats.paired import TestOptions

# ------------------------------------------------------------------ the decorator, on options of its own

BUILT: list[tuple] = []  # every validate() call, in order


def _piece(values: dict) -> tuple[int, int]:
    return (int(values.get("low", 0)), int(values.get("high", 9)))


@dataclasses.dataclass(frozen=True)
class ToyOptions(Options):
    n: int = opt(3, doc="how many.")
    mode: str = opt("fast", doc="fast or slow.")
    span: tuple[int, int] = nested(
        [("low", 0, "int", "the lowest."), ("high", 9, "int", "the highest.")],
        _piece,
        lambda span: {"low": span[0], "high": span[1]},
        doc="a range",
    )

    def validate(self) -> None:
        BUILT.append((self.n, self.mode, self.span))
        if self.mode not in ("fast", "slow"):
            raise ConfigError(f"mode must be fast or slow, not {self.mode!r}")


@verb(ToyOptions, inputs=("a", "b"))
def toy(a: int, b: int = 1, *, options: ToyOptions) -> tuple:
    """Add, then scale.

    Args:
        a: the first.
        b: the second.
    """
    return a + b, options


def test_signature_lists_the_inputs_every_keyword_and_options():
    sig = inspect.signature(toy)
    assert list(sig.parameters) == ["a", "b", "n", "mode", "low", "high", "options"]
    p = sig.parameters
    assert p["a"].kind is p["a"].POSITIONAL_OR_KEYWORD and p["b"].default == 1
    assert all(p[k].kind is p[k].KEYWORD_ONLY for k in ("n", "mode", "low", "high", "options"))
    assert (p["n"].default, p["n"].annotation, p["high"].default, p["high"].annotation) == (3, "int", 9, "int")
    assert p["options"].default is None and p["options"].annotation == "ToyOptions | None"


def test_docstring_lists_each_keyword_after_the_inputs():
    doc = toy.__doc__
    args = doc.split("Args:\n", 1)[1].splitlines()
    names = [line.strip().split(":", 1)[0] for line in args if line.startswith("        ") and ":" in line]
    assert names == ["a", "b", "n", "mode", "low", "high", "options"]
    assert "        n: how many." in doc and "        high: the highest." in doc


def test_unknown_keyword_is_pythons_type_error_naming_the_verb():
    with pytest.raises(TypeError, match=r"^toy\(\) got an unexpected keyword argument 'bogus' \(its other keywords: "):
        toy(1, bogus=2)
    with pytest.raises(TypeError, match=r"^toy\(\) missing a required argument: 'a'"):
        toy(n=2)
    with pytest.raises(TypeError, match=r"options= takes a ToyOptions, not dict"):
        toy(1, options={"n": 2})


def test_inputs_by_position_or_by_name():
    assert toy(1, 2)[0] == 3 and toy(a=1, b=5)[0] == 6 and toy(4)[0] == 5


@verb(ToyOptions, inputs=("a", "extra"))
def toy_keyword_input(a: int, *, extra: int = 0, options: ToyOptions) -> int:
    """Add ``extra``, an input taken by name only."""
    return a + extra + options.n


def test_a_keyword_only_input_reaches_the_function():
    assert toy_keyword_input(1, extra=10) == 14 and toy_keyword_input(1) == 4
    with pytest.raises(TypeError, match="toy_keyword_input"):
        toy_keyword_input(1, 10)


def test_options_are_built_and_validated_once():
    BUILT.clear()
    _, o = toy(1, n=5, high=20)
    assert BUILT == [(5, "fast", (0, 20))] and (o.n, o.span) == (5, (0, 20))
    BUILT.clear()
    given = ToyOptions(n=7)
    assert BUILT == [(7, "fast", (0, 9))]
    _, same = toy(1, options=given)
    assert same is given and len(BUILT) == 1  # an options object is valid already: not checked again
    with pytest.raises(ConfigError, match="mode must be fast or slow, not 'quick'"):
        toy(1, mode="quick")


def test_a_keyword_passed_replaces_the_value_options_hold_and_the_others_stay():
    base = ToyOptions(n=7, mode="slow", span=(2, 4))
    _, o = toy(1, options=base, n=3, low=1)  # n=3 is the default: passed, it still replaces 7
    assert (o.n, o.mode, o.span) == (3, "slow", (1, 4))
    assert base.n == 7  # options are values: the caller's object is unchanged


def test_options_are_frozen_and_describe_their_keywords():
    o = ToyOptions(n=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.n = 3  # type: ignore[misc]
    assert o.describe() == {"n": 2, "mode": "fast", "low": 0, "high": 9}
    assert ToyOptions.from_keywords(**o.describe()) == o


# ------------------------------------------------------------------ the public verbs

VERBS = {
    "evaluate": (ts.evaluate, EvaluationOptions, ("qrels", "run", "measures"), ()),
    "evaluate_many": (ts.evaluate_many, EvaluationOptions, ("qrels", "runs", "measures"), ("name",)),
    "compare": (ts.compare, CompareOptions, ("qrels", "runs", "baseline", "measures"), ()),
    "diagnose": (
        ts.diagnose,
        DiagnosisOptions,
        ("qrels", "first_stage", "reranked", "topics", "candidates", "corpus", "index", "query_types", "type_rules"),
        (),
    ),
    "risk": (ts.risk, RiskOptions, ("qrels", "runs", "baseline", "measures"), ("name",)),
    "power": (ts.power, PowerOptions, ("qrels", "run_a", "run_b", "measure"), ()),
    "paired_differences": (paired_differences, EvaluationOptions, ("qrels", "run_a", "run_b", "measure"), ()),
    "pool_test": (ts.pool_test, PoolTestOptions, ("qrels", "runs", "measure"), ()),
    "agreement": (ts.agreement, AgreementOptions, ("qrels_a", "qrels_b", "runs", "measure"), ()),
    "judge": (
        ts.judge,
        JudgeOptions,
        ("run", "candidates", "topics", "corpus", "index", "qrels", "out", "runs"),
        (),
    ),
    "calibrate_judge": (
        ts.calibrate_judge,
        JudgeOptions,
        ("run", "qrels", "candidates", "topics", "corpus", "index", "out", "runs"),
        ("calibration",),
    ),
    "index": (ts.index, IndexOptions, ("collection", "out"), ()),
    "build_index": (build_index, IndexOptions, ("collection", "out"), ()),
    "bm25": (ts.bm25, Bm25Options, ("index", "topics"), ()),
    "dense": (ts.dense, DenseOptions, ("index", "topics"), ()),
    "fuse": (ts.fuse, FuseOptions, ("runs", "train_qrels"), ()),
    "rerank": (ts.rerank, RerankOptions, ("run", "topics", "candidates", "corpus", "index"), ()),
    "experiment": (ts.experiment, ExperimentOptions, ("path", "out"), ()),
    "Experiment.run": (ts.Experiment.run, ExperimentOptions, ("self", "out"), ()),
}


@pytest.mark.parametrize("name", list(VERBS))
def test_every_keyword_of_a_verb_is_a_field_of_its_options(name):
    function, cls, inputs, excluded = VERBS[name]
    params = inspect.signature(function).parameters
    keywords = [p for p in params if p not in inputs and p != "options"]
    assert keywords == [k for k in cls.keywords() if k not in excluded]
    for k, spec in cls.keywords().items():
        if k in params:
            assert params[k].default == spec.default, k
    assert function.options_class is cls
    assert all(f"        {k}:" in function.__doc__ for k in keywords)  # each documented, from its field


@pytest.mark.parametrize("name", list(VERBS))
def test_each_keywords_annotation_reads_in_the_verbs_module(name):
    # pdoc and typing.get_type_hints evaluate the annotations (strings) in the module that defines the verb
    function = VERBS[name][0]
    namespace = dict(vars(sys.modules[function.__module__]))
    for p in inspect.signature(function).parameters.values():
        if isinstance(p.annotation, str):
            eval(p.annotation, namespace)  # a NameError names what the module lacks


def test_the_public_names_include_the_options_classes():
    assert ts.EvaluationOptions is EvaluationOptions and ts.CompareOptions is CompareOptions
    assert ts.DiagnosisOptions is DiagnosisOptions
    assert (ts.RiskOptions, ts.PowerOptions, ts.PoolTestOptions, ts.AgreementOptions) == (
        RiskOptions,
        PowerOptions,
        PoolTestOptions,
        AgreementOptions,
    )
    assert ts.JudgeOptions is JudgeOptions and ts.RequestPolicy is RequestPolicy
    assert (ts.Bm25Options, ts.DenseOptions, ts.FuseOptions) == (Bm25Options, DenseOptions, FuseOptions)
    assert ts.IndexOptions is IndexOptions
    assert ts.RerankOptions is RerankOptions
    assert ts.ExperimentOptions is ExperimentOptions


QRELS = {f"q{q}": {f"d{d}": (d + q) % 3 for d in range(6)} for q in range(1, 7)}
RUN_A = {f"q{q}": {f"d{d}": float((d * 7 + q) % 11) for d in range(6)} for q in range(1, 7)}
RUN_B = {f"q{q}": {f"d{d}": float((d * 5 + 2 * q) % 13) for d in range(6)} for q in range(1, 6)}


@contextlib.contextmanager
def quiet():
    """The runs miss a query on purpose (a warning the test does not check)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TwostageWarning)
        yield


FIELDS = [
    {},
    {"complete": True, "relevance_level": 2},
    {"gain": "exp", "discount": "jk:2", "trec_eval": 10, "judged_only": True},
    {"max_docs": 3, "ci": 0.9, "bootstrap": 200, "ci_method": "bca", "seed": 5},
    {"holes": "retrieved", "name": "sys", "labels": {"ndcg_cut_3": "nDCG@3"}},
]


@pytest.mark.parametrize("fields", FIELDS, ids=range(len(FIELDS)))
def test_evaluate_with_options_is_evaluate_with_its_fields(fields):
    measures = ["ndcg_cut.3", "P.2", "map"]
    options = EvaluationOptions.from_keywords(**fields)
    with quiet():
        by_keywords = ts.evaluate(QRELS, RUN_B, measures, **fields)
    with quiet():
        by_options = ts.evaluate(QRELS, RUN_B, measures, options=options)
    assert by_options.to_json(per_query=True) == by_keywords.to_json(per_query=True)
    assert by_options.provenance == by_keywords.provenance and by_options.name == by_keywords.name
    assert by_options.intervals.equals(by_keywords.intervals)
    with quiet():
        many = ts.evaluate_many(QRELS, {"b": RUN_B}, measures, options=dataclasses.replace(options, name=None))
    assert many["b"].to_json(per_query=True) == by_keywords.to_json(per_query=True)


def test_compare_with_options_is_compare_with_its_fields():
    fields = {"complete": True, "permutations": 300, "bootstrap": 300, "family": "all-pairs", "test": "t"}
    runs = {"a": RUN_A, "b": RUN_B, "c": {q: {d: -s for d, s in r.items()} for q, r in RUN_A.items()}}
    with quiet():
        by_keywords = ts.compare(QRELS, runs, measures=["P.3", "map"], **fields)
        by_options = ts.compare(QRELS, runs, measures=["P.3", "map"], options=CompareOptions.from_keywords(**fields))
    assert by_options.to_json() == by_keywords.to_json()
    assert by_keywords.doc["tests"]["family"] == "all-pairs" and by_keywords.doc["tests"]["test"] == "t"


#: ``ts.diagnose``'s keywords and defaults before they became ``DiagnosisOptions``' fields (the evaluation
#: settings then came through ``**options``): every caller's keyword still means what it meant.
DIAGNOSE_KEYWORDS = {
    "measure": "ndcg_cut.10",
    "depth": None,
    "curve_depths": (10, 20, 30, 50, 100),
    "listwise": (),
    "pairs": None,
    "topics": None,
    "candidates": (),
    "corpus": None,
    "index": None,
    "query_types": None,
    "type_rules": None,
    "recall_level": None,
    "complete": True,
    "name": None,
    "ok": 0.6,
    "max_unjudged": 0.3,
    "hurt": 0.05,
    "worst_n": 10,
    "most_changed_n": 10,
    "disagree_n": 5,
    "missed_shown": 5,
    "explore_depth": 10,
    "permutations": 10_000,
    "seed": 42,
    "correction": "holm",
    "ci": 0.95,
    "bootstrap": 10_000,
    "ci_method": "percentile",
    "relevance_map": None,
    "dedupe": "error",
    "data_dir": None,
    "depth_as": "given",
    "window": None,
    "stride": None,
    **{k: v for k, v in inspect.signature(ts.api.evaluation.settings).parameters.items() if k != "complete"},
}


def test_diagnose_keeps_every_keyword_and_default():
    params = inspect.signature(ts.diagnose).parameters
    for k, default in DIAGNOSE_KEYWORDS.items():
        assert k in params, k
        want = default.default if isinstance(default, inspect.Parameter) else default
        assert params[k].default == want, k
    assert list(params)[:3] == ["qrels", "first_stage", "reranked"]
    assert set(params) - set(DIAGNOSE_KEYWORDS) == {"qrels", "first_stage", "reranked", "snippet_chars", "options"}


def _reversed(run: dict) -> dict:
    return {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}


def test_diagnose_with_options_is_diagnose_with_its_fields():
    fields = {
        "depth": 6,
        "worst_n": 3,
        "permutations": 200,
        "bootstrap": 200,
        "seed": 3,
        "gain": "exp",
        "ok": 0.5,
        "name": "toy",
        "curve_depths": (2, 4),
    }
    with quiet():
        by_keywords = ts.diagnose(QRELS, {"a": RUN_A}, {"rev": _reversed(RUN_A)}, **fields)
        options = DiagnosisOptions.from_keywords(**fields)
        by_options = ts.diagnose(QRELS, {"a": RUN_A}, {"rev": _reversed(RUN_A)}, options=options)
        more = ts.diagnose(QRELS, {"a": RUN_A}, {"rev": _reversed(RUN_A)}, options=options, worst_n=1)
    assert by_options.summary == by_keywords.summary
    assert by_options.per_query.equals(by_keywords.per_query) and by_options.pairs.equals(by_keywords.pairs)
    assert by_keywords.summary["name"] == "toy" and by_keywords.result.settings["curve_depths"] == [2, 4]
    assert len(by_keywords.summary["worst_queries"]) == 3 and len(more.summary["worst_queries"]) == 1
    assert more.summary["name"] == "toy"  # the other fields of options= stay


def test_diagnose_options_are_checked_before_anything_is_read(tmp_path):
    missing = tmp_path / "no-such-qrels.txt"
    for given, message in (
        ({"worst_n": -1}, "worst-N must be >= 0"),
        ({"ok": 1.5}, "threshold ok must be within"),
        ({"ci": 1.0}, "ci=1.0: the interval level must lie strictly between 0 and 1"),
        ({"measure": "judged.10"}, "judged_10 has no ceiling"),
        ({"curve_depths": (10, 0)}, "curve_depths must be >= 1"),
    ):
        with pytest.raises(ConfigError, match=message):
            ts.diagnose(missing, missing, missing, **given)
        with pytest.raises(ConfigError, match=message):
            DiagnosisOptions.from_keywords(**given)


def test_risk_with_options_is_risk_with_its_fields():
    fields = {"alpha": [0, 2.5], "complete": True, "relevance_level": 2, "force": True}
    runs = {"a": RUN_A, "b": RUN_B}
    with quiet():
        by_keywords = ts.risk(QRELS, runs, measures=["P.3", "map"], **fields)
        by_options = ts.risk(QRELS, runs, measures=["P.3", "map"], options=RiskOptions.from_keywords(**fields))
    assert by_options.to_json() == by_keywords.to_json()
    assert by_keywords.doc["alphas"] == [0.0, 2.5] and len(by_keywords.results) == 4  # 2 measures x 2 weights


def test_power_and_paired_differences_with_options_are_them_with_their_fields():
    evaluation = {"complete": True, "gain": "exp", "relevance_level": 2}
    fields = {"delta": 0.05, "alpha": 0.1, "power": 0.9, **evaluation}
    with quiet():
        by_keywords = ts.power(QRELS, RUN_A, RUN_B, "ndcg_cut.3", **fields)
        by_options = ts.power(QRELS, RUN_A, RUN_B, "ndcg_cut.3", options=PowerOptions.from_keywords(**fields))
    assert by_options.as_dict() == by_keywords.as_dict() and by_keywords.alpha == 0.1
    given = {"sd": 0.2, "delta": 0.05, "queries": 40}
    assert ts.power(**given).as_dict() == ts.power(options=PowerOptions(**given)).as_dict()
    with quiet():
        d = paired_differences(QRELS, RUN_A, RUN_B, "ndcg_cut.3", **evaluation)
        same = paired_differences(
            QRELS, RUN_A, RUN_B, "ndcg_cut.3", options=EvaluationOptions.from_keywords(**evaluation)
        )
    assert d.equals(same) and len(d) == 6  # complete=True: every judged query


def test_pool_test_with_options_is_pool_test_with_its_fields():
    fields = {"pool_depth": 2, "complete": True, "relevance_level": 2}
    runs = {"a": RUN_A, "b": RUN_B}
    with quiet():
        by_keywords = ts.pool_test(QRELS, runs, "P.3", **fields)
        by_options = ts.pool_test(QRELS, runs, "P.3", options=PoolTestOptions.from_keywords(**fields))
    assert by_options.as_dict() == by_keywords.as_dict()


def test_agreement_with_options_is_agreement_with_its_fields():
    other = {q: {d: (g + 1) % 3 for d, g in docs.items()} for q, docs in QRELS.items()}
    fields = {"permutations": 200, "seed": 3, "alpha": 0.1, "correction": "bonferroni", "labels": [0, 1, 2, 3]}
    fields |= {"names": ["x", "y"], "complete": True}
    runs = {"a": RUN_A, "b": RUN_B, "c": {q: {d: -s for d, s in r.items()} for q, r in RUN_A.items()}}
    with quiet():
        by_keywords = ts.agreement(QRELS, other, runs, "P.3", **fields)
        by_options = ts.agreement(QRELS, other, runs, "P.3", options=AgreementOptions.from_keywords(**fields))
    assert by_options.to_json() == by_keywords.to_json()
    assert by_keywords.names == ("x", "y") and by_keywords.rankings[0].test["permutations"] == 200


def test_settings_takes_each_setting_as_a_keyword_with_its_default():
    from toolkit.measures.settings import SETTINGS

    params = inspect.signature(ts.api.evaluation.settings).parameters
    assert [(p.name, p.default, p.kind) for p in params.values()] == [
        (s.name, s.default, inspect.Parameter.KEYWORD_ONLY) for s in SETTINGS
    ]
    given = {"trec_eval": 10, "gain": "exp", "relevance_level": 2}
    assert ts.api.evaluation.settings(**given) == build_settings(given)
    assert ts.api.evaluation.settings() == EvaluationOptions().settings
    with pytest.raises(TypeError, match=r"^settings\(\) got an unexpected keyword argument 'gian'"):
        ts.api.evaluation.settings(gian="exp")


def test_settings_keywords_round_trip_through_the_settings():
    for values in ({}, {"trec_eval": 10, "gain": "exp"}, {"score_precision": "float64", "discount": "jk:3"}):
        s = build_settings(values)
        assert build_settings(settings_values(s)) == s
    # a generation's own precision follows a new generation; one given explicitly stays
    nine = EvaluationOptions.from_keywords()
    assert EvaluationOptions.from_call("evaluate", nine, {"trec_eval": 10}).settings.score_precision == "float64"
    pinned = EvaluationOptions.from_keywords(score_precision="float64")
    assert EvaluationOptions.from_call("evaluate", pinned, {"trec_eval": 10}).settings.score_precision == "float64"
    pinned32 = EvaluationOptions.from_keywords(trec_eval=10, score_precision="float32")
    assert EvaluationOptions.from_call("evaluate", pinned32, {"gain": "exp"}).settings.score_precision == "float32"


@pytest.mark.parametrize(
    ("cls", "given", "api", "cli"),
    [
        (
            EvaluationOptions,
            {"relevance_map": "1:0", "rel_format": "prefs"},
            "relevance_map applies to rel_format='qrels' only",
            "--relevance-map applies to -R qrels and qrels_div only",
        ),
        (
            EvaluationOptions,
            {"holes": True, "rel_format": "qrels_jg"},
            "hole bounds need plain qrels (rel_format='qrels')",
            "--holes needs -R qrels and no -Z",
        ),
        (
            EvaluationOptions,
            {"holes": "top-k", "zscores": "z.txt"},
            "hole bounds are raw values; drop zscores",
            "--holes needs -R qrels and no -Z",
        ),
        (
            TestOptions,
            {"test": "tukey"},
            "the Tukey HSD test compares all pairs: use it with family='all-pairs'",
            "--test tukey compares all pairs: add --family all-pairs",
        ),
        (
            CompareOptions,
            {"test": "tukey", "family": "baseline"},
            "the Tukey HSD test compares all pairs: use it with family='all-pairs'",
            "--test tukey compares all pairs: add --family all-pairs",
        ),
        (
            JudgeOptions,
            {"model": "m", "holes_only": True, "calibration": True},
            "holes_only and calibration exclude each other (holes have no human label to compare)",
            "--holes-only and --calibrate exclude each other",
        ),
        (
            JudgeOptions,
            {"model": "m", "calibrate_sample": 5},
            "calibrate_sample= samples human-judged documents beside the holes: it needs holes_only=True "
            "(calibrate_judge judges every human-judged document of the top depth)",
            "--calibrate-sample samples human-judged documents beside the holes: add --holes-only",
        ),
        (
            JudgeOptions,
            {"model": "m", "backend": "openai"},
            "the openai backend needs endpoint= (e.g. http://localhost:8000/v1)",
            "--backend openai needs --endpoint URL",
        ),
        (
            RerankOptions,
            {"model": "m", "backend": "listwise", "ray": "local"},
            "the listwise backend runs its requests concurrently in this process; drop --ray",
            "--backend listwise runs its requests concurrently in this process; drop --ray",
        ),
        (
            RerankOptions,
            {"model": "m", "backend": "listwise", "kind": "cross-encoder"},
            "kind= is for the scoring backends; backend='listwise' reorders windows",
            "--kind is for the scoring backends; --backend listwise reorders windows",
        ),
        (
            RerankOptions,
            {"model": "m", "window": 10, "concurrency": 2},
            "concurrency, window: options of backend='listwise' only",
            "--window, --concurrency are for --backend listwise",
        ),
        (
            RerankOptions,
            {"model": "m", "endpoint": "http://h/v1", "passes": 2},
            "endpoint, passes: options of backend='listwise' only",
            "--endpoint is for --backend listwise",
        ),
        (
            RerankOptions,
            {"model": "m", "backend": "listwise", "endpoint": " "},
            "endpoint is empty",
            "--endpoint is empty",
        ),
    ],
)
def test_a_rule_has_one_home_and_each_front_ends_words(cls, given, api, cli):
    with pytest.raises(OptionConflictError) as caught:
        cls.from_keywords(**given)
    assert str(caught.value) == api and caught.value.for_cli() == cli
    assert isinstance(caught.value, ConfigError)
    assert for_api(api) == api and for_cli(cli) == cli


def test_evaluate_refuses_conflicting_options_before_reading_anything(tmp_path):
    missing = tmp_path / "absent.txt"  # never opened: the options are refused first
    with pytest.raises(OptionConflictError, match=r"^relevance_map applies to rel_format='qrels' only$"):
        ts.evaluate(missing, missing, "P.5", relevance_map="1:0", rel_format="prefs")
    with pytest.raises(ConfigError, match=r"ci=1\.5: the interval level must lie strictly between 0 and 1"):
        ts.evaluate(missing, missing, "P.5", ci=1.5)


@pytest.mark.parametrize(
    ("cls", "given", "api", "cli", "flag"),
    [
        (
            RiskOptions,
            {"alpha": [1, -1.0]},
            "alpha (the risk weight of a loss) must be a number >= 0, got -1.0",
            "the weight of a loss must be a finite number >= 0, got -1.0",
            "--alpha",
        ),
        (RiskOptions, {"alpha": []}, "alpha: give at least one value", "alpha: give at least one value", "--alpha"),
        (
            PowerOptions,
            {"power": 1.0},
            "power must lie strictly between 0 and 1, got 1.0",
            "--power must lie strictly between 0 and 1, got 1.0",
            "--power",
        ),
        (
            PowerOptions,
            {"sd": 0.0},
            "the standard deviation of the per-query differences must be > 0, got 0.0",
            "must be > 0",
            "--sd",
        ),
        (
            PowerOptions,
            {"delta": 0.0},
            "the difference to detect (delta) must be a non-zero number, got 0.0",
            "must be non-zero",
            "--delta",
        ),
        (PoolTestOptions, {"pool_depth": 0}, "pool_depth must be an integer >= 1, got 0", "must be >= 1, got 0", None),
    ],
)
def test_a_value_refused_is_worded_for_each_front_end(cls, given, api, cli, flag):
    with pytest.raises(OptionError) as caught:
        cls.from_keywords(**given)
    assert str(caught.value) == api and caught.value.for_cli() == cli
    assert caught.value.flag == (flag or "--pool-depth")


def test_the_statistics_verbs_refuse_a_value_before_reading_anything(tmp_path):
    missing = tmp_path / "absent.txt"  # never opened: the options are refused first
    with pytest.raises(ConfigError, match=r"^alpha \(the risk weight of a loss\) must be a number >= 0, got inf$"):
        ts.risk(missing, [missing, missing], alpha=float("inf"))
    with pytest.raises(ConfigError, match=r"^alpha must lie strictly between 0 and 1, got 1.5$"):
        ts.power(missing, missing, missing, alpha=1.5)
    with pytest.raises(ConfigError, match=r"^pool_depth must be an integer >= 1, got True$"):
        ts.pool_test(missing, [missing, missing], pool_depth=True)
    with pytest.raises(TypeError, match=r"^agreement\(\) got an unexpected keyword argument 'name'"):
        ts.agreement(missing, missing, name="x")
    with pytest.raises(TypeError, match=r"^risk\(\) got an unexpected keyword argument 'name'"):
        ts.risk(missing, [missing, missing], name="x")


# ------------------------------------------------------------------ judge


def _judge_collection(tmp_path, server) -> str:
    from judge_server import write_candidates

    queries = {}
    for q in (1, 2):
        docs = []
        for i in range(4):
            d = f"D{q}x{i}"
            server.labels[d] = (q + i) % 4
            docs.append((d, f"[doc {d}] passage {i} of topic {q}."))
        queries[f"q{q}"] = docs
    return write_candidates(tmp_path / "cand.json", queries)


def test_judge_with_options_is_judge_with_its_fields(tmp_path, judge_server):
    cand = _judge_collection(tmp_path, judge_server)
    fields = {
        "model": "test-judge",
        "endpoint": judge_server.url,
        "depth": 3,
        "query_ids": ["q2"],
        "cache": False,
        "concurrency": 2,
        "retries": 1,
        "timeout": 20.0,
        "max_response_bytes": 65536,
    }
    by_keywords = ts.judge(candidates=cand, **fields)
    options = JudgeOptions.from_keywords(**fields)
    by_options = ts.judge(candidates=cand, options=options)
    assert by_options.to_trec() == by_keywords.to_trec() == "q2 0 D2x0 2\nq2 0 D2x1 3\nq2 0 D2x2 0\n"
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in by_keywords.records]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in by_options.records] == strip
    assert by_options.meta["judge"] == by_keywords.meta["judge"]
    said = by_options.meta["judge"]
    assert (said["concurrency"], said["retries"], said["timeout_s"], said["max_response_bytes"]) == (2, 1, 20.0, 65536)
    assert options.requests == RequestPolicy(concurrency=2, retries=1, timeout=20.0, max_response_bytes=65536)
    # a keyword passed with options= replaces its value
    deeper = ts.judge(candidates=cand, options=options, depth=4)
    assert deeper.counts["pairs"] == 4 and by_options.counts["pairs"] == 3


def test_judge_needs_its_model_as_python_says_it(tmp_path):
    with pytest.raises(TypeError, match=r"^judge\(\) missing 1 required keyword-only argument: 'model'$"):
        ts.judge(candidates=str(tmp_path / "absent.json"))
    with pytest.raises(TypeError, match=r"^judge\(\) got an unexpected keyword argument 'modle'"):
        ts.judge(candidates=str(tmp_path / "absent.json"), modle="m")
    assert inspect.signature(ts.judge).parameters["model"].default is inspect.Parameter.empty


def test_judge_refuses_conflicting_options_before_reading_anything(tmp_path):
    missing = tmp_path / "absent.json"  # never opened: the options are refused first
    with pytest.raises(OptionConflictError, match=r"^holes_only and calibration exclude each other"):
        ts.judge(candidates=missing, model="m", holes_only=True, calibration=True, qrels={"q": {"d": 1}})
    with pytest.raises(ConfigError, match=r"^holes_only and calibration need qrels= \(the human judgments\)$"):
        ts.judge(candidates=missing, model="m", holes_only=True)
    with pytest.raises(ConfigError, match=r"^ray= needs out= \(the job's shards are kept in OUT.shards\)$"):
        ts.judge(candidates=missing, model="m", ray="local")
    with pytest.raises(ConfigError, match=r"^runs= are ranked in a calibration: give calibrate_sample="):
        ts.judge(candidates=missing, model="m", runs={"a": "a.trec", "b": "b.trec"})
    with pytest.raises(ConfigError, match=r"^calibrate_sample must be >= 0, not -1$"):
        ts.judge(candidates=missing, model="m", calibrate_sample=-1)
    with pytest.raises(ConfigError, match=r"^backend must be one of openai, transformers, not 'vllm'$"):
        ts.judge(candidates=missing, model="m", backend="vllm")
    with pytest.raises(ConfigError, match=r"^concurrency >= 1, retries >= 0, timeout > 0"):
        ts.judge(candidates=missing, model="m", endpoint="http://127.0.0.1:9/v1", concurrency=0)


def _calibration_collection(tmp_path, server) -> tuple[str, str, dict]:
    """Candidates (the judge's labels set on the server), human qrels that disagree on two documents, and two
    systems that order the documents differently."""
    from judge_server import write_qrels

    cand = _judge_collection(tmp_path, server)
    human = [(f"q{q}", f"D{q}x{i}", (q + i) % 4 if i != q else (q + i + 1) % 4) for q in (1, 2) for i in range(4)]
    runs = {}
    for r, sign in (("up", 1), ("down", -1)):
        lines = [f"q{q} Q0 D{q}x{i} 0 {sign * (i + 1)} {r}\n" for q in (1, 2) for i in range(4)]
        (tmp_path / f"{r}.trec").write_text("".join(lines))
        runs[r] = str(tmp_path / f"{r}.trec")
    return cand, write_qrels(tmp_path / "human.qrels", human), runs


def test_calibrate_judge_with_options_is_calibrate_judge_with_its_fields(tmp_path, judge_server):
    from toolkit.judging.calibration import CalibrationOptions

    cand, human, runs = _calibration_collection(tmp_path, judge_server)
    fields = {
        "model": "test-judge",
        "endpoint": judge_server.url,
        "depth": 4,
        "cache": False,
        "retries": 1,
        "measure": "P.2",
        "alpha": 0.2,
        "permutations": 64,
        "seed": 3,
        "correction": "bonferroni",
        "kappa_threshold": -0.5,
    }
    with quiet():
        by_keywords = ts.calibrate_judge(candidates=cand, qrels=human, runs=runs, out=tmp_path / "k.qrels", **fields)
        options = JudgeOptions.from_keywords(**fields)
        by_options = ts.calibrate_judge(
            candidates=cand, qrels=human, runs=runs, out=tmp_path / "o.qrels", options=options
        )
    assert by_options.to_dict() == by_keywords.to_dict()
    assert (tmp_path / "o.qrels").read_text() == (tmp_path / "k.qrels").read_text()
    assert options.calibrating == CalibrationOptions(
        seed=3, measure="P.2", alpha=0.2, permutations=64, correction="bonferroni", kappa_threshold=-0.5
    )
    d = by_keywords.to_dict()
    assert d["documents_both"] == 8 and d["kappa_threshold"] == -0.5 and d["near_chance"] is False
    assert d["ranking"]["measure"] == "P_2" and d["ranking"]["test"]["permutations"] == 64
    assert d["ranking"]["test"]["correction"] == "bonferroni" and d["ranking"]["test"]["seed"] == 3
    # a keyword passed with options= replaces its value
    with quiet():
        shallow = ts.calibrate_judge(candidates=cand, qrels=human, options=options, depth=2)
    assert shallow.to_dict()["documents_both"] == 4 and shallow.to_dict()["kappa_threshold"] == -0.5


def test_calibrate_judge_keywords_are_checked_as_pythons_and_before_anything_is_read(tmp_path):
    missing = tmp_path / "absent.json"  # never opened: the keywords and options are refused first
    with pytest.raises(TypeError, match=r"^calibrate_judge\(\) missing 1 required keyword-only argument: 'model'$"):
        ts.calibrate_judge(candidates=missing, qrels=missing)
    with pytest.raises(TypeError, match=r"^calibrate_judge\(\) missing 1 required keyword-only argument: 'qrels'$"):
        ts.calibrate_judge(candidates=missing, model="m")
    with pytest.raises(TypeError, match=r"^calibrate_judge\(\) got an unexpected keyword argument 'modle'"):
        ts.calibrate_judge(candidates=missing, qrels=missing, model="m", modle="m")
    with pytest.raises(TypeError, match=r"^calibrate_judge\(\) got an unexpected keyword argument 'calibration'"):
        ts.calibrate_judge(candidates=missing, qrels=missing, model="m", calibration=True)
    with pytest.raises(OptionConflictError, match=r"^holes_only and calibration exclude each other"):
        ts.calibrate_judge(candidates=missing, qrels=missing, model="m", holes_only=True)
    with pytest.raises(OptionError, match=r"^alpha must be in \(0, 1\), not 1.5$"):
        ts.calibrate_judge(candidates=missing, qrels=missing, model="m", alpha=1.5)
    with pytest.raises(TypeError, match=r"^calibrate_judge\(\) options= takes a JudgeOptions, not CalibrationOptions"):
        from toolkit.judging.calibration import CalibrationOptions

        ts.calibrate_judge(candidates=missing, qrels=missing, options=CalibrationOptions())
    assert "qrels" in inspect.signature(ts.calibrate_judge).parameters
    assert "calibration" not in inspect.signature(ts.calibrate_judge).parameters


# ------------------------------------------------------------------ the first stage: fuse, bm25, dense

FUSE_FIELDS = [
    {},
    {"method": "rrf", "k": 10, "depth": 4, "hits": 3, "resort": False},
    {"method": "interpolation", "alpha": 0.25, "normalize": "minmax"},
    {"method": "wsum", "normalize": "zmuv", "weights": "0.3,0.7"},
    {"method": "rbc", "params": {"phi": 0.6}},
]


@pytest.mark.parametrize("fields", FUSE_FIELDS, ids=range(len(FUSE_FIELDS)))
def test_fuse_with_options_is_fuse_with_its_fields(fields):
    by_keywords = ts.fuse([RUN_A, RUN_B], **fields)
    by_options = ts.fuse([RUN_A, RUN_B], options=FuseOptions.from_keywords(**fields))
    assert by_options.to_frame().equals(by_keywords.to_frame())
    stable = {k: v for k, v in by_keywords.meta.items() if "seconds" not in k and k != "created"}
    assert {k: by_options.meta[k] for k in stable} == stable


def test_a_fuse_keyword_replaces_what_the_options_hold():
    base = FuseOptions("rrf", params={"k": 1})
    assert FuseOptions.from_call("fuse", base, {"k": 60}).params["k"] == 60.0  # params' k too
    assert FuseOptions.from_call("fuse", base, {"hits": 5}) == FuseOptions("rrf", k=1, hits=5)
    mixed = FuseOptions.from_call("fuse", FuseOptions("interpolation", params={"alpha": 0.2}), {"alpha": 0.4})
    assert dict(mixed.params) == {"alpha": 0.4}
    assert FuseOptions("interpolation", alpha=0.3) == FuseOptions.from_keywords(method="interpolation", alpha=0.3)
    with pytest.raises(ConfigError, match="k is given twice"):
        FuseOptions.from_call("fuse", base, {"params": {"k": 5}})  # the options' k stays beside params' other k


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    from samples import write_tiny_corpus

    folder = tmp_path_factory.mktemp("tiny-verbs")
    corpus, topics = write_tiny_corpus(folder)
    return corpus, topics, folder


def _same_run(a, b) -> None:
    assert a.to_frame().equals(b.to_frame())
    volatile = ("seconds", "search_seconds", "created")
    assert {k: v for k, v in a.meta.items() if k not in volatile} == {
        k: v for k, v in b.meta.items() if k not in volatile
    }


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"hits": 3, "k1": 1.2, "b": 0.7, "threads": 1},
        {"rm3": True, "fb_docs": 2, "fb_terms": 5},
        {"qld": True, "mu": 50.0},
    ],
    ids=["defaults", "bm25", "rm3", "qld"],
)
def test_bm25_with_options_is_bm25_with_its_fields(tiny_corpus, fields):
    from needs import required

    required("pyserini", "the [pyserini] extra is not installed")
    corpus, topics, folder = tiny_corpus
    index = ts.index(str(corpus), folder / "lucene", threads=1, download=False)
    assert ts.index(str(corpus), folder / "lucene", options=IndexOptions(threads=1, download=False)) == index
    info, _ = build_index(str(corpus), folder / "lucene", options=IndexOptions(threads=1))
    assert info.reused and info.path == index  # the same settings: the index built by keywords is reused
    by_keywords = ts.bm25(index, str(topics), **fields)
    _same_run(ts.bm25(index, str(topics), options=Bm25Options.from_keywords(**fields)), by_keywords)


def test_dense_with_options_is_dense_with_its_fields(tiny_corpus, minilm):
    from needs import required

    required("faiss", "the [pyserini] extra is not installed")
    corpus, topics, folder = tiny_corpus
    index = ts.index(str(corpus), folder / "dense", dense=True, encoder=minilm, device="cpu")
    fields = {"hits": 4, "device": "cpu", "batch_size": 2, "max_queries": 2}
    by_keywords = ts.dense(index, str(topics), **fields)
    _same_run(ts.dense(index, str(topics), options=DenseOptions.from_keywords(**fields)), by_keywords)


@pytest.mark.parametrize(
    ("verb_name", "given", "message"),
    [
        ("bm25", {"hits": 0}, "--hits must be >= 1, not 0"),
        ("bm25", {"k1": -1.0}, "BM25 k1 must be a finite number >= 0"),
        ("bm25", {"rm3": True, "fb_terms": 0}, "--fb-terms must be >= 1, not 0"),
        ("bm25", {"qld": True, "mu": 0.0}, "query likelihood mu must be a finite number > 0"),
        ("dense", {"hits": 0}, "--hits must be >= 1, not 0"),
        ("index", {"ray": "auto"}, "--ray distributes dense encoding (--dense); Lucene indexing runs in Anserini"),
    ],
)
def test_first_stage_options_are_refused_before_the_index_is_opened(tmp_path, verb_name, given, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        getattr(ts, verb_name)(tmp_path / "absent", {"1": "text"}, **given)


#: two queries of three passages: the smallest real input of the rerank tests (``tiny_cross_encoder``'s words)
RERANK_CANDIDATES = [
    {
        "query": {"qid": f"q{q}", "text": "apple pie recipe" if q == 1 else "pie"},
        "hits": [
            {"qid": f"q{q}", "docid": f"d{d}", "rank": d + 1, "score": 3.0 - d, "content": f"apple pie {d} recipe"}
            for d in range(3)
        ],
    }
    for q in (1, 2)
]


def test_rerank_with_options_is_rerank_with_its_fields(tmp_path, tiny_cross_encoder):
    cand = tmp_path / "cand.json"
    cand.write_text(json.dumps(RERANK_CANDIDATES))
    fields = {
        "model": tiny_cross_encoder,
        "kind": "cross-encoder",
        "device": "cpu",
        "batch_size": 2,
        "depth": 2,
        "query_ids": ["q1"],
        "tag": "mine",
    }
    by_keywords = ts.rerank(candidates=cand, **fields)
    options = RerankOptions.from_keywords(**fields)
    by_options = ts.rerank(candidates=cand, options=options)
    assert by_options.frame.equals(by_keywords.frame)
    assert sorted(by_options.frame["query_id"]) == ["q1", "q1"]
    assert by_options.meta["reranker"] == by_keywords.meta["reranker"]
    assert options.reranker == RerankerSpec(tiny_cross_encoder, "cross-encoder", "cpu", 2)
    assert options.listwise == ListwiseOptions()  # rank_llm's settings, unused by a cross-encoder
    # a keyword passed with options= replaces its value
    deeper = ts.rerank(candidates=cand, options=options, depth=3)
    assert len(deeper.frame) == 3 and deeper.meta["reranker"]["batch_size"] == 2


def test_rerank_keeps_its_keywords_and_defaults():
    params = inspect.signature(ts.rerank).parameters
    assert params["model"].default is inspect.Parameter.empty
    assert (params["batch_size"].default, params["depth"].default, params["embedding_cache"].default) == (
        32,
        100,
        False,
    )
    assert (params["window"].default, params["concurrency"].default) == (
        ListwiseOptions().window,
        RequestPolicy().concurrency,
    )
    with pytest.raises(TypeError, match=r"^rerank\(\) missing 1 required keyword-only argument: 'model'$"):
        ts.rerank(candidates="absent.json")
    with pytest.raises(TypeError, match=r"^rerank\(\) got an unexpected keyword argument 'modle'"):
        ts.rerank(candidates="absent.json", modle="m")
    o = RerankOptions.from_keywords(model="m", backend="listwise", window=10, concurrency=3)
    assert (o.listwise.window, o.listwise.requests.concurrency, o.reranker.batch_size) == (10, 3, 32)
    assert RerankOptions.from_keywords(**o.describe()) == o


# ------------------------------------------------------------------ experiment


def test_experiment_with_options_is_experiment_with_its_fields(tmp_path, tiny_index):
    from tests.experiments.test_experiment import GRID, experiment

    path = experiment(tmp_path, tiny_index, GRID)
    fields = {"cache_dir": tmp_path / "cache", "force": ["bm25"]}
    by_keywords = ts.experiment(path, tmp_path / "keywords", **fields)
    options = ExperimentOptions.from_keywords(**fields)
    by_options = ts.Experiment.from_yaml(path).run(tmp_path / "options", options=options)
    assert set(by_keywords["cache"]) == {"computed"} and by_options.counts == {"computed": 4, "reused": 0}
    same = ["config", "k1", "b", "map", "P_2", "cache"]
    assert by_options.table[same].to_csv(index=False) == by_keywords[same].to_csv(index=False)
    # a keyword passed with options= replaces its value, the others stay (the same cache folder)
    reused = ts.experiment(path, tmp_path / "reused", options=options, force=())
    assert set(reused["cache"]) == {"reused"} and options.force == ("bm25",)


def test_experiment_options_refuse_ray_settings_without_ray_before_reading_anything(tmp_path):
    missing = tmp_path / "absent.yaml"  # never opened: the options are refused first
    with pytest.raises(OptionConflictError, match=r"^workers= only applies with ray=$"):
        ts.experiment(missing, tmp_path / "out", workers=2)
    with pytest.raises(OptionConflictError) as caught:
        ts.Experiment.run(None, tmp_path / "out", gpus_per_worker=1.0, max_retries=1)
    assert str(caught.value) == "gpus_per_worker=, max_retries= only apply with ray="
    assert caught.value.for_cli() == "--gpus-per-worker, --max-retries only apply with --ray"
    assert ExperimentOptions(ray="local", workers=3).workers == 3
    assert not (tmp_path / "out").exists()
