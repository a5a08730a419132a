"""The evaluation settings by name: the one table that the command-line options, ``build_settings`` and
reproduction specs read.

A setting has one spelling everywhere: the ``EvalSettings`` field, the click parameter of its option
(``-l`` is ``relevance_level``), the key ``build_settings`` takes, the YAML key of a reproduction
spec's column, the provenance key and the library's keyword (``ts.evaluate(relevance_level=2)``, with the
default, type and documentation given here: the options objects of the verbs read them, ``toolkit.options``).
``eval``, ``compare``, ``gain-sensitivity`` and ``diagnose`` take the options; ``reproduce`` the YAML keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str  # the one spelling (see above)
    flag: str  # the command-line option that sets it
    meaning: str  # one line, for error messages and docs
    default: Any  # the library keyword's default (None: the generation's, for score_precision)
    annotation: str  # the library keyword's type
    doc: str  # the library keyword's documentation (the verbs' ``Args:``)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "complete",
        "-c",
        "average over every judged query; missing ones count 0",
        False,
        "bool",
        "``-c``: average over every judged query, those missing from the run count as 0.",
    ),
    Setting(
        "relevance_level",
        "-l",
        "labels >= this are relevant (binary measures)",
        1,
        "int",
        "``-l``: labels at or above it are relevant for binary measures.",
    ),
    Setting(
        "max_docs",
        "-M",
        "evaluate only the top N documents of each query",
        None,
        "int | None",
        "``-M``: only the top N documents of each query.",
    ),
    Setting(
        "judged_only",
        "-J",
        "drop unjudged documents before ranking",
        False,
        "bool",
        "``-J``: drop unjudged documents before ranking (condensed list).",
    ),
    Setting(
        "num_docs",
        "-N",
        "documents in the collection (utility)",
        0,
        "int",
        "``-N``: documents in the collection (utility).",
    ),
    Setting(
        "trec_eval",
        "--trec-eval",
        "trec_eval generation whose semantics apply (9 or 10)",
        9,
        "int",
        "9 (Pyserini's 9.0.4) or 10: which generation's semantics where they differ.",
    ),
    Setting(
        "score_precision",
        "--score-precision",
        "scores compared as float32 or float64",
        None,
        "str | None",
        "``float32`` or ``float64``; default the generation's (9: float32, 10: float64).",
    ),
    Setting(
        "gain",
        "--gain",
        "nDCG gain: linear, exp or a label map",
        "linear",
        "str",
        "nDCG gain: ``linear``, ``exp`` or a map like ``0:0,1:1,2:4,3:10``.",
    ),
    Setting(
        "discount",
        "--discount",
        "nDCG discount: log2 or jk[:B]",
        "log2",
        "str",
        "nDCG discount: ``log2`` or ``jk[:B]``.",
    ),
    Setting(
        "judged_compat",
        "--judged-compat",
        "which judged.k definition",
        "twostage",
        "str",
        "``twostage`` or ``pyserini`` (which judged@k).",
    ),
    Setting(
        "allow_no_common",
        "--allow-no-common",
        "zeros, not an error, for a run sharing no query with the qrels",
        False,
        "bool",
        "zeros instead of ``NoCommonQueriesError`` when run and qrels share no query.",
    ),
)

#: The names, in the table's order.
SETTING_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS)

#: The definitions of judged.k (``--judged-compat``).
JUDGED_COMPAT: tuple[str, ...] = ("twostage", "pyserini")
