"""The policy client's control logic, without ROS: action chunks, inference thread, hold on loss.

Why separate from the node: this is where the safety-relevant behaviour lives (what is
commanded when the server is slow, lost or back), so it is unit-tested with a real in-process
fake server, and the node only wires topics to it.

Per control tick (:meth:`PolicyLoop.tick`):

1. the newest synchronised observation (or None) comes in;
2. if the current chunk has steps left, the next one becomes the command;
3. otherwise the arm *holds* the last commanded target (reason ``waiting``, ``server_lost``
   or ``no_observation``), so losing the server never moves the arm;
4. when nothing is in flight and at most ``prefetch`` steps remain, the observation is handed
   to the inference thread, which reconnects by itself every ``reconnect_s`` when the server is
   gone. A new chunk replaces what is left of the old one. With nothing left to execute the
   tick waits up to ``max_wait_s`` for the answer, so a fast server's action goes out in the
   same tick as its observation (latency = observation age + round trip, not + one period).

A one-step policy (answers of one row, ``chunk: 1``) acts on the observation of the tick it is
applied at, as in simulation, where each action answers the state it is applied to. An answer
that missed its tick's wait is loaded at the start of the next tick; that row was computed from
an older observation, so it does not count as something left to execute: the tick still sends
its own observation and waits for the answer, which replaces the late row. Only when that answer
misses the wait too does the late row go out (one tick old, ``late_steps`` in the stats), rather
than a hold: a server slower than the wait still moves the arm, one tick behind. Every wait that
ends without its answer is counted (``missed_waits``). Without this,
one missed wait would leave every later answer arriving between ticks and the client acting on
the previous tick's observation for the rest of the episode.

What an action means comes from the robot spec (``rlinf_ros.robot_io.SpecIO``): joint deltas,
absolute joints or end-effector deltas, decoded by the same control law as in simulation.

Clocks: ``clock`` (the loop's and the worker's) is the node clock the observations are stamped
in -- simulated time under ``use_sim_time`` -- and measures observation-to-command latency in it.
The waits (``max_wait_s``, ``reconnect_s``) and the round trip (``latency_s``) are wall time:
they bound a network call and a computation, which take wall time whatever the robot's clock.

A server that refuses this robot's spec (HTTP 409 on connect) is final: the worker stops
retrying, the loop holds with reason ``refused`` and the error names both layouts.

Real-time chunking (``rtc``, :mod:`rlinf_ros.rtc`): the request goes out after
``execute_horizon`` steps of the current chunk instead of when it runs out; when the answer
arrives ``d`` ticks later its first ``d`` rows (already in the past) are dropped, the rest is
blended with the old chunk's remaining rows and integrated from the newest measured state. With
``send_prefix`` the request carries the old rows planned from the request tick on
(``rtc_prefix`` [n, A]) and the expected delay in ticks (``rtc_inference_delay``), for flow
policies that inpaint them.

The loop logs a state (``policy``, ``hold (waiting)``, ``hold (server_lost)``, ...) when it
enters it after ``STATE_LOG_INTERVAL_S`` without it; a nominal run flips between holding and
acting once per chunk, and those flips are summarised in one line per interval.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlinf_contracts.event_log import EventSummary
from rlinf_contracts.features import MissingInput, RobotReading
from rlinf_ros.robot_io import ARM_DOF, SpecIO
from rlinf_ros.rtc import RtcConfig, merge_chunk

log = logging.getLogger(__name__)
STATE_LOG_INTERVAL_S = 60.0
"""A state the loop entered again within this long is counted, not logged: one summary line
(``policy loop: hold (waiting) 31 times, policy 31 times in the last 60 s``) per interval."""


def _times_entered(state: str, n: int) -> str:
    return f"{state} {n} time{'' if n == 1 else 's'}"


__all__ = ["ARM_DOF", "Command", "InferenceWorker", "PolicyLoop", "SpecRefusal"]


class SpecRefusal(Exception):
    """Marker base: a connect error of this kind is final (the server refused our robot spec)."""


class InferClient(Protocol):
    def infer(self, obs: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass
class Command:
    """Per-arm joint targets [7] and gripper widths (m); ``kind`` is ``policy`` or ``hold``.
    ``poses``: ``ee_impedance`` target poses (4x4, base frame) that go out instead of joints."""

    joints: list[np.ndarray]
    grippers: list[float]
    kind: str
    reason: str = ""
    t_obs: float = 0.0  # stamp of the observation this command was computed from
    first: bool = False  # first step of its chunk
    action: np.ndarray | None = None  # the normalised action row executed (None: a hold)
    version: int = 0  # weight version of the policy that chose it
    poses: list[np.ndarray] | None = None


# ---- inference thread -----------------------------------------------------------------------
@dataclass
class _Job:
    obs: dict[str, Any]
    base: list[RobotReading]
    t_obs: float
    tick: int = 0


@dataclass
class InferResult:
    actions: np.ndarray
    base: list[RobotReading]
    t_obs: float
    latency_s: float
    t_done: float = (
        0.0  # when the answer arrived, on the worker's clock (the one t_obs is stamped in)
    )
    response: dict[str, Any] = field(default_factory=dict)
    tick: int = 0  # loop tick the request went out at


class InferenceWorker:
    """Owns the connection; one request at a time; reconnects forever until :meth:`stop`."""

    def __init__(
        self,
        connect: Callable[[], InferClient],
        reconnect_s: float = 0.5,
        name: str = "policy",
        final_errors: tuple[type[BaseException], ...] = (SpecRefusal,),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._connect = connect
        self._clock = (
            clock  # stamps t_done in the observations' clock; latency_s and retries stay wall time
        )
        self.final_errors = final_errors
        self.refused = ""  # set when the server refused us for good; the worker then stops
        self.reconnect_s = reconnect_s
        self.name = name
        self._jobs: queue.Queue[_Job] = queue.Queue(maxsize=1)
        self._results: deque[InferResult] = deque(maxlen=1)
        self._busy = threading.Event()
        self._done = threading.Event()
        self._stop = threading.Event()
        self.connected = False
        self.connects = 0
        self.failures = 0
        self.last_error = ""
        self._client: InferClient | None = None
        self._thread = threading.Thread(target=self._run, name=f"infer-{name}", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._busy.is_set()

    def submit(
        self, obs: dict[str, Any], base: list[RobotReading], t_obs: float, tick: int = 0
    ) -> bool:
        """Queue one request; False while one is in flight or the server is down."""
        if self.busy or not self.connected:
            return False
        self._busy.set()
        self._done.clear()
        self._jobs.put(_Job(obs, base, t_obs, tick))
        return True

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` s for the request in flight to finish (answer or failure)."""
        return self._done.wait(timeout) if self.busy else False

    def take(self) -> InferResult | None:
        try:
            return self._results.popleft()
        except IndexError:
            return None

    def _ensure_client(self) -> bool:
        if self._client is not None:
            return True
        try:
            self._client = self._connect()
        except self.final_errors as e:
            self.refused = self.last_error = str(e)
            self.connected = False
            log.error("policy server refused this robot; not retrying: %s", e)
            self._stop.set()
            return False
        except Exception as e:
            if self.connected or self.connects == 0 and not self.last_error:
                log.warning(
                    "policy server unreachable (%s); holding position, retrying every %.1f s",
                    e,
                    self.reconnect_s,
                )
            self.connected, self.last_error = False, str(e)
            return False
        self.connects += 1
        self.connected = True
        log.info("policy server connected (connection #%d)", self.connects)
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._ensure_client() or (client := self._client) is None:
                self._stop.wait(self.reconnect_s)
                continue
            try:
                job = self._jobs.get(timeout=0.1)
            except queue.Empty:
                continue
            t0 = time.monotonic()
            try:
                resp = client.infer(job.obs)
                actions = np.asarray(resp["actions"], dtype=np.float64)
                self._results.append(
                    InferResult(
                        np.atleast_2d(actions),
                        job.base,
                        job.t_obs,
                        time.monotonic() - t0,
                        self._clock(),
                        resp,
                        job.tick,
                    )
                )
            except Exception as e:
                self.failures += 1
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning(
                    "policy request failed (%s); holding position until the server answers",
                    self.last_error,
                )
                self._drop()
            finally:
                self._busy.clear()
                self._done.set()

    def _drop(self) -> None:
        client, self._client = self._client, None
        self.connected = False
        if client is not None:
            try:
                client.close()
            except Exception:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._drop()


# ---- the loop ---------------------------------------------------------------------------------
@dataclass
class LoopStats:
    policy_steps: int = 0
    hold_steps: int = 0
    late_steps: int = 0  # one-step policy: a row from an earlier tick's observation went out
    missed_waits: int = 0  # ticks whose bounded wait for their own answer ran out
    chunks: int = 0
    bad_chunks: int = 0
    mode: str = "hold"
    reason: str = "starting"
    latencies_ms: deque = field(default_factory=lambda: deque(maxlen=2000))  # obs -> chunk ready
    command_ms: deque = field(
        default_factory=lambda: deque(maxlen=2000)
    )  # obs -> first command out
    infer_ms: deque = field(default_factory=lambda: deque(maxlen=2000))
    delay_ticks: deque = field(
        default_factory=lambda: deque(maxlen=2000)
    )  # request -> chunk loaded, in ticks

    def summary(self) -> dict[str, Any]:
        def pct(d: deque, p: float) -> float | None:
            return float(np.percentile(np.asarray(d), p)) if d else None

        return {
            "mode": self.mode,
            "reason": self.reason,
            "policy_steps": self.policy_steps,
            "hold_steps": self.hold_steps,
            "late_steps": self.late_steps,
            "missed_waits": self.missed_waits,
            "chunks": self.chunks,
            "bad_chunks": self.bad_chunks,
            "latency_ms_p50": pct(self.latencies_ms, 50),
            "latency_ms_p99": pct(self.latencies_ms, 99),
            "command_ms_p50": pct(self.command_ms, 50),
            "command_ms_p99": pct(self.command_ms, 99),
            "infer_ms_p50": pct(self.infer_ms, 50),
            "delay_ticks_p50": pct(self.delay_ticks, 50),
        }


class PolicyLoop:
    def __init__(
        self,
        worker: InferenceWorker,
        io: SpecIO,
        prefetch: int = 1,
        clock: Callable[[], float] = time.time,
        max_wait_s: float = 0.0,
        rtc: RtcConfig | None = None,
    ) -> None:
        self.worker = worker
        self.io, self.prefetch = io, prefetch
        self._clock = clock
        self.max_wait_s = max_wait_s
        self.rtc = rtc if rtc is not None and rtc.enabled else None
        self._plan: deque[Command] = deque()
        self.last: Command | None = None
        self.stats = LoopStats()
        self._tick = 0  # ticks so far: aligns a chunk's rows with the ticks they were planned for
        self._since_load = 0  # steps of the current chunk executed (RTC: counted from its request)
        # running estimate of the inference delay in ticks (sent to flow policies)
        self._delay_est = 1.0
        self._warned = False
        # hold <-> policy flips once per chunk in a nominal run: a new state is logged at once,
        # its repeats once per STATE_LOG_INTERVAL_S (wall time, like the other rate limits)
        self.states = EventSummary(
            "policy loop", STATE_LOG_INTERVAL_S, describe=_times_entered, logger=log
        )

    def _rtc_rows(
        self, rtc: RtcConfig, res: InferResult, measured: list[RobotReading] | None
    ) -> tuple[np.ndarray, list[RobotReading]]:
        """RTC: drop the rows already in the past, blend with the old plan, integrate from now."""
        if len(res.actions) <= rtc.execute_horizon and not self._warned:
            self._warned = True
            log.warning(
                "rtc.execute_horizon %d >= the policy's chunk of %d steps: the next request only "
                "goes out when the chunk is used up (lower execute_horizon)",
                rtc.execute_horizon,
                len(res.actions),
            )
        delay = max(self._tick - res.tick, 0)
        self.stats.delay_ticks.append(delay)
        self._delay_est = 0.8 * self._delay_est + 0.2 * delay
        old = np.asarray([c.action for c in self._plan if c.action is not None]).reshape(
            -1, res.actions.shape[1]
        )
        rows = merge_chunk(np.clip(res.actions, -1.0, 1.0), old, delay, rtc.blend)
        return rows, measured if measured is not None else res.base

    def _load(self, res: InferResult | None, measured: list[RobotReading] | None = None) -> None:
        if res is None:
            return
        actions, base, dropped = res.actions, res.base, 0
        if self.rtc is not None and actions.ndim == 2 and np.all(np.isfinite(actions)):
            actions, base = self._rtc_rows(self.rtc, res, measured)
            dropped = len(res.actions) - len(actions)  # rows in the past count as executed
        try:
            steps = self.io.decode(actions, base)
        except (
            ValueError,
            MissingInput,
        ) as e:  # MissingInput: no pose yet to integrate ee actions from
            self.stats.bad_chunks += 1
            log.warning("discarding policy chunk: %s", e)
            return
        version = int(res.response.get("weight_version", 0) or 0)
        rows = np.clip(actions, -1.0, 1.0).astype(np.float32)
        plan = [
            Command(
                s.joints,
                s.grippers,
                "policy",
                t_obs=res.t_obs,
                action=row,
                version=version,
                poses=s.poses,
            )
            for s, row in zip(steps, rows)
        ]
        plan[0].first = True
        self._plan = deque(plan)
        self._since_load = dropped
        self.stats.chunks += 1
        self.stats.latencies_ms.append((res.t_done - res.t_obs) * 1e3)
        self.stats.infer_ms.append(res.latency_s * 1e3)

    def _hold(self, measured: list[RobotReading] | None, reason: str) -> Command | None:
        if self.last is not None:
            poses = self.last.poses
            return Command(
                [j.copy() for j in self.last.joints],
                list(self.last.grippers),
                "hold",
                reason,
                poses=None if poses is None else [p.copy() for p in poses],
            )
        if measured is None:
            return None
        poses = self.io.hold_poses(measured)
        if self.io.impedance and poses is None:
            return None  # no pose to hold at yet: command nothing
        return Command(
            [np.asarray(r.q, dtype=np.float64).copy() for r in measured],
            [float(r.gripper_width) for r in measured],
            "hold",
            reason,
            poses=poses,
        )

    def _wants_chunk(self) -> bool:
        if self.rtc is None:
            return len(self._plan) <= self.prefetch
        return not self._plan or self._since_load >= self.rtc.execute_horizon

    def _late(self, t_obs: float) -> bool:
        """The plan is one unexecuted row of a one-step answer to an observation older than
        ``t_obs`` (it missed its own tick's wait): this tick asks again on its own observation.
        Rows of a longer chunk are planned for later ticks, and RTC schedules its own requests."""
        return (
            self.rtc is None
            and len(self._plan) == 1
            and self._plan[0].first
            and self._plan[0].t_obs < t_obs
        )

    def _request(self, obs: dict[str, Any]) -> dict[str, Any]:
        """The observation, plus (RTC with ``send_prefix``) the rows committed from this tick on."""
        if self.rtc is None or not self.rtc.send_prefix or not self._plan:
            return obs
        prefix = np.asarray(
            [c.action for c in self._plan if c.action is not None], dtype=np.float32
        )
        return {
            **obs,
            "rtc_prefix": prefix,
            "rtc_inference_delay": int(max(round(self._delay_est), 0)),
        }

    def interrupt(self, last: Command | None = None) -> None:
        """Someone else commanded the arm (a human took over): drop the plan; hold ``last``."""
        self._plan.clear()
        if last is not None:
            self.last = last

    def reset(self) -> None:
        """A new episode: drop the plan and the held target; orientation targets are re-taken."""
        self._plan.clear()
        self.last = None
        self.io.begin_episode()

    def tick(
        self, obs: dict[str, Any] | None, measured: list[RobotReading] | None, t_obs: float | None
    ) -> Command | None:
        """One control step. ``measured``: one reading per arm of ``obs`` (None: no data yet)."""
        self._load(self.worker.take(), measured)
        stamp = t_obs if t_obs is not None else self._clock()
        if obs is not None and measured is not None and self._wants_chunk():
            sent = self.worker.submit(self._request(obs), measured, stamp, self._tick)
            if sent and (not self._plan or self._late(stamp)) and self.max_wait_s > 0:
                # nothing (or only a late one-step row) left to execute: wait (bounded) so this
                # tick acts on this observation
                self.stats.missed_waits += int(not self.worker.wait(self.max_wait_s))
                self._load(self.worker.take(), measured)
        self._tick += 1
        if self._plan:
            self.stats.late_steps += int(obs is not None and self._late(stamp))
            cmd = self._plan.popleft()
            self._since_load += 1
            self.stats.policy_steps += 1
            if cmd.first:
                self.stats.command_ms.append((self._clock() - cmd.t_obs) * 1e3)
        else:
            if self.worker.refused:
                reason = "refused"
            elif not self.worker.connected:
                reason = "server_lost"
            elif obs is None and not self.worker.busy:
                reason = "no_observation"
            else:
                reason = "waiting"
            cmd = self._hold(measured, reason)
            if cmd is not None:
                self.stats.hold_steps += 1
        self.states.poll()
        if cmd is not None:
            if (cmd.kind, cmd.reason) != (self.stats.mode, self.stats.reason):
                state = f"{cmd.kind} ({cmd.reason})" if cmd.reason else cmd.kind
                self.states.note(state, f"policy loop: {state}")
            self.stats.mode, self.stats.reason = cmd.kind, cmd.reason
            self.last = cmd
        return cmd
