"""robosuite bridge: pure observation mapping, and one real Lift env with cameras."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from sim_bridges.robosuite_bridge import camera_image, state_vector

pytestmark = pytest.mark.sim


def test_state_vector_concatenates_proprio_then_object() -> None:
    obs = {
        "robot0_proprio-state": np.arange(3.0),
        "object-state": np.arange(3.0, 5.0),
        "cube_pos": np.zeros(3),
    }
    out = state_vector(obs)
    assert out.dtype == np.float32 and out.tolist() == [0, 1, 2, 3, 4]
    assert state_vector({"robot0_proprio-state": np.ones(2)}).shape == (2,)


def test_camera_image_aliases_and_flips_rows() -> None:
    img = np.zeros((4, 4, 3), np.uint8)
    img[0] = 255  # OpenGL row 0 is the bottom of the picture
    out = camera_image({"agentview_image": img}, "third")
    assert out[-1].min() == 255 and out[0].max() == 0 and out.flags["C_CONTIGUOUS"]
    assert camera_image({"frontview_image": img}, "frontview").shape == (4, 4, 3)


@pytest.mark.skipif(importlib.util.find_spec("robosuite") is None, reason="robosuite not installed")
def test_robosuite_lift_with_cameras() -> None:
    from rlinf_contracts.env_registry import make_env

    env = make_env(
        "robosuite/Lift",
        num_envs=1,
        obs_mode="state+rgb",
        image_size=32,
        cameras=("third", "wrist"),
    )
    obs = env.reset(seed=0)
    assert obs["state"].shape == (1, env.spec.state_dim) and env.spec.action_dim == 7
    assert set(obs["images"]) == {"third", "wrist"} and obs["images"]["third"].shape == (
        1,
        32,
        32,
        3,
    )
    assert obs["images"]["third"].std() > 5
    _, rew, term, trunc, info = env.step(np.zeros((1, 2, 7), np.float32))
    assert rew.shape == (1, 2) and info["success"].dtype == bool and not info["success"][0]
    with pytest.raises(ValueError, match="unknown robosuite task 'Lfit'"):
        make_env("robosuite/Lfit", num_envs=1)
    env.close()
