"""What each measure is: immutable values, their parameters, and name parsing.

A ``Measure`` is a family plus an optional cutoff; its ``name`` is the
identity used in tables, JSON and provenance and is exactly what trec_eval
prints (``ndcg_cut_10``, ``P_10``, ``recall_100``, ``map``). Settings that
apply to a whole evaluation (relevance level, gain, discount, ``-J``, ``-M``,
``-c``, score precision) live in ``EvalSettings``; *how* the numbers are
computed lives in ``evaluate.py``.

Definitions (trec_eval 9.x semantics unless stated; "relevant" means
label >= relevance level ``-l``, default 1; a document absent from the qrels
or with a negative label is unjudged and never relevant):

- ``num_q``: number of queries evaluated. Summed in the ``all`` line.
- ``num_ret``: documents retrieved (after ``-M``, and after ``-J`` removes
  unjudged ones). Summed.
- ``num_rel``: relevant documents in the qrels for the query. Summed; with
  ``-c`` trec_eval 9.x's summary instead counts every qrels label > 0
  whatever ``-l`` says, and so does twostage.
- ``num_rel_ret``: relevant documents retrieved. Summed.
- ``map``: (1/num_rel) * sum over relevant retrieved documents d of
  precision at d's rank; 0 when num_rel = 0.
- ``recip_rank``: 1 / rank of the first relevant document; 0 if none.
- ``P.k``: relevant documents in the top k / k (k fixed, even when fewer
  than k documents were retrieved).
- ``recall.k``: relevant documents in the top k / num_rel; 0 when num_rel = 0.
- ``ndcg_cut.k``: DCG@k / IDCG@k with DCG@k = sum_{r<=k} gain(label_r) *
  discount(r), only labels > 0 contributing; IDCG@k is the same sum over all
  judged documents of the query sorted by gain descending (retrieved or not).
  trec_eval: gain(l) = l (linear), discount(r) = 1/log2(r+1). The relevance
  level does not apply to nDCG. 0 when IDCG = 0.
- ``ndcg``: as ``ndcg_cut`` without a cutoff (all retrieved, all judged).
- ``judged.k`` (not in trec_eval): the fraction of the top-k documents, in
  trec_eval's ordering, that have a judgment (label >= 0): judged in top k /
  min(k, retrieved); 0 when nothing was retrieved. Averaged over queries like
  every other measure. Pyserini's ``judged.k`` differs in two ways: it takes
  the first k *lines of the file* per query (file order, not score order, so
  shuffling a run changes it), and it pools the pairs of all run queries
  (including queries without judgments) before dividing, a micro-average;
  any qrels line counts, even a negative label. ``--judged-compat pyserini``
  reproduces that number.

Ties: every measure reads one ordering, trec_eval's (``ranking.py``).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import UnknownMeasureError
from .ranking import DEFAULT_SCORE_PRECISION

# family -> (needs cutoff, default cutoffs, summed rather than averaged)
_FAMILIES: dict[str, tuple[bool, tuple[int, ...], bool]] = {
    "num_q": (False, (), True),
    "num_ret": (False, (), True),
    "num_rel": (False, (), True),
    "num_rel_ret": (False, (), True),
    "map": (False, (), False),
    "recip_rank": (False, (), False),
    "P": (True, (5, 10, 15, 20, 30, 100, 200, 500, 1000), False),
    "recall": (True, (5, 10, 15, 20, 30, 100, 200, 500, 1000), False),
    "ndcg": (False, (), False),
    "ndcg_cut": (True, (5, 10, 15, 20, 30, 100, 200, 500, 1000), False),
    "judged": (True, (5, 10, 20, 100), False),
}
#: trec_eval prints measures in its own table order, not command-line order.
FAMILY_ORDER = tuple(_FAMILIES)
GAIN_FAMILIES = frozenset({"ndcg", "ndcg_cut"})
BINARY_FAMILIES = frozenset({"map", "recip_rank", "P", "recall", "num_rel", "num_rel_ret"})

DEFAULT_MEASURES = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "recip_rank", "P.10", "recall.100,1000",
                    "ndcg_cut.10")


@dataclass(frozen=True, order=True)
class Measure:
    """One measure: a family (trec_eval's name) and, for cut measures, a cutoff."""

    family: str
    cutoff: int | None = None

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise UnknownMeasureError(_unknown_family_message(self.family))
        needs_cutoff = _FAMILIES[self.family][0]
        if needs_cutoff and (self.cutoff is None or self.cutoff <= 0):
            raise UnknownMeasureError(f"{self.family} needs a positive cutoff, e.g. {self.family}.10")
        if not needs_cutoff and self.cutoff is not None:
            raise UnknownMeasureError(f"{self.family} takes no cutoff")

    @property
    def name(self) -> str:
        return self.family if self.cutoff is None else f"{self.family}_{self.cutoff}"

    @property
    def summed(self) -> bool:
        """True for counts (num_*), which trec_eval sums rather than averages in ``all``."""
        return _FAMILIES[self.family][2]

    @property
    def sort_key(self) -> tuple[int, int]:
        return FAMILY_ORDER.index(self.family), self.cutoff or 0

    def __str__(self) -> str:
        return self.name


def _unknown_family_message(family: str) -> str:
    close = difflib.get_close_matches(family, list(_FAMILIES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown measure {family!r}{hint} (known: {', '.join(_FAMILIES)})"


def parse_measure(text: str) -> list[Measure]:
    """Parse a trec_eval ``-m`` argument: ``ndcg_cut.5,10``, ``P.10``, ``map``, ``ndcg_cut_10``.

    A cut family without cutoffs gets trec_eval's default cutoffs.
    """
    text = text.strip()
    m = re.fullmatch(r"([A-Za-z_]+?)(?:[._](\d+(?:,\d+)*))?", text)
    if not m:
        raise UnknownMeasureError(f"cannot parse measure {text!r}; expected e.g. ndcg_cut.10 or map")
    family, cutoffs = m.group(1), m.group(2)
    if family not in _FAMILIES:
        raise UnknownMeasureError(_unknown_family_message(family))
    if cutoffs is None:
        defaults = _FAMILIES[family][1]
        return [Measure(family, c) for c in defaults] if defaults else [Measure(family)]
    values = [int(c) for c in cutoffs.split(",")]
    if len(set(values)) != len(values):
        raise UnknownMeasureError(f"{text!r}: cutoffs must not repeat")
    return [Measure(family, c) for c in values]


def parse_measures(texts: list[str] | tuple[str, ...]) -> list[Measure]:
    """All measures of several ``-m`` arguments, deduplicated, in trec_eval's print order."""
    seen: set[Measure] = set()
    for t in texts:
        seen.update(parse_measure(t))
    return sorted(seen, key=lambda m: m.sort_key)


# -------------------------------------------------------------------- gains
@dataclass(frozen=True)
class Gain:
    """How a relevance label becomes a gain in DCG.

    - ``linear``: gain(l) = l (trec_eval's ``ndcg_cut``);
    - ``exp``: gain(l) = 2^l - 1 (Burges et al. 2005, most libraries);
    - ``map``: an explicit table such as 0:0,1:1,2:4,3:10 (Järvelin &
      Kekäläinen 2002 compared 0,1,2,3 / 0,1,4,10 / 0,1,10,100). Every
      non-negative label in the qrels must be covered.
    Negative labels (unjudged) never contribute a gain.
    """

    kind: str = "linear"
    table: tuple[tuple[int, float], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Gain:
        text = text.strip()
        if text in ("linear", "exp"):
            return cls(text)
        from .trec_io import parse_label_map

        try:
            mapping = parse_label_map(text)
        except ValueError as exc:
            raise UnknownMeasureError(
                f"--gain {text!r}: expected 'linear', 'exp' or a label map like 0:0,1:1,2:4,3:10 ({exc})"
            ) from None
        return cls("map", tuple(sorted((int(k), float(v)) for k, v in mapping.items())))

    def describe(self) -> str:
        if self.kind == "linear":
            return "linear: gain(l) = l (trec_eval)"
        if self.kind == "exp":
            return "exp: gain(l) = 2^l - 1"
        return "map: " + ",".join(f"{k}:{v:g}" for k, v in self.table)

    @property
    def label(self) -> str:
        if self.kind == "map":
            return ",".join(f"{k}:{v:g}" for k, v in self.table)
        return self.kind

    def apply(self, labels: np.ndarray, where: str = "qrels") -> np.ndarray:
        """Gains of ``labels`` (float64); negative (unjudged) labels give 0."""
        labels = np.asarray(labels, dtype=np.int64)
        if self.kind == "linear":
            gains = labels.astype(np.float64)
        elif self.kind == "exp":
            gains = np.exp2(labels.astype(np.float64)) - 1.0
        else:
            keys = np.array([k for k, _ in self.table], dtype=np.int64)
            values = np.array([v for _, v in self.table], dtype=np.float64)
            judged = labels >= 0
            present = np.unique(labels[judged])
            missing = sorted(set(present.tolist()) - set(keys.tolist()))
            if missing:
                raise UnknownMeasureError(
                    f"gain map {self.label} does not cover label(s) {missing} found in the {where}"
                )
            pos = np.clip(np.searchsorted(keys, labels), 0, len(keys) - 1)
            gains = np.where(judged, values[pos], 0.0)
        return np.where(labels >= 0, gains, 0.0)


# ---------------------------------------------------------------- discounts
@dataclass(frozen=True)
class Discount:
    """Rank discount in DCG.

    - ``log2``: each gain at rank r is divided by log2(r + 1) (trec_eval's
      ``ndcg_cut`` in 9.x, Burges et al.);
    - ``jk:B``: Järvelin & Kekäläinen (2002), the original: ranks r < B are not
      discounted, from rank B on the gain is divided by log_B(r). With B = 2,
      ranks 1 and 2 are both undiscounted.
    """

    kind: str = "log2"
    base: float = 2.0

    @classmethod
    def parse(cls, text: str) -> Discount:
        text = text.strip()
        if text == "log2":
            return cls("log2")
        m = re.fullmatch(r"jk(?::(\d+(?:\.\d+)?))?", text)
        if not m:
            raise UnknownMeasureError(f"--discount {text!r}: expected 'log2' or 'jk[:B]' (e.g. jk, jk:2, jk:10)")
        base = float(m.group(1)) if m.group(1) else 2.0
        if base <= 1:
            raise UnknownMeasureError(f"--discount {text!r}: the log base B must be > 1")
        return cls("jk", base)

    @property
    def label(self) -> str:
        return "log2" if self.kind == "log2" else f"jk:{self.base:g}"

    def describe(self) -> str:
        if self.kind == "log2":
            return "log2: gain / log2(rank + 1) (trec_eval)"
        return f"jk:{self.base:g}: gain undiscounted for rank < {self.base:g}, gain / log_{self.base:g}(rank) after"

    def divisors(self, ranks: np.ndarray) -> np.ndarray:
        """What the gain at each 1-based rank is divided by (computed as trec_eval does: a division)."""
        ranks = np.asarray(ranks, dtype=np.float64)
        if self.kind == "log2":
            return np.log2(ranks + 1.0)
        with np.errstate(divide="ignore"):
            logs = np.log(ranks) / math.log(self.base) if self.base != 2.0 else np.log2(ranks)
        return np.where(ranks < self.base, 1.0, logs)


# ----------------------------------------------------------------- settings
@dataclass(frozen=True)
class EvalSettings:
    """Everything, beside the measures, that changes a number. Part of provenance."""

    relevance_level: int = 1
    gain: Gain = field(default_factory=Gain)
    discount: Discount = field(default_factory=Discount)
    judged_only: bool = False
    max_docs: int | None = None
    complete: bool = False
    score_precision: str = DEFAULT_SCORE_PRECISION
    judged_compat: str = "twostage"

    def describe(self) -> dict[str, object]:
        d = asdict(self)
        d["gain"] = self.gain.describe()
        d["discount"] = self.discount.describe()
        return d
