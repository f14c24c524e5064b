"""Profile what connects components on this machine: channel hops, weight sync, start-up.

Machine-level (one per machine, cached like a workload profile). Measured with two throw-away
Ray workers that play env and rollout with no compute between messages:

- ``hop_s``: latency of one channel message worker -> worker (half a ping-pong round trip with
  one message in flight), as a :class:`Curve` over payload KiB;
- ``occupancy_s``: what one more message pair in flight adds to a step (ping-pong with two
  streams: the per-pair CPU cost on the busier side, the part pipelining cannot hide);
- both for the two workers on the same core (``same``) and on different cores (``cross``);
- ``weight_fetch``: a worker's ``WeightStore.latest()`` of a state dict, as a Curve over KiB;
- ``channel_cpu_s``: the channel actor's CPU per round trip (a put and a get each way), read from
  ``/proc`` around the one-stream ping-pongs: the actors are processes of their own, not pinned;
- ``allreduce_s``: one gloo all-reduce (64 KiB) between ranks on different cores -- under load
  it is dominated by waking the other rank, like a hop, and costs 10-100x the quiet figure;
- ``ray_init_s`` (embedded Ray start-up), ``spawn_s`` (one worker process, incl. imports),
  ``call_s`` (one empty group call: what each runner iteration pays per group).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from learner.scheduling.curves import Curve, load_cached, store_cached, workload_key
from learner.worker import Worker

log = logging.getLogger(__name__)
COMM_VERSION = 1


@dataclass
class CommProfile:
    hop_s: dict[str, Curve] = field(default_factory=dict)  # "same" / "cross" -> Curve(KiB)
    occupancy_s: dict[str, float] = field(default_factory=dict)
    weight_fetch: Curve = field(default_factory=Curve)
    ray_init_s: float = 0.0
    spawn_s: float = 0.0
    call_s: float = 0.0
    core_factor: dict[str, float] = field(
        default_factory=dict
    )  # core -> slowdown vs core 0 (calibration)
    allreduce_s: float = 0.0  # one gloo all-reduce of a small tensor, two ranks on different cores
    channel_cpu_s: float = 0.0  # CPU of the channel actors per message pair (a put + get each way)
    loop_hop_s: float = (
        0.0  # one hop inside the embodied runner's env <-> rollout loop (calibration; 0: use hop_s)
    )

    def core(self, c: int) -> float:
        """How much slower single-threaded compute runs on core ``c`` than on core 0 now (1.0
        unless a calibration measured it: other jobs' pinned workers load cores unevenly)."""
        return float(self.core_factor.get(str(c), 1.0))

    def hop(self, same_core: bool, nbytes: float) -> float:
        return self.hop_s["same" if same_core else "cross"](nbytes / 1024)

    def occupancy(self, same_core: bool) -> float:
        return self.occupancy_s["same" if same_core else "cross"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hop_s": {k: v.to_dict() for k, v in self.hop_s.items()},
            "occupancy_s": self.occupancy_s,
            "weight_fetch": self.weight_fetch.to_dict(),
            "ray_init_s": self.ray_init_s,
            "spawn_s": self.spawn_s,
            "call_s": self.call_s,
            "core_factor": self.core_factor,
            "allreduce_s": self.allreduce_s,
            "loop_hop_s": self.loop_hop_s,
            "channel_cpu_s": self.channel_cpu_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommProfile:
        return cls(
            {k: Curve.from_dict(v) for k, v in d["hop_s"].items()},
            dict(d["occupancy_s"]),
            Curve.from_dict(d["weight_fetch"]),
            d["ray_init_s"],
            d["spawn_s"],
            d["call_s"],
            {str(k): float(v) for k, v in d.get("core_factor", {}).items()},
            float(d.get("allreduce_s", 0.0)),
            float(d.get("channel_cpu_s", 0.0)),
            float(d.get("loop_hop_s", 0.0)),
        )


class PingWorker(Worker):
    """One side of the ping-pong: ``serve`` echoes, ``drive`` times steps of ``streams``
    messages."""

    def serve(self, ch: Any, n: int, streams: int, back: Any = None) -> int:
        back = back or ch
        for _ in range(n * streams):
            stream, x = ch.get(key="to_echo", timeout=120)
            back.put((stream, x), key=f"back{stream}", timeout=120)
        back.flush()
        return n

    def drive(self, ch: Any, n: int, streams: int, kib: int, back: Any = None) -> float:
        import numpy as np

        back = back or ch
        x = np.zeros(kib * 256, np.float32)
        for s in range(streams):
            ch.put((s, x), key="to_echo")
        t0 = time.perf_counter()
        for i in range(n):
            for s in range(streams):
                back.get(key=f"back{s}", timeout=120)
                if i < n - 1:
                    ch.put((s, x), key="to_echo")
        return (time.perf_counter() - t0) / n

    def allreduce(self, address: str, rank: int, n: int, numel: int) -> float:
        """Seconds per gloo all-reduce of ``numel`` floats between two ranks (this is ``rank``)."""
        import torch

        from learner.actor.ddp import GradSync

        sync = GradSync(rank, 2)
        sync.init(address)
        try:
            t = torch.zeros(numel)
            sync.sum(t)
            t0 = time.perf_counter()
            for _ in range(n):
                sync.sum(t)
            return (time.perf_counter() - t0) / n
        finally:
            sync.close()

    def fetch(self, store_name: str, reps: int) -> float:
        from learner.weights import WeightStore

        store = WeightStore.connect(store_name)
        store.latest()
        t0 = time.perf_counter()
        for _ in range(reps):
            store.latest()
        return (time.perf_counter() - t0) / reps


def channel_actor_cpu_s() -> float:
    """CPU seconds used so far by the channel actor processes on this machine (``/proc``; 0 where
    there is none). Why: the channel actors are processes of their own, not pinned, and on a
    2-core machine their CPU per message is what the rollout loop runs short of."""
    import os

    total, tick = 0.0, os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if not f.read().startswith("ray::ChannelAc"):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return total


def _pingpong(
    group: Any,
    ranks: tuple[int, int],
    n: int,
    streams: int,
    kib: int,
    cpu: list[float] | None = None,
) -> float:
    """Seconds per step of ``streams`` messages between ranks ``ranks`` of ``group``, there on one
    channel and back on another (as observations and actions travel in the runner); with ``cpu``,
    appends the channel actor's CPU seconds per round trip (measured after the actor is up)."""
    from learner.channel import Channel

    tag = time.monotonic_ns()
    ch, back = Channel.create(f"sched-ping-{tag}"), Channel.create(f"sched-pong-{tag}")
    try:
        ch.qsize(), back.qsize()  # the actors have started (their imports are not a message's cost)
        cpu0 = channel_actor_cpu_s()
        served = group.execute_on([ranks[1]], "serve", ch, n, streams, back)
        step = group.execute_on([ranks[0]], "drive", ch, n, streams, kib, back).wait(120)[0]
        served.wait(120)
        if cpu is not None:
            cpu.append((channel_actor_cpu_s() - cpu0) / (n * streams))
        return step
    finally:
        ch.close()
        back.close()


def _allreduce(group: Any, n: int, numel: int = 16_384) -> float:
    """Gloo all-reduce between the workers on slot 0 and slot 1 (64 KiB: a small policy's grads)."""
    from learner.actor.ddp import free_address

    address = free_address()
    calls = [group.execute_on([r], "allreduce", address, i, n, numel) for i, r in enumerate((0, 2))]
    return max(c.wait(120)[0] for c in calls)


def _weights(group: Any, sizes_kib: tuple[int, ...]) -> Curve:
    import torch

    from learner.weights import WeightStore

    store = WeightStore.create(f"sched-w-{time.monotonic_ns()}")
    curve = Curve()
    try:
        for kib in sizes_kib:
            store.publish({"w": torch.zeros(kib * 256)})
            curve.points[kib] = group.execute_on([0], "fetch", store.name, 5).wait(120)[0]
    finally:
        store.close()
    return curve


def profile_comm(cluster: Any = None, *, refresh: bool = False, n: int = 30) -> CommProfile:
    """The machine's comm profile (cached). Starts an embedded Ray when ``cluster`` is None."""
    from learner.cluster import Cluster

    key = workload_key("comm", {"v": COMM_VERSION})
    cached = None if refresh else load_cached(key)
    if cached is not None:
        return CommProfile.from_dict(cached)
    prof, own = CommProfile(), cluster is None
    t0 = time.perf_counter()
    if own:
        cluster = Cluster.local()
    # on a given cluster Ray's start is not seen: keep the last measured one (start-up estimates)
    prof.ray_init_s = (
        time.perf_counter() - t0 if own else float((load_cached(key) or {}).get("ray_init_s", 0.0))
    )
    try:
        from learner.placement import ComponentPlacement
        from learner.worker import WorkerGroup

        t1 = time.perf_counter()  # three workers: two share slot 0, one on slot 1
        group = WorkerGroup.launch(
            PingWorker,
            "sched-ping",
            cluster,
            ComponentPlacement("p", [[0], [0], [1 % cluster.num_slots]]),
        )
        prof.spawn_s = (
            time.perf_counter() - t1
        )  # processes start in parallel: the launch's wall time
        try:
            actor_cpu: list[float] = []
            for where, ranks in (("same", (0, 1)), ("cross", (0, 2))):
                one = _pingpong(group, ranks, n, 1, 1, actor_cpu)
                big = _pingpong(group, ranks, max(n // 3, 5), 1, 1024)
                two = _pingpong(group, ranks, n, 2, 1)
                prof.hop_s[where] = Curve({1: one / 2, 1024: big / 2})
                prof.occupancy_s[where] = max(two - one, 0.0)
            prof.channel_cpu_s = sum(actor_cpu) / len(actor_cpu)
            prof.weight_fetch = _weights(group, (64, 4096))
            prof.allreduce_s = _allreduce(group, n)
            t2 = time.perf_counter()
            for _ in range(10):
                group.call("ping").wait(60)
            prof.call_s = (time.perf_counter() - t2) / 10
        finally:
            group.shutdown()
    finally:
        if own:
            cluster.shutdown()
    store_cached(key, prof.to_dict())
    log.info("comm profile: %s", prof.to_dict())
    return prof
