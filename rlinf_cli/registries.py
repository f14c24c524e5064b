"""What can be named in a config, read from the registries themselves (for ``rlinf list`` and
the preflight's "did you mean").

Each kind maps to a function returning ``{name: one-line description}``; imports happen on
call, so ``rlinf --help`` stays instant. Env tasks are listed where the family can say without
starting a simulator (the Franka task registry, the toy env); other families take any task
their simulator knows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# env families whose task list is cheap to read: family -> (module, attribute holding the names)
_TASK_TABLES: dict[str, tuple[str, str]] = {
    "mujoco_franka": ("sim_bridges.mujoco_franka.tasks", "TASKS"),
    "franka_language": ("sim_bridges.mujoco_franka.language_env", "MIXES"),
}
_TOY_TASKS = ("point_reach",)
_OPEN_FAMILY_HINT = {
    "robosuite": "any robosuite environment, e.g. robosuite/Lift",
    "maniskill": "any ManiSkill3 env id, e.g. maniskill/PickCube-v1",
    "libero": "a LIBERO suite, e.g. libero/libero_spatial",
    "isaaclab": "an IsaacLab task id (GPU), e.g. isaaclab/Isaac-Lift-Cube-Franka-v0",
    "ros": "ros/franka: a robot on ROS 2 topics (RosRobotEnv)",
}


def _doc(obj: object) -> str:
    text = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    return text[0] if text else ""


def env_families() -> dict[str, str]:
    from rlinf_contracts.env_registry import known_families

    out = {f: _OPEN_FAMILY_HINT.get(f, "") for f in known_families()}
    out["toy"] = "learner's numpy test env: toy/point_reach"
    for family in _TASK_TABLES:
        out[family] = "tasks: " + ", ".join(sorted(env_tasks(family) or ()))
    return dict(sorted(out.items()))


def env_tasks(family: str) -> list[str] | None:
    """Known tasks of ``family``; None when the family accepts names its simulator decides."""
    if family == "toy":
        return list(_TOY_TASKS)
    if family not in _TASK_TABLES:
        return None
    module, attr = _TASK_TABLES[family]
    try:
        return sorted(getattr(importlib.import_module(module), attr))
    except ImportError:
        return None


def tasks() -> dict[str, str]:
    out: dict[str, str] = {}
    for family in [*_TASK_TABLES, "toy"]:
        for task in env_tasks(family) or ():
            out[f"{family}/{task}"] = ""
    if "mujoco_franka" in _TASK_TABLES:
        from sim_bridges.mujoco_franka.tasks import TASKS

        out.update(
            {
                f"mujoco_franka/{k}": _doc(v) or _doc(importlib.import_module(v.__module__))
                for k, v in TASKS.items()
            }
        )
    if "franka_language" in _TASK_TABLES:
        from sim_bridges.mujoco_franka.language_env import MIXES

        out.update(
            {
                f"franka_language/{k}": "language-conditioned Franka, instruction verbs "
                + " / ".join(f"{verb} {w:g}" for verb, w in mix.items())
                for k, mix in MIXES.items()
            }
        )
    return dict(sorted(out.items()))


def models() -> dict[str, str]:
    from learner.models import MODELS

    return {n: _doc(MODELS.get(n)) for n in MODELS.names()}


def algorithms() -> dict[str, str]:
    from learner.algorithms.advantages import ADVANTAGES
    from learner.algorithms.sac import OFF_POLICY_LEARNERS

    def flags(n: str) -> str:
        est = ADVANTAGES.get(n)
        kind = (
            "critic" if est.needs_critic else ("groups of samples" if est.grouped else "no critic")
        )
        where = (
            "embodied, reasoning" if est.needs_critic or est.signal == "outcome" else "reasoning"
        )
        return f"advantage estimator, {kind}, {est.signal} signal (runners: {where})"

    out = {f"algorithm.adv: {n}": flags(n) for n in ADVANTAGES.names()}
    out.update(
        {
            f"{n}": "off-policy learner (library only: no runner calls it yet)"
            for n in OFF_POLICY_LEARNERS.names()
        }
    )
    return out


def runners() -> dict[str, str]:
    from learner.runners.registry import RUNNER_MODULES, get_runner

    return {
        n: _doc(importlib.import_module(m)).rstrip(":")
        for n, m in RUNNER_MODULES.items()
        if get_runner(n) is not None
    }


def rewards() -> dict[str, str]:
    from learner.llm.rewards import REWARDS

    return {n: _doc(REWARDS.get(n)) for n in REWARDS.names()}


KINDS: dict[str, Callable[[], dict[str, str]]] = {
    "envs": env_families,
    "tasks": tasks,
    "models": models,
    "algorithms": algorithms,
    "runners": runners,
    "rewards": rewards,
}
