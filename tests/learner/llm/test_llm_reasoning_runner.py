"""Two-step runs of the reasoning runner: collocated and disaggregated worker groups, inline."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from learner.runners.reasoning import ReasoningConfig, run
from rlinf_contracts.config import ConfigError, from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]


def _cfg(tmp_path: Path, placement: dict[str, str], driver: str = "workers") -> ReasoningConfig:
    raw = load_config(
        ROOT / "configs/llm_grpo_arith.yaml",
        [
            "sft.steps=3",
            "sft.batch_size=16",
            "train.steps=2",
            "train.prompts_per_step=4",
            "rollout.n=4",
            "rollout.micro_batch_prompts=2",
            "train.eval_every=1",
            "data.eval_limit=8",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={tmp_path}",
            f"train.driver={driver}",
            "train.timeout_s=120",
        ],
    )
    raw["placement"] = placement
    return from_dict(ReasoningConfig, raw)


def _rows(result: dict) -> list[dict[str, str]]:
    with open(result["csv"]) as f:
        return list(csv.DictReader(f))


def _check_common(result: dict) -> list[dict[str, str]]:
    rows = _rows(result)
    rl = [r for r in rows if r["phase"] == "rl"]
    assert [int(r["step"]) for r in rl] == [1, 2]
    # parameters changed: SFT digest differs from the final one, and RL published 2 versions
    assert result["actor_digest"] != result["sft_digest"]
    assert [float(r["weight_version"]) for r in rl] == [
        result["actor_version"] - 1,
        result["actor_version"],
    ]
    # rollout weights follow the actor's: same version, bit-identical parameters after the last sync
    assert result["rollout_versions"] == [result["actor_version"]] * len(result["rollout_versions"])
    assert set(result["rollout_digests"]) == {result["actor_digest"]}
    assert Path(result["png"]).is_file() and Path(result["checkpoint"], "config.json").is_file()
    return rl


@pytest.mark.ray
def test_two_steps_collocated(ray_cluster, tmp_path):
    result = run(_cfg(tmp_path, {"rollout,reward,actor": "0"}), ray_cluster)
    assert result["mode"] == "collocated" and not result["disaggregated"]
    rl = _check_common(result)
    assert [float(r["rollout/staleness"]) for r in rl] == [0.0, 0.0]  # on-policy


@pytest.mark.ray
def test_two_steps_disaggregated(ray_cluster, tmp_path):
    result = run(_cfg(tmp_path, {"rollout": "0-1", "reward": "2", "actor": "3"}), ray_cluster)
    assert result["mode"] == "disaggregated" and result["disaggregated"]
    assert len(result["rollout_versions"]) == 2  # two rollout ranks, both synced
    rl = _check_common(result)
    assert all(0.0 <= float(r["rollout/staleness"]) <= 1.0 for r in rl)  # staleness bound 1


def test_inline_driver_two_steps(tmp_path):
    result = run(_cfg(tmp_path, {"rollout,reward,actor": "0"}, driver="inline"), None)
    rl = _check_common(result)
    assert len(rl) == 2 and result["driver"] == "inline"


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="placement names unknown component"):
        _cfg(tmp_path, {"rollout,reward,actor": "0", "critic": "1"})
    with pytest.raises(ConfigError, match="placement must place"):
        _cfg(tmp_path, {"rollout,actor": "0"})
    with pytest.raises(ConfigError, match="rollout.temperature"):
        from_dict(
            ReasoningConfig,
            {**load_config(ROOT / "configs/llm_grpo_arith.yaml"), "rollout": {"temperature": 0.0}},
        )


def test_gpu_config_validates_with_the_same_dataclass():
    cfg = from_dict(ReasoningConfig, load_config(ROOT / "configs/llm_grpo_math_gpu.yaml"))
    assert cfg.rollout.backend in ("vllm", "sglang")
    assert cfg.model.path and "Qwen" in cfg.model.path
    assert "not run here" in (ROOT / "configs/llm_grpo_math_gpu.yaml").read_text().lower()
    from learner.placement import parse_placement

    placement = parse_placement(dict(cfg.placement), num_slots=8)
    assert placement["actor"].process_slots == [[4, 5, 6, 7]]
    assert not placement.shares_slots("rollout", "actor")  # runs disaggregated


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.adv=dr_grpo", "algorithm.agg_mode=seq-mean-token-sum-norm"],  # Dr.GRPO
        [
            "algorithm.clip_high=0.28",
            "algorithm.dynamic_sampling=true",
            "algorithm.overlong_buffer=2",
        ],  # DAPO
        [
            "algorithm.adv=reinforce_pp",
            "algorithm.kl_coef=0.1",
            "algorithm.kl_in_reward=true",
        ],  # REINFORCE++
        [
            "algorithm.kl_coef=0.1",
            "actor.ppo_epochs=2",
            "actor.mini_batches=2",
            "actor.micro_batch=4",
        ],
        ["model.lora_rank=4"],  # LoRA (peft): the rollout receives merged weights
    ],
    ids=["dr_grpo", "dapo", "reinforce_pp", "grpo_kl_ppo_epochs", "lora"],
)
def test_algorithm_variants_train_inline(tmp_path, overrides):
    raw = load_config(
        ROOT / "configs/llm_grpo_arith.yaml",
        [
            "sft.steps=2",
            "sft.batch_size=8",
            "train.steps=1",
            "train.prompts_per_step=4",
            "rollout.n=4",
            "train.eval_every=1",
            "data.eval_limit=4",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={tmp_path}",
            "train.save_checkpoint=false",
            *overrides,
        ],
    )
    result = run(from_dict(ReasoningConfig, raw), None)
    rl = [r for r in _rows(result) if r["phase"] == "rl"]
    assert len(rl) == 1 and result["rollout_digests"] == [result["actor_digest"]]
    if float(rl[0]["rollout/kept_frac"]) > 0:  # DAPO may drop every group of a 1-step run
        assert result["actor_digest"] != result["sft_digest"]
        assert float(rl[0]["actor/loss"]) == float(rl[0]["actor/loss"])  # not NaN


@pytest.mark.ray
def test_disaggregated_early_stop_drains_the_next_step(ray_cluster, tmp_path):
    """Step 2's generation and scoring start while step 1 trains; stopping at step 1 (accuracy
    target met) must drain them and still end with every rank on the actor's final weights."""
    cfg = _cfg(tmp_path, {"rollout,reward": "0", "actor": "1"})
    cfg.train.steps, cfg.train.target_accuracy = 3, 0.0
    result = run(cfg, ray_cluster)
    assert [int(r["step"]) for r in _rows(result) if r["phase"] == "rl"] == [1]
    assert set(result["rollout_digests"]) == {result["actor_digest"]}


@pytest.mark.ray
def test_resume_continues_steps_versions_and_curve(ray_cluster, tmp_path):
    """Two RL steps on worker groups with two data-parallel actor ranks (a KL term, so the
    reference comes back too), then ``train.resume`` into the same out_dir to step 3: the curve
    goes on from step 2, weight versions continue the checkpoint's, and every rollout rank ends
    on the actor's weights."""
    placement = {"rollout,reward": "0", "actor": "1-2"}
    cfg = _cfg(tmp_path, placement)
    cfg.algorithm.kl_coef = 0.05
    first = run(cfg, ray_cluster)
    assert first["rl_steps"] == 2 and Path(first["checkpoint"], "train_state.pt").is_file()
    cfg = _cfg(tmp_path, placement)
    cfg.algorithm.kl_coef, cfg.train.steps, cfg.train.resume = 0.05, 3, str(tmp_path)
    result = run(cfg, ray_cluster)
    rows = _rows(result)
    assert [(r["phase"], int(float(r["step"]))) for r in rows] == [
        ("init", -1),
        ("sft", 0),
        ("rl", 1),
        ("rl", 2),
        ("rl", 3),
    ]
    assert (
        float(rows[-1]["weight_version"]) == first["actor_version"] + 1 == result["actor_version"]
    )
    assert float(rows[-1]["elapsed_s"]) > float(rows[-2]["elapsed_s"])  # time goes on
    assert result["rl_steps"] == 3 and Path(result["checkpoint"]).name == "iter_000003"
    assert set(result["rollout_digests"]) == {result["actor_digest"]}
    cfg.train.steps = 3
    cfg.train.resume = result["checkpoint"]
    with pytest.raises(ValueError, match="is at RL step 3; set train.steps above it"):
        run(cfg, ray_cluster)


def test_resume_refuses_lora_and_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="'train.resume' with model.lora_rank"):
        from_dict(
            ReasoningConfig,
            load_config(
                ROOT / "configs/llm_grpo_arith.yaml",
                ["model.lora_rank=4", f"train.resume={tmp_path}"],
            ),
        )
