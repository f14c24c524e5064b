"""Camera-only push (configs/sim_franka_push_rlpd_pixels*.yaml): the policy's input holds no object
pose -- the state is proprioception only, and the cube and the goal reach it only as pixels."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from rlinf_contracts.config import from_dict, load_config
from rlinf_contracts.env_registry import make_env
from sim_bridges.mujoco_franka.tasks.base import body_pos

ROOT = Path(__file__).resolve().parents[2]


def env_of(config: str, obs_mode: str | None = None):
    from learner.offpolicy.config import OffPolicyConfig

    raw = load_config(ROOT / "configs" / config, ["model.encoder.weights=unused"])
    cfg = from_dict(OffPolicyConfig, raw)
    kwargs = dict(cfg.env.kwargs, image_size=32)  # small frames: the layout is what is checked
    return cfg, make_env(
        cfg.env.name,
        2,
        obs_mode=obs_mode or cfg.env.obs_mode,
        control=cfg.env.control,
        **kwargs,
    )


def move_cube_and_goal(env) -> None:
    """Teleport the cube and the goal marker of every env (no step, no render)."""
    for fm, d in zip(env.fms, env.datas):
        body_pos(fm, d, "object")[:2] += 0.05
        d.mocap_pos[fm.marker_mocap["goal"]][:2] -= 0.05
        mujoco.mj_forward(fm.model, d)


@pytest.mark.parametrize(
    "config", ["sim_franka_push_rlpd_pixels.yaml", "sim_franka_push_rlpd_pixels_cnn.yaml"]
)
def test_pixel_push_state_has_no_object_pose(config: str) -> None:
    cfg, env = env_of(config)
    try:
        assert cfg.env.obs_mode == "rgb"
        assert sorted(env.spec.cameras) == ["front", "wrist"]
        obs = env.reset(seed=0)
        before = obs["state"].copy()
        move_cube_and_goal(env)
        env._refresh(np.arange(env.num_envs))
        after = env._observe()
        np.testing.assert_array_equal(after["state"], before)  # no cube / goal pose in the state
        # ... but the cameras see the move
        assert any(
            not np.array_equal(after["images"][c], obs["images"][c]) for c in env.spec.cameras
        )
    finally:
        env.close()


def test_the_same_move_changes_a_state_observation() -> None:
    """Control: with obs_mode state the task features carry the cube and goal, so the check above
    would catch a leak."""
    _, env = env_of("sim_franka_push_rlpd_pixels.yaml", obs_mode="state")
    try:
        before = env.reset(seed=0)["state"].copy()
        move_cube_and_goal(env)
        env._refresh(np.arange(env.num_envs))
        assert not np.array_equal(env._observe()["state"], before)
    finally:
        env.close()


def _coloured_pixels(frames: np.ndarray) -> tuple[int, int]:
    """Pixels that are clearly red (the cube's colour) and clearly green (the goal disc's)."""
    r, g, b = (frames[..., i].astype(int) for i in range(3))
    red = (r > g + 80) & (r > b + 80)
    green = (g > r + 60) & (g > b + 60)
    return int(red.sum()), int(green.sum())


def test_cameras_show_no_visualisation_sites() -> None:
    """With the cube and the goal disc out of view, neither camera holds anything red or green.

    The gripper model's visualisation sites (a red sphere at the grip point, a green line along
    the approach axis) are the push objects' colours; a real camera does not see them, so the
    simulated ones must not either. The control renders the same scene with the sites switched
    on, so the check is shown to catch them.
    """
    _, env = env_of("sim_franka_push_rlpd_pixels.yaml")
    try:
        env.reset(seed=0)
        for fm, d in zip(env.fms, env.datas):
            body_pos(fm, d, "object")[2] -= 5.0  # under the floor
            d.mocap_pos[fm.marker_mocap["goal"]][2] -= 5.0
            mujoco.mj_forward(fm.model, d)
        rig = env._rig
        for camera in env.spec.cameras:
            assert _coloured_pixels(rig.render(env.fms, env.datas, camera)) == (0, 0), camera
        rig.option.sitegroup[:] = 1
        with_sites = [_coloured_pixels(rig.render(env.fms, env.datas, c)) for c in env.spec.cameras]
        assert sum(red + green for red, green in with_sites) > 0
    finally:
        env.close()
