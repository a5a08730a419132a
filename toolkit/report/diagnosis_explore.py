"""The diagnosis page's query explorer: what it reads (``explore_data``), how that travels in the page
(``encode_explore``, read back by ``decode_explore`` here and by ``explore.js`` in the browser) and its HTML.

The data travels in ``<script type="application/json" id="explore-data">`` as an envelope
``{"format": "twostage-explore", "version": 1, "encoding": ..., "data": ...}``: ``encoding`` is ``"json"`` (``data``
is the payload itself) or ``"gzip+base64"`` (``data`` is the payload's UTF-8 JSON, gzip-compressed and base64-encoded;
the browser decompresses it with its own ``DecompressionStream('gzip')``), chosen by size: a page whose payload is
over ``COMPRESS_ABOVE`` characters is compressed. The payload is columnar (docs/diagnosis.md, "The page's data"):

- ``meta``: every top-level key of ``explore_data`` but the four below (columns, systems, measure, ...);
- ``rows``: the table's rows as columns: ``n`` rows, ``keys``, ``values`` (one list per key, ``null`` for a
  missing value) and ``absent`` ({key: [row indices]} where a row has no such key);
- ``detail_rows`` only when it is not what the rows say (``_derived_detail``; it always is for ``explore_data``);
- ``views``: per query (``queries``) its documents once (``docs``, sorted) and, indexed by them, the grades
  (``grades``), every system's top k (``top``: indices), ranks (``ranks``: null where a system does not rank the
  document) and snippets (``snippets``), and the highlighted ``terms``; or ``views_plain``, the views as they are,
  when they do not have that shape;
- ``missed``: as it is.

``decode_explore`` gives back exactly ``explore_data``'s dict (a test checks it, and the browser's copy too).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from importlib import resources

from toolkit.diagnosis.compute import Diagnosis, json_ready
from toolkit.report.eval_tables import Table
from toolkit.report.html import script_json

FORMAT = "twostage-explore"
VERSION = 1
#: A payload over this many characters of JSON travels gzip-compressed and base64-encoded.
COMPRESS_ABOVE = 1_000_000
#: Its gzip level: 4 compresses the 11 MB payload of 6,980 queries in a fifth of level 6's time for 6% more bytes.
GZIP_LEVEL = 4
#: A page with more queries than this shows no static copy of the table when scripts are off (it would be as
#: large as the rest of the page several times over); it points to per_query.csv instead.
NOSCRIPT_ROWS = 1_000
_BIG = ("rows", "detail_rows", "views", "missed")
_VIEW_KEYS = frozenset({"top", "ranks", "snippets", "terms"})


def explore_data(diag: Diagnosis) -> dict:
    """What the page's query explorer reads: table columns and rows, side-by-side lists, snippets, terms.

    The reference the page's data is checked against (``explore_payload_of`` builds the page's payload from the
    result directly, columnwise)."""
    rows, detail = _explore_rows(diag)
    meta = _explore_meta(diag)
    big = json_ready({"rows": rows, "detail_rows": detail, "views": diag.views, "missed": diag.missed})
    return {k: meta[k] if k in meta else big[k] for k in _DATA_KEYS}


#: ``explore_data``'s keys, in order.
_DATA_KEYS = (
    "measure",
    "measure_label",
    "k",
    "systems",
    "primary",
    "primary_first",
    "columns",
    "rows",
    "detail_columns",
    "detail_rows",
    "views",
    "missed",
    "judge_labelled",
)


def _explore_meta(diag: Diagnosis) -> dict:
    """``explore_data``'s small keys (the payload's ``meta``), JSON-ready, in its order."""
    systems = [{"name": f, "role": "first stage"} for f in diag.first_stages]
    systems += [
        {
            "name": p.name,
            "role": "reranked",
            "first_stage": p.first_stage,
            "depth": p.depth,
            # a system with repeats: its values are the mean over repeats, its list the first repeat's
            "shown": repeat_shown(p),
            # its role in a query's detail table
            "detail_role": f"reranked top {p.depth}{values_of(p)}",
        }
        for p in diag.pipelines
    ]
    return json_ready(
        {
            "measure": diag.measure,
            "measure_label": diag.measure_label,
            "k": diag.settings["explore_depth"],
            "systems": systems,
            "primary": diag.primary.name,
            "primary_first": diag.primary.first_stage,
            "columns": _explore_columns(diag),
            "detail_columns": _detail_columns(diag.measure_label),
            # per query, the shown documents whose grade came from an LLM judge (merged qrels)
            "judge_labelled": (diag.settings or {}).get("judge_labelled") or {},
        }
    )


def repeat_shown(p) -> str | None:
    """Which repeat a system's ranked list shows (the first): None without repeats."""
    if not p.repeats:
        return None
    return f"repeat 1 of {p.repeats['n']}: {p.repeats['runs'][0]}"


def values_of(p) -> str:
    """What a system's per-query values are: `` (mean of N repeats)`` for a system with repeats, else ''."""
    return f" (mean of {p.repeats['n']} repeats)" if p.repeats else ""


def _explore_columns(diag: Diagnosis) -> list[dict]:
    """The explorer table's columns: query, text, type, labels, every run's measure, per reranked run its delta
    against the first stage, ceiling and losses, every run's judged@10, RBO and τ."""
    pipes, label = diag.pipelines, diag.measure_label
    many = len(pipes) > 1
    every = [*diag.first_stages, *(p.name for p in pipes)]
    columns = [
        {"key": "query_id", "label": "query", "kind": "text"},
        {"key": "query", "label": "text", "kind": "text"},
        {"key": "query_type", "label": "type", "kind": "cat"},
    ]
    columns += [
        {"key": f"label:{p.name}", "label": f"label · {p.name}" if many else "label", "kind": "cat"} for p in pipes
    ]
    of = {p.name: values_of(p) for p in pipes}
    columns += [{"key": f"m:{s}", "label": f"{label} · {s}{of.get(s, '')}", "kind": "num"} for s in every]
    for p in pipes:
        suffix = f" · {p.name}" if many else ""
        columns += [
            {"key": f"delta:{p.name}", "label": f"Δ vs {p.first_stage}{suffix}", "kind": "num"},
            {"key": f"ceiling:{p.name}", "label": f"ceiling{suffix}", "kind": "num"},
            {"key": f"lost_c:{p.name}", "label": f"lost in candidates{suffix}", "kind": "num"},
            {"key": f"lost_r:{p.name}", "label": f"lost in reranking{suffix}", "kind": "num"},
        ]
    columns += [{"key": f"judged:{s}", "label": f"judged@10 · {s}", "kind": "num"} for s in every]
    columns += [{"key": f"rbo:{p.name}", "label": f"RBO{' · ' + p.name if many else ''}", "kind": "num"} for p in pipes]
    columns += [
        {"key": f"tau:{p.name}", "label": f"τ@10{' · ' + p.name if many else ''}", "kind": "num"} for p in pipes
    ]
    return columns


def _explore_rows(diag: Diagnosis) -> tuple[list[dict], dict[str, list[dict]]]:
    """One explorer row per query, and per query the detail lines (each first stage once, then each reranked
    run)."""
    m = diag.measure
    rows: dict[str, dict] = {}
    detail: dict[str, list[dict]] = {}
    for p in diag.pipelines:
        for r in diag.rows(p.name).to_dict(orient="records"):
            q = r["query_id"]
            row = rows.setdefault(q, {"query_id": q, "query": r["query"], "query_type": r["query_type"]})
            row[f"label:{p.name}"] = r["diagnosis"]
            row[f"m:{p.first_stage}"] = r[f"first_{m}"]
            row[f"m:{p.name}"] = r[f"reranked_{m}"]
            row[f"delta:{p.name}"] = r[f"delta_{m}"]
            row[f"ceiling:{p.name}"] = r[f"ceiling_{m}"]
            row[f"lost_c:{p.name}"] = r["lost_in_candidates"]
            row[f"lost_r:{p.name}"] = r["lost_in_reranking"]
            row[f"judged:{p.first_stage}"] = r["first_judged_10"]
            row[f"judged:{p.name}"] = r["reranked_judged_10"]
            row[f"rbo:{p.name}"] = r["rbo"]
            row[f"tau:{p.name}"] = r["kendall_tau_10"]
            lines = detail.setdefault(q, [])
            if not any(x["system"] == p.first_stage for x in lines):
                lines.append(
                    {
                        "system": p.first_stage,
                        "role": "first stage",
                        "value": r[f"first_{m}"],
                        "judged": r["first_judged_10"],
                    }
                )
            lines.append(_detail_line(p.name, p.depth, r, m, values_of(p)))
    for lines in detail.values():  # first stages first, as in the side-by-side lists
        lines.sort(key=lambda x: x["role"] != "first stage")
    return list(rows.values()), detail


def _detail_line(name: str, depth: int, r: dict, m: str, of: str = "") -> dict:
    return {
        "system": name,
        "role": f"reranked top {depth}{of}",
        "value": r[f"reranked_{m}"],
        "delta": r[f"delta_{m}"],
        "ceiling": r[f"ceiling_{m}"],
        "lost_c": r["lost_in_candidates"],
        "lost_r": r["lost_in_reranking"],
        "label": r["diagnosis"],
        "rbo": r["rbo"],
        "tau": r["kendall_tau_10"],
        "judged": r["reranked_judged_10"],
    }


def _detail_columns(label: str) -> list[dict]:
    return [
        {"key": "system", "label": "system", "kind": "text"},
        {"key": "role", "label": "role", "kind": "text"},
        {"key": "value", "label": label, "kind": "num"},
        {"key": "delta", "label": "Δ vs first stage", "kind": "num"},
        {"key": "ceiling", "label": "ceiling", "kind": "num"},
        {"key": "lost_c", "label": "lost in candidates", "kind": "num"},
        {"key": "lost_r", "label": "lost in reranking", "kind": "num"},
        {"key": "label", "label": "label", "kind": "text"},
        {"key": "rbo", "label": "RBO vs first stage", "kind": "num"},
        {"key": "tau", "label": "τ@10 vs first stage", "kind": "num"},
        {"key": "judged", "label": "judged@10", "kind": "num"},
    ]


# ------------------------------------------------------------------ encoding
def _derived_detail(rows: list[dict], systems: list[dict]) -> dict[str, list[dict]]:
    """The detail lines as the rows hold them (what ``_explore_rows`` builds; explore.js derives them alike)."""
    detail: dict[str, list[dict]] = {}
    reranked = [s for s in systems if s.get("role") == "reranked"]
    for row in rows:
        lines: list[dict] = []
        for s in reranked:
            name, first = s["name"], s.get("first_stage")
            if f"label:{name}" not in row:
                continue
            if not any(x["system"] == first for x in lines):
                lines.append(
                    {"system": first, "role": "first stage", "value": row.get(f"m:{first}"),
                     "judged": row.get(f"judged:{first}")}
                )  # fmt: skip
            lines.append(
                {
                    "system": name,
                    "role": s.get("detail_role"),
                    **{k: row.get(f"{col}:{name}") for k, col in _DETAIL_FROM_ROW},
                }
            )
        if lines:
            lines.sort(key=lambda x: x["role"] != "first stage")
            detail[row["query_id"]] = lines
    return detail


#: A reranked system's detail line: its key and the row column (``column:system``) it repeats.
_DETAIL_FROM_ROW = (
    ("value", "m"),
    ("delta", "delta"),
    ("ceiling", "ceiling"),
    ("lost_c", "lost_c"),
    ("lost_r", "lost_r"),
    ("label", "label"),
    ("rbo", "rbo"),
    ("tau", "tau"),
    ("judged", "judged"),
)


def _columnar(rows: list[dict]) -> dict:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    absent = {k: idx for k in keys if (idx := [i for i, r in enumerate(rows) if k not in r])}
    return {"n": len(rows), "keys": keys, "values": [[r.get(k) for r in rows] for k in keys], "absent": absent}


def _rows_of(table: dict) -> list[dict]:
    rows: list[dict] = [{} for _ in range(table["n"])]
    absent = {k: set(v) for k, v in (table.get("absent") or {}).items()}
    for key, values in zip(table["keys"], table["values"]):
        gone = absent.get(key, ())
        for i, v in enumerate(values):
            if i not in gone:
                rows[i][key] = v
    return rows


def _compact_start(views: dict) -> dict | None:
    """The compact form's empty lists for the systems of ``views``' first view; None when it is not a view."""
    first = next(iter(views.values()))
    if not isinstance(first, dict) or set(first) != _VIEW_KEYS:
        return None
    systems = list(first["top"])
    out: dict = {"systems": systems, "queries": [], "docs": [], "grades": [], "terms": [], "snippets": []}
    out["top"] = {s: [] for s in systems}
    out["ranks"] = {s: [] for s in systems}
    return out


def _compact_views(views: dict) -> dict | None:
    """The views with each query's documents listed once; None when a view is not of the expected shape."""
    if not views:
        return None
    out = _compact_start(views)
    if out is None:
        return None
    systems = out["systems"]
    for q, v in views.items():
        if set(v) != _VIEW_KEYS or list(v["top"]) != systems or list(v["ranks"]) != systems:
            return None
        grade: dict = {}
        for top in v["top"].values():
            for d, g in top:
                if grade.setdefault(d, g) != g:
                    return None
        docs = sorted(set(grade) | set(v["snippets"]) | {d for r in v["ranks"].values() for d in r})
        index = {d: i for i, d in enumerate(docs)}
        out["queries"].append(q)
        out["docs"].append(docs)
        out["grades"].append([grade.get(d) for d in docs])
        out["terms"].append(v["terms"])
        out["snippets"].append([v["snippets"].get(d) for d in docs])
        for s in systems:
            out["top"][s].append([index[d] for d, _ in v["top"][s]])
            out["ranks"][s].append([v["ranks"][s].get(d) for d in docs])
    return out if _views_of(out) == views else None


def _views_of(c: dict) -> dict:
    views = {}
    for i, q in enumerate(c["queries"]):
        docs, grades = c["docs"][i], c["grades"][i]
        views[q] = {
            "top": {s: [[docs[j], grades[j]] for j in c["top"][s][i]] for s in c["systems"]},
            "ranks": {s: {d: r for d, r in zip(docs, c["ranks"][s][i]) if r is not None} for s in c["systems"]},
            "snippets": {d: t for d, t in zip(docs, c["snippets"][i]) if t is not None},
            "terms": c["terms"][i],
        }
    return views


def explore_payload(data: dict) -> dict:
    """``data`` (``explore_data``'s dict) as the page's columnar payload (the module's docstring)."""
    payload: dict = {"meta": {k: v for k, v in data.items() if k not in _BIG}, "rows": _columnar(data["rows"])}
    if _derived_detail(data["rows"], data["systems"]) != data["detail_rows"]:
        payload["detail_rows"] = data["detail_rows"]
    views = _compact_views(data["views"])
    payload["views" if views is not None else "views_plain"] = views if views is not None else data["views"]
    payload["missed"] = data["missed"]
    return payload


def explore_payload_of(diag: Diagnosis) -> dict:
    """``explore_payload(explore_data(diag))``, built from the result directly: the rows columnwise from the
    per-query table, the views compacted in one pass (no copy of the per-query dicts, no round trip). A result
    whose data does not have the usual shape (duplicate or colliding names, detail lines the rows do not give,
    views of another shape) takes the reference path."""
    rows = _rows_table(diag)
    if rows is None:
        return explore_payload(explore_data(diag))
    payload: dict = {"meta": _explore_meta(diag), "rows": rows}
    views = _compact_views_of(diag.views)
    payload["views" if views is not None else "views_plain"] = views if views is not None else json_ready(diag.views)
    payload["missed"] = json_ready(diag.missed)
    return payload


def _plain_column(values) -> list:
    """A column's values as ``json_ready`` gives them: Python scalars, None for NaN."""
    import numpy as np

    a = np.asarray(values)
    if a.dtype.kind == "f":
        out = a.astype(object)
        out[np.isnan(a)] = None
        return out.tolist()
    if a.dtype.kind in "iub":
        return a.tolist()
    return [json_ready(v) for v in a.tolist()]


def _rows_table(diag: Diagnosis) -> dict | None:
    """``_columnar`` of ``explore_data``'s rows, from the per-query table columnwise; None when the rows would not
    give ``explore_data``'s detail lines (``_derived_detail``) or names collide (then the reference path)."""
    import numpy as np
    import pandas as pd

    m, pipes = diag.measure, diag.pipelines
    names = [p.name for p in pipes]
    if len(set(names)) != len(names) or set(names) & {p.first_stage for p in pipes}:
        return None
    frames = [diag.rows(p.name) for p in pipes]
    if any(f["query_id"].duplicated().any() for f in frames):
        return None
    qids = pd.unique(pd.concat([f["query_id"] for f in frames], ignore_index=True).to_numpy(dtype=object))
    n = len(qids)
    index = pd.Index(qids)
    at = [index.get_indexer(f["query_id"].to_numpy(dtype=object)) for f in frames]
    present = np.zeros((len(pipes), n), dtype=bool)
    for i, pos in enumerate(at):
        present[i, pos] = True

    def cols(p) -> list[tuple[str, str]]:  # (row key, per-query column), in _explore_rows' order
        return [
            (f"label:{p.name}", "diagnosis"),
            (f"m:{p.first_stage}", f"first_{m}"),
            (f"m:{p.name}", f"reranked_{m}"),
            (f"delta:{p.name}", f"delta_{m}"),
            (f"ceiling:{p.name}", f"ceiling_{m}"),
            (f"lost_c:{p.name}", "lost_in_candidates"),
            (f"lost_r:{p.name}", "lost_in_reranking"),
            (f"judged:{p.first_stage}", "first_judged_10"),
            (f"judged:{p.name}", "reranked_judged_10"),
            (f"rbo:{p.name}", "rbo"),
            (f"tau:{p.name}", "kendall_tau_10"),
        ]

    common = ("query_id", "query", "query_type")
    values: dict[str, np.ndarray] = {}
    has: dict[str, np.ndarray] = {}
    for i, (p, f, pos) in enumerate(zip(pipes, frames, at)):
        new = ~has["query_id"][pos] if i else np.ones(len(pos), dtype=bool)
        for key, col in [(c, c) for c in common] + cols(p):
            if key not in values:
                values[key], has[key] = np.full(n, None, dtype=object), np.zeros(n, dtype=bool)
            v = np.empty(len(pos), dtype=object)
            v[:] = _plain_column(f[col].to_numpy())
            take = new if key in common else np.ones(len(pos), dtype=bool)  # the text and type: the first run's
            values[key][pos[take]] = v[take]
            has[key][pos[take]] = True
    # the detail lines the rows give (_derived_detail) are explore_data's when every run of a first stage has the
    # same first-stage value and judged@10 for a query (the row keeps the last, the detail lines the first)
    for key in {k for p in pipes for k in (f"m:{p.first_stage}", f"judged:{p.first_stage}")}:
        col = "first_judged_10" if key.startswith("judged:") else f"first_{m}"
        first = key.split(":", 1)[1]
        for p, f, pos in zip(pipes, frames, at):
            if p.first_stage == first:
                mine = np.empty(len(pos), dtype=object)
                mine[:] = _plain_column(f[col].to_numpy())
                if any(a != b for a, b in zip(mine.tolist(), values[key][pos].tolist())):
                    return None
    # the keys in order of first appearance over the rows: each row's keys in the order its runs set them
    keys: dict[str, None] = {}
    for pattern in dict.fromkeys(map(tuple, present.T.tolist())):
        row_keys = dict.fromkeys(common)
        for p, there in zip(pipes, pattern):
            if there:
                row_keys.update(dict.fromkeys(k for k, _ in cols(p)))
        keys.update(row_keys)
    absent = {k: idx for k in keys if (idx := np.flatnonzero(~has[k]).tolist())}
    return {"n": n, "keys": list(keys), "values": [values[k].tolist() for k in keys], "absent": absent}


def _compact_views_of(views: dict) -> dict | None:
    """``_compact_views(json_ready(views))``: in one pass over the views as the result holds them when every
    document id, grade, rank, snippet and term is already a plain value (str, int, bool, None) and the view comes
    back whole from the compact form (``_views_of``: no rank or snippet is None, no document has two grades);
    otherwise that reference itself."""
    fast = _compact_plain_views(views) if views else None
    return fast if fast is not None else _compact_views(json_ready(views))


def _compact_plain_views(views: dict) -> dict | None:
    """``_compact_views_of``'s one pass; None where it does not apply."""
    out = _compact_start(views)
    if out is None:
        return None
    systems = out["systems"]
    tops, ranks_of = [out["top"][s] for s in systems], [out["ranks"][s] for s in systems]
    plain = _PLAIN_TYPES
    for q, v in views.items():
        if len(v) != 4 or set(v) != _VIEW_KEYS or list(v["top"]) != systems or list(v["ranks"]) != systems:
            return None
        grade: dict = {}
        lists = []
        for top in v["top"].values():
            for d, g in top:
                if grade.setdefault(d, g) != g:
                    return None
            lists.append([e[0] for e in top])
        ranks = [v["ranks"][s] for s in systems]
        snippets, terms = v["snippets"], v["terms"]
        if not (
            plain.issuperset(map(type, grade.values()))
            and type(terms) is list
            and plain.issuperset(map(type, terms))
            and all(_plain_given(x) for x in (snippets, *ranks))
        ):
            return None
        docs = sorted(set(grade).union(snippets, *ranks))
        if not plain.issuperset(map(type, docs)):
            return None
        index = {d: i for i, d in enumerate(docs)}
        out["queries"].append(q)
        out["docs"].append(docs)
        out["grades"].append(list(map(grade.get, docs)))
        out["terms"].append(list(terms))
        out["snippets"].append(list(map(snippets.get, docs)))
        for shown, r, top_s, ranks_s in zip(lists, ranks, tops, ranks_of):
            top_s.append([index[d] for d in shown])
            ranks_s.append(list(map(r.get, docs)))
    return out


def _plain_given(given: dict) -> bool:
    """Whether a view's {document: rank or snippet} holds plain values only, none of them None."""
    values = given.values()
    return None not in values and _PLAIN_TYPES.issuperset(map(type, values))


_PLAIN_TYPES = frozenset({str, int, bool, type(None)})


def encode_explore(data: dict, compress: bool | None = None) -> str:
    """The text of the page's ``explore-data`` element: the envelope (the module's docstring) around ``data``'s
    payload, compressed when ``compress`` says so or (None) when its JSON is over ``COMPRESS_ABOVE`` characters.
    Safe inside an inline ``<script>``: no '<' in it."""
    return _encoded(explore_payload(data), compress)


def _encoded(payload: dict, compress: bool | None = None) -> str:
    """``encode_explore``'s text for a payload already built."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if compress is None:
        compress = len(text) > COMPRESS_ABOVE
    envelope: dict = {"format": FORMAT, "version": VERSION, "encoding": "gzip+base64" if compress else "json"}
    if compress:
        envelope["data"] = base64.b64encode(
            gzip.compress(text.encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)
        ).decode()
    else:
        envelope["data"] = payload
    return script_json(envelope)


def decode_explore(text: str) -> dict:
    """The explorer's data from the ``explore-data`` element's text (what ``encode_explore`` wrote): exactly the
    dict ``explore_data`` gave."""
    envelope = json.loads(text)
    if envelope.get("format") != FORMAT or envelope.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} version {VERSION} envelope: {str(envelope)[:80]}")
    if envelope["encoding"] == "gzip+base64":
        payload = json.loads(gzip.decompress(base64.b64decode(envelope["data"])).decode("utf-8"))
    elif envelope["encoding"] == "json":
        payload = envelope["data"]
    else:
        raise ValueError(f"unknown encoding {envelope['encoding']!r}")
    rows = _rows_of(payload["rows"])
    meta = payload["meta"]
    detail = payload["detail_rows"] if "detail_rows" in payload else _derived_detail(rows, meta["systems"])
    views = payload["views_plain"] if "views_plain" in payload else _views_of(payload["views"])
    big = {"rows": rows, "detail_rows": detail, "views": views, "missed": payload["missed"]}
    return {**meta, **big}


def read_explore_data(html: str) -> dict:
    """The explorer's data in a diagnosis page (``index.html``'s text), decoded."""
    m = re.search(r'<script type="application/json" id="explore-data">(.*?)</script>', html, re.S)
    if m is None:
        raise ValueError("no explore-data element in the page")
    return decode_explore(m[1])


# ------------------------------------------------------------------ HTML
def explore_html(diag: Diagnosis) -> str:
    """The explorer's section: its intro, the table and detail panel the script fills, a static copy of the table
    for a browser without scripts (up to ``NOSCRIPT_ROWS`` queries), and the data."""
    payload = explore_payload_of(diag)
    meta, table = payload["meta"], payload["rows"]
    n = table["n"]
    if n <= NOSCRIPT_ROWS:
        column = dict(zip(table["keys"], table["values"]))
        none = [None] * n
        static = Table(
            [c["label"] for c in meta["columns"]],
            [list(r) for r in zip(*(column.get(c["key"], none) for c in meta["columns"]))] if n else [],
        )
        fallback = f'<p class="muted">Scripts are off: the table below does not sort or filter.</p>{static.html()}'
    else:
        fallback = (
            f'<p class="muted">Scripts are off: the table of {n:,} queries needs them; per_query.csv beside this '
            "page has every value.</p>"
        )
    return (
        '<h2 id="explore-heading">Explore the queries</h2><div id="explore">'
        f'<p class="muted" id="explore-covers">The explorer covers all {n:,} {"query" if n == 1 else "queries"} '
        "of this diagnosis.</p>"
        '<p class="muted" id="explore-loading">Reading the explorer\'s data…</p>'
        '<p class="muted needs-script">Click a column to sort (again to reverse); filter with the boxes under the '
        "headers (a label or type, text contained, or numbers: <code>&lt;0.5</code>, <code>&gt;=0.2</code>, "
        "<code>0.2..0.6</code>). Click a query for every system's top "
        f"{meta['k']} side by side; each query has its own link (<code>#q=ID</code>). "
        '<span id="explore-count"></span></p>'
        '<div class="explore-wrap needs-script"><table id="explore-table"><thead></thead><tbody></tbody></table>'
        '</div><div id="query-detail" class="needs-script"><p class="muted">No query chosen: click one in the '
        "table.</p></div>"
        f"<noscript>{fallback}</noscript></div>"
        f'<script type="application/json" id="explore-data">{_encoded(payload)}</script>'
    )


def explore_script() -> str:
    return resources.files("toolkit.report").joinpath("explore.js").read_text(encoding="utf-8")
