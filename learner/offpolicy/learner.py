"""The learner side of an off-policy run: replay, SAC-family updates at a UTD ratio, counters.

``OffPolicyLearner`` takes experience in either shape -- one vector-env step (the fused loop,
:meth:`ingest_step`) or whole episodes (env workers, a restart, :meth:`ingest_episode`) -- and
owes ``algorithm.utd_ratio`` critic updates per transition once ``train.learning_starts``
transitions were collected; :meth:`train_owed` pays the debt. Fractional ratios accumulate, so
``utd_ratio: 0.25`` with 8 envs is two updates per vector step.

A learner slower than the data (robots streaming, :mod:`learner.offpolicy.remote`) carries at
most ``algorithm.max_backlog_updates`` owed updates and drops the rest; :mod:`learner.offpolicy.utd`
keeps that bookkeeping and puts the ratio actually kept on every metrics row.

Demonstrations (``train.demos``) fill the replay's ``demo`` source and every batch then holds
``replay.demo_ratio`` of them (RLPD's symmetric sampling at 0.5); before any online data the
demos fill the whole batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learner.algorithms.sac import Batch
from learner.offpolicy.batches import split_sample, to_batch
from learner.offpolicy.collect import StepBatch, layout_of
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.feature_replay import FeatureReplay, replay_for
from learner.offpolicy.nets import build, policy_spec
from learner.offpolicy.utd import UtdMeter
from learner.runners.fit import fit
from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, StepLayout
from rlinf_data.demos import demo_kind, open_demos
from rlinf_data.replay import ReplayBuffer, ReplayConfig

log = logging.getLogger(__name__)
SAMPLE_GROUP = 8  # updates drawn from one replay sampling call


def replay_config(cfg: OffPolicyConfig) -> ReplayConfig:
    r, a = cfg.replay, cfg.algorithm
    mix = (
        {"demo": r.demo_ratio, "online": 1.0 - r.demo_ratio} if cfg.train.demos else {"online": 1.0}
    )
    return ReplayConfig(
        capacity=r.capacity, mix=mix, n_step=a.n_step, gamma=a.gamma, per_robot=r.per_robot
    )


def load_demos(replay: ReplayBuffer, path: str, layout: StepLayout, reward: Any = None) -> int:
    """Every episode of the demos at ``path`` (:mod:`rlinf_data.demos`) into the replay's demo
    source; returns transitions. ``reward`` (episode -> rewards), when given, relabels each
    episode's rewards first."""
    n = episodes = 0
    for ep in open_demos(path, key="train.demos"):
        if ep.info.layout != layout:
            raise ConfigError(
                f"key 'train.demos': episodes in {path} have layout {ep.info.layout.to_dict()}, "
                f"the env has {layout.to_dict()}; record them with the run's env.obs_mode and "
                "cameras"
            )
        if reward is not None:
            ep.steps["reward"] = np.asarray(reward(ep), np.float32)
        replay.add_episode(ep, "demo")
        n, episodes = n + len(ep), episodes + 1
    log.info("replay: %d demo transitions from %d episodes of %s", n, episodes, path)
    return n


def intervention_parts(ep: Episode) -> list[Episode]:
    """The runs of taken-over steps of ``ep`` as episodes (each bootstraps from the step after
    it)."""
    flag = ep.steps["intervention"]
    out, i, n = [], 0, len(ep)
    while i < n:
        if not flag[i]:
            i += 1
            continue
        j = i
        while j < n and flag[j]:
            j += 1
        steps = {k: v[i:j] for k, v in ep.steps.items()}
        if j < n:
            final = {k: ep.steps[k][j] for k in ep.info.layout.observation_fields()}
        else:
            final = ep.final
        out.append(Episode(ep.info, steps, final))
        i = j
    return out


def backlog_cap(cfg: OffPolicyConfig, episode_steps: int) -> float:
    """``algorithm.max_backlog_updates`` resolved: null = one episode's worth of updates when
    robots stream (they do not wait for the learner), no cap (0) in simulation (the env waits)."""
    cap = cfg.algorithm.max_backlog_updates
    if cap is None:
        return cfg.algorithm.utd_ratio * episode_steps if cfg.ingest.enabled else 0.0
    return float(cap)


REFILL_SOURCES = ("online", "intervention")  # robot episodes (a taken-over one is still robot data)


class OffPolicyLearner:
    """Policy, SAC-family learner, replay and the counters a checkpoint carries."""

    def __init__(self, cfg: OffPolicyConfig, env_spec: Any, demo_reward: Any = None) -> None:
        self.cfg = cfg
        self.spec = policy_spec(env_spec, cfg.model.use_images)
        self.policy, self.learner = build(cfg, self.spec)
        self.layout = layout_of(env_spec)
        self.episode_steps = int(env_spec.max_episode_steps)
        # frozen encoder: features, not pixels, in the replay (learner.offpolicy.feature_replay)
        self.replay = replay_for(self.layout, replay_config(cfg), self.policy, cfg.model, cfg.seed)
        self.rng = np.random.default_rng(cfg.seed + 7)
        cached = isinstance(self.replay, FeatureReplay)  # batches are flat feature rows then
        self.cameras = [] if cached else self.policy.encoder.cameras
        self.pad = cfg.model.augment_pad if self.cameras else 0
        self.demo_steps = (
            load_demos(self.replay, cfg.train.demos, self.layout, demo_reward)
            if cfg.train.demos
            else 0
        )
        self.env_steps = self.updates = self.episodes = 0
        self.owed = 0.0
        # transitions that arrived but are not in the replay yet (a source that queues sets it)
        self.pending = 0
        self.utd = UtdMeter(cfg.algorithm.utd_ratio, backlog_cap(cfg, self.episode_steps))
        # episode -> rewards applied to stored episodes on a restart's refill (remote:
        # ingest.reward)
        self.online_reward: Any = None
        self.last: dict[str, float] = {}

    # ------------------------------------------------------------ experience
    def ingest_step(self, b: StepBatch) -> None:
        self.replay.add("online", b.obs, b.action, b.reward, b.terminated, b.truncated, b.next_obs)
        self._count(len(b.action))

    def ingest_episode(
        self, ep: Episode, count: bool = True, features: np.ndarray | None = None
    ) -> None:
        """A whole episode; ``count=False`` for a restart's refill (its steps were counted
        before); ``features``: its frames' cached views, computed by the env worker."""
        if features is not None and isinstance(self.replay, FeatureReplay):
            self.replay.add_episode(ep, "online", features)
        else:
            self.replay.add_episode(ep, "online")
        if count:
            self._count(len(ep))

    def add_interventions(self, ep: Episode) -> None:
        """The taken-over runs of ``ep`` (already in ``online`` with the rest of the episode) into
        the ``intervention`` source when the replay has one, else with ``replay.interventions:
        demo`` into the demos' source.

        Why the demos': a human's correction is what a demonstration is -- the right action in a
        state the policy reached -- so HIL-SERL's learner adds the taken-over steps to the buffer
        its symmetric sampling draws half of each batch from; in the online source alone they are
        a sliver of a growing buffer."""
        if not ep.steps["intervention"].any():
            return
        if "intervention" in self.replay.rings:
            source = "intervention"
        elif self.cfg.replay.interventions == "demo" and "demo" in self.replay.rings:
            source = "demo"
        else:
            return
        for part in intervention_parts(ep):
            self.replay.add_episode(part, source)

    def _count(self, n: int) -> None:
        before, self.env_steps = self.env_steps, self.env_steps + n
        start = self.cfg.train.learning_starts
        if self.env_steps > start:
            new = self.cfg.algorithm.utd_ratio * (self.env_steps - max(before, start))
            self.owed = self.utd.owe(self.owed, new)

    # --------------------------------------------------------------- updates
    def train_owed(self) -> int:
        """Run the updates owed so far; returns how many ran."""
        n = int(self.owed)
        if n <= 0:
            return 0
        self.owed -= n
        t0 = time.perf_counter()
        _, self.last = fit(self.learner, self._batches(n).__next__, n)
        self.utd.busy_s += time.perf_counter() - t0
        self.updates += n
        return n

    def _batches(self, n: int) -> Iterator[Batch]:
        """``n`` training batches, drawn from the replay ``SAMPLE_GROUP`` at a time."""
        bs, done = self.cfg.algorithm.batch_size, 0
        while done < n:
            g = min(n - done, SAMPLE_GROUP)
            for part in split_sample(self.replay.sample(g * bs, self.rng), g, self.rng):
                batch = to_batch(part, self.cameras, self.pad, self.rng)
                if self.cfg.algorithm.bc_weight > 0:
                    batch["prior"] = torch.as_tensor(self.prior_rows(part))
                yield batch
            done += g

    def prior_rows(self, sample: dict[str, Any]) -> np.ndarray:
        """Rows of a replay sample whose action is prior data (``algorithm.bc_weight``): the
        demo source's (demos, and a human's takeovers with ``replay.interventions: demo``) and
        any taken-over step of the online source."""
        mix = list(self.replay.cfg.mix)
        demo = mix.index("demo") if "demo" in mix else -1
        return (sample["source"] == demo) | np.asarray(sample["intervention"], bool)

    def metrics(self) -> dict[str, float]:
        m = {f"train/{k}": float(v) for k, v in self.last.items()}
        m.update(
            {"updates": float(self.updates), "replay/online": float(self.replay.size("online"))}
        )
        if "demo" in self.replay.rings:
            m["replay/demo"] = float(self.replay.size("demo"))
        start = self.cfg.train.learning_starts
        arrived = max(0, self.env_steps + self.pending - start)
        m.update(
            self.utd.row(
                self.updates,
                arrived,
                self.owed,
                self.pending,
                time.perf_counter(),
                time.process_time(),
            )
        )
        return m

    def counters(self) -> dict[str, Any]:
        return {
            "env_steps": self.env_steps,
            "updates": self.updates,
            "episodes": self.episodes,
            "owed": self.owed,
            "learner_updates": self.learner.updates,
            **self.utd.counters(),
        }

    def set_counters(self, c: dict[str, Any]) -> None:
        self.env_steps, self.updates, self.episodes = (
            int(c["env_steps"]),
            int(c["updates"]),
            int(c["episodes"]),
        )
        self.owed, self.learner.updates = float(c["owed"]), int(c["learner_updates"])
        self.utd.restore(c)

    def refill(self, store_path: str | Path) -> int:
        """After a restart: every robot episode of the store (``source`` online or intervention, as
        the live ingest takes them) back into the replay, its taken-over runs into the
        ``intervention`` source too, rewards relabelled by ``online_reward`` when set."""
        if demo_kind(store_path) is None:  # a fresh run dir: nothing stored yet
            return 0
        n = 0
        for ep in open_demos(store_path, key="train.episode_store", sources=REFILL_SOURCES):
            if self.online_reward is not None:
                ep.steps["reward"] = np.asarray(self.online_reward(ep), np.float32)
            self.ingest_episode(ep, count=False)
            self.add_interventions(ep)
            n += 1
        log.info(
            "replay: %d robot episodes (%d rows) restored from %s",
            n,
            self.replay.size("online"),
            store_path,
        )
        return n
