"""The recorder writing rosbag2 MCAP (``recorder.format: mcap | both``).

Over real rclpy / DDS: a recorder node writing both formats hears a synthetic policy client's
step records and episode events; the MCAP folder converts (``rlinf convert``) back to the
episodes the store holds, value for value, every file opens with the ``mcap`` reader and every
message deserialises with rclpy. Without DDS: a file copied mid-episode (what a kill leaves)
reads up to its last chunk, and the config refuses a bad format naming the key."""

from __future__ import annotations

import importlib
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mcap_ros2", reason="needs the robot extra (mcap, mcap-ros2-support)")

from mcap_rig import SPEC, T0, H, W

from rlinf_contracts.config import ConfigError, from_dict
from rlinf_contracts.episode import Episode
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.transitions import EpisodeEvent, StepRecord


def _record(e: int, k: int) -> StepRecord:
    rng = np.random.default_rng(100 * e + k)
    return StepRecord(
        episode=e,
        state=rng.normal(size=8).astype(np.float32),
        action=rng.uniform(-1, 1, 8).astype(np.float32),
        images={"wrist": rng.integers(0, 256, (H, W, 3), dtype=np.uint8)},
        intervention=k % 3 == 1,
        policy_version=e + 2,
        timestamp=T0 + 10 * e + 0.1 * k,
    )


# episode -> (records, end event): a success, a failure, a re-record (discarded by both)
EPISODES = {
    0: (6, EpisodeEvent("end", status="complete", success=True, stamp=T0 + 0.5)),
    1: (5, EpisodeEvent("end", status="truncated", stamp=T0 + 10.4)),
    2: (4, EpisodeEvent("end", status="aborted", stamp=T0 + 20.3)),
}


def assert_same_episode(a: Episode, b: Episode) -> None:
    assert b.info.to_dict() == a.info.to_dict()
    assert sorted(a.steps) == sorted(b.steps)
    for k in a.steps:
        assert a.steps[k].dtype == b.steps[k].dtype, k
        assert np.array_equal(a.steps[k], b.steps[k]), (k, a.steps[k], b.steps[k])
    assert (a.final is None) == (b.final is None)
    if a.final is not None and b.final is not None:
        for k in a.final:
            assert np.array_equal(a.final[k], b.final[k]), k


def assert_ros_decodes(folder: Path) -> int:
    """Every message of every file deserialises with rclpy's typesupport; returns the count."""
    from mcap.reader import make_reader
    from rclpy.serialization import deserialize_message

    n = 0
    for path in sorted(folder.glob("*.mcap")):
        with open(path, "rb") as f:
            reader = make_reader(f)
            assert reader.get_header().profile == "ros2"
            for schema, channel, message in reader.iter_messages():
                assert schema is not None and schema.encoding == "ros2msg"
                assert channel.message_encoding == "cdr"
                pkg, _, name = schema.name.split("/")
                cls = getattr(importlib.import_module(f"{pkg}.msg"), name)
                deserialize_message(message.data, cls)
                n += 1
    return n


def test_recorder_format_is_validated() -> None:
    from rlinf_ros.online_config import RecorderNodeConfig

    assert from_dict(RecorderNodeConfig, {"format": "both"}).format == "both"
    with pytest.raises(ConfigError, match="'recorder.format'.*'bag'"):
        from_dict(RecorderNodeConfig, {"format": "bag"})
    with pytest.raises(ConfigError, match="'recorder.mcap_dir'"):
        from_dict(RecorderNodeConfig, {"format": "mcap", "mcap_dir": ""})


def test_a_file_cut_mid_episode_reads_up_to_its_last_chunk(tmp_path: Path) -> None:
    """What a killed recorder leaves: the bytes flushed so far, without an MCAP summary."""
    from rlinf_contracts.episode import StepLayout
    from rlinf_data.bags import open_bag
    from rlinf_ros.mcap_sink import McapSink
    from rlinf_ros.recording import EpisodeAssembler, EpisodeTemplate, ListSink, TeeSink

    spec = RobotSpec.from_dict(SPEC)
    template = EpisodeTemplate("pick", StepLayout.from_spec(spec), control_hz=10.0)
    sink = McapSink(str(tmp_path / "bags"), chunk_kib=1)  # a chunk or so per step
    calls = ListSink()
    asm = EpisodeAssembler(template, TeeSink([sink, calls]))
    for k in range(12):
        asm.on_record(_record(0, k))
    written = sum(c[0] == "step" for c in calls.calls)
    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copy(tmp_path / "bags" / "episode_000000.mcap", cut / "rec.mcap")
    sink.close()
    (ep,) = list(open_bag(cut / "rec.mcap", spec=spec))  # a cut file: cameras from the spec
    assert written - 3 <= len(ep) < written  # the steps before the last chunk
    want = np.stack([_record(0, k).state for k in range(len(ep))])
    assert np.array_equal(ep.steps["state"], want)
    assert np.array_equal(ep.steps["images/wrist"][-1], _record(0, len(ep) - 1).images["wrist"])


@pytest.mark.ros
def test_recorder_writes_mcap_that_converts_to_the_stored_episodes(
    tmp_path: Path, ros_domain_id: int
) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String, UInt8MultiArray

    from rlinf_cli.main import main
    from rlinf_contracts.transitions import event_to_json
    from rlinf_contracts.wire import packb
    from rlinf_data.store import EpisodeStore
    from rlinf_ros.config import RosGraphConfig
    from rlinf_ros.nodes.common import reliable_qos
    from rlinf_ros.nodes.recorder import RecorderNode

    graph = from_dict(
        RosGraphConfig,
        {
            "policy_client": {"enabled": False, "robot_spec": SPEC},
            "recorder": {
                "enabled": True,
                "format": "both",
                "store": str(tmp_path / "store"),
                "mcap_dir": str(tmp_path / "bags"),
                "episodes": {"judge_topic": ""},
            },
        },
    )
    rclpy.init()
    try:
        rec = RecorderNode(graph.recorder, graph)
        client = rclpy.create_node("synthetic_client")
        steps = client.create_publisher(UInt8MultiArray, "policy_client/step", reliable_qos(100))
        events = client.create_publisher(String, "episode/event", reliable_qos(10))
        ex = SingleThreadedExecutor()
        ex.add_node(rec)
        ex.add_node(client)

        def spin_until(cond, what: str, timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while not cond():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                ex.spin_once(timeout_sec=0.05)

        spin_until(
            lambda: steps.get_subscription_count() and events.get_subscription_count(),
            "the recorder's subscriptions",
        )
        for e, (n, end) in EPISODES.items():
            for k in range(n):
                msg = UInt8MultiArray()
                msg.data = packb(_record(e, k).to_wire())
                steps.publish(msg)
            events.publish(String(data=event_to_json(end)))
            # the end waits for its settle time (no later record comes), then the episode closes
            spin_until(lambda e=e: rec.assembler.ended == e, f"episode {e} to end")
        status = rec.status()
        rec.close()
        ex.shutdown()
        rec.destroy_node()
        client.destroy_node()
    finally:
        rclpy.try_shutdown()

    assert status["episodes"] == 3 and status["aborted"] == 1
    assert status["stored"] == 2 and status["bags"] == 2  # the re-record is discarded by both
    store = EpisodeStore(tmp_path / "store", mode="r")
    stored = list(store)
    assert [len(ep) for ep in stored] == [5, 4]  # all records but the newest: the final obs
    bags = tmp_path / "bags"
    assert sorted(p.name for p in bags.iterdir()) == [
        "episode_000000.mcap",
        "episode_000001.mcap",
        "metadata.yaml",
    ]
    meta = yaml.safe_load((bags / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap"
    assert meta["message_count"] == assert_ros_decodes(bags) > 0
    counts = {
        t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]
    }
    assert counts["joint_states"] == 5 + 1 + 4 + 1 and counts["episode/event"] == 4
    assert counts["camera/wrist/image_raw"] == counts["joint_states"]

    # the folder converts back to the stored episodes
    assert main(["convert", str(bags), str(tmp_path / "back")]) == 0
    back = list(EpisodeStore(tmp_path / "back", mode="r"))
    assert len(back) == len(stored)
    for a, b in zip(stored, back, strict=True):
        assert_same_episode(a, b)
