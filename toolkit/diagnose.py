"""Two-stage diagnosis: per query, was quality lost in the candidates or in the reranking?

Inputs: qrels, a first-stage run (the candidates) and a reranked run. Every
number comes from ``evaluate.evaluate`` (trec_eval semantics):

- nDCG@10 and judged@10 of both stages use relevance level 1 (nDCG uses all
  grades as gains; judged means "has a label >= 0 in the qrels");
- R@depth (default R@100) of the first stage and the counts of relevant
  documents use ``recall_level`` (default 2, trec_eval ``-l 2``, the TREC DL
  convention); R@1000 is added when the first stage is deeper than 100;
- the query set is every qrels query (``-c``, a query missing from a run
  scores 0) unless ``complete=False``.

Diagnosis labels, decided in this order (thresholds are ``Thresholds``):

1. ``no-relevant``: the qrels hold no document at ``recall_level`` for the
   query, so recall is undefined and nothing was there to find;
2. ``ok``: reranked nDCG@10 >= ``ok_ndcg``;
3. ``unjudged-top``: more than ``max_unjudged`` of the reranked top 10
   positions hold unjudged documents (too much of the top is unjudged to tell
   whether it is good or bad; positions a short list leaves empty do not count);
4. ``candidates-missed``: first-stage R@depth < ``min_recall`` (relevant
   documents exist but the first stage never returned them: no reranker of
   these candidates can fix it);
5. ``reranker-misordered``: otherwise (the relevant documents are among the
   candidates but the reranker did not put them in the top 10).

Query types come from a ``qid<TAB>type`` file, or from ordered regular
expression rules over the lower-cased query text (first match wins; the
defaults are ``DEFAULT_TYPE_RULES``; a rules file replaces them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .errors import ConfigError, InputFormatError
from .evaluate import EvalResult, evaluate
from .measures import EvalSettings, parse_measures
from .ranking import order_run, top_k
from .records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from .trec_io import read_bytes

LABELS = ("ok", "reranker-misordered", "candidates-missed", "unjudged-top", "no-relevant")
LABEL_MEANING = {
    "ok": "reranked nDCG@10 at or above the ok threshold",
    "reranker-misordered": "relevant documents are among the candidates, but the reranker did not put them in the top 10",
    "candidates-missed": "relevant documents exist, but the first stage never returned them (low first-stage recall)",
    "unjudged-top": "too much of the reranked top 10 is unjudged to tell",
    "no-relevant": "the qrels hold no document at the recall relevance level for this query",
}
TOP = 10


# ------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class Thresholds:
    """Cut points of the diagnosis labels (see the module docstring for the order)."""

    ok_ndcg: float = 0.6
    max_unjudged: float = 0.3
    min_recall: float = 0.5

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"threshold {name} must be within [0, 1], not {value}")

    def describe(self) -> dict[str, str]:
        return {
            "ok": f"reranked nDCG@10 >= {self.ok_ndcg:g}",
            "unjudged-top": f"not ok and more than {self.max_unjudged:g} of the reranked top 10 unjudged",
            "candidates-missed": f"not ok, judged enough, and first-stage recall < {self.min_recall:g}",
            "reranker-misordered": "not ok, judged enough, and first-stage recall >= "
                                   f"{self.min_recall:g}",
            "no-relevant": "no document at the recall relevance level in the qrels",
        }


def label_query(num_rel: float, ndcg: float, unjudged: int, recall: float, t: Thresholds) -> str:
    """The diagnosis label of one query (order: no-relevant, ok, unjudged-top, candidates-missed, misordered).

    ``unjudged`` is the number of unjudged documents in the reranked top 10.
    """
    if num_rel <= 0:
        return "no-relevant"
    if ndcg >= t.ok_ndcg:
        return "ok"
    if unjudged / TOP > t.max_unjudged + 1e-12:
        return "unjudged-top"
    if recall < t.min_recall:
        return "candidates-missed"
    return "reranker-misordered"


# ------------------------------------------------------------- query types
@dataclass(frozen=True)
class TypeRule:
    """A query type and the regular expression that recognises it (searched in the lower-cased text)."""

    type: str
    pattern: str

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern)


#: The default rules, tried in order; the first match wins, no match is "other".
DEFAULT_TYPE_RULES: tuple[TypeRule, ...] = (
    # "how to ...", "how do i ...", "steps to ...": a procedure is asked for
    TypeRule("procedure", r"^(how (to|do (i|you|we)|can (i|you|we)|should (i|you))\b|steps? (to|for)\b|ways? to\b)"),
    # symptoms, causes, effects: "what causes ...", "symptoms of ...", "why does ..."
    TypeRule("symptoms/causes", r"\b(symptoms?|causes?|caused|causing|signs? of|side effects?|effects? of|"
                                r"why (do|does|did|is|are|was|were)|reasons? (for|why))\b"),
    # identifier-like: a code, number or model name carries the query (401k, i-95, ww1, 1099, cacm-0012)
    TypeRule("identifier-like", r"(\b[a-z]+[-_.]?\d+[a-z\d]*\b|\b\d+[-_.]?[a-z]+\w*\b|\b\d{3,}\b)"),
    # long-form question: starts with a question word, or eight words or more
    TypeRule("long-form question", r"(^(what|who|whom|whose|when|where|which|why|how|is|are|was|were|does|do|did|can|"
                                   r"could|should|will|would|define|definition|meaning)\b|^(\S+\s+){7}\S)"),
)
OTHER_TYPE = "other"


def load_type_rules(path: str | os.PathLike) -> tuple[TypeRule, ...]:
    """Rules from a file: ``type<TAB>regex`` per line (``#`` comments), or YAML ``[{type, pattern}]``.

    The rules replace the defaults; they are tried in file order and a query
    matching none is ``other``. Every pattern is compiled here, so a bad one
    fails with its line number.
    """
    path = str(path)
    text = read_bytes(path).decode("utf-8-sig")
    rules: list[TypeRule] = []
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputFormatError(path, None, f"invalid YAML: {exc}") from None
        if isinstance(doc, dict):
            doc = doc.get("rules")
        if not isinstance(doc, list):
            raise InputFormatError(path, None, "expected a list of {type: NAME, pattern: REGEX} (or {rules: [...]})")
        for i, item in enumerate(doc):
            if not isinstance(item, dict) or not {"type", "pattern"} <= set(item):
                raise InputFormatError(path, None, f"rule {i + 1}: needs 'type' and 'pattern'")
            rules.append(_rule(path, None, str(item["type"]), str(item["pattern"])))
    else:
        for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if "\t" not in line:
                raise InputFormatError(path, number, "expected 'type<TAB>regular expression'")
            name, pattern = line.split("\t", 1)
            rules.append(_rule(path, number, name.strip(), pattern.strip()))
    if not rules:
        raise InputFormatError(path, None, "no rules in the file")
    return tuple(rules)


def _rule(path: str, line: int | None, name: str, pattern: str) -> TypeRule:
    if not name or not pattern:
        raise InputFormatError(path, line, "a rule needs a type name and a pattern")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InputFormatError(path, line, f"bad regular expression {pattern!r}: {exc}") from None
    return TypeRule(name, pattern)


def classify_query(text: str, rules: Iterable[TypeRule] = DEFAULT_TYPE_RULES) -> str:
    """The first rule whose pattern is found in the lower-cased, whitespace-normalised text; else ``other``."""
    t = " ".join(str(text).lower().split())
    for rule in rules:
        if rule.compiled().search(t):
            return rule.type
    return OTHER_TYPE


def read_query_types(path: str | os.PathLike) -> dict[str, str]:
    """``qid<TAB>type`` per line (``#`` comments and blank lines skipped)."""
    path = str(path)
    text = read_bytes(path).decode("utf-8-sig").replace("\r\n", "\n")
    out: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise InputFormatError(path, number, "expected 'query_id<TAB>type'")
        qid = parts[0].strip()
        if qid in out:
            raise InputFormatError(path, number, f"query {qid!r} is typed twice")
        out[qid] = parts[1].strip()
    if not out:
        raise InputFormatError(path, None, "no query types in the file")
    return out


# -------------------------------------------------------------- diagnosis
@dataclass(frozen=True)
class Diagnosis:
    """Everything a report shows; ``per_query`` has one row per evaluated query."""

    name: str
    per_query: pd.DataFrame
    headline: list[dict]
    types: pd.DataFrame
    label_counts: dict[str, int]
    reorder_check: dict
    worst: list[dict]
    thresholds: Thresholds
    settings: dict
    provenance: dict
    notes: tuple[str, ...] = field(default_factory=tuple)

    def summary(self) -> dict:
        """The JSON-ready summary (summary.json)."""
        return {
            "name": self.name,
            "twostage": __version__,
            "headline": self.headline,
            "queries": int(len(self.per_query)),
            "labels": self.label_counts,
            "label_meaning": {k: LABEL_MEANING[k] for k in LABELS},
            "thresholds": asdict(self.thresholds),
            "threshold_rules": self.thresholds.describe(),
            "settings": self.settings,
            "query_types": _records(self.types),
            "reorder_check": self.reorder_check,
            "worst_queries": self.worst,
            "notes": list(self.notes),
            "provenance": self.provenance,
        }


def _records(frame: pd.DataFrame) -> list[dict]:
    out = []
    for row in frame.to_dict(orient="records"):
        out.append({k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()})
    return out


def _values(result: EvalResult, measure: str) -> pd.Series:
    pq = result.per_query
    s = pq.loc[pq["measure"] == measure].set_index("query_id")["value"]
    s.index = s.index.astype(str)
    return s.astype(float)


def _max_depth(run: Run) -> int:
    return int(run.frame.groupby(QUERY_ID).size().max()) if len(run.frame) else 0


def check_reordering(first: Run, reranked: Run, depth: int | None = None, examples: int = 10) -> dict:
    """Does ``reranked`` only reorder ``first``'s candidates? Flags documents the reranker introduced.

    A document counts as introduced when it is in the reranked list of a query
    but not among that query's first-stage candidates (the top ``depth`` in
    trec_eval order when ``depth`` is given, else the whole first-stage list).
    """
    cands = top_k(first.frame, depth) if depth else first.frame
    key_c = pd.MultiIndex.from_frame(cands[[QUERY_ID, DOC_ID]])
    rr = reranked.frame[[QUERY_ID, DOC_ID]]
    introduced_mask = ~pd.MultiIndex.from_frame(rr).isin(key_c)
    intro = rr.loc[introduced_mask]
    per_query = intro.groupby(QUERY_ID).size()
    first_q = set(first.frame[QUERY_ID].unique().tolist())
    rer_q = set(reranked.frame[QUERY_ID].unique().tolist())
    kept = pd.MultiIndex.from_frame(cands[[QUERY_ID, DOC_ID]]).isin(pd.MultiIndex.from_frame(rr))
    cand_in_rer = cands[QUERY_ID].isin(rer_q)
    return {
        "only_reorders": bool(len(intro) == 0),
        "candidate_depth": depth,
        "introduced_documents": int(len(intro)),
        "queries_with_introduced_documents": int(len(per_query)),
        "introduced_per_query": {str(k): int(v) for k, v in per_query.items()},
        "examples": [{"query_id": str(q), "doc_id": str(d)} for q, d in intro.head(examples).itertuples(index=False)],
        "queries_only_in_reranked": sorted(rer_q - first_q),
        "queries_only_in_first_stage": sorted(first_q - rer_q),
        "candidates_kept": int(kept[cand_in_rer.to_numpy()].sum()),
        "candidates_total": int(cand_in_rer.sum()),
    }


def diagnose(
    qrels: Qrels,
    first: Run,
    reranked: Run,
    *,
    name: str = "diagnosis",
    queries: Mapping[str, str] | None = None,
    texts: Callable[[Iterable[str]], dict[str, str]] | None = None,
    query_types: Mapping[str, str] | None = None,
    type_rules: Iterable[TypeRule] | None = None,
    thresholds: Thresholds | None = None,
    depth: int = 100,
    recall_level: int = 2,
    complete: bool = True,
    worst_n: int = 10,
    missed_shown: int = 5,
    snippet_chars: int = 220,
    sources: dict | None = None,
) -> Diagnosis:
    """Diagnose a two-stage run; pure (inputs are not modified).

    ``queries`` gives query texts (for query types and the worst-query
    listing); ``texts`` maps document ids to texts (snippets); both optional.
    ``query_types`` (qid -> type) wins over ``type_rules`` (default
    ``DEFAULT_TYPE_RULES``).
    """
    t = thresholds or Thresholds()
    queries = dict(queries or {})
    if depth < 1:
        raise ConfigError("candidate depth must be >= 1")
    if worst_n < 0:
        raise ConfigError("worst-N must be >= 0")
    rules = tuple(type_rules) if type_rules is not None else DEFAULT_TYPE_RULES
    first_depth = _max_depth(first)
    recall_cutoffs = [depth] + ([1000] if first_depth > 100 and depth != 1000 else [])
    graded = parse_measures(["ndcg_cut.10", "judged.10"])
    binary = parse_measures([f"recall.{','.join(str(c) for c in recall_cutoffs)}"])
    s_graded = EvalSettings(relevance_level=1, complete=complete)
    s_binary = EvalSettings(relevance_level=recall_level, complete=complete)
    ev = {
        ("first", "graded"): evaluate(qrels, first, graded, s_graded),
        ("reranked", "graded"): evaluate(qrels, reranked, graded, s_graded),
        ("first", "binary"): evaluate(qrels, first, binary, s_binary),
        ("reranked", "binary"): evaluate(qrels, reranked, binary, s_binary),
    }
    # nDCG' (Sakai): the same nDCG@10 on the condensed list (-J, unjudged documents removed); the gap to
    # plain nDCG@10 is what unjudged documents cost
    s_condensed = EvalSettings(relevance_level=1, complete=complete, judged_only=True)
    condensed = parse_measures(["ndcg_cut.10"])
    ev["first", "condensed"] = evaluate(qrels, first, condensed, s_condensed)
    ev["reranked", "condensed"] = evaluate(qrels, reranked, condensed, s_condensed)
    rname = f"recall_{depth}"
    cols = {
        "first_ndcg_10": _values(ev["first", "graded"], "ndcg_cut_10"),
        "reranked_ndcg_10": _values(ev["reranked", "graded"], "ndcg_cut_10"),
        "first_judged_10": _values(ev["first", "graded"], "judged_10"),
        "reranked_judged_10": _values(ev["reranked", "graded"], "judged_10"),
        "first_ndcg_10_condensed": _values(ev["first", "condensed"], "ndcg_cut_10"),
        "reranked_ndcg_10_condensed": _values(ev["reranked", "condensed"], "ndcg_cut_10"),
        f"first_recall_{depth}": _values(ev["first", "binary"], rname),
        f"reranked_recall_{depth}": _values(ev["reranked", "binary"], rname),
    }
    if 1000 in recall_cutoffs and depth != 1000:
        cols["first_recall_1000"] = _values(ev["first", "binary"], "recall_1000")
    table = pd.DataFrame(cols)
    table.index.name = QUERY_ID
    qids = sorted(table.index.tolist())
    table = table.loc[qids]

    # relevant documents (at recall_level) found where
    qf = qrels.frame
    rel = qf.loc[qf[RELEVANCE] >= recall_level, [QUERY_ID, DOC_ID]]
    num_rel = rel.groupby(QUERY_ID).size()
    cands = top_k(first.frame, depth)
    top_rr = top_k(reranked.frame, TOP)
    rel_key = pd.MultiIndex.from_frame(rel)
    in_cands = rel.loc[rel_key.isin(pd.MultiIndex.from_frame(cands[[QUERY_ID, DOC_ID]]))].groupby(QUERY_ID).size()
    in_top = rel.loc[rel_key.isin(pd.MultiIndex.from_frame(top_rr[[QUERY_ID, DOC_ID]]))].groupby(QUERY_ID).size()
    judged_key = pd.MultiIndex.from_frame(qf.loc[qf[RELEVANCE] >= 0, [QUERY_ID, DOC_ID]])
    unjudged_top = top_rr.loc[~pd.MultiIndex.from_frame(top_rr[[QUERY_ID, DOC_ID]]).isin(judged_key)]
    unjudged_top = unjudged_top.groupby(QUERY_ID).size()
    check = check_reordering(first, reranked, depth)
    table["num_rel"] = num_rel.reindex(qids, fill_value=0).astype(int).to_numpy()
    table["rel_in_candidates"] = in_cands.reindex(qids, fill_value=0).astype(int).to_numpy()
    table["rel_missing_from_candidates"] = table["num_rel"] - table["rel_in_candidates"]
    table["rel_in_top_10"] = in_top.reindex(qids, fill_value=0).astype(int).to_numpy()
    table["unjudged_in_top_10"] = unjudged_top.reindex(qids, fill_value=0).astype(int).to_numpy()
    table["introduced_docs"] = [check["introduced_per_query"].get(q, 0) for q in qids]
    table["delta_ndcg_10"] = table["reranked_ndcg_10"] - table["first_ndcg_10"]
    table["diagnosis"] = [
        label_query(n, nd, j, r, t)
        for n, nd, j, r in zip(table["num_rel"], table["reranked_ndcg_10"], table["unjudged_in_top_10"],
                               table[f"first_recall_{depth}"])
    ]
    file_types = dict(query_types or {})
    types, type_source = [], []
    for q in qids:
        if q in file_types:
            types.append(file_types[q])
            type_source.append("file")
        elif file_types:
            types.append("unlisted")
            type_source.append("file")
        elif q in queries:
            types.append(classify_query(queries[q], rules))
            type_source.append("rules")
        else:
            types.append("unknown")
            type_source.append("no query text")
    table["query_type"] = types
    table.insert(0, "query", [queries.get(q, "") for q in qids])
    table = table.reset_index()
    order = ["query_id", "query", "query_type", "diagnosis", f"first_recall_{depth}"]
    order += [c for c in ("first_recall_1000",) if c in table]
    order += ["first_ndcg_10", "reranked_ndcg_10", "delta_ndcg_10", "first_ndcg_10_condensed",
              "reranked_ndcg_10_condensed", "first_judged_10", "reranked_judged_10",
              f"reranked_recall_{depth}", "num_rel", "rel_in_candidates", "rel_missing_from_candidates",
              "rel_in_top_10", "unjudged_in_top_10", "introduced_docs"]
    table = table[order]

    headline = _headline(ev, depth, recall_cutoffs, recall_level, len(table))
    types_table = type_summary(table, depth)
    counts = {lab: int((table["diagnosis"] == lab).sum()) for lab in LABELS}
    worst = worst_queries(table, qrels, first, reranked, depth=depth, n=worst_n, missed_shown=missed_shown,
                          texts=texts, snippet_chars=snippet_chars)

    notes = []
    for key, result in ev.items():
        for note in result.notes:
            notes.append(f"{key[0]} stage: {note}")
    notes = list(dict.fromkeys(notes))
    if not check["only_reorders"]:
        notes.insert(0, f"the reranked run introduced {check['introduced_documents']} documents that are not among "
                        f"the first stage's top-{depth} candidates (in {check['queries_with_introduced_documents']} "
                        "queries): it is not a pure reranking of these candidates")
    if len(qf) and int((qf[RELEVANCE] == 0).sum()) == 0 and t.max_unjudged < 1:
        notes.append("the qrels list no non-relevant documents (label 0), only relevant ones: 'unjudged' then means "
                     "'not judged relevant', judged@10 is a precision, and the unjudged-top label says little; "
                     "pass --max-unjudged 1 to turn it off")
    qrels_q = set(qids)
    for what, run in (("first-stage", first), ("reranked", reranked)):
        absent = sorted(qrels_q - set(run.frame[QUERY_ID].unique().tolist()))
        if absent and complete:
            notes.append(f"{len(absent)} judged queries are missing from the {what} run and score 0 (-c), "
                         f"e.g. {absent[:5]}")
    if first_depth < depth:
        notes.append(f"the first stage retrieved at most {first_depth} documents per query, fewer than the "
                     f"candidate depth {depth}")
    if file_types and "unlisted" in types:
        notes.append(f"{types.count('unlisted')} queries are not in the query-types file (type 'unlisted')")
    settings = {
        "candidate_depth": depth,
        "recall_level": recall_level,
        "graded_level": 1,
        "complete": complete,
        "worst_n": worst_n,
        "query_types": "file" if file_types else ("rules" if queries else "none (no query texts)"),
        "type_rules": [asdict(r) for r in rules] if not file_types else None,
        "measures": {
            "nDCG@10": "ndcg_cut_10, trec_eval linear gains over all grades, log2 discount, relevance level 1",
            "judged@10": "share of the top 10 (trec_eval order) with a qrels label >= 0",
            f"R@{depth}": f"recall_{depth} at relevance level {recall_level} (trec_eval -l {recall_level})",
        },
        "query_set": "every qrels query (-c)" if complete else "queries in both run and qrels",
        "sources": sources or {},
    }
    provenance = {
        "first_stage": {"graded": ev["first", "graded"].provenance, "binary": ev["first", "binary"].provenance},
        "reranked": {"graded": ev["reranked", "graded"].provenance, "binary": ev["reranked", "binary"].provenance},
    }
    return Diagnosis(name=name, per_query=table, headline=headline, types=types_table, label_counts=counts,
                     reorder_check=check, worst=worst, thresholds=t, settings=settings, provenance=provenance,
                     notes=tuple(notes))


def _headline(ev: dict, depth: int, recall_cutoffs: list[int], level: int, n: int) -> list[dict]:
    def agg(stage: str, kind: str, measure: str) -> float:
        return float(ev[stage, kind].aggregate[measure])

    rows = [{"measure": f"R@{depth} (-l {level})", "key": f"recall_{depth}",
             "first_stage": agg("first", "binary", f"recall_{depth}"),
             "reranked": agg("reranked", "binary", f"recall_{depth}")}]
    if 1000 in recall_cutoffs and depth != 1000:
        rows.append({"measure": f"R@1000 (-l {level})", "key": "recall_1000",
                     "first_stage": agg("first", "binary", "recall_1000"), "reranked": None})
    rows += [
        {"measure": "nDCG@10", "key": "ndcg_cut_10", "first_stage": agg("first", "graded", "ndcg_cut_10"),
         "reranked": agg("reranked", "graded", "ndcg_cut_10")},
        {"measure": "nDCG'@10 (-J, condensed)", "key": "ndcg_cut_10_condensed",
         "first_stage": agg("first", "condensed", "ndcg_cut_10"),
         "reranked": agg("reranked", "condensed", "ndcg_cut_10")},
        {"measure": "judged@10", "key": "judged_10", "first_stage": agg("first", "graded", "judged_10"),
         "reranked": agg("reranked", "graded", "judged_10")},
        {"measure": "queries", "key": "num_q", "first_stage": n, "reranked": n},
    ]
    return rows


def type_summary(table: pd.DataFrame, depth: int = 100) -> pd.DataFrame:
    """Per query type: count, mean/median reranked nDCG@10 and first-stage R@depth, label counts."""
    rcol = f"first_recall_{depth}"
    rows = []
    for qtype, g in table.groupby("query_type", sort=True):
        row = {
            "query_type": qtype,
            "queries": int(len(g)),
            "mean_ndcg_10": float(g["reranked_ndcg_10"].mean()),
            "median_ndcg_10": float(g["reranked_ndcg_10"].median()),
            "mean_first_ndcg_10": float(g["first_ndcg_10"].mean()),
            f"mean_recall_{depth}": float(g[rcol].mean()),
            f"median_recall_{depth}": float(g[rcol].median()),
        }
        for lab in LABELS:
            row[lab] = int((g["diagnosis"] == lab).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _snippet(text: str | None, chars: int) -> str | None:
    if not text:
        return None
    t = " ".join(str(text).split())
    return t if len(t) <= chars else t[: chars - 1].rstrip() + "…"


def worst_queries(
    table: pd.DataFrame,
    qrels: Qrels,
    first: Run,
    reranked: Run,
    *,
    depth: int,
    n: int,
    missed_shown: int = 5,
    texts: Callable[[Iterable[str]], dict[str, str]] | None = None,
    snippet_chars: int = 220,
) -> list[dict]:
    """The ``n`` lowest reranked nDCG@10 queries (ties by query id): top 10 next to the best judged documents missed."""
    if n == 0 or table.empty:
        return []
    worst = table.sort_values(["reranked_ndcg_10", "query_id"], kind="stable").head(n)
    wanted = set(worst["query_id"].tolist())
    qf = qrels.frame.loc[qrels.frame[QUERY_ID].isin(wanted)]
    grades = {(q, d): int(r) for q, d, r in qf[[QUERY_ID, DOC_ID, RELEVANCE]].itertuples(index=False)}
    rr = order_run(reranked.frame.loc[reranked.frame[QUERY_ID].isin(wanted)])
    fs = order_run(first.frame.loc[first.frame[QUERY_ID].isin(wanted)])
    rr_rank = {(q, d): int(r) for q, d, r in rr[[QUERY_ID, DOC_ID, "rank"]].itertuples(index=False)}
    fs_rank = {(q, d): int(r) for q, d, r in fs[[QUERY_ID, DOC_ID, "rank"]].itertuples(index=False)}
    entries = []
    need_text: set[str] = set()
    for row in worst.itertuples(index=False):
        q = row.query_id
        top = rr.loc[(rr[QUERY_ID] == q) & (rr["rank"] <= TOP)]
        top_docs = top[DOC_ID].tolist()
        judged = qf.loc[(qf[QUERY_ID] == q) & (qf[RELEVANCE] > 0) & ~qf[DOC_ID].isin(top_docs)]
        judged = judged.assign(_fs=[fs_rank.get((q, d), 10**9) for d in judged[DOC_ID]])
        judged = judged.sort_values([RELEVANCE, "_fs", DOC_ID], ascending=[False, True, True]).head(missed_shown)
        top_list = [{"rank": int(r), "doc_id": d, "grade": grades.get((q, d))} for d, r in zip(top_docs, top["rank"])]
        missed = []
        for d, g in zip(judged[DOC_ID], judged[RELEVANCE]):
            f_rank = fs_rank.get((q, d))
            in_c = f_rank is not None and f_rank <= depth
            missed.append({"doc_id": d, "grade": int(g), "first_stage_rank": f_rank if in_c else None,
                           "reranked_rank": rr_rank.get((q, d)),
                           "where": (f"candidate (first stage #{f_rank}, reranked #{rr_rank.get((q, d), '-')})"
                                     if in_c else "not in the candidates")})
        need_text.update(x["doc_id"] for x in top_list + missed)
        entries.append({
            "query_id": q, "query": row.query, "query_type": row.query_type, "diagnosis": row.diagnosis,
            "reranked_ndcg_10": float(row.reranked_ndcg_10), "first_ndcg_10": float(row.first_ndcg_10),
            f"first_recall_{depth}": float(getattr(row, f"first_recall_{depth}")),
            "reranked_judged_10": float(row.reranked_judged_10),
            "top_10": top_list, "best_missed": missed,
        })
    found = texts(sorted(need_text)) if texts is not None else {}
    for e in entries:
        for item in e["top_10"] + e["best_missed"]:
            item["snippet"] = _snippet(found.get(item["doc_id"]), snippet_chars)
    return entries


def texts_from_sources(candidates: Iterable[str | os.PathLike] = (), corpus: str | None = None,
                       index: str | None = None) -> tuple[dict[str, str], Callable | None, list[dict]]:
    """Query texts and a document-text lookup from candidates JSONs, a JSONL corpus or a Lucene index."""
    from .rerank import lucene_text_source, read_candidates, read_jsonl_corpus

    queries: dict[str, str] = {}
    lookups = []
    described = []
    for path in candidates:
        c = read_candidates(path)
        queries.update(c.topics.as_dict())
        src = c.text_source()
        lookups.append(src.lookup)
        described.append(src.describe())
    if corpus:
        src = read_jsonl_corpus(corpus)
        lookups.append(src.lookup)
        described.append(src.describe())
    if index:
        src = lucene_text_source(index)
        lookups.append(src.lookup)
        described.append(src.describe())
    if not lookups:
        return queries, None, described

    def lookup(ids: Iterable[str]) -> dict[str, str]:
        ids = list(ids)
        out: dict[str, str] = {}
        for f in lookups:
            rest = [d for d in ids if d not in out]
            if not rest:
                break
            out.update(f(rest))
        return out

    return queries, lookup, described


def sources_from_meta(meta: dict | None) -> dict:
    """Where the reranked run's sidecar says its query and document texts came from."""
    if not meta:
        return {}
    def existing(*paths: str | None) -> str | None:
        return next((p for p in paths if p and Path(p).exists()), None)

    texts = meta.get("texts") or {}
    out = {}
    path = existing(texts.get("path"), texts.get("resolved"))
    kind = {"candidates-json": "candidates", "jsonl": "corpus", "lucene": "index"}.get(texts.get("kind", ""))
    if path and kind:
        out[kind] = path
    topics = existing(meta.get("topics"), meta.get("topics_resolved"))
    name = meta.get("topics")
    if topics is None and isinstance(name, str) and name and "/" not in name and not name.endswith(".json"):
        topics = name  # a collection name (cacm)
    if topics and topics != out.get("candidates"):
        out["topics"] = topics
    return out


def write_per_query_csv(diag: Diagnosis, path: str | os.PathLike) -> None:
    from .trec_io import atomic_write

    with atomic_write(path) as fh:
        diag.per_query.to_csv(fh, index=False, lineterminator="\n")
