"""Peg insertion: push a square peg held in the gripper into a hole with 2 mm clearance.

Why this task: it is the contact-rich case where the action space matters. A stiff
position-controlled arm that meets the rim with a millimetre of error presses with whatever its
joint controller can give; an impedance-controlled one presses with ``stiffness x offset``.
The env measures the normal contact force on the fixture on every physics substep and reports
each episode's peak in ``info["peak_contact_force"]``, so a benchmark can compare the two
control modes on equal terms (``control=ee_impedance`` vs ``control=ee_delta_pos``).

Scene: the peg (2.4 cm square, 7 cm long) is rigidly attached to the hand between the
fingertips (started grasped; grasp slip is not what this task measures, so the gripper action
changes nothing). The hole is a fixture of 4 wall boxes (3 cm tall) on the table, a mocap body
placed at a random xy (+-4 cm) each episode, aligned with the world axes like the peg. The arm
starts with the gripper pointing straight down, the peg tip 4 cm above the fixture, 1-2 cm off
to the side of the hole in a random direction.

State features: ``goal_pos`` (the hole's top centre) and ``goal_minus_ee``; a robot publishes the
hole pose as its goal. Dense reward (a per-step cost, 0 at the goal; the env adds 1 on
success)::

    r = -( 2 |tip_xy - hole_xy| + max(tip_z - (hole_top - SUCCESS_DEPTH), 0) )

Success: the peg tip at least ``SUCCESS_DEPTH`` (15 mm) below the hole's top, within the hole.
"""

from __future__ import annotations

import mujoco
import numpy as np

from rlinf_contracts.rotations import orientation_error
from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.control import dls_step
from sim_bridges.mujoco_franka.model import (
    GRIPPER_MAX_WIDTH,
    SCENE_GROUP,
    TABLE_HEIGHT,
    FrankaModel,
)
from sim_bridges.mujoco_franka.tasks.base import FrankaTask, Workspace, register_task

PEG_HALF_WIDTH = 0.012  # m, square cross-section 2.4 cm
PEG_HALF_LENGTH = 0.035
PEG_CENTER = 0.015  # peg centre below the grip site, along the tool axis
PEG_TIP = PEG_CENTER + PEG_HALF_LENGTH  # tip below the grip site
CLEARANCE = 0.002  # hole width minus peg width
HOLE_HALF = PEG_HALF_WIDTH + CLEARANCE / 2
WALL_HALF_THICK = 0.0075
HOLE_DEPTH = 0.03  # wall height
HOLE_TOP = TABLE_HEIGHT + HOLE_DEPTH
SUCCESS_DEPTH = 0.015
LATERAL_WEIGHT = 2.0
HOLE_BOX = Workspace(center=(-0.06, 0.0, 0.0), half=(0.04, 0.04, 0.0))
START_HEIGHT = 0.04  # peg tip above the hole's top at reset
START_OFFSET = (0.01, 0.02)  # m, min / max xy distance of the start from the hole axis
# the tool pointing straight down, its x axis along world y (the Panda home pose's yaw): the
# peg's faces are then parallel to the fixture's walls
TOOL_DOWN = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
ALIGN_TOL = 0.002  # m, lateral error below which the oracle descends
# lateral command per metre of error: a position-controlled arm tracks it (1: no overshoot); a
# compliant (torque-controlled) one lags and sticks on the rim, so it is commanded twice the error
LATERAL_GAIN = {"position": 1.0, "torque": 2.0}
HOVER = 0.01  # m, peg tip above the hole top while the oracle aligns
# gripper action whose finger targets rest on the peg's faces (the fingers do not collide with
# the peg, a part of the hand; a fully closed command would push them through it)
GRIP_ON_PEG = 2 * (2 * PEG_HALF_WIDTH) / GRIPPER_MAX_WIDTH - 1.0


def add_peg(spec: mujoco.MjSpec) -> None:
    """The peg, a part of the hand (child of the grip site's body), with a site at its tip."""
    eef = spec.body("gripper0_eef")
    peg = eef.add_body(name="peg", pos=[0.0, 0.0, PEG_CENTER])
    peg.add_geom(
        name="peg_geom",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[PEG_HALF_WIDTH, PEG_HALF_WIDTH, PEG_HALF_LENGTH],
        rgba=[0.2, 0.4, 0.85, 1.0],
        mass=0.05,
        friction=[0.5, 0.005, 0.0001],
        group=SCENE_GROUP,
    )
    peg.add_site(name="peg_tip", pos=[0.0, 0.0, PEG_HALF_LENGTH], size=[0.003, 0.0, 0.0])


def add_hole(spec: mujoco.MjSpec) -> None:
    """The fixture: a mocap body on the table with 4 walls around a square hole."""
    hole = spec.worldbody.add_body(name="hole", mocap=True, pos=[-0.06, 0.0, TABLE_HEIGHT])
    reach = HOLE_HALF + WALL_HALF_THICK
    outer = HOLE_HALF + 2 * WALL_HALF_THICK
    walls = {
        "px": ([reach, 0.0], [WALL_HALF_THICK, outer]),
        "nx": ([-reach, 0.0], [WALL_HALF_THICK, outer]),
        "py": ([0.0, reach], [HOLE_HALF, WALL_HALF_THICK]),
        "ny": ([0.0, -reach], [HOLE_HALF, WALL_HALF_THICK]),
    }
    for name, (xy, half) in walls.items():
        hole.add_geom(
            name=f"hole_wall_{name}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[*half, HOLE_DEPTH / 2],
            pos=[*xy, HOLE_DEPTH / 2],
            rgba=[0.35, 0.35, 0.38, 1.0],
            friction=[0.5, 0.005, 0.0001],
            group=SCENE_GROUP,
        )


def _hole_mocap(fm: FrankaModel) -> int:
    body = mujoco.mj_name2id(fm.model, mujoco.mjtObj.mjOBJ_BODY, "hole")
    return int(fm.model.body_mocapid[body])


def _tip_site(fm: FrankaModel) -> int:
    return mujoco.mj_name2id(fm.model, mujoco.mjtObj.mjOBJ_SITE, "peg_tip")


def arm_actuation(fm: FrankaModel) -> str:
    """``torque`` when the arm's actuators are motors (ee_impedance scenes), else ``position``."""
    motor = fm.model.actuator_biastype[fm.arm_act[0]] == mujoco.mjtBias.mjBIAS_NONE
    return "torque" if motor else "position"


def insert_reward(tip: np.ndarray, hole: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(success, dense reward) of ``n`` peg tips ``[n, 3]`` against hole top centres ``[n, 3]``."""
    lateral = np.linalg.norm(tip[:, :2] - hole[:, :2], axis=1)
    depth = hole[:, 2] - tip[:, 2]
    above_goal = np.maximum(tip[:, 2] - (hole[:, 2] - SUCCESS_DEPTH), 0.0)
    ok = (depth >= SUCCESS_DEPTH) & (lateral < HOLE_HALF)
    return ok, -(LATERAL_WEIGHT * lateral + above_goal)


def solve_pose(
    fm: FrankaModel, d: mujoco.MjData, pos: np.ndarray, rot: np.ndarray, iters: int = 60
) -> None:
    """Move the arm's ``qpos`` (kinematics only) so the grip site reaches ``pos`` / ``rot``."""
    m = fm.model
    for _ in range(iters):
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        cur = d.site_xmat[fm.ee_site].reshape(1, 3, 3)
        err = np.concatenate([pos - d.site_xpos[fm.ee_site], orientation_error(rot, cur[0])])
        if np.abs(err).max() < 1e-6:
            break
        jac = np.zeros((6, m.nv))
        mujoco.mj_jacSite(m, d, jac[:3], jac[3:], fm.ee_site)
        q = d.qpos[fm.q_slice].copy()
        dq = dls_step(jac[None, :, fm.arm_dof], err[None], q[None], 0.01, 0.1)[0]
        d.qpos[fm.q_slice] = np.clip(q + dq, fm.arm_lower, fm.arm_upper)


@register_task("insert")
class InsertTask(FrankaTask):
    instruction = "insert the peg into the hole"
    state_fields = (StateField("goal_pos", 3), StateField("goal_minus_ee", 3))
    feature_dim = 6
    default_control = "ee_impedance"
    default_max_steps = 60
    scene_builders = (add_peg, add_hole)

    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        hole = HOLE_BOX.sample(rng, self.pos_scale, self.pos_shift)
        hole[2] = TABLE_HEIGHT
        d.mocap_pos[_hole_mocap(fm)] = hole
        angle = rng.uniform(0.0, 2 * np.pi)
        off = rng.uniform(*START_OFFSET) * np.array([np.cos(angle), np.sin(angle)])
        start = np.array([*(hole[:2] + off), HOLE_TOP + START_HEIGHT + PEG_TIP])
        solve_pose(fm, d, start, TOOL_DOWN)
        d.ctrl[fm.arm_act] = d.qpos[fm.q_slice]  # position mode: hold it (torque mode resets)
        d.qpos[fm.grip_qpos] = [PEG_HALF_WIDTH, -PEG_HALF_WIDTH]
        d.ctrl[fm.grip_act] = [PEG_HALF_WIDTH, -PEG_HALF_WIDTH]

    def contact_geoms(self, fm: FrankaModel) -> np.ndarray:
        m = fm.model
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "hole")
        return np.flatnonzero(m.geom_bodyid == body)

    def _hole(self, fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
        return d.mocap_pos[_hole_mocap(fm)] + np.array([0.0, 0.0, HOLE_DEPTH])

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        hole = self._hole(fm, d)
        return np.concatenate([hole, hole - ee])

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        tip = d.site_xpos[_tip_site(fm)][None]
        ok, dense = insert_reward(tip, self._hole(fm, d)[None])
        return bool(ok[0]), float(dense[0])

    raw_dim = 6  # fixture position (its base on the table), peg tip position

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        mocap, tip = _hole_mocap(fm), _tip_site(fm)
        return d.mocap_pos[mocap], d.site_xpos[tip]

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        hole = raw[:, :3] + np.array([0.0, 0.0, HOLE_DEPTH])
        return np.concatenate([hole, hole - ee], axis=1)

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return insert_reward(raw[:, 3:6], raw[:, :3] + np.array([0.0, 0.0, HOLE_DEPTH]))

    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        """Align the tip over the hole axis HOVER above it, then descend while correcting the
        lateral error (with impedance control the descent presses with ~stiffness x 1 cm); a
        peg caught on the rim goes back up and aligns again."""
        hole = self._hole(fm, d)
        tip = d.site_xpos[_tip_site(fm)]
        lateral = LATERAL_GAIN[arm_actuation(fm)] * (hole[:2] - tip[:2])
        inside = tip[2] < hole[2] - 0.002
        if (
            np.linalg.norm(hole[:2] - tip[:2]) > ALIGN_TOL and not inside
        ):  # (back) up to hover, align
            delta = np.array([*lateral, hole[2] + HOVER - tip[2]])
        else:
            delta = np.array([*lateral, -0.01])
        return np.concatenate([delta, [GRIP_ON_PEG]])
