"""Who talks to whom between env, rollout and actor workers: streams, keys, messages.

A *stream* is one pipeline stage of one env worker: stream ``s = env_rank * stages + k``.
Stream ``s`` is served by rollout rank ``s % n_rollout`` and trained on by actor rank
``s % n_actor``; every channel key below is derived from that, so no worker needs a table.
"""

from __future__ import annotations

from dataclasses import dataclass

from learner.rollout.trajectory import StepOutcome
from sim_bridges.contract import Observation


@dataclass
class EnvMessage:
    """Env -> rollout: the stream's current obs and (except the first) the last step's outcome."""

    stream: int
    obs: Observation
    outcome: StepOutcome | None


@dataclass
class StreamLayout:
    """Channel handles and the stream -> rank mapping, shared by all three worker kinds."""

    obs: object  # Channel env -> rollout, key rollout_key(s)
    actions: object  # Channel rollout -> env, key action_key(s)
    trajectories: object  # Channel rollout -> actor, key actor_key(s)
    n_env: int
    n_rollout: int
    n_actor: int
    stages: int
    timeout: float

    @property
    def n_streams(self) -> int:
        return self.n_env * self.stages

    def rollout_key(self, stream: int) -> str:
        return f"rollout{stream % self.n_rollout}"

    def action_key(self, stream: int) -> str:
        return f"stream{stream}"

    def actor_key(self, stream: int) -> str:
        return f"actor{stream % self.n_actor}"

    def streams_of_rollout(self, rank: int) -> list[int]:
        return [s for s in range(self.n_streams) if s % self.n_rollout == rank]

    def streams_of_actor(self, rank: int) -> list[int]:
        return [s for s in range(self.n_streams) if s % self.n_actor == rank]

    def check(self) -> None:
        """Every rollout and actor rank must get at least one stream."""
        for what, n in (("rollout", self.n_rollout), ("actor", self.n_actor)):
            if n > self.n_streams:
                raise ValueError(
                    f"{n} {what} processes but only {self.n_streams} env streams "
                    f"({self.n_env} env processes x rollout.pipeline_stages={self.stages}); "
                    f"give '{what}' fewer slots in 'placement' or raise rollout.pipeline_stages")
