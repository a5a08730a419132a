"""The user's measure names, as typed and in the order given, on every result table.

trec_eval names each measure by its printed name (``ndcg_cut_10``) and prints them in its own order;
a notebook user who asked for ``["nDCG@10", "map_cut.100", "R@100"]`` expects three columns in that
order, headed as asked. ``requested`` reads the request once into (result name, label) pairs:

- an ir_measures name (``nDCG@10``, ``AP(rel=2)@100``, ``RR``, ``MRR``) is labelled as typed;
- trec_eval's ``-m`` syntax (``ndcg_cut.10``, ``P.5,10``, ``official``) is labelled by trec_eval's
  printed name (``ndcg_cut_10``, ``P_5``, ``P_10``), since one argument may name several measures;
- a measure asked for twice keeps its first label and place;
- ``labels={"ndcg_cut_10": "nDCG@10"}`` renames for display: a key is any name of a measure asked
  for (the printed name, what was typed, or the label); any other key is an error.

Every label and every other name of a measure finds it: ``summary["nDCG@10"]`` and
``summary["ndcg_cut_10"]`` are the same value (``MeasureSeries``, ``MeasureFrame``).
trec_eval's own output format (``to_trec_eval``) keeps trec_eval's names and order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from toolkit.errors import ConfigError


@dataclass(frozen=True)
class Requested:
    """Measures as asked for: ``order`` is (result name, label) in the user's order; ``aliases`` maps every other
    name of a measure (what was typed, trec_eval's printed name) to its label."""

    order: tuple[tuple[str, str], ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    def label(self, name: str) -> str:
        """The label of the result name ``name`` (itself when it was not asked for by name)."""
        return dict(self.order).get(name, name)

    @property
    def names(self) -> list[str]:
        """Result names (what ``EvalResult`` keys its values by), in the user's order."""
        return [n for n, _ in self.order]

    @property
    def labels(self) -> list[str]:
        return [lab for _, lab in self.order]

    def ordered(self, present: Iterable[str]) -> list[str]:
        """``present`` result names in the user's order; names not asked for (none, normally) keep their place
        at the end."""
        have = list(present)
        known = [n for n in self.names if n in have]
        return known + [n for n in have if n not in known]

    def relabelled(self, labels: Mapping[str, str] | None) -> Requested:
        """These measures with display ``labels`` applied (``{name: label}``, a name being any of a measure's)."""
        if not labels:
            return self
        by_name = {n: n for n in self.names} | {
            a: self.names[self.labels.index(lab)] for a, lab in self.aliases.items()
        }
        by_name |= {lab: n for n, lab in self.order}
        new = dict(self.order)
        for key, value in labels.items():
            if key not in by_name:
                known = ", ".join(repr(lab) for lab in self.labels)
                raise ConfigError(f"labels: {key!r} is not a measure asked for (measures: {known})")
            if not isinstance(value, str) or not value:
                raise ConfigError(f"labels: the label of {key!r} must be a non-empty string, not {value!r}")
            new[by_name[key]] = value
        if len(set(new.values())) != len(new):
            raise ConfigError(f"labels: two measures would share a label ({', '.join(new.values())})")
        aliases = {a: new[by_name[a]] for a in [*self.aliases, *self.names, *self.labels]}
        return Requested(tuple(new.items()), {a: lab for a, lab in aliases.items() if a != lab})


def requested(measures: Any, version: int, default: Iterable[str] | None = None) -> Requested:
    """The measures of ``measures`` (one or a list of names, ir_measures objects or ``Measure`` values; None:
    ``default``, trec_eval's ``official`` unless given) as (result name, label) pairs in the user's order."""
    from toolkit.measures.names import DEFAULT_MEASURES, Measure, is_ir_measures_name, labelled_measures

    if measures is None:
        items: list = list(default if default is not None else DEFAULT_MEASURES)
    elif isinstance(measures, (str, Measure)) or not isinstance(measures, Iterable):
        items = [measures]
    else:
        items = list(measures) or list(default if default is not None else DEFAULT_MEASURES)
    order: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for item in items:
        if isinstance(item, Measure):
            order.setdefault(item.name, item.name)
            continue
        text = str(item).strip()
        names = [m.name for m in labelled_measures(text, version)]
        if len(names) == 1 and is_ir_measures_name(text):
            order.setdefault(names[0], text)
        for n in names:
            order.setdefault(n, n)
        if len(names) == 1:
            aliases.setdefault(text, order[names[0]])
    for n, lab in order.items():
        if n != lab:
            aliases.setdefault(n, lab)
    return Requested(tuple(order.items()), {a: lab for a, lab in aliases.items() if a != lab})


def measure_items(measures: Any) -> list:
    """The measures of ``compare`` and ``risk`` as a list (one or several; none: ``ndcg_cut.10``)."""
    if measures is None:
        return ["ndcg_cut.10"]
    items = [measures] if isinstance(measures, str) or not isinstance(measures, Iterable) else list(measures)
    return items or ["ndcg_cut.10"]


def numeric_measure_names(items: list, version: int, rel_format: str = "qrels") -> set[str]:
    """The result names of the numeric measures of ``items``; a measure ``compare`` cannot test (a text measure
    such as relstring, one that needs preference judgments, one without a value for every query) is refused,
    naming the keyword ``measures``."""
    from toolkit.errors import UnknownMeasureError
    from toolkit.evaluation.evaluate import check_measures
    from toolkit.measures.names import EvalSettings, Measure, labelled_measures

    numeric: set[str] = set()
    for item in items:
        ms = [item] if isinstance(item, Measure) else labelled_measures(str(item), version)
        try:
            check_measures(ms, EvalSettings(trec_eval=version), rel_format)
        except UnknownMeasureError as exc:
            raise UnknownMeasureError(f"measures={item!r}: compare cannot compute it: {exc}") from None
        undefined = [m.name for m in ms if m.spec.aggregate == "mean_defined"]
        if undefined:
            raise UnknownMeasureError(
                f"measures={item!r}: {', '.join(undefined)} has no value for a query where it is undefined (its mean "
                "is over the others); compare pairs the systems' values query by query, so give a measure defined "
                "on every query"
            )
        if all(m.spec.value_type == "string" for m in ms):
            raise UnknownMeasureError(
                f"measures={item!r}: a text measure (one string per query); compare tests numbers, so give numeric "
                "measures (e.g. measures=['nDCG@10', 'AP@100'])"
            )
        numeric.update(m.name for m in ms if m.spec.value_type != "string")
    return numeric


def requested_measures(items: list, version: int, labels: Mapping[str, str] | None) -> Requested:
    """The measures of ``items`` as (result name, label) pairs in the user's order, relabelled by ``labels``."""
    return requested(items, version).relabelled(labels)


class MeasureSeries(pd.Series):
    """A Series keyed by measure labels that also finds a measure by its other names (``summary["ndcg_cut_10"]``
    for the label ``nDCG@10``). Operations on it give plain Series."""

    _metadata: ClassVar[list[str]] = ["aliases"]
    aliases: dict[str, str]

    @property
    def _constructor(self) -> type[pd.Series]:
        return pd.Series

    def __getitem__(self, key: Any) -> Any:
        aliases = getattr(self, "aliases", None) or {}
        if isinstance(key, str) and key not in self.index and key in aliases:
            key = aliases[key]
        return super().__getitem__(key)


class MeasureFrame(pd.DataFrame):
    """A DataFrame whose measure columns are also found by their other names (``per_query["ndcg_cut_10"]``).
    Operations on it give plain DataFrames."""

    _metadata: ClassVar[list[str]] = ["aliases"]
    aliases: dict[str, str]

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def __getitem__(self, key: Any) -> Any:
        aliases = getattr(self, "aliases", None) or {}
        if isinstance(key, str) and key not in self.columns and key in aliases:
            key = aliases[key]
        elif isinstance(key, list) and all(isinstance(k, str) for k in key):
            key = [aliases.get(k, k) if k not in self.columns else k for k in key]
        return super().__getitem__(key)


def series(values: Mapping[str, float], aliases: Mapping[str, str], name: str) -> MeasureSeries:
    s = MeasureSeries(dict(values), name=name, dtype="float64")
    s.aliases = dict(aliases)
    return s


def frame(table: pd.DataFrame, aliases: Mapping[str, str]) -> MeasureFrame:
    f = MeasureFrame(table)
    f.aliases = dict(aliases)
    return f


__all__ = ["MeasureFrame", "MeasureSeries", "Requested", "requested"]
