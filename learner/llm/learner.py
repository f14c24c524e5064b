"""The reasoning learner an :class:`~learner.actor.worker.ActorWorker` hosts: scored completions in.

It turns one step's scored micro-batches into a :class:`~learner.llm.batch.PolicyBatch` --
old and reference log-probs, DAPO shaping and dynamic sampling, advantages (critic-free, or GAE
on the critic's values) -- and hands it to :class:`~learner.llm.actor.ActorTrainer` (which also
regresses the critic). It also owns the SFT warm-up, the frozen KL reference and the checkpoint
format. The embodied counterpart is :class:`learner.actor.trainer.Trainer`; the worker is the same.

Several actor ranks (``actor.strategy``, :mod:`learner.actor.strategies`): rank 0 alone takes the
step's micro-batches off the channel and :meth:`ReasoningLearner.collate` hands the step to every
rank; old log-probs are then computed in the update on all ranks (a sharded forward is a
collective, so rank 0 cannot run one alone as items arrive). SFT, publishing, digests and saving
are called on every rank; rank 0 writes the single-file checkpoint and, under ``fsdp``, every rank
adds its shards beside it (``sharded/``, :mod:`learner.actor.fsdp_convert` turns them back).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from learner.actor.ddp import free_address
from learner.actor.strategies import make_strategy
from learner.algorithms import check_groups
from learner.llm.actor import ActorTrainer
from learner.llm.agentic.training import encode_demo, episode_metrics, turn_reward_tensor
from learner.llm.algo import gae_advantages, keep_mask, shape_scores, token_advantages
from learner.llm.batch import PolicyBatch, TrainBatch, make_train_batch, response_logprobs
from learner.llm.critic import CriticTrainer, build_critic
from learner.llm.model import build_model, save_model
from learner.llm.rollout import RolloutBatch
from learner.llm.tokenizer import load_tokenizer

__all__ = ["ReasoningLearner", "ScoredStep", "TRAIN_STATE_FILE"]

log = logging.getLogger(__name__)

TRAIN_STATE_FILE = "train_state.pt"  # beside the weights: what train.resume needs besides them


@dataclass
class ScoredStep:
    """One RL step's scored completions as the actor collected them (the learner's batch type).

    ``old_logp``: ``[N, R]`` log-probs computed as each micro-batch arrived (None: computed in
    the update); ``staleness``: weight versions between sampling and this update.
    """

    rollout: RolloutBatch
    old_logp: torch.Tensor | None = None
    staleness: int = 0
    timings: dict[str, float] = field(default_factory=dict)


class ReasoningLearner:
    """SFT warm-up, then one policy (+ critic) update per :class:`ScoredStep`."""

    def __init__(self, cfg: Any, tokenizer_dir: str, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = cfg
        self.tokenizer = load_tokenizer(tokenizer_dir)
        model = build_model(cfg.model, self.tokenizer)
        if torch.cuda.is_available():  # a GPU slot: the worker sees only its own GPUs
            model = model.to("cuda")
        self.rank, self.world_size = rank, world_size
        self.sync = make_strategy(cfg.actor.strategy, rank, world_size)
        self.trainer = ActorTrainer(
            model,
            cfg.actor,
            cfg.algorithm,
            cfg.rollout.temperature,
            cfg.rollout.max_new_tokens,
            sync=self.sync,
        )
        self.ref_model: nn.Module | None = None
        self.rl_steps = 0  # policy updates so far
        self._sft_gen = torch.Generator().manual_seed(cfg.train.seed)
        self._t_logp = 0.0  # log-prob seconds of the micro-batches received for the next step

    @property
    def collective_state(self) -> bool:
        """Whether reading or saving the weights needs every rank (``actor.strategy: fsdp``)."""
        return bool(self.sync.collective_state) and self.world_size > 1

    def dist_address(self) -> str:
        return free_address()

    def init_dist(self, address: str) -> None:
        """Join the actor ranks' process group, then let the strategy wrap the model."""
        self.sync.init(address)
        self.trainer.shard()

    # the Algorithm protocol
    def policy(self) -> nn.Module:
        return self.trainer.model

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.trainer.state_dict(),
            "ref": None if self.ref_model is None else self.ref_model.state_dict(),
            "rl_steps": self.rl_steps,
            "sft_generator": self._sft_gen.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["actor"].get("critic") is not None:
            self._critic()
        self.trainer.load_state_dict(state["actor"])
        if state["ref"] is not None:
            self._make_ref(force=True)
            self.ref_model.load_state_dict(state["ref"])  # type: ignore[union-attr]  # _make_ref just built it
        self.rl_steps = int(state["rl_steps"])
        self._sft_gen.set_state(state["sft_generator"])

    def update(self, batch: ScoredStep) -> dict[str, float]:
        """Advantages + policy (and critic) update on one step's scored completions; metrics."""
        self.rl_steps += 1
        cfg, rb = self.cfg, batch.rollout
        tb = self._tokens(rb)
        t0 = time.perf_counter()
        old = batch.old_logp if batch.old_logp is not None else self.trainer.logprobs(tb)
        ref = self._ref_logprobs(tb)
        t_logp = batch.timings.get("logprob", 0.0) + time.perf_counter() - t0
        raw = torch.tensor(rb.extra["scores"], dtype=torch.float32)
        lengths = tb.response_mask.sum(-1)
        scores = shape_scores(cfg.algorithm, raw, lengths, cfg.rollout.max_new_tokens)
        n = cfg.rollout.n
        check_groups(rb.prompt_index, n)  # advantages and dynamic sampling reshape [N] -> [N/n, n]
        keep = keep_mask(cfg.algorithm, scores, n)
        metrics = {
            "rollout/reward": float(raw.mean()),
            "rollout/response_len": float(lengths.mean()),
            "rollout/staleness": float(batch.staleness),
            "rollout/kept_frac": float(keep.float().mean()),
            "time/generate": batch.timings.get("generate", 0.0),
            "time/reward": batch.timings.get("reward", 0.0),
            **episode_metrics(rb.extra),
        }
        dense = None
        if "turn_rewards" in rb.extra and not cfg.algorithm.estimator.signal == "outcome":
            # token-level estimators: per-turn rewards on their turns' tokens, outcome on the last
            dense = turn_reward_tensor(rb.extra["turn_rewards"], tb.responses.shape[1])
            outcome = torch.tensor(rb.extra["outcome"], dtype=torch.float32)
            scores = shape_scores(cfg.algorithm, outcome, lengths, cfg.rollout.max_new_tokens)
        t1 = time.perf_counter()
        if bool(keep.any()):
            idx = keep.nonzero().squeeze(-1)
            sub = tb.slice(0, len(tb)) if bool(keep.all()) else _index(tb, idx)
            pick = lambda t: None if t is None else t[idx]  # noqa: E731
            metrics.update(self._update(sub, scores[idx], old[idx], pick(ref), pick(dense)))
        metrics["time/logprob"] = t_logp
        metrics["time/train"] = time.perf_counter() - t1
        return metrics

    # what the actor worker asks of a hosted learner
    def receive(self, part: RolloutBatch) -> RolloutBatch:
        """A scored micro-batch: its old log-probs now, while the rest is still generating
        (one rank only: with several, the update computes them on all)."""
        if self.world_size > 1:
            return part
        t0 = time.perf_counter()
        part.extra["old_logp"] = self.trainer.logprobs(self._tokens(part))
        self._t_logp += time.perf_counter() - t0
        return part

    def collate(self, parts: list[RolloutBatch], version: int) -> ScoredStep:
        """One step's micro-batches; ``version``: the weights this update starts from. With
        several ranks, rank 0's step (the others get no items) is broadcast to all."""
        if self.world_size > 1:
            box: list[Any] = [self._collate(parts, version) if self.rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            return box[0]
        return self._collate(parts, version)

    def _collate(self, parts: list[RolloutBatch], version: int) -> ScoredStep:
        rb = RolloutBatch.concat(list(parts)) if len(parts) > 1 else parts[0]
        old = None
        if all("old_logp" in p.extra for p in parts):
            width = max(p.extra["old_logp"].shape[1] for p in parts)
            old = torch.cat(
                [
                    torch.nn.functional.pad(
                        p.extra["old_logp"], (0, width - p.extra["old_logp"].shape[1])
                    )
                    for p in parts
                ]
            )
        timings = {
            "generate": sum(p.extra.get("t_generate", 0.0) for p in parts),
            "reward": sum(p.extra.get("t_reward", 0.0) for p in parts),
            "logprob": self._t_logp,
        }
        self._t_logp = 0.0
        return ScoredStep(rb, old, version - rb.weight_version, timings)

    def publish_state(self) -> dict[str, torch.Tensor]:
        """CPU weights for the rollout workers (LoRA merged); on rank 0 only when there are
        several ranks (a gather that every rank joins under ``fsdp``)."""
        if self.collective_state:
            return self.sync.full_state_dict(self.trainer.model)
        if self.rank != 0:
            return {}
        model = self.trainer.model
        if hasattr(model, "merge_and_unload"):  # LoRA: publish merged weights, base names
            model = copy.deepcopy(model).merge_and_unload()
        return {k: v.detach() for k, v in model.state_dict().items()}

    def save(self, path: str, iteration: int, weight_version: int, metrics: dict[str, Any]) -> str:
        """The shared checkpoint (safetensors + meta.json, HF config and tokenizer beside it) that
        ``rlinf eval`` reads; the critic, if any, as ``critic.safetensors`` beside it."""
        from rlinf_contracts.config import to_dict

        full = self.publish_state() if self.collective_state else None
        ref = self._ref_state()
        if self.rank == 0:
            out = save_model(
                self.trainer.model,
                self.tokenizer,
                path,
                iteration=iteration,
                weight_version=weight_version,
                config=to_dict(self.cfg),
                extra={"optimizer_steps": self.trainer.steps, **metrics},
                state=full,
            )
            if self.trainer.critic is not None:
                self.trainer.critic.save(out)
            torch.save(self._train_state(ref), out / TRAIN_STATE_FILE)
            path = str(out)
        # every rank returns once the directory is final (the shards go in after it)
        self.sync.barrier()
        if self.collective_state:
            self.sync.save_train_state(path, self.trainer.model, self.trainer.optimizer)
        return str(path)

    def _ref_state(self) -> dict[str, torch.Tensor] | None:
        """The KL reference's full weights on rank 0 (a gather every rank joins when sharded)."""
        if self.ref_model is None:
            return None
        if self.collective_state:
            return self.sync.full_state_dict(self.ref_model)
        return {k: v.detach().cpu() for k, v in self.ref_model.state_dict().items()}

    def _train_state(self, ref: dict[str, torch.Tensor] | None) -> dict[str, Any]:
        """What resuming needs beside the weights; a sharded optimiser is in ``sharded/``."""
        return {
            "rl_steps": self.rl_steps,
            "optimizer_steps": self.trainer.steps,
            "optimizer": None if self.collective_state else self.trainer.optimizer.state_dict(),
            "ref": ref,
            "critic": None if self.trainer.critic is None else self.trainer.critic.state_dict(),
        }

    def load(self, path: str) -> dict[str, Any]:
        """Resume (``train.resume``) from a checkpoint this runner wrote: weights, optimiser
        (from the shards under ``fsdp``), KL reference, critic and step counts; every rank
        calls it. Returns the checkpoint's ``iteration`` and ``weight_version``."""
        from learner.checkpoint import load_checkpoint

        ckpt = load_checkpoint(path)
        where = ckpt.path / TRAIN_STATE_FILE
        if not where.is_file():
            raise ValueError(
                f"train.resume={path!r}: {ckpt.path} has no {TRAIN_STATE_FILE}, so it cannot be "
                f"continued; start a new run from its weights with model.path={ckpt.path}"
            )
        state = torch.load(where, map_location="cpu", weights_only=True)
        model, optimizer = self.trainer.model, self.trainer.optimizer
        try:
            if not self.sync.load_train_state(ckpt.path, model, optimizer):
                self.sync.load_full_state_dict(model, ckpt.model_state)
                if state["optimizer"] is not None:
                    optimizer.load_state_dict(state["optimizer"])
                else:  # written by sharded ranks, resumed on one: the moments are in the shards
                    log.warning(
                        "%s: Adam moments are in sharded/ only; they start fresh", ckpt.path
                    )
        except (RuntimeError, KeyError, ValueError) as e:
            raise ValueError(
                f"train.resume={path!r} does not fit this config's model: {str(e).splitlines()[0]}"
            ) from None
        if state["ref"] is not None:
            self._make_ref(force=True)
            self.sync.load_full_state_dict(self.ref_model, state["ref"])  # type: ignore[arg-type]  # _make_ref just built it
        if state["critic"] is not None:
            self._critic().load_state_dict(state["critic"])
        self.trainer.steps, self.rl_steps = int(state["optimizer_steps"]), int(state["rl_steps"])
        return {"iteration": int(ckpt.meta["iteration"]), "weight_version": ckpt.weight_version}

    def sft(
        self, demos: Sequence[dict[str, str]], start: int = 0, stop: int | None = None
    ) -> dict[str, float]:
        """SFT on ``{prompt, response}`` demonstrations (steps ``start..stop`` of ``sft.steps``: the
        runner may evaluate between chunks); tool observations are masked out."""
        s = self.cfg.sft
        stop = s.steps if stop is None else stop
        if start == 0:
            self._sft_gen = torch.Generator().manual_seed(self.cfg.train.seed)
        enc = lambda text: self.tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
        eos = self.tokenizer.eos_token_id
        loss = float("nan")
        t0 = time.perf_counter()
        from tqdm import tqdm  # a bar: SFT can take a minute or more on CPU

        for i in tqdm(
            range(start, stop),
            desc="sft warm-up",
            unit="step",
            mininterval=1.0,
            leave=False,
            disable=self.rank != 0,
        ):
            # linear decay to 10%: a constant lr leaves the noisy-label loss bouncing around
            self.trainer.set_lr(s.lr * (1.0 - 0.9 * i / max(1, s.steps)))
            idx = torch.randint(len(demos), (s.batch_size,), generator=self._sft_gen).tolist()
            rows = [demos[i] for i in idx]
            resp = [encode_demo(self.tokenizer, r["response"], eos) for r in rows]  # tool masked
            batch = make_train_batch(
                [enc(r["prompt"]) for r in rows],
                [r for r, _ in resp],
                self.tokenizer.pad_token_id,
                [m for _, m in resp],
            )
            loss = self.trainer.sft_step(batch)
        self.trainer.set_lr(self.cfg.actor.lr)
        if stop >= s.steps:
            self._make_ref()
        return {"sft/loss": loss, "sft/seconds": time.perf_counter() - t0, "sft/step": float(stop)}

    def _tokens(self, rb: RolloutBatch) -> TrainBatch:
        return make_train_batch(
            rb.prompt_ids, rb.response_ids, self.tokenizer.pad_token_id, rb.extra.get("loss_mask")
        )

    def _make_ref(self, force: bool = False) -> None:
        """Freeze a copy of the current (post-SFT) policy as the KL reference, if KL is on."""
        if not (force or self.cfg.algorithm.kl_coef > 0):
            return
        if self.collective_state:  # a sharded module cannot be deep-copied: a twin, sharded
            ref = self.sync.wrap(
                build_model(self.cfg.model, self.tokenizer).to(self.trainer.device)
            )
            ref.load_state_dict(self.trainer.model.state_dict())
        else:
            ref = copy.deepcopy(self.trainer.model)
        self.ref_model = ref.eval().requires_grad_(False)

    def _ref_logprobs(self, tb: TrainBatch) -> torch.Tensor | None:
        if self.ref_model is None:
            return None
        with torch.no_grad():
            return response_logprobs(
                self.ref_model, tb.to(self.trainer.device), self.cfg.rollout.temperature
            ).cpu()

    def _update(
        self,
        tb: TrainBatch,
        scores: torch.Tensor,
        old: torch.Tensor,
        ref: torch.Tensor | None,
        dense: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """Advantages (critic-free, or GAE on the critic's values), the actor (+ critic) update."""
        algo = self.cfg.algorithm
        if not algo.estimator.needs_critic:
            adv = token_advantages(
                algo, scores, tb.response_mask, self.cfg.rollout.n, old, ref, dense
            )
            return self.trainer.update(PolicyBatch(tb, old, adv, ref))
        values = self._critic().values(tb)
        adv, returns = gae_advantages(algo, scores, tb.response_mask, values, old, ref, dense)
        metrics = self.trainer.update(PolicyBatch(tb, old, adv, ref, values, returns))
        m = tb.response_mask.bool()
        var = returns[m].var() if int(m.sum()) > 1 else torch.tensor(0.0)
        metrics["critic/explained_var"] = (
            float(1.0 - (returns - values)[m].var() / var) if var > 0 else 0.0
        )
        return metrics

    def _critic(self) -> CriticTrainer:
        """The critic, built on first use: from the actor's weights after SFT, in this process."""
        if self.trainer.critic is None:
            ccfg = self.cfg.algorithm.critic
            assert ccfg is not None  # LLMAlgorithmConfig.validate: a critic estimator requires it
            model = build_critic(self.cfg.model, ccfg, self.tokenizer, self.trainer.model).to(
                self.trainer.device
            )
            self.trainer.critic = CriticTrainer(model, ccfg, self.cfg.actor.micro_batch)
        return self.trainer.critic


def _index(tb: TrainBatch, idx: torch.Tensor) -> TrainBatch:
    return TrainBatch(
        tb.input_ids[idx],
        tb.attention_mask[idx],
        tb.position_ids[idx],
        tb.responses[idx],
        tb.response_mask[idx],
        tb.prompt_len,
    )
