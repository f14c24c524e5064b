"""ManiSkill3 bridge: ``make_env("maniskill/PickCube-v1", num_envs=4, obs_mode="state")``.

ManiSkill3 is natively batched on the GPU (``physx_cuda``: one env object holds all B envs,
partial resets via ``options={"env_idx": ...}``); on a CPU (``physx_cpu``) one env object holds
one env, so B of them run in a :class:`~sim_bridges.loop_env.LoopVectorEnv`. Both paths share
the pure mapping below (state flattening, camera renaming, control-mode names, backend choice),
which is unit-tested without ManiSkill installed.

``mani-skill`` is an optional extra installed by ``scripts/install_maniskill.sh``. On a CPU it
also needs a Vulkan driver, Mesa >= 24.3 lavapipe (Debian 12: ``mesa-vulkan-drivers`` from
bookworm-backports) — even for state observations, because SAPIEN builds render materials with
every task scene: without a Vulkan device, ``gym.make("PickCube-v1", sim_backend="physx_cpu",
render_backend="none")`` fails with "failed to find a rendering device" (mani-skill 3.0.1,
sapien 3.0.3). On ``physx_cpu`` the bridge picks ``render_backend="none"`` for state-only
observations (no render work per step) and ``"cpu"`` (lavapipe) for cameras; the first camera
env of a process pays a one-off ~10-15 s shader compilation on lavapipe, later ones ~0.5 s.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, VectorEnv
from rlinf_contracts.env_registry import register_env
from rlinf_contracts.stepping import Rows, RowStep, SteppedVectorEnv, row_seeds
from sim_bridges.loop_env import LoopVectorEnv, SingleEnv, SingleObs, SingleStep

log = logging.getLogger(__name__)
CONTROL_MODES = {
    "ee_delta": "pd_ee_delta_pose",
    "ee_delta_pos": "pd_ee_delta_pos",
    "joint_delta": "pd_joint_delta_pos",
}
CAMERA_ALIASES = {"third": "base_camera", "wrist": "hand_camera"}
OBS_MODES = {"state": "state", "rgb": "rgb", "state+rgb": "rgb"}
SIM_BACKENDS = ("auto", "physx_cpu", "physx_cuda", "cpu", "gpu")
REWARDS = {"dense": "normalized_dense", "sparse": "sparse"}
# Language instructions for the table-top tasks (VLA policies read them); others fall back to
# the task id. Wording follows each task's description in ManiSkill 3.0.1.
TASK_INSTRUCTIONS = {
    "PickCube-v1": "pick up the red cube and move it to the goal position",
    "PushCube-v1": "push the cube to the goal region in front of it",
    "PullCube-v1": "pull the cube onto the target",
    "StackCube-v1": "stack the red cube on top of the green cube",
    "PegInsertionSide-v1": "pick up the peg and insert its orange end into the hole in the box",
    "PlugCharger-v1": "plug the charger into the receptacle",
    "LiftPegUpright-v1": "stand the peg lying on the table upright",
    "PokeCube-v1": "use the peg to push the red cube to the goal position",
    "PlaceSphere-v1": "place the sphere into the shallow bin",
    "RollBall-v1": "roll the ball to the goal region at the other end of the table",
    "PushT-v1": "push the T-shaped block onto the T-shaped target",
}
VULKAN_HINT = (
    "SAPIEN found no Vulkan device; on a CPU ManiSkill needs Mesa >= 24.3 lavapipe even "
    "for state observations. Run scripts/install_maniskill.sh (Debian 12: "
    "`apt-get install mesa-vulkan-drivers/bookworm-backports`)"
)


@dataclass(frozen=True)
class ManiSkillConfig:
    task: str = "PickCube-v1"
    obs_mode: str = "state"  # state | rgb | state+rgb (state is always in the obs map)
    control: str = "ee_delta"  # ours (see CONTROL_MODES) or a native ManiSkill control mode
    image_size: int = 128
    cameras: tuple[str, ...] = ("third",)  # ours (see CAMERA_ALIASES) or native sensor names
    max_episode_steps: int = 50
    sim_backend: str = "auto"  # auto | physx_cpu | physx_cuda
    render_backend: str | None = None  # None: "none"/"cpu" on physx_cpu, ManiSkill's default on GPU
    reward: str = "dense"  # dense -> normalized_dense | sparse
    terminate_on_success: bool = True
    instruction: str | None = None  # None: TASK_INSTRUCTIONS, else the task id

    def __post_init__(self) -> None:
        for key, value, allowed in (
            ("obs_mode", self.obs_mode, OBS_MODES),
            ("reward", self.reward, REWARDS),
            ("sim_backend", self.sim_backend, SIM_BACKENDS),
        ):
            if value not in allowed:
                raise ValueError(f"maniskill: {key}={value!r}; use one of {', '.join(allowed)}")
        if self.max_episode_steps < 1 or self.image_size < 1:
            raise ValueError(
                f"maniskill: max_episode_steps={self.max_episode_steps} and "
                f"image_size={self.image_size} must be >= 1"
            )
        object.__setattr__(self, "cameras", tuple(self.cameras))

    @property
    def uses_cameras(self) -> bool:
        return "rgb" in self.obs_mode


def config_from_kwargs(task: str, kwargs: Mapping[str, Any]) -> ManiSkillConfig:
    """``make_env`` keyword arguments -> config; an unknown key names itself and the known ones."""
    known = {f.name for f in dataclasses.fields(ManiSkillConfig)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(
            f"maniskill: unknown option(s) {unknown}; known: {sorted(known - {'task'})}"
        )
    return ManiSkillConfig(task=task or "PickCube-v1", **kwargs)


def check_task(task: str, registered: Iterable[str]) -> None:
    """Fail before building anything when the task id is not a registered ManiSkill env."""
    names = sorted(registered)
    if task not in names:
        near = difflib.get_close_matches(task, names, n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else f" Known: {', '.join(names)}"
        raise ValueError(f"unknown ManiSkill task {task!r} in env='maniskill/{task}'.{hint}")


def native_control_mode(control: str) -> str:
    return CONTROL_MODES.get(control, control)


def task_instruction(cfg: ManiSkillConfig) -> str:
    return (
        cfg.instruction
        if cfg.instruction is not None
        else TASK_INSTRUCTIONS.get(cfg.task, cfg.task)
    )


def choose_backend(requested: str, cuda_available: bool) -> str:
    """``auto`` -> GPU-batched physics where CUDA is present, else ``physx_cpu``."""
    if requested not in SIM_BACKENDS:
        raise ValueError(f"sim_backend={requested!r}; use auto, physx_cpu or physx_cuda")
    if requested == "auto":
        return "physx_cuda" if cuda_available else "physx_cpu"
    if requested in ("physx_cuda", "gpu") and not cuda_available:
        raise RuntimeError("sim_backend=physx_cuda needs a CUDA GPU; use physx_cpu here")
    return {"cpu": "physx_cpu", "gpu": "physx_cuda"}.get(requested, requested)


def choose_render_backend(
    requested: str | None, uses_cameras: bool, sim_backend: str
) -> str | None:
    """An explicit choice wins. On ``physx_cpu``: ``none`` without cameras (SAPIEN still needs a
    Vulkan device, but renders nothing per step), ``cpu`` (lavapipe) with them — instead of
    ManiSkill's default, which asks for ``sapien_cuda`` and falls back with a warning. On the GPU
    ``None`` keeps ManiSkill's default (CUDA rendering)."""
    if requested is not None or sim_backend != "physx_cpu":
        return requested
    return "cpu" if uses_cameras else "none"


def to_numpy(x: Any) -> np.ndarray:
    """torch tensor (any device) or array -> numpy."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def flatten_state(obs: Any) -> np.ndarray:
    """ManiSkill obs -> float32 ``[N, D]``: a flat state tensor as is; for dict observations
    (rgb modes) the ``agent`` and ``extra`` leaves in sorted key order, each flattened per env."""
    if not isinstance(obs, Mapping):
        return to_numpy(obs).astype(np.float32)
    parts: list[np.ndarray] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key in sorted(node):
                walk(node[key])
        else:
            arr = to_numpy(node).astype(np.float32)
            parts.append(arr.reshape(arr.shape[0], -1))

    for group in ("agent", "extra"):
        if group in obs:
            walk(obs[group])
    if not parts:
        raise KeyError(f"ManiSkill observation has no 'agent'/'extra' entries; keys: {sorted(obs)}")
    return np.concatenate(parts, axis=1)


def extract_images(obs: Mapping[str, Any], cameras: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``obs["sensor_data"][native_cam]["rgb"]`` -> ``{our_cam: uint8 [N, H, W, 3]}``."""
    sensors = obs.get("sensor_data", {})
    out = {}
    for cam in cameras:
        native = CAMERA_ALIASES.get(cam, cam)
        if native not in sensors:
            raise KeyError(
                f"camera {cam!r} (ManiSkill {native!r}) not in sensor data; have {sorted(sensors)}"
            )
        out[cam] = to_numpy(sensors[native]["rgb"])[..., :3].astype(np.uint8)
    return out


def scale_actions(actions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Contract actions in [-1, 1] -> the env's action box (identity for ManiSkill's normalised
    pd_*_delta modes; matters for absolute modes such as ``pd_joint_pos``)."""
    return (low + (actions + 1.0) * 0.5 * (high - low)).astype(np.float32)


def make_spec(
    cfg: ManiSkillConfig, num_envs: int, state_dim: int, action_dim: int, control_hz: float
) -> EnvSpec:
    s = cfg.image_size
    return EnvSpec(
        num_envs=num_envs,
        state_dim=state_dim,
        action_dim=action_dim,
        cameras={c: (s, s) for c in cfg.cameras} if cfg.uses_cameras else {},
        max_episode_steps=cfg.max_episode_steps,
        control_hz=control_hz,
        instruction=task_instruction(cfg),
    )


def _make_native(
    cfg: ManiSkillConfig, num_envs: int, backend: str
):  # pragma: no cover - needs mani_skill
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401  (registers the tasks)
    from mani_skill.utils.registration import REGISTERED_ENVS

    check_task(cfg.task, REGISTERED_ENVS)
    render = choose_render_backend(cfg.render_backend, cfg.uses_cameras, backend)
    try:
        return gym.make(
            cfg.task,
            num_envs=num_envs,
            obs_mode=OBS_MODES[cfg.obs_mode],
            control_mode=native_control_mode(cfg.control),
            sim_backend=backend,
            reward_mode=REWARDS[cfg.reward],
            sensor_configs={"width": cfg.image_size, "height": cfg.image_size},
            max_episode_steps=10**9,  # episodes are cut by the bridge (cfg.max_episode_steps)
            **({"render_backend": render} if render is not None else {}),  # type: ignore[arg-type]  # a ManiSkill kwarg
        )
    except RuntimeError as exc:
        if "rendering device" in str(exc):
            raise RuntimeError(f"{exc}: {VULKAN_HINT}") from exc
        raise


class ManiSkillSingle(SingleEnv):  # pragma: no cover - needs mani_skill
    """One ``physx_cpu`` env (ManiSkill's CPU backend holds one env per object)."""

    def __init__(self, cfg: ManiSkillConfig) -> None:
        self.cfg = cfg
        self.instruction = task_instruction(cfg)
        self.env = _make_native(cfg, 1, "physx_cpu")
        space: Any = self.env.action_space  # a Box; ManiSkill's env adds control_freq
        self.low, self.high = np.asarray(space.low).reshape(-1), np.asarray(space.high).reshape(-1)
        self.control_hz = float(cast(Any, self.env.unwrapped).control_freq)

    def _obs(self, raw: Any) -> SingleObs:
        cams = self.cfg.cameras if self.cfg.uses_cameras else ()
        images = {k: v[0] for k, v in extract_images(raw, cams).items()} if cams else {}
        return SingleObs(flatten_state(raw)[0], images, self.instruction)

    def reset(self, seed: int) -> SingleObs:
        raw, _ = self.env.reset(seed=seed)
        return self._obs(raw)

    def step(self, action: np.ndarray) -> SingleStep:
        raw, rew, _, _, info = self.env.step(scale_actions(action, self.low, self.high)[None])
        success = bool(to_numpy(info.get("success", False)).reshape(-1)[0])
        fail = bool(to_numpy(info.get("fail", False)).reshape(-1)[0])
        return SingleStep(self._obs(raw), float(to_numpy(rew).reshape(-1)[0]), success, fail)

    def close(self) -> None:
        self.env.close()


class ManiSkillBatched(SteppedVectorEnv):
    """All B envs in one GPU-simulated ManiSkill env (``env``, made by ``_make_native``).

    ManiSkill steps every env together, so rows whose episode ended inside a chunk idle on zero
    actions until it ends (``steps_idle_rows``: their final observation is kept from the sub-step
    they ended); they are then reset through ManiSkill's partial reset (``env_idx``).
    """

    steps_idle_rows = True

    def __init__(self, cfg: ManiSkillConfig, env: Any, num_envs: int) -> None:
        self.cfg = cfg
        self.env = env
        self._raw, _ = env.reset(seed=0)
        space = env.action_space
        self.low, self.high = np.asarray(space.low)[0], np.asarray(space.high)[0]
        super().__init__(
            make_spec(
                cfg,
                num_envs,
                flatten_state(self._raw).shape[1],
                int(self.low.shape[0]),
                float(env.unwrapped.control_freq),
            ),
            cfg.terminate_on_success,
        )

    def _observe(self) -> Observation:
        images = extract_images(self._raw, self.cfg.cameras) if self.spec.cameras else {}
        return {
            "state": flatten_state(self._raw),
            "images": images,
            "instruction": [self.spec.instruction] * self.num_envs,
        }

    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        """ManiSkill seeds its envs itself: one call with a seed per env."""
        seeds = None if seed is None else row_seeds(seed, self.num_envs)
        self._raw, _ = self.env.reset(seed=seeds)
        self._begin_episodes(self._all_rows)
        return self._observe()

    def _reset_rows(self, rows: np.ndarray) -> None:
        import torch

        self._raw, _ = self.env.reset(options={"env_idx": torch.as_tensor(rows)})

    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        import torch

        b = self.num_envs
        scaled = np.zeros((b, self.spec.action_dim), np.float32)  # idle rows: zero, results ignored
        scaled[rows] = scale_actions(actions, self.low, self.high)
        self._raw, rew, _, _, info = self.env.step(
            torch.as_tensor(scaled, device=self.env.unwrapped.device)
        )
        reward = to_numpy(rew).astype(np.float32).reshape(b)
        ok = to_numpy(info["success"]).astype(bool).reshape(b)
        fail = to_numpy(info.get("fail", np.zeros(b, bool))).astype(bool).reshape(b)
        return RowStep(reward[rows], ok[rows], terminated=fail[rows])


def _make_cpu_env(
    cfg: ManiSkillConfig, num_envs: int
) -> VectorEnv:  # pragma: no cover - needs mani_skill
    adapters: list[ManiSkillSingle] = []
    try:
        for _ in range(num_envs):
            adapters.append(ManiSkillSingle(cfg))
    except BaseException:
        for a in adapters:  # do not leak SAPIEN scenes when one of the B builds fails
            a.close()
        raise
    probe = adapters[0].reset(0)
    spec = make_spec(
        cfg,
        num_envs,
        int(probe.state.shape[0]),
        int(adapters[0].low.shape[0]),
        adapters[0].control_hz,
    )
    return LoopVectorEnv(adapters, spec, terminate_on_success=cfg.terminate_on_success)


@register_env("maniskill")
def make_maniskill_env(task: str = "PickCube-v1", num_envs: int = 1, **kwargs: Any) -> VectorEnv:
    """``num_envs`` ManiSkill3 envs of ``task``; kwargs are :class:`ManiSkillConfig` fields."""
    cfg = config_from_kwargs(task, kwargs)
    if num_envs < 1:
        raise ValueError(f"maniskill: num_envs={num_envs}; must be >= 1")
    if importlib.util.find_spec("mani_skill") is None:
        raise ImportError(
            "the maniskill bridge needs ManiSkill3: run scripts/install_maniskill.sh "
            "(pip install mani-skill, extra `maniskill`; on a CPU also a Vulkan driver, "
            "Mesa >= 24.3 lavapipe, e.g. mesa-vulkan-drivers)"
        )
    import torch  # a mani-skill dependency; only asked whether CUDA is present

    backend = choose_backend(cfg.sim_backend, torch.cuda.is_available())
    log.info("maniskill %s: %d envs on %s (obs %s)", cfg.task, num_envs, backend, cfg.obs_mode)
    if backend == "physx_cuda":
        return ManiSkillBatched(cfg, _make_native(cfg, num_envs, backend), num_envs)
    return _make_cpu_env(cfg, num_envs)
