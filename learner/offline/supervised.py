"""Supervised learners on fixed datasets: VLA action SFT and the binary success classifier.

Both are :class:`~learner.algorithms.protocol.Algorithm` s, so their runners (``vla_sft``,
``reward_classifier``) are the same loop as the offline runner's (:mod:`learner.runners.fit`):
draw a batch, ``update``, log. What differs is only the batch: ``(obs, action_chunks)`` for SFT
(the loss is the model's own ``sft_loss``: token cross-entropy or flow matching), ``(obs,
labels)`` for the classifier (BCE on its logits, the rare positives re-weighted by
``pos_weight`` = negatives / positives of the training split).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["SFTLearner", "ClassifierLearner"]


class _AdamLearner:
    """One network, one Adam optimiser, one loss per batch: the shared part of both learners."""

    def __init__(self, net: nn.Module, lr: float) -> None:
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)

    def loss(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def update(self, batch: Any) -> dict[str, float]:
        self.net.train()
        loss = self.loss(batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {self.metric: float(loss.detach())}

    metric = "loss"

    def policy(self) -> nn.Module:
        return self.net

    def state_dict(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])


class SFTLearner(_AdamLearner):
    """Supervised fine-tuning of a VLA on ``(obs, action_chunks)``: ``policy.sft_loss``."""

    metric = "sft_loss"

    def loss(self, batch: tuple[dict[str, Any], Tensor]) -> Tensor:
        obs, target = batch
        return self.net.sft_loss(obs, target)


class ClassifierLearner(_AdamLearner):
    """Binary cross-entropy of a success classifier's logits on ``(obs, labels)``."""

    def __init__(self, net: nn.Module, lr: float, pos_weight: float) -> None:
        super().__init__(net, lr)
        self.pos_weight = torch.tensor(pos_weight)

    def loss(self, batch: tuple[dict[str, Any], Tensor]) -> Tensor:
        obs, labels = batch
        return nn.functional.binary_cross_entropy_with_logits(
            self.net.logits(obs), labels, pos_weight=self.pos_weight
        )

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "pos_weight": self.pos_weight.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.pos_weight = state["pos_weight"].clone()
