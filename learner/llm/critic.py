"""PPO-with-a-critic's critic (``algorithm.adv: gae``): a per-token value model and its trainer.

Why a transformer backbone and not a small MLP on the actor's features: the value of a partial
answer depends on the whole prompt + prefix, exactly what the actor's backbone already reads;
sharing the *architecture* (not the weights) keeps the actor's update from moving the critic's
features. By default the critic starts as a copy of the SFT'd actor's backbone
(``init_from_actor``), so it begins with features that already parse the task; only the scalar
value head is new. Pure torch, no Ray: it lives inside the actor process, next to the actor.

Alignment follows :mod:`learner.llm.batch`: ``values[:, t]`` is read from the hidden state at
position ``P - 1 + t``, the state *before* response token ``t`` is emitted, so ``V_t`` is the
value of the state in which the policy chose token ``t`` (the same position whose logits give
``logp[:, t]``). :class:`CriticTrainer` follows the :class:`learner.algorithms.protocol.Algorithm`
shape: ``update`` takes the :class:`~learner.llm.batch.PolicyBatch` (``old_values``,
``returns``). The loss is :func:`learner.algorithms.value_loss` with the step's global
normaliser, so micro-batching does not change it.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from learner.algorithms import AGG_MODES, global_normalizer, value_loss
from learner.llm.batch import PolicyBatch, TrainBatch
from learner.llm.model import LLMModelConfig, build_model, count_parameters
from rlinf_contracts.config import ConfigError

__all__ = ["CriticConfig", "ValueModel", "CriticTrainer", "build_critic"]

log = logging.getLogger(__name__)


@dataclass
class CriticConfig:
    """The value model and its optimizer; present (``algorithm.critic: {...}``) iff ``adv: gae``."""

    lr: float = field(default=1e-3, metadata={"help": "critic AdamW learning rate"})
    weight_decay: float = field(default=0.0, metadata={"help": "critic AdamW weight decay"})
    grad_clip: float = field(default=1.0, metadata={"help": "critic grad-norm clip (0 = off)"})
    value_clip: float | None = field(
        default=0.2,
        metadata={"help": "PPO value clipping around the rollout-time values (null = off)"},
    )
    agg_mode: str = field(
        default="token-mean",
        metadata={"help": "value-loss aggregation (learner.algorithms.AGG_MODES)"},
    )
    epochs: int = field(
        default=0, metadata={"help": "critic passes over each rollout batch (0 = actor.epochs)"}
    )
    init_from_actor: bool = field(
        default=True,
        metadata={
            "help": "start from the (SFT'd) actor's backbone; false = fresh init / model.path"
        },
    )
    seed: int = field(
        default=1, metadata={"help": "init seed of the value head (and of a fresh backbone)"}
    )

    def validate(self) -> None:
        if self.lr <= 0:
            raise ConfigError(f"algorithm.critic.lr must be > 0, got {self.lr}")
        if self.value_clip is not None and self.value_clip <= 0:
            raise ConfigError(
                f"algorithm.critic.value_clip must be > 0 or null (off), got {self.value_clip}"
            )
        if self.agg_mode not in AGG_MODES:
            raise ConfigError(
                f"algorithm.critic.agg_mode={self.agg_mode!r}; choose one of {list(AGG_MODES)}"
            )
        if self.epochs < 0:
            raise ConfigError(
                f"algorithm.critic.epochs must be >= 0 (0 = actor.epochs), got {self.epochs}"
            )


class ValueModel(nn.Module):
    """A causal-LM backbone (no LM head) and a scalar head: ``[N, P+R]`` tokens -> ``[N, R]``
    values."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        # float32 head whatever the backbone dtype: values are regression targets near 0..1
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.value_head.weight, std=1.0 / (hidden_size + 1))
        nn.init.zeros_(self.value_head.bias)

    def forward(self, batch: TrainBatch) -> torch.Tensor:
        """Values ``[N, R]`` of the states before each response token, 0 at padding."""
        out = self.backbone(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            use_cache=False,
        )
        p = batch.prompt_len
        hidden = out.last_hidden_state[:, p - 1 : -1].float()
        return self.value_head(hidden).squeeze(-1) * batch.response_mask


def _backbone_of(lm: nn.Module) -> nn.Module:
    """The decoder stack of a HF causal LM (``LlamaForCausalLM.model``), LoRA merged first."""
    if hasattr(lm, "merge_and_unload"):
        lm = lm.merge_and_unload()
    base = getattr(lm, "base_model", lm)
    if base is lm or not hasattr(base, "forward"):
        raise TypeError(
            f"{type(lm).__name__} has no separate backbone (base_model); cannot build a critic "
            "from it"
        )
    return base


def build_critic(
    model_cfg: LLMModelConfig,
    cfg: CriticConfig,
    tokenizer: Any = None,
    actor: nn.Module | None = None,
) -> ValueModel:
    """A :class:`ValueModel` on the actor's architecture.

    With ``cfg.init_from_actor`` and an ``actor``, the backbone is a deep copy of the actor's
    (LoRA merged: the critic trains all its weights); otherwise it is built from ``model_cfg``
    (``path`` pretrained, or a tiny model seeded with ``cfg.seed``).
    """
    if cfg.init_from_actor and actor is not None:
        backbone = _backbone_of(copy.deepcopy(actor))
    else:
        fresh = dataclasses.replace(model_cfg, lora_rank=0, seed=cfg.seed)
        backbone = _backbone_of(build_model(fresh, tokenizer))
    backbone.requires_grad_(True)
    torch.manual_seed(cfg.seed)
    hidden = backbone.config.hidden_size
    model = ValueModel(backbone, hidden)
    device = next(backbone.parameters()).device
    log.info(
        "critic: %.2fM parameters (init_from_actor=%s)",
        count_parameters(model) / 1e6,
        cfg.init_from_actor and actor is not None,
    )
    return model.to(device)


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    size = size or n
    return [(s, min(s + size, n)) for s in range(0, n, size)]


class CriticTrainer:
    """Owns the value model and its optimizer: rollout-time values and clipped value-loss
    updates."""

    def __init__(
        self,
        model: ValueModel,
        cfg: CriticConfig,
        micro_batch: int = 0,
        epochs: int = 1,
        minibatches: int = 1,
    ) -> None:
        self.model = model
        self.cfg = cfg
        self.micro_batch = micro_batch
        self.epochs, self.minibatches = epochs, minibatches
        self.device = next(model.parameters()).device
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay
        )
        self.steps = 0

    @torch.no_grad()
    def values(self, batch: TrainBatch) -> torch.Tensor:
        """``[N, R]`` values under the current weights (the "old" values of the value clip)."""
        was = self.model.training
        self.model.eval()
        batch = batch.to(self.device)
        out = torch.cat(
            [self.model(batch.slice(s, e)) for s, e in _chunks(len(batch), self.micro_batch)]
        )
        self.model.train(was)
        return out.cpu()

    def accumulate(
        self,
        batch: TrainBatch,
        old_values: torch.Tensor,
        returns: torch.Tensor,
        backward: bool = True,
    ) -> tuple[float, dict[str, float]]:
        """Value loss of ``batch`` as one optimizer step, micro-batched with the batch's global
        normaliser (so the sum equals ``value_loss`` on the whole batch); grads accumulate."""
        normalizer = global_normalizer(batch.response_mask, self.cfg.agg_mode)
        batch = batch.to(self.device)
        old_values, returns = old_values.to(self.device), returns.to(self.device)
        total, sums = 0.0, {}
        chunks = _chunks(len(batch), self.micro_batch)
        for s, e in chunks:
            mb = batch.slice(s, e)
            loss, m = value_loss(
                self.model(mb),
                old_values[s:e],
                returns[s:e],
                mb.response_mask,
                clip=self.cfg.value_clip,
                agg_mode=self.cfg.agg_mode,
                normalizer=normalizer,
            )
            if backward:
                loss.backward()
            total += float(loss.detach())
            for k, v in m.items():
                sums[f"critic/{k}"] = sums.get(f"critic/{k}", 0.0) + v / len(chunks)
        sums["critic/loss"] = total
        return total, sums

    def policy(self) -> ValueModel:
        """The network this trainer trains (the critic is never published nor served)."""
        return self.model

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])

    def update(self, batch: PolicyBatch) -> dict[str, float]:
        """``epochs`` x ``minibatches`` optimizer steps regressing values onto ``batch.returns``;
        mean metrics. The value clip is around ``batch.old_values``."""
        if batch.old_values is None or batch.returns is None:
            raise ValueError("CriticTrainer.update needs a batch with old_values and returns")
        self.model.train()
        n = len(batch)
        size = -(-n // self.minibatches)
        sums: dict[str, float] = {}
        steps = 0
        for _ in range(self.epochs):
            for s, e in _chunks(n, size):
                mb = batch.slice(s, e)
                _, m = self.accumulate(mb.tokens, mb.old_values, mb.returns)  # type: ignore[arg-type]  # update checked both are set
                gn = 0.0
                if self.cfg.grad_clip > 0:
                    gn = float(
                        nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
                    )
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                m["critic/grad_norm"] = gn
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                steps += 1
                self.steps += 1
        return {k: v / max(steps, 1) for k, v in sums.items()}

    def save(self, path: str | Path) -> Path:
        """The value model's weights as ``<path>/critic.safetensors`` (for resuming, not for
        eval)."""
        from safetensors.torch import save_file

        out = Path(path) / "critic.safetensors"
        out.parent.mkdir(parents=True, exist_ok=True)
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()}, str(out)
        )
        return out
