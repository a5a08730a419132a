"""``compare``: several systems against one or more baselines, with paired significance tests."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit import notices
from toolkit.api.options import CompareOptions
from toolkit.options import verb
from toolkit.stats.paired import ComparisonResult


def latex_escape(text: str) -> str:
    """``text`` safe in LaTeX's text mode: ``toolkit.guard.escape.latex_text`` (each special character, ``\\ & % $ # _
    { } ~ ^ < > |``, escaped in one pass, so an escape is never escaped again; control characters made visible)."""
    from toolkit.guard.escape import latex_text

    return latex_text(text)


class Legend(str):
    """The legend at p < 0.05, as a string; ``legend(alpha)`` gives it at another level."""

    def __new__(cls, text: str, at: Callable[[float], str]) -> Legend:
        out = super().__new__(cls, text)
        out._at = at  # type: ignore[attr-defined]
        return out

    def __call__(self, alpha: float = 0.05) -> str:
        return self._at(alpha)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Comparison:
    """Systems compared: ``table`` (``pt.Experiment(..., baseline=0)``'s shape), ``tests`` (one row per measure,
    baseline and system), ``per_query`` (long form), and paper tables (``to_latex``/``to_markdown``)."""

    result: ComparisonResult

    @property
    def baselines(self) -> tuple[str, ...]:
        """The baselines, in order (the first is PyTerrier's ``baseline=0``)."""
        return self.result.baselines

    @property
    def measures(self) -> tuple[str, ...]:
        """The measures compared, by trec_eval's printed names."""
        return self.result.measures

    @property
    def systems(self) -> list[str]:
        """Every system's name, in the order given."""
        return list(self.result.doc["runs"])

    @property
    def means(self) -> pd.DataFrame:
        """Mean per system (rows) and measure (columns) over the paired queries, summed as trec_eval sums (so
        they equal ``Evaluation.summary`` to the last bit)."""
        import numpy as np

        t = self.result.table

        def trec_mean(x: pd.Series) -> float:  # trec_eval's sum, one addition at a time in query order
            return float(np.cumsum(x.to_numpy())[-1] / len(x)) if len(x) else 0.0

        means = t.groupby(["run", "measure"], sort=False)["value"].agg(trec_mean).unstack("measure")
        return means.reindex(index=self.systems, columns=list(self.measures))

    @property
    def tests(self) -> pd.DataFrame:
        """One row per (measure, baseline, system): means, delta, t, p_ttest, p_permutation, p_adjusted, W/T/L,
        p_wilcoxon, p_sign."""
        return pd.DataFrame([c.as_dict() for c in self.result.tests])

    @property
    def per_query(self) -> pd.DataFrame:
        """Per-query values, long form as ``ir_measures.iter_calc`` yields them plus the system: run, query_id,
        measure, value."""
        return self.result.table.reset_index(drop=True)

    def to_pyterrier(self) -> pd.DataFrame:
        """Per-query values in ``pt.Experiment(..., perquery=True)``'s shape: name, qid, measure, value."""
        return self.per_query.rename(columns={"run": "name", "query_id": "qid"})

    @property
    def table(self) -> pd.DataFrame:
        """One row per system (and baseline, with several), as ``pt.Experiment(..., baseline=0)`` prints it; with
        ``family="all-pairs"``, one row per pair of systems (``baseline`` the earlier of the two): every pair tested.

        Columns: ``name``, ``baseline``, each measure's mean, then per measure ``M delta``, ``M ci low`` and
        ``M ci high`` (the bootstrap interval of the delta), ``M d_z`` (effect size), ``M +`` (wins), ``M =``
        (ties), ``M -`` (losses), ``M p-value`` (the chosen test's), ``M p-value corrected`` and ``M reject``
        (corrected p < 0.05), ``M direction`` (better / worse / equal), ``M bounds overlap`` (with
        ``holes=True``: the two systems' intervals of possible values overlap) and ``M verdict`` (the one line of
        ``toolkit.stats.trust``). A baseline's own row has no tests (NaN).
        """
        means = self.means
        from toolkit.stats.paired import TESTS

        key = TESTS[self.result.doc["tests"]["test"]]
        by = {(c.baseline, c.run, c.measure): c for c in self.result.tests}
        rows = []
        refs = list(self.baselines)
        all_pairs = self.result.doc["tests"].get("family") == "all-pairs"
        if all_pairs:  # every pair: each earlier system is a reference
            refs = list(dict.fromkeys([*refs, *(c.baseline for c in self.result.tests)]))
        for b in refs:
            for name in self.systems:
                if (name != b or all_pairs) and not any((b, name, m) in by for m in self.measures):
                    continue
                row: dict[str, Any] = {"name": name, "baseline": b}
                row.update({m: means.loc[name, m] for m in self.measures})
                for m in self.measures:
                    c = by.get((b, name, m))
                    row[f"{m} delta"] = c.delta if c else float("nan")
                    row[f"{m} ci low"] = c.ci_low if c else float("nan")
                    row[f"{m} ci high"] = c.ci_high if c else float("nan")
                    row[f"{m} d_z"] = c.d_z if c else float("nan")
                    row[f"{m} +"], row[f"{m} ="], row[f"{m} -"] = (c.wins, c.ties, c.losses) if c else (None,) * 3
                    row[f"{m} p-value"] = getattr(c, key) if c else float("nan")
                    row[f"{m} p-value corrected"] = c.p_adjusted if c else float("nan")
                    row[f"{m} reject"] = bool(c.p_adjusted < 0.05) if c else None
                    trust = self._trust(b, name, m) if c else {}
                    row[f"{m} direction"] = trust.get("direction")
                    row[f"{m} bounds overlap"] = trust.get("bounds_overlap")
                    row[f"{m} verdict"] = trust.get("verdict")
                rows.append(row)
        return pd.DataFrame(rows)

    def _trust(self, baseline: str, run: str, measure: str) -> dict:
        """The trust fields (``stats.trust``) of one test, as the document holds them."""
        by = self.result.doc.get("results_by_baseline") or {}
        return by.get(baseline, {}).get(measure, {}).get(run, {})

    @property
    def doc(self) -> dict:
        """The JSON document ``twostage compare --format json`` prints."""
        return self.result.doc

    # ------------------------------------------------------------- paper tables (report.paper_tables)
    @property
    def legend(self) -> Legend:
        """What the marks mean (at p < 0.05): symbol per baseline, the test, the correction and its family. A
        string; called, ``legend(alpha)`` gives it at another level (the method it once was)."""
        return Legend(self._legend(0.05), self._legend)

    def _legend(self, alpha: float = 0.05) -> str:
        from toolkit.report.paper_tables import legend

        return legend(self.result, alpha)

    def notes(self, alpha: float = 0.05) -> list[str]:
        """How far to trust each test, for under a paper table: a heading line, then one line per (baseline,
        measure, system) test, ``nDCG@10, splade vs bm25: +0.2250 [0.1700, 0.2800], d_z 1.02, p_adj 0.0001:
        better`` (``toolkit.stats.verdict`` at ``alpha``), with the two systems' hole bounds where known
        (``holes=True``). Plain text: each format escapes it (``toolkit.guard.escape``)."""
        from toolkit.report.compare_page import test_notes

        return test_notes(self.doc, self.result.tests, list(self.baselines), self.systems, alpha)

    def to_markdown(self, alpha: float = 0.05, digits: int = 4, notes: bool = True) -> str:
        """A systems x measures table in Markdown: significant differences marked (see ``legend``), best in bold;
        with ``notes``, under the legend one list item per test: its difference, interval, d_z, corrected p,
        verdict and, with ``holes=True``, the hole bounds (``notes``)."""
        from toolkit.report.paper_tables import markdown_table

        said = self.notes(alpha) if notes and self.result.tests else []
        return markdown_table(self.result, self.means, alpha, digits, said)

    def to_latex(self, alpha: float = 0.05, digits: int = 4, notes: bool = True) -> str:
        """A systems x measures ``tabular`` for a paper: significance as superscript marks, best in ``\\textbf``;
        the legend and (with ``notes``) one line per test (``notes``) follow as ``%`` comments, for a caption."""
        from toolkit.report.paper_tables import latex_table

        said = self.notes(alpha) if notes and self.result.tests else []
        return latex_table(self.result, self.means, alpha, digits, said)

    def to_text(self) -> str:
        """What ``twostage compare`` prints by default: per measure, every test against each baseline."""
        from toolkit.report.compare_page import compare_text

        return compare_text(self.doc)

    def to_json(self) -> str:
        """What ``twostage compare --format json`` prints (the ``doc``, indented)."""
        import json

        return json.dumps(self.doc, indent=2, default=str) + "\n"

    def write(self, folder: str | os.PathLike) -> None:
        """What ``twostage compare --out FOLDER`` writes: compare.json and compare.html (difference plots)."""
        from toolkit.report.compare_page import write_compare_report

        write_compare_report(Path(folder), self.doc, self.result.table, self.baselines[0], list(self.measures))

    def __repr__(self) -> str:
        return (
            f"Comparison({len(self.systems)} systems, baselines {list(self.baselines)}, measures {list(self.measures)})"
        )

    def _repr_html_(self) -> str:
        from toolkit.report.paper_tables import html_table

        return html_table(self.result, self.means)


@verb(CompareOptions, inputs=("qrels", "runs", "baseline", "measures"))
def compare(
    qrels: Any,
    runs: Mapping[str, Any] | Sequence[Any],
    baseline: str | Iterable[str] | None = None,
    measures: str | Iterable[Any] | None = None,
    *,
    options: CompareOptions,
) -> Comparison:
    """Evaluate every run and test each against each baseline (paired, per query).

    Every keyword is a field of ``CompareOptions`` (``toolkit.api.options``); ``options=`` takes one whole.

    Args:
        qrels: as for ``evaluate`` (a path, a collection name, a DataFrame, a dict, ``Qrel``s); may be None when
            every run is an ``Evaluation`` or a saved ``.json`` evaluation.
        runs: ``{name: run}`` or a list of runs (named by file name or tag); a run is anything ``evaluate``
            takes, an ``Evaluation`` (used as it is), or the path of a saved ``twostage eval -q --format json``.
        baseline: a system's name, or several (each system is tested against each; one correction per measure
            over all those tests). Default: the first system.
        measures: as for ``evaluate`` (per-measure settings included: ``AP(rel=2)@100``, ``RR@10``); default
            ``ndcg_cut.10``. Named and ordered as asked; a text measure (relstring) is refused, and left out of
            a nickname (``official``).

    Raises:
        ProvenanceMismatchError: systems evaluated under different settings or on different queries.
    """
    from toolkit.api.evaluation import Evaluation, evaluate
    from toolkit.api.labels import measure_items, numeric_measure_names, requested_measures
    from toolkit.api.options import EvaluationOptions, holes_over
    from toolkit.data.adapters import as_qrels, name_runs
    from toolkit.errors import ConfigError
    from toolkit.stats.paired import compare_runs, load_result_json

    o = options
    over = holes_over(o.holes)
    named = name_runs(runs)
    version = o.settings.trec_eval
    items = measure_items(measures)
    rel_format = _rel_format(items, version)
    numeric = numeric_measure_names(items, version, rel_format)
    want = requested_measures(items, version, o.labels)
    names = [n for n in want.names if n in numeric]
    baselines = [baseline] if isinstance(baseline, str) else list(baseline or [next(iter(named), "")])
    q = None
    per_query: dict[str, pd.DataFrame] = {}
    provenance: dict[str, dict] = {}
    bounds: dict[str, dict] = {}
    boundable = over if over and _boundable(items, version) else False
    for name, r in named.items():
        if isinstance(r, (str, os.PathLike)) and str(r).endswith(".json"):
            frame, provenance[name] = load_result_json(str(r), names)
            per_query[name] = frame[frame["measure"].isin(names)].assign(measure=lambda f: f["measure"].map(want.label))
            continue
        if not isinstance(r, Evaluation):
            if q is None:
                if qrels is None:
                    raise ConfigError(f"qrels are needed to evaluate the run {name} (saved .json results need none)")
                q = as_qrels(
                    qrels,
                    dedupe=o.dedupe,
                    relevance_map=o.relevance_map,
                    data_dir=o.data_dir,
                    subtopics=rel_format == "qrels_div",
                )
            each = EvaluationOptions(
                settings=o.settings,
                dedupe=o.dedupe,
                rel_format=o.rel_format,
                zscores=o.zscores,
                labels=o.labels,
                name=name,
                holes=boundable,
            )
            r = evaluate(q, r, items, options=each)
        else:
            r = dataclasses.replace(r, requested=want)
        if over and r.holes:
            from toolkit.stats.trust import mean_bounds

            bounds[name] = {want.label(m): b for m, b in mean_bounds(r.holes).items()}
        pq = r.to_ir_measures()
        per_query[name], provenance[name] = pq[pq["measure"].isin(want.labels)], r.provenance
    names = [want.label(n) for n in names]
    with notices.once():
        result = compare_runs(per_query, provenance, baselines, names, options=o.tests)
    from toolkit.stats.trust import attach_to_doc

    attach_to_doc(result.doc, bounds, over=over or "top-k")
    return Comparison(result)


def _boundable(items: list, version: int) -> bool:
    """Whether any measure asked is one the hole bounds cover (ndcg_cut.k, P.k, recall.k)."""
    from toolkit.measures.names import Measure, parse_measure_groups
    from toolkit.quality.holes import SUPPORTED

    for item in items:
        if isinstance(item, Measure):
            ms = [item]
        else:
            ms = [m for g in parse_measure_groups([str(item)], version) for m in g.measures]
        if any(m.family in SUPPORTED and m.cutoff for m in ms):
            return True
    return False


def _rel_format(items: list, version: int) -> str:
    """``qrels_div`` when every measure asked reads diversity qrels, else ``qrels`` (``reads_format``)."""
    from toolkit.evaluation.evaluate import reads_format
    from toolkit.measures.names import Measure, labelled_measures

    ms = [m for item in items for m in ([item] if isinstance(item, Measure) else labelled_measures(str(item), version))]
    return reads_format(ms)
