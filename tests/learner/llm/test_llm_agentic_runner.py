"""The reasoning runner with agent.tools: a few agentic steps end to end, and held-out evaluation
rules."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from learner.runners.reasoning import ReasoningConfig, run
from rlinf_contracts.config import ConfigError, from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]
TINY = [
    "sft.steps=4",
    "sft.batch_size=16",
    "sft.eval_every=2",
    "train.steps=2",
    "train.prompts_per_step=4",
    "rollout.n=4",
    "train.eval_every=1",
    "data.eval_limit=6",
    "data.toolmath.easy_additions=200",
]


def _rows(result: dict) -> list[dict[str, str]]:
    with open(result["csv"]) as f:
        return list(csv.DictReader(f))


def test_agentic_steps_end_to_end(tmp_path):
    cfg = from_dict(
        ReasoningConfig,
        load_config(ROOT / "configs/llm_agentic_tools.yaml", [*TINY, f"train.out_dir={tmp_path}"]),
    )
    result = run(cfg, None)
    rows = _rows(result)
    sft = [r for r in rows if r["phase"] == "sft"]
    rl = [r for r in rows if r["phase"] == "rl"]
    assert [float(r["sft/step"]) for r in sft] == [
        2.0,
        4.0,
    ]  # the SFT-only curve, evaluated every 2 steps
    assert [int(r["step"]) for r in rl] == [1, 2]
    for r in rl:  # tool statistics are logged for the train samples and the held-out eval
        assert 0.0 <= float(r["rollout/tool_rate"]) <= 1.0 and float(r["rollout/turns"]) >= 1.0
        assert 0.0 <= float(r["eval/tool_rate"]) <= 1.0
    assert result["actor_digest"] != result["sft_digest"] and result["rollout_digests"] == [
        result["actor_digest"]
    ]
    assert result["eval_source"] == "heldout-file" and Path(result["png"]).is_file()
    held = {
        json.loads(x)["prompt"] for x in (tmp_path / "data/heldout.jsonl").read_text().splitlines()
    }
    seen = {
        json.loads(x)["prompt"]
        for f in ("train.jsonl", "demos.jsonl")
        for x in (tmp_path / "data" / f).read_text().splitlines()
    }
    assert held and not held & seen  # held-out hard problems appear in neither SFT nor RL data


def test_single_turn_runner_is_unchanged_without_tools(tmp_path):
    raw = load_config(
        ROOT / "configs/llm_grpo_arith.yaml",
        [
            "sft.steps=2",
            "sft.batch_size=8",
            "train.steps=1",
            "train.prompts_per_step=2",
            "rollout.n=2",
            "data.eval_limit=4",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={tmp_path}",
            "train.save_checkpoint=false",
        ],
    )
    result = run(from_dict(ReasoningConfig, raw), None)
    rl = [r for r in _rows(result) if r["phase"] == "rl"]
    assert "rollout/tool_rate" not in rl[0] and result["eval_source"] == "heldout-file"


def test_evaluation_needs_a_held_out_set(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text(
        "".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(20))
    )
    base = {
        "runner": "reasoning",
        "data": {"train_path": str(train)},
        "sft": {"steps": 1},
        "train": {"out_dir": str(tmp_path / "run"), "driver": "inline"},
    }
    with pytest.raises(ConfigError, match="data.eval_path is not set"):
        from_dict(ReasoningConfig, base)
    with pytest.raises(ConfigError, match="both set"):
        from_dict(
            ReasoningConfig,
            {
                **base,
                "data": {"train_path": str(train), "eval_path": str(train), "eval_split": 0.1},
            },
        )
    from learner.runners.reasoning_io import prepare_data

    cfg = from_dict(
        ReasoningConfig, {**base, "data": {"train_path": str(train), "eval_split": 0.2}}
    )
    data = prepare_data(cfg, tmp_path / "run")
    assert (
        len(data.eval) == 4
        and len(data.train) == 16
        and not {e.prompt for e in data.eval} & {e.prompt for e in data.train}
    )
    assert data.eval_source.startswith("split-from-train")


def test_agentic_gpu_config_validates_with_the_same_dataclass():
    text = (ROOT / "configs/llm_agentic_qwen_gpu.yaml").read_text()
    cfg = from_dict(ReasoningConfig, load_config(ROOT / "configs/llm_agentic_qwen_gpu.yaml"))
    assert "not run here" in text.lower()
    assert cfg.rollout.backend == "vllm" and "Qwen" in (cfg.model.path or "")
    assert cfg.agent.tools == ["calc", "python", "search"] and cfg.agent.max_turns == 4
    assert cfg.agent.tool_options["search"]["corpus_path"] and cfg.reward.weights == {"math": 1.0}
    from learner.llm.agentic.protocol import stop_strings
    from learner.llm.rollout import SamplingParams
    from learner.llm.rollout.vllm_backend import vllm_sampling_kwargs

    kw = vllm_sampling_kwargs(
        SamplingParams(
            max_new_tokens=cfg.rollout.max_new_tokens, stop=stop_strings(cfg.agent.tools)
        )
    )
    assert kw["stop"] == ["</calc>", "</python>", "</search>"] and kw["max_tokens"] == 1024
    from learner.placement import parse_placement

    assert not parse_placement(dict(cfg.placement), num_slots=8).shares_slots("rollout", "actor")


@pytest.mark.ray
def test_agentic_steps_on_disaggregated_worker_groups(ray_cluster, tmp_path):
    raw = load_config(
        ROOT / "configs/llm_agentic_tools.yaml",
        [*TINY, f"train.out_dir={tmp_path}", "train.driver=workers", "train.timeout_s=120"],
    )
    raw["placement"] = {
        "rollout": "0",
        "reward": "1",
        "actor": "2",
    }  # each rollout worker hosts its ToolWorker
    result = run(from_dict(ReasoningConfig, raw), ray_cluster)
    rl = [r for r in _rows(result) if r["phase"] == "rl"]
    assert result["disaggregated"] and [int(r["step"]) for r in rl] == [1, 2]
    assert all(float(r["rollout/turns"]) >= 1.0 for r in rl)
    assert set(result["rollout_digests"]) == {result["actor_digest"]}
