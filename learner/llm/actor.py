"""The actor: log-probs, PPO-style updates and SFT steps on a causal LM, micro-batched.

Pure torch, no Ray: a :class:`learner.algorithms.protocol.Algorithm` whose ``update`` takes one
:class:`~learner.llm.batch.PolicyBatch` (old log-probs, advantages, reference log-probs and, for
PPO with a critic, old values and returns ride in the batch; the optimiser step count is state).
:class:`learner.llm.learner.ReasoningLearner` turns scored completions into that batch. The
loss of a step is split into micro-batches with the step's *global* normaliser, so gradient
accumulation gives the full-batch gradient.
With PPO-with-a-critic (``algorithm.adv: gae``) the trainer also holds the
:class:`~learner.llm.critic.CriticTrainer` and updates it on the same rollout batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from learner.algorithms import sft_loss
from learner.llm.algo import LLMAlgorithmConfig, policy_objective, step_normalizer
from learner.llm.batch import PolicyBatch, TrainBatch, response_logprobs
from learner.llm.critic import CriticTrainer
from learner.sections import OptimConfig, h
from rlinf_contracts.config import ConfigError

__all__ = ["LLMActorConfig", "ActorTrainer"]


@dataclass
class LLMActorConfig(OptimConfig):
    """The shared optimiser section plus AdamW and micro-batching knobs of the LLM actor
    (``actor:`` of the reasoning runner; the embodied one is
    :class:`learner.runners.config.ActorConfig`)."""

    ALIASES: ClassVar[dict[str, str]] = {"ppo_epochs": "epochs", "mini_batches": "minibatches"}

    lr: float = field(default=1e-3, metadata=h("AdamW learning rate (RL phase)"))
    epochs: int = field(default=1, metadata=h("passes over each rollout batch"))
    minibatches: int = field(default=1, metadata=h("optimizer steps per epoch (batch split)"))
    weight_decay: float = field(default=0.0, metadata=h("AdamW weight decay"))
    grad_clip: float = field(default=1.0, metadata=h("global grad-norm clip (0 = off)"))
    micro_batch: int = field(
        default=0, metadata=h("rows per forward/backward (0 = whole mini-batch)")
    )
    ppo_epochs: int | None = field(default=None, metadata=h("alias of actor.epochs"))
    mini_batches: int | None = field(default=None, metadata=h("alias of actor.minibatches"))

    def validate(self) -> None:
        super().validate()
        if self.strategy != "ddp":  # one actor process: a sharding strategy would be ignored
            raise ConfigError(
                f"key 'actor.strategy'={self.strategy!r} is not supported by runner reasoning yet "
                "(its actor is one process); use ddp"
            )
        if self.micro_batch < 0:
            raise ConfigError(
                f"actor.micro_batch must be >= 0 (0 = whole mini-batch), got {self.micro_batch}"
            )


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    size = size or n
    return [(s, min(s + size, n)) for s in range(0, n, size)]


class ActorTrainer:
    """Owns the trainable model and its optimizer."""

    def __init__(
        self,
        model: nn.Module,
        cfg: LLMActorConfig,
        algo: LLMAlgorithmConfig,
        temperature: float = 1.0,
        max_new_tokens: int = 16,
        critic: CriticTrainer | None = None,
    ) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.max_new_tokens = max_new_tokens  # default constant of seq-mean-token-sum-norm
        self.cfg = cfg
        self.algo = algo
        self.temperature = temperature
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.critic = critic  # PPO-with-a-critic only; built after SFT by the learner
        self.steps = 0

    @property
    def critic(self) -> CriticTrainer | None:
        return self._critic

    @critic.setter
    def critic(self, critic: CriticTrainer | None) -> None:
        """The critic trains on the actor's schedule: ``actor.minibatches`` and
        ``algorithm.critic.epochs`` (0 = ``actor.epochs``) passes per rollout batch."""
        if critic is not None:
            critic.epochs = critic.cfg.epochs or self.cfg.epochs
            critic.minibatches = self.cfg.minibatches
        self._critic = critic

    def policy(self) -> nn.Module:
        return self.model

    @torch.no_grad()
    def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """``[N, R]`` response log-probs under the current weights (the "old" policy)."""
        was = self.model.training
        self.model.eval()
        batch = batch.to(self.device)
        out = torch.cat(
            [
                response_logprobs(self.model, batch.slice(s, e), self.temperature)
                for s, e in _chunks(len(batch), self.cfg.micro_batch)
            ]
        )
        self.model.train(was)
        return out.cpu()

    def _clip_and_step(self) -> float:
        gn = 0.0
        if self.cfg.grad_clip > 0:
            gn = float(nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return gn

    def accumulate(
        self,
        batch: TrainBatch,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        ref_logp: torch.Tensor | None = None,
        backward: bool = True,
    ) -> tuple[float, dict[str, float]]:
        """Loss of ``batch`` as one optimizer step, micro-batched; gradients accumulate if
        ``backward``.

        Returns the summed loss (equal to the shared library's loss on the whole batch, since
        every micro-batch uses the batch's global normaliser) and mean metrics.
        """
        normalizer = step_normalizer(self.algo, batch.response_mask, self.max_new_tokens)
        batch, dev = batch.to(self.device), self.device
        old_logp, advantages = old_logp.to(dev), advantages.to(dev)
        ref_logp = ref_logp.to(dev) if ref_logp is not None else None
        total = 0.0
        sums: dict[str, float] = {}
        chunks = _chunks(len(batch), self.cfg.micro_batch)
        for s, e in chunks:
            mb = batch.slice(s, e)
            logp = response_logprobs(self.model, mb, self.temperature)
            ref = ref_logp[s:e] if ref_logp is not None else None
            loss, m = policy_objective(
                self.algo, logp, old_logp[s:e], advantages[s:e], mb.response_mask, normalizer, ref
            )
            if backward:
                loss.backward()
            total += float(loss.detach())
            for k, v in m.items():
                sums[k] = sums.get(k, 0.0) + v / len(chunks)
        sums["actor/loss"] = total
        return total, sums

    def update(self, batch: PolicyBatch) -> dict[str, float]:
        """``epochs`` x ``minibatches`` optimizer steps on one rollout batch; mean metrics.

        With ``batch.returns`` (GAE targets) the critic is then regressed onto them on the same
        batch (:meth:`CriticTrainer.update`).
        """
        metrics = self._update_actor(batch)
        if batch.returns is not None:
            if self.critic is None or batch.old_values is None:
                raise ValueError(
                    "a batch with returns needs a critic (ActorTrainer(critic=...)) and old_values"
                )
            metrics.update(self.critic.update(batch))
        return metrics

    def _update_actor(self, batch: PolicyBatch) -> dict[str, float]:
        self.model.train()
        n = len(batch)
        sums: dict[str, float] = {}
        steps = 0
        size = -(-n // self.cfg.minibatches)
        for _ in range(self.cfg.epochs):
            for ms, me in _chunks(n, size):
                mb = batch.slice(ms, me)
                _, m = self.accumulate(mb.tokens, mb.old_logp, mb.advantages, mb.ref_logp)
                m["actor/grad_norm"] = self._clip_and_step()
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                steps += 1
                self.steps += 1
        return {k: v / max(steps, 1) for k, v in sums.items()}

    def sft_step(self, batch: TrainBatch) -> float:
        """One supervised step: token cross-entropy of the responses given the prompts."""
        self.model.train()
        batch = batch.to(self.device)
        out = self.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            use_cache=False,
        )
        p = batch.prompt_len
        loss = sft_loss(out.logits[:, p - 1 : -1], batch.responses, batch.response_mask)
        loss.backward()
        self._clip_and_step()
        return float(loss.detach())

    def state_dict(self) -> dict[str, Any]:
        """Model, optimiser and step count (and the critic's, when there is one)."""
        return {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
            "critic": None if self.critic is None else self.critic.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        if state.get("critic") is not None:
            if self.critic is None:
                raise ValueError("a state with a critic needs a critic (ActorTrainer(critic=...))")
            self.critic.load_state_dict(state["critic"])

    def set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g["lr"] = lr
