"""SIGKILL of the streamer process and, separately, of the learner process (``rlinf train
configs/ros_online_rlpd.yaml``, ingest inside) during one online run. The learner restarts with
``train.resume`` on the same store; afterwards every seq the streamer accepted is in the store
exactly once, in order, and the resumed learner refilled its replay and kept training.

The robot side is a real :class:`~rlinf_ros.streaming.TransitionStreamer` (spool, window, acks)
in its own process, driven by a script that fixes item ``s`` by its seq (this file run as a
script): the items the learner must hold are known exactly, which a ROS graph cannot give.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

EPISODE = 11  # 10 steps + the end item
STATE, ACTION = 30, 4  # the twin's layout (mujoco_franka/reach, ee_delta_pos)


def item(seq: int):
    from rlinf_contracts.episode import EpisodeInfo, StepLayout
    from rlinf_contracts.transitions import StepRecord, Transition

    ep, idx = divmod(seq, EPISODE)
    if idx == EPISODE - 1:
        return Transition(
            seq=seq,
            episode=ep,
            index=idx,
            end="complete",
            success=ep % 2 == 0,
            final={"state": np.full(STATE, seq, np.float32)},
        )
    info = (
        EpisodeInfo(
            task="mujoco_franka/reach", layout=StepLayout(STATE, ACTION), source="online"
        ).to_dict()
        if idx == 0
        else None
    )
    step = StepRecord(
        episode=ep,
        state=np.full(STATE, seq, np.float32),
        action=np.zeros(ACTION, np.float32),
        policy_version=0,
        timestamp=time.time(),
    )
    return Transition(
        seq=seq,
        episode=ep,
        index=idx,
        step=step,
        reward=float(idx == 9 and ep % 2 == 0),
        info=info,
        terminated=idx == 9 and ep % 2 == 0,
        truncated=idx == 9 and ep % 2 == 1,
    )


def drive(
    url: str, spool: str, total: int, hz: float, hold_at: int, hold_acked: int, release: str
) -> int:
    """The robot: put items ``spool.next_seq .. total-1`` at ``hz``, then wait for every ack.

    Where the test kills something, the driver holds still, so the kills land mid-run whatever
    the machine's speed: a first run (nothing spooled yet) stops putting at seq ``hold_at`` and
    waits to be killed; a restarted run, once the learner has acknowledged past its resume point
    and at least seq ``hold_acked`` (enough for a checkpoint), stops putting until the file
    ``release`` exists (the test has killed the learner), then goes on spooling."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rlinf_data"))
    from stream_driver import start_streamer  # pyright: ignore[reportMissingImports]  # put on the path above

    s = start_streamer(url, spool)
    start = s.spool.next_seq
    print(f"resuming at seq {start}", flush=True)
    first_ack = False
    marked = (
        start == 0
    )  # only a restarted streamer marks the learner's ack passing its resume point
    while s.spool.next_seq < total:
        if start == 0 and s.spool.next_seq == hold_at:
            print(f"holding at seq {hold_at}", flush=True)
            while True:  # the test kills this run (SIGKILL) here at the latest
                time.sleep(0.05)
        assert s.put(item(s.spool.next_seq))
        if not first_ack and s.acked >= EPISODE:
            print(f"learner acked up to seq {s.acked} of {s.spool.next_seq} put", flush=True)
            first_ack = True
        if not marked and s.acked >= max(start, hold_acked):
            print(f"learner acked up to seq {s.acked}, past the resume point", flush=True)
            marked = True
            while not Path(release).exists():
                time.sleep(0.05)
        time.sleep(1.0 / hz)
    deadline = time.time() + 150
    while s.acked < total - 1 and time.time() < deadline:
        time.sleep(0.05)
    print(f"done: acked {s.acked}, status {s.status()}", flush=True)
    s.stop()
    return 0 if s.acked == total - 1 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for name in ("--url", "--spool"):
        p.add_argument(name, required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--hz", type=float, default=60.0)
    p.add_argument("--hold-at", type=int, default=-1)
    p.add_argument("--hold-acked", type=int, default=0)
    p.add_argument("--release", default="")
    a = p.parse_args()
    sys.exit(drive(a.url, a.spool, a.total, a.hz, a.hold_at, a.hold_acked, a.release))

import pytest  # noqa: E402
from online_rig import TOKENS, learner_args, synthetic_demos, wait_for  # noqa: E402
from ros_procs import Procs, free_port  # noqa: E402

pytestmark = [pytest.mark.sim, pytest.mark.timeout(600)]


def test_sigkill_streamer_and_learner_lose_and_duplicate_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    from rlinf_data.store import EpisodeStore

    for k, v in TOKENS.items():
        monkeypatch.setenv(k, v)
    total, port = 36 * EPISODE, free_port()
    out, demos = tmp_path / "run", synthetic_demos(tmp_path / "demos")
    learner = learner_args(
        out,
        demos,
        port,
        0,
        "push.url=",
        "train.env_steps=100000",
        "train.learning_starts=20",
        "train.log_every=50",
        "train.checkpoint_every=40",
        "train.final_eval=false",
        "train.time_budget_s=500",
        "algorithm.utd_ratio=0.5",
        "algorithm.batch_size=32",
        "ingest.pretrain_updates=0",
        "model.hidden=[32,32]",
        "model.critic_hidden=[32,32]",
        "env.num_envs=1",
    )
    driver = [
        __file__,
        "--url",
        f"ws://127.0.0.1:{port}/transitions",
        "--spool",
        str(tmp_path / "spool"),
        "--total",
        str(total),
        "--hz",
        "60",
    ]
    procs = Procs(tmp_path)
    driver_log, learner_log = tmp_path / "driver.log", tmp_path / "learner.log"
    try:
        procs.start("learner", learner)
        wait_for(lambda: (out / "ingest.json").is_file(), 120, "the learner's ingest", procs)
        procs.start("driver", [*driver, "--hold-at", str(total // 3)])
        # killed once the learner has acknowledged an episode, at the latest where the driver holds
        # (a third of the way): items spooled, the newest of them possibly unacknowledged
        wait_for(
            lambda: "learner acked up to seq" in driver_log.read_text(),
            120,
            "the learner's first acks",
            procs,
        )
        procs.kill("driver")  # streamer killed mid-run
        release = tmp_path / "learner_killed"
        # 60 transitions before it holds: a checkpoint (every 40) to resume from
        procs.start(
            "driver", [*driver, "--hold-acked", str(6 * EPISODE), "--release", str(release)]
        )
        wait_for(
            lambda: any((out / "checkpoints").glob("iter_*/meta.json")),
            120,
            "a learner checkpoint",
            procs,
        )
        wait_for(
            lambda: driver_log.read_text().count("streamer: connected") >= 2,
            120,
            "the restarted streamer to reconnect",
            procs,
        )
        # the learner is killed once it has stored items of the restarted stream (the driver holds
        # then)
        wait_for(
            lambda: "past the resume point" in driver_log.read_text(),
            120,
            "the learner to ack the restarted streamer's items",
            procs,
        )
        lost = driver_log.read_text().count("; spooling (backlog")
        procs.kill(
            "learner"
        )  # learner killed mid-run: a batch possibly half-stored, unacknowledged
        release.touch()  # the driver puts again: its streamer finds the learner gone
        # restarted once the streamer has noticed and spools while the learner is away
        wait_for(
            lambda: driver_log.read_text().count("; spooling (backlog") > lost,
            120,
            "the streamer to notice the lost learner",
            procs,
        )
        procs.start("learner", [*learner, f"train.resume={out}"])
        wait_for(
            lambda: procs.procs["driver"].poll() is not None, 240, "the driver's last ack", procs
        )
        assert procs.procs["driver"].returncode == 0, procs.logs()
        wait_for(
            lambda: "resumed from " in learner_log.read_text(),
            120,
            "the learner's resume line",
            procs,
        )
        resumed_steps = int(
            learner_log.read_text().split("resumed from ")[1].split(": ")[1].split()[0]
        )

        def checkpointed_after_resume() -> bool:  # the resumed learner went on training and saved
            metas = [
                json.loads(p.read_text()) for p in (out / "checkpoints").glob("iter_*/meta.json")
            ]
            return max(m["counters"]["env_steps"] for m in metas) > resumed_steps

        wait_for(checkpointed_after_resume, 120, "a checkpoint of the resumed learner", procs)
        # SIGTERM ends the resumed learner's training like its budget: final checkpoint, exit 0
        # (a learner that had crashed before, or died on the signal, would not exit 0)
        resumed_learner = procs.procs.pop("learner")
        resumed_learner.send_signal(signal.SIGTERM)
        resumed_learner.wait(timeout=300)
        assert resumed_learner.returncode == 0, procs.logs()
    finally:
        procs.stop_all()
    logs = (tmp_path / "driver.log").read_text() + (tmp_path / "learner.log").read_text()
    resumed = int(logs.split("resuming at seq ")[2].split()[0])
    assert 0 < resumed < total, logs  # the streamer kill really hit the middle of the run
    assert "resumed from" in logs and "robot arm0 has seqs up to" in logs, logs[-3000:]
    held = int(logs.split("robot arm0 has seqs up to ")[1].split()[0])
    assert resumed <= held < total - 1, logs[
        -3000:
    ]  # the learner kill hit the restarted streamer's stream
    store = EpisodeStore(out / "episodes", mode="r")
    ids = [int(v) for ep in store for v in ep.steps["state"][:, 0]]
    expected = [s for s in range(total) if s % EPISODE != EPISODE - 1]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"duplicated seqs: {dup[:20]}"
    assert sorted(ids) == expected, f"missing seqs: {sorted(set(expected) - set(ids))[:20]}"
    for ep in store:  # each store episode is a run of consecutive seqs from its seq0
        seq0 = int(ep.info.extra["seq0"])
        assert np.array_equal(ep.steps["state"][:, 0], np.arange(seq0, seq0 + len(ep))), seq0
    # the resumed learner refilled its replay from the store and went on counting past the
    # checkpoint
    line = logs.split("resumed from ")[1].splitlines()[
        0
    ]  # "<ckpt>: N env steps, U updates, replay R online rows"
    steps_at_resume, rows = (
        int(line.split(": ")[1].split()[0]),
        int(line.split("replay ")[1].split()[0]),
    )
    assert rows >= steps_at_resume > 0, line
    metas = [json.loads(p.read_text()) for p in (out / "checkpoints").glob("iter_*/meta.json")]
    assert max(m["counters"]["env_steps"] for m in metas) > steps_at_resume, (
        "no checkpoint after the restart"
    )
