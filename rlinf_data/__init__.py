"""Data room: the episode store (zarr v3), LeRobot v3.0 export / import, the replay buffer.

A leaf on top of ``rlinf_contracts``: numpy + zarr only (LeRobot export adds pyarrow and PyAV,
imported where used), no torch and no Ray, so a robot PC records episodes with it.
"""

from rlinf_data.replay import ReplayBuffer, ReplayConfig
from rlinf_data.store import EpisodeStore, EpisodeWriter

__all__ = ["EpisodeStore", "EpisodeWriter", "ReplayBuffer", "ReplayConfig"]
