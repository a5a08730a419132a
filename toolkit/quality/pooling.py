"""Leave-one-run-out pool test (Zobel 1998): would a run have scored as well had it not contributed to the pool?

The pool of depth K is, per query, the union of every run's top K documents (trec_eval's order: score
descending, ties by document id descending). A run's *unique* documents are those in its own top K and in no
other run's. For each run, the judgments of its unique documents are removed from the qrels (the rows are
deleted, as if the document had never been pooled: it then counts as non-relevant, as trec_eval counts any
unjudged document), the run is evaluated again, and its score and rank are compared with those under the full
qrels. The other runs keep their full-judgment scores: the rank is the run's place among them (1 = best;
1 + the number of other runs scoring strictly higher). A large drop says that a system unlike the pooled ones
(a new kind of system) would be penalised by a pool it did not contribute to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pandas as pd

from toolkit.data.records import DOC_ID, QUERY_ID, RELEVANCE, Qrels, Run
from toolkit.errors import ConfigError

COLUMNS = (
    "score",
    "score_without",
    "change",
    "rank",
    "rank_without",
    "rank_change",
    "unique",
    "unique_judged",
    "unique_relevant",
)


@dataclass(frozen=True)
class PoolTest:
    """``table``: one row per run (index ``run``, in the order given): score (full qrels), score_without (its
    unique documents' judgments removed), change = score_without - score, rank and rank_without (1 = best
    among the runs), rank_change = rank_without - rank (positive: it drops), unique (documents only it
    pooled), unique_judged (of them, judged in the qrels: the judgments removed), unique_relevant (of them,
    at or above the relevance level)."""

    measure: str
    depth: int
    table: pd.DataFrame
    relevance_level: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {
            "measure": self.measure,
            "pool_depth": self.depth,
            "relevance_level": self.relevance_level,
            "runs": {
                str(name): {
                    c: (int(v) if c not in ("score", "score_without", "change") else float(v)) for c, v in row.items()
                }
                for name, row in self.table.iterrows()
            },
        }

    def to_text(self) -> str:
        t = self.table
        width = max([len("run"), *(len(str(n)) for n in t.index)])
        lines = [
            f"# leave-one-run-out pool test (Zobel 1998): {self.measure}, pool depth {self.depth}, "
            f"{len(t)} runs; a run's unique documents' judgments removed, the others keep theirs",
            f"{'run':<{width}}  {'score':>7}  {'without':>7}  {'change':>8}  {'rank':>4}  {'without':>7}  "
            f"{'unique':>6}  {'judged':>6}  {'relevant':>8}",
        ]
        for name, r in t.iterrows():
            lines.append(
                f"{name!s:<{width}}  {r['score']:7.4f}  {r['score_without']:7.4f}  {r['change']:+8.4f}  "
                f"{int(r['rank']):>4}  {int(r['rank_without']):>7}  {int(r['unique']):>6}  "
                f"{int(r['unique_judged']):>6}  {int(r['unique_relevant']):>8}"
            )
        return "\n".join(lines) + "\n"


def pooled(run: Run, depth: int, score_precision: str) -> set[tuple[str, str]]:
    """The (query, document) pairs of ``run``'s top ``depth`` in trec_eval's order."""
    from toolkit.data.ranking import top_k

    top = top_k(run.frame, depth, score_precision)  # type: ignore[arg-type]
    return set(zip(top[QUERY_ID], top[DOC_ID]))


def _rank(score: float, others: list[float]) -> int:
    return 1 + sum(1 for o in others if o > score)


def pool_test(qrels: Qrels, runs: Mapping[str, Run], measure, depth: int, settings=None) -> PoolTest:
    """The leave-one-run-out pool test of ``runs`` (``{name: Run}``, at least two) on one parsed numeric
    ``measure`` with a pool of ``depth`` (see the module docstring)."""
    from toolkit.evaluation.evaluate import evaluate
    from toolkit.measures.names import EvalSettings

    settings = settings or EvalSettings()
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError(f"the pool depth must be an integer >= 1, got {depth!r}")
    if len(runs) < 2:
        raise ConfigError(f"a pool test needs at least two runs (the pool of the others), got {len(runs)}")
    if measure.spec.value_type == "string":
        raise ConfigError(f"give one numeric measure, not {measure.name!r}")
    names = list(runs)
    pools = {n: pooled(runs[n], depth, settings.score_precision) for n in names}
    full = {n: float(evaluate(qrels, runs[n], [measure], settings, warn=False).aggregate[measure.name]) for n in names}
    frame = qrels.frame
    keys = pd.MultiIndex.from_arrays([frame[QUERY_ID], frame[DOC_ID]])
    level = settings.relevance_level
    rows = []
    for n in names:
        others: set[tuple[str, str]] = set().union(*(pools[o] for o in names if o != n))
        unique = pools[n] - others
        drop = keys.isin(list(unique)) if unique else pd.Series(False, index=frame.index).to_numpy()
        removed = frame[drop]
        reduced = replace(qrels, frame=frame[~drop].reset_index(drop=True), sha256="")
        without = float(evaluate(reduced, runs[n], [measure], settings, warn=False).aggregate[measure.name])
        rest = [full[o] for o in names if o != n]
        rank, rank_without = _rank(full[n], rest), _rank(without, rest)
        rows.append(
            (
                n,
                full[n],
                without,
                without - full[n],
                rank,
                rank_without,
                rank_without - rank,
                len(unique),
                int((removed[RELEVANCE] >= 0).sum()),
                int((removed[RELEVANCE] >= level).sum()),
            )
        )
    table = pd.DataFrame(rows, columns=["run", *COLUMNS]).set_index("run")
    return PoolTest(measure.name, depth, table, level)


__all__ = ["COLUMNS", "PoolTest", "pool_test", "pooled"]
