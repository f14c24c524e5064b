"""Rollout, reward and actor workers of the reasoning runner.

Plain :class:`learner.worker.Worker` subclasses: ``WorkerGroup.launch`` makes them Ray actors
placed by ``learner.placement``; the ``inline`` driver calls the very same classes in-process.
Micro-batches stream rollout -> reward -> actor through ``learner.channel`` channels under the
step number as key, so step ``s+1`` generation (disaggregated) never mixes with step ``s``.
Weights flow actor -> rollout through a ``learner.weights.WeightStore`` (in-process for the
inline driver); the publish / sync halves are the shared roles of :mod:`learner.roles`, and
checkpoints are the shared format (:func:`learner.llm.model.save_model`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from learner.algorithms import check_groups
from learner.llm.actor import ActorTrainer
from learner.llm.agentic import run_episodes
from learner.llm.agentic.training import (
    encode_demo,
    episode_metrics,
    episode_scores,
    turn_reward_tensor,
)
from learner.llm.algo import gae_advantages, keep_mask, shape_scores, token_advantages
from learner.llm.batch import TrainBatch, make_train_batch
from learner.llm.critic import CriticTrainer, build_critic
from learner.llm.datasets import apply_template
from learner.llm.model import build_model, save_model
from learner.llm.rewards import combine
from learner.llm.rollout import ROLLOUT_BACKENDS, RolloutBatch, SamplingParams
from learner.llm.tokenizer import load_tokenizer
from learner.roles import WeightPublisher, WeightSubscriber, weights_digest
from learner.runners.reasoning_config import ReasoningConfig
from learner.worker import Worker

__all__ = ["RolloutWorker", "RewardWorker", "ActorWorker"]

log = logging.getLogger(__name__)


def _build_backend(cfg: ReasoningConfig, tokenizer_dir: str) -> Any:
    tok = load_tokenizer(tokenizer_dir)
    backend_cls = ROLLOUT_BACKENDS.get(cfg.rollout.backend)
    if cfg.rollout.backend == "hf":
        model = build_model(cfg.model, tok)
        if hasattr(model, "merge_and_unload"):  # rollout serves merged weights, never adapters
            model = model.merge_and_unload()
        return backend_cls(model, tok, device="cuda" if torch.cuda.is_available() else "cpu")
    return backend_cls.from_config(cfg, tokenizer_dir)  # type: ignore[attr-defined]


class RolloutWorker(WeightSubscriber, Worker):
    """Generates groups of samples with the configured backend; syncs weights before each call."""

    def __init__(self, cfg: ReasoningConfig, tokenizer_dir: str, store: Any) -> None:
        self.cfg = cfg
        self.store = store
        # generate / evaluate may be called concurrently (actor max_concurrency > 1): never swap
        # weights under a running generation
        self._lock = threading.RLock()
        self.backend = _build_backend(cfg, tokenizer_dir)
        self.tokenizer = self.backend.tokenizer
        r = cfg.rollout
        self.params = SamplingParams(
            n=r.n,
            temperature=r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            max_new_tokens=r.max_new_tokens,
            seed=cfg.train.seed + self.rank,
        )
        self.tools = None
        if (
            cfg.agent.enabled
        ):  # the tool worker lives beside the engine: observations go straight back
            from learner.llm.tools import ToolWorker

            self.tools = ToolWorker(
                cfg.agent.tools, cfg.agent.tool_timeout_s, options=cfg.agent.tool_options
            )

    @property
    def weight_version(self) -> int:
        return self.backend.weight_version

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.backend.update_weights(state, version)

    def _prompts(self, prompts: Sequence[str]) -> list[str]:
        d = self.cfg.data
        return [
            apply_template(self.tokenizer, p, d.prompt_format, d.system_prompt) for p in prompts
        ]

    def _sample(self, prompts: Sequence[str], params: SamplingParams) -> RolloutBatch:
        """Single-turn samples, or multi-turn tool-using episodes when ``agent.tools`` is set."""
        texts = self._prompts(prompts)
        if self.tools is None:
            return self.backend.generate(texts, params)
        ids = [list(self.tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
        return run_episodes(self.backend, ids, params, self.tools, self.cfg.agent)

    def generate(
        self,
        prompts: Sequence[str],
        answers: Sequence[str],
        min_version: int,
        out: Any = None,
        key: Any = None,
        first_index: int = 0,
    ) -> RolloutBatch | int:
        """Sample ``n`` responses per prompt in micro-batches; each goes to ``out`` (a channel,
        under ``key``) as soon as it is ready, or all are returned together when ``out`` is None."""
        with self._lock:
            return self._generate(prompts, answers, min_version, out, key, first_index)

    def _generate(
        self,
        prompts: Sequence[str],
        answers: Sequence[str],
        min_version: int,
        out: Any,
        key: Any,
        first_index: int,
    ) -> RolloutBatch | int:
        self.backend.onload()
        self.sync_weights(min_version, self.cfg.train.timeout_s)
        mb = self.cfg.rollout.micro_batch_prompts or len(prompts)
        batches = []
        for s in range(0, len(prompts), mb):
            t0 = time.perf_counter()
            b = self._sample(prompts[s : s + mb], self.params)
            b.prompt_index = [first_index + s + i for i in b.prompt_index]
            b.extra["answers"] = [answers[i - first_index] for i in b.prompt_index]
            b.extra["t_generate"] = time.perf_counter() - t0
            if out is not None:
                out.put(b, key=key, timeout=self.cfg.train.timeout_s)
            else:
                batches.append(b)
        self.backend.offload()
        if out is not None:
            return -(-len(prompts) // mb)
        merged = RolloutBatch.concat(batches) if len(batches) > 1 else batches[0]
        merged.extra["t_generate"] = sum(b.extra["t_generate"] for b in batches)
        return merged

    def evaluate(
        self, prompts: Sequence[str], answers: Sequence[str], min_version: int
    ) -> dict[str, float]:
        """Greedy accuracy (first reward of ``reward.weights`` > 0.5) on held-out prompts."""
        with self._lock:
            return self._evaluate(prompts, answers, min_version)

    def _evaluate(
        self, prompts: Sequence[str], answers: Sequence[str], min_version: int
    ) -> dict[str, float]:
        self.backend.onload()
        self.sync_weights(min_version, self.cfg.train.timeout_s)
        greedy = SamplingParams(
            n=1, temperature=0.0, max_new_tokens=self.cfg.rollout.max_new_tokens
        )
        b = self._sample(prompts, greedy)
        name = next(iter(self.cfg.reward.weights))
        scores = combine({name: 1.0}, b.extra.get("final_texts", b.texts), list(answers))
        self.backend.offload()
        return {
            "eval/accuracy": sum(s > 0.5 for s in scores) / len(scores),
            "eval/weight_version": b.weight_version,
            **episode_metrics(b.extra, "eval"),
        }

    def weight_version_now(self) -> int:
        return self.backend.weight_version

    def digest(self) -> str:
        return weights_digest(self.backend.model)


class RewardWorker(Worker):
    """Scores rollout micro-batches with the weighted reward functions of ``reward.weights``."""

    def __init__(self, cfg: ReasoningConfig) -> None:
        self.cfg = cfg

    def score(self, batch: RolloutBatch) -> RolloutBatch:
        t0 = time.perf_counter()
        # agentic episodes: the outcome is judged on the final answer, plus the per-turn rewards
        outcome = combine(
            self.cfg.reward.weights,
            batch.extra.get("final_texts", batch.texts),
            batch.extra["answers"],
        )
        batch.extra["outcome"] = outcome
        batch.extra["scores"] = episode_scores(outcome, batch.extra.get("turn_rewards"))
        batch.extra["t_reward"] = time.perf_counter() - t0
        return batch

    def score_stream(self, inp: Any, out: Any, key: Any, count: int) -> int:
        """Move ``count`` micro-batches of ``key`` from ``inp`` to ``out``, scoring each."""
        for _ in range(count):
            out.put(
                self.score(inp.get(key=key, timeout=self.cfg.train.timeout_s)),
                key=key,
                timeout=self.cfg.train.timeout_s,
            )
        return count


class ActorWorker(WeightPublisher, Worker):
    """Owns the trainable model: SFT warm-up, log-probs, policy updates, weight publication."""

    def __init__(self, cfg: ReasoningConfig, tokenizer_dir: str, store: Any) -> None:
        self.cfg = cfg
        self.store = store
        self.tokenizer = load_tokenizer(tokenizer_dir)
        model = build_model(cfg.model, self.tokenizer)
        if torch.cuda.is_available():  # a GPU slot: the worker sees only its own GPUs
            model = model.to("cuda")
        self.trainer = ActorTrainer(
            model, cfg.actor, cfg.algorithm, cfg.rollout.temperature, cfg.rollout.max_new_tokens
        )
        self.ref_model = None
        self.version = 0
        self.rl_steps = 0  # policy updates so far: the checkpoint's ``iteration``

    def publish_state(self) -> dict[str, torch.Tensor]:
        model = self.trainer.model
        if hasattr(model, "merge_and_unload"):  # LoRA: publish merged weights, base names
            import copy

            model = copy.deepcopy(model).merge_and_unload()
        return {k: v.detach() for k, v in model.state_dict().items()}

    def sft(
        self, demos: Sequence[dict[str, str]], start: int = 0, stop: int | None = None
    ) -> dict[str, float]:
        """SFT on ``{prompt, response}`` demonstrations (steps ``start..stop`` of ``sft.steps``: the
        runner may evaluate between chunks), then publish; tool observations are masked out."""
        s = self.cfg.sft
        stop = s.steps if stop is None else stop
        if start == 0 or not hasattr(self, "_sft_gen"):
            self._sft_gen = torch.Generator().manual_seed(self.cfg.train.seed)
        enc = lambda text: self.tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
        eos = self.tokenizer.eos_token_id
        loss = float("nan")
        t0 = time.perf_counter()
        from tqdm import tqdm  # a bar: SFT can take a minute or more on CPU

        for i in tqdm(
            range(start, stop), desc="sft warm-up", unit="step", mininterval=1.0, leave=False
        ):
            # linear decay to 10%: a constant lr leaves the noisy-label loss bouncing around
            self.trainer.set_lr(s.lr * (1.0 - 0.9 * i / max(1, s.steps)))
            idx = torch.randint(len(demos), (s.batch_size,), generator=self._sft_gen).tolist()
            rows = [demos[i] for i in idx]
            resp = [
                encode_demo(self.tokenizer, r["response"], eos) for r in rows
            ]  # tool output masked
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
        return {
            "sft/loss": loss,
            "sft/seconds": time.perf_counter() - t0,
            "sft/step": float(stop),
            "weight_version": self.publish(),
        }

    def _make_ref(self) -> None:
        """Freeze a copy of the current (post-SFT) policy as the KL reference, if KL is on."""
        if self.cfg.algorithm.kl_coef > 0:
            import copy

            self.ref_model = copy.deepcopy(self.trainer.model).eval().requires_grad_(False)

    def train_stream(self, inp: Any, key: Any, count: int) -> dict[str, float]:
        """Collect ``count`` scored micro-batches of ``key`` (log-probs computed as each arrives,
        overlapping generation), then update once on the step's batch and publish."""
        parts = []
        t_logp = 0.0
        for _ in range(count):
            b = inp.get(key=key, timeout=self.cfg.train.timeout_s)
            t0 = time.perf_counter()
            tb = make_train_batch(
                b.prompt_ids, b.response_ids, self.tokenizer.pad_token_id, b.extra.get("loss_mask")
            )
            b.extra["old_logp"] = self.trainer.logprobs(tb)
            t_logp += time.perf_counter() - t0
            parts.append(b)
        return self.train(parts, t_logp)

    def train(self, parts: Sequence[RolloutBatch], t_logp: float = 0.0) -> dict[str, float]:
        """Advantages + policy update on one step's micro-batches; returns metrics."""
        self.rl_steps += 1
        batch = RolloutBatch.concat(list(parts)) if len(parts) > 1 else parts[0]
        stale = self.version - batch.weight_version
        tb = make_train_batch(
            batch.prompt_ids,
            batch.response_ids,
            self.tokenizer.pad_token_id,
            batch.extra.get("loss_mask"),
        )
        t0 = time.perf_counter()
        if all("old_logp" in p.extra for p in parts):
            width = tb.responses.shape[1]
            old = torch.cat(
                [
                    torch.nn.functional.pad(
                        p.extra["old_logp"], (0, width - p.extra["old_logp"].shape[1])
                    )
                    for p in parts
                ]
            )
        else:
            old = self.trainer.logprobs(tb)
        ref = None
        if self.ref_model is not None:
            from learner.llm.batch import response_logprobs

            with torch.no_grad():
                ref = response_logprobs(
                    self.ref_model, tb.to(self.trainer.device), self.cfg.rollout.temperature
                ).cpu()
        t_logp += time.perf_counter() - t0
        raw = torch.tensor(batch.extra["scores"], dtype=torch.float32)
        lengths = tb.response_mask.sum(-1)
        scores = shape_scores(self.cfg.algorithm, raw, lengths, self.cfg.rollout.max_new_tokens)
        n = self.cfg.rollout.n
        check_groups(
            batch.prompt_index, n
        )  # advantages and dynamic sampling reshape [N] -> [N/n, n]
        keep = keep_mask(self.cfg.algorithm, scores, n)
        metrics = {
            "rollout/reward": float(raw.mean()),
            "rollout/response_len": float(lengths.mean()),
            "rollout/staleness": float(stale),
            "rollout/kept_frac": float(keep.float().mean()),
            "time/generate": sum(p.extra.get("t_generate", 0.0) for p in parts),
            "time/reward": sum(p.extra.get("t_reward", 0.0) for p in parts),
            **episode_metrics(batch.extra),
        }
        dense = None
        if "turn_rewards" in batch.extra and not self.cfg.algorithm.estimator.signal == "outcome":
            # token-level estimators: per-turn rewards on their turns' tokens, the outcome on the last
            dense = turn_reward_tensor(batch.extra["turn_rewards"], tb.responses.shape[1])
            scores = shape_scores(
                self.cfg.algorithm,
                torch.tensor(batch.extra["outcome"], dtype=torch.float32),
                lengths,
                self.cfg.rollout.max_new_tokens,
            )
        t1 = time.perf_counter()
        if bool(keep.any()):
            idx = keep.nonzero().squeeze(-1)
            sub = tb.slice(0, len(tb)) if bool(keep.all()) else _index(tb, idx)
            metrics.update(
                self._update(
                    sub,
                    scores[idx],
                    old[idx],
                    None if ref is None else ref[idx],
                    None if dense is None else dense[idx],
                )
            )
        metrics["time/logprob"] = t_logp
        metrics["time/train"] = time.perf_counter() - t1
        metrics["weight_version"] = float(self.publish())
        return metrics

    def _update(
        self,
        tb: TrainBatch,
        scores: torch.Tensor,
        old: torch.Tensor,
        ref: torch.Tensor | None,
        dense: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """Advantages (critic-free, or GAE on the critic's values) and the actor (+ critic) update."""
        algo = self.cfg.algorithm
        if not algo.estimator.needs_critic:
            adv = token_advantages(
                algo, scores, tb.response_mask, self.cfg.rollout.n, old, ref, dense
            )
            return self.trainer.update(tb, old, adv, ref)
        values = self._critic().values(tb)
        adv, returns = gae_advantages(algo, scores, tb.response_mask, values, old, ref, dense)
        metrics = self.trainer.update(tb, old, adv, ref, old_values=values, returns=returns)
        m = tb.response_mask.bool()
        var = returns[m].var() if int(m.sum()) > 1 else torch.tensor(0.0)
        metrics["critic/explained_var"] = (
            float(1.0 - (returns - values)[m].var() / var) if var > 0 else 0.0
        )
        return metrics

    def _critic(self) -> CriticTrainer:
        """The critic, built on first use, i.e. from the actor's weights after SFT (in this process)."""
        if self.trainer.critic is None:
            ccfg = self.cfg.algorithm.critic
            assert (
                ccfg is not None
            )  # AlgorithmConfig.validate: an estimator needing a critic requires it
            model = build_critic(self.cfg.model, ccfg, self.tokenizer, self.trainer.model).to(
                self.trainer.device
            )
            self.trainer.critic = CriticTrainer(model, ccfg, self.cfg.actor.micro_batch)
        return self.trainer.critic

    def save(self, path: str, extra: dict[str, Any] | None = None) -> str:
        """The shared checkpoint (safetensors + meta.json, HF config and tokenizer beside it) that
        ``rlinf eval`` reads; the critic, if any, as ``critic.safetensors`` in the same directory."""
        from rlinf_contracts.config import to_dict

        out = save_model(
            self.trainer.model,
            self.tokenizer,
            path,
            iteration=self.rl_steps,
            weight_version=self.version,
            config=to_dict(self.cfg),
            extra={"optimizer_steps": self.trainer.steps, **(extra or {})},
        )
        if self.trainer.critic is not None:
            self.trainer.critic.save(out)
        return str(out)


def _index(tb: Any, idx: torch.Tensor) -> Any:
    from learner.llm.batch import TrainBatch

    return TrainBatch(
        tb.input_ids[idx],
        tb.attention_mask[idx],
        tb.position_ids[idx],
        tb.responses[idx],
        tb.response_mask[idx],
        tb.prompt_len,
    )
