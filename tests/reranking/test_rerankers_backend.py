"""``--backend rerankers``: other model families through AnswerDotAI's ``rerankers`` library.

Tiny models with random weights, built here (no download): a one-logit BERT cross-encoder and a monoT5-shaped
T5. The run must equal the library's own ``Reranker(...).rank`` scores on the same folder (the oracle: the
library called as its README calls it, scores matched by passage text), and, independently of the library,
the cross-encoder's logits from sentence-transformers and the T5's P(true) computed here from the model's
first decoding step.
"""

from __future__ import annotations

import json
import os
from types import MappingProxyType

import numpy as np
import pytest
from tiny_models import save_tiny_bert, save_tiny_t5

import toolkit as ts
from toolkit.data.sidecar import meta_path
from toolkit.data.trec_io import read_run
from toolkit.errors import ConfigError
from toolkit.reranking.backends import BACKENDS, RerankerSpec

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

QUERIES = {"q1": "apple pie recipe", "q2": "car repair shop", "q3": "river city"}
PASSAGES = {
    "d1": "a history of the apple",
    "d2": "apple pie recipe with cinnamon",
    "d3": "car repair",
    "d4": "a pie",
    "d5": "the river runs through the city",
    "d6": "shop for a car",
    "d7": "recipe",
}
WORDS = sorted({w for t in [*QUERIES.values(), *PASSAGES.values()] for w in t.split()})


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    """Every query with all seven passages (first-stage scores descending in doc id order)."""
    entries = [
        {
            "query": text,
            "hits": [
                {"qid": q, "docid": d, "rank": i + 1, "score": float(10 - i), "content": PASSAGES[d]}
                for i, d in enumerate(PASSAGES)
            ],
        }
        for q, text in QUERIES.items()
    ]
    path = tmp_path_factory.mktemp("rr-cands") / "cands.json"
    path.write_text(json.dumps(entries))
    return path


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory) -> str:
    return str(save_tiny_bert(tmp_path_factory.mktemp("rr-ce"), WORDS, seed=3, classifier=True, init_std=0.5))


@pytest.fixture(scope="module")
def t5(tmp_path_factory) -> str:
    return str(save_tiny_t5(tmp_path_factory.mktemp("rr-t5"), WORDS, seed=5))


def _library_scores(model: str, model_type: str, batch_size: int, docs=tuple(PASSAGES)) -> dict[tuple[str, str], float]:
    """The oracle: the library's own ranking of each query's passages ``docs``, scores matched back by text."""
    from rerankers import Reranker

    ranker = Reranker(model, model_type=model_type, verbose=0, device="cpu", batch_size=batch_size)
    by_text = {t: d for d, t in PASSAGES.items()}
    out = {}
    for q, text in QUERIES.items():
        for r in ranker.rank(text, [PASSAGES[d] for d in docs]).results:
            out[q, by_text[r.document.text]] = r.score
    return out


def _run_scores(run) -> dict[tuple[str, str], float]:
    return {(q, d): s for q, d, s in run.frame[["query_id", "doc_id", "score"]].itertuples(index=False)}


@pytest.mark.parametrize("model_type", ["cross-encoder", "t5"])
def test_library_run_equals_the_librarys_own_scores(model_type, candidates, cross_encoder, t5):
    model = cross_encoder if model_type == "cross-encoder" else t5
    run = ts.rerank(
        candidates=candidates, model=model, backend="rerankers", model_type=model_type, device="cpu", batch_size=3
    )
    got = _run_scores(run)
    assert got == _library_scores(model, model_type, batch_size=3)  # exact: the same calls, the same batches
    assert len(set(got.values())) == len(got)  # random weights, still distinct scores: the match is not vacuous
    r = run.meta["reranker"]
    assert (r["backend"], r["model_type"], r["kind"], r["ranker"]) == (
        "rerankers",
        model_type,
        model_type,
        {"cross-encoder": "TransformerRanker", "t5": "T5Ranker"}[model_type],
    )
    import rerankers

    assert r["rerankers_version"] == rerankers.__version__ == run.meta["libraries"]["rerankers"] == "0.10.0"
    assert run.meta["model_work"]["model_calls"] == 3 * 3  # 7 passages in batches of 3, per query


def test_cross_encoder_logits_equal_the_torch_backends(candidates, cross_encoder):
    """Independent of the library: the same folder's logits through the torch backend (native BERT)."""
    from toolkit.reranking.backends import load_reranker

    run = ts.rerank(candidates=candidates, model=cross_encoder, backend="rerankers", model_type="cross-encoder")
    torch_backend = load_reranker(cross_encoder, kind="cross-encoder", device="cpu")
    got = _run_scores(run)
    for q, text in QUERIES.items():
        want = torch_backend.score(text, list(PASSAGES.values()))
        np.testing.assert_allclose([got[q, d] for d in PASSAGES], want, rtol=0, atol=1e-5)


def test_t5_scores_are_p_true_at_the_first_decoding_step(candidates, t5):
    """Independent of the library: monoT5's score computed here, one pair at a time (no padding)."""
    import torch
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    run = ts.rerank(candidates=candidates, model=t5, backend="rerankers", model_type="t5", batch_size=2)
    tok = AutoTokenizer.from_pretrained(t5)
    net = T5ForConditionalGeneration.from_pretrained(t5).eval()
    false_id, true_id = tok.convert_tokens_to_ids(["▁false", "▁true"])
    assert false_id != true_id != tok.unk_token_id
    got = _run_scores(run)
    for q, text in QUERIES.items():
        for d, passage in PASSAGES.items():
            ids = tok(f"Query: {text} Document: {passage} Relevant:", return_tensors="pt")
            with torch.no_grad():
                logits = net(**ids, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, -1]
            pair = logits[[false_id, true_id]].double()
            want = float(torch.softmax(pair, dim=0)[1])
            assert got[q, d] == pytest.approx(want, abs=1e-6)


def test_cli_writes_the_run_and_its_sidecar(candidates, t5, tmp_path, cli):
    out = tmp_path / "t5.trec"
    res = cli(
        "rerank",
        "--candidates",
        candidates,
        "--backend",
        "rerankers",
        "--model-type",
        "t5",
        "--model",
        t5,
        "--device",
        "cpu",
        "--batch-size",
        "4",
        "--depth",
        "5",
        "--no-progress",
        "--out",
        out,
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(out)  # the library's notices (its unknown-token WARNING) went to stderr
    assert "does not have known True/False tokens" in res.stderr
    run = read_run(out)
    top5 = list(PASSAGES)[:5]  # --depth 5: the first stage's top five only
    oracle = _library_scores(t5, "t5", batch_size=4, docs=top5)
    assert _run_scores(run) == oracle  # the file holds them exactly
    for q in QUERIES:  # written in the reranked order
        docs = run.frame[run.frame["query_id"] == q]["doc_id"].tolist()
        assert docs == sorted(top5, key=lambda d: -oracle[q, d])
    meta = json.loads(meta_path(out).read_text())
    assert meta["reranker"]["backend"] == "rerankers" and meta["reranker"]["model_type"] == "t5"
    assert meta["reranker"]["model"] == t5 and meta["reranker"]["rerankers_version"] == "0.10.0"
    assert meta["reranker"]["device"] == "cpu" and meta["reranker"]["batch_size"] == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--backend rerankers needs --model-type, one of ('cross-encoder', 't5') (it is missing)"),
        (["--model-type", "t5", "--kind", "bi-encoder"], "--kind bi-encoder does not apply to --backend rerankers"),
        (["--model-type", "t5", "--max-length", "64"], "--max-length does not apply to --backend rerankers"),
        (["--model-type", "t5", "--precision", "tf32"], "--backend rerankers runs fp32, fp16 or bf16"),
    ],
)
def test_cli_bad_settings_are_one_error(args, message, candidates, t5, tmp_path, cli):
    out = tmp_path / "o.trec"
    res = cli("rerank", "--candidates", candidates, "--model", t5, "--backend", "rerankers", *args, "--out", out)
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]
    assert not out.exists()


def test_model_type_needs_the_rerankers_backend(candidates, cross_encoder, tmp_path, cli):
    res = cli(
        "rerank", "--candidates", candidates, "--model", cross_encoder, "--model-type", "t5", "--out", tmp_path / "o"
    )
    assert res.exit_code == 1 and "Error: --model-type goes with --backend rerankers" in res.stderr
    with pytest.raises(ConfigError, match="--model-type goes with --backend rerankers"):
        RerankerSpec(cross_encoder, model_type="t5").resolved()


def test_a_missing_extra_is_one_error_naming_it(monkeypatch, candidates, t5, tmp_path, cli):
    import toolkit.extras

    monkeypatch.setattr(
        toolkit.extras, "EXTRAS", MappingProxyType({**toolkit.extras.EXTRAS, "rerankers": ("no_such_module_xyz",)})
    )
    res = cli(
        "rerank", "--candidates", candidates, "--model", t5, "--backend", "rerankers", "--model-type", "t5",
        "--out", tmp_path / "o.trec",
    )  # fmt: skip
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: twostage rerank --backend rerankers needs the [rerankers]")
    assert "pip install 'twostage[rerankers]'" in lines[0]
    with pytest.raises(ConfigError, match=r"pip install 'twostage\[rerankers\]'"):  # the library path too
        ts.rerank(candidates=candidates, model=t5, backend="rerankers", model_type="t5")


def test_a_model_that_does_not_load_is_one_error(candidates, tmp_path, cli):
    (tmp_path / "empty").mkdir()
    res = cli(
        "rerank", "--candidates", candidates, "--model", tmp_path / "empty", "--backend", "rerankers",
        "--model-type", "cross-encoder", "--device", "cpu", "--out", tmp_path / "o.trec",
    )  # fmt: skip
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith(f"Error: cannot load model '{tmp_path / 'empty'}'")
    assert "Traceback" not in res.output


def test_a_multi_label_model_is_refused(candidates, tmp_path):
    """The library's cross-encoder reads one logit; a two-label head would give lists, not scores."""
    import torch
    from transformers import BertForSequenceClassification

    folder = save_tiny_bert(tmp_path / "two", WORDS, seed=1, classifier=True)
    net = BertForSequenceClassification.from_pretrained(folder, num_labels=2, ignore_mismatched_sizes=True)
    torch.manual_seed(0)
    net.save_pretrained(folder)
    with pytest.raises(ConfigError, match="gives 2 scores per passage; --model-type cross-encoder needs a model"):
        ts.rerank(candidates=candidates, model=str(folder), backend="rerankers", model_type="cross-encoder")


def test_the_table_and_the_cli_choices():
    from toolkit.cli.rerank import rerank
    from toolkit.reranking import rerankers_backend

    assert set(BACKENDS["rerankers"].builders) == set(rerankers_backend.MODEL_TYPES) == {"cross-encoder", "t5"}
    params = {p.name: p for p in rerank.params}
    assert list(params["model_type"].type.choices) == list(rerankers_backend.MODEL_TYPES)
    assert params["model_type"].default is None


def test_the_librarys_colbert_does_not_load_under_transformers_5(tmp_path):
    """Why ``colbert`` is not offered (docs/reranking.md): rerankers 0.10.0's ColBERTModel calls ``init_weights``
    in its constructor, before transformers 5 has set what that needs. When this test fails, the library or
    transformers fixed it: add colbert to ``MODEL_TYPES`` with a test like the two above."""
    import transformers
    from rerankers import Reranker

    assert transformers.__version__.startswith("5.")
    folder = save_tiny_bert(tmp_path / "colbert", [*WORDS, "[unused0]", "[unused1]"], seed=0)
    with pytest.raises(AttributeError, match="all_tied_weights_keys"):
        Reranker(str(folder), model_type="colbert", verbose=0, device="cpu")
