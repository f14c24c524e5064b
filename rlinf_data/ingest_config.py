"""Ingest settings and the record each stored step hands the consumer (``IngestedTransition``).

Split out of :mod:`rlinf_data.ingest` so the settings (and the token it reads from the environment)
and the replay-buffer-facing record sit apart from the ledger and the websocket server; both of
those import them from here. Everything is re-exported by :mod:`rlinf_data.ingest`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TOKEN_ENV = "RLINF_INGEST_TOKEN"


@dataclass
class IngestConfig:
    store: str = field(
        default="", metadata={"help": "episode store directory the transitions go to"}
    )
    host: str = field(
        default="127.0.0.1", metadata={"help": "bind address (0.0.0.0 to accept robots)"}
    )
    port: int = field(default=8100, metadata={"help": "TCP port; 0 picks a free one"})
    token: str = field(
        default="", metadata={"help": f"bearer token robots must send (env {TOKEN_ENV} / _FILE)"}
    )
    max_frame_bytes: int = field(
        default=64 << 20, metadata={"help": "largest accepted batch frame"}
    )
    feed_size: int = field(
        default=100_000, metadata={"help": "transitions the feed queue holds (oldest dropped)"}
    )
    hello_timeout_s: float = field(
        default=10.0, metadata={"help": "a connection must say hello within this"}
    )
    turn_items: int = field(
        default=16,
        metadata={
            "help": "most transitions of one robot stored per turn of the store writer before "
            "the other robots' batches get theirs (fair drain)"
        },
    )
    fsync: bool = field(
        default=False,
        metadata={
            "help": "flush each stored step to the disk before its ack (survives a power cut; "
            "costs ms per step, see benchmarks/results/store_durability.md); off: "
            "survives kill -9 only"
        },
    )

    def resolve(self) -> IngestConfig:
        """Fill the token from ``RLINF_INGEST_TOKEN_FILE`` / ``RLINF_INGEST_TOKEN``; validate."""
        if not self.token:
            path = os.environ.get(TOKEN_ENV + "_FILE", "")
            self.token = Path(path).read_text().strip() if path else os.environ.get(TOKEN_ENV, "")
        if not self.token:
            raise ValueError(
                f"key 'ingest.token' is empty: set it, {TOKEN_ENV} or {TOKEN_ENV}_FILE "
                "(robots authenticate with 'Authorization: Bearer <token>')"
            )
        if not self.store:
            raise ValueError("key 'ingest.store' is empty: name the episode store directory")
        if self.turn_items < 1:
            raise ValueError(f"key 'ingest.turn_items' must be >= 1, got {self.turn_items}")
        return self


@dataclass
class IngestedTransition:
    """What the replay buffer needs of one stored step (``next_obs``: the observation after it)."""

    robot_id: str
    seq: int
    source: str
    obs: dict[str, Any]  # {"state": [D], "images": {cam: HxWx3}}
    action: np.ndarray
    reward: float
    terminated: bool
    truncated: bool
    intervention: bool
    policy_version: int
    next_obs: dict[str, Any]
    episode: int = -1  # the robot's episode number (its steps have consecutive seqs)
    last: bool = (
        False  # the episode's last step: nothing of it follows (terminal, or its end arrived)
    )
    success: bool | None = None  # the end's success flag when ``last`` came with one, else unknown
    info: dict[str, Any] | None = None  # the episode's info as streamed (its first step only)
