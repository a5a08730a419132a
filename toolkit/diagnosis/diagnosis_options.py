"""The options of a diagnosis (``ts.diagnose``, ``twostage diagnose``, an experiment's diagnoses): one frozen object
that the library's keywords and the command's flags build alike (``toolkit.options``; the flags in
``toolkit.cli.diagnose``), checked once where it is built.

What is diagnosed (the qrels, the runs, the query and document texts, the query types) is no option: the verbs take
those as their inputs (``compute.DiagnosisInputs``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from toolkit.diagnosis.decompose import DEFAULT_CURVE_DEPTHS, headline_measure, parse_headline_measure
from toolkit.diagnosis.query_labels import Thresholds
from toolkit.errors import OptionError, UnknownMeasureError, phrase
from toolkit.measures.names import EvalSettings, evaluation_settings
from toolkit.options import Options, opt

__all__ = ["DiagnosisOptions"]

#: The counts of listed things that must be >= 0: (field, what the library calls it, its flag).
_COUNTS = (
    ("worst_n", "worst-N", "--worst"),
    ("most_changed_n", "most-changed-N", "--most-changed"),
    ("disagree_n", "disagreements-N", "--disagreements"),
    ("missed_shown", "missed-shown", "--missed-shown"),
    ("explore_depth", "explore depth", "--explore-depth"),
)


@dataclass(frozen=True)
class DiagnosisOptions(Options):
    """The options of ``diagnose`` (``twostage diagnose``): every setting of a diagnosis, none of its inputs."""

    verb = "diagnose"

    measure: str = opt(
        "ndcg_cut.10",
        doc="the headline measure the loss is decomposed on (``ndcg_cut.10``, ``P.10``, ``recall.20``, ``nDCG@10``, "
        "``AP(rel=2)@100``...); a relevance level in the name is the ``recall_level``.",
    )
    depth: int | Mapping[str, int] | None = opt(
        None,
        doc="rerank depth N, one for every run or ``{name: N}`` [default: the sidecar's, else detected from the runs "
        "(the run's top N reorder the first stage's and its ranks below N repeat the first stage's, on the queries "
        "both hold: ``toolkit.diagnosis.depths``), else ``DepthNotDetectedError`` naming the run].",
    )
    curve_depths: Iterable[int] = opt(
        DEFAULT_CURVE_DEPTHS, doc="depths of the rerank-depth curve (those up to N, plus N)."
    )
    listwise: Iterable[str] | bool = opt(
        (), doc="names of reranked runs whose depth curve is an approximation (``True``: every one)."
    )
    pairs: Mapping[str, str] | None = opt(
        None,
        doc="{reranked name: first-stage name} with several first stages [default: the sidecar's first stage, else "
        "the first stage holding most of the run's documents].",
    )
    recall_level: int | None = opt(
        None,
        doc="relevance level of recall and binary measures [default: 2 when the qrels are graded above 1, else 1].",
    )
    settings: EvalSettings = evaluation_settings(complete=True)
    name: str | None = opt(None, doc="the report's title [default: the runs, ``rv20, rv100 over bm25``].")
    ok: float = opt(0.6, doc="``ok`` when reranked >= ok x ideal; candidates-missed when even the ceiling is below it.")
    max_unjudged: float = opt(0.3, doc="unjudged-top when more than this share of the reranked top 10 is unjudged.")
    hurt: float = opt(0.05, doc="reranker-hurt when reranked < first stage - hurt x ideal.")
    worst_n: int = opt(10, doc="how many worst queries to list.")
    most_changed_n: int = opt(10, doc="how many most changed queries (lowest RBO) to list per reranked run.")
    disagree_n: int = opt(5, doc="how many queries to list per pair of reranked runs where they differ most.")
    missed_shown: int = opt(5, doc="best missed judged documents listed per query.")
    explore_depth: int = opt(10, doc="top k of every system shown side by side for a chosen query.")
    permutations: int = opt(10_000, doc="random sign flips of the randomization tests.")
    seed: int = opt(42, doc="their generator's seed.")
    correction: str = opt("holm", doc="``holm``, ``bonferroni`` or ``none``, within each family of comparisons.")
    ci: float = opt(
        0.95,
        doc="level in (0, 1) of the paired bootstrap interval of every comparison (``ci_low``, ``ci_high`` beside "
        "``d_z``, the hole bounds of the measure and a verdict: ``toolkit.stats.annotate``).",
    )
    bootstrap: int = opt(10_000, doc="its resamples of the queries (seeded by ``seed``).")
    ci_method: str = opt("percentile", doc="``percentile`` or ``bca``.")
    relevance_map: str | None = opt(None, doc="relabel the qrels at load time, as for ``evaluate``.")
    dedupe: str = opt("error", doc="``error`` or ``first``, as for ``evaluate``.")
    data_dir: str | os.PathLike | None = opt(None, doc="where collection names are looked up.")
    depth_as: str = opt(
        "given", doc="how the report names a given ``depth`` (``given``; ``twostage diagnose``: ``option``)."
    )
    window: int | None = opt(
        None,
        doc="the sliding window W a listwise reranker used; with ``stride`` S, the share of windows it returned in "
        "their input order is reported (``toolkit.diagnosis.listwise_behaviour``).",
    )
    stride: int | None = opt(None, doc="the window's stride [default: the window].")
    snippet_chars: int = opt(220, doc="the longest document snippet shown, in characters.")

    def __post_init__(self) -> None:
        # the depths and the listwise names held as tuples: read more than once (a generator given is read here)
        object.__setattr__(self, "curve_depths", tuple(self.curve_depths))
        if not isinstance(self.listwise, bool):
            object.__setattr__(self, "listwise", tuple(self.listwise or ()))
        super().__post_init__()

    def validate(self) -> None:
        from toolkit.stats.mean_intervals import check_interval_request

        check_interval_request(self.ci, self.bootstrap, self.ci_method)
        try:
            measure = self.headline[0]
        except UnknownMeasureError:  # no refusal of a value: the diagnosis says it where it reads the measure
            measure = None
        if measure is not None:
            parse_headline_measure(measure)  # one measure, with a ceiling
        self.thresholds  # noqa: B018  (each threshold within [0, 1])
        for field, what, flag in _COUNTS:
            if getattr(self, field) < 0:
                raise OptionError(f"{phrase(what, flag)} must be >= 0", keyword=field, flag=flag)
        if any(int(k) < 1 for k in self.curve_depths):
            raise OptionError(
                phrase("curve_depths must be >= 1", "depths must be >= 1"),
                keyword="curve_depths",
                flag="--curve-depths",
            )

    @property
    def thresholds(self) -> Thresholds:
        """The label thresholds ``ok``, ``max_unjudged`` and ``hurt``."""
        return Thresholds(ok=self.ok, max_unjudged=self.max_unjudged, hurt=self.hurt)

    @property
    def headline(self) -> tuple[str, int | None]:
        """The headline measure as the diagnosis takes it (``decompose.headline_measure``: an ir_measures name with
        its own relevance level is its trec_eval measure at that level) and the relevance level it sets (else
        ``recall_level``)."""
        return headline_measure(self.measure, self.recall_level, self.settings.trec_eval)
