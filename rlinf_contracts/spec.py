"""The robot/task spec: one observation / action contract from simulator to robot.

Why data and not code: a policy trained in simulation is served unchanged to the ROS 2 graph of
the simulated twin and to a real robot. That only works if the simulator, the ROS robot env and
the ROS policy client build the *same* state vector and read actions the *same* way. The spec
says, as data, what each slice of the state is (registered feature names), what the action
means (control mode, scales, controller gains, chunk), which cameras are sent, at what rate,
and where the robot base sits in the frame Cartesian features use. Every checkpoint carries its
spec; the policy server announces it on connect and refuses a client whose spec differs, with
one message naming both layouts.

>>> spec = RobotSpec(state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
...                  action=ActionSpace(control="joint_delta", dim=8))
>>> spec.state_dim, spec.describe()
(8, 'state[8] = joint_pos(7) gripper_width(1); action[8] joint_delta x1 @10Hz; cameras: none')
>>> RobotSpec.from_dict(spec.to_dict()) == spec
True
>>> other = RobotSpec(state=(StateField("joint_pos", 7),), action=ActionSpace("joint_delta", 8))
>>> spec.mismatches(other)
['state layout differs: joint_pos(7) gripper_width(1) vs joint_pos(7)']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from rlinf_contracts.impedance import ImpedanceGains

# the controllers a robot spec may name; what each means is in rlinf_contracts.control
# ``raw``: numbers with no declared meaning (ad-hoc models, other frameworks' policies); no robot
# side can decode them, so a robot spec never matches a raw policy
# ``ee_impedance``: ``[dx, dy, dz, grip]`` moves a Cartesian impedance target; a torque loop runs
# the law of rlinf_contracts.impedance with the gains in ``ActionSpace.impedance``
CONTROL_MODES = ("ee_delta", "ee_delta_pos", "ee_impedance", "joint_delta", "joint_position", "raw")
ACTION_DIMS = {
    "ee_delta": 7,
    "ee_delta_pos": 4,
    "ee_impedance": 4,
    "joint_delta": 8,
    "joint_position": 8,
    "raw": 1,
}


class SpecError(ValueError):
    """A spec that is malformed, or two specs that do not fit together; says which field."""


@dataclass(frozen=True)
class StateField:
    """One named slice of the state vector. ``name`` is a registered feature (see
    ``rlinf_contracts.features``); ``zeroed`` slices are sent as zeros (e.g. task features of an
    image-only policy, which must not peek at the simulator's state)."""

    name: str
    size: int
    zeroed: bool = False

    def label(self) -> str:
        return f"{self.name}({self.size}{', zeroed' if self.zeroed else ''})"


@dataclass(frozen=True)
class ActionSpace:
    """What an action row means. Values are in [-1, 1]; the last entry is always the gripper
    (-1 closed, +1 open). Scales and controller gains are part of the meaning: the same number
    moves 5 cm with ``pos_scale=0.05`` and 10 cm with 0.1."""

    control: str = "ee_delta"
    dim: int = 7
    chunk: int = 1
    pos_scale: float = 0.05  # m per control step at |a| = 1 (ee_delta*)
    rot_scale: float = 0.25  # rad per control step at |a| = 1 (ee_delta)
    joint_scale: float = 0.1  # rad per control step at |a| = 1 (joint_delta)
    ik_damping: float = 0.05  # damped least squares lambda (ee_delta*)
    nullspace_gain: float = 0.2  # pull toward RobotSpec.home in the Jacobian's null space
    # a step's joint move is scaled down (direction kept) to at most this fraction of the Franka
    # joint speed limits; 0 = unlimited. Without it a simulated arm moves faster than the real one
    max_joint_speed: float = 0.0
    # the torque law's gains (ee_impedance only; None elsewhere, filled with defaults for it)
    impedance: ImpedanceGains | None = None

    def __post_init__(self) -> None:
        # a map (from to_dict / the wire) becomes typed gains; ee_impedance always carries gains
        if isinstance(self.impedance, dict) or (
            self.impedance is None and self.control == "ee_impedance"
        ):
            object.__setattr__(self, "impedance", ImpedanceGains.from_dict(self.impedance))

    def validate(self) -> None:
        if self.control not in CONTROL_MODES:
            raise SpecError(f"action.control={self.control!r}; use one of {CONTROL_MODES}")
        if self.dim != ACTION_DIMS[self.control] and self.dim % ACTION_DIMS[self.control]:
            raise SpecError(
                f"action.dim={self.dim} does not fit control {self.control!r} "
                f"({ACTION_DIMS[self.control]} per arm)"
            )
        if self.dim < 1:
            raise SpecError(f"action.dim must be >= 1, got {self.dim}")
        if self.chunk < 1:
            raise SpecError(f"action.chunk must be >= 1, got {self.chunk}")
        if self.impedance is not None:
            self.impedance.validate()

    def label(self) -> str:
        return f"action[{self.dim}] {self.control} x{self.chunk}"

    def semantics(self) -> tuple:
        """What must agree between a policy and a robot (chunk may differ: clients take any)."""
        if self.control == "raw":
            return (self.control, self.dim)
        if self.control.startswith("joint"):
            return (self.control, self.dim, self.joint_scale, self.max_joint_speed)
        if self.control == "ee_impedance":
            gains = self.impedance or ImpedanceGains()
            return (self.control, self.dim, self.pos_scale, *sorted(gains.to_dict().items()))
        return (
            self.control,
            self.dim,
            self.pos_scale,
            self.rot_scale,
            self.ik_damping,
            self.nullspace_gain,
            self.max_joint_speed,
        )


@dataclass(frozen=True)
class CameraSpec:
    name: str
    height: int
    width: int

    def label(self) -> str:
        return f"{self.name}({self.height}x{self.width})"


@dataclass(frozen=True)
class RobotSpec:
    """Observation and action layout shared by a simulator task, a robot and a policy."""

    state: tuple[StateField, ...]
    action: ActionSpace = field(default_factory=ActionSpace)
    cameras: tuple[CameraSpec, ...] = ()
    control_hz: float = 10.0
    robot: str = "panda"
    task: str = ""
    instruction: str = ""
    uses_instruction: bool = False
    # where the robot base sits in the frame of Cartesian features (ee_pos, goal_pos, ...):
    # a robot reports poses in its base frame; adding this expresses them as the policy saw them
    base_position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    home: tuple[float, ...] = ()  # joint home (reset pose, null-space target); () = the driver's
    arms: int = 1  # state fields and action dims are per arm, concatenated arm after arm

    def __post_init__(self) -> None:
        self.action.validate()
        if self.arms < 1:
            raise SpecError(f"arms must be >= 1, got {self.arms}")
        for f in self.state:
            if f.size < 1:
                raise SpecError(f"state field {f.name!r} has size {f.size}; sizes must be >= 1")

    @classmethod
    def raw(
        cls,
        state_dim: int,
        action_dim: int,
        chunk: int = 1,
        cameras: dict[str, tuple[int, int]] | None = None,
        uses_instruction: bool = False,
    ) -> RobotSpec:
        """A spec that only fixes sizes (one ``state`` field, ``raw`` actions): for models built
        without an env, whose numbers mean nothing a robot could check."""
        return cls(
            state=(StateField("state", state_dim),),
            action=ActionSpace("raw", action_dim, chunk),
            cameras=tuple(CameraSpec(n, int(h), int(w)) for n, (h, w) in (cameras or {}).items()),
            uses_instruction=uses_instruction,
        )

    def with_policy(self, chunk: int, cameras: tuple[str, ...] | None = None) -> RobotSpec:
        """This spec as a policy consumes it: its chunk length and only the cameras it reads."""
        cams = (
            self.cameras if cameras is None else tuple(c for c in self.cameras if c.name in cameras)
        )
        return replace(self, action=replace(self.action, chunk=chunk), cameras=cams)

    # -- layout ----------------------------------------------------------------------------
    @property
    def state_dim(self) -> int:
        return self.arms * sum(f.size for f in self.state)

    @property
    def action_dim(self) -> int:
        return self.action.dim

    def state_slices(self) -> dict[str, slice]:
        """feature name -> its slice of the (first arm's part of the) state vector."""
        out, start = {}, 0
        for f in self.state:
            out[f.name] = slice(start, start + f.size)
            start += f.size
        return out

    def camera_sizes(self) -> dict[str, tuple[int, int]]:
        return {c.name: (c.height, c.width) for c in self.cameras}

    def observation_spec(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Per-sample dtype and shape of every array key, as the policy server checks them."""
        spec: dict[str, tuple[str, tuple[int, ...]]] = {"state": ("float32", (self.state_dim,))}
        for c in self.cameras:
            spec[f"images/{c.name}"] = ("uint8", (c.height, c.width, 3))
        return spec

    def state_label(self) -> str:
        one = " ".join(f.label() for f in self.state)
        return one if self.arms == 1 else f"{self.arms} x ({one})"

    def describe(self) -> str:
        """One line naming the whole layout, for logs and refusal messages."""
        cams = " ".join(c.label() for c in self.cameras) or "none"
        return (
            f"state[{self.state_dim}] = {self.state_label()}; {self.action.label()} "
            f"@{self.control_hz:g}Hz; cameras: {cams}"
        )

    # -- compatibility ---------------------------------------------------------------------
    def mismatches(self, other: RobotSpec) -> list[str]:
        """What differs between ``self`` (e.g. the policy) and ``other`` (e.g. the robot) in ways
        that change what the numbers mean; [] when they fit. Rate and chunk are not compared:
        a robot may run slower than training and execute any chunk length."""
        out = []
        if [(f.name, f.size) for f in self.state] != [
            (f.name, f.size) for f in other.state
        ] or self.arms != other.arms:
            out.append(f"state layout differs: {self.state_label()} vs {other.state_label()}")
        if self.action.semantics() != other.action.semantics():
            out.append(
                f"action differs: {action_label(self.action)} vs {action_label(other.action)}"
            )
        if self.camera_sizes() != other.camera_sizes():
            mine = " ".join(c.label() for c in self.cameras) or "none"
            theirs = " ".join(c.label() for c in other.cameras) or "none"
            out.append(f"cameras differ: {mine} vs {theirs}")
        if self.base_position != other.base_position and any(
            f.name in CARTESIAN for f in self.state
        ):
            out.append(
                f"base_position differs: {list(self.base_position)} vs {list(other.base_position)}"
            )
        return out

    # -- (de)serialisation: plain JSON / msgpack types -------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = [
            [f.name, f.size, f.zeroed] if f.zeroed else [f.name, f.size] for f in self.state
        ]
        d["cameras"] = [[c.name, c.height, c.width] for c in self.cameras]
        d["base_position"] = list(self.base_position)
        d["home"] = list(self.home)
        if self.action.impedance is None:  # specs of other modes keep their layout
            del d["action"]["impedance"]
        else:
            d["action"]["impedance"] = self.action.impedance.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RobotSpec:
        """Inverse of :meth:`to_dict`; an unknown or malformed field raises :class:`SpecError`."""
        if not isinstance(d, dict):
            raise SpecError(f"a robot spec must be a map, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SpecError(f"unknown robot spec field(s) {unknown}; known: {sorted(known)}")
        try:
            kw = dict(d)
            kw["state"] = tuple(StateField(*row) for row in d.get("state", ()))
            action = d.get("action", {})
            kw["action"] = action if isinstance(action, ActionSpace) else ActionSpace(**action)
            kw["cameras"] = tuple(CameraSpec(*row) for row in d.get("cameras", ()))
            kw["base_position"] = tuple(float(x) for x in d.get("base_position", (0.0, 0.0, 0.0)))
            kw["home"] = tuple(float(x) for x in d.get("home", ()))
            return cls(**kw)
        except TypeError as e:
            raise SpecError(f"malformed robot spec: {e}") from None


# features expressed in the Cartesian frame that base_position shifts
CARTESIAN = {"ee_pos", "goal_pos", "object_pos"}


def action_label(a: ActionSpace) -> str:
    """One action space as messages name it (control, size and the scales that change it)."""
    if a.control == "raw":
        return f"raw[{a.dim}]"
    speed = f" max_joint_speed={a.max_joint_speed:g}" if a.max_joint_speed else ""
    if a.control.startswith("joint"):
        return f"{a.control}[{a.dim}] joint_scale={a.joint_scale:g}{speed}"
    if a.control == "ee_impedance":
        g = a.impedance or ImpedanceGains()
        return (
            f"{a.control}[{a.dim}] pos_scale={a.pos_scale:g} stiffness={g.stiffness_pos:g}/"
            f"{g.stiffness_rot:g} damping={g.damping_pos:g}/{g.damping_rot:g} "
            f"max_force={g.max_force:g}"
        )
    return (
        f"{a.control}[{a.dim}] pos_scale={a.pos_scale:g} rot_scale={a.rot_scale:g} "
        f"ik_damping={a.ik_damping:g} nullspace_gain={a.nullspace_gain:g}{speed}"
    )


def check_compatible(policy: RobotSpec, robot: RobotSpec) -> None:
    """Raise :class:`SpecError` naming both layouts when ``robot`` cannot run ``policy``."""
    diffs = policy.mismatches(robot)
    if diffs:
        raise SpecError(
            "robot spec does not match the policy: "
            + "; ".join(diffs)
            + f". Policy: {policy.describe()}. Robot: {robot.describe()}"
        )
