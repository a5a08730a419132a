"""ir_measures 0.4.3 as an oracle: the provider it picks for a measure, and each provider's own values.

Two of its providers cannot be called the ordinary way, and are called as their code intends:

- pyndeval: with two parameter sets in one call the provider hands its second ndeval call a spent generator
  (every value then 0), and with ``judged_only=True`` it indexes that generator (TypeError). So it is called
  once per measure, and ``judged_only`` is checked against pyndeval itself, given the run without the
  documents the qrels do not list, which is what the provider means to do.
- pytrec_eval: the provider evaluates an nDCG without ``gains`` (and a NumRet without ``rel``) with whichever
  other measure's pytrec_eval call comes first, so beside ``nDCG(gains=...)`` it gets the relabelled qrels,
  beside ``judged_only=True`` a condensed list: each measure is called alone, as its name means. pytrec_eval
  refuses ``relevance_level=0``, which trec_eval's ``-l 0`` takes; a measure with ``rel=0`` is given the
  qrels with every label one higher and ``rel=1``, the same relevance.
- accuracy: the provider divides by zero on a query whose top documents are all relevant (ZeroDivisionError,
  the whole call lost). So it is called query by query; such a query has no value (NaN).
- ranx: the provider builds ranx's ``Qrels``/``Run`` from ir_measures' DataFrames, whose id columns pandas 3
  makes ``str``, and ranx 0.3.21 asserts ``object`` columns (AssertionError, nothing computed). So the
  provider is called with those columns as ``object``, the frames it means to hand ranx; the rest is its own
  code (its ranx metric names, levels and per-query values).
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict

import ir_measures

#: Parameters a measure of the grid gets when ir_measures requires them.
REQUIRED = {"cutoff": 10, "recall": 0.2, "max_rel": 3}
#: The other values each optional parameter takes in the grid (besides its default).
VARIANTS = {
    "rel": [2, 0],
    "judged_only": [True],
    "p": [0.9],
    "T": [2.0],
    "min_rel": [1],
    "alpha": [0.3],
    "beta": [0.8],
    "normalize": [False],
    "relative": [True],
    "dcg": ["exp-log2"],
    "gains": [{0: 0, 1: 1, 2: 4, 3: 10}],
    "cutoff": [10, 5],
}


def grid() -> list:
    """Measures that reach every name of ir_measures' registry and each of its parameters: the name with the
    parameters it requires (and without, and with, a cutoff where that is optional), then with each optional
    parameter changed once; the same measure under two names (MAP and AP) once."""
    out = []
    for _name, base_measure in sorted(ir_measures.measures.registry.items()):
        spec = base_measure.SUPPORTED_PARAMS
        base = {k: REQUIRED[k] for k, p in spec.items() if p.required and k not in base_measure.params}
        bases = [base]
        if "cutoff" in spec and "cutoff" not in base:
            bases.append({**base, "cutoff": REQUIRED["cutoff"]})
        for b in bases:
            out.append(base_measure(**b))
            for k, p in spec.items():
                if k in base_measure.params or k in base:
                    continue
                for v in VARIANTS.get(k, []):
                    if p.validate(v) and v != p.default and v != b.get(k):
                        out.append(base_measure(**{**b, k: v}))
    unique = {repr(m): m for m in out}
    return [unique[k] for k in sorted(unique)]


def provider_of(measure) -> str | None:
    """The provider ir_measures' default pipeline evaluates ``measure`` with (None: ir_measures refuses it)."""
    for p in ir_measures.DefaultPipeline.providers:
        if p.is_available() and p.supports(measure):
            return p.NAME
    return None


def values(measures, qrels: list, run: list) -> dict[tuple[str, str], float]:
    """{(repr(measure), query): value} as each measure's provider computes it, every qrels query included (the
    provider's default 0 for one it does not reach, as ir_measures gives it)."""
    out: dict[tuple[str, str], float] = {}
    by: dict[str, list] = defaultdict(list)
    for m in measures:
        by[provider_of(m)].append(m)
    for name, ms in by.items():
        if name is None:
            raise ValueError(f"no provider: {ms}")
        if name == "pyndeval":
            for m in ms:
                out.update(_pyndeval(m, qrels, run))
        elif name == "accuracy":
            for m in ms:
                out.update(_accuracy(m, qrels, run))
        elif name == "ranx":
            with _object_id_columns():
                for metric in ir_measures.iter_calc(ms, qrels, run):
                    out[(repr(metric.measure), metric.query_id)] = metric.value
        elif name == "pytrec_eval":
            for m in ms:
                if m.params.get("rel") == 0:
                    out.update(_level_zero(m, qrels, run))
                else:
                    out.update({(repr(m), x.query_id): x.value for x in ir_measures.iter_calc([m], qrels, run)})
        else:
            for metric in ir_measures.iter_calc(ms, qrels, run):
                out[(repr(metric.measure), metric.query_id)] = metric.value
    return out


@contextlib.contextmanager
def _object_id_columns():
    """ir_measures' qrels and run DataFrames with their string columns as ``object``, which ranx's
    ``from_df`` asserts (pandas 3 makes them ``str``)."""
    import pandas as pd
    from ir_measures import util

    saved = util.QrelsConverter.as_pd_dataframe, util.RunConverter.as_pd_dataframe

    def as_objects(convert):
        def frame(self):
            df = convert(self)
            return df.astype({c: object for c in df.columns if pd.api.types.is_string_dtype(df[c])})

        return frame

    util.QrelsConverter.as_pd_dataframe, util.RunConverter.as_pd_dataframe = (as_objects(f) for f in saved)
    try:
        yield
    finally:
        util.QrelsConverter.as_pd_dataframe, util.RunConverter.as_pd_dataframe = saved


def _pyndeval(m, qrels: list, run: list) -> dict:
    if not m.params.get("judged_only"):
        return {(repr(m), x.query_id): x.value for x in ir_measures.iter_calc([m], qrels, run)}
    import pyndeval

    judged = {(q.query_id, q.doc_id) for q in qrels}
    kept = [d for d in run if (d.query_id, d.doc_id) in judged]
    key = f"{m.NAME.replace('_', '-')}@{m['cutoff']}" if m.NAME != "AP_IA" else "MAP-IA"
    subtopics = [pyndeval.SubtopicQrel(q.query_id, q.iteration, q.doc_id, q.relevance) for q in qrels]
    ev = pyndeval.RelevanceEvaluator(subtopics, [key], relevance_level=m["rel"])
    got = {(repr(m), r["query_id"]): r[key] for r in ev.evaluate_iter(sorted(kept, key=lambda d: d.query_id))}
    for q in {q.query_id for q in qrels}:
        got.setdefault((repr(m), q), 0.0)
    return got


def _level_zero(m, qrels: list, run: list) -> dict:
    """pytrec_eval refuses relevance_level 0 ('should be positive'), which trec_eval -l 0 takes: every label
    one higher with level 1 is the same relevance (the qrels have no negative label)."""
    assert all(q.relevance >= 0 for q in qrels)
    shifted = [q._replace(relevance=q.relevance + 1) for q in qrels]
    one = m(rel=1)
    return {(repr(m), x.query_id): x.value for x in ir_measures.iter_calc([one], shifted, run)}


def _accuracy(m, qrels: list, run: list) -> dict:
    got = {}
    for qid in sorted({q.query_id for q in qrels}):
        one = [q for q in qrels if q.query_id == qid]
        docs = [d for d in run if d.query_id == qid]
        try:
            got.update({(repr(m), x.query_id): x.value for x in ir_measures.iter_calc([m], one, docs)})
        except ZeroDivisionError:
            got[(repr(m), qid)] = math.nan  # every document in the cutoff relevant: ir_measures has no value
        got.setdefault((repr(m), qid), math.nan)  # nothing relevant retrieved: the provider reports nothing
    return got


def read(qrels_path, run_path) -> tuple[list, list]:
    return list(ir_measures.read_trec_qrels(str(qrels_path))), list(ir_measures.read_trec_run(str(run_path)))


#: gdeval.pl prints 5 decimals, which ir_measures reads.
ROUNDED = {"gdeval"}


def compare(ms, qrels_path, run_path, **options) -> None:
    """Assert that ``toolkit.evaluate`` gives each of ``ms`` (ir_measures measures) its provider's value per query
    (to 1e-9; gdeval's to its 5 printed decimals) and mean, every qrels query counted (``complete``)."""
    import pytest

    import toolkit as ts

    qrels, run = read(qrels_path, run_path)
    theirs = values(ms, qrels, run)
    ev = ts.evaluate(str(qrels_path), str(run_path), [repr(m) for m in ms], complete=True, **options)
    for m in ms:
        name = repr(m)
        rounded = provider_of(m) in ROUNDED
        ours = ev.per_query[name]
        queries = {q for (n, q) in theirs if n == name}
        assert set(ours.index) == queries, name
        for q in queries:
            want, got = theirs[(name, q)], float(ours[q])
            if math.isnan(want) and m.NAME == "nNRBP":
                assert got == 0.0, (name, q)  # ndeval's 0/0 for a query nothing is relevant to: twostage's 0
            elif math.isnan(want):
                assert math.isnan(got), (name, q)
            elif rounded:
                assert f"{got:.5f}" == f"{want:.5f}", (name, q, got, want)
            else:
                assert got == pytest.approx(want, abs=1e-9, rel=0), (name, q)
        if m.NAME == "nNRBP":  # ndeval's NaN is twostage's 0 (ir_measures' mean is then NaN)
            theirs = {k: 0.0 if k[0] == name and math.isnan(v) else v for k, v in theirs.items()}
        defined = [theirs[(name, q)] for q in queries if not math.isnan(theirs[(name, q)])]
        if not defined:  # Accuracy(rel=0): every document relevant, no query with a value
            assert math.isnan(ev.summary[name]), name
            continue
        summed = isinstance(m.aggregator(), ir_measures.SumAgg)
        want_mean = sum(defined) if summed else sum(defined) / len(defined)
        assert ev.summary[name] == pytest.approx(want_mean, abs=5e-6 if rounded else 1e-9), name
