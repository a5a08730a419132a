"""The default query-type taxonomy, rule by rule on TREC DL19's 43 queries against a table
written by hand, and the report's type counts with the too-small mark."""

from __future__ import annotations

from collections import Counter

import pytest

from toolkit.diagnosis.query_labels import MIN_TYPE_QUERIES
from toolkit.diagnosis.query_types import DEFAULT_TYPE_RULES, classify_query

#: DL19's queries and the type each one is, decided by reading the query (not by running the rules).
DL19_TYPES = [
    ("156493", "do goldfish grow", "entity/factoid"),
    ("1110199", "what is wifi vs bluetooth", "comparison"),
    ("1063750", "why did the us volunterilay enter ww1", "long-form"),
    ("130510", "definition declaratory judgment", "definition"),
    ("489204", "right pelvic pain causes", "symptoms/causes"),
    ("573724", "what are the social determinants of health", "entity/factoid"),
    ("168216", "does legionella pneumophila cause pneumonia", "symptoms/causes"),
    ("1133167", "how is the weather in jamaica", "long-form"),
    ("527433", "types of dysarthria from cerebral palsy", "other"),
    ("1037798", "who is robert gray", "entity/factoid"),
    ("915593", "what types of food can you cook sous vide", "long-form"),
    ("264014", "how long is life cycle of flea", "entity/factoid"),
    ("1121402", "what can contour plowing reduce", "entity/factoid"),
    ("962179", "when was the salvation army founded", "entity/factoid"),
    ("1117099", "what is a active margin", "definition"),
    ("148538", "difference between rn and bsn", "comparison"),
    ("451602", "medicare's definition of mechanical ventilation", "definition"),
    ("359349", "how to find the midsegment of a trapezoid", "procedure"),
    ("1115776", "what is an aml surveillance analyst", "definition"),
    ("1112341", "what is the daily life of thai people", "long-form"),
    ("131843", "definition of a sigmet", "definition"),
    ("104861", "cost of interior concrete flooring", "other"),
    ("833860", "what is the most popular food in switzerland", "long-form"),
    ("207786", "how are some sharks warm blooded", "long-form"),
    ("1114819", "what is durable medical equipment consist of", "entity/factoid"),
    ("183378", "exons definition biology", "definition"),
    ("1106007", "define visceral?", "definition"),
    ("1124210", "tracheids are part of _____.", "entity/factoid"),
    ("490595", "rsa definition key", "definition"),
    ("1103812", "who formed the commonwealth of independent states", "entity/factoid"),
    ("87181", "causes of left ventricular hypertrophy", "symptoms/causes"),
    ("443396", "lps laws definition", "definition"),
    ("1121709", "what are the three percenters?", "definition"),
    ("87452", "causes of military suicide", "symptoms/causes"),
    ("855410", "what is theraderm used for", "entity/factoid"),
    ("1114646", "what is famvir prescribed for", "entity/factoid"),
    ("19335", "anthropological definition of environment", "definition"),
    ("47923", "axon terminals or synaptic knob definition", "definition"),
    ("405717", "is cdg airport in main paris", "entity/factoid"),
    ("182539", "example of monotonic function", "other"),
    ("1113437", "what is physical description of spruce", "entity/factoid"),
    ("1129237", "hydrogen is a liquid below what temperature", "entity/factoid"),
    ("146187", "difference between a mcdouble and a double cheeseburger", "comparison"),
]


def test_the_table_is_dl19(msmarco):
    topics = dict(line.rstrip("\n").split("\t") for line in (msmarco / "topics.dl19-passage.txt").open())
    assert {q: t for q, t, _ in DL19_TYPES} == topics


@pytest.mark.parametrize("qid, text, expected", DL19_TYPES, ids=[q for q, _, _ in DL19_TYPES])
def test_dl19_query_types(qid, text, expected):
    assert classify_query(text) == expected


def test_every_rule_is_documented_and_used():
    """Each default type has a meaning for the report; every type but identifier-like (DL19 has no code in a
    query that is not a question) occurs on DL19."""
    assert all(r.meaning for r in DEFAULT_TYPE_RULES)
    seen = {t for _, _, t in DL19_TYPES}
    assert seen == {r.type for r in DEFAULT_TYPE_RULES} - {"identifier-like"} | {"other"}
    assert Counter(t for _, _, t in DL19_TYPES) == {
        "entity/factoid": 14,
        "definition": 12,
        "long-form": 6,
        "symptoms/causes": 4,
        "comparison": 3,
        "other": 3,
        "procedure": 1,
    }


@pytest.mark.parametrize(
    "query, expected",
    [
        ("how to cook rice", "procedure"),
        ("How do I reset my router", "procedure"),
        ("steps to become a nurse", "procedure"),
        ("symptoms of shingles", "symptoms/causes"),
        ("what causes gout", "symptoms/causes"),
        ("why do cats purr", "long-form"),  # an explanation, not a list of causes
        ("how does a refrigerator work", "long-form"),
        ("401k contribution limit", "identifier-like"),
        ("i-95 traffic", "identifier-like"),
        ("form 1099", "identifier-like"),
        ("what is a 401k", "definition"),  # the definition rule comes first
        ("what does rsvp mean", "definition"),
        ("iphone versus android", "comparison"),
        ("how many calories in an egg", "entity/factoid"),
        ("where is the eiffel tower", "entity/factoid"),
        ("cost of interior concrete flooring", "other"),
    ],
)
def test_default_rules_beyond_dl19(query, expected):
    assert classify_query(query) == expected


@pytest.mark.data
def test_dl19_page_counts_types_and_marks_small_ones(msmarco, tmp_path):
    from toolkit.data.trec_io import read_qrels, read_run
    from toolkit.diagnosis.compute import DiagnosisInputs, diagnose
    from toolkit.diagnosis.diagnosis_options import DiagnosisOptions
    from toolkit.report.diagnosis_page import PLOTS, diagnosis_markdown, types_table

    qrels = read_qrels(msmarco / "qrels.dl19-passage.txt")
    bm25 = read_run(msmarco / "runs" / "run.dl19.bm25.top100.txt")
    queries = {q: t for q, t, _ in DL19_TYPES}
    d = diagnose(
        DiagnosisInputs(qrels, bm25, bm25, queries=queries), DiagnosisOptions(depth=100, worst_n=0, permutations=10)
    )  # its own rerank
    counts = Counter(t for _, _, t in DL19_TYPES)
    types = d.types.set_index("query_type")
    assert types["queries"].to_dict() == counts
    assert types["too_small"].to_dict() == {t: n < MIN_TYPE_QUERIES for t, n in counts.items()}
    rows = {r[0]: r for r in types_table(d).rows}
    assert rows["procedure"][1] == 1 and rows["procedure"][2].startswith("too few queries (< 5)")
    assert rows["definition"][1] == 12 and rows["definition"][2] == ""
    md = diagnosis_markdown(d, {name: f"plots/{name}.png" for name in PLOTS})
    assert "| procedure | 1 | too few queries (\\< 5) to read anything into |" in md  # "<" escaped for Markdown
