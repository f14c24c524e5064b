"""A fleet of replaying robots: N robot ids stream recorded episodes to one learner's ingest.

Why it exists: the ingest, the fair drain and per-robot replay are about many robots, and a
real fleet is not at hand in a test or a benchmark. Each simulated robot owns a
:class:`~rlinf_ros.streaming.TransitionStreamer` -- the client the streamer node runs, with its
spool, window, acks and reconnects -- so what reaches the ingest is byte for byte what a robot
sends: same wire format, its own ``robot_id``, its own gap-free seqs that the ingest
de-duplicates on. Items are built as the streamer node's sink builds them
(:class:`~rlinf_ros.recording.StreamSink`): the episode's info on its first step, then one end
item with the final observation.

One ticker thread drives every robot (``hz`` items per second each, phases spread over a
period so the fleet does not fire in bursts): a thread per robot would cost more than the
robots it simulates at N = 64. ``hz <= 0`` puts everything at once (a robot that floods).
ROS-free: it runs wherever :mod:`rlinf_ros.streaming` does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_contracts.episode import SCALARS, Episode, EpisodeInfo, StepLayout
from rlinf_contracts.transitions import StepRecord, Transition
from rlinf_data.store import EpisodeStore
from rlinf_ros.streaming import StreamerConfig, TransitionStreamer


@dataclass
class FleetConfig:
    """How many robots, how fast, and the streamer settings they share."""

    robots: int = field(default=4, metadata={"help": "simulated robots (robot ids prefix0..)"})
    hz: float = field(
        default=20.0, metadata={"help": "items per second per robot; <= 0: all at once"}
    )
    items: int = field(
        default=0, metadata={"help": "items each robot sends (0: its episodes once over)"}
    )
    prefix: str = field(default="robot", metadata={"help": "robot id = prefix + index"})
    spool_root: str = field(default="runs/fleet-spool", metadata={"help": "one spool per robot"})
    stream: StreamerConfig = field(default_factory=StreamerConfig)

    def __post_init__(self) -> None:
        if self.robots < 1:
            raise ValueError(f"key 'fleet.robots' must be >= 1, got {self.robots}")
        if self.items < 0:
            raise ValueError(f"key 'fleet.items' must be >= 0, got {self.items}")


def episode_items(episodes: Sequence[Episode], start: int = 0) -> Iterator[Transition]:
    """The items a streamer node sends for ``episodes`` replayed back to back for ever (robot
    episode numbers counting from ``start``); seqs are set by the streamer's spool."""
    number = start
    while True:
        for ep in episodes:
            yield from _one(ep, number)
            number += 1


def _one(ep: Episode, number: int) -> Iterator[Transition]:
    s, n = ep.steps, len(ep)
    cams = [k[len("images/") :] for k in s if k.startswith("images/")]
    info = ep.info.to_dict()
    for i in range(n):
        record = StepRecord(
            episode=number,
            state=s["state"][i],
            action=s["action"][i],
            images={c: s[f"images/{c}"][i] for c in cams},
            intervention=bool(s["intervention"][i]),
            policy_version=int(s["policy_version"][i]),
            timestamp=time.time(),
        )
        yield Transition(
            seq=0,
            episode=number,
            index=i,
            step=record,
            reward=float(s["reward"][i]),
            terminated=bool(s["terminated"][i]),
            truncated=bool(s["truncated"][i]),
            info=info if i == 0 else None,
        )
    status = ep.info.status if ep.info.status in ("complete", "truncated") else "aborted"
    yield Transition(
        seq=0, episode=number, index=n, end=status, success=ep.info.success, final=ep.final
    )


def synthetic_store(
    path: str | Path, episodes: int, length: int, layout: StepLayout, task: str = "fleet/replay"
) -> Path:
    """An episode store of ``episodes`` online episodes of ``length`` steps in ``layout``, for a
    fleet when no recording is at hand. ``state[0]`` of step ``i`` of episode ``e`` is
    ``1000 * e + i`` (a replayed stream can be checked row by row); the rest is noise."""
    store = EpisodeStore(path, mode="a")
    rng = np.random.default_rng(0)
    for e in range(episodes):
        steps: dict[str, np.ndarray] = {
            k: np.zeros((length,), dt) for k, dt in SCALARS.items() if k != "timestamp"
        }
        steps["timestamp"] = np.arange(length, dtype=np.float64)
        state = rng.standard_normal((length, layout.state_dim)).astype(np.float32)
        state[:, 0] = 1000 * e + np.arange(length)
        steps["state"] = state
        steps["action"] = rng.uniform(-1, 1, (length, layout.action_dim)).astype(np.float32)
        steps["reward"][-1] = 1.0
        steps["terminated"][-1] = True
        for cam, (h, w) in layout.cameras.items():
            steps[f"images/{cam}"] = rng.integers(0, 255, (length, h, w, 3), dtype=np.uint8)
        final = {"state": state[-1] + 1}
        final.update({f"images/{c}": steps[f"images/{c}"][-1] for c in layout.cameras})
        info = EpisodeInfo(task=task, layout=layout, source="online", success=True)
        info.status = "complete"
        store.write(Episode(info, steps, final))
    return Path(path)


def count_items(episodes: Sequence[Episode]) -> tuple[int, int]:
    """(items, steps) of one pass over ``episodes``: a step item per step plus one end each."""
    steps = sum(len(ep) for ep in episodes)
    return steps + len(episodes), steps


class Fleet:
    """``start()`` the robots; ``wait_acked()``; ``stop()``. ``robots[i].streamer`` is the
    client of robot ``i``; ``status()`` one row per robot."""

    def __init__(self, cfg: FleetConfig, episodes: Sequence[Episode], token: str = "") -> None:
        if not episodes:
            raise ValueError("a fleet replays recorded episodes: the episode list is empty")
        self.cfg, self.episodes = cfg, list(episodes)
        per_pass, _ = count_items(self.episodes)
        self.total = cfg.items or per_pass  # items each robot sends
        k = len(self.episodes)
        self.robots = [
            _Robot(
                i,
                TransitionStreamer(
                    replace(
                        cfg.stream,
                        robot_id=f"{cfg.prefix}{i}",
                        spool_dir=str(Path(cfg.spool_root) / f"{cfg.prefix}{i}"),
                        token=token or cfg.stream.token,
                    )
                ),
                # robot i starts at episode i: the robots do not replay in lockstep
                episode_items(self.episodes[i % k :] + self.episodes[: i % k]),
                self.total,
            )
            for i in range(cfg.robots)
        ]
        self._stop = threading.Event()
        self._streaming = False  # the streamers are started
        self._ticker = threading.Thread(target=self._run, name="fleet", daemon=True)
        self.started_at = 0.0
        self.late_ticks = 0  # ticks the ticker ran more than a period behind (its own CPU)

    @classmethod
    def from_store(cls, cfg: FleetConfig, store: str | Path, token: str = "") -> Fleet:
        """A fleet replaying every non-empty episode of the store at ``store``."""
        src = EpisodeStore(store, mode="r")
        return cls(cfg, [ep for ep in src if len(ep)], token)

    def connect(self, timeout_s: float = 0.0) -> bool:
        """Start every robot's streamer (once) and wait up to ``timeout_s`` until all are
        connected; items flow only after :meth:`start`, so several fleets can start together."""
        if not self._streaming:
            for r in self.robots:
                r.streamer.start()
            self._streaming = True
        deadline = time.monotonic() + timeout_s
        while not self.connected() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.connected()

    def start(self, connect_first_s: float = 0.0) -> Fleet:
        """Start the streamers (:meth:`connect`), then the items."""
        self.connect(connect_first_s)
        self.started_at = time.monotonic()
        self._ticker.start()
        return self

    def connected(self) -> bool:
        return all(r.streamer.connected for r in self.robots)

    def _run(self) -> None:
        hz, n = self.cfg.hz, len(self.robots)
        if hz <= 0:
            for r in self.robots:
                while r.put_next():
                    pass
            return
        period = 1.0 / hz
        t0 = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            busy = False
            for j, r in enumerate(self.robots):  # robot j fires at phase j / n of the period
                due = t0 + (tick + j / n) * period
                delay = due - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
                if delay < -period:
                    self.late_ticks += 1
                busy |= r.put_next()
            if not busy:
                return
            tick += 1

    def put_done(self) -> bool:
        return all(r.sent >= r.total for r in self.robots)

    def acked_all(self) -> bool:
        return all(r.streamer.acked >= r.total - 1 for r in self.robots)

    def wait_acked(self, timeout_s: float) -> bool:
        """Poll until every robot's items are all acknowledged (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.put_done() and self.acked_all():
                return True
            time.sleep(0.05)
        return False

    def status(self) -> list[dict[str, Any]]:
        return [{"robot_id": r.streamer.cfg.robot_id, **r.streamer.status()} for r in self.robots]

    def stop(self) -> None:
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join(5.0)
        if self._streaming:
            for r in self.robots:
                r.streamer.stop()


@dataclass
class _Robot:
    index: int
    streamer: TransitionStreamer
    items: Iterator[Transition]
    total: int
    sent: int = 0

    def put_next(self) -> bool:
        """Put this robot's next item; False once it has put all of its ``total``."""
        if self.sent >= self.total:
            return False
        self.streamer.put(next(self.items))
        self.sent += 1
        return True
