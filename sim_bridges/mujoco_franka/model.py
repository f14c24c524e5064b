"""Build the Franka Panda scene from robosuite's bundled assets with ``mujoco.MjSpec``.

Why MjSpec and not robosuite: robosuite's Python layer costs ~150 env steps/s here; composing
the same meshes and kinematics directly gives a model we step with one C call per control step.

Why position actuators: the robosuite Panda has torque motors, so tracking a joint target
would need a Python PD loop on every physics substep (a Python call per 2-5 ms of sim time,
the dominant cost). We swap them for MuJoCo ``position`` actuators (stiffness ``kp`` = Franka's
default joint impedance, critical damping, torque limits of the real Panda: 87 Nm for joints
1-4, 12 Nm for 5-7) and turn on body gravity compensation, which is what Franka's own
firmware does. A joint target is then tracked inside ``mj_step`` with no Python per substep,
and both joint-delta and end-effector-delta control reduce to "set a joint target".
Nothing is downloaded: every file comes from the installed ``robosuite`` wheel.

Why torque motors in ``arm_actuation="torque"`` scenes: Cartesian impedance control
(``ee_impedance``) commands joint *torques* from a law evaluated on every physics substep.
Zeroing the position actuators' gains or writing ``qfrc_applied`` over them would leave a
second controller in the model; motors (``gear`` 1, force-limited to the Panda's torque
limits) make ``ctrl`` the commanded torque, exactly what libfranka's torque interface takes.
Body gravity compensation is off there: the torque loop adds MuJoCo's bias force
(``qfrc_bias``: gravity and Coriolis of the arm) itself, as Franka's firmware adds gravity to a
commanded torque, so compensation is not counted twice.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

log = logging.getLogger(__name__)

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
# robosuite's Panda home pose (gripper pointing down over the table)
HOME_QPOS = np.array([0.0, np.pi / 16, 0.0, -np.pi / 2 - np.pi / 3, 0.0, np.pi - 0.2, np.pi / 4])
# Franka's default joint impedance (franka_ros2 example), critically damped (dampratio 1)
ARM_KP = np.array([3000.0, 3000.0, 3000.0, 2500.0, 2500.0, 2000.0, 2000.0])
ARM_DAMPRATIO = 1.0
ARM_FORCE_LIMITS = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])
GRIPPER_MAX_WIDTH = 0.08
TABLE_HEIGHT = 0.0  # world z of the table top; the robot base sits on the table
ROBOT_BASE = (-0.56, 0.0, TABLE_HEIGHT)
TABLE_HALF = (0.45, 0.6, 0.025)
WORKSPACE_CENTER = (-0.08, 0.0, TABLE_HEIGHT)  # middle of where the tasks place objects
FRONT_CAMERA_POS = (0.42, 0.0, 0.62)
EE_SITE = "gripper0_grip_site"
# geom groups: robosuite puts robot collision meshes in 0 and detailed visual meshes in 1; our
# table, objects and markers go in 2 so either robot look can be rendered with them
COLLISION_GROUP, VISUAL_GROUP, SCENE_GROUP = 0, 1, 2


def robosuite_assets_dir() -> Path:
    """Directory of robosuite's bundled MJCF assets; a clear error when robosuite is absent."""
    # find_spec, not import: importing robosuite costs seconds and prints warnings
    found = importlib.util.find_spec("robosuite")
    if found is None or not found.submodule_search_locations:
        raise ImportError(
            "the MuJoCo Franka scene uses the Panda meshes bundled with robosuite; "
            "install them with `pip install --no-deps robosuite==1.5.2`"
        )
    return Path(list(found.submodule_search_locations)[0]) / "models" / "assets"


@dataclass(frozen=True)
class ObjectSpec:
    """A free rigid object on the table. ``shape`` is a MuJoCo geom type name."""

    name: str = "object"
    shape: str = "box"  # box | cylinder | sphere | capsule
    size: tuple[float, ...] = (0.02, 0.02, 0.02)
    rgba: tuple[float, float, float, float] = (0.85, 0.15, 0.15, 1.0)
    mass: float = 0.05


@dataclass(frozen=True)
class SceneOptions:
    """What goes into the compiled model besides the arm, gripper and table."""

    objects: tuple[ObjectSpec, ...] = ()
    markers: tuple[str, ...] = ()  # mocap marker bodies (targets / goals), visual only
    # markers drawn as flat opaque discs on the table, (name, radius): a goal *region* a camera
    # sees from any angle (the others are small translucent spheres, for targets in the air)
    marker_discs: tuple[tuple[str, float], ...] = ()
    timestep: float = 0.005
    table_rgba: tuple[float, float, float, float] = (0.55, 0.45, 0.35, 1.0)
    offscreen_size: tuple[int, int] = (240, 320)  # max (H, W) of offscreen renders
    extra_cameras: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = field(
        default_factory=dict
    )
    arm_actuation: str = "position"  # position (joint targets) | torque (motors, see above)
    # task-specific scene parts (static fixtures, held tools): module-level functions called
    # with the MjSpec after the table and objects are added
    builders: tuple[Callable[[mujoco.MjSpec], None], ...] = ()


@dataclass
class FrankaModel:
    """A compiled scene plus the indices the controllers and tasks need (computed once)."""

    model: mujoco.MjModel
    arm_qpos: np.ndarray  # qpos addresses of joint1..7
    arm_dof: np.ndarray  # dof addresses of joint1..7
    arm_act: np.ndarray  # actuator ids of the 7 arm position actuators
    grip_qpos: np.ndarray  # qpos addresses of the two finger slides
    grip_act: np.ndarray  # actuator ids of the two finger actuators
    ee_site: int
    object_qpos: dict[str, int]  # object name -> qpos address of its free joint
    object_body: dict[str, int]
    marker_mocap: dict[str, int]  # marker name -> mocap index
    table_geom: int
    object_geoms: dict[str, int]
    camera_ids: dict[str, int]
    base_visuals: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False)
    arm_lower: np.ndarray = field(init=False)  # joint limits of joint1..7 (rad)
    arm_upper: np.ndarray = field(init=False)
    # slices for the hot path (fancy indexing costs ~1 us per call; these are contiguous)
    q_slice: slice | np.ndarray = field(init=False)
    dof_slice: slice | np.ndarray = field(init=False)
    ctrl_order: slice | np.ndarray = field(init=False)  # actuators of [7 arm, 2 fingers]

    def __post_init__(self) -> None:
        self.q_slice = _as_slice(self.arm_qpos)
        self.dof_slice = _as_slice(self.arm_dof)
        self.ctrl_order = _as_slice(np.concatenate([self.arm_act, self.grip_act]))
        rng = self.model.jnt_range[[self.model.dof_jntid[d] for d in self.arm_dof]]
        self.arm_lower, self.arm_upper = rng[:, 0].copy(), rng[:, 1].copy()
        # pristine colours / lights: vision randomisation writes into the shared model and
        # restores from here before every render
        m = self.model
        self.base_visuals = (m.geom_rgba.copy(), m.light_diffuse.copy(), m.light_ambient.copy())


def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when ``idx`` is a contiguous ascending run (cheaper to index with), else idx."""
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return slice(int(idx[0]), int(idx[0]) + len(idx))
    return idx


ARM_ACTUATIONS = ("position", "torque")


def arm_actuator_name(joint: str, actuation: str) -> str:
    return f"{'pos' if actuation == 'position' else 'tau'}_{joint}"


def _arm_spec(assets: Path, actuation: str = "position") -> mujoco.MjSpec:
    if actuation not in ARM_ACTUATIONS:
        raise ValueError(f"arm_actuation={actuation!r}; use one of {ARM_ACTUATIONS}")
    spec = mujoco.MjSpec.from_file(str(assets / "robots" / "panda" / "robot.xml"))
    for act in list(spec.actuators):
        spec.delete(act)
    for i, name in enumerate(ARM_JOINTS):
        act = spec.add_actuator(
            name=arm_actuator_name(name, actuation),
            target=name,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
        )
        if actuation == "position":
            act.set_to_position(kp=float(ARM_KP[i]), dampratio=ARM_DAMPRATIO)
        else:
            act.set_to_motor()
        act.forcelimited = True
        act.forcerange = [-ARM_FORCE_LIMITS[i], ARM_FORCE_LIMITS[i]]
        act.ctrllimited = False
    for joint in spec.joints:
        joint.armature = 0.1  # reflected rotor inertia; also keeps the stiff PD stable at 5 ms
    return spec


def _colour_collision_geoms(spec: mujoco.MjSpec) -> None:
    """Franka colours on the coarse collision meshes, the fast ("collision") render look."""
    for geom in spec.geoms:
        if geom.group != COLLISION_GROUP:
            continue
        dark = "finger" in geom.name or geom.name.startswith(("link0", "link7"))
        geom.rgba = [0.25, 0.25, 0.27, 1.0] if dark else [0.92, 0.92, 0.93, 1.0]


def _add_table(spec: mujoco.MjSpec, rgba: tuple[float, ...]) -> None:
    world = spec.worldbody
    world.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3, 3, 0.1],
        pos=[0, 0, TABLE_HEIGHT - 0.8],
        rgba=[0.3, 0.3, 0.32, 1],
        group=SCENE_GROUP,
    )
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(TABLE_HALF),
        pos=[-0.1, 0.0, TABLE_HEIGHT - TABLE_HALF[2]],
        rgba=list(rgba),
        friction=[1.0, 0.005, 0.0001],
        group=SCENE_GROUP,
    )
    world.add_light(
        name="key",
        pos=[0.0, -0.3, 1.6],
        dir=[0.0, 0.2, -1.0],
        diffuse=[0.7, 0.7, 0.7],
        specular=[0.1, 0.1, 0.1],
        castshadow=False,
    )
    world.add_light(
        name="fill",
        pos=[0.5, 0.6, 1.2],
        dir=[-0.4, -0.5, -1.0],
        diffuse=[0.3, 0.3, 0.3],
        specular=[0, 0, 0],
        castshadow=False,
    )


def _add_object(spec: mujoco.MjSpec, obj: ObjectSpec) -> None:
    body = spec.worldbody.add_body(name=obj.name, pos=[0.0, 0.0, TABLE_HEIGHT + 0.1])
    body.add_freejoint(name=f"{obj.name}_joint")
    gtype = getattr(mujoco.mjtGeom, f"mjGEOM_{obj.shape.upper()}")
    size = list(obj.size) + [0.0] * (3 - len(obj.size))
    body.add_geom(
        name=f"{obj.name}_geom",
        type=gtype,
        size=size,
        rgba=list(obj.rgba),
        mass=obj.mass,
        friction=[1.0, 0.005, 0.0001],
        condim=4,
        group=SCENE_GROUP,
    )


def _add_marker(spec: mujoco.MjSpec, name: str, disc_radius: float | None = None) -> None:
    body = spec.worldbody.add_body(name=name, mocap=True, pos=[0.0, 0.0, TABLE_HEIGHT + 0.2])
    disc = disc_radius is not None
    body.add_geom(
        name=f"{name}_geom",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER if disc else mujoco.mjtGeom.mjGEOM_SPHERE,
        size=[disc_radius, 0.001, 0] if disc else [0.02, 0, 0],
        rgba=[0.1, 0.8, 0.2, 1.0 if disc else 0.6],
        contype=0,
        conaffinity=0,
        group=SCENE_GROUP,
    )


def _add_cameras(spec: mujoco.MjSpec, extra: dict) -> None:
    world = spec.worldbody
    # third-person view from the front-right of the table, looking back at the robot
    world.add_camera(
        name="third",
        pos=[0.75, -0.55, 0.55],
        fovy=50.0,
        mode=mujoco.mjtCamLight.mjCAMLIGHT_TARGETBODY,
        targetbody="table_center",
    )
    # front view over the workspace from the far side of the table, looking down at about 50 deg:
    # the cube and the goal marker span ~5 px at 64 px (~2 px in `third`), which is what a
    # camera-only policy needs to place them (a bench's front camera frames the task the same
    # way). A task's own `front` (the language tasks frame their scene closer) replaces it.
    if "front" not in extra:
        world.add_camera(
            name="front",
            pos=list(FRONT_CAMERA_POS),
            quat=list(look_at(FRONT_CAMERA_POS, WORKSPACE_CENTER)),
            fovy=45.0,
        )
    for name, (pos, quat) in extra.items():
        world.add_camera(name=name, pos=list(pos), quat=list(quat))


def look_at(
    pos: tuple[float, float, float], target: tuple[float, float, float]
) -> tuple[float, ...]:
    """Quaternion (w, x, y, z) of a MuJoCo camera at ``pos`` looking at ``target`` (z up)."""
    fwd = np.asarray(target, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    m = np.stack([right, up, -fwd], axis=1)  # camera x, y, z (it looks along -z)
    w = np.sqrt(max(1e-12, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2.0
    q = np.array(
        [
            w,
            (m[2, 1] - m[1, 2]) / (4 * w),
            (m[0, 2] - m[2, 0]) / (4 * w),
            (m[1, 0] - m[0, 1]) / (4 * w),
        ]
    )
    return tuple(float(x) for x in q / np.linalg.norm(q))


def build_spec(options: SceneOptions) -> mujoco.MjSpec:
    """Compose arm + gripper + table + objects + markers + cameras into one ``MjSpec``."""
    assets = robosuite_assets_dir()
    spec = _arm_spec(assets, options.arm_actuation)
    spec.option.timestep = options.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.visual.global_.offwidth = max(options.offscreen_size[1], 640)
    spec.visual.global_.offheight = max(options.offscreen_size[0], 480)
    spec.visual.quality.shadowsize = 0
    spec.visual.quality.offsamples = 0  # no MSAA: ~4x faster software rendering of small images
    base = spec.body("base")
    base.pos = list(ROBOT_BASE)
    hand = spec.body("right_hand")
    mount = hand.add_site(name="gripper_mount")
    gripper = mujoco.MjSpec.from_file(str(assets / "grippers" / "panda_gripper.xml"))
    spec.attach(gripper, prefix="gripper0_", site=mount)
    for body in spec.bodies:  # the Franka controller compensates gravity of arm and hand
        if options.arm_actuation == "position" and body.name.startswith(
            ("link", "right_hand", "gripper0_")
        ):
            body.gravcomp = 1.0
    _colour_collision_geoms(spec)
    spec.worldbody.add_body(name="table_center", pos=[0.0, 0.0, TABLE_HEIGHT + 0.1])
    _add_table(spec, options.table_rgba)
    for obj in options.objects:
        _add_object(spec, obj)
    discs = dict(options.marker_discs)
    for marker in options.markers:
        _add_marker(spec, marker, discs.get(marker))
    _add_cameras(spec, options.extra_cameras)
    for build in options.builders:
        build(spec)
    return spec


def compile_scene(options: SceneOptions | None = None) -> FrankaModel:
    """Compile the scene and resolve every index the env needs (cheap lookups later)."""
    options = options or SceneOptions()
    model = build_spec(options).compile()
    m = model

    def jid(name: str) -> int:
        return mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)

    arm_j = [jid(n) for n in ARM_JOINTS]
    grip_j = [jid("gripper0_finger_joint1"), jid("gripper0_finger_joint2")]
    act = lambda n: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n)  # noqa: E731
    bodies = {
        o.name: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, o.name) for o in options.objects
    }
    cams = {m.camera(i).name: i for i in range(m.ncam)}
    cams["wrist"] = cams.get("eye_in_hand", -1)
    return FrankaModel(
        model=model,
        arm_qpos=np.array([m.jnt_qposadr[j] for j in arm_j]),
        arm_dof=np.array([m.jnt_dofadr[j] for j in arm_j]),
        arm_act=np.array([act(arm_actuator_name(n, options.arm_actuation)) for n in ARM_JOINTS]),
        grip_qpos=np.array([m.jnt_qposadr[j] for j in grip_j]),
        grip_act=np.array(
            [act("gripper0_gripper_finger_joint1"), act("gripper0_gripper_finger_joint2")]
        ),
        ee_site=mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, EE_SITE),
        object_qpos={o.name: int(m.jnt_qposadr[jid(f"{o.name}_joint")]) for o in options.objects},
        object_body=bodies,
        marker_mocap={
            n: int(m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n)])
            for n in options.markers
        },
        table_geom=mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table"),
        object_geoms={
            o.name: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{o.name}_geom")
            for o in options.objects
        },
        camera_ids=cams,
    )
