"""Dense retrieval over a FAISS index built by ``retrieval.indexing.build_dense_index``."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from toolkit.data.records import Run, Topics
from toolkit.errors import ConfigError
from toolkit.retrieval.search import DEFAULT_HITS, SearchResult, results_frame, validate_hits


def _docids(index: Path) -> list[str]:
    """The document ids of a dense index (its ``docid`` file, one per line), read through the inputs door."""
    from toolkit.errors import InputFormatError
    from toolkit.guard.readers import read_input

    path = index / "docid"
    raw = read_input(path)
    try:
        return raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise InputFormatError(str(path), raw.count(b"\n", 0, exc.start) + 1, "not valid UTF-8") from None


@contextlib.contextmanager
def faiss_threads(threads: int) -> Iterator[None]:
    """Within the block, faiss's OpenMP searches run on ``threads`` threads; the caller's count is restored when
    it ends (faiss is imported by the caller: ``DenseRetriever._load``)."""
    import faiss

    saved = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(saved)


# ----------------------------------------------------------------- dense
class DenseRetriever:
    """Exact (flat) or HNSW inner-product search over a FAISS index built by
    ``indexing.build_dense_index``, encoding queries with the index's own encoder settings."""

    def __init__(
        self,
        index: str | os.PathLike,
        batch_size: int | None = None,
        device: str = "cpu",
        ef_search: int = 256,
        precision: str = "fp32",
    ):
        from toolkit.retrieval.indexing import EncoderSettings, read_meta

        p = Path(index)
        if not p.is_dir():
            raise ConfigError(f"index {index} does not exist; build it with `twostage index --dense --out {index} ...`")
        if not (p / "index").is_file() or not (p / "docid").is_file():
            hint = " (it is a Lucene index: use `twostage bm25`)" if any(p.glob("segments_*")) else ""
            raise ConfigError(f"{index} is not a dense index (needs files 'index' and 'docid'){hint}")
        meta = read_meta(p)
        enc = (meta.get("settings") or {}).get("encoder")
        if not enc:
            raise ConfigError(
                f"{index}/index.meta.json does not record the encoder; rebuild with `twostage index --dense`"
            )
        fields = {k: enc[k] for k in ("model", "pooling", "normalize", "max_length", "query_prefix", "doc_prefix")}
        self.settings = EncoderSettings(**fields, batch_size=batch_size or 32, device=device, precision=precision)
        self.index = p
        self.meta = meta
        self.ef_search = ef_search
        self._faiss = None
        self._docids: np.ndarray | None = None
        self._encoder = None
        self._gpu_vectors = None
        self._ranks: np.ndarray | None = None

    def params(self) -> dict:
        device = self.exact_search_device() if self.meta.get("faiss") != "IndexHNSWFlat" else None
        search = f"exact inner product by torch on {device}, in chunks" if device else "faiss"
        return {"model": "dense", "encoder": asdict(self.settings), "faiss": self.meta.get("faiss"), "search": search}

    def _load(self, threads: int):
        from toolkit.extras import require
        from toolkit.jvm import quiet_faiss
        from toolkit.retrieval.indexing import Encoder

        require("pyserini", "dense retrieval (faiss)")
        with quiet_faiss():
            import faiss

        if self._faiss is None:
            self._faiss = faiss.read_index(str(self.index / "index"))
            if hasattr(self._faiss, "hnsw"):
                self._faiss.hnsw.efSearch = self.ef_search
            ids = _docids(self.index)[: self._faiss.ntotal]
            self._docids = np.asarray(ids, dtype=object)
        if self._encoder is None:
            self._encoder = Encoder(self.settings, threads)

    def search_arrays(self, texts: list[str], hits: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row indices), one row per query text, ``min(hits, index size)`` columns (-1: no hit)."""
        self._load(threads)
        vecs = self._encoder.encode_batched(texts, queries=True)
        k = min(hits, self._faiss.ntotal)
        device = self.exact_search_device()
        if device is None:
            with faiss_threads(max(1, threads)):
                return self._faiss.search(vecs, k)
        from toolkit.models import torch_threads
        from toolkit.retrieval.exact_search import exact_search, tie_ranks

        # torch's exact search runs with the encoder's thread count, as the encoding does
        with torch_threads(self._encoder.threads):
            if self._gpu_vectors is None:  # the flat index's vectors, once, on the device
                import torch

                flat = self._faiss.reconstruct_n(0, self._faiss.ntotal)
                self._gpu_vectors = torch.from_numpy(flat).to(device)
                self._ranks = tie_ranks(self._docids)
            return exact_search(self._gpu_vectors, vecs, k, device, self._ranks)

    def exact_search_device(self) -> str | None:
        """Where a flat index is searched by torch (exact inner products in chunks): the encoder's CUDA device,
        or ``$TWOSTAGE_EXACT_SEARCH`` (``torch``: on the encoder's device, even a CPU; ``faiss``: never);
        None: FAISS searches (an HNSW index always)."""
        forced = os.environ.get("TWOSTAGE_EXACT_SEARCH", "")
        if forced not in ("", "torch", "faiss"):
            raise ConfigError(f"TWOSTAGE_EXACT_SEARCH must be torch or faiss, not {forced!r}")
        if forced == "faiss" or (self._faiss is not None and hasattr(self._faiss, "hnsw")):
            return None
        if forced == "torch" or self.settings.device.startswith("cuda"):
            return self.settings.device
        return None

    def search(
        self, topics: Topics, hits: int = DEFAULT_HITS, threads: int = 1, sharding=None, progress: bool = True
    ) -> SearchResult:
        """Batch search; ``sharding`` runs it as a sharded, resumable job (query ranges, on Ray:
        every worker opens the index from its path, so the path must be readable there)."""
        validate_hits(hits)
        started = time.perf_counter()
        qids = [t.query_id for t in topics.topics]
        texts = [t.text for t in topics.topics]
        job = None
        if sharding is None:
            scores, idx = self.search_arrays(texts, hits, threads)
        else:
            scores, idx, job = self._search_sharded(qids, texts, hits, sharding, progress)
        if self._docids is None:
            ids = _docids(self.index)
            self._docids = np.asarray(ids[: int(self.meta.get("documents") or len(ids))], dtype=object)
        docids = self._docids
        qs, ds, ss, empty = [], [], [], []
        for qid, row_s, row_i in zip(qids, scores, idx):
            keep = row_i >= 0
            if not keep.any():
                empty.append(qid)
                continue
            n = int(keep.sum())
            qs.extend([qid] * n)
            ds.extend(docids[row_i[keep]].tolist())
            ss.extend(row_s[keep].astype(np.float64).tolist())
        seconds = time.perf_counter() - started
        run = Run(frame=results_frame(qs, ds, ss), tag="dense")
        params = self.params() | ({"execution": job} if job else {})
        return SearchResult(run, tuple(empty), params, seconds, len(qids))

    def _search_sharded(self, qids: list[str], texts: list[str], hits: int, sharding, progress: bool):
        import hashlib

        from toolkit.jobs.shards import open_manifest, plan, run_job
        from toolkit.retrieval.indexing import index_checksum

        qhash = hashlib.sha256("\n".join(f"{q}\t{t}" for q, t in zip(qids, texts)).encode()).hexdigest()
        identity = {
            "index": {"path": str(self.index.resolve()), "sha256": index_checksum(self.index)},
            "encoder": self.settings.result_settings(),
            "hits": hits,
            "ef_search": self.ef_search,
            "queries_sha256": qhash,
            "ranges": plan(len(qids), sharding.size(1000, self.settings.batch_size)),
        }
        manifest = open_manifest(sharding.folder, "dense-search", identity, sharding.force)
        spec = SearchWorkerSpec(str(self.index.resolve()), self.settings, hits, self.ef_search)
        report = run_job(
            manifest,
            spec,
            sharding.executor,
            lambda s, lo, hi: texts[lo:hi],
            unit="query",
            progress=progress,
            label="dense search",
        )
        parts = [manifest.load(i) for i in range(len(manifest.ranges))]
        width = max((p["idx"].shape[1] for p in parts if p["idx"].ndim == 2), default=0)
        scores = np.concatenate([p["scores"] for p in parts]) if parts else np.zeros((0, width), np.float32)
        idx = np.concatenate([p["idx"] for p in parts]) if parts else np.zeros((0, width), np.int64)
        job = {
            **sharding.executor.description,
            "manifest": str(manifest.folder / "manifest.json"),
            "shards": report.shards,
            "shards_resumed": report.resumed,
            "shards_computed": report.computed,
            **manifest.work_done("queries", "model_calls"),
        }
        return scores, idx, job


class _SearchWorker:
    def __init__(self, spec: SearchWorkerSpec):
        self.retriever = DenseRetriever(
            spec.index, spec.settings.batch_size, spec.settings.device, spec.ef_search, spec.settings.precision
        )
        self.hits = spec.hits

    def __call__(self, texts: list[str]):
        self.retriever._load(1)
        before = self.retriever._encoder.model_calls
        scores, idx = self.retriever.search_arrays(list(texts), self.hits)
        return {"scores": scores, "idx": idx}, {
            "queries": len(texts),
            "model_calls": self.retriever._encoder.model_calls - before,
        }


@dataclass(frozen=True)
class SearchWorkerSpec:
    index: str
    settings: object  # indexing.EncoderSettings
    hits: int
    ef_search: int

    def build(self):
        return _SearchWorker(self)
