"""The measure registry: one declaration per measure family, and the measure values built from them.

A *family* is what trec_eval calls a measure (``P``, ``ndcg_cut``, ``bpref``):
its name, the kind of parameters it takes and their defaults, how the
``all`` line combines per-query values, whether the relevance level ``-l``
applies, whether twostage's ``--gain``/``--discount`` apply, which relevance
file format (``-R``) it reads, the trec_eval generation that has it, and the
vectorised function that computes it. The function's docstring is the exact
definition (formula, ties, unjudged documents, empty cases, citation); it is
registered with the ``family`` decorator next to its code, in ``trec.py``
(qrels), ``prefs.py`` (prefs, judgment groups) and the modules of the
ir_measures providers' definitions (``gdeval.py``, ``cwl.py``, ``compat.py``,
``diversity.py``, ``irm_simple.py``; their families have named parameters,
``Params.NAMED``, and a ``source``), of ranx's (``ranx.py``; named as ranx
names them, ``Params.RANX``, source ``ranx``) and MS MARCO's official MRR@k
(``msmarco.py``). Adding a measure is one decorated function.

A *measure* (``Measure``) is one printed value of a family: ``P_10``,
``iprec_at_recall_0.20``, ``ndcg_1=3,2=9``. Its ``name`` is exactly what
trec_eval prints and is its identity everywhere (tables, JSON, provenance).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class Params(enum.Enum):
    """The parameter shapes trec_eval knows (``meas_init.c``)."""

    NONE = "none"  # map, bpref, ...
    LONG_CUTOFFS = "long cutoffs"  # P.5,10: one value per cutoff, sorted, > 0, no duplicates
    DOUBLE_CUTOFFS = "double cutoffs"  # iprec_at_recall.0.1,0.2: one value per cutoff, sorted, no duplicates
    DOUBLE_PARAMS = "double params"  # utility.1,-1,0,0: one value, parameters in the given order
    PAIRS = "name=value pairs"  # ndcg.1=3,2=9: one value
    NAMED = "named parameters"  # ir_measures' RBP(p=0.8,rel=1), ERR@20: one value per parameter set
    RANX = "ranx @k -lN"  # ranx's ndcg_burges@10-l2, rbp.8: one value, named as ranx names it


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
    # not trec_eval measures: the definitions of ir_measures' other providers, each under its own name
    "Judged",
    "msmarco_RR",
    # MS MARCO's official MRR@k (toolkit/measures/msmarco.py)
    "msmarco_MRR",
    "gdeval_nDCG",
    "ERR",
    "RBP",
    "SDCG",
    "INST",
    "INSQ",
    "NERR8",
    "NERR9",
    "NERR10",
    "NERR11",
    "BPM",
    "Compat",
    "Accuracy",
    "ERR_IA",
    "nERR_IA",
    "alpha_DCG",
    "alpha_nDCG",
    "NRBP",
    "nNRBP",
    "AP_IA",
    "P_IA",
    "StRecall",
    # not trec_eval measures: ranx 0.3.21's definitions (toolkit/measures/ranx.py), in ranx's own order
    "ranx_hits",
    "ranx_hit_rate",
    "ranx_precision",
    "ranx_recall",
    "ranx_f1",
    "ranx_r-precision",
    "ranx_mrr",
    "ranx_map",
    "ranx_dcg",
    "ranx_dcg_burges",
    "ranx_ndcg",
    "ranx_ndcg_burges",
    "ranx_bpref",
    "ranx_rbp",
)

#: How the ``all`` line combines per-query values (``mean_defined``: the mean over the queries whose value is
#: defined, a number; a query whose value is NaN is left out, as ir_measures' accuracy provider leaves it out;
#: ``msmarco``: the sum over the queries evaluated divided by the number of qrels queries with a document
#: at the relevance level, whether the run has them or not, as MS MARCO's official script divides).
AGGREGATES = ("mean", "sum", "gm", "count", "none", "mean_defined", "msmarco")
#: How a family breaks score ties (``input``: the run's own line order, a stable sort by score).
TIES = ("docid_desc", "docid_asc", "input")
#: Where a family's parameters come after its name in an ``@`` (``ERR@20``): no cutoff, an optional or a required one.
CUTOFFS = ("none", "optional", "required")
#: What trec_eval 10 does to a value of a judged query that ``-c`` evaluated against its placeholder ranking
#: (``trec_eval.c`` compares the printed name: ``strcmp`` for num_ret, utility, relstring and rbp_resid, so
#: only their parameterless forms; ``strncmp(name, "unj", 3)`` for unj, so every cutoff).
PLACEHOLDERS = ("keep", "zero", "zero_if_bare", "clear_if_bare")


@dataclass(frozen=True)
class Named:
    """One parameter of a family with named parameters (``Params.NAMED``), as ir_measures declares it.

    ``kind`` is the Python type of its value (int, float, bool, str or dict); ``default`` its value when not
    given (None with ``required``: it must be given; None otherwise: absent unless given); ``choices`` the
    values allowed (empty: any of its kind); ``meaning`` one line for ``twostage measures``.
    """

    name: str
    kind: type
    default: object = None
    required: bool = False
    choices: tuple = ()
    meaning: str = ""


@dataclass(frozen=True)
class Family:
    """One measure family as trec_eval declares it (a ``TREC_MEAS``), plus what twostage needs to know.

    - ``aggregate``: ``mean`` (sum / number of queries), ``sum`` (counts such
      as num_ret), ``gm`` (per-query value is log(max(v, 1e-5)); the summary
      is exp of their mean), ``count`` (num_q), ``none`` (relstring, runid:
      not averaged), ``mean_defined`` and ``msmarco`` (``AGGREGATES``).
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
    - ``source``: whose definition it is (``trec_eval 9/10``, ``trec_eval 10``,
      ``twostage``, ``ir_measures: gdeval``, ..., ``ranx``): what ``twostage
      measures`` lists and what the provenance names for each number.
    - ``named``, ``cutoff``, ``fixed``: a family with named parameters
      (``Params.NAMED``, the ir_measures providers' measures): its parameters
      (``Named``), whether ``@k`` is absent, optional or required, and the
      parameters its name always shows (``dcg='exp-log2'``).
    - ``ties``, ``score_precision``: how its ranking breaks score ties
      (``TIES``) and at which precision it compares scores (None: the
      settings', as trec_eval; ``float64``: the peer's Python, Perl or numba
      doubles).
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
    source: str = ""
    named: tuple[Named, ...] = ()
    cutoff: str = "none"
    fixed: tuple = ()
    ties: str = "docid_desc"
    score_precision: str | None = None

    def param(self, name: str) -> Named:
        for p in self.named:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.compute.__doc__ or "")

    @property
    def order(self) -> int:
        return TREC_ORDER.index(self.name)


_FAMILIES: dict[str, Family] = {}
#: family name -> its declaration: a declared registry, filled at import by ``@family`` only, read-only here.
REGISTRY: Mapping[str, Family] = MappingProxyType(_FAMILIES)


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
    source: str | None = None,
    named: tuple[Named, ...] = (),
    cutoff: str = "none",
    fixed: tuple = (),
    ties: str = "docid_desc",
    score_precision: str | None = None,
):
    """Register the decorated compute function as the family ``name`` (see ``Family``).

    ``label`` defaults to the family name; ``ceiling`` to True for families averaged over queries
    (mean or geometric mean), False for counts and strings; ``source`` to the trec_eval generations that
    have it (``since``: 9 is ``trec_eval 9/10``, 10 is ``trec_eval 10``, 0 is ``twostage``)."""
    if name not in TREC_ORDER:
        raise ValueError(f"{name!r} is not in TREC_ORDER; add it there at trec_eval's position")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate {aggregate!r} not one of {AGGREGATES}")
    if placeholder not in PLACEHOLDERS:
        raise ValueError(f"placeholder {placeholder!r} not one of {PLACEHOLDERS}")
    if ties not in TIES or cutoff not in CUTOFFS:
        raise ValueError(f"ties {ties!r} not one of {TIES}, or cutoff {cutoff!r} not one of {CUTOFFS}")
    if (params is Params.NAMED) != bool(named or cutoff != "none"):
        raise ValueError(f"{name}: named parameters and an @ cutoff go with params=Params.NAMED")

    def register(fn: Callable) -> Callable:
        if name in _FAMILIES:
            raise ValueError(f"family {name!r} registered twice")
        _FAMILIES[name] = Family(
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
            ceiling=aggregate in ("mean", "gm", "mean_defined") if ceiling is None else ceiling,
            source=source or {9: "trec_eval 9/10", 10: "trec_eval 10", 0: "twostage"}[since],
            named=tuple(named),
            cutoff=cutoff,
            fixed=tuple(fixed),
            ties=ties,
            score_precision=score_precision,
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
        if kind is Params.NAMED:
            return named_name(self.spec, self.params, self.cutoff)
        if kind is Params.RANX:  # ranx's own spelling (ndcg_burges@10-l2), never a trec_eval name
            return self.printable or self.family
        if kind is Params.LONG_CUTOFFS:
            return f"{self.family}_{self.cutoff}"
        if kind is Params.DOUBLE_CUTOFFS:
            return f"{self.family}_{_fmt_double(self.cutoff)}"
        if self.printable is not None:
            return f"{self.family}_{self.printable}"
        return self.family

    @property
    def arg(self) -> str:
        """This measure in trec_eval's ``-m`` syntax (``P.10``, ``iprec_at_recall.0.2``, ``ndcg.1=3``); a family
        with named parameters is given by its name (``RBP(rel=1)``)."""
        kind = self.spec.params
        if kind in (Params.NAMED, Params.RANX):
            return self.name
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
        if self.spec.params in (Params.NAMED, Params.RANX):
            return self.name
        return self.spec.label if self.name == self.family else self.name

    @property
    def summed(self) -> bool:
        """True for counts (num_ret, ...), which the ``all`` line sums rather than averages."""
        return self.spec.aggregate == "sum"

    @property
    def sort_key(self) -> tuple:
        if self.spec.params is Params.NAMED:  # the defaults first, then fewer parameters given before more
            return self.spec.order, self.cutoff if self.cutoff is not None else 0, (len(self.params), repr(self.params))
        return self.spec.order, self.cutoff if self.cutoff is not None else 0, self.printable or ""

    def param_values(self) -> tuple:
        """The family parameters in effect: the given ones, or the family's defaults."""
        return self.params if self.params else self.spec.defaults

    def value(self, name: str):
        """A named parameter's value in effect (``Params.NAMED``): the one given, else its default."""
        given = dict(self.params)
        if name in given:
            return given[name]
        return dict(self.spec.fixed).get(name, self.spec.param(name).default)

    def __str__(self) -> str:
        return self.name


def irm_repr(value) -> str:
    """A parameter value as ir_measures writes it in a measure's name (``Measure._param_repr``): a dict as
    ``{k:v,...}`` sorted, leaving out the entries that map a label to itself; anything else by ``repr``."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{v}" for k, v in sorted(value.items()) if k != v) + "}"
    return repr(value)


def named_name(spec: Family, params: tuple, cutoff) -> str:
    """A family with named parameters named as ir_measures names it: ``RBP(rel=1)``, ``SDCG(max_rel=3)@10``,
    ``nDCG(dcg='exp-log2')@10``: its label, the parameters that differ from their defaults in the family's
    order (and the fixed ones), then ``@cutoff``."""
    given = dict(params)
    shown = list(spec.fixed)
    for p in spec.named:
        if p.name in given and given[p.name] != p.default:
            shown.append((p.name, given[p.name]))
    text = spec.label
    if shown:
        text += "(" + ",".join(f"{k}={irm_repr(v)}" for k, v in shown) + ")"
    return text + (f"@{cutoff}" if cutoff is not None else "")


def families_in_order() -> list[Family]:
    return sorted(REGISTRY.values(), key=lambda f: f.order)
