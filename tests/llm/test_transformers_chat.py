"""The transformers judge on a tiny causal LM built here from a config (no download): a random one (its
answers are recorded and counted as parse failures, never labels), and one whose weights force the answer
token "##final score: 2" (every pair gets label 2), batched, through ``twostage judge --model PATH``."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner
from judge_server import write_candidates
from needs import required

import toolkit as ts
from toolkit.cli import main

required("transformers", "the local LLM backend runs on transformers (the [rerank] extra)")
required("torch", "the local LLM backend runs on torch (the [rerank] extra)")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ANSWER = "##final score: 2"


def _tiny_model(folder, forced: bool) -> str:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = ["[UNK]", "[PAD]", "<eos>", "query", "passage", "the", "a", "is", "of", "doc", "text", "topic"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="<eos>")
    fast.add_tokens([ANSWER])
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(fast),
        n_positions=512,
        n_embd=16,
        n_layer=1,
        n_head=2,
        tie_word_embeddings=False,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=1,
    )
    model = GPT2LMHeadModel(config).eval()
    if forced:  # every hidden state becomes the same vector, and only the answer token's logit is positive
        with torch.no_grad():
            model.transformer.ln_f.weight.zero_()
            model.transformer.ln_f.bias.fill_(1.0)
            model.lm_head.weight.zero_()
            model.lm_head.weight[fast.convert_tokens_to_ids(ANSWER)] = 1.0
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def _template(tmp_path) -> str:
    t = tmp_path / "short.md"
    t.write_text(
        "---\nlabels: [0, 1, 2, 3]\nanswer: '##final score:\\s*(\\d+)'\nmax_tokens: 2\n---\nquery {query} passage {passage}\n"
    )
    return str(t)


def _candidates(tmp_path) -> str:
    queries = {
        f"q{q}": [(f"d{q}{i}", f"the text of doc {i} topic {q}" * (1 + i % 3)) for i in range(4)] for q in range(3)
    }
    return write_candidates(tmp_path / "cand.json", queries)


def test_forced_answer_model_labels_every_pair_batched(tmp_path):
    model = _tiny_model(tmp_path / "forced", forced=True)
    out = tmp_path / "j.qrels"
    res = CliRunner().invoke(
        main,
        [
            "judge",
            "--candidates",
            _candidates(tmp_path),
            "--depth",
            "3",
            "--model",
            model,
            "--device",
            "cpu",
            "--batch-size",
            "4",
            "--prompt",
            _template(tmp_path),
            "--cache",
            str(tmp_path / "cache"),
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert len(lines) == 9 and all(line.endswith(" 2") for line in lines)
    meta = json.loads((tmp_path / "j.qrels.meta.json").read_text())
    assert meta["judge"]["backend"] == "transformers" and meta["judge"]["batch_size"] == 4
    assert all(ANSWER in r["response"] for r in meta["records"])
    assert meta["counts"]["labels"] == 9 and meta["counts"]["asked"] == 9
    again = ts.judge(
        candidates=_candidates(tmp_path),
        depth=3,
        model=model,
        device="cpu",
        prompt=_template(tmp_path),
        cache=tmp_path / "cache",
    )
    assert again.counts["from_cache"] == 9 and again.counts["asked"] == 0


def test_random_model_answers_are_recorded_as_parse_failures(tmp_path):
    model = _tiny_model(tmp_path / "random", forced=False)
    j = ts.judge(
        candidates=_candidates(tmp_path),
        depth=2,
        model=model,
        device="cpu",
        batch_size=3,
        prompt=_template(tmp_path),
        cache=False,
    )
    assert j.counts["pairs"] == 6 and j.counts["answered"] == 6
    # a random model may by chance emit the answer token; each record is consistent with its parse either way
    for r in j.records:
        assert isinstance(r["response"], str)
        assert (r["label"] is None) == r["parse_failed"]
        assert r["label"] is None or ANSWER in r["response"]
    assert j.counts["parse_failures"] + j.counts["labels"] == 6
    assert len(j.qrels) == j.counts["labels"]
