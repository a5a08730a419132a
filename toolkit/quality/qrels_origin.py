"""Qrels from several sources, with their origin: human labels, an LLM judge's labels, and a policy.

- ``human``: the human labels only (the judge's are read, counted and left out);
- ``fill``: the human labels, and the judge's label for each document of a human-judged query that the humans
  did not judge (no label, or a label below 0, trec_eval's "pooled but unjudged") — the holes filled;
  the judge's labels on queries no human judged are left out and counted;
- ``judge``: the judge's labels only.

The merged ``Qrels`` carries a ``QrelsOrigin``: the policy, the counts of labels of each origin, the sources
(path, sha256), and the origin of every label; ``evaluate`` puts the first three in the provenance of every
number, with the judged@k of each origin apart (``toolkit.evaluation.checks.judged_by_origin``). The merged
qrels' sha256 is that of its content and policy, so results under different policies are never compared as alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import pandas as pd

from toolkit.data.records import DOC_ID, ORIGIN, QUERY_ID, RELEVANCE, Qrels, QrelsOrigin
from toolkit.errors import ConfigError

QRELS_POLICIES = ("human", "fill", "judge")

#: Cohen's kappa of a judge against the humans below which its labels are called near chance (Landis and Koch's
#: "fair" ends at 0.4); ``twostage judge --kappa-threshold`` records another in the calibration
DEFAULT_KAPPA_THRESHOLD = 0.4


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


def near_chance(calibration: Mapping | None, where: str = "") -> str | None:
    """The warning for labels of a judge whose recorded calibration (its sidecar's ``calibration``) has a kappa
    below its ``kappa_threshold`` (``DEFAULT_KAPPA_THRESHOLD`` when none is recorded), or no kappa at all; None
    for a judge above it, or without a calibration."""
    if not isinstance(calibration, Mapping) or not calibration:
        return None
    kappa, threshold = calibration.get("kappa"), calibration.get("kappa_threshold", DEFAULT_KAPPA_THRESHOLD)
    n = calibration.get("documents_both")
    if kappa is not None and threshold is not None and float(kappa) >= float(threshold):
        return None
    told = "no kappa" if kappa is None else f"kappa {float(kappa):.3f}"
    return (
        f"the judge{' of ' + where if where else ''} is near chance: its calibration has {told} on {n} "
        f"human-judged documents, below the threshold {threshold}; its labels may be noise, not relevance"
    )


def overlay_labels(human: pd.DataFrame, judge: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The human qrels with the judge's label on every document of a human-judged query that the judge labelled
    (replacing the human label, or filling a hole: no label, or one below 0), and the counts of what each label
    is: ``human_labels`` kept, ``judge_labels_replacing_human``, ``judge_labels_filling_holes`` and
    ``judge_labels_left_out`` (on queries no human judged). What a calibration ranks the systems under, beside
    the human qrels themselves."""
    h = human[[QUERY_ID, DOC_ID, RELEVANCE]]
    j = judge.loc[judge[RELEVANCE] >= 0, [QUERY_ID, DOC_ID, RELEVANCE]]
    on_human_query = j[QUERY_ID].isin(set(h[QUERY_ID]))
    used = j[on_human_query]
    judged = h.loc[h[RELEVANCE] >= 0, [QUERY_ID, DOC_ID]].assign(_judged=True)
    tagged = used.merge(judged, on=[QUERY_ID, DOC_ID], how="left")
    replacing = int(tagged["_judged"].notna().sum())
    keep = h.merge(used[[QUERY_ID, DOC_ID]].assign(_over=True), on=[QUERY_ID, DOC_ID], how="left")
    kept = h[keep["_over"].isna().to_numpy()]
    frame = pd.concat([kept, used], ignore_index=True).astype({RELEVANCE: "int64"})
    counts = {
        "human_labels": int((kept[RELEVANCE] >= 0).sum()),
        "judge_labels_replacing_human": replacing,
        "judge_labels_filling_holes": len(used) - replacing,
        "judge_labels_left_out": int((~on_human_query).sum()),
    }
    return frame, counts
