"""ManiSkill3, LIBERO and IsaacLab bridges: pure mappings, tested without their simulators
(ManiSkill on the real simulator: ``test_maniskill_bridge.py``)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rlinf_contracts.env_registry import make_env
from rlinf_contracts.rotations import quat_xyzw_to_rotvec
from rlinf_contracts.stepping import merge_final_rows
from sim_bridges import isaaclab_bridge as il
from sim_bridges import libero_bridge as lb
from sim_bridges import maniskill_bridge as ms


# ------------------------------------------------------------------ ManiSkill
def test_maniskill_flatten_state_dict_and_tensor() -> None:
    obs = {
        "agent": {"qvel": np.ones((2, 2)), "qpos": np.zeros((2, 3))},
        "extra": {"tcp_pose": np.full((2, 7), 2.0)},
        "sensor_data": {},
    }
    out = ms.flatten_state(obs)
    assert out.shape == (2, 12) and out.dtype == np.float32
    np.testing.assert_array_equal(
        out[0], [0, 0, 0, 1, 1] + [2] * 7
    )  # agent.qpos, agent.qvel, extra
    assert ms.flatten_state(np.zeros((3, 5))).shape == (3, 5)
    with pytest.raises(KeyError, match="no 'agent'/'extra'"):
        ms.flatten_state({"sensor_data": {}})


def test_maniskill_images_control_and_backend() -> None:
    rgb = np.random.default_rng(0).integers(0, 255, (2, 8, 8, 4)).astype(np.uint8)
    out = ms.extract_images({"sensor_data": {"base_camera": {"rgb": rgb}}}, ("third",))
    assert out["third"].shape == (2, 8, 8, 3) and out["third"].dtype == np.uint8
    with pytest.raises(KeyError, match="camera 'wrist'"):
        ms.extract_images({"sensor_data": {}}, ("wrist",))
    assert ms.native_control_mode("ee_delta") == "pd_ee_delta_pose"
    assert ms.native_control_mode("pd_joint_pos") == "pd_joint_pos"
    assert ms.choose_backend("auto", cuda_available=False) == "physx_cpu"
    assert ms.choose_backend("auto", cuda_available=True) == "physx_cuda"
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        ms.choose_backend("physx_cuda", cuda_available=False)


def test_maniskill_final_rows_are_kept_from_the_step_they_ended() -> None:
    def obs(v: float) -> dict:
        return {
            "state": np.full((3, 2), v, np.float32),
            "images": {"c": np.full((3, 2, 2, 3), int(v), np.uint8)},
            "instruction": ["t"] * 3,
        }

    final = merge_final_rows(None, obs(1), np.array([True, False, False]))
    final = merge_final_rows(final, obs(2), np.array([False, True, False]))
    assert final["state"][:2, 0].tolist() == [1, 2] and final["images"]["c"][1].max() == 2
    assert merge_final_rows(None, obs(1), np.zeros(3, bool)) is None


def test_maniskill_render_backend_choice() -> None:
    # physx_cpu: no per-step render work without cameras, lavapipe ("cpu") with them
    assert ms.choose_render_backend(None, uses_cameras=False, sim_backend="physx_cpu") == "none"
    assert ms.choose_render_backend(None, uses_cameras=True, sim_backend="physx_cpu") == "cpu"
    assert ms.choose_render_backend(None, uses_cameras=True, sim_backend="physx_cuda") is None
    assert ms.choose_render_backend("cpu", uses_cameras=False, sim_backend="physx_cpu") == "cpu"


def test_maniskill_config_errors_name_the_key() -> None:
    cfg = ms.config_from_kwargs("", {"obs_mode": "state+rgb", "cameras": ["third"]})
    assert cfg.task == "PickCube-v1" and cfg.cameras == ("third",) and cfg.uses_cameras
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['camera'\]"):
        ms.config_from_kwargs("PickCube-v1", {"camera": ("third",)})
    with pytest.raises(ValueError, match="reward='shaped'"):
        ms.config_from_kwargs("PickCube-v1", {"reward": "shaped"})
    with pytest.raises(ValueError, match="sim_backend='tpu'"):
        ms.config_from_kwargs("PickCube-v1", {"sim_backend": "tpu"})
    with pytest.raises(ValueError, match="Did you mean PickCube-v1"):
        ms.check_task("PickCub-v1", ["PickCube-v1", "PushCube-v1"])
    ms.check_task("PushCube-v1", ["PickCube-v1", "PushCube-v1"])


def test_maniskill_spec_instruction_and_action_scaling() -> None:
    spec = ms.make_spec(
        ms.ManiSkillConfig(obs_mode="rgb", image_size=16, cameras=("third", "wrist")),
        num_envs=2,
        state_dim=9,
        action_dim=4,
        control_hz=20.0,
    )
    assert spec.cameras == {"third": (16, 16), "wrist": (16, 16)} and spec.control_hz == 20.0
    assert spec.instruction == ms.TASK_INSTRUCTIONS["PickCube-v1"]
    assert ms.task_instruction(ms.ManiSkillConfig(task="Empty-v1")) == "Empty-v1"
    assert ms.task_instruction(ms.ManiSkillConfig(instruction="do it")) == "do it"
    low, high = np.array([-1.0, 0.0]), np.array([1.0, 2.0])
    np.testing.assert_allclose(ms.scale_actions(np.array([[-1.0, 0.5]]), low, high), [[-1.0, 1.5]])


def test_maniskill_missing_package_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        ms.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mani_skill" else real(name, *a),
    )
    with pytest.raises(ImportError, match="install_maniskill.sh"):
        make_env("maniskill/PickCube-v1", num_envs=1)


# --------------------------------------------------------------------- LIBERO
def test_libero_state_is_openpi_layout() -> None:
    half = np.sqrt(0.5)
    obs = {
        "robot0_eef_pos": np.array([0.1, 0.2, 0.3]),
        "robot0_eef_quat": np.array([0.0, 0.0, half, half]),  # xyzw: 90 deg about z
        "robot0_gripper_qpos": np.array([0.04, -0.04]),
    }
    st = lb.libero_state(obs)
    assert st.dtype == np.float32 and st.shape == (8,)
    np.testing.assert_allclose(st, [0.1, 0.2, 0.3, 0, 0, np.pi / 2, 0.04, -0.04], atol=1e-6)
    np.testing.assert_allclose(quat_xyzw_to_rotvec(np.array([0, 0, 0, 1.0])), 0.0)
    # q and -q are the same rotation: same axis-angle
    np.testing.assert_allclose(
        quat_xyzw_to_rotvec(-obs["robot0_eef_quat"]), [0, 0, np.pi / 2], atol=1e-6
    )


def test_libero_images_rotated_and_init_state_cycles() -> None:
    img = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    out = lb.libero_images(
        {"agentview_image": img, "robot0_eye_in_hand_image": img}, ("third", "wrist")
    )
    np.testing.assert_array_equal(out["third"][0, 0], img[1, 1])
    assert lb.init_state_index(53, 50) == 3


def test_libero_errors() -> None:
    with pytest.raises(ValueError, match="unknown LIBERO suite 'libero_foo'"):
        make_env("libero/libero_foo", num_envs=1)
    if importlib.util.find_spec("libero") is None:
        with pytest.raises(ImportError, match="needs LIBERO"):
            make_env("libero/libero_spatial", num_envs=1)


# ------------------------------------------------------------------- IsaacLab
def test_isaaclab_pure_mapping() -> None:
    st = il.policy_state({"policy": np.ones((4, 2, 3))})
    assert st.shape == (4, 6) and st.dtype == np.float32
    with pytest.raises(TypeError, match="concatenate_terms"):
        il.policy_state({"policy": {"a": np.ones((4, 2))}})
    np.testing.assert_allclose(il.scale_actions(np.array([[1.0, -0.5]]), 0.5), [[0.5, -0.25]])
    terms = {
        "time_out": np.array([1, 1, 0]),
        "object_reached_goal": np.array([0, 1, 0]),
        "success": [1, 0, 0],
    }
    np.testing.assert_array_equal(
        il.success_from_terms(terms, il.SUCCESS_TERMS, 3), [True, True, False]
    )
    assert not il.success_from_terms({"time_out": [1, 1, 1]}, il.SUCCESS_TERMS, 3).any()


def test_isaaclab_missing_package_error() -> None:
    if importlib.util.find_spec("isaaclab") is None:
        with pytest.raises(ImportError, match="Isaac Sim and IsaacLab"):
            make_env("isaaclab/Isaac-Lift-Cube-Franka-v0", num_envs=1)
