"""Synthetic arithmetic split, noisy demonstrations, tokenizer, prompt files."""

from __future__ import annotations

import pytest

from learner.llm.arithmetic import (
    ArithmeticConfig,
    arithmetic_split,
    noisy_demonstrations,
    write_arithmetic_data,
)
from learner.llm.datasets import PromptSampler, apply_template, load_prompts
from learner.llm.rewards import REWARDS
from rlinf_contracts.config import ConfigError, from_dict


def test_heldout_pairs_never_in_train():
    cfg = ArithmeticConfig(max_operand=30, heldout_frac=0.25)
    train, held = arithmetic_split(cfg)
    assert len(train) + len(held) == 31 * 31 and len(held) == int(31 * 31 * 0.25)
    assert not {e.prompt for e in train} & {e.prompt for e in held}
    assert all(e.prompt.endswith("=") and len(e.prompt) == 6 for e in train)  # zero-padded "07+45="


def test_noisy_demos_have_the_configured_noise():
    cfg = ArithmeticConfig(correct_frac=0.3, random_frac=0.1)
    train, _ = arithmetic_split(cfg)
    demos = noisy_demonstrations(train, cfg)
    ok = [REWARDS.get("exact_match")(d["response"], d["answer"]) for d in demos]
    off_by_one = [int(d["response"]) == int(d["answer"]) + 1 for d in demos]
    assert sum(ok) / len(ok) == pytest.approx(0.3, abs=0.02)
    assert sum(off_by_one) / len(demos) == pytest.approx(0.6, abs=0.02)
    assert all(len(d["response"]) == 3 for d in demos)  # "052": exact match still reads 52


def test_arith_config_validation():
    with pytest.raises(ConfigError, match="heldout_frac"):
        from_dict(ArithmeticConfig, {"heldout_frac": 1.5})
    with pytest.raises(ConfigError, match="correct_frac"):
        from_dict(ArithmeticConfig, {"correct_frac": 0.8, "random_frac": 0.5})


def test_tokenizer_keeps_digits_apart(tiny_tok):
    assert tiny_tok.tokenize("12+45=057") == ["1", "2", "+", "4", "5", "=", "0", "5", "7"]
    ids = tiny_tok("12+45=", add_special_tokens=False).input_ids
    assert tiny_tok.decode(ids) == "12+45="
    assert tiny_tok.padding_side == "left" and tiny_tok.pad_token_id != tiny_tok.eos_token_id


def test_write_and_load_prompt_files(tmp_path):
    paths = write_arithmetic_data(tmp_path, ArithmeticConfig(max_operand=9))
    train = load_prompts(paths["train"])
    assert len(train) == 80
    for e in train:
        a, b = e.prompt[:-1].split("+")
        assert e.answer == str(int(a) + int(b))
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.table({"q": ["1+1="], "a": ["2"]}), tmp_path / "x.parquet")
    assert load_prompts(tmp_path / "x.parquet", "q", "a")[0].answer == "2"
    with pytest.raises(KeyError, match="data.prompt_key"):
        load_prompts(tmp_path / "x.parquet")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "answer": "b"}\n{oops\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_prompts(bad)


def test_chat_template_and_sampler(tiny_tok):
    text = apply_template(tiny_tok, "1+1=", "chat", system="be brief")
    assert text == "<|system|>be brief\n<|user|>1+1=\n<|assistant|>"
    assert apply_template(tiny_tok, "1+1=", "raw") == "1+1="
    from learner.llm.datasets import PromptExample

    s = PromptSampler([PromptExample(str(i), str(i)) for i in range(5)], seed=0)
    first, second = s.next_batch(5), s.next_batch(5)
    assert sorted(e.prompt for e in first) == sorted(e.prompt for e in second) == list("01234")
