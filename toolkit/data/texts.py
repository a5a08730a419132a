"""Document texts for reranking and the diagnosis: candidates JSON, JSONL corpora, Lucene stored documents."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.data.records import DOC_ID, QUERY_ID, Run, Topic, Topics, run_from_rows
from toolkit.data.trec_io import read_bytes, sha256_bytes, sha256_file
from toolkit.errors import ConfigError, InputFormatError
from toolkit.guard.numbers import NumberRefused, json_score
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


#: the fields of a rank_llm request's ``doc`` that hold its text, in the order rank_llm looks for them
#: (``_convert_doc_to_prompt_content``)
DOC_TEXT_FIELDS = ("text", "segment", "contents", "content", "body", "passage")


def rank_llm_doc_text(doc: object, path: str, where: str) -> str:
    """A rank_llm request candidate's text, as rank_llm builds it from its ``doc``: the first of
    ``DOC_TEXT_FIELDS`` it holds, after ``Title: {title} Content: `` when it has a title."""
    if not isinstance(doc, dict):
        raise InputFormatError(
            path, None, f"{where}: doc must be an object with its text ({', '.join(DOC_TEXT_FIELDS)})"
        )
    key = next((k for k in DOC_TEXT_FIELDS if k in doc), None)
    if key is None:
        raise InputFormatError(path, None, f"{where}: doc holds none of {', '.join(DOC_TEXT_FIELDS)}")
    content, title = doc[key], doc.get("title")
    if not isinstance(content, str) or (title and not isinstance(title, str)):
        raise InputFormatError(path, None, f"{where}: doc's {key} and title must be texts")
    return f"Title: {title} Content: {content}" if title else content


def _entries(raw: bytes, path: str) -> list[tuple[object, int | None]]:
    """The requests of a candidates file: a JSON list, or (a ``.jsonl`` file, as rank_llm reads it) one JSON
    object per line, blank lines skipped; each with its line in a JSONL file."""
    if path.endswith(".jsonl"):
        out = []
        for n, line in enumerate(raw.split(b"\n"), start=1):
            if line.strip():
                out.append((parse_json(line, path, line=n), n))
        return out
    data = parse_json(raw, path)  # bounded in size and nesting, lone surrogate escapes refused
    if not isinstance(data, list):
        raise InputFormatError(
            path,
            None,
            'expected a JSON list of {"query": ..., "hits": [...]} or {"query": {"text", "qid"}, "candidates": '
            "[...]} objects",
        )
    return [(e, None) for e in data]


def read_candidates(path: str | os.PathLike) -> Candidates:
    """Parse a candidates file: a JSON list of requests, or a JSONL file of one request per line (as rank_llm
    reads them). A request is rank_llm 0.26's ``{"query": {"text", "qid"}, "candidates": [{"docid", "score",
    "doc"}]}`` (the text from ``doc`` as rank_llm takes it: ``rank_llm_doc_text``) or the older
    ``{"query": str, "hits": [{"qid", "docid", "rank", "score", "content"}]}``.

    The run keeps the file's scores (so trec_eval's order of the first stage
    is reproduced); a passage id seen with two different texts is an error, and so is an id holding
    whitespace, a control or a format character (``toolkit.guard.readers.check_id``).
    """
    path = str(path)
    raw = read_bytes(path)
    rows: list[tuple[str, str, float]] = []
    topics: list[Topic] = []
    texts: dict[str, str] = {}
    seen_q: set[str] = set()
    for i, (entry, line) in enumerate(_entries(raw, path)):
        where = f"line {line}" if line is not None else f"entry {i}"
        new = isinstance(entry, dict) and isinstance(entry.get("query"), dict) and "candidates" in entry
        if not new and (not isinstance(entry, dict) or "query" not in entry or "hits" not in entry):
            raise InputFormatError(
                path, line, f"{where}: needs 'query' and 'hits', or rank_llm's 'query': {{text, qid}} and 'candidates'"
            )
        assert isinstance(entry, dict)
        hits = entry["candidates"] if new else entry["hits"]
        if not isinstance(hits, list):
            raise InputFormatError(path, line, f"{where}: {'candidates' if new else 'hits'} must be a list")
        if new:
            query = entry["query"]
            if "qid" not in query or not isinstance(query.get("text"), str):
                raise InputFormatError(path, line, f"{where}: query needs 'text' and 'qid'")
            qid: str | None = str(query["qid"])
            check_id(qid, "query", path, where=where)
            query_text = query["text"]
        else:
            qid, query_text = None, entry["query"]
        if not hits:
            continue
        for j, hit in enumerate(hits):
            try:
                hq = str(hit["qid"]) if not new else qid
                doc, raw_score = str(hit["docid"]), hit["score"]
            except (KeyError, TypeError) as exc:
                needs = "docid, numeric score, doc" if new else "qid, docid, numeric score"
                raise InputFormatError(
                    path, line, f"{where}, hit {j}: needs {needs} ({type(exc).__name__}: {exc})"
                ) from None
            try:  # a JSON number, or a text read as a run's score is (the numbers door); NaN refused
                score = json_score(raw_score)
            except NumberRefused as exc:
                raise InputFormatError(path, line, f"{where}, hit {j}: needs a numeric score: {exc}") from None
            check_id(hq, "query", path, where=f"{where}, hit {j}")
            check_id(doc, "document", path, where=f"{where}, hit {j}")
            qid = qid or hq
            if hq != qid:
                raise InputFormatError(path, line, f"{where}: hits of two queries ({qid!r}, {hq!r}) in one entry")
            content = rank_llm_doc_text(hit.get("doc"), path, f"{where}, hit {j}") if new else hit.get("content")
            if content is not None:
                content = check_text(str(content), "passage text", path, where=f"{where}, hit {j}")
                if texts.setdefault(doc, content) != content:
                    raise InputFormatError(path, line, f"{where}: document {doc!r} appears with two different texts")
            rows.append((str(qid), doc, score))
        if qid in seen_q:
            raise InputFormatError(path, line, f"{where}: query {qid!r} appears twice")
        seen_q.add(str(qid))
        topics.append(Topic(str(qid), check_text(str(query_text), "query text", path, where=where)))
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


# ------------------------------------------------------------ what a reranker or a judge reads
def topics_from(
    topics: Any, data_dir: str | os.PathLike | None = None, max_queries: int | None = None
) -> tuple[Topics, tuple[str, ...]]:
    """The topics (a file, a collection name, or ``{qid: text}``), the first ``max_queries``, and what reading
    them noted (Cranfield's query renumbering)."""
    from toolkit.data import catalog

    if isinstance(topics, Mapping):
        return Topics(tuple(Topic(str(q), str(t)) for q, t in topics.items())).first(max_queries), ()
    spec = str(topics)
    t = catalog.resolve_topics(spec, data_dir)
    notes: tuple[str, ...] = ()
    if catalog.is_collection_name(spec) and catalog.get_collection(spec).corpus == "smart":
        notes = tuple(catalog.convert_cranfield(data_dir).notes[1:2])  # the query renumbering
    return t.first(max_queries), notes


def text_source(first: Run, candidates: Candidates | None, corpus: Any, index: Any) -> TextSource:
    """Where the documents' texts come from: ``corpus`` (JSONL; only the run's documents are kept), ``index`` (a
    Lucene index's stored documents) or the candidates file; at most one of corpus and index."""
    if corpus and index:
        raise ConfigError("give at most one of corpus= or index=")
    if corpus:
        return read_jsonl_corpus(corpus, wanted=set(first.frame["doc_id"].unique().tolist()))
    if index:
        return lucene_text_source(index)
    if candidates is not None:
        return candidates.text_source()
    raise ConfigError("a run needs a text source: corpus=JSONL or index=LUCENE_INDEX (or candidates=JSON)")


def rerank_inputs(
    run: Any, candidates: Any, topics: Any, corpus: Any, index: Any
) -> tuple[Candidates | None, Run, dict[str, str], TextSource]:
    """(the candidates file or None, the first-stage run, the query texts, the document texts) of exactly one of
    ``run`` (anything ``toolkit.data.adapters.as_run`` reads) or ``candidates`` (a candidates JSON)."""
    from toolkit.data.adapters import as_run

    if (run is None) == (candidates is None):
        raise ConfigError("give exactly one of run= or candidates=")
    cand = read_candidates(candidates) if candidates is not None else None
    first = cand.run if cand is not None else as_run(run)
    queries = dict(cand.topics.as_dict()) if cand is not None else {}
    if topics is not None:
        queries.update(topics_from(topics)[0].as_dict())
    if not queries:
        raise ConfigError("reranking a run needs topics= (query texts)")
    return cand, first, queries, text_source(first, cand, corpus, index)


def rerank_query_ids(query_ids: Iterable[str] | None, judged_only: Any) -> list[str] | None:
    """The queries to rerank: ``query_ids``, only those judged in ``judged_only`` (or all of those)."""
    ids = [str(q) for q in query_ids or ()]
    if judged_only is not None:
        from toolkit.data.adapters import as_qrels

        judged = set(as_qrels(judged_only).query_ids)
        ids = [q for q in ids if q in judged] if ids else sorted(judged)
    return ids or None


def topics_source(topics: Any, candidates: Candidates | None) -> dict:
    """Where the query texts came from, as the rerank and judge sidecars record it."""
    given = ("<dict>" if isinstance(topics, Mapping) else str(topics)) if topics is not None else None
    source: str | None = given or (str(candidates.path) if candidates is not None and candidates.path else None)
    resolved = str(Path(source).resolve()) if source and source != "<dict>" and Path(source).is_file() else None
    if resolved is None:
        return {"topics": source, "topics_resolved": None}
    return {"topics": source, "topics_resolved": resolved, "topics_sha256": sha256_file(resolved)}
