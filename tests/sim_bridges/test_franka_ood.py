"""OOD knobs: position widens sampling, vision changes pixels only, semantic swaps the object."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from rlinf_contracts.env_registry import make_env
from sim_bridges.mujoco_franka.ood import OOD_SPLITS, parse_ood

pytestmark = pytest.mark.sim


def target_spread(ood) -> float:
    env = make_env("mujoco_franka/reach", num_envs=64, ood=ood)
    obs = env.reset(seed=0)
    return float(np.ptp(obs["state"][:, 24:27], axis=0).max())


def test_position_split_widens_target_range() -> None:
    assert target_spread("position") > 1.3 * target_spread(None)


def test_vision_split_changes_pixels_not_physics() -> None:
    kw = dict(num_envs=2, obs_mode="state+rgb", image_size=32, cameras=("third",))
    plain = make_env("mujoco_franka/push", **kw)
    vision = make_env("mujoco_franka/push", ood="vision", **kw)
    a, b = plain.reset(seed=4), vision.reset(seed=4)
    np.testing.assert_array_equal(a["state"], b["state"])
    assert np.abs(a["images"]["third"].astype(int) - b["images"]["third"]).mean() > 3.0


def test_semantic_split_uses_other_object_shapes() -> None:
    env = make_env("mujoco_franka/lift", num_envs=3, ood="semantic")
    kinds = {int(fm.model.geom_type[fm.object_geoms["object"]]) for fm in env.fms}
    assert kinds == {
        int(mujoco.mjtGeom.mjGEOM_CYLINDER),
        int(mujoco.mjtGeom.mjGEOM_SPHERE),
        int(mujoco.mjtGeom.mjGEOM_CAPSULE),
    }
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.zeros((3, 7), np.float32))


def test_parse_ood_overrides_and_errors() -> None:
    cfg = parse_ood({"split": "position", "pos_scale": 2.0})
    assert cfg.pos_scale == 2.0 and cfg.pos_shift == OOD_SPLITS["position"].pos_shift
    assert parse_ood("id").pos_scale == 1.0 and not parse_ood("id").varies_vision
    assert parse_ood("pose").pos_scale == OOD_SPLITS["position"].pos_scale > 1.0
    with pytest.raises(ValueError, match="unknown ood knob"):
        parse_ood({"colour": 1})
    with pytest.raises(ValueError, match="ood split 'weird'"):
        parse_ood("weird")
    with pytest.raises(ValueError, match="object_shapes"):
        parse_ood({"object_shapes": ["banana"]})
