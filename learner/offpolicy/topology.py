"""How ``env``, ``learner`` and ``replay`` become processes: fused (one) or async env workers.

* ``fused`` -- env and learner have the same processes (one): :class:`LearnerWorker` steps the
  env itself between bursts of updates. Hosted in the calling process when the run has no Ray
  cluster (:func:`runs_in_process`): the laptop fast path, no Ray start-up, no copies.
* ``async`` -- env workers on their own processes collect with the newest published weights
  and send finished episodes through a bounded channel; the learner trains as data arrives.
* ``remote`` (``ingest.enabled``) -- robots are the env: they stream transitions to an ingest
  the learner hosts, and weights go to their policy server (``learner.offpolicy.remote``).
  One learner process (robots connect to it), whatever ``placement`` says about ``env``: the
  calling one, or -- when the placement names ``server`` (the robots' policy servers, started by
  the run, ``learner.offpolicy.servers``) -- a Ray actor where ``learner`` is placed.

The replay lives with the learner (it samples it thousands of times a second; a remote replay
would cost a round trip per batch), so ``replay`` must be placed on the learner's slots, and
the learner is one process (data-parallel off-policy updates are not built).

The three register in the one topology registry (:data:`learner.runners.topology.TOPOLOGIES`)
under ``offpolicy/<name>``; :data:`TOPOLOGIES` here is this runner's view of it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from learner.offpolicy.config import COMPONENTS, OPTIONAL, SERVER, OffPolicyConfig
from learner.offpolicy.workers import CollectorWorker, LearnerWorker
from learner.placement import Placement, PlacementError, parse_placement
from learner.runners.topology import topologies
from rlinf_contracts.config import ConfigError

TOPOLOGIES = topologies("offpolicy")
CLOSE_TIMEOUT_S = 120.0  # the last push's flush (push.timeout_s) plus stopping placed servers
log = logging.getLogger(__name__)


def topology_name(placement: Placement) -> str:
    """``fused`` when env and learner have identical processes, else ``async``; checks the rules."""
    env, learner, replay = (placement[c] for c in COMPONENTS)
    if replay.process_slots != learner.process_slots:
        raise ConfigError(
            f"key 'placement': replay {replay.process_slots} must be placed with the learner "
            f"{learner.process_slots} (the learner samples it every update)"
        )
    if learner.num_processes != 1:
        raise ConfigError(
            f"key 'placement': the off-policy learner is one process, got {learner.num_processes} "
            f"({learner.process_slots}); e.g. learner,replay: 0"
        )
    return "fused" if env.process_slots == learner.process_slots else "async"


def select(cfg: OffPolicyConfig, placement: Placement) -> str:
    """The topology of a run: ``remote`` when robots stream to the learner, else by placement."""
    name = topology_name(placement)
    return "remote" if cfg.ingest.enabled else name


def runs_in_process(cfg: OffPolicyConfig, num_slots: int) -> bool:
    """True when the run is one fused (or remote) process on this machine: no Ray needed (placed
    policy servers are Ray actors)."""
    if cfg.ingest.enabled:
        return not cfg.cluster.address and not cfg.places_servers
    if cfg.cluster.address or cfg.cluster.resources:
        return False
    try:
        placement = parse_placement(cfg.placement, num_slots, list(COMPONENTS), OPTIONAL)
        name = topology_name(placement)
    except (PlacementError, ConfigError):
        return False  # the runner reports it
    return name == "fused" and not any(placement[c].resources for c in COMPONENTS)


@TOPOLOGIES.register("fused")
class Fused:
    def __init__(self, cfg: OffPolicyConfig, cluster: Any, placement: Placement) -> None:
        from learner.runners.fused import InProcessGroup
        from learner.worker import WorkerGroup

        name = f"{cfg.name}-learner"
        if getattr(cluster, "in_process", False):
            self.learner: Any = InProcessGroup(
                LearnerWorker, name, placement["learner"], cluster.slot_kind, cfg
            )
        else:
            self.learner = WorkerGroup.launch(
                LearnerWorker, name, cluster, placement["learner"], cfg
            )

    def train(self, seconds_left: float | None) -> dict[str, Any]:
        return self.learner.call("train", seconds_left).wait()[0]

    def shutdown(self) -> None:
        self.learner.shutdown()


@TOPOLOGIES.register("remote")
class Remote(Fused):
    """The learner alone, hosting the robots' ingest and pushing to their policy servers (and
    starting them, with a ``server`` placement)."""

    def __init__(self, cfg: OffPolicyConfig, cluster: Any, placement: Placement) -> None:
        from learner.offpolicy.remote import RemoteLearnerWorker
        from learner.runners.fused import InProcessGroup
        from learner.worker import WorkerGroup

        name = f"{cfg.name}-learner"
        self.in_process = bool(getattr(cluster, "in_process", False))
        if self.in_process:
            self.learner = InProcessGroup(
                RemoteLearnerWorker, name, placement["learner"], cluster.slot_kind, cfg
            )
        else:  # an actor: the plug-ins of this process travel with it
            from learner.offpolicy.remote_actor import HostedRemoteLearner, plugins
            from learner.offpolicy.servers import check_offered

            if SERVER in placement:  # here, as a plain error, before the learner pretrains
                check_offered(placement[SERVER], cluster.custom_resources)
            level = logging.getLogger().getEffectiveLevel()
            self.learner = WorkerGroup.launch(
                HostedRemoteLearner, name, cluster, placement["learner"], cfg, plugins(), level
            )

    def shutdown(self) -> None:
        """Close the learner first (last push flushed, ingest and placed servers stopped): an
        actor is otherwise ended without running its ``close``."""
        if not self.in_process:
            try:
                self.learner.call("close").wait(timeout=CLOSE_TIMEOUT_S)
            except Exception as e:  # the actor died, or hangs: ending it below is all we can do
                log.warning("closing the remote learner: %s", e)
        self.learner.shutdown()


@TOPOLOGIES.register("async")
class Async:
    """Env worker group + one learner, joined by an episode channel and a weight store."""

    def __init__(self, cfg: OffPolicyConfig, cluster: Any, placement: Placement) -> None:
        from learner.channel import Channel
        from learner.weights import WeightStore
        from learner.worker import WorkerGroup

        tag = f"{cfg.name}-{uuid.uuid4().hex[:8]}"
        self.cfg, self.groups = cfg, []
        self.channel = Channel.create(f"{tag}-episodes", maxsize=cfg.train.queue_episodes)
        self.store_name = f"{tag}-weights"
        self.store = WeightStore.create(self.store_name)
        try:
            self.envs = WorkerGroup.launch(
                CollectorWorker, f"{cfg.name}-env", cluster, placement["env"], cfg
            )
            self.groups.append(self.envs)
            spec = self.envs.execute_on([0], "env_spec").wait()[0]
            self.learner = WorkerGroup.launch(
                LearnerWorker,
                f"{cfg.name}-learner",
                cluster,
                placement["learner"],
                cfg,
                spec,
                self.channel,
                self.store_name,
            )
            self.groups.append(self.learner)
        except BaseException:
            self.shutdown()
            raise

    def train(self, seconds_left: float | None) -> dict[str, Any]:
        import ray

        learn = self.learner.call("train", seconds_left)
        collect = self.envs.call(
            "collect", self.channel, self.store_name, self.cfg.train.warmup_steps
        )
        from learner.worker import WorkerError, _remote_traceback

        ready, _ = ray.wait(list(learn.refs) + list(collect.refs), num_returns=1)
        if ready[0] in learn.refs:
            return learn.wait()[0]
        rank = collect.refs.index(ready[0])  # an env worker never returns: this one failed
        try:
            ray.get(ready[0])
        except Exception as e:
            raise WorkerError(self.envs.name, rank, "collect", _remote_traceback(e)) from None
        raise WorkerError(self.envs.name, rank, "collect", "returned before the learner finished")

    def shutdown(self) -> None:
        for group in reversed(self.groups):
            group.shutdown()
        self.channel.close()
        self.store.close()
