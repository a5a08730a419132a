"""The diagnosis page's "How far to trust each comparison" section: per comparison the direction, the bootstrap
interval of the difference, d_z, the hole bounds of both systems and the one-line verdict
(``toolkit.stats.annotate``). Names and texts are escaped by ``Table``/``Part`` (``toolkit.guard.escape``)."""

from __future__ import annotations

from toolkit.guard.escape import markdown_text
from toolkit.report.eval_tables import Table
from toolkit.report.html import esc
from toolkit.report.sections import Part
from toolkit.stats.trust import bounds_text, dz_text, interval_text

HEADERS = ("family", "A", "B", "Δ (B − A)", "direction", "interval", "d_z", "bounds A", "bounds B", "verdict")


def has_verdicts(diag) -> bool:
    return any("verdict" in c for c in diag.comparisons)


def trust_table(diag) -> Table:
    rows = [
        [
            c["family"],
            c["baseline"],
            c["run"],
            f"{float(c['delta']):+.4f}",
            c.get("direction", ""),
            interval_text(c),
            dz_text(c),
            bounds_text(c.get("baseline_bounds")),
            bounds_text(c.get("bounds")),
            c.get("verdict", ""),
        ]
        for c in diag.comparisons
    ]
    return Table(HEADERS, rows, numeric={3, 6}, table_id="trust")


def trust_parts(diag) -> list[Part]:
    u = diag.settings.get("uncertainty") or {}
    ci = u.get("ci") or {}
    holes = u.get("holes")
    text = (
        f"Interval: paired bootstrap ({ci.get('method', 'percentile')}, level {ci.get('level', 0.95):g}, "
        f"{ci.get('resamples', '')} resamples of the queries, seed {ci.get('seed', '')}) of the mean difference; "
        "d_z: mean of the per-query differences over their sample sd. "
        + (
            f"Bounds: each system's lowest and highest mean {holes['measure']} over every labelling of its "
            "unjudged documents in the top k (the ideal ranking from the judged documents plus those); where the "
            "two overlap, some labelling of the top-k holes could erase or reverse the difference (judge more "
            "before claiming it). "
            if holes
            else "No hole bounds: they are computed for ndcg_cut.k, P.k and recall.k. "
        )
        + "The verdict's better / worse is the adjusted p-value below 0.05 (the interval is not corrected for "
        "the family)."
    )
    return [Part.table(trust_table(diag)), Part(f'<p class="muted">{esc(text)}</p>', (markdown_text(text) + "\n",))]


__all__ = ["HEADERS", "has_verdicts", "trust_parts", "trust_table"]
