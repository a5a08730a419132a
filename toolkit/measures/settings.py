"""The evaluation settings by name: the one table that the command-line options, ``build_settings`` and
reproduction specs read.

A setting has one spelling everywhere: the ``EvalSettings`` field, the click parameter of its option
(``-l`` is ``relevance_level``), the key ``build_settings`` takes, the YAML key of a reproduction
spec's column and the provenance key. ``eval``, ``compare``, ``gain-sensitivity`` and ``diagnose`` take
the options; ``reproduce`` the YAML keys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str  # the one spelling (see above)
    flag: str  # the command-line option that sets it
    meaning: str  # one line, for error messages and docs


SETTINGS: tuple[Setting, ...] = (
    Setting("complete", "-c", "average over every judged query; missing ones count 0"),
    Setting("relevance_level", "-l", "labels >= this are relevant (binary measures)"),
    Setting("max_docs", "-M", "evaluate only the top N documents of each query"),
    Setting("judged_only", "-J", "drop unjudged documents before ranking"),
    Setting("num_docs", "-N", "documents in the collection (utility)"),
    Setting("trec_eval", "--trec-eval", "trec_eval generation whose semantics apply (9 or 10)"),
    Setting("score_precision", "--score-precision", "scores compared as float32 or float64"),
    Setting("gain", "--gain", "nDCG gain: linear, exp or a label map"),
    Setting("discount", "--discount", "nDCG discount: log2 or jk[:B]"),
    Setting("judged_compat", "--judged-compat", "which judged.k definition"),
    Setting("allow_no_common", "--allow-no-common", "zeros, not an error, for a run sharing no query with the qrels"),
)

#: The names, in the table's order.
SETTING_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS)

#: The definitions of judged.k (``--judged-compat``).
JUDGED_COMPAT: tuple[str, ...] = ("twostage", "pyserini")
