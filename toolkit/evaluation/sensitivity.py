"""nDCG@k of several runs under different gain and discount choices, and whether systems swap places."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from toolkit.data.records import Qrels, Run
from toolkit.errors import UnknownMeasureError
from toolkit.evaluation.evaluate import evaluate, prepare_judgments
from toolkit.measures.names import Discount, EvalSettings, Gain, Measure

#: (label, gain, discount): trec_eval's default first, then the common alternatives.
VARIANTS: tuple[tuple[str, str, str], ...] = (
    ("linear/log2 (trec_eval)", "linear", "log2"),
    ("exp/log2 (2^l-1)", "exp", "log2"),
    ("JK weights 0,1,4,10", "0:0,1:1,2:4,3:10", "log2"),
    ("JK weights 0,1,10,100", "0:0,1:1,2:10,3:100", "log2"),
    ("linear/JK discount b=2", "linear", "jk:2"),
)


@dataclass(frozen=True)
class Sensitivity:
    table: pd.DataFrame  # rows: runs, columns: variant labels, values: mean nDCG@k
    skipped: dict[str, str]  # variant -> why it could not be computed
    swaps: list[str]  # human-readable order changes relative to the first variant


def gain_sensitivity(
    qrels: Qrels, runs: dict[str, Run], cutoff: int = 10, base: EvalSettings | None = None
) -> Sensitivity:
    base = base or EvalSettings()
    measure = Measure("ndcg_cut", cutoff)
    qrels = prepare_judgments(qrels)  # one factorisation for every run and variant
    columns: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    for label, gain, discount in VARIANTS:
        settings = replace(base, gain=Gain.parse(gain), discount=Discount.parse(discount))
        try:
            columns[label] = {
                name: evaluate(qrels, run, [measure], settings).aggregate[measure.name] for name, run in runs.items()
            }
        except UnknownMeasureError as exc:  # a weight map that does not cover the qrels' labels
            skipped[label] = str(exc)
    table = pd.DataFrame(columns)
    swaps = []
    if len(runs) > 1 and len(table.columns):
        reference = table.columns[0]
        ref_order = list(table[reference].sort_values(ascending=False, kind="stable").index)
        for col in table.columns[1:]:
            order = list(table[col].sort_values(ascending=False, kind="stable").index)
            if order != ref_order:
                swaps.append(f"{col}: order {' > '.join(order)} differs from {reference}: {' > '.join(ref_order)}")
    return Sensitivity(table=table, skipped=skipped, swaps=swaps)
