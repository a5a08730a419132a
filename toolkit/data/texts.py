"""Document texts for reranking and the diagnosis: candidates JSON, JSONL corpora, Lucene stored documents."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from toolkit.data.records import DOC_ID, QUERY_ID, Run, Topic, Topics, run_from_rows
from toolkit.data.trec_io import read_bytes, sha256_bytes, sha256_file
from toolkit.errors import ConfigError, InputFormatError
from toolkit.guard.readers import check_id, check_text, parse_json


# ------------------------------------------------------------ text sources
@dataclass(frozen=True)
class TextSource:
    """Document texts by id, with a description for provenance.

    ``lookup(doc_ids)`` returns {doc_id: text} for the ids it knows; ids it
    does not know are absent from the result.
    """

    kind: str
    path: str
    lookup: Callable[[Iterable[str]], dict[str, str]]
    sha256: str = ""

    def describe(self) -> dict:
        return {"kind": self.kind, "path": self.path, "resolved": str(Path(self.path).resolve()), "sha256": self.sha256}


@dataclass(frozen=True)
class Candidates:
    """A candidates JSON: the first-stage run, the query texts and the passage texts."""

    run: Run
    topics: Topics
    texts: dict[str, str]
    path: str
    sha256: str

    def text_source(self) -> TextSource:
        texts = self.texts
        return TextSource(
            "candidates-json", self.path, lambda ids: {d: texts[d] for d in ids if d in texts}, self.sha256
        )


def read_candidates(path: str | os.PathLike) -> Candidates:
    """Parse a candidates JSON (``[{"query": str, "hits": [{"qid", "docid", "rank", "score", "content"}]}]``).

    The run keeps the file's scores (so trec_eval's order of the first stage
    is reproduced); a passage id seen with two different texts is an error, and so is an id holding
    whitespace or a control character (``toolkit.guard.readers.check_id``).
    """
    path = str(path)
    raw = read_bytes(path)
    data = parse_json(raw, path)  # bounded in size and nesting, lone surrogate escapes refused
    if not isinstance(data, list):
        raise InputFormatError(path, None, 'expected a JSON list of {"query": ..., "hits": [...]} objects')
    rows: list[tuple[str, str, float]] = []
    topics: list[Topic] = []
    texts: dict[str, str] = {}
    seen_q: set[str] = set()
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "query" not in entry or "hits" not in entry:
            raise InputFormatError(path, None, f"entry {i}: needs 'query' and 'hits'")
        hits = entry["hits"]
        if not hits:
            continue
        qid = None
        for j, hit in enumerate(hits):
            try:
                hq, doc, score = str(hit["qid"]), str(hit["docid"]), float(hit["score"])
            except (KeyError, TypeError, ValueError) as exc:
                raise InputFormatError(
                    path, None, f"entry {i}, hit {j}: needs qid, docid, numeric score ({exc})"
                ) from None
            check_id(hq, "query", path, where=f"entry {i}, hit {j}")
            check_id(doc, "document", path, where=f"entry {i}, hit {j}")
            qid = qid or hq
            if hq != qid:
                raise InputFormatError(path, None, f"entry {i}: hits of two queries ({qid!r}, {hq!r}) in one entry")
            content = hit.get("content")
            if content is not None:
                content = check_text(str(content), "passage text", path, where=f"entry {i}, hit {j}")
                if texts.setdefault(doc, content) != content:
                    raise InputFormatError(path, None, f"entry {i}: document {doc!r} appears with two different texts")
            rows.append((qid, doc, score))
        if qid in seen_q:
            raise InputFormatError(path, None, f"entry {i}: query {qid!r} appears twice")
        seen_q.add(qid)
        topics.append(Topic(qid, check_text(str(entry["query"]), "query text", path, where=f"entry {i}")))
    if not rows:
        raise InputFormatError(path, None, "no hits in the file")
    run = run_from_rows(rows, tag=Path(path).stem, path=path)
    dup = run.frame.duplicated([QUERY_ID, DOC_ID])
    if dup.any():
        q, d = run.frame.loc[dup, [QUERY_ID, DOC_ID]].iloc[0]
        raise InputFormatError(path, None, f"document {d!r} listed twice for query {q!r}")
    sha = sha256_bytes(raw)
    run = Run(frame=run.frame, path=path, tag=run.tag, sha256=sha)
    return Candidates(run=run, topics=Topics(tuple(topics), path=path), texts=texts, path=path, sha256=sha)


def read_jsonl_corpus(path: str | os.PathLike, wanted: set[str] | None = None) -> TextSource:
    """A JSONL corpus, read as ``twostage index`` reads it (``toolkit.data.corpus``): same ids, same texts.

    Only the ids in ``wanted`` are kept in memory when it is given.
    """
    from toolkit.data.corpus import iter_jsonl_docs

    path = str(path)
    texts = {d: t for d, t in iter_jsonl_docs([Path(path)]) if wanted is None or d in wanted}
    return TextSource("jsonl", path, lambda ids: {d: texts[d] for d in ids if d in texts}, sha256_file(path))


def lucene_text_source(index: str | os.PathLike) -> TextSource:
    """Texts stored in a Lucene index (``raw``, else ``contents``), read through Pyserini."""
    index = str(index)
    if not Path(index).is_dir():
        raise ConfigError(f"--index {index}: no such index folder")
    from toolkit.jvm import import_pyserini  # starts the JVM the toolkit's way first

    searcher = import_pyserini("pyserini.search.lucene").LuceneSearcher(index)

    def lookup(ids: Iterable[str]) -> dict[str, str]:
        out = {}
        for d in ids:
            doc = searcher.doc(d)
            if doc is None:
                continue
            text = doc.raw() or doc.contents()
            if text:
                out[d] = _plain_text(text)
        return out

    return TextSource("lucene", index, lookup)


_TEXT_KEYS = ("contents", "text", "content", "body", "passage")


def _plain_text(raw: str) -> str:
    """Stored raw documents may be JSON (``contents``) or HTML/SGML; reduce them to text."""
    s = raw.strip()
    if s.startswith("{"):
        try:
            obj = parse_json(s, "<stored document>")
        except InputFormatError:
            obj = None
        text = next((obj[k] for k in _TEXT_KEYS if k in obj), None) if isinstance(obj, dict) else None
        if text is not None:
            return str(text)
    if "<" in s and ">" in s:
        import html
        import re

        s = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", s)
        s = html.unescape(re.sub(r"<[^>]+>", " ", s))
    return " ".join(s.split())
