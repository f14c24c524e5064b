"""The ``remote`` topology: robots are the env. Transitions arrive on the learner's own ingest.

::

    robot PC streamer --ws /transitions--> IngestServer (episode store, then ack) --feed-->
        RobotFeed: segments -> replay (online | intervention) --> updates (UTD debt) --+
    policy server <--ws /weights-- BackgroundPusher <-- every push.every_updates ------+

Why the learner embeds the ingest by default: the feed is an in-memory queue of transitions that
are already durable in the episode store, so the replay gets them without a second copy, and a
restart (``train.resume``) refills the replay from that same store. With several robots the
ingest's event loop and store writer then take the learner's interpreter lock from it, so
``ingest.process: true`` runs the ingest in a child process
(:class:`~rlinf_data.ingest_process.IngestProcess`, same feed and status) at the cost of one
pickled copy per transition (``docs/scaling.md``). Nothing here blocks the robot: the ingest
acknowledges as soon as a step is stored, the pusher sends from its own thread (newest weights
win), and the policy server keeps serving the previous version until a push lands.

Transitions are assembled per robot into *segments* -- runs of consecutive seqs of one robot
episode -- and a segment goes into the replay as a whole when its episode ends (or is cut by a
gap), so n-step chains stay inside an episode and several robots never interleave. Steps taken
over by a human (``intervention``) also go into the ``intervention`` source when the replay has
one (HIL-SERL keeps them in both). ``env`` still names the simulated twin of the task: its spec
is the learner's (checked against each streamed step's shape) and the final held-out eval runs
there (``train.final_eval``).

Start order and the first policy: the learner writes its initial actor to ``<out_dir>/initial``
(after ``ingest.pretrain_updates`` updates on the demos) before opening the ingest, so
``rlinf serve --checkpoint <out_dir>/initial`` serves the same network the pushes will fill; with
a ``server`` placement the run starts those servers itself, on the nodes the placement names
(:mod:`learner.offpolicy.servers`), and adds them to the push targets and ``ingest.json``.
"""

from __future__ import annotations

import json
import logging
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.fanout import FanOutPusher
from learner.offpolicy.learner import OffPolicyLearner
from learner.offpolicy.loop import TrainLoop, store_path
from learner.offpolicy.reward_judge import JudgeReports
from learner.offpolicy.rewards import REWARDS
from learner.offpolicy.servers import start_servers
from learner.worker import Worker
from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, EpisodeInfo
from rlinf_contracts.registry import Registry

if TYPE_CHECKING:
    from rlinf_data.ingest import IngestConfig

log = logging.getLogger(__name__)
INITIAL = "initial"
# How weights reach the policy server, plugged in from the top room: ``learner`` may not import
# ``policy_server``, so ``rlinf_cli.wiring`` registers the server's own push client here as a
# factory ``(url, token_file, timeout_s) -> pusher`` (``offer`` / ``flush`` / ``stop`` /
# ``version`` / ``stats``) before a run starts.
PUSH_CLIENTS: Registry[Callable[[str, str, float], Any]] = Registry("weight push client")
SPEC_STEPS = 5  # vector steps of the sim twin timed at start (the final eval's cost estimate)


def ingest_store(cfg: OffPolicyConfig) -> str:
    return cfg.ingest.store or store_path(cfg)


class Segments:
    """Per robot, the consecutive transitions of its running episode; finished ones as episodes."""

    def __init__(
        self, layout: Any, task: str, robot: dict[str, Any] | None, control_hz: float
    ) -> None:
        self.layout, self.task, self.robot, self.control_hz = layout, task, robot, control_hz
        self.open: dict[str, list[Any]] = {}
        self.rejected = 0

    def add(self, t: Any) -> list[Episode]:
        """Take one ``IngestedTransition``; returns the segments it closed."""
        if not self._fits(t):
            return []
        out = []
        run = self.open.setdefault(t.robot_id, [])
        if run and (t.episode != run[-1].episode or t.seq != run[-1].seq + 1):
            out.append(self._close(t.robot_id))  # a new episode, or a hole (dropped feed items)
            run = self.open.setdefault(t.robot_id, [])
        run.append(t)
        if t.last or t.terminated:
            out.append(self._close(t.robot_id))
        return out

    def pending(self) -> int:
        """Transitions held in open segments (not in the replay until their episode ends)."""
        return sum(len(run) for run in self.open.values())

    def _fits(self, t: Any) -> bool:
        want = self.layout.fields()
        ok = (
            np.shape(t.obs["state"]) == want["state"][1]
            and np.shape(t.action) == want["action"][1]
            and all(
                np.shape(t.obs["images"].get(c)) == want[f"images/{c}"][1]
                for c in self.layout.cameras
            )
        )
        if not ok:
            self.rejected += 1
            if self.rejected == 1 or self.rejected % 1000 == 0:
                log.error(
                    "ingest: robot %s streams state %s / action %s, the learner's layout is %s "
                    "(%d transitions refused); robot_spec and env must describe the same robot",
                    t.robot_id,
                    np.shape(t.obs["state"]),
                    np.shape(t.action),
                    self.layout.to_dict(),
                    self.rejected,
                )
        return ok

    def _close(self, robot_id: str) -> Episode:
        run = self.open.pop(robot_id)
        steps: dict[str, np.ndarray] = {
            "state": np.stack([t.obs["state"] for t in run]).astype(np.float32),
            "action": np.stack([t.action for t in run]).astype(np.float32),
            "reward": np.array([t.reward for t in run], np.float32),
            "terminated": np.array([t.terminated for t in run], bool),
            "truncated": np.array([t.truncated for t in run], bool),
            "intervention": np.array([t.intervention for t in run], bool),
            "policy_version": np.array([t.policy_version for t in run], np.int64),
            "timestamp": np.zeros(len(run), np.float64),
        }
        for cam in self.layout.cameras:
            steps[f"images/{cam}"] = np.stack([t.obs["images"][cam] for t in run]).astype(np.uint8)
        last = run[-1]
        final = {"state": np.asarray(last.next_obs["state"], np.float32)}
        final.update(
            {
                f"images/{c}": np.asarray(last.next_obs["images"][c], np.uint8)
                for c in self.layout.cameras
            }
        )
        success = (
            last.success if last.success is not None else bool(last.terminated and last.reward > 0)
        )
        ended = last.last or last.terminated
        status = "complete" if ended and not last.truncated else "truncated" if ended else "aborted"
        info = EpisodeInfo(
            task=self.task,
            layout=self.layout,
            robot=self.robot,
            control_hz=self.control_hz,
            source=run[0].source if run[0].source in ("online", "intervention") else "online",
            success=bool(success and ended),
            status=status,
            extra={"robot_id": robot_id, "robot_episode": last.episode, "seq0": run[0].seq},
        )
        return Episode(info, steps, final)


def ingest_config(cfg: OffPolicyConfig, token: str) -> IngestConfig:
    """The ingest server's settings from the run's ``ingest`` section (and the read token)."""
    from rlinf_data.ingest import IngestConfig

    ing = cfg.ingest
    return IngestConfig(
        store=ingest_store(cfg),
        host=ing.host,
        port=ing.port,
        token=token,
        turn_items=ing.turn_items,
        fsync=ing.fsync,
    )


class RobotFeed:
    """Source of the train loop (``pull`` / ``publish`` / ``step_s``) backed by an ingest +
    pusher."""

    def __init__(
        self, cfg: OffPolicyConfig, core: OffPolicyLearner, env_spec: Any, step_s: float
    ) -> None:
        from rlinf_data.ingest import IngestServer
        from rlinf_data.ingest_process import IngestProcess

        self.cfg, self._step_s = cfg, step_s
        self.reward = REWARDS.get(cfg.ingest.reward)(
            getattr(env_spec, "robot", None)
        )  # raises before any I/O
        robot = env_spec.robot.to_dict() if getattr(env_spec, "robot", None) is not None else None
        self.segments = Segments(
            core.layout, cfg.env.name, robot, float(getattr(env_spec, "control_hz", 10.0))
        )
        token = Path(cfg.ingest.token_file).read_text().strip() if cfg.ingest.token_file else ""
        try:
            self.ingest = (IngestProcess if cfg.ingest.process else IngestServer)(
                ingest_config(cfg, token),
                layout=core.layout,  # a robot of another layout is refused before it is stored
            ).start()
        except OSError as e:  # port taken, address not on this machine
            raise ConfigError(
                f"keys 'ingest.host' / 'ingest.port': cannot listen on {cfg.ingest.host}:"
                f"{cfg.ingest.port}: {e}"
            ) from None
        # the robot sites' policy servers of a 'server' placement, serving the initial actor
        self.servers = start_servers(cfg, Path(cfg.train.out_dir) / INITIAL)
        self.pusher = _pusher(cfg, self.servers.urls)
        self.published_at = -1
        self.stats = {"transitions": 0, "interventions": 0, "segments": 0}
        self.judge = JudgeReports()  # the reward classifier's FP / FN rates, where robots send them
        self.live: Any = None  # learner.live.recorder.LiveRecorder: sees transitions and episodes
        info = {
            "ingest_url": self.ingest.url,
            "store": ingest_store(cfg),
            "push_url": cfg.push.url,
            "push_urls": cfg.push.targets + self.servers.urls,
            "servers": self.servers.rows,
        }
        Path(cfg.train.out_dir, "ingest.json").write_text(json.dumps(info))
        log.info(
            "learner ingest on %s (store %s); pushing to %s every %d updates",
            self.ingest.url,
            ingest_store(cfg),
            ", ".join(cfg.push.targets + self.servers.urls) or "nowhere",
            cfg.push.every_updates,
        )

    def pull(self, core: OffPolicyLearner) -> list[Episode]:
        items = []
        if (
            core.owed < 1
        ):  # nothing to pay: wait a little for data (never for ever: the budget is checked)
            try:
                items.append(self.ingest.feed.get(timeout=self.cfg.ingest.wait_s))
            except queue.Empty:
                return []
        # everything queued now: a learner that owes a capped backlog must not leave the rest
        # of the robots' data waiting in front of the replay (learner.offpolicy.utd)
        for _ in range(self.ingest.feed.qsize()):
            try:
                items.append(self.ingest.feed.get_nowait())
            except queue.Empty:
                break
        finished = []
        for t in items:
            if t.info:  # an episode's first step: its info may carry a reward judge report
                self.judge.add(t.robot_id, t.info.get("extra", {}).get("reward_judge"))
            if self.live is not None:
                self.live.transition(t)
            for ep in self.segments.add(t):
                self._ingest(core, ep)
                if ep.info.status != "aborted":
                    finished.append(ep)
                    if self.live is not None:
                        self.live.episode(ep)
        core.pending = self._queued()
        self._pay_in_slices(core)
        return finished

    def _pay_in_slices(self, core: OffPolicyLearner) -> None:
        """A whole episode arrives at once and owes many updates: pay them ``push.every_updates``
        at a time with a push between, so the robot gets weights every N updates, not every burst.
        The loop pays the remainder (less than one slice) itself."""
        every = self.cfg.push.every_updates
        while self.pusher is not None and core.owed >= every + 1:
            rest, core.owed = core.owed - every, float(every)
            core.train_owed()
            core.owed += rest
            self.publish(core)

    def _ingest(self, core: OffPolicyLearner, ep: Episode) -> None:
        ep.steps["reward"] = self.reward(ep)
        core.ingest_episode(ep)
        self.stats["transitions"] += len(ep)
        self.stats["segments"] += 1
        if ep.steps["intervention"].any():
            self.stats["interventions"] += int(ep.steps["intervention"].sum())
            core.add_interventions(ep)

    def step_s(self) -> float:
        return self._step_s

    def _queued(self) -> int:
        return self.ingest.feed.qsize() + self.segments.pending()

    def publish(self, core: OffPolicyLearner) -> int:
        core.pending = self._queued()  # the loop logs after publishing: what waits now
        if (
            self.pusher is not None
            and core.updates - self.published_at >= self.cfg.push.every_updates
        ):
            self.pusher.offer(
                {k: v.detach().cpu().clone() for k, v in core.policy.state_dict().items()}
            )
            self.published_at = core.updates
        return self.pusher.version if self.pusher is not None else core.updates

    def publish_final(self, core: OffPolicyLearner) -> int:
        """Push the final actor whatever ``push.every_updates`` says: training has ended, and the
        robots' servers should act with what the final checkpoint holds (``close`` flushes it)."""
        if self.pusher is not None and core.updates > self.published_at:
            self.published_at = core.updates - self.cfg.push.every_updates  # due now
            return self.publish(core)
        return self.pusher.version if self.pusher is not None else core.updates

    def metrics(self) -> dict[str, float]:
        status = self.ingest.status()
        m = {
            "ingest/transitions": float(self.stats["transitions"]),
            "ingest/dropped_feed": float(status["dropped_feed"]),
            "ingest/intervention_ratio": self.stats["interventions"]
            / max(1, self.stats["transitions"]),
        }
        m.update({f"ingest/{k}": float(v) for k, v in status["ledger"].items()})
        m["ingest/robots_seen"] = float(len(status["queued"]))
        m["ingest/robots_refused"] = float(len(status["refused"]))
        m.update(self.judge.metrics())
        if self.pusher is not None:
            m.update(
                {
                    f"push/{k}": float(self.pusher.stats[k])
                    for k in ("pushes", "failures", "version")
                }
            )
        return m

    def close(self) -> None:
        if self.pusher is not None:
            self.pusher.flush(self.cfg.push.timeout_s)
            self.pusher.stop()
        self.servers.stop()
        self.ingest.stop()


def _pusher(cfg: OffPolicyConfig, placed: list[str] | None = None) -> Any:
    """A started push client for ``push.url`` (None without one), from :data:`PUSH_CLIENTS`;
    with ``push.urls`` or ``placed`` servers too, one client per server behind a
    :class:`FanOutPusher`."""
    targets = cfg.push.targets + list(placed or [])
    if not targets:
        return None
    if "websocket" not in PUSH_CLIENTS.names():
        raise ConfigError(
            "key 'push.url': no weight-push client is plugged into this process; start the "
            "learner with `rlinf train` (rlinf_cli.wiring plugs in policy_server.push)"
        )
    make = PUSH_CLIENTS.get("websocket")
    pushers = [make(url, cfg.push.token_file, cfg.push.timeout_s) for url in targets]
    return pushers[0] if len(pushers) == 1 else FanOutPusher(pushers)


def twin_spec(cfg: OffPolicyConfig) -> tuple[Any, float]:
    """The sim twin's env spec and its measured seconds per vector step (for the eval estimate)."""
    from learner.rollout.envs import build_env

    env = build_env(cfg.env.name, cfg.env.num_envs, **cfg.env.factory_kwargs())
    try:
        env.reset(cfg.seed)
        rng = np.random.default_rng(cfg.seed)
        t0 = time.perf_counter()
        for _ in range(SPEC_STEPS):
            env.step(rng.uniform(-1, 1, (env.num_envs, env.spec.action_dim)).astype(np.float32))
        return env.spec, (time.perf_counter() - t0) / SPEC_STEPS
    finally:
        env.close()


class RemoteLearnerWorker(Worker):
    """Replay + updates + outputs, fed by robots through the ingest; pushes to the policy server."""

    def __init__(self, cfg: OffPolicyConfig) -> None:
        spec, step_s = twin_spec(cfg)
        # demos recorded on the robot carry its streamed reward: relabel them as the online data is
        relabel = (
            REWARDS.get(cfg.ingest.reward)(getattr(spec, "robot", None))
            if cfg.ingest.relabel_demos
            else None
        )
        self.core = OffPolicyLearner(cfg, spec, demo_reward=relabel)
        # a restart's refill relabels the stored (streamed) rewards as the live ingest does
        self.core.online_reward = REWARDS.get(cfg.ingest.reward)(getattr(spec, "robot", None))
        self.loop = TrainLoop(cfg, self.core, write_episodes=False, episode_store=ingest_store(cfg))
        self._initial(cfg)
        self.source = RobotFeed(cfg, self.core, spec, step_s)
        self.loop.extra_metrics = self.source.metrics
        self.live = _live(cfg, self.loop, self.source)

    def _initial(self, cfg: OffPolicyConfig) -> None:
        """Pretrain on the demos (fresh runs only) and write the servable first actor."""
        from learner.offpolicy.state import save
        from rlinf_contracts.config import to_dict

        core = self.core
        if not cfg.train.resume and cfg.ingest.pretrain_updates and cfg.train.demos:
            t0 = time.perf_counter()
            core.owed += cfg.ingest.pretrain_updates
            core.train_owed()
            log.info(
                "pretrained on the demos: %d updates in %.1f s",
                core.updates,
                time.perf_counter() - t0,
            )
        path = Path(cfg.train.out_dir) / INITIAL
        if not path.exists():
            save(core, path, 0, 0, to_dict(cfg), {}, None)
            log.info(
                "initial actor written: serve it with "
                "'rlinf serve --checkpoint %s server.deterministic=false'",
                path,
            )

    def train(self, seconds_left: float | None) -> dict[str, Any]:
        result = self.loop.run(self.source, seconds_left)
        self.source.publish_final(self.loop.core)
        return result

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
        self.source.close()
        self.loop.close()


def _live(cfg: OffPolicyConfig, loop: TrainLoop, feed: RobotFeed) -> Any:
    """The started live view (``learner.live``) tapping ``feed``; None without ``live.enabled``."""
    if not cfg.live.enabled:
        return None
    from learner.live.config import resolve_token
    from learner.live.recorder import LiveRecorder

    live = LiveRecorder(
        cfg.live,
        resolve_token(cfg.live.token_file, cfg.ingest.token_file),
        cfg.train.out_dir,
        cfg.name,
        rows=lambda: loop.history,
        budget_left=lambda: None if loop.budget is None else loop.budget.left(),
        reward_source=cfg.ingest.reward,
        utd_ratio=cfg.algorithm.utd_ratio,
    )
    feed.live = live.start()
    return live
