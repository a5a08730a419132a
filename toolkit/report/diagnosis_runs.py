"""Sections of the diagnosis report about each reranked run itself: its rerank depth and where it came from,
its repeats and their spread, and how it treats its candidates (the promotion profile, unchanged queries,
windows in input order). Read from ``Pipeline.detection``, ``Pipeline.repeats`` and ``Pipeline.behaviour``.
"""

from __future__ import annotations

from toolkit.diagnosis.compute import Diagnosis
from toolkit.diagnosis.depths import DEPTH_RULE
from toolkit.diagnosis.listwise_behaviour import REPAIR_EFFECTS
from toolkit.guard.escape import markdown_text as md
from toolkit.guard.escape import plot_text
from toolkit.report.eval_tables import Table
from toolkit.report.html import esc, pyplot
from toolkit.report.sections import Part

#: Colours of the systems in every plot of the diagnosis (``toolkit.report.diagnosis_page`` uses them too).
SYSTEM_COLOURS = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#6e40c9", "#cf222e", "#116329", "#57606a")


def _muted(text_html: str) -> Part:
    return Part.html_only(f'<p class="muted">{text_html}</p>')


# ------------------------------------------------------------------ depths
def depth_lines(diag: Diagnosis) -> list[str]:
    """One line per reranked run: its depth and where it came from, the queries missing from it and its
    byte-identical repeats."""
    out = []
    for p in diag.pipelines:
        reps = f", {p.repeats['n']} repeats" if p.repeats else ""
        line = f"{p.name} reranks {p.first_stage}'s {p.depth_source}{reps}."
        missing = p.decomposition.missing
        if missing:
            n = p.decomposition.means()["queries"]
            line += (
                f" {len(missing)} queries {p.first_stage} and the qrels hold are missing from it: labelled "
                f"missing and left out of its loss split (over {n} queries)."
            )
        for group in (p.repeats or {}).get("identical") or ():
            line += f" Byte-identical repeats: {', '.join(group[1:])} = {group[0]}."
        out.append(line)
    return out


def depth_parts(diag: Diagnosis) -> list[Part]:
    """The headline's statement of every run's rerank depth and its source."""
    lines = depth_lines(diag)
    detected = any(p.depth_from == "detected" for p in diag.pipelines)
    rule = f" Detected depths follow one rule: {DEPTH_RULE}." if detected else ""
    return [
        Part(
            '<ul id="depths">'
            + "".join(f"<li>{esc(t)}</li>" for t in lines)
            + "</ul>"
            + (f'<p class="muted">{esc(rule.strip())}</p>' if rule else ""),
            (*(f"- {md(t)}" for t in lines), "", *([md(rule.strip()), ""] if rule else [])),
        )
    ]


# ------------------------------------------------------------------ repeats
def has_repeats(diag: Diagnosis) -> bool:
    return any(p.repeats for p in diag.pipelines)


def repeats_table(diag: Diagnosis) -> Table:
    rows = []
    for p in diag.pipelines:
        if not p.repeats:
            continue
        r = p.repeats
        rows.append(
            [
                p.name,
                r["n"],
                r["mean"],
                r["min"],
                r["max"],
                r["max"] - r["min"],
                r["sd"],
                r["per_query_sd"],
                ", ".join(f"{m:.4f}" for m in r["means"]),
            ]
        )
    label = diag.measure_label
    return Table(
        [
            "system",
            "repeats",
            f"mean {label}",
            "min",
            "max",
            "spread (max − min)",
            "sd of run means",
            "mean per-query sd",
            "each repeat",
        ],
        rows,
        numeric=set(range(1, 8)),
        table_id="repeats",
    )


def repeat_readings(diag: Diagnosis) -> list[str]:
    """The sentences of every comparison with a repeated system (within the repeat spread or not)."""
    return [f"{c['family']}: {c['reading']}" for c in diag.comparisons if c.get("reading")]


def repeats_parts(diag: Diagnosis) -> list[Part]:
    readings = repeat_readings(diag)
    firsts = "; ".join(
        f"{p.name}: {p.repeats['runs'][0]}" for p in diag.pipelines if p.repeats and p.repeats.get("runs")
    )
    lists = (
        "Rank agreement (RBO, Kendall's tau) and the query views read one ranked list per system, that of its "
        f"first repeat ({firsts}); the listwise behaviour counts every repeat."
    )
    return [
        Part.table(repeats_table(diag)),
        _muted(
            "Runs given under one name are repeats of one system. Its per-query values are the means over its "
            "repeats, and so are its decomposition, labels and comparisons; sd: sample standard deviation (n − 1); "
            "mean per-query sd: each query's sd over the repeats, averaged over queries."
        ),
        Part(f'<p class="muted" id="repeat-lists">{esc(lists)}</p>', (md(lists), "")),
        Part(
            '<ul id="repeat-readings">' + "".join(f"<li>{esc(t)}</li>" for t in readings) + "</ul>",
            (*(f"- {md(t)}" for t in readings), ""),
        ),
    ]


# ------------------------------------------------------------------ listwise behaviour
def promotion_table(diag: Diagnosis) -> Table:
    buckets: list[str] = []
    for p in diag.pipelines:
        for b in (p.behaviour or {}).get("promotion_profile", []):
            if b["bucket"] not in buckets:
                buckets.append(b["bucket"])
    headers = ["first-stage ranks"]
    cols = []
    for p in diag.pipelines:
        prof = {b["bucket"]: b for b in (p.behaviour or {}).get("promotion_profile", [])}
        headers += [f"relevant ({p.name})", f"{p.name}: share in top 10", f"ceiling (top {p.depth}): share in top 10"]
        cols.append(prof)
    rows = []
    for bucket in buckets:
        row: list[object] = [bucket]
        for prof in cols:
            b = prof.get(bucket)
            row += [b["relevant"], b["reranked_share"], b["ceiling_share"]] if b else [None, None, None]
        rows.append(row)
    return Table(headers, rows, numeric=set(range(1, len(headers))), table_id="promotion-profile")


def behaviour_table(diag: Diagnosis) -> Table:
    rows = []
    for p in diag.pipelines:
        b = p.behaviour or {}
        w = b.get("windows")
        probe = b.get("order_probe")
        spread = (probe or {}).get("ndcg_cut_10")
        rows.append(
            [
                p.name,
                p.depth,
                b.get("unchanged_queries"),
                f"{b.get('unchanged_query_count', 0)} of {b.get('queries_compared', 0)}",
                w["share"] if w else None,
                f"{w['in_input_order']} of {w['windows']} (W {w['window']}, S {w['stride']})" if w else "–",
                probe["mean_rbo"] if probe else None,
                spread["mean_range"] if spread else None,
                f"{probe['n']} shuffles, seed {probe['seed']}"
                + (
                    f"; nDCG@10 {spread['run']:.4f}, shuffled {spread['min']:.4f} to {spread['max']:.4f}"
                    + (f" (sd {spread['std']:.4f})" if spread.get("std") is not None else "")
                    + f", {spread['queries']} judged queries"
                    if spread
                    else ""
                )
                if probe
                else "–",
            ]
        )
    return Table(
        [
            "reranked run",
            "depth",
            "unchanged queries",
            "queries",
            "windows in input order",
            "windows",
            "order probe: mean RBO",
            "order probe: nDCG@10 mean range",
            "order probe",
        ],
        rows,
        numeric={1, 2, 4, 6, 7},
        table_id="listwise-behaviour",
    )


def _queries(qs: list[str], shown: int = 5) -> str:
    """The first ``shown`` query ids, and how many more."""
    return ", ".join(qs[:shown]) + (f" and {len(qs) - shown} more" if len(qs) > shown else "")


def record_table(diag: Diagnosis) -> Table | None:
    """Per listwise run whose sidecar records its windows: the answers per repair kind and the queries they
    touched, and the windows its answers left in their input order."""
    rows = []
    for p in diag.pipelines:
        rec = (p.behaviour or {}).get("listwise_record")
        if not rec:
            continue
        left = rec["left_in_input_order"]
        row: list[object] = [p.name, rec["windows"], rec["repaired"]]
        for kind in REPAIR_EFFECTS:
            r = rec["repairs"][kind]
            qs = r["queries"]
            row.append(f"{r['answers']} ({len(qs)} queries: {_queries(qs)})" if r["answers"] else "0")
        lq = list(left["queries"])
        row.append(
            f"{left['count']} of {rec['windows']}: {left['none_parsed']} without an identifier read, "
            f"{left['answered']} ranked as given" + (f" ({len(lq)} queries: {_queries(lq)})" if lq else "")
        )
        rows.append(row)
    if not rows:
        return None
    return Table(
        [
            "reranked run",
            "windows",
            "repaired answers",
            *(f"repair: {k}" for k in REPAIR_EFFECTS),
            "windows left in input order",
        ],
        rows,
        numeric={1, 2},
        table_id="listwise-record",
    )


#: the sentence about repairs: what each of them does, true for each kind
REPAIRS_SENTENCE = (
    "Repairs (rank_llm's, counted per answer in the sidecar of `twostage rerank --backend listwise`): "
    + "; ".join(f"{kind}: {effect}" for kind, effect in REPAIR_EFFECTS.items())
    + ". Only an answer without an identifier read leaves its window in its input order; the others keep the "
    "order of the identifiers the LLM named. Windows left in input order are read from each window's own "
    "answer: those no identifier was read from, and those the LLM ranked in the order given."
)


def behaviour_parts(diag: Diagnosis) -> list[Part]:
    level = next((p.behaviour["relevance_level"] for p in diag.pipelines if p.behaviour), 1)
    record = record_table(diag)
    return [
        Part.table(promotion_table(diag)),
        _muted(
            f"Promotion profile: of the relevant candidates (label ≥ {level}) from each bucket of first-stage "
            "ranks, the share the reranked run puts in its top 10, beside the share the best order of the same "
            "candidates (the ceiling) puts there. Pooled over queries; with repeats, the mean over repeats."
        ),
        Part.plot("promotion_profile", "promotion profile"),
        Part.table(behaviour_table(diag)),
        _muted(
            "Unchanged queries: the reranked top N is the first stage's top N in the first stage's order (a "
            "listwise answer without an identifier read returns its window's input; so does one that ranks it as "
            "given). Windows in input order (with --window and "
            "--stride, or the window and stride the run's sidecar records): the ranks of each sliding window, from the bottom up as rank_llm slides it, hold their "
            "documents in the first stage's order in the final list: exact while the windows before it kept "
            "their input, an approximation after one that changed it. Order probe (from the sidecar of "
            "`twostage rerank --backend listwise --shuffles K`): the rank-biased overlap (p 0.9) of the top 10 "
            "reranked from K seeded shuffles of the input with the run's own top 10, the mean over queries; 1.0: "
            "the order does not depend on the input order; near chance: the reranker returns its input order. "
            "With `--qrels`: per query the largest minus the smallest nDCG@10 over the K shuffled runs, the "
            "mean over the judged queries (nDCG@10 mean range), beside the run's nDCG@10, the lowest and highest "
            "mean nDCG@10 of a shuffled run and their standard deviation."
        ),
        *(
            [
                Part.table(record),
                Part(f'<p class="muted" id="listwise-repairs">{esc(REPAIRS_SENTENCE)}</p>', (md(REPAIRS_SENTENCE), "")),
            ]
            if record is not None
            else []
        ),
    ]


def plot_promotion_profile(diag: Diagnosis):
    """Per first-stage rank bucket: the share of its relevant candidates each reranked run puts in its top
    10 (solid) and the ceiling does (dashed)."""

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for i, p in enumerate(diag.pipelines):
        prof = [b for b in (p.behaviour or {}).get("promotion_profile", []) if b["relevant"]]
        if not prof:
            continue
        colour = SYSTEM_COLOURS[i % len(SYSTEM_COLOURS)]
        x = [b["from"] for b in prof]
        ax.plot(x, [b["reranked_share"] for b in prof], "o-", color=colour, label=plot_text(p.name))
        ax.plot(x, [b["ceiling_share"] for b in prof], "s--", color=colour, alpha=0.6, label=f"ceiling (top {p.depth})")
    ticks = sorted({b["from"] for p in diag.pipelines for b in (p.behaviour or {}).get("promotion_profile", [])})
    labels = {b["from"]: b["bucket"] for p in diag.pipelines for b in (p.behaviour or {}).get("promotion_profile", [])}
    ax.set_xticks(ticks, [labels[t] for t in ticks], fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("first-stage ranks of the relevant candidates")
    ax.set_ylabel("share put in the top 10")
    ax.set_title("Which first-stage ranks the reranker promotes")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig
