"""Who talks to whom between env, rollout and actor workers: streams, keys, messages.

A *stream* is one pipeline stage of one env worker: stream ``s = env_rank * stages + k``.
Stream ``s`` is served by rollout rank ``s % n_rollout``; its trajectory is split by rows into
one shard per actor rank (data parallel), so every actor rank receives one shard of every
stream. Every channel key below is derived from that, so no worker needs a table.
"""

from __future__ import annotations

from dataclasses import dataclass

from learner.rollout.trajectory import StepOutcome
from rlinf_contracts.env import Observation


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

    def actor_key(self, actor_rank: int) -> str:
        return f"actor{actor_rank}"

    def streams_of_rollout(self, rank: int) -> list[int]:
        return [s for s in range(self.n_streams) if s % self.n_rollout == rank]

    def check(self) -> None:
        """Every rollout rank must serve at least one stream."""
        if self.n_rollout > self.n_streams:
            raise ValueError(
                f"{self.n_rollout} rollout processes but only {self.n_streams} env streams "
                f"({self.n_env} env processes x rollout.pipeline_stages={self.stages}); "
                "give 'rollout' fewer slots in 'placement' or raise rollout.pipeline_stages"
            )
