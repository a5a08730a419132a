"""``diagnose``: where two-stage quality is lost (candidates or reranking), how deep to rerank, which reranker.

The same computation and report as ``twostage diagnose``. Runs given as paths bring their ``RUN.meta.json``
sidecar: a ``twostage rerank`` sidecar gives the rerank depth and the first stage (by checksum), and a
sidecar that says listwise marks the run's depth curve as an approximation, exactly as the CLI reads them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from toolkit.diagnosis import diagnose as core


@dataclass(frozen=True)
class Diagnosis:
    """A two-stage diagnosis: the decomposition, depth curve, labels, agreement and per-query views as
    DataFrames; ``plot_decomposition``/``plot_depth_curve`` figures; ``write`` = ``twostage diagnose --out``."""

    result: core.Diagnosis

    @property
    def headline(self) -> pd.DataFrame:
        """The headline measures of the primary reranked run against its first stage."""
        return pd.DataFrame(self.result.headline)

    @property
    def decomposition(self) -> pd.DataFrame:
        """One row per reranked run: first stage, ceiling (best order of its top ``depth``), reranked and ideal
        means, and the loss split into ``lost_in_candidates`` (ideal − ceiling) and ``lost_in_reranking``
        (ceiling − reranked)."""
        return pd.DataFrame([p.decomposition_summary() for p in self.result.pipelines]).set_index("system")

    @property
    def depth_curve(self) -> pd.DataFrame:
        """Per reranked run and depth k: the measure with only the top k reranked, the ceiling at k, R@k."""
        frames = [p.decomposition.curve.assign(system=p.name) for p in self.result.pipelines]
        return pd.concat(frames, ignore_index=True)[["system", "depth", "reranked", "ceiling", "recall"]]

    @property
    def labels(self) -> pd.DataFrame:
        """Per reranked run, how many queries got each diagnosis label (ok, candidates-missed, ...)."""
        return pd.DataFrame({p.name: p.label_counts for p in self.result.pipelines}).T.fillna(0).astype(int)

    @property
    def agreement(self) -> pd.DataFrame:
        """Every paired comparison (against the first stage, between reranked runs): means, p-values, W/T/L."""
        return pd.DataFrame(self.result.comparisons)

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per reranked run and query (per_query.csv): values, losses, label, query type."""
        return self.result.per_query

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per compared pair of runs and query (pairs.csv)."""
        return self.result.pairs

    @property
    def summary(self) -> dict:
        """The JSON-ready summary (summary.json)."""
        return self.result.summary()

    @property
    def notes(self) -> tuple[str, ...]:
        """What the diagnosis noticed (pairing, missing queries, unjudged tops)."""
        return self.result.notes

    def plot_decomposition(self) -> Any:
        """A matplotlib figure: per reranked run, the ideal split into reranked + lost in reranking + lost in
        candidates."""
        from toolkit.report.diagnosis import plot_decomposition

        return _for_notebooks(plot_decomposition(self.result))

    def plot_depth_curve(self) -> Any:
        """A matplotlib figure: the measure against rerank depth, with the ceiling and the first stage's R@k."""
        from toolkit.report.diagnosis import plot_depth_curve

        return _for_notebooks(plot_depth_curve(self.result))

    def write(self, folder: str | os.PathLike) -> dict[str, str]:
        """Write what ``twostage diagnose --out FOLDER`` writes (index.html, report.md, plots/, per_query.csv,
        pairs.csv, summary.json); returns {file name: path}."""
        from toolkit.report.diagnosis import write_diagnosis_report

        return write_diagnosis_report(self.result, folder)

    def __repr__(self) -> str:
        m = self.result.primary.decomposition.means()
        return (
            f"Diagnosis({self.result.primary.name}: {self.result.measure_label} first stage "
            f"{m['first_stage']:.4f}, ceiling {m['ceiling']:.4f}, reranked {m['reranked']:.4f}; "
            f"lost in candidates {m['lost_in_candidates']:.4f}, in reranking {m['lost_in_reranking']:.4f})"
        )

    def _repr_html_(self) -> str:
        from html import escape

        from toolkit.report.html import figure_data_uri

        figs = "".join(
            f'<img class="plot" alt="{a}" src="{figure_data_uri(f())}">'
            for a, f in (("decomposition", self.plot_decomposition), ("depth curve", self.plot_depth_curve))
        )
        return (
            f"<p><b>Diagnosis</b> {escape(repr(self))}</p>"
            + self.headline.to_html(index=False, float_format=lambda v: f"{v:.4f}")
            + self.decomposition.to_html(float_format=lambda v: f"{v:.4f}")
            + figs
        )


def _for_notebooks(fig: Any) -> Any:
    """The figure, owned by the caller (closed in pyplot, so no backend shows it a second time), and shown
    as a PNG when it is a cell's value in IPython: the plots are drawn on Agg, which registers no display."""
    import sys

    import matplotlib.pyplot as plt

    plt.close(fig)
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        from IPython.core.pylabtools import print_figure
        from matplotlib.figure import Figure

        shell.display_formatter.formatters["image/png"].for_type(Figure, lambda f: print_figure(f, "png"))
    return fig


def _reranked_from_path(
    name: str,
    path: str,
    run: Any,
    firsts: Mapping[str, Any],
    depth: int | None,
    listwise: Iterable[str],
    pairs: Mapping[str, str],
) -> tuple[core.Reranked, dict]:
    """A reranked run read from a file, its depth and first stage from the flags, else its sidecar (the
    CLI's rule: ``diagnosis.reranked_input``)."""
    from toolkit.sidecar import read_meta

    meta = read_meta(path) or {}
    r = core.reranked_input(
        name, run, firsts, depth=depth, first_stage=pairs.get(name, ""), listwise=name in listwise, meta=meta
    )
    return r, meta


def _named(runs: Any, what: str) -> dict[str, Any]:
    from toolkit.api.comparison import _named as named_runs

    if isinstance(runs, (str, os.PathLike)) or not isinstance(runs, (Mapping, Sequence)) or hasattr(runs, "frame"):
        runs = [runs]
    if isinstance(runs, pd.DataFrame):
        runs = [runs]
    return named_runs(runs)


def _sources(q: Any, first_stage: Any, reranked: Any, topics: str | None) -> dict:
    """What the report names as its inputs (the file paths, as ``twostage diagnose`` records them)."""

    def paths(runs: Any) -> str:
        return ", ".join(str(r) for r in _named(runs, "").values() if isinstance(r, (str, os.PathLike)))

    found = {"qrels": str(q.path), "first_stage": paths(first_stage), "reranked": paths(reranked), "topics": topics}
    return {k: v for k, v in found.items() if v}


def diagnose(
    qrels: Any,
    first_stage: Any,
    reranked: Any,
    *,
    measure: str = "ndcg_cut.10",
    depth: int | None = None,
    curve_depths: Iterable[int] = (10, 20, 30, 50, 100),
    listwise: Iterable[str] = (),
    pairs: Mapping[str, str] | None = None,
    topics: str | None = None,
    recall_level: int | None = None,
    complete: bool = True,
    name: str = "diagnosis",
    permutations: int = 10_000,
    seed: int = 42,
    correction: str = "holm",
    relevance_map: str | None = None,
    dedupe: str = "error",
    data_dir: str | os.PathLike | None = None,
    **options: Any,
) -> Diagnosis:
    """Diagnose reranked runs over their first stages (what ``twostage diagnose`` computes).

    Args:
        qrels: as for ``evaluate``.
        first_stage: a run or ``{name: run}`` (paths, ``Run``s, DataFrames, dicts): the candidates.
        reranked: a run or ``{name: run}``; the first is the primary run of the headline.
        measure: the headline measure the loss is decomposed on (``ndcg_cut.10``, ``P.10``, ``recall.20``...).
        depth: rerank depth N [default: a run file's sidecar's, else the reranked run's longest list].
        curve_depths: depths of the rerank-depth curve (those up to N, plus N).
        listwise: names of reranked runs whose depth curve is an approximation.
        pairs: {reranked name: first-stage name} with several first stages [default: the sidecar's first
            stage, else the first stage holding most of the run's documents].
        topics: query texts (a file or a collection name) for query types and snippets.
        recall_level: relevance level of recall and binary measures [default: 2 when the qrels are graded
            above 1, else 1].
        complete: ``-c``: every qrels query counts (missing ones score 0).
        name: the report's title.
        permutations: random sign flips of the randomization tests.
        seed: their generator's seed.
        correction: ``holm``, ``bonferroni`` or ``none``, within each family of comparisons.
        relevance_map: relabel the qrels at load time, as for ``evaluate``.
        dedupe: ``error`` or ``first``, as for ``evaluate``.
        data_dir: where collection names are looked up.
        **options: the other evaluation settings of ``evaluate`` (``gain``, ``discount``, ``max_docs``,
            ``judged_only``, ``trec_eval``, ``score_precision``).
    """
    from toolkit.api.evaluation import settings
    from toolkit.api.inputs import as_qrels, as_run

    q = as_qrels(qrels, dedupe=dedupe, relevance_map=relevance_map, data_dir=data_dir)
    level = recall_level if recall_level is not None else (2 if q.frame["relevance"].max() >= 2 else 1)
    firsts = {n: as_run(r, dedupe=dedupe) for n, r in _named(first_stage, "first stage").items()}
    listwise = set(listwise)
    inputs = []
    for n, r in _named(reranked, "reranked").items():
        run = as_run(r, dedupe=dedupe)
        path = str(r) if isinstance(r, (str, os.PathLike)) else ""
        if path:
            item, _ = _reranked_from_path(n, path, run, firsts, depth, listwise, dict(pairs or {}))
        else:
            d = depth or core.longest_list(run)
            item = core.Reranked(
                n,
                run,
                (pairs or {}).get(n, ""),
                d,
                n in listwise,
                "given" if depth else "the reranked run's longest list",
            )
        inputs.append(item)
    queries: dict[str, str] = {}
    if topics:
        from toolkit.catalog import resolve_topics

        queries = resolve_topics(topics, data_dir).as_dict()
    result = core.diagnose(
        q,
        firsts,
        inputs,
        name=name,
        measure=measure,
        settings=settings(complete=complete, **options),  # the relevance levels are diagnose's own
        curve_depths=list(curve_depths),
        recall_level=level,
        complete=complete,
        queries=queries,
        permutations=permutations,
        seed=seed,
        correction=correction,
        sources=_sources(q, first_stage, reranked, topics),
    )
    return Diagnosis(result)
