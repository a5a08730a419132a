"""Measure names as users write them, and the settings that change a number.

``parse_measures`` reads trec_eval's ``-m`` syntax (``P.5,10``,
``iprec_at_recall..10,.20``, ``ndcg.1=3,2=9``, ``utility.2,-1,0,0``,
``ndcg_cut.23.4``), trec_eval's printed names (``P_10``, ``ndcg_cut_10``),
trec_eval's nicknames (``official``, ``all_trec``, ``set``, ``all_prefs``,
``prefs``, ``qrels_jg``) and the ir_measures names that mean exactly a
trec_eval measure (``nDCG@10``, ``AP@100``, ``R@100``, ``P@10``,
``Judged@10``, ``Bpref``, ``Rprec``, ``infAP``, ``Success@10``, ``RR``), in
any case and with ir_measures' synonyms (``ndcg@10``, ``MAP@1000``, ``MRR``);
names ir_measures uses with another meaning are refused with the reason. An
ir_measures name may carry its own relevance level or depth
(``AP(rel=2)@1000``, ``RR@10`` = ``-M 10 -m recip_rank``):
``parse_measure_groups`` returns such measures in evaluation groups, one per
distinct ``Overrides`` (``toolkit.evaluation.groups`` evaluates them). An
unknown name gets at most five suggestions, each with what it computes.

As in trec_eval, a family named with parameters uses those parameters
instead of its defaults, even when a nickname also names it
(``-m all_trec -m relstring.20`` gives relstring_20 only). Unlike trec_eval,
which keeps the first parameter list and silently drops later ones, twostage
takes the union of cutoffs (``-m P.5 -m P.10``) and computes each distinct
parameter set of the other families.

What each measure *is* lives in its family's declaration (``registry.py``,
``trec_measures.py``, ``pref_measures.py``; ``twostage measures`` prints
them).
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import asdict, dataclass, field, replace

from toolkit.data.ranking import DEFAULT_SCORE_PRECISION
from toolkit.errors import ConfigError, UnknownMeasureError, phrase
from toolkit.measures import prefs as pref_measures  # noqa: F401  (registers every family)
from toolkit.measures.gains import Discount, Gain
from toolkit.measures.registry import REGISTRY, Measure, Params, families_in_order
from toolkit.measures.settings import SETTING_NAMES

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
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "set": _SET,
    "all_trec": _ALL_TREC,
    "all_prefs": _ALL_PREFS,
    "prefs": _PREFS,
    "qrels_jg": _QRELS_JG,
}

#: What ``twostage eval`` computes without -m: trec_eval's default.
DEFAULT_MEASURES = ("official",)

# ir_measures names -> the trec_eval measure they are exactly; None: refused, with the reason
_ALIASES: dict[str, str] = {
    "nDCG": "ndcg_cut",
    "AP": "map_cut",
    "R": "recall",
    "P": "P",
    "Judged": "judged",
    "Success": "success",
    "SetP": "set_P",
    "SetR": "set_recall",
    "SetF": "set_F",
    "NumRet": "num_ret",
    "NumRel": "num_rel",
    "NumRelRet": "num_rel_ret",
    "NumQ": "num_q",
    "IPrec": "iprec_at_recall",
    "RR": "recip_rank",  # RR@k: recip_rank over the top k, i.e. trec_eval -M k (an evaluation group)
}
_BARE_ALIASES: dict[str, str] = {
    "nDCG": "ndcg",
    "AP": "map",
    "Bpref": "bpref",
    "Rprec": "Rprec",
    "infAP": "infAP",
    "RR": "recip_rank",
    "NumRet": "num_ret",
    "NumRel": "num_rel",
    "NumRelRet": "num_rel_ret",
    "NumQ": "num_q",
    "SetP": "set_P",
    "SetR": "set_recall",
    "SetF": "set_F",
    "SetAP": "set_map",
    "GMAP": "gm_map",
}
#: ir_measures' second names for the same measures (``ir_measures.measures.__init__``).
_SYNONYMS = {
    "MAP": "AP",
    "NDCG": "nDCG",
    "Precision": "P",
    "Recall": "R",
    "RPrec": "Rprec",
    "BPref": "Bpref",
    "MRR": "RR",
}
_REFUSED: dict[str, str] = {
    "ERR": "ERR is not a trec_eval measure",
    "nERR": "nERR is not a trec_eval measure",
    "BPM": "BPM is not a trec_eval measure",
    "alpha_nDCG": "alpha-nDCG is not a trec_eval measure",
    "RBP": "ir_measures' RBP defaults to p=0.8 and binary gains; trec_eval's is rbp (p=0.9, graded): use rbp.p=0.8",
    "Compat": "Compat is not a trec_eval measure",
    "Accuracy": "Accuracy is not a trec_eval measure",
    "INSQ": "INSQ is not a trec_eval measure",
    "INST": "INST is not a trec_eval measure",
}
#: Every ir_measures name twostage knows, lower-cased -> as ir_measures spells it (names are case-insensitive).
_CANONICAL: dict[str, str] = {n.lower(): n for n in [*_ALIASES, *_BARE_ALIASES, *_REFUSED]} | {
    k.lower(): v for k, v in _SYNONYMS.items()
}
#: Names people type for a measure under another name: lower-cased -> the ir_measures name meant.
_MEANT = {"mrr": "RR", "map": "AP", "ndcg": "nDCG", "recall": "R", "precision": "P", "p": "P", "r": "R"}
_ALIAS_RE = re.compile(r"(?P<name>[A-Za-z_]+)(?P<args>\([^)]*\))?(?:@(?P<cut>[^\s()]+))?")
_REL_ARG = re.compile(r"\(\s*rel\s*=\s*(?P<rel>\d+)\s*\)")
#: At most this many suggestions for an unknown name; `twostage measures` lists everything.
MAX_SUGGESTIONS = 5

_INT = re.compile(r"[+-]?\d+(?:\.\d*)?")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Overrides:
    """Settings one measure carries in its ir_measures name: ``AP(rel=2)@1000`` (level 2), ``RR@10`` (top 10).

    ``max_docs`` is trec_eval's ``-M`` for that measure alone (``RR@10`` is exactly ``-M 10 -m
    recip_rank``: trec_eval cuts the ranking after sorting it); under a global ``-M`` the smaller wins.
    """

    relevance_level: int | None = None
    max_docs: int | None = None

    def __bool__(self) -> bool:
        return self.relevance_level is not None or self.max_docs is not None

    def apply(self, settings: EvalSettings) -> EvalSettings:
        level = settings.relevance_level if self.relevance_level is None else self.relevance_level
        depth = settings.max_docs
        if self.max_docs is not None:
            depth = self.max_docs if depth is None else min(depth, self.max_docs)
        return replace(settings, relevance_level=level, max_docs=depth)


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


def known_families(version: int | None = None) -> list[str]:
    return [f.name for f in families_in_order() if version is None or f.since <= version]


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
    for overrides in sorted(requests, key=lambda o: (bool(o), o.relevance_level or 0, o.max_docs or 0)):
        measures, labels = _group_measures(requests[overrides], version)
        groups.append(MeasureGroup(overrides, tuple(measures), labels if overrides else {}))
    return groups


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
    for fam, params, _label in requests:
        if params is None:
            bare.add(fam)
        else:
            explicit.setdefault(fam, []).append(params)
    measures: set[Measure] = set()
    for fam in bare | set(explicit):
        spec = REGISTRY[fam]
        if spec.since > version:
            raise UnknownMeasureError(
                f"{fam} is a trec_eval {spec.since} measure; trec_eval {version} has none "
                f"(pass {phrase(f'trec_eval={spec.since}', f'--trec-eval {spec.since}')})"
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
        for m in _with_params(fam, params, version) if params is not None else _defaults(fam):
            labels[m] = label
    return sorted(measures, key=lambda m: m.sort_key), labels


_PLAIN = Overrides()


def _resolve(text: str, version: int) -> list[tuple[str, str | None, Overrides, str]]:
    """(family, parameter text or None for defaults, overrides, label) for one name."""
    if text in NICKNAMES:
        return [(f, None, _PLAIN, f) for f in NICKNAMES[text] if REGISTRY[f].since <= version]
    if text in REGISTRY:
        return [(text, None, _PLAIN, text)]
    name, dot, params = text.partition(".")
    if name in NICKNAMES and dot:
        raise UnknownMeasureError(f"{text!r}: the nickname {name!r} takes no parameters")
    if name in REGISTRY and dot:
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


def _printed_name(text: str) -> tuple[str, str] | None:
    """A name as trec_eval prints it (P_10, iprec_at_recall_0.10, ndcg_1=3,2=9): the longest family prefix."""
    best = None
    for fam, spec in REGISTRY.items():
        if spec.params is not Params.NONE and text.startswith(fam + "_") and (best is None or len(fam) > len(best)):
            best = fam
    if best is None:
        return None
    rest = text[len(best) + 1 :]
    return (best, rest) if rest else None


def _alias(text: str) -> tuple[str, str | None, Overrides, str] | None:
    """An ir_measures name (any case): (family, parameters, overrides, canonical label), or None."""
    m = _ALIAS_RE.fullmatch(text)
    if not m or m.group("name").lower() not in _CANONICAL:
        return None
    name, args, cut = _CANONICAL[m.group("name").lower()], m.group("args"), m.group("cut")
    if name != m.group("name"):
        log.info("twostage: %r read as the ir_measures name %r", text, text.replace(m.group("name"), name, 1))
    if name in _REFUSED:
        raise UnknownMeasureError(f"{text!r}: {_REFUSED[name]}")
    fam = (_ALIASES if cut is not None else _BARE_ALIASES).get(name)
    if fam is None:
        raise UnknownMeasureError(
            f"{text!r}: " + (f"{name} takes no cutoff" if cut else f"give a cutoff, e.g. {name}@10")
        )
    level = _rel_argument(text, name, fam, args)
    label = f"{name}{f'(rel={level})' if level is not None else ''}{f'@{cut}' if cut is not None else ''}"
    if cut is None or fam == "iprec_at_recall":
        return fam, cut, Overrides(relevance_level=level), label
    if not re.fullmatch(r"\d+", cut) or int(cut) == 0:
        raise UnknownMeasureError(f"{text!r}: the cutoff must be a positive integer" + _hint(text))
    if fam == "recip_rank":  # trec_eval's recip_rank has no cutoff: RR@k is recip_rank under -M k
        return fam, None, Overrides(relevance_level=level, max_docs=int(cut)), label
    return fam, cut, Overrides(relevance_level=level), label


def _rel_argument(text: str, name: str, fam: str, args: str | None) -> int | None:
    """The level of ``(rel=N)``; any other ir_measures parameter has no trec_eval equivalent in a name."""
    if not args:
        return None
    m = _REL_ARG.fullmatch(args)
    if not m:
        raise UnknownMeasureError(
            f"{text!r}: ir_measures parameters {args} have no trec_eval equivalent in a measure name; "
            f"only rel=N is read (a relevance level); use {phrase('gain=', '--gain')} for gains, "
            f"{phrase('judged_compat=', '--judged-compat')}, {phrase('judged_only=True', '-J')}, "
            "or trec_eval's own parameters"
        )
    if not REGISTRY[fam].binary:
        raise UnknownMeasureError(f"{text!r}: {name} uses the graded labels; a relevance level does not apply")
    return int(m.group("rel"))


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
    if meant and meant not in _REFUSED:
        targeted.append(f"{meant}{args}@{cut}" if cut else meant)
    if name.lower() in families:
        targeted.append(_with_cut(families[name.lower()], cut))
    pool = {n.lower(): n for n in [*known_families(version), *NICKNAMES, *_ALIASES]}
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


_TYPED = re.compile(r"(?P<name>[A-Za-z_0-9]+?)(?P<args>\([^)]*\))?(?:[@._](?P<cut>\d+[kK]?))?")


def _with_cut(name: str, cut: str | None) -> str | None:
    """``name`` with the user's cutoff in its own syntax (``ndcg_cut.10``, ``nDCG@10``); None when it takes
    no cutoff, so a full-depth measure is never offered for a name with one."""
    if cut is None:
        return name
    if name in REGISTRY:
        return f"{name}.{cut}" if REGISTRY[name].params is Params.LONG_CUTOFFS else None
    return f"{name}@{cut}" if name in _ALIASES else None


def _cutoff_text(cut: str) -> str | None:
    """``10`` -> ``10``, ``1k`` -> ``1000``; None for anything else."""
    k = re.fullmatch(r"(\d+)([kK]?)", cut)
    if not k or int(k.group(1)) == 0:
        return None
    return str(int(k.group(1)) * (1000 if k.group(2) else 1))


def _meaning(name: str, version: int) -> str | None:
    """What a suggested name computes, in trec_eval's terms (``ndcg_cut.10``, ``-M 10 -m recip_rank``)."""
    try:
        (fam, params, overrides, _), *rest = _resolve(name, version)
    except (UnknownMeasureError, ValueError):
        return None
    if rest or name in NICKNAMES:
        return name
    arg = f"{fam}.{params}" if params is not None else fam
    flags = []
    if overrides.relevance_level is not None:
        flags.append(f"-l {overrides.relevance_level}")
    if overrides.max_docs is not None:
        flags.append(f"-M {overrides.max_docs}")
    return f"trec_eval {' '.join(flags)} -m {arg}" if flags else arg


def _defaults(fam: str) -> list[Measure]:
    spec = REGISTRY[fam]
    if spec.params in (Params.LONG_CUTOFFS, Params.DOUBLE_CUTOFFS):
        return [Measure(fam, c) for c in spec.defaults]
    return [Measure(fam)]


def _with_params(fam: str, text: str, version: int) -> list[Measure]:
    spec = REGISTRY[fam]
    tokens = text.split(",")
    if spec.params is Params.LONG_CUTOFFS:
        cuts = []
        for tok in tokens:
            if not _INT.fullmatch(tok.strip()):
                raise UnknownMeasureError(f"{fam}.{text}: cutoff {tok!r} is not an integer")
            value = int(float(tok))
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
        k: int | str = int(key) if re.fullmatch(r"[+-]?\d+", key) else key
        pairs.append((k, _float(fam, text, value)))
    if len({k for k, _ in pairs}) != len(pairs):
        raise UnknownMeasureError(f"{fam}.{text}: a name is given twice")
    return [Measure(fam, params=tuple(pairs), printable=text)]


def _float(fam: str, text: str, tok: str) -> float:
    tok = tok.strip()
    if not _FLOAT.fullmatch(tok):
        raise UnknownMeasureError(f"{fam}.{text}: {tok!r} is not a number")
    return float(tok)


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
    "known_families",
    "parse_measure",
    "parse_measures",
]
