"""gain-sensitivity: the same runs under each nDCG variant, and order flips flagged."""

from __future__ import annotations

import json
import math

import pytest


@pytest.fixture()
def flip(tmp_path):
    # Linear: sys_many = 2 + 2/log2 3 + 2/log2 4 = 4.2619 beats sys_one = 3.
    # Exp:    sys_many = 3 + 3/log2 3 + 3/log2 4 = 6.3928 loses to sys_one = 7.
    q = tmp_path / "qrels"
    q.write_text("q 0 A 3\nq 0 B 2\nq 0 C 2\nq 0 D 2\n")
    many, one = tmp_path / "many", tmp_path / "one"
    many.write_text("q Q0 B 1 3 t\nq Q0 C 2 2 t\nq Q0 D 3 1 t\n")
    one.write_text("q Q0 A 1 3 t\n")
    return q, many, one


def test_order_flip_is_flagged(cli, flip):
    q, many, one = flip
    res = cli("gain-sensitivity", "--format", "json", q, many, one)
    doc = json.loads(res.stdout)
    idcg_lin = 3 + 2 / math.log2(3) + 2 / 2 + 2 / math.log2(5)
    assert doc["ndcg"]["many"]["linear/log2 (trec_eval)"] == pytest.approx((2 + 2 / math.log2(3) + 1) / idcg_lin)
    assert doc["ndcg"]["one"]["linear/log2 (trec_eval)"] == pytest.approx(3 / idcg_lin)
    assert any(s.startswith("exp/log2 (2^l-1): order one > many") for s in doc["order_changes"])


def test_text_output_and_uncovered_labels(cli, tmp_path, flip):
    q, many, one = flip
    q.write_text(q.read_text() + "q 0 E 4\n")
    res = cli("gain-sensitivity", q, many, one)
    assert res.exit_code == 0
    assert "# skipped JK weights 0,1,4,10: gain map 0:0,1:1,2:4,3:10 does not cover label(s) [4]" in res.stdout
    assert "# system order:" in res.stdout
