"""``twostage compare``'s outputs: the text table on stdout, compare.json and compare.html with difference plots.

Reads the comparison document the command builds (``baseline``, ``runs``, ``tests``, ``baseline_mean``,
``results[measure][run]`` with mean, delta, p_ttest, p_permutation, p_adjusted, wins/ties/losses, ``forced``,
``provenance_differences``, ``provenance``) and the tidy per-query table (run, query_id, measure, value).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from toolkit.guard.escape import plot_text
from toolkit.report.eval_tables import SIGNIFICANCE_HEADERS, significance_rows
from toolkit.report.html import esc, figure_data_uri, html_page, html_table, p_value, provenance_html, pyplot


def run_labels(runs: list[str], width: int = 40) -> dict[str, str]:
    """File names when they tell the runs apart, else the paths' tails."""
    names = {r: Path(r).name for r in runs}
    if len(set(names.values())) < len(runs):
        names = {r: r for r in runs}
    return {r: n if len(n) <= width else "..." + n[-(width - 3) :] for r, n in names.items()}


#: the tests compare_text names in its header only when they are the chosen one (``--test``)
_CHOSEN = MappingProxyType(
    {
        "p_wilcoxon": "Wilcoxon signed-rank test (scipy.stats.wilcoxon's defaults); ",
        "p_sign": "sign test (exact binomial over the non-tied queries); ",
    }
)


#: ``--test`` -> how compare.html names its p-values
_TEST_WORDS = MappingProxyType(
    {
        "randomization": "randomization",
        "t": "t-test",
        "wilcoxon": "Wilcoxon signed-rank",
        "sign": "sign-test",
        "tukey": "Tukey HSD",
    }
)


def compare_text(doc: dict) -> str:
    from toolkit.stats.paired import TESTS
    from toolkit.stats.verdict import verdict

    t = doc["tests"]
    key = TESTS.get(t.get("test", "randomization"), "p_permutation")
    all_pairs = t.get("family") == "all-pairs"
    lines = [
        f"# all pairs of: {', '.join(doc['runs'])}"
        if all_pairs
        else f"# baseline: {', '.join(doc.get('baselines') or [doc['baseline']])}",
        f"# tests: paired t-test; randomization test, {t['permutations']} permutations, seed {t['seed']}"
        + (f"; randomised Tukey HSD, {t['permutations']} permutations, seed {t['seed']}" if all_pairs else "")
        + "; "
        + _CHOSEN.get(key, "")
        + f"correction: {t['correction']} (on {key}, per measure, family: {t.get('family', 'baseline')}); "
        f"Monte-Carlo error of a sampled p: sqrt(p (1 - p) / permutations)",
    ]
    if t.get("ci"):
        ci = t["ci"]
        lines.append(
            f"# interval: paired bootstrap {ci['method']}, {ci['level']:g}, {ci['resamples']} resamples, seed "
            f"{ci['seed']}; d_z = mean / sd of the per-query differences; verdict at p_adj < 0.05"
        )
    if doc.get("holes"):
        from toolkit.stats.verdict import OVER_SHORT, OVER_WORDS

        over = t.get("holes_over", "top-k")
        lines.append(
            f"# bounds: each run's lowest and highest mean over {OVER_WORDS[over]} (--holes-over {over}); "
            f"'bounds over {OVER_SHORT[over]} overlap': those holes could explain the difference"
        )
    for run, same in (doc.get("identical") or {}).items():
        lines.append(f"# left out of the family: {run} (identical per-query values to {same})")
    if doc["forced"]:
        lines.append(
            "# FORCED despite: " + "; ".join(f"{k}: {a} vs {b}" for k, (a, b) in doc["provenance_differences"].items())
        )
    names = run_labels(doc["runs"])
    extra = {"p_wilcoxon": "p_wilcox", "p_sign": "p_sign"}.get(key)  # the chosen test's column, when not shown
    header = f"{'measure':<14} {'run':<40} {'mean':>7} {'delta':>8} {'p_ttest':>8} {'p_perm':>8}"
    header += (f" {extra:>8}" if extra else "") + f" {'p_adj':>8}  W/T/L"
    lines.append(header)
    by_baseline = doc.get("results_by_baseline") or {doc["baseline"]: doc["results"]}
    for measure, base, per_run in ((m, b, res[m]) for b, res in by_baseline.items() for m in res):
        first = next(iter(per_run.values()))
        lines.append(
            f"{measure:<14} {names[base]:<40} {first['baseline_mean']:>7.4f} {'(ref)' if all_pairs else '(base)':>8}"
        )
        for run, r in per_run.items():
            lines.append(
                f"{measure:<14} {names[run]:<40} {r['mean']:>7.4f} {r['delta']:>+8.4f} "
                f"{p_value(r['p_ttest']):>8} {p_value(r['p_permutation']):>8} "
                + (f"{p_value(r[key]):>8} " if extra else "")
                + f"{p_value(r['p_adjusted']):>8}  "
                f"{r['wins']}/{r['ties']}/{r['losses']}"
            )
            if "ci_low" in r:
                lines.append(f"{'':<14} {'':<40} {r.get('verdict') or verdict(r)}")
    return "\n".join(lines) + "\n"


def test_notes(doc: dict, tests, baselines: list[str], systems: list[str], alpha: float = 0.05) -> list[str]:
    """``Comparison.notes``: a heading, then per test (baselines in order, then measures, then systems) its
    verdict line at ``alpha`` and, where the document holds them (``compare --holes``), both systems' bounds."""
    from toolkit.stats.trust import bounds_text
    from toolkit.stats.verdict import verdict

    t = doc["tests"]
    ci = t.get("ci") or {}
    method = f" ({ci['method']})" if ci.get("method") else ""
    head = (
        f"Per test: the difference to the baseline, its {ci.get('level', 0.95):g} paired bootstrap interval{method} "
        f"in brackets, d_z, p_adj ({t['correction']} correction) and the verdict at p < {alpha:g}"
    )
    over = t.get("holes_over", "top-k")
    if doc.get("holes"):
        from toolkit.stats.verdict import OVER_SHORT, OVER_WORDS

        head += (
            f"; bounds: each system's lowest and highest mean over {OVER_WORDS[over]} (overlapping bounds: "
            f"{OVER_SHORT[over]} could explain the difference)"
        )
    by = {(c.baseline, c.run, c.measure): c for c in tests}
    by_baseline = doc.get("results_by_baseline") or {doc["baseline"]: doc["results"]}
    order = list(dict.fromkeys([*baselines, *(c.baseline for c in tests)]))
    lines = [head + "."]
    for b in order:
        for m in doc.get("measures") or sorted({c.measure for c in tests}):
            for run in systems:
                c = by.get((b, run, m))
                if c is None:
                    continue
                trust = by_baseline.get(b, {}).get(m, {}).get(run, {})
                lo, hi = trust.get("baseline_bounds"), trust.get("bounds")
                pair = (tuple(lo), tuple(hi)) if lo is not None and hi is not None else None
                line = f"{m}, {run} vs {b}: {verdict(c.as_dict(), alpha, pair, over)}"
                if pair is not None:
                    line += f" (bounds {b} {bounds_text(lo)}, {run} {bounds_text(hi)})"
                lines.append(line)
    return lines


def write_compare_report(out: Path, doc: dict, table, baseline: str, measures: list[str]) -> None:
    """``OUT/compare.json`` and ``OUT/compare.html`` (one table and one difference plot per measure), written into
    a temporary folder that replaces ``out`` in one rename (``toolkit.guard.writer``)."""
    from toolkit.guard.writer import result_folder

    with result_folder(out, "comparison", ("compare.json", "compare.html")) as tmp:
        _write_compare_files(tmp, doc, table, baseline, measures)


def _write_compare_files(out: Path, doc: dict, table, baseline: str, measures: list[str]) -> None:
    from toolkit.data.trec_io import atomic_write, write_json

    write_json(out / "compare.json", doc)
    t = doc["tests"]
    body = [
        f"<h1>Comparison against {esc(doc['baseline'])}</h1>",
        f'<p class="muted">Paired t-test (two-sided); paired randomization test with {t["permutations"]} '
        f"permutations, seed {t['seed']}; {esc(t['correction'])} correction of the {_TEST_WORDS.get(t['test'], '')} "
        "p-values per "
        "measure. W/T/L: queries where the run is better than / equal to / worse than the baseline.</p>",
    ]
    if doc["forced"]:
        body.append(
            '<p class="bad">Forced despite provenance differences: '
            + esc("; ".join(f"{k}: {a} vs {b}" for k, (a, b) in doc["provenance_differences"].items()))
            + "</p>"
        )
    for measure in measures:
        rows: list[list[object]] = [[baseline, f"{doc['baseline_mean'][measure]:.4f}", "", "", "", "", "", ""]]
        results = doc["results"][measure]
        rows += [[*row, results[row[0]].get("verdict", "")] for row in significance_rows(results)]
        body.append(f"<h2>{esc(measure)}</h2>")
        body.append(html_table(["run", *SIGNIFICANCE_HEADERS, "verdict"], rows, numeric={1, 2, 3, 4, 5}))
        body.append(
            f'<img class="plot" alt="per-query differences, {esc(measure)}" '
            f'src="{figure_data_uri(difference_plot(table, baseline, measure))}">'
        )
    for run, prov in doc["provenance"].items():
        body.append(f"<h2>Provenance: {esc(run)}</h2>" + provenance_html(prov))
    with atomic_write(out / "compare.html") as fh:
        fh.write(html_page(f"Comparison against {doc['baseline']}", "\n".join(body)))


def difference_plot(table, baseline: str, measure: str):
    """Per-query differences (run - baseline), sorted, one panel per run: green up, red down."""
    plt = pyplot()
    wide = table[table["measure"] == measure].pivot(index="query_id", columns="run", values="value")
    others = [r for r in wide.columns if r != baseline]
    order = list(dict.fromkeys(table["run"]))
    others.sort(key=order.index)
    fig, axes = plt.subplots(len(others), 1, figsize=(9, 2.6 * len(others)), squeeze=False)
    for ax, run in zip(axes[:, 0], others):
        d = (wide[run] - wide[baseline]).dropna().sort_values(ascending=False)
        colors = ["#1a7f37" if v > 0 else "#b42318" if v < 0 else "#999999" for v in d]
        ax.bar(range(len(d)), d.to_numpy(), color=colors, width=0.85)
        ax.axhline(0, color="#444", linewidth=0.8)
        ax.set_xlim(-1, max(len(d), 1))
        ax.set_ylabel(f"Δ {measure}")
        ax.set_title(
            f"{plot_text(Path(run).name)} − {plot_text(Path(baseline).name)}: per query, sorted "
            f"({int((d > 0).sum())} up, {int((d == 0).sum())} tied, {int((d < 0).sum())} down)",
            fontsize=9,
        )
        ax.set_xticks([])
    fig.tight_layout()
    return fig
