"""Rollout samples -> padded training tensors, and per-token log-probs of a causal LM.

:class:`PolicyBatch` is what one policy update consumes
(:meth:`learner.llm.actor.ActorTrainer.update`): the tokens plus everything the rollout and the
advantage estimator produced for them.

Layout: prompts left-padded to ``P``, responses right-padded to ``R``; ``input_ids [N, P+R]``.
The logits at positions ``P-1 .. P+R-2`` predict response tokens ``0 .. R-1``, so every
response-aligned tensor (log-probs, advantages, ``response_mask``) is ``[N, R]``. Position
ids count only real tokens, so left padding does not shift a prompt's positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["PolicyBatch", "TrainBatch", "make_train_batch", "response_logits", "response_logprobs"]


@dataclass
class TrainBatch:
    input_ids: torch.Tensor  # [N, P+R]
    attention_mask: torch.Tensor  # [N, P+R]
    position_ids: torch.Tensor  # [N, P+R]
    responses: torch.Tensor  # [N, R]
    response_mask: torch.Tensor  # [N, R] float, 1 at real response tokens
    prompt_len: int  # P

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def slice(self, start: int, stop: int) -> TrainBatch:
        s = slice(start, stop)
        return TrainBatch(
            self.input_ids[s],
            self.attention_mask[s],
            self.position_ids[s],
            self.responses[s],
            self.response_mask[s],
            self.prompt_len,
        )

    def to(self, device: str | torch.device) -> TrainBatch:
        return TrainBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.position_ids.to(device),
            self.responses.to(device),
            self.response_mask.to(device),
            self.prompt_len,
        )


@dataclass
class PolicyBatch:
    """One update's data, every tensor ``[N, R]`` and aligned with ``tokens.responses``.

    ``old_logp``: log-probs under the weights that sampled (the ratio's denominator);
    ``advantages``: per token, from the estimator; ``ref_logp``: under the frozen reference
    (KL, when ``algorithm.kl_coef > 0``); ``old_values`` / ``returns``: the critic's values at
    rollout time and its regression targets (PPO with a critic only).
    """

    tokens: TrainBatch
    old_logp: torch.Tensor
    advantages: torch.Tensor
    ref_logp: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    returns: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    def slice(self, start: int, stop: int) -> PolicyBatch:
        cut = lambda t: None if t is None else t[start:stop]  # noqa: E731
        return PolicyBatch(
            self.tokens.slice(start, stop),
            self.old_logp[start:stop],
            self.advantages[start:stop],
            cut(self.ref_logp),
            cut(self.old_values),
            cut(self.returns),
        )


def make_train_batch(
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_id: int,
    loss_masks: Sequence[Sequence[int]] | None = None,
) -> TrainBatch:
    """Pad prompts (left) and responses (right) into one :class:`TrainBatch`.

    ``loss_masks`` (multi-turn episodes): per response token, 1 if the model sampled it and 0
    for tool output. Tool tokens stay in ``attention_mask`` (the model reads them) but are 0 in
    ``response_mask``, so no loss, log-prob ratio, advantage or normaliser counts them.
    """
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    n = len(prompt_ids)
    p_len = max(len(p) for p in prompt_ids)
    r_len = max(1, max(len(r) for r in response_ids))
    ids = torch.full((n, p_len + r_len), pad_id, dtype=torch.long)
    attn = torch.zeros((n, p_len + r_len), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        ids[i, p_len - len(p) : p_len] = torch.tensor(list(p), dtype=torch.long)
        attn[i, p_len - len(p) : p_len] = 1
        if len(r):
            ids[i, p_len : p_len + len(r)] = torch.tensor(list(r), dtype=torch.long)
            attn[i, p_len : p_len + len(r)] = 1
    pos = (attn.cumsum(-1) - 1).clamp_min(0)
    resp_mask = attn[:, p_len:].float()
    if loss_masks is not None:
        for i, (r, m) in enumerate(zip(response_ids, loss_masks)):
            if len(m) != len(r):
                raise ValueError(
                    f"sample {i}: loss mask of {len(m)} tokens for a response of {len(r)}"
                )
            if len(m):
                resp_mask[i, : len(m)] *= torch.tensor(list(m), dtype=torch.float32)
    return TrainBatch(ids, attn, pos, ids[:, p_len:].clone(), resp_mask, p_len)


def response_logits(model: nn.Module, batch: TrainBatch) -> torch.Tensor:
    """Logits ``[N, R, V]`` that predict each response token (the position before it)."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
    )
    p = batch.prompt_len
    return out.logits[:, p - 1 : -1]


def response_logprobs(
    model: nn.Module, batch: TrainBatch, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probs ``[N, R]`` of the response tokens under ``model`` (gradient flows if enabled).

    ``temperature`` must match the sampling temperature for the ratio to the rollout's
    log-probs to be an importance ratio of the same distribution.
    """
    logits = response_logits(model, batch).float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    lp = logp.gather(-1, batch.responses.unsqueeze(-1)).squeeze(-1)
    return lp * batch.response_mask
