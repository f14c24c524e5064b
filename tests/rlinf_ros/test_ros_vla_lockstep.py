"""A lock-step twin step means what a simulator step means (open-loop replay, no ROS processes).

The same episode (the twin replays the eval's seeds) driven by the same scripted actions: on
one side the simulator's ``env.step``; on the other the twin's path — the state built from what
the robot node publishes (joints, EE pose in the base frame, object slots), the action decoded
by the policy client's control law (``SpecIO``), and the robot node's lock-step stepper (safety
layer, one simulator control step of physics). State vectors and front-camera frames must agree
at every step; a real-time twin (the target ramped over a period by the 100 Hz driver, physics
on wall time) does not, which is what made the twin score 0.06-0.29 where the sim scores 0.33.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("mujoco", reason="needs the sim extra")

from rlinf_ros.config import load_graph_config
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.lockstep import LockstepStepper

pytestmark = [pytest.mark.sim]

ROOT = Path(__file__).resolve().parents[2]
SEED = 1000
STEPS = 12


def _twin(seed: int):
    # the safety settings of configs/ros_sim_franka_language.yaml, read from it so the two cannot
    # drift
    safety = load_graph_config(ROOT / "configs/ros_sim_franka_language.yaml").robot.arms[0].safety
    arm = make_arm(
        ArmConfig(name="panda", scene="franka_language/mix", scene_seed=seed, safety=safety)
    )
    arm.connect()
    arm.backend.new_episode(1)
    return arm


def _observe(arm, io):
    """The policy client's observation of the twin's published state (base-frame topics)."""
    from rlinf_ros.robot_io import reading_from_pose

    b, s = arm.backend, arm.state()
    d = b.data
    objects = (b.scene.object_positions() - d.xpos[b._base]) @ d.xmat[b._base].reshape(3, 3)
    reading = reading_from_pose(
        s.q, s.dq, s.gripper.width, s.ee_pose.position, s.ee_pose.quat_xyzw, objects=objects
    )
    return io.observation(
        [reading], {"front": b.render("front", 0, 0)}, b.scene.instruction
    ), reading


def _replay(stepper_kind: str, actions: np.ndarray):
    from rlinf_contracts.env_registry import make_env
    from rlinf_ros.robot_io import SpecIO

    env = make_env(
        "franka_language/mix", num_envs=1, obs_mode="state+rgb", cameras=["front"], image_size=64
    )
    sim = env.reset(seed=SEED)
    arm = _twin(SEED)
    io = SpecIO(env.spec.robot)
    io.begin_episode()
    stepper = LockstepStepper(arm) if stepper_kind == "lockstep" else None
    state_err, pixel_err = [], []
    for a in actions:
        obs, reading = _observe(arm, io)
        assert obs["instruction"] == sim["instruction"][0]
        state_err.append(float(np.abs(obs["state"] - sim["state"][0]).max()))
        pixel_err.append(
            float(np.abs(obs["images"]["front"].astype(int) - sim["images"]["front"][0]).mean())
        )
        target = io.decode(a[None], [reading])[0]
        if stepper is not None:
            out = stepper.apply(target.joints[0], target.grippers[0])
            assert not out.refused
        else:  # what the real-time robot node does with a one-point trajectory of one period
            q0 = arm.state().q
            arm.gripper_move(target.grippers[0])
            for t in range(1, 6):
                arm.move_joints(q0 + (target.joints[0] - q0) * t / 5)
                arm.backend.step(2)  # 10 ms of 5 ms physics steps per driver tick
        sim, _, term, trunc, _ = env.step(a[None].astype(np.float32))
        assert not (term[0] or trunc[0]), "pick actions that do not end the episode"
    obs, _ = _observe(arm, io)
    state_err.append(float(np.abs(obs["state"] - sim["state"][0]).max()))
    return np.array(state_err), np.array(pixel_err), stepper


def test_lockstep_twin_replays_the_simulator_step_for_step():
    actions = np.clip(np.random.default_rng(0).normal(0.0, 0.5, (STEPS, 4)), -1.0, 1.0).astype(
        np.float32
    )
    state_err, pixel_err, stepper = _replay("lockstep", actions)
    print(
        "lock-step: max |state diff| per step",
        state_err.round(6).tolist(),
        "mean |pixel diff|",
        pixel_err.tolist(),
    )
    assert state_err.max() < 1e-4, state_err
    assert pixel_err.max() == 0.0, pixel_err
    assert stepper.steps == STEPS and stepper.clock == pytest.approx(STEPS * stepper.period)
    # the same actions through the real-time path leave the simulator's trajectory at once
    rt_state, _, _ = _replay("realtime", actions)
    assert rt_state[1] > 0.01 and rt_state.max() > 0.1, rt_state


def test_lockstep_counts_the_first_success_where_the_simulator_terminates():
    """The oracle's episode on the simulator ends in success at step k (terminate_on_success);
    the same actions on the lock-step twin: its first success is step k (what the task node
    scores)."""
    from rlinf_contracts.env_registry import make_env
    from sim_bridges.mujoco_franka.oracle import oracle_action

    env = make_env("franka_language/mix", num_envs=1, obs_mode="state", image_size=64)
    env.reset(seed=SEED)
    actions = []
    for _ in range(40):
        a = oracle_action(env)
        actions.append(a[0])
        _, _, term, trunc, info = env.step(a)
        if term[0] or trunc[0]:
            break
    assert term[0], "the oracle succeeds on this episode"
    arm = _twin(SEED)
    stepper = LockstepStepper(arm)
    from rlinf_ros.robot_io import SpecIO

    io = SpecIO(env.spec.robot)
    io.begin_episode()
    for a in actions:
        _, reading = _observe(arm, io)
        target = io.decode(np.asarray(a)[None], [reading])[0]
        stepper.apply(target.joints[0], target.grippers[0])
        assert (stepper.success_step is None) == (stepper.steps < len(actions))
    assert stepper.success_step == len(actions) == stepper.steps
    arm.backend.new_episode(2)
    stepper.reset()
    assert stepper.steps == 0 and stepper.success_step is None


class _ScriptedRecorder:
    """A served policy answering request k with ``actions[k]`` and recording what it was shown."""

    name = "scripted"

    def __init__(self, spec_map: dict, actions: np.ndarray) -> None:
        import threading

        from rlinf_contracts.spec import RobotSpec

        self.robot_spec = RobotSpec.from_dict(spec_map)
        self.actions = actions
        self.seen: list[tuple[np.ndarray, np.ndarray, str]] = []
        self.lock = threading.Lock()

    def infer(self, obs: dict) -> dict:
        with self.lock:
            k = len(self.seen)
            self.seen.append(
                (
                    np.asarray(obs["state"][0]).copy(),
                    np.asarray(obs["images"]["front"][0]).copy(),
                    str(obs["instruction"][0]),
                )
            )
        row = self.actions[min(k, len(self.actions) - 1)]
        return {
            "actions": np.broadcast_to(row, (len(obs["state"]), 1, len(row)))
            .astype(np.float32)
            .copy()
        }


@pytest.mark.ros
@pytest.mark.timeout(300)
def test_ros_lockstep_twin_shows_the_policy_what_the_simulator_shows(tmp_path, ros_domain_id):
    """Robot node (lock-step language scene), policy client and task node as processes, a real
    policy server answering scripted actions: the observations the server receives over ROS 2
    equal the simulator's for the same episode and actions, request for request (one request per
    twin step: nothing repeated, nothing skipped), and the episode lasts the configured steps."""
    pytest.importorskip("rclpy", reason="needs the ros extra")
    import json

    from ros_procs import Procs

    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_contracts.env_registry import make_env

    actions = np.clip(np.random.default_rng(1).normal(0.0, 0.5, (STEPS, 4)), -1.0, 1.0).astype(
        np.float32
    )
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka_language.yaml").read_text())
    policy = _ScriptedRecorder(cfg["policy_client"]["robot_spec"], actions)
    server = ServerThread(PolicyServer(policy, ServerConfig(host="127.0.0.1", port=0))).start()
    cfg["robot"]["arms"][0]["scene_seed"] = SEED
    cfg["policy_client"]["server_url"] = f"ws://127.0.0.1:{server.port}"
    results = tmp_path / "episodes.json"
    cfg["task"].update(episodes=1, max_steps=STEPS, warmup_s=1.0, results_path=str(results))
    config = tmp_path / "graph.yaml"
    config.write_text(yaml.safe_dump(cfg))
    procs = Procs(tmp_path)
    try:
        for kind in ("robot", "policy_client", "task"):
            procs.start_node(kind, config)
        deadline = time.monotonic() + 200
        while not results.exists():
            assert time.monotonic() < deadline, f"no episode result in 200 s\n{procs.logs()}"
            assert all(procs.alive(k) for k in ("robot", "policy_client", "task")), procs.logs()
            time.sleep(0.2)
    finally:
        codes = procs.stop_all()
        server.stop()
    assert codes == dict.fromkeys(codes, 0), f"{codes}\n{procs.logs()}"  # each node stopped cleanly
    episode = json.loads(results.read_text())["results"][0]
    assert episode["steps"] >= STEPS
    with policy.lock:
        seen = list(policy.seen)
    assert len(seen) >= STEPS, f"{len(seen)} requests for {STEPS} twin steps"
    env = make_env(
        "franka_language/mix", num_envs=1, obs_mode="state+rgb", cameras=["front"], image_size=64
    )
    sim = env.reset(seed=SEED)
    for k in range(STEPS):
        state, frame, instruction = seen[k]
        np.testing.assert_allclose(state, sim["state"][0], atol=1e-4, err_msg=f"request {k}")
        assert float(np.abs(frame.astype(int) - sim["images"]["front"][0]).mean()) == 0.0, (
            f"frame of request {k}"
        )
        assert instruction == sim["instruction"][0]
        sim, _, term, trunc, _ = env.step(actions[k][None])
        assert not (term[0] or trunc[0])
