"""trec_eval 10's dcg, ideal_dcg and yaap: against values computed here from their definitions, and the binary.

The definitions (``m_ndcg.c``'s ``te_calc_ndcg`` for dcg and ideal_dcg, ``m_yaap.c``) are rewritten below
in plain Python, one document at a time, independently of twostage's vectorised code: the ranking is score
descending then document id descending; gain(label) = label unless a ``L=G`` parameter says otherwise;
dcg adds gain / log2(rank + 1) over retrieved documents whose gain is not 0; ideal_dcg the same over the
judged gains > 0 sorted decreasingly; yaap = ln((1 + S) / (1 + R - S)), S = sum over relevant retrieved of
(relevant so far / rank). The same files then go through the native trec_eval 10 binary, byte for byte.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from needs import lacking
from oracles import _trec_eval_10_source, run_binary, trec_eval_10

from toolkit.measures.names import NICKNAMES
from toolkit.measures.registry import REGISTRY, TREC_ORDER

QRELS = {
    "q1": {"a": 3, "b": 1, "c": 0, "d": 2, "e": -1, "f": 2},
    "q2": {"a": 1, "x": 1, "y": 0},
    "q3": {"a": 0, "b": -1},  # nothing relevant
    "q4": {"m": 2},  # judged, missing from the run (-c)
}
RUN = {  # ties on purpose: q1's b and c tie (c first: ids descending), q2's all three tie
    "q1": {"a": 1.5, "b": 2.0, "c": 2.0, "z": 3.0, "e": 1.0, "f": 0.5},
    "q2": {"y": 1.0, "x": 1.0, "a": 1.0, "w": 0.2},
    "q3": {"a": 4.0, "b": 3.0},
    "q9": {"a": 1.0},  # not judged: ignored
}


def ranking(q: str) -> list[str]:
    return [d for d, _ in sorted(RUN[q].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def gain_of(label: int | None, gains: dict[int, float]) -> float:
    if label is None or label < 0:
        return 0.0
    return gains.get(label, float(label))


def dcg(q: str, gains: dict[int, float]) -> float:
    s = 0.0
    for i, d in enumerate(ranking(q)):
        g = gain_of(QRELS[q].get(d), gains)
        if g != 0:
            s += g / math.log2(i + 2)
    return s


def ideal_dcg(q: str, gains: dict[int, float]) -> float:
    ideal = sorted((g for g in (gain_of(lab, gains) for lab in QRELS[q].values()) if g > 0), reverse=True)
    return sum(g / math.log2(i + 2) for i, g in enumerate(ideal))


def yaap(q: str, level: int) -> float:
    R = sum(1 for lab in QRELS[q].values() if lab >= level)
    s, so_far = 0.0, 0
    for i, d in enumerate(ranking(q) if q in RUN else ["ceci_nest_pas_un_docno"]):
        lab = QRELS[q].get(d)
        if lab is not None and lab >= level:
            so_far += 1
            s += so_far / (i + 1)
    return math.log((1.0 + s) / (1.0 + R - s))


def write(folder: Path, queries) -> tuple[str, str]:
    q = folder / "qrels"
    q.write_text("".join(f"{qid} 0 {d} {lab}\n" for qid in queries for d, lab in QRELS[qid].items()))
    r = folder / "run"
    r.write_text("".join(f"{qid} Q0 {d} 1 {s} t\n" for qid, docs in RUN.items() for d, s in docs.items()))
    return str(q), str(r)


@pytest.fixture()
def files(tmp_path: Path) -> tuple[str, str]:
    """Every judged query in the run (trec_eval 10 stops on a judged query missing from it without -c)."""
    return write(tmp_path, ("q1", "q2", "q3"))


@pytest.fixture()
def files_c(tmp_path: Path) -> tuple[str, str]:
    return write(tmp_path, QRELS)


def lines(name: str, per_query: dict[str, float]) -> list[str]:
    return [f"{name:<22}\t{q}\t{v:6.4f}" for q, v in per_query.items()]


CASES = [
    ("dcg", [], lambda q: dcg(q, {})),
    ("ideal_dcg", [], lambda q: ideal_dcg(q, {})),
    ("dcg.1=3,2=9,0=-0.5", [], lambda q: dcg(q, {1: 3.0, 2: 9.0, 0: -0.5})),
    ("ideal_dcg.3=7,1=4", [], lambda q: ideal_dcg(q, {3: 7.0, 1: 4.0})),
    ("yaap", [], lambda q: yaap(q, 1)),
    ("yaap", ["-l2"], lambda q: yaap(q, 2)),
]


@pytest.mark.parametrize(("measure", "options", "value"), CASES, ids=[f"{m} {' '.join(o)}" for m, o, _ in CASES])
def test_against_the_definition_and_trec_eval_10(cli, files, measure, options, value):
    name = measure.replace(".", "_", 1)
    queries = ["q1", "q2", "q3"]
    per_query = {q: value(q) for q in queries}
    mean = sum(per_query.values()) / len(queries)
    args = ["-q", *options, "-m", measure, *files]
    res = cli("eval", "--no-provenance", "--trec-eval", "10", *args)
    assert res.exit_code == 0, res.output
    got = res.stdout.splitlines()
    assert got == [*lines(name, per_query), f"{name:<22}\tall\t{mean:6.4f}"]
    # to the last bit, not only to four decimals: the JSON output carries full precision
    js = cli("eval", "--no-provenance", "--trec-eval", "10", "--format", "json", *args)
    doc = json.loads(js.stdout)
    for q in queries:
        assert doc["per_query"][q][name] == pytest.approx(per_query[q], rel=1e-15, abs=1e-15)
    binary, why = trec_eval_10()
    if binary is None:
        lacking(why)
    assert run_binary(binary, args) == (0, res.stdout)


def test_ideal_dcg_keeps_trec_eval_10s_order_of_gains_less_than_1_apart(cli, files):
    # setup_gains sorts levels by (int)(gain difference): level 3's gain 0.5 and level 0's gain 0 compare
    # equal, glibc's stable merge sort leaves 0.5 below 0, and the ideal walk stops at the first gain <= 0:
    # q1's ideal is b (4), d (2), f (2), without a's 0.5: 4 + 2 / log2(3) + 2 / log2(4)
    res = cli("eval", "--no-provenance", "--trec-eval", "10", "-q", "-m", "ideal_dcg.3=0.5,1=4", *files)
    q1 = 4 + 2 / math.log2(3) + 2 / 2
    assert res.stdout.splitlines()[0] == f"{'ideal_dcg_3=0.5,1=4':<22}\tq1\t{q1:6.4f}"
    binary, why = trec_eval_10()
    if binary is None:
        lacking(why)
    assert run_binary(binary, ["-q", "-m", "ideal_dcg.3=0.5,1=4", *files]) == (0, res.stdout)


def test_yaap_under_c_evaluates_the_missing_query_as_trec_eval_10_does(cli, files_c):
    # q4 is judged (R = 1) and missing: trec_eval 10 ranks one placeholder document, S = 0, ln(1 / 2)
    args = ["-q", "-c", "-m", "yaap", *files_c]
    res = cli("eval", "--no-provenance", "--trec-eval", "10", *args)
    per_query = {q: yaap(q, 1) for q in ("q1", "q2", "q3", "q4")}
    assert per_query["q4"] == math.log(0.5)
    assert res.stdout.splitlines()[:4] == lines("yaap", per_query)
    binary, why = trec_eval_10()
    if binary is None:
        lacking(why)
    assert run_binary(binary, args) == (0, res.stdout)


def test_dcg_and_ideal_dcg_need_trec_eval_10_while_yaap_is_in_9(cli, files):
    for measure in ("dcg", "ideal_dcg"):
        res = cli("eval", "--trec-eval", "9", "-m", measure, *files)
        assert res.exit_code == 1 and "trec_eval 10 measure" in res.output
    res = cli("eval", "--no-provenance", "--trec-eval", "9", "-q", "-m", "yaap", *files)
    assert res.exit_code == 0
    from oracles import native_trec_eval

    if native_trec_eval():  # 9.0.4 has yaap already (in no nickname)
        assert run_binary(native_trec_eval(), ["-q", "-m", "yaap", *files]) == (0, res.stdout)


def test_listed_by_twostage_measures(cli):
    out = cli("measures").stdout
    for name in ("dcg", "ideal_dcg", "yaap"):
        assert re.search(rf"^{name}\s", out, re.M), name
        assert "m_" in cli("measures", name).stdout


def _c_list(source: str, name: str) -> list[str]:
    body = re.search(rf"{name}\[\] = \{{(.*?)\}};", source, re.S).group(1)
    return re.findall(r'"([^"]+)"', body) if '"' in body else re.findall(r"&te_meas_(\w+)", body)


def test_measure_table_and_nicknames_are_those_of_measures_c():
    src = _trec_eval_10_source()
    if src is None:
        lacking("trec_eval 10.0-rc3 source not found")
    text = (src / "measures.c").read_text()
    table = _c_list(text, "te_trec_measures")
    trec = [n for n in TREC_ORDER if REGISTRY[n].source.startswith("trec_eval")]  # not judged, not the peers'
    assert trec == table
    assert {n for n in REGISTRY if REGISTRY[n].source.startswith("trec_eval")} == set(table)
    for nick, c_name in [
        ("official", "off_names"),
        ("all_trec", "trec_names"),
        ("set", "set_names"),
        ("all_prefs", "prefs_names"),
        ("prefs", "prefs_off_name"),
        ("qrels_jg", "qrels_jg_names"),
    ]:
        assert sorted(NICKNAMES[nick]) == sorted(_c_list(text, c_name)), nick
