"""Profile the embodied on-policy workload in this process: the per-component cost curves.

What is measured (for the batch sizes a placement can produce: ``num_envs / k`` for the
process counts and pipeline depths the candidates use), each on the config's own env and model:

- ``env_step``: one vector-env step of ``b`` envs;
- ``infer``: one policy query (actions, log-probs, values) on ``b`` observations;
- ``train``: one ``Trainer.train`` call on a trajectory of ``b`` rows x ``steps`` (all epochs and
  minibatches of the config);
- ``publish``: copying the weights to CPU for a publish; sizes of weights, one observation and
  one trajectory row-step (what channels and the weight store carry); resident memory of the
  envs and of the model + optimizer (memory per worker).

The profile is cached per workload (:func:`learner.scheduling.curves.workload_key`): the env,
model, algorithm, actor and rollout length, not the placement or the depth. Budget: about
10-40 s on a loaded 2-core machine, well inside the 60 s the issue allows.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from learner.scheduling.curves import Curve, load_cached, reference_s, store_cached, workload_key

log = logging.getLogger(__name__)
PROFILE_VERSION = 2  # 2: sustained reference kernel


@dataclass
class EmbodiedProfile:
    num_envs: int
    steps: int
    env_step: Curve = field(default_factory=Curve)
    infer: Curve = field(default_factory=Curve)
    train: Curve = field(default_factory=Curve)
    publish_s: float = 0.0
    weight_bytes: int = 0
    obs_bytes_per_env: int = 0
    row_step_bytes: int = 0
    memory: dict[str, int] = field(default_factory=dict)
    build_s: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    ref_s: float = 0.0  # curves.reference_s() while profiling
    # the channel workers' per-step work / the profile's bare env step and policy query (1 unless
    # calibrated): the rollout worker also builds the trajectory, seeds and bootstraps values
    loop_env_x: float = 1.0
    loop_infer_x: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("env_step", "infer", "train"):
            d[k] = getattr(self, k).to_dict()
        return d

    def scaled(self, factor: float) -> EmbodiedProfile:
        """Compute times x ``factor`` (sizes, memory and start-up unchanged): a calibration."""
        return dataclasses.replace(
            self,
            env_step=self.env_step.scaled(factor),
            infer=self.infer.scaled(factor),
            train=self.train.scaled(factor),
            publish_s=self.publish_s * factor,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EmbodiedProfile:
        d = dict(d)
        for k in ("env_step", "infer", "train"):
            d[k] = Curve.from_dict(d[k])
        return cls(**d)


def embodied_workload(cfg: Any) -> dict[str, Any]:
    """The parts of an ``EmbodiedConfig`` that change component costs (not placement or depth)."""
    from rlinf_contracts.config import to_dict

    raw = to_dict(cfg)
    return {k: raw[k] for k in ("env", "model", "algorithm", "actor", "seed")} | {
        "steps": raw["rollout"]["steps_per_iteration"],
        "v": PROFILE_VERSION,
    }


def batch_sizes(num_envs: int, group: int, max_div: int = 4) -> list[int]:
    """``num_envs / k`` for k = 1, 2, 4 ... while it stays a multiple of the env group.

    >>> batch_sizes(32, 1), batch_sizes(16, 8)
    ([32, 16, 8], [16, 8])
    """
    out, k = [], 1
    while k <= max_div and num_envs % k == 0 and (num_envs // k) % group == 0:
        out.append(num_envs // k)
        k *= 2
    return out


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except OSError:
        return 0


def _nbytes(obj: Any) -> int:
    if hasattr(obj, "nbytes"):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def _time_steps(stages: Any, policy: Any, n: int) -> tuple[float, float]:
    """Median env-step and policy-query seconds over ``n`` steps (after one warm-up)."""
    import statistics

    from learner.rollout.collect import policy_step

    env, envs, infs = stages.envs[0], [], []
    for i in range(n + 1):
        t0 = time.perf_counter()
        actions, _, _ = policy_step(policy, stages.obs[0])
        t1 = time.perf_counter()
        stages.obs[0] = env.step(actions)[0]
        t2 = time.perf_counter()
        if i:
            infs.append(t1 - t0)
            envs.append(t2 - t1)
    return statistics.median(envs), statistics.median(infs)


def _profile_batch(cfg: Any, b: int, steps: int, prof: EmbodiedProfile, n: int) -> None:
    from learner.actor.trainer import Trainer, cpu_state_dict, policy_spec
    from learner.rollout.collect import collect_inline
    from learner.rollout.envs import StageEnvs

    rss0, t0 = _rss(), time.perf_counter()
    stages = StageEnvs(cfg.env.name, b, 1, cfg.algorithm.env_group_size, **cfg.env.factory_kwargs())
    rss1, t1 = _rss(), time.perf_counter()
    try:
        trainer = Trainer(cfg, policy_spec(cfg, stages.spec), 0, 1)
        t2 = time.perf_counter()
        stages.reset(cfg.seed, 0, 0)
        prof.env_step.points[b], prof.infer.points[b] = _time_steps(stages, trainer.policy(), n)
        traj = collect_inline(
            trainer.policy(),
            stages,
            steps,
            cfg.algorithm.gamma,
            seed=cfg.seed,
            iteration=0,
            first_stream=0,
            single_episode=cfg.algorithm.single_episode,
        )
        trainer.update(traj)  # warm-up: optimizer state, allocator
        t3 = time.perf_counter()
        trainer.update(traj)
        prof.train.points[b] = time.perf_counter() - t3
        if b == prof.num_envs:
            t4 = time.perf_counter()
            state = cpu_state_dict(trainer.policy())
            prof.publish_s = time.perf_counter() - t4
            prof.weight_bytes = _nbytes(state)
            prof.obs_bytes_per_env = _nbytes(stages.obs[0]) // b
            prof.row_step_bytes = _nbytes(traj.__dict__) // max(b * steps, 1)
            prof.memory = {
                "env_worker": max(rss1 - rss0, 0),
                "model_optimizer": 4 * prof.weight_bytes,
                "trajectory": _nbytes(traj.__dict__),
            }
            prof.build_s = {"env": t1 - t0, "model": t2 - t1}
    finally:
        stages.close()


def profile_embodied(cfg: Any, *, refresh: bool = False, timing_steps: int = 6) -> EmbodiedProfile:
    """The workload's profile, from the cache unless ``refresh``; measured here otherwise."""
    import torch

    from learner.runners.embodied import steps_per_iteration

    key = workload_key("embodied", embodied_workload(cfg))
    cached = None if refresh else load_cached(key)
    if cached is not None:
        return EmbodiedProfile.from_dict(cached)
    cfg = copy.deepcopy(cfg)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a worker on one slot runs one torch thread
    t0 = time.perf_counter()
    try:
        steps = _steps(cfg, steps_per_iteration)
        prof = EmbodiedProfile(cfg.env.num_envs, steps)
        ref0 = reference_s()
        for b in batch_sizes(cfg.env.num_envs, cfg.algorithm.env_group_size):
            _profile_batch(cfg, b, steps, prof, timing_steps)
        prof.ref_s = (ref0 + reference_s()) / 2
    finally:
        torch.set_num_threads(threads)
    prof.seconds = time.perf_counter() - t0
    store_cached(key, prof.to_dict())
    log.info("profiled %s in %.1f s (cached as %s)", cfg.env.name, prof.seconds, key)
    return prof


def _steps(cfg: Any, steps_per_iteration: Any) -> int:
    from learner.rollout.envs import build_env

    if not cfg.algorithm.single_episode:
        return cfg.rollout.steps_per_iteration
    env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
    try:
        return steps_per_iteration(cfg, env.spec.max_episode_steps)
    finally:
        env.close()
