"""Reward node: one ``reward`` topic (std_msgs/Float64, what ``RosRobotEnv`` with
``env.reward: topic`` reads) plus ``reward/success`` (Bool), whatever the source:

- ``source: classifier``: the newest camera frame, ``rate_hz`` times a second, to a success
  classifier served by the policy server on the GPU box (``rlinf serve --checkpoint
  runs/reward_classifier``; no torch here). Publishes ``p_success`` too; with ``end_episode``
  a success (``consecutive`` frames in a row) also ends the episode on ``episode/event``, so
  the recorder / streamer label it as the task node or the human would.
- ``source: events``: the sim twin's success flag and the human's success / failure keys
  (both already published as ``EpisodeEvent`` ends on ``episode/event``) as reward 1 / 0.

With the classifier, the human's keys (and any other judge's end on ``episode/event``) still
decide: the first verdict of an episode stands (``rlinf_ros.reward_sources.EpisodeVerdict``),
so a key pressed before the classifier's success is the episode's reward. With ``judge_topic``
(the sim twin's success flag, which is not the reward) every scored frame is paired with the
judge's newest flag; per ``judge_window`` frames the classifier's false-positive / false-negative
rates go out as JSON on ``judge_stats_topic`` and as one log line (the streamer carries them to
the learner's metrics). No judge topic, no report.

With ``confirm`` the classifier's success is a proposal: the operator's verdict
(``rlinf_ros.reward_corrections``; on the twin, its judge) confirms it (the episode ends in
success) or rejects it (the episode ends as a failure, reason ``operator``); the frames that fired
it go to ``corrections_dir`` labelled by the verdict, and the counts ride in the judge report.
With ``on_reject: continue`` a rejection is a "not yet": reward 0 and the episode goes on (the
operator asked again only once the classifier has said no in between), where the near-goal
state a false success sits in is often one push from the real one.
A success the operator catches (a success key on a bench; on the twin, ``catch_missed``) keeps
its frames as a positive too.

The classifier is asked from a worker thread: a slow or lost server delays rewards, never the
executor; every request has ``timeout_s`` and the client reconnects with back-off. Its pace
(``rate_hz``) and timeouts are wall time: they bound a computation and a network round trip; a
new frame (which arrives at the camera's rate, in the graph's time) is what it waits for. Event
stamps are the node clock's.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Bool, Float64, String

from rlinf_contracts.transitions import (
    EpisodeEvent,
    TransitionError,
    event_from_json,
    event_to_json,
)
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.conversions import image_to_rgb
from rlinf_ros.nodes.common import (
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from rlinf_ros.online_config import RewardNodeConfig
from rlinf_ros.reward_corrections import (
    CONFIRMERS,
    OPERATOR_REASON,
    CorrectionCounts,
    CorrectionStore,
    FrameRing,
    MissedSuccess,
)
from rlinf_ros.reward_sources import (
    ClassifierReward,
    EpisodeVerdict,
    JudgeRates,
    JudgeWindow,
    SuccessLatch,
    event_reward,
    resize_nearest,
)

log = logging.getLogger(__name__)


class RewardNode(Node):
    def __init__(self, cfg: RewardNodeConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        cfg.validate()
        self.cfg = cfg
        self.pub_reward = self.create_publisher(Float64, cfg.reward_topic, reliable_qos(10))
        self.pub_success = self.create_publisher(Bool, cfg.success_topic, reliable_qos(10))
        self.pub_p = self.create_publisher(Float64, cfg.probability_topic, reliable_qos(10))
        self.pub_event = self.create_publisher(String, cfg.event_topic, reliable_qos(10))
        self.create_subscription(String, cfg.event_topic, self._on_event, reliable_qos(10))
        self._frame: np.ndarray | None = None
        self._frame_id = 0
        self._stop = threading.Event()
        self.latch = SuccessLatch(cfg.consecutive)
        self.verdict = EpisodeVerdict(self.latch)
        self._lock = threading.Lock()  # the verdict: frames on the worker, events on the executor
        self._keep_lock = threading.Lock()  # one correction written at a time (worker or a key)
        self.scored = 0
        self._judge: bool | None = None  # the judge's newest flag (None: no judge heard yet)
        self.judge_window = JudgeWindow(cfg.judge_window)
        self.last_rates: JudgeRates | None = None
        self.ring = FrameRing(cfg.consecutive)  # the frames that fire a success
        self.counts = CorrectionCounts()  # the operator's verdicts (reward.confirm)
        self.missed = MissedSuccess(cfg.catch_missed)  # the twin operator's success key
        self._not_yet = False  # a rejected success goes on (on_reject: continue), undecided
        self._said_verdict = -1e9  # when an operator's verdict was last logged (monotonic s)
        self.corrections: CorrectionStore | None = None  # opened once the classifier is known
        if cfg.source == "classifier":
            self.create_subscription(Image, cfg.image_topic, self._on_image, sensor_qos())
            if cfg.judge_topic:
                self.pub_judge = self.create_publisher(
                    String, cfg.judge_stats_topic, reliable_qos(10)
                )
                self.create_subscription(Float64, cfg.judge_topic, self._on_judge, reliable_qos(10))
            self._thread = threading.Thread(
                target=self._classify_loop, name="reward-classifier", daemon=True
            )
            self._thread.start()
        log.info("reward node: source %s -> %s", cfg.source, cfg.reward_topic)

    def _publish(self, reward: float, success: bool) -> None:
        self.pub_reward.publish(Float64(data=float(reward)))
        self.pub_success.publish(Bool(data=bool(success)))

    def _on_event(self, msg: String) -> None:
        try:
            ev = event_from_json(msg.data)
        except (TransitionError, ValueError) as e:
            log.warning("reward: bad episode event: %s", e)
            return
        if self.cfg.source == "classifier":  # a human key / another judge before the classifier
            if ev.reason == OPERATOR_REASON:
                return  # our own operator's end coming back: decided (and published) already
            self._not_yet = self._not_yet and ev.kind != "end"
            with self._lock:
                verdict = self.verdict.on_event(ev)
                frames = self.ring.frames()
            if verdict is not None:
                log.info("reward: episode decided by %s (%.0f)", verdict.by, verdict.reward)
                self._publish(verdict.reward, verdict.success)
                if verdict.success:  # a success key on what the classifier missed: a positive
                    self._keep(frames, "caught", verdict.by)
            return
        reward = event_reward(ev)
        if reward is not None:
            self._publish(reward, reward > 0)

    def _on_judge(self, msg: Float64) -> None:
        self._judge = msg.data > 0.5

    def _compare(self, success: bool) -> None:
        """Pair a scored frame with the judge's flag; report each full window."""
        if self._judge is None:
            return
        rates = self.judge_window.add(success, self._judge)
        if rates is None:
            return
        self.last_rates = rates
        report = {**rates.to_dict(), "window": self.judge_window.windows}
        if self.cfg.confirm or self.cfg.corrections_dir:
            report.update(self.counts.to_dict())
        self.pub_judge.publish(String(data=json.dumps(report)))
        log.info(
            "reward classifier vs judge, window %d (%d frames): FP rate %s (%d/%d), "
            "FN rate %s (%d/%d)",
            self.judge_window.windows,
            rates.n,
            "-" if rates.fp_rate is None else f"{rates.fp_rate:.3f}",
            rates.false_pos,
            rates.judge_neg,
            "-" if rates.fn_rate is None else f"{rates.fn_rate:.3f}",
            rates.false_neg,
            rates.judge_pos,
        )

    def _on_image(self, msg: Image) -> None:
        try:
            self._frame, self._frame_id = image_to_rgb(msg), self._frame_id + 1
        except ValueError as e:
            log.warning("reward: image: %s", e)

    def _classify_loop(self) -> None:
        from policy_server.client import ClientStopped, PolicyClient

        try:
            self.client = PolicyClient(self.cfg.server_url, timeout_s=self.cfg.timeout_s)
            scorer = ClassifierReward(self.client, self.cfg.camera, self.cfg.threshold)
        except ClientStopped:
            return
        log.info(
            "reward: classifier at %s, camera %s (%dx%d)",
            self.cfg.server_url,
            scorer.camera,
            scorer.height,
            scorer.width,
        )
        if self.cfg.corrections_dir:
            self.corrections = CorrectionStore(
                self.cfg.corrections_dir, scorer.camera, scorer.state_dim
            )
        seen = 0
        while not self._stop.wait(1.0 / self.cfg.rate_hz):
            if self._frame is None or self._frame_id == seen:
                continue  # no new frame: nothing new to say
            seen = self._frame_id
            frame = resize_nearest(self._frame, scorer.height, scorer.width)
            try:
                p, ok = scorer.score(frame)
            except ClientStopped:
                return
            with self._lock:
                self.ring.add(frame)
                verdict = self.verdict.on_score(ok)
            self.scored += 1
            self.pub_p.publish(Float64(data=p))
            self._compare(ok)
            if verdict is None:  # the episode's verdict is in (a human key, or our success):
                if self._not_yet:  # silent; after a "not yet", the operator still watches
                    self._not_yet = not self._caught()
                continue
            self._not_yet = False
            if not verdict.end and self._caught():
                continue
            if verdict.end and self.cfg.confirm and not self._confirmed():
                self._publish(0.0, False)  # the operator said no
                if self.cfg.on_reject == "end":  # a failure, the scene reset
                    self.pub_event.publish(String(data=event_to_json(self._rejected_end())))
                else:  # "not yet": the episode goes on while the classifier still says yes
                    self._not_yet = True
                continue
            self._publish(verdict.reward, verdict.success)
            if verdict.end and self.cfg.end_episode:
                now = now_s(self)
                events = [EpisodeEvent("end", success=True, reason="classifier", stamp=now)]
                if self.cfg.begin_episode:
                    events.append(EpisodeEvent("begin", stamp=now))
                for ev in events:
                    self.pub_event.publish(String(data=event_to_json(ev)))

    def _caught(self) -> bool:
        """The operator's success key on a success the classifier left open (``catch_missed``):
        the episode ends in success (reason operator), its frames kept as a positive."""
        sees = CONFIRMERS[self.cfg.confirm](self._judge) if self.cfg.confirm else None
        if not self.missed.update(sees):
            return False
        end = EpisodeEvent("end", success=True, reason=OPERATOR_REASON, stamp=now_s(self))
        with self._lock:
            self.verdict.on_event(end)
            frames = self.ring.frames()
        self._publish(1.0, True)
        self._keep(frames, "caught", self.cfg.confirm)
        self.pub_event.publish(String(data=event_to_json(end)))
        if self.cfg.begin_episode:
            begin = EpisodeEvent("begin", stamp=now_s(self))
            self.pub_event.publish(String(data=event_to_json(begin)))
        return True

    def _keep(self, frames: list[np.ndarray], verdict: str, by: str) -> None:
        """Count the operator's verdict; keep its frames (a full disk loses a correction, never
        the reward). From the worker (the classifier's verdicts) and the executor (a key)."""
        with self._keep_lock:
            self._keep_locked(frames, verdict, by)

    def _keep_locked(self, frames: list[np.ndarray], verdict: str, by: str) -> None:
        self.counts.add(verdict)
        if verdict != "rejected":
            self.missed.decided()  # this success is paid: no key for it until the scene resets
        if verdict != "confirmed" and time.monotonic() - self._said_verdict >= 30.0:
            self._said_verdict = time.monotonic()  # a line per 30 s at most (up to ~30 a minute)
            log.info(
                "reward: the operator (%s) %s %s (so far: %d rejected, %d confirmed, %d caught)",
                by,
                verdict,
                "a success the classifier missed" if verdict == "caught" else "its success",
                self.counts.rejected,
                self.counts.confirmed,
                self.counts.caught,
            )
        if self.corrections is None or not frames:
            return
        try:
            self.corrections.write(frames, verdict, by)
        except OSError as e:
            log.warning("reward: correction not kept in %s: %s", self.cfg.corrections_dir, e)

    def _confirmed(self) -> bool:
        """The operator's verdict on the classifier's success; its frames kept, labelled so.
        No verdict to be had (the judge not heard yet): the success stands, nothing kept."""
        ok = CONFIRMERS[self.cfg.confirm](self._judge)
        if ok is None:
            log.warning(
                "reward: no %s verdict yet; the classifier's success stands", self.cfg.confirm
            )
            return True
        with self._lock:
            frames = self.ring.frames()
        self._keep(frames, "confirmed" if ok else "rejected", self.cfg.confirm)
        return ok

    def _rejected_end(self) -> EpisodeEvent:
        return EpisodeEvent(
            "end", status="truncated", success=False, reason=OPERATOR_REASON, stamp=now_s(self)
        )

    def close(self) -> None:
        self._stop.set()
        client = getattr(self, "client", None)
        if client is not None:
            client.stop()


def build(cfg: RosGraphConfig, name: str | None) -> RewardNode:
    if not cfg.reward.enabled:
        raise ValueError("reward.enabled is false in this config; nothing to start")
    return RewardNode(cfg.reward)


def main(argv: list[str] | None = None) -> int:
    return run_node("reward", build, argv)


if __name__ == "__main__":
    exit_process(main())
