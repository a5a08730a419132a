"""``risk``: risk-sensitive evaluation of runs against a baseline, URisk and TRisk (``toolkit.stats.urisk``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pandas as pd

from toolkit.api.options import RiskOptions
from toolkit.options import verb
from toolkit.stats.urisk import RiskResult

#: the columns of ``Risk.table`` and of ``twostage risk --format csv``, in order
COLUMNS = (
    "measure",
    "run",
    "baseline",
    "alpha",
    "n_queries",
    "mean",
    "baseline_mean",
    "delta",
    "wins",
    "ties",
    "losses",
    "win_sum",
    "loss_sum",
    "urisk",
    "trisk",
    "p",
)

DEFINITION = MappingProxyType(
    {
        "urisk": "URisk = (1/|Q|) [sum of the wins' differences - (1 + alpha) sum of the losses' |differences|], "
        "differences run - baseline per query (Wang, Bennett & Collins-Thompson, SIGIR 2012)",
        "trisk": "TRisk = URisk / (sd / sqrt(|Q|)), sd the sample sd (ddof 1) of the risk-adjusted differences "
        "(a loss times 1 + alpha); p: two-sided, Student's t with |Q| - 1 df (Dincer, Macdonald & Ounis, SIGIR 2014)",
        "alpha": "the extra weight of a loss: 0 gives the mean difference, 1 (the default) counts a loss twice",
    }
)


@dataclass(frozen=True)
class Risk:
    """URisk and TRisk of every run against the baseline, per measure and alpha: ``results`` (``RiskResult``s),
    ``table`` (one row each), ``to_text()``, ``to_json()``, ``to_csv()`` (what ``twostage risk`` prints)."""

    results: tuple[RiskResult, ...]
    doc: dict

    @property
    def baseline(self) -> str:
        """The baseline's name."""
        return self.doc["baseline"]

    @property
    def table(self) -> pd.DataFrame:
        """One row per (measure, alpha, run): the columns ``COLUMNS``."""
        return pd.DataFrame([dataclasses.asdict(r) for r in self.results], columns=list(COLUMNS))

    def as_dict(self) -> dict:
        """The JSON document: ``baseline``, ``runs``, ``measures``, ``alphas``, ``definition``, ``results`` (one
        object per row of ``table``), ``forced``, ``provenance_differences``, ``queries_compared``,
        ``provenance``."""
        return self.doc

    def to_json(self) -> str:
        """What ``twostage risk --format json`` prints."""
        import json

        return json.dumps(self.doc, indent=2, default=str) + "\n"

    def to_csv(self) -> str:
        """What ``twostage risk --format csv`` prints: a header, then one line per row of ``table``."""
        from toolkit.guard.escape import CSV_LINE_END, csv_frame, csv_newlines

        # run names are the user's: neutralised as every CSV twostage writes (formulas, bare CRs in a cell)
        text = csv_frame(self.table).to_csv(index=False, lineterminator=CSV_LINE_END, float_format="%.6g")
        return csv_newlines(text)

    def to_text(self) -> str:
        """What ``twostage risk`` prints: the definitions as ``#`` lines, then one line per measure, alpha and run."""
        lines = [
            f"# risk against the baseline {self.baseline}: {DEFINITION['urisk']}",
            f"# {DEFINITION['trisk']}",
            f"# alpha: {DEFINITION['alpha']}",
        ]
        if self.doc["forced"]:
            lines.append(
                "# FORCED despite: "
                + "; ".join(f"{k}: {a} vs {b}" for k, (a, b) in self.doc["provenance_differences"].items())
            )
        width = max(12, *(len(r.run) for r in self.results)) if self.results else 12
        mwidth = max(14, *(len(r.measure) for r in self.results)) if self.results else 14
        lines.append(
            f"{'measure':<{mwidth}} {'run':<{width}} {'alpha':>6} {'queries':>7} {'W/T/L':>9} {'delta':>8} "
            f"{'urisk':>8} {'trisk':>7} {'p':>8}"
        )
        from toolkit.report.html import p_value

        for r in self.results:
            trisk = f"{r.trisk:>7.3f}" if abs(r.trisk) < 1e6 else f"{r.trisk:>7}"
            lines.append(
                f"{r.measure:<{mwidth}} {r.run:<{width}} {r.alpha:>6g} {r.n_queries:>7} "
                f"{f'{r.wins}/{r.ties}/{r.losses}':>9} {r.delta:>+8.4f} {r.urisk:>+8.4f} {trisk} {p_value(r.p):>8}"
            )
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"Risk(baseline {self.baseline!r}, {len(self.results)} rows)"


@verb(RiskOptions, inputs=("qrels", "runs", "baseline", "measures"), exclude=("name",))
def risk(
    qrels: Any,
    runs: Mapping[str, Any] | Sequence[Any],
    baseline: str | None = None,
    measures: str | Iterable[Any] | None = None,
    *,
    options: RiskOptions,
) -> Risk:
    """URisk and TRisk (``toolkit.stats.urisk``) of every run against ``baseline``, per measure and alpha.

    Every keyword is a field of ``RiskOptions`` (``toolkit.api.options``): ``alpha``, ``force`` and every keyword
    of ``evaluate`` but ``name`` (each run is named by its key); ``options=`` takes one whole.

    Args:
        qrels: as for ``evaluate`` (a path, a collection name, a DataFrame, ...); may be None when every run is
            an ``Evaluation`` or a saved ``.json`` evaluation.
        runs: ``{name: run}`` or a list of runs (named by file name or tag), as ``compare`` takes them: a run
            file, a ``Run``, an ``Evaluation``, or the path of a saved ``twostage eval -q --format json``.
        baseline: the baseline's name (default: the first run).
        measures: as for ``compare`` (default ``ndcg_cut.10``); each numeric measure gets its rows.
        alpha: the extra weight of a loss (>= 0; default 1: a loss counts twice), or several.
        force: compare even when provenance or query sets differ (pairs only the shared queries).
        relevance_map: relabel the qrels at load time, as for ``evaluate``.
        dedupe: ``error`` or ``first``, as for ``evaluate``.
        data_dir: where collection names are looked up.
        labels: display names for measures, as for ``evaluate``.

    Raises:
        ProvenanceMismatchError: runs evaluated under different settings or on different queries.
        ConfigError: a negative alpha, fewer than two runs, a baseline that is not one of the runs.
    """
    from toolkit import notices
    from toolkit.api.evaluation import Evaluation, evaluate
    from toolkit.api.labels import measure_items, numeric_measure_names, requested_measures
    from toolkit.data.adapters import as_qrels, name_runs
    from toolkit.errors import ConfigError
    from toolkit.stats.paired import load_result_json, paired_table
    from toolkit.stats.urisk import risk_table

    alphas = options.alphas  # checked where the options were built (RiskOptions.validate)
    e = options.evaluation
    named = name_runs(runs)
    if len(named) < 2:
        raise ConfigError("give at least two runs: the baseline and a run to compare with it")
    base = next(iter(named)) if baseline is None else str(baseline)
    if base not in named:
        raise ConfigError(f"baseline {base!r} is not among the runs ({', '.join(named)})")
    version = e.settings.trec_eval
    items = measure_items(measures)
    numeric = numeric_measure_names(items, version)
    want = requested_measures(items, version, e.labels)
    names = [n for n in want.names if n in numeric]
    q = None
    per_query: dict[str, pd.DataFrame] = {}
    provenance: dict[str, dict] = {}
    with notices.once():
        for name, r in named.items():
            if isinstance(r, (str, os.PathLike)) and str(r).endswith(".json"):
                frame, provenance[name] = load_result_json(str(r), names)
                per_query[name] = frame[frame["measure"].isin(names)].assign(
                    measure=lambda f: f["measure"].map(want.label)
                )
                continue
            if not isinstance(r, Evaluation):
                if q is None:
                    if qrels is None:
                        raise ConfigError(
                            f"qrels are needed to evaluate the run {name} (saved .json results need none)"
                        )
                    q = as_qrels(qrels, dedupe=e.dedupe, relevance_map=e.relevance_map, data_dir=e.data_dir)
                # the qrels are read (relabelled) once, here: each run is evaluated on them as they are
                each = dataclasses.replace(e, name=name, relevance_map=None, data_dir=None)
                r = evaluate(q, r, items, options=each)
            else:
                r = dataclasses.replace(r, requested=want)
            pq = r.to_ir_measures()
            per_query[name], provenance[name] = pq[pq["measure"].isin(want.labels)], r.provenance
        labelled = [want.label(n) for n in names]
        table, diff, n_shared = paired_table(per_query, provenance, [base], labelled, options.force)
    ordered = table[table["run"] != base]
    table = pd.concat([table[table["run"] == base], ordered], ignore_index=True)
    results = tuple(risk_table(table, base, alphas))
    doc = {
        "baseline": base,
        "runs": list(named),
        "measures": labelled,
        "alphas": alphas,
        "definition": dict(DEFINITION),
        "results": [r.as_dict() for r in results],
        "forced": bool(diff),
        "provenance_differences": {k: list(v) for k, v in diff.items()},
        "queries_compared": n_shared if diff else None,
        "provenance": provenance,
    }
    return Risk(results, doc)


__all__ = ["COLUMNS", "Risk", "risk"]
