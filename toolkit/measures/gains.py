"""Gains and discounts of the DCG family, and the ideal rankings built from them.

Two ways to say what a relevance label is worth:

- trec_eval's own: ``ndcg.1=3,2=9`` (also ``ndcg_rel``, ``Rndcg``, ``G``,
  ``rbp``): the listed levels get the listed gain, every other judged level l
  gets gain l (``gain_init.c``). The ideal ranking takes the levels in
  decreasing gain. trec_eval sorts them with ``qsort`` and a comparator that
  returns the gain difference *truncated to an int*, so two gains less than 1
  apart compare equal; glibc's qsort is a stable merge sort, which twostage
  reproduces (``trec_sort``), so ``ndcg.1=4.5,2=4`` gets trec_eval's ideal
  order, not the exact one.
- twostage's ``--gain`` (``linear`` = trec_eval's default, ``exp`` = 2^l-1,
  or a map such as 0:0,1:1,2:4,3:10) for ``ndcg`` and ``ndcg_cut``, sorted
  exactly.

A document contributes to DCG when its gain is not 0 (so a map 0:0.5 makes
label-0 documents count, as ``ndcg.0=0.5`` does in trec_eval); the ideal
ranking holds every judged document whose gain is > 0, retrieved or not. The
relevance level ``-l`` plays no part. Negative labels (pooled, unjudged) and
documents absent from the qrels have gain 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from toolkit.errors import UnknownMeasureError, phrase


# -------------------------------------------------------------- twostage gains
@dataclass(frozen=True)
class Gain:
    """How a relevance label becomes a gain in twostage's ``--gain``.

    - ``linear``: gain(l) = l (trec_eval's default);
    - ``exp``: gain(l) = 2^l - 1 (Burges et al. 2005, most libraries);
    - ``map``: an explicit table such as 0:0,1:1,2:4,3:10 (Järvelin &
      Kekäläinen 2002 compared 0,1,2,3 / 0,1,4,10 / 0,1,10,100). Every
      non-negative label in the qrels must be covered; gains are >= 0.
    - ``relabel``: ir_measures' ``nDCG(gains={2:4,3:10})``: the listed labels
      get the listed gain, every other label its own value (pytrec_eval is
      given the qrels relabelled so); gains are whole numbers >= 0.
    Negative labels (unjudged) never contribute a gain.
    """

    kind: str = "linear"
    table: tuple[tuple[int, float], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Gain:
        text = text.strip()
        if text in ("linear", "exp"):
            return cls(text)
        from toolkit.data.trec_io import parse_label_map

        try:
            mapping = parse_label_map(text)
        except ValueError as exc:
            raise UnknownMeasureError(
                f"{phrase('gain=', '--gain ')}{text!r}: expected 'linear', 'exp' or a label map like 0:0,1:1,2:4,3:10 ({exc})"
            ) from None
        bad = [k for k, v in mapping.items() if k < 0 or v < 0]
        if bad:
            raise UnknownMeasureError(
                f"{phrase('gain=', '--gain ')}{text!r}: labels and gains must be >= 0 (see {bad}); "
                "for negative gains use trec_eval's ndcg.L=G parameters"
            )
        return cls("map", tuple(sorted((int(k), float(v)) for k, v in mapping.items())))

    def describe(self) -> str:
        if self.kind == "linear":
            return "linear: gain(l) = l (trec_eval)"
        if self.kind == "exp":
            return "exp: gain(l) = 2^l - 1"
        if self.kind == "relabel":
            return "relabel: " + ",".join(f"{k}:{v:g}" for k, v in self.table) + " (other labels: gain = label)"
        return "map: " + ",".join(f"{k}:{v:g}" for k, v in self.table)

    @property
    def label(self) -> str:
        if self.kind == "map":
            return ",".join(f"{k}:{v:g}" for k, v in self.table)
        if self.kind == "relabel":
            return "relabel " + ",".join(f"{k}:{v:g}" for k, v in self.table)
        return self.kind

    def value(self, label: int) -> float:
        if self.kind == "linear":
            return float(label)
        if self.kind == "exp":
            if label > 1023:
                raise UnknownMeasureError(
                    f"gain exp: label {label} has a gain 2^{label} - 1 beyond a float's range; "
                    "give a gain map for labels above 1023"
                )
            return 2.0**label - 1.0
        if self.kind == "relabel":
            return dict(self.table).get(label, float(label))
        return dict(self.table).get(label, 0.0)  # check_covers refuses labels the qrels have and the map lacks

    def check_covers(self, labels, where: str = "qrels") -> None:
        if self.kind != "map":
            return
        missing = sorted({int(x) for x in np.unique(labels) if x >= 0} - {k for k, _ in self.table})
        if missing:
            raise UnknownMeasureError(f"gain map {self.label} does not cover label(s) {missing} found in the {where}")


# ----------------------------------------------------------------- discounts
@dataclass(frozen=True)
class Discount:
    """Rank discount in DCG.

    - ``log2``: each gain at rank r is divided by log2(r + 1) (trec_eval,
      Burges et al.);
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
            raise UnknownMeasureError(
                f"{phrase('discount=', '--discount ')}{text!r}: expected 'log2' or 'jk[:B]' (e.g. jk, jk:2, jk:10)"
            )
        base = float(m.group(1)) if m.group(1) else 2.0
        if base <= 1:
            raise UnknownMeasureError(f"{phrase('discount=', '--discount ')}{text!r}: the log base B must be > 1")
        return cls("jk", base)

    @property
    def label(self) -> str:
        return "log2" if self.kind == "log2" else f"jk:{self.base:g}"

    def describe(self) -> str:
        if self.kind == "log2":
            return "log2: gain / log2(rank + 1) (trec_eval)"
        return f"jk:{self.base:g}: gain undiscounted for rank < {self.base:g}, gain / log_{self.base:g}(rank) after"

    def divisors(self, ranks: np.ndarray) -> np.ndarray:
        """What the gain at each 1-based rank is divided by (a division, as trec_eval computes it)."""
        from toolkit.measures.ranked import log2_table

        ranks = np.asarray(ranks, dtype=np.int64)
        if self.kind == "log2":
            return log2_table(int(ranks.max()) + 1 if len(ranks) else 1)[ranks + 1]
        if self.base == 2.0:
            logs = log2_table(int(ranks.max()) if len(ranks) else 1)[np.maximum(ranks, 1)]
        else:
            logs = np.array([math.log(r) / math.log(self.base) if r > 0 else -math.inf for r in ranks.tolist()])
        return np.where(ranks < self.base, 1.0, logs)


# ------------------------------------------------------------ gain tables
@dataclass(frozen=True)
class GainTable:
    """The gain of every label for one measure: trec_eval pairs, or a twostage ``Gain``.

    ``pairs``: (level, gain) in the order given; ``gain``: the twostage gain
    used for levels not in ``pairs``; ``trec_sort``: order levels as
    trec_eval's qsort does (pairs) rather than exactly (``--gain``).
    """

    pairs: tuple[tuple[int, float], ...] = ()
    gain: Gain = Gain()
    trec_sort: bool = True

    def level_gain(self, level: int) -> float:
        for lvl, g in self.pairs:
            if lvl == level:
                return g
        return self.gain.value(level)

    def of_labels(self, labels: np.ndarray) -> np.ndarray:
        """Gain of each code: labels >= 0 by the table, negative codes 0.

        The table holds the distinct labels present, so its size never depends on a label's value."""
        labels = np.asarray(labels, dtype=np.int64)
        present = np.unique(labels[labels >= 0])
        table = np.array([self.level_gain(int(i)) for i in present], dtype=np.float64)
        at = np.clip(np.searchsorted(present, labels), 0, max(len(present) - 1, 0))
        return np.where(labels >= 0, table[at] if len(present) else 0.0, 0.0)

    def entries(self, num_rel_levels: int, present: np.ndarray | None = None) -> list[tuple[int, float]]:
        """trec_eval's ``setup_gains``: (level, gain) sorted by increasing gain, for a query whose levels are 0..n-1.

        ``present``: the levels some query has documents of. Where the order is a true sort (twostage's exact
        sort, or trec_eval's qsort over gains that are all whole numbers, where its comparator is exact), the
        levels absent from ``present`` change no kept level's place, so only the present ones (and the pairs)
        are listed: the list never grows with a label's value. Fractional ``ndcg.L=G`` gains with trec_eval's
        truncating comparator keep every level 0..n-1, as trec_eval sorts them.
        """
        out = list(self.pairs)
        given = {lvl for lvl, _ in self.pairs}
        exact = not self.trec_sort or all(float(g).is_integer() for _, g in self.pairs)
        levels = range(num_rel_levels) if present is None or not exact else present[present < num_rel_levels]
        out += [(int(i), self.gain.value(int(i))) for i in levels if int(i) not in given]
        if self.trec_sort:
            return glibc_msort(out, lambda a, b: int(a[1] - b[1]))
        return sorted(out, key=lambda e: e[1])

    def bounds(self, num_rel_levels: int) -> list[float]:
        """Gains whose min and max are those of ``entries(num_rel_levels)`` (all of them), in a list as short as
        the pairs: linear and exp gains increase, so the lowest and highest levels not given stand for the rest."""
        given = {lvl for lvl, _ in self.pairs}
        out = [g for _, g in self.pairs]
        if self.gain.kind in ("linear", "exp"):
            lo = next((i for i in range(num_rel_levels) if i not in given), None)
            hi = next((i for i in range(num_rel_levels - 1, -1, -1) if i not in given), None)
            out += [self.gain.value(i) for i in (lo, hi) if i is not None]
        else:
            mapped = dict(self.gain.table)
            out += [v for k, v in mapped.items() if 0 <= k < num_rel_levels and k not in given]
            covered = {k for k in (*given, *mapped) if 0 <= k < num_rel_levels}
            if len(covered) < num_rel_levels:  # some level in range takes the map's default, 0
                out.append(0.0)
        return out


def glibc_msort(items: list, cmp) -> list:
    """glibc's ``qsort`` (``msort_with_tmp``): top-down merge sort, left element first unless cmp(left, right) > 0."""
    n = len(items)
    if n <= 1:
        return list(items)
    n1 = n // 2
    left, right = glibc_msort(items[:n1], cmp), glibc_msort(items[n1:], cmp)
    out, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


@dataclass(frozen=True)
class Ideal:
    """The ideal ranking of every query as flat arrays: position t of query q has gain ``gain[i]``.

    Rows are grouped by query in increasing ``q``; ``pos`` is the 0-based
    position; ``n`` is each query's number of ideal (gain > 0) positions.
    """

    q: np.ndarray
    pos: np.ndarray
    gain: np.ndarray
    n: np.ndarray


def ideal(rel_levels: np.ndarray, levels: np.ndarray, num_rel_levels: np.ndarray, table: GainTable) -> Ideal:
    """trec_eval's ideal gain sequence per query (the ``cur_level`` walk of ``m_ndcg.c``).

    From the highest-sorted level down: levels with no judged document are
    skipped; each other level contributes its gain once per judged document,
    until the first such level whose gain is <= 0. Nothing, when the
    highest-sorted gain is <= 0.
    """
    nq, width = rel_levels.shape
    run_q, run_gain, run_count = [], [], []
    for nrl in np.unique(num_rel_levels):
        qs = np.flatnonzero(num_rel_levels == nrl)
        ents = table.entries(int(nrl), levels)[::-1]  # decreasing
        if not ents or ents[0][1] <= 0:
            continue
        ent_levels = np.array([lvl for lvl, _ in ents], dtype=np.int64)
        gains = np.array([g for _, g in ents], dtype=np.float64)
        col = np.clip(np.searchsorted(levels, ent_levels), 0, max(width - 1, 0))
        inside = (ent_levels >= 0) & (col < width) & (levels[col] == ent_levels if width else False)
        counts = np.zeros((len(qs), len(ents)), dtype=np.int64)
        counts[:, inside] = rel_levels[np.ix_(qs, col[inside])]
        stop = (counts > 0) & (gains <= 0)[None, :]
        first = np.where(stop.any(axis=1), np.argmax(stop, axis=1), len(ents))
        take = (counts > 0) & (np.arange(len(ents))[None, :] < first[:, None])
        qi, ji = np.nonzero(take)
        run_q.append(qs[qi])
        run_gain.append(gains[ji])
        run_count.append(counts[qi, ji])
    if run_q:
        rq, rg, rc = np.concatenate(run_q), np.concatenate(run_gain), np.concatenate(run_count)
        order = np.lexsort((np.concatenate([np.arange(len(x)) for x in run_q]), rq))  # by query, runs in order
        rq, rg, rc = rq[order], rg[order], rc[order]
    else:
        rq, rg, rc = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    q = np.repeat(rq, rc)
    gain = np.repeat(rg, rc)
    n = np.bincount(q, minlength=nq).astype(np.int64)
    start = np.concatenate(([0], np.cumsum(n)[:-1]))
    pos = np.arange(len(q), dtype=np.int64) - start[q] if len(q) else np.zeros(0, np.int64)
    return Ideal(q=q.astype(np.int64), pos=pos, gain=gain, n=n)
