"""Evaluation results in trec_eval's output layout, and as JSON / CSV.

Text is what trec_eval prints: ``name`` padded to 22, a tab, the query id or
``all``, a tab, the value; floats as C's ``%6.4f`` (``-nan`` included),
counts as integers, relstring quoted, runid as text; per-query lines (``-q``)
first, query by query, then the summary (unless ``-n``); with ``-Z`` every
numeric name gets a ``Z`` prefix and ``%6.4f``. Provenance, when wanted,
comes first as ``#`` lines, which trec_eval parsers skip.
"""

from __future__ import annotations

import csv
import io
import json
import math

from toolkit.evaluation.evaluate import EvalResult
from toolkit.measures.registry import Measure


def c_float(value: float) -> str:
    """C's ``%6.4f``, including glibc's ``nan``/``-nan`` (the sign of a NaN is printed)."""
    if math.isnan(value):
        return ("-nan" if math.copysign(1.0, value) < 0 else "nan").rjust(6)
    return f"{value:6.4f}"


def format_value(measure: Measure, value: float, zscored: bool = False) -> str:
    """trec_eval's printing of one value: counts as integers (C's (long) cast), the rest ``%6.4f``."""
    if measure.spec.value_type == "long" and not zscored:
        return str(int(value)) if math.isfinite(value) else c_float(value)
    return c_float(value)


def _line(measure: Measure, qid: str, text: str, zscored: bool) -> str:
    prefix = "Z" if zscored and measure.spec.value_type != "string" else ""
    return f"{prefix}{measure.name:<22}\t{qid}\t{text}"


PROVENANCE_KEYS = (
    "implementation",
    "semantics",
    "rel_format",
    "gain",
    "discount",
    "relevance_level",
    "relevance_labels",
    "relevance_map",
    "unjudged",
    "judged_definition",
    "max_docs_per_query",
    "num_docs_in_collection",
    "query_set",
    "queries_in_run",
    "queries_in_qrels",
    "queries_evaluated",
    "score_precision",
    "zscores",
    "duplicates_dropped",
    "comment_lines",
    "measure_settings",
    "definitions",
    "input_warnings",
    "no_common_queries",
)


def provenance_lines(prov: dict) -> list[str]:
    """The provenance block as '# key: value' comment lines."""
    lines = [
        f"# {k}: {json.dumps(prov[k]) if isinstance(prov[k], (dict, list)) else prov[k]}"
        for k in PROVENANCE_KEYS
        if k in prov
    ]
    run_format = prov["run"].get("format")  # a run read from MS MARCO's format: how its scores were made
    lines.append(
        f"# run: {prov['run']['path']} sha256:{prov['run']['sha256'][:16]}" + (f" ({run_format})" if run_format else "")
    )
    lines.append(f"# qrels: {prov['qrels']['path']} sha256:{prov['qrels']['sha256'][:16]}")
    origin = prov["qrels"].get("origin")
    if origin:  # merged human and judge labels: the policy, the counts and each origin's judged@k
        c = origin["counts"]
        cover = "; ".join(
            f"{k} human {v['human']:.4f} judge {v['judge']:.4f}" for k, v in origin["judged_by_origin"].items()
        )
        lines.append(
            f"# qrels origin: policy {origin['policy']}, {c['human_labels_used']} human labels, "
            f"{c['judge_labels_used']} judge labels; {cover}"
        )
    return lines


def render_text(result: EvalResult, per_query: bool, provenance: bool, summary: bool = True) -> str:
    out = provenance_lines(result.provenance) if provenance else []
    z = result.zscores
    if per_query:
        shown = [m for m in result.measures if m.spec.per_query]
        # keyed by measure, not name: two parameter sets may print the same name, and trec_eval prints both
        columns = {m: v.tolist() for m, v in result.columns.items()}
        pos = {qid: i for i, qid in enumerate(result.evaluated)}
        for qid in result.printed:
            i = pos[qid]
            for m in shown:
                if m.spec.value_type == "string":
                    out.append(_line(m, qid, f"'{result.strings[m.name][qid]}'", False))
                else:
                    out.append(_line(m, qid, format_value(m, columns[m][i], z), z))
    if summary:
        for m in result.measures:
            if m.family == "runid":
                out.append(f"{'runid':<22}\tall\t{result.runid}")
            elif m.spec.value_type != "string":
                out.append(_line(m, "all", format_value(m, result.summary[m], z), z))
    return "\n".join(out) + "\n" if out else ""


def _json_number(v: float):
    return v if math.isfinite(v) else None


def render_json(result: EvalResult, per_query: bool, labels: dict[str, str] | None = None) -> str:
    """The JSON document; ``labels`` (result name -> label, in the order wanted) renames and orders the measures
    and is stated in the document (``labels``) when it renames any (``compare`` reads it back)."""
    names = labels or {m.name: m.name for m in result.measures}
    order = {n: i for i, n in enumerate(names)}

    def ordered(items):
        return sorted(items, key=lambda kv: order.get(kv[0], len(order)))

    summary = {names.get(k, k): _json_number(v) for k, v in ordered(result.aggregate.items())}
    if any(m.family == "runid" for m in result.measures):
        summary[names.get("runid", "runid")] = result.runid
    measures = [n for n, _ in ordered([(m.name, None) for m in result.measures])]
    doc: dict = {"provenance": result.provenance, "measures": [names.get(n, n) for n in measures], "all": summary}
    renamed = {k: v for k, v in names.items() if k != v}
    if renamed:
        doc["labels"] = renamed
    if per_query:
        rows: dict = {}
        for q, g in result.per_query.groupby("query_id", sort=True):
            rows[str(q)] = {names.get(m, m): _json_number(v) for m, v in ordered(zip(g["measure"], g["value"]))}
        for name, per in result.strings.items():
            for q, text in per.items():
                rows.setdefault(str(q), {})[names.get(name, name)] = text
        doc["per_query"] = rows
    return json.dumps(doc, indent=2) + "\n"


#: The suffixes of a measure's interval lines and rows (``eval --ci``): ``NAME_ci_low``, ``NAME_ci_high``.
CI_SUFFIXES = ("ci_low", "ci_high")


def render_csv(
    result: EvalResult, per_query: bool, provenance: bool, labels: dict[str, str] | None = None, ci=None
) -> str:
    """Long CSV (query_id, measure, value); ``labels`` as for ``render_json`` (the summary rows in its order);
    text cells through ``toolkit.guard.escape.csv_text`` (no formula). ``ci`` (``mean_intervals.MeanIntervals``, ``eval
    --ci``) adds ``all,LABEL_ci_low,VALUE`` and ``all,LABEL_ci_high,VALUE`` rows after each measure's ``all`` row."""
    from toolkit.guard.escape import CSV_LINE_END, csv_newlines, csv_text

    names = labels or {m.name: m.name for m in result.measures}
    buf = io.StringIO()
    if provenance:
        buf.write("# provenance: " + json.dumps(result.provenance) + "\n")
    w = csv.writer(buf, lineterminator=CSV_LINE_END)  # a cell holding any line break is quoted
    w.writerow(["query_id", "measure", "value"])
    if per_query:
        for row in result.per_query.sort_values(["query_id"], kind="stable").itertuples(index=False):
            w.writerow([csv_text(row.query_id), csv_text(names.get(row.measure, row.measure)), repr(float(row.value))])
        for name, per in result.strings.items():
            for q, text in sorted(per.items()):
                w.writerow([csv_text(q), csv_text(names.get(name, name)), csv_text(text)])
    printed = [m.name for m in result.measures]
    for n in sorted(printed, key=lambda n: list(names).index(n) if n in names else len(names)):
        if n in result.aggregate:
            w.writerow(["all", csv_text(names.get(n, n)), repr(float(result.aggregate[n]))])
            iv = ci.intervals.get(n) if ci is not None else None
            if iv is not None:
                for suffix, v in zip(CI_SUFFIXES, (iv.low, iv.high)):
                    w.writerow(["all", csv_text(f"{names.get(n, n)}_{suffix}"), repr(float(v))])
    return csv_newlines(buf.getvalue())
