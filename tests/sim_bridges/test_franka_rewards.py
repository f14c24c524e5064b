"""Every Franka task's dense reward ranks success first: the scripted oracle's mean episode
return beats scripted degenerate behaviours (idle, hover with open fingers, push the object
away, grasp without lifting, stop just short of the target, random actions).

Why: a learner maximises return, not success. The old lift reward paid +0.5 per step once the
grip site was within 3 cm of the cube and the fingers less than 7.5 cm apart, so hovering there
with half-open fingers (36.0 per episode here), holding the cube on the table (32.7) or 5 cm up
(46.9) all beat lifting it (7.0: the episode ends on success), and an outside SAC run sat in
the hover for 15 minutes. ``returns_table()`` (``python tests/sim_bridges/test_franka_rewards.py``)
prints the table.

Behaviours are written like the task oracles: a desired EE displacement (metres) and a gripper
command, turned into ``ee_delta`` actions the way :func:`oracle_action` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlinf_contracts.env_registry import make_env
from sim_bridges.mujoco_franka import FrankaVectorEnv, oracle_action
from sim_bridges.mujoco_franka.tasks.base import body_pos

pytestmark = pytest.mark.sim

Want = Callable[[object, object, np.ndarray], np.ndarray]  # (fm, d, ee) -> [dx, dy, dz, grip]
N_ENVS, EPISODES = 8, 8


def _go(target: np.ndarray, ee: np.ndarray, grip: float) -> np.ndarray:
    return np.concatenate([target - ee, [grip]])


def idle(fm, d, ee):
    return np.array([0.0, 0.0, 0.0, 1.0])


def hover_open(fm, d, ee):
    """Gripper at the object with the fingers fully open (8 cm)."""
    return _go(body_pos(fm, d, "object"), ee, 1.0)


def hover_half_open(fm, d, ee):
    """Gripper at the object, fingers half open (~4 cm apart): the old lift exploit."""
    return _go(body_pos(fm, d, "object"), ee, 0.0)


def hover_above(fm, d, ee):
    return _go(body_pos(fm, d, "object") + np.array([0.0, 0.0, 0.03]), ee, 1.0)


def grasp_no_lift(env: FrankaVectorEnv) -> Want:
    """The lift oracle until it holds the cube, then stays put, holding it on the table."""

    def want(fm, d, ee):
        action = env.task.oracle(fm, d, ee)
        holding = np.linalg.norm(body_pos(fm, d, "object") - ee) < 0.015 and action[3] < 0
        return np.array([0.0, 0.0, min(action[2], 0.0), -1.0]) if holding else action

    return want


def hold_halfway(env: FrankaVectorEnv) -> Want:
    """The lift oracle, but it holds the cube 5 cm up instead of 10 cm (success needs 10)."""

    def want(fm, d, ee):
        action = env.task.oracle(fm, d, ee)
        if action[3] < 0 and action[2] > 0:  # holding and lifting
            action[2] = min(action[2], env.task.raw_const(fm) + 0.05 - body_pos(fm, d, "object")[2])
        return action

    return want


def push_away(fm, d, ee):
    """The push oracle's script with the goal mirrored through the object: pushes it away
    from the goal (lift has no goal: pushes the cube along +x on the table)."""
    obj = body_pos(fm, d, "object")
    goal = (
        d.mocap_pos[fm.marker_mocap["goal"]] if "goal" in fm.marker_mocap else obj - [0.2, 0.0, 0.0]
    )
    direction = obj[:2] - goal[:2]
    direction /= max(np.linalg.norm(direction), 1e-6)
    pre = np.array([*(obj[:2] - direction * 0.06), obj[2] + 0.08])
    low = obj[2] + 0.005
    rel = obj[:2] - ee[:2]
    along = float(rel @ direction)
    if (
        0.02 < along < 0.09
        and np.linalg.norm(rel - along * direction) < 0.02
        and abs(ee[2] - low) < 0.02
    ):
        return _go(np.array([*(obj[:2] + direction * 0.05), low]), ee, -1.0)
    if np.linalg.norm(ee[:2] - pre[:2]) > 0.015:
        return _go(pre, ee, -1.0)
    return _go(np.array([*pre[:2], low]), ee, -1.0)


def short_of_target(fm, d, ee):
    """Reach: stop 7 cm short of the target on the way there (success radius: 5 cm)."""
    target = d.mocap_pos[fm.marker_mocap["target"]]
    away = (ee - target) / max(np.linalg.norm(ee - target), 1e-6)
    return _go(target + 0.07 * away, ee, 1.0)


def _actions(env: FrankaVectorEnv, want: Want) -> np.ndarray:
    wants = np.stack([want(fm, d, d.site_xpos[fm.ee_site]) for fm, d in zip(env.fms, env.datas)])
    arm = wants[:, :3] / env.control.pos_scale
    act = np.concatenate([arm, np.zeros_like(arm), wants[:, 3:]], axis=1)
    return np.clip(act, -1.0, 1.0).astype(np.float32)


def mean_return(task: str, behaviour: str, seed: int = 11) -> tuple[float, float]:
    """(mean return, success rate) over ``EPISODES`` episodes of ``behaviour``."""
    env = make_env(f"mujoco_franka/{task}", num_envs=N_ENVS, control="ee_delta")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    policies: dict[str, Callable[[], np.ndarray]] = {
        "oracle": lambda: oracle_action(env),
        "random": lambda: rng.uniform(-1, 1, (N_ENVS, env.spec.action_dim)).astype(np.float32),
        "idle": lambda: _actions(env, idle),
        "hover_open": lambda: _actions(env, hover_open),
        "hover_half_open": lambda: _actions(env, hover_half_open),
        "hover_above": lambda: _actions(env, hover_above),
        "hold_halfway": lambda: _actions(env, hold_halfway(env)),
        "grasp_no_lift": lambda: _actions(env, grasp_no_lift(env)),
        "push_away": lambda: _actions(env, push_away),
        "short_of_target": lambda: _actions(env, short_of_target),
    }
    succ: list[bool] = []
    rets: list[float] = []
    for _ in range(4 * env.spec.max_episode_steps):
        _, _, term, trunc, info = env.step(policies[behaviour]())
        done = term | trunc
        succ += info["success"][done].tolist()
        rets += info["episode_return"][done].tolist()
        if len(rets) >= EPISODES:
            break
    env.close()
    return float(np.mean(rets[:EPISODES])), float(np.mean(succ[:EPISODES]))


DEGENERATE = {
    "reach": ("idle", "random", "short_of_target"),
    "push": ("idle", "random", "hover_open", "hover_above", "push_away"),
    "lift": (
        "idle",
        "random",
        "hover_open",
        "hover_half_open",
        "hover_above",
        "grasp_no_lift",
        "hold_halfway",
        "push_away",
    ),
}


@pytest.mark.parametrize("task", sorted(DEGENERATE))
def test_oracle_return_beats_every_degenerate_behaviour(task: str) -> None:
    oracle, oracle_success = mean_return(task, "oracle")
    assert oracle_success >= 0.9
    for behaviour in DEGENERATE[task]:
        ret, success = mean_return(task, behaviour)
        assert success < 0.5, (task, behaviour, success)
        assert oracle > ret + 1.0, f"{task}: oracle {oracle:.2f} <= {behaviour} {ret:.2f}"


def test_lift_grasp_needs_fingers_blocked_by_the_object() -> None:
    """Exact values of the lift reward: dist + 0.5 (not grasped) + 0.5 (height missing)."""
    from sim_bridges.mujoco_franka.tasks.lift import lift_reward

    dist = np.array([0.001, 0.001, 0.001, 0.001, 0.05, 0.001])
    height = np.array([0.0, 0.0, 0.0, 0.05, 0.0, 0.12])
    width = np.array([0.080, 0.042, 0.034, 0.034, 0.034, 0.034])  # open, half open, on the cube
    target = np.array([0.080, 0.040, 0.0, 0.0, 0.0, 0.0])  # commanded finger width
    expected = -np.array(
        [
            0.001 + 0.5 + 0.5,  # open at the cube: not a grasp
            0.001 + 0.5 + 0.5,  # half open, not squeezing: not a grasp
            0.001 + 0.0 + 0.5,  # squeezing the cube on the table
            0.001 + 0.0 + 0.25,  # held 5 cm up
            0.05 + 0.5 + 0.5,  # fingers blocked but the cube is 5 cm away: not a grasp
            0.001,  # lifted past 10 cm: only the reach distance is left
        ]
    )
    np.testing.assert_allclose(lift_reward(dist, height, width, target), expected, atol=1e-12)
    closed_on_air = lift_reward(
        np.array([0.001]), np.array([0.0]), np.array([0.002]), np.array([0.0])
    )
    np.testing.assert_allclose(closed_on_air, [-1.001])


def returns_table() -> str:
    """Markdown table of mean returns per task and behaviour (for the issue / notes)."""
    rows = ["| task | behaviour | mean return | success |", "| --- | --- | ---: | ---: |"]
    for task, behaviours in sorted(DEGENERATE.items()):
        for behaviour in ("oracle", *behaviours):
            ret, success = mean_return(task, behaviour)
            rows.append(f"| {task} | {behaviour} | {ret:.2f} | {success:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(returns_table())
