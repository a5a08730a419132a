"""Two-stage diagnosis: how much quality the candidates lose and how much the reranking loses, per query and
overall; how deep to rerank; which reranker is better, where, and on which queries rerankers disagree.

Inputs: qrels, one or more first-stage runs and one or more reranked runs, each the reordering of one first
stage's top N candidates (N, the rerank depth, per reranked run). Every number comes from
``evaluate.evaluate`` (trec_eval semantics) under one set of evaluation settings (gain, discount, ``-M``,
``-J``, score precision), and every mean is over one query set: every qrels query (``-c``; a query missing
from a run scores 0), or with ``complete=False`` the qrels queries that every run holds.

- The headline measure M (nDCG@10 by default; any ranking measure on request) of every run, its loss
  decomposition (ideal, candidate ceiling, ``lost_in_candidates``, ``lost_in_reranking``) and rerank-depth
  curve (``decompose.py``). Binary measures (P, recall, MAP) use ``recall_level``.
- nDCG@10, nDCG'@10 (the same on the condensed list, ``-J``: the gap is what unjudged documents cost) and
  judged@10 of every run at relevance level 1 (nDCG uses all grades as gains); R@N of every run at each rerank
  depth N it takes part in, at ``recall_level`` (2 for graded qrels: the TREC DL convention), and no other.
- The rerank depth of each reranked run: given, else its sidecar's, else detected from the two runs (a run that
  reranked the top k and repeats the first stage's ranks below k, as rank_llm writes it: ``depths.py``, on the
  queries the two runs share), else an error naming the run (``DepthNotDetectedError``). Runs given under one
  name are repeats of one system (``repeats.py``); how a listwise reranker treats its candidates is read from
  the runs alone (``listwise_behaviour.py``).
- Rank-biased overlap (p = 0.9) and Kendall's tau on the top 10 between each reranked run and its first
  stage and between every two reranked runs (``stats/rank_similarity.py``).
- Paired significance of M (``significance.py``): every reranked run against its first stage (for each first
  stage the family ``twostage compare FIRST R1 R2 ...`` corrects over, so the p-values equal its), and
  between every two reranked runs (one family over all pairs; likewise between first stages).
- Candidates are the first stage's top N in trec_eval order at the settings' score precision
  (``ranking.top_k``), the same selection ``rerank`` and ``fuse`` make.

Labels, per query and reranked run, from its decomposition, decided in this order (``Thresholds``): first
what the reranker did relative to the first stage, then the absolute labels.

1. ``no-relevant``: ideal = 0: the qrels hold nothing the measure rewards (so nothing can be lost either);
2. ``reranker-hurt``: reranked < first stage - hurt x ideal: the reranker made the query worse than the
   first stage's own order of the same candidates, whatever the absolute value;
3. ``ok``: reranked >= ok x ideal (ideal is 1 for nDCG);
4. ``unjudged-top``: more than ``max_unjudged`` of the reranked top 10 positions hold unjudged documents
   (too much of the top is unjudged to tell; positions a short list leaves empty do not count);
5. ``candidates-missed``: ceiling < ok x ideal: not even the best order of these candidates would be ok, so
   the candidates are what holds the query back;
6. ``reranker-misordered``: otherwise: a better order of the same candidates would be ok.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from toolkit.data.columns import coded_isin
from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, top_k
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.data.workspace import NO_WORKSPACE, Workspace
from toolkit.diagnosis.decompose import Decomposition, DecompositionSettings, decompose, parse_headline_measure
from toolkit.diagnosis.depths import DEPTH_RULE
from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.diagnosis.query_labels import (
    LABEL_MEANING,
    LABELS,
    MIN_TYPE_QUERIES,
    TOP,
    Thresholds,
    label_query,
    measure_label,
)
from toolkit.diagnosis.query_types import DEFAULT_TYPE_RULES, TypeRule, assign_types
from toolkit.diagnosis.query_views import (
    add_snippets,
    by_delta,
    disagreements,
    grades,
    most_changed,
    query_terms,
    views_of_runs,
    worst_queries,
    worst_rows,
)
from toolkit.diagnosis.reranked import Reranked, longest_list, named_runs, reranked_inputs
from toolkit.errors import for_api
from toolkit.evaluation.evaluate import PreparedJudgments, evaluate, prepare_judgments
from toolkit.measures.names import EvalSettings, parse_measures
from toolkit.stats.rank_similarity import (
    RBO_P,
    TAU_DEPTH,
    CodedLists,
    RankedLists,
    agreement,
    code_aligned,
    code_runs,
)
from toolkit.stats.significance import adjust, compare_table, scaled_se
from toolkit.version import __version__

TextLookup = Callable[[Iterable[str]], dict[str, str]]


# ------------------------------------------------------------ evaluation
@dataclass(frozen=True)
class _Settings:
    """The evaluation settings of each group of measures, all from one base."""

    graded: EvalSettings  # nDCG@10, judged@10: relevance level 1
    condensed: EvalSettings  # nDCG'@10: judged documents only
    binary: EvalSettings  # the headline measure, recall: recall_level

    @classmethod
    def from_base(cls, base: EvalSettings | None, recall_level: int, complete: bool) -> _Settings:
        base = dataclasses.replace(base or EvalSettings(), complete=complete)
        graded = dataclasses.replace(base, relevance_level=1)
        return cls(
            graded=graded,
            condensed=dataclasses.replace(graded, judged_only=True),
            binary=dataclasses.replace(base, relevance_level=recall_level),
        )


@dataclass(frozen=True)
class _RunValues:
    """Per-query values of one run (columns: headline, ndcg_cut_10, ndcg_cut_10_condensed, judged_10,
    recall_<k>), its provenance per settings group and its evaluation notes."""

    values: pd.DataFrame
    provenance: dict
    notes: tuple[str, ...]


def _evaluate_run(
    qrels: Qrels | PreparedJudgments,
    run: Run,
    measure: str,
    recall_cutoffs: Iterable[int],
    s: _Settings,
    *,
    work: Workspace = NO_WORKSPACE,
) -> _RunValues:
    cuts = ",".join(str(c) for c in sorted(set(recall_cutoffs)))
    graded = evaluate(qrels, run, parse_measures(["ndcg_cut.10", "judged.10"]), s.graded, work=work)
    condensed = evaluate(qrels, run, parse_measures(["ndcg_cut.10"]), s.condensed, work=work)
    binary = evaluate(qrels, run, parse_measures([f"recall.{cuts}", measure], s.binary.trec_eval), s.binary, work=work)
    values = pd.concat(
        [
            graded.wide(),
            condensed.wide().add_suffix("_condensed"),
            binary.wide()[[c for c in binary.wide().columns if c.startswith("recall_")]],
        ],
        axis=1,
    )
    values["headline"] = binary.wide()[measure]
    values.index = values.index.astype(str)
    notes = tuple(dict.fromkeys(graded.notes + binary.notes))  # phrased: each front end puts them in its words
    return _RunValues(
        values, {"graded": graded.provenance, "condensed": condensed.provenance, "binary": binary.provenance}, notes
    )


def _query_set(evaluated: Mapping[str, _RunValues], complete: bool) -> list[str]:
    """Every evaluated query (-c: the evaluator gives every qrels query), else the queries every run has."""
    sets = [set(v.values.index) for v in evaluated.values()]
    return sorted(set.union(*sets) if complete else set.intersection(*sets))


# ------------------------------------------------------------ per query
def check_reordering(
    first: Run,
    reranked: Run,
    depth: int | None = None,
    examples: int = 10,
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> dict:
    """Does ``reranked`` only reorder ``first``'s candidates? Flags documents the reranker introduced.

    Each reranked document is a candidate (among the first stage's top ``depth`` in trec_eval order at
    ``score_precision``; its whole list when ``depth`` is None), part of the first stage's tail (below the depth
    in the first stage and placed below the depth where the first stage has it, as rank_llm writes the ranks it
    did not rerank), or introduced: not in the first stage at all (``outside_first_stage``), or a document from
    below the depth moved out of its first-stage place. The check fails only for introduced documents; the tail
    is reported apart (``tail_documents``).
    """
    from toolkit.diagnosis.depths import classify_documents, reorder_counts

    docs = classify_documents(first, reranked, depth, score_precision, work=work)
    kind = docs["kind"]  # compared as a column (categorical codes), not as Python strings
    intro = docs.loc[(kind == "introduced").to_numpy(), [QUERY_ID, DOC_ID]]
    tail = docs.loc[(kind == "tail").to_numpy()]
    per_query = intro.groupby(QUERY_ID).size()
    # from the alignment ``docs`` was read from
    counts = reorder_counts(first, reranked, depth, score_precision, work=work)
    return {
        "only_reorders": bool(len(intro) == 0),
        "candidate_depth": depth,
        "introduced_documents": len(intro),
        "outside_first_stage": int((~docs["in_first_stage"].to_numpy()).sum()),
        "queries_with_introduced_documents": len(per_query),
        "introduced_per_query": {str(k): int(v) for k, v in per_query.items()},
        "examples": [{"query_id": str(q), "doc_id": str(d)} for q, d in intro.head(examples).itertuples(index=False)],
        "tail_documents": len(tail),
        "queries_with_tail": int(tail[QUERY_ID].nunique()),
        **counts,
    }


def relevant_counts(
    qrels: Qrels,
    first: Run,
    reranked: Run,
    depth: int,
    level: int,
    query_ids: Sequence[str],
    score_precision: str = DEFAULT_SCORE_PRECISION,
    *,
    work: Workspace = NO_WORKSPACE,
) -> pd.DataFrame:
    """Per query: relevant documents (label >= ``level``), how many are among the candidates and in the
    reranked top 10, and how many of the reranked top 10 are unjudged."""
    from toolkit.diagnosis.depths import in_first_top

    def of_first_stage() -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, pd.Series]:
        qf = qrels.frame
        rel = qf.loc[qf[RELEVANCE] >= level, [QUERY_ID, DOC_ID]]
        judged = qf.loc[qf[RELEVANCE] >= 0, [QUERY_ID, DOC_ID]]
        in_candidates = rel.loc[in_first_top(first, rel, depth, score_precision, work=work)].groupby(QUERY_ID).size()
        return rel, judged, rel.groupby(QUERY_ID).size(), in_candidates

    # the same for every run reranked from ``first`` at ``depth``: once
    rel, judged, num_rel, in_candidates = work.once(
        "relevant counts", (qrels, first), (depth, level, score_precision), of_first_stage
    )

    def count(frame: pd.DataFrame) -> pd.Series:
        return rel.loc[coded_isin(rel, frame, [QUERY_ID, DOC_ID])].groupby(QUERY_ID).size()

    top = top_k(reranked.frame, TOP, score_precision, work=work)
    unjudged = top.loc[~coded_isin(top, judged, [QUERY_ID, DOC_ID])].groupby(QUERY_ID).size()
    out = (
        pd.DataFrame(
            {
                "num_rel": num_rel,
                "rel_in_candidates": in_candidates,
                "rel_in_top_10": count(top),
                "unjudged_in_top_10": unjudged,
            }
        )
        .reindex(list(query_ids))
        .fillna(0)
        .astype(int)
    )
    out.insert(2, "rel_missing_from_candidates", out["num_rel"] - out["rel_in_candidates"])
    return out


def _pipeline_table(
    ev: _Evaluated,
    r: Reranked,
    dec: Decomposition,
    check: dict,
    agree: pd.DataFrame,
    counts: pd.DataFrame,
    t: Thresholds,
) -> pd.DataFrame:
    """One reranked run's rows of the per-query table (one row per query), labels included: its values and its
    first stage's (R@ its depth, and R@ the first stage's deeper cutoffs), its decomposition ``dec``, reorder
    ``check``, agreement with the first stage and relevant-document ``counts``."""
    first, reranked, measure = ev.values[r.first_stage], ev.values[r.name], ev.measure
    first_extra = [f"recall_{c}" for c in ev.cutoffs[r.first_stage] if c > int(r.depth or 0)]
    d = dec.per_query.set_index(QUERY_ID)
    qids = list(d.index)
    missing = set(dec.missing)
    cols: dict[str, object] = {
        "system": r.name,
        "first_stage_run": r.first_stage,
        QUERY_ID: qids,
        f"first_{measure}": d["first_stage"].to_numpy(),
        f"reranked_{measure}": d["reranked"].to_numpy(),
        f"delta_{measure}": (d["reranked"] - d["first_stage"]).to_numpy(),
        f"ideal_{measure}": d["ideal"].to_numpy(),
        f"ceiling_{measure}": d["ceiling"].to_numpy(),
        "lost_in_candidates": d["lost_in_candidates"].to_numpy(),
        "lost_in_reranking": d["lost_in_reranking"].to_numpy(),
    }
    context = ["ndcg_cut_10", "ndcg_cut_10_condensed", "judged_10"]
    if measure == "ndcg_cut_10":
        context = context[1:]

    def at_qids(frame: pd.DataFrame):
        """``frame.loc[qids, c].to_numpy()`` per column ``c``, the rows looked up once per frame."""
        rows = frame.index.get_indexer(qids)
        if (rows < 0).any():
            raise KeyError(f"{int((rows < 0).sum())} queries missing from a per-query frame")
        return lambda c: frame[c].to_numpy()[rows]

    of_first, of_reranked = at_qids(first), at_qids(reranked)
    for c in context:
        cols[f"first_{c}"] = of_first(c)
        cols[f"reranked_{c}"] = of_reranked(c)
    rk = f"recall_{r.depth}"
    cols[f"first_{rk}"] = of_first(rk)
    for c in first_extra:
        cols[f"first_{c}"] = of_first(c)
    cols[f"reranked_{rk}"] = of_reranked(rk)
    table = pd.DataFrame(cols)
    of_counts = at_qids(counts)
    for c in counts.columns:
        table[c] = of_counts(c)
    table["introduced_docs"] = [check["introduced_per_query"].get(q, 0) for q in qids]
    of_agree = at_qids(agree.set_index(QUERY_ID))
    table["rbo"] = of_agree("rbo")
    table[f"kendall_tau_{TAU_DEPTH}"] = of_agree(f"kendall_tau_{TAU_DEPTH}")
    table.insert(
        3,
        "diagnosis",
        [
            label_query(i, v, c, u, t, first_stage=f, missing=q in missing)
            for q, i, v, c, u, f in zip(
                qids, d["ideal"], d["reranked"], d["ceiling"], table["unjudged_in_top_10"], d["first_stage"]
            )
        ],
    )
    return table


def _pair_table(a: str, b: str, family: str, ev: _Evaluated) -> pd.DataFrame:
    """Per query: the measure of systems ``a`` and ``b``, b - a, and their RBO and Kendall's tau."""
    agree = ev.agreement(a, b)
    qids, measure = ev.qids, ev.measure
    va = ev.values[a]["headline"].to_numpy()
    vb = ev.values[b]["headline"].to_numpy()
    return pd.DataFrame(
        {
            "family": family,
            "system_a": a,
            "system_b": b,
            QUERY_ID: list(qids),
            f"{measure}_a": va,
            f"{measure}_b": vb,
            "delta": vb - va,
            "rbo": agree["rbo"].to_numpy(),
            f"kendall_tau_{TAU_DEPTH}": agree[f"kendall_tau_{TAU_DEPTH}"].to_numpy(),
        }
    )


FAMILIES = ("against the first stage", "between reranked runs", "between first stages")


def _sorted_deltas(pairs: pd.DataFrame, measure: str) -> dict[tuple[str, str, str], np.ndarray]:
    """Every pair's b - a in query id order (``compare_table``'s order: it pivots on the query id), by (family,
    system_a, system_b) in the order of ``pairs``."""
    out: dict[tuple[str, str, str], np.ndarray] = {}
    for (family, a, b), g in pairs.groupby(["family", "system_a", "system_b"], sort=False):
        g = g.sort_values(QUERY_ID, kind="stable")
        out[(str(family), str(a), str(b))] = g[f"{measure}_b"].to_numpy(dtype=np.float64) - g[f"{measure}_a"].to_numpy(
            dtype=np.float64
        )
    return out


def _significance(
    pairs: pd.DataFrame, measure: str, permutations: int, seed: int, correction: str, *, work: Workspace = NO_WORKSPACE
) -> list[dict]:
    """Paired tests of every pair in ``pairs``, corrected per family.

    Against the first stage, each first stage's reranked runs form one family, as in ``twostage compare FIRST
    R1 R2 ...`` (the same generator consumed in the same order, so the p-values equal its). Between reranked
    runs (and between first stages) every pair is tested with its own ``default_rng(seed)`` and the family is
    all pairs.
    """

    def tidy(frame: pd.DataFrame) -> pd.DataFrame:
        """The tidy table compare_table reads: the baseline (system_a) once, then every system_b."""
        base = frame.drop_duplicates(QUERY_ID)
        parts = [
            base[[QUERY_ID, f"{measure}_a"]].set_axis([QUERY_ID, "value"], axis=1).assign(run=base["system_a"]),
            frame[[QUERY_ID, f"{measure}_b"]].set_axis([QUERY_ID, "value"], axis=1).assign(run=frame["system_b"]),
        ]
        return pd.concat(parts, ignore_index=True).assign(measure=measure)[["run", QUERY_ID, "measure", "value"]]

    from toolkit.stats.intervals import DEFAULT_RESAMPLES, prime_bootstrap
    from toolkit.stats.significance import prime_permutations

    deltas = _sorted_deltas(pairs, measure)
    prime_bootstrap(list(deltas.values()), DEFAULT_RESAMPLES, seed, work=work)  # compare_table's intervals, one draw
    # the randomization tests that start from a fresh default_rng(seed), one draw of signs: each first stage's
    # first pair against it (its family's generator then goes on) and every pair of the other families
    fresh, seen = [], set()
    for (family, base, _), d in deltas.items():
        if family != FAMILIES[0] or base not in seen:
            fresh.append(d)
        if family == FAMILIES[0]:
            seen.add(base)
    prime_permutations(fresh, permutations, seed, work=work)
    out: list[dict] = []
    against = pairs[pairs["family"] == FAMILIES[0]]
    for first, group in against.groupby("system_a", sort=False):
        for c in compare_table(
            tidy(group), first, permutations=permutations, seed=seed, correction=correction, work=work
        ):
            out.append({"family": FAMILIES[0], **c.as_dict()})
    for family in FAMILIES[1:]:
        rows = []
        for (a, _b), group in pairs[pairs["family"] == family].groupby(["system_a", "system_b"], sort=False):
            c = compare_table(tidy(group), a, permutations=permutations, seed=seed, correction="none", work=work)[0]
            rows.append({"family": family, **c.as_dict()})
        for row, p in zip(rows, adjust([r["p_permutation"] for r in rows], correction) if rows else []):
            row["p_adjusted"] = float(p)
            row["p_adjusted_se"] = scaled_se(row["p_permutation"], float(p), row["p_permutation_se"])  # its MC error
        out += rows
    agree = pairs.groupby(["system_a", "system_b"], sort=False)[["rbo", f"kendall_tau_{TAU_DEPTH}"]].mean()
    for row in out:
        m = agree.loc[(row["baseline"], row["run"])]
        row["rbo"], row[f"kendall_tau_{TAU_DEPTH}"] = float(m["rbo"]), float(m[f"kendall_tau_{TAU_DEPTH}"])
    return out


# -------------------------------------------------------------- diagnosis
@dataclass(frozen=True)
class Pipeline:
    """One reranked run's results: its decomposition, reorder check and label counts."""

    name: str
    first_stage: str
    depth: int
    depth_from: str
    listwise: bool
    run_path: str
    decomposition: Decomposition
    reorder_check: dict
    label_counts: dict[str, int]
    detection: dict | None = None  # depths.DepthDetection.as_dict(): the depth rule and its share of queries
    repeats: dict | None = None  # repeats.repeat_stats of the headline measure, with "runs" and "measures"
    behaviour: dict | None = None  # listwise.listwise_behaviour: promotion profile, unchanged queries, windows

    @property
    def depth_source(self) -> str:
        """The depth and where it came from, in words (``20, detected: the rule holds ...``)."""
        d = self.detection or {}
        if self.depth_from == "detected" and d:
            return (
                f"top {self.depth} (detected: below rank {self.depth} it repeats {self.first_stage}'s order in "
                f"{d['held']} of {d['queries']} queries)"
            )
        return f"top {self.depth} ({self.depth_from})"

    def decomposition_summary(self) -> dict:
        return {"system": self.name, "first_stage_run": self.first_stage, **self.decomposition.means()}

    def describe(self) -> dict:
        d = self.decomposition
        return {
            "name": self.name,
            "first_stage": self.first_stage,
            "run": self.run_path,
            "depth": self.depth,
            "depth_from": self.depth_from,
            "depth_detection": self.detection,
            "listwise": self.listwise,
            "missing_queries": len(self.decomposition.missing),
            "missing_query_ids": list(self.decomposition.missing),
            "repeats": self.repeats,
            "behaviour": self.behaviour,
            "decomposition": self.decomposition_summary(),
            "depth_curve": d.curve_records(),
            "depth_curve_exact": d.curve_exact,
            "labels": self.label_counts,
            "reorder_check": self.reorder_check,
        }


@dataclass(frozen=True)
class Diagnosis:
    """Everything a report shows.

    ``per_query`` has one row per reranked run and query (columns ``system``, ``first_stage``, ``query_id``,
    ...); ``pairs`` one row per compared pair of runs and query; ``pipelines[0]`` is the primary reranked run
    the headline, worst queries and query types describe.
    """

    name: str
    measure: str
    first_stages: dict[str, str]  # name -> run path
    pipelines: tuple[Pipeline, ...]
    per_query: pd.DataFrame
    pairs: pd.DataFrame
    systems: list[dict]
    headline: list[dict]
    comparisons: list[dict]
    disagreements: list[dict]
    types: pd.DataFrame
    worst: list[dict]
    most_changed: dict[str, list[dict]]
    hurt_most: dict[str, list[dict]]
    helped_most: dict[str, list[dict]]
    views: dict[str, dict]
    missed: dict[str, list[dict]]
    thresholds: Thresholds
    settings: dict
    provenance: dict
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def primary(self) -> Pipeline:
        return self.pipelines[0]

    @property
    def label_counts(self) -> dict[str, int]:
        return self.primary.label_counts

    @property
    def reorder_check(self) -> dict:
        return self.primary.reorder_check

    @property
    def measure_label(self) -> str:
        return measure_label(self.measure)

    def rows(self, system: str | None = None) -> pd.DataFrame:
        """The per-query rows of one reranked run (default: the primary)."""
        return self.per_query[self.per_query["system"] == (system or self.primary.name)]

    def summary(self) -> dict:
        """The JSON-ready summary (summary.json)."""
        p = self.primary
        return json_ready(
            {
                "name": self.name,
                "twostage": __version__,
                "measure": self.measure,
                "headline": self.headline,
                "decomposition": p.decomposition_summary(),
                "depth_curve": p.decomposition.curve_records(),
                "depth_curve_exact": p.decomposition.curve_exact,
                "systems": self.systems,
                "reranked_runs": [x.describe() for x in self.pipelines],
                "comparisons": self.comparisons,
                "disagreements": self.disagreements,
                "queries": int(self.rows().shape[0]),
                "labels": self.label_counts,
                "label_meaning": {k: LABEL_MEANING[k] for k in LABELS},
                "thresholds": asdict(self.thresholds),
                "threshold_rules": self.thresholds.describe(self.measure_label),
                "settings": self.settings,
                "query_types": _records(self.types),
                "reorder_check": self.reorder_check,
                "worst_queries": self.worst,
                "most_changed": self.most_changed,
                "hurt_most": self.hurt_most,
                "helped_most": self.helped_most,
                "notes": [for_api(n) for n in self.notes],
                "provenance": self.provenance,
            }
        )


def json_ready(obj):
    """``obj`` with numpy scalars as Python numbers and NaN as None (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: v if type(v) in _AS_IS else json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [v if type(v) in _AS_IS else json_ready(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    return None if isinstance(obj, float) and obj != obj else obj


#: What ``json_ready`` gives back as it is (no call for it: the per-query parts hold millions).
_AS_IS = frozenset({str, int, bool, type(None)})


def _records(frame: pd.DataFrame) -> list[dict]:
    return [
        {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


#: What the steps after the per-run ones (pairs, tests, query views, notes; and the API's uncertainty annotations
#: in its workspace) read of what the workspace kept before them: the rest is let go.
READ_AFTER_RUNS = frozenset(
    {"order_run", "query ids", "prepared judgments", "judged rows in trec_eval order", "longest_list"}
)


def default_title(reranked: Sequence[str], first_stages: Sequence[str]) -> str:
    """The report's title when none is given: the runs it diagnoses (``rv20, rv100 over bm25``)."""
    return f"{', '.join(reranked)} over {', '.join(first_stages)}"


@dataclass(frozen=True, eq=False)
class DiagnosisInputs:
    """What a diagnosis reads (how it reads them is ``DiagnosisOptions``): the qrels, the runs, and the data that
    describe them.

    ``first`` is a run or name -> run; ``reranked`` a run, name -> run, or name -> list of runs (repeats of one
    system, ``repeats.py``), or ``Reranked`` values that say all of it. ``queries`` gives query texts (query
    types, snippets' highlighted terms), ``texts`` document texts (snippets); ``query_types`` (qid -> type) wins
    over ``type_rules`` (default ``DEFAULT_TYPE_RULES``); ``sources`` is where the inputs came from, as the report
    states it. ``work``: the workspace the caller holds for this diagnosis (every run sorted once, however many
    steps read it); ``diagnose`` makes a new one when None.
    """

    qrels: Qrels
    first: Run | Mapping[str, Run]
    reranked: Run | Mapping[str, Run] | Sequence[Reranked]
    queries: Mapping[str, str] = field(default_factory=dict)
    texts: TextLookup | None = None
    query_types: Mapping[str, str] | None = None
    type_rules: Iterable[TypeRule] | None = None
    sources: dict | None = None
    work: Workspace | None = None

    def __post_init__(self) -> None:
        # held as read once: the query texts as a dict of their own, the rules as a tuple (a generator given is
        # read here)
        object.__setattr__(self, "queries", dict(self.queries or {}))
        if self.type_rules is not None:
            object.__setattr__(self, "type_rules", tuple(self.type_rules))

    @property
    def rules(self) -> tuple[TypeRule, ...]:
        """The query-type rules: those given, else ``DEFAULT_TYPE_RULES``."""
        return tuple(self.type_rules) if self.type_rules is not None else DEFAULT_TYPE_RULES


def diagnose(inputs: DiagnosisInputs, options: DiagnosisOptions | None = None) -> Diagnosis:
    """Diagnose one or more reranked runs over their first stages (``inputs``), as ``options`` say (default
    ``DiagnosisOptions()``); pure (inputs are not modified).

    Each reranked run is paired with the only first stage, or with the first stage whose candidates hold most of
    its documents. Its rerank depth: the options' ``depth`` (one int for every run, or {name: depth}), else
    detected (``depths.detect_depth``), else ``DepthNotDetectedError``. The options' ``window`` and ``stride``:
    the sliding window of a listwise reranker, for the share of windows it returned in their input order
    (``listwise_behaviour.py``); ``listwise`` names the reranked runs whose depth curve is an approximation;
    ``settings`` are the base evaluation settings (gain, discount, -M, -J, score precision, ``complete``); the
    relevance levels are set here (``recall_level`` None: 2 when the qrels are graded above 1, else 1).
    """
    o = options if options is not None else DiagnosisOptions()
    work = Workspace() if inputs.work is None else inputs.work
    qrels = inputs.qrels
    measure, recall_level = o.headline
    if recall_level is None:
        recall_level = 2 if qrels.frame[RELEVANCE].max() >= 2 else 1
    s = _Settings.from_base(o.settings, recall_level, o.settings.complete)
    firsts = named_runs(inputs.first, "first stage")
    reranked, notes, depth_notes = reranked_inputs(
        inputs.reranked, firsts, o.depth, o.listwise, s.binary.score_precision, work=work
    )
    ev = _evaluate_all(qrels, firsts, reranked, parse_headline_measure(measure), s, o.settings.complete, work=work)
    done = [_diagnose_reranked(ev, r, recall_level, o) for r in reranked]
    work.keep_only(READ_AFTER_RUNS)  # the per-run steps' alignments, codes and candidates are not read again
    pipelines = [p for p, _ in done]
    per_query = _with_query_columns(
        pd.concat([table for _, table in done], ignore_index=True), inputs.queries, inputs.query_types, inputs.rules
    )
    pairs = _pairs(ev, reranked)
    comparisons = _significance(pairs, ev.measure, o.permutations, o.seed, o.correction, work=work)
    comparisons = _with_repeat_readings(comparisons, pipelines)
    worst, views, missed = _query_views(ev, per_query, pipelines[0], inputs, o)
    notes += _notes(ev, reranked, pipelines, per_query, inputs.query_types, o)
    notes += depth_notes
    _warn_missing_and_identical(pipelines)
    return Diagnosis(
        name=o.name if o.name is not None else default_title([r.name for r in reranked], list(firsts)),
        measure=ev.measure,
        first_stages={n: r.path for n, r in firsts.items()},
        pipelines=tuple(pipelines),
        per_query=per_query,
        pairs=pairs,
        systems=_systems(firsts, pipelines, ev.values, comparisons, ev.cutoffs, ev.measure),
        headline=_headline(ev.values, pipelines[0], ev.cutoffs, ev.measure, recall_level, len(ev.qids)),
        comparisons=comparisons,
        disagreements=[
            {"system_a": a, "system_b": b, "queries": disagreements(g, o.disagree_n)}
            for (a, b), g in pairs[pairs["family"] == FAMILIES[1]].groupby(["system_a", "system_b"], sort=False)
        ],
        types=type_summary(per_query, pipelines[0].name, ev.measure, [r.name for r in reranked]),
        worst=worst,
        most_changed={p.name: most_changed(_rows_of(per_query, ev, p), o.most_changed_n) for p in pipelines},
        hurt_most={p.name: by_delta(_rows_of(per_query, ev, p), o.worst_n, "hurt") for p in pipelines},
        helped_most={p.name: by_delta(_rows_of(per_query, ev, p), o.worst_n, "helped") for p in pipelines},
        views=views,
        missed=missed,
        thresholds=o.thresholds,
        settings=_settings_record(ev.measure, recall_level, reranked, inputs, o),
        provenance={n: v.provenance for n, v in ev.evaluated.items()},
        notes=tuple(dict.fromkeys(notes)),
    )


def diagnose_with_uncertainty(inputs: DiagnosisInputs, options: DiagnosisOptions | None = None) -> Diagnosis:
    """``diagnose``, every comparison with its paired bootstrap interval at the options' ``ci`` (``bootstrap``
    resamples, ``ci_method``, ``seed``), the hole bounds of its two systems and its verdict
    (``stats.annotate``): the diagnosis ``ts.diagnose`` and an experiment's report both show."""
    from toolkit.quality.holes import system_bounds
    from toolkit.stats.annotate import annotate, compared_queries, evaluated_with

    o = options if options is not None else DiagnosisOptions()
    work = Workspace() if inputs.work is None else inputs.work
    result = diagnose(dataclasses.replace(inputs, work=work), o)
    systems = {n: [r] for n, r in named_runs(inputs.first, "first stage").items()}
    if isinstance(inputs.reranked, (Run, Mapping)):
        for n, r in named_runs(inputs.reranked, "reranked").items():
            systems[n] = list(r) if isinstance(r, (list, tuple)) else [r]
    else:
        systems.update({r.name: list(r.runs) for r in inputs.reranked})
    bounds = system_bounds(
        inputs.qrels, systems, result.measure, evaluated_with(result, o.settings), compared_queries(result), work=work
    )
    return annotate(
        result,
        bounds,
        level=float(o.ci),
        resamples=int(o.bootstrap),
        method=o.ci_method,
        seed=int(o.seed),
        work=work,
    )


def _warn_missing_and_identical(pipelines: Sequence[Pipeline]) -> None:
    """A ``TwostageWarning`` for every reranked run that lacks queries (labelled ``missing``) and for every set
    of byte-identical repeat files (``repeats.identical``)."""
    from toolkit.diagnosis.repeats import identical_note
    from toolkit.notices import warn

    for p in pipelines:
        if p.decomposition.missing:
            warn(missing_note(p))
        if p.repeats and p.repeats.get("identical"):
            warn(identical_note(p.name, p.repeats["identical"]))


def _with_repeat_readings(comparisons: list[dict], pipelines: Sequence[Pipeline]) -> list[dict]:
    """Comparisons with a system that has repeats gain the share of repeat pairs won and a reading that says
    whether the difference is within the repeat spread (``repeats.comparison_reading``)."""
    from toolkit.diagnosis.repeats import comparison_reading

    stats = {p.name: p.repeats for p in pipelines if p.repeats}
    if not stats:
        return comparisons
    return [{**c, **comparison_reading(c, stats)} for c in comparisons]


@dataclass(frozen=True)
class _Evaluated:
    """What every step reads: the runs, their per-query values over the one query set, their ranked lists."""

    qrels: Qrels
    prepared: PreparedJudgments
    measure: str
    settings: _Settings
    firsts: dict[str, Run]
    runs: dict[str, Run]
    cutoffs: dict[str, list[int]]
    evaluated: dict[str, _RunValues]
    qids: list[str]
    values: dict[str, pd.DataFrame]
    lists: dict[str, Mapping[str, list[str]]]  # ranked_lists, made per query when read
    repeat_values: dict[str, list[pd.DataFrame]] = field(default_factory=dict)  # per repeat, systems with repeats
    coded: dict[str, CodedLists] = field(default_factory=dict)  # ``lists`` as integer codes, for agreement
    _agreements: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)
    work: Workspace = NO_WORKSPACE  # the diagnosis's: what every step computes once

    @property
    def precision(self) -> str:
        return self.settings.binary.score_precision

    def agreement(self, a: str, b: str) -> pd.DataFrame:
        """Per query RBO and Kendall's tau of runs ``a`` and ``b`` (computed once per pair)."""
        if (a, b) not in self._agreements:
            if not self.coded and len(self.firsts) == 1:  # every other run reranks it: codes from the alignments
                from toolkit.diagnosis.depths import alignment

                ((name, first),) = self.firsts.items()
                aligned = {
                    n: (run, alignment(first, run, self.precision, work=self.work).row_in_first)
                    for n, run in self.runs.items()
                    if n != name
                }
                self.coded.update(code_aligned(name, first, aligned, self.qids, self.precision, work=self.work))
            if not self.coded:
                self.coded.update(code_runs(self.runs, self.qids, self.precision, work=self.work))
            self._agreements[(a, b)] = agreement(self.coded[a], self.coded[b], self.qids, work=self.work)
        return self._agreements[(a, b)]


def _evaluate_all(
    qrels: Qrels,
    firsts: dict[str, Run],
    reranked: Sequence[Reranked],
    measure: str,
    s: _Settings,
    complete: bool,
    *,
    work: Workspace = NO_WORKSPACE,
) -> _Evaluated:
    """Step 1: evaluate every run once, fix the query set, rank every run's lists. A system with repeats is
    evaluated repeat by repeat; its values are the per-query means over the repeats (``repeats.mean_frame``),
    its ranked lists (agreement, the query views) its first run's."""
    from toolkit.diagnosis.repeats import mean_frame

    runs = {**firsts, **{r.name: r.run for r in reranked}}
    cutoffs = _recall_cutoffs(firsts, reranked, work=work)
    prepared = prepare_judgments(qrels, work=work)  # factorised once for the three settings groups of every run
    evaluated = {n: _evaluate_run(prepared, run, measure, cutoffs[n], s, work=work) for n, run in runs.items()}
    extra = {
        r.name: [_evaluate_run(prepared, run, measure, cutoffs[r.name], s, work=work) for run in r.repeats]
        for r in reranked
        if r.repeats
    }
    qids = _query_set(evaluated, complete)
    precision = s.binary.score_precision
    values = {n: v.values.reindex(qids, fill_value=0.0) for n, v in evaluated.items()}
    repeat_values = {
        n: [values[n], *(v.values.reindex(qids, fill_value=0.0)[values[n].columns] for v in more)]
        for n, more in extra.items()
    }
    for n, frames in repeat_values.items():
        values[n] = mean_frame(frames)
    return _Evaluated(
        qrels=qrels,
        prepared=prepared,
        measure=measure,
        settings=s,
        firsts=firsts,
        runs=runs,
        cutoffs=cutoffs,
        evaluated=evaluated,
        qids=qids,
        values=values,
        lists={n: RankedLists(run, qids, precision, work=work) for n, run in runs.items()},
        repeat_values=repeat_values,
        work=work,
    )


def _diagnose_reranked(
    ev: _Evaluated, r: Reranked, recall_level: int, o: DiagnosisOptions
) -> tuple[Pipeline, pd.DataFrame]:
    """Step 2, per reranked run: decomposition and depth curve, reorder check, agreement with its first stage,
    relevant-document counts, listwise behaviour, and its per-query rows with labels. A system with repeats:
    each repeat is decomposed and checked, and the per-query means over repeats make its rows. The options'
    ``window`` and ``stride`` win over the run's sidecar's."""
    from toolkit.diagnosis.listwise_behaviour import ListwiseSidecar, listwise_behaviour
    from toolkit.diagnosis.repeats import (
        identical_repeats,
        mean_decomposition,
        mean_frame,
        merge_checks,
        repeat_stats,
    )

    work = ev.work
    first = ev.firsts[r.first_stage]
    depth = int(r.depth or 0)
    per_repeat = ev.repeat_values.get(r.name) or [ev.values[r.name]]
    on = DecompositionSettings(
        measure=ev.measure,
        settings=ev.settings.binary,
        recall_settings=ev.settings.binary,
        query_ids=ev.qids,
        depths=o.curve_depths,
    )
    decs = [
        decompose(
            ev.prepared,
            first,
            run,
            depth,
            on,
            listwise=r.listwise,
            first_values=ev.values[r.first_stage]["headline"],
            reranked_values=values["headline"],
            work=work,
        )
        for run, values in zip(r.runs, per_repeat)
    ]
    dec = mean_decomposition(decs)
    check = merge_checks(
        [check_reordering(first, run, depth, score_precision=ev.precision, work=work) for run in r.runs]
    )
    agree = ev.agreement(r.first_stage, r.name)
    counts = mean_frame(
        [relevant_counts(ev.qrels, first, run, depth, recall_level, ev.qids, ev.precision, work=work) for run in r.runs]
    )
    table = _pipeline_table(ev, r, dec, check, agree, counts, o.thresholds)
    repeats = None
    if r.repeats:
        repeats = repeat_stats([v["headline"] for v in per_repeat])
        repeats["runs"] = [run.path for run in r.runs]
        repeats["identical"] = identical_repeats(r.runs)
        repeats["measures"] = {
            c: repeat_stats([v[c] for v in per_repeat]) for c in per_repeat[0].columns if c != "headline"
        }
    pipeline = Pipeline(
        r.name,
        r.first_stage,
        depth,
        r.depth_from,
        r.listwise,
        r.run.path,
        dec,
        check,
        {lab: int((table["diagnosis"] == lab).sum()) for lab in LABELS},
        detection=r.detection,
        repeats=repeats,
        behaviour=listwise_behaviour(
            ev.prepared,
            first,
            r.runs,
            depth,
            ev.qids,
            ev.precision,
            sidecar=ListwiseSidecar(
                window=o.window or r.window,  # the option, else the run's sidecar
                stride=o.stride if o.window else r.stride,
                probe=r.probe,
                record=r.record,
            ),
            work=work,
        ),
    )
    return pipeline, table


def _pairs(ev: _Evaluated, reranked: Sequence[Reranked]) -> pd.DataFrame:
    """Step 3: every compared pair's per-query values and agreement (each reranked run against its first stage,
    every two reranked runs, every two first stages)."""
    named = [(FAMILIES[0], r.first_stage, r.name) for r in reranked]
    for family, names in ((FAMILIES[1], [r.name for r in reranked]), (FAMILIES[2], list(ev.firsts))):
        named += [(family, a, b) for a, b in itertools.combinations(names, 2)]
    return pd.concat(
        [_pair_table(a, b, family, ev) for family, a, b in named],
        ignore_index=True,
    )


def _query_views(
    ev: _Evaluated, per_query: pd.DataFrame, primary: Pipeline, inputs: DiagnosisInputs, o: DiagnosisOptions
):
    """Step 4: the worst queries of the primary run, every system's top k per query, the best documents none
    of them shows, query-biased snippets (the inputs' texts) and query terms (their queries)."""
    queries, worst_n, missed_shown = inputs.queries, o.worst_n, o.missed_shown
    rows = _rows_of(per_query, ev, primary)
    qrels_grades = grades(ev.qrels, worst_rows(rows, worst_n)[QUERY_ID])  # the only queries worst_queries reads
    worst = worst_queries(
        rows,
        ev.lists,
        primary.first_stage,
        primary.name,
        qrels_grades,
        depth=primary.depth,
        n=worst_n,
        missed_shown=missed_shown,
    )
    views, missed = views_of_runs(
        ev.qids,
        ev.runs,
        ev.qrels,
        o.explore_depth,
        ev.precision,
        primary.first_stage,
        primary.depth,
        missed_shown,
        work=ev.work,
    )  # side_by_side and best_missed of every query, columnwise
    add_snippets(views, worst, missed, queries, inputs.texts, o.snippet_chars)
    terms = {t: query_terms(t) for t in {queries.get(q) for q in ev.qids}}
    for q in ev.qids:
        views[q]["terms"] = list(terms[queries.get(q)])
    return worst, views, missed


def _recall_cutoffs(
    firsts: Mapping[str, Run], reranked: Sequence[Reranked], *, work: Workspace = NO_WORKSPACE
) -> dict[str, list[int]]:
    """R@N for every rerank depth N a run takes part in, and nothing else (no cutoff nobody asked for); a first
    stage no reranked run reorders: R@ the deepest depth in use, at most its longest list."""
    out: dict[str, set[int]] = {n: set() for n in firsts}
    for r in reranked:
        out[r.first_stage].add(int(r.depth or 0))
        out[r.name] = {int(r.depth or 0)}
    deepest = max(int(r.depth or 0) for r in reranked)
    for n, run in firsts.items():
        if not out[n]:
            out[n] = {max(1, min(deepest, longest_list(run, work=work)))}
    return {n: sorted(c) for n, c in out.items()}


def _with_query_columns(
    table: pd.DataFrame, queries: Mapping[str, str], file_types: Mapping[str, str] | None, rules: tuple[TypeRule, ...]
) -> pd.DataFrame:
    qids = table[QUERY_ID].tolist()
    types = dict(zip(qids, assign_types(list(dict.fromkeys(qids)), dict(queries), dict(file_types or {}), rules)))
    table.insert(3, "query", [queries.get(q, "") for q in qids])
    table.insert(4, "query_type", [types[q] for q in qids])
    return table


def _rows_of(per_query: pd.DataFrame, ev: _Evaluated, p: Pipeline) -> pd.DataFrame:
    """One reranked run's rows of the per-query table under the query views' names, but the queries it lacks
    (label ``missing``: no ranking of its own to show, no change the reranker made)."""
    rows = per_query[(per_query["system"] == p.name).to_numpy() & (per_query["diagnosis"] != "missing").to_numpy()]
    return _view_rows(rows, ev.measure, p.depth)


def _view_rows(rows: pd.DataFrame, measure: str, depth: int) -> pd.DataFrame:
    """One reranked run's rows under the generic names the query views read."""
    return rows.rename(
        columns={
            f"first_{measure}": "first_stage",
            f"reranked_{measure}": "reranked",
            f"ceiling_{measure}": "ceiling",
            f"first_recall_{depth}": "first_recall",
        }
    )


def _headline(values: Mapping[str, pd.DataFrame], p: Pipeline, cutoffs, measure: str, level: int, n: int) -> list[dict]:
    """The primary reranked run against its first stage: recall, the measure, nDCG@10, nDCG'@10, judged@10."""
    first, rr = values[p.first_stage], values[p.name]

    def row(label: str, key: str, column: str, reranked: bool = True) -> dict:
        return {
            "measure": label,
            "key": key,
            "first_stage": float(first[column].mean()) if n else 0.0,
            "reranked": (float(rr[column].mean()) if n else 0.0) if reranked else None,
        }

    rows = [row(f"R@{p.depth} (-l {level})", f"recall_{p.depth}", f"recall_{p.depth}")]
    rows += [
        row(f"R@{c} (-l {level})", f"recall_{c}", f"recall_{c}", reranked=False)
        for c in cutoffs[p.first_stage]
        if c > p.depth
    ]
    if measure != "ndcg_cut_10":
        rows.append(row(measure_label(measure), measure, "headline"))
    rows += [
        row("nDCG@10", "ndcg_cut_10", "ndcg_cut_10"),
        row("nDCG'@10 (-J, condensed)", "ndcg_cut_10_condensed", "ndcg_cut_10_condensed"),
        row("judged@10", "judged_10", "judged_10"),
        {"measure": "queries", "key": "num_q", "first_stage": n, "reranked": n},
    ]
    return rows


def _systems(
    firsts, pipelines: Sequence[Pipeline], values, comparisons: list[dict], cutoffs, measure: str
) -> list[dict]:
    """One record per run: its means, and for a reranked run its decomposition and its test against the
    first stage."""
    against = {c["run"]: c for c in comparisons if c["family"] == FAMILIES[0]}
    out = []
    for n, run in firsts.items():
        v = values[n]
        out.append(
            {
                "name": n,
                "role": "first stage",
                "run": run.path,
                "means": {measure: float(v["headline"].mean()), **_context_means(v, cutoffs[n])},
            }
        )
    for p in pipelines:
        v = values[p.name]
        c = against.get(p.name, {})
        keep = (
            "delta",
            "p_ttest",
            "p_permutation",
            "p_adjusted",
            "wins",
            "ties",
            "losses",
            "rbo",
            f"kendall_tau_{TAU_DEPTH}",
        )
        out.append(
            {
                "name": p.name,
                "role": "reranked",
                "run": p.run_path,
                "first_stage": p.first_stage,
                "depth": p.depth,
                "listwise": p.listwise,
                "means": {measure: float(v["headline"].mean()), **_context_means(v, cutoffs[p.name])},
                "decomposition": p.decomposition_summary(),
                "against_first_stage": {k: c[k] for k in keep if k in c},
            }
        )
    return out


def _context_means(v: pd.DataFrame, cutoffs: Iterable[int]) -> dict[str, float]:
    cols = ["ndcg_cut_10", "ndcg_cut_10_condensed", "judged_10", *(f"recall_{c}" for c in cutoffs)]
    return {c: float(v[c].mean()) if len(v) else 0.0 for c in cols}


def type_summary(per_query: pd.DataFrame, primary: str, measure: str, reranked: Sequence[str]) -> pd.DataFrame:
    """Per query type: count; the primary run's mean/median measure, mean first stage, ceiling and losses,
    label counts; and the mean measure of every reranked run."""
    rows_all = per_query
    rows = per_query[per_query["system"] == primary]
    out = []
    for qtype, g in rows.groupby("query_type", sort=True):
        row = {
            "query_type": qtype,
            "queries": len(g),
            "mean": float(g[f"reranked_{measure}"].mean()),
            "median": float(g[f"reranked_{measure}"].median()),
            "mean_first_stage": float(g[f"first_{measure}"].mean()),
            "mean_ceiling": float(g[f"ceiling_{measure}"].mean()),
            "mean_lost_in_candidates": float(g["lost_in_candidates"].mean()),
            "mean_lost_in_reranking": float(g["lost_in_reranking"].mean()),
            "too_small": len(g) < MIN_TYPE_QUERIES,
        }
        for name in reranked:
            mine = rows_all[(rows_all["system"] == name) & (rows_all["query_type"] == qtype)]
            row[f"mean:{name}"] = float(mine[f"reranked_{measure}"].mean())
        for lab in LABELS:
            row[lab] = int((g["diagnosis"] == lab).sum())
        out.append(row)
    return pd.DataFrame(out)


def _notes(
    ev: _Evaluated,
    reranked: Sequence[Reranked],
    pipelines: Sequence[Pipeline],
    per_query: pd.DataFrame,
    file_types: Mapping[str, str] | None,
    o: DiagnosisOptions,
) -> list[str]:
    """What the diagnosis noticed: of each reranked run (missing queries, introduced documents, uncovered
    candidates, listwise), of the evaluation, of the query set, the qrels, the runs' lengths and the query
    types file."""
    qrels, firsts, evaluated, qids, work = ev.qrels, ev.firsts, ev.evaluated, ev.qids, ev.work
    complete, t = o.settings.complete, o.thresholds
    notes = []
    for p in pipelines:
        chk, dec = p.reorder_check, p.decomposition
        if dec.missing:
            notes.append(missing_note(p))
        if not chk["only_reorders"]:
            notes.append(
                f"{p.name} introduced {chk['introduced_documents']} documents that are not among "
                f"{p.first_stage}'s top-{p.depth} candidates (in {chk['queries_with_introduced_documents']} "
                f"queries; {chk['outside_first_stage']} not in {p.first_stage} at all, the rest from below rank "
                f"{p.depth} out of {p.first_stage}'s order): it is not a pure reranking of these candidates, so "
                "the ceiling does not bound it and its lost_in_reranking can be negative"
            )
        if dec.uncovered:
            notes.append(
                f"{p.name} lacks {dec.uncovered} of {p.first_stage}'s top-{p.depth} candidates; the depth "
                "curve places a top-k candidate it lacks after the ones it ranked, in first-stage order"
            )
        if p.listwise:
            notes.append(
                f"{p.name} is listwise: its depth curve (the top k reordered by its order of all "
                f"{p.depth}) approximates what reranking only the top k would give"
            )
    for name, v in evaluated.items():
        notes += [f"{name}: {n}" for n in v.notes]
    if not complete:
        dropped = set.union(*(set(v.values.index) for v in evaluated.values())) - set(qids)
        if dropped:
            notes.append(
                f"{len(dropped)} queries are not in every run and are left out of every number "
                "(--no-complete: the queries every run holds)"
            )
    qf = qrels.frame
    if len(qf) and int((qf[RELEVANCE] == 0).sum()) == 0 and t.max_unjudged < 1:
        notes.append(
            "the qrels list no non-relevant documents (label 0), only relevant ones: 'unjudged' then means "
            "'not judged relevant', judged@10 is a precision, and the unjudged-top label says little; "
            "pass --max-unjudged 1 to turn it off"
        )
    qset = set(qids)
    if complete:
        for name, run in {**firsts, **{r.name: r.run for r in reranked}}.items():
            absent = sorted(qset - set(run.frame[QUERY_ID].unique().tolist()))
            if absent:
                notes.append(
                    f"{len(absent)} judged queries are missing from {name} and score 0 (-c), e.g. {absent[:5]}"
                )
    longest_of = {
        name: longest_list(firsts[name], work=work) for name in dict.fromkeys(r.first_stage for r in reranked)
    }
    for r in reranked:
        longest = longest_of[r.first_stage]  # counted once per first stage, however many rerank it
        if longest < int(r.depth or 0):
            notes.append(
                f"{r.first_stage} retrieved at most {longest} documents per query, fewer than "
                f"{r.name}'s rerank depth {r.depth}"
            )
    types = per_query.drop_duplicates(QUERY_ID)["query_type"]
    if file_types and (types == "unlisted").any():
        notes.append(f"{int((types == 'unlisted').sum())} queries are not in the query-types file (type 'unlisted')")
    return notes


def missing_note(p: Pipeline) -> str:
    """What a reranked run that lacks queries of its first stage and the qrels is told (a note, a warning)."""
    missing = p.decomposition.missing
    n = int(p.decomposition.means()["queries"])
    return (
        f"{p.name} lacks {len(missing)} queries that {p.first_stage} and the qrels hold (e.g. "
        f"{', '.join(missing[:5])}): they are labelled missing, not reranker-hurt, and left out of its loss split "
        f"(over its other {n} queries); they score 0 in its means over every qrels query (-c)"
    )


def _settings_record(
    measure: str, recall_level: int, reranked: Sequence[Reranked], inputs: DiagnosisInputs, o: DiagnosisOptions
) -> dict:
    """The settings as summary.json states them: the measure and levels, each reranked run's depth and where it
    came from, the query types' source, what each measure means, the tests, the query set, the inputs' sources."""
    complete, file_types, rules = o.settings.complete, inputs.query_types, inputs.rules
    permutations, seed, correction = o.permutations, o.seed, o.correction
    primary = reranked[0]
    label = measure_label(measure)
    return {
        "measure": measure,
        "measure_label": label,
        "candidate_depth": primary.depth,
        "rerank_depths": {r.name: {"depth": r.depth, "from": r.depth_from} for r in reranked},
        "depth_rule": DEPTH_RULE,
        "repeats": {r.name: [run.path for run in r.runs] for r in reranked if r.repeats},
        "curve_depths": sorted({int(k) for k in o.curve_depths}),
        "recall_level": recall_level,
        "graded_level": 1,
        "complete": complete,
        "query_types": "file" if file_types else ("rules" if inputs.queries else "none (no query texts)"),
        "type_rules": [asdict(r) for r in rules] if not file_types else None,
        "measures": {
            label: f"{measure} as trec_eval computes it, at relevance level {recall_level} for binary measures",
            "ideal": f"{label} of the best ranking of every judged document (1 for nDCG when a relevant document "
            "exists, 0 otherwise)",
            "ceiling": f"{label} of the best order of the first stage's top-N candidates (judged grades, unjudged "
            "as 0; N the rerank depth)",
            "lost_in_candidates": "ideal - ceiling",
            "lost_in_reranking": "ceiling - reranked",
            "nDCG@10": "ndcg_cut_10, trec_eval linear gains over all grades, log2 discount, relevance level 1",
            "judged@10": "share of the top 10 (trec_eval order) with a qrels label >= 0",
            "R@N": f"recall_N at relevance level {recall_level} (trec_eval -l {recall_level})",
            "rbo": f"rank-biased overlap, extrapolated (RBO_ext, Webber, Moffat & Zobel 2010, eq. 32), p = {RBO_P}",
            f"kendall_tau_{TAU_DEPTH}": f"Kendall's tau-b over the union of both top {TAU_DEPTH} lists (ranks in "
            "the full lists; a document a list lacks ties at its bottom)",
        },
        "significance": {
            "measure": measure,
            "t_test": "paired Student t-test, two-sided",
            "permutation": f"paired randomization test, two-sided, {permutations} random sign flips (exact when "
            "2^n is not more), p = (1 + hits) / (1 + N)",
            "permutations": permutations,
            "seed": seed,
            "correction": correction,
            "families": {
                FAMILIES[0]: "per first stage, its reranked runs (as twostage compare FIRST R1 R2 ...)",
                FAMILIES[1]: "all pairs of reranked runs",
                FAMILIES[2]: "all pairs of first stages",
            },
        },
        "explore_depth": o.explore_depth,
        "query_set": "every qrels query (-c)" if complete else "the qrels queries every run holds",
        "sources": inputs.sources or {},
    }
