"""Many runs' results as one wide table, written as CSV or JSON (``twostage eval QRELS RUN RUN ...``).

A row per run, and per query with ``-q``; a column per measure.
"""

from __future__ import annotations

import csv
import io
import json
import math

import pandas as pd

from toolkit.evaluation.evaluate import EvalResult


def wide_table(results: list[tuple[str, EvalResult]], per_query: bool = False) -> pd.DataFrame:
    """One row per run (``query_id`` 'all'), plus one per run and query with ``per_query``;
    a column per numeric measure in trec_eval's order, the run's tag as ``runid`` when asked for."""
    frames = []
    for name, r in results:
        numeric = [m.name for m in r.measures if m.name in r.aggregate]
        rows = []
        if per_query and len(r.per_query):
            pq = r.wide().reset_index()
            for mname, per in r.strings.items():
                pq[mname] = pq["query_id"].map(per)
            rows.append(pq)
        summary = {"query_id": "all", **{m: r.aggregate[m] for m in numeric}}
        if any(m.family == "runid" for m in r.measures):
            summary["runid"] = r.runid
        rows.append(pd.DataFrame([summary]))
        frame = pd.concat(rows, ignore_index=True)
        frame.insert(0, "run", name)
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    return table if per_query else table.drop(columns="query_id")


def render_csv_many(
    results: list[tuple[str, EvalResult]],
    per_query: bool,
    provenance: bool,
    intervals: dict | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """The wide table as CSV at full precision (``repr`` of each double); provenance as '#' lines.

    An empty cell is a value that does not exist (a summary-only measure on a query row) or is
    not finite, as ``null`` in the JSON form. ``intervals`` ({run: ``mean_intervals.MeanIntervals``}, ``eval
    --ci``) adds ``NAME_ci_low`` and ``NAME_ci_high`` columns after each measure's, filled on the 'all' rows; ``labels`` (result name -> label) names the columns as the measures were asked."""
    from toolkit.guard.escape import CSV_LINE_END, csv_newlines

    head = ""
    if provenance:  # a line break in a run's name would end the comment and start a row
        for name, r in results:
            head += f"# provenance {' '.join(str(name).splitlines())}: " + json.dumps(r.provenance) + "\n"
    table = wide_table(results, per_query)
    if intervals:
        from toolkit.stats.mean_intervals import with_ci_columns

        table = with_ci_columns(table, intervals)
    if labels:  # the columns named as the measures were asked for (NAME_ci_low after NAME's label too)
        suffixed = {f"{n}_{s}": f"{lab}_{s}" for n, lab in labels.items() for s in ("ci_low", "ci_high")}
        table = table.rename(columns={**labels, **suffixed})
        asked = [c for lab in labels.values() for c in (lab, f"{lab}_ci_low", f"{lab}_ci_high") if c in table.columns]
        lead = [c for c in ("run", "query_id") if c in table.columns]
        table = table[lead + asked + [c for c in table.columns if c not in lead and c not in asked]]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=CSV_LINE_END)  # a cell holding any line break is quoted
    w.writerow([_cell(c) for c in table.columns])
    for row in table.itertuples(index=False):
        w.writerow([_cell(v) for v in row])
    return head + csv_newlines(buf.getvalue())


def _cell(v) -> str:
    """A CSV cell: a double at full precision (empty when not finite); a text through ``toolkit.guard.escape.csv_text``."""
    from toolkit.guard.escape import csv_text

    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return "" if v is None or v is pd.NA else csv_text(str(v))


def render_json_many(
    results: list[tuple[str, EvalResult]],
    per_query: bool,
    intervals: dict | None = None,
    labels: dict[str, str] | None = None,
    holes: dict | None = None,
) -> str:
    """{"measures": [...], ["labels": {...}], "runs": [{"run", "provenance", "all", ["per_query"], ["ci"],
    ["holes"]}]} at full precision, each run's part what ``trec_format.render_json`` gives one run: the measures
    keyed by ``labels`` (result name -> label, as the user asked for them), as a single run's are; ``ci``
    (``mean_intervals.ci_json``) with ``intervals`` ({run: ``MeanIntervals``}, ``eval --ci``); ``holes``
    (``holes.holes_json``) with ``holes`` ({run: {measure: ``HoleBounds``}}, ``eval --holes``)."""
    from toolkit.evaluation.trec_format import render_json

    runs = []
    top: dict = {"measures": [], "runs": runs}
    for name, r in results:
        one = json.loads(render_json(r, per_query, labels))
        if not top["measures"]:
            top["measures"] = one["measures"]
            if "labels" in one:
                top["labels"] = one["labels"]
        doc: dict = {"run": name, "provenance": one["provenance"], "all": one["all"]}
        if per_query:
            doc["per_query"] = one.get("per_query", {})
        if intervals and intervals.get(name) is not None:
            from toolkit.stats.mean_intervals import ci_json

            doc["ci"] = ci_json(intervals[name], labels)
        if holes and holes.get(name):
            from toolkit.quality.holes import holes_json

            doc["holes"] = holes_json(holes[name], per_query, labels)
        runs.append(doc)
    return json.dumps(top, indent=2) + "\n"
