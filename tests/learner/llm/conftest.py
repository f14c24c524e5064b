"""Tiny tokenizer + model shared by the LLM tests (built once per session, ~1 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_tok():
    from learner.llm.arithmetic import ArithmeticConfig, tokenizer_corpus
    from learner.llm.tokenizer import train_tokenizer

    return train_tokenizer(tokenizer_corpus(ArithmeticConfig(max_operand=20)))


@pytest.fixture
def tiny_model(tiny_tok):
    from learner.llm.model import LLMModelConfig, build_model

    return build_model(
        LLMModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, seed=3),
        tiny_tok,
    )
