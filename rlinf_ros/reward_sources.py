"""Reward sources of the robot PC, without ROS: the learned success classifier (asked over the
policy wire) and episode events (the sim twin's success flag, the human's success / failure keys).

Who decides an episode's reward when both a classifier and a human are there
(:class:`EpisodeVerdict`): the first verdict of an episode stands. A human key (or another
judge's end, e.g. the twin's timeout) that comes before the classifier's success is the
episode's reward and silences the classifier until the scene changes (a frame it scores
unsuccessful: the reset happened; a begin alone does not reopen it, so a success the arm still
shows after the episode's end is never counted twice); a human key after the classifier's end is a
verdict on an episode already closed, which the recorder / streamer ignore as well.

Error rates against a judge (:class:`JudgeWindow`): on the sim twin the simulator's success
flag is known (``task/reward``) but is not the reward; the reward node pairs each scored frame's
classifier decision with the judge's flag of that moment and reports, per window of ``n``
pairs, the false-positive rate (classifier success while the judge says no, over the judge's
no count) and the false-negative rate (likewise over the judge's yes count). Why there: only the
reward node sees both verdicts on the same frame; the stream carries just the episode's
terminal reward. Without a judge (a real bench) there is nothing to pair and no report.

Why the classifier is asked over the wire: the robot PC installs no torch. The learner trains
a classifier whose one "action" is ``p_success`` (``learner/runners/reward_classifier.py``) and
``rlinf serve --checkpoint`` serves it like any policy; :class:`ClassifierReward` sends it the
newest camera frame (resized to the size the server announces) and thresholds the answer.

>>> frame = np.zeros((4, 6, 3), np.uint8); frame[:, 3:] = 255
>>> resize_nearest(frame, 2, 3)[..., 0].tolist()
[[0, 0, 255], [0, 0, 255]]
>>> SuccessLatch(consecutive=2).update(True), SuccessLatch(consecutive=1).update(True)
(False, True)
>>> event_reward(EpisodeEvent("end", success=True)), event_reward(EpisodeEvent("begin"))
(1.0, None)
>>> judge_rates([True, False, True, False], [True, True, False, False])
JudgeRates(n=4, judge_pos=2, judge_neg=2, false_pos=1, false_neg=1, fp_rate=0.5, fn_rate=0.5)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlinf_contracts.transitions import EpisodeEvent

log = logging.getLogger(__name__)


def resize_nearest(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize of ``[H, W, C]`` (no OpenCV on the robot PC)."""
    h, w = img.shape[:2]
    if (h, w) == (height, width):
        return img
    rows = (np.arange(height) * h / height).astype(int)
    cols = (np.arange(width) * w / width).astype(int)
    return img[rows][:, cols]


@dataclass
class SuccessLatch:
    """Success once ``consecutive`` frames in a row were classified successful (debounce)."""

    consecutive: int = 1
    run: int = 0

    def update(self, success: bool) -> bool:
        self.run = self.run + 1 if success else 0
        return self.run >= self.consecutive


def event_reward(ev: EpisodeEvent) -> float | None:
    """An episode end's reward (1 on success, else 0); None for events that carry none."""
    return (1.0 if ev.success else 0.0) if ev.kind == "end" and ev.status != "aborted" else None


class ClassifierReward:
    """``p_success`` of a frame from a served classifier (``policy_server.client.PolicyClient``)."""

    def __init__(self, client: Any, camera: str = "", threshold: float = 0.5) -> None:
        self.client, self.threshold = client, threshold
        spec = getattr(client.metadata, "observation_spec", None) or {}
        cams = [k.split("/", 1)[1] for k in spec if k.startswith("images/")]
        if not cams:
            raise ValueError(
                f"the server at {client.url} announces no camera: is it a success classifier?"
            )
        self.camera = camera or cams[0]
        if self.camera not in cams:
            raise ValueError(f"reward.camera {self.camera!r} not served (server cameras: {cams})")
        self.height, self.width = spec[f"images/{self.camera}"][1][:2]
        self.state_dim = int(spec["state"][1][0]) if "state" in spec else 0

    def score(self, frame: np.ndarray, state: np.ndarray | None = None) -> tuple[float, bool]:
        """(p_success, p > threshold) of one RGB frame."""
        img = resize_nearest(np.asarray(frame, np.uint8), self.height, self.width)
        st = (
            np.zeros(self.state_dim, np.float32) if state is None else np.asarray(state, np.float32)
        )
        out = self.client.infer({"state": st, "images": {self.camera: img}})
        p = float(np.ravel(out["actions"])[0])
        return p, p > self.threshold


@dataclass
class Verdict:
    """What the reward node publishes for one input: the reward, the success flag, whether it
    also ends the episode on ``episode/event`` (the classifier's success), and who decided."""

    reward: float
    success: bool
    end: bool = False
    by: str = "classifier"


@dataclass
class EpisodeVerdict:
    """The classifier's verdicts within an episode, with the first verdict standing (see the
    module docstring): :meth:`on_score` per scored frame, :meth:`on_event` per episode event.

    >>> v = EpisodeVerdict(SuccessLatch(consecutive=1))
    >>> v.on_score(True)   # the classifier's success ends the episode
    Verdict(reward=1.0, success=True, end=True, by='classifier')
    >>> v.on_score(True) is None   # closed: no second end for the same success
    True
    >>> v.on_event(EpisodeEvent("end", status="truncated", reason="failure")) is None  # too late
    True
    >>> v.on_score(False)  # the scene was reset: scoring again
    Verdict(reward=0.0, success=False, end=False, by='classifier')
    >>> v.on_event(EpisodeEvent("end", status="truncated", reason="failure"))  # the human first
    Verdict(reward=0.0, success=False, end=False, by='failure')
    >>> v.on_score(True) is None   # the human's verdict stands until the scene changes
    True
    """

    latch: SuccessLatch
    own_reason: str = "classifier"
    closed: bool = False

    def on_score(self, success: bool) -> Verdict | None:
        if self.closed:
            if success:
                return None  # still the decided scene: no second verdict, no repeated end
            self.closed = False  # the scene was reset (or the cube moved away): scoring again
        ok = self.latch.update(success)
        if ok and self.latch.run == self.latch.consecutive:
            self.closed = True
            return Verdict(1.0, True, end=True)
        return Verdict(1.0 if ok else 0.0, ok)

    def on_event(self, ev: EpisodeEvent) -> Verdict | None:
        # a begin changes nothing: the classifier scores again once it sees the scene changed
        if ev.kind != "end" or ev.reason == self.own_reason or self.closed:
            return None  # our own end coming back, or a verdict on an episode already closed
        reward = event_reward(ev)
        self.closed = True
        return None if reward is None else Verdict(reward, reward > 0, by=ev.reason or "event")


@dataclass(frozen=True)
class JudgeRates:
    """The classifier against a judge over ``n`` paired frames."""

    n: int
    judge_pos: int
    judge_neg: int
    false_pos: int
    false_neg: int
    fp_rate: float | None  # None when the judge said no on none of the frames
    fn_rate: float | None  # None when the judge said yes on none of the frames

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_rates(classifier: Sequence[bool], judge: Sequence[bool]) -> JudgeRates:
    """False-positive / false-negative rates of ``classifier`` decisions against ``judge``
    flags (same frames, same order): FP rate = classifier yes and judge no / judge no; FN rate =
    classifier no and judge yes / judge yes."""
    if len(classifier) != len(judge):
        raise ValueError(f"{len(classifier)} classifier decisions vs {len(judge)} judge flags")
    c, j = np.asarray(classifier, bool), np.asarray(judge, bool)
    pos, neg = int(j.sum()), int((~j).sum())
    fp, fn = int((c & ~j).sum()), int((~c & j).sum())
    return JudgeRates(
        n=len(j),
        judge_pos=pos,
        judge_neg=neg,
        false_pos=fp,
        false_neg=fn,
        fp_rate=fp / neg if neg else None,
        fn_rate=fn / pos if pos else None,
    )


@dataclass
class JudgeWindow:
    """Pairs (classifier decision, judge flag) into windows of ``size``; :meth:`add` returns the
    window's :class:`JudgeRates` when it fills (numbered from 1 in ``windows``), else None.

    >>> w = JudgeWindow(size=2)
    >>> w.add(True, True) is None, w.add(True, False).fp_rate, w.windows
    (True, 1.0, 1)
    """

    size: int = 200
    windows: int = 0
    _pairs: list[tuple[bool, bool]] = field(default_factory=list)

    def add(self, classifier: bool, judge: bool) -> JudgeRates | None:
        self._pairs.append((bool(classifier), bool(judge)))
        if len(self._pairs) < self.size:
            return None
        c, j = zip(*self._pairs, strict=True)
        self._pairs.clear()
        self.windows += 1
        return judge_rates(c, j)
