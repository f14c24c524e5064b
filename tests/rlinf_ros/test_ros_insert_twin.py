"""The insert twin shows the policy what the simulator showed it (no ROS processes here).

The robot node's arm adopts a ``mujoco_franka/insert`` env (``arms[*].scene: mujoco_franka/insert``,
``control: ee_impedance``). The policy client builds the state from what the graph publishes:
joint states and the end-effector pose (robot node) and the hole's top centre (the scene report's
target, relayed on ``task/goal`` in the base frame). On the same MuJoCo state that vector must
equal the simulator's own observation; under the same impedance targets the twin's arm must move
as the simulator's torque loop moves it; the scripted human the demos come from must insert the
peg; and the learner's reward recomputed from the streamed state must be the simulator's.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from twin_reading import arm_reading

pytest.importorskip("mujoco", reason="needs the sim extra")

from rlinf_contracts.features import build_state, needs
from rlinf_contracts.rotations import quat_xyzw_to_matrix
from robot_drivers.factory import make_arm

pytestmark = [pytest.mark.sim]

SCENE = "mujoco_franka/insert"


def _sim_env():
    from rlinf_contracts.env_registry import make_env

    return make_env(SCENE, num_envs=1, obs_mode="state", control="ee_impedance")


def _twin_arm(seed: int = 0):
    """The arm of configs/ros_sim_franka_insert.yaml (its home, safety box and gains)."""
    from ros_procs import ROOT

    from rlinf_ros.config import load_graph_config

    cfg = load_graph_config(ROOT / "configs/ros_sim_franka_insert.yaml").robot.arms[0]
    cfg.scene_seed = seed
    arm = make_arm(cfg)
    arm.connect()
    return arm


def test_topic_state_equals_the_simulators_insert_observation():
    arm = _twin_arm()
    backend, twin = arm.backend, arm.backend.scene
    spec = _sim_env().spec.robot  # the ee_impedance spec the policy was trained with
    assert needs(spec, "goal_pos") and needs(spec, "ee_pose") and not needs(spec, "object_pos")
    base = np.asarray(spec.base_position)
    holes = []
    for episode in range(3):
        backend.new_episode()
        backend.step(20)  # the arm settles a little: joint velocities are not zero
        reading = arm_reading(
            arm,
            goal_pos=twin.target_position() - base,  # what the task node relays on task/goal
        )
        np.testing.assert_allclose(
            build_state(spec, reading), twin.state(), atol=2e-5, err_msg=f"episode {episode}"
        )
        assert not twin.success()  # the peg starts above the fixture
        assert twin.object_positions().shape == (0, 3)  # no loose object: sim/objects is empty
        holes.append(twin.target_position())
    assert twin.episodes == 3
    assert len({tuple(np.round(h, 4)) for h in holes}) == 3  # the hole moves per episode


def test_twin_episodes_replay_the_sim_evals_seeds():
    arm = _twin_arm(seed=700)
    twin = arm.backend.scene
    for k in (1, 3):
        arm.backend.new_episode(k)
        env = _sim_env()
        obs = env.reset(seed=700 + k - 1)
        np.testing.assert_allclose(twin.state(), obs["state"][0], atol=1e-6)  # arm, hole
        env.close()


def test_twin_impedance_arm_moves_as_the_simulators_torque_loop():
    """The same ee_impedance actions from the same reset: the twin's arm (position-servo scene,
    servos turned torque motors, the law on every physics step, the simulator's bias
    compensation) follows the simulator's joint trajectory, rim contact included."""
    import mujoco

    from rlinf_contracts.control import ImpedanceTargetDecoder

    arm = _twin_arm(seed=5)
    backend, twin = arm.backend, arm.backend.scene
    env = _sim_env()
    spec = env.spec.robot
    backend.new_episode(1)
    obs = env.reset(seed=5)
    fm, d = env.fms[0], env.datas[0]
    np.testing.assert_allclose(twin.state(), obs["state"][0], atol=1e-9)
    s = arm.state()
    decoder = ImpedanceTargetDecoder(spec.action)
    decoder.reset(quat_xyzw_to_matrix(s.ee_pose.quat_xyzw))
    # over the hole's rim, then down onto it: free motion and contact
    actions = [np.array([0.3, -0.2, -0.1, 0.0])] * 6 + [np.array([0.0, 0.0, -1.0, 0.0])] * 8
    for a in actions:
        # the pose the simulator's step reads: the kinematics of the joints now (a physics step
        # leaves them one step behind; the law's own step recomputes them first)
        mujoco.mj_kinematics(backend.fm.model, backend.data)
        s = arm.state()
        pose, width = decoder.decode(
            a, s.ee_pose.position, quat_xyzw_to_matrix(s.ee_pose.quat_xyzw)
        )
        arm.track_pose(pose)
        backend.gripper_move(width, 0.1)
        backend.step(env.substeps)
        env.step(a[None].astype(np.float32))
    np.testing.assert_allclose(
        backend.data.qpos[backend.fm.arm_qpos], d.qpos[fm.arm_qpos], atol=1e-4
    )
    assert env.peak_contact_force[0] > 5.0  # N: the peg pressed on the fixture
    assert backend.control_mode == "torque"


def test_scripted_inserter_is_the_insert_oracle_and_inserts():
    """The scripted teleop device (base-frame poses, as the teleop node hears them) commands the
    simulator's insertion oracle (at the oracle's impedance gain), and driving the simulator with
    it at its own gain, steering from the pose one control step old as over ROS, succeeds."""
    from rlinf_ros.teleop import to_action
    from rlinf_ros.teleop.scripted import ScriptedInsert
    from sim_bridges.mujoco_franka.tasks.insert import ALIGN_TOL, LATERAL_GAIN

    env = _sim_env()
    spec = env.spec.robot
    base = np.asarray(spec.base_position)
    scale = spec.action.pos_scale
    fm, d, task = env.fms[0], env.datas[0], env.task
    successes = 0
    for seed in range(4):
        env.reset(seed=seed)
        ee = d.site_xpos[fm.ee_site].copy()
        hole = task.features(fm, d, ee)[:3] - base
        oracle = task.oracle(fm, d, ee)  # the hand points straight down: the inferred tip is exact
        twin = ScriptedInsert(
            pos_scale=scale,
            always=True,
            lateral_gain=LATERAL_GAIN["torque"],
            vertical_gain=1.0,
            align_tol=ALIGN_TOL,
        )
        twin.on_pose(ee - base)
        twin.on_orientation(d.site_xmat[fm.ee_site].reshape(3, 3))
        twin.on_goal(hole)
        inp = twin.read()
        assert inp.twist is not None and inp.intervention and inp.gripper == oracle[3]
        np.testing.assert_allclose(inp.twist[:3], np.clip(oracle[:3] / scale, -1, 1), atol=1e-4)
        dev = ScriptedInsert(pos_scale=scale, always=True)
        dev.on_goal(hole)
        rot = d.site_xmat[fm.ee_site].reshape(3, 3).copy()
        for _ in range(task.default_max_steps):
            dev.on_pose(ee - base)  # the pose before this step's: one control step late
            dev.on_orientation(rot)
            ee, rot = d.site_xpos[fm.ee_site].copy(), d.site_xmat[fm.ee_site].reshape(3, 3).copy()
            inp = dev.read()
            _, _, _, _, info = env.step(to_action(inp, spec, None, -1.0)[None].astype(np.float32))
            if info["success"][0]:
                successes += 1
                break
    env.close()
    assert successes >= 3, successes
    with pytest.raises(ValueError, match="teleop.script.task"):
        from rlinf_ros.teleop import make_device

        make_device("scripted", SimpleNamespace(script={"task": "screw"}, always_intervene=True))


def test_scripted_device_picks_the_inserter_by_script_task():
    from rlinf_ros.teleop import make_device
    from rlinf_ros.teleop.scripted import ScriptedInsert

    cfg = SimpleNamespace(script={"task": "insert"}, always_intervene=True)
    assert isinstance(make_device("scripted", cfg), ScriptedInsert)


def test_insert_graph_refuses_a_position_arm_and_other_gains():
    from ros_procs import ROOT

    from rlinf_contracts.config import ConfigError
    from rlinf_ros.config import load_graph_config

    path = ROOT / "configs/ros_sim_franka_insert.yaml"
    load_graph_config(path).validate()
    with pytest.raises(ConfigError, match=r"robot.arms\[panda\].control"):
        load_graph_config(path, ["robot.arms[0].control=position"]).validate()
    with pytest.raises(ConfigError, match=r"robot.arms\[panda\].impedance.*stiffness_pos"):
        load_graph_config(path, ["robot.arms[0].impedance.stiffness_pos=300"]).validate()


def test_insert_depth_reward_is_the_simulators_insert_reward():
    """The learner's ``insert_depth`` reward on a streamed episode (states, success flags as
    rewards) equals the simulator's dense reward step by step."""
    pytest.importorskip("torch", reason="needs the learner extra")
    from learner.offpolicy.remote import REWARDS
    from rlinf_contracts.config import ConfigError
    from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
    from rlinf_contracts.spec import RobotSpec

    env = _sim_env()
    spec = env.spec.robot
    fm, d, task = env.fms[0], env.datas[0], env.task
    obs = env.reset(seed=2)
    rng = np.random.default_rng(0)
    states, actions, flags, sim_rewards = [], [], [], []
    info: dict = {}
    terminated = np.zeros(1, bool)
    for _ in range(task.default_max_steps):
        a = task.oracle(fm, d, d.site_xpos[fm.ee_site].copy())
        a = np.clip(np.r_[a[:3] / spec.action.pos_scale + rng.normal(0, 0.1, 3), a[3]], -1, 1)
        states.append(obs["state"][0].copy())
        actions.append(a.astype(np.float32))
        obs, reward, terminated, _, info = env.step(a[None].astype(np.float32))
        flags.append(float(info["success"][0]))
        sim_rewards.append(float(reward[0]))
        if terminated[0]:
            break
    assert terminated[0], "the oracle inserts the peg"
    final = info["final_observation"]["state"][0]
    n = len(states)
    ep = Episode(
        EpisodeInfo(task=SCENE, layout=StepLayout(30, 4), source="demo", status="complete"),
        {
            "state": np.stack(states).astype(np.float32),
            "action": np.stack(actions),
            "reward": np.asarray(flags, np.float32),
            "terminated": np.eye(n, dtype=bool)[-1],
            "truncated": np.zeros(n, bool),
            "intervention": np.zeros(n, bool),
            "policy_version": np.zeros(n, np.int64),
            "timestamp": np.zeros(n),
        },
        {"state": np.asarray(final, np.float32)},
    )
    r = REWARDS.get("insert_depth")(spec)(ep)
    np.testing.assert_allclose(r, sim_rewards, atol=1e-4)
    assert r.min() < -0.02 and r[-1] > 0.9  # dense on the way, the success bonus at the end
    with pytest.raises(ConfigError, match="ee_rot6d"):
        REWARDS.get("insert_depth")(
            RobotSpec.from_dict(
                {"state": [["ee_pos", 3]], "action": {"control": "ee_delta", "dim": 7}}
            )
        )
