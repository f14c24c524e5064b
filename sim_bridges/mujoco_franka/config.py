"""Typed configuration of the MuJoCo Franka vector env (the kwargs of ``make_env``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlinf_contracts.impedance import ImpedanceGains
from sim_bridges.mujoco_franka.control import CONTROL_MODES
from sim_bridges.mujoco_franka.ood import OODConfig, parse_ood

OBS_MODES = ("state", "rgb", "state+rgb")
OBS_ALIASES = {"image": "rgb", "state+image": "state+rgb"}  # the learner's toy-env spelling
# dense: success + the task's dense score each step; sparse: success only; shaped: success +
# SHAPING_SCALE x the step's change in the dense score (potential-based, see vector_env._reward)
REWARD_MODES = ("dense", "sparse", "shaped")
SHAPING_SCALE = 0.3  # keeps a whole episode's shaping below a success (dense spans <= ~1.4)


@dataclass(frozen=True)
class FrankaEnvConfig:
    """Every knob of ``make_env("mujoco_franka/<task>", num_envs, **kwargs)``.

    ``None`` for ``control`` / ``max_episode_steps`` means the task's default.
    The physics runs ``substeps`` steps of ``1 / (control_hz * substeps)`` seconds per
    control step; give either ``substeps`` or ``physics_dt`` (default 5 ms).
    """

    task: str = "reach"
    num_envs: int = 1
    obs_mode: str = "state"  # state | rgb | state+rgb
    control: str | None = None  # ee_delta | ee_delta_pos | joint_delta | ee_impedance
    # ee_impedance gains (rlinf_contracts.impedance.ImpedanceGains fields); None = defaults
    impedance: ImpedanceGains | None = None
    control_hz: float = 20.0
    physics_dt: float | None = None
    substeps: int | None = None
    max_episode_steps: int | None = None
    image_size: int | tuple[int, int] = 64  # square side or (H, W)
    cameras: tuple[str, ...] = ("third", "wrist")
    robot_look: str = "collision"  # collision (fast) | visual (robosuite's detailed meshes)
    reward: str = "dense"  # dense | sparse | shaped
    terminate_on_success: bool = True
    init_qpos_noise: float = 0.02  # rad, per joint, on reset
    ood: OODConfig = field(default_factory=OODConfig)
    seed: int | None = None  # used by the first reset() if it gets no seed
    # compile this env's scenes for it alone instead of sharing the process's compiled scene:
    # for an owner that rewrites the model (a twin's arm turning servos into torque motors),
    # which would otherwise change every later env of the same scene in the process
    private_models: bool = False

    def __post_init__(self) -> None:
        if self.obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode={self.obs_mode!r}; use one of {OBS_MODES}")
        if self.reward not in REWARD_MODES:
            raise ValueError(f"reward={self.reward!r}; use one of {REWARD_MODES}")
        if self.control is not None and self.control not in CONTROL_MODES:
            raise ValueError(f"control={self.control!r}; use one of {CONTROL_MODES}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.control_hz <= 0:
            raise ValueError(f"control_hz must be > 0, got {self.control_hz}")
        h, w = self.image_hw
        if not (16 <= h <= 512 and 16 <= w <= 512):
            raise ValueError(f"image_size={self.image_size!r} out of range 16..512 px")

    @property
    def image_hw(self) -> tuple[int, int]:
        if isinstance(self.image_size, int):
            return (self.image_size, self.image_size)
        h, w = self.image_size
        return (int(h), int(w))

    @property
    def uses_images(self) -> bool:
        return "rgb" in self.obs_mode

    @property
    def uses_state(self) -> bool:
        return "state" in self.obs_mode

    def timing(self) -> tuple[float, int]:
        """(physics timestep, substeps per control step)."""
        period = 1.0 / self.control_hz
        if self.substeps is not None:
            if self.substeps < 1:
                raise ValueError(f"substeps must be >= 1, got {self.substeps}")
            return period / self.substeps, int(self.substeps)
        dt = self.physics_dt or 0.005
        n = max(1, round(period / dt))
        return period / n, n

    @classmethod
    def from_kwargs(cls, task: str, num_envs: int, **kwargs: Any) -> FrankaEnvConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(
                f"unknown mujoco_franka option(s) {unknown}; known options: "
                f"{sorted(names - {'task', 'num_envs'})}"
            )
        if kwargs.get("obs_mode") in OBS_ALIASES:
            kwargs["obs_mode"] = OBS_ALIASES[kwargs["obs_mode"]]
        if "impedance" in kwargs:
            kwargs["impedance"] = ImpedanceGains.from_dict(
                kwargs["impedance"], "env.kwargs.impedance"
            )
        if "ood" in kwargs:
            kwargs["ood"] = parse_ood(kwargs["ood"])
        if "cameras" in kwargs:
            cams = kwargs["cameras"]
            kwargs["cameras"] = (cams,) if isinstance(cams, str) else tuple(cams)
        if isinstance(kwargs.get("image_size"), list):
            kwargs["image_size"] = tuple(kwargs["image_size"])
        return cls(task=task, num_envs=num_envs, **kwargs)
