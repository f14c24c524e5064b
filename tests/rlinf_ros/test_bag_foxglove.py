"""The recorder's rosbag2 MCAP as Foxglove reads it: Foxglove's own npm libraries, not ours.

Why a Node reader: the bags are promised readable by Foxglove, which opens MCAP with
``@mcap/core`` and decodes ROS 2 messages with ``@foxglove/rosmsg`` (the ``ros2msg`` schema
text) and ``@foxglove/rosmsg2-serialization`` (CDR). ``tests/foxglove/read_bag.mjs`` does the
same and prints per topic the schema name, the count and the first message decoded; the test
holds that against what was recorded. A bag written by the recorder's own path (the assembler
and :class:`rlinf_ros.mcap_sink.McapSink`, no DDS needed) must come out value for value; a cut
file and a schema text that does not match the payloads must be refused.

The Node packages come from ``tests/foxglove/package-lock.json``; ``make test`` (the dev
extra's ``scripts/bootstrap.sh``) installs node, npm and them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mcap_ros2", reason="needs the robot extra (mcap, mcap-ros2-support)")

from mcap_rig import SPEC, T0, H, W

from rlinf_contracts.episode import StepLayout
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.transitions import EpisodeEvent, StepRecord

FOXGLOVE = Path(__file__).resolve().parents[1] / "foxglove"
READER = FOXGLOVE / "read_bag.mjs"
STEPS = 6  # records of the episode; the newest becomes its final observation
# every topic the recorder writes for this spec, with the type rosbag2 would name
TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "camera/wrist/image_raw": "sensor_msgs/msg/Image",
    "joint_trajectory_controller/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
    "episode/event": "std_msgs/msg/String",
    "rlinf/step_info": "std_msgs/msg/String",
}


def _record(k: int) -> StepRecord:
    rng = np.random.default_rng(k)
    return StepRecord(
        episode=0,
        state=rng.normal(size=8).astype(np.float32),
        action=rng.uniform(-1, 1, 8).astype(np.float32),
        images={"wrist": rng.integers(0, 256, (H, W, 3), dtype=np.uint8)},
        policy_version=3,
        timestamp=T0 + 0.1 * k,
    )


def _write_bag(folder: Path) -> Path:
    """One successful episode through the recorder's assembler and MCAP sink; the file's path."""
    from rlinf_ros.mcap_sink import McapSink
    from rlinf_ros.recording import EpisodeAssembler, EpisodeTemplate

    spec = RobotSpec.from_dict(SPEC)
    template = EpisodeTemplate("pick", StepLayout.from_spec(spec), control_hz=10.0)
    sink = McapSink(str(folder))
    asm = EpisodeAssembler(template, sink)
    for k in range(STEPS):
        asm.on_record(_record(k), now=0.0)
    asm.on_event(EpisodeEvent("end", success=True, stamp=T0 + 0.1 * (STEPS - 1)), now=0.0)
    asm.poll(now=10.0)  # no later record comes: the end settles
    sink.close()
    (path,) = sink.files()
    return path


def _node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.fail(
            "node / npm not installed: `make test` installs them (scripts/bootstrap.sh with the "
            "dev extra), or `sudo apt-get install nodejs npm`"
        )
    if not (FOXGLOVE / "node_modules" / "@mcap" / "core").is_dir():
        pytest.fail(
            "Foxglove's npm packages are not installed: `make test` installs them, or "
            "`npm ci --prefix tests/foxglove`"
        )
    return node


def _read(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_node(), str(READER), str(path)], capture_output=True, text=True, timeout=120
    )


def _report(path: Path) -> dict[str, Any]:
    run = _read(path)
    assert run.returncode == 0, f"Foxglove's reader refused {path.name}:\n{run.stderr}"
    return json.loads(run.stdout)


def _python_counts(path: Path) -> dict[str, int]:
    from mcap.reader import make_reader

    counts: dict[str, int] = {}
    with open(path, "rb") as f:
        for _, channel, _ in make_reader(f).iter_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
    return counts


def test_foxglove_reads_the_recorded_bag_value_for_value(tmp_path: Path) -> None:
    path = _write_bag(tmp_path / "bags")
    report = _report(path)
    topics = report["topics"]

    assert report["profile"] == "ros2" and report["errors"] == []
    assert {t: v["schema"] for t, v in topics.items()} == TYPES
    assert all(v["schema_encoding"] == "ros2msg" for v in topics.values())
    assert all(v["message_encoding"] == "cdr" for v in topics.values())
    counts = {t: v["message_count"] for t, v in topics.items()}
    assert counts == _python_counts(path)
    assert counts["joint_states"] == STEPS  # the steps and the final observation
    assert report["message_count"] == sum(counts.values())
    assert "rlinf/episode" in report["metadata"]

    t0 = {"sec": int(T0), "nanosec": 0}
    first = _record(0)
    image = topics["camera/wrist/image_raw"]["first"]
    assert image["header"]["stamp"] == t0
    assert (image["height"], image["width"], image["encoding"], image["step"]) == (
        H,
        W,
        "rgb8",
        3 * W,
    )
    pixels = first.images["wrist"]
    assert image["data"]["length"] == pixels.size
    assert image["data"]["head"][:3] == pixels[0, 0].tolist()
    assert image["data"]["sha256"] == hashlib.sha256(pixels.tobytes()).hexdigest()

    joints = topics["joint_states"]["first"]
    assert joints["header"]["stamp"] == t0
    assert joints["name"] == [f"joint_{i}" for i in range(8)]
    np.testing.assert_allclose(joints["position"], first.state, rtol=0, atol=1e-6)

    command = topics["joint_trajectory_controller/joint_trajectory"]["first"]
    assert command["joint_names"] == joints["name"]
    np.testing.assert_allclose(command["points"][0]["positions"], first.action, atol=1e-6)

    begin = json.loads(topics["episode/event"]["first"]["data"])
    assert (begin["kind"], begin["stamp"]) == ("begin", T0)
    info = json.loads(topics["rlinf/step_info"]["first"]["data"])
    assert (info["policy_version"], info["timestamp"]) == (3, T0)


def test_foxglove_refuses_a_cut_file(tmp_path: Path) -> None:
    """What a kill leaves (no summary, no footer) is not a file Foxglove indexes."""
    path = _write_bag(tmp_path / "bags")
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    run = _read(cut)
    assert run.returncode == 2, run.stdout
    assert "not a readable indexed MCAP file" in run.stderr


@pytest.mark.parametrize(
    ("type_name", "schema", "refusal"),
    [
        # a field dropped from the text: the payloads carry bytes the schema does not explain
        (
            "sensor_msgs/msg/JointState",
            lambda text: text.replace("float64[] effort\n", "", 1),
            "bytes left after decoding as sensor_msgs/msg/JointState",
        ),
        # a type named the ROS 1 way: Foxglove's ROS 2 panels would not pick the topic
        ("sensor_msgs/msg/Image", None, 'schema name "sensor_msgs/Image" is not a ROS 2 type'),
    ],
)
def test_foxglove_refuses_a_schema_that_is_not_the_payloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, type_name: str, schema: Any, refusal: str
) -> None:
    from mcap.writer import Writer

    from rlinf_data.bags import msgdefs

    register = Writer.register_schema

    def corrupt(self: Writer, name: str, encoding: str, data: bytes) -> int:
        if name == type_name:
            if schema is not None:
                data = schema(data.decode()).encode()
            else:
                name = name.replace("/msg/", "/")
        return register(self, name, encoding, data)

    assert "float64[] effort\n" in msgdefs.msgdef("sensor_msgs/msg/JointState")
    monkeypatch.setattr(Writer, "register_schema", corrupt)
    run = _read(_write_bag(tmp_path / "bags"))
    assert run.returncode == 1, run.stdout
    assert refusal in run.stderr
    assert json.loads(run.stdout)["errors"]
