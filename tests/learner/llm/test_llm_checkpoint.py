"""LLM checkpoints use the shared format: ``load_checkpoint`` reads them, HF loads them too."""

from __future__ import annotations

import torch

from learner.checkpoint import FORMAT, load_checkpoint
from learner.llm.model import load_model, save_model


def test_llm_checkpoint_is_the_shared_format_with_tokenizer_beside(tiny_model, tiny_tok, tmp_path):
    path = save_model(
        tiny_model,
        tiny_tok,
        tmp_path / "ckpt",
        iteration=3,
        weight_version=4,
        config={"runner": "reasoning"},
        extra={"eval_path": "x.jsonl"},
    )
    ckpt = load_checkpoint(path)
    assert ckpt.meta["format"] == FORMAT and ckpt.meta["runner"] == "reasoning"
    assert (ckpt.iteration, ckpt.weight_version, ckpt.meta["eval_path"]) == (3, 4, "x.jsonl")
    assert (path / "config.json").is_file() and (path / "tokenizer.json").is_file()
    model, tok = load_model(path)
    want = tiny_model.state_dict()
    assert all(torch.equal(v, want[k]) for k, v in model.state_dict().items())
    assert (
        model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    )  # still tied
    assert tok.encode("1+2=") == tiny_tok.encode("1+2=")
