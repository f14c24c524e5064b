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
    """Per-episode verdicts of one run's judge and the summary the node publishes.

    An episode someone else ended as ``aborted`` (a re-record) is kept as such: it is neither a
    success nor a failure, never counts toward ``episodes`` or the success rate, and is written
    nowhere as a demonstration (the recorder discards it)."""

    results: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        success: bool,
        steps: int,
        final_distance: float,
        goal: np.ndarray,
        status: str = "",
    ) -> None:
        status = status or ("complete" if success else "truncated")
        self.results.append(
            {
                "episode": len(self.results),
                "status": status,
                "success": bool(success) and status != "aborted",
                "steps": int(steps),
                "final_distance": round(float(final_distance), 4),
                "goal": [round(float(x), 4) for x in goal],
            }
        )

    def summary(self) -> dict[str, Any]:
        judged = [r for r in self.results if r["status"] != "aborted"]
        n, wins = len(judged), sum(r["success"] for r in judged)
        return {
            "episodes": n,
            "successes": wins,
            "failures": n - wins,
            "aborted": len(self.results) - n,
            "success_rate": wins / n if n else None,
            "results": self.results,
        }
