"""Named collections from a declared catalogue; data folders; qrels/topics by name.

Data is declared, not coded: every collection lists its files with the public
source URL and sha256 (computed on the copies in ``../shared/data``). Files are
looked up in the data folder, which is, in order: an explicit ``--data-dir``,
``$TWOSTAGE_DATA``, or ``../shared/data`` beside the checkout (or beside the
current directory). A file that is absent there is downloaded into the cache
(``$TWOSTAGE_CACHE`` or ``~/.cache/twostage``) only when the caller allows it,
checked against its checksum; without network the error says where to put it.

Derived data (the extracted CACM HTML, the converted Cranfield files) is
written to the cache, in a folder named after the inputs' checksums, so it is
built once and never confused with data from other inputs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from toolkit.data.checksums import ChecksumMemo
from toolkit.errors import ChecksumError, ConfigError, InputFormatError
from toolkit.guard.numbers import NumberRefused, integer

log = logging.getLogger(__name__)

_REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ data folders
def data_dir(explicit: str | os.PathLike | None = None, required: bool = False) -> Path | None:
    """The data folder in use, or None when there is none (and it is not required)."""
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    elif os.environ.get("TWOSTAGE_DATA"):
        candidates.append(Path(os.environ["TWOSTAGE_DATA"]))
    else:
        candidates += [_REPO.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    if required:
        where = ", ".join(str(c) for c in candidates)
        raise ConfigError(f"no data folder found (looked at {where}); pass --data-dir or set TWOSTAGE_DATA")
    return None


def cache_dir() -> Path:
    """Where downloads and derived files go: ``$TWOSTAGE_CACHE`` or ``~/.cache/twostage``."""
    from toolkit.guard.store import cache_root

    return cache_root()


def derived_errors() -> contextlib.AbstractContextManager[None]:
    """Within the block, the file system refusing the derived-data cache (``$TWOSTAGE_CACHE/derived``: converted
    corpora and qrels) is one ``CacheUnusableError`` naming it, as for every cache."""
    from toolkit.guard.store import cache_errors

    return cache_errors("derived-data cache", cache_dir() / "derived")


# --------------------------------------------------------------- catalogue
@dataclass(frozen=True)
class DataFile:
    """One declared file: its path inside the data folder, public source and checksum."""

    path: str
    sha256: str
    url: str
    size: int


@dataclass(frozen=True)
class Collection:
    """A named test collection.

    ``corpus`` is how to index it: ``html-tar`` (Anserini HtmlCollection over the
    extracted tarball), ``smart`` (Cranfield's SMART file, converted to JSONL), or
    ``""`` when the data folder holds no corpus (DL19/DL20: topics and qrels only).
    """

    name: str
    description: str
    files: dict[str, DataFile]  # role -> file; roles: corpus, topics, qrels
    corpus: str = ""
    relevance_map_name: str = ""
    pyserini_topics: str = ""  # Anserini's Topics enum / Pyserini name, when one exists
    pyserini_qrels: str = ""


_ANSERINI = "https://raw.githubusercontent.com/castorini/anserini/81e3414"
_TOOLS = "https://raw.githubusercontent.com/castorini/anserini-tools/5b819c1"
_CRAN = "https://raw.githubusercontent.com/noramtboraas/information-retrieval/4ea1b8e"

CATALOG: Mapping[str, Collection] = MappingProxyType(
    {
        "cacm": Collection(
            "cacm",
            "CACM: 3,204 abstracts (HTML), 64 topics, binary qrels for 52",
            {
                "corpus": DataFile(
                    "cacm/cacm.tar.gz",
                    "4e318d8920a384dfe11f81410abdc19d96a0e23e5fb7832c385be75c7cb75bf9",
                    f"{_ANSERINI}/src/main/resources/cacm/cacm.tar.gz",
                    808000,
                ),
                "topics": DataFile(
                    "cacm/topics.cacm.txt",
                    "1dc7b94fbf4adeb0c49be44fc6d7802ddc7bc4ad1b869013af10d09b44019799",
                    f"{_TOOLS}/topics/topics.cacm.txt",
                    12445,
                ),
                "qrels": DataFile(
                    "cacm/qrels.cacm.txt",
                    "359f77ee6aab89333745a7f25f56370268a493abe1baff76979ad37a4d5428ef",
                    f"{_TOOLS}/qrels/qrels.cacm.txt",
                    14194,
                ),
            },
            corpus="html-tar",
            pyserini_topics="topics.cacm.txt",
            pyserini_qrels="qrels.cacm.txt",
        ),
        "cranfield": Collection(
            "cranfield",
            "Cranfield 1400 (SMART format): 1,400 abstracts, 225 queries, graded qrels (inverted codes)",
            {
                "corpus": DataFile(
                    "cranfield/cran.all.1400",
                    "fbb8935a93263ab6c9fadefb507fd7cd5e101e7fbeb31c12e6bff6dd501315e8",
                    f"{_CRAN}/cran.all.1400",
                    1684117,
                ),
                "topics": DataFile(
                    "cranfield/cran.qry",
                    "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
                    f"{_CRAN}/cran.qry",
                    28957,
                ),
                "qrels": DataFile(
                    "cranfield/cranqrel",
                    "a90f56082cd44db70bf2c21ebca39a1a34e37c82ccb5ddf1bcc64f18795234c7",
                    f"{_CRAN}/cranqrel",
                    21377,
                ),
            },
            corpus="smart",
            relevance_map_name="cranfield",
        ),
        "dl19-passage": Collection(
            "dl19-passage",
            "TREC DL 2019 passage: 43 topics, graded qrels 0-3 (MS MARCO passage corpus not included)",
            {
                "topics": DataFile(
                    "msmarco-passage/topics.dl19-passage.txt",
                    "518992da259fb61f64e4790791df91a7b42ea5773f374aed59220ebb51d58d90",
                    f"{_TOOLS}/topics/topics.dl19-passage.txt",
                    1764,
                ),
                "qrels": DataFile(
                    "msmarco-passage/qrels.dl19-passage.txt",
                    "8a1f10d550732e4cd91d7fc49846a3784de4040972f583e69285a88f3c5fee92",
                    f"{_TOOLS}/qrels/qrels.dl19-passage.txt",
                    187092,
                ),
            },
            pyserini_topics="topics.dl19-passage.txt",
            pyserini_qrels="qrels.dl19-passage.txt",
        ),
        "dl20-passage": Collection(
            "dl20-passage",
            "TREC DL 2020 passage: 200 topics (54 judged), graded qrels 0-3 (corpus not included)",
            {
                "topics": DataFile(
                    "msmarco-passage/topics.dl20.txt",
                    "726cb4018b85a335fcbe09004df7f084ec1bf20531961d9af7b0c71dd609e69b",
                    f"{_TOOLS}/topics/topics.dl20.txt",
                    8394,
                ),
                "qrels": DataFile(
                    "msmarco-passage/qrels.dl20-passage.txt",
                    "60d4c34561f9687f8f73e0a752ba80ab80159b3e9c1bedd0a351f747ed6f5684",
                    f"{_TOOLS}/qrels/qrels.dl20-passage.txt",
                    218617,
                ),
            },
            pyserini_topics="topics.dl20.txt",
            pyserini_qrels="qrels.dl20-passage.txt",
        ),
    }
)
_ALIASES = MappingProxyType(
    {
        "dl19": "dl19-passage",
        "dl20": "dl20-passage",
        "msmarco-passage-dl19": "dl19-passage",
        "cran": "cranfield",
        "cranfield1400": "cranfield",
    }
)


def collection_names() -> list[str]:
    return sorted(CATALOG)


def get_collection(name: str) -> Collection:
    key = _ALIASES.get(name, name)
    if key not in CATALOG:
        raise ConfigError(f"unknown collection {name!r} (known: {', '.join(collection_names())})")
    return CATALOG[key]


def is_collection_name(name: str) -> bool:
    return _ALIASES.get(name, name) in CATALOG


# ------------------------------------------------------------ file access
#: Declared: the catalogue files whose checksum held, under (path, size, mtime_ns), per process.
_VERIFIED = ChecksumMemo()


def verify_checksum(path: Path, expected: str) -> None:
    """Raise ``ChecksumError`` when ``path`` differs from the declared sha256 (hashed once per process)."""
    from toolkit.data.trec_io import sha256_file

    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    actual = _VERIFIED.get(key) or sha256_file(path)
    if actual != expected:
        raise ChecksumError(
            f"{path}: sha256 {actual[:16]}... differs from the catalogue's {expected[:16]}...; "
            "the file is corrupt or a different version; replace it with the published one"
        )
    _VERIFIED.put(key, actual)


#: Seconds a collection file's whole download may take, retries included: the declared files are under 1 MB, and
#: a server or proxy that trickles is cut here rather than kept waiting on.
DOWNLOAD_TIMEOUT = 60.0


def _download(df: DataFile, dest: Path) -> None:
    """``df`` from its declared URL into ``dest``, through the one client (``toolkit.guard.client.download``): a
    streamed GET of exactly the declared size and sha256 within ``DOWNLOAD_TIMEOUT``; ``dest`` appears only
    whole and checked."""
    from toolkit.data.trec_io import atomic_write
    from toolkit.guard.client import download

    log.info("downloading %s -> %s", df.url, dest)
    with atomic_write(dest, "wb") as fh:
        download(df.url, fh, size=df.size, sha256=df.sha256, timeout=DOWNLOAD_TIMEOUT)


def collection_file(name: str, role: str, data: str | os.PathLike | None = None, download: bool = False) -> Path:
    """The checked path of a collection's file (role: corpus, topics, qrels).

    Looked up in the data folder, then the download cache; fetched from the
    declared URL into the cache only when ``download`` is true.
    """
    coll = get_collection(name)
    if role not in coll.files:
        raise ConfigError(
            f"collection {coll.name!r} has no {role} in the data folder (it has: {', '.join(coll.files)})"
        )
    df = coll.files[role]
    folder = data_dir(data)
    places = ([folder / df.path] if folder else []) + [cache_dir() / "data" / df.path]
    for p in places:
        if p.is_file():
            verify_checksum(p, df.sha256)
            return p
    where = " or ".join(str(p) for p in places)
    if not download:
        raise ConfigError(
            f"{coll.name}: {df.path} not found (looked at {where}); put the published file there "
            f"(source: {df.url}, sha256 {df.sha256[:16]}...) or set TWOSTAGE_DATA / --data-dir"
        )
    dest = places[-1]
    from toolkit.guard.client import RequestFailed
    from toolkit.guard.store import cache_errors

    try:
        with cache_errors("download cache", cache_dir() / "data"):  # a folder that takes no file: not the network
            _download(df, dest)
    except (OSError, RequestFailed) as exc:
        raise ConfigError(
            f"{coll.name}: {df.path} is not in the data folder and could not be downloaded from {df.url} "
            f"({exc}); with no network, copy the file to {places[0] if folder else dest}"
        ) from None
    try:
        verify_checksum(dest, df.sha256)
    except ChecksumError:
        dest.unlink(missing_ok=True)
        raise
    return dest


# ------------------------------------------------------------------- CACM
def cacm_html_folder(data: str | os.PathLike | None = None, download: bool = False) -> Path:
    """``cacm.tar.gz`` extracted into the cache (once): the input of Anserini's HtmlCollection."""
    tar = collection_file("cacm", "corpus", data, download)
    out = cache_dir() / "derived" / f"cacm-{get_collection('cacm').files['corpus'].sha256[:12]}"
    done = out.with_name(out.name + ".complete")  # beside, not inside: Anserini would index it
    if done.exists() and out.is_dir():
        return out
    import shutil

    from toolkit.guard.writer import as_given

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        with tarfile.open(tar, "r:gz") as tf:
            tf.extractall(tmp, filter="data")
        if out.exists():
            shutil.rmtree(out, ignore_errors=True)
        try:
            tmp.rename(out)
        except OSError:  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
        done.write_text("ok\n")
    except OSError as exc:  # the cache cannot take it (full, read-only, HOME=/proc/1): named, not its temporary
        shutil.rmtree(tmp, ignore_errors=True)
        with derived_errors():
            raise as_given(exc, str(out), tmp) from exc
    return out


# --------------------------------------------------------------- Cranfield
@dataclass(frozen=True)
class CranfieldFiles:
    """The Cranfield collection converted to standard formats, and what was done."""

    corpus_dir: Path  # JSONL corpus (id, contents) for Anserini's JsonCollection
    topics: Path  # TSV, queries renumbered 1..225 by position
    qrels: Path  # TREC qrels with Cleverdon's codes (1..4, -1), query ids 1..225
    notes: tuple[str, ...] = field(default_factory=tuple)


def _smart_records(text: str, path: str) -> list[tuple[str, dict[str, str]]]:
    """Split a SMART file into (.I id, {field letter: text}) records."""
    records: list[tuple[str, dict[str, str]]] = []
    current: dict[str, list[str]] | None = None
    field_name = ""
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        m = re.match(r"^\.([A-Z])\b\s*(.*)$", line.rstrip())
        if m and m.group(1) == "I":
            current = {}
            records.append((m.group(2).strip(), current))  # type: ignore[arg-type]
            field_name = ""
            continue
        if m and current is not None:
            field_name = m.group(1)
            current.setdefault(field_name, [])
            if m.group(2):
                current[field_name].append(m.group(2))
            continue
        if current is None:
            if line.strip():
                raise InputFormatError(path, number, "expected a '.I <id>' line first (SMART format)")
            continue
        if field_name:
            current[field_name].append(line.strip())
    return [(rid, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}) for rid, fields in records]  # type: ignore[union-attr]


def convert_cranfield(data: str | os.PathLike | None = None, download: bool = False) -> CranfieldFiles:
    """Convert Cranfield's SMART files once (into the cache) and say which mappings were applied.

    * documents: ``.I n`` -> id ``n``; contents = title (``.T``) + abstract (``.W``);
    * queries: ``cran.qry`` labels them 001, 002, 004, ... 365 (225 queries, with gaps),
      while ``cranqrel`` numbers them 1..225 by position, so queries are renumbered by
      position (the printed label is kept in the notes and in ``topics.labels.tsv``);
    * qrels: CRLF and trailing spaces removed; codes kept as published (1 = complete
      answer ... 4 = minimum interest, -1); the ``cranfield`` relevance map (1->4, 2->3,
      3->2, 4->1, -1->0) is applied when the qrels are loaded by name.
    """
    coll = get_collection("cranfield")
    src = {role: collection_file("cranfield", role, data, download) for role in ("corpus", "topics", "qrels")}
    key = "-".join(coll.files[r].sha256[:8] for r in ("corpus", "topics", "qrels"))
    out = cache_dir() / "derived" / f"cranfield-{key}"
    files = CranfieldFiles(out / "corpus", out / "topics.tsv", out / "qrels.txt")
    notes_path = out / "notes.json"
    if notes_path.exists():
        with derived_errors():
            notes = json.loads(notes_path.read_text())
        return CranfieldFiles(files.corpus_dir, files.topics, files.qrels, tuple(notes))
    with derived_errors():
        return _write_cranfield(src, out, files, notes_path)


def _write_cranfield(src: dict[str, Path], out: Path, files: CranfieldFiles, notes_path: Path) -> CranfieldFiles:
    from toolkit.data.trec_io import atomic_write
    from toolkit.guard.readers import read_input  # the inputs door: regular files, no NUL byte

    docs = _smart_records(read_input(src["corpus"]).decode("utf-8", "replace"), str(src["corpus"]))
    queries = _smart_records(read_input(src["topics"]).decode("utf-8", "replace"), str(src["topics"]))
    qrels_lines = []
    codes: dict[int, int] = {}
    qrels_text = read_input(src["qrels"]).decode("utf-8", "replace").replace("\r\n", "\n")
    for number, line in enumerate(qrels_text.split("\n"), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3 or not all(re.fullmatch(r"-?[0-9]+", p) for p in parts):
            raise InputFormatError(str(src["qrels"]), number, "expected 'query doc code' (three integers)")
        try:  # the numbers door: ASCII digits, at most 18 of them
            q, d, c = (integer(p, what="field") for p in parts)
        except NumberRefused as exc:
            raise InputFormatError(str(src["qrels"]), number, str(exc)) from None
        if not 1 <= q <= len(queries):
            raise InputFormatError(str(src["qrels"]), number, f"query {q} outside 1..{len(queries)}")
        codes[c] = codes.get(c, 0) + 1
        qrels_lines.append(f"{q} 0 {d} {c}\n")
    out.mkdir(parents=True, exist_ok=True)
    files.corpus_dir.mkdir(exist_ok=True)
    with atomic_write(files.corpus_dir / "cranfield.jsonl") as fh:
        for rid, fields in docs:
            contents = "\n".join(x for x in (fields.get("T", ""), fields.get("W", "")) if x)
            fh.write(
                json.dumps({"id": rid, "contents": contents, "title": fields.get("T", ""), "text": fields.get("W", "")})
                + "\n"
            )
    relabelled = 0
    with atomic_write(files.topics) as fh, atomic_write(out / "topics.labels.tsv") as labels:
        for pos, (label, fields) in enumerate(queries, start=1):
            fh.write(f"{pos}\t{fields.get('W', '')}\n")
            labels.write(f"{pos}\t{label}\n")
            relabelled += int(label.lstrip("0") != str(pos))
    with atomic_write(files.qrels) as fh:
        fh.writelines(qrels_lines)
    notes = (
        f"cranfield: {len(docs)} documents, {len(queries)} queries, {len(qrels_lines)} judgments",
        f"cranfield: queries renumbered 1..{len(queries)} by position in cran.qry "
        f"({relabelled} printed labels differ, e.g. .I 004 -> 3), matching cranqrel's numbering",
        "cranfield: relevance codes "
        + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items()))
        + "; relevance map 'cranfield' applied at load: 1->4, 2->3, 3->2, 4->1, -1->0 (larger = more relevant)",
    )
    notes_path.write_text(json.dumps(list(notes)))
    return CranfieldFiles(files.corpus_dir, files.topics, files.qrels, notes)


# ------------------------------------------------------------------ qrels
@dataclass(frozen=True)
class QrelsSource:
    """Where named qrels come from, and the relevance map to apply at load time."""

    path: Path
    relevance_map: dict[int, int] = field(default_factory=dict)
    relevance_map_name: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def read(
        self,
        dedupe: str = "error",
        relevance_map: dict[int, int] | None = None,
        relevance_map_name: str = "",
        subtopics: bool = False,
    ):
        """The parsed qrels, with this source's relevance map unless another one is given; ``subtopics``: read
        as diversity qrels (``qid subtopic docid rel``, ``-R qrels_div``)."""
        from toolkit.data.trec_io import read_qrels

        if not relevance_map:
            relevance_map, relevance_map_name = self.relevance_map, self.relevance_map_name
        return read_qrels(
            self.path,
            dedupe=dedupe,
            relevance_map=relevance_map or None,
            relevance_map_name=relevance_map_name,
            subtopics=subtopics,
        )


def pyserini_cache_dir() -> Path:
    """Anserini's topics/qrels cache (``RelevanceJudgments.getCacheDir()``)."""
    return Path.home() / ".cache" / "pyserini" / "topics-and-qrels"


def seed_pyserini_cache(data: str | os.PathLike | None = None) -> list[Path]:
    """Copy the data folder's topics and qrels into Pyserini's cache under Anserini's
    file names, so ``pyserini.search.get_qrels_file('dl19-passage')`` and
    ``get_topics('dl19-passage')`` work offline. Existing identical files are kept."""
    import shutil

    from toolkit.data.trec_io import sha256_file

    seeded = []
    target = pyserini_cache_dir()
    for coll in CATALOG.values():
        for role, cache_name in (("topics", coll.pyserini_topics), ("qrels", coll.pyserini_qrels)):
            if not cache_name or role not in coll.files:
                continue
            try:
                src = collection_file(coll.name, role, data)
            except ConfigError:
                continue
            dest = target / cache_name
            if dest.exists() and sha256_file(dest) == coll.files[role].sha256:
                seeded.append(dest)
                continue
            target.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            try:
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
            except OSError:
                tmp.unlink(missing_ok=True)  # a full disk leaves no half copy behind
                raise
            seeded.append(dest)
    return seeded


def resolve_qrels(spec: str, data: str | os.PathLike | None = None) -> QrelsSource:
    """A qrels file path as given, a collection name looked up in the data folder, or a
    Pyserini qrels name (fetched through Pyserini's cache)."""
    if Path(spec).exists():
        return QrelsSource(Path(spec))
    if is_collection_name(spec):
        coll = get_collection(spec)
        if coll.corpus == "smart":
            conv = convert_cranfield(data)
            mapping, name = relevance_map(coll.relevance_map_name)
            return QrelsSource(conv.qrels, mapping, name, conv.notes)
        path = collection_file(coll.name, "qrels", data)
        if coll.pyserini_qrels:
            _seed_quietly(data)  # so Pyserini's own tools find the same file offline
        return QrelsSource(path)
    if _looks_like_name(spec):
        _seed_quietly(data)
        path = _pyserini_qrels(spec)
        if path is not None:
            return QrelsSource(path)
    else:
        raise ConfigError(
            f"qrels file {spec} does not exist (and it is not a collection name: {', '.join(collection_names())})"
        )
    raise ConfigError(
        f"{spec!r} is neither a file nor a known qrels name (collections: {', '.join(collection_names())}; "
        "or a Pyserini qrels name such as dl21-passage when online)"
    )


_FILE_SUFFIXES = (".txt", ".tsv", ".gz", ".json", ".jsonl", ".trec", ".qrels", ".run", ".csv", ".xml")


def _looks_like_name(spec: str) -> bool:
    """A Pyserini-style name (dl21-passage, car17v1.5-benchmarkY1test), not a file path."""
    return bool(re.fullmatch(r"[\w.+-]+", spec)) and not spec.lower().endswith(_FILE_SUFFIXES)


def _seed_quietly(data: str | os.PathLike | None) -> None:
    try:
        seed_pyserini_cache(data)
    except OSError as exc:  # read-only home: Pyserini lookups then need the network
        log.debug("could not seed Pyserini's cache: %s", exc)


def pyserini_names(kind: str) -> frozenset[str]:
    """Pyserini's topics or qrels names (``topics_mapping`` / ``qrels_mapping``), read from
    its source with ``ast`` so that an unknown name is rejected without starting the JVM."""
    return _pyserini_names().get(kind, frozenset())


@functools.cache  # the installed Pyserini's source: read once per process
def _pyserini_names() -> Mapping[str, frozenset[str]]:
    import ast
    import importlib.util

    spec = importlib.util.find_spec("pyserini")
    names: dict[str, set[str]] = {"topics": set(), "qrels": set()}
    if spec and spec.submodule_search_locations:
        src = Path(next(iter(spec.submodule_search_locations))) / "search" / "_base.py"
        try:
            tree = ast.parse(src.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            tree = None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in ("topics_mapping", "qrels_mapping"):
                        keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
                        names[target.id.split("_")[0]] |= keys
    return MappingProxyType({k: frozenset(v) for k, v in names.items()})


def _pyserini_qrels(name: str) -> Path | None:
    """A Pyserini qrels name through Pyserini (downloads into its cache when online)."""
    if name not in pyserini_names("qrels"):
        return None
    try:
        from toolkit.jvm import import_pyserini

        base = import_pyserini("pyserini.search._base")
    except ConfigError:
        return None
    if name not in base.qrels_mapping:
        return None
    try:
        return Path(base.get_qrels_file(name))
    except Exception as exc:  # JavaException on a failed download
        raise ConfigError(f"Pyserini qrels {name!r} are not cached and could not be downloaded ({exc})") from None


# ------------------------------------------------------------------ topics
def resolve_topics(spec: str, data: str | os.PathLike | None = None):
    """Topics from a file (TSV, JSONL, TREC, Anserini), a collection name, or a Pyserini name.

    Returns ``records.Topics``.
    """
    from toolkit.data.records import Topic, Topics
    from toolkit.data.trec_io import read_topics

    if Path(spec).is_file():
        return read_topics(spec)
    if Path(spec).is_dir() and (Path(spec) / "queries.jsonl").is_file():  # BEIR folder
        return read_topics(Path(spec) / "queries.jsonl")
    if is_collection_name(spec):
        coll = get_collection(spec)
        if coll.corpus == "smart":
            return read_topics(convert_cranfield(data).topics)
        return read_topics(collection_file(coll.name, "topics", data))
    if _looks_like_name(spec) and spec in pyserini_names("topics"):
        _seed_quietly(data)
        try:
            from toolkit.jvm import import_pyserini

            base = import_pyserini("pyserini.search._base")
        except ConfigError:
            base = None
        if base is not None and spec in base.topics_mapping:
            try:
                raw = base.get_topics(spec)
            except Exception as exc:
                raise ConfigError(
                    f"Pyserini topics {spec!r} are not cached and could not be downloaded ({exc})"
                ) from None
            topics = tuple(Topic(str(q), str(v.get("title", ""))) for q, v in raw.items())
            return Topics(topics=topics, path=f"pyserini:{spec}")
    if not _looks_like_name(spec):
        raise ConfigError(f"topics file {spec} does not exist")
    raise ConfigError(
        f"unknown topics {spec!r}: not a file, not a collection ({', '.join(collection_names())}), "
        "not a Pyserini topics name"
    )


# ------------------------------------------------------- relevance maps
#: Relevance maps applied at load time, by name: (map, source).
RELEVANCE_MAP_PRESETS: Mapping[str, tuple[dict[int, int], str]] = MappingProxyType(
    {
        "cranfield": (
            {1: 4, 2: 3, 3: 2, 4: 1, -1: 0},
            "Cleverdon's Cranfield codes (cranqrel.readme): 1 = complete answer, 2 = high relevance, "
            "3 = useful background, 4 = minimum interest; inverted so that larger means more relevant; -1 -> 0",
        ),
    }
)


def relevance_map(spec: str) -> tuple[dict[int, int], str]:
    """A preset name (``cranfield``) or an explicit ``LABEL:LABEL,...`` map -> (map, name)."""
    from toolkit.data.trec_io import parse_label_map

    if spec in RELEVANCE_MAP_PRESETS:
        return dict(RELEVANCE_MAP_PRESETS[spec][0]), spec
    try:
        mapping = parse_label_map(spec)
    except ValueError as exc:
        presets = ", ".join(RELEVANCE_MAP_PRESETS)
        raise ConfigError(f"--relevance-map {spec!r}: {exc}; give LABEL:LABEL,... or a preset ({presets})") from None
    if any(not float(v).is_integer() for v in mapping.values()):
        raise ConfigError(f"--relevance-map {spec!r}: mapped labels must be integers")
    return {k: int(v) for k, v in mapping.items()}, "custom"
