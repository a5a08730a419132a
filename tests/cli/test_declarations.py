"""Each command built on ``toolkit.cli.declare`` declares every keyword of its verb's options once: a flag of its
table, or a keyword of the library alone (its ``API_ONLY``, with the reason); the flags' defaults are the
options'; and a rule the options refuse reaches the command line as the usage error it always was."""

from __future__ import annotations

import pytest

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
from toolkit.cli import assessors as agreement_cli
from toolkit.cli import compare as compare_cli
from toolkit.cli import diagnose as diagnose_cli
from toolkit.cli import eval as eval_cli
from toolkit.cli import experiment as experiment_cli
from toolkit.cli import judge as judge_cli
from toolkit.cli import reproduce as reproduce_cli
from toolkit.cli import rerank as rerank_cli
from toolkit.cli import retrieval as retrieval_cli
from toolkit.cli import risk as risk_cli
from toolkit.cli import uncertainty as uncertainty_cli
from toolkit.cli.declare import Flag, values_of
from toolkit.experiments.experiment_options import ExperimentOptions
from toolkit.judging.judge_options import JudgeOptions
from toolkit.reproduction.reproduce_options import ReproduceOptions
from toolkit.reranking.rerank_options import RerankOptions
from toolkit.retrieval.fusion import FuseOptions

#: command -> its options class, its table, its keywords without a flag and those the command sets itself
TABLES = {
    "eval": (EvaluationOptions, eval_cli.EVAL, eval_cli.API_ONLY, {}),
    "compare": (CompareOptions, compare_cli.COMPARE, compare_cli.API_ONLY, {}),
    "diagnose": (DiagnosisOptions, diagnose_cli.DIAGNOSE, diagnose_cli.API_ONLY, diagnose_cli.SET_BY_COMMAND),
    "risk": (RiskOptions, risk_cli.RISK, risk_cli.API_ONLY, {}),
    "power": (PowerOptions, uncertainty_cli.POWER, uncertainty_cli.POWER_API_ONLY, {}),
    "pool-test": (PoolTestOptions, uncertainty_cli.POOL_TEST, uncertainty_cli.POOL_TEST_API_ONLY, {}),
    "agreement": (AgreementOptions, agreement_cli.AGREEMENT, agreement_cli.API_ONLY, {}),
    "judge": (JudgeOptions, judge_cli.JUDGE, judge_cli.API_ONLY, {}),
    "index": (IndexOptions, retrieval_cli.INDEX, retrieval_cli.INDEX_API_ONLY, {}),
    "bm25": (Bm25Options, retrieval_cli.BM25, retrieval_cli.BM25_API_ONLY, {}),
    "dense": (DenseOptions, retrieval_cli.DENSE, retrieval_cli.DENSE_API_ONLY, {}),
    "fuse": (FuseOptions, retrieval_cli.FUSE, retrieval_cli.FUSE_API_ONLY, {}),
    "rerank": (RerankOptions, rerank_cli.RERANK, rerank_cli.API_ONLY, rerank_cli.SET_BY_COMMAND),
    "experiment run": (ExperimentOptions, experiment_cli.RUN, experiment_cli.API_ONLY, {}),
    "reproduce": (ReproduceOptions, reproduce_cli.REPRODUCE, reproduce_cli.API_ONLY, {}),
}
#: Keywords set by two flags: ``--holes``, and ``--holes-over`` (which implies it); judge's ``cache``, by
#: ``--cache DIR`` and ``--no-cache``; rerank's caches alike.
TWO_FLAGS = {
    "holes": ["--holes", "--holes-over"],
    "cache": ["--cache", "--no-cache"],
    "embedding_cache": ["--embedding-cache", "--no-embedding-cache"],
    "answer_cache": ["--answer-cache", "--no-answer-cache"],
}
#: A command's own keywords set by two flags: fuse's ``hits``, by ``--k`` (Pyserini's spelling) and ``--hits``.
TWO_FLAGS_OF = {"fuse": {"hits": ["--k", "--hits"]}}
#: Keywords whose flag, not given, stands for another value than the library's default (with the reason).
CLI_DEFAULTS = {
    "judge": judge_cli.CLI_DEFAULTS,
    "index": retrieval_cli.INDEX_CLI_DEFAULTS,
    "dense": retrieval_cli.DENSE_CLI_DEFAULTS,
    "rerank": rerank_cli.CLI_DEFAULTS,
}


@pytest.mark.parametrize("command", list(TABLES))
def test_every_keyword_has_its_flag_or_a_reason_to_have_none(command):
    cls, rows, api_only, by_command = TABLES[command]
    flags = [row for row in rows if isinstance(row, Flag)]
    keywords = cls.keywords()
    assert all(f.keyword in keywords for f in flags), [f.keyword for f in flags if f.keyword not in keywords]
    for k in keywords:
        mine = [f for f in flags if f.keyword == k]
        if k in api_only or k in by_command:
            assert not mine and (api_only.get(k) or by_command.get(k)), k
        elif k in (two := {**TWO_FLAGS, **TWO_FLAGS_OF.get(command, {})}):
            assert [f.decls[0] for f in mine] == two[k], k
        else:  # one flag (aliases such as -m/--measure are one flag)
            assert len(mine) == 1, (k, [f.decls for f in mine])
    assert set(api_only) <= set(keywords) and set(by_command) <= set(keywords)
    assert not set(api_only) & set(by_command)


@pytest.mark.parametrize("command", list(TABLES))
def test_a_flags_default_is_its_keywords_default(command):
    cls, rows, *_ = TABLES[command]
    keywords = cls.keywords()
    differ = CLI_DEFAULTS.get(command, {})
    assert set(differ) <= set(keywords) and all(differ.values())
    for f in (row for row in rows if isinstance(row, Flag)):
        convert = f.convert or (lambda v: v)
        if f.settings.get("is_flag"):
            unset = convert(False)  # None: not given, the keyword keeps its default
            if f.keyword in differ:
                assert unset is not None and unset != keywords[f.keyword].default, f.keyword
            else:
                assert unset is None or unset == keywords[f.keyword].default is False, f.keyword
        elif f.settings.get("default") is not None:
            if f.keyword in differ:
                assert convert(f.settings["default"]) != keywords[f.keyword].default, f.keyword
            else:
                assert convert(f.settings["default"]) == keywords[f.keyword].default, f.keyword


def test_flag_values_become_keywords_and_the_later_given_flag_wins():
    rows = eval_cli.EVAL
    params = {"holes": True, "holes_over": None, "trec_eval": "10", "rel_map": None, "per_query": True}
    assert values_of(rows, params) == {"holes": True, "trec_eval": 10}
    assert params == {"per_query": True}  # the command's own values stay for it
    assert values_of(rows, {"holes": False, "holes_over": "retrieved"}) == {"holes": "retrieved"}
    assert values_of(rows, {"holes": True, "holes_over": "retrieved"}) == {"holes": "retrieved"}
    fuse = {"pyserini_k": 2, "hits": None, "params": ("phi=0.8",), "rrf_k": None, "out": "f"}
    assert values_of(retrieval_cli.FUSE, fuse) == {"hits": 2, "params": {"phi": "0.8"}}
    assert fuse == {"out": "f"}
    dense = {"ray_address": "auto", "workers": 3, "device": "cpu", "progress": False, "shard_size": None}
    assert values_of(retrieval_cli.DENSE, dense) == {"ray": "auto", "workers": 3, "device": "cpu", "progress": False}


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["bm25", "--index", "i", "--topics", "t", "--hits", "0", "--out", "r"], "Error: --hits must be >= 1, not 0"),
        (["bm25", "--index", "i", "--topics", "t", "--mu", "0", "--qld", "--out", "r"], "Error: query likelihood mu"),
        (
            ["dense", "--index", "i", "--topics", "t", "--hits", "-1", "--out", "r"],
            "Error: --hits must be >= 1, not -1",
        ),
        (["fuse", "--method", "sum", "--alpha", "0.3", "a", "b", "--out", "r"], "Error: --param alpha=...: sum has no"),
        (["fuse", "--method", "interpolation", "--alpha", "x", "a", "b", "--out", "r"], "Error: --param alpha: alpha"),
    ],
)
def test_a_setting_the_first_stage_refuses_is_its_error_before_any_file_is_read(cli, tmp_path, args, error):
    res = cli(*args)
    assert res.exit_code == 1, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(error), res.output
    assert "Traceback" not in res.output


#: The usage lines (in-process, click names the program ``main``; the bytes of ``twostage`` are checked by the
#: commands' own tests).
USAGE = {
    "eval": "Usage: main eval [OPTIONS] QRELS [NAME=]RUN|-|FOLDER|GLOB [RUN ...]\nTry 'main eval --help' for help.\n\n",
    "compare": "Usage: main compare [OPTIONS] RUNS...\nTry 'main compare --help' for help.\n\n",
    "diagnose": "Usage: main diagnose [OPTIONS]\nTry 'main diagnose --help' for help.\n\n",
    "risk": "Usage: main risk [OPTIONS] RUNS...\nTry 'main risk --help' for help.\n\n",
    "power": "Usage: main power [OPTIONS] [[NAME=]A [NAME=]B]\nTry 'main power --help' for help.\n\n",
    "pool-test": "Usage: main pool-test [OPTIONS] [NAME=]RUN [NAME=]RUN [RUN ...]\n"
    "Try 'main pool-test --help' for help.\n\n",
    "judge": "Usage: main judge [OPTIONS]\nTry 'main judge --help' for help.\n\n",
    "index": "Usage: main index [OPTIONS]\nTry 'main index --help' for help.\n\n",
    "rerank": "Usage: main rerank [OPTIONS]\nTry 'main rerank --help' for help.\n\n",
    "experiment": "Usage: main experiment run [OPTIONS] EXPERIMENT_FILE\nTry 'main experiment run --help' for help."
    "\n\n",
    "reproduce": "Usage: main reproduce [OPTIONS] [SPEC]\nTry 'main reproduce --help' for help.\n\n",
}
#: what every diagnose below is given (the refusals come before anything is read)
RUNS = ["--qrels", "q", "--first-stage", "f", "--reranked", "r", "--out", "{tmp}"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["eval", "-R", "prefs", "--relevance-map", "1:0", "q", "r"],
            "--relevance-map applies to -R qrels and qrels_div only",
        ),
        (["eval", "--holes", "-R", "prefs", "q", "r"], "--holes needs -R qrels and no -Z"),
        (["eval", "--holes-over", "retrieved", "-Z", "z", "q", "r"], "--holes needs -R qrels and no -Z"),
        (["eval", "--gain", "bogus", "q", "r"], "Invalid value: gain='bogus': expected 'linear', 'exp' or a label map"),
        (
            ["compare", "--test", "tukey", "--qrels", "q", "a", "b"],
            "--test tukey compares all pairs: add --family all-pairs",
        ),
        (["compare", "--discount", "jk:x", "--qrels", "q", "a", "b"], "Invalid value: discount="),
        (["diagnose", *RUNS, "--curve-depths", "10,0"], "Invalid value for '--curve-depths': depths must be >= 1"),
        (
            ["diagnose", *RUNS, "--curve-depths", "10,x"],
            "Invalid value for '--curve-depths': expected depths like 10,20,50, got '10,x'",
        ),
        (["diagnose", *RUNS, "--pair", "rr"], "Invalid value for '--pair': expected RERANKED=FIRST_STAGE"),
        (["diagnose", *RUNS, "-m", "judged.10"], "Invalid value for '-m': judged_10 has no ceiling"),
        (
            ["diagnose", *RUNS, "-m", "AP(rel=2)@100", "-l", "1"],
            "Invalid value for '-m': --measure AP(rel=2)@100 sets relevance level 2, --recall-level 1 another",
        ),
        (
            ["risk", "--alpha", "1", "--alpha", "-1", "--qrels", "q", "a", "b"],
            "Invalid value for '--alpha': the weight of a loss must be a finite number >= 0, got -1.0",
        ),
        (["risk", "--gain", "bogus", "a", "b"], "Invalid value: gain='bogus'"),
        (
            ["power", "--sd", "0.2", "--delta", "0.05", "--power", "1"],
            "Invalid value for '--power': --power must lie strictly between 0 and 1, got 1.0",
        ),
        (
            ["power", "--sd", "0.2", "--delta", "0.05", "--alpha", "0"],
            "Invalid value for '--alpha': --alpha must lie strictly between 0 and 1, got 0.0",
        ),
        (["power", "--sd", "0", "--delta", "0.05"], "Invalid value for '--sd': must be > 0"),
        (["power", "--sd", "0.2", "--delta", "0"], "Invalid value for '--delta': must be non-zero"),
        (
            ["pool-test", "--qrels", "q", "--pool-depth", "0", "a", "b"],
            "Invalid value for '--pool-depth': must be >= 1, got 0",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--out", "o", "--holes-only", "--calibrate", "--qrels", "q"],
            "--holes-only and --calibrate exclude each other\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--out", "o", "--calibrate-sample", "5"],
            "--calibrate-sample samples human-judged documents beside the holes: add --holes-only\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--backend", "openai"],
            "--backend openai needs --endpoint URL\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--out", "o", "--calibrate"],
            "--holes-only and --calibrate need --qrels (the human judgments)\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--out", "o", "--rank", "a", "--rank", "b"],
            "--rank ranks systems in a calibration: --calibrate or --calibrate-sample\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--ray"],
            "--ray needs --out (the job's shards are kept in OUT.shards)\n",
        ),
        (
            ["judge", "--candidates", "c", "--model", "m", "--workers", "2", "--out", "o"],
            "--workers only apply with --ray\n",
        ),
        (
            ["index", "--collection", "absent", "--ray", "auto"],
            "--ray distributes dense encoding (--dense); Lucene indexing runs in Anserini",
        ),
        (
            ["rerank", "--candidates", "c", "--model", "m", "--backend", "listwise", "--ray", "--out", "o"],
            "--backend listwise runs its requests concurrently in this process; drop --ray\n",
        ),
        (
            [
                "rerank",
                "--candidates",
                "c",
                "--model",
                "m",
                "--backend",
                "listwise",
                "--kind",
                "bi-encoder",
                "--out",
                "o",
            ],
            "--kind is for the scoring backends; --backend listwise reorders windows\n",
        ),
        (
            ["rerank", "--candidates", "c", "--model", "m", "--backend", "listwise", "--endpoint", " ", "--out", "o"],
            "--endpoint is empty\n",
        ),
        (
            ["rerank", "--candidates", "c", "--model", "m", "--endpoint", "http://h/v1", "--out", "o"],
            "--endpoint is for --backend listwise\n",
        ),
        (
            ["rerank", "--candidates", "c", "--model", "m", "--alpha", "--out", "o"],
            "--passes, --context-size, --max-passage-words, --variable-passages, --few-shot, --system-message, "
            "--alpha, --first-token, --api and --tokenizer are for --backend listwise\n",
        ),
        (
            ["rerank", "--candidates", "c", "--model", "m", "--workers", "2", "--out", "o"],
            "--workers only apply with --ray\n",
        ),
        (
            ["experiment", "run", "absent.yaml", "--out", "{tmp}", "--workers", "2", "--gpus-per-worker", "1"],
            "--workers, --gpus-per-worker only apply with --ray\n",
        ),
        (
            ["experiment", "run", "absent.yaml", "--out", "{tmp}", "--ray", "--shard-size", "4"],
            "--shard-size does not apply to experiment run: each grid point is one Ray task\n",
        ),
        (
            ["reproduce", "--allow-endpoint", "localhost", "--allow-endpoint", "http://", "absent.yaml"],
            "Invalid value for '--allow-endpoint': 'http://' names no host\n",
        ),
    ],
)
def test_a_refused_option_is_the_commands_usage_error(cli, tmp_path, args, error):
    res = cli(*(str(a).replace("{tmp}", str(tmp_path / "out")) for a in args))
    assert res.exit_code == 2
    assert res.output.startswith(USAGE[args[0]] + "Error: " + error), res.output
    assert res.output.count("\n") == 4  # one message line, no traceback


def test_judge_flags_become_its_options():
    params = {
        "backend": "auto",
        "cache_dir": "folder",
        "no_cache": False,
        "no_progress": False,
        "query_ids": (),
        "concurrency": 3,
        "ray_address": None,
        "fmt": "json",
    }
    given = values_of(judge_cli.JUDGE, params)
    assert given == {"cache": "folder", "progress": True, "concurrency": 3}  # auto: the library's None
    assert params == {"fmt": "json"}
    given = values_of(judge_cli.JUDGE, {"backend": "openai", "cache_dir": "f", "no_cache": True, "query_ids": ("q",)})
    assert given == {"backend": "openai", "cache": False, "query_ids": ["q"]}  # --no-cache wins over --cache DIR


def test_rerank_flags_become_its_options():
    params = {
        "query_id_values": ("q1,q2", "q3"),
        "no_progress": False,
        "cache_dir": None,
        "no_embedding_cache": False,
        "answer_cache_dir": None,
        "no_answer_cache": False,
        "batch_size": 64,
        "tag": None,
    }
    given = values_of(rerank_cli.RERANK, params)
    # not given: the command's progress bar and default embedding cache
    assert given == {"query_ids": ["q1", "q2", "q3"], "progress": True, "embedding_cache": True, "batch_size": 64}
    assert params == {"tag": None}  # the command's own --tag, its default OUT's stem
    assert values_of(rerank_cli.RERANK, {"cache_dir": "f", "no_embedding_cache": False}) == {"embedding_cache": "f"}
    assert values_of(rerank_cli.RERANK, {"cache_dir": "f", "no_embedding_cache": True}) == {"embedding_cache": False}
    assert values_of(rerank_cli.RERANK, {"answer_cache_dir": None, "no_answer_cache": True}) == {"answer_cache": False}
    assert values_of(rerank_cli.RERANK, {"query_id_values": ()}) == {}


def test_the_calibration_options_are_flags_of_judge_with_their_defaults():
    from toolkit.judging.calibration import CalibrationOptions

    flags = {f.keyword: f for f in judge_cli.JUDGE if isinstance(f, Flag)}
    for k, spec in CalibrationOptions.keywords().items():
        assert JudgeOptions.keywords()[k].field == "calibrating", k  # JudgeOptions' nested piece
        flag = flags[k]
        if k in judge_cli.CLI_DEFAULTS:
            assert flag.settings["default"] != spec.default, k
        else:
            assert flag.settings["default"] == spec.default, k
    assert CalibrationOptions().kappa_threshold is None and flags["kappa_threshold"].settings["default"] == 0.4


def test_judge_calibrate_flags_become_the_calibration_options():
    from toolkit.judging.calibration import CalibrationOptions

    params = {
        "measure": "P.2",
        "alpha": 0.2,
        "permutations": 50,
        "seed": 3,
        "correction": "bonferroni",
        "kappa_threshold": -0.5,
        "calibrate": True,
        "fmt": "text",
    }
    given = values_of(judge_cli.JUDGE, params)
    assert params == {"fmt": "text"}
    options = JudgeOptions.from_keywords(model="m", **given)
    assert options.calibration is True
    assert options.calibrating == CalibrationOptions(
        seed=3, measure="P.2", alpha=0.2, permutations=50, correction="bonferroni", kappa_threshold=-0.5
    )
