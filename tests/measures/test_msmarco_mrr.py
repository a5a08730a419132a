"""``MRR@10`` is MS MARCO's official MRR@10: the number its evaluation script prints. The oracle is the script
itself, run as a subprocess: ir_measures 0.4.3 ships it as ``ir_measures/bin/msmarco_eval.py`` (Campos and van
Haasteren's ``ms_marco_eval.py``, which prints the MRR of each query there; the one line it comments out, the
official mean, is ``MRR / len(qids_to_relevant_passageids)``: the sum over the run's queries divided by the number
of queries of the reference file, computed here from that file). The script reads MS MARCO-format runs and a
tab-separated reference whose every line is a relevant passage; the DL19/DL20 runs and qrels are written so."""

from __future__ import annotations

import ast
import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
from needs import lacking

import toolkit as ts
from toolkit.errors import UnknownMeasureError
from toolkit.measures.names import parse_measure_groups

RUNS = sorted(
    f"run.{c}.{m}.top100.txt"
    for c in ("dl19", "dl20")
    for m in ("bm25", "bm25-rm3", "splade-pp-ed", "tasb", "openai-ada2")
)
QRELS = {"dl19": "qrels.dl19-passage.txt", "dl20": "qrels.dl20-passage.txt"}


def official_script() -> Path:
    spec = importlib.util.find_spec("ir_measures")
    if spec is None or spec.origin is None:
        lacking("ir_measures (the test oracle's package, with its msmarco_eval.py) is not installed")
    return Path(spec.origin).parent / "bin" / "msmarco_eval.py"


def official(reference: Path, candidate: Path, cutoff: int = 10) -> tuple[dict[str, float], float]:
    """(MRR@cutoff of each query the script scores, the official mean) as MS MARCO's script computes them."""
    if cutoff == 10:
        cmd = [sys.executable, str(official_script()), str(reference), str(candidate)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("MRR @10 by query: "))
        by_query = ast.literal_eval(line.removeprefix("MRR @10 by query: "))
    else:  # the script's max_rank, through its own functions (its command line fixes 10)
        code = (
            "import sys, json; sys.path.insert(0, sys.argv[1]); import msmarco_eval as m; "
            "r = m.compute_metrics_from_files(sys.argv[2], sys.argv[3], max_rank=int(sys.argv[4])); "
            "print(json.dumps({str(k): v for k, v in r[f'MRR @{sys.argv[4]} by query'].items()}))"
        )
        cmd = [sys.executable, "-c", code, str(official_script().parent), str(reference), str(candidate), str(cutoff)]
        by_query = ast.literal_eval(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    queries = {ln.split("\t")[0] for ln in reference.read_text().splitlines() if ln.strip()}
    values = {str(q): float(v) for q, v in by_query.items()}
    return values, math.fsum(values.values()) / len(queries)


def reference_of(qrels: Path, out: Path, level: int) -> Path:
    """MS MARCO's reference format: ``qid<TAB>0<TAB>pid<TAB>1``, one line per passage labelled >= ``level``."""
    lines = [ln.split() for ln in qrels.read_text().splitlines() if ln.strip()]
    out.write_text("".join(f"{f[0]}\t0\t{f[2]}\t1\n" for f in lines if int(f[3]) >= level))
    return out


def msmarco_run_of(trec_run: Path, out: Path, keep=lambda qid: True) -> Path:
    lines = [ln.split() for ln in trec_run.read_text().splitlines() if ln.strip()]
    out.write_text("".join(f"{f[0]}\t{f[2]}\t{f[3]}\n" for f in lines if keep(f[0])))
    return out


def _check(qrels: Path, run: Path, reference: Path, level: int, cutoff: int = 10, **options) -> None:
    values, mean = official(reference, run, cutoff)
    ev = ts.evaluate(qrels, run, [f"MRR@{cutoff}"], relevance_level=level, **options)
    ours = ev.per_query[f"MRR@{cutoff}"].to_dict()
    for q, v in values.items():
        assert ours[q] == v, (q, ours[q], v)  # every query the script scores, to the bit
    assert ev.summary[f"MRR@{cutoff}"] == pytest.approx(mean, rel=0, abs=1e-15)


@pytest.mark.parametrize("name", RUNS)
def test_mrr_at_10_is_ms_marcos_official_number(msmarco, tmp_path, name):
    """Every DL19/DL20 run, relevant at label >= 1, >= 2 (the TREC DL convention for binary measures) and >= 3
    (where 7 DL19 and 8 DL20 queries have no relevant passage: the official mean leaves them out)."""
    qrels = msmarco / QRELS[name.split(".")[1]]
    run = msmarco_run_of(msmarco / "runs" / name, tmp_path / "run.tsv")
    for level in (1, 2, 3):
        _check(qrels, run, reference_of(qrels, tmp_path / f"ref{level}.tsv", level), level)


def test_queries_missing_from_the_run_count_0_with_or_without_c(msmarco, tmp_path):
    qrels = msmarco / QRELS["dl19"]
    judged = sorted({ln.split()[0] for ln in qrels.read_text().splitlines()})
    run = msmarco_run_of(
        msmarco / "runs" / "run.dl19.tasb.top100.txt", tmp_path / "run.tsv", keep=lambda q: q not in judged[:10]
    )
    reference = reference_of(qrels, tmp_path / "ref.tsv", 1)
    _check(qrels, run, reference, 1)
    _check(qrels, run, reference, 1, complete=True)
    _check(qrels, run, reference, 1, trec_eval=10, complete=True)
    ev = ts.evaluate(qrels, run, ["MRR@10", "RR@10"])
    assert ev.summary["MRR@10"] < ev.summary["RR@10"]  # ir_measures' RR@10 here: the mean over the run's queries


def test_relevance_level_0_is_the_script_reading_graded_qrels_whole(msmarco, tmp_path):
    """The script reads no label: given the graded qrels as they are, every judged passage is relevant to it,
    which is ``-l 0``."""
    qrels = msmarco / QRELS["dl20"]
    run = msmarco_run_of(msmarco / "runs" / "run.dl20.bm25.top100.txt", tmp_path / "run.tsv")
    _check(qrels, run, reference_of(qrels, tmp_path / "ref.tsv", 0), 0)


def test_mrr_at_other_cutoffs_is_the_scripts_max_rank(msmarco, tmp_path):
    qrels = msmarco / QRELS["dl19"]
    run = msmarco_run_of(msmarco / "runs" / "run.dl19.bm25.top100.txt", tmp_path / "run.tsv")
    for cutoff in (1, 3, 100):
        _check(qrels, run, reference_of(qrels, tmp_path / "ref.tsv", 2), 2, cutoff=cutoff)


def test_mrr_by_hand(tmp_path):
    """Four judged queries: q1 relevant at rank 2 (1/2), q2 relevant only at rank 11 (0 at @10), q3 without a
    relevant passage (listed 0, left out of the mean), q4 relevant but missing from the run (0); q5 has no
    judgments (ignored). Mean: (1/2 + 0 + 0) / 3 queries with a relevant passage."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 0\nq1 0 b 1\nq2 0 k 2\nq3 0 a 0\nq4 0 z 1\n")
    lines = [("q1", "a", 1), ("q1", "b", 2), ("q3", "a", 1), ("q5", "a", 1)]
    lines += [("q2", f"d{r}", r) for r in range(1, 11)] + [("q2", "k", 11)]
    run = tmp_path / "run.tsv"
    run.write_text("".join(f"{q}\t{d}\t{r}\n" for q, d, r in lines))
    ev = ts.evaluate(qrels, run, ["MRR@10", "MRR@11", "RR@10"])
    per_query = ev.per_query.to_dict()
    assert per_query["MRR@10"] == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert per_query["MRR@11"] == {"q1": 0.5, "q2": 1 / 11, "q3": 0.0}
    assert ev.summary["MRR@10"] == 0.5 / 3 and ev.summary["MRR@11"] == (0.5 + 1 / 11) / 3
    assert ev.summary["RR@10"] == 0.5 / 3  # ir_measures' RR@10 here: over the 3 queries evaluated, q3 counting 0
    assert ts.evaluate(qrels, run, ["MRR@10"], relevance_level=2).summary["MRR@10"] == 0.0  # q2's passage: rank 11
    definition = ev.provenance["definitions"]["MRR@10"]
    assert definition.startswith("MRR@10 as MS MARCO's ms_marco_eval.py: relevant: label >= 1; the mean is the sum")
    assert "a qrels query missing from the run counts 0 (with or without -c)" in definition
    assert "a query without a relevant passage is left out" in definition
    assert ev.provenance["relevance_level_applies_to"] == ["MRR@10", "MRR@11"]
    # the note on the qrels query missing from the run says MRR@k counts it already
    assert any("(MRR@10, MRR@11 counts them as 0 already, as MS MARCO's script does)" in n for n in ev.notes)


def test_a_trec_run_is_ranked_as_trec_eval_ranks_it(tmp_path):
    """On a TREC run the ranking is trec_eval's (score descending, ties by document id descending), the rank
    column ignored; ir_measures' RR@10 breaks the tie the other way."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\n")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 5 t\nq1 Q0 b 2 5 t\n")
    ev = ts.evaluate(qrels, run, ["MRR@10", "RR@10", "recip_rank"])
    assert ev.summary.to_dict() == {"recip_rank": 0.5, "RR@10": 1.0, "MRR@10": 0.5}


@pytest.mark.parametrize(
    ("text", "family", "name"),
    [
        ("MRR@10", "msmarco_MRR", "MRR@10"),
        ("MRR@100", "msmarco_MRR", "MRR@100"),
        ("MRR@010", "msmarco_MRR", "MRR@10"),
        ("mrr@10", "msmarco_RR", "RR@10"),  # ir_measures' name, any case: its RR@10
        ("Mrr@10", "msmarco_RR", "RR@10"),
        ("MRR(rel=1)@10", "msmarco_RR", "RR@10"),
        ("RR@10", "msmarco_RR", "RR@10"),
        ("MRR", "recip_rank", "recip_rank"),
        ("mrr@10-l2", "ranx_mrr", "mrr@10-l2"),
    ],
)
def test_only_mrr_at_k_written_so_names_the_official_measure(text, family, name):
    (group,) = parse_measure_groups([text])
    (m,) = group.measures
    assert m.family == family and m.name == name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("MRR@0", "'MRR@0': the cutoff of MS MARCO's MRR@k must be a positive integer"),
        ("MRR@" + "9" * 5000, "cutoff '" + "9" * 40 + "...' (5,000 characters) has 5,000 digits, more than the 18"),
    ],
)
def test_a_bad_cutoff_is_refused(text, message):
    with pytest.raises(UnknownMeasureError) as err:
        parse_measure_groups([text])
    assert message in str(err.value)


def test_cli_prints_the_official_number(cli, msmarco, tmp_path):
    qrels = msmarco / QRELS["dl19"]
    run = msmarco_run_of(msmarco / "runs" / "run.dl19.bm25.top100.txt", tmp_path / "run.tsv")
    _, mean = official(reference_of(qrels, tmp_path / "ref.tsv", 1), run)
    res = cli("eval", "-m", "MRR@10", qrels, run)
    assert res.exit_code == 0 and res.output.endswith(f"MRR@10                \tall\t{mean:6.4f}\n")
