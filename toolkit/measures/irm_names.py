"""ir_measures 0.4.3's measure names: its measures and their parameters, the provider it picks for each, and
what twostage computes for the name.

ir_measures evaluates a name with the first provider of its default order (``ir_measures.DefaultPipeline``:
runtime, pytrec_eval, cwl_eval, compat, pyndeval, judged, msmarco, gdeval, accuracy, ranx) whose
``SUPPORTED_MEASURES`` accept the name's parameters. ``PROVIDERS`` copies those declarations, in that order,
and ``provider`` makes the same choice (``tests/measures/test_irm_names.py`` checks both against ir_measures
itself). Each name then means the provider's definition:

- pytrec_eval: the trec_eval measure (``P(rel=2,judged_only=True)@10`` is ``trec_eval -l 2 -J -m P.10``; a
  ``gains`` map relabels the qrels, as the provider does);
- the others: a twostage family with that provider's definition (``ERR@20``: gdeval; ``RBP(rel=1)``:
  cwl_eval; ``alpha_nDCG@10``: pyndeval; ...), declared in the measure modules; the one name only ranx takes,
  ``nDCG(dcg='exp-log2')`` (no cutoff), is ranx's ``ndcg_burges`` at ranx's default level 1, as the provider
  asks ranx for it (``ranx.py``).

A name no provider takes (``ERR`` without a cutoff, ``RBP`` without ``rel``) has no value in ir_measures
either: it is refused, saying why (``NO_PROVIDER``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from toolkit.errors import UnknownMeasureError
from toolkit.guard.numbers import NumberRefused, bounded_int, show
from toolkit.measures.registry import Measure, Named

# ---------------------------------------------------------------- ir_measures' measures
_CUT = Named("cutoff", int, meaning="ranking cutoff threshold")
_CUT_REQ = Named("cutoff", int, required=True, meaning="ranking cutoff threshold")
_REL = Named("rel", int, 1, meaning="minimum relevance score to be considered relevant (inclusive)")
_JO = Named("judged_only", bool, False, meaning="ignore returned documents that do not have relevance judgments")
_MIN = Named("min_rel", int, 0, meaning="minimum relevance score")
_MAX = Named("max_rel", int, required=True, meaning="maximum relevance score")
_T = Named("T", float, 1.0, meaning="total desired gain (normalized)")
_ALPHA = Named("alpha", float, 0.5, meaning="redundancy intolerance")
_BETA = Named("beta", float, 0.5, meaning="patience")

#: Every measure of ir_measures 0.4.3 and its parameters (``SUPPORTED_PARAMS``), under its own name.
MEASURES: Mapping[str, tuple[Named, ...]] = MappingProxyType(
    {
        "Accuracy": (_CUT, _REL),
        "AP": (_CUT, _REL, _JO),
        "AP_IA": (_REL, _JO),
        "BPM": (_CUT_REQ, _T, _MIN, _MAX),
        "Bpref": (_REL,),
        "Compat": (Named("p", float, 0.95, meaning="persistence"), Named("normalize", bool, True)),
        "ERR": (_CUT,),
        "ERR_IA": (_CUT, _REL, _JO),
        "INSQ": (_T, _MIN, _MAX),
        "INST": (_T, _MIN, _MAX),
        "IPrec": (Named("recall", float, required=True, meaning="recall threshold"), _REL, _JO),
        "Judged": (_CUT,),
        "NERR10": (Named("p", float, 0.9, meaning="persistence"), _MIN, _MAX),
        "NERR11": (_T, _MIN, _MAX),
        "NERR8": (_CUT_REQ, _MIN, _MAX),
        "NERR9": (_CUT_REQ, _MIN, _MAX),
        "NRBP": (_REL, _ALPHA, _BETA),
        "NumQ": (),
        "NumRel": (_REL,),
        "NumRet": (Named("rel", int, meaning="minimum relevance score to be counted (inclusive)"),),
        "P": (_CUT_REQ, _REL, _JO),
        "P_IA": (_CUT, _REL, _JO),
        "R": (_CUT_REQ, _REL, _JO),
        "RBP": (_CUT, Named("p", float, 0.8, meaning="persistence"), Named("rel", int)),
        "RR": (_CUT, _REL, _JO),
        "Rprec": (_REL, _JO),
        "SDCG": (_CUT_REQ, Named("dcg", str, "log2", choices=("log2",)), _MIN, _MAX),
        "SetAP": (_REL, _JO),
        "SetF": (_REL, Named("beta", float, 1.0), _JO),
        "SetP": (_REL, Named("relative", bool, False), _JO),
        "SetR": (_REL,),
        "StRecall": (_CUT, _REL),
        "Success": (_CUT_REQ, _REL, _JO),
        "alpha_DCG": (_CUT, _REL, _ALPHA, _JO),
        "alpha_nDCG": (_CUT, _REL, _ALPHA, _JO),
        "infAP": (_REL,),
        "nDCG": (_CUT, Named("dcg", str, "log2", choices=("log2", "exp-log2")), Named("gains", dict), _JO),
        "nERR_IA": (_CUT, _REL, _JO),
        "nNRBP": (_REL, _ALPHA, _BETA),
    }
)
#: ir_measures' second names (``register(..., aliases)``) and its registered instances (``NumRelRet`` is
#: ``NumRet(rel=1)``, ``SetRelP`` is ``SetP(relative=True)``).
SYNONYMS = MappingProxyType(
    {
        "MAP": "AP",
        "NDCG": "nDCG",
        "Precision": "P",
        "Recall": "R",
        "RPrec": "Rprec",
        "BPref": "Bpref",
        "MRR": "RR",
        "MAP_IA": "AP_IA",
        "α_DCG": "alpha_DCG",
        "α_nDCG": "alpha_nDCG",
    }
)
PRESETS: Mapping[str, tuple[str, dict]] = MappingProxyType(
    {"NumRelRet": ("NumRet", {"rel": 1}), "SetRelP": ("SetP", {"relative": True})}
)
#: The parameter ``@`` sets (``AT_PARAM``): the cutoff, except IPrec's recall level.
AT = MappingProxyType({"IPrec": "recall"})

# ---------------------------------------------------------------- its providers, in its default order
ANY, REQUIRED = "any", "required"
#: ``Choices(NOT_PROVIDED)``: the parameter must not be given.
ABSENT = ("<absent>",)

PROVIDERS: tuple[tuple[str, dict[str, dict[str, object]]], ...] = (
    (
        "pytrec_eval",
        {
            "P": {"cutoff": ANY, "rel": ANY, "judged_only": ANY},
            "RR": {"cutoff": ABSENT, "rel": ANY, "judged_only": ANY},
            "Rprec": {"rel": ANY, "judged_only": ANY},
            "AP": {"cutoff": ANY, "rel": ANY, "judged_only": ANY},
            "nDCG": {"cutoff": ANY, "dcg": ("log2",), "gains": ANY, "judged_only": ANY},
            "R": {"cutoff": ANY, "judged_only": ANY},
            "Bpref": {"rel": ANY},
            "NumRet": {"rel": ANY},
            "NumQ": {},
            "NumRel": {"rel": (1,)},
            "SetAP": {"rel": ANY, "judged_only": ANY},
            "SetF": {"rel": ANY, "beta": ANY, "judged_only": ANY},
            "SetP": {"rel": ANY, "relative": ANY, "judged_only": ANY},
            "SetR": {"rel": ANY},
            "Success": {"rel": ANY, "cutoff": ANY, "judged_only": ANY},
            "IPrec": {"recall": ANY, "judged_only": ANY},
            "infAP": {"rel": ANY},
        },
    ),
    (
        "cwl_eval",
        {
            "P": {"cutoff": ANY, "rel": ANY, "judged_only": (False,)},
            "RR": {"cutoff": ABSENT, "rel": ANY, "judged_only": (False,)},
            "AP": {"cutoff": ABSENT, "rel": ANY, "judged_only": (False,)},
            "RBP": {"cutoff": ABSENT, "rel": REQUIRED, "p": ANY},
            "BPM": {"cutoff": ANY, "T": ANY, "min_rel": ANY, "max_rel": REQUIRED},
            "SDCG": {"cutoff": REQUIRED, "dcg": ("log2",), "min_rel": ANY, "max_rel": REQUIRED},
            "NERR8": {"cutoff": REQUIRED, "min_rel": ANY, "max_rel": REQUIRED},
            "NERR9": {"cutoff": REQUIRED, "min_rel": ANY, "max_rel": REQUIRED},
            "NERR10": {"p": ANY, "min_rel": ANY, "max_rel": REQUIRED},
            "NERR11": {"T": ANY, "min_rel": ANY, "max_rel": REQUIRED},
            "INST": {"T": ANY, "min_rel": ANY, "max_rel": REQUIRED},
            "INSQ": {"T": ANY, "min_rel": ANY, "max_rel": REQUIRED},
        },
    ),
    ("compat", {"Compat": {"p": ANY, "normalize": ANY}}),
    (
        "pyndeval",
        {
            "ERR_IA": {"cutoff": ANY, "rel": ANY, "judged_only": ANY},
            "nERR_IA": {"cutoff": ANY, "rel": ANY, "judged_only": ANY},
            "alpha_DCG": {"cutoff": ANY, "alpha": ANY, "rel": ANY, "judged_only": ANY},
            "alpha_nDCG": {"cutoff": ANY, "alpha": ANY, "rel": ANY, "judged_only": ANY},
            "NRBP": {"alpha": ANY, "beta": ANY, "rel": ANY},
            "nNRBP": {"alpha": ANY, "beta": ANY, "rel": ANY},
            "AP_IA": {"rel": ANY, "judged_only": ANY},
            "P_IA": {"cutoff": ANY, "rel": ANY, "judged_only": ANY},
            "StRecall": {"cutoff": ANY, "rel": ANY},
        },
    ),
    ("judged", {"Judged": {"cutoff": ANY}}),
    ("msmarco", {"RR": {"cutoff": ANY, "rel": ANY, "judged_only": (False,)}}),
    (
        "gdeval",
        {
            "nDCG": {"cutoff": REQUIRED, "dcg": ("exp-log2",), "gains": ABSENT, "judged_only": (False,)},
            "ERR": {"cutoff": REQUIRED},
        },
    ),
    ("accuracy", {"Accuracy": {"cutoff": ANY, "rel": ANY}}),
    (
        "ranx",
        {
            "P": {"cutoff": ANY, "rel": ANY, "judged_only": (False,)},
            "SetP": {"rel": ANY, "judged_only": (False,)},
            "RR": {"cutoff": ABSENT, "rel": ANY, "judged_only": (False,)},
            "Rprec": {"rel": ANY, "judged_only": (False,)},
            "AP": {"cutoff": ANY, "rel": ANY, "judged_only": (False,)},
            "nDCG": {"cutoff": ANY, "dcg": ("log2", "exp-log2"), "gains": ABSENT, "judged_only": (False,)},
            "R": {"cutoff": ANY, "judged_only": (False,)},
            "SetR": {"rel": ANY},
            "NumRet": {"rel": REQUIRED},
            "Success": {"cutoff": REQUIRED, "rel": ANY, "judged_only": (False,)},
        },
    ),
)

#: The twostage source each provider's definitions are registered under.
SOURCES = MappingProxyType(
    {
        "pytrec_eval": "trec_eval",
        "cwl_eval": "ir_measures: cwl_eval",
        "compat": "ir_measures: compat",
        "pyndeval": "ir_measures: pyndeval",
        "judged": "ir_measures: judged",
        "msmarco": "ir_measures: msmarco",
        "gdeval": "ir_measures: gdeval",
        "accuracy": "ir_measures: accuracy",
        "ranx": "ranx",
    }
)


@dataclass(frozen=True)
class Name:
    """An ir_measures name read: the measure, its parameters as given (in the order given) and the ``@``
    value under its parameter's name."""

    measure: str
    given: dict = field(default_factory=dict)
    text: str = ""

    def __getitem__(self, key: str):
        """The value in effect: given, else the default (None: not given and without a default)."""
        if key in self.given:
            return self.given[key]
        return _spec(self.measure, key).default

    @property
    def label(self) -> str:
        """The name as ir_measures writes a measure (its ``repr``), with every parameter given shown."""
        at = AT.get(self.measure, "cutoff")
        shown = [(k, v) for k, v in self.given.items() if k != at]
        text = self.measure
        if shown:
            text += "(" + ",".join(f"{k}={_repr(v)}" for k, v in shown) + ")"
        return text + (f"@{_at_text(self.given[at])}" if at in self.given else "")


def _repr(value) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{v}" for k, v in sorted(value.items())) + "}"
    return repr(value)


def _at_text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _spec(measure: str, param: str) -> Named:
    for p in MEASURES[measure]:
        if p.name == param:
            return p
    raise KeyError(param)


def canonical(name: str) -> str | None:
    """The ir_measures measure a name means, whatever its case (``ndcg`` -> ``nDCG``); None if none."""
    return _LOWER.get(name.lower())


_LOWER = (
    {n.lower(): n for n in MEASURES} | {k.lower(): v for k, v in SYNONYMS.items()} | {k.lower(): k for k in PRESETS}
)


def parse_args(text: str, args: str | None) -> dict:
    """``(rel=2,judged_only=True)`` -> {"rel": 2, "judged_only": True}: Python literals, as ir_measures
    reads them (``ast``); nothing is evaluated."""
    if not args:
        return {}
    try:
        call = ast.parse(f"f{args}", mode="eval").body
    except SyntaxError:
        raise UnknownMeasureError(f"{text!r}: the parameters {args} are not name=value pairs") from None
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise UnknownMeasureError(f"{text!r}: parameters are given by name, e.g. RBP(p=0.8,rel=1)")
    out = {}
    for k in call.keywords:
        try:
            out[k.arg] = ast.literal_eval(k.value)
        except ValueError:
            raise UnknownMeasureError(
                f"{text!r}: {k.arg}= must be a number, True/False, a quoted string or a {{label: gain}} map"
            ) from None
    return out


def read(text: str, name: str, args: str | None, at) -> Name:
    """The ir_measures name ``text`` (measure ``name`` as written, ``args`` and the ``@`` value parsed),
    checked against the measure's parameters as ir_measures checks them (``validate_params``)."""
    written = canonical(name)
    if written is None:
        raise UnknownMeasureError(f"unknown measure {text!r}")
    measure, given = written, {}
    if written in PRESETS:
        measure, preset = PRESETS[written]
        given.update(preset)
    given.update(parse_args(text, args))
    if at is not None:
        given[AT.get(measure, "cutoff")] = at
    known = {p.name: p for p in MEASURES[measure]}
    unknown = [k for k in given if k not in known]
    if unknown:
        takes = ", ".join(known) or "no parameters"
        extra = (
            "; a relevance level does not apply (nDCG uses the graded labels)"
            if measure == "nDCG" and "rel" in unknown
            else ""
        )
        raise UnknownMeasureError(f"{text!r}: {measure} takes no {', '.join(unknown)}= (it takes {takes}){extra}")
    for k, v in list(given.items()):
        given[k] = _typed(text, known[k], v)
    missing = [p.name for p in known.values() if p.required and p.name not in given]
    if missing:
        need = ", ".join("@k" if m == AT.get(measure, "cutoff") else f"{m}=" for m in missing)
        raise UnknownMeasureError(f"{text!r}: {measure} needs {need} (ir_measures requires it)")
    return Name(measure, given, text)


def _typed(text: str, spec: Named, value):
    """``value`` as ``spec``'s kind: an int where a float is expected is taken as that float (ir_measures wants
    ``T=2.0``); any other mismatch is refused, as ir_measures refuses it."""
    kind = spec.kind
    for number in (*value.keys(), *value.values()) if isinstance(value, dict) else (value,):
        _bounded(text, spec.name, number)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if not ok:
        raise UnknownMeasureError(f"{text!r}: {spec.name}={value!r} is not {_KINDS[kind]}")
    if spec.choices and value not in spec.choices:
        raise UnknownMeasureError(f"{text!r}: {spec.name} must be one of {', '.join(map(repr, spec.choices))}")
    if kind is dict:
        bad = [
            (k, v) for k, v in value.items() if not isinstance(k, int) or not isinstance(v, int) or isinstance(v, bool)
        ]
        if bad or any(v < 0 for v in value.values()):
            raise UnknownMeasureError(
                f"{text!r}: gains map labels to whole gains >= 0 (ir_measures hands them to pytrec_eval as labels, "
                "where a negative one would mean 'unjudged')"
            )
    return value


def _bounded(text: str, name: str, number: object) -> None:
    """A number written in a name is read by the numbers door's bounds: an integer of at most 64 bits, a finite
    float (``rel=<5,000 digits>`` or ``p=1e999`` mean nothing; the refusal never converts the value)."""
    if isinstance(number, int) and not isinstance(number, bool):
        try:
            bounded_int(number, what=f"{name}=")
        except NumberRefused as exc:
            raise UnknownMeasureError(f"{show(text)}: {exc}") from None
    elif isinstance(number, float) and not math.isfinite(number):
        raise UnknownMeasureError(f"{show(text)}: {name}= must be a finite number")


_KINDS = MappingProxyType(
    {
        int: "an integer",
        float: "a number",
        bool: "True or False",
        str: "a quoted string",
        dict: "a {label: gain} map",
    }
)


def supports(provider: dict[str, dict[str, object]], name: Name) -> bool:
    """ir_measures' ``Provider.supports``: a declaration of the measure accepts each of its listed parameters."""
    spec = provider.get(name.measure)
    if spec is None:
        return False
    for param, rule in spec.items():
        given = param in name.given
        value = name[param]
        if rule == REQUIRED and not (given or value is not None):
            return False
        if rule == ABSENT and (given or value is not None):
            return False
        if isinstance(rule, tuple) and rule != ABSENT and value not in rule:
            return False
    return True


def provider(name: Name) -> str | None:
    """The provider ir_measures 0.4.3's default pipeline evaluates ``name`` with; None when none does."""
    for pname, declared in PROVIDERS:
        if supports(declared, name):
            return pname
    return None


# ---------------------------------------------------------------- what the name is in twostage
@dataclass(frozen=True)
class Meaning:
    """What an ir_measures name is in twostage: a family with its parameters (trec_eval's ``-m`` text, None for
    the defaults, or the ``Measure`` itself for a family with named parameters), the settings the name carries
    (relevance level, ``-J``, a gain relabelling), and the label results show."""

    family: str
    params: object
    label: str
    level: int | None = None
    judged_only: bool | None = None
    gains: tuple = ()
    provider: str = ""


def meaning(name: Name) -> Meaning:
    """``name`` as its provider defines it, in twostage's terms; refused when ir_measures has no provider for
    it or when its provider cannot evaluate it (the reason is said)."""
    which = provider(name)
    if which is None:
        raise UnknownMeasureError(f"{name.text!r}: {no_provider(name)}")
    label = name.label
    if which == "ranx":  # only nDCG(dcg='exp-log2') without a cutoff reaches it: pytrec_eval and gdeval take the rest
        shown = "nDCG(dcg='exp-log2')"  # named without the defaults given (judged_only=False), as the others
        m = Measure("ranx_ndcg_burges", None, (("l", 1),), shown)
        return Meaning(m.family, m, shown, provider=which)
    if which == "pytrec_eval":
        return _trec(name, label)
    judged_only = True if name.given.get("judged_only") else None
    m = _family_measure(name, which)
    return Meaning(m.family, m, label if judged_only else m.name, judged_only=judged_only, provider=which)


#: The trec_eval family of each pytrec_eval name, with and without a cutoff.
_TREC = MappingProxyType(
    {
        "P": ("P", None),
        "RR": (None, "recip_rank"),
        "Rprec": (None, "Rprec"),
        "AP": ("map_cut", "map"),
        "nDCG": ("ndcg_cut", "ndcg"),
        "R": ("recall", None),
        "Bpref": (None, "bpref"),
        "NumQ": (None, "num_q"),
        "NumRel": (None, "num_rel"),
        "SetAP": (None, "set_map"),
        "SetR": (None, "set_recall"),
        "Success": ("success", None),
        "IPrec": ("iprec_at_recall", None),
        "infAP": (None, "infAP"),
    }
)


def _trec(name: Name, label: str) -> Meaning:
    g = name.given
    at = g.get(AT.get(name.measure, "cutoff"))
    params: object = None
    if name.measure == "NumRet":
        fam = "num_rel_ret" if "rel" in g else "num_ret"
    elif name.measure == "SetP":
        fam = "set_relative_P" if name["relative"] else "set_P"
    elif name.measure == "SetF":
        fam = "set_F"
        params = None if name["beta"] == 1.0 else repr(float(name["beta"]))
    else:
        with_cut, without = _TREC[name.measure]
        fam = with_cut if at is not None else without
        if fam is None:
            raise UnknownMeasureError(f"{name.text!r}: {name.measure} needs @k")
        if at is not None:
            params = repr(at) if isinstance(at, float) else str(at)
    level = g.get("rel") if name.measure not in ("NumQ",) and "rel" in g else None
    gains = tuple(sorted(g["gains"].items())) if "gains" in g else ()
    judged_only = g.get("judged_only")
    if params is None:  # this one measure, not the family's defaults (set_F beside set_F.0.5 stays)
        params = Measure(fam)
    return Meaning(fam, params, label, level=level, judged_only=judged_only, gains=gains, provider="pytrec_eval")


def _family_measure(name: Name, which: str) -> Measure:
    """The twostage measure of a name another provider than pytrec_eval evaluates."""
    fam = {"gdeval": {"nDCG": "gdeval_nDCG"}, "msmarco": {"RR": "msmarco_RR"}}.get(which, {}).get(
        name.measure, name.measure
    )
    m = Measure(fam)  # the family exists (registered by the measure modules)
    spec = m.spec
    params = tuple((p.name, name.given[p.name]) for p in spec.named if p.name != "cutoff" and p.name in name.given)
    cutoff = name.given.get("cutoff")
    if spec.cutoff == "none" and cutoff is not None:
        raise UnknownMeasureError(f"{name.text!r}: {which} takes no cutoff for {name.measure}")
    if spec.cutoff == "required" and cutoff is None:
        raise UnknownMeasureError(f"{name.text!r}: {which} needs a cutoff, e.g. {name.measure}@10")
    return Measure(fam, cutoff, params)


def no_provider(name: Name) -> str:
    """Why ir_measures 0.4.3 evaluates ``name`` with none of its providers (it raises 'Unsupported measures')."""
    why = NO_PROVIDER.get(name.measure)
    return "ir_measures 0.4.3 has no provider for it" + (f" ({why})" if why else "")


#: For the names some parameters leave without a provider: which ones do take them.
NO_PROVIDER = MappingProxyType(
    {
        "ERR": "gdeval computes ERR at a cutoff: ERR@k",
        "RBP": "cwl_eval computes RBP with binary gains, rel=N, and no cutoff: RBP(rel=1), RBP(p=0.9,rel=1); "
        "trec_eval's graded rbp is rbp.p=0.8",
        "NumRel": "pytrec_eval counts NumRel at rel=1 only; trec_eval's num_rel at another level is -l N -m num_rel",
        "RR": "with a cutoff, msmarco computes RR without judged_only; pytrec_eval computes RR(judged_only=True) "
        "without a cutoff",
        "nDCG": "exponential gains (dcg='exp-log2') come from gdeval at a cutoff and from ranx without one, "
        "neither with gains= or judged_only",
        "SDCG": "cwl_eval's SDCG takes dcg='log2' only",
    }
)


def listing() -> list[str]:
    """One line per ir_measures name for ``twostage measures``: its parameters, then each provider that declares
    it, in ir_measures' order, with the parameters it takes and the twostage family that follows it."""
    lines = []
    for measure, params in sorted(MEASURES.items(), key=lambda kv: kv[0].lower()):
        given = ",".join(p.name + ("!" if p.required else "") for p in params) or "-"
        roles = []
        for pname, declared in PROVIDERS:
            rules = declared.get(measure)
            if rules is None:
                continue
            cond = ",".join(_rule_text(k, v) for k, v in rules.items() if v != ANY)
            roles.append(f"{pname}{f'[{cond}]' if cond else ''}: {_family_text(pname, measure)}")
        synonyms = [k for k, v in SYNONYMS.items() if v == measure] + [
            k for k, (v, _) in PRESETS.items() if v == measure
        ]
        also = f" (also {', '.join(synonyms)})" if synonyms else ""
        lines.append(f"{measure}{also}({given}): " + "; ".join(roles))
    return lines


def _rule_text(param: str, rule: object) -> str:
    if rule == REQUIRED:
        return f"{param} given"
    if rule == ABSENT:
        return f"no {param}"
    return f"{param} in {'/'.join(map(repr, rule))}"  # type: ignore[arg-type]


def _family_text(pname: str, measure: str) -> str:
    if pname == "pytrec_eval":
        if measure in _TREC:
            return "trec_eval " + "/".join(f for f in _TREC[measure] if f)
        return {"NumRet": "trec_eval num_ret/num_rel_ret", "SetP": "trec_eval set_P/set_relative_P"}.get(
            measure, "trec_eval set_F"
        )
    if pname == "ranx" and measure == "nDCG":
        return "ranx_ndcg_burges for dcg='exp-log2' without a cutoff (ranx's ndcg_burges-l1; the rest: pytrec_eval or gdeval first)"
    if pname in ("cwl_eval", "ranx") and measure in (
        "P",
        "RR",
        "AP",
        "SetP",
        "Rprec",
        "R",
        "SetR",
        "NumRet",
        "Success",
    ):
        return "never reached (pytrec_eval takes every such name first)"
    return {"gdeval": {"nDCG": "gdeval_nDCG"}, "msmarco": {"RR": "msmarco_RR"}}.get(pname, {}).get(measure, measure)
