#!/usr/bin/env python
"""Reranking and encoding throughput with all-MiniLM-L6-v2, in one run, on whatever this machine has.

On the DL19 BM25 top-100 candidates (43 queries, 4,300 pairs, 4,297 distinct passages):

1. plain sentence-transformers (best of --repeats rounds, alternating with 2): ``SentenceTransformer.encode`` of the distinct passages and
   the 43 queries (batch --batch-size, max length 256, normalised), which is all the model
   work a bi-encoder rerank needs;
2. ``twostage`` rerank (``toolkit.reranking.rerank_job.rerank_run``, torch backend: exact), end to end:
   candidate selection, embedding, scoring, the run. Ratio = (1) / (2): >= 1.0 means
   twostage is at least as fast as the plain library call;
3. the ONNX Runtime backends (``onnx``, ``onnx-int8``): speed-up over (2) and the nDCG@10
   change they cause (``twostage eval -c -m ndcg_cut.10`` against the DL19 qrels);
4. the embedding cache: the same rerank twice with one cache: the second run embeds nothing;
5. dense encoding throughput (``toolkit.retrieval.indexing.Encoder``, Pyserini's encoder, as
   ``twostage index --dense`` runs it) on the first --encode-docs passages.

    .venv/bin/python scripts/bench_rerank.py [--device cpu|cuda] [--batch-size 64] [--skip-onnx]

On a GPU (``--device cuda``) twostage runs fp16 (``--precision auto``) while (1) is the plain
fp32 library call, i.e. what twostage did before; ONNX is skipped there (CPU backends).
Figures go to stdout; ``--json FILE`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def ndcg10(run_path: Path, qrels: Path) -> float:
    twostage = Path(sys.executable).with_name("twostage")
    out = subprocess.run(
        [str(twostage), "eval", "-c", "-m", "ndcg_cut.10", "--no-provenance", str(qrels), str(run_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "msmarco-passage"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--encode-docs", type=int, default=512)
    ap.add_argument("--queries", type=int, default=None, help="Only the first N queries (a quick look).")
    ap.add_argument("--skip-onnx", action="store_true")
    ap.add_argument("--repeats", type=int, default=2, help="Rounds of (1) and (2), alternating; the best of each.")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from toolkit.data.texts import read_candidates
    from toolkit.data.trec_io import write_run
    from toolkit.jobs.embed_cache import EmbeddingCache
    from toolkit.models import resolve_model
    from toolkit.reranking.backends import load_reranker
    from toolkit.reranking.rerank_job import embedding_namespace, rerank_run
    from toolkit.reranking.rerank_options import RerankOptions
    from toolkit.retrieval.indexing import Encoder, EncoderSettings

    data = Path(args.data)
    cands = read_candidates(data / "candidates" / "dl19.bm25.top100.json")
    qrels = data / "qrels.dl19-passage.txt"
    qids = sorted(cands.topics.as_dict())[: args.queries] if args.queries else None
    frame = cands.run.frame if qids is None else cands.run.frame[cands.run.frame["query_id"].isin(qids)]
    queries = cands.topics.as_dict()
    pairs = len(frame)
    passages = sorted(set(frame["doc_id"]))
    texts = [cands.texts[d] for d in passages] + [queries[q] for q in sorted(set(frame["query_id"]))]
    model_path = resolve_model("all-MiniLM-L6-v2")
    device = args.device
    gpu = device.startswith("cuda")
    figures: dict = {
        "machine": {
            "device": device,
            "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "gpu": torch.cuda.get_device_name(0) if gpu else None,
        },
        "pairs": pairs,
        "passages": len(passages),
        "queries": len(texts) - len(passages),
        "batch_size": args.batch_size,
        "max_length": 256,
    }
    print(
        f"# {pairs} pairs, {len(passages)} distinct passages, {len(texts) - len(passages)} queries; "
        f"device {device} ({figures['machine']['gpu'] or f'{torch.get_num_threads()} torch threads'}), "
        f"batch {args.batch_size}, max length 256",
        flush=True,
    )

    def sync():
        if gpu:
            torch.cuda.synchronize()

    st = SentenceTransformer(model_path, device=device)
    st.max_seq_length = 256
    st.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm-up (kernels, allocator)

    def plain_encode(st) -> float:
        sync()
        t = time.perf_counter()
        st.encode(
            texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        sync()
        return time.perf_counter() - t

    tmp = Path(tempfile.mkdtemp(prefix="bench-rerank-"))
    os.environ["TWOSTAGE_CACHE"] = str(tmp / "cache")  # the ONNX exports and the embedding cache, fresh

    def rerank(backend: str, cache=None):
        spec = {"device": device, "batch_size": args.batch_size, "max_length": 256, "backend": backend}
        model = load_reranker(model_path, **spec)
        model.embed(texts[: args.batch_size])  # the same warm-up as above
        options = RerankOptions.from_keywords(model=str(model_path), **spec, depth=100, query_ids=qids)
        sync()
        t = time.perf_counter()
        res = rerank_run(cands.run, queries, cands.text_source(), model, options, cache=cache)
        sync()
        seconds = time.perf_counter() - t
        path = tmp / f"dl19.{backend}.trec"
        write_run(res.run, path, tag=backend)
        return res, seconds, path, model

    # 1 and 2, alternating --repeats times (the machine is shared: load hits both alike); best of each
    st_times, ts_times = [], []
    for _ in range(args.repeats):
        st_times.append(plain_encode(st))
        res, seconds, torch_run, model = rerank("torch", cache=None)
        ts_times.append(seconds)
    st_s, ts_s = min(st_times), min(ts_times)
    del st
    figures["sentence_transformers_encode"] = {
        "seconds": round(st_s, 2),
        "texts_per_s": round(len(texts) / st_s, 1),
        "precision": "fp32",
        "all_seconds": [round(x, 2) for x in st_times],
    }
    print(
        f"sentence-transformers encode      {st_s:8.2f} s  {len(texts) / st_s:8.1f} texts/s  (rounds: "
        + ", ".join(f"{x:.1f}" for x in st_times)
        + ")",
        flush=True,
    )
    exact_ndcg = ndcg10(torch_run, qrels) if qids is None else None
    figures["twostage_rerank"] = {
        "seconds": round(ts_s, 2),
        "pairs_per_s": round(pairs / ts_s, 1),
        "texts_per_s": round(len(texts) / ts_s, 1),
        "precision": model.precision,
        "ndcg_cut_10": exact_ndcg,
        "ratio_vs_sentence_transformers": round(st_s / ts_s, 3),
        "all_seconds": [round(x, 2) for x in ts_times],
    }
    print(
        f"twostage rerank (torch, {model.precision})     {ts_s:8.2f} s  {len(texts) / ts_s:8.1f} texts/s  "
        f"{pairs / ts_s:8.1f} pairs/s  ratio {st_s / ts_s:.3f}"
        + (f"  nDCG@10 {exact_ndcg:.4f}" if exact_ndcg else "")
        + "  (rounds: "
        + ", ".join(f"{x:.1f}" for x in ts_times)
        + ")",
        flush=True,
    )

    # 3. ONNX Runtime backends (CPU)
    if not args.skip_onnx and not gpu:
        for backend in ("onnx", "onnx-int8"):
            load_reranker(model_path, device=device, max_length=256, backend=backend)  # export once, untimed
            _r, s, path, _ = rerank(backend)
            nd = ndcg10(path, qrels) if qids is None else None
            figures[f"twostage_rerank_{backend}"] = {
                "seconds": round(s, 2),
                "pairs_per_s": round(pairs / s, 1),
                "speedup_vs_torch": round(ts_s / s, 3),
                "ndcg_cut_10": nd,
                "ndcg_change": None if nd is None else round(nd - exact_ndcg, 4),
            }
            print(
                f"twostage rerank ({backend:<9})       {s:8.2f} s  {len(texts) / s:8.1f} texts/s  "
                f"{pairs / s:8.1f} pairs/s  speed-up {ts_s / s:.2f}x"
                + (f"  nDCG@10 {nd:.4f} ({nd - exact_ndcg:+.4f})" if nd is not None else ""),
                flush=True,
            )

    # 4. the embedding cache: first run fills it, the second embeds nothing
    cache_dir = tmp / "embeddings"
    first = EmbeddingCache(cache_dir, embedding_namespace(model.describe()))
    r1, s1, _, _ = rerank("torch", cache=first)
    second = EmbeddingCache(cache_dir, embedding_namespace(model.describe()))  # as a new process would load it
    r2, s2, _p2, _ = rerank("torch", cache=second)
    same = r2.run.frame.sort_values(["query_id", "doc_id"])["score"].to_numpy()
    ref = res.run.frame.sort_values(["query_id", "doc_id"])["score"].to_numpy()
    figures["embedding_cache"] = {
        "first_run": {"seconds": round(s1, 2), "texts_embedded": r1.settings["model_work"]["texts_embedded"]},
        "second_run": {
            "seconds": round(s2, 2),
            "texts_embedded": r2.settings["model_work"]["texts_embedded"],
            "from_cache": r2.settings["model_work"]["from_cache"],
        },
        "max_score_difference": float(abs(same - ref).max()),
    }
    print(
        f"rerank with an empty cache        {s1:8.2f} s  embedded {r1.settings['model_work']['texts_embedded']} texts",
        flush=True,
    )
    print(
        f"rerank again, same cache          {s2:8.2f} s  embedded {r2.settings['model_work']['texts_embedded']} texts "
        f"({r2.settings['model_work']['from_cache']} from the cache; max score change {abs(same - ref).max():.1e})",
        flush=True,
    )

    # 5. dense encoding (twostage index --dense's encoder)
    docs = [cands.texts[d] for d in passages[: args.encode_docs]]
    enc = Encoder(
        EncoderSettings(
            "all-MiniLM-L6-v2", batch_size=args.batch_size, device=device, precision="fp16" if gpu else "fp32"
        )
    )
    enc.encode_batched(docs[: args.batch_size])
    sync()
    t = time.perf_counter()
    enc.encode_batched(docs)
    sync()
    es = time.perf_counter() - t
    figures["dense_encode"] = {
        "passages": len(docs),
        "seconds": round(es, 2),
        "passages_per_s": round(len(docs) / es, 1),
        "precision": enc.settings.precision,
    }
    print(
        f"dense encode ({enc.settings.precision}, {len(docs)} passages)  {es:8.2f} s  {len(docs) / es:8.1f} passages/s",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
