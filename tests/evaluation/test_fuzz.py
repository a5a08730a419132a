"""The differential fuzzer (``scripts/fuzz_eval.py``) on every run of the suite: a few hundred seeded cases.

Each case batches up to 30 queries into one invocation (ties, near-ties, graded and negative labels,
missing queries both ways, shallow and deep runs, random options, rel formats and measure parameters) and
must print byte for byte what the trec_eval binary prints: the 9.0.4 binary of Pyserini's jar, and
trec_eval 10.0-rc3 built from source when a compiler is here. Cases that fall under a deliberate
difference are skipped and counted by name (``toolkit.evaluation.differences``, the table of docs/evaluate.md).
The same generator checks per-query values against pytrec_eval, an oracle in another process model.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from needs import lacking, required
from oracles import native_trec_eval, trec_eval_10

from toolkit.evaluation.differences import BY_NAME, DIFFERENCES, readme_table

REPO = Path(__file__).resolve().parents[2]


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_eval", REPO / "scripts" / "fuzz_eval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_eval"] = module
    spec.loader.exec_module(module)
    return module


fuzz_eval = _load_fuzzer()


def _report(summary, generation: int) -> str:
    shown = "\n\n".join(text for _, text in summary.mismatches if text)
    return f"{summary.text(generation)}\n{shown}"


def test_against_trec_eval_9_binary():
    binary = native_trec_eval()
    if binary is None:
        lacking("no native trec_eval 9.0.4 for this machine")
    summary = fuzz_eval.fuzz(binary, 9, cases=250, seed=20261203, shrink_first=1)
    assert not summary.mismatches, _report(summary, 9)
    assert summary.agreed >= 200  # the skips stay a minority: the fuzzer still tests something
    assert summary.lines_compared > 10_000


def test_against_trec_eval_10_binary():
    binary, why = trec_eval_10()
    if binary is None:
        lacking(why)
    summary = fuzz_eval.fuzz(binary, 10, cases=250, seed=20261203, shrink_first=1)
    assert not summary.mismatches, _report(summary, 10)
    assert summary.agreed >= 180
    assert summary.lines_compared > 10_000


PYTREC_FAMILIES = {
    "map",
    "P",
    "recall",
    "ndcg",
    "ndcg_cut",
    "map_cut",
    "recip_rank",
    "bpref",
    "Rprec",
    "set_P",
    "set_recall",
    "set_relative_P",
    "set_map",
    "set_F",
    "num_rel_ret",
    "num_ret",
    "num_rel",
    "success",
    "relative_P",
    "infAP",
    "binG",
    "iprec_at_recall",
    "Rprec_mult",
    "num_nonrel_judged_ret",
}


def _pytrec_case(rng: random.Random):
    """A generated qrels case restricted to what pytrec_eval takes (no -M, -N, -Z, comments, nicknames)."""
    while True:
        case = fuzz_eval.generate(rng, 9)
        # pytrec_eval splits its measure strings at commas, so name=value pairs cannot reach it (ndcg bare only)
        measures = [m for m in case.measures if m.partition(".")[0] in PYTREC_FAMILIES and "=" not in m]
        if case.rel_format != "qrels" or case.zscores is not None or not measures:
            continue
        case.measures = measures
        if fuzz_eval.known_difference(case, 9) or any(x.startswith("#") for x in case.qrels + case.run):
            continue
        return case


def test_per_query_values_equal_pytrec_eval():
    pytrec_eval = required(
        "pytrec_eval", "pytrec_eval is an independent oracle of trec_eval's measures (pip install .[test])"
    )
    from oracles import pytrec_inputs

    from toolkit.data.records import qrels_from_rows, run_from_rows
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import EvalSettings, parse_measures

    rng = random.Random(7)
    compared = 0
    for _ in range(120):
        case = _pytrec_case(rng)
        level = next((int(o[2:]) for o in case.options if o.startswith("-l")), 1)
        judged_only = "-J" in case.options
        qrels = qrels_from_rows([(q, d, int(r)) for q, _, d, r in (x.split() for x in case.qrels)])
        run = run_from_rows([(q, d, float(s)) for q, _, d, _, s, _ in (x.split() for x in case.run)])
        if level == 0:  # pytrec_eval refuses -l 0
            continue
        # pytrec_eval keeps scores in trec_eval 9's float, so near-ties (1 + 1e-9) are ties there too
        settings = EvalSettings(relevance_level=level, judged_only=judged_only, score_precision="float32")
        ours = evaluate(qrels, run, parse_measures(case.measures, 9), settings)
        q, r = pytrec_inputs(qrels.frame, run.frame)
        oracle = pytrec_eval.RelevanceEvaluator(
            q, set(case.measures), relevance_level=level, judged_docs_only_flag=judged_only
        ).evaluate(r)
        assert set(ours.evaluated) == set(oracle), case.command()
        for m, values in ours.columns.items():
            for qid, value in zip(ours.evaluated, values.tolist()):
                if m.name in oracle[qid]:
                    compared += 1
                    assert value == pytest.approx(oracle[qid][m.name], abs=1e-12, nan_ok=True), (
                        case.command(),
                        qid,
                        m.name,
                    )
    assert compared > 5_000


def test_shrinks_a_mismatch_to_a_minimal_reproducer(tmp_path):
    binary = native_trec_eval()
    if binary is None:
        lacking("no native trec_eval 9.0.4 for this machine")
    # a wrong trec_eval: the real one, except that it prints map as 0.9999 whenever a qrels line has label 3
    fake = tmp_path / "trec_eval"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import re, subprocess, sys\n"
        f"out = subprocess.run([{binary!r}, *sys.argv[1:]], capture_output=True, text=True).stdout\n"
        "if any(line.split()[3:4] == ['3'] for line in open(sys.argv[-2])):\n"
        "    out = re.sub(r'^(map +\\t[^\\t]+\\t).*$', r'\\g<1>0.9999', out, flags=re.M)\n"
        "sys.stdout.write(out)\n"
    )
    fake.chmod(0o755)
    rng = random.Random(3)
    while True:
        case = fuzz_eval.generate(rng, 9)
        case.rel_format, case.zscores, case.measures = "qrels", None, ["map", "P.5", "ndcg"]
        case.options = [o for o in case.options if o != "-n"]
        case.qrels = [x for x in case.qrels if not x.startswith("#")]
        if any(x.split()[3] == "3" for x in case.qrels) and fuzz_eval.known_difference(case, 9) is None:
            break
    assert fuzz_eval.differs(case, str(fake), 9)[0]
    small = fuzz_eval.shrink(case, str(fake), 9)
    assert fuzz_eval.differs(small, str(fake), 9)[0]
    assert small.measures == ["map"]
    assert len(small.qrels) == 1 and small.qrels[0].split()[3] == "3"
    assert len(small.run) == 1
    text = fuzz_eval.reproducer(small, str(fake), 9)
    assert "qrels:" in text and "run:" in text and "command: trec_eval" in text and "0.9999" in text


def test_the_fuzzer_knows_every_difference_by_name():
    known = set(fuzz_eval.KNOWN) | set(fuzz_eval.KNOWN_LINES)
    assert known <= set(BY_NAME)
    assert known == {d.name for d in DIFFERENCES if d.fuzzed}


def test_docs_table_is_the_code_table():
    page = (REPO / "docs" / "evaluate.md").read_text()
    section = page.split("## Where twostage deliberately differs from trec_eval", 1)[1].split("\n## ", 1)[0]
    assert readme_table() in section
    assert section.count("\n| `") == len(DIFFERENCES)  # no row that is not in the code table
