"""Replay buffer: exact n-step returns, terminal vs truncated, mixing shares, wrap-around,
restore."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
from rlinf_data.replay import ReplayBuffer, ReplayConfig
from rlinf_data.store import EpisodeStore

LAYOUT = StepLayout(state_dim=1, action_dim=1, cameras={"cam": (2, 2)})


def episode(
    rewards: list[float],
    terminated: bool,
    final: bool = True,
    start: float = 0.0,
    source: str = "demo",
) -> Episode:
    """States count up from ``start``; the final observation (if any) continues the count."""
    n = len(rewards)
    st = start + np.arange(n, dtype=np.float32)[:, None]
    steps = {
        "state": st,
        "action": st.copy(),
        "reward": np.asarray(rewards, np.float32),
        "images/cam": np.broadcast_to(st[:, :, None, None].astype(np.uint8), (n, 2, 2, 3)).copy(),
        "terminated": np.zeros(n, bool),
        "truncated": np.zeros(n, bool),
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": np.arange(n, dtype=np.float64),
    }
    steps["terminated" if terminated else "truncated"][-1] = True
    fin = {
        "state": np.array([start + n], np.float32),
        "images/cam": np.full((2, 2, 3), start + n, np.uint8),
    }
    info = EpisodeInfo(
        task="t", layout=LAYOUT, source=source, status="complete" if terminated else "truncated"
    )
    return Episode(info, steps, fin if final else None)


def by_start(batch: dict) -> dict[float, tuple[float, float, float, int]]:
    """start state -> (reward, discount, next state, n_steps)."""
    return {
        float(s): (float(r), float(d), float(ns), int(k))
        for s, r, d, ns, k in zip(
            batch["obs"]["state"][:, 0],
            batch["reward"],
            batch["discount"],
            batch["next_obs"]["state"][:, 0],
            batch["n_steps"],
        )
    }


def test_n_step_returns_terminated_episode() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=16, mix={"demo": 1.0}, n_step=3, gamma=0.5))
    buf.add_episode(episode([1, 2, 4, 8], terminated=True), "demo")
    got = by_start(buf.sample(64, np.random.default_rng(0)))
    assert got == {
        0.0: (1 + 0.5 * 2 + 0.25 * 4, 0.125, 3.0, 3),
        1.0: (2 + 0.5 * 4 + 0.25 * 8, 0.0, 4.0, 3),  # ends terminal inside the window: discount 0
        2.0: (4 + 0.5 * 8, 0.0, 4.0, 2),
        3.0: (8.0, 0.0, 4.0, 1),
    }


def test_truncated_episode_bootstraps_from_its_final_observation() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=16, mix={"demo": 1.0}, n_step=2, gamma=0.5))
    buf.add_episode(episode([1, 2, 4], terminated=False), "demo")
    got = by_start(buf.sample(64, np.random.default_rng(0)))
    assert got == {0.0: (2.0, 0.25, 2.0, 2), 1.0: (4.0, 0.25, 3.0, 2), 2.0: (4.0, 0.5, 3.0, 1)}
    # images follow the same rows: next_obs image of start 2 is the final observation's image
    b = buf.sample(8, np.random.default_rng(1))
    assert np.array_equal(
        b["next_obs"]["images"]["cam"][:, 0, 0, 0], b["next_obs"]["state"][:, 0].astype(np.uint8)
    )


def test_truncated_without_final_observation_never_starts_a_sample() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=16, mix={"demo": 1.0}, n_step=3, gamma=0.5))
    buf.add_episode(episode([1, 2, 4], terminated=False, final=False), "demo")
    got = by_start(buf.sample(64, np.random.default_rng(0)))
    assert got == {
        0.0: (2.0, 0.25, 2.0, 2),
        1.0: (2.0, 0.5, 2.0, 1),
    }  # stop before the unknown next obs


def test_mixing_shares_are_exact_and_skip_empty_sources() -> None:
    buf = ReplayBuffer(
        LAYOUT, ReplayConfig(capacity=64, mix={"demo": 0.5, "online": 0.5, "intervention": 0.2})
    )
    buf.add_episode(episode([0] * 5, True), "demo")
    assert buf.shares(7) == {"demo": 7}
    buf.add_episode(episode([0] * 5, True, start=100), "online")
    assert buf.shares(256) == {"demo": 128, "online": 128}
    assert buf.shares(7) in ({"demo": 4, "online": 3}, {"demo": 3, "online": 4})
    buf.add_episode(episode([0] * 5, True, start=200), "intervention")
    assert buf.shares(12) == {"demo": 5, "online": 5, "intervention": 2}
    b = buf.sample(12, np.random.default_rng(0))
    src = b["source"]
    assert list(src) == [0] * 5 + [1] * 5 + [2] * 2
    assert (b["obs"]["state"][src == 1] >= 100).all() and (b["obs"]["state"][src == 0] < 100).all()


def test_online_streams_store_each_observation_once_and_link_across_envs() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=32, mix={"online": 1.0}, n_step=2, gamma=0.5))

    def obs(vals: list[float]) -> dict:
        s = np.array(vals, np.float32)[:, None]
        return {
            "state": s,
            "images": {"cam": np.broadcast_to(s[:, :, None, None].astype(np.uint8), (2, 2, 2, 3))},
        }

    # env 0 runs 10 -> 11 -> 12 (terminal); env 1 runs 20 -> 21 -> 22 -> 23 (truncated), interleaved
    buf.add(
        "online",
        obs([10, 20]),
        np.zeros((2, 1)),
        np.array([1, 10]),
        np.array([False, False]),
        np.array([False, False]),
        obs([11, 21]),
    )
    buf.add(
        "online",
        obs([11, 21]),
        np.zeros((2, 1)),
        np.array([2, 20]),
        np.array([True, False]),
        np.array([False, False]),
        obs([12, 22]),
    )
    buf.add(
        "online",
        obs([30, 22]),
        np.zeros((2, 1)),
        np.array([3, 40]),
        np.array([False, False]),
        np.array([False, True]),
        obs([31, 23]),
    )
    assert buf.size("online") == 2 + 2 + 2 + 2 + 1  # obs once per step + the restart obs of env 0
    got = by_start(buf.sample(128, np.random.default_rng(0)))
    assert got == {
        10.0: (2.0, 0.0, 12.0, 2),
        11.0: (2.0, 0.0, 12.0, 1),
        20.0: (20.0, 0.25, 22.0, 2),
        21.0: (40.0, 0.25, 23.0, 2),
        22.0: (40.0, 0.5, 23.0, 1),
        30.0: (3.0, 0.5, 31.0, 1),
    }


def test_wrap_around_breaks_links_into_overwritten_rows() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=6, mix={"demo": 1.0}, n_step=2, gamma=0.5))
    buf.add_episode(
        episode([1, 1, 1, 1], terminated=False, start=0), "demo"
    )  # rows 0..4 (4 = final)
    buf.add_episode(episode([2, 2], terminated=True, start=10, final=False), "demo")  # rows 5, 0
    got = by_start(buf.sample(128, np.random.default_rng(0)))
    # start 0 was overwritten by 11; start 1..3 survive, state 10 (row 5) links to 11 (row 0)
    assert got == {
        1.0: (1.5, 0.25, 3.0, 2),
        2.0: (1.5, 0.25, 4.0, 2),
        3.0: (1.0, 0.5, 4.0, 1),
        10.0: (3.0, 0.0, 11.0, 2),
        11.0: (2.0, 0.0, 11.0, 1),
    }


def test_restore_from_the_episode_store_routes_by_source(tmp_path) -> None:
    store = EpisodeStore(tmp_path / "s")
    store.write(episode([1, 2], True, source="demo"))
    store.write(episode([1, 2, 3], True, start=100, source="intervention"))
    store.write(episode([5], True, start=200, source="eval"))
    buf = ReplayBuffer(
        LAYOUT, ReplayConfig(capacity=32, mix={"demo": 0.5, "online": 0.5, "intervention": 0.0})
    )
    assert buf.restore(EpisodeStore(tmp_path / "s", mode="r")) == 3
    assert (buf.size("demo"), buf.size("online"), buf.size("intervention")) == (3, 4, 4)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(ValueError, match="mix"):
        ReplayConfig(mix={"demos": 1.0})
    with pytest.raises(ValueError, match="n_step"):
        ReplayConfig(n_step=0)
    with pytest.raises(KeyError, match="online"):
        ReplayBuffer(LAYOUT, ReplayConfig(mix={"demo": 1.0})).add_episode(
            episode([1], True), "online"
        )


def test_sampling_an_empty_buffer_says_so() -> None:
    buf = ReplayBuffer(LAYOUT, ReplayConfig(capacity=16, mix={"demo": 0.5, "online": 0.5}))
    with pytest.raises(
        ValueError, match="no sampleable transition in any of \\['demo', 'online'\\]"
    ):
        buf.sample(8, np.random.default_rng(0))
    buf.add_episode(
        episode([1.0], terminated=False, final=False), "demo"
    )  # a lone unbootstrappable step
    with pytest.raises(ValueError, match="no sampleable transition"):
        buf.sample(8, np.random.default_rng(0))
    buf.add_episode(episode([1.0, 2.0], terminated=True), "demo")
    with pytest.raises(ValueError, match="batch_size=0"):
        buf.sample(0, np.random.default_rng(0))
    assert len(buf.sample(4, np.random.default_rng(0))["reward"]) == 4
