"""User and named corpora, resolved to what Anserini's IndexCollection reads.

Accepted inputs:

* a named collection (``cacm``: Anserini ``HtmlCollection`` over the extracted
  tarball; ``cranfield``: the SMART file converted to JSONL);
* a JSONL file or a folder of JSONL files with ``id`` (or ``_id``/``docid``) and
  ``contents`` (or ``title``/``text``): normalised once into the cache as
  ``{"id", "contents"}`` lines (title and text joined by a newline);
* a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``);
* any folder plus an explicit Anserini collection class (``--collection-class
  TrecCollection``), passed through unchanged.

Every resolved corpus names the input files whose checksums identify it, so an
index built from it can be reused when they have not changed.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import ConfigError, InputFormatError
from toolkit.guard.readers import check_id, check_text, iter_json_lines, jsonl_lines, read_input

_ID_KEYS = ("id", "_id", "docid", "doc_id")
_OTHER_TEXT_KEYS = ("content", "body", "passage")


@dataclass(frozen=True)
class Corpus:
    """A corpus ready for Anserini: folder, collection class, generator, identity."""

    name: str
    input_dir: Path
    collection_class: str = "JsonCollection"
    generator: str = "DefaultLuceneDocumentGenerator"
    inputs: tuple[Path, ...] = ()  # the user's files whose checksums identify the corpus
    topics: str | None = None  # a topics spec usable by catalog.resolve_topics
    qrels: str | None = None  # a qrels spec usable by catalog.resolve_qrels
    format: str = "jsonl"  # jsonl (normalised), html, anserini (pass-through)
    notes: tuple[str, ...] = field(default_factory=tuple)


def _cache_folder(kind: str, key: str) -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "derived" / f"{kind}-{key[:16]}"


def _inputs_key(paths: list[Path]) -> str:
    from toolkit.data.trec_io import sha256_file

    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + sha256_file(p).encode())
    return h.hexdigest()


def _doc_from_json(obj: dict, path: Path, number: int) -> tuple[str, str]:
    doc_id = next((obj[k] for k in _ID_KEYS if k in obj), None)
    if doc_id is None:
        raise InputFormatError(str(path), number, f"document has no id field (one of {', '.join(_ID_KEYS)})")
    if "contents" in obj:
        text = str(obj["contents"])
    elif "text" in obj or "title" in obj:
        text = "\n".join(str(obj[k]) for k in ("title", "text") if obj.get(k))
    elif any(k in obj for k in _OTHER_TEXT_KEYS):
        body = next(str(obj[k]) for k in _OTHER_TEXT_KEYS if k in obj)
        text = f"{obj['title']}\n{body}" if obj.get("title") else body
    else:
        raise InputFormatError(
            str(path), number, f"document needs 'contents', 'title'/'text' or one of {', '.join(_OTHER_TEXT_KEYS)}"
        )
    return check_id(str(doc_id), "document", str(path), number), check_text(text, "text", str(path), number)


def iter_jsonl_docs(paths: list[Path]) -> Iterator[tuple[str, str]]:
    """(id, text) of every document in these JSONL files, validated line by line."""
    seen: set[str] = set()
    for path in paths:
        for number, obj in iter_json_lines(jsonl_lines(path), str(path)):
            doc_id, text = _doc_from_json(obj, path, number)
            if doc_id in seen:
                raise InputFormatError(str(path), number, f"document id {doc_id!r} appears twice")
            seen.add(doc_id)
            yield doc_id, text


def normalise_jsonl(name: str, paths: list[Path]) -> Path:
    """Write ``{"id", "contents"}`` lines for Anserini's JsonCollection (once per input checksum)."""
    from toolkit.data.trec_io import atomic_write

    out = _cache_folder(f"jsonl-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}", _inputs_key(paths))
    target = out / "docs.jsonl"
    if target.exists():
        return out
    from toolkit.data.catalog import derived_errors

    with derived_errors():  # the cache folder refused: one error naming it (an input's own error passes as it is)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_write(target) as fh:
            for doc_id, text in iter_jsonl_docs(paths):
                fh.write(json.dumps({"id": doc_id, "contents": text}, ensure_ascii=False) + "\n")
    return out


def beir_qrels_to_trec(tsv: Path) -> Path:
    """BEIR ``qrels/test.tsv`` (query-id, corpus-id, score; header) -> TREC qrels in the cache."""
    from toolkit.data.trec_io import atomic_write

    out = _cache_folder("beir-qrels", _inputs_key([tsv])) / "qrels.txt"
    if out.exists():
        return out
    from toolkit.guard.numbers import is_integer
    from toolkit.guard.readers import parse_label

    lines = []
    try:
        text = read_input(tsv).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputFormatError(str(tsv), None, "not valid UTF-8") from None
    for number, line in enumerate(text.split("\n"), start=1):  # "\n" only: U+2028 is no line end in a TREC file
        parts = line.rstrip("\r").split("\t")
        if not line.strip() or (number == 1 and not is_integer(parts[-1].strip())):
            continue  # blank line or header (its last field is no label the numbers door reads)
        if len(parts) != 3:
            raise InputFormatError(str(tsv), number, "expected query-id<TAB>corpus-id<TAB>score")
        # only the layout blanks around an id go (a no-break space at its end is part of it, and refused);
        # columns: where each id stands in the line (1-based)
        at_q = len(parts[0]) - len(parts[0].lstrip(" ")) + 1
        at_d = len(parts[0]) + 1 + len(parts[1]) - len(parts[1].lstrip(" ")) + 1
        qid = check_id(parts[0].strip(" "), "query", str(tsv), number, column=at_q)
        doc = check_id(parts[1].strip(" "), "document", str(tsv), number, column=at_d)
        lines.append(f"{qid} 0 {doc} {parse_label(parts[2].strip(), str(tsv), number)}\n")
    from toolkit.data.catalog import derived_errors

    with derived_errors(), atomic_write(out) as fh:
        fh.writelines(lines)
    return out


def resolve_corpus(
    spec: str, collection_class: str | None = None, data: str | os.PathLike | None = None, download: bool = False
) -> Corpus:
    """A named collection, a JSONL file/folder, a BEIR folder, or a folder for an Anserini class."""
    from toolkit.data import catalog

    if catalog.is_collection_name(spec) and not Path(spec).exists():
        coll = catalog.get_collection(spec)
        if coll.corpus == "html-tar":
            folder = catalog.cacm_html_folder(data, download)
            tar = catalog.collection_file(coll.name, "corpus", data)
            return Corpus(
                coll.name, folder, "HtmlCollection", inputs=(tar,), topics=coll.name, qrels=coll.name, format="html"
            )
        if coll.corpus == "smart":
            conv = catalog.convert_cranfield(data, download)
            src = catalog.collection_file(coll.name, "corpus", data)
            return Corpus(
                coll.name, conv.corpus_dir, inputs=(src,), topics=coll.name, qrels=coll.name, notes=conv.notes
            )
        raise ConfigError(
            f"collection {coll.name!r} has no corpus in the data folder (only topics and qrels); "
            "index the MS MARCO passage corpus as a JSONL file, or use a Pyserini prebuilt index when online"
        )
    path = Path(spec)
    if not path.exists():
        raise ConfigError(
            f"corpus {spec!r} is neither an existing file/folder nor a collection "
            f"({', '.join(catalog.collection_names())})"
        )
    name = path.stem if path.is_file() else path.name
    if collection_class and collection_class != "JsonCollection":
        if not path.is_dir():
            raise ConfigError(f"--collection-class {collection_class} needs a folder, {spec} is a file")
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return Corpus(name, path, collection_class, inputs=tuple(files), format="anserini")
    if path.is_dir() and (path / "corpus.jsonl").is_file():  # BEIR
        qrels = path / "qrels" / "test.tsv"
        return Corpus(
            name,
            normalise_jsonl(name, [path / "corpus.jsonl"]),
            inputs=(path / "corpus.jsonl",),
            topics=str(path / "queries.jsonl") if (path / "queries.jsonl").is_file() else None,
            qrels=str(beir_qrels_to_trec(qrels)) if qrels.is_file() else None,
            notes=(f"BEIR folder {path}: corpus.jsonl (_id, title, text -> title\\ntext)",),
        )
    if path.is_file():
        files = [path]
    else:
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith((".jsonl", ".json")))
        if not files:
            raise ConfigError(
                f"{spec}: no .jsonl files inside; for other formats name the Anserini collection class "
                "(--collection-class TrecCollection, HtmlCollection, ...)"
            )
    return Corpus(name, normalise_jsonl(name, files), inputs=tuple(files))


# ------------------------------------------------------- text for encoders
_TAG = re.compile(r"<[^>]+>")


def html_text(raw: str) -> str:
    """Visible text of a simple HTML document (CACM's <html><pre>...</pre></html>)."""
    return " ".join(html.unescape(_TAG.sub(" ", raw)).split())


def iter_corpus_texts(corpus: Corpus, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(doc id, text) for dense encoding, in a stable order (files sorted by name)."""
    count = 0
    if corpus.format == "html":
        for p in sorted(corpus.input_dir.iterdir()):
            if p.is_file() and p.suffix.lower() in (".html", ".htm"):
                yield p.stem, html_text(read_input(p).decode("utf-8", "replace"))
                count += 1
                if limit is not None and count >= limit:
                    return
        return
    if corpus.format != "jsonl":
        raise ConfigError(
            f"dense indexing reads JSONL, BEIR or named collections; {corpus.collection_class} "
            "folders are only indexed by Lucene"
        )
    files = sorted(corpus.input_dir.glob("*.jsonl"))
    for doc_id, text in iter_jsonl_docs(files):
        yield doc_id, text
        count += 1
        if limit is not None and count >= limit:
            return


def count_docs(corpus: Corpus) -> int | None:
    if corpus.format == "html":
        return sum(1 for p in corpus.input_dir.iterdir() if p.suffix.lower() in (".html", ".htm"))
    if corpus.format == "jsonl":
        return sum(sum(1 for line in jsonl_lines(p) if line.strip()) for p in corpus.input_dir.glob("*.jsonl"))
    return None
