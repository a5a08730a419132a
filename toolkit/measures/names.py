"""Measure names as users write them, and the settings that change a number.

``parse_measures`` reads trec_eval's ``-m`` syntax (``P.5,10``,
``iprec_at_recall..10,.20``, ``ndcg.1=3,2=9``, ``utility.2,-1,0,0``,
``ndcg_cut.23.4``), trec_eval's printed names (``P_10``, ``ndcg_cut_10``),
trec_eval's nicknames (``official``, ``all_trec``, ``set``, ``all_prefs``,
``prefs``, ``qrels_jg``) and every ir_measures 0.4.3 name with its parameters,
in any case and with ir_measures' synonyms (``nDCG@10``, ``ndcg@10``,
``MAP@1000``, ``MRR``, ``ERR@20``, ``RBP(p=0.8,rel=1)``, ``alpha_nDCG@10``),
each meaning what the provider ir_measures picks for it computes
(``irm_names``): a trec_eval measure for pytrec_eval's names, a family of
its own for the other providers'; a name ir_measures has no provider for is
refused with the reason. ``MRR@10`` written so is MS MARCO's official MRR@10
(``msmarco.py``; ``mrr@10`` and ``MRR(rel=1)@10`` stay ir_measures' RR@10).
ranx's names (``ndcg_burges@10``, ``mrr-l2``,
``rbp.8``) are read with ranx's definitions, in their own block below
(``_ranx_name``), before the ir_measures names, which are read in any case:
``precision``, ``rbp@8`` or ``ndcg@10-l2`` would otherwise be read, or
refused, as ir_measures' ``P``, ``RBP@8`` or ``nDCG@...``. A pytrec_eval name may carry its own relevance level, condensed list or gains
(``AP(rel=2)@1000``, ``P(judged_only=True)@10``,
``nDCG(gains={2:4,3:10})@10``):
``parse_measure_groups`` returns such measures in evaluation groups, one per
distinct ``Overrides`` (``toolkit.evaluation.groups`` evaluates them). An
unknown name gets at most five suggestions, each with what it computes.

As in trec_eval, a family named with parameters uses those parameters
instead of its defaults, even when a nickname also names it
(``-m all_trec -m relstring.20`` gives relstring_20 only). Unlike trec_eval,
which keeps the first parameter list and silently drops later ones, twostage
takes the union of cutoffs (``-m P.5 -m P.10``) and computes each distinct
parameter set of the other families.

What each measure *is* lives in its family's declaration (``registry.py``;
``trec.py``, ``prefs.py``, and the peers' ``gdeval.py``, ``cwl.py``,
``compat.py``, ``diversity.py``, ``irm_simple.py``, ``ranx.py``; ``twostage
measures`` prints them).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import Any

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION
from toolkit.errors import ConfigError, UnknownMeasureError, phrase
from toolkit.guard.numbers import NumberRefused, integer, is_integer, natural, show
from toolkit.measures import compat, cwl, diversity, gdeval, irm_simple, msmarco  # noqa: F401  (the peers' families)
from toolkit.measures import irm_names as irm
from toolkit.measures import prefs as pref_measures  # noqa: F401  (registers every family)
from toolkit.measures import ranx as ranx_measures  # noqa: F401  (registers ranx's families)
from toolkit.measures.gains import Discount, Gain
from toolkit.measures.registry import REGISTRY, Measure, Params, families_in_order
from toolkit.measures.settings import SETTING_NAMES, SETTINGS
from toolkit.options import nested

log = logging.getLogger(__name__)

TREC_EVAL_VERSIONS = (9, 10)
DEFAULT_TREC_EVAL = 9

_OFFICIAL = (
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
)
_ALL_TREC = _OFFICIAL + (
    "relstring",
    "recall",
    "infAP",
    "gm_bpref",
    "utility",
    "11pt_avg",
    "ndcg",
    "relative_P",
    "Rprec_mult",
    "success",
    "map_cut",
    "ndcg_cut",
    "ndcg_rel",
    "Rndcg",
    "binG",
    "G",
    "set_P",
    "set_recall",
    "set_relative_P",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
    "rbp",
    "rbp_resid",
    "unj",
)
_SET = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "utility",
    "set_P",
    "set_recall",
    "set_relative_P",
    "set_map",
    "set_F",
)
_ALL_PREFS = (
    "runid",
    "num_q",
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
)
_PREFS = (
    "runid",
    "num_q",
    "prefs_num_prefs_poss",
    "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret",
    "prefs_simp",
    "prefs_pair",
    "prefs_avgjg",
)
_QRELS_JG = ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg")

#: trec_eval's nicknames (``measures.c``); a trec_eval 9 evaluation leaves out the families 9 does not have.
NICKNAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "official": _OFFICIAL,
        "set": _SET,
        "all_trec": _ALL_TREC,
        "all_prefs": _ALL_PREFS,
        "prefs": _PREFS,
        "qrels_jg": _QRELS_JG,
    }
)

#: What ``twostage eval`` computes without -m: trec_eval's default.
DEFAULT_MEASURES = ("official",)

#: Names twostage reads beside ir_measures' own (``irm_names``): GMAP, an earlier ir_measures name of gm_map.
_EXTRA_ALIASES: Mapping[str, str] = MappingProxyType({"GMAP": "gm_map"})
#: Every ir_measures name twostage knows, lower-cased -> as ir_measures spells it (names are case-insensitive).
_CANONICAL: dict[str, str] = {k.lower(): k for k in irm.SYNONYMS} | {
    n.lower(): n for n in [*irm.MEASURES, *irm.PRESETS, *_EXTRA_ALIASES]
}
#: ir_measures names that take a cutoff (``nDCG@10``), for suggestions.
_CUTOFF_NAMES = {n for n, ps in irm.MEASURES.items() if any(p.name == "cutoff" for p in ps)} | {"IPrec"}
#: Names people type for a measure under another name: lower-cased -> the ir_measures name meant.
_MEANT = MappingProxyType(
    {"mrr": "RR", "map": "AP", "ndcg": "nDCG", "recall": "R", "precision": "P", "p": "P", "r": "R"}
)
_ALIAS_RE = re.compile(r"(?P<name>[^\W\d]\w*)(?P<args>\([^)]*\))?(?:@(?P<cut>[^\s()]+))?")
#: At most this many suggestions for an unknown name; `twostage measures` lists everything.
MAX_SUGGESTIONS = 5

# ASCII digits only ([0-9], not \d: a name's numbers are read as trec_eval's atof reads them), each integer
# through the numbers door (toolkit.guard.numbers)
_INT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]*)?")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Overrides:
    """Settings one measure carries in its ir_measures name: ``AP(rel=2)@1000`` (level 2),
    ``P(judged_only=True)@10`` (``-J``), ``nDCG(gains={2:4,3:10})@10`` (the qrels' labels 2 and 3 read as
    4 and 10, the others as themselves: pytrec_eval is given the qrels relabelled so).

    ``max_docs`` is trec_eval's ``-M`` for that measure alone; under a global ``-M`` the smaller wins. A
    setting the name does not give is the command's own.
    """

    relevance_level: int | None = None
    max_docs: int | None = None
    judged_only: bool | None = None
    gain: Gain | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.relevance_level, self.max_docs, self.judged_only, self.gain))

    def apply(self, settings: EvalSettings) -> EvalSettings:
        level = settings.relevance_level if self.relevance_level is None else self.relevance_level
        depth = settings.max_docs
        if self.max_docs is not None:
            depth = self.max_docs if depth is None else min(depth, self.max_docs)
        judged = settings.judged_only if self.judged_only is None else self.judged_only
        gain = settings.gain if self.gain is None else self.gain
        return replace(settings, relevance_level=level, max_docs=depth, judged_only=judged, gain=gain)

    @property
    def sort_key(self) -> tuple:
        return (
            self.relevance_level or 0,
            self.max_docs or 0,
            bool(self.judged_only),
            self.gain.table if self.gain is not None else (),
        )


@dataclass(frozen=True)
class LabelledMeasure(Measure):
    """A measure computed under its own settings, named as the user wrote it (``AP(rel=2)@1000``)."""

    label: str = ""

    @property
    def name(self) -> str:
        return self.label


@dataclass(frozen=True)
class MeasureGroup:
    """Measures evaluated together under one set of overrides (none: the command's own settings).

    ``labels`` maps each measure of an overridden group to its ir_measures name.
    """

    overrides: Overrides
    measures: tuple[Measure, ...]
    labels: dict = field(default_factory=dict)

    def labelled(self) -> list[Measure]:
        """The measures as results name them: the labelled ones for an overridden group."""
        if not self.overrides:
            return list(self.measures)
        return [LabelledMeasure(m.family, m.cutoff, m.params, m.printable, label=self.labels[m]) for m in self.measures]


#: Families named only in their peer's syntax, never by their registry name: those with named parameters go by
#: their ir_measures name (``RBP(rel=1)``), ranx's by ranx's (``ndcg_burges@10``; ``ranx_rbp`` names no persistence).
_PEER_SYNTAX = (Params.NAMED, Params.RANX)


def known_families(version: int | None = None) -> list[str]:
    """The families trec_eval's ``-m`` syntax names (the peers' go by their own names: ``_PEER_SYNTAX``)."""
    return [
        f.name for f in families_in_order() if (version is None or f.since <= version) and f.params not in _PEER_SYNTAX
    ]


def is_ir_measures_name(text: str) -> bool:
    """Whether ``text`` is read as an ir_measures name (labelled as typed) rather than trec_eval's syntax."""
    if text in NICKNAMES or text in REGISTRY:
        return False
    return "@" in text or "(" in text or text.lower() in _CANONICAL


def parse_measure(text: str, version: int = DEFAULT_TREC_EVAL) -> list[Measure]:
    """The measures one ``-m`` argument names (see the module docstring)."""
    return parse_measures([text], version)


def parse_measures(texts, version: int = DEFAULT_TREC_EVAL) -> list[Measure]:
    """All measures of several ``-m`` arguments, deduplicated, in trec_eval's print order.

    Names with their own settings (``AP(rel=2)@1000``, ``RR@10``) need ``parse_measure_groups``:
    here they are refused, naming the command that computes them.
    """
    groups = parse_measure_groups(texts, version)
    own = [g for g in groups if g.overrides]
    if own:
        names = ", ".join(sorted(g.labels[m] for g in own for m in g.measures))
        raise UnknownMeasureError(
            f"{names}: a measure with its own relevance level or depth is not accepted here "
            "(evaluate, compare and `twostage eval`/`compare` accept it)"
        )
    return list(groups[0].measures) if groups else []


def parse_measure_args(measures: Any, version: int, default: Iterable[str] | None = None) -> list:
    """Measures from one or a list of: trec_eval or ir_measures names, ir_measures measure objects (by their
    string form) and the toolkit's own ``Measure`` values; ``default`` (trec_eval's ``official``) when none."""
    if measures is None:
        items: list = []
    elif isinstance(measures, (str, Measure)) or not isinstance(measures, Iterable):
        items = [measures]
    else:
        items = list(measures)
    own = [m for m in items if isinstance(m, Measure)]
    texts = [str(m) for m in items if not isinstance(m, Measure)]
    if not items:
        texts = list(default if default is not None else DEFAULT_MEASURES)
    return own + (parse_measures(texts, version) if texts else [])


def parse_measure_groups(texts, version: int = DEFAULT_TREC_EVAL) -> list[MeasureGroup]:
    """The measures of several ``-m`` arguments in evaluation groups: the plain ones first, then one
    group per distinct ``Overrides``; each group's measures deduplicated, in trec_eval's order."""
    if version not in TREC_EVAL_VERSIONS:
        raise UnknownMeasureError(f"trec_eval version must be one of {TREC_EVAL_VERSIONS}, not {version!r}")
    requests: dict[Overrides, list[tuple[str, str | None, str]]] = {}
    for raw in texts:
        text = str(raw).strip()
        if not text:
            raise UnknownMeasureError("empty measure name")
        for fam, params, overrides, label in _resolve(text, version):
            requests.setdefault(overrides, []).append((fam, params, label))
    groups = []
    for overrides in sorted(requests, key=lambda o: (bool(o), o.sort_key)):
        measures, labels = _group_measures(requests[overrides], version)
        groups.append(MeasureGroup(overrides, tuple(measures), labels if overrides else {}))
    return groups


def measure_groups(measures: Any, version: int) -> list[MeasureGroup]:
    """Measure groups as ``twostage eval -m`` makes them (per-measure settings such as ``RR@10`` or
    ``P(rel=2)@10`` get their own group); the toolkit's own ``Measure`` values form one plain group."""
    items = measures if isinstance(measures, (list, tuple)) else [measures]
    if any(isinstance(m, Measure) for m in items):
        return [MeasureGroup(Overrides(), tuple(parse_measure_args(measures, version)))]
    texts = [str(m) for m in items if m is not None]
    return parse_measure_groups(texts or list(DEFAULT_MEASURES), version)


def in_request_order(texts, version: int = DEFAULT_TREC_EVAL) -> list[Measure]:
    """Every measure of several ``-m`` arguments as results name them (``MeasureGroup.labelled``), in the order
    the arguments were given (one argument naming several, ``P.5,10``, in trec_eval's order within it; a measure
    named twice keeps its first place): the order a table shows them in and the first one a table ranks by."""
    seen: dict[str, Measure] = {}
    for text in texts:
        for m in labelled_measures(text, version):
            seen.setdefault(m.name, m)
    return list(seen.values())


def labelled_measures(text: str, version: int = DEFAULT_TREC_EVAL) -> list[Measure]:
    """The measures one ``-m`` argument names, as results name them (``MeasureGroup.labelled``)."""
    return [m for g in parse_measure_groups([text], version) for m in g.labelled()]


def _group_measures(requests, version: int) -> tuple[list[Measure], dict[Measure, str]]:
    bare: set[str] = set()
    explicit: dict[str, list[str]] = {}
    labels: dict[Measure, str] = {}
    built: set[Measure] = set()
    for fam, params, _label in requests:
        if isinstance(params, Measure):  # a family with named parameters, read from its ir_measures name
            built.add(params)
        elif params is None:
            bare.add(fam)
        else:
            explicit.setdefault(fam, []).append(params)
    measures: set[Measure] = set(built)
    for fam in bare | set(explicit):
        spec = REGISTRY[fam]
        if spec.since > version:
            # dcg: the same number as ranx's dcg-l1 (ranx's rbp.P is another number: raw labels as gains)
            ranx = f"; ranx's {fam} is {fam}-l1" if fam in RANX_METRICS and fam != "rbp" else ""
            raise UnknownMeasureError(
                f"{fam} is a trec_eval {spec.since} measure; trec_eval {version} has none "
                f"(pass {phrase(f'trec_eval={spec.since}', f'--trec-eval {spec.since}')}){ranx}"
            )
        if fam in explicit:
            for params in explicit[fam]:
                measures.update(_with_params(fam, params, version))
        else:
            measures.update(_defaults(fam))
    for m in measures:
        err = m.spec.check(m) if m.spec.check else None
        if err:
            raise UnknownMeasureError(err)
    for fam, params, label in requests:  # an overridden name means exactly one measure
        if isinstance(params, Measure):
            labels[params] = label
            continue
        for m in _with_params(fam, params, version) if params is not None else _defaults(fam):
            labels[m] = label
    return sorted(measures, key=lambda m: m.sort_key), labels


_PLAIN = Overrides()


def _resolve(text: str, version: int) -> list[tuple[str, str | None, Overrides, str]]:
    """(family, parameter text or None for defaults, overrides, label) for one name."""
    if text in NICKNAMES:
        return [(f, None, _PLAIN, f) for f in NICKNAMES[text] if REGISTRY[f].since <= version]
    if text in REGISTRY and REGISTRY[text].params not in _PEER_SYNTAX:
        return [(text, None, _PLAIN, text)]
    official = _MSMARCO_MRR.fullmatch(text)
    if official:
        return [_msmarco_mrr(text, official.group("cut"))]
    ranx = _ranx_name(text)
    if ranx:
        return [ranx]
    name, dot, params = text.partition(".")
    if name in NICKNAMES and dot:
        raise UnknownMeasureError(f"{text!r}: the nickname {name!r} takes no parameters")
    if name in REGISTRY and dot and REGISTRY[name].params not in _PEER_SYNTAX:
        if not params:
            raise UnknownMeasureError(f"{text!r}: no parameters after the '.' (trec_eval: 'improper measure')")
        if REGISTRY[name].params is Params.NONE:
            raise UnknownMeasureError(f"{name} takes no parameters (got {params!r})")
        return [(name, params, _PLAIN, text)]
    printed = _printed_name(text)
    if printed:
        try:
            _with_params(*printed, version)
            return [(*printed, _PLAIN, text)]
        except UnknownMeasureError:
            pass  # not a printed name after all (a typo such as ndcg_cutt.10)
    alias = _alias(text)
    if alias:
        return [alias]
    raise UnknownMeasureError(_unknown_message(text, version))


#: MS MARCO's official MRR@k, written so (``MRR@10``: upper case, a cutoff, no parameters); every other spelling
#: (``mrr@10``, ``MRR(rel=1)@10``, ``RR@10``) keeps ir_measures' meaning, its RR@k (``msmarco.py`` says how they differ).
_MSMARCO_MRR = re.compile(r"MRR@(?P<cut>[0-9]+)", re.ASCII)


def _msmarco_mrr(text: str, cut: str) -> tuple[str, Measure, Overrides, str]:
    """``MRR@k``: MS MARCO's official MRR at cutoff k (its digits through the numbers door, k > 0)."""
    try:
        depth = natural(cut, what="cutoff")
    except NumberRefused as exc:
        raise UnknownMeasureError(f"{show(text)}: {exc}") from None
    if not depth:
        raise UnknownMeasureError(f"{show(text)}: the cutoff of MS MARCO's MRR@k must be a positive integer")
    measure = Measure("msmarco_MRR", depth)
    if measure.name != text:
        log.info("twostage: %r read as %r", text, measure.name)
    return "msmarco_MRR", measure, _PLAIN, measure.name


def _printed_name(text: str) -> tuple[str, str] | None:
    """A name as trec_eval prints it (P_10, iprec_at_recall_0.10, ndcg_1=3,2=9): the longest family prefix."""
    best = None
    for fam, spec in REGISTRY.items():
        if spec.params is Params.NONE or spec.params in _PEER_SYNTAX:
            continue
        if text.startswith(fam + "_") and (best is None or len(fam) > len(best)):
            best = fam
    if best is None:
        return None
    rest = text[len(best) + 1 :]
    return (best, rest) if rest else None


def _alias(text: str) -> tuple | None:
    """An ir_measures name (any case): (family, parameters, overrides, label), or None when ``text`` is not
    one. Its meaning is its provider's, as ir_measures 0.4.3 picks it (``irm_names``)."""
    m = _ALIAS_RE.fullmatch(text)
    if not m or m.group("name").lower() not in _CANONICAL:
        return None
    written, args, cut = m.group("name"), m.group("args"), m.group("cut")
    name = _CANONICAL[written.lower()]
    if name in _EXTRA_ALIASES:
        if args or cut:
            raise UnknownMeasureError(f"{text!r}: {name} takes no parameters")
        return _EXTRA_ALIASES[name], None, _PLAIN, name
    if name != written and _MSMARCO_MRR.fullmatch(text.replace(written, name, 1)):
        log.info("twostage: %r read as ir_measures' RR@k (MRR@k written so is MS MARCO's official MRR@k)", text)
    elif name != written:
        log.info("twostage: %r read as the ir_measures name %r", text, text.replace(written, name, 1))
    at = None
    if cut is not None:
        at = _at_value(text, cut, irm.canonical(name) == "IPrec")
    meant = irm.meaning(irm.read(text, name, args, at))
    overrides = Overrides(
        relevance_level=meant.level,
        judged_only=meant.judged_only,
        gain=Gain("relabel", tuple((int(k), float(v)) for k, v in meant.gains)) if meant.gains else None,
    )
    return meant.family, meant.params, overrides, meant.label


def _at_value(text: str, cut: str, recall: bool):
    """The value after ``@``: a positive integer cutoff (IPrec: a recall level, a number)."""
    if recall:
        if not _FLOAT.fullmatch(cut):
            raise UnknownMeasureError(f"{text!r}: the recall level after @ must be a number")
        return float(cut)
    depth = _natural(cut)
    if not depth:
        raise UnknownMeasureError(f"{text!r}: the cutoff must be a positive integer" + _hint(text))
    return depth


def _unknown_message(text: str, version: int) -> str:
    shown = _suggestions(text, version)
    hint = f"; did you mean {', '.join(shown)}?" if shown else ""
    return f"unknown measure {text!r}{hint} (`twostage measures` lists every measure)"


def _hint(text: str) -> str:
    shown = _suggestions(text, DEFAULT_TREC_EVAL)
    return (f"; did you mean {', '.join(shown)}?" if shown else "") + " (`twostage measures` lists every measure)"


def _suggestions(text: str, version: int) -> list[str]:
    """At most ``MAX_SUGGESTIONS`` names that compute what ``text`` probably means, each with what it is.

    A name in another style with a cutoff (``recall@1k``, ``p.5``) gets the measures it means; only
    when there is none do spelling neighbours (``ndcg_cutt.10`` -> ``ndcg_cut.10``) fill in.
    """
    m = _TYPED.fullmatch(text)
    name = m.group("name") if m else text.partition(".")[0]
    cut = _cutoff_text(m.group("cut")) if m and m.group("cut") else None
    args = (m.group("args") or "") if m else ""
    families = {f.lower(): f for f in known_families(version)}
    targeted: list[str | None] = []
    meant = _MEANT.get(name.lower()) or _CANONICAL.get(name.lower())
    if meant:
        targeted.append(f"{meant}{args}@{cut}" if cut else meant)
    if name.lower() in families:
        targeted.append(_with_cut(families[name.lower()], cut))
    pool = {n.lower(): n for n in [*known_families(version), *NICKNAMES, *_CUTOFF_NAMES, *RANX_METRICS]}
    fuzzy: list[str | None] = []
    for close in difflib.get_close_matches(name.lower(), list(pool), n=MAX_SUGGESTIONS, cutoff=0.6):
        spelled = _with_cut(pool[close], cut)
        if spelled is None and close in _MEANT:  # ndgc@10: the measure with a cutoff, not full-depth ndcg
            spelled = f"{_MEANT[close]}@{cut}"
        fuzzy.append(spelled)
    shown: dict[str, str] = {}  # meaning -> how it is shown: two names for one measure are shown once
    for c in dict.fromkeys(c for c in (targeted or fuzzy) if c is not None):
        meaning = _meaning(c, version)
        if meaning is not None and c != text and meaning not in shown:
            shown[meaning] = f"{c!r}" + (f" (= {meaning})" if meaning != c else "")
    return list(shown.values())[:MAX_SUGGESTIONS]


_TYPED = re.compile(r"(?P<name>[A-Za-z_0-9]+?)(?P<args>\([^)]*\))?(?:[@._](?P<cut>[0-9]+[kK]?))?")


def _with_cut(name: str, cut: str | None) -> str | None:
    """``name`` with the user's cutoff in its own syntax (``ndcg_cut.10``, ``nDCG@10``); None when it takes
    no cutoff, so a full-depth measure is never offered for a name with one."""
    if cut is None:
        return name
    if name in REGISTRY and REGISTRY[name].params not in _PEER_SYNTAX:
        return f"{name}.{cut}" if REGISTRY[name].params is Params.LONG_CUTOFFS else None
    if name in RANX_METRICS:
        return f"{name}@{cut}" if name not in (*_RANX_NO_CUTOFF, "rbp") else None
    return f"{name}@{cut}" if name in _CUTOFF_NAMES else None


def _cutoff_text(cut: str) -> str | None:
    """``10`` -> ``10``, ``1k`` -> ``1000``; None for anything else."""
    k = re.fullmatch(r"([0-9]+)([kK]?)", cut)
    value = _natural(k.group(1)) if k else None
    if not value:
        return None
    return str(value * (1000 if k and k.group(2) else 1))


def _meaning(name: str, version: int) -> str | None:
    """What a suggested name computes, in trec_eval's terms (``ndcg_cut.10``, ``-M 10 -m recip_rank``)."""
    try:
        (fam, params, overrides, _), *rest = _resolve(name, version)
    except (UnknownMeasureError, ValueError):
        return None
    if rest or name in NICKNAMES:
        return name
    if isinstance(params, Measure):  # another tool's definition: say whose
        return f"{params.name} as {params.spec.source.split(': ')[-1]}"
    if REGISTRY[fam].params is Params.RANX:
        return f"ranx's {params}"
    arg = f"{fam}.{params}" if params is not None else fam
    flags = []
    if overrides.relevance_level is not None:
        flags.append(f"-l {overrides.relevance_level}")
    if overrides.max_docs is not None:
        flags.append(f"-M {overrides.max_docs}")
    if overrides.judged_only:
        flags.append("-J")
    return f"trec_eval {' '.join(flags)} -m {arg}" if flags else arg


def _defaults(fam: str) -> list[Measure]:
    spec = REGISTRY[fam]
    if spec.params in (Params.LONG_CUTOFFS, Params.DOUBLE_CUTOFFS):
        return [Measure(fam, c) for c in spec.defaults]
    return [Measure(fam)]


def _with_params(fam: str, text: str, version: int) -> list[Measure]:
    spec = REGISTRY[fam]
    if spec.params is Params.RANX:
        return [_ranx_measure(fam, text)]
    tokens = text.split(",")
    if spec.params is Params.LONG_CUTOFFS:
        cuts = []
        for tok in tokens:
            if not _INT.fullmatch(tok.strip()):
                raise UnknownMeasureError(f"{fam}.{text}: cutoff {tok!r} is not an integer")
            try:  # the whole part, as trec_eval's (long) atof(...) reads it; at most 18 digits
                value = integer(tok.strip().split(".")[0], what="cutoff")
            except NumberRefused as exc:
                raise UnknownMeasureError(f"{fam}.{text[:40]}: {exc}") from None
            if "." in tok:
                log.warning("twostage: %s.%s: cutoff %s read as %d, as trec_eval does", fam, text, tok, value)
            if value <= 0:
                raise UnknownMeasureError(
                    f"{fam}.{text}: cutoff {tok!r} must be positive (trec_eval: 'Negative cutoff detected')"
                )
            cuts.append(value)
        if len(set(cuts)) != len(cuts):
            raise UnknownMeasureError(f"{fam}.{text}: duplicate cutoffs (trec_eval: 'duplicate cutoffs detected')")
        return [Measure(fam, c) for c in cuts]
    if spec.params is Params.DOUBLE_CUTOFFS:
        cuts = [_float(fam, text, tok) for tok in tokens]
        if any(c < 0 for c in cuts):
            raise UnknownMeasureError(f"{fam}.{text}: cutoffs must be >= 0")
        if len(set(cuts)) != len(cuts):
            raise UnknownMeasureError(f"{fam}.{text}: duplicate cutoffs (trec_eval: 'duplicate cutoffs detected')")
        return [Measure(fam, c) for c in cuts]
    if spec.params is Params.DOUBLE_PARAMS:
        return [Measure(fam, params=tuple(_float(fam, text, tok) for tok in tokens), printable=text)]
    pairs = []
    for tok in tokens:
        key, eq, value = tok.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise UnknownMeasureError(
                f"{fam}.{text}: {tok!r} is not NAME=VALUE (trec_eval: 'malformed pair parameters')"
            )
        key = key.strip()
        try:
            k: int | str = integer(key, what="name") if is_integer(key) else key
        except NumberRefused as exc:
            raise UnknownMeasureError(f"{fam}.{text[:40]}: {exc}") from None
        pairs.append((k, _float(fam, text, value)))
    if len({k for k, _ in pairs}) != len(pairs):
        raise UnknownMeasureError(f"{fam}.{text}: a name is given twice")
    return [Measure(fam, params=tuple(pairs), printable=text)]


def _natural(text: str) -> int | None:
    """A cutoff or a level written in ASCII digits (the numbers door, at most 18 of them); None otherwise."""
    try:
        return natural(text, what="number")
    except NumberRefused:
        return None


def _float(fam: str, text: str, tok: str) -> float:
    tok = tok.strip()
    if not _FLOAT.fullmatch(tok):
        raise UnknownMeasureError(f"{fam}.{text}: {tok!r} is not a number")
    return float(tok)


# ----------------------------------------------------------------- ranx's names
# ranx 0.3.21 names a metric ``name[@k][-lN]`` and RBP ``rbp.P[-lN]`` (``ranx/meta/evaluate.py``); each is computed
# by the ranx family of ``toolkit/measures/ranx.py``, with ranx's definition. A ranx spelling that twostage already
# reads as a trec_eval or ir_measures measure keeps that meaning (``ndcg@10``, ``map@100``, ``recall@100``,
# ``precision@10``, ``mrr``, ``bpref``, ``dcg``: the same numbers on runs without ties, docs/evaluate.md); with a
# level suffix (``ndcg@10-l1``) it is ranx's.

#: ranx's metric names (``metric_switch`` of ``ranx/metrics/__init__.py``) -> the family with ranx's definition.
RANX_METRICS: dict[str, str] = {
    name: f"ranx_{name}"
    for name in (
        "hits",
        "hit_rate",
        "precision",
        "recall",
        "f1",
        "r-precision",
        "mrr",
        "map",
        "dcg",
        "dcg_burges",
        "ndcg",
        "ndcg_burges",
        "bpref",
    )
} | {"rbp": "ranx_rbp"}
# ASCII only: the digits [0-9] (each number then through the numbers door), and letters matched without Unicode's
# case folding (under re.IGNORECASE alone the long s 'ſ' is an 's' and 'hitſ' would name hits)
_RANX_NAME = re.compile(
    r"(?P<metric>hits|hit_rate|precision|recall|f1|r-precision|mrr|map|dcg|dcg_burges|ndcg|ndcg_burges|bpref)"
    r"(?:@(?P<cut>[0-9]+))?(?:-l(?P<level>[0-9]+))?",
    re.IGNORECASE | re.ASCII,
)
#: ``rbp.95`` is persistence 0.95; ranx is case-sensitive, and ``RBP`` is ir_measures' name.
_RANX_RBP = re.compile(r"rbp(?P<sep>[.@])(?P<p>[0-9]+)(?:-l(?P<level>[0-9]+))?")
#: Metrics whose name takes no cutoff in ranx (it ignores one): twostage refuses it rather than ignore it.
_RANX_NO_CUTOFF = ("bpref", "r-precision")


def _read_before(metric: str, cut: str | None) -> bool:
    """Whether the ranx spelling ``metric[@cut]`` (no level suffix) already names a trec_eval or ir_measures
    measure here, which it keeps meaning."""
    if metric in ("ndcg", "map", "mrr", "recall"):
        return True  # nDCG@k / ndcg, AP@k / map, RR@k / RR, R@k / trec_eval's recall.5,...,1000
    if metric == "precision":
        return cut is not None  # P@k; bare precision is ranx's (P has no bare form)
    return metric in ("bpref", "dcg") and cut is None  # trec_eval's bpref and (10) dcg


def _ranx_name(text: str) -> tuple[str, str, Overrides, str] | None:
    """A name in ranx's syntax that twostage reads with ranx's definition: (family, its canonical ranx
    spelling, no overrides, that spelling); None for any other name."""
    rbp = _RANX_RBP.fullmatch(text)
    if rbp:
        _ranx_number(text, rbp.group("p"), "persistence digits")
        _ranx_number(text, rbp.group("level"), "relevance level")
        digits = rbp.group("p")
        if rbp.group("sep") == "@":
            raise UnknownMeasureError(
                f"{text!r} is ambiguous: ranx reads it as RBP with persistence 0.{digits} (write rbp.{digits}), "
                f"ir_measures as RBP@{digits}, RBP cut at rank {digits} (write RBP@{digits})"
            )
        return "ranx_rbp", _ranx_spelling(rbp, "rbp"), _PLAIN, _ranx_spelling(rbp, "rbp")
    m = _RANX_NAME.fullmatch(text)
    if not m:
        return None
    metric, cut, level = m.group("metric").lower(), m.group("cut"), m.group("level")
    if level is None and _read_before(metric, cut):
        return None  # its numbers are read where that name is
    _ranx_number(text, level, "relevance level")
    if cut is not None and _ranx_number(text, cut, "cutoff") == 0:
        raise UnknownMeasureError(
            f"{text!r}: ranx reads @0 as the whole ranking; write {metric}{f'-l{level}' if level else ''} "
            "without a cutoff"
        )
    if cut is not None and metric in _RANX_NO_CUTOFF:
        whole = f"{metric}-l{level or 1} (ranx's)" + (" or bpref (trec_eval's)" if metric == "bpref" else "")
        raise UnknownMeasureError(
            f"{text!r}: ranx ignores a cutoff on {metric} and computes it over the whole ranking; write {whole}"
        )
    spelled = _ranx_spelling(m, metric)
    if spelled != text:
        log.info("twostage: %r read as ranx's %r", text, spelled)
    return RANX_METRICS[metric], spelled, _PLAIN, spelled


def _ranx_number(text: str, digits: str | None, what: str) -> int | None:
    """A number written in a ranx name, read by the numbers door (at most 18 ASCII digits: ``hits@999...9`` is
    refused, never handed to ``int``); None when absent."""
    if digits is None:
        return None
    try:
        return natural(digits, what=what)
    except NumberRefused as exc:
        raise UnknownMeasureError(f"{show(text)}: {exc}") from None


def _ranx_spelling(m: re.Match, metric: str) -> str:
    """ranx's name in one spelling: lower case, no leading zeros, persistence digits without trailing zeros."""
    level = f"-l{int(m.group('level'))}" if m.group("level") is not None else ""
    if metric == "rbp":
        return f"rbp.{m.group('p').rstrip('0') or '0'}{level}"
    cut = f"@{int(m.group('cut'))}" if m.group("cut") else ""
    return f"{metric}{cut}{level}"


def _ranx_measure(fam: str, text: str) -> Measure:
    """The measure of the ranx family ``fam`` that ``text`` (a ranx name) asks for: cutoff ``@k``, parameters
    ``l`` (its own relevance level) and ``p`` (RBP's persistence), named ``text``."""
    m = (_RANX_RBP if fam == "ranx_rbp" else _RANX_NAME).fullmatch(text)
    metric = "rbp" if fam == "ranx_rbp" else (m.group("metric").lower() if m else "")
    if not m or RANX_METRICS.get(metric) != fam or (fam == "ranx_rbp" and m.group("sep") != "."):
        raise UnknownMeasureError(f"{text!r} is not a name of ranx's {REGISTRY[fam].label}")
    params: list[tuple[str, float | int]] = []
    if m.group("level") is not None:
        params.append(("l", int(m.group("level"))))
    if fam == "ranx_rbp":
        params.append(("p", float("0." + m.group("p"))))
    cut = int(m.group("cut")) if fam != "ranx_rbp" and m.group("cut") else None
    return Measure(fam, cut, tuple(params), _ranx_spelling(m, metric))


# ----------------------------------------------------------------- settings
@dataclass(frozen=True)
class EvalSettings:
    """Everything, beside the measures, that changes a number. Part of provenance.

    ``trec_eval`` (9 or 10) selects the semantics wherever the two
    generations differ; ``score_precision`` defaults to that generation's
    (float32 for 9, float64 for 10) and may be set on its own.
    """

    relevance_level: int = 1
    gain: Gain = field(default_factory=Gain)
    discount: Discount = field(default_factory=Discount)
    judged_only: bool = False
    max_docs: int | None = None
    complete: bool = False
    score_precision: str = DEFAULT_SCORE_PRECISION
    judged_compat: str = "twostage"
    trec_eval: int = DEFAULT_TREC_EVAL
    num_docs: int = 0  # -N: documents in the collection (utility's fourth coefficient)
    allow_no_common: bool = False  # print zeros for a run sharing no query with the qrels instead of an error

    def __post_init__(self) -> None:
        if self.trec_eval not in TREC_EVAL_VERSIONS:
            raise UnknownMeasureError(
                f"{phrase('trec_eval', '--trec-eval')} must be one of {TREC_EVAL_VERSIONS}, not {self.trec_eval!r}"
            )
        if self.relevance_level < 0:
            raise UnknownMeasureError(
                f"relevance level {self.relevance_level} must be >= 0 "
                "(trec_eval would count unjudged documents as relevant)"
            )

    def describe(self) -> dict[str, object]:
        d = asdict(self)
        d["gain"] = self.gain.describe()
        d["discount"] = self.discount.describe()
        return d


def build_settings(values: dict) -> EvalSettings:
    """EvalSettings from option or spec values by name (``settings.SETTING_NAMES``: complete, relevance_level,
    max_docs, judged_only, num_docs, trec_eval, score_precision, gain, discount, judged_compat); missing or
    None ones take their defaults, an unknown name is an error (so a misspelt setting cannot be ignored)."""
    unknown = sorted(set(values) - set(SETTING_NAMES))
    if unknown:
        raise ConfigError(f"unknown evaluation setting(s) {', '.join(unknown)}; known: {', '.join(SETTING_NAMES)}")
    version = int(values.get("trec_eval") or DEFAULT_TREC_EVAL)
    gain = values.get("gain") or "linear"
    discount = values.get("discount") or "log2"
    level = values.get("relevance_level")
    return EvalSettings(
        relevance_level=1 if level is None else int(level),
        gain=gain if isinstance(gain, Gain) else Gain.parse(str(gain)),
        discount=discount if isinstance(discount, Discount) else Discount.parse(str(discount)),
        judged_only=bool(values.get("judged_only")),
        max_docs=values.get("max_docs"),
        complete=bool(values.get("complete")),
        score_precision=values.get("score_precision") or default_precision(version),
        judged_compat=values.get("judged_compat") or "twostage",
        trec_eval=version,
        num_docs=int(values.get("num_docs") or 0),
        allow_no_common=bool(values.get("allow_no_common")),
    )


def settings_values(s: EvalSettings) -> dict:
    """The values by name that ``build_settings`` turns back into ``s`` (the gain and discount as the objects they
    are; a score precision that is its generation's default as None, so that a new ``trec_eval`` brings its own)."""
    values = {name: getattr(s, name) for name in SETTING_NAMES}
    if s.score_precision == default_precision(s.trec_eval):
        values["score_precision"] = None
    return values


def evaluation_settings(**defaults: Any) -> Any:
    """The evaluation settings as a nested piece of a verb's options (``toolkit.options``): the keywords of
    ``settings.SETTINGS`` (``complete``, ``relevance_level``, ...), built into one ``EvalSettings`` by
    ``build_settings``; ``defaults`` where the verb's differ (``diagnose``: ``complete=True``)."""
    return nested(
        ((s.name, defaults.get(s.name, s.default), s.annotation, s.doc) for s in SETTINGS),
        lambda given: build_settings({**defaults, **given}),
        settings_values,
        doc="the evaluation settings (``EvalSettings``)",
    )


def default_precision(version: int) -> str:
    """The score precision of a trec_eval generation: 9.x stores scores as float, 10 as double."""
    return "float32" if version == 9 else "float64"


__all__ = [
    "DEFAULT_MEASURES",
    "DEFAULT_TREC_EVAL",
    "NICKNAMES",
    "TREC_EVAL_VERSIONS",
    "Discount",
    "EvalSettings",
    "Gain",
    "Measure",
    "build_settings",
    "default_precision",
    "evaluation_settings",
    "known_families",
    "parse_measure",
    "parse_measures",
    "settings_values",
]
