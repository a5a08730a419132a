"""Every measure name of ir_measures 0.4.3, with each of its parameters: twostage reads the parameters as ir_measures
declares them, picks the provider ir_measures picks, and gives that provider's value per query and mean (DL19,
and the diversity fixture for pyndeval's measures), or refuses the name with the reason ir_measures has none.

Oracle: ir_measures itself (its registry, its default pipeline, its providers: pytrec_eval, cwl_eval, compat,
pyndeval, judged, msmarco, gdeval, accuracy, ranx), called as ``irm_oracle`` describes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from needs import required

ir_measures = required("ir_measures", "ir_measures is the interop oracle (pip install .[test])")
required("cwl", "cwl-eval is the oracle of ir_measures' cwl measures (pip install .[test])")
required("pyndeval", "pyndeval is the oracle of ir_measures' diversity measures (pip install .[test])")

import irm_oracle  # noqa: E402

from toolkit.errors import UnknownMeasureError  # noqa: E402
from toolkit.measures import irm_names  # noqa: E402
from toolkit.measures.names import parse_measure_groups  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diversity"
DIVERSITY = {"pyndeval"}


def test_parameters_are_those_ir_measures_declares():
    registry = ir_measures.measures.registry
    assert set(irm_names.MEASURES) | set(irm_names.SYNONYMS) | set(irm_names.PRESETS) == set(registry)
    for name, params in irm_names.MEASURES.items():
        theirs = registry[name].SUPPORTED_PARAMS
        assert [p.name for p in params] == list(theirs), name
        for p in params:
            info = theirs[p.name]
            default = None if info.default is ir_measures.measures.base._NOT_PROVIDED else info.default
            choices = () if info.choices is ir_measures.measures.base._NOT_PROVIDED else tuple(info.choices)
            assert (p.kind, p.default, p.required, p.choices) == (info.dtype, default, info.required, choices), (
                name,
                p.name,
            )
    for alias, name in irm_names.SYNONYMS.items():
        assert registry[alias] is registry[name]
    for preset, (name, given) in irm_names.PRESETS.items():
        assert name == registry[preset].NAME and registry[preset].params == given
    assert [p for p, _ in irm_names.PROVIDERS] == [
        p.NAME for p in ir_measures.DefaultPipeline.providers if p.SUPPORTED_MEASURES
    ]


GRID = irm_oracle.grid()


@pytest.mark.parametrize("measure", GRID, ids=repr)
def test_provider_is_the_one_ir_measures_picks(measure):
    read = irm_names.Name(measure.NAME, dict(measure.params), repr(measure))
    assert irm_names.provider(read) == irm_oracle.provider_of(measure)


def _split():
    """The grid by what twostage does with each name: (computed, refused with the reason)."""
    computed, refused = [], []
    for m in GRID:
        try:
            parse_measure_groups([repr(m)], 10)
        except UnknownMeasureError as exc:
            refused.append((m, str(exc)))
        else:
            computed.append(m)
    return computed, refused


COMPUTED, REFUSED = _split()


def test_refused_names_are_those_ir_measures_cannot_evaluate_and_say_why():
    """A name is refused only where ir_measures has no value: no provider takes it, or the provider fails on it
    (ndeval without a cutoff). The one name only its ranx provider takes is computed (ranx's ndcg_burges)."""
    for m, message in REFUSED:
        which = irm_oracle.provider_of(m)
        if which is None:
            reason = irm_names.NO_PROVIDER.get(m.NAME)
            assert "no provider" in message and (reason is None or reason in message), (m, message)
        else:  # pyndeval takes a name without a cutoff and then fails formatting it (ValueError)
            assert which == "pyndeval" and "cutoff" not in m.params and "needs a cutoff" in message, (m, message)
            with pytest.raises(ValueError):
                irm_oracle.values(
                    [m], *irm_oracle.read(FIXTURES / "qrels.diversity.txt", FIXTURES / "run.diversity.txt")
                )
    no_provider = {repr(m) for m, _ in REFUSED if irm_oracle.provider_of(m) is None}
    assert no_provider == {
        "ERR",  # gdeval needs a cutoff
        "NumRel(rel=0)",  # pytrec_eval takes rel=1 only
        "NumRel(rel=2)",
        "RBP",  # cwl_eval needs rel= and takes no cutoff
        "RBP(p=0.9)",
        "RBP(p=0.9)@10",
        "RBP(rel=0)@10",
        "RBP(rel=2)@10",
        "RBP@10",
        "RBP@5",
        "RR(judged_only=True)@10",  # msmarco takes no judged_only, pytrec_eval no cutoff
    }
    assert {repr(m) for m in COMPUTED if irm_oracle.provider_of(m) == "ranx"} == {"nDCG(dcg='exp-log2')"}
    # every diversity measure with a cutoff parameter, asked without one (ndeval has no such value)
    assert all("@" not in repr(m) for m, _ in REFUSED if irm_oracle.provider_of(m) == "pyndeval")


def test_every_computed_name_equals_its_provider_on_dl19(msmarco):
    ms = [m for m in COMPUTED if irm_oracle.provider_of(m) not in DIVERSITY]
    assert len(ms) > 100
    irm_oracle.compare(ms, msmarco / "qrels.dl19-passage.txt", msmarco / "runs" / "run.dl19.bm25.top100.txt")


def test_every_diversity_name_equals_pyndeval_on_the_fixture():
    ms = [m for m in COMPUTED if irm_oracle.provider_of(m) in DIVERSITY]
    assert {m.NAME for m in ms} == {
        "ERR_IA", "nERR_IA", "alpha_DCG", "alpha_nDCG", "NRBP", "nNRBP", "AP_IA", "P_IA", "StRecall"
    }  # fmt: skip
    irm_oracle.compare(ms, FIXTURES / "qrels.diversity.txt", FIXTURES / "run.diversity.txt")
