"""The one topology registry, and the embodied runner's two: fused or channel-connected groups.

:data:`TOPOLOGIES` holds every runner's topologies under ``"<runner>/<name>"``
(``embodied/fused``, ``embodied/channels``, ``offpolicy/fused``, ``offpolicy/async``,
``offpolicy/remote``); a runner reads its own through :func:`topologies` (``.get(name)``), so a
name such as ``fused`` means one thing per runner and the registry is still one table.

The embodied topologies answer the same four questions for the runner -- the env spec, the
group that trains (publish / save / load), one synchronous iteration, shutdown -- so the
runner's loop does not know which one it drives; :func:`topology_name` picks one from the
placement. A fused placement of one process (:func:`runs_in_process`) is hosted in the calling
process when the run has no Ray cluster. Both launch the shared worker roles
(:mod:`learner.actor.worker`, :mod:`learner.rollout.workers`) with the embodied parts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from learner.actor.trainer import Trainer, policy_spec
from learner.actor.worker import ActorWorker
from learner.placement import Placement, PlacementError, parse_placement
from learner.rollout.embodied import EnvStepper, PolicySampler
from learner.rollout.streams import StreamLayout
from learner.rollout.trajectory import EpisodeStats
from learner.rollout.workers import EnvWorker, RolloutWorker
from learner.runners.config import EmbodiedConfig
from learner.runners.fused import FusedWorker, InProcessGroup
from learner.worker import GroupResult, WorkerGroup
from rlinf_contracts.registry import Registry

COMPONENTS = ("env", "rollout", "actor")
TOPOLOGIES: Registry[type] = Registry("topology")


class RunnerTopologies:
    """One runner's view of :data:`TOPOLOGIES`: its names, without the ``<runner>/`` prefix."""

    def __init__(self, runner: str) -> None:
        self.runner = runner

    def register(self, name: str) -> Any:
        return TOPOLOGIES.register(f"{self.runner}/{name}")

    def get(self, name: str) -> type:
        return TOPOLOGIES.get(f"{self.runner}/{name}")

    def names(self) -> list[str]:
        prefix = f"{self.runner}/"
        return [n[len(prefix) :] for n in TOPOLOGIES.names() if n.startswith(prefix)]


def topologies(runner: str) -> RunnerTopologies:
    """The topologies of ``runner`` (``embodied``, ``offpolicy``) in the one registry."""
    return RunnerTopologies(runner)


EMBODIED = topologies("embodied")


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


def _train_metrics(res: dict[str, Any]) -> tuple[dict[str, float], int]:
    """An actor rank's ``train`` result split into the update's metrics and the weight version."""
    train = {k: v for k, v in res.items() if k not in ("stats", "rollout_s", "update_s")}
    return train, int(train.pop("weight_version"))


def _merge_stats(results: list[dict[str, Any]]) -> EpisodeStats:
    stats = EpisodeStats()
    for r in results:
        stats.extend(r["stats"])
    return stats


@EMBODIED.register("fused")
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
        timings = {
            "rollout_s": float(np.mean([r["rollout_s"] for r in res])),
            "train_s": float(np.mean([r["update_s"] for r in res])),
        }
        return IterationOutput(_merge_stats(res), *_train_metrics(res[0]), timings)

    def shutdown(self) -> None:
        self.trainers.shutdown()


@EMBODIED.register("channels")
class ChannelTopology:
    """Env, rollout and actor groups on their own placements, connected by three channels."""

    def __init__(
        self, cfg: EmbodiedConfig, cluster: Any, placement: Placement, store_name: str
    ) -> None:
        from learner.channel import Channel

        self.cfg = cfg
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
            self.envs = self._launch(EnvWorker, "env", cluster, placement, EnvStepper, self.layout)
            self.env_spec = self.envs.execute_on([0], "env_spec").wait()[0]
            spec = policy_spec(cfg, self.env_spec)
            self.rollouts = self._launch(
                RolloutWorker,
                "rollout",
                cluster,
                placement,
                PolicySampler,
                spec,
                self.layout,
                store=store_name,
            )
            self.trainers = self._launch(
                ActorWorker,
                "actor",
                cluster,
                placement,
                Trainer,
                spec,
                store=store_name,
                per_rank_kwargs=self._lend(placement) if cfg.rollout.reallocate else None,
            )
        except BaseException:
            self.shutdown()
            raise

    @staticmethod
    def _lend(placement: Placement) -> list[dict[str, Any]]:
        """``rollout.reallocate``: the env + rollout slots each actor rank borrows to update."""
        from learner.scheduling.realloc import lent_slots

        n = placement["actor"].num_processes
        env, rollout = placement["env"].process_slots, placement["rollout"].process_slots
        return [{"lend": lent_slots(env, rollout, r, n)} for r in range(n)]

    def _launch(
        self,
        cls: type,
        component: str,
        cluster: Any,
        placement: Placement,
        part: type,
        *args: Any,
        **kwargs: Any,
    ) -> WorkerGroup:
        """A group of role ``cls`` hosting ``part(cfg, *args)`` on ``component``'s placement."""
        group = WorkerGroup.launch(
            cls,
            f"{self.cfg.name}-{component}",
            cluster,
            placement[component],
            part,
            self.cfg,
            *args,
            **kwargs,
        )
        self.groups.append(group)
        return group

    def iterate(self, iteration: int, reset: bool, steps: int) -> IterationOutput:
        n, lay = self.env_spec.num_envs, self.layout
        shards = [
            (lay.trajectories, lay.actor_key(r), lay.n_streams, lay.timeout)
            for r in range(self.trainers.size)
        ]
        env_res, roll_res, act_res = wait_all(
            [
                self.envs.call("run_iteration", iteration, reset, steps),
                self.rollouts.call("run_iteration", 0, iteration, steps, n),
                self.trainers.call_per_rank("train_stream", shards),
            ]
        )
        timings = {
            "env_busy_s": float(np.mean([r["env_busy_s"] for r in env_res])),
            "infer_busy_s": float(np.mean([r["infer_busy_s"] for r in roll_res])),
            "train_s": float(np.mean([r["update_s"] for r in act_res])),
        }
        stats = _merge_stats(roll_res)
        stats.revisited = sum(r.get("revisited_episodes", 0) for r in env_res)
        return IterationOutput(stats, *_train_metrics(act_res[0]), timings)

    def shutdown(self) -> None:
        for group in self.groups:
            group.shutdown()
        for ch in self.channels:
            ch.close()
