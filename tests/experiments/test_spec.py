"""The experiment file's checks: every mistake is an error naming the file and the YAML line, before anything runs."""

from __future__ import annotations

import textwrap

import pytest

from toolkit.errors import InputFormatError
from toolkit.experiments.spec import config_names, outputs, parse_experiment

GOOD = """\
name: t
topics: cacm
qrels: cacm
index: {path: idx}
evaluation:
  measures: [map, ndcg_cut.10]
  baseline: bm25
stages:
  bm25:
    type: bm25
    k1: [0.6, 0.9]
    b: [0.4, 0.75]
    tune: {metric: map, folds: 5, seed: 3}
  rm3:
    type: rm3
    input: bm25
  minilm:
    type: rerank
    input: bm25
    model: all-MiniLM-L6-v2
    depth: [20, 50]
"""


def write(tmp_path, text):
    p = tmp_path / "exp.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_good_file_expands_its_grids(tmp_path):
    exp = parse_experiment(write(tmp_path, GOOD))
    assert exp.order == ("bm25", "rm3", "minilm")
    assert [p["k1"] for p in exp.stages["bm25"].points()] == [0.6, 0.6, 0.9, 0.9]
    assert exp.stages["bm25"].tune.folds == 5 and exp.stages["bm25"].tune.seed == 3
    assert config_names(exp.stages, exp.order) == [
        "bm25(k1=0.6,b=0.4)",
        "bm25(k1=0.6,b=0.75)",
        "bm25(k1=0.9,b=0.4)",
        "bm25(k1=0.9,b=0.75)",
        "bm25[tuned]",
        "rm3",
        "minilm(depth=20)",
        "minilm(depth=50)",
    ]
    # a stage fed by an untuned grid runs once per input configuration, and says which
    untuned = parse_experiment(write(tmp_path, GOOD.replace("    tune: {metric: map, folds: 5, seed: 3}\n", "")))
    rows = outputs(untuned.stages, untuned.order)["rm3"]
    assert [r[0] for r in rows][:2] == ["rm3<bm25(k1=0.6,b=0.4)>", "rm3<bm25(k1=0.6,b=0.75)>"] and len(rows) == 4


@pytest.mark.parametrize(
    "old, new, line, message",
    [
        ("    type: rm3\n", "    type: rm4\n", 15, "stage 'rm3': unknown type 'rm4'"),
        (
            "    b: [0.4, 0.75]\n",
            "    b: [0.4, 0.75]\n    mu: [100, 1000]\n",
            13,
            "stage 'bm25' \\(bm25\\) takes no parameter 'mu'",
        ),
        ("    depth: [20, 50]\n", "    depth: [20, 50]\n    k1: 0.9\n", 22, "takes no parameter 'k1'"),
        ("  baseline: bm25\n", "  baseline: bm26\n", 7, "baseline 'bm26' is not a stage or configuration"),
        ("", "", 17, "stages form a cycle: minilm -> second -> minilm"),
        ("    input: bm25\n  minilm", "    input: bm255\n  minilm", 16, "input 'bm255' is not a stage"),
        ("name: t\n", "name: t\nhitz: 10\n", 2, "unknown key 'hitz'"),
        ("[map, ndcg_cut.10]", "[map, ndcg_cutt.10]", 6, "did you mean 'ndcg_cut.10'"),
        ("folds: 5, seed: 3", "folds: 5, queries: [1, 2]", 13, "exactly one of folds"),
        ("folds: 5", "folds: 1", 13, "folds must be an integer >= 2"),
        ("    model: all-MiniLM-L6-v2\n", "", 17, "stage 'minilm' \\(rerank\\) needs 'model'"),
        ("    type: bm25\n", "    type: bm25\n    type: qld\n", 11, "key 'type' given twice"),
        ("    input: bm25\n  minilm", "    input: minilm\n  minilm", 16, "rm3 expands a bm25 or qld stage"),
    ],
)
def test_bad_file_names_the_line(tmp_path, old, new, line, message):
    if "cycle" in message:  # two rerankers, each reranking the other's output
        text = GOOD.replace("    type: rerank\n    input: bm25\n", "    type: rerank\n    input: second\n")
        text += "  second:\n    type: rerank\n    input: minilm\n    model: m\n"
    else:
        assert old in GOOD
        text = GOOD.replace(old, new, 1)
    path = write(tmp_path, text)
    with pytest.raises(InputFormatError, match=message) as err:
        parse_experiment(path)
    assert err.value.path == str(path) and err.value.line == line, str(err.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    with pytest.raises(InputFormatError, match="not valid YAML") as err:
        parse_experiment(write(tmp_path, "name: t\nstages: [a\n"))
    assert err.value.line == 3


def test_cli_exits_1_before_running_anything(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("    type: rm3\n", "    type: rm4\n"))
    res = cli("experiment", "run", path, "--out", tmp_path / "out")
    assert res.exit_code == 1 and f"{path}:15: stage 'rm3': unknown type 'rm4'" in res.stderr
    assert not (tmp_path / "out").exists()
