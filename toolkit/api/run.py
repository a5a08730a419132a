"""``Run``: a ranked result list that the verbs return and take, with its settings sidecar."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from toolkit.data import records
from toolkit.data.records import DOC_ID, QUERY_ID, SCORE


@dataclass(frozen=True)
class Run:
    """A TREC run in memory: ``frame`` (query_id, doc_id, score) plus how it was made (``meta``).

    Pass it straight to ``evaluate``, ``compare`` or ``diagnose``; ``write`` stores it in TREC format with
    ``PATH.meta.json`` (what ``twostage bm25/dense/fuse/rerank --out`` writes beside a run).
    """

    inner: records.Run
    meta: dict[str, Any] = field(default_factory=dict)
    #: What the matching command prints on stderr: queries that retrieved nothing, how topics were converted.
    notes: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def read(cls, path: str | os.PathLike, *, dedupe: str = "error", run_format: str | None = None) -> Run:
        """A run file (gz allowed) and its ``PATH.meta.json`` sidecar when there is one.

        ``run_format``: ``trec`` (``qid Q0 docid rank score tag``), ``msmarco`` (``qid<TAB>pid<TAB>rank``, MS
        MARCO's: each rank becomes the score 1/rank and the tag is ``anserini``, as Pyserini's
        ``convert_msmarco_run_to_trec_run`` writes them), or ``auto`` (the default: the first line decides; three
        columns with a whole-number third are MS MARCO's)."""
        from toolkit.data.sidecar import read_meta
        from toolkit.data.trec_io import read_run

        run = read_run(path, dedupe=dedupe, run_format=run_format)  # type: ignore[arg-type]
        return cls(run, read_meta(path) or {})

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, tag: str = "", dedupe: str = "error") -> Run:
        """A run from a DataFrame: PyTerrier's ``qid, docno, score`` or ``query_id, doc_id, score`` (a rank
        column is ignored, as trec_eval ignores it); validated like a file (see ``toolkit.data.adapters``)."""
        from toolkit.data.adapters import run_from_frame

        return cls(run_from_frame(frame, tag=tag, dedupe=dedupe))

    @property
    def frame(self) -> pd.DataFrame:
        """The rows as stored: query_id, doc_id, score, in input order."""
        return self.inner.frame

    @property
    def tag(self) -> str:
        """The run's tag (trec_eval's runid)."""
        return self.inner.runid

    @property
    def query_ids(self) -> list[str]:
        """The queries the run holds, sorted."""
        return self.inner.query_ids

    def __len__(self) -> int:
        return len(self.inner)

    def to_frame(self, style: str = "twostage") -> pd.DataFrame:
        """Rows in trec_eval's order (score descending, ties by doc id descending) with rank 1..n per query.

        ``style="twostage"``: query_id, doc_id, score, rank; ``style="pyterrier"``: qid, docno, score, rank.
        """
        from toolkit.data.ranking import ranked_positions

        order, rank = ranked_positions(self.inner.frame, "float64")
        f = self.inner.frame
        out = pd.DataFrame(
            {
                QUERY_ID: f[QUERY_ID].to_numpy()[order],
                DOC_ID: f[DOC_ID].to_numpy()[order],
                SCORE: f[SCORE].to_numpy()[order],
                "rank": rank,
            }
        ).astype({QUERY_ID: "str", DOC_ID: "str"})
        if style == "pyterrier":
            return out.rename(columns={QUERY_ID: "qid", DOC_ID: "docno"})
        if style != "twostage":
            from toolkit.errors import ConfigError

            raise ConfigError(f"style must be 'twostage' or 'pyterrier', not {style!r}")
        return out

    def to_dict(self) -> dict[str, dict[str, float]]:
        """pytrec_eval / ranx style ``{query_id: {doc_id: score}}``."""
        out: dict[str, dict[str, float]] = {}
        f = self.inner.frame
        for q, d, s in zip(f[QUERY_ID].tolist(), f[DOC_ID].tolist(), f[SCORE].tolist()):
            out.setdefault(q, {})[d] = s
        return out

    def write(self, path: str | os.PathLike, *, tag: str | None = None, depth: int | None = None) -> None:
        """Write the run in TREC format (atomically, trec_eval order, full-precision scores) and, when the run
        has settings, ``PATH.meta.json`` beside it."""
        from toolkit.data.trec_io import sha256_file, write_json, write_run, written, written_together

        with written_together():  # both in place, or (a write refused) neither, the previous pair kept
            write_run(self.inner, path, tag=tag, depth=depth)
            if self.meta:
                meta = dict(self.meta)
                meta.pop("run", None)  # a sidecar read with the run names the file it was read from
                # the command line (when a command wrote it) first, then the file's checksum, then the settings
                head = {k: meta.pop(k) for k in ("command", "argv") if k in meta}
                meta = head | {"run": {"path": str(path), "sha256": sha256_file(written(path))}} | meta
                write_json(str(path) + ".meta.json", meta)

    def __repr__(self) -> str:
        n = len(self.inner)
        return f"Run({self.tag or 'untagged'!r}, {len(self.query_ids)} queries, {n} rows, from {self.inner.path})"

    def _repr_html_(self) -> str:
        from toolkit.report.notebook import run_html

        return run_html(repr(self), self.to_frame().head(10))
