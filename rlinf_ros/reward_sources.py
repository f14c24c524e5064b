"""Reward sources of the robot PC, without ROS: the learned success classifier (asked over the
policy wire) and episode events (the sim twin's success flag, the human's success / failure keys).

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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
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
