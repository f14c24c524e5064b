"""The VLA's slot pointer: it finds the obj*_minus_ee fields, starts neutral, and SFT teaches it to
follow the instruction (the named object's vector), so different instructions give different actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.models.vla_ground import SLOT_SCALE, slot_slices
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField

ROBOT = RobotSpec(state=(StateField("ee_pos", 3), *(StateField(f"obj{i}_minus_ee", 3) for i in range(3))),
                  action=ActionSpace("raw", 3, 1))
SPEC = PolicySpec(state_dim=12, action_dim=3, chunk=1, cameras={"front": (16, 16)}, uses_instruction=True,
                  robot=ROBOT)
NAMES = ("cube", "cylinder", "sphere")


def _policy(name: str = "vla_tokens", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_policy(name, SPEC, hidden=[64], text_encoder="hash", image_feat_dim=16, cnn_channels=[4, 4, 4],
                        slot_pointer=True, **kw)


def _batch(rng: np.random.Generator, b: int) -> tuple[dict, np.ndarray, np.ndarray]:
    state = rng.uniform(-0.1, 0.1, size=(b, 12)).astype(np.float32)
    target = rng.integers(3, size=b)
    obs = {"state": state, "images": {"front": np.zeros((b, 16, 16, 3), np.uint8)},
           "instruction": [f"reach the {NAMES[t]}" for t in target]}
    action = np.stack([state[i, 3 + 3 * t: 6 + 3 * t] for i, t in enumerate(target)])
    return obs, np.clip(action * SLOT_SCALE, -1, 1)[:, None, :].astype(np.float32), target


def test_slot_slices_follow_the_state_layout():
    assert slot_slices(ROBOT) == [(3, 6), (6, 9), (9, 12)]
    assert slot_slices(None) == []


def test_pointer_needs_object_slots():
    spec = PolicySpec(state_dim=3, action_dim=3, cameras={"front": (16, 16)}, uses_instruction=True,
                      robot=RobotSpec(state=(StateField("ee_pos", 3),), action=ActionSpace("raw", 3, 1)))
    with pytest.raises(ValueError, match="slot_pointer"):
        build_policy("vla_flow", spec, hidden=[8], text_encoder="hash", slot_pointer=True)


def test_untrained_pointer_is_uniform():
    obs, _, _ = _batch(np.random.default_rng(0), 6)
    w = _policy().slot_weights(obs_to_tensors(obs))
    torch.testing.assert_close(w, torch.full((6, 3), 1 / 3))


@pytest.mark.parametrize("head", ["vla_tokens", "vla_flow"])
def test_sft_grounds_the_instruction_in_the_named_slot(head):
    rng = np.random.default_rng(1)
    policy = _policy(head)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(80):
        obs, act, _ = _batch(rng, 64)
        loss = policy.sft_loss(obs_to_tensors(obs), torch.as_tensor(act))
        opt.zero_grad()
        loss.backward()
        opt.step()
    obs, _, target = _batch(np.random.default_rng(2), 300)
    w = policy.slot_weights(obs_to_tensors(obs))
    assert float((w.argmax(-1).numpy() == target).mean()) > 0.9
    # same scene, two instructions: the deterministic action follows the named object
    one = {"state": obs["state"][:1].repeat(2, 0), "images": {"front": obs["images"]["front"][:2]},
           "instruction": ["reach the cube", "reach the sphere"]}
    w2 = policy.slot_weights(obs_to_tensors(one))
    assert int(w2[0].argmax()) == 0 and int(w2[1].argmax()) == 2
