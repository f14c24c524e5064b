"""The tasks of ``benchmarks/ros_online_rlpd.py``: per ``--task``, the twin graph, learner
config, scripted human, results stem and (camera-only push) the learned reward and pixel encoder.

Why it exists: the table of what each task runs is data the benchmark's steps read; it lives
apart from the script so ``ros_online_rlpd.py`` holds the run itself. Imported by the script
from ``benchmarks/`` after it puts ``tests/rlinf_ros`` on ``sys.path`` (for ``online_rig``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from online_rig import GRAPH_NODES

STEM = "ros_online_rlpd"


@dataclass(frozen=True)
class PixelEncoder:
    """The frozen pretrained encoder of a camera-only learner: ``weights`` when it holds a
    checkpoint (a longer pretraining run), else a quick pretraining on the demos' frames so the
    benchmark runs from a bare checkout."""

    config: str  # the pretraining config (rlinf train)
    weights: str  # the preferred run directory (model.encoder.weights)
    cameras: tuple[str, ...]  # the cameras it is pretrained on (the learner's)
    quick_updates: int = 200  # the fallback pretraining's length


@dataclass(frozen=True)
class BenchTask:
    graph: str  # the twin graph (robot node world, policy client spec, task judge)
    learner: str  # the learner config (env = the simulated task of the robot spec)
    script: str  # the scripted human of the demos (teleop device scripted, script.task)
    stem: str  # results file stem
    action: dict | None = None  # robot_spec.action overrides (reach: the learner's ee_delta_pos)
    # graph overrides of the demo collection (a learned-reward graph: the judge ends the demos,
    # no reward node: the demos are what the classifier learns from)
    demo_graph: dict = field(default_factory=dict)
    online_graph: dict = field(default_factory=dict)  # graph overrides of the online run
    classifier: str | None = None  # the success classifier's config: reward node + served model
    encoder: PixelEncoder | None = None
    # episodes of the scripted human with noise on its commands, recorded for the classifier's
    # negatives (its near misses; HIL-SERL's operators record failures the same way)
    negatives: int = 0
    negative_noise: float = 0.7

    @property
    def reward_source(self) -> str:
        """Whose verdict the twin's training episodes' success is (the streamed reward)."""
        return "the classifier's reward" if self.classifier else "the twin's judge"

    @property
    def nodes(self) -> tuple[str, ...]:
        """The graph's node processes: the reward node too when the reward is learned."""
        return GRAPH_NODES + (("reward",) if self.classifier else ())


# the twin's judge ends the episodes and no reward node runs (the demos of a learned reward)
_JUDGE_REWARD = {"task": {"judge_ends_episodes": True}, "reward": {"enabled": False}}

TASKS = {
    "reach": BenchTask(
        "configs/ros_sim_franka.yaml",
        "configs/ros_online_rlpd.yaml",
        "reach",
        STEM,
        {"control": "ee_delta_pos", "dim": 4},
    ),
    "push": BenchTask(
        "configs/ros_sim_franka_push.yaml",
        "configs/ros_online_rlpd_push.yaml",
        "push",
        f"{STEM}_push",
    ),
    "insert": BenchTask(
        "configs/ros_sim_franka_insert.yaml",
        "configs/ros_online_rlpd_insert.yaml",
        "insert",
        f"{STEM}_insert",
    ),
    "push_pixels": BenchTask(
        "configs/ros_sim_franka_push_pixels.yaml",
        "configs/ros_online_rlpd_push_pixels.yaml",
        "push",
        f"{STEM}_push_pixels",
        demo_graph=_JUDGE_REWARD,
        classifier="configs/reward_classifier_push.yaml",
        negatives=40,
        encoder=PixelEncoder(
            "configs/encoder_pretrain.yaml", "runs/encoder_pretrain_front", ("front", "wrist")
        ),
    ),
    # the control of the learned reward: the same camera-only learner and graph, with the twin's
    # judge as the reward (what a perfect classifier, or an operator on every episode, gives)
    "push_pixels_judge": BenchTask(
        "configs/ros_sim_franka_push_pixels.yaml",
        "configs/ros_online_rlpd_push_pixels.yaml",
        "push",
        f"{STEM}_push_pixels_judge",
        demo_graph=_JUDGE_REWARD,
        online_graph=_JUDGE_REWARD,
        encoder=PixelEncoder(
            "configs/encoder_pretrain.yaml", "runs/encoder_pretrain_front", ("front", "wrist")
        ),
    ),
}
