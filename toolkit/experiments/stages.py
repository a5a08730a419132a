"""Running an experiment in one warm process: every stage through the stage cache, then the table.

Each grid point is described as a picklable point (``toolkit.experiments.points``) and computed by
the context's ``Warm`` holder: the JVM starts once; each Lucene index is opened once and its
searcher switched between grid points (``LuceneRetriever.configure``); each dense index and
encoder is loaded once; each reranking model is built once and its embeddings kept in the
embedding cache, so depths 20/50/100 embed each text once. Every stage's run is looked up by
content key first (``cache.StageCache``) and computed only when missing or named in ``force``; the
log says which. With ``--ray`` the same points go to Ray actors holding their own ``Warm``
(``toolkit.experiments.ray_grid``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

from toolkit.data.records import QUERY_ID, Run, Topics
from toolkit.experiments.points import DensePoint, FusePoint, Point, RerankPoint, SearchPoint, Warm
from toolkit.experiments.spec import Experiment, Stage, outputs, tuned_label
from toolkit.experiments.stage_cache import StageCache, stage_key
from toolkit.experiments.tuning import TuneResult, cross_validate, tuning_set


@dataclass
class Config:
    """One configuration: its run, where it came from, and its place in the table."""

    name: str
    stage: Stage
    point: dict
    input: str
    run: Run
    key: str
    reused: bool
    tuned: TuneResult | None = None
    depth: int | None = None


@dataclass
class Context:
    exp: Experiment
    cache: StageCache
    topics: Topics
    topics_sha: str
    qrels: object
    settings: object
    index: str
    index_sha: str
    force: set[str] = field(default_factory=set)
    say: Callable[[str], None] = print
    warm: Warm = field(default_factory=Warm)  # what this process keeps open across the points it computes
    counts: dict = field(default_factory=lambda: {"computed": 0, "reused": 0})
    # --ray (toolkit.experiments.ray_grid): the grid executor; the first pass's missing points as (key, record,
    # point) (None outside it); the keys the executor computed this run (their cache hits count as computed, not
    # reused)
    grid: Any = None
    pending: list | None = None
    fresh: dict = field(default_factory=dict)
    data_dir: object = None
    dense_indexes: dict = field(default_factory=dict)  # build settings -> (dense index folder, checksum)


def topics_checksum(topics: Topics) -> str:
    """The queries' content (ids and texts, in order), whatever file or name they came from."""
    import hashlib

    h = hashlib.sha256()
    for t in topics.topics:
        h.update(f"{t.query_id}\t{t.text}\n".encode())
    return h.hexdigest()


# ------------------------------------------------------------------ stages
def _cached(ctx: Context, stage: Stage, params: dict, inputs: dict, point: Point) -> tuple[Run, str, bool]:
    """The point's run from the cache, else computed by this process's ``Warm`` and cached (``--ray``'s first
    pass: noted for a worker instead, and an empty stand-in returned)."""
    key = stage_key(stage.type, params, inputs)
    # put into the cache by a Ray worker moments ago (--ray; also under --force): False until counted as computed
    # once, True after (tuned folds sharing a point count it computed once, reused after, as in one process)
    fresh = ctx.fresh.get(key)
    hit = None if stage.name in ctx.force and fresh is None else ctx.cache.get(key)
    if hit is not None:
        new = fresh is False
        if new:
            ctx.fresh[key] = True
        ctx.counts["computed" if new else "reused"] += 1
        return hit[0], key, not new
    record = {"stage": stage.type, "params": params, "inputs": inputs}
    if ctx.pending is not None:  # --ray's first pass: note the point for a worker, compute nothing here
        ctx.pending.append((key, record, point))
        return Run(frame=pd.DataFrame({"query_id": [], "doc_id": [], "score": []}), tag=stage.name), key, False
    started = time.perf_counter()
    run = ctx.warm.run(point)
    record["seconds"] = time.perf_counter() - started
    run, _ = ctx.cache.put(key, run, record)
    ctx.counts["computed"] += 1
    return run, key, False


def _lucene_params(point: dict, kind: str) -> dict:
    if kind == "bm25":
        return {"model": "bm25", "k1": float(point["k1"]), "b": float(point["b"])}
    return {"model": "qld", "mu": float(point["mu"])}


def _lucene_run(ctx: Context, stage: Stage, base: dict, rm3: dict | None) -> tuple[Run, str, bool]:
    params = base | {"rm3": rm3, "hits": ctx.exp.hits}
    inputs = {"index": ctx.index_sha, "topics": ctx.topics_sha}
    return _cached(ctx, stage, params, inputs, SearchPoint(ctx.index, params, ctx.topics, ctx.exp.threads))


def assignments(tuned: TuneResult, queries: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Which grid point serves which queries in a tuned run.

    Cross-validation: each fold's queries get the point chosen without them; queries outside every
    fold (not evaluated: no judgments) get the point best on all evaluated queries, which cannot
    leak into any reported number. A tuning set: the chosen point serves every query.
    """
    queries = tuple(queries)
    if tuned.protocol.startswith("tuning set"):
        return [(tuned.chosen[0], queries)]
    in_folds = {q for f in tuned.folds for q in f}
    rest = tuple(q for q in queries if q not in in_folds)
    pairs = list(zip(tuned.chosen, tuned.folds))
    return [*pairs, (tuned.best_in_sample_point, rest)] if rest else pairs


def _compose(runs_by_fold: list[tuple[Run, Iterable[str]]], tag: str) -> Run:
    """One run holding, for each fold's queries, the run chosen for that fold."""
    parts = [r.frame[r.frame[QUERY_ID].isin(set(qs))] for r, qs in runs_by_fold]
    return Run(frame=pd.concat(parts, ignore_index=True), tag=tag)


def _first_stage(ctx: Context, stage: Stage, rows, made: dict[str, Config]) -> list[Config]:
    out = []
    for label, _, point in rows:
        run, key, reused = _lucene_run(ctx, stage, _lucene_params(point, stage.type), None)
        out.append(Config(label, stage, point, "", run, key, reused))
    return out


def _rm3_stage(ctx: Context, stage: Stage, rows, made: dict[str, Config]) -> list[Config]:
    src_stage = ctx.exp.stages[stage.inputs[0]]
    out = []
    for label, src, point in rows:
        rm3 = {k: point[k] for k in ("fb_terms", "fb_docs", "original_query_weight")}
        base = made[src]
        if base.tuned is not None:  # the tuned input: each fold's own choice, expanded
            by_point = {c.name: c for c in made.values() if c.stage is src_stage and c.tuned is None}
            parts, reused = [], []
            for chosen, fold in assignments(base.tuned, ctx.topics.as_dict()):
                run, _, hit = _lucene_run(ctx, stage, _lucene_params(by_point[chosen].point, src_stage.type), rm3)
                parts.append((run, fold))
                reused.append(hit)
            out.append(Config(label, stage, point, src, _compose(parts, stage.name), "", all(reused)))
            continue
        run, key, reused = _lucene_run(ctx, stage, _lucene_params(base.point, src_stage.type), rm3)
        out.append(Config(label, stage, point, src, run, key, reused))
    return out


def _dense_build_options(point: dict):
    """The ``IndexOptions`` of the stage's dense index, built in this process without a progress bar."""
    from toolkit.retrieval.index_options import IndexOptions

    return IndexOptions(
        dense=True,
        encoder=str(point["encoder"] or "all-MiniLM-L6-v2"),  # `twostage index --dense`'s default encoder
        pooling=str(point["pooling"]),
        normalize=bool(point["normalize"]),
        max_length=int(point["max_length"]),
        batch_size=int(point["batch_size"]),
        hnsw=bool(point["hnsw"]),
        device=str(point["device"]),
        precision=str(point["precision"]),
        progress=False,
    )


def _dense_index(ctx: Context, point: dict) -> tuple[str, str]:
    """(folder, checksum) of the stage's dense index: the given one, or one built (and reused by content) from
    the stage's collection, else the experiment's, under ``$TWOSTAGE_CACHE/indexes``."""
    import hashlib
    import json
    import re
    from pathlib import Path

    from toolkit.retrieval.indexing import EncoderSettings, index_checksum

    if point["index"]:
        p = Path(str(point["index"]))
        p = p if p.is_absolute() else Path(ctx.exp.path).parent / p
        key = ("path", str(p))
        if key not in ctx.dense_indexes:
            ctx.dense_indexes[key] = (str(p), index_checksum(p))
        return ctx.dense_indexes[key]
    options = _dense_build_options(point)
    settings = EncoderSettings.of(options).on_device(options.device, options.precision)
    name = str(point["collection"] or ctx.exp.index["collection"])
    desc = {"collection": name, "encoder": settings.result_settings(), "hnsw": options.hnsw}
    key = ("build", json.dumps(desc, sort_keys=True))
    if key not in ctx.dense_indexes:
        from toolkit.data.corpus import resolve_corpus
        from toolkit.experiments.stage_cache import building_index
        from toolkit.retrieval.indexing import build_dense_index

        tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(name).name) + "-" + hashlib.sha256(key[1].encode()).hexdigest()[:12]
        corpus = resolve_corpus(name, data=ctx.data_dir)
        with building_index(f"{tag}.dense") as out:
            info = build_dense_index(corpus, out, options, encoder=settings)
        ctx.say(f"{'reused' if info.reused else 'built'} dense index {info.path} ({info.documents} documents)")
        ctx.dense_indexes[key] = (str(info.path), index_checksum(info.path))
    return ctx.dense_indexes[key]


def _dense_point(ctx: Context, index: str, point: dict) -> DensePoint:
    """The dense search of ``point``: the query side's device and precision resolved here, in the driver, so the
    cache key and every worker agree on them (reading the index's settings loads no model)."""
    from toolkit.retrieval.dense import DenseRetriever

    enc = DenseRetriever(index, batch_size=int(point["batch_size"])).settings
    enc = enc.on_device(str(point["device"]), str(point["precision"]))
    hits = int(point["hits"] or ctx.exp.hits)
    return DensePoint(
        index, enc.batch_size, enc.device, enc.precision, int(point["ef_search"]), hits, ctx.topics, ctx.exp.threads
    )


def _dense_stage(ctx: Context, stage: Stage, rows, made: dict[str, Config]) -> list[Config]:
    out = []
    for label, _, point in rows:
        index, index_sha = _dense_index(ctx, point)
        task = _dense_point(ctx, index, point)
        # Device, precision and batch size can move float scores in the last digits: part of the key.
        params = {
            "model": "dense",
            "hits": task.hits,
            "ef_search": task.ef_search,
            "device": task.device,
            "precision": task.precision,
            "batch_size": task.batch_size,
        }
        inputs = {"index": index_sha, "topics": ctx.topics_sha}
        run, key, reused = _cached(ctx, stage, params, inputs, task)
        out.append(Config(label, stage, point, "", run, key, reused))
    return out


def _reranker_spec(point: dict):
    """The point's reranker, resolved (its kind read from the model's config); nothing is loaded."""
    from toolkit.reranking.backends import RerankerSpec

    return RerankerSpec(
        str(point["model"]),
        point["kind"],
        point["device"],
        int(point["batch_size"]),
        point["max_length"],
        point["backend"],
        point["precision"],
    ).resolved()


def _rerank_stage(ctx: Context, stage: Stage, rows, made: dict[str, Config]) -> list[Config]:
    from toolkit.jobs.embed_cache import default_folder
    from toolkit.models import model_fingerprint

    out = []
    for label, src, point in rows:
        first = made[src].run
        spec = _reranker_spec(point)
        desc = spec.describe()
        params = {k: point[k] for k in ("depth", "kind", "max_length", "backend", "precision")} | {
            "model": desc.get("model_path") or desc.get("model"),
            "resolved_kind": spec.kind,
        }
        inputs = {
            "run": first.sha256 or _frame_sha(first),
            "topics": ctx.topics_sha,
            "texts": ctx.index_sha,
            "model": model_fingerprint(str(params["model"])),
        }
        embeddings = str(default_folder()) if spec.kind == "bi-encoder" else None
        task = RerankPoint(first, ctx.topics, ctx.index, spec, int(point["depth"]), embeddings, ctx.exp.threads)
        run, key, reused = _cached(ctx, stage, params, inputs, task)
        out.append(Config(label, stage, point, src, run, key, reused, depth=int(point["depth"])))
    return out


def _fuse_stage(ctx: Context, stage: Stage, rows, made: dict[str, Config], offered: dict) -> list[Config]:
    out = []
    for label, _, point in rows:
        srcs = [offered[s][0] for s in stage.inputs]
        runs = [made[s].run for s in srcs]
        params = {"method": point["method"], "k": float(point["k"]), "depth": int(point["depth"]), "hits": ctx.exp.hits}
        inputs = {"runs": [r.sha256 or _frame_sha(r) for r in runs]}
        task = FusePoint(tuple(runs), params["k"], params["depth"], params["hits"])
        run, key, reused = _cached(ctx, stage, params, inputs, task)
        out.append(Config(label, stage, point, "+".join(srcs), run, key, reused))
    return out


def _frame_sha(run: Run) -> str:
    import hashlib

    f = run.frame
    h = hashlib.sha256(pd.util.hash_pandas_object(f[["query_id", "doc_id", "score"]], index=False).to_numpy().tobytes())
    return h.hexdigest()


# ------------------------------------------------------------------ tuning
def metric_table(ctx: Context, configs: list[Config], metric: str) -> pd.DataFrame:
    """Per-query values of ``metric`` (rows: evaluated queries, 0 where a run retrieved nothing; columns: points)."""
    from toolkit.evaluation.groups import evaluate_groups
    from toolkit.measures.names import parse_measure_groups

    groups = parse_measure_groups([metric], ctx.settings.trec_eval)  # AP(rel=2)@100 too
    name = next(m for g in groups for m in g.labelled()).name
    cols = {}
    for c in configs:
        res = evaluate_groups(ctx.qrels, c.run, groups, ctx.settings)
        pq = res.per_query
        cols[c.name] = pq[pq["measure"] == name].set_index("query_id")["value"]
    table = pd.DataFrame(cols)
    if ctx.settings.complete:
        judged = ctx.qrels.frame[QUERY_ID].unique().tolist()
        table = table.reindex(sorted(set(table.index) | set(judged)))
    return table.fillna(0.0).sort_index()


def _tune(ctx: Context, stage: Stage, configs: list[Config]) -> Config:
    t = stage.tune
    table = metric_table(ctx, configs, t.metric)
    result = tuning_set(table, t.metric, t.queries) if t.queries else cross_validate(table, t.metric, t.folds, t.seed)
    by_name = {c.name: c for c in configs}
    run = _compose([(by_name[p].run, qs) for p, qs in assignments(result, ctx.topics.as_dict())], stage.name)
    ctx.say(
        f"tuned {stage.name} on {t.metric}: {result.protocol}; chosen {', '.join(dict.fromkeys(result.chosen))}; "
        f"held-out {result.heldout:.4f} vs best in-sample {result.best_in_sample:.4f}"
    )
    return Config(tuned_label(stage), stage, {}, "", run, "", all(c.reused for c in configs), tuned=result)


# ------------------------------------------------------------------ the whole experiment
STAGE_RUNNERS = MappingProxyType(
    {
        "bm25": _first_stage,
        "qld": _first_stage,
        "rm3": _rm3_stage,
        "rerank": _rerank_stage,
        "dense": _dense_stage,
    }
)


def run_stages(ctx: Context) -> list[Config]:
    """Every configuration of every stage, inputs first; tuned stages add their held-out configuration."""
    exp = ctx.exp
    made: dict[str, Config] = {}
    offered: dict[str, list[str]] = {}
    plan = outputs(exp.stages, exp.order)
    for name in exp.order:
        stage = exp.stages[name]

        def configs_of(stage=stage, rows=plan[name]) -> list[Config]:
            if stage.type == "fuse":
                return _fuse_stage(ctx, stage, rows, made, offered)
            return STAGE_RUNNERS[stage.type](ctx, stage, rows, made)

        if ctx.grid is not None:  # --ray: the stage's missing points computed on workers, into the cache
            ctx.grid.prefetch(ctx, stage, configs_of)
        configs = configs_of()
        reused = sum(c.reused for c in configs)
        ctx.say(
            f"stage {name}: {len(configs)} configuration(s), {reused} reused from the cache, {len(configs) - reused} computed"
        )
        for c in configs:
            made[c.name] = c
        if stage.tune:
            tuned = _tune(ctx, stage, configs)
            made[tuned.name] = tuned
            offered[name] = [tuned.name]
        else:
            offered[name] = [c.name for c in configs]
    return list(made.values())
