"""ROS 2 bags (MCAP) <-> episodes <-> LeRobot v3, through ``rlinf convert``.

The "recorded" bag is written the way rosbag2 writes one: every message serialised by rclpy's
own CDR typesupport (real ``sensor_msgs`` / ``trajectory_msgs`` / ``std_msgs`` classes), schema
text from the installed ``.msg`` files, each topic at its own rate with header stamps -- so the
reader is checked against ROS's encoder, not against our own writer. Expected values are
computed here from the sample schedule: nearest previous sample at each 10 Hz tick for
observations, the command in force over the step for actions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_lerobot import READER, ROOT, make_episode  # the same dir: pytest's rootdir import

from rlinf_cli.main import main
from rlinf_contracts.episode import Episode
from rlinf_contracts.spec import RobotSpec
from rlinf_data.bags import msgdefs
from rlinf_data.store import EpisodeStore

pytest.importorskip("mcap_ros2")
MS = 1_000_000
PERIOD = 100 * MS  # 10 Hz
CAM_PERIOD = 33_333_333  # 30 Hz
JOINTS = ["j0", "j1", "j2", "j3"]  # as published; the map takes j3, j1, j2 (+ j1's velocity)
TAKE = [3, 1, 2]
H, W = 8, 10
EPISODES = [  # (t0 in ns, steps, success)
    (5_000 * MS, 6, True),
    (9_000 * MS, 4, False),
]
TOPIC_MAP = {
    "state": [
        {"topic": "joint_states", "field": "position", "names": ["j3", "j1", "j2"]},
        {"topic": "joint_states", "field": "velocity", "names": ["j1"]},
    ],
    "action": {"topic": "arm/command", "names": ["a1", "a0"]},
    "cameras": {"wrist": "camera/wrist/image_raw"},
    "reward": "reward",
    "task": "pick",
}


def _installed_msg(type_name: str) -> str:
    pkg, _, name = msgdefs.short(type_name).partition("/")
    path = Path(sys.prefix) / "share" / pkg / "msg" / f"{name}.msg"
    return path.read_text()


def _fields(text: str) -> list[str]:
    lines = (line.split("#", 1)[0].split() for line in text.splitlines())
    return [" ".join(parts) for parts in lines if parts]


def test_written_definitions_match_the_installed_ros_messages() -> None:
    pytest.importorskip("sensor_msgs.msg")
    for type_name in msgdefs.writable():
        assert _fields(msgdefs.fields_of(type_name)) == _fields(_installed_msg(type_name)), (
            type_name
        )


def _ros_schema(type_name: str) -> str:
    """rosbag2's schema text: the type's .msg, then each nested type after a separator."""
    _, deps = msgdefs._DEFS[msgdefs.short(type_name)]
    parts = [_installed_msg(type_name)]
    parts += [f"{msgdefs.SEPARATOR}\nMSG: {d}\n{_installed_msg(d)}" for d in deps]
    return "\n".join(parts)


def _state(i: int) -> tuple[list[float], list[float]]:
    """Positions and velocities of the JointState sample ``i`` (exact in float32)."""
    return [i + 0.25 * j for j in range(4)], [-i - 0.5 * j for j in range(4)]


def _frame(j: int) -> np.ndarray:
    """Camera frame ``j`` in RGB (the bag carries it as bgr8)."""
    rng = np.random.default_rng(j)
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8)


def _action(e: int, k: int) -> list[float]:
    return [10.0 * e + k, -0.5 * k]  # for joints a0, a1 in the message


def record_bag(path: Path, events: bool = True, chunk_size: int = 1024 * 1024) -> None:
    """A bag as the robot graph records one: joint states at 100 Hz (with a pre-roll before
    each episode), a bgr8 camera at 30 Hz, commands and rewards 3 ms after each tick, begin /
    end events (the end 60 ms after the last tick)."""
    from mcap.writer import Writer
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64, String
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msgs: list[tuple[int, str, str, object]] = []

    def stamp(msg: Any, t: int) -> None:
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)

    for e, (t0, n, success) in enumerate(EPISODES):
        end = t0 + (n - 1) * PERIOD + 60 * MS
        for i in range(-20, int((end - t0) // (10 * MS)) + 1):  # 100 Hz, from 200 ms before
            js = JointState(name=JOINTS)
            js.position, js.velocity = _state(1000 * e + i)
            stamp(js, t0 + i * 10 * MS)
            msgs.append(
                (t0 + i * 10 * MS + 1 * MS, "joint_states", "sensor_msgs/msg/JointState", js)
            )
        for j in range(int((end - t0) // CAM_PERIOD) + 1):
            img = Image(height=H, width=W, encoding="bgr8", step=W * 3)
            img.data = np.ascontiguousarray(_frame(100 * e + j)[:, :, ::-1]).tobytes()
            stamp(img, t0 + j * CAM_PERIOD)
            msgs.append(
                (
                    t0 + j * CAM_PERIOD + 2 * MS,
                    "camera/wrist/image_raw",
                    "sensor_msgs/msg/Image",
                    img,
                )
            )
        for k in range(n):
            t = t0 + k * PERIOD + 3 * MS
            cmd = JointTrajectory(joint_names=["a0", "a1"])
            cmd.points = [JointTrajectoryPoint(positions=_action(e, k))]
            stamp(cmd, t)
            msgs.append((t, "arm/command", "trajectory_msgs/msg/JointTrajectory", cmd))
            msgs.append((t, "reward", "std_msgs/msg/Float64", Float64(data=0.5 * k + e)))
        if events:
            begin = json.dumps({"kind": "begin", "stamp": t0 / 1e9})
            done = {"kind": "end", "status": "complete" if success else "truncated"}
            msgs.append((t0, "episode/event", "std_msgs/msg/String", String(data=begin)))
            msgs.append(
                (
                    end,
                    "episode/event",
                    "std_msgs/msg/String",
                    String(data=json.dumps({**done, "success": success})),
                )
            )
    msgs.sort(key=lambda m: m[0])
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=chunk_size)
        w.start(profile="ros2", library="rosbag2-like test writer")
        schemas: dict[str, int] = {}
        channels: dict[str, int] = {}
        for t, topic, type_name, msg in msgs:
            if type_name not in schemas:
                schemas[type_name] = w.register_schema(
                    type_name, "ros2msg", _ros_schema(type_name).encode()
                )
            if topic not in channels:
                channels[topic] = w.register_channel(topic, "cdr", schemas[type_name])
            w.add_message(channels[topic], log_time=t, data=serialize_message(msg), publish_time=t)
        w.finish()


def expected(e: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Steps and final observation of episode ``e`` as the resampling defines them."""
    t0, n, success = EPISODES[e]
    ticks = [k * PERIOD for k in range(n)]  # relative to t0
    pos_vel = [_state(1000 * e + t // (10 * MS)) for t in ticks]
    frames = [_frame(100 * e + t // CAM_PERIOD) for t in ticks]
    steps = {
        "state": np.array([[p[i] for i in TAKE] + [v[1]] for p, v in pos_vel], np.float32),
        "action": np.array([_action(e, k)[::-1] for k in range(n)], np.float32),
        "images/wrist": np.stack(frames),
        "reward": np.array([0.5 * k + e for k in range(n)], np.float32),
        "terminated": np.array([success and k == n - 1 for k in range(n)]),
        "truncated": np.array([not success and k == n - 1 for k in range(n)]),
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": np.array([(t0 + t) / 1e9 for t in ticks], np.float64),
    }
    end = (n - 1) * PERIOD + 60 * MS
    p, v = _state(1000 * e + end // (10 * MS))
    final = {
        "state": np.array([p[i] for i in TAKE] + [v[1]], np.float32),
        "images/wrist": _frame(100 * e + end // CAM_PERIOD),
    }
    return steps, final


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), (k, a[k], b[k])


@pytest.fixture
def bag(tmp_path: Path) -> dict[str, Path]:
    pytest.importorskip("rclpy")
    record_bag(tmp_path / "rec.mcap")
    (tmp_path / "topics.yaml").write_text(yaml.safe_dump(TOPIC_MAP))
    spec = RobotSpec.raw(4, 2, cameras={"wrist": (H, W)})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"robot_spec": spec.to_dict()}))
    return {
        k: tmp_path / f
        for k, f in (
            ("bag", "rec.mcap"),
            ("topics", "topics.yaml"),
            ("spec", "spec.yaml"),
            ("dir", "."),
        )
    }


def convert(*args: object) -> int:
    return main(["convert", *map(str, args)])


def test_recorded_bag_converts_to_the_resampled_episodes(bag, capsys) -> None:
    store = bag["dir"] / "store"
    assert convert(bag["bag"], store, "--topics", bag["topics"], "--spec", bag["spec"]) == 0
    assert "2 episodes, 10 steps" in capsys.readouterr().out
    got = list(EpisodeStore(store, mode="r"))
    assert [len(ep) for ep in got] == [n for _, n, _ in EPISODES]
    for e, ep in enumerate(got):
        steps, final = expected(e)
        assert_same(ep.steps, steps)
        assert ep.final is not None
        assert_same(ep.final, final)
        assert ep.info.task == "pick" and ep.info.control_hz == 10.0
        assert ep.info.success == EPISODES[e][2]
        assert ep.info.status == ("complete" if EPISODES[e][2] else "truncated")
        assert ep.info.robot == RobotSpec.raw(4, 2, cameras={"wrist": (H, W)}).to_dict()


def test_gap_split_without_events(tmp_path: Path) -> None:
    pytest.importorskip("rclpy")
    from rlinf_data.bags import TopicMap, open_bag
    from rlinf_data.bags.topics import topic_map_from_dict

    record_bag(tmp_path / "rec.mcap", events=False)
    tmap = topic_map_from_dict({**TOPIC_MAP, "split": "gap", "gap_s": 0.5})
    eps = list(open_bag(tmp_path / "rec.mcap", tmap))
    # no end event: each episode runs to its last state sample (its final observation)
    assert [len(ep) for ep in eps] == [n for _, n, _ in EPISODES]
    assert all(ep.steps["truncated"][-1] and not ep.steps["terminated"].any() for ep in eps)
    assert isinstance(tmap, TopicMap) and eps[0].info.status == "truncated"
    steps, _ = expected(0)
    assert np.array_equal(eps[0].steps["state"], steps["state"])


def test_a_recording_cut_off_converts_up_to_the_cut(tmp_path: Path, caplog) -> None:
    """A recorder killed mid-write leaves no summary; the chunks before the cut still read."""
    pytest.importorskip("rclpy")
    from rlinf_data.bags import open_bag
    from rlinf_data.bags.topics import topic_map_from_dict

    record_bag(tmp_path / "full.mcap", chunk_size=4096)
    data = (tmp_path / "full.mcap").read_bytes()
    (tmp_path / "cut.mcap").write_bytes(data[: int(len(data) * 0.75)])
    eps = list(open_bag(tmp_path / "cut.mcap", topic_map_from_dict(TOPIC_MAP)))
    assert "cut.mcap is cut off" in caplog.text
    assert 1 <= len(eps) <= 2  # the second episode lost its end (and maybe more)
    steps, final = expected(0)
    assert_same(eps[0].steps, steps)
    assert eps[0].final is not None
    assert_same(eps[0].final, final)


ROUND_TRIP_MAP = {
    "state": [
        {"topic": "joint_states", "size": 2},
        {"topic": "gripper/state", "type": "std_msgs/msg/Float64MultiArray"},
    ],
    "action": {"topic": "policy/action", "type": "std_msgs/msg/Float32MultiArray"},
    "cameras": {"third": "cams/third"},  # wrist: its default topic camera/wrist/image_raw
    "reward": "reward",
}


@pytest.mark.parametrize("tmap", [None, ROUND_TRIP_MAP], ids=["graph_topics", "own_map"])
def test_store_to_mcap_to_store_is_exact(tmp_path: Path, tmap: dict | None) -> None:
    originals = [make_episode(7, 1, True, "push the cube"), make_episode(5, 2, False, "push")]
    originals[1].final = None
    src = EpisodeStore(tmp_path / "src")
    for ep in originals:
        src.write(ep)
    args: tuple = ()
    if tmap is not None:
        (tmp_path / "map.yaml").write_text(yaml.safe_dump(tmap))
        args = ("--topics", tmp_path / "map.yaml")
    mcap = tmp_path / "out.mcap"
    assert convert(tmp_path / "src", mcap, *args) == 0
    assert convert(mcap, tmp_path / "back", *args) == 0
    back = list(EpisodeStore(tmp_path / "back", mode="r"))
    assert len(back) == 2
    for a, b in zip(originals, back, strict=True):
        assert b.info.to_dict() == a.info.to_dict()
        assert_same(a.steps, b.steps)
        assert (a.final is None) == (b.final is None)
        if a.final is not None and b.final is not None:
            assert_same(a.final, b.final)
    if tmap is None:
        assert_ros_decodes(mcap, originals[0])


def assert_ros_decodes(path: Path, first: Episode) -> None:
    """Every message of an export deserialises with rclpy's own typesupport (as ``ros2 bag
    play`` would), and the first joint state / image / command carry the first step."""
    pytest.importorskip("rclpy")
    import importlib

    from mcap.reader import make_reader
    from rclpy.serialization import deserialize_message

    firsts: dict[str, Any] = {}
    with open(path, "rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"
        for schema, channel, message in reader.iter_messages():
            assert schema is not None and schema.encoding == "ros2msg"
            assert channel.message_encoding == "cdr"
            pkg, _, name = schema.name.split("/")
            cls = getattr(importlib.import_module(f"{pkg}.msg"), name)
            firsts.setdefault(channel.topic, deserialize_message(message.data, cls))
    js, img, cmd = (
        firsts["joint_states"],
        firsts["camera/wrist/image_raw"],
        firsts["joint_trajectory_controller/joint_trajectory"],
    )
    assert np.array_equal(np.asarray(js.position, np.float32), first.steps["state"][0])
    frame = np.frombuffer(bytes(img.data), np.uint8).reshape(16, 16, 3)
    assert img.encoding == "rgb8" and np.array_equal(frame, first.steps["images/wrist"][0])
    positions = np.asarray(cmd.points[0].positions, np.float32)
    assert np.array_equal(positions, first.steps["action"][0])


@pytest.mark.slow  # LeRobot's reader in a subprocess: ~15 s of torch / lerobot imports
def test_bag_to_lerobot_is_read_by_lerobot(bag) -> None:
    root, store = bag["dir"] / "lerobot", bag["dir"] / "store"
    args = ("--topics", bag["topics"], "--spec", bag["spec"])
    assert convert(bag["bag"], root, "--to", "lerobot", *args) == 0
    assert convert(bag["bag"], store, *args) == 0
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["total_frames"] == 10
    if not READER.is_dir():
        pytest.skip(f"LeRobot's reader is not installed in {READER} (scripts/bootstrap.sh)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(READER), str(ROOT)])}
    run = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("lerobot_reader_check.py")),
            str(root),
            str(store),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "frames match" in run.stdout


def test_missing_topic_names_the_bag_topics(bag, capsys) -> None:
    bad = {**TOPIC_MAP, "cameras": {"wrist": "camera/wrist/image_rect"}}
    (bag["dir"] / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert convert(bag["bag"], bag["dir"] / "s", "--topics", bag["dir"] / "bad.yaml") == 2
    err = capsys.readouterr().err
    assert "no topic 'camera/wrist/image_rect' (topic map cameras.wrist)" in err
    for topic, type_name in (
        ("camera/wrist/image_raw", "sensor_msgs/msg/Image"),
        ("joint_states", "sensor_msgs/msg/JointState"),
        ("arm/command", "trajectory_msgs/msg/JointTrajectory"),
    ):
        assert f"{topic} ({type_name})" in err
    assert "Traceback" not in err and not (bag["dir"] / "s").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"action": {"topic": "camera/wrist/image_raw"}},
            "is sensor_msgs/msg/Image, which is not read as vector message type",
        ),
        ({"state": [{"topic": "joint_states", "names": ["j9"]}]}, "has no joint(s) ['j9']"),
        ({"split": "sometimes"}, "split='sometimes'"),
    ],
)
def test_bad_maps_are_one_line(bag, capsys, change: dict, message: str) -> None:
    (bag["dir"] / "bad.yaml").write_text(yaml.safe_dump({**TOPIC_MAP, **change}))
    assert convert(bag["bag"], bag["dir"] / "s", "--topics", bag["dir"] / "bad.yaml") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_spec_mismatch_is_named(bag, capsys) -> None:
    spec = RobotSpec.raw(7, 2, cameras={"wrist": (H, W)})
    (bag["dir"] / "spec7.yaml").write_text(yaml.safe_dump(spec.to_dict()))
    args = ("--topics", bag["topics"], "--spec", bag["dir"] / "spec7.yaml")
    assert convert(bag["bag"], bag["dir"] / "s", *args) == 2
    err = capsys.readouterr().err
    assert "has state[4] action[2]" in err and "the robot spec has state[7]" in err


def test_unknown_source_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "x.txt").write_text("")
    assert convert(tmp_path / "x.txt", tmp_path / "y") == 2
    assert "is no episode container" in capsys.readouterr().err
