"""``ReasoningConfig``: the typed config of the LLM reasoning runner (``runner: reasoning``).

One dataclass tree for the CPU demo and a GPU run: the placement string decides collocated
vs disaggregated, ``rollout.backend`` picks hf / vllm / sglang, ``algorithm`` picks GRPO,
Dr.GRPO, DAPO, REINFORCE++ or PPO with a critic (``adv: gae`` + ``algorithm.critic``) from the
shared library. ``algorithm``, ``actor`` and ``train`` extend the sections of
:mod:`learner.sections` that the embodied runner extends too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from learner.llm.actor import LLMActorConfig
from learner.llm.agentic.config import AgentConfig
from learner.llm.algo import LLMAlgorithmConfig
from learner.llm.arithmetic import ArithmeticConfig
from learner.llm.model import LLMModelConfig
from learner.llm.toolmath import ToolMathConfig
from learner.sections import RunConfig, TrainLoopConfig
from rlinf_contracts.config import ConfigError

__all__ = [
    "ReasoningConfig",
    "DataConfig",
    "ReasoningRolloutConfig",
    "RewardConfig",
    "ReasoningSFTConfig",
    "ReasoningTrainConfig",
    "COMPONENTS",
]

COMPONENTS = ["rollout", "reward", "actor"]


@dataclass
class DataConfig:
    synthetic: Literal["none", "arithmetic", "toolmath"] = field(
        default="none",
        metadata={"help": "generate a synthetic task into <out_dir>/data instead of reading files"},
    )
    arithmetic: ArithmeticConfig = field(default_factory=ArithmeticConfig)
    toolmath: ToolMathConfig = field(default_factory=ToolMathConfig)
    train_path: str | None = field(
        default=None, metadata={"help": "jsonl / parquet of RL prompts + answers"}
    )
    eval_path: str | None = field(
        default=None, metadata={"help": "jsonl / parquet for held-out accuracy"}
    )
    sft_path: str | None = field(
        default=None,
        metadata={"help": "jsonl of {prompt, response} demonstrations for SFT warm-up"},
    )
    prompt_key: str = field(default="prompt", metadata={"help": "prompt column"})
    answer_key: str = field(default="answer", metadata={"help": "reference answer column"})
    prompt_format: Literal["raw", "chat"] = field(
        default="raw", metadata={"help": "raw text or the tokenizer's chat template"}
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "system message for chat prompts"}
    )
    eval_split: float = field(
        default=0.0,
        metadata={
            "help": (
                "no eval_path: hold out this fraction of the training prompts (removed from "
                "training) as an eval set labelled 'split-from-train'"
            )
        },
    )
    eval_limit: int = field(default=400, metadata={"help": "max eval prompts (0 = all)"})
    tokenizer_vocab: int = field(
        default=96, metadata={"help": "vocab size of a locally trained tokenizer (tiny model only)"}
    )

    def validate(self) -> None:
        if self.synthetic == "none" and self.train_path is None:
            raise ConfigError(
                "data.train_path is required unless data.synthetic is set (e.g. arithmetic)"
            )
        if not 0.0 <= self.eval_split < 1.0:
            raise ConfigError(f"data.eval_split must be in [0, 1), got {self.eval_split}")
        if self.synthetic == "none" and self.eval_path is None and self.eval_split == 0.0:
            raise ConfigError(
                "data.eval_path is not set: there is no held-out set to evaluate on. Set "
                "data.eval_path (a jsonl/parquet never trained on), or data.eval_split=0.1 to hold "
                "out 10% of the training prompts (removed from training; reported as "
                "'split-from-train')"
            )
        if self.eval_path is not None and self.eval_split > 0:
            raise ConfigError("data.eval_path and data.eval_split are both set; keep one")


@dataclass
class ReasoningRolloutConfig:
    backend: Literal["hf", "vllm", "sglang"] = field(
        default="hf", metadata={"help": "generation engine"}
    )
    n: int = field(default=8, metadata={"help": "samples per prompt (group size)"})
    max_new_tokens: int = field(
        default=8, metadata={"help": "response length limit (per model turn with agent.tools)"}
    )
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling"})
    top_k: int = field(default=0, metadata={"help": "top-k (0 = off)"})
    micro_batch_prompts: int = field(
        default=0,
        metadata={
            "help": "prompts per rollout micro-batch streamed to reward/actor (0 = whole step)"
        },
    )
    gpu_memory_utilization: float = field(
        default=0.5, metadata={"help": "vllm / sglang memory fraction"}
    )
    tensor_parallel: int = field(default=1, metadata={"help": "vllm / sglang tensor parallel size"})

    def validate(self) -> None:
        if self.n < 1 or self.max_new_tokens < 1:
            raise ConfigError(
                f"rollout.n and rollout.max_new_tokens must be >= 1, got {self.n}, "
                f"{self.max_new_tokens}"
            )
        if self.temperature <= 0:
            raise ConfigError(
                f"rollout.temperature must be > 0 for RL sampling, got {self.temperature}"
            )


@dataclass
class RewardConfig:
    weights: dict[str, float] = field(
        default_factory=lambda: {"exact_match": 1.0},
        metadata={"help": "reward name -> weight (learner.llm.rewards.REWARDS)"},
    )

    def validate(self) -> None:
        from learner.llm.rewards import REWARDS

        for name in self.weights:
            if name not in REWARDS:
                raise ConfigError(
                    f"reward.weights key {name!r} is unknown; choose from {REWARDS.names()}"
                )


@dataclass
class ReasoningSFTConfig:
    steps: int = field(default=0, metadata={"help": "SFT warm-up steps before RL (0 = none)"})
    batch_size: int = field(default=128, metadata={"help": "demonstrations per SFT step"})
    lr: float = field(default=3e-3, metadata={"help": "SFT learning rate"})
    eval_every: int = field(
        default=0,
        metadata={
            "help": (
                "held-out eval every N SFT steps (0 = only after SFT): the curve of an SFT-only "
                "baseline"
            )
        },
    )


@dataclass
class ReasoningTrainConfig(TrainLoopConfig):
    steps: int = field(default=50, metadata={"help": "RL steps"})
    prompts_per_step: int = field(
        default=32, metadata={"help": "prompts per RL step (x rollout.n samples)"}
    )
    eval_every: int = field(
        default=5, metadata={"help": "held-out greedy eval every N steps (0 = only at the end)"}
    )
    target_accuracy: float | None = field(
        default=None, metadata={"help": "stop early once held-out accuracy reaches this"}
    )
    driver: Literal["workers", "inline"] = field(
        default="workers",
        metadata={
            "help": (
                "workers: Ray worker groups + channels per placement; inline: the same components "
                "in this process"
            )
        },
    )
    torch_threads: int = field(
        default=1,
        metadata={
            "help": "torch threads of the inline driver (1 is fastest on a shared 2-core box)"
        },
    )
    seed: int = field(default=0, metadata={"help": "prompt order / sampling seed"})
    out_dir: str = field(
        default="runs/reasoning", metadata={"help": "curve CSV/PNG, metrics, checkpoint"}
    )
    save_checkpoint: bool = field(
        default=True,
        metadata={"help": "save the final model to <out_dir>/checkpoints/iter_<steps>"},
    )
    timeout_s: float = field(default=600.0, metadata={"help": "max wait for any worker call"})
    resume: str | None = field(
        default=None,
        metadata={
            "help": (
                "checkpoint (or run dir; true = train.out_dir) of this config to continue RL "
                "from: weights, optimiser (sharded under fsdp), KL reference and step; no SFT"
            )
        },
    )


@dataclass
class ReasoningConfig(RunConfig):
    """The LLM reasoning runner (``runner: reasoning``): RL on prompts, rewards from verifiers."""

    runner: str = field(default="reasoning", metadata={"help": "runner name"})
    name: str = field(default="reasoning", metadata={"help": "run name (logs)"})
    placement: dict[str, str] | str = field(
        default_factory=lambda: {"rollout,reward,actor": "0"},
        metadata={
            "help": (
                "components rollout / reward / actor -> slots (learner.placement grammar), or "
                "'auto': the driver and placement the cost model predicts fastest "
                "(learner.scheduling)"
            )
        },
    )
    data: DataConfig = field(default_factory=DataConfig)
    model: LLMModelConfig = field(default_factory=LLMModelConfig)
    rollout: ReasoningRolloutConfig = field(default_factory=ReasoningRolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algorithm: LLMAlgorithmConfig = field(default_factory=LLMAlgorithmConfig)
    actor: LLMActorConfig = field(default_factory=LLMActorConfig)
    sft: ReasoningSFTConfig = field(default_factory=ReasoningSFTConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    train: ReasoningTrainConfig = field(default_factory=ReasoningTrainConfig)

    def validate(self) -> None:
        from learner.placement import check_placement_value, is_auto

        # 'auto' is only checked here; learner.scheduling.auto.plan resolves it after validation
        check_placement_value(self.placement)
        if self.runner != "reasoning":
            raise ConfigError(
                f"key 'runner' must be 'reasoning' for ReasoningConfig, got {self.runner!r}"
            )
        placed = {c.strip() for key in self.placement for c in key.split(",")}
        if is_auto(self.placement):  # all of them, wherever the planning step puts them
            placed = set(COMPONENTS)
        unknown = placed - set(COMPONENTS) - {"ref"}
        if unknown:
            raise ConfigError(
                f"placement names unknown component(s) {sorted(unknown)}; use {COMPONENTS}"
            )
        missing = set(COMPONENTS) - placed
        if missing and self.train.driver == "workers":
            raise ConfigError(
                f"placement must place {sorted(missing)} (e.g. placement: "
                "{'rollout,reward,actor': all})"
            )
        if self.model.path is None and self.data.synthetic == "none" and self.sft.steps == 0:
            raise ConfigError(
                "model.path is null (a tiny random model) but there is no SFT warm-up; "
                "set model.path or sft.steps"
            )
        if self.data.synthetic == "toolmath" and "calc" not in self.agent.tools:
            raise ConfigError(
                "data.synthetic=toolmath demonstrates the calculator: agent.tools must include "
                "'calc' (use agent.disable_execution=true for the no-tool ablation)"
            )
        if self.algorithm.kl_coef > 0 and self.rollout.backend != "hf" and self.model.lora_rank > 0:
            raise ConfigError(
                "algorithm.kl_coef > 0 with LoRA on vllm/sglang is not supported; set "
                "model.lora_rank=0"
            )
        if self.train.resume and self.model.lora_rank > 0:
            raise ConfigError(
                "key 'train.resume' with model.lora_rank > 0 is not supported: the checkpoint "
                "holds the merged weights; start a new run from them with model.path"
            )
        if self.actor.strategy == "fsdp" and self.model.lora_rank > 0:
            raise ConfigError(
                "key 'actor.strategy'='fsdp' with model.lora_rank > 0 is not supported: LoRA "
                "already keeps the trained state small; use actor.strategy=ddp"
            )
        if self.actor.strategy == "fsdp" and self.algorithm.estimator.needs_critic:
            raise ConfigError(
                f"key 'actor.strategy'='fsdp' with algorithm.adv={self.algorithm.adv!r} is not "
                "supported yet (the critic trains unsharded); use actor.strategy=ddp"
            )
