"""Imitation learning: behaviour cloning / SFT losses, DAgger and HG-DAgger aggregation.

DAgger (Ross et al. 2011) fixes behaviour cloning's compounding error by training on the
states the *learner* visits, labelled by the expert. HG-DAgger (Kelly et al. 2019) lets a
human take over only when the learner goes wrong; only the intervention segments carry
labels, and they are the most informative samples, hence weighted up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from learner.algorithms.aggregation import aggregate


def bc_loss(pred_actions: Tensor, expert_actions: Tensor, weights: Tensor | None = None) -> Tensor:
    """Continuous-action BC: ``sum_b w_b ||a_pred - a_exp||^2 / A / sum_b w_b`` (weighted MSE)."""
    per_sample = (pred_actions - expert_actions.detach()).square().flatten(1).mean(dim=1)
    if weights is None:
        return per_sample.mean()
    w = weights.to(per_sample.dtype)
    return (w * per_sample).sum() / w.sum().clamp_min(1e-8)


def nll_loss(log_prob: Tensor, weights: Tensor | None = None) -> Tensor:
    """Likelihood BC for stochastic policies: ``-sum_b w_b log pi(a_b|s_b) / sum_b w_b``."""
    if weights is None:
        return -log_prob.mean()
    w = weights.to(log_prob.dtype)
    return -(w * log_prob).sum() / w.sum().clamp_min(1e-8)


def sft_loss(
    logits: Tensor,
    labels: Tensor,
    mask: Tensor,
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
) -> Tensor:
    """Token cross-entropy ``-log softmax(logits)[label]`` aggregated under ``mask``.

    ``logits [B, T, V]`` are already aligned with ``labels [B, T]`` (shift before calling
    for next-token prediction). Serves LLM SFT and discrete action tokens / bins alike.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    safe_labels = torch.where(mask.bool(), labels, torch.zeros_like(labels))
    nll = -logp.gather(-1, safe_labels.unsqueeze(-1).long()).squeeze(-1)
    return aggregate(nll, mask, agg_mode, normalizer)


def dagger_mix(
    learner_action: Tensor,
    expert_action: Tensor,
    beta: float,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Which action to execute: the expert's with probability ``beta`` per row (DAgger's
    ``pi_i = beta_i pi* + (1 - beta_i) pi_hat``). Returns ``(action, used_expert [B] bool)``."""
    use_expert = torch.rand(learner_action.shape[0], generator=generator) < beta
    shape = (-1,) + (1,) * (learner_action.dim() - 1)
    pick = use_expert.view(shape).to(learner_action.device)
    mixed = torch.where(pick, expert_action, learner_action)
    return mixed, use_expert


def intervention_weights(
    intervened: Tensor,
    intervention_weight: float = 1.0,
    onset_weight: float | None = None,
    onset_steps: int = 0,
) -> Tensor:
    """HG-DAgger sample weights along one trajectory ``intervened [T]`` (bool).

    Steps under human control weigh ``intervention_weight``; autonomous steps weigh 0
    (they have no label). Optionally the first ``onset_steps`` of each intervention
    segment weigh ``onset_weight``: the moment the human takes over marks the states
    where the learner was about to fail.
    """
    on = intervened.bool()
    w = on.to(torch.float32) * intervention_weight
    if onset_weight is not None and onset_steps > 0:
        starts = on & ~torch.cat([torch.zeros(1, dtype=torch.bool, device=on.device), on[:-1]])
        since_start = torch.zeros_like(w)
        count = 0.0
        for t in range(on.shape[0]):
            count = 0.0 if starts[t] else count + 1.0
            since_start[t] = count
        w = torch.where(on & (since_start < onset_steps), torch.full_like(w, onset_weight), w)
    return w


@dataclass
class DaggerBuffer:
    """Aggregated dataset ``D <- D ∪ {(s, pi*(s))}``: states with expert or human labels.

    ``obs [N, D]``, ``action [N, A]`` (the *label*, never the learner's action), ``weight
    [N]``, ``source [N]`` (0 = demonstration, 1 = expert relabel of a learner state,
    2 = human intervention).
    """

    obs: list[Tensor] = field(default_factory=list)
    action: list[Tensor] = field(default_factory=list)
    weight: list[Tensor] = field(default_factory=list)
    source: list[Tensor] = field(default_factory=list)

    DEMO, RELABEL, HUMAN = 0, 1, 2

    def _append(self, obs: Tensor, action: Tensor, weight: Tensor, source: int) -> None:
        if obs.shape[0] != action.shape[0] or obs.shape[0] != weight.shape[0]:
            raise ValueError(
                f"obs {tuple(obs.shape)}, action {tuple(action.shape)} and weight "
                f"{tuple(weight.shape)} need the same leading size"
            )
        self.obs.append(obs.detach())
        self.action.append(action.detach())
        self.weight.append(weight.detach().float())
        self.source.append(torch.full((obs.shape[0],), source, dtype=torch.int64))

    def add_demos(self, obs: Tensor, actions: Tensor) -> None:
        """Plain expert demonstrations (round 0 of DAgger = behaviour cloning)."""
        self._append(obs, actions, torch.ones(obs.shape[0]), self.DEMO)

    def add_relabelled(self, visited_obs: Tensor, expert_actions: Tensor) -> None:
        """DAgger: states the learner visited, labelled with the expert's actions there."""
        self._append(visited_obs, expert_actions, torch.ones(visited_obs.shape[0]), self.RELABEL)

    def add_interventions(
        self,
        obs: Tensor,
        human_actions: Tensor,
        intervened: Tensor,
        weight: float = 1.0,
        onset_weight: float | None = None,
        onset_steps: int = 0,
    ) -> None:
        """HG-DAgger: keep only the steps of ``obs [T, D]`` under human control, weighted."""
        w = intervention_weights(intervened, weight, onset_weight, onset_steps)
        keep = intervened.bool()
        self._append(obs[keep], human_actions[keep], w[keep], self.HUMAN)

    def __len__(self) -> int:
        return sum(o.shape[0] for o in self.obs)

    def tensors(self) -> dict[str, Tensor]:
        """The whole aggregated dataset as concatenated tensors."""
        if not self.obs:
            raise ValueError("DaggerBuffer is empty; add demos, relabelled states or interventions")
        return {
            "obs": torch.cat(self.obs),
            "action": torch.cat(self.action),
            "weight": torch.cat(self.weight),
            "source": torch.cat(self.source),
        }

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> dict[str, Tensor]:
        """Uniform sample with replacement from the aggregated dataset."""
        data = self.tensors()
        idx = torch.randint(data["obs"].shape[0], (batch_size,), generator=generator)
        return {k: v[idx] for k, v in data.items()}


def aggregate_dagger(
    dataset: dict[str, Tensor], visited_obs: Tensor, expert_actions: Tensor
) -> dict[str, Tensor]:
    """Functional DAgger step: ``D ∪ {(s, pi*(s)) : s visited by the learner}`` (weight 1)."""
    n = visited_obs.shape[0]
    new = {"obs": visited_obs, "action": expert_actions, "weight": torch.ones(n)}
    return {
        k: torch.cat([dataset[k], new[k].to(dataset[k].dtype)]) for k in ("obs", "action", "weight")
    }
