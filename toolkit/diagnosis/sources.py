"""Where a diagnosis finds query and document texts: candidates JSONs, a JSONL corpus, a Lucene index, or what
the reranked runs' sidecars name."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path


def texts_from_sources(
    candidates: Iterable[str | os.PathLike] = (), corpus: str | None = None, index: str | None = None
) -> tuple[dict[str, str], Callable | None, list[dict]]:
    """Query texts and a document-text lookup from candidates JSONs, a JSONL corpus or a Lucene index."""
    from toolkit.data.texts import lucene_text_source, read_candidates, read_jsonl_corpus

    queries: dict[str, str] = {}
    lookups = []
    described = []
    for path in candidates:
        c = read_candidates(path)
        queries.update(c.topics.as_dict())
        src = c.text_source()
        lookups.append(src.lookup)
        described.append(src.describe())
    if corpus:
        src = read_jsonl_corpus(corpus)
        lookups.append(src.lookup)
        described.append(src.describe())
    if index:
        src = lucene_text_source(index)
        lookups.append(src.lookup)
        described.append(src.describe())
    if not lookups:
        return queries, None, described

    def lookup(ids: Iterable[str]) -> dict[str, str]:
        ids = list(ids)
        out: dict[str, str] = {}
        for f in lookups:
            rest = [d for d in ids if d not in out]
            if not rest:
                break
            out.update(f(rest))
        return out

    return queries, lookup, described


def sources_from_metas(metas: Iterable[dict]) -> dict:
    """Texts named by several reranked runs' sidecars: every candidates file (as a list), the first corpus,
    index and topics."""
    out: dict = {"candidates": []}
    for meta in metas:
        found = sources_from_meta(meta)
        if "candidates" in found and found["candidates"] not in out["candidates"]:
            out["candidates"].append(found["candidates"])
        for key in ("corpus", "index", "topics"):
            if key in found:
                out.setdefault(key, found[key])
    if not out["candidates"]:
        del out["candidates"]
    return out


def sources_from_meta(meta: dict | None) -> dict:
    """Where the reranked run's sidecar says its query and document texts came from."""
    if not meta:
        return {}

    def existing(*paths: str | None) -> str | None:
        return next((p for p in paths if p and Path(p).exists()), None)

    texts = meta.get("texts") or {}
    out = {}
    path = existing(texts.get("path"), texts.get("resolved"))
    kind = {"candidates-json": "candidates", "jsonl": "corpus", "lucene": "index"}.get(texts.get("kind", ""))
    if path and kind:
        out[kind] = path
    topics = existing(meta.get("topics"), meta.get("topics_resolved"))
    name = meta.get("topics")
    if topics is None and isinstance(name, str) and name and "/" not in name and not name.endswith(".json"):
        topics = name  # a collection name (cacm)
    if topics and topics != out.get("candidates"):
        out["topics"] = topics
    return out
