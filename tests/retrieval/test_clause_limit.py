"""A query over Lucene's clause limit: one ``Error:`` line naming the topics file, the query
and the fix, for BM25 (Lucene's IndexSearcher) and RM3 (Anserini's SimpleSearcher, whose batch search hides the
cause as "queryCount = 2 is not equal to completedTaskCount = 1"), instead of a 20-frame Java traceback.

Oracle: Lucene's own limit (``IndexSearcher.getMaxClauseCount()``, 1024 by default) and Anserini's
bag-of-words query (one clause per distinct analysed term): 1,100 distinct made-up terms are 1,100 clauses.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.data


@pytest.mark.parametrize("extra", [[], ["--rm3"]])
def test_a_query_over_the_clause_limit_is_named(cli, cacm_index, tmp_path, extra):
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\t" + " ".join(f"term{i}x" for i in range(1100)) + "\n2\tcomputer programming\n")
    out = tmp_path / "run.trec"
    res = cli("bm25", "--index", cacm_index, "--topics", topics, "--out", out, *extra)
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: {topics}: query '1' has 1100 distinct terms after analysis, more than the 1024 clauses Lucene "
        "accepts in one query (TooManyClauses); shorten that query or leave it out of the topics"
    )
    assert not out.exists()
