"""How the three components become processes: fused (one per rank) or channel-connected groups.

Both topologies answer the same four questions for the runner -- the env spec, the group
that trains (publish / save / load), one synchronous iteration, shutdown -- so the runner's
loop does not know which one it drives. :data:`TOPOLOGIES` maps a name to each;
:func:`topology_name` picks one from the placement. A fused placement of one process
(:func:`runs_in_process`) is hosted in the calling process when the run has no Ray cluster.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from learner.actor.trainer import policy_spec
from learner.actor.worker import ActorWorker
from learner.placement import Placement, PlacementError, parse_placement
from learner.rollout.streams import StreamLayout
from learner.rollout.trajectory import EpisodeStats
from learner.rollout.workers import EnvWorker, RolloutWorker
from learner.runners.config import EmbodiedConfig
from learner.runners.fused import FusedWorker, InProcessGroup
from learner.worker import GroupResult, WorkerGroup
from rlinf_contracts.registry import Registry

COMPONENTS = ("env", "rollout", "actor")
TOPOLOGIES: Registry[type] = Registry("topology")


@dataclass
class IterationOutput:
    stats: EpisodeStats
    train: dict[str, float]
    weight_version: int
    timings: dict[str, float] = field(default_factory=dict)


def topology_name(cfg: EmbodiedConfig, placement: Placement) -> str:
    """``fused`` when env, rollout and actor have identical processes and fusing is on."""
    same = len({tuple(map(tuple, placement[c].process_slots)) for c in COMPONENTS}) == 1
    return "fused" if same and cfg.rollout.fuse_collocated else "channels"


def runs_in_process(cfg: EmbodiedConfig, num_slots: int) -> bool:
    """True when the run is one fused process on this machine: no Ray needed."""
    if cfg.cluster.address or cfg.cluster.resources:
        return False
    try:
        placement = parse_placement(cfg.placement, num_slots, list(COMPONENTS))
    except PlacementError:
        return False  # the preflight reports it; the cluster path reports it again
    if any(getattr(placement[c], "resources", None) for c in COMPONENTS):
        return False  # '<ranks>@<resource>' pins processes to a Ray node
    return topology_name(cfg, placement) == "fused" and placement["actor"].num_processes == 1


def wait_all(calls: list[GroupResult]) -> list[list[Any]]:
    """Results of several group calls; the first worker error is raised at once.

    Why not ``wait()`` one by one: the groups wait on each other through channels, so when the
    rollout fails the env worker would sit in its channel timeout before its result came back.
    """
    import ray

    owner = {ref: call for call in calls for ref in call.refs}
    pending = list(owner)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            try:
                ray.get(ref)
            except Exception:
                owner[ref].wait()
    return [call.wait() for call in calls]


def _merge_stats(results: list[dict[str, Any]]) -> EpisodeStats:
    stats = EpisodeStats()
    for r in results:
        stats.extend(r["stats"])
    return stats


@TOPOLOGIES.register("fused")
class FusedTopology:
    def __init__(self, cfg: EmbodiedConfig, cluster: Any, placement: Placement, store: Any) -> None:
        name = f"{cfg.name}-fused"
        if getattr(cluster, "in_process", False):
            self.trainers: Any = InProcessGroup(
                FusedWorker, name, placement["actor"], cluster.slot_kind, cfg, store
            )
        else:
            self.trainers = WorkerGroup.launch(
                FusedWorker, name, cluster, placement["actor"], cfg, store
            )
        self.env_spec = self.trainers.execute_on([0], "env_spec").wait()[0]

    def iterate(self, iteration: int, reset: bool, steps: int) -> IterationOutput:
        res = self.trainers.call("run_iteration", iteration, reset, steps).wait()
        timings = {k: float(np.mean([r[k] for r in res])) for k in ("rollout_s", "train_s")}
        return IterationOutput(
            _merge_stats(res), res[0]["train"], res[0]["weight_version"], timings
        )

    def shutdown(self) -> None:
        self.trainers.shutdown()


@TOPOLOGIES.register("channels")
class ChannelTopology:
    """Env, rollout and actor groups on their own placements, connected by three channels."""

    def __init__(
        self, cfg: EmbodiedConfig, cluster: Any, placement: Placement, store_name: str
    ) -> None:
        from learner.channel import Channel

        tag = f"{cfg.name}-{uuid.uuid4().hex[:8]}"
        self.channels = [Channel.create(f"{tag}-{n}") for n in ("obs", "actions", "trajectories")]
        self.layout = StreamLayout(
            *self.channels,
            n_env=placement["env"].num_processes,
            n_rollout=placement["rollout"].num_processes,
            n_actor=placement["actor"].num_processes,
            stages=cfg.rollout.pipeline_stages,
            timeout=cfg.rollout.channel_timeout,
        )
        self.layout.check()
        self.groups: list[WorkerGroup] = []
        try:
            self.envs = self._launch(EnvWorker, "env", cluster, placement, cfg, self.layout)
            self.env_spec = self.envs.execute_on([0], "env_spec").wait()[0]
            spec = policy_spec(cfg, self.env_spec)
            self.rollouts = self._launch(
                RolloutWorker, "rollout", cluster, placement, cfg, spec, self.layout, store_name
            )
            self.trainers = self._launch_actor(cluster, placement, cfg, spec, store_name)
        except BaseException:
            self.shutdown()
            raise

    def _launch_actor(
        self, cluster: Any, placement: Placement, cfg: EmbodiedConfig, spec: Any, store_name: str
    ) -> WorkerGroup:
        if not cfg.rollout.reallocate:
            return self._launch(
                ActorWorker, "actor", cluster, placement, cfg, spec, self.layout, store_name
            )
        from learner.scheduling.realloc import ReallocatingActorWorker, lent_slots

        n = placement["actor"].num_processes
        lend = [
            {
                "lend": lent_slots(
                    placement["env"].process_slots, placement["rollout"].process_slots, r, n
                )
            }
            for r in range(n)
        ]
        group = WorkerGroup.launch(
            ReallocatingActorWorker,
            f"{cfg.name}-actor",
            cluster,
            placement["actor"],
            cfg,
            spec,
            self.layout,
            store_name,
            per_rank_kwargs=lend,
        )
        self.groups.append(group)
        return group

    def _launch(
        self,
        cls: type,
        component: str,
        cluster: Any,
        placement: Placement,
        cfg: EmbodiedConfig,
        *args: Any,
    ) -> WorkerGroup:
        group = WorkerGroup.launch(
            cls, f"{cfg.name}-{component}", cluster, placement[component], cfg, *args
        )
        self.groups.append(group)
        return group

    def iterate(self, iteration: int, reset: bool, steps: int) -> IterationOutput:
        n = self.env_spec.num_envs
        env_res, roll_res, act_res = wait_all(
            [
                self.envs.call("run_iteration", iteration, reset, steps),
                self.rollouts.call("run_iteration", iteration, steps, n),
                self.trainers.call("run_iteration", iteration),
            ]
        )
        timings = {
            "env_busy_s": float(np.mean([r["env_busy_s"] for r in env_res])),
            "infer_busy_s": float(np.mean([r["infer_busy_s"] for r in roll_res])),
            "train_s": float(np.mean([r["train_busy_s"] for r in act_res])),
        }
        stats = _merge_stats(roll_res)
        stats.revisited = sum(r.get("revisited_episodes", 0) for r in env_res)
        return IterationOutput(stats, act_res[0]["train"], act_res[0]["weight_version"], timings)

    def shutdown(self) -> None:
        for group in self.groups:
            group.shutdown()
        for ch in self.channels:
            ch.close()
