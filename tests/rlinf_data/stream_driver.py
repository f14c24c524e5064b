"""A robot-side streamer driven by a deterministic script, for the SIGKILL tests.

Item ``s`` of the run is fixed by its seq: episode ``s // 11``, index ``s % 11``; index 10 is the
episode's end (no step), others a step whose ``state[0] == s``. A restarted driver continues at
its spool's next seq, so the items the learner should hold are known exactly.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np

from rlinf_contracts.episode import EpisodeInfo, StepLayout
from rlinf_contracts.transitions import StepRecord, Transition
from rlinf_ros.streaming import StreamerConfig, TransitionStreamer

EPISODE = 11


def item(seq: int) -> Transition:
    ep, idx = divmod(seq, EPISODE)
    if idx == EPISODE - 1:
        final = {"state": np.full(4, seq, np.float32)}
        return Transition(
            seq=seq, episode=ep, index=idx, end="complete", success=ep % 2 == 0, final=final
        )
    info = (
        EpisodeInfo(task="test/stream", layout=StepLayout(4, 2), source="online").to_dict()
        if idx == 0
        else None
    )
    step = StepRecord(
        episode=ep,
        state=np.full(4, seq, np.float32),
        action=np.zeros(2, np.float32),
        policy_version=ep,
        timestamp=time.time(),
    )
    return Transition(
        seq=seq,
        episode=ep,
        index=idx,
        step=step,
        reward=float(idx == 9),
        info=info,
        truncated=idx == 9,
    )


def start_streamer(url: str, spool: str) -> TransitionStreamer:
    """The robot side of a SIGKILL driver, logging as ``driver``: a streamer of robot ``arm0``
    spooling to ``spool``, with a small window and batch and short backoffs, so kills land
    between acks and a restart reconnects within a second or so."""
    logging.basicConfig(
        level="INFO", format="%(asctime)s driver %(levelname)s %(name)s: %(message)s"
    )
    return TransitionStreamer(
        StreamerConfig(
            url=url,
            spool_dir=spool,
            robot_id="arm0",
            window=32,
            batch=8,
            backoff_s=0.2,
            backoff_max_s=1.0,
            ack_timeout_s=5.0,
        )
    ).start()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--spool", required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--hz", type=float, default=200.0)
    p.add_argument(
        "--ahead",
        type=int,
        default=0,
        help="most items produced past the learner's ack (0: no limit)",
    )
    a = p.parse_args()
    s = start_streamer(a.url, a.spool)
    start = s.spool.next_seq
    print(f"resuming at seq {start}", flush=True)
    marks = [m for m in (start, start + 40) if m < a.total]  # progress the SIGKILL test waits for
    while s.spool.next_seq < a.total:
        # the run stays in its middle until acked
        if a.ahead and s.spool.next_seq - s.acked > a.ahead:
            time.sleep(0.01)
        else:
            assert s.put(item(s.spool.next_seq))
            time.sleep(1.0 / a.hz)
        while marks and s.acked >= marks[0]:
            print(f"learner acked up to seq {s.acked} (past {marks.pop(0)})", flush=True)
    deadline = time.time() + 60
    while s.acked < a.total - 1 and time.time() < deadline:
        time.sleep(0.05)
    print(f"done: acked {s.acked}, status {s.status()}", flush=True)
    s.stop()
    return 0 if s.acked == a.total - 1 else 1


if __name__ == "__main__":
    sys.exit(main())
