"""The operator's verdict on the classifier's successes, and the frames it labels.

Why: online RL walks to what a learned reward calls success. A classifier fitted offline scores
well on held-out rollouts and still leaves states it wrongly calls success; the policy finds them
within minutes and every episode then ends in a reward the task never earned (the camera-only
push twin: a false-positive rate of 0.15-0.54 per frame after minute 7, against 0.00-0.07 while
the policy was naive). HIL-SERL's answer is the operator: the classifier proposes, a person
glances at the scene, and a rejected "success" is both a reward withheld and a new negative for
the next classifier.

Here (``reward.confirm``) the classifier's success asks a confirmer (:data:`CONFIRMERS`) before it
becomes a reward: confirmed, the episode ends in success as before; rejected, it ends as a
failure (``truncated``, reason ``operator``: the state is not terminal, the learner bootstraps
it) and the scene is reset. Either way the frames that fired the success (the last
``consecutive`` scored ones, as the classifier saw them) are kept (``reward.corrections_dir``)
as a one-episode entry of an ordinary episode store, labelled by the verdict: ``rlinf train
configs/reward_classifier_push.yaml data.extra_stores=[..., DIR] push.url=ws://...:8200``
retrains the classifier on them and hot-swaps the served one. The counts go out with the
judge's error-rate report, so the learner logs how often the operator had to say no.

The operator also catches what the classifier misses: a success key pressed on a bench (the
teleop's ``success`` end) keeps the frames before it as a positive; on the twin,
``reward.catch_missed: N`` has the confirmer press that key once it has seen success on ``N``
scored frames in a row of an episode the classifier left open (:class:`MissedSuccess`). A
classifier retrained on rejections alone grows conservative (it missed ~0.8 of the twin's real
success frames after eight rounds); the caught successes are the positives that pull it back, and
a reward the run would otherwise lose.

Confirmers: ``judge``, the sim twin's own success flag at that moment (the twin's stand-in for
the operator, as its judge labels the demos for the human's keys).

>>> ring = FrameRing(2); ring.add(np.zeros((2, 2, 3), np.uint8)); ring.add(np.ones((2, 2, 3)))
>>> len(ring.frames()), int(ring.frames()[-1].max())
(2, 1)
>>> confirm_by_judge(True), confirm_by_judge(False), confirm_by_judge(None)
(True, False, None)
>>> c = CorrectionCounts(); c.add("confirmed"); c.add("rejected"); c.add("rejected"); c.to_dict()
{'operator_confirmed': 1, 'operator_rejected': 2, 'operator_caught': 0}
>>> m = MissedSuccess(after=2); [m.update(s) for s in (True, True, True, False, True, True)]
[False, True, False, False, False, True]
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlinf_contracts.episode import SCALARS, Episode, EpisodeInfo, StepLayout

log = logging.getLogger(__name__)

OPERATOR_REASON = "operator"  # the end event's reason when the operator rejects a success


def confirm_by_judge(judge: bool | None) -> bool | None:
    """The sim twin's operator: the twin's success flag of the moment (None: none heard yet)."""
    return judge


# confirm name -> the verdict from what the reward node knows (the judge's newest flag)
CONFIRMERS: dict[str, Callable[[bool | None], bool | None]] = {"judge": confirm_by_judge}


class FrameRing:
    """The last ``size`` scored frames, oldest first: those that fired a success."""

    def __init__(self, size: int) -> None:
        self._frames: deque[np.ndarray] = deque(maxlen=max(1, size))

    def add(self, frame: np.ndarray) -> None:
        self._frames.append(np.asarray(frame, np.uint8))

    def frames(self) -> list[np.ndarray]:
        return list(self._frames)


# what the operator said: confirmed / rejected a classifier success, caught one it missed
VERDICTS = ("confirmed", "rejected", "caught")


@dataclass
class CorrectionCounts:
    confirmed: int = 0
    rejected: int = 0
    caught: int = 0

    def add(self, verdict: str) -> None:
        setattr(self, verdict, getattr(self, verdict) + 1)

    def to_dict(self) -> dict[str, int]:
        return {f"operator_{v}": getattr(self, v) for v in VERDICTS}


class MissedSuccess:
    """The twin's operator pressing the success key: :meth:`update` per scored frame of an episode
    the classifier has not decided, with what the operator sees; True once it has seen success
    on ``after`` frames in a row (0: never). Then it waits for the scene to look undone (the
    reset) before it can press again, so one success is one key press."""

    def __init__(self, after: int) -> None:
        self.after, self.run, self.armed = after, 0, True

    def update(self, sees_success: bool | None) -> bool:
        if not sees_success:
            self.run, self.armed = 0, self.armed or sees_success is False
            return False
        if not self.after or not self.armed:
            return False
        self.run += 1
        if self.run < self.after:
            return False
        self.decided()
        return True

    def decided(self) -> None:
        """The episode's success is decided (by the key, the classifier or a person): no key
        press for it until the scene looks undone."""
        self.run, self.armed = 0, False


class CorrectionStore:
    """Each verdict's frames as one episode of an episode store at ``path`` (the reward
    classifier's ``data.extra_stores`` reads it as it reads demos: a success's last frames are
    positive, a failure's all negative). States are zeros of the classifier's state size (what
    the reward node sends it); actions are a zero placeholder."""

    TASK = "reward_corrections"  # the episodes' task name (the classifier reads no task)

    def __init__(self, path: str | Path, camera: str, state_dim: int) -> None:
        from rlinf_data.store import EpisodeStore

        self.path, self.camera, self.state_dim = Path(path), camera, state_dim
        self.store = EpisodeStore(self.path, mode="a")
        self.written = 0

    def write(self, frames: list[np.ndarray], verdict: str, by: str) -> int:
        """One correction: ``frames`` [K, H, W, 3], a success unless ``verdict`` is
        ``rejected``; its episode index."""
        success = verdict != "rejected"
        images = np.stack(frames).astype(np.uint8)
        n, h, w = images.shape[:3]
        layout = StepLayout(self.state_dim, 1, {self.camera: (h, w)})
        steps = {
            "state": np.zeros((n, self.state_dim), np.float32),
            "action": np.zeros((n, 1), np.float32),
            f"images/{self.camera}": images,
            **{k: np.zeros(n, dt) for k, dt in SCALARS.items()},
        }
        info = EpisodeInfo(
            task=self.TASK,
            layout=layout,
            source="online",
            success=success,
            status="complete" if success else "truncated",
            extra={"correction": verdict, "by": by},
        )
        index = self.store.write(Episode(info, steps))
        self.written += 1
        return index
