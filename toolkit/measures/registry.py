"""The measure registry: one declaration per measure family, and the measure values built from them.

A *family* is what trec_eval calls a measure (``P``, ``ndcg_cut``, ``bpref``):
its name, the kind of parameters it takes and their defaults, how the
``all`` line combines per-query values, whether the relevance level ``-l``
applies, whether twostage's ``--gain``/``--discount`` apply, which relevance
file format (``-R``) it reads, the trec_eval generation that has it, and the
vectorised function that computes it. The function's docstring is the exact
definition (formula, ties, unjudged documents, empty cases, citation); it is
registered with the ``family`` decorator next to its code, in
``trec_measures.py`` (qrels) and ``pref_measures.py`` (prefs, judgment
groups). Adding a measure is one decorated function.

A *measure* (``Measure``) is one printed value of a family: ``P_10``,
``iprec_at_recall_0.20``, ``ndcg_1=3,2=9``. Its ``name`` is exactly what
trec_eval prints and is its identity everywhere (tables, JSON, provenance).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field


class Params(enum.Enum):
    """The parameter shapes trec_eval knows (``meas_init.c``)."""

    NONE = "none"  # map, bpref, ...
    LONG_CUTOFFS = "long cutoffs"  # P.5,10: one value per cutoff, sorted, > 0, no duplicates
    DOUBLE_CUTOFFS = "double cutoffs"  # iprec_at_recall.0.1,0.2: one value per cutoff, sorted, no duplicates
    DOUBLE_PARAMS = "double params"  # utility.1,-1,0,0: one value, parameters in the given order
    PAIRS = "name=value pairs"  # ndcg.1=3,2=9: one value


#: trec_eval's measure order (``measures.c``): lines print in this order whatever the ``-m`` order.
#: ``judged`` (twostage and Pyserini's judged@k) is not a trec_eval measure and comes last.
TREC_ORDER: tuple[str, ...] = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
    "relstring",
    "recall",
    "infAP",
    "gm_bpref",
    "Rprec_mult",
    "utility",
    "11pt_avg",
    "binG",
    "G",
    "dcg",
    "ideal_dcg",
    "ndcg",
    "ndcg_rel",
    "Rndcg",
    "ndcg_cut",
    "map_cut",
    "relative_P",
    "success",
    "set_P",
    "set_relative_P",
    "set_recall",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
    "prefs_num_prefs_poss",
    "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret",
    "prefs_simp",
    "prefs_pair",
    "prefs_avgjg",
    "prefs_avgjg_Rnonrel",
    "prefs_simp_ret",
    "prefs_pair_ret",
    "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp",
    "prefs_pair_imp",
    "prefs_avgjg_imp",
    "map_avgjg",
    "P_avgjg",
    "Rprec_mult_avgjg",
    "yaap",
    "rbp",
    "rbp_resid",
    "unj",
    "judged",
)

#: How the ``all`` line combines per-query values.
AGGREGATES = ("mean", "sum", "gm", "count", "none")
#: What trec_eval 10 does to a value of a judged query that ``-c`` evaluated against its placeholder ranking
#: (``trec_eval.c`` compares the printed name: ``strcmp`` for num_ret, utility, relstring and rbp_resid, so
#: only their parameterless forms; ``strncmp(name, "unj", 3)`` for unj, so every cutoff).
PLACEHOLDERS = ("keep", "zero", "zero_if_bare", "clear_if_bare")


@dataclass(frozen=True)
class Family:
    """One measure family as trec_eval declares it (a ``TREC_MEAS``), plus what twostage needs to know.

    - ``aggregate``: ``mean`` (sum / number of queries), ``sum`` (counts such
      as num_ret), ``gm`` (per-query value is log(max(v, 1e-5)); the summary
      is exp of their mean), ``count`` (num_q), ``none`` (relstring, runid:
      not averaged).
    - ``value_type``: ``float`` printed ``%6.4f``, ``long`` printed as an
      integer, ``string`` (relstring, runid).
    - ``binary``: the relevance level ``-l`` decides what is relevant.
    - ``gain``: twostage's ``--gain``/``--discount`` apply.
    - ``rel_format``: the ``-R`` format whose judgments it reads (``any`` for
      runid and num_q).
    - ``since``: the first trec_eval generation (9 or 10) that has it; 0 for
      twostage's own ``judged``.
    - ``per_query``: printed on per-query (``-q``) lines.
    - ``placeholder``: one of ``PLACEHOLDERS``: kept, zeroed, zeroed only when
      the measure prints the bare family name, or emptied (strings) likewise.
    - ``complete_total``: with ``-c`` the ``all`` line is the number of qrels
      lines with a label > 0 over every judged query, whatever ``-l``, ``-M``,
      ``-J`` or ``-Z`` (num_rel; both generations' ``m_num_rel.c``).
    - ``label``: the short display name (``nDCG``, ``MAP``); a cutoff measure
      shows as ``label@k``.
    - ``ceiling``: whether "the best order of the candidates" means something
      for it (a ranking measure, not a count or a coverage figure); the
      diagnosis decomposes only such measures.
    """

    name: str
    params: Params
    defaults: tuple
    aggregate: str
    value_type: str
    binary: bool
    gain: bool
    rel_format: str
    since: int
    per_query: bool
    compute: Callable
    check: Callable | None = None  # extra validation of parameters: (measure) -> error text or None
    placeholder: str = "keep"
    complete_total: bool = False
    label: str = ""
    ceiling: bool = True

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.compute.__doc__ or "")

    @property
    def order(self) -> int:
        return TREC_ORDER.index(self.name)


REGISTRY: dict[str, Family] = {}


def family(
    name: str,
    *,
    params: Params = Params.NONE,
    defaults: tuple = (),
    aggregate: str = "mean",
    value_type: str = "float",
    binary: bool = True,
    gain: bool = False,
    rel_format: str = "qrels",
    since: int = 9,
    per_query: bool = True,
    check: Callable | None = None,
    placeholder: str = "keep",
    complete_total: bool = False,
    label: str | None = None,
    ceiling: bool | None = None,
):
    """Register the decorated compute function as the family ``name`` (see ``Family``).

    ``label`` defaults to the family name; ``ceiling`` to True for families averaged over queries
    (mean or geometric mean), False for counts and strings."""
    if name not in TREC_ORDER:
        raise ValueError(f"{name!r} is not in TREC_ORDER; add it there at trec_eval's position")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate {aggregate!r} not one of {AGGREGATES}")
    if placeholder not in PLACEHOLDERS:
        raise ValueError(f"placeholder {placeholder!r} not one of {PLACEHOLDERS}")

    def register(fn: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"family {name!r} registered twice")
        REGISTRY[name] = Family(
            name=name,
            params=params,
            defaults=tuple(defaults),
            aggregate=aggregate,
            value_type=value_type,
            binary=binary,
            gain=gain,
            rel_format=rel_format,
            since=since,
            per_query=per_query,
            compute=fn,
            check=check,
            placeholder=placeholder,
            complete_total=complete_total,
            label=label or name,
            ceiling=aggregate in ("mean", "gm") if ceiling is None else ceiling,
        )
        return fn

    return register


def _fmt_double(value: float) -> str:
    """C's ``%3.2f`` (trec_eval's ``append_double``): Python rounds the binary value the same way."""
    return f"{value:3.2f}"


@dataclass(frozen=True)
class Measure:
    """One printed value of a family.

    ``cutoff`` is set for the cutoff kinds (an int for ``P``, a float for
    ``iprec_at_recall``); ``params`` holds the parameters of the other kinds
    (floats, or (name, value) pairs) and ``printable`` the text the user
    wrote for them, which trec_eval appends to the name (``ndcg_1=3,2=9``,
    ``utility_2,-1,0,0``). Default parameters print the bare family name.
    """

    family: str
    cutoff: int | float | None = None
    params: tuple = field(default=())
    printable: str | None = None

    def __post_init__(self) -> None:
        if self.family not in REGISTRY:
            from toolkit.errors import UnknownMeasureError

            raise UnknownMeasureError(f"unknown measure {self.family!r}")

    @property
    def spec(self) -> Family:
        return REGISTRY[self.family]

    @property
    def name(self) -> str:
        kind = self.spec.params
        if kind is Params.LONG_CUTOFFS:
            return f"{self.family}_{self.cutoff}"
        if kind is Params.DOUBLE_CUTOFFS:
            return f"{self.family}_{_fmt_double(self.cutoff)}"
        if self.printable is not None:
            return f"{self.family}_{self.printable}"
        return self.family

    @property
    def arg(self) -> str:
        """This measure in trec_eval's ``-m`` syntax (``P.10``, ``iprec_at_recall.0.2``, ``ndcg.1=3``)."""
        kind = self.spec.params
        if kind is Params.LONG_CUTOFFS:
            return f"{self.family}.{self.cutoff}"
        if kind is Params.DOUBLE_CUTOFFS:
            return f"{self.family}.{self.cutoff!r}"
        return f"{self.family}.{self.printable}" if self.printable is not None else self.family

    @property
    def label(self) -> str:
        """The short display name: ``nDCG@10`` for ndcg_cut_10, ``MAP`` for map, ``P@5`` for P_5."""
        if self.spec.params is Params.LONG_CUTOFFS:
            return f"{self.spec.label}@{self.cutoff}"
        return self.spec.label if self.name == self.family else self.name

    @property
    def summed(self) -> bool:
        """True for counts (num_ret, ...), which the ``all`` line sums rather than averages."""
        return self.spec.aggregate == "sum"

    @property
    def sort_key(self) -> tuple:
        return self.spec.order, self.cutoff if self.cutoff is not None else 0, self.printable or ""

    def param_values(self) -> tuple:
        """The family parameters in effect: the given ones, or the family's defaults."""
        return self.params if self.params else self.spec.defaults

    def __str__(self) -> str:
        return self.name


def families_in_order() -> list[Family]:
    return sorted(REGISTRY.values(), key=lambda f: f.order)
