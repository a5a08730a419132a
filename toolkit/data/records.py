"""Plain typed structures that flow through the toolkit, parsed and validated once.

A ``Run`` and a ``Qrels`` hold one pandas DataFrame each with fixed column
names and dtypes; everything downstream reads these columns and never the
files again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

import pandas as pd

QUERY_ID = "query_id"
DOC_ID = "doc_id"
SCORE = "score"
RELEVANCE = "relevance"
#: The subtopic column of diversity qrels (``qid subtopic docid rel``, ``-R qrels_div``): the second column.
SUBTOPIC = "subtopic"
#: the column of ``QrelsOrigin.labels`` saying whose label it is: ``human`` or ``judge``
ORIGIN = "origin"

RUN_COLUMNS = (QUERY_ID, DOC_ID, SCORE)

#: The run file formats the reader takes (``toolkit.data.trec_io.read_run``), each as a provenance states it.
RUN_FORMATS = MappingProxyType(
    {
        "trec": "TREC (query_id Q0 doc_id rank score tag)",
        "msmarco": (
            "MS MARCO (query_id<TAB>doc_id<TAB>rank): score = 1/rank and tag 'anserini', as Pyserini 1.6's "
            "convert_msmarco_run_to_trec_run writes it, so trec_eval's order is the rank order"
        ),
    }
)
QRELS_COLUMNS = (QUERY_ID, DOC_ID, RELEVANCE)

# ---------------------------------------------------------------------- ids
# The id rules live in the inputs door (``toolkit.guard.readers``); these names stay importable from here.
from toolkit.guard.readers import check_id, id_error, id_problem  # noqa: E402, F401


def __getattr__(name: str) -> object:
    # BAD_ID_CHAR and BAD_ID_RE2 are compiled by the inputs door on first use, not when this module is imported
    if name in ("BAD_ID_CHAR", "BAD_ID_RE2"):
        from toolkit.guard import readers

        return getattr(readers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Run:
    """A TREC run: one row per retrieved (query, document) with its score.

    ``frame`` has columns query_id (str), doc_id (str), score (float64) in file
    order; the rank column of the file is deliberately not kept (trec_eval
    ignores it). ``duplicates_dropped`` counts lines removed by an explicit
    ``--dedupe first``; it is 0 otherwise. ``run_format`` is the format of the
    file it was read from: ``trec``, or ``msmarco`` (``qid<TAB>pid<TAB>rank``,
    its scores made from the ranks: ``RUN_FORMATS``).
    """

    frame: pd.DataFrame
    path: str = "<memory>"
    tag: str = ""
    sha256: str = ""
    duplicates_dropped: int = 0
    last_tag: str = ""  # the last line's tag: trec_eval's runid
    comment_lines: int = 0  # '#' lines skipped (trec_eval 10 accepts them)
    trailing_text_lines: int = 0  # lines with text after the tag, ignored as trec_eval ignores it
    run_format: str = "trec"

    @property
    def runid(self) -> str:
        return self.last_tag or self.tag

    def identity(self) -> dict[str, str]:
        """What a provenance records of the run it read: path, sha256, tag, and ``format_fields``."""
        return {"path": self.path, "sha256": self.sha256, "tag": self.tag} | self.format_fields()

    def format_fields(self) -> dict[str, str]:
        """For a run read from another format than TREC's, ``{"format": ...}``: which, and how its scores were made
        (``RUN_FORMATS``); nothing for a TREC run (whose provenance is as it always was)."""
        return {"format": RUN_FORMATS[self.run_format]} if self.run_format != "trec" else {}

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

    Diversity qrels (TREC Web track, ``qid subtopic docid rel``, read with
    ``-R qrels_div``) have a ``subtopic`` column too: one row per judged
    (query, subtopic, document), a document appearing once per subtopic.
    """

    frame: pd.DataFrame
    path: str = "<memory>"
    sha256: str = ""
    relevance_map: dict[int, int] = field(default_factory=dict)
    relevance_map_name: str = ""
    duplicates_dropped: int = 0
    comment_lines: int = 0
    origin: QrelsOrigin | None = None  # set when merged from human and judge labels (quality.qrels_origin)

    @property
    def diversity(self) -> bool:
        """Whether these are diversity qrels (a ``subtopic`` column)."""
        return SUBTOPIC in self.frame.columns


@dataclass(frozen=True)
class QrelsOrigin:
    """Where the labels of merged qrels came from: the ``policy`` (``human``, ``fill``, ``judge``), the origin
    of every label used (``labels``: query_id, doc_id, origin = ``human`` or ``judge``), the sources and the
    counts. Built by ``toolkit.quality.qrels_origin.merge_qrels``."""

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

    def first(self, n: int | None) -> Topics:
        """The first ``n`` queries in file order (all of them when ``n`` is None)."""
        return self if n is None else Topics(topics=self.topics[:n], path=self.path)

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
