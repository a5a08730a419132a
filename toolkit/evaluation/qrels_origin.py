"""Qrels from several sources, with their origin: human labels, an LLM judge's labels, and a policy.

- ``human``: the human labels only (the judge's are read, counted and left out);
- ``fill``: the human labels, and the judge's label for each document of a human-judged query that the humans
  did not judge (no label, or a label below 0, trec_eval's "pooled but unjudged") — the holes filled;
  the judge's labels on queries no human judged are left out and counted;
- ``judge``: the judge's labels only.

The merged ``Qrels`` carries a ``QrelsOrigin``: the policy, the counts of labels of each origin, the sources
(path, sha256), and the origin of every label; ``evaluate`` puts the first three in the provenance of every
number, with the judged@k of each origin apart (``judged_by_origin``). The merged qrels' sha256 is that of its
content and policy, so results under different policies are never compared as alike.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION, order_run
from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, QrelsOrigin, Run
from toolkit.errors import ConfigError

QRELS_POLICIES = ("human", "fill", "judge")
ORIGIN = "origin"


def merge_qrels(human: Qrels, judge: Qrels, policy: str = "fill", judge_meta: dict | None = None) -> Qrels:
    """Human and judge labels merged under ``policy`` (module docstring); ``judge_meta`` (which judge, its
    calibration, from the judge's sidecar) is kept with the judge's source."""
    if policy not in QRELS_POLICIES:
        raise ConfigError(f"qrels policy must be one of {', '.join(QRELS_POLICIES)}, not {policy!r}")
    h = human.frame[[QUERY_ID, DOC_ID, RELEVANCE]]
    j = judge.frame.loc[judge.frame[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]]
    counts = {"human_labels_read": int((h[RELEVANCE] >= 0).sum()), "judge_labels_read": len(j)}
    if policy == "human":
        merged = h.assign(**{ORIGIN: "human"})
    elif policy == "judge":
        merged = j.assign(**{ORIGIN: "judge"})
    else:
        judged = h.loc[h[RELEVANCE] >= 0, [QUERY_ID, DOC_ID]].assign(_judged=True)
        cand = j.merge(judged, on=[QUERY_ID, DOC_ID], how="left")
        hole = cand["_judged"].isna().to_numpy()
        on_human_query = cand[QUERY_ID].isin(set(h[QUERY_ID])).to_numpy()
        fill = cand.loc[hole & on_human_query, [QUERY_ID, DOC_ID, RELEVANCE]]
        counts["judge_labels_on_judged_documents"] = int((~hole).sum())
        counts["judge_labels_on_queries_without_human_labels"] = int((hole & ~on_human_query).sum())
        # a human "-1" (pooled, unjudged) that the judge labels is replaced by the judge's label
        keep = h.merge(fill[[QUERY_ID, DOC_ID]].assign(_filled=True), on=[QUERY_ID, DOC_ID], how="left")
        kept = h[keep["_filled"].isna().to_numpy()]
        merged = pd.concat([kept.assign(**{ORIGIN: "human"}), fill.assign(**{ORIGIN: "judge"})], ignore_index=True)
    merged = merged.reset_index(drop=True)
    used = merged[merged[RELEVANCE] >= 0]
    counts["human_labels_used"] = int((used[ORIGIN] == "human").sum())
    counts["judge_labels_used"] = int((used[ORIGIN] == "judge").sum())
    frame = merged[[QUERY_ID, DOC_ID, RELEVANCE]].astype({RELEVANCE: "int64"}).reset_index(drop=True)
    digest = hashlib.sha256()
    digest.update(f"policy={policy}\n".encode())
    for q, d, r, o in merged.sort_values([QUERY_ID, DOC_ID]).itertuples(index=False):
        digest.update(f"{q} {d} {r} {o}\n".encode())
    origin = QrelsOrigin(
        policy=policy,
        labels=used[[QUERY_ID, DOC_ID, ORIGIN]].reset_index(drop=True),
        sources={
            "human": {"path": human.path, "sha256": human.sha256},
            "judge": {"path": judge.path, "sha256": judge.sha256, **(judge_meta or {})},
        },
        counts=counts,
    )
    return Qrels(
        frame=frame,
        path=f"{human.path} + {judge.path} (policy {policy})",
        sha256=digest.hexdigest(),
        origin=origin,
    )


def judged_by_origin(run: Run, origin: QrelsOrigin, depths: tuple[int, ...] = (10,)) -> dict:
    """{"judged_K": {"human": x, "judge": y}}: the share of each query's top K documents (trec_eval's order; of
    min(K, retrieved) when fewer were retrieved) that carry a human / a judge label (>= 0) in the merged qrels,
    averaged over the run's queries that the merged qrels hold: twostage's judged@k, each origin apart (the two
    add up to judged@k when every qrels query is in the run)."""
    labels = origin.labels
    queries = set(labels[QUERY_ID])
    ordered = order_run(run.frame[run.frame[QUERY_ID].isin(queries)], DEFAULT_SCORE_PRECISION)
    if ordered.empty:
        return {f"judged_{k}": {"human": 0.0, "judge": 0.0} for k in depths}
    tagged = ordered.merge(labels, on=[QUERY_ID, DOC_ID], how="left")
    retrieved = tagged.groupby(QUERY_ID, sort=True).size()
    out = {}
    for k in depths:
        top = tagged[tagged["rank"] <= k]
        denominator = np.minimum(retrieved.to_numpy(), k)
        out[f"judged_{k}"] = {
            who: float(
                np.mean(
                    (top[ORIGIN] == who).groupby(top[QUERY_ID], sort=True).sum().reindex(retrieved.index).to_numpy()
                    / denominator
                )
            )
            for who in ("human", "judge")
        }
    return out
