"""Task interface of the Franka family and its registry.

A task adds objects / markers to the scene, samples an initial state, adds task features to the
state vector, and scores a state (dense reward, success). It also offers a scripted oracle in
end-effector terms, which tests use to prove success is reachable and DAgger can use as expert.
Tasks are registered by name so ``make_env("mujoco_franka/<task>")`` needs no if/elif chain.
"""

from __future__ import annotations

import abc
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import mujoco
import numpy as np

from rlinf_contracts.env_registry import UnknownEnvError
from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.model import TABLE_HEIGHT, FrankaModel, ObjectSpec

TASKS: dict[str, type[FrankaTask]] = {}
TaskT = TypeVar("TaskT", bound="type[FrankaTask]")


def register_task(name: str) -> Callable[[TaskT], TaskT]:
    # generic, so a registered class keeps its own type (its methods beyond FrankaTask's)
    def deco(cls: TaskT) -> TaskT:
        cls.name = name
        TASKS[name] = cls
        return cls

    return deco


def get_task(name: str) -> type[FrankaTask]:
    if name in TASKS:
        return TASKS[name]
    near = difflib.get_close_matches(name, list(TASKS), n=1)
    hint = f" Did you mean '{near[0]}'?" if near else ""
    raise UnknownEnvError(
        f"unknown mujoco_franka task '{name}'. Known tasks: {', '.join(sorted(TASKS))}.{hint}"
    )


@dataclass(frozen=True)
class Workspace:
    """Sampling box (world frame, metres) for objects / targets; scaled by OOD position knobs."""

    center: tuple[float, float, float]
    half: tuple[float, float, float]

    def sample(
        self,
        rng: np.random.Generator,
        scale: float = 1.0,
        shift: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ) -> np.ndarray:
        c, h = np.asarray(self.center) + np.asarray(shift), np.asarray(self.half) * scale
        return c + rng.uniform(-1.0, 1.0, size=3) * h


def body_pos(fm: FrankaModel, d: mujoco.MjData, name: str) -> np.ndarray:
    adr = fm.object_qpos[name]
    return d.qpos[adr : adr + 3]


def set_free_pose(
    fm: FrankaModel, d: mujoco.MjData, name: str, pos: np.ndarray, yaw: float = 0.0
) -> None:
    adr = fm.object_qpos[name]
    d.qpos[adr : adr + 3] = pos
    d.qpos[adr + 3 : adr + 7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]


def gripper_width(fm: FrankaModel, d: mujoco.MjData) -> float:
    return float(d.qpos[fm.grip_qpos[0]] - d.qpos[fm.grip_qpos[1]])


class FrankaTask(abc.ABC):
    """One task of the family. Subclasses are stateless: per-env state lives in MjData."""

    name: str = ""
    instruction: str = ""
    markers: tuple[str, ...] = ()
    # markers drawn as flat discs on the table, (name, radius) (SceneOptions.marker_discs)
    marker_discs: tuple[tuple[str, float], ...] = ()
    state_fields: tuple[StateField, ...] = ()  # the task part of the state, by feature name
    feature_dim: int = 0
    success_radius: float = 0.05
    default_control: str = "ee_delta"
    default_max_steps: int = 50
    needs_object: bool = False
    # cameras this task adds to the scene: name -> (pos, quat), e.g. a close view of its objects
    extra_cameras: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    # scene parts beyond objects and markers (fixtures, a held tool): SceneOptions.builders
    scene_builders: tuple[Callable[[mujoco.MjSpec], None], ...] = ()

    def contact_geoms(self, fm: FrankaModel) -> np.ndarray:
        """Geom ids whose contact force the env measures on every physics substep (peak per
        episode in ``info["peak_contact_force"]``); empty = none measured (no per-substep
        loop, the fast path)."""
        return np.zeros(0, dtype=int)

    def __init__(
        self, pos_scale: float = 1.0, pos_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    ):
        self.pos_scale = pos_scale
        self.pos_shift = pos_shift

    def objects(self, shape: str = "box") -> tuple[ObjectSpec, ...]:
        """Objects this task puts on the table; ``shape`` is the semantic (identity) knob."""
        if not self.needs_object:
            return ()
        size = {
            "box": (0.02, 0.02, 0.02),
            "cylinder": (0.02, 0.02),
            "sphere": (0.022,),
            "capsule": (0.015, 0.012),
        }[shape]
        return (ObjectSpec(name="object", shape=shape, size=size),)

    def place_object(
        self,
        fm: FrankaModel,
        d: mujoco.MjData,
        rng: np.random.Generator,
        box: Workspace,
        max_yaw: float,
    ) -> np.ndarray:
        """Put the object upright on the table at a position sampled from ``box`` (scaled and
        shifted by the OOD knobs) and a yaw in [-max_yaw, max_yaw]; returns its position."""
        obj = box.sample(rng, self.pos_scale, self.pos_shift)
        obj[2] = object_rest_z(fm)
        set_free_pose(fm, d, "object", obj, yaw=float(rng.uniform(-max_yaw, max_yaw)))
        return obj

    @abc.abstractmethod
    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        """Place objects and markers for a new episode (robot is already at home)."""

    @abc.abstractmethod
    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        """Task part of the state vector, ``feature_dim`` floats."""

    @abc.abstractmethod
    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        """(success, dense reward) of the current state."""

    # -- batched scoring: the vector env gathers each env's raw quantities into one array per
    # step and scores / featurises all envs with a few numpy calls instead of per-env Python
    # calls (the per-env path above costs more than the physics of a small step).
    raw_dim: int = 0  # floats returned by ``raw_views`` together

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        """Views into ``d`` (basic indexing only, so they stay live) of the task quantities."""
        return ()

    def raw_const(self, fm: FrankaModel) -> float:
        """A per-env constant the batched methods need (e.g. the object's rest height)."""
        return 0.0

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        """``features`` of n envs: ``ee [n, 3]``, ``raw [n, raw_dim]``, ``const [n]``."""
        raise NotImplementedError(
            f"task '{self.name}' does not implement batch_features; "
            "add it (and raw_views) so FrankaVectorEnv can score it"
        )

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``evaluate`` of n envs: (success ``[n]`` bool, dense reward ``[n]`` float64)."""
        raise NotImplementedError(
            f"task '{self.name}' does not implement batch_evaluate; "
            "add it (and raw_views) so FrankaVectorEnv can score it"
        )

    @abc.abstractmethod
    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        """Scripted expert: desired EE displacement (metres, world xyz) and gripper in [-1, 1]."""


def object_rest_z(fm: FrankaModel) -> float:
    """Height of the object's centre when it rests upright on the table."""
    m = fm.model
    gid = fm.object_geoms["object"]
    size = m.geom_size[gid]
    half_height = {
        mujoco.mjtGeom.mjGEOM_BOX: size[2],
        mujoco.mjtGeom.mjGEOM_CYLINDER: size[1],
        mujoco.mjtGeom.mjGEOM_SPHERE: size[0],
        mujoco.mjtGeom.mjGEOM_CAPSULE: size[0] + size[1],
    }[int(m.geom_type[gid])]
    return TABLE_HEIGHT + float(half_height)
