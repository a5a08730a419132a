"""The diagnosis's figures stay exactly the same while its computation is made cheaper.

``data/scale_reference.json`` holds, for two inputs, a SHA-256 of every column of per_query.csv and pairs.csv and
of every top-level entry of summary.json (as ``twostage diagnose`` writes them: the same CSV and JSON text), made
with the code before the diagnosis was made to scale (main just before that work was merged, with the
changes to summary.json intended since included; per_query.csv and pairs.csv equal those of commit e721550). Each test recomputes the diagnosis and
compares every hash, so any figure that moves, in any digit, names its file and column here.

RBO's figures (pairs.csv's ``rbo`` and the summary entries that quote it) were remade on 2026-12-07, when RBO's
weights p**d came to be C's ``pow`` (``toolkit.measures.ranked.c_power_table``) instead of numpy's ``power``, whose
AVX-512 kernels differ from it in the last bit: the reference, made on an AVX-512 machine, failed on one without.
summary.json's ``settings`` was remade the same day when the modules it names moved (``toolkit.quality.holes``,
``toolkit.stats.verdict``: the text names where a definition lives). Every other hash is the one the reference
code made.

- DL19 (43 queries, ../shared/data): first stages BM25 and SPLADE++ (top 100); reranked runs that reorder BM25's
  top 100 by TAS-B's scores and by ada-2's (two repeats: ada-2's scores, and the same with seeded jitter), and
  SPLADE's top 100 by TAS-B's; query texts from the DL19 topics (query types).
- A synthetic 1,000-query input from ``scripts/make_diagnose_bench.py`` (seed 7, a first stage 200 deep, three
  reranked runs of its top 100), made here.

The paths of the input files (a temporary folder, and the data folder, which is elsewhere on another machine) and
the package version are left out of summary.json's hashes: each path is replaced by a placeholder first.
``TWOSTAGE_WRITE_SCALE_REFERENCE=1`` rewrites the reference file instead of comparing (only ever with the code
that is the reference).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

REFERENCE = Path(__file__).parent / "data" / "scale_reference.json"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_diagnose_bench.py"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def fingerprint(diag, tmp: Path, data: Path | None = None) -> dict:
    """{file: {column or summary key: hash}} of the three files ``twostage diagnose`` writes with figures; the
    folders ``tmp`` and ``data`` are replaced by placeholders in summary.json (they differ between machines)."""
    from toolkit.guard.escape import CSV_LINE_END, csv_frame, csv_newlines

    out: dict = {}
    for name, frame in (("per_query.csv", diag.per_query), ("pairs.csv", diag.pairs)):
        text = csv_newlines(csv_frame(frame).to_csv(index=False, lineterminator=CSV_LINE_END))
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert rows and all(len(r) == len(rows[0]) for r in rows), name
        columns = {col: _sha("\n".join(r[i] for r in rows[1:])) for i, col in enumerate(rows[0])}
        out[name] = {"rows": str(len(rows) - 1), "file": _sha(text), **columns}
    text = json.dumps(diag.summary(), default=str)
    for folder, placeholder in ((tmp, "<tmp>"), (data, "<data>")):
        if folder is not None:
            for form in {str(folder), str(folder.resolve())}:
                text = text.replace(json.dumps(form)[1:-1], placeholder)
    summary = json.loads(text)
    summary.pop("twostage")
    out["summary.json"] = {k: _sha(json.dumps(v, sort_keys=True)) for k, v in summary.items()}
    return out


def _reorder(run: dict[str, list[str]], by: dict[str, dict[str, float]], path: Path, tag: str, jitter=None) -> Path:
    """``run``'s documents of each query ordered by the scores ``by`` gives them (a document ``by`` lacks: below
    every scored one, in ``run``'s order)."""
    lines = []
    for q, docs in run.items():
        scores = by.get(q, {})
        floor = min(scores.values(), default=0.0) - 1.0
        scored = [(scores.get(d, floor - i * 1e-3), d) for i, d in enumerate(docs)]
        if jitter is not None:
            scored = [(s + float(jitter.normal(0, 0.05)), d) for s, d in scored]
        scored.sort(key=lambda x: (-x[0], x[1]))
        lines += [f"{q} Q0 {d} {r} {s:.6f} {tag}\n" for r, (s, d) in enumerate(scored, 1)]
    path.write_text("".join(lines))
    return path


def _read(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, float]]]:
    order: dict[str, list[str]] = {}
    scores: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, s, *_ = line.split()
        order.setdefault(q, []).append(d)
        scores.setdefault(q, {})[d] = float(s)
    return order, scores


def dl19_diagnosis(msmarco: Path, tmp: Path):
    import toolkit as ts

    runs = msmarco / "runs"
    bm25, _ = _read(runs / "run.dl19.bm25.top100.txt")
    splade, _ = _read(runs / "run.dl19.splade-pp-ed.top100.txt")
    _, tasb = _read(runs / "run.dl19.tasb.top100.txt")
    _, ada = _read(runs / "run.dl19.openai-ada2.top100.txt")
    rng = np.random.default_rng(34)
    return ts.diagnose(
        str(msmarco / "qrels.dl19-passage.txt"),
        {"bm25": str(runs / "run.dl19.bm25.top100.txt"), "splade": str(runs / "run.dl19.splade-pp-ed.top100.txt")},
        {
            "tasb": str(_reorder(bm25, tasb, tmp / "tasb.trec", "tasb")),
            "ada": [
                str(_reorder(bm25, ada, tmp / "ada.a.trec", "ada")),
                str(_reorder(bm25, ada, tmp / "ada.b.trec", "ada", jitter=rng)),
            ],
            "tasb-splade": str(_reorder(splade, tasb, tmp / "tasb-splade.trec", "tasb")),
        },
        pairs={"tasb": "bm25", "ada": "bm25", "tasb-splade": "splade"},
        topics=str(msmarco / "topics.dl19-passage.txt"),
    ).result


def synthetic_diagnosis(tmp: Path):
    import toolkit as ts

    spec = importlib.util.spec_from_file_location("make_diagnose_bench", SCRIPT)
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    p = gen.make(tmp, queries=1000, depth=200, rerank_depth=100, seed=7)
    return ts.diagnose(p["qrels"], {"first": p["first"]}, {r: p[r] for r in ("rr1", "rr2", "rr3")}).result


def _check(case: str, got: dict) -> None:
    if os.environ.get("TWOSTAGE_WRITE_SCALE_REFERENCE") == "1":
        ref = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
        ref[case] = got
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(REFERENCE.read_text())[case]
    for file in want:
        assert set(got[file]) == set(want[file]), f"{case} {file}: columns/keys differ"
        moved = [k for k in want[file] if got[file][k] != want[file][k]]
        assert not moved, f"{case} {file}: these figures changed: {moved}"


@pytest.mark.data
def test_dl19_figures_identical(msmarco, tmp_path):
    _check("dl19", fingerprint(dl19_diagnosis(msmarco, tmp_path), tmp_path, msmarco))


def test_synthetic_1000_figures_identical(tmp_path):
    _check("synthetic-1000", fingerprint(synthetic_diagnosis(tmp_path), tmp_path))
