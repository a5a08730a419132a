"""The options of the measuring verbs: ``evaluate``/``evaluate_many`` (``twostage eval``), ``compare``
(``twostage compare``), ``risk``, ``power``/``paired_differences``, ``pool_test`` and ``agreement``, and of the first
stage, ``index``/``build_index``, ``bm25`` and ``dense``: each one frozen object that the library's keywords and the
command's flags build alike (``toolkit.options``; the flags in ``toolkit.cli``'s command modules). ``fuse``'s are
``toolkit.retrieval.fusion.FuseOptions``. ``RequestPolicy``, the HTTP settings of the verbs that call an endpoint
(``judge``'s ``JudgeOptions``, the listwise reranker's), is ``toolkit.guard.client``'s, and ``DiagnosisOptions``
(``diagnose``, ``twostage diagnose``) the diagnosis' own, both named here with the other options classes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
from toolkit.errors import ConfigError, OptionConflictError, OptionError, phrase
from toolkit.guard.client import RequestPolicy
from toolkit.measures.names import EvalSettings, evaluation_settings
from toolkit.options import Options, opt
from toolkit.retrieval.index_options import COLLECTIONS_DIR_DOC, DEVICE_DOC, PRECISION_DOC, IndexOptions
from toolkit.stats.paired import TestOptions
from toolkit.stats.power import DEFAULT_ALPHA, DEFAULT_POWER, check_design
from toolkit.stats.urisk import DEFAULT_ALPHA as DEFAULT_RISK_ALPHA

__all__ = [
    "AgreementOptions",
    "Bm25Options",
    "CompareOptions",
    "DenseOptions",
    "DiagnosisOptions",
    "EvaluationOptions",
    "IndexOptions",
    "PoolTestOptions",
    "PowerOptions",
    "RequestPolicy",
    "RiskOptions",
    "evaluation_settings",
    "holes_over",
]


_RELEVANCE_MAP = "relabel the qrels at load time (``1:0,2:1,3:1`` or a preset such as ``cranfield``)."
_DEDUPE = "``error`` (a repeated (query, doc) is an error) or ``first`` (keep the first, count the rest)."
_DATA_DIR = "where collection names are looked up (default ``$TWOSTAGE_DATA`` or ``../shared/data``)."
_REL_FORMAT = (
    "``-R``: ``qrels``, ``qrels_div`` (diversity qrels, ``qid subtopic docid rel``: what the diversity measures "
    "read; taken when every measure asked is one), ``prefs``, ``qrels_prefs`` or ``qrels_jg`` (the last three "
    "read files)."
)
_ZSCORES = "``-Z``: a file of ``qid measure mean stddev``; values become z-scores."
_LABELS = (
    'display names for measures, ``{name: label}`` (``{"ndcg_cut_10": "nDCG@10"}``); a name is any name of a '
    "measure asked for. Tables, ``summary``, ``per_query``, JSON and CSV use the labels."
)


def holes_over(holes: Any) -> str | None:
    """What ``holes=`` asks for: None (no bounds), ``top-k`` (``True``) or ``retrieved``."""
    if holes is None or holes is False:
        return None
    from toolkit.quality.holes import check_over

    return "top-k" if holes is True else check_over(str(holes))


@dataclass(frozen=True)
class EvaluationOptions(Options):
    """The options of ``evaluate`` and ``evaluate_many`` (``twostage eval``): every keyword but the inputs."""

    verb = "evaluate"

    settings: EvalSettings = evaluation_settings()
    relevance_map: str | None = opt(None, doc=_RELEVANCE_MAP)
    dedupe: str = opt("error", doc=_DEDUPE)
    rel_format: str = opt("qrels", doc=_REL_FORMAT)
    zscores: str | os.PathLike | None = opt(None, doc=_ZSCORES)
    data_dir: str | os.PathLike | None = opt(None, doc=_DATA_DIR)
    labels: Mapping[str, str] | None = opt(None, doc=_LABELS)
    name: str | None = opt(
        None,
        doc="the system's name (``summary``'s name, ``to_pyterrier``'s ``name``); default the run file's name, "
        "else ``run``.",
    )
    holes: bool | str = opt(
        False,
        doc="also bound every ``ndcg_cut.k``, ``P.k`` and ``recall.k`` asked (``Evaluation.holes``): ``True`` or "
        '``"top-k"`` over every labelling of the unjudged documents in the top k, the ideal ranking from the judged '
        'documents plus those (``twostage eval --holes``); ``"retrieved"`` over every labelling of every unjudged '
        "document the run retrieved, the ideal recomputed (``--holes-over retrieved``).",
    )
    ci: float | None = opt(
        None,
        doc="a level in (0, 1) (``0.95``): the bootstrap confidence interval of each measure's mean over the "
        "queries, in ``Evaluation.intervals`` (``twostage eval --ci``); None (default): none.",
    )
    bootstrap: int = opt(10_000, doc="its resamples of the queries.")
    ci_method: str = opt("percentile", doc="``percentile`` or ``bca`` (as ``scipy.stats.bootstrap``).")
    seed: int = opt(42, doc="seed of ``numpy.random.default_rng``, fresh per measure.")

    def validate(self) -> None:
        if self.relevance_map and self.rel_format not in ("qrels", "qrels_div"):
            raise OptionConflictError(
                phrase(
                    "relevance_map applies to rel_format='qrels' only",
                    "--relevance-map applies to -R qrels and qrels_div only",
                ),
                keyword="relevance_map",
                flag="--relevance-map",
            )
        if holes_over(self.holes):
            if self.rel_format != "qrels":
                raise OptionConflictError(
                    phrase("hole bounds need plain qrels (rel_format='qrels')", "--holes needs -R qrels and no -Z"),
                    keyword="holes",
                    flag="--holes",
                )
            if self.zscores:
                raise OptionConflictError(
                    phrase("hole bounds are raw values; drop zscores", "--holes needs -R qrels and no -Z"),
                    keyword="holes",
                    flag="--holes",
                )
        if self.ci is not None:
            from toolkit.stats.mean_intervals import check_interval_request

            check_interval_request(self.ci, self.bootstrap, self.ci_method)


@dataclass(frozen=True)
class CompareOptions(Options):
    """The options of ``compare`` (``twostage compare``): the paired tests' (``stats.paired.TestOptions``), how
    each run is evaluated, and the hole bounds."""

    verb = "compare"

    tests: TestOptions = TestOptions.piece(doc="the paired tests (``stats.paired.TestOptions``)")
    holes: bool | str = opt(
        False,
        doc="also bound each run's ``ndcg_cut.k``, ``P.k`` and ``recall.k``, as ``evaluate(holes=...)`` does: "
        '``True`` / ``"top-k"`` over every labelling of the unjudged documents in the top k (the ideal ranking '
        'from the judged documents plus those), ``"retrieved"`` over every unjudged document each run retrieved '
        "(the ideal recomputed). Each test then carries ``baseline_bounds``, ``bounds`` and ``bounds_overlap``, "
        'and its ``verdict`` says "bounds over the top-k holes overlap" (or "the retrieved holes") where those '
        "holes could explain the difference (``toolkit.stats.trust``). Saved ``.json`` evaluations have no bounds.",
    )
    relevance_map: str | None = opt(None, doc="relabel the qrels at load time, as for ``evaluate``.")
    dedupe: str = opt("error", doc="``error`` or ``first``, as for ``evaluate``.")
    data_dir: str | os.PathLike | None = opt(None, doc="where collection names are looked up.")
    labels: Mapping[str, str] | None = opt(None, doc="display names for measures, as for ``evaluate``.")
    settings: EvalSettings = evaluation_settings()
    rel_format: str = opt("qrels", doc="as for ``evaluate``.")
    zscores: str | os.PathLike | None = opt(None, doc="as for ``evaluate``.")

    def validate(self) -> None:
        holes_over(self.holes)


_EACH_RUN = "how each run is evaluated (``EvaluationOptions``: every keyword of ``evaluate``)"


@dataclass(frozen=True)
class RiskOptions(Options):
    """The options of ``risk`` (``twostage risk``): the weights of a loss, ``force``, and how each run is evaluated
    (``EvaluationOptions``, whose ``name`` the verb sets to each run's)."""

    verb = "risk"

    alpha: float | Iterable[float] = opt(
        DEFAULT_RISK_ALPHA, doc="the extra weight of a loss (>= 0; default 1: a loss counts twice), or several."
    )
    force: bool = opt(False, doc="compare even when provenance or query sets differ (pairs only the shared queries).")
    evaluation: EvaluationOptions = EvaluationOptions.piece(doc=_EACH_RUN)

    def __post_init__(self) -> None:
        if isinstance(self.alpha, Iterable) and not isinstance(self.alpha, (str, bytes)):
            object.__setattr__(self, "alpha", tuple(self.alpha))  # several weights, read once
        super().__post_init__()

    @property
    def alphas(self) -> list[float]:
        """The weights of a loss, as floats (one or several, as given)."""
        return [float(a) for a in (self.alpha if isinstance(self.alpha, tuple) else (self.alpha,))]

    def validate(self) -> None:
        from toolkit.stats.urisk import check_alpha

        for a in self.alpha if isinstance(self.alpha, tuple) else (self.alpha,):
            try:
                check_alpha(a)  # the library's rule, for the library and the command line alike
            except ConfigError as exc:
                raise OptionError(
                    phrase(str(exc), f"the weight of a loss must be a finite number >= 0, got {a}"),
                    keyword="alpha",
                    flag="--alpha",
                ) from None
        if not self.alphas:
            raise OptionError("alpha: give at least one value", keyword="alpha", flag="--alpha")


@dataclass(frozen=True)
class PowerOptions(Options):
    """The options of ``power`` (``twostage power``): the design (``sd``, ``delta``, ``alpha``, ``power``,
    ``queries``) and how the two runs are evaluated (``EvaluationOptions``)."""

    verb = "power"

    sd: float | None = opt(
        None, doc="the standard deviation of the per-query differences (instead of two runs), e.g. ``0.2``."
    )
    delta: float | None = opt(
        None, doc="the smallest difference worth detecting (default with runs: their observed mean difference)."
    )
    alpha: float = opt(DEFAULT_ALPHA, doc="the test's level, in (0, 1).")
    power: float = opt(DEFAULT_POWER, doc="the target power, in (0, 1).")
    queries: int | None = opt(None, doc="with ``sd``: the queries at hand (their power and smallest detectable delta).")
    evaluation: EvaluationOptions = EvaluationOptions.piece(
        doc="how the two runs are evaluated (``EvaluationOptions``)"
    )

    def validate(self) -> None:
        check_design(self.alpha, self.power, self.sd, self.delta)


@dataclass(frozen=True)
class PoolTestOptions(Options):
    """The options of ``pool_test`` (``twostage pool-test``): the pool's depth, how the qrels and runs are read,
    and the evaluation settings."""

    verb = "pool_test"

    pool_depth: int = opt(10, doc="K, the depth of each run's contribution to the pool (>= 1).")
    dedupe: str = opt("error", doc="``error`` (a repeated (query, doc) is an error) or ``first``, as for ``evaluate``.")
    relevance_map: str | None = opt(None, doc="relabel the qrels at load time, as for ``evaluate``.")
    data_dir: str | os.PathLike | None = opt(None, doc="where collection names are looked up, as for ``evaluate``.")
    settings: EvalSettings = evaluation_settings()

    def validate(self) -> None:
        depth = self.pool_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise OptionError(
                phrase(f"pool_depth must be an integer >= 1, got {depth!r}", f"must be >= 1, got {depth}"),
                keyword="pool_depth",
                flag="--pool-depth",
            )


@dataclass(frozen=True)
class AgreementOptions(Options):
    """The options of ``agreement`` (``twostage agreement``): how the judgments are read and named, the label
    scale, the paired test of the systems' ranking, and how the runs are evaluated."""

    verb = "agreement"

    rel_format: str = opt(
        "qrels", doc="``qrels`` (two files) or ``qrels_jg`` (the groups of one file, named ``jg=NAME``)."
    )
    names: Sequence[str] | None = opt(None, doc="the names of the two sets (default: the file names).")
    labels: Iterable[int] | None = opt(None, doc="the label scale of the confusion matrix (default: every label used).")
    alpha: float = opt(0.05, doc="the level at which a pair of systems counts as significantly different.")
    permutations: int = opt(10_000, doc="random sign flips of the randomization test (all 2^n when that is not more).")
    seed: int = opt(42, doc="seed of ``numpy.random.default_rng`` for the test (the same for every set of judgments).")
    correction: str = opt(
        "holm",
        doc="one of ``toolkit.stats.significance.CORRECTIONS`` (``holm``, ``bonferroni``, ``bh``, ``holm-sidak``, "
        "``sidak``, ``fdr_bh``, ``fdr_by``, ``none``), over the family of all pairs of systems.",
    )
    dedupe: str = opt("error", doc="``error`` or ``first``, as for ``evaluate``.")
    data_dir: str | os.PathLike | None = opt(None, doc="where collection names are looked up.")
    settings: EvalSettings = evaluation_settings()
    relevance_map: str | None = opt(None, doc="as for ``evaluate``, for the runs' evaluation.")
    zscores: str | os.PathLike | None = opt(None, doc="as for ``evaluate``, for the runs' evaluation.")
    holes: bool | str = opt(False, doc="as for ``evaluate``, for the runs' evaluation.")
    ci: float | None = opt(None, doc="as for ``evaluate``, for the runs' evaluation.")
    bootstrap: int = opt(10_000, doc="as for ``evaluate``, for the runs' evaluation.")
    ci_method: str = opt("percentile", doc="as for ``evaluate``, for the runs' evaluation.")

    def evaluation(self) -> EvaluationOptions:
        """How each run is evaluated under each set of judgments (``evaluate_many``'s options)."""
        return EvaluationOptions(
            settings=self.settings,
            dedupe=self.dedupe,
            relevance_map=self.relevance_map,
            zscores=self.zscores,
            holes=self.holes,
            ci=self.ci,
            bootstrap=self.bootstrap,
            ci_method=self.ci_method,
        )


# ------------------------------------------------------------------ the first stage: bm25, dense
_HITS = "documents per query."
_THREADS = "search threads."
_MAX_QUERIES = "only the first N topics."


@dataclass(frozen=True)
class Bm25Options(Options):
    """The options of ``bm25`` (``twostage bm25``): BM25 (``k1``, ``b``) or query likelihood (``qld``, ``mu``),
    RM3 feedback, and how the topics are searched. Checked once, with the rules of ``retrieval.lucene``."""

    verb = "bm25"

    hits: int = opt(1000, doc=_HITS)
    k1: float = opt(0.9, doc="BM25 k1.")
    b: float = opt(0.4, doc="BM25 b.")
    qld: bool = opt(False, doc="query likelihood instead of BM25.")
    mu: float = opt(1000.0, doc="Dirichlet mu (with ``qld``).")
    rm3: bool = opt(False, doc="RM3 pseudo-relevance feedback.")
    fb_terms: int = opt(10, doc="RM3 feedback terms.")
    fb_docs: int = opt(10, doc="RM3 feedback documents.")
    original_query_weight: float = opt(0.5, doc="RM3 weight of the original query.")
    threads: int = opt(2, doc=_THREADS)
    max_queries: int | None = opt(None, doc=_MAX_QUERIES)
    data_dir: str | os.PathLike | None = opt(None, doc=COLLECTIONS_DIR_DOC)

    @property
    def model(self) -> str:
        """The Lucene model: ``qld`` or ``bm25``."""
        return "qld" if self.qld else "bm25"

    def feedback(self) -> Any:
        """RM3's settings (``retrieval.lucene.RM3``), None without ``rm3``."""
        from toolkit.retrieval.lucene import RM3

        return RM3(self.fb_terms, self.fb_docs, self.original_query_weight) if self.rm3 else None

    def validate(self) -> None:
        from toolkit.retrieval.lucene import check_params
        from toolkit.retrieval.search import validate_hits

        validate_hits(self.hits)
        check_params(self.model, self.k1, self.b, self.mu, self.feedback())


@dataclass(frozen=True)
class DenseOptions(Options):
    """The options of ``dense`` (``twostage dense``): query encoding, the FAISS search, and the Ray job that may
    run them (``ray=``)."""

    verb = "dense"

    hits: int = opt(1000, doc=_HITS)
    batch_size: int = opt(32, doc="query encoding batch size.")
    ef_search: int = opt(256, doc="HNSW efSearch.")
    device: str = opt("auto", doc=DEVICE_DOC)
    precision: str = opt("auto", doc=PRECISION_DOC)
    threads: int = opt(2, doc=_THREADS)
    max_queries: int | None = opt(None, doc=_MAX_QUERIES)
    ray: str | None = opt(None, doc="a Ray address: encode and search in shards on Ray workers.")
    workers: int | None = opt(None, doc="Ray workers.")
    gpus_per_worker: float | None = opt(None, doc="GPUs per Ray worker.")
    shards: str | os.PathLike | None = opt(
        None, doc="with ``ray``: the folder of the job's manifest and shards (resumable)."
    )
    force: bool = opt(False, doc="with ``ray``: discard a different earlier job's shards.")
    progress: bool = opt(False, doc="show progress bars.")
    data_dir: str | os.PathLike | None = opt(None, doc=COLLECTIONS_DIR_DOC)
    cpus_per_worker: float | None = opt(None, doc="with ``ray``: CPUs per Ray worker (1).")
    shard_size: int | None = opt(None, doc="with ``ray``: queries per shard.")
    max_retries: int | None = opt(None, doc="with ``ray``: times Ray restarts a dead worker and re-runs its shard (3).")

    def validate(self) -> None:
        from toolkit.retrieval.search import validate_hits

        validate_hits(self.hits)
