"""Episodes from the robot PC's step records and episode events, without ROS.

Where steps come from: the policy client publishes a :class:`~rlinf_contracts.transitions.StepRecord`
on ``policy_client/step`` every tick it commands the arm (the observation it acted on, the
normalised action executed -- the policy's, or the teleop's while a human holds the
intervention flag -- the weight version). Episode boundaries and outcomes come as
:class:`~rlinf_contracts.transitions.EpisodeEvent` on ``episode/event`` from whoever judges:
the task node (sim twin), the teleop node (success / failure / re-record keys), a reward
classifier. :class:`EpisodeAssembler` joins the two into schema steps with reward and done
flags and hands them to a sink: :class:`StoreSink` (the recorder: a local episode store) or
:class:`StreamSink` (the streamer: ``ws://learner/transitions``). Both nodes run the same
assembler on the same topics, so the learner's store and the robot's store hold the same steps.

Rules: a step's reward is known only when the episode goes on or ends, so the newest record
waits; an ``end`` event turns the newest record into the episode's *final observation* and the
one before into its last step (reward ``success_reward`` on success; ``terminated`` on success,
``truncated`` otherwise; ``aborted`` for a re-record). Records of an ended episode are ignored
until the client starts another (a new ``episode`` number).

>>> import numpy as np
>>> from rlinf_contracts.episode import StepLayout
>>> sink = ListSink()
>>> asm = EpisodeAssembler(EpisodeTemplate("t", StepLayout(1, 1)), sink)
>>> for i in range(3):
...     asm.on_record(StepRecord(episode=0, state=np.full(1, i, np.float32), action=np.zeros(1, np.float32)))
>>> asm.on_event(EpisodeEvent("end", success=True))
>>> [(kind, args[1]) for kind, *args in sink.calls if kind == "step"], sink.calls[-1][:3]
([('step', 0.0), ('step', 1.0)], ('end', 0, 'complete'))
"""

from __future__ import annotations

import logging
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
        return EpisodeInfo(task=self.task, layout=self.layout, robot=self.robot, instruction=self.instruction,
                           control_hz=self.control_hz, source=self.source, extra=dict(extra or {}))


class EpisodeSink(Protocol):
    def begin(self, episode: int, info: EpisodeInfo) -> None: ...

    def step(self, episode: int, index: int, record: StepRecord, reward: float, terminated: bool,
             truncated: bool) -> None: ...

    def end(self, episode: int, status: str, success: bool, final: dict[str, np.ndarray] | None) -> None: ...


@dataclass
class RecordingStats:
    episodes: int = 0
    successes: int = 0
    aborted: int = 0
    steps: int = 0
    interventions: int = 0

    def summary(self) -> dict[str, Any]:
        done = self.episodes - self.aborted
        return {"episodes": self.episodes, "successes": self.successes, "aborted": self.aborted,
                "success_rate": self.successes / done if done else None, "steps": self.steps,
                "intervention_ratio": self.interventions / self.steps if self.steps else None}


class EpisodeAssembler:
    def __init__(self, template: EpisodeTemplate, sink: EpisodeSink, success_reward: float = 1.0) -> None:
        self.template, self.sink, self.success_reward = template, sink, success_reward
        self.current: int | None = None  # robot episode being recorded
        self.ended: int | None = None  # last episode closed by an event (its late records are ignored)
        self.index = 0
        self._held: StepRecord | None = None  # a step whose reward depends on what comes next
        self._newest: StepRecord | None = None  # the newest observation (final, if the episode ends now)
        self.stats = RecordingStats()

    def on_record(self, rec: StepRecord) -> None:
        if rec.episode == self.ended:
            return
        if rec.episode != self.current:
            if self.current is not None:
                log.warning("episode %d ended without an end event; recorded as aborted", self.current)
                self._end("aborted", False)
            self.current, self.index = rec.episode, 0
            self._held = self._newest = None
            self.stats.episodes += 1
            self.sink.begin(rec.episode, self.template.info({"robot_episode": rec.episode}))
        if self._held is not None:
            self._emit(self._held, 0.0, False, False)
        self._held, self._newest = self._newest, rec

    def on_event(self, ev: EpisodeEvent) -> None:
        if ev.kind == "begin" or self.current is None:
            return
        success = ev.success and ev.status != "aborted"
        status = "aborted" if ev.status == "aborted" else ("complete" if success else "truncated")
        self._end(status, success)

    def _emit(self, rec: StepRecord, reward: float, terminated: bool, truncated: bool) -> None:
        assert self.current is not None
        self.sink.step(self.current, self.index, rec, reward, terminated, truncated)
        self.index += 1
        self.stats.steps += 1
        self.stats.interventions += int(rec.intervention)

    def _end(self, status: str, success: bool) -> None:
        assert self.current is not None
        final = None
        if self._held is not None and status != "aborted":
            self._emit(self._held, self.success_reward if success else 0.0, success, not success)
            newest = self._newest
            assert newest is not None
            final = {"state": np.asarray(newest.state, np.float32),
                     **{f"images/{k}": np.asarray(v, np.uint8) for k, v in newest.images.items()}}
        self.sink.end(self.current, status, success, final)
        self.stats.successes += int(success)
        self.stats.aborted += int(status == "aborted")
        self.ended, self.current = self.current, None
        self._held = self._newest = None


@dataclass
class ListSink:
    """Records the calls (tests, doctests)."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self.calls.append(("begin", episode))

    def step(self, episode: int, index: int, record: StepRecord, reward: float, terminated: bool,
             truncated: bool) -> None:
        self.calls.append(("step", float(record.state[0]), reward, terminated, truncated))

    def end(self, episode: int, status: str, success: bool, final: dict[str, np.ndarray] | None) -> None:
        self.calls.append(("end", episode, status, success, final))


class StoreSink:
    """The recorder's sink: steps into a local :class:`rlinf_data.EpisodeStore` (crash-safe)."""

    def __init__(self, path: str, discard_aborted: bool = True) -> None:
        from rlinf_data.store import EpisodeStore

        self.store = EpisodeStore(path, mode="a")
        self.discard_aborted = discard_aborted
        self._writer: Any = None

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self._writer = self.store.begin(info)

    def step(self, episode: int, index: int, record: StepRecord, reward: float, terminated: bool,
             truncated: bool) -> None:
        self._writer.append(record.step(reward, terminated, truncated))

    def end(self, episode: int, status: str, success: bool, final: dict[str, np.ndarray] | None) -> None:
        w, self._writer = self._writer, None
        index = w.end(status=status, success=success, final=final if w.length else None)
        if status == "aborted" and self.discard_aborted:  # a re-record: the operator threw it away
            self.store.discard(index)


class StreamSink:
    """The streamer's sink: each step / end becomes a numbered item on ``ws://learner/transitions``."""

    def __init__(self, streamer: Any) -> None:
        self.streamer = streamer  # rlinf_ros.streaming.TransitionStreamer (put never blocks)
        self._info: dict[str, Any] | None = None
        self._index = 0

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        self._info, self._index = info.to_dict(), 0

    def step(self, episode: int, index: int, record: StepRecord, reward: float, terminated: bool,
             truncated: bool) -> None:
        self.streamer.put(Transition(seq=0, episode=episode, index=index, step=record, reward=reward,
                                     terminated=terminated, truncated=truncated,
                                     info=self._info if index == 0 else None))
        self._index = index + 1

    def end(self, episode: int, status: str, success: bool, final: dict[str, np.ndarray] | None) -> None:
        self.streamer.put(Transition(seq=0, episode=episode, index=self._index, end=status, success=success,
                                     final=final))
