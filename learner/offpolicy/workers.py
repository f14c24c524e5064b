"""The two worker roles of an off-policy run and where the learner's experience comes from.

* :class:`LearnerWorker` owns the replay, the updates, logging, checkpoints and the episode
  store of online transitions. Its experience comes from a *source*: :class:`InlineEnvs` (fused:
  the env is stepped in the learner's own process, ``train.steps_per_round`` vector steps between
  two bursts of updates) or :class:`EpisodeFeed` (env workers elsewhere, finished episodes
  through a bounded channel; weights go back through the run's ``WeightStore`` every
  ``train.publish_every`` updates).
* :class:`CollectorWorker` (env + acting policy in one process, unlike the on-policy
  :class:`~learner.rollout.workers.EnvWorker`, which only steps envs) steps its share of the envs
  with the newest weights it has, for as long as the run lasts (the runner stops it once the
  learner is done). The bounded channel (``train.queue_episodes``) keeps it from running far
  ahead of a slower learner.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from learner.offpolicy.collect import Collector
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.feature_replay import FrameFeatures
from learner.offpolicy.learner import OffPolicyLearner
from learner.offpolicy.loop import TrainLoop
from learner.rollout.envs import build_env
from learner.worker import Worker

log = logging.getLogger(__name__)
FEED_TIMEOUT_S = 300.0
SYNC_EVERY = 8  # vector steps between two checks for newer weights (one store call each)


def _env(cfg: OffPolicyConfig, num_envs: int) -> Any:
    return build_env(cfg.env.name, num_envs, **cfg.env.factory_kwargs())


class InlineEnvs:
    """Fused source: the learner steps the env itself (always with the newest weights)."""

    def __init__(self, cfg: OffPolicyConfig, env: Any, core: OffPolicyLearner) -> None:
        self.cfg, self.env = cfg, env
        self.collector = Collector(
            env, core.policy, cfg.env.name, seed=cfg.seed * 100_003 + core.env_steps
        )

    def pull(self, core: OffPolicyLearner) -> list[Any]:
        finished = []
        for _ in range(self.cfg.train.steps_per_round):
            b = self.collector.step(random=core.env_steps < self.cfg.train.warmup_steps)
            core.ingest_step(b)
            finished += b.finished
        return finished

    def step_s(self) -> float:
        return self.collector.step_s

    def publish(self, core: OffPolicyLearner) -> int:
        return core.updates  # the collector acts with the learner's own policy object

    def close(self) -> None:
        self.env.close()


class EpisodeFeed:
    """Distributed source: finished episodes from env workers; weights back every N updates."""

    def __init__(self, cfg: OffPolicyConfig, channel: Any, store_name: str) -> None:
        from learner.weights import WeightStore

        self.cfg, self.channel = cfg, channel
        self.store = WeightStore.connect(store_name)
        self.version, self.published_at, self._step_s = 0, -1, 0.0

    def pull(self, core: OffPolicyLearner) -> list[Any]:
        from learner.channel.errors import ChannelEmpty

        items = []
        if core.owed < 1:  # nothing to train on: wait for data
            items.append(self.channel.get(timeout=FEED_TIMEOUT_S))
        while len(items) < 64:
            try:
                items.append(self.channel.get_nowait())
            except ChannelEmpty:
                break
        episodes = []
        for ep, step_s, features in items:
            core.ingest_episode(ep, features=features)
            self._step_s = step_s
            episodes.append(ep)
        return episodes

    def step_s(self) -> float:
        return self._step_s

    def publish(self, core: OffPolicyLearner) -> int:
        if (
            self.published_at < 0
            or core.updates - self.published_at >= self.cfg.train.publish_every
        ):
            state = {k: v.detach().cpu().clone() for k, v in core.policy.state_dict().items()}
            self.version = int(self.store.publish(state))
            self.published_at = core.updates
        return self.version

    def close(self) -> None:
        pass


class LearnerWorker(Worker):
    """Replay + updates + outputs; fused when built without a channel (it then owns the env)."""

    def __init__(
        self,
        cfg: OffPolicyConfig,
        env_spec: Any = None,
        channel: Any = None,
        store_name: str | None = None,
    ) -> None:
        env = None
        if channel is None:
            env = _env(cfg, cfg.env.num_envs)
            env_spec = env.spec
        self.core = OffPolicyLearner(cfg, env_spec)
        self.loop = TrainLoop(cfg, self.core)  # resumes (checkpoint + replay refill) if asked
        self.source = (
            InlineEnvs(cfg, env, self.core)
            if channel is None
            else EpisodeFeed(cfg, channel, store_name)
        )

    def train(self, seconds_left: float | None) -> dict[str, Any]:
        return self.loop.run(self.source, seconds_left)

    def close(self) -> None:
        self.source.close()
        self.loop.close()


def episode_features(cfg: OffPolicyConfig, policy: Any, rank: int) -> FrameFeatures | None:
    """The env worker's own pass of the frozen backbone over its episodes' frames
    (``model.encoder.features_on: env``; :mod:`learner.offpolicy.feature_replay`), with the
    pretrained weights loaded here so even warm-up episodes, acted before the first weights
    arrive, are encoded by the backbone the learner has; None when the learner encodes."""
    from learner.models.encoder_kinds import load_pretrained

    enc = cfg.model.encoder
    pixels = policy.encoder.pixels
    if not getattr(pixels, "caches_features", False) or enc.features_on != "env":
        return None
    load_pretrained(pixels, enc.weights)
    seed = cfg.seed * 100_003 + 7919 * (rank + 1)
    return FrameFeatures(
        pixels, policy.encoder.cameras, enc.cached_views, cfg.model.augment_pad, seed
    )


class CollectorWorker(Worker):
    """Steps ``env.num_envs / world_size`` envs with the newest published actor, forever."""

    def __init__(self, cfg: OffPolicyConfig) -> None:
        from learner.models import build_policy
        from learner.offpolicy.nets import policy_spec

        self.cfg = cfg
        n = cfg.env.num_envs // self.world_size + (self.rank < cfg.env.num_envs % self.world_size)
        self.env = _env(cfg, max(1, n))
        self.policy = build_policy(
            "sac", policy_spec(self.env.spec, cfg.model.use_images), **cfg.model.build_kwargs()
        )
        self.collector = Collector(
            self.env, self.policy, cfg.env.name, seed=cfg.seed * 100_003 + 7919 * (self.rank + 1)
        )
        self.features = episode_features(cfg, self.policy, self.rank)

    def env_spec(self) -> Any:
        return self.env.spec

    def collect(self, channel: Any, store_name: str, warmup: int) -> int:
        from learner.weights import WeightStore

        store = WeightStore.connect(store_name)
        random_steps = math.ceil(warmup / self.world_size)
        steps = 0
        while True:
            if (
                steps // self.env.num_envs % SYNC_EVERY == 0
                and store.version() > self.collector.version
            ):
                version, state = store.latest()
                self.policy.load_state_dict(state)
                self.collector.version = version
            b = self.collector.step(random=steps < random_steps or self.collector.version == 0)
            steps += len(b.action)
            for ep in b.finished:
                feats = None if self.features is None else self.features.episode(ep)
                channel.put((ep, self.collector.step_s, feats), timeout=FEED_TIMEOUT_S)

    def close(self) -> None:
        self.env.close()
