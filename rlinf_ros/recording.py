"""Episodes from the robot PC's step records and episode events, without ROS.

Where steps come from: the policy client publishes a
:class:`~rlinf_contracts.transitions.StepRecord` on ``policy_client/step`` every tick it commands
the arm (the observation it acted on, the normalised action executed -- the policy's, or the
teleop's while a human holds the intervention flag -- the weight version). Episode boundaries and
outcomes come as
:class:`~rlinf_contracts.transitions.EpisodeEvent` on ``episode/event`` from whoever judges:
the task node (sim twin), the teleop node (success / failure / re-record keys), a reward
classifier. :class:`EpisodeAssembler` joins the two into schema steps with reward and done
flags and hands them to a sink: :class:`StoreSink` (the recorder: a local episode store;
``rlinf_ros.mcap_sink`` for a rosbag2 MCAP recording, :class:`TeeSink` for both) or
:class:`StreamSink` (the streamer: ``ws://learner/transitions``). Both nodes run the same
assembler on the same topics, so the learner's store and the robot's store hold the same steps.

Rules: a step's reward is known only when the episode goes on or ends, so the newest record
waits; an ``end`` event turns the newest record into the episode's *final observation* and the
one before into its last step (reward ``success_reward`` on success; ``terminated`` on success,
``truncated`` otherwise; ``aborted`` for a re-record). Records of an ended episode are ignored
until the client starts another (a new ``episode`` number). With stamps on both sides, "newest"
means newest observed before the event's stamp, whatever the arrival order
(:class:`EpisodeAssembler`).

>>> import numpy as np
>>> from rlinf_contracts.episode import StepLayout
>>> sink = ListSink()
>>> asm = EpisodeAssembler(EpisodeTemplate("t", StepLayout(1, 1)), sink)
>>> for i in range(3):
...     asm.on_record(StepRecord(episode=0, state=np.full(1, i, np.float32),
...                              action=np.zeros(1, np.float32)))
>>> asm.on_event(EpisodeEvent("end", success=True))
>>> [(kind, args[1]) for kind, *args in sink.calls if kind == "step"], sink.calls[-1][:3]
([('step', 0.0), ('step', 1.0)], ('end', 0, 'complete'))
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlinf_contracts.episode import EpisodeInfo, StepLayout
from rlinf_contracts.transitions import EpisodeEvent, StepRecord, Transition

log = logging.getLogger(__name__)


@dataclass
class EpisodeTemplate:
    """What every recorded episode's ``EpisodeInfo`` starts from."""

    task: str
    layout: StepLayout
    robot: dict[str, Any] | None = None
    instruction: str = ""
    control_hz: float = 10.0
    source: str = "online"

    def info(self, extra: dict[str, Any] | None = None) -> EpisodeInfo:
        return EpisodeInfo(
            task=self.task,
            layout=self.layout,
            robot=self.robot,
            instruction=self.instruction,
            control_hz=self.control_hz,
            source=self.source,
            extra=dict(extra or {}),
        )


@dataclass(frozen=True)
class AssembledStep:
    """One schema step as the assembler hands it to a sink.

    Why one value and not six arguments: every sink, and the tee fanning a step out to several,
    takes the very same step; naming its parts once keeps the sinks from restating them."""

    episode: int  # the robot's episode number
    index: int  # the step's place in its episode
    record: StepRecord
    reward: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class AssembledEnd:
    """An episode's close as the assembler hands it to a sink: ``status`` is ``complete``,
    ``truncated`` or ``aborted``; ``final`` the final observation (None when aborted or when the
    episode holds no whole step)."""

    episode: int
    status: str
    success: bool
    final: dict[str, np.ndarray] | None

    def discarded(self, discard_aborted: bool) -> bool:
        """Whether a sink keeping episodes throws this one away: a re-record (aborted) when the
        sink discards those."""
        return self.status == "aborted" and discard_aborted


class EpisodeSink(Protocol):
    def begin(self, episode: int, info: EpisodeInfo) -> None: ...

    def step(self, step: AssembledStep) -> None: ...

    def end(self, end: AssembledEnd) -> None: ...


@dataclass
class RecordingStats:
    """What the assembler handed its sink, by outcome: the one count of episodes a run reports.

    ``written`` episodes ended with a verdict and were handed to the sink to keep (``successes``
    + ``failures``, each with its success flag); ``aborted`` ones (re-recorded, or too short to
    hold a step) are no demonstration; ``episodes`` also counts the one still open."""

    episodes: int = 0
    successes: int = 0
    failures: int = 0
    aborted: int = 0
    steps: int = 0
    interventions: int = 0

    @property
    def written(self) -> int:
        return self.successes + self.failures

    def describe(self) -> str:
        """One line: ``4 episodes written (3 successful, 1 failed), 1 aborted``."""
        return (
            f"{self.written} episodes written ({self.successes} successful, {self.failures} "
            f"failed), {self.aborted} aborted"
        )

    def summary(self) -> dict[str, Any]:
        done = self.written
        return {
            "episodes": self.episodes,
            "written": done,
            "successes": self.successes,
            "failures": self.failures,
            "aborted": self.aborted,
            "success_rate": self.successes / done if done else None,
            "steps": self.steps,
            "intervention_ratio": self.interventions / self.steps if self.steps else None,
        }


class EpisodeAssembler:
    """Joins step records and episode events into schema steps; see the module docstring.

    Why an end event may wait: records and events travel on two topics, so two subscribers
    (the recorder and the streamer) can hear an end event before or after the records published
    around the same moment -- under load even before the first record of a short episode -- and
    would cut the episode differently; the learner's store would then differ from the robot's.
    When the event and the records carry stamps (the judge's clock and the observation's), the
    cut is by time instead of arrival: the episode's final observation is the newest record
    observed no later than the event. A stamped end waits, in arrival order, until a record
    observed after it or of another episode comes, or until :meth:`poll` finds no record heard
    for ``settle_s`` (the client stopped publishing). An end stamped before the first record of
    an episode judges none of it (a verdict on an episode this subscriber never heard) and is
    dropped. Unstamped events or records end at once, as they arrive.

    An episode with no whole step before its end (its verdict came before a second observation)
    holds no transition: it is closed as ``aborted``, the same way by every subscriber.
    """

    def __init__(
        self,
        template: EpisodeTemplate,
        sink: EpisodeSink,
        success_reward: float = 1.0,
        settle_s: float = 1.0,
        hold: int = 6,
    ) -> None:
        self.template, self.sink, self.success_reward = template, sink, success_reward
        self.settle_s, self.hold = settle_s, max(2, hold)
        self.current: int | None = None  # robot episode being recorded
        self.ended: int | None = (
            None  # last episode closed by an event (its late records are ignored)
        )
        self.index = 0
        # records not yet emitted, oldest first: a step's reward depends on what comes next, the
        # newest may become the final observation, and ``hold`` in all are kept so an end event
        # arriving up to ``hold - 2`` records late still cuts at its stamp
        self._tail: list[StepRecord] = []
        self._ends: list[
            EpisodeEvent
        ] = []  # stamped end events waiting for their records, oldest first
        self._heard = 0.0  # when the last event or record arrived (the clock ``poll`` is given)
        self.stats = RecordingStats()
        # merged into each new episode's info extra (e.g. ``reward_judge``: the reward node's
        # newest error-rate report, which the streamer carries to the learner this way)
        self.annotations: dict[str, Any] = {}

    def on_record(self, rec: StepRecord, now: float | None = None) -> None:
        self._heard = time.monotonic() if now is None else now
        if self._ends and self.current is not None and rec.episode != self.current:
            self._end_with(
                self._ends.pop(0)
            )  # the client moved on: everything observed before the end is in
        if rec.episode == self.ended:
            return  # observed after its episode's verdict
        if rec.episode != self.current:
            if self.current is not None:
                log.warning(
                    "episode %d ended without an end event; recorded as aborted", self.current
                )
                self._end("aborted", False)
            while self._ends and rec.timestamp > self._ends[0].stamp:
                log.warning(
                    "dropping an end event stamped %.3f, before episode %d's first record (%.3f)",
                    self._ends[0].stamp,
                    rec.episode,
                    rec.timestamp,
                )
                self._ends.pop(0)
            self.current, self.index = rec.episode, 0
            self._tail = []
            self.stats.episodes += 1
            self.sink.begin(
                rec.episode, self.template.info({**self.annotations, "robot_episode": rec.episode})
            )
        self._tail.append(rec)
        self._cut()
        while self.current is not None and len(self._tail) > self.hold:
            self._emit(self._tail.pop(0), 0.0, False, False)

    def on_event(self, ev: EpisodeEvent, now: float | None = None) -> None:
        self._heard = time.monotonic() if now is None else now
        # the client starts another episode: a waiting end has all its records
        if ev.kind == "begin":
            if self._ends and self.current is not None:
                self._end_with(self._ends.pop(0))
            return
        if ev.stamp > 0 and all(r.timestamp > 0 for r in self._tail):
            self._ends.append(ev)
            self._cut()
        elif self.current is not None:  # unstamped: ends what has arrived
            self._end_with(ev)

    def poll(self, now: float | None = None) -> None:
        """End a waiting episode once ``settle_s`` has passed with no record or event heard."""
        if (
            self._ends
            and self.current is not None
            and (time.monotonic() if now is None else now) - self._heard >= self.settle_s
        ):
            self._end_with(self._ends.pop(0))

    def _cut(self) -> None:
        """End the current episode at the oldest waiting end's stamp once a record observed after it
        is here."""
        while (
            self._ends
            and self.current is not None
            and any(r.timestamp > self._ends[0].stamp for r in self._tail)
        ):
            ev = self._ends.pop(0)
            self._tail = [
                r for r in self._tail if r.timestamp <= ev.stamp
            ]  # the rest: after the verdict
            self._end_with(ev)

    def _end_with(self, ev: EpisodeEvent) -> None:
        success = ev.success and ev.status != "aborted"
        status = "aborted" if ev.status == "aborted" else ("complete" if success else "truncated")
        if status != "aborted" and self.index == 0 and len(self._tail) < 2:
            log.warning(
                "episode %d ended (%s) before a whole step was recorded; recorded as aborted",
                self.current,
                status,
            )
            status, success = "aborted", False
        self._end(status, success)

    def _emit(self, rec: StepRecord, reward: float, terminated: bool, truncated: bool) -> None:
        assert self.current is not None
        self.sink.step(AssembledStep(self.current, self.index, rec, reward, terminated, truncated))
        self.index += 1
        self.stats.steps += 1
        self.stats.interventions += int(rec.intervention)

    def _end(self, status: str, success: bool) -> None:
        assert self.current is not None
        final = None
        if len(self._tail) >= 2 and status != "aborted":
            *steps, last, newest = self._tail
            for rec in steps:
                self._emit(rec, 0.0, False, False)
            self._emit(last, self.success_reward if success else 0.0, success, not success)
            final = {
                "state": np.asarray(newest.state, np.float32),
                **{f"images/{k}": np.asarray(v, np.uint8) for k, v in newest.images.items()},
            }
        elif status != "aborted":
            for rec in self._tail[:-1]:
                self._emit(rec, 0.0, False, False)
        self.sink.end(AssembledEnd(self.current, status, success, final))
        self.stats.successes += int(success)
        self.stats.failures += int(not success and status != "aborted")
        self.stats.aborted += int(status == "aborted")
        self.ended, self.current = self.current, None
        self._tail = []


@dataclass
class ListSink:
    """Records the calls (tests, doctests)."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self.calls.append(("begin", episode))

    def step(self, step: AssembledStep) -> None:
        self.calls.append(
            ("step", float(step.record.state[0]), step.reward, step.terminated, step.truncated)
        )

    def end(self, end: AssembledEnd) -> None:
        self.calls.append(("end", end.episode, end.status, end.success, end.final))


@dataclass
class TeeSink:
    """Every call to each of ``sinks``, in order: the recorder writing a store and a bag of the
    same assembled steps (``recorder.format: both``)."""

    sinks: list[EpisodeSink]

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        for s in self.sinks:
            s.begin(episode, info)

    def step(self, step: AssembledStep) -> None:
        for s in self.sinks:
            s.step(step)

    def end(self, end: AssembledEnd) -> None:
        for s in self.sinks:
            s.end(end)


class StoreSink:
    """The recorder's sink: steps into a local :class:`rlinf_data.EpisodeStore` (crash-safe)."""

    def __init__(self, path: str, discard_aborted: bool = True) -> None:
        from rlinf_data.store import EpisodeStore

        self.store = EpisodeStore(path, mode="a")
        self.discard_aborted = discard_aborted
        self._writer: Any = None

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self._writer = self.store.begin(info)

    def step(self, step: AssembledStep) -> None:
        self._writer.append(step.record.step(step.reward, step.terminated, step.truncated))

    def end(self, end: AssembledEnd) -> None:
        w, self._writer = self._writer, None
        index = w.end(status=end.status, success=end.success, final=end.final if w.length else None)
        if end.discarded(self.discard_aborted):  # a re-record: the operator threw it away
            self.store.discard(index)


class StreamSink:
    """The streamer's sink: each step / end becomes a numbered item on ``ws://learner/transitions``."""

    def __init__(self, streamer: Any) -> None:
        self.streamer = streamer  # rlinf_ros.streaming.TransitionStreamer (put never blocks)
        self._info: dict[str, Any] | None = None
        self._index = 0

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self._info, self._index = info.to_dict(), 0

    def step(self, step: AssembledStep) -> None:
        self.streamer.put(
            Transition(
                seq=0,
                episode=step.episode,
                index=step.index,
                step=step.record,
                reward=step.reward,
                terminated=step.terminated,
                truncated=step.truncated,
                info=self._info if step.index == 0 else None,
            )
        )
        self._index = step.index + 1

    def end(self, end: AssembledEnd) -> None:
        e, i = end, self._index  # the end item takes the index after the episode's last step
        self.streamer.put(
            Transition(
                seq=0, episode=e.episode, index=i, end=e.status, success=e.success, final=e.final
            )
        )
