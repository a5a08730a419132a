"""The options of ``index`` and ``build_index`` (``twostage index``): one frozen object that the library's keywords
and the command's flags build alike (``toolkit.options``; the flags in ``toolkit.cli.retrieval``), and that
``retrieval.indexing.build_dense_index`` reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from toolkit.errors import OptionConflictError, phrase
from toolkit.options import Options, opt

__all__ = ["COLLECTIONS_DIR_DOC", "DEVICE_DOC", "PRECISION_DOC", "IndexOptions"]

#: the documentation of the keywords the first stage's options share (``toolkit.api.options``' too)
COLLECTIONS_DIR_DOC = "where collection names are looked up."
DEVICE_DOC = "``auto`` (the default: the GPU where there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``."
PRECISION_DOC = "``auto`` (fp16 on CUDA), ``fp32`` or ``fp16``."


@dataclass(frozen=True)
class IndexOptions(Options):
    """The options of ``index`` and ``build_index`` (``twostage index``): a Lucene index (Anserini's
    IndexCollection), or with ``dense`` a FAISS index of an encoder's vectors, encoded here or as a Ray job."""

    verb = "index"

    collection_class: str | None = opt(
        None, doc="Anserini's collection class for other formats (``TrecCollection``, ``HtmlCollection``, ...)."
    )
    dense: bool = opt(False, doc="build a FAISS index of ``encoder`` embeddings instead of a Lucene index.")
    encoder: str = opt("all-MiniLM-L6-v2", doc="the dense encoder (a path or a model name).")
    pooling: str = opt("mean", doc="``mean`` or ``cls``.")
    normalize: bool = opt(True, doc="L2-normalise the vectors (inner product is then cosine).")
    max_length: int = opt(256, doc="tokens per passage.")
    batch_size: int = opt(32, doc="passages per encoding batch.")
    query_prefix: str = opt("", doc='prepended to queries (``"query: "``, E5).')
    doc_prefix: str = opt("", doc='prepended to documents (``"passage: "``, E5).')
    hnsw: bool = opt(False, doc="an HNSW index instead of a flat one.")
    hnsw_m: int = opt(32, doc="the HNSW graph's M.")
    limit: int | None = opt(None, doc="dense: encode only the first N documents (smoke tests).")
    threads: int = opt(2, doc="indexing threads.")
    positions: bool = opt(True, doc="Lucene: store term positions (phrase queries).")
    docvectors: bool = opt(True, doc="Lucene: store document vectors (needed by RM3).")
    raw: bool = opt(True, doc="Lucene: store the raw document (for rerankers).")
    device: str = opt("auto", doc=DEVICE_DOC)
    precision: str = opt("auto", doc=PRECISION_DOC)
    ray: str | None = opt(None, doc="a Ray address: encode as a sharded job (dense only; shards in ``OUT.shards``).")
    workers: int | None = opt(None, doc="Ray workers.")
    gpus_per_worker: float | None = opt(None, doc="GPUs per Ray worker.")
    cpus_per_worker: float | None = opt(None, doc="with ``ray``: CPUs per Ray worker (1).")
    shard_size: int | None = opt(None, doc="with ``ray``: documents per shard.")
    max_retries: int | None = opt(None, doc="with ``ray``: times Ray restarts a dead worker and re-runs its shard (3).")
    force: bool = opt(False, doc="rebuild even when a matching index exists.")
    download: bool = opt(True, doc="fetch missing collection files from their declared source.")
    progress: bool = opt(False, doc="show progress bars.")
    data_dir: str | os.PathLike | None = opt(None, doc=COLLECTIONS_DIR_DOC)

    def validate(self) -> None:
        if self.ray is not None and not self.dense:
            said = "--ray distributes dense encoding (--dense); Lucene indexing runs in Anserini"
            raise OptionConflictError(phrase(said, said), keyword="ray", flag="--ray")
