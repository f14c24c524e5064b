"""``hf`` rollout backend: batched sampling with a transformers causal LM, KV cache, on CPU or GPU.

Why our own decode loop instead of ``model.generate``: RL needs the log-probability of every
sampled token under the *sampling* distribution (after temperature and top-p), for exactly the
tokens that were sampled, and rows that hit EOS must stop contributing tokens. ``generate``
only returns processed scores and its own padding conventions; this loop is ~60 lines, keeps
the KV cache (one prompt forward, then one token per step), and left-pads prompts so all rows
decode in lockstep.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from learner.llm.rollout.base import ROLLOUT_BACKENDS, RolloutBackend, RolloutBatch, SamplingParams

__all__ = ["HFRolloutBackend", "cache_argument", "sample_next", "left_pad"]

log = logging.getLogger(__name__)


def cache_argument(model: nn.Module) -> str:
    """The forward's name for the KV cache: ``cache`` in recent transformers, which warn on
    (and will drop) the older ``past_key_values``; a model that only has the old one keeps it."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # LoRA (peft)
    names = inspect.signature(base.forward).parameters
    return "cache" if "cache" in names else "past_key_values"


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids [B, L], attention_mask [B, L])`` with sequences right-aligned (left padding)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, width - len(s) :] = torch.tensor(list(s), dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids, mask


def sample_next(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row from ``logits [B, V]``: ``(tokens [B], logprobs [B])``.

    Temperature scales the logits; top-k / top-p keep the smallest set of most likely tokens
    and renormalise. The returned log-prob is under that final distribution. Temperature 0 is
    greedy, with the log-prob of the argmax under the unscaled distribution.
    """
    logits = logits.float()
    if params.greedy:
        logp = torch.log_softmax(logits, dim=-1)
        tok = logp.argmax(dim=-1)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
    logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token once the mass *before* it already reaches top_p (the first always stays)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


@ROLLOUT_BACKENDS.register("hf")
class HFRolloutBackend(RolloutBackend):
    """Sampling with a transformers causal LM; ``update_weights`` loads a state dict in place."""

    def __init__(
        self, model: nn.Module, tokenizer: Any, device: str = "cpu", micro_batch: int = 0
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.micro_batch = micro_batch  # rows decoded together; 0 = all at once
        self.weight_version = 0
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        # tied embeddings legitimately appear as "missing" lm_head weights
        missing = [k for k in missing if not k.endswith("lm_head.weight")]
        if missing or unexpected:
            raise KeyError(
                f"weights v{version} do not fit the rollout model: missing {missing[:5]}, "
                f"unexpected {unexpected[:5]}; actor and rollout must build the same model"
            )
        self.weight_version = int(version)

    def offload(self) -> None:
        if self.device != "cpu":
            self.model.to("cpu")
            torch.cuda.empty_cache()

    def onload(self) -> None:
        if self.device != "cpu":
            self.model.to(self.device)

    def encode(self, prompts: Sequence[str]) -> list[list[int]]:
        return [list(self.tokenizer(p, add_special_tokens=False).input_ids) for p in prompts]

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> RolloutBatch:
        prompt_ids = self.encode(prompts)
        return self.generate_ids(prompt_ids, params)

    @torch.no_grad()
    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> RolloutBatch:
        """Sample from token-id prompts; rows are ``n`` contiguous copies of each prompt."""
        rows = [list(p) for p in prompt_ids for _ in range(params.n)]
        index = [i for i in range(len(prompt_ids)) for _ in range(params.n)]
        gen = None
        if params.seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(params.seed)
        step = self.micro_batch or len(rows)
        resp: list[list[int]] = []
        lps: list[list[float]] = []
        reasons: list[str] = []
        for start in range(0, len(rows), step):
            r, lp, why = self._decode(rows[start : start + step], params, gen)
            resp += r
            lps += lp
            reasons += why
        texts = self.tokenizer.batch_decode(resp, skip_special_tokens=True)
        return RolloutBatch(rows, resp, lps, texts, reasons, index, self.weight_version)

    def _decode(
        self, rows: list[list[int]], params: SamplingParams, gen: torch.Generator | None
    ) -> tuple[list[list[int]], list[list[float]], list[str]]:
        ids, mask = left_pad(rows, self.pad_id)
        ids, mask = ids.to(self.device), mask.to(self.device)
        single, text_stops = self._stops(params)
        stop = torch.tensor(
            sorted({self.eos_id, *params.stop_token_ids, *single}), device=self.device
        )
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        from transformers import DynamicCache

        cache = DynamicCache()  # filled in place by every forward below
        kv = {cache_argument(self.model): cache}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **kv)
        logits = out.logits[:, -1]
        next_pos = pos[:, -1:] + 1
        done = torch.zeros(len(rows), dtype=torch.bool, device=self.device)
        toks, lps = [], []
        for t in range(params.max_new_tokens):
            tok, lp = sample_next(logits, params, gen)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            toks.append(tok)
            lps.append(torch.where(done, torch.zeros_like(lp), lp))
            done = done | torch.isin(tok, stop)
            if text_stops:
                done = done | self._text_stop(toks, done, text_stops)
            if bool(done.all()) or t == params.max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=mask,
                position_ids=next_pos,
                use_cache=True,
                **kv,
            )
            logits = out.logits[:, -1]
            next_pos = next_pos + 1
        return self._unpad(
            torch.stack(toks, 1), torch.stack(lps, 1), stop, text_stops, self.tokenizer
        )

    def _stops(self, params: SamplingParams) -> tuple[list[int], tuple[str, ...]]:
        """Stop strings that are one token become stop ids; the rest are matched on decoded text."""
        single, text = [], []
        for s in params.stop:
            ids = self.tokenizer(s, add_special_tokens=False).input_ids
            (single.append(ids[0]) if len(ids) == 1 else text.append(s))
        return single, tuple(text)

    def _text_stop(
        self, toks: list[torch.Tensor], done: torch.Tensor, stops: tuple[str, ...]
    ) -> torch.Tensor:
        """Rows whose recent tokens now contain a multi-token stop string."""
        width = max(len(s) for s in stops)  # every token is >= 1 character
        recent = torch.stack(toks[-width:], 1).tolist()
        hit = [
            not d and any(s in self.tokenizer.decode(r, skip_special_tokens=True) for s in stops)
            for r, d in zip(recent, done.tolist())
        ]
        return torch.tensor(hit, dtype=torch.bool, device=done.device)

    @staticmethod
    def _unpad(
        toks: torch.Tensor,
        lps: torch.Tensor,
        stop: torch.Tensor,
        text_stops: tuple[str, ...] = (),
        tokenizer: Any = None,
    ) -> tuple[list[list[int]], list[list[float]], list[str]]:
        """Cut each row after its first stop token or stop string (kept: it is a sampled action
        too)."""
        resp, out_lp, reasons = [], [], []
        stops = set(stop.tolist())
        for row_t, row_lp in zip(toks.tolist(), lps.tolist()):
            end = next((i + 1 for i, x in enumerate(row_t) if x in stops), None)
            if text_stops and tokenizer is not None:
                end = _first_text_stop(row_t, end, text_stops, tokenizer)
            reasons.append("stop" if end is not None else "length")
            end = end if end is not None else len(row_t)
            resp.append(row_t[:end])
            out_lp.append(row_lp[:end])
        return resp, out_lp, reasons


def _first_text_stop(
    row: list[int], end: int | None, stops: tuple[str, ...], tokenizer: Any
) -> int | None:
    """Shortest prefix of ``row`` (before ``end``) whose text contains a stop string."""
    limit = end if end is not None else len(row)
    for i in range(1, limit + 1):
        if any(s in tokenizer.decode(row[:i], skip_special_tokens=True) for s in stops):
            return i
    return end
