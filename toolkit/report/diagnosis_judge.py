"""The diagnosis page's "Labels from a judge" section, shown when the qrels were merged with an LLM judge's labels
(``toolkit.quality.qrels_origin``) and some of the judge's labels were used.

It reads ``diag.settings["qrels_origin"]`` (``records.QrelsOrigin.describe()``: the policy, the counts of labels of
each origin, the sources, and the judge's sidecar record: backend, model, prompt checksum and, when
``twostage judge --calibrate`` measured it, its ``calibration``) and shows the policy and the labels of each
origin; with a calibration the documents both judged, the confusion matrix (rows the human label, columns the
judge's), Cohen's kappa, linearly weighted kappa, the mean absolute label difference and, where the calibration
ranked systems, Kendall's tau, tau_ap and the significant pairs that flip; else that no calibration was recorded,
with the command that makes one. Pairs whose passage held the judge prompt's answer marker (``injection_suspected``
in the judge's records) are listed with the label the judge gave them: it may be the passage's own words. Every
value is escaped by ``Table``/``Part`` (``toolkit.guard.escape``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from toolkit.guard.escape import markdown_code, markdown_text
from toolkit.quality.qrels_origin import near_chance
from toolkit.report.eval_tables import Table
from toolkit.report.html import esc
from toolkit.report.sections import Part

POLICY_MEANING = MappingProxyType(
    {
        "human": "the human labels only; the judge's were read and left out",
        "fill": "the human labels, and the judge's for the documents of human-judged queries that no human judged",
        "judge": "the judge's labels only",
    }
)


def origin_of(diag) -> Mapping:
    return (diag.settings or {}).get("qrels_origin") or {}


def has_judge_labels(diag) -> bool:
    """Shown when the qrels carry a judge origin whose labels were used."""
    return int((origin_of(diag).get("counts") or {}).get("judge_labels_used") or 0) > 0


def _number(x, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    try:
        return f"{float(x):.{digits}f}"
    except (TypeError, ValueError):
        return str(x)


def _paragraph(text: str) -> Part:
    return Part(f"<p>{esc(text)}</p>", (markdown_text(text) + "\n",))


def _muted(text: str) -> Part:
    return Part(f'<p class="muted">{esc(text)}</p>', (markdown_text(text) + "\n",))


def counts_table(origin: Mapping) -> Table:
    c = origin.get("counts") or {}
    rows = [
        ["human", c.get("human_labels_read"), c.get("human_labels_used")],
        ["judge", c.get("judge_labels_read"), c.get("judge_labels_used")],
    ]
    return Table(["origin", "labels read", "labels used"], rows, numeric={1, 2}, table_id="label-origins")


def confusion_table(cal: Mapping) -> Table:
    labels = [str(v) for v in cal.get("labels") or []]
    matrix = cal.get("confusion") or []
    if not labels:
        labels = [str(i) for i in range(len(matrix))]
    rows = [[f"human {label}", *row] for label, row in zip(labels, matrix)]
    return Table(
        ["human \\ judge", *(f"judge {v}" for v in labels)],
        rows,
        numeric=set(range(1, len(labels) + 1)),
        table_id="judge-confusion",
    )


def statistics_table(cal: Mapping) -> Table:
    rows = [
        ["documents both judged", str(cal.get("documents_both"))],
        ["Cohen's kappa", _number(cal.get("kappa"))],
        ["kappa, linearly weighted", _number(cal.get("kappa_linear"))],
    ]
    if "mean_abs_difference" in cal:
        rows.append(["mean |human − judge| label", _number(cal.get("mean_abs_difference"))])
    if "kendall_tau" in cal:
        rows.append(["system ranking: Kendall's tau (human vs judge)", _number(cal.get("kendall_tau"))])
    if "tau_ap" in cal:
        rows.append(["system ranking: tau_ap (human ranking as reference)", _number(cal.get("tau_ap"))])
    if isinstance(cal.get("flipped_pairs"), list):
        rows.append(["significant pairs that flip", str(len(cal["flipped_pairs"]))])
    return Table(["statistic", "value"], rows, numeric={1}, table_id="judge-calibration")


def injection_table(suspected: list[Mapping]) -> Table:
    """The pairs whose passage held the answer marker, with the judge's label (``none``: no label parsed)."""
    rows = [
        [str(r.get("query_id")), str(r.get("doc_id")), "none" if r.get("label") is None else str(r.get("label"))]
        for r in suspected
    ]
    return Table(["query", "document", "judge label"], rows, numeric={2}, table_id="judge-injection-suspected")


def judge_parts(diag) -> list[Part]:
    origin = origin_of(diag)
    c = origin.get("counts") or {}
    policy = str(origin.get("policy", ""))
    sources = origin.get("sources") or {}
    judge = sources.get("judge") or {}
    human = sources.get("human") or {}
    who = judge.get("judge") or {}
    model = " ".join(str(v) for v in (who.get("backend"), who.get("model")) if v)
    described = ""
    if model:
        prompt = f", prompt sha256 {judge['prompt_sha256']}" if judge.get("prompt_sha256") else ""
        described = f" (judge {model}{prompt})"
    text = (
        f"Qrels policy {policy}: {POLICY_MEANING.get(policy, policy)}. Used: {c.get('human_labels_used')} human "
        f"labels and {c.get('judge_labels_used')} judge labels{described}; the judge's labels from "
        f"{judge.get('path')}."
    )
    parts = [_paragraph(text), Part.table(counts_table(origin))]
    skipped = [
        f"{c[k]} {what}"
        for k, what in (
            ("judge_labels_on_judged_documents", "judge labels on documents humans judged (the human label kept)"),
            ("judge_labels_on_queries_without_human_labels", "judge labels on queries no human judged (left out)"),
        )
        if c.get(k)
    ]
    if skipped:
        parts.append(_muted("Not used: " + "; ".join(skipped) + "."))
    suspected = [r for r in judge.get("injection_suspected") or [] if isinstance(r, Mapping)]
    if suspected:
        warning = (
            f"{len(suspected)} passage(s) the judge labelled hold its prompt's answer marker (as if the passage "
            "answered for the judge): their labels may be the passage's own words, not the judge's. Check them:"
        )
        parts.append(Part(f'<p class="warn">{esc(warning)}</p>', (markdown_text(warning) + "\n",)))
        parts.append(Part.table(injection_table(suspected)))
    cal = judge.get("calibration")
    if isinstance(cal, Mapping) and cal:
        against = (cal.get("human_qrels") or {}).get("path")
        sample = cal.get("sample") if isinstance(cal.get("sample"), Mapping) else None
        how = (
            f"twostage judge --holes-only --calibrate-sample, on a sample of {sample.get('drawn')} of the "
            f"{sample.get('population')} human-judged documents in the run's top {sample.get('depth')} (seed "
            f"{sample.get('seed')})"
            if sample
            else "twostage judge --calibrate"
        )
        parts.append(Part.heading("The judge's calibration against human labels", 3))
        chance = near_chance(cal)
        if chance:
            warning = chance[0].upper() + chance[1:] + "."
            parts.append(Part(f'<p class="warn">{esc(warning)}</p>', (markdown_text(warning) + "\n",)))
        parts.append(
            _muted(
                f"Recorded by {how} in the judge's sidecar: on the {cal.get('documents_both')} documents both "
                "judged" + (f" (human qrels {against})" if against else "") + ", rows the human "
                "label, columns the judge's."
            )
        )
        parts += [Part.table(confusion_table(cal)), Part.table(statistics_table(cal))]
        used = cal.get("ranking_qrels")
        if isinstance(used, Mapping) and isinstance(used.get("judge"), Mapping):
            j = used["judge"]
            parts.append(
                _muted(
                    f"The system ranking compares the human qrels ({(used.get('human') or {}).get('human_labels')} "
                    f"human labels, every one) with the same qrels carrying the judge's labels "
                    f"({j.get('human_labels')} human labels, {j.get('judge_labels_replacing_human')} judge labels "
                    f"replacing human ones, {j.get('judge_labels_filling_holes')} filling holes)."
                )
            )
    else:
        command = (
            f"twostage judge --holes-only --calibrate-sample 100 --qrels {human.get('path') or 'HUMAN_QRELS'} "
            f"--run RUN --candidates CANDIDATES.json --depth 20 --model {who.get('model') or 'MODEL'} "
            "--out HOLES.qrels"
        )
        sentence = (
            "No calibration was recorded for the judge: nothing says how far its labels agree with the human ones. "
            "Judge the holes with a sample of documents humans judged too (the agreement lands under calibration "
            "in HOLES.qrels.meta.json, and this page shows it): "
        )
        parts.append(
            Part(
                f'<p class="warn">{esc(sentence)}<code>{esc(command)}</code></p>',
                (markdown_text(sentence) + markdown_code(command) + "\n",),
            )
        )
    return parts


__all__ = [
    "confusion_table",
    "counts_table",
    "has_judge_labels",
    "injection_table",
    "judge_parts",
    "statistics_table",
]
