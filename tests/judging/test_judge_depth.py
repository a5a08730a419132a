"""``judge`` records the depth it used: the shorter of ``--depth`` and the run's lists (``judge --depth 200`` on
6-deep lists judged the top 6, and its sidecar once said 200)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from judge_server import write_candidates

import toolkit as ts
from toolkit.cli import main


def _candidates(tmp_path, server, n_docs=6):
    queries = {}
    for q in (1, 2):
        docs = []
        for i in range(n_docs):
            d = f"D{q}x{i}"
            server.labels[d] = (q + i) % 4
            docs.append((d, f"[doc {d}] passage {i} for topic {q}."))
        queries[f"q{q}"] = docs
    return write_candidates(tmp_path / "cand.json", queries)


def test_cli_judge_depth_beyond_the_lists_records_the_lists(tmp_path, judge_server):
    cand = _candidates(tmp_path, judge_server)
    out = tmp_path / "j.qrels"
    args = ["judge", "--candidates", cand, "--depth", "200", "--endpoint", judge_server.url, "--model", "m"]
    res = CliRunner().invoke(main, [*args, "--no-cache", "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "j.qrels.meta.json").read_text())
    assert (meta["depth"], meta["depth_option"]) == (6, 200)
    assert meta["counts"]["pairs"] == 2 * 6 == judge_server.total


@pytest.mark.parametrize(("option", "used"), [(4, 4), (6, 6), (7, 6)])
def test_library_judge_records_the_shorter_of_the_option_and_the_lists(tmp_path, judge_server, option, used):
    cand = _candidates(tmp_path, judge_server)
    j = ts.judge(candidates=cand, depth=option, model="m", endpoint=judge_server.url, cache=False, progress=False)
    assert (j.meta["depth"], j.meta["depth_option"]) == (used, option)
    assert j.counts["pairs"] == 2 * used
