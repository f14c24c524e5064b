"""The actor: log-probs, PPO-style updates and SFT steps on a causal LM, micro-batched.

Pure torch, no Ray: a :class:`learner.algorithms.protocol.Algorithm` whose ``update`` takes one
:class:`~learner.llm.batch.PolicyBatch` (old log-probs, advantages, reference log-probs and, for
PPO with a critic, old values and returns ride in the batch; the optimiser step count is state).
:class:`learner.llm.learner.ReasoningLearner` turns scored completions into that batch. The
loss of a step is split into micro-batches with the step's *global* normaliser, so gradient
accumulation gives the full-batch gradient.
With PPO-with-a-critic (``algorithm.adv: gae``) the trainer also holds the
:class:`~learner.llm.critic.CriticTrainer` and updates it on the same rollout batch.

Several actor ranks (``actor.strategy: ddp | fsdp``, :mod:`learner.actor.strategies`): every
rank holds the whole step's batch and takes its own rows of each mini-batch (:func:`rank_rows`);
its loss uses the step's global normaliser times the rank count, so once the strategy averages
the gradients over the ranks (by hand for ddp, inside ``backward`` for fsdp) they equal the
single-process gradient. Every rank runs the same number of forwards per step -- under FSDP
each forward is a collective -- so a rank left without rows runs one on a zero-weighted row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from learner.actor.ddp import GradSync
from learner.algorithms import sft_loss
from learner.algorithms.aggregation import global_normalizer
from learner.llm.algo import LLMAlgorithmConfig, policy_objective, step_normalizer
from learner.llm.batch import PolicyBatch, TrainBatch, response_logits, response_logprobs
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
        if self.micro_batch < 0:
            raise ConfigError(
                f"actor.micro_batch must be >= 0 (0 = whole mini-batch), got {self.micro_batch}"
            )


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    size = size or n
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def rank_rows(n: int, rank: int, world_size: int, micro: int) -> list[tuple[int, int, bool]]:
    """This rank's micro-batches of an ``n``-row batch: ``(start, stop, real)``, as many on
    every rank. Rows go to ranks in contiguous blocks of ``ceil(n / world_size)``; ``real`` is
    False for a stand-in (row 0, weighted 0) where the rank has no rows left.

    >>> rank_rows(5, 0, 2, 2), rank_rows(5, 1, 2, 2)
    ([(0, 2, True), (2, 3, True)], [(3, 5, True), (0, 1, False)])
    >>> rank_rows(4, 0, 1, 0)
    [(0, 4, True)]
    """
    per = -(-n // world_size)
    lo, hi = min(rank * per, n), min((rank + 1) * per, n)
    size = micro or per
    out = []
    for k in range(-(-per // size)):
        s, e = lo + k * size, min(lo + (k + 1) * size, hi)
        out.append((s, e, True) if s < e else (0, 1, False))
    return out


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
        sync: GradSync | None = None,
    ) -> None:
        self.model = model
        self.sync = sync if sync is not None else GradSync(0, 1)
        self.device = next(model.parameters()).device
        self.max_new_tokens = max_new_tokens  # default constant of seq-mean-token-sum-norm
        self.cfg = cfg
        self.algo = algo
        self.temperature = temperature
        self.optimizer = self._optimizer()
        self.critic = critic  # PPO-with-a-critic only; built after SFT by the learner
        self.steps = 0

    def _optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)

    def shard(self) -> None:
        """Let the strategy wrap the model (after its process group is up); a sharding one
        replaced the parameters, so the optimiser is rebuilt on them (before any step)."""
        model = self.sync.wrap(self.model)
        if self.sync.world_size > 1 and self.sync.collective_state:
            self.model = model
            self.optimizer = self._optimizer()

    @property
    def _scale(self) -> float:
        """Per-rank losses are summed, not averaged: the strategy's mean over ranks undoes it."""
        return float(self.sync.world_size)

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
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.sync.average_grads(params)  # ddp ranks; fsdp averaged inside backward
        gn = 0.0
        if self.cfg.grad_clip > 0:
            gn = self.sync.clip_grad_norm(params, self.cfg.grad_clip)
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
        real = 0
        chunks = rank_rows(len(batch), self.sync.rank, self.sync.world_size, self.cfg.micro_batch)
        for s, e, counted in chunks:
            mb = batch.slice(s, e)
            logp = response_logprobs(self.model, mb, self.temperature)
            ref = ref_logp[s:e] if ref_logp is not None else None
            loss, m = policy_objective(
                self.algo, logp, old_logp[s:e], advantages[s:e], mb.response_mask, normalizer, ref
            )
            if backward:
                (loss * (self._scale if counted else 0.0)).backward()
            if counted:
                real += 1
                total += float(loss.detach())
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
        total, sums = self._across_ranks(total, sums, real)
        sums["actor/loss"] = total
        return total, sums

    def _across_ranks(
        self, total: float, sums: dict[str, float], chunks: int
    ) -> tuple[float, dict[str, float]]:
        """The step's loss (summed over every rank's micro-batches) and its metrics (mean over
        them): one all-reduce when there are several ranks."""
        keys = sorted(sums)
        t = self.sync.sum(torch.tensor([total, float(chunks), *(sums[k] for k in keys)]))
        n = max(float(t[1]), 1.0)
        return float(t[0]), {k: float(v) / n for k, v in zip(keys, t[2:].tolist())}

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
        """One supervised step: token cross-entropy of the responses given the prompts (each
        rank its rows, normalised by the whole batch's tokens)."""
        self.model.train()
        batch = batch.to(self.device)
        normalizer = global_normalizer(batch.response_mask, "token-mean")
        total = 0.0
        for s, e, counted in rank_rows(len(batch), self.sync.rank, self.sync.world_size, 0):
            mb = batch.slice(s, e)
            logits = response_logits(self.model, mb)
            loss = sft_loss(logits, mb.responses, mb.response_mask, normalizer=normalizer)
            (loss * (self._scale if counted else 0.0)).backward()
            total += float(loss.detach()) if counted else 0.0
        self._clip_and_step()
        return float(self.sync.sum(torch.tensor(total)))

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
