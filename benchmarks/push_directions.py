"""Where a push policy fails: held-out success by the direction the cube must travel.

A camera-only push policy's success rate says how often it fails, not why. This evaluates
checkpoints on the same held-out seeds as the runs' final evaluation and scores each episode
against the scene's true state (``true_state()``: the cube and goal poses the rgb observation
hides from the policy): the direction from the cube to the goal at the start -- ``away`` (+x, from
the robot's base), ``toward`` (-x) or ``sideways`` (|y| dominant) -- and how a failure ended:

- ``no contact``: the fingers never came within 4 cm of the cube;
- ``wrong way``: the cube moved, and ended farther from the goal than it started;
- ``short``: the cube moved toward the goal and stopped outside the 5 cm success disc.

    python benchmarks/push_directions.py LABEL=RUN_OR_CHECKPOINT [...] [--episodes 100]

Writes ``benchmarks/results/push_directions.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_results import labelled_paths, load_1min, machine_meta, write_table  # noqa: E402

ROBOT_STATE_DIM = 24  # the Franka family's proprioception, then the push task's features
OBJ, OBJ_MINUS_EE, GOAL_MINUS_OBJ = slice(24, 27), slice(27, 30), slice(33, 35)
CONTACT_M = 0.04
DIRECTIONS = ("away", "toward", "sideways")
ENDINGS = ("success", "no contact", "wrong way", "short")


def direction(goal_minus_obj: np.ndarray) -> str:
    """``away`` / ``toward`` / ``sideways`` of a cube-to-goal vector in the table plane.

    >>> [direction(np.array(v)) for v in ([0.1, 0.02], [-0.1, 0.05], [0.03, -0.1])]
    ['away', 'toward', 'sideways']
    """
    x, y = float(goal_minus_obj[0]), float(goal_minus_obj[1])
    if abs(y) > abs(x):
        return "sideways"
    return "away" if x > 0 else "toward"


@dataclass
class Episode:
    direction: str
    ending: str
    start_cm: float
    end_cm: float


def ending(ok: bool, min_reach: float, start: float, end: float) -> str:
    """How an episode ended (see the module docstring)."""
    if ok:
        return "success"
    if min_reach > CONTACT_M:
        return "no contact"
    return "wrong way" if end > start else "short"


def run_round(policy: Any, env: Any, seed: int) -> list[Episode]:
    """One round of ``env.num_envs`` deterministic episodes, scored on the true state."""
    n = env.num_envs
    obs = env.reset(seed)
    start = env.true_state()
    alive = np.ones(n, bool)
    ok = np.zeros(n, bool)
    min_reach = np.full(n, np.inf)
    last = start.copy()
    for _ in range(4 * env.spec.max_episode_steps + 10):
        actions, _, _ = policy.act(obs, deterministic=True)
        obs, _, term, trunc, info = env.step(actions)
        ended = alive & (np.asarray(term) | np.asarray(trunc))
        now = env.true_state()  # an ended row was reset: its last state is the one before
        live = alive & ~ended
        last[live] = now[live]
        reach = np.linalg.norm(last[:, OBJ_MINUS_EE], axis=1)
        min_reach = np.where(alive, np.minimum(min_reach, reach), min_reach)
        ok[ended] = np.asarray(info["success"], bool)[ended]
        alive &= ~ended
        if not alive.any():
            break
    out = []
    for i in range(n):
        s0 = float(np.linalg.norm(start[i, GOAL_MINUS_OBJ]))
        s1 = float(np.linalg.norm(last[i, GOAL_MINUS_OBJ]))
        out.append(
            Episode(
                direction(start[i, GOAL_MINUS_OBJ]),
                ending(bool(ok[i]), float(min_reach[i]), s0, s1),
                100 * s0,
                100 * s1,
            )
        )
    return out


def evaluate(path: str, episodes: int) -> list[Episode]:
    from learner.checkpoint import load_policy
    from learner.eval.embodied import checkpoint_config, split_kwargs
    from learner.rollout.envs import build_env

    policy, meta = load_policy(path)
    cfg = checkpoint_config(meta, None)
    n = min(int(cfg.eval.num_envs), episodes)
    env = build_env(cfg.eval.env or cfg.env.name, n, **split_kwargs(cfg, "id"))
    if not hasattr(env, "true_state"):
        raise SystemExit(f"{cfg.env.name}: the env exposes no true_state(); push envs only")
    try:
        out: list[Episode] = []
        for r in range((episodes + n - 1) // n):
            out += run_round(policy, env, int(cfg.eval.seed_offset) + r * n)
        return out[:episodes]
    finally:
        env.close()


def summarize(label: str, eps: list[Episode]) -> dict[str, Any]:
    row: dict[str, Any] = {"policy": label, "episodes": len(eps)}
    row["success"] = float(np.mean([e.ending == "success" for e in eps]))
    for d in DIRECTIONS:
        sub = [e for e in eps if e.direction == d]
        wins = sum(e.ending == "success" for e in sub)
        row[d] = f"{wins}/{len(sub)}"
    fails = [e for e in eps if e.ending != "success"]
    for k in ENDINGS[1:]:
        row[k] = sum(e.ending == k for e in fails)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="held-out push success by direction")
    ap.add_argument("policies", nargs="+", help="LABEL=run directory or checkpoint")
    ap.add_argument("--episodes", type=int, default=100)
    args = ap.parse_args(argv)
    rows = []
    for label, path in labelled_paths(ap, args.policies):
        rows.append(summarize(label, evaluate(path, args.episodes)))
        print(rows[-1], flush=True)
    columns = [
        ("policy", lambda r: r["policy"]),
        ("episodes", lambda r: r["episodes"]),
        ("success", lambda r: f"{r['success']:.2f}"),
        *[(f"{d} (wins)", lambda r, d=d: r[d]) for d in DIRECTIONS],
        *[(f"failed: {k}", lambda r, k=k: r[k]) for k in ENDINGS[1:]],
    ]
    write_table(
        "push_directions",
        "Push: held-out success by the direction the cube must travel",
        [
            "Deterministic episodes on the held-out seeds of each run's final evaluation; the "
            "direction and the ending are read from the scene's true state, which the camera-only "
            f"policies never see (see the script's docstring). 1-min load {load_1min()}."
        ],
        machine_meta(),
        rows,
        columns,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
