"""The VLA's slot pointer: it finds the obj*_minus_ee fields, starts neutral, and SFT teaches it to
follow the instruction (the named object's vector), so different instructions give different
actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.models.vla_ground import SLOT_SCALE, slot_slices
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField

ROBOT = RobotSpec(
    state=(StateField("ee_pos", 3), *(StateField(f"obj{i}_minus_ee", 3) for i in range(3))),
    action=ActionSpace("raw", 3, 1),
)
SPEC = PolicySpec(
    state_dim=12,
    action_dim=3,
    chunk=1,
    cameras={"front": (16, 16)},
    uses_instruction=True,
    robot=ROBOT,
)
NAMES = ("cube", "cylinder", "sphere")


def _policy(name: str = "vla_tokens", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_policy(
        name,
        SPEC,
        hidden=[64],
        text_encoder="hash",
        image_feat_dim=16,
        cnn_channels=[4, 4, 4],
        slot_pointer=True,
        **kw,
    )


def _batch(rng: np.random.Generator, b: int) -> tuple[dict, np.ndarray, np.ndarray]:
    state = rng.uniform(-0.1, 0.1, size=(b, 12)).astype(np.float32)
    target = rng.integers(3, size=b)
    obs = {
        "state": state,
        "images": {"front": np.zeros((b, 16, 16, 3), np.uint8)},
        "instruction": [f"reach the {NAMES[t]}" for t in target],
    }
    action = np.stack([state[i, 3 + 3 * t : 6 + 3 * t] for i, t in enumerate(target)])
    return obs, np.clip(action * SLOT_SCALE, -1, 1)[:, None, :].astype(np.float32), target


def _sft_pointer_accuracy(policy: torch.nn.Module, batch, steps: int) -> float:
    """SFT ``steps`` batches of 64, then how often the pointer's likeliest slot is the named one
    (300 held-out samples)."""
    rng = np.random.default_rng(1)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(steps):
        obs, act, _ = batch(rng, 64)
        loss = policy.sft_loss(obs_to_tensors(obs), torch.as_tensor(act))
        opt.zero_grad()
        loss.backward()
        opt.step()
    obs, _, target = batch(np.random.default_rng(2), 300)
    return float((policy.slot_weights(obs_to_tensors(obs)).argmax(-1).numpy() == target).mean())


def test_slot_slices_follow_the_state_layout():
    assert slot_slices(ROBOT) == [(3, 6), (6, 9), (9, 12)]
    assert slot_slices(None) == []


def test_pointer_needs_object_slots():
    spec = PolicySpec(
        state_dim=3,
        action_dim=3,
        cameras={"front": (16, 16)},
        uses_instruction=True,
        robot=RobotSpec(state=(StateField("ee_pos", 3),), action=ActionSpace("raw", 3, 1)),
    )
    with pytest.raises(ValueError, match="slot_pointer"):
        build_policy("vla_flow", spec, hidden=[8], text_encoder="hash", slot_pointer=True)


def test_untrained_pointer_is_uniform():
    obs, _, _ = _batch(np.random.default_rng(0), 6)
    w = _policy().slot_weights(obs_to_tensors(obs))
    torch.testing.assert_close(w, torch.full((6, 3), 1 / 3))


@pytest.mark.parametrize("head", ["vla_tokens", "vla_flow"])
def test_sft_grounds_the_instruction_in_the_named_slot(head):
    policy = _policy(head)
    assert _sft_pointer_accuracy(policy, _batch, 80) > 0.9
    obs, _, _ = _batch(np.random.default_rng(2), 300)
    # same scene, two instructions: the deterministic action follows the named object
    one = {
        "state": obs["state"][:1].repeat(2, 0),
        "images": {"front": obs["images"]["front"][:2]},
        "instruction": ["reach the cube", "reach the sphere"],
    }
    w2 = policy.slot_weights(obs_to_tensors(one))
    assert int(w2[0].argmax()) == 0 and int(w2[1].argmax()) == 2


# ------------------------------------------------ slot glimpse (colour-only grounding)
CAMERA = {
    "pos": [0.0, 0.0, 0.5],
    "look_at": [0.0, 0.0, 0.0],
    "fovy_deg": 60,
}  # looking straight down
PALETTE = {"red": (220, 30, 30), "green": (30, 180, 50), "blue": (30, 80, 230)}
SPOTS = np.array(
    [[x, y, 0.0] for x in (-0.15, 0.0, 0.15) for y in (-0.1, 0.1)]
)  # 6 places, >= 8 px apart


def _colour_batch(
    rng: np.random.Generator, b: int, hw: int = 32
) -> tuple[dict, np.ndarray, np.ndarray]:
    """Three objects at three of six places, painted red / green / blue in a random order; the
    instruction names only the colour, so the image is the only way to the target."""
    from learner.models.vla_ground import SlotCamera, SlotGlimpse

    glimpse = SlotGlimpse(SlotCamera.from_config(CAMERA), (hw, hw), 1)
    ee = rng.uniform(-0.05, 0.05, size=(b, 3)).astype(np.float32)
    places = np.stack([rng.choice(6, 3, replace=False) for _ in range(b)])
    world = SPOTS[places].astype(np.float32)  # [B, 3, 3]
    pix = ((glimpse.project(torch.as_tensor(world)).numpy() + 1.0) / 2.0 * hw).astype(
        int
    )  # x, y pixel
    image = np.full((b, hw, hw, 3), 128, np.uint8)
    colours = np.stack([rng.permutation(3) for _ in range(b)])  # palette index per slot
    names = list(PALETTE)
    for i in range(b):
        for j in range(3):
            x, y = pix[i, j]
            image[i, max(y - 2, 0) : y + 3, max(x - 2, 0) : x + 3] = PALETTE[
                names[colours[i, j]]
            ]  # 5x5: the 3x3 glimpse interpolates
    target = rng.integers(3, size=b)
    state = np.concatenate([ee, (world - ee[:, None, :]).reshape(b, 9)], axis=1).astype(np.float32)
    obs = {
        "state": state,
        "images": {"front": image},
        "instruction": [f"reach the {names[colours[i, target[i]]]} object" for i in range(b)],
    }
    action = np.stack([state[i, 3 + 3 * t : 6 + 3 * t] for i, t in enumerate(target)])
    return obs, np.clip(action * SLOT_SCALE, -1, 1)[:, None, :].astype(np.float32), target


def _colour_policy(**kw) -> torch.nn.Module:
    spec = PolicySpec(
        state_dim=12,
        action_dim=3,
        chunk=1,
        cameras={"front": (32, 32)},
        uses_instruction=True,
        robot=ROBOT,
    )
    torch.manual_seed(0)
    return build_policy(
        "vla_flow",
        spec,
        hidden=[64],
        text_encoder="hash",
        image_feat_dim=16,
        cnn_channels=[4, 4, 4],
        slot_pointer=True,
        **kw,
    )


def test_glimpse_points_at_every_slot_in_the_camera_image():
    """The projection puts each slot on its painted pixels: the glimpse reads that slot's colour."""
    obs, _, _ = _colour_batch(np.random.default_rng(3), 32)
    policy = _colour_policy(slot_camera=CAMERA)
    t = obs_to_tensors(obs)
    raw = t["state"].float()
    world = policy.pointer.slots(raw) / SLOT_SCALE + raw[:, None, :3]
    look = policy.pointer.glimpse(world, t["images"]["front"], torch.zeros(32, 4, 16, 16))
    rgb = (look[..., :3] * 255).round().numpy()
    painted = {tuple(float(c) for c in v) for v in PALETTE.values()}
    assert all(tuple(px) in painted for px in rgb.reshape(-1, 3)), (
        "a glimpse missed its object's pixels"
    )


@pytest.mark.parametrize("camera", [CAMERA, None])
def test_sft_grounds_colour_only_instructions_through_the_glimpse(camera):
    """Colour-only instructions: with the calibrated glimpse SFT picks the named slot; without it
    (pooled image features only) the pointer stays near chance on the same data and steps."""
    policy = _colour_policy(**({"slot_camera": camera} if camera else {}))
    acc = _sft_pointer_accuracy(policy, _colour_batch, 120)
    if camera:
        assert acc > 0.9
    else:
        assert acc < 0.7


def test_slot_camera_config_errors_name_the_key():
    with pytest.raises(ValueError, match="slot_camera.*slot_pointer"):
        build_policy("vla_flow", SPEC, hidden=[8], text_encoder="hash", slot_camera=CAMERA)
    with pytest.raises(ValueError, match="look_at"):
        _colour_policy(slot_camera={"pos": [0, 0, 1]})
    with pytest.raises(ValueError, match="different"):
        _colour_policy(slot_camera={"pos": [0, 0, 1], "look_at": [0, 0, 1]})


@pytest.mark.parametrize("split", ["id", "vision", "position"])
def test_language_configs_calibration_matches_the_simulated_front_camera(split):
    """The ``slot_camera`` in the language VLA configs is the sim's ``front`` camera: every slot's
    glimpse in a rendered frame has the chromaticity of the colour that slot was painted."""
    from omegaconf import OmegaConf

    from learner.models.vla_ground import SlotCamera, SlotGlimpse
    from rlinf_contracts.env_registry import make_env
    from sim_bridges.mujoco_franka.tasks.language import COLOURS

    cfg = OmegaConf.load("configs/sim_franka_language_vla_flow_sft.yaml")
    camera = SlotCamera.from_config(OmegaConf.to_container(cfg.model.kwargs.slot_camera))
    env = make_env("franka_language/mix", num_envs=8, ood=split, cameras=("front",), image_size=64)
    try:
        obs = env.reset(seed=11)
        robot = env.spec.robot
        state = torch.as_tensor(obs["state"]).float()
        ee = robot.state_slices()["ee_pos"]
        world = torch.stack([state[:, s:e] for s, e in slot_slices(robot)], 1) + state[:, None, ee]
        look = SlotGlimpse(camera, (64, 64), 1)(
            world, torch.as_tensor(obs["images"]["front"]), torch.zeros(8, 1, 32, 32)
        )
        names = list(COLOURS)
        palette = np.array([COLOURS[c] for c in names])
        palette = palette / (palette.sum(1, keepdims=True) + 0.05)
        hits = [
            names[int(np.argmin(((palette - look[i, j, 3:6].numpy()) ** 2).sum(1)))]
            == env.task.episode(d).colours[j]
            for i, d in enumerate(env.datas)
            for j in range(3)
        ]
    finally:
        env.close()
    assert np.mean(hits) >= 0.9, f"{np.mean(hits):.2f} of glimpses read their slot's colour"
