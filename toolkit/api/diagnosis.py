"""``diagnose``: where two-stage quality is lost (candidates or reranking), how deep to rerank, which reranker.

The same computation and report as ``twostage diagnose``. Runs given as paths bring their ``RUN.meta.json``
sidecar: a ``twostage rerank`` sidecar gives the rerank depth and the first stage (by checksum), and a
sidecar that says listwise marks the run's depth curve as an approximation, exactly as the CLI reads them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence  # noqa: F401  (Iterable: in the signature @verb gives, which pdoc resolves here)
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.diagnosis import compute as core
from toolkit.diagnosis import reranked as diag_inputs
from toolkit.diagnosis import sources as diag_sources
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.options import verb

log = logging.getLogger(__name__)


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
        """What the diagnosis noticed (pairing, missing queries, unjudged tops), in the library's words."""
        from toolkit.errors import for_api

        return tuple(for_api(n) for n in self.result.notes)

    def plot_decomposition(self) -> Any:
        """A matplotlib figure: per reranked run, the ideal split into reranked + lost in reranking + lost in
        candidates.

        The figure is the caller's, on its own Agg canvas: pyplot's figures and backend are left as they are.
        In IPython it is shown as a PNG (a PNG formatter for ``Figure`` is installed, the same each call)."""
        from toolkit.report.diagnosis_page import plot_decomposition
        from toolkit.report.notebook import shown_in_notebooks

        return shown_in_notebooks(plot_decomposition(self.result))

    def plot_depth_curve(self) -> Any:
        """A matplotlib figure: the measure against rerank depth, with the ceiling and the first stage's R@k.

        The figure is the caller's, on its own Agg canvas: pyplot's figures and backend are left as they are.
        In IPython it is shown as a PNG (a PNG formatter for ``Figure`` is installed, the same each call)."""
        from toolkit.report.diagnosis_page import plot_depth_curve
        from toolkit.report.notebook import shown_in_notebooks

        return shown_in_notebooks(plot_depth_curve(self.result))

    def write(self, folder: str | os.PathLike) -> dict[str, str]:
        """Write what ``twostage diagnose --out FOLDER`` writes (index.html, report.md, plots/, per_query.csv,
        pairs.csv, summary.json); returns {file name: path}."""
        from toolkit.report.diagnosis_page import write_diagnosis_report

        return write_diagnosis_report(self.result, folder)

    def __repr__(self) -> str:
        parts = []
        for p in self.result.pipelines:
            m = p.decomposition.means()
            reps = f", {p.repeats['n']} repeats" if p.repeats else ""
            parts.append(
                f"{p.name} ({p.depth_source}{reps}): {self.result.measure_label} first stage "
                f"{m['first_stage']:.4f}, ceiling {m['ceiling']:.4f}, reranked {m['reranked']:.4f}; "
                f"lost in candidates {m['lost_in_candidates']:.4f}, in reranking {m['lost_in_reranking']:.4f}"
            )
        return f"Diagnosis({'; '.join(parts)})"

    def _repr_html_(self) -> str:
        from toolkit.report.notebook import diagnosis_html

        plots = (("decomposition", self.plot_decomposition), ("depth curve", self.plot_depth_curve))
        return diagnosis_html(repr(self), self.headline, self.decomposition, plots)


def _named(runs: Any, what: str) -> dict[str, Any]:
    from toolkit.data.adapters import name_runs

    if isinstance(runs, (str, os.PathLike)) or not isinstance(runs, (Mapping, Sequence)) or hasattr(runs, "frame"):
        runs = [runs]
    if isinstance(runs, pd.DataFrame):
        runs = [runs]
    return name_runs(runs)


def _meta_of(run: Any) -> dict:
    """The settings a reranked run brings: a file's ``RUN.meta.json`` sidecar, a ``toolkit.Run``'s ``meta``."""
    from toolkit.data.sidecar import read_meta

    if isinstance(run, (str, os.PathLike)):
        return read_meta(run) or {}
    return dict(getattr(run, "meta", None) or {})


def _is_repeats(value: Any) -> bool:
    """A list of runs under one name: repeats of one system (a list of row tuples is one run)."""
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(x, (str, os.PathLike, pd.DataFrame, Mapping)) or hasattr(x, "frame") for x in value)
    )


def _reranked_inputs(
    reranked: Any,
    firsts: Mapping[str, Any],
    options: DiagnosisOptions,
    score_precision: str = "float32",
    *,
    work: Workspace = NO_WORKSPACE,
) -> tuple[list[diag_inputs.Reranked], dict[str, dict]]:
    """Each reranked run paired and sized (``diagnosis.reranked_input``: the options' depth, else the sidecar's;
    ``diagnose`` detects the rest; the options' pair, else the sidecar's first stage), and the settings each
    brought. A list of runs under one name is one system's repeats; the first one's sidecar speaks for them.
    Each run is held in trec_eval order at ``score_precision`` (``ranking.in_trec_order``). A depth given is said
    as the options' ``depth_as`` (``twostage diagnose``: ``option``)."""
    import dataclasses

    from toolkit.data.adapters import as_run
    from toolkit.data.ranking import in_trec_order

    listwise, pairs = options.listwise, dict(options.pairs or {})
    every = listwise is True
    names = set() if isinstance(listwise, bool) else set(listwise or ())
    named = _named(reranked, "reranked")
    depths = diag_inputs.depth_per_run(options.depth, list(named))
    inputs, metas = [], {}
    for n, r in named.items():
        given = list(r) if _is_repeats(r) else [r]
        metas[n] = _meta_of(given[0])
        runs = [in_trec_order(as_run(x, dedupe=options.dedupe), score_precision, work=work) for x in given]  # type: ignore[arg-type]
        item = diag_inputs.reranked_input(
            n,
            runs[0],
            firsts,
            depth=depths.get(n),
            first_stage=pairs.get(n, ""),
            listwise=every or n in names,
            meta=metas[n],
            repeats=runs[1:],
        )
        if item.depth_from == "given":
            item = dataclasses.replace(item, depth_from=options.depth_as)
        inputs.append(item)
    return inputs, metas


def _texts(
    candidates: Sequence[Any], corpus: Any, index: Any, topics: Any, metas: dict, data_dir: Any
) -> tuple[dict[str, str], Any, dict]:
    """Query and document texts as given, else from the reranked runs' sidecars; and where they came from."""
    from toolkit import notices
    from toolkit.data.catalog import resolve_topics
    from toolkit.errors import phrase

    given = bool(candidates) or bool(corpus) or bool(index)
    from_meta = {} if given else diag_sources.sources_from_metas(metas.values())
    queries, lookup, described = diag_sources.texts_from_sources(
        [str(c) for c in candidates] or from_meta.get("candidates", []),
        str(corpus) if corpus else from_meta.get("corpus"),
        str(index) if index else from_meta.get("index"),
    )
    topics = topics or (from_meta.get("topics") if not queries else None)
    if isinstance(topics, Mapping):
        queries.update({str(q): str(t) for q, t in topics.items()})
    elif topics:
        queries.update(resolve_topics(str(topics), data_dir).as_dict())
    if not queries:
        notices.warn(
            f"no query texts (give {phrase('topics=', '--topics')} or {phrase('candidates=', '--candidates')}): "
            "query types are 'unknown'"
        )
    source = {
        "topics": "<dict>" if isinstance(topics, Mapping) else topics,
        "texts": ", ".join(d["path"] for d in described) or None,
        "texts_from": "the reranked runs' sidecars" if from_meta and described else None,
    }
    return queries, lookup, source


def _sources(q: Any, qrels: Any, first_stage: Any, reranked: Any, metas: dict, texts: dict) -> dict:
    """Where every input came from, as the report states it: paths and names as given (never resolved, so
    no symlink or data folder is spelled out), empty ones left out."""
    from toolkit.diagnosis.precision import precision_line

    def paths(runs: Any) -> str:
        given = [x for r in _named(runs, "").values() for x in (r if _is_repeats(r) else [r])]
        return ", ".join(str(r) for r in given if isinstance(r, (str, os.PathLike)))

    models = [f"{n}: {m['reranker']['model']}" for n, m in metas.items() if (m.get("reranker") or {}).get("model")]
    found = {
        "qrels": str(qrels) if isinstance(qrels, (str, os.PathLike)) else str(q.path),  # as given
        "qrels_origin": _origin_line(q),
        "first_stage": paths(first_stage),
        "reranked": paths(reranked),
        **texts,
        "reranker": ", ".join(models) or None,
        "reranker_precision": precision_line(metas),
    }
    return {k: v for k, v in found.items() if v}


def _origin_line(q: Any) -> str | None:
    """Merged human and judge qrels: the policy, the labels of each origin, and the judge's calibration (from its
    sidecar) or that it was not calibrated."""
    from toolkit.quality.qrels_origin import near_chance

    origin = getattr(q, "origin", None)
    if origin is None:
        return None
    c = origin.counts
    line = f"policy {origin.policy}: {c['human_labels_used']} human labels, {c['judge_labels_used']} judge labels"
    if c["judge_labels_used"]:
        judge = origin.sources.get("judge", {})
        cal = judge.get("calibration")
        model = (judge.get("judge") or {}).get("model")
        line += f" ({model})" if model else ""
        if cal:
            line += (
                f"; judge calibrated on {cal.get('documents_both')} human-judged documents: kappa "
                f"{_num(cal.get('kappa'))}, linear kappa {_num(cal.get('kappa_linear'))}"
                + (f", ranking tau {_num(cal['kendall_tau'])}, tau_ap {_num(cal['tau_ap'])}" if "tau_ap" in cal else "")
            )
            if near_chance(cal):
                line += f" (near chance: below the kappa threshold {cal.get('kappa_threshold', 0.4)})"
        else:
            line += "; no calibration recorded for the judge (twostage judge --holes-only --calibrate-sample N --out)"
    return line


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{float(x):.3f}"


def _query_typing(query_types: Any, type_rules: Any) -> dict:
    """``query_types`` (a ``qid<TAB>type`` file or a dict) and ``type_rules`` (a file or ``TypeRule``s)."""
    from toolkit.diagnosis.query_types import load_type_rules, read_query_types

    if isinstance(query_types, (str, os.PathLike)):
        query_types = read_query_types(query_types)
    if isinstance(type_rules, (str, os.PathLike)):
        type_rules = load_type_rules(type_rules)
    return {"query_types": query_types, "type_rules": type_rules}


@verb(
    DiagnosisOptions,
    inputs=(
        "qrels",
        "first_stage",
        "reranked",
        "topics",
        "candidates",
        "corpus",
        "index",
        "query_types",
        "type_rules",
    ),
)
def diagnose(
    qrels: Any,
    first_stage: Any,
    reranked: Any,
    *,
    topics: Any = None,
    candidates: Sequence[str | os.PathLike] = (),
    corpus: str | os.PathLike | None = None,
    index: str | os.PathLike | None = None,
    query_types: Any = None,
    type_rules: Any = None,
    options: DiagnosisOptions,
) -> Diagnosis:
    """Diagnose reranked runs over their first stages (what ``twostage diagnose`` computes).

    Args:
        qrels: as for ``evaluate``.
        first_stage: a run or ``{name: run}`` (paths, ``Run``s, DataFrames, dicts): the candidates.
        reranked: a run or ``{name: run}``; the first is the primary run of the headline. A run file's
            ``RUN.meta.json`` (a ``Run``'s ``meta``) gives its depth, first stage and texts, as in the CLI.
            ``{name: [run, run, ...]}``: repeats of one system (its values are the per-query means over the
            repeats; its spread is reported: ``toolkit.diagnosis.repeats``).
        topics: query texts (a file, a collection name or ``{qid: text}``) for query types and snippets
            [default: the candidates' queries, else the sidecar's topics].
        candidates: candidates JSONs for query and passage texts [default: the sidecars'].
        corpus: a JSONL corpus for document snippets.
        index: a Lucene index with stored texts for snippets.
        query_types: ``{qid: type}`` or a ``qid<TAB>type`` file; overrides the rules.
        type_rules: the query-type rules replacing the defaults (a file, or ``TypeRule``s).
    """
    from toolkit.data.adapters import as_qrels, as_run
    from toolkit.data.ranking import ScorePrecision, in_trec_order
    from toolkit.evaluation.groups import each_warning_once

    o = options
    o.headline  # noqa: B018  (an unknown measure name: its error before anything is read)
    precision = cast(ScorePrecision, o.settings.score_precision)
    q = as_qrels(qrels, dedupe=o.dedupe, relevance_map=o.relevance_map, data_dir=o.data_dir)
    # what this diagnosis computes once and reads many times (every run is evaluated several times: sort once);
    # it goes when the diagnosis is done
    work = Workspace()
    # every run is held once, in trec_eval order at the settings' precision: the sorts find it in order and
    # no sorted copy is held beside the file's order (the figures do not depend on the lines' order)
    firsts = {
        n: in_trec_order(as_run(r, dedupe=o.dedupe), precision, work=work)
        for n, r in _named(first_stage, "first stage").items()
    }
    inputs, metas = _reranked_inputs(reranked, firsts, o, precision, work=work)
    queries, lookup, texts = _texts(candidates, corpus, index, topics, metas, o.data_dir)
    with each_warning_once():  # every run is evaluated several times: warn once
        result = core.diagnose_with_uncertainty(
            core.DiagnosisInputs(
                q,
                firsts,
                inputs,
                queries=queries,
                texts=lookup,
                **_query_typing(query_types, type_rules),
                sources=_sources(q, qrels, first_stage, reranked, metas, texts),
                work=work,
            ),
            o,
        )
    return Diagnosis(_with_qrels_origin(result, q))


def _with_qrels_origin(result: Any, q: Any) -> Any:
    """Merged human and judge qrels: ``settings["qrels_origin"]`` holds the policy, the counts of labels of each
    origin and the sources, the judge's sidecar record (model, prompt, calibration) among them; the page's
    "Labels from a judge" section reads it (``toolkit.report.diagnosis_judge``)."""
    import dataclasses

    origin = getattr(q, "origin", None)
    if origin is None:
        return result
    return dataclasses.replace(
        result,
        settings={
            **result.settings,
            "qrels_origin": origin.describe(),
            "judge_labelled": _judge_labelled(result, origin),
        },
    )


def _judge_labelled(result: Any, origin: Any) -> dict[str, list[str]]:
    """Per query, the documents the page shows (every system's top k, the best missed) whose label came from
    the judge: the explorer marks their grades."""
    labels = origin.labels
    judged = labels[labels["origin"] == "judge"]
    if judged.empty:
        return {}
    by_query = judged.groupby("query_id", sort=False)["doc_id"].agg(set).to_dict()
    out: dict[str, list[str]] = {}
    for q, view in (result.views or {}).items():
        mine = by_query.get(q)
        if not mine:
            continue
        shown = {d for top in (view.get("top") or {}).values() for d, _ in top}
        shown |= {x.get("doc_id") for x in (result.missed or {}).get(q) or []}
        hit = sorted(shown & set(mine))
        if hit:
            out[q] = hit
    return out
