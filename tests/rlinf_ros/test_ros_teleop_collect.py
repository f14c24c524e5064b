"""Over real DDS: robot node (kinematic arm) + policy client in teleop-only mode + scripted
teleop + task node (judge) + recorder: demonstrations land in the episode store with rewards,
done flags and intervention labels; the streamer node streams the same steps to an ingest. The
keyboard's re-record key throws the running episode away and the task node redoes it, also when
its own judge ends episodes.

The graph runs on the robot node's simulated clock (``use_sim_time``, ``robot.sim_clock``): the
episodes' steps, stamps and the recorder's settle wait are the same however loaded the machine.
The task's seed draws goals at least 0.22 m from the hand, several teleop steps each."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT, Procs

pytestmark = [pytest.mark.ros]


def _graph(tmp_path: Path, episodes: int, ingest_url: str | None) -> Path:
    """The teleop-only twin; ``ingest_url`` None: no streamer."""
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka.yaml").read_text())
    cfg["use_sim_time"] = True  # every node on the robot node's /clock
    cfg["robot"]["sim_clock"] = True
    cfg["robot"]["real_time_factor"] = 0.5  # headroom for the other nodes on a loaded machine
    cfg["robot"]["arms"][0]["backend"] = "kinematic"
    cfg["policy_client"]["server_url"] = ""  # teleop only: no policy server
    cfg["task"].update(episodes=episodes, results_path=str(tmp_path / "episodes.json"), seed=7)
    cfg["teleop"] = {"enabled": True, "device": "scripted", "always_intervene": True}
    cfg["recorder"] = {
        "enabled": True,
        "store": str(tmp_path / "demos"),
        "status_path": str(tmp_path / "rec.json"),
    }
    cfg["streamer"] = {
        "enabled": ingest_url is not None,
        "stream": {
            "url": ingest_url or "",
            "token": "tok",
            "robot_id": "twin0",
            "spool_dir": str(tmp_path / "spool"),
        },
        "episodes": {"source": "demo"},
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_scripted_teleop_demos_are_recorded_and_streamed(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from rlinf_data.ingest import IngestConfig, IngestServer
    from rlinf_data.store import EpisodeStore

    episodes = 3
    srv = IngestServer(IngestConfig(store=str(tmp_path / "learner"), port=0, token="tok")).start()
    path = _graph(tmp_path, episodes, srv.url)
    procs = Procs(tmp_path)
    try:
        for kind in ("robot", "policy_client", "teleop", "recorder", "streamer", "task"):
            procs.start_node(kind, path)
        deadline = time.time() + 180
        while time.time() < deadline and not (tmp_path / "episodes.json").exists():
            assert all(p.poll() is None for p in procs.procs.values()), procs.logs()
            time.sleep(0.5)
        assert (tmp_path / "episodes.json").exists(), procs.logs()

        def collected() -> bool:
            """The last end event reached the recorder (store and status) and the learner."""
            try:
                return (
                    all(
                        sum(bool(ep.info.success) for ep in EpisodeStore(tmp_path / d, mode="r"))
                        >= episodes
                        for d in ("demos", "learner")
                    )
                    and json.loads((tmp_path / "rec.json").read_text())["successes"] >= episodes
                )
            except Exception:
                return False

        deadline = time.time() + 120
        while time.time() < deadline and not collected():
            time.sleep(0.5)
    finally:
        codes = procs.stop_all()
        srv.stop()
    assert codes == dict.fromkeys(codes, 0), f"{codes}\n{procs.logs()}"
    results = json.loads((tmp_path / "episodes.json").read_text())
    # the scripted human reaches every goal
    assert results["successes"] == episodes, f"{results}\n{procs.logs()}"
    status = json.loads((tmp_path / "rec.json").read_text())
    assert status["episodes"] >= episodes and status["intervention_ratio"] == 1.0, status
    local = [ep for ep in EpisodeStore(tmp_path / "demos", mode="r") if ep.info.status != "open"]
    learner = list(EpisodeStore(tmp_path / "learner", mode="r"))
    for store in (local, learner):
        done = [ep for ep in store if ep.info.success]
        assert len(done) == episodes, [(e.info.status, len(e)) for e in store]
        for ep in done:
            assert ep.info.source == "demo" and ep.steps["intervention"].all()
            assert (
                ep.steps["reward"][-1] == 1.0
                and ep.steps["terminated"][-1]
                and ep.steps["reward"][:-1].sum() == 0
            )
            assert ep.final is not None and ep.steps["state"].shape[1] == 30
        assert all(len(ep) >= 2 for ep in done), [
            len(ep) for ep in done
        ]  # goals >= 0.22 m away: several steps
    for a, b in zip([e for e in local if e.info.success], [e for e in learner if e.info.success]):
        assert np.array_equal(a.steps["state"], b.steps["state"]), (
            len(a),
            len(b),
        )  # exactly the robot's steps
        assert np.array_equal(a.steps["action"], b.steps["action"])
        assert a.final is not None and b.final is not None
        assert np.array_equal(a.final["state"], b.final["state"])


def test_rerecord_key_redoes_the_episode_the_task_judges(
    tmp_path: Path, ros_domain_id: int
) -> None:
    """``task.judge_ends_episodes: true`` and a keyboard teleop that holds the arm still (every
    episode times out): ``x`` typed during the first episode closes it as aborted -- neither a
    success nor a failure, written nowhere -- and the task node resets the scene and runs it
    again, so ``episodes`` judged episodes still follow."""
    from rlinf_data.store import EpisodeStore

    episodes = 2
    path = _graph(tmp_path, episodes, None)
    cfg = yaml.safe_load(path.read_text())
    cfg["teleop"] = {"enabled": True, "device": "keyboard", "always_intervene": True}
    cfg["task"].update(judge_ends_episodes=True, max_steps=40)  # 4 s of simulated time each
    path.write_text(yaml.safe_dump(cfg))
    rec_status = tmp_path / "rec.json"

    def recorder() -> dict:
        try:
            return json.loads(rec_status.read_text())
        except (OSError, ValueError):
            return {}

    procs = Procs(tmp_path)
    try:
        for kind in ("robot", "policy_client", "recorder", "task"):
            procs.start_node(kind, path)
        keyboard = procs.start_node("teleop", path, stdin=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline and not recorder().get("open"):
            assert all(p.poll() is None for p in procs.procs.values()), procs.logs()
            time.sleep(0.2)
        status = recorder()
        assert status.get("open") and status["episodes"] == 1, (status, procs.logs())
        assert keyboard.stdin is not None
        keyboard.stdin.write(b"x")  # the first episode's steps are being recorded: re-record it
        keyboard.stdin.close()
        deadline = time.time() + 180
        while time.time() < deadline and not (tmp_path / "episodes.json").exists():
            assert all(p.poll() is None for p in procs.procs.values()), procs.logs()
            time.sleep(0.5)
        assert (tmp_path / "episodes.json").exists(), procs.logs()
        deadline = time.time() + 60
        while time.time() < deadline and recorder().get("written", 0) < episodes:
            time.sleep(0.5)
    finally:
        codes = procs.stop_all()
    assert codes == dict.fromkeys(codes, 0), f"{codes}\n{procs.logs()}"
    results = json.loads((tmp_path / "episodes.json").read_text())
    # the re-recorded episode is logged as such, then redone: two judged episodes after it
    assert [r["status"] for r in results["results"]] == ["aborted", "truncated", "truncated"], (
        results
    )
    assert (results["episodes"], results["aborted"], results["successes"]) == (episodes, 1, 0)
    assert not results["results"][0]["success"]
    status = recorder()
    assert status["written"] == episodes and status["successes"] == 0, status
    assert status["aborted"] >= 1, status  # the re-recorded steps were discarded
    kept = [ep for ep in EpisodeStore(tmp_path / "demos", mode="r") if ep.info.status != "open"]
    assert [ep.info.status for ep in kept] == ["truncated"] * episodes
