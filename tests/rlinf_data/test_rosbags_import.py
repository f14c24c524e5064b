"""A bag as ``ros2 bag record`` leaves it -> ``rlinf convert`` -> the store, value for value.

The bag is written with ``rosbags`` (a rosbag2 implementation independent of ours and of
rclpy): a rosbag2 folder (``metadata.yaml`` + ``.mcap`` storage), fully qualified topic names
(``/joint_states``), schemas and CDR from its ROS 2 humble / jazzy typestores. Expected values
come from the sample schedule: the nearest previous sample at each 10 Hz tick for
observations, the command in force over the step for actions, the end event's outcome.

Also here: a bag the recorder (or an export) writes carries each episode's ``control_hz`` in
its ``rlinf/episode`` metadata, and is resampled at that rate without ``--spec``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_lerobot import make_episode  # the same dir: pytest's rootdir import

from rlinf_cli.main import main
from rlinf_contracts.spec import RobotSpec
from rlinf_data.bags import open_bag, write_bag
from rlinf_data.store import EpisodeStore

pytest.importorskip("mcap_ros2")
pytest.importorskip("rosbags")
MS = 1_000_000
PERIOD = 100 * MS  # 10 Hz: the spec's rate
CAM_PERIOD = 33_333_333  # 30 Hz
JOINTS = ["panda_joint1", "panda_joint2", "panda_joint3"]
H, W = 6, 8
EPISODES = [(3_000 * MS, 5, True), (7_000 * MS, 3, False)]  # (begin in ns, steps, success)
COMMAND = "/joint_trajectory_controller/joint_trajectory"


def _state(i: int) -> list[float]:
    return [i + 0.25 * j for j in range(len(JOINTS))]  # exact in float32


def _frame(j: int) -> np.ndarray:
    """Camera frame ``j`` in RGB (the bag carries it as bgr8)."""
    return np.random.default_rng(j).integers(0, 256, (H, W, 3), dtype=np.uint8)


def _action(e: int, k: int) -> list[float]:
    return [10.0 * e + k, -0.5 * k, 0.125]


class _Rosbag:
    """rosbags' Writer with one typestore: connections by topic, messages from plain fields."""

    def __init__(self, path: Path, store: str) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        self.ts = get_typestore(getattr(Stores, f"ROS2_{store.upper()}"))
        version = 9 if store == "jazzy" else 8
        self.writer = Writer(path, version=version, storage_plugin=StoragePlugin.MCAP)
        self.conns: dict[str, Any] = {}

    def msg(self, type_name: str, **fields: Any) -> Any:
        return self.ts.types[type_name](**fields)

    def header(self, t: int) -> Any:
        sec, nanosec = divmod(t, 1_000_000_000)
        stamp = self.msg("builtin_interfaces/msg/Time", sec=sec, nanosec=nanosec)
        return self.msg("std_msgs/msg/Header", stamp=stamp, frame_id="base")

    def put(self, topic: str, log_time: int, msg: Any) -> None:
        if topic not in self.conns:
            self.conns[topic] = self.writer.add_connection(
                topic, msg.__msgtype__, typestore=self.ts
            )
        self.writer.write(self.conns[topic], log_time, self.ts.serialize_cdr(msg, msg.__msgtype__))


def _episode_messages(bag: _Rosbag, e: int) -> list[tuple[int, str, Any]]:
    """Joint states at 100 Hz (200 ms pre-roll), a bgr8 camera at 30 Hz, commands 3 ms after
    each tick, begin / end events (the end 60 ms after the last tick); (log time, topic, msg)."""
    t0, n, success = EPISODES[e]
    end = t0 + (n - 1) * PERIOD + 60 * MS
    floats = lambda xs: np.asarray(xs, np.float64)  # noqa: E731
    out: list[tuple[int, str, Any]] = []
    for i in range(-20, (end - t0) // (10 * MS) + 1):
        t = t0 + i * 10 * MS
        js = bag.msg(
            "sensor_msgs/msg/JointState",
            header=bag.header(t),
            name=JOINTS,
            position=floats(_state(1000 * e + i)),
            velocity=floats([]),
            effort=floats([]),
        )
        out.append((t + MS, "/joint_states", js))
    for j in range((end - t0) // CAM_PERIOD + 1):
        t = t0 + j * CAM_PERIOD
        data = np.ascontiguousarray(_frame(100 * e + j)[:, :, ::-1]).reshape(-1)
        img = bag.msg(
            "sensor_msgs/msg/Image",
            header=bag.header(t),
            height=H,
            width=W,
            encoding="bgr8",
            is_bigendian=0,
            step=W * 3,
            data=data,
        )
        out.append((t + 2 * MS, "/camera/wrist/image_raw", img))
    for k in range(n):
        t = t0 + k * PERIOD + 3 * MS
        zero = bag.msg("builtin_interfaces/msg/Duration", sec=0, nanosec=0)
        point = bag.msg(
            "trajectory_msgs/msg/JointTrajectoryPoint",
            positions=floats(_action(e, k)),
            velocities=floats([]),
            accelerations=floats([]),
            effort=floats([]),
            time_from_start=zero,
        )
        cmd = bag.msg(
            "trajectory_msgs/msg/JointTrajectory",
            header=bag.header(t),
            joint_names=JOINTS,
            points=[point],
        )
        out.append((t, COMMAND, cmd))
    done = {"kind": "end", "status": "complete" if success else "truncated", "success": success}
    for t, event in ((t0, {"kind": "begin", "stamp": t0 / 1e9}), (end, done)):
        out.append((t, "/episode/event", bag.msg("std_msgs/msg/String", data=json.dumps(event))))
    return out


def record_rosbag(path: Path, store: str) -> None:
    bag = _Rosbag(path, store)
    msgs = [m for e in range(len(EPISODES)) for m in _episode_messages(bag, e)]
    with bag.writer:
        for t, topic, msg in sorted(msgs, key=lambda m: m[0]):
            bag.put(topic, t, msg)


def expected(e: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Steps and final observation of episode ``e`` as the resampling defines them."""
    t0, n, success = EPISODES[e]
    ticks = [k * PERIOD for k in range(n)]  # relative to t0
    steps = {
        "state": np.array([_state(1000 * e + t // (10 * MS)) for t in ticks], np.float32),
        "action": np.array([_action(e, k) for k in range(n)], np.float32),
        "images/wrist": np.stack([_frame(100 * e + t // CAM_PERIOD) for t in ticks]),
        "reward": np.zeros(n, np.float32),
        "terminated": np.array([success and k == n - 1 for k in range(n)]),
        "truncated": np.array([not success and k == n - 1 for k in range(n)]),
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": np.array([(t0 + t) / 1e9 for t in ticks], np.float64),
    }
    end = (n - 1) * PERIOD + 60 * MS
    final = {
        "state": np.array(_state(1000 * e + end // (10 * MS)), np.float32),
        "images/wrist": _frame(100 * e + end // CAM_PERIOD),
    }
    return steps, final


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), (k, a[k], b[k])


@pytest.mark.parametrize("store", ["humble", "jazzy"])
def test_rosbag2_folder_converts_to_the_resampled_episodes(tmp_path: Path, store, capsys) -> None:
    bag_dir, out = tmp_path / "rec", tmp_path / "store"
    record_rosbag(bag_dir, store)
    meta = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap"  # the layout `ros2 bag record -s mcap` leaves
    names = {t["topic_metadata"]["name"] for t in meta["topics_with_message_count"]}
    assert names == {"/joint_states", "/camera/wrist/image_raw", COMMAND, "/episode/event"}
    spec = RobotSpec.raw(len(JOINTS), 3, cameras={"wrist": (H, W)})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"robot_spec": spec.to_dict()}))
    assert main(["convert", str(bag_dir), str(out), "--spec", str(tmp_path / "spec.yaml")]) == 0
    assert "2 episodes, 8 steps" in capsys.readouterr().out
    got = list(EpisodeStore(out, mode="r"))
    assert len(got) == len(EPISODES)
    for e, ep in enumerate(got):
        steps, final = expected(e)
        assert_same(ep.steps, steps)
        assert ep.final is not None
        assert_same(ep.final, final)
        assert ep.info.success == EPISODES[e][2] and ep.info.control_hz == 10.0
        assert ep.info.status == ("complete" if EPISODES[e][2] else "truncated")
        assert ep.info.robot == spec.to_dict()


def test_a_map_names_a_topic_in_either_spelling(tmp_path: Path) -> None:
    """``/joint_states`` in a map reads a bag recorded with ``joint_states`` and vice versa."""
    record_rosbag(tmp_path / "rec", "humble")
    spec = RobotSpec.raw(len(JOINTS), 3, cameras={"wrist": (H, W)})
    from rlinf_data.bags.topics import topic_map_from_dict

    tmap = topic_map_from_dict({"state": ["joint_states"], "action": COMMAND[1:]})
    (ep, _) = list(open_bag(tmp_path / "rec", tmap, spec))
    assert np.array_equal(ep.steps["state"], expected(0)[0]["state"])


@pytest.mark.parametrize("hz", [20.0, 4.0])
def test_recorded_control_hz_sets_the_rate(tmp_path: Path, hz: float) -> None:
    """An episode stepped at ``hz`` reads back step for step without ``--spec`` (no 10 Hz
    default) and with a spec of another rate (the recorded rate is the episode's own)."""
    ep = make_episode(9, 3, True, "push")
    ep = replace(ep, info=replace(ep.info, control_hz=hz))
    ep.steps["timestamp"] = 100.0 + np.arange(9) / hz  # the recorder's timeline
    write_bag([ep], tmp_path / "rec.mcap")
    for spec in (None, RobotSpec.raw(3, 2, cameras={"third": (24, 32), "wrist": (16, 16)})):
        (back,) = list(open_bag(tmp_path / "rec.mcap", spec=spec))
        assert back.info.control_hz == hz
        assert_same(back.steps, ep.steps)


def test_a_map_rate_overrides_the_recorded_one(tmp_path: Path) -> None:
    ep = make_episode(8, 4, False, "push")
    ep = replace(ep, info=replace(ep.info, control_hz=20.0))
    write_bag([ep], tmp_path / "rec.mcap")
    from rlinf_data.bags.topics import topic_map_from_dict

    (back,) = list(open_bag(tmp_path / "rec.mcap", topic_map_from_dict({"control_hz": 10})))
    assert len(back) == 4 and back.info.control_hz == 20.0  # the info is the recorded one
    # every other observation of the 20 Hz recording, with the command in force over the
    # 100 ms step: the one sent 50 ms into it
    assert np.array_equal(back.steps["state"], ep.steps["state"][::2])
    assert np.array_equal(back.steps["action"], ep.steps["action"][1::2])
