"""Per-query labels of the diagnosis: what each label means, the order they are decided in (``DECISION_ORDER``)
and the thresholds (``Thresholds``, ``label_query``). The rules are stated in ``diagnosis.compute``'s docstring."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType

from toolkit.errors import ConfigError
from toolkit.measures.names import parse_measures

LABELS = ("ok", "reranker-hurt", "reranker-misordered", "candidates-missed", "unjudged-top", "no-relevant", "missing")
LABEL_MEANING = MappingProxyType(
    {
        "ok": "the reranked run is good enough (at or above the ok threshold)",
        "reranker-hurt": "the reranked run scores below the first stage: the reranker made this query worse",
        "reranker-misordered": "a better order of the same candidates would be ok: the reranking lost it",
        "candidates-missed": "not even the best order of the first stage's candidates would be ok: the candidates "
        "hold it back",
        "unjudged-top": "too much of the reranked top 10 is unjudged to tell",
        "no-relevant": "the qrels hold nothing the measure rewards for this query",
        "missing": "the reranked run lacks this query (the first stage and the qrels hold it): no reranking to judge; "
        "left out of the loss split",
    }
)
#: The order labels are decided in (``label_query``): a query the reranked run lacks first, then relative to the
#: first stage before the absolute ones.
DECISION_ORDER = (
    "missing",
    "no-relevant",
    "reranker-hurt",
    "ok",
    "unjudged-top",
    "candidates-missed",
    "reranker-misordered",
)
#: A query type with fewer queries than this is marked as too small to read anything into.
MIN_TYPE_QUERIES = 5
#: The top positions the unjudged-top label looks at.
TOP = 10


def measure_label(name: str) -> str:
    """A measure's display label from its family's declaration (``ndcg_cut_10`` -> nDCG@10, ``map`` -> MAP)."""
    return parse_measures([name], 10)[0].label


# ------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class Thresholds:
    """Cut points of the diagnosis labels (see the module docstring for the order).

    ``hurt`` is a share of the ideal, as ``ok`` is: 0.05 of nDCG@10 is about one relevant document moving a
    few ranks, so a reordering among near-equal documents is not called harm.
    """

    ok: float = 0.6
    max_unjudged: float = 0.3
    hurt: float = 0.05

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"threshold {name} must be within [0, 1], not {value}")

    def describe(self, measure: str = "nDCG@10") -> dict[str, str]:
        ok = f"{self.ok:g} x ideal"
        return {
            "ok": f"not reranker-hurt, and reranked {measure} >= {ok}",
            "reranker-hurt": f"reranked {measure} < first stage {measure} - {self.hurt:g} x ideal (decided before "
            "every label but no-relevant)",
            "reranker-misordered": f"not ok, judged enough, and ceiling >= {ok} (a better order of the same "
            "candidates would be ok)",
            "candidates-missed": f"not ok, judged enough, and ceiling < {ok} (no order of the candidates is ok)",
            "unjudged-top": f"not ok and more than {self.max_unjudged:g} of the reranked top 10 unjudged",
            "no-relevant": f"ideal {measure} = 0 (nothing in the qrels that the measure rewards)",
            "missing": "the reranked run lacks the query, which its first stage and the qrels hold (decided first; "
            "out of the loss split)",
        }


def label_query(
    ideal: float,
    reranked: float,
    ceiling: float,
    unjudged: int,
    t: Thresholds,
    *,
    first_stage: float,
    missing: bool = False,
) -> str:
    """The label of one query (order: missing, no-relevant, reranker-hurt, ok, unjudged-top, candidates-missed,
    reranker-misordered).

    ``unjudged`` is the number of unjudged documents in the reranked top 10; ``first_stage`` the first stage's
    value of the measure; ``missing``: the reranked run lacks the query (its value, 0, says nothing of the
    reranker).
    """
    eps = 1e-12  # values computed in another order must not flip a label at the threshold
    if missing:
        return "missing"
    if ideal <= 0:
        return "no-relevant"
    if reranked < first_stage - t.hurt * ideal - eps:
        return "reranker-hurt"
    if reranked >= t.ok * ideal - eps:
        return "ok"
    if unjudged / TOP > t.max_unjudged + eps:
        return "unjudged-top"
    if ceiling < t.ok * ideal - eps:
        return "candidates-missed"
    return "reranker-misordered"
