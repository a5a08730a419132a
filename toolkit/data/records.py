"""Plain typed structures that flow through the toolkit, parsed and validated once.

A ``Run`` and a ``Qrels`` hold one pandas DataFrame each with fixed column
names and dtypes; everything downstream reads these columns and never the
files again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import pandas as pd

QUERY_ID = "query_id"
DOC_ID = "doc_id"
SCORE = "score"
RELEVANCE = "relevance"

RUN_COLUMNS = (QUERY_ID, DOC_ID, SCORE)
QRELS_COLUMNS = (QUERY_ID, DOC_ID, RELEVANCE)

# ---------------------------------------------------------------------- ids
# The id rules live in the inputs door (``toolkit.guard.readers``); these names stay importable from here.
from toolkit.guard.readers import BAD_ID_CHAR, BAD_ID_RE2, check_id, id_error, id_problem  # noqa: E402, F401


@dataclass(frozen=True)
class Run:
    """A TREC run: one row per retrieved (query, document) with its score.

    ``frame`` has columns query_id (str), doc_id (str), score (float64) in file
    order; the rank column of the file is deliberately not kept (trec_eval
    ignores it). ``duplicates_dropped`` counts lines removed by an explicit
    ``--dedupe first``; it is 0 otherwise.
    """

    frame: pd.DataFrame
    path: str = "<memory>"
    tag: str = ""
    sha256: str = ""
    duplicates_dropped: int = 0
    last_tag: str = ""  # the last line's tag: trec_eval's runid
    comment_lines: int = 0  # '#' lines skipped (trec_eval 10 accepts them)
    trailing_text_lines: int = 0  # lines with text after the tag, ignored as trec_eval ignores it

    @property
    def runid(self) -> str:
        return self.last_tag or self.tag

    @property
    def query_ids(self) -> list[str]:
        return sorted(self.frame[QUERY_ID].unique().tolist())

    def __len__(self) -> int:
        return len(self.frame)


class _Labelled:
    """Query ids and label counts of a judgments table with query_id and relevance columns."""

    frame: pd.DataFrame

    @property
    def query_ids(self) -> list[str]:
        return sorted(self.frame[QUERY_ID].unique().tolist())

    def label_counts(self) -> dict[int, int]:
        counts = self.frame[RELEVANCE].value_counts().sort_index()
        return {int(k): int(v) for k, v in counts.items()}


@dataclass(frozen=True)
class Qrels(_Labelled):
    """Relevance judgments: one row per judged (query, document).

    ``relevance`` is an int64 label after any relevance map was applied.
    Labels < 0 mean "in the pool but unjudged" (trec_eval's convention): such
    documents count neither as judged nor as relevant. ``relevance_map`` is the
    map applied at load time (original label -> label), empty when none.
    """

    frame: pd.DataFrame
    path: str = "<memory>"
    sha256: str = ""
    relevance_map: dict[int, int] = field(default_factory=dict)
    relevance_map_name: str = ""
    duplicates_dropped: int = 0
    comment_lines: int = 0
    origin: QrelsOrigin | None = None  # set when merged from human and judge labels (evaluation.qrels_origin)


@dataclass(frozen=True)
class QrelsOrigin:
    """Where the labels of merged qrels came from: the ``policy`` (``human``, ``fill``, ``judge``), the origin
    of every label used (``labels``: query_id, doc_id, origin = ``human`` or ``judge``), the sources and the
    counts. Built by ``toolkit.evaluation.qrels_origin.merge_qrels``."""

    policy: str
    labels: pd.DataFrame
    sources: dict
    counts: dict

    def describe(self) -> dict:
        return {"policy": self.policy, "sources": self.sources, "counts": self.counts}


@dataclass(frozen=True)
class Prefs:
    """Preference judgments (``-R prefs``, or qrels read as preferences with ``-R qrels_prefs``).

    ``frame`` columns: query_id, jg (judgment group), jsg (sub-group), doc_id,
    rel_level (float64). ``kind`` is the ``-R`` format the file was read as.
    """

    frame: pd.DataFrame
    path: str = "<memory>"
    sha256: str = ""
    kind: str = "prefs"
    comment_lines: int = 0

    @property
    def query_ids(self) -> list[str]:
        return sorted(self.frame[QUERY_ID].unique().tolist())


@dataclass(frozen=True)
class JudgmentGroups(_Labelled):
    """Qrels per judgment group (``-R qrels_jg``): query_id, jg, doc_id, relevance (int64)."""

    frame: pd.DataFrame
    path: str = "<memory>"
    sha256: str = ""
    comment_lines: int = 0


class Topic(NamedTuple):
    query_id: str
    text: str


@dataclass(frozen=True)
class Topics:
    """Queries by id, in file order."""

    topics: tuple[Topic, ...]
    path: str = "<memory>"

    def as_dict(self) -> dict[str, str]:
        return {t.query_id: t.text for t in self.topics}

    def __len__(self) -> int:
        return len(self.topics)


def run_from_rows(rows: list[tuple[str, str, float]], tag: str = "", path: str = "<memory>") -> Run:
    """Build a ``Run`` from (query_id, doc_id, score) tuples (tests, rerankers)."""
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    frame = frame.astype({QUERY_ID: "str", DOC_ID: "str", SCORE: "float64"})
    return Run(frame=frame, path=path, tag=tag)


def qrels_from_rows(rows: list[tuple[str, str, int]], path: str = "<memory>") -> Qrels:
    frame = pd.DataFrame(rows, columns=list(QRELS_COLUMNS))
    frame = frame.astype({QUERY_ID: "str", DOC_ID: "str", RELEVANCE: "int64"})
    return Qrels(frame=frame, path=path)
