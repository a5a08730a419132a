"""The page's explorer payload built from the result directly (``explore_payload_of``: the rows columnwise, the
views in one pass) is, to the byte, the reference ``explore_payload(explore_data(diag))``, also for results off
the usual shape: a query missing from a run's rows (absent keys, their order), first-stage values that differ
between the runs of a first stage (the detail lines then travel), numpy values, a NaN rank and a document with
two grades in the views (the reference's own path)."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings

import numpy as np
import pytest
from samples import tiny

from toolkit.data.records import run_from_rows
from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.report.diagnosis_explore import (
    decode_explore,
    encode_explore,
    explore_data,
    explore_html,
    explore_payload,
    explore_payload_of,
    read_explore_data,
)


@pytest.fixture(scope="module")
def diag():
    qrels, first, rr, texts, queries = tiny()
    f = rr.frame
    runs = {"rr": rr}
    for name, dropped in (("rr2", "q2"), ("rr3", "q1")):
        runs[name] = run_from_rows([tuple(r) for r in f[f["query_id"] != dropped].itertuples(index=False)], tag=name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diagnose(
            DiagnosisInputs(
                qrels, first, runs, queries=queries, texts=lambda ids: {d: texts[d] for d in ids if d in texts}
            ),
            DiagnosisOptions(permutations=50),
        )


def _json(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _same(diag) -> dict:
    fast = explore_payload_of(diag)
    assert _json(fast) == _json(explore_payload(explore_data(diag)))
    return fast


def test_the_usual_result(diag):
    payload = _same(diag)
    assert "detail_rows" not in payload and "views" in payload and payload["rows"]["n"] == 7
    assert read_explore_data(explore_html(diag)) == explore_data(diag)


def test_queries_missing_from_runs(diag):
    """rr2 has no row for the primary's first query, rr3 none for another: their keys are absent there, and the
    keys come in the order the rows first give them."""
    pq = diag.per_query
    first_q = diag.rows("rr")["query_id"].iloc[0]
    gone = ((pq["system"] == "rr2") & (pq["query_id"] == first_q)) | (
        (pq["system"] == "rr3") & (pq["query_id"] == "q4")
    )
    cut = dataclasses.replace(diag, per_query=pq[~gone].reset_index(drop=True))
    payload = _same(cut)
    absent = payload["rows"]["absent"]
    assert absent["label:rr2"] == [0] and absent["m:rr2"] == [0] and len(absent["label:rr3"]) == 1
    # a query only the later runs have: its row comes after the primary's rows
    only_later = dataclasses.replace(diag, per_query=pq[~((pq["system"] == "rr") & (pq["query_id"] == first_q))])
    payload = _same(only_later)
    assert payload["rows"]["values"][0][-1] == first_q and payload["rows"]["absent"]["label:rr"] == [6]


def test_first_stage_values_that_differ(diag):
    """The row keeps the last run's first-stage value, the detail lines each run's: then they travel."""
    pq = diag.per_query.copy()
    hit = (pq["system"] == "rr3") & (pq["query_id"] == "q5")
    pq.loc[hit, "first_judged_10"] = 0.123
    payload = _same(dataclasses.replace(diag, per_query=pq))
    assert "detail_rows" in payload
    data = decode_explore(encode_explore(explore_data(dataclasses.replace(diag, per_query=pq))))
    assert data == explore_data(dataclasses.replace(diag, per_query=pq))


def test_views_off_the_plain_shape(diag):
    q = next(iter(diag.views))
    doc = diag.views[q]["top"]["rr"][0][0]
    numpy = copy.deepcopy(diag.views)  # numpy grades and ranks: json_ready's values
    numpy[q]["top"]["rr"][0] = (doc, np.int64(numpy[q]["top"]["rr"][0][1] or 0))
    for s in numpy[q]["top"]:
        numpy[q]["top"][s] = [(d, np.int64(g or 0)) if d == doc else (d, g) for d, g in numpy[q]["top"][s]]
    numpy[q]["ranks"]["rr"] = {d: np.int32(r) for d, r in numpy[q]["ranks"]["rr"].items()}
    assert "views" in _same(dataclasses.replace(diag, views=numpy))
    nan = copy.deepcopy(diag.views)  # a NaN rank would not come back from the compact form
    nan[q]["ranks"]["rr"][doc] = float("nan")
    assert "views_plain" in _same(dataclasses.replace(diag, views=nan))
    none = copy.deepcopy(diag.views)  # nor a snippet that is None
    none[q]["snippets"][doc] = None
    assert "views_plain" in _same(dataclasses.replace(diag, views=none))
    two = copy.deepcopy(diag.views)  # a document with two grades: the views travel as they are
    systems = list(two[q]["top"])
    two[q]["top"][systems[1]] = [[doc, 7], *two[q]["top"][systems[1]]]
    assert "views_plain" in _same(dataclasses.replace(diag, views=two))
