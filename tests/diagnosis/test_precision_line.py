"""The diagnosis page states the precision a reranked run's model ran in and its change against fp32, from
the run's hand-written ``twostage rerank`` sidecar; exact fp32 runs add no line."""

from __future__ import annotations

import html
import json

from toolkit.diagnosis.precision import precision_line

FP16 = "half precision: top 10 identical to fp32 on 93.0 % of DL19 queries <H200> & more"


def test_precision_line_names_each_inexact_run():
    metas = {
        "exact": {"reranker": {"backend": "torch", "precision": "fp32", "precision_effect": "none: exact"}},
        "half": {"reranker": {"backend": "torch", "precision": "fp16", "precision_effect": FP16}},
        "int8": {"reranker": {"backend": "onnx-int8", "precision": "int8 MatMul weights"}},
        "no sidecar": {},
    }
    assert precision_line(metas) == (
        f"half: torch fp16: {FP16}; int8: onnx-int8 int8 MatMul weights: its change against fp32 is not recorded "
        "in the sidecar"
    )
    assert precision_line({"exact": metas["exact"], "none": {}}) is None


def _diagnose(cli, tmp_path, out: str):
    res = cli(
        "diagnose",
        "--qrels",
        tmp_path / "qrels.txt",
        "--first-stage",
        tmp_path / "first.trec",
        "--reranked",
        tmp_path / "rr.trec",
        "--out",
        tmp_path / out,
    )
    assert res.exit_code == 0, res.output
    return (tmp_path / out / "index.html").read_text()


def test_cli_diagnosis_page_states_the_sidecars_precision(tmp_path, cli):
    (tmp_path / "qrels.txt").write_text("1 0 D1 1\n1 0 D2 1\n1 0 D3 0\n")
    (tmp_path / "first.trec").write_text("1 Q0 D3 1 3 f\n1 Q0 D1 2 2 f\n1 Q0 X 3 1 f\n")
    (tmp_path / "rr.trec").write_text("1 Q0 D1 1 3 r\n1 Q0 D3 2 2 r\n1 Q0 X 3 1 r\n")
    sidecar = {
        "depth": 3,
        "reranker": {"model": "m", "backend": "torch", "precision": "fp16", "precision_effect": FP16},
    }
    (tmp_path / "rr.trec.meta.json").write_text(json.dumps(sidecar))
    page = _diagnose(cli, tmp_path, "o")
    assert f"reranker_precision: <code>{html.escape(f'rr: torch fp16: {FP16}')}</code>" in page
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["settings"]["sources"]["reranker_precision"] == f"rr: torch fp16: {FP16}"
    sidecar["reranker"] |= {"precision": "fp32", "precision_effect": "none: exact"}
    (tmp_path / "rr.trec.meta.json").write_text(json.dumps(sidecar))
    assert "reranker_precision" not in _diagnose(cli, tmp_path, "o2")
