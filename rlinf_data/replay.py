"""Replay buffer: one numpy ring per source (demo / online / intervention), mixed per batch.

Why rows of observations linked by index: an image observation is stored once, in the row of
the step that saw it; that row also holds the transition leaving it (action, reward, done) and
the index of the row holding the next observation. Interleaved env streams, an episode's final
observation (needed to bootstrap a truncated episode) and n-step chains all follow the links;
nothing is copied. A link carries the serial number of the row it points to, so a row
overwritten by the ring's wrap-around breaks the links into it instead of splicing episodes.

n-step targets (``ReplayConfig.n_step``): ``reward = sum_k gamma^k r_k`` over the m <= n steps
until the episode ends or the chain reaches a step whose transition is not written yet;
``discount = 0`` after a terminal step, else ``gamma^m``, and ``next_obs`` is the observation
after those m steps. A truncated episode bootstraps from its final observation; without one
its last step is never sampled as a start (its next observation is unknown).

Mixing (RLPD's symmetric sampling is ``mix={"demo": 0.5, "online": 0.5}``): each batch takes
``round(ratio * batch)`` rows from each non-empty source (largest remainders get the leftovers);
an empty source's share goes to the others in proportion to their ratios.

Per-robot sampling (``ReplayConfig.per_robot``): with many robots feeding one learner, pooled
sampling (uniform over rows) gives each robot a share of every batch equal to its share of the
data, so a robot that streams ten times faster -- or floods after a reconnect -- dominates the
gradients. With ``per_robot`` each source draws a robot uniformly among those with a sampleable
row, then a row uniformly within that robot. A row's robot is the ``robot_id`` in its episode's
``info.extra`` (the ingest and the learner's segments set it); rows without one (demos, the
learner's own env) form one group of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlinf_contracts.episode import Episode, StepLayout

BUFFER_SOURCES = ("demo", "online", "intervention")


@dataclass(frozen=True)
class ReplayConfig:
    """Sizes, mixing and return horizon of a :class:`ReplayBuffer`."""

    capacity: int = 1_000_000  # observation rows per source
    mix: dict[str, float] = field(
        default_factory=lambda: {"demo": 0.5, "online": 0.5}
    )  # source -> share
    n_step: int = 1
    gamma: float = 0.99
    per_robot: bool = False  # sample robots uniformly, then rows within a robot (module doc)
    # episode-store source -> buffer sources it feeds on restore (HIL-SERL puts interventions in
    # both); sources not in ``mix`` are skipped
    route: dict[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "demo": ("demo",),
            "online": ("online",),
            "intervention": ("intervention", "online"),
            "eval": (),
        }
    )

    def __post_init__(self) -> None:
        if self.capacity < 2:
            raise ValueError(f"replay capacity={self.capacity}; needs >= 2 rows")
        if self.n_step < 1:
            raise ValueError(f"replay n_step={self.n_step}; needs >= 1")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"replay gamma={self.gamma}; needs 0 <= gamma <= 1")
        bad = sorted(set(self.mix) - set(BUFFER_SOURCES))
        if (
            bad
            or not self.mix
            or any(v < 0 for v in self.mix.values())
            or sum(self.mix.values()) <= 0
        ):
            raise ValueError(
                f"replay mix={self.mix}: sources must be among {BUFFER_SOURCES} with "
                f"non-negative shares summing to > 0"
            )
        for src, dests in self.route.items():
            if set(dests) - set(BUFFER_SOURCES):
                raise ValueError(
                    f"replay route[{src!r}]={dests}: buffer sources are {BUFFER_SOURCES}"
                )


class _Ring:
    """Observation rows of one source with their outgoing transitions."""

    def __init__(self, layout: StepLayout, capacity: int) -> None:
        c = capacity
        self.capacity, self.cursor, self.size, self.serial_counter = c, 0, 0, 0
        self.obs = {
            k: np.zeros((c,) + shape, dtype)
            for k, (dtype, shape) in layout.observation_fields().items()
        }
        self.action = np.zeros((c, layout.action_dim), np.float32)
        self.reward = np.zeros(c, np.float32)
        self.terminated = np.zeros(c, bool)
        self.done = np.zeros(c, bool)  # the episode ended after this row's transition
        self.intervention = np.zeros(c, bool)
        self.group = np.full(c, -1, np.int32)  # robot of the row (ReplayBuffer.groups); -1: none
        self.has_tr = np.zeros(c, bool)  # this row's transition is written
        self.serial = np.full(c, -1, np.int64)
        self.next = np.full(c, -1, np.int64)
        self.next_serial = np.full(c, -1, np.int64)
        self._valid: np.ndarray | None = None  # cache of valid_rows(), dropped on every write
        self._by_group: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # same, grouped

    def write_obs(self, obs: dict[str, np.ndarray], group: int = -1) -> np.ndarray:
        """Store a batch of observations ``{field: [n, ...]}``; returns their rows."""
        n = len(obs["state"])
        rows = (self.cursor + np.arange(n)) % self.capacity
        for k, buf in self.obs.items():
            buf[rows] = obs[k]
        self.group[rows] = group
        self._valid = self._by_group = None
        self.has_tr[rows] = False
        self.next[rows] = -1
        self.serial[rows] = self.serial_counter + np.arange(n)
        self.serial_counter += n
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        return rows

    def write_transition(
        self,
        rows: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        done: np.ndarray,
        next_rows: np.ndarray,
        intervention: np.ndarray,
    ) -> None:
        """Fill the transitions leaving ``rows``; ``next_rows`` -1 = next observation unknown."""
        self.action[rows], self.reward[rows] = action, reward
        self.terminated[rows], self.done[rows], self.intervention[rows] = (
            terminated,
            done,
            intervention,
        )
        self.next[rows] = next_rows
        self.next_serial[rows] = np.where(next_rows >= 0, self.serial[np.maximum(next_rows, 0)], -1)
        self.has_tr[rows] = True
        self._valid = self._by_group = None

    def linked(self, rows: np.ndarray) -> np.ndarray:
        """Whether each row's next observation is still the one its transition led to."""
        nxt = self.next[rows]
        return (nxt >= 0) & (self.serial[np.maximum(nxt, 0)] == self.next_serial[rows])

    def startable(self, rows: np.ndarray) -> np.ndarray:
        """Rows whose transition can start a sample (terminal steps need no next obs)."""
        return self.has_tr[rows] & (self.linked(rows) | self.terminated[rows])

    def valid_rows(self) -> np.ndarray:
        if self._valid is None:
            rows = np.arange(self.size)
            self._valid = rows[self.startable(rows)]
        return self._valid

    def grouped_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Valid rows sorted by group, with each group's start offset and row count."""
        if self._by_group is None:
            valid = self.valid_rows()
            order = np.argsort(self.group[valid], kind="stable")
            rows = valid[order]
            _, starts, counts = np.unique(self.group[rows], return_index=True, return_counts=True)
            self._by_group = (rows, starts, counts)
        return self._by_group

    def draw(self, k: int, rng: np.random.Generator, per_group: bool) -> np.ndarray:
        """``k`` start rows: uniform over valid rows, or (``per_group``) over groups first."""
        if not per_group:
            valid = self.valid_rows()
            return valid[rng.integers(0, len(valid), size=k)]
        rows, starts, counts = self.grouped_rows()
        g = rng.integers(0, len(counts), size=k)
        return rows[starts[g] + (rng.random(k) * counts[g]).astype(np.int64)]


class ReplayBuffer:
    """Per-source rings sampled with fixed mixing ratios; see the module docstring."""

    def __init__(self, layout: StepLayout, cfg: ReplayConfig | None = None) -> None:
        self.layout, self.cfg = layout, cfg or ReplayConfig()
        self.rings = {s: _Ring(layout, self.cfg.capacity) for s in self.cfg.mix}
        # (source, stream) -> (row, serial) of the stream's latest observation, not yet acted on
        self._open: dict[tuple[str, int], tuple[int, int]] = {}
        self.groups: dict[str, int] = {}  # robot id -> the group number its rows carry

    def group_of(self, episode: Episode) -> int:
        """The group of ``episode``'s rows: its robot's number, -1 without a ``robot_id``."""
        robot = episode.info.extra.get("robot_id")
        if robot is None:
            return -1
        return self.groups.setdefault(str(robot), len(self.groups))

    def _ring(self, source: str) -> _Ring:
        if source not in self.rings:
            raise KeyError(
                f"replay source {source!r} is not configured; mix has {sorted(self.rings)}"
            )
        return self.rings[source]

    def __len__(self) -> int:
        return sum(r.size for r in self.rings.values())

    def size(self, source: str) -> int:
        """Observation rows held by ``source``."""
        return self._ring(source).size

    # ----------------------------------------------------------------- adding
    def add_episode(self, episode: Episode, source: str) -> None:
        """Append a whole episode (demos, restore); its rows are linked in step order."""
        ring, n = self._ring(source), len(episode)
        if n == 0:
            return
        s = episode.steps
        obs = {k: s[k] for k in ring.obs}
        if episode.final is not None:
            obs = {k: np.concatenate([v, episode.final[k][None]]) for k, v in obs.items()}
        rows = ring.write_obs(obs, self.group_of(episode))
        nxt = np.append(rows[1:], -1)[:n]
        done = np.zeros(n, bool)
        done[-1] = True
        done |= s["terminated"] | s["truncated"]
        ring.write_transition(
            rows[:n], s["action"], s["reward"], s["terminated"], done, nxt, s["intervention"]
        )

    def add(
        self,
        source: str,
        obs: dict[str, Any],
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        next_obs: dict[str, Any],
        intervention: np.ndarray | None = None,
    ) -> None:
        """Append one vector-env step of ``B`` streams (env rows). ``obs`` / ``next_obs`` use the
        env's observation map (``state`` [B, D], ``images`` {cam: [B, H, W, 3]}); for rows that
        ended, ``next_obs`` must be ``info["final_observation"]``. A stream's ``obs`` is stored
        only when it starts an episode: afterwards it is the ``next_obs`` stored by the step
        before."""
        ring = self._ring(source)
        b = len(action)
        flat, flat_next = self._flat(obs), self._flat(next_obs)
        pending = [self._open.get((source, i), (-1, -1)) for i in range(b)]
        rows = np.array([r for r, _ in pending], np.int64)
        serials = np.array([s for _, s in pending], np.int64)
        fresh = np.flatnonzero((rows < 0) | (ring.serial[np.maximum(rows, 0)] != serials))
        if len(fresh):
            rows[fresh] = ring.write_obs({k: v[fresh] for k, v in flat.items()})
        term, trunc = np.asarray(terminated, bool), np.asarray(truncated, bool)
        next_rows = ring.write_obs(flat_next)
        inter = np.zeros(b, bool) if intervention is None else np.asarray(intervention, bool)
        ring.write_transition(
            rows,
            np.asarray(action, np.float32),
            np.asarray(reward, np.float32),
            term,
            term | trunc,
            next_rows,
            inter,
        )
        for i in range(b):
            if term[i] or trunc[i]:
                self._open.pop((source, i), None)
            else:
                self._open[(source, i)] = (int(next_rows[i]), int(ring.serial[next_rows[i]]))

    def _flat(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {"state": np.asarray(obs["state"], np.float32)}
        for cam in self.layout.cameras:
            out[f"images/{cam}"] = np.asarray(obs["images"][cam], np.uint8)
        return out

    def restore(self, episodes: Iterable[Episode]) -> int:
        """Refill from stored episodes (e.g. ``EpisodeStore``) after a restart
        (:func:`restore_routed`)."""
        return restore_routed(self, episodes)

    # --------------------------------------------------------------- sampling
    def shares(self, batch_size: int) -> dict[str, int]:
        """Rows per source in a batch of ``batch_size`` (largest-remainder rounding)."""
        live = {s: w for s, w in self.cfg.mix.items() if w > 0 and len(self.rings[s].valid_rows())}
        if not live:
            raise ValueError(
                f"replay buffer has no sampleable transition in any of {sorted(self.cfg.mix)}"
            )
        total = sum(live.values())
        exact = {s: batch_size * w / total for s, w in live.items()}
        counts = {s: int(np.floor(x)) for s, x in exact.items()}
        left = batch_size - sum(counts.values())
        for s in sorted(live, key=lambda s: counts[s] - exact[s])[:left]:
            counts[s] += 1
        return counts

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """A batch: ``obs`` / ``next_obs`` ({"state", "images": {cam}}), ``action``, ``reward``
        (n-step return), ``discount`` (0 after a terminal step, else gamma^m), ``n_steps`` (m),
        ``intervention`` and ``source`` (index into ``cfg.mix``), rows grouped by source.
        Raises ValueError when no source holds a sampleable transition yet (an empty buffer)."""
        if batch_size < 1:
            raise ValueError(f"replay sample batch_size={batch_size}; needs >= 1")
        parts = []
        for src, k in self.shares(batch_size).items():
            if k:
                ring = self.rings[src]
                parts.append(
                    self._targets(
                        ring,
                        ring.draw(k, rng, self.cfg.per_robot),
                        list(self.cfg.mix).index(src),
                    )
                )
        out: dict[str, Any] = {
            k: np.concatenate([p[k] for p in parts])
            for k in parts[0]
            if k not in ("obs", "next_obs")
        }
        for key in ("obs", "next_obs"):
            flat = {f: np.concatenate([p[key][f] for p in parts]) for f in parts[0][key]}
            out[key] = {
                "state": flat["state"],
                "images": {c: flat[f"images/{c}"] for c in self.layout.cameras},
            }
        return out

    def _targets(self, ring: _Ring, rows: np.ndarray, source_id: int) -> dict[str, Any]:
        """n-step return, discount and next-observation rows for start ``rows``."""
        gamma = self.cfg.gamma
        ret = np.zeros(len(rows), np.float64)
        disc = np.ones(len(rows), np.float64)
        steps = np.zeros(len(rows), np.int64)
        cur = rows.copy()
        active = np.ones(len(rows), bool)
        for k in range(self.cfg.n_step):
            if k:  # continue only through steps whose transition is written and still linked
                active &= ring.startable(cur)
            a = np.flatnonzero(active)
            ret[a] += disc[a] * ring.reward[cur[a]]
            steps[a] += 1
            term = ring.terminated[cur[a]]
            disc[a] = np.where(term, 0.0, disc[a] * gamma)
            ended = ring.done[cur[a]]
            linked = ring.linked(cur[a])
            cur[a] = np.where(
                linked, ring.next[cur[a]], cur[a]
            )  # terminal without next obs: itself
            active[a] = ~ended
        return {
            "obs": {f: buf[rows] for f, buf in ring.obs.items()},
            "next_obs": {f: buf[cur] for f, buf in ring.obs.items()},
            "action": ring.action[rows],
            "reward": ret.astype(np.float32),
            "discount": disc.astype(np.float32),
            "n_steps": steps,
            "intervention": ring.intervention[rows],
            "source": np.full(len(rows), source_id, np.int64),
        }


class RoutedReplay(Protocol):
    """What :func:`restore_routed` needs of a replay: its routing and rings, and how it adds an
    episode (a :class:`ReplayBuffer`, or a wrapper storing something else per frame)."""

    @property
    def cfg(self) -> ReplayConfig: ...

    @property
    def rings(self) -> dict[str, Any]: ...

    def add_episode(self, episode: Episode, source: str) -> None: ...


def restore_routed(replay: RoutedReplay, episodes: Iterable[Episode]) -> int:
    """Refill ``replay`` from stored episodes after a restart, each routed by its ``info.source``
    through ``cfg.route`` to the rings the replay has, and added by the replay's own
    ``add_episode`` (so a wrapper's per-frame work happens on the way in); returns the number of
    episodes read."""
    count = 0
    for ep in episodes:
        for dest in replay.cfg.route.get(ep.info.source, ()):
            if dest in replay.rings:
                replay.add_episode(ep, dest)
        count += 1
    return count
