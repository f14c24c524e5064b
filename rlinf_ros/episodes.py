"""Episodes on the ROS 2 twin: goal sampling, success tests and the bookkeeping of a run.

Why ROS-free: the task node (``rlinf_ros.nodes.task``) only wires topics and services to this;
the scoring — the same success test the simulator applies — is unit-tested on its own.
Judges are registered by task name; each samples a goal in the policy's (world) frame and
scores an end-effector position in that frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlinf_contracts.registry import Registry


class Judge(Protocol):
    def sample_goal(self, rng: np.random.Generator) -> np.ndarray: ...

    def success(self, ee: np.ndarray, goal: np.ndarray) -> bool: ...


@dataclass(frozen=True)
class ReachJudge:
    """Reach: a goal uniform in a box; success within ``radius`` of it (the simulator's test)."""

    center: tuple[float, float, float]
    half: tuple[float, float, float]
    radius: float

    def sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.center) + rng.uniform(-1.0, 1.0, size=3) * np.asarray(self.half)

    def success(self, ee: np.ndarray, goal: np.ndarray) -> bool:
        return float(np.linalg.norm(np.asarray(ee) - np.asarray(goal))) < self.radius


@dataclass(frozen=True)
class SceneJudge:
    """A twin whose robot node runs the simulator's scene (``franka_language``): the scene samples
    the episode (layout, colours, instruction) and applies the simulator's own success test; the
    task node relays its verdict (``sim/scene``) instead of testing a goal itself."""

    uses_scene = True

    def sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(3)  # the scene's target object, once the scene reports it

    def success(self, ee: np.ndarray, goal: np.ndarray) -> bool:
        raise NotImplementedError("a scene judge's verdict comes from the scene (sim/scene)")


JUDGES: Registry[Any] = Registry("episode judge")
JUDGES.add("language", lambda cfg: SceneJudge())
JUDGES.add(
    "reach",
    lambda cfg: ReachJudge(tuple(cfg.goal_center), tuple(cfg.goal_half), cfg.success_radius),
)


@dataclass
class EpisodeLog:
    """Per-episode outcomes of one run and the summary the node publishes."""

    results: list[dict[str, Any]] = field(default_factory=list)

    def add(self, success: bool, steps: int, final_distance: float, goal: np.ndarray) -> None:
        self.results.append(
            {
                "episode": len(self.results),
                "success": bool(success),
                "steps": int(steps),
                "final_distance": round(float(final_distance), 4),
                "goal": [round(float(x), 4) for x in goal],
            }
        )

    def summary(self) -> dict[str, Any]:
        n = len(self.results)
        wins = sum(r["success"] for r in self.results)
        return {
            "episodes": n,
            "successes": wins,
            "success_rate": wins / n if n else None,
            "results": self.results,
        }
