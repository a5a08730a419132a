"""Where twostage deliberately differs from trec_eval: the one list.

Each entry names one difference, the trec_eval generations it concerns, what trec_eval does and what
twostage does instead. The table "Where twostage deliberately differs from trec_eval" of docs/evaluate.md is
rendered from this list (``readme_table``; a test checks they agree), and the differential fuzzer
(``scripts/fuzz_eval.py``) knows each one by its name: a generated case that falls under one is
skipped and counted under that name, never silently passed. Nothing else may differ.

``fuzzed`` says whether the fuzzer generates cases of that kind (it makes only valid input, so the
bad-input rows are tested by hand in ``tests/data/test_malformed_inputs.py`` instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Difference:
    name: str
    generations: tuple[int, ...]
    trec_eval: str
    twostage: str
    fuzzed: bool = True


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "bad-input-is-an-error",
        (9, 10),
        "reads a non-numeric score as 0, sorts NaN scores into a scrambled order, counts unjudged documents "
        "as relevant under `-l` < 0, reads `ndcg.x=3` as level 0 (9.x) or ignores it (10), counts a repeated "
        "preference line twice, aborts on contradictory preferences",
        "an error naming file, line and reason, exit 1 (also a relstring length that is not an integer and "
        "`rbp.p` outside (0, 1))",
        fuzzed=False,
    ),
    Difference(
        "comment-lines-under-9",
        (9,),
        "9.x rejects or misreads `#` lines",
        "skipped under both generations, as trec_eval 10 does, counted and reported",
    ),
    Difference(
        "repeated-family",
        (9, 10),
        "`-m P.5 -m P.10` keeps the first parameter list and drops the rest silently",
        "computes both",
    ),
    Difference(
        "missing-query-without-c",
        (10,),
        "a qrels query missing from the run without `-c`: 10 stops with exit 4 naming the wrong file "
        "(9.x skips it silently)",
        "9.x's numbers, plus a note on stderr that `-c` would count it as 0",
    ),
    Difference(
        "zscore-exact-lookup",
        (9, 10),
        "`-Z` finds means by a binary search that can read one past the end of the table",
        "looks each (query, measure) up exactly; a missing one prints -1000000 as trec_eval means to",
    ),
    Difference(
        "negative-labels-only",
        (9, 10),
        "a query whose qrels labels are all negative: reads `rel_levels[-1]` (crashes or prints garbage)",
        "the query has no judged document: every measure takes its empty value",
    ),
    Difference(
        "comment-last-qrels-line",
        (10,),
        "a comment as the last qrels line crashes trec_eval 10.0-rc3",
        "skipped like every comment line",
    ),
    Difference(
        "huge-relevance-level",
        (9, 10),
        "`-l 100000` crashes both (bpref and others index their label counts by the level)",
        "no document is relevant",
    ),
    Difference(
        "qrels-prefs-negative-labels",
        (9, 10),
        "negative labels under `-R qrels_prefs`: 10.0-rc3 crashes; prefs_avgjg_Rnonrel's `recalculate` takes "
        "the lowest class (the negative one) as the non-relevant class and reads its first R members past "
        "its end, so 9.0.4 prints a value that depends on memory",
        "the same classes, reading only the class's own members",
    ),
    Difference(
        "ndcg-family-parameters-twice",
        (10,),
        "two of `dcg`, `ideal_dcg`, `ndcg` in one call, one of them with parameters, abort trec_eval 10.0-rc3 "
        "(`free(): double free`: they share one default parameter block)",
        "computes each",
    ),
    Difference(
        "rbp-uninitialised-range",
        (10,),
        "`m_rbp.c` rescales gains by a min and max it never initialises: the value depends on what the "
        "stack held (alone on a query it behaves as if both start at 0; after other measures it varies)",
        "rescales to (g - lo) / (hi - lo) with lo = min(0, gains), hi = max(0, gains) when a gain lies "
        "outside [0, 1]: trec_eval's output when rbp runs alone, and never 0/0",
    ),
)

BY_NAME = MappingProxyType({d.name: d for d in DIFFERENCES})


def readme_table() -> str:
    """The table of docs/evaluate.md, one row per difference, in this list's order."""
    rows = [
        "| name | trec_eval | twostage | generations |",
        "|---|---|---|---|",
    ]
    for d in DIFFERENCES:
        gens = ", ".join(str(g) for g in d.generations)
        rows.append(f"| `{d.name}` | {d.trec_eval} | {d.twostage} | {gens} |")
    return "\n".join(rows) + "\n"


__all__ = ["BY_NAME", "DIFFERENCES", "Difference", "readme_table"]
