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

Confirmers: ``judge``, the sim twin's own success flag at that moment (the twin's stand-in for
the operator, as its judge labels the demos for the human's keys).

>>> ring = FrameRing(2); ring.add(np.zeros((2, 2, 3), np.uint8)); ring.add(np.ones((2, 2, 3)))
>>> len(ring.frames()), int(ring.frames()[-1].max())
(2, 1)
>>> confirm_by_judge(True), confirm_by_judge(False), confirm_by_judge(None)
(True, False, None)
>>> c = CorrectionCounts(); c.add(True); c.add(False); c.add(False); c.to_dict()
{'operator_confirmed': 1, 'operator_rejected': 2}
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


@dataclass
class CorrectionCounts:
    confirmed: int = 0
    rejected: int = 0

    def add(self, ok: bool) -> None:
        if ok:
            self.confirmed += 1
        else:
            self.rejected += 1

    def to_dict(self) -> dict[str, int]:
        return {"operator_confirmed": self.confirmed, "operator_rejected": self.rejected}


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

    def write(self, frames: list[np.ndarray], success: bool, by: str) -> int:
        """One correction: ``frames`` [K, H, W, 3] labelled ``success``; its episode index."""
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
            extra={"correction": "confirmed" if success else "rejected", "by": by},
        )
        index = self.store.write(Episode(info, steps))
        self.written += 1
        return index
